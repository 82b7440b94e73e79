# ci/broker/ — end-to-end tests of the broker's limits, of leader epochs as
# clients see them, of the metrics listener and of the describe APIs (the
# other broker scripts are listed in kaas/module.mk).
E2E_TESTS += ci/broker/test_limits.sh ci/broker/test_leader_epoch.sh
E2E_TESTS += ci/broker/test_metrics.sh
E2E_TESTS += ci/broker/test_describe.sh
