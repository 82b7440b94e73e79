# kaas/proto/ — the Kafka wire codec: reader/writer, headers, dispatch table.
MODULES += proto
proto_SRCS := kaas/proto/buf.c kaas/proto/header.c
proto_USES := util
proto_TESTS := kaas/proto/test/test_buf.c kaas/proto/test/test_header.c
