/*
 * h_fetch.c — Fetch v4-v11.
 *
 * Each partition is a storage read plan: the log from the batch holding the
 * fetch offset, never past the high watermark (the durable offset), as
 * (file, position, length) ranges; like Kafka's, it may end inside a batch,
 * which clients skip and fetch again.  The plan is spliced into the response
 * (kb_req_attach_read) and the event loop streams it with sendfile, so
 * record bytes are never copied through the broker.
 *
 * Limits: partition_max_bytes per partition, max_bytes (v3+) for the whole
 * response; as KIP-74, the first non-empty partition returns at least one
 * whole batch even when it is larger than both.
 *
 * Long polls (Kafka's DelayedFetch): when fewer than min_bytes are available
 * and max_wait_ms > 0, the request parks: a watch on every partition (woken
 * when a flush moves its high watermark past what the last read saw) and a
 * timer for max_wait_ms.  A woken watch re-counts the bytes on a worker: at
 * least min_bytes (or an error) answers, fewer parks again.  When max_wait_ms
 * passes, or the broker stops, the answer holds whatever is there.  The
 * connection goes on with its next request meanwhile.
 *
 * Fetch sessions (KIP-227, v7+): kaas does not keep sessions.  A full fetch
 * (session_id 0) is answered with session_id 0, which tells the client to
 * keep sending full fetches; an incremental one gets
 * FETCH_SESSION_ID_NOT_FOUND, after which clients start over with a full one.
 *
 * isolation_level is accepted; aborted_transactions is null for
 * read_uncommitted and the (empty) list for read_committed.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/broker.h"
#include "kaas/net/handlers.h"
#include "kaas/net/obs.h"
#include "kaas/core/ptable.h"
#include "kaas/core/acl.h"
#include "kaas/core/splice.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

typedef struct fpart {
	int32_t index;
	int32_t cur_epoch;
	int64_t offset;
	int64_t log_start;
	int32_t max_bytes;
	int64_t hw_seen; /* high watermark at the first pass: a long poll waits for more */
} fpart;

typedef struct ftopic {
	kw_str name;
	int32_t n;
	fpart *parts;
	int16_t denied; /* TOPIC_AUTHORIZATION_FAILED when the principal may not READ it */
} ftopic;

typedef struct fctx {
	kb_req *req;
	int32_t max_wait, min_bytes, max_bytes;
	int8_t isolation;
	int32_t ntopics, nparts;
	ftopic *topics;
	int16_t top_error;
	/* parking */
	atomic_int refs;      /* owner + armed timer */
	atomic_int gate;      /* a woken and fully parked fetch re-checks at 0 */
	atomic_int fired;     /* woken since the watches were (re)armed */
	atomic_int timed_out; /* max_wait_ms has passed: answer with what is there */
	kb_watch **watches;
	int nwatch;
	kb_timer *timer;
} fctx;

static void fctx_put(fctx *c)
{
	if (atomic_fetch_sub(&c->refs, 1) != 1)
		return;
	for (int32_t i = 0; i < c->ntopics; i++)
		free(c->topics[i].parts);
	free(c->topics);
	free(c->watches);
	free(c);
}

/* Across the partitions of one pass: what is left of max_bytes, whether the
 * first non-empty partition was seen (KIP-74), the record bytes so far. */
typedef struct pass_state {
	int64_t total, budget;
	int any_error, first_data;
} pass_state;

/* One partition's answer header, up to and including its records' size. */
static void write_part_head(fctx *c, kw_wr *w, int32_t index, int16_t err, int64_t hw, int64_t lso,
			    int64_t lstart, uint32_t bytes)
{
	int16_t v = c->req->api_version;
	kw_wr_i32(w, index);
	kw_wr_i16(w, err);
	kw_wr_i64(w, hw);
	kw_wr_i64(w, lso);
	if (v >= 5)
		kw_wr_i64(w, lstart);
	if (c->isolation == 1)
		kw_wr_array(w, 0, 0); /* aborted transactions: none */
	else
		kw_wr_array(w, 0, -1);
	if (v >= 11)
		kw_wr_i32(w, -1); /* preferred_read_replica */
	kw_wr_i32(w, (int32_t)bytes);
}

