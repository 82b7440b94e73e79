# kaas/server/ — the broker core and the network server.
#
# `broker`: what handlers of every module link against — the configuration,
# the partition table (leadership epochs, group commit, long-poll watches) and
# the request services of broker.h.  It knows nothing of sockets.
# `server`: the event loop, worker pool, dispatch table, the data-path
# handlers (ApiVersions, Metadata, Produce, Fetch, ListOffsets) and the
# start-up gate; it pulls in every module that has handlers.
MODULES += broker
broker_SRCS := kaas/server/config.c kaas/server/req.c kaas/server/ptable.c \
	kaas/server/resident.c
broker_USES := storage proto sub util
broker_TESTS := kaas/server/test/test_config.c kaas/server/test/test_ptable.c \
	kaas/server/test/test_resident.c

MODULES += server
server_SRCS := kaas/server/server.c kaas/server/budget.c kaas/server/pool.c kaas/server/dispatch.c \
	kaas/server/h_metadata.c kaas/server/h_produce.c kaas/server/h_fetch.c \
	kaas/server/h_list_offsets.c
server_USES := admin coord topics broker storage proto sub util
server_TESTS := kaas/server/test/test_pool.c kaas/server/test/test_dispatch.c \
	kaas/server/test/test_fetch.c kaas/server/test/test_versions.c \
	kaas/server/test/test_budget.c
