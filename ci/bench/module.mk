# ci/bench/ — `make bench`: speed measured as ratios against limits measured
# in the same run (docs/performance.md).  run.sh is the script the top-level
# `bench` target runs; it writes results/bench/.
#
# The two programs are built only for benchmarks (`make bench-progs`), not by
# `make`: kaas-bench-rdk links librdkafka, a test-only package.
BENCHES += ci/bench/run.sh ci/bench/partitions.sh
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

# librdkafka comes from deps-test: install before compiling against it.
$(BUILD)/rel/ci/bench/rdk.o: | deps-test
$(BENCH_PROGS_DIR)/kaas-bench-rdk: $(BENCH_RDK_SRCS:%.c=$(BUILD)/rel/%.o)
	@echo "  LD      $@"
	@$(CC) $(CFLAGS_REL) -o $@ $^ -lrdkafka $(LDLIBS_ALL)

.PHONY: bench-progs
bench-progs: $(BENCH_PROGS_DIR)/kaas-bench $(BENCH_PROGS_DIR)/kaas-bench-rdk
bench e2e: bench-progs
bench e2e: export KAAS_BENCH_PROGS := $(BENCH_PROGS_DIR)

-include $(sort $(BENCH_SRCS:%.c=$(BUILD)/rel/%.d) $(BENCH_RDK_SRCS:%.c=$(BUILD)/rel/%.d))
