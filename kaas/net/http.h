/*
 * http.h — the broker's HTTP side door (metrics.listen): GET /metrics in
 * Prometheus' text format 0.0.4, /healthz (the process is alive) and
 * /readyz (the broker serves: gate passed, partitions taken over, Kafka
 * listener accepting), for Prometheus and Kubernetes probes.
 *
 * It runs on a thread of its own with its own poll loop, never on the Kafka
 * event loop, so a slow or hostile HTTP client costs at most its slot:
 * requests are one per connection (Connection: close), the request head is
 * bounded (KN_HTTP_MAX_HEAD), every exchange has a deadline
 * (KN_HTTP_DEADLINE_MS), and at KN_HTTP_MAX_CONNS open exchanges new
 * connections are refused with 503.  A scrape renders the registry (O(series))
 * on this thread.
 */
#ifndef KAAS_NET_HTTP_H
#define KAAS_NET_HTTP_H

#include <stddef.h>

#define KN_HTTP_MAX_HEAD 8192
#define KN_HTTP_MAX_CONNS 16
#define KN_HTTP_DEADLINE_MS 5000

struct ku_metrics;

typedef struct kn_http kn_http;

typedef struct kn_http_req {
	char method[16];
	char path[256]; /* the target without its query string */
	int minor;      /* HTTP/1.<minor> */
} kn_http_req;

/* Parses a request head from buf[0..len).  Returns the head's length (> 0)
 * once "\r\n\r\n" arrived, 0 when more bytes are needed, -E2BIG when the
 * head exceeds KN_HTTP_MAX_HEAD, -EBADMSG for a malformed head (request
 * line or header syntax, control bytes), -EPROTONOSUPPORT for a version other
 * than HTTP/1.0 and 1.1. */
int kn_http_parse(const char *buf, size_t len, kn_http_req *out);

/* The answer to a parsed request: status code, content type and body
 * (malloc'd, *body_len bytes).  Exposed for tests. */
typedef int (*kn_http_ready_fn)(void *arg, char *why, size_t whylen); /* 1 ready, 0 not */
int kn_http_answer(const kn_http_req *rq, struct ku_metrics *m, kn_http_ready_fn ready, void *arg,
		   const char **ctype, char **body, size_t *body_len);

/* Binds host:port (port 0: any) and starts the thread.  0 or -errno with
 * err filled in. */
int kn_http_start(const char *host, int port, struct ku_metrics *m, kn_http_ready_fn ready, void *arg,
		  kn_http **out, char *err, size_t errlen);
int kn_http_port(const kn_http *h);
void kn_http_stop(kn_http *h); /* joins the thread; NULL-safe */

#endif
