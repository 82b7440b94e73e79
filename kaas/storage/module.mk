# kaas/storage/ — the partition log on the shared volume (docs/storage.md).
MODULES += storage
storage_SRCS := kaas/storage/batch.c kaas/storage/codec.c kaas/storage/producer.c \
	kaas/storage/segment.c kaas/storage/manifest.c kaas/storage/listing.c \
	kaas/storage/segload.c kaas/storage/partition.c kaas/storage/recover.c \
	kaas/storage/append.c kaas/storage/commit.c kaas/storage/read.c kaas/storage/housekeep.c \
	kaas/storage/epochs.c kaas/storage/damage.c kaas/storage/census.c kaas/storage/cleaner.c \
	kaas/storage/recompress.c
storage_USES := proto sub util
storage_PREFIX := ks
storage_TESTS := kaas/storage/test/test_storage.c kaas/storage/test/test_recovery.c \
	kaas/storage/test/test_codec.c \
	kaas/storage/test/test_producer.c kaas/storage/test/test_retention.c \
	kaas/storage/test/test_crash.c kaas/storage/test/test_pipeline.c \
	kaas/storage/test/test_epochs.c kaas/storage/test/test_damage.c \
	kaas/storage/test/test_cleaner.c kaas/storage/test/test_clean_crash.c \
	kaas/storage/test/test_recompress.c kaas/storage/test/test_clean_fence.c \
	kaas/storage/test/test_takeover.c
# End to end with real clients: compaction (docs/storage.md, "Compaction").
E2E_TESTS += ci/storage/test_compact.sh ci/storage/test_recompress.sh
