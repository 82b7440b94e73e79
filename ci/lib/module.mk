# ci/lib/ — what the end-to-end scripts share: e2e.sh (the harness: fail,
# the cleanup stack, the scratch directory), broker.sh (a real broker),
# kproto.py (raw Kafka frames).  The harness's own test:
E2E_TESTS += ci/lib/test_harness.sh
