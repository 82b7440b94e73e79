# kaas/util/ — small shared pieces: checksums, logging, clocks.
MODULES += util
util_SRCS := kaas/util/crc32c.c kaas/util/log.c kaas/util/kerr.c
util_USES :=
util_TESTS := kaas/util/test/test_util.c
