/*
 * h_produce.c — Produce v0-v7.
 *
 * The whole request is decoded first (a malformed one touches nothing), then
 * every partition's record batches are appended to the partition this broker
 * leads; the storage engine validates the batches and assigns offsets in
 * place, in the request buffer, so the records are copied once, socket to
 * file.
 *
 * acks=0: no response at all, unless a partition failed: then the connection
 * is closed (Kafka's way of telling such a producer).  acks=1: answered after the append (the data
 * is written, not yet durable; consumers see it once the flusher has synced
 * it).  acks=-1: answered once a group-commit flush covers every appended
 * partition (the high watermark is the durable offset), or with
 * KAFKA_STORAGE_ERROR when that flush failed, or — when timeout_ms passes
 * first (a hung volume) — with REQUEST_TIMED_OUT for the partitions still
 * waiting, as Kafka does; their data may still become durable later, which
 * an idempotent producer's retry then finds as a duplicate.
 *
 * Version differences: v1 adds throttle_time_ms to the response, v2
 * log_append_time, v5 log_start_offset.  v3+ carry a transactional id
 * (passed through: the batches carry the producer id, epoch and sequence
 * that the storage engine checks).  v0-v2 are served because librdkafka
 * compresses with gzip, snappy and lz4 only when the broker's Produce range
 * includes v0; their records must be v2 batches like any other (older
 * message formats are refused as CORRUPT_MESSAGE).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/acl.h"
#include "kaas/core/broker.h"
#include "kaas/net/handlers.h"
#include "kaas/net/obs.h"
#include "kaas/core/ptable.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

typedef struct pctx pctx;

typedef struct ppart {
	pctx *ctx;
	int32_t index;
	kw_bytes records;
	int16_t err;
	int waiting; /* an acks=-1 durability wait is outstanding (ctx->mu) */
	int64_t base_offset;
	int64_t log_append_time;
	int64_t log_start;
} ppart;

typedef struct ptopic_req {
	kw_str name;
	int32_t n;
	ppart *parts;
	int16_t denied; /* the authorizer's answer for the whole topic, or KERR_NONE */
} ptopic_req;

/* acks=-1 bookkeeping: the request is answered exactly once, by whoever
 * finds it complete first — the handler, the last durability callback, or
 * the timeout.  `refs` keeps the context alive for the callbacks and the
 * timer that come after the answer. */
struct pctx {
	kb_req *req;
	kw_str txn_id;    /* v3+; len -1 when null */
	int32_t ntopics;
	ptopic_req *topics;
	pthread_mutex_t mu;
	int pending;      /* outstanding durability waits */
	int handler_done; /* every wait is registered */
	int answered;
	kb_timer *timer;
	atomic_int refs;
};

