# ci/broker/ — end-to-end tests of the broker's limits and of leader epochs
# as clients see them (the other broker scripts are listed in kaas/module.mk).
E2E_TESTS += ci/broker/test_limits.sh ci/broker/test_leader_epoch.sh
