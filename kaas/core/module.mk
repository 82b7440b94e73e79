# kaas/core/ — the broker core: what every handler module stands on.  The
# configuration, the partition table (leadership epochs on the volume, group
# commit and durability waiters, long-poll watches) and the request services
# of broker.h (timers, work off the loop, read plans).  It knows nothing of
# sockets, topics' registry or groups: those modules sit above it.
MODULES += core
core_SRCS := kaas/core/config.c kaas/core/listeners.c kaas/core/req.c kaas/core/ptable.c kaas/core/epoch.c \
	kaas/core/durable.c kaas/core/hold.c kaas/core/upkeep.c kaas/core/scrub.c kaas/core/driven.c \
	kaas/core/leaders.c \
	kaas/core/resident.c kaas/core/census.c kaas/core/users.c kaas/core/users_cli.c kaas/core/cleaner.c \
	kaas/core/dyncfg.c kaas/core/dynkeys.c \
	kaas/core/acl.c kaas/core/acl_store.c kaas/core/acl_sslmap.c
core_USES := storage proto sub util
core_PREFIX := kb
core_TESTS := kaas/core/test/test_config.c kaas/core/test/test_ptable.c \
	kaas/core/test/test_resident.c kaas/core/test/test_users.c kaas/core/test/test_dyncfg.c \
	kaas/core/test/test_acl.c kaas/core/test/test_sslmap.c