/* Looks the partition up and plans its read within what is left (*lim). */
static int16_t plan_part(fctx *c, const ftopic *t, const fpart *fp, const pass_state *ps, kb_pref *ref,
			 ks_read_plan *plan, int *have_plan, int64_t *lim)
{
	int16_t v = c->req->api_version;
	if (t->denied != KERR_NONE) {
		*ref = (kb_pref)KAAS_PREF_INIT;
		return t->denied;
	}
	int16_t err = kb_ptable_get(c->req->broker->parts, t->name, fp->index, ref);
	if (err == KERR_NONE && v >= 9 && fp->cur_epoch >= 0 && fp->cur_epoch != ref->epoch)
		err = fp->cur_epoch < ref->epoch ? KERR_FENCED_LEADER_EPOCH : KERR_UNKNOWN_LEADER_EPOCH;
	if (err != KERR_NONE || fp->max_bytes <= 0)
		return err; /* nothing asked: report offsets only */
	*lim = fp->max_bytes < ps->budget ? fp->max_bytes : ps->budget;
	if (*lim <= 0 && ps->first_data)
		*lim = 1; /* KIP-74: the first batch anyway */
	if (*lim > 0 || ps->first_data) {
		int rc = ks_partition_read(ref->p, fp->offset, (int32_t)*lim, plan);
		*have_plan = 1;
		err = plan->error;
		if (rc < 0 && err == KERR_NONE)
			err = KERR_KAFKA_STORAGE_ERROR;
	}
	return err;
}

static void pass_part(fctx *c, kw_wr *w, const ftopic *t, fpart *fp, int measure, pass_state *ps)
{
	kb_pref ref;
	ks_read_plan plan = KAAS_READ_PLAN_INIT;
	int have_plan = 0;
	int64_t lim = 0;
	int16_t err = plan_part(c, t, fp, ps, &ref, &plan, &have_plan, &lim);
	int64_t hw = -1, lso = -1, lstart = -1;
	fp->hw_seen = -1;
	if (err == KERR_NONE) {
		if (have_plan) {
			hw = plan.high_watermark;
			lso = plan.last_stable_offset;
			lstart = plan.log_start_offset;
		} else {
			hw = ks_partition_high_watermark(ref.p);
			lso = hw;
			lstart = ks_partition_log_start(ref.p);
		}
		fp->hw_seen = hw;
	}
	/* The lease once more, now that the plan and the high watermark are
	 * read: kb_ptable_get's check came before, and meanwhile the lease may
	 * have lapsed and an fsync that returned after it moved the high
	 * watermark over records a successor never saw (docs/cluster.md,
	 * "Reads"). */
	if (err == KERR_NONE && !kb_ptable_ack_ok(c->req->broker->parts)) {
		err = KERR_NOT_LEADER_OR_FOLLOWER;
		if (have_plan)
			ks_read_plan_release(&plan);
		have_plan = 0;
		hw = lso = lstart = -1;
		fp->hw_seen = -1;
	}
	/* Only the first non-empty partition may exceed the limits (KIP-74):
	 * a later one whose batches do not fit its partition_max_bytes or
	 * the rest of max_bytes sends no records. */
	if (have_plan && plan.total > 0 && !ps->first_data && (int64_t)plan.total > lim) {
		ks_read_plan_release(&plan);
		plan.total = 0;
		plan.n = 0;
	}
	size_t mark = w->len;
	uint32_t bytes = err == KERR_NONE && have_plan ? plan.total : 0;
	write_part_head(c, w, fp->index, err, hw, lso, lstart, bytes);
	int counted = 0;
	if (bytes > 0 && measure) {
		ks_read_plan_release(&plan);
		counted = 1;
	} else if (bytes > 0) {
		if (kb_req_attach_read(c->req, w, &plan)) {
			/* Could not read it: answer this partition with a storage error. */
			w->len = mark;
			write_part_head(c, w, fp->index, KERR_KAFKA_STORAGE_ERROR, -1, -1, -1, 0);
			ps->any_error = 1;
		} else {
			counted = 1;
		}
	} else if (have_plan) {
		ks_read_plan_release(&plan);
	}
	if (counted) {
		ps->total += bytes;
		ps->budget -= bytes;
		ps->first_data = 0;
	}
	if (err != KERR_NONE)
		ps->any_error = 1;
	if (!measure)
		kn_obs_partition(c->req, KAAS_API_FETCH, t->name, err, counted ? bytes : 0);
	kb_pref_put(&ref);
}

