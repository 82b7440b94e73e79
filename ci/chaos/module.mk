# ci/chaos/ — fault campaigns judged by a history checker that shares no
# code with the broker (docs/reliability.md).  make test runs the checker's
# own tests and a short seeded campaign; make chaos a long one.
E2E_TESTS += ci/chaos/test_checker.sh ci/chaos/test_campaign.sh

CHAOS_FAULTS ?= 200
CHAOS_SEED ?= 1
.PHONY: chaos
chaos: deps-test
	$(MAKE) all
	CHAOS_SEED=$(CHAOS_SEED) CHAOS_FAULTS=$(CHAOS_FAULTS) bash ci/chaos/campaign.sh results/chaos
