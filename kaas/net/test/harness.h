/* harness.h — an in-process broker for the data-path handler tests: the
 * real topic registry, partition table (with its group-commit flushers) and
 * handlers on a scratch directory, with the network server replaced by a
 * one-thread worker pool and a completion that records the answer.
 *
 * One worker thread makes the order of deferred work observable without
 * clocks: hh_barrier() returns once every job queued before it has run (a
 * parked Fetch woken by a flush queues its re-check before the acks=all
 * answer of the Produce that moved the high watermark is delivered).
 *
 * Golden bytes are written with the gb_* helpers, which share no code with
 * kw_wr, so an encoding mistake in the writer cannot hide itself.
 */
#ifndef KAAS_NET_TEST_HARNESS_H
#define KAAS_NET_TEST_HARNESS_H

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kaas/proto/header.h"
#include "kaas/core/broker.h"
#include "kaas/net/pool.h"
#include "kaas/core/ptable.h"
#include "kaas/net/server.h"
#include "kaas/core/splice.h"
#include "kaas/topics/admin.h"
#include "kaas/topics/topics.h"
#include "substrates/sub.h"
#include "substrates/test/scratch.h"
#include "util/log.h"

#define HH_WAIT_S 60

/* ---- golden bytes, independent of kw_wr ----------------------------------- */
typedef struct gb {
	uint8_t b[1 << 16];
	size_t n;
} gb;

static inline void gb_raw(gb *g, const void *p, size_t n)
{
	ck_assert_uint_le(g->n + n, sizeof(g->b));
	memcpy(g->b + g->n, p, n);
	g->n += n;
}
static inline void gb_be(gb *g, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--) {
		uint8_t c = (uint8_t)(v >> (8 * i));
		gb_raw(g, &c, 1);
	}
}
static inline void gb8(gb *g, int8_t v) { gb_be(g, (uint8_t)v, 1); }
static inline void gb16(gb *g, int16_t v) { gb_be(g, (uint16_t)v, 2); }
static inline void gb32(gb *g, int32_t v) { gb_be(g, (uint32_t)v, 4); }
static inline void gb64(gb *g, int64_t v) { gb_be(g, (uint64_t)v, 8); }
static inline void gb_uvar(gb *g, uint64_t v)
{
	while (v >= 0x80) {
		uint8_t c = (uint8_t)(v | 0x80);
		gb_raw(g, &c, 1);
		v >>= 7;
	}
	uint8_t c = (uint8_t)v;
	gb_raw(g, &c, 1);
}
/* STRING / NULLABLE_STRING (int16 length, -1 = null) */
static inline void gb_str(gb *g, const char *s)
{
	if (!s) {
		gb16(g, -1);
		return;
	}
	gb16(g, (int16_t)strlen(s));
	gb_raw(g, s, strlen(s));
}
/* COMPACT_STRING (uvarint length + 1, 0 = null) */
static inline void gb_cstr(gb *g, const char *s)
{
	if (!s) {
		gb_uvar(g, 0);
		return;
	}
	gb_uvar(g, strlen(s) + 1);
	gb_raw(g, s, strlen(s));
}
static inline void gb_arr(gb *g, int32_t n) { gb32(g, n); }
static inline void gb_carr(gb *g, int32_t n) { gb_uvar(g, (uint64_t)(n + 1)); }
static inline void gb_bytes(gb *g, const void *p, int32_t n)
{
	gb32(g, n);
	if (n > 0)
		gb_raw(g, p, (size_t)n);
}

/* Compares an answer with golden bytes, naming the first differing byte. */
#define hh_expect(what, got, gotlen, g)                                                                  \
	do {                                                                                               \
		const uint8_t *got_ = (got);                                                               \
		size_t gl_ = (gotlen);                                                                     \
		size_t m_ = gl_ < (g)->n ? gl_ : (g)->n;                                                   \
		for (size_t i_ = 0; i_ < m_; i_++)                                                         \
			ck_assert_msg(got_[i_] == (g)->b[i_], "%s: byte %zu is 0x%02x, want 0x%02x", what, \
				      i_, got_[i_], (g)->b[i_]);                                           \
		ck_assert_msg(gl_ == (g)->n, "%s: %zu bytes, want %zu", what, gl_, (g)->n);                \
	} while (0)

/* ---- the broker ------------------------------------------------------------------ */
typedef struct hreq {
	kb_req pub; /* first: handlers get &pub */
	uint8_t *frame;
	int rc;
	int done;     /* answered (handled, completed, or no response) */
	uint8_t *body; /* the answer with spliced file ranges read in */
	size_t len;
} hreq;

