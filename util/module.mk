# util/ — the base library both programs stand on: checksums, logging,
# clocks, growable arrays, hex.  It includes nothing of the project.
MODULES += util
util_SRCS := util/crc32c.c util/log.c
util_USES :=
util_PREFIX := ku
util_TESTS := util/test/test_util.c
