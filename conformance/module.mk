# conformance/ — kaas-conform: the checks, the actors, the reports.  The
# stamp it writes lives in qualify/, which the broker links too.
MODULES += conform
conform_SRCS := conformance/kc.c conformance/payload.c conformance/chan.c \
	conformance/actor.c conformance/steps_basic.c conformance/steps_loop.c \
	conformance/steps_fsync.c conformance/driver.c conformance/result.c \
	conformance/judge.c conformance/layers.c conformance/preflight.c conformance/opts.c \
	conformance/check_util.c conformance/check_preflight.c conformance/check_rename.c \
	conformance/check_excl.c conformance/check_cto.c conformance/check_unlink.c \
	conformance/check_fsync.c conformance/check_rcopy.c conformance/check_perf.c \
	conformance/steps_perf.c conformance/report.c conformance/scratch.c \
	conformance/check_enospc.c \
	conformance/run.c conformance/marker.c conformance/agent.c conformance/agent_client.c conformance/agent_net.c
conform_USES := qualify sub util
conform_PREFIX := kc
conform_TESTS := conformance/test/test_conform.c conformance/test/test_chan.c \
	conformance/test/test_layers.c \
	conformance/test/test_agent.c conformance/test/test_scratch.c

BINS += kaas-conform
kaas-conform_MAIN := conformance/main.c
kaas-conform_USES := conform qualify sub util

E2E_TESTS += conformance/test/e2e_local.sh conformance/test/e2e_faults.sh \
	conformance/test/e2e_environment.sh conformance/test/e2e_stamp.sh \
	conformance/test/e2e_bad_input.sh conformance/test/e2e_crash.sh \
	conformance/test/e2e_cleanup.sh conformance/test/e2e_layers.sh \
	conformance/test/e2e_converge.sh conformance/test/e2e_perf.sh \
	conformance/test/e2e_scratch.sh conformance/test/e2e_cluster_dir.sh \
	conformance/test/e2e_small_volume.sh conformance/test/e2e_enospc.sh
# NFS through libnfs against nfs-ganesha, remote agents in network namespaces,
# and the O_EXCL race over a lossy link (needs netem or nftables).
E2E_TESTS += conformance/test/e2e_nfs.sh conformance/test/e2e_agents.sh conformance/test/e2e_excl_lossy.sh
