/*
 * server.h — the network server: one libuv event loop that accepts
 * connections, cuts frames, hands requests to the worker pool and writes
 * responses back in order; signal handling and the SIGTERM drain.
 */
#ifndef KAAS_SERVER_SERVER_H
#define KAAS_SERVER_SERVER_H

#include <stddef.h>

#include "kaas/core/broker.h"

typedef struct kn_server kn_server;

/* Creates the worker pool and binds the listening socket (so a port of 0 is
 * resolved before anything is advertised).  Installs b->ops/b->server. */
int kn_server_create(kb_broker *b, kn_server **out, char *err, size_t errlen);

/* The port the first listener bound. */
int kn_server_port(const kn_server *s);

/* The endpoint the first listener advertises (b->host and b->port: what
 * FindCoordinator answers, and Metadata where no listener is known). */
void kn_server_advertised(const kn_server *s, const char **host, int32_t *port);

/* Serves until SIGTERM or SIGINT, then drains: stops accepting, stops
 * reading, lets the received requests finish and their responses go out
 * (at most kaas.shutdown.timeout.ms), closes the connections and stops the
 * workers.  Returns 0 or -errno.  The caller then relinquishes partitions. */
int kn_server_run(kn_server *s);

void kn_server_destroy(kn_server *s); /* NULL-safe */

/* The dispatch table (dispatch.c): every API kaas knows, with the version
 * ranges of DESIGN §8; rows whose handler is NULL are neither advertised
 * nor dispatched. */
extern const kw_api kn_dispatch_table[];
extern const size_t kn_dispatch_table_len;

#endif
