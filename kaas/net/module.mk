# kaas/net/ — the network server: the libuv loop (connections, framing,
# ordered responses, backpressure, accept limits), the request-byte budget,
# the worker pool, the dispatch table and the data-path handlers (ApiVersions,
# Metadata, Produce, Fetch, ListOffsets, OffsetForLeaderEpoch).  It sits above
# every module whose handlers it dispatches to.
MODULES += net
net_SRCS := kaas/net/server.c kaas/net/conn.c kaas/net/listen.c kaas/net/tls.c kaas/net/sasl.c kaas/net/scram.c kaas/net/h_sasl.c kaas/net/budget.c kaas/net/pool.c kaas/net/dispatch.c kaas/net/http.c kaas/net/obs.c \
	kaas/net/h_metadata.c kaas/net/h_produce.c kaas/net/h_fetch.c \
	kaas/net/h_list_offsets.c kaas/net/h_offset_for_leader_epoch.c kaas/net/h_admin.c kaas/net/h_acls.c \
	kaas/net/brokers.c
net_USES := coord topics core storage proto sub util
net_PREFIX := kn
net_TESTS := kaas/net/test/test_pool.c kaas/net/test/test_dispatch.c \
	kaas/net/test/test_fetch.c kaas/net/test/test_versions.c \
	kaas/net/test/test_budget.c kaas/net/test/test_leader_epoch.c kaas/net/test/test_http.c \
	kaas/net/test/test_sasl.c kaas/net/test/test_takeover.c
