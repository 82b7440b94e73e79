# ci/chaos/ — fault campaigns against a running 3-broker cluster, judged by
# a history checker that shares no code with the broker
# (docs/reliability.md).  make test runs the checker's own tests and a short
# seeded campaign; make chaos a long one on the NFS topology, whose results
# (plot, tables, verdict) go to results/chaos/.
E2E_TESTS += ci/chaos/test_checker.sh ci/chaos/test_campaign.sh

CHAOS_FAULTS ?= 200
CHAOS_SEED ?= 1
CHAOS_TOPOLOGY ?= nfs
CHAOS_ISOLATED ?= 5
.PHONY: chaos
chaos: deps-test
	$(MAKE) all
	rm -rf results/chaos/.run.tmp
	CHAOS_SEED=$(CHAOS_SEED) CHAOS_FAULTS=$(CHAOS_FAULTS) CHAOS_TOPOLOGY=$(CHAOS_TOPOLOGY) CHAOS_ISOLATED=$(CHAOS_ISOLATED) \
		bash ci/chaos/campaign.sh results/chaos/.run.tmp; rc=$$?; \
	d=results/chaos/$(CHAOS_TOPOLOGY)-seed$(CHAOS_SEED); rm -rf $$d && mv results/chaos/.run.tmp $$d; \
	python3 ci/chaos/table.py results/chaos > results/chaos/README.md; exit $$rc
