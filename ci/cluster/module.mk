# ci/cluster/ — end-to-end tests of brokers sharing one directory
# (docs/cluster.md): three brokers started by ci/lib/cluster.sh, real
# clients, and the history checker of ci/chaos/ where records are judged.
E2E_TESTS += ci/cluster/test_shared_dir.sh ci/cluster/test_failover.sh \
	ci/cluster/test_zombie.sh ci/cluster/test_rolling.sh ci/cluster/test_badfiles.sh \
	ci/cluster/test_listeners.sh ci/cluster/test_delete.sh ci/cluster/test_nfs_cut.sh \
	ci/cluster/test_full_data.sh \
	ci/cluster/test_coord_move.sh ci/cluster/test_compact_takeover.sh \
	ci/cluster/test_supervise.sh ci/cluster/test_make_run_cluster.sh
