# substrates/lyingfs/ — kaas-lyingfs, a FUSE passthrough that can lie about
# fsync (a test substrate for the conformance matrix and
# substrates/test/e2e_crash_hooks.sh).  It needs libfuse3, which the test and
# matrix package sets install (ci/deps.sh), so it is built only when fuse3 is
# present; `make test` and `make matrix` install it first, then build.
ifneq ($(shell pkg-config --exists fuse3 2>/dev/null && echo yes),)
BINS += kaas-lyingfs
kaas-lyingfs_MAIN := substrates/lyingfs/lyingfs.c
kaas-lyingfs_USES :=
%/kaas-lyingfs: LDLIBS_ALL += $(shell pkg-config --libs fuse3)
endif
