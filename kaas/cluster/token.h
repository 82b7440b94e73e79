/*
 * token.h — the same-host proof that a broker process is gone.
 *
 * A broker binds an abstract-namespace Unix datagram socket named after its
 * cluster, id and incarnation for as long as it lives (bound before its
 * first heartbeat, close-on-exec, never shared with a child).  The kernel
 * drops the name when the last descriptor closes, which for a broker that
 * never forks is exactly when the process has ended: kill -9, OOM and
 * segfault included.  A connect() answered ECONNREFUSED is therefore proof,
 * from the kernel itself, that the incarnation can no longer acknowledge
 * anything — but only inside the same network namespace on the same
 * kernel (abstract names are per network namespace), so a prober first
 * compares the peer's host_id (kcl_host_id) with its own.  Nothing here
 * touches the shared volume; a token *file* on the volume would prove
 * nothing (no one removes it when its creator dies).
 */
#ifndef KAAS_CLUSTER_TOKEN_H
#define KAAS_CLUSTER_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/cluster/member.h"

/* "<hostname>/<boot id>/netns:<inode>": equal strings mean one kernel and
 * one network namespace.  0 or -errno. */
int kcl_host_id(char *dst, size_t dstlen);

/* Binds the token; *fd_out is the descriptor to keep open.  -EADDRINUSE
 * when another live process holds this very incarnation's token. */
int kcl_token_hold(const char *cluster_key, int32_t id, kcl_incarn inc, int *fd_out);

/* 1: the holder is alive (or cannot be ruled out); 0: proven gone
 * (ECONNREFUSED: no socket has the name); -errno on a bad argument. */
int kcl_token_probe(const char *cluster_key, int32_t id, kcl_incarn inc);

#endif
