# kaas — top-level build.
#
# Non-recursive: every directory that builds something has a module.mk that
# appends to the lists below, so adding a file never means editing this one.
#
#   make            build bin/kaas-conform and bin/kaas
#   make test       install missing packages, build, run every test
#   make unit       the unit tests (UNIT=path-substring, T=one test function)
#   make e2e        the end-to-end scripts (E2E=path-substring); installs nothing
#   make layout     the layer rule and the naming rule (docs/hacking.md)
#   make run        install, build, qualify ./var/data, start a broker on it
#                   (BROKERS=3: a cluster of three on it, ports 9092-9094)
#   make bench      benchmarks (results/), ratios against limits measured in the same run
#   make matrix     the real-substrate conformance matrix (results/)
#   make fuzz       run the fuzz targets for a while
#   make chaos      a long seeded fault campaign judged by the history checker
#   make deps       install the missing Debian packages (build + run)
#   make deps-test  the same, plus what the tests need

.DEFAULT_GOAL := all
SHELL := /bin/bash

BUILD ?= build
CC ?= cc
PKGS := libuv jansson liblz4 libzstd zlib snappy libnfs openssl libpcre2-8

WARN := -Wall -Wextra -Werror -Wvla
CPPFLAGS_ALL := -D_GNU_SOURCE -I. -MMD -MP \
	$(shell pkg-config --cflags $(PKGS) check 2>/dev/null)
CFLAGS_REL := -std=gnu11 -O2 -g $(WARN) -pthread -fno-strict-aliasing
CFLAGS_SAN := -std=gnu11 -O1 -g $(WARN) -pthread -fno-strict-aliasing -DKAAS_ASSERTS \
	-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
LDLIBS_ALL := $(shell pkg-config --libs $(PKGS) 2>/dev/null) -lisal -lm -pthread
CHECK_LIBS := $(shell pkg-config --libs check 2>/dev/null)

# Filled in by the module.mk files.  A module is a static library:
#   MODULES += foo
#   foo_SRCS := dir/a.c dir/b.c      (no main())
#   foo_USES := bar sub util          (modules it links against, in link order)
#   foo_TESTS := dir/test/test_a.c    (Check programs; link foo + foo_USES)
# A program:
#   BINS += kaas-foo
#   kaas-foo_MAIN := dir/main.c
#   kaas-foo_USES := foo bar sub util
# Separate libraries keep one module's half-finished file from breaking the
# build of the others, and say in the Makefile what depends on what.
MODULES :=
BINS :=
E2E_TESTS :=    # scripts run after the unit tests, in list order
BENCHES :=      # scripts run by make bench

