# kaas/proto/ — the Kafka wire codec: reader/writer, headers, dispatch
# table types, and the Kafka error codes.
MODULES += proto
proto_SRCS := kaas/proto/buf.c kaas/proto/header.c kaas/proto/kerr.c
proto_USES := util
proto_PREFIX := kw
proto_TESTS := kaas/proto/test/test_buf.c kaas/proto/test/test_header.c
