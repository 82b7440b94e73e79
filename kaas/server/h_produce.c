/*
 * h_produce.c — Produce v0-v7.
 *
 * The whole request is decoded first (a malformed one touches nothing), then
 * every partition's record batches are appended to the partition this broker
 * leads; the storage engine validates the batches and assigns offsets in
 * place, in the request buffer, so the records are copied once, socket to
 * file.
 *
 * acks=0: no response at all.  acks=1: answered after the append (the data
 * is written, not yet durable; consumers see it once the flusher has synced
 * it).  acks=-1: answered once a group-commit flush covers every appended
 * partition (the high watermark is the durable offset), or with
 * KAFKA_STORAGE_ERROR when that flush failed.
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
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "server/broker.h"
#include "server/handlers.h"
#include "server/ptable.h"
#include "util/kerr.h"
#include "util/log.h"

typedef struct pctx pctx;

typedef struct ppart {
	pctx *ctx;
	int32_t index;
	kaas_bytes records;
	int16_t err;
	int64_t base_offset;
	int64_t log_append_time;
	int64_t log_start;
} ppart;

typedef struct ptopic_req {
	kaas_str name;
	int32_t n;
	ppart *parts;
} ptopic_req;

struct pctx {
	kaas_req *req;
	int32_t ntopics;
	ptopic_req *topics;
	atomic_int pending; /* the handler's hold + one per acks=-1 partition in flight */
};

static void pctx_free(pctx *c)
{
	if (!c)
		return;
	for (int32_t i = 0; i < c->ntopics; i++)
		free(c->topics[i].parts);
	free(c->topics);
	free(c);
}

static void write_response(pctx *c, kaas_wr *w)
{
	int16_t v = c->req->api_version;
	kaas_wr_array(w, 0, c->ntopics);
	for (int32_t i = 0; i < c->ntopics; i++) {
		ptopic_req *t = &c->topics[i];
		kaas_wr_kstr(w, 0, t->name);
		kaas_wr_array(w, 0, t->n);
		for (int32_t k = 0; k < t->n; k++) {
			ppart *p = &t->parts[k];
			kaas_wr_i32(w, p->index);
			kaas_wr_i16(w, p->err);
			kaas_wr_i64(w, p->err ? -1 : p->base_offset);
			if (v >= 2)
				kaas_wr_i64(w, p->err ? -1 : p->log_append_time);
			if (v >= 5)
				kaas_wr_i64(w, p->err ? -1 : p->log_start);
		}
	}
	if (v >= 1)
		kaas_wr_i32(w, 0); /* throttle_time_ms */
}

/* Last one out answers a deferred request. */
static void release(pctx *c)
{
	if (atomic_fetch_sub(&c->pending, 1) != 1)
		return;
	kaas_wr w = KAAS_WR_INIT;
	write_response(c, &w);
	kaas_req *req = c->req;
	pctx_free(c);
	kaas_req_complete(req, &w);
}

static void on_durable(void *arg, int16_t error, int64_t hw)
{
	(void)hw;
	ppart *p = arg;
	if (error != KERR_NONE)
		p->err = error;
	release(p->ctx);
}

int kaas_h_produce(kaas_req *req, kaas_rd *body, kaas_wr *resp)
{
	kaas_broker *b = req->broker;
	kaas_str txn_id;
	int16_t acks;
	int32_t timeout_ms, nt;
	pctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->req = req;
	atomic_init(&c->pending, 1);

	if (req->api_version >= 3)
		KRD_STR(body, 0, &txn_id);
	KRD_I16(body, &acks);
	KRD_I32(body, &timeout_ms);
	KRD_ARRAY(body, 0, 6, &nt);
	if (nt > 0) {
		c->topics = calloc((size_t)nt, sizeof(*c->topics));
		if (!c->topics)
			goto oom;
		c->ntopics = nt;
	}
	for (int32_t i = 0; i < nt; i++) {
		ptopic_req *t = &c->topics[i];
		int32_t np;
		KRD_STR(body, 0, &t->name);
		KRD_ARRAY(body, 0, 8, &np);
		if (np > 0) {
			t->parts = calloc((size_t)np, sizeof(*t->parts));
			if (!t->parts)
				goto oom;
			t->n = np;
		}
		for (int32_t k = 0; k < np; k++) {
			ppart *p = &t->parts[k];
			p->ctx = c;
			KRD_I32(body, &p->index);
			KRD_BYTES(body, 0, &p->records);
		}
	}
	(void)timeout_ms;

	int valid_acks = acks == 0 || acks == 1 || acks == -1;
	for (int32_t i = 0; i < c->ntopics; i++) {
		ptopic_req *t = &c->topics[i];
		for (int32_t k = 0; k < t->n; k++) {
			ppart *p = &t->parts[k];
			if (!valid_acks) {
				p->err = KERR_INVALID_REQUIRED_ACKS;
				continue;
			}
			kaas_pref ref;
			p->err = kaas_ptable_get(b->parts, t->name, p->index, &ref);
			if (p->err != KERR_NONE)
				continue;
			if (p->records.len <= 0) {
				p->err = KERR_CORRUPT_MESSAGE;
				kaas_pref_put(&ref);
				continue;
			}
			kaas_append_result res;
			memset(&res, 0, sizeof(res));
			/* The frame is ours: the engine stamps offsets into it in place. */
			int rc = kaas_partition_append(ref.p, (uint8_t *)p->records.p, (size_t)p->records.len, &res);
			p->err = res.error;
			if (rc < 0 && p->err == KERR_NONE)
				p->err = KERR_KAFKA_STORAGE_ERROR;
			p->base_offset = res.base_offset;
			p->log_append_time = res.log_append_time;
			p->log_start = res.log_start_offset;
			if (p->err == KERR_NONE) {
				if (acks == -1) {
					atomic_fetch_add(&c->pending, 1);
					if (kaas_ptable_when_durable(&ref, res.last_offset + 1, on_durable, p)) {
						atomic_fetch_sub(&c->pending, 1);
						p->err = KERR_KAFKA_STORAGE_ERROR;
					}
				} else {
					kaas_ptable_dirty(&ref);
				}
			} else if (p->err != KERR_NOT_LEADER_OR_FOLLOWER) {
				KLOG_DEBUG("produce", "%s: %.*s/%d: %s%s%s", req->peer, t->name.len, t->name.s, p->index,
					   kaas_kerr_name(p->err), res.message ? ": " : "", res.message ? res.message : "");
			}
			kaas_pref_put(&ref);
		}
	}

	if (acks == 0) {
		/* No response; the waiters (none for acks=0) are not needed. */
		pctx_free(c);
		return KAAS_NO_RESPONSE;
	}
	if (atomic_fetch_sub(&c->pending, 1) == 1) {
		write_response(c, resp);
		pctx_free(c);
		return KAAS_HANDLED;
	}
	return KAAS_DEFERRED;
oom:
	pctx_free(c);
	return -ENOMEM;
err_parse:
	pctx_free(c);
	return -EBADMSG;
}