/* Writes the whole response.  Returns the record bytes it holds, or -1 when
 * some partition reported an error (answer now instead of waiting).  With
 * `measure` the ranges are only counted, not attached: w is then scratch. */
static int64_t fetch_pass(fctx *c, kw_wr *w, int measure)
{
	int16_t v = c->req->api_version;
	pass_state ps = {0, c->max_bytes > 0 ? c->max_bytes : INT32_MAX, 0, 1};
	kw_wr_i32(w, 0); /* throttle_time_ms */
	if (v >= 7) {
		kw_wr_i16(w, c->top_error);
		kw_wr_i32(w, 0); /* session_id: no session */
	}
	if (c->top_error) {
		kw_wr_array(w, 0, 0);
		return -1;
	}
	kw_wr_array(w, 0, c->ntopics);
	for (int32_t i = 0; i < c->ntopics; i++) {
		ftopic *t = &c->topics[i];
		kw_wr_kstr(w, 0, t->name);
		kw_wr_array(w, 0, t->n);
		for (int32_t k = 0; k < t->n; k++)
			pass_part(c, w, t, &t->parts[k], measure, &ps);
	}
	return ps.any_error ? -1 : ps.total;
}

/* Drops a response built by a pass that is not going to be sent. */
static void discard(kb_req *req, kw_wr *w)
{
	kb_splices_free(req->splices);
	req->splices = NULL;
	kw_wr_free(w);
}

/* Answers with what is there now (a worker; the watches are given back). */
static void finish(fctx *c)
{
	kb_broker *b = c->req->broker;
	if (kb_timer_cancel(b, c->timer))
		fctx_put(c); /* the timer will never run: drop its reference */
	c->timer = NULL;
	kw_wr w = KAAS_WR_INIT;
	fetch_pass(c, &w, 0);
	kb_req_complete(c->req, &w);
	fctx_put(c);
}

static void park(fctx *c);

/* A woken fetch, on a worker: enough bytes now (or an error, the timeout, a
 * stopping broker) answers; otherwise it parks again. */
static void recheck(void *arg)
{
	fctx *c = arg;
	kb_broker *b = c->req->broker;
	for (int i = 0; i < c->nwatch; i++)
		kb_ptable_unwatch(b->parts, c->watches[i]);
	c->nwatch = 0;
	/* Re-arm before looking: a timer that fires from here on wakes the
	 * next park, one that fired before is seen below. */
	atomic_store(&c->fired, 0);
	atomic_store(&c->gate, 2);
	int done = atomic_load(&c->timed_out) || __atomic_load_n(&b->stopping, __ATOMIC_ACQUIRE);
	if (!done) {
		kw_wr m = KAAS_WR_INIT;
		int64_t got = fetch_pass(c, &m, 1);
		kw_wr_free(&m);
		done = got < 0 || got >= c->min_bytes;
	}
	if (done)
		finish(c);
	else
		park(c);
}

static void gate_pass(fctx *c)
{
	/* Never re-check inline: this may run inside a watch callback, under the
	 * partition table's lock.  The pool only refuses work after the event
	 * loop has stopped, when no answer could be sent anyway. */
	if (atomic_fetch_sub(&c->gate, 1) == 1 && kb_broker_run(c->req->broker, recheck, c))
		KLOG_DEBUG("fetch", "shutting down: a parked fetch is dropped");
}

/* Watch callback (ptable lock held) and timer: only flags and posting. */
static void wake(void *arg)
{
	fctx *c = arg;
	if (atomic_exchange(&c->fired, 1) == 0)
		gate_pass(c);
}

static void on_timer(void *arg)
{
	fctx *c = arg;
	atomic_store(&c->timed_out, 1);
	wake(c);
	fctx_put(c);
}

/* Watches every partition for data beyond what the last pass saw, then
 * opens the gate: from now on a wake queues a re-check. */
static void park(fctx *c)
{
	kb_broker *b = c->req->broker;
	for (int32_t i = 0; i < c->ntopics && !atomic_load(&c->fired); i++) {
		ftopic *t = &c->topics[i];
		for (int32_t k = 0; k < t->n; k++) {
			kb_pref ref;
			if (kb_ptable_get(b->parts, t->name, t->parts[k].index, &ref) != KERR_NONE) {
				wake(c); /* it went away meanwhile: answer */
				continue;
			}
			int64_t at = t->parts[k].offset;
			if (t->parts[k].hw_seen > at)
				at = t->parts[k].hw_seen;
			kb_watch *w = kb_ptable_watch(&ref, at, wake, c);
			kb_pref_put(&ref);
			if (w)
				c->watches[c->nwatch++] = w;
			else
				wake(c);
		}
	}
	gate_pass(c);
}