static struct {
	scratch vol; /* the data volume; __cluster inside it */
	kb_broker b;
	kn_pool *pool;
	kb_server_ops ops;
	pthread_mutex_t mu;
	pthread_cond_t cv;
} H = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* The answer as the server would send it: body with the file ranges in. */
static inline void hh_flatten(hreq *r, kw_wr *w)
{
	const struct kb_splices *s = r->pub.splices;
	size_t total = w->len + (s ? (size_t)s->total : 0);
	r->body = malloc(total ? total : 1);
	ck_assert_ptr_nonnull(r->body);
	size_t prev = 0, o = 0;
	for (int i = 0; s && i < s->n; i++) {
		memcpy(r->body + o, w->buf + prev, s->v[i].at - prev);
		o += s->v[i].at - prev;
		prev = s->v[i].at;
		ck_assert_int_eq(pread(s->v[i].fd, r->body + o, s->v[i].len, (off_t)s->v[i].pos),
				 (ssize_t)s->v[i].len);
		o += s->v[i].len;
	}
	memcpy(r->body + o, w->buf + prev, w->len - prev);
	o += w->len - prev;
	r->len = o;
	kb_splices_free(r->pub.splices);
	r->pub.splices = NULL;
}

static inline void hh_op_complete(void *server, kb_req *req, kw_wr *resp)
{
	(void)server;
	hreq *r = (hreq *)req;
	ck_assert(!resp->oom);
	pthread_mutex_lock(&H.mu);
	ck_assert_msg(!r->done, "request completed twice");
	hh_flatten(r, resp);
	kw_wr_free(resp);
	r->done = 1;
	pthread_cond_broadcast(&H.cv);
	pthread_mutex_unlock(&H.mu);
}

static inline int hh_op_run(void *server, kb_work_fn fn, void *arg)
{
	(void)server;
	return kn_pool_run(H.pool, fn, arg);
}

static inline kb_timer *hh_op_timer_start(void *server, int64_t delay_ms, kb_work_fn fn, void *arg)
{
	(void)server;
	return kn_pool_timer(H.pool, delay_ms, fn, arg);
}

static inline int hh_op_timer_cancel(void *server, kb_timer *t)
{
	(void)server;
	return kn_pool_timer_cancel(H.pool, t);
}

static inline void hh_setup(void)
{
	if (!getenv("KAAS_LOG_LEVEL"))
		setenv("KAAS_LOG_LEVEL", "error", 0);
	ku_log_init_from_env();
	scratch_open(&H.vol, "handlers");
	kb_broker *b = &H.b;
	memset(b, 0, sizeof(*b));
	kb_config_defaults(&b->cfg);
	b->cfg.broker_id = 3;
	b->id = 3;
	b->host = "broker-a";
	b->port = 19092;
	snprintf(b->cluster_id, sizeof(b->cluster_id), "cl-1");
	b->data = H.vol.vfs;
	b->cluster = scratch_subvol(&H.vol, "__cluster");
	kt_topics_options to;
	kt_topics_options_init(&to);
	to.cluster = b->cluster;
	to.data = b->data;
	to.defaults = b->cfg.log;
	to.num_partitions = 1;
	to.default_replication_factor = 1;
	to.reserved_name = "__cluster";
	kt_topics_ptable_hooks(b, &to.hooks);
	ck_assert_int_eq(kt_topics_open(&to, &b->topics), 0);
	ck_assert_int_eq(kb_ptable_create(b, &b->parts), 0);
	ck_assert_int_eq(kb_ptable_start(b->parts, NULL, 0), 0);
	ck_assert_int_eq(kn_pool_create(1, &H.pool), 0);
	H.ops = (kb_server_ops){hh_op_complete, hh_op_run, hh_op_timer_start, hh_op_timer_cancel};
	b->ops = &H.ops;
	b->server = &H;
}

static inline void hh_teardown(void)
{
	kb_broker *b = &H.b;
	__atomic_store_n(&b->stopping, 1, __ATOMIC_RELEASE);
	kb_ptable_wake_all(b->parts);
	kb_ptable_shutdown(b->parts);
	kn_pool_stop(H.pool);
	kn_pool_destroy(H.pool);
	kt_topics_close(b->topics);
	kb_ptable_destroy(b->parts);
	sub_destroy(b->cluster);
	b->data = NULL;
	scratch_close(&H.vol); /* the data volume, and everything in it */
}

static inline void hh_topic(const char *name, int32_t partitions)
{
	kt_topic_spec spec;
	memset(&spec, 0, sizeof(spec));
	spec.name = (kw_str){name, (int32_t)strlen(name)};
	spec.partitions = partitions;
	spec.replication_factor = 1;
	char msg[256];
	ck_assert_int_eq(kt_topics_create(H.b.topics, &spec, 0, NULL, msg, sizeof(msg)), 0);
}

/* Runs a request body through the real dispatch table.  Returns the request;
 * r->done says whether it has been answered (deferred ones later).  A
 * negative handler result (the connection would be closed) fails the test
 * unless `may_fail`. */
