# substrates/lyingfs/ — kaas-lyingfs, a FUSE passthrough that can lie about
# fsync (a test substrate for the conformance matrix).  It needs libfuse3,
# which only the matrix installs (ci/deps.sh matrix), so it is built only when
# fuse3 is present; `make matrix` installs it first and builds it.
ifneq ($(shell pkg-config --exists fuse3 2>/dev/null && echo yes),)
BINS += kaas-lyingfs
kaas-lyingfs_MAIN := substrates/lyingfs/lyingfs.c
kaas-lyingfs_USES :=
%/kaas-lyingfs: LDLIBS_ALL += $(shell pkg-config --libs fuse3)
endif
