/*
 * obs.h — the network server's metrics (obs.c) and its HTTP side door
 * (http.h): what the server and the data-path handlers update, each update
 * one atomic operation on a series whose pointer is kept (per API and
 * version, per error code, per topic), and the collectors that read the
 * partition table, the coordinator and the server's own counts at scrape time.
 */
#ifndef KAAS_NET_OBS_H
#define KAAS_NET_OBS_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/core/broker.h"

typedef struct kn_obs kn_obs;
struct kn_server;

/* Registers the families (without metrics: does nothing, every update is a
 * no-op) and starts the HTTP listener when metrics.listen is set.  0 or
 * -errno with err filled in. */
int kn_obs_create(struct kn_server *s, kn_obs **out, char *err, size_t errlen);
void kn_obs_ready(kn_obs *o);    /* the server runs: /readyz answers 200 */
void kn_obs_destroy(kn_obs *o);  /* stops the listener; NULL-safe */
int kn_obs_http_port(const kn_obs *o); /* -1 when off */

/* One request answered (or finished without an answer) after `ns`
 * nanoseconds since its frame arrived. */
void kn_obs_request(kn_obs *o, int16_t api_key, int16_t version, int64_t ns);

/* A Produce or Fetch partition answered with `err` having moved `bytes`
 * record bytes of `topic` (in for Produce, out for Fetch).  NULL-safe on
 * the broker's server. */
void kn_obs_partition(kb_req *req, int16_t api_key, kw_str topic, int16_t err, int64_t bytes);

#endif