int kn_h_fetch(kb_req *req, kw_rd *body, kw_wr *resp)
{
	kb_broker *b = req->broker;
	int16_t v = req->api_version;
	int32_t replica_id, session_id = 0, session_epoch = -1;
	fctx *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->req = req;
	atomic_init(&c->refs, 1);
	atomic_init(&c->gate, 2);
	atomic_init(&c->fired, 0);
	atomic_init(&c->timed_out, 0);
	c->max_bytes = INT32_MAX;

	KRD_I32(body, &replica_id);
	KRD_I32(body, &c->max_wait);
	KRD_I32(body, &c->min_bytes);
	KRD_I32(body, &c->max_bytes); /* v3+ */
	KRD_I8(body, &c->isolation);  /* v4+ */
	if (v >= 7) {
		KRD_I32(body, &session_id);
		KRD_I32(body, &session_epoch);
	}
	KRD_ARRAY_CALLOC(body, 6, c->topics, c->ntopics);
	for (int32_t i = 0; i < c->ntopics; i++) {
		ftopic *t = &c->topics[i];
		KRD_STR(body, 0, &t->name);
		KRD_ARRAY_CALLOC(body, 16, t->parts, t->n);
		c->nparts += t->n;
		for (int32_t k = 0; k < t->n; k++) {
			fpart *p = &t->parts[k];
			p->cur_epoch = -1;
			p->log_start = -1;
			KRD_I32(body, &p->index);
			if (v >= 9)
				KRD_I32(body, &p->cur_epoch);
			KRD_I64(body, &p->offset);
			if (v >= 5)
				KRD_I64(body, &p->log_start);
			KRD_I32(body, &p->max_bytes);
		}
	}
	if (v >= 7) {
		int32_t nf;
		KRD_ARRAY(body, 0, 6, &nf);
		for (int32_t i = 0; i < nf; i++) {
			kw_str tn;
			int32_t np;
			KRD_STR(body, 0, &tn);
			KRD_ARRAY(body, 0, 4, &np);
			KRD_SKIP(body, (size_t)(np > 0 ? np : 0) * 4);
		}
	}
	if (v >= 11) {
		kw_str rack;
		KRD_STR(body, 0, &rack);
	}
	(void)replica_id;
	for (int32_t i = 0; i < c->ntopics; i++)
		if (!kb_authorize(req, KB_OP_READ, KB_RES_TOPIC, c->topics[i].name.s, c->topics[i].name.len))
			c->topics[i].denied = KERR_TOPIC_AUTHORIZATION_FAILED;
	if (c->isolation != 0 && c->isolation != 1)
		c->isolation = 0;
	if (v >= 7 && session_id != 0)
		c->top_error = KERR_FETCH_SESSION_ID_NOT_FOUND;
	else if (v >= 7 && session_epoch > 0)
		c->top_error = KERR_INVALID_FETCH_SESSION_EPOCH;

	int64_t got = fetch_pass(c, resp, 0);
	int stopping = __atomic_load_n(&b->stopping, __ATOMIC_ACQUIRE);
	if (got < 0 || got >= c->min_bytes || c->max_wait <= 0 || stopping || c->nparts == 0) {
		fctx_put(c);
		return KAAS_HANDLED;
	}
	/* Not enough yet: park on every partition until min_bytes or max_wait. */
	discard(req, resp);
	c->watches = calloc((size_t)c->nparts, sizeof(*c->watches));
	if (!c->watches)
		goto oom;
	atomic_fetch_add(&c->refs, 1); /* for the timer */
	c->timer = kb_timer_start(b, c->max_wait, on_timer, c);
	if (!c->timer) {
		atomic_fetch_sub(&c->refs, 1);
		atomic_store(&c->timed_out, 1); /* cannot wait: answer at once */
		wake(c);
	}
	park(c);
	return KAAS_DEFERRED;
oom:
	fctx_put(c);
	return -ENOMEM;
err_parse:
	fctx_put(c);
	return -EBADMSG;
}