include $(sort $(wildcard */module.mk */*/module.mk */*/*/module.mk))

BIN ?= bin
export BIN
ALL_SRCS := $(foreach m,$(MODULES),$($(m)_SRCS))
ALL_TESTS := $(foreach m,$(MODULES),$($(m)_TESTS))
UNIT_BINS := $(ALL_TESTS:%.c=$(BUILD)/san/%)
BIN_PATHS := $(BINS:%=$(BIN)/%)
libs = $(foreach u,$(1),$(BUILD)/$(2)/lib$(u).a)

.PHONY: all test test-run unit e2e run bench matrix fuzz deps deps-test clean
.SECONDARY:
all: $(BIN_PATHS)

$(BUILD)/rel/%.o: %.c
	@mkdir -p $(@D)
	@echo "  CC      $<"
	@$(CC) $(CPPFLAGS_ALL) $(CFLAGS_REL) -c -o $@ $<

$(BUILD)/san/%.o: %.c
	@mkdir -p $(@D)
	@echo "  CC-SAN  $<"
	@$(CC) $(CPPFLAGS_ALL) $(CFLAGS_SAN) -c -o $@ $<

define MODULE_RULES
$(BUILD)/rel/lib$(1).a: $$($(1)_SRCS:%.c=$(BUILD)/rel/%.o)
	@mkdir -p $$(@D)
	@rm -f $$@ && ar rcs $$@ $$^
$(BUILD)/san/lib$(1).a: $$($(1)_SRCS:%.c=$(BUILD)/san/%.o)
	@mkdir -p $$(@D)
	@rm -f $$@ && ar rcs $$@ $$^
$(foreach t,$($(1)_TESTS),$(eval $(call TEST_RULE,$(t),$(1) $($(1)_USES))))
endef

define TEST_RULE
$(BUILD)/san/$(1:%.c=%): $(BUILD)/san/$(1:%.c=%.o) $(call libs,$(2),san)
	@echo "  LD-SAN  $$@"
	@$$(CC) $$(CFLAGS_SAN) -o $$@ $$^ $$(CHECK_LIBS) $$(LDLIBS_ALL)
endef

define BIN_RULE
$(BIN)/$(1): $$($(1)_MAIN:%.c=$(BUILD)/rel/%.o) $(call libs,$($(1)_USES),rel)
	@mkdir -p $$(@D)
	@echo "  LD      $$@"
	@$$(CC) $$(CFLAGS_REL) -o $$@ $$^ $$(LDLIBS_ALL)
endef

$(foreach m,$(MODULES),$(eval $(call MODULE_RULES,$(m))))
$(foreach b,$(BINS),$(eval $(call BIN_RULE,$(b))))

# The unit-test programs, built but not run.
.PHONY: unit-bins
unit-bins: $(UNIT_BINS)

# Each unit test runs on its own, UNIT_JOBS at once (ci/lib/run_tests.sh); all run even when one fails.
# UNIT=substring restricts the run to matching test paths.
# The filter matches the test source path, never the build directory.
# T=name runs only the test function of that name (every test is a Check
# test case of its own, util/test/ktest.h): make unit UNIT=storage T=truncated_tail.
# A program without it answers 77 and is skipped; no program having it fails.
UNIT_JOBS ?= 2
UNIT_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 CK_FORK=yes
unit: $(patsubst %.c,$(BUILD)/san/%,$(if $(UNIT),$(foreach t,$(ALL_TESTS),$(if $(findstring $(UNIT),$(t)),$(t))),$(ALL_TESTS)))
ifeq ($(T),)
	@env $(UNIT_ENV) bash ci/lib/run_tests.sh -j $(UNIT_JOBS) $^
else
	@fail=0; found=0; for t in $^; do \
		out=$$($(UNIT_ENV) CK_RUN_CASE='$(T)' $$t 2>&1); rc=$$?; \
		[ $$rc = 77 ] && continue; \
		found=1; echo "== $$t ($(T))"; printf '%s\n' "$$out"; \
		[ $$rc = 0 ] || { echo "FAILED: $$t ($(T))"; fail=1; }; \
	done; \
	[ $$found = 1 ] || { echo "no test named '$(T)' in: $^"; exit 1; }; exit $$fail
endif

# E2E=substring restricts the run to matching scripts; E2E_JOBS of them run
# at once (ci/lib/run_tests.sh says why that is safe).
E2E_JOBS ?= 3
e2e: all
	@bash ci/lib/run_tests.sh -j $(E2E_JOBS) \
		$(if $(E2E),$(foreach t,$(E2E_TESTS),$(if $(findstring $(E2E),$(t)),$(t))),$(E2E_TESTS))

test: deps-test
	$(MAKE) test-run

# The layer rule (no include points up) and the naming rule (every global
# symbol carries its module's prefix), checked on the sources and libraries.
.PHONY: layout
layout: $(call libs,$(MODULES),san)
	@python3 ci/layout/check_layers.py
	@python3 ci/layout/check_symbols.py $(BUILD)/san

test-run: all
	@fail=0; $(MAKE) layout || fail=1; $(MAKE) unit || fail=1; $(MAKE) e2e || fail=1; \
	if [ $$fail = 0 ]; then echo "make test: all passed"; else echo "make test: FAILURES"; fi; exit $$fail

deps:
	@bash ci/deps.sh build

deps-test:
	@bash ci/deps.sh test

# BROKERS=N starts a cluster of N brokers on the one local directory.
run: deps
	$(MAKE) all
	@KAAS_RUN_BROKERS=$(BROKERS) bash ci/run-default.sh

# Installs the test and bench packages first, then builds (the bench
# programs link librdkafka, a test package).
bench:
	@bash ci/deps.sh bench
	$(MAKE) all bench-progs
	@fail=0; for b in $(BENCHES); do echo "== $$b"; bash $$b || fail=1; done; exit $$fail

# The real-substrate matrix (ci/matrix): install what the substrates need,
# build again (kaas-lyingfs appears once libfuse3 is there), run, write results/.
matrix:
	@bash ci/deps.sh matrix
	$(MAKE) matrix-run

.PHONY: matrix-run
matrix-run: all
	@bash ci/matrix

clean:
	rm -rf $(BUILD) $(BIN)

-include $(ALL_SRCS:%.c=$(BUILD)/rel/%.d) $(ALL_SRCS:%.c=$(BUILD)/san/%.d) \
	$(ALL_TESTS:%.c=$(BUILD)/san/%.d) $(foreach b,$(BINS),$($(b)_MAIN:%.c=$(BUILD)/rel/%.d))
