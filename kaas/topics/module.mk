# kaas/topics/ — the topic registry (CLUSTER/topics/, topic IDs, configs) and
# the admin APIs (docs/topics.md).
#
# The registry, the admin codecs and handlers.c, the handlers for the
# dispatch table and the hooks that let the registry drive the partition
# table; it stands on the broker core (kaas/core), like kaas/coord.
MODULES += topics
topics_SRCS := kaas/topics/names.c kaas/topics/tconfig.c kaas/topics/registry.c \
	kaas/topics/reg_dirs.c kaas/topics/reg_ops.c kaas/topics/reg_upkeep.c \
	kaas/topics/admin_topics.c kaas/topics/admin_configs.c kaas/topics/config_docs.c kaas/topics/admin_records.c \
	kaas/topics/handlers.c kaas/topics/reg_ident.c kaas/topics/trash.c kaas/topics/trash_cli.c \
	kaas/topics/admin_incremental.c kaas/topics/dynbroker.c
topics_USES := core storage proto sub util
topics_PREFIX := kt
topics_TESTS := kaas/topics/test/test_names.c kaas/topics/test/test_registry.c \
	kaas/topics/test/test_admin.c kaas/topics/test/test_crash.c kaas/topics/test/test_identity.c \
	kaas/topics/test/test_cdelete.c

E2E_TESTS += ci/topics/test_admin.sh ci/topics/test_identity.sh ci/topics/test_configs.sh ci/topics/test_dynconfig.sh
