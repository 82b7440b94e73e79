# util/ — the base library both programs stand on: checksums, logging,
# clocks, growable arrays, hex, assertions, metrics (Prometheus text).  It
# includes nothing of the project.
MODULES += util
util_SRCS := util/crc32c.c util/log.c util/metrics.c
util_USES :=
util_PREFIX := ku
util_TESTS := util/test/test_util.c util/test/test_metrics.c