static inline hreq *hh_send_rc(int16_t key, int16_t version, const gb *body, int may_fail)
{
	const kw_api *api = kw_api_find(kn_dispatch_table, kn_dispatch_table_len, key);
	ck_assert_ptr_nonnull(api);
	ck_assert_ptr_nonnull(api->handler);
	ck_assert(version >= api->min && version <= api->max);
	hreq *r = calloc(1, sizeof(*r));
	ck_assert_ptr_nonnull(r);
	r->frame = malloc(body->n ? body->n : 1); /* exact size: overreads are caught */
	memcpy(r->frame, body->b, body->n);
	r->pub.broker = &H.b;
	r->pub.api_key = key;
	r->pub.api_version = version;
	r->pub.correlation_id = 1;
	r->pub.client_id = (kw_str){"t", 1};
	r->pub.flex = kw_api_flexible(api, version);
	r->pub.peer = "test";
	kw_rd rd;
	kw_rd_init(&rd, r->frame, body->n);
	kw_wr w = KAAS_WR_INIT;
	r->rc = api->handler(&r->pub, &rd, &w);
	ck_assert_msg(r->rc >= 0 || may_fail, "%s v%d failed: %d (%s)", api->name, version, r->rc,
		      rd.err ? rd.err : "");
	if (r->rc == KAAS_HANDLED) {
		ck_assert(!w.oom);
		pthread_mutex_lock(&H.mu);
		hh_flatten(r, &w);
		r->done = 1;
		pthread_mutex_unlock(&H.mu);
	} else if (r->rc == KAAS_NO_RESPONSE || r->rc < 0) {
		r->done = 1;
	}
	kw_wr_free(&w);
	return r;
}

static inline hreq *hh_send(int16_t key, int16_t version, const gb *body)
{
	return hh_send_rc(key, version, body, 0);
}

/* Waits (generously) for a deferred answer. */
static inline void hh_wait(hreq *r)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += HH_WAIT_S;
	pthread_mutex_lock(&H.mu);
	while (!r->done)
		ck_assert_msg(pthread_cond_timedwait(&H.cv, &H.mu, &until) != ETIMEDOUT,
			      "no answer within %d s", HH_WAIT_S);
	pthread_mutex_unlock(&H.mu);
}

static inline int hh_done(hreq *r)
{
	pthread_mutex_lock(&H.mu);
	int d = r->done;
	pthread_mutex_unlock(&H.mu);
	return d;
}

static inline void hh_free(hreq *r)
{
	if (!r)
		return;
	free(r->frame);
	free(r->body);
	free(r);
}

/* Every job queued on the (single) worker before this call has run. */
static void hh_barrier_job(void *arg)
{
	pthread_mutex_lock(&H.mu);
	*(int *)arg = 1;
	pthread_cond_broadcast(&H.cv);
	pthread_mutex_unlock(&H.mu);
}

static inline void hh_barrier(void)
{
	int flag = 0;
	ck_assert_int_eq(kn_pool_run(H.pool, hh_barrier_job, &flag), 0);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += HH_WAIT_S;
	pthread_mutex_lock(&H.mu);
	while (!flag)
		ck_assert(pthread_cond_timedwait(&H.cv, &H.mu, &until) != ETIMEDOUT);
	pthread_mutex_unlock(&H.mu);
}

/* ---- record batches ---------------------------------------------------------------- */
static uint32_t hh_crc32c(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	return c ^ 0xffffffffu;
}

/* A v2 record batch of `n` records whose values are `vlen` bytes of `fill`,
 * timestamps ts, ts+1, ...  Returns its length. */
static inline size_t hh_batch(uint8_t *out, size_t cap, int n, size_t vlen, char fill, int64_t ts)
{
	gb *g = calloc(1, sizeof(gb));
	gb64(g, 0);       /* base offset */
	gb32(g, 0);       /* length, patched below */
	gb32(g, -1);      /* partition leader epoch */
	gb8(g, 2);        /* magic */
	gb32(g, 0);       /* crc, patched below */
	size_t from = g->n;
	gb16(g, 0);       /* attributes */
	gb32(g, n - 1);   /* last offset delta */
	gb64(g, ts);
	gb64(g, ts + n - 1);
	gb64(g, -1);      /* producer id */
	gb16(g, -1);
	gb32(g, -1);
	gb32(g, n);
	for (int i = 0; i < n; i++) {
		gb rec;
		rec.n = 0;
		uint8_t *v = malloc(vlen ? vlen : 1);
		memset(v, fill, vlen);
		gb8(&rec, 0);
		gb_uvar(&rec, (uint64_t)i << 1);     /* timestamp delta (zigzag) */
		gb_uvar(&rec, (uint64_t)i << 1);     /* offset delta */
		gb_uvar(&rec, 1);                    /* key length -1 */
		gb_uvar(&rec, (uint64_t)vlen << 1);
		gb_raw(&rec, v, vlen);
		gb_uvar(&rec, 0);                    /* headers */
		free(v);
		gb_uvar(g, (uint64_t)rec.n << 1);
		gb_raw(g, rec.b, rec.n);
	}
	uint32_t len = (uint32_t)(g->n - 12);
	for (int i = 0; i < 4; i++)
		g->b[8 + i] = (uint8_t)(len >> (24 - 8 * i));
	uint32_t crc = hh_crc32c(g->b + from, g->n - from);
	for (int i = 0; i < 4; i++)
		g->b[17 + i] = (uint8_t)(crc >> (24 - 8 * i));
	ck_assert_uint_le(g->n, cap);
	memcpy(out, g->b, g->n);
	size_t r = g->n;
	free(g);
	return r;
}

#endif
