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
 * Around a take-over (docs/cluster.md, "What a producer is told"): a
 * request for a partition whose take-over is pending or under way here is
 * parked until it ends (kb_ptable_hold), then processed in order; one
 * whose batches may be in the log but are not acknowledged is answered
 * REQUEST_TIMED_OUT ("outcome unknown"), never with an error that says "not
 * written"; and a batch of an idempotent producer that the log finds out of
 * order only because this broker refused an earlier one is answered
 * NOT_LEADER_OR_FOLLOWER, so the producer re-sends in order rather than
 * bumping its epoch and re-numbering batches a successor may hold.
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
#include <inttypes.h>
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
#include "util/clock.h"
#include "util/log.h"

typedef struct pctx pctx;

typedef struct ppart {
	pctx *ctx;
	kw_str topic;
	int32_t index;
	kw_bytes records;
	int64_t pid;      /* the first batch's producer id (-1: not idempotent) */
	int16_t pepoch;
	int32_t seq;      /* its base sequence */
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
	int16_t acks;
	int32_t timeout_ms;
	int64_t t0_ms;    /* monotonic, when the handler began */
	kb_hold *hold;    /* parked for a take-over (kb_ptable_hold) */
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
	if (error != KERR_NONE) /* left to a retry: its gap is ours (ptable.h) */
		kb_ptable_refusal_note(c->req->broker->parts, p->topic, p->index, p->pid, p->pepoch, p->seq);
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

static uint64_t be(const uint8_t *b, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = v << 8 | b[i];
	return v;
}

/* The producer id, epoch and base sequence of the first v2 batch (the
 * storage engine validates the batches; this only reads where they are). */
static void producer_of(ppart *p)
{
	enum { OFF_MAGIC = 16, OFF_PID = 43, OFF_EPOCH = 51, OFF_SEQ = 53, HEADER = 61 };
	const uint8_t *b = (const uint8_t *)p->records.p;
	p->pid = -1;
	p->pepoch = -1;
	p->seq = -1;
	if (p->records.len < HEADER || b[OFF_MAGIC] != 2)
		return;
	p->pid = (int64_t)be(b + OFF_PID, 8);
	p->pepoch = (int16_t)be(b + OFF_EPOCH, 2);
	p->seq = (int32_t)be(b + OFF_SEQ, 4);
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
			p->topic = t->name;
			KRD_I32(body, &p->index);
			KRD_BYTES(body, 0, &p->records);
			producer_of(p);
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
		p->err = KERR_REQUEST_TIMED_OUT; /* appended: its fate is unknown */
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
	kb_ptable *pt = req->broker->parts;
	kb_pref ref;
	p->err = kb_ptable_get(pt, t->name, p->index, &ref);
	if (p->err != KERR_NONE) {
		if (p->err == KERR_NOT_LEADER_OR_FOLLOWER || p->err == KERR_KAFKA_STORAGE_ERROR)
			kb_ptable_refusal_note(pt, t->name, p->index, p->pid, p->pepoch, p->seq);
		return;
	}
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
	if (rc < 0 && (p->err == KERR_NONE || p->err == KERR_KAFKA_STORAGE_ERROR))
		/* KAFKA_STORAGE_ERROR says "not written": only for a request none
		 * of whose batches can be in the log; else the outcome is unknown
		 * (a successor's recovery may keep them). */
		p->err = res.maybe_written ? KERR_REQUEST_TIMED_OUT : KERR_KAFKA_STORAGE_ERROR;
	if ((p->err == KERR_OUT_OF_ORDER_SEQUENCE_NUMBER || p->err == KERR_UNKNOWN_PRODUCER_ID) &&
	    kb_ptable_refusal_check(pt, t->name, p->index, p->pid, p->pepoch, p->seq)) {
		KLOG_DEBUG("produce", "%s: %.*s/%d: producer %" PRId64 " sequence %d follows a batch refused here: "
			   "NOT_LEADER_OR_FOLLOWER, to be re-sent in order", req->peer, t->name.len, t->name.s,
			   p->index, p->pid, p->seq);
		p->err = KERR_NOT_LEADER_OR_FOLLOWER;
	} else if (p->err == KERR_NONE) {
		kb_ptable_refusal_clear(pt, t->name, p->index, p->pid);
	} else if (p->err == KERR_NOT_LEADER_OR_FOLLOWER || p->err == KERR_KAFKA_STORAGE_ERROR ||
		   p->err == KERR_REQUEST_TIMED_OUT) {
		kb_ptable_refusal_note(pt, t->name, p->index, p->pid, p->pepoch, p->seq);
	}
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

/* Answers now (into resp, or — resumed after a hold — through
 * kb_req_complete), or defers to the durability callbacks and the timeout. */
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
	/* acks=1: the ack gate before the answer, as for acks=all after the
	 * fsync; written, so "outcome unknown", not "not written". */
	if (acks == 1 && !kb_ptable_ack_ok(c->req->broker->parts))
		for (int32_t i = 0; i < c->ntopics; i++)
			for (int32_t k = 0; k < c->topics[i].n; k++)
				if (c->topics[i].parts[k].err == KERR_NONE)
					c->topics[i].parts[k].err = KERR_REQUEST_TIMED_OUT;
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
	if (now && resp)
		write_response(c, resp);
	else if (now)
		answer(c);
	pctx_put(c);
	return now && resp ? KAAS_HANDLED : KAAS_DEFERRED;
}

/* The appends of every partition the principal may write. */
static void append_all(pctx *c)
{
	for (int32_t i = 0; i < c->ntopics; i++)
		for (int32_t k = 0; k < c->topics[i].n; k++) {
			if (c->topics[i].denied != KERR_NONE)
				c->topics[i].parts[k].err = c->topics[i].denied;
			else
				append_part(c, &c->topics[i], &c->topics[i].parts[k], c->acks);
		}
}

/* What is left of the request's timeout (at least 1 ms). */
static int32_t time_left(const pctx *c)
{
	int64_t left = (int64_t)c->timeout_ms - (ku_mono_ms() - c->t0_ms);
	return left < 1 ? 1 : left > c->timeout_ms ? c->timeout_ms : (int32_t)left;
}

/* A parked request may go ahead (on a worker), or timed out waiting: then
 * nothing of it was written, and the answer says so. */
static void resumed(void *arg, int timed_out)
{
	pctx *c = arg;
	kb_ptable *pt = c->req->broker->parts;
	if (timed_out) {
		for (int32_t i = 0; i < c->ntopics; i++)
			for (int32_t k = 0; k < c->topics[i].n; k++) {
				ppart *p = &c->topics[i].parts[k];
				p->err = c->topics[i].denied != KERR_NONE ? c->topics[i].denied
									   : KERR_NOT_LEADER_OR_FOLLOWER;
				if (c->topics[i].denied == KERR_NONE)
					kb_ptable_refusal_note(pt, p->topic, p->index, p->pid, p->pepoch, p->seq);
			}
	} else {
		append_all(c);
	}
	/* The next request of the connection may append from here on. */
	kb_ptable_hold_done(pt, c->hold);
	c->hold = NULL;
	if (timed_out) {
		pthread_mutex_lock(&c->mu);
		c->handler_done = c->answered = 1;
		pthread_mutex_unlock(&c->mu);
		answer(c);
		pctx_put(c);
		return;
	}
	finish(c, c->acks, time_left(c), NULL);
}

/* Parks the request while a take-over of one of its partitions is pending
 * here (or an earlier parked request of its connection or partitions
 * waits).  1 when parked. */
static int park(pctx *c)
{
	size_t n = 0;
	for (int32_t i = 0; i < c->ntopics; i++)
		if (c->topics[i].denied == KERR_NONE)
			n += (size_t)c->topics[i].n;
	if (c->acks == 0 || n == 0)
		return 0; /* acks=0 has no answer to wait with */
	kb_hold_key stack[16], *keys = n <= 16 ? stack : calloc(n, sizeof(*keys));
	if (!keys)
		return 0;
	size_t j = 0;
	for (int32_t i = 0; i < c->ntopics; i++)
		for (int32_t k = 0; c->topics[i].denied == KERR_NONE && k < c->topics[i].n; k++)
			keys[j++] = (kb_hold_key){c->topics[i].name, c->topics[i].parts[k].index};
	atomic_fetch_add(&c->refs, 1); /* for resumed() */
	int rc = kb_ptable_hold(c->req->broker->parts, c->req->conn_id, keys, n, time_left(c), resumed, c,
				&c->hold);
	if (keys != stack)
		free(keys);
	if (rc != 1)
		atomic_fetch_sub(&c->refs, 1);
	return rc == 1;
}

int kn_h_produce(kb_req *req, kw_rd *body, kw_wr *resp)
{
	int16_t acks;
	int32_t timeout_ms;
	pctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->req = req;
	c->t0_ms = ku_mono_ms();
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
	c->acks = acks;
	c->timeout_ms = timeout_ms;
	if (park(c)) {
		/* resumed() answers it; the handler's reference goes. */
		pctx_put(c);
		return KAAS_DEFERRED;
	}
	append_all(c);
	return finish(c, acks, timeout_ms, resp);
}
