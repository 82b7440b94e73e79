# kaas/topics/ — the topic registry (CLUSTER/topics/, topic IDs, configs) and
# the admin API codecs.  `topics` needs no server; `admin` holds the
# kaas_h_* handlers and the partition-table hooks, which need the broker.
MODULES += topics
topics_SRCS := kaas/topics/names.c kaas/topics/tconfig.c kaas/topics/registry.c
topics_USES := proto sub util
topics_TESTS := kaas/topics/test/test_names.c kaas/topics/test/test_registry.c
