# kaas/coord/ — group coordinator (classic protocol), committed offsets,
# producer-ID blocks.  glue.c wires it to the broker core (kaas/core).
MODULES += coord
coord_SRCS := kaas/coord/coord.c kaas/coord/group.c kaas/coord/group_api.c kaas/coord/group_admin.c \
	kaas/coord/offsets.c kaas/coord/groupfile.c kaas/coord/gname.c kaas/coord/pid.c \
	kaas/coord/glue.c kaas/coord/census.c kaas/coord/shards.c
coord_USES := core storage proto sub util
coord_PREFIX := kg
coord_TESTS := kaas/coord/test/test_gname.c kaas/coord/test/test_group.c \
	kaas/coord/test/test_offsets.c kaas/coord/test/test_pid.c \
	kaas/coord/test/test_codec.c kaas/coord/test/test_restore.c \
	kaas/coord/test/test_shards.c

# Real clients against a real broker (docs/groups.md).
E2E_TESTS += ci/coord/test_groups_wire.sh ci/coord/test_groups_kcat.sh \
	ci/coord/test_groups_python.sh ci/coord/test_groups_kafkajs.sh
E2E_TESTS += ci/coord/test_groups_sarama.sh
E2E_TESTS += ci/coord/test_txn_refused.sh ci/coord/test_groups_static.sh \
	ci/coord/test_groups_deleted_topic.sh
