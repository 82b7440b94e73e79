# kaas/cluster/ — brokers that share one volume and coordinate only through
# files: membership and leases, controller election, the assignment and the
# balancer (docs/cluster.md), and the runtime that runs them in a broker
# (heartbeat, controller loop, ownership driver, drain).  On top of the
# broker core and the topic registry.
MODULES += cluster
cluster_SRCS := kaas/cluster/json.c kaas/cluster/member.c kaas/cluster/lease.c \
	kaas/cluster/controller.c kaas/cluster/assignment.c kaas/cluster/balancer.c \
	kaas/cluster/token.c kaas/cluster/runtime.c kaas/cluster/loop.c kaas/cluster/driver.c \
	kaas/cluster/tdelete.c \
	kaas/cluster/tkguard.c kaas/cluster/supervise.c
cluster_USES := topics core storage proto sub util
cluster_PREFIX := kcl
cluster_TESTS := kaas/cluster/test/test_member.c kaas/cluster/test/test_lease.c \
	kaas/cluster/test/test_controller.c kaas/cluster/test/test_assignment.c \
	kaas/cluster/test/test_balancer.c kaas/cluster/test/test_token.c \
	kaas/cluster/test/test_tdelete.c kaas/cluster/test/test_tkguard.c \
	kaas/cluster/test/test_supervise.c
