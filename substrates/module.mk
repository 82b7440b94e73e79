# substrates/ — the filesystem interface, its backends and helpers.
MODULES += sub
sub_SRCS := substrates/sub_util.c substrates/sub_posix.c substrates/sub_fault.c substrates/sub_fault_file.c \
	substrates/sub_fault_inject.c substrates/sub_fault_crash.c substrates/sub_fault_quirks.c \
	substrates/sub_fault_opts.c \
	substrates/sub_nfs.c substrates/sub_nfs_rpc.c substrates/sub_nfs_url.c \
	substrates/sub_nfs_state.c
sub_USES := util
sub_PREFIX := sub
sub_TESTS := substrates/test/test_sub_posix.c substrates/test/test_sub_nfs.c substrates/test/test_sub_fault.c
# The crash hooks of the real-substrate matrix (ci/matrix) against their
# lying and honest substrates.
E2E_TESTS += substrates/test/e2e_crash_hooks.sh
# The matrix itself: its judge, its exit status and results, its teardown
# when interrupted.
E2E_TESTS += substrates/test/e2e_matrix.sh
