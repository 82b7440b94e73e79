# kaas/fuzz/ — fuzz targets over the whole broker: the request decoders and
# handlers behind the dispatch table, record-batch validation, the SASL exchange (docs/compat.md,
# "Fuzzing").
#
# `make unit` (and so `make test`) builds each target as a Check-free unit
# test under ASan/UBSan whose main replays the committed seed corpus
# (corpus/<target>/).  `make fuzz` builds the same targets with clang and
# libFuzzer under $(BUILD)/fuzz and runs each for FUZZ_SECONDS, starting from
# the seed corpus; new inputs go to $(BUILD)/fuzz/corpus/<target>/ and
# crashes to $(BUILD)/fuzz/crash-<target>-*.  Regenerate the seeds with
# kaas/fuzz/mkcorpus.py.
MODULES += fuzz
fuzz_SRCS := kaas/fuzz/harness.c kaas/fuzz/replay.c
fuzz_USES := net coord topics core storage proto sub util
fuzz_PREFIX := fz
fuzz_TESTS := kaas/fuzz/fuzz_request.c kaas/fuzz/fuzz_batch.c kaas/fuzz/fuzz_sasl.c

FUZZ_TARGETS := request batch sasl
FUZZ_SECONDS ?= 120
FUZZ_BUILD := $(BUILD)/fuzz

fuzz:
	$(MAKE) --no-print-directory BUILD=$(FUZZ_BUILD) CC=clang \
		CFLAGS_SAN="$(CFLAGS_SAN) -fsanitize=fuzzer -DKAAS_LIBFUZZER -Wno-error" \
		$(FUZZ_TARGETS:%=$(FUZZ_BUILD)/san/kaas/fuzz/fuzz_%)
	@for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
		echo "== fuzz_$$t for $(FUZZ_SECONDS) s"; \
		ASAN_OPTIONS=abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		nice $(FUZZ_BUILD)/san/kaas/fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) \
			-timeout=60 -rss_limit_mb=4096 -print_final_stats=1 \
			-artifact_prefix=$(FUZZ_BUILD)/crash-$$t- \
			$(FUZZ_BUILD)/corpus/$$t kaas/fuzz/corpus/$$t || exit 1; \
	done