static void pctx_put(pctx *c)
{
	if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	for (int32_t i = 0; i < c->ntopics; i++)
		free(c->topics[i].parts);
	free(c->topics);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static void write_response(pctx *c, kw_wr *w)
{
	int16_t v = c->req->api_version;
	kw_wr_array(w, 0, c->ntopics);
	for (int32_t i = 0; i < c->ntopics; i++) {
		ptopic_req *t = &c->topics[i];
		kw_wr_kstr(w, 0, t->name);
		kw_wr_array(w, 0, t->n);
		for (int32_t k = 0; k < t->n; k++) {
			ppart *p = &t->parts[k];
			kw_wr_i32(w, p->index);
			kw_wr_i16(w, p->err);
			kn_obs_partition(c->req, KAAS_API_PRODUCE, t->name, p->err,
					 p->err ? 0 : p->records.len);
			kw_wr_i64(w, p->err ? -1 : p->base_offset);
			if (v >= 2)
				kw_wr_i64(w, p->err ? -1 : p->log_append_time);
			if (v >= 5)
				kw_wr_i64(w, p->err ? -1 : p->log_start);
		}
	}
	if (v >= 1)
		kw_wr_i32(w, 0); /* throttle_time_ms */
}

/* Answers a deferred request (called once, without ctx->mu). */
static void answer(pctx *c)
{
	kw_wr w = KAAS_WR_INIT;
	write_response(c, &w);
	kb_req_complete(c->req, &w);
}

static void on_durable(void *arg, int16_t error, int64_t hw)
{
	(void)hw;
	ppart *p = arg;
	pctx *c = p->ctx;
	int mine = 0;
	pthread_mutex_lock(&c->mu);
	if (!c->answered) {
		if (error != KERR_NONE)
			p->err = error;
		p->waiting = 0;
		if (--c->pending == 0 && c->handler_done)
			mine = c->answered = 1;
	}
	pthread_mutex_unlock(&c->mu);
	if (mine) {
		if (kb_timer_cancel(c->req->broker, c->timer))
			pctx_put(c); /* the timer will not run: drop its reference */
		answer(c);
	}
	pctx_put(c);
}

static void on_timeout(void *arg)
{
	pctx *c = arg;
	int mine = 0;
	pthread_mutex_lock(&c->mu);
	if (!c->answered) {
		mine = c->answered = 1;
		for (int32_t i = 0; i < c->ntopics; i++)
			for (int32_t k = 0; k < c->topics[i].n; k++)
				if (c->topics[i].parts[k].waiting)
					c->topics[i].parts[k].err = KERR_REQUEST_TIMED_OUT;
	}
	pthread_mutex_unlock(&c->mu);
	if (mine) {
		KLOG_WARN("produce", "%s: acks=all request timed out waiting for the volume to sync",
			  c->req->peer);
		kb_timer_cancel(c->req->broker, c->timer); /* fired: gives the handle back */
		answer(c);
	}
	pctx_put(c);
}

/* Decodes the whole request into c (nothing is touched before it parsed). */
static int decode(pctx *c, kw_rd *body, int16_t *acks, int32_t *timeout_ms)
{
	c->txn_id.len = -1;
	if (c->req->api_version >= 3)
		KRD_STR(body, 0, &c->txn_id);
	KRD_I16(body, acks);
	KRD_I32(body, timeout_ms);
	KRD_ARRAY_CALLOC(body, 6, c->topics, c->ntopics);
	for (int32_t i = 0; i < c->ntopics; i++) {
		ptopic_req *t = &c->topics[i];
		KRD_STR(body, 0, &t->name);
		KRD_ARRAY_CALLOC(body, 8, t->parts, t->n);
		for (int32_t k = 0; k < t->n; k++) {
			ppart *p = &t->parts[k];
			p->ctx = c;
			KRD_I32(body, &p->index);
			KRD_BYTES(body, 0, &p->records);
		}
	}
	return 0;
oom:
	return -ENOMEM;
err_parse:
	return -EBADMSG;
}

/* acks=-1: p is answered by on_durable once its data is durable. */
static void wait_durable(pctx *c, ppart *p, kb_pref *ref, int64_t end)
{
	pthread_mutex_lock(&c->mu);
	c->pending++;
	p->waiting = 1;
	pthread_mutex_unlock(&c->mu);
	atomic_fetch_add(&c->refs, 1);
	if (kb_ptable_when_durable(ref, end, on_durable, p)) {
		pthread_mutex_lock(&c->mu);
		c->pending--;
		p->waiting = 0;
		p->err = KERR_KAFKA_STORAGE_ERROR;
		pthread_mutex_unlock(&c->mu);
		atomic_fetch_sub(&c->refs, 1);
	}
}

/* Appends one partition's records to the partition this broker leads. */
static void append_part(pctx *c, ptopic_req *t, ppart *p, int16_t acks)
{
	kb_req *req = c->req;
	if (acks != 0 && acks != 1 && acks != -1) {
		p->err = KERR_INVALID_REQUIRED_ACKS;
		return;
	}
	kb_pref ref;
	p->err = kb_ptable_get(req->broker->parts, t->name, p->index, &ref);
	if (p->err != KERR_NONE)
		return;
	if (p->records.len <= 0) {
		p->err = KERR_CORRUPT_MESSAGE;
		kb_pref_put(&ref);
		return;
	}
	ks_append_result res;
	memset(&res, 0, sizeof(res));
	/* The frame is ours: the engine stamps offsets into it in place. */
	int rc = ks_partition_append(ref.p, (uint8_t *)p->records.p, (size_t)p->records.len, &res);
	p->err = res.error;
	if (rc < 0 && p->err == KERR_NONE)
		p->err = KERR_KAFKA_STORAGE_ERROR;
	p->base_offset = res.base_offset;
	p->log_append_time = res.log_append_time;
	p->log_start = res.log_start_offset;
	if (p->err == KERR_NONE) {
		if (acks == -1)
			wait_durable(c, p, &ref, res.last_offset + 1);
		else
			kb_ptable_dirty(&ref);
	} else if (p->err != KERR_NOT_LEADER_OR_FOLLOWER) {
		KLOG_DEBUG("produce", "%s: %.*s/%d: %s%s%s", req->peer, t->name.len, t->name.s, p->index,
			   kw_kerr_name(p->err), res.message ? ": " : "", res.message ? res.message : "");
	}
	kb_pref_put(&ref);
}

/* Answers now, or defers to the durability callbacks and the timeout. */
static int finish(pctx *c, int16_t acks, int32_t timeout_ms, kw_wr *resp)
{
	if (acks == 0) {
		/* No answer; but an error closes the connection, as Kafka does, so
		 * that the producer notices and refreshes its metadata. */
		int failed = 0;
		for (int32_t i = 0; i < c->ntopics; i++)
			for (int32_t k = 0; k < c->topics[i].n; k++)
				failed |= c->topics[i].parts[k].err != KERR_NONE;
		pctx_put(c);
		return failed ? -ECONNABORTED : KAAS_NO_RESPONSE;
	}
	/* acks=1: the ack gate before the answer, as for acks=all after the fsync. */
	if (acks == 1 && !kb_ptable_ack_ok(c->req->broker->parts))
		for (int32_t i = 0; i < c->ntopics; i++)
			for (int32_t k = 0; k < c->topics[i].n; k++)
				if (c->topics[i].parts[k].err == KERR_NONE)
					c->topics[i].parts[k].err = KERR_NOT_LEADER_OR_FOLLOWER;
	pthread_mutex_lock(&c->mu);
	c->handler_done = 1;
	int now = c->pending == 0;
	if (now) {
		c->answered = 1;
	} else if (timeout_ms > 0) {
		atomic_fetch_add(&c->refs, 1); /* for the timer */
		c->timer = kb_timer_start(c->req->broker, timeout_ms, on_timeout, c);
		if (!c->timer)
			atomic_fetch_sub(&c->refs, 1); /* no timeout then: wait for the flush */
	}
	pthread_mutex_unlock(&c->mu);
	if (now)
		write_response(c, resp);
	pctx_put(c);
	return now ? KAAS_HANDLED : KAAS_DEFERRED;
}

int kn_h_produce(kb_req *req, kw_rd *body, kw_wr *resp)
{
	int16_t acks;
	int32_t timeout_ms;
	pctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->req = req;
	pthread_mutex_init(&c->mu, NULL);
	atomic_init(&c->refs, 1);
	int rc = decode(c, body, &acks, &timeout_ms);
	if (rc) {
		pctx_put(c);
		return rc;
	}
	/* Authorization first, as Kafka: a topic the principal may not write
	 * answers TOPIC_AUTHORIZATION_FAILED whether or not it exists. */
	for (int32_t i = 0; i < c->ntopics; i++) {
		ptopic_req *t = &c->topics[i];
		if (c->txn_id.len >= 0 &&
		    !kb_authorize(req, KB_OP_WRITE, KB_RES_TXN, c->txn_id.s, c->txn_id.len))
			t->denied = KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
		else if (!kb_authorize(req, KB_OP_WRITE, KB_RES_TOPIC, t->name.s, t->name.len))
			t->denied = KERR_TOPIC_AUTHORIZATION_FAILED;
	}
	for (int32_t i = 0; i < c->ntopics; i++)
		for (int32_t k = 0; k < c->topics[i].n; k++) {
			if (c->topics[i].denied != KERR_NONE)
				c->topics[i].parts[k].err = c->topics[i].denied;
			else
				append_part(c, &c->topics[i], &c->topics[i].parts[k], acks);
		}
	return finish(c, acks, timeout_ms, resp);
}
