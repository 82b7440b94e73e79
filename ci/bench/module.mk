# ci/bench/ — `make bench`: speed measured as ratios against limits measured
# in the same run (docs/performance.md).  run.sh is the script the top-level
# `bench` target runs; it writes results/bench/.
#
# The two programs are built only for benchmarks (`make bench-progs`), not by
# `make`: kaas-bench-rdk links librdkafka, a test-only package.
BENCHES += ci/bench/run.sh ci/bench/partitions.sh ci/bench/cluster.sh
# The machinery itself, in its quick form (no timing asserted).
E2E_TESTS += ci/bench/test_bench.sh

BENCH_PROGS_DIR := $(BUILD)/rel/ci/bench
BENCH_SRCS := ci/bench/main.c ci/bench/util.c ci/bench/device.c ci/bench/append.c \
	ci/bench/compare.c ci/bench/read.c ci/bench/net.c
BENCH_RDK_SRCS := ci/bench/rdk.c ci/bench/util.c

$(BENCH_PROGS_DIR)/kaas-bench: $(BENCH_SRCS:%.c=$(BUILD)/rel/%.o) \
		$(BUILD)/rel/libstorage.a $(BUILD)/rel/libproto.a $(BUILD)/rel/libsub.a $(BUILD)/rel/libutil.a
	@echo "  LD      $@"
	@$(CC) $(CFLAGS_REL) -o $@ $^ $(LDLIBS_ALL)

# librdkafka is a test package.  make bench installs it before building the
# programs (top-level Makefile); make e2e never installs, so without it the
# build stops here and says what is missing.
$(BUILD)/rel/ci/bench/rdk.o: | need-rdkafka
.PHONY: need-rdkafka
need-rdkafka:
	@echo '#include <librdkafka/rdkafka.h>' | $(CC) -E -x c - >/dev/null 2>&1 || \
		{ echo "librdkafka-dev is missing (make deps-test installs it)" >&2; exit 1; }
$(BENCH_PROGS_DIR)/kaas-bench-rdk: $(BENCH_RDK_SRCS:%.c=$(BUILD)/rel/%.o)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS_REL) -o $@ $^ -lrdkafka $(LDLIBS_ALL)

.PHONY: bench-progs
bench-progs: $(BENCH_PROGS_DIR)/kaas-bench $(BENCH_PROGS_DIR)/kaas-bench-rdk
# make e2e builds them only when it runs test_bench.sh.
e2e: $(if $(E2E),$(if $(findstring $(E2E),ci/bench/test_bench.sh),bench-progs),bench-progs)
bench e2e: export KAAS_BENCH_PROGS := $(BENCH_PROGS_DIR)

-include $(sort $(BENCH_SRCS:%.c=$(BUILD)/rel/%.d) $(BENCH_RDK_SRCS:%.c=$(BUILD)/rel/%.d))
