# kaas/topics/ — the topic registry (CLUSTER/topics/, topic IDs, configs) and
# the admin APIs (docs/topics.md).
#
# `topics`: the registry and the admin codecs (kaas_admin_*); needs no server.
# `admin`: the kaas_h_* handlers for the dispatch table and the hooks that let
# the registry drive the partition table; links the broker module.
MODULES += topics
topics_SRCS := kaas/topics/names.c kaas/topics/tconfig.c kaas/topics/registry.c \
	kaas/topics/reg_dirs.c kaas/topics/reg_ops.c kaas/topics/reg_upkeep.c \
	kaas/topics/admin_topics.c kaas/topics/admin_configs.c kaas/topics/admin_records.c
topics_USES := proto sub util
topics_TESTS := kaas/topics/test/test_names.c kaas/topics/test/test_registry.c \
	kaas/topics/test/test_admin.c kaas/topics/test/test_crash.c

MODULES += admin
admin_SRCS := kaas/topics/handlers.c
admin_USES := topics broker storage proto sub util
admin_TESTS :=

E2E_TESTS += ci/topics/test_admin.sh
