/*
 * durable.c — durability of a partition and waiting for it: the flusher
 * threads (group commit of acks=0/1 data), acks=all waiters answered once
 * the durable offset passes theirs, and long-poll watches on the high
 * watermark.
 */
#include <errno.h>
#include <stdlib.h>

#include "kaas/core/ptable_int.h"
#include "util/clock.h"
#include "util/metrics.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* ---- flusher ---------------------------------------------------------------------------------- */

void kb__fire_watches(kb_pentry *e, int all)
{
	kb__assert_held(KB_MU);
	struct kb_watch *w = e->watches;
	while (w) {
		struct kb_watch *nx = w->next;
		if (all || e->durable > w->offset) {
			if (w->prev)
				w->prev->next = w->next;
			else
				e->watches = w->next;
			if (w->next)
				w->next->prev = w->prev;
			w->e = NULL;
			w->prev = w->next = NULL;
			w->fn(w->arg);
		}
		w = nx;
	}
}

void kb__enqueue_dirty(kb_ptable *t, kb_pentry *e)
{
	kb__lock(&t->fmu, KB_FMU);
	if (!e->queued && !t->fstop) {
		e->queued = 1;
		kb__lock(&t->mu, KB_MU);
		e->refs++; /* the queue holds a reference */
		kb__unlock(&t->mu, KB_MU);
		e->dnext = NULL;
		if (t->dtail)
			t->dtail->dnext = e;
		else
			t->dhead = e;
		t->dtail = e;
		pthread_cond_signal(&t->fcv);
	}
	kb__unlock(&t->fmu, KB_FMU);
}

void kb__put_entry(kb_ptable *t, kb_pentry *e)
{
	kb__lock(&t->mu, KB_MU);
	KAAS_ASSERT(e->refs > 0); /* a reference given back twice, or never taken */
	if (--e->refs == 0)
		pthread_cond_broadcast(&t->refs_cv);
	kb__unlock(&t->mu, KB_MU);
}

/* Answers the waiters of e that `hw` (or a failure) completes.  Calls may
 * arrive out of order (storage calls its listener after dropping the
 * partition lock, and a flush's own answer may be older than a listener
 * call): the durable offset only ever grows here. */
static void settle(kb_pentry *e, int failed, int64_t hw)
{
	kb_ptable *t = e->t;
	dwaiter *done = NULL, **tail = &done;
	kb__lock(&t->mu, KB_MU);
	if (!failed && hw > e->durable) {
		/* One advance is one group commit's batch; the first one of a
		 * leadership is where recovery left the log, not a batch. */
		if (e->durable >= 0)
			ku_histo_observe(t->m_batch, (double)(hw - e->durable));
		e->durable = hw;
	}
	dwaiter **pp = &e->waiters;
	while (*pp) {
		dwaiter *w = *pp;
		if (failed || w->offset <= e->durable) {
			*pp = w->next;
			w->next = NULL;
			*tail = w;
			tail = &w->next;
		} else {
			pp = &w->next;
		}
	}
	kb__fire_watches(e, failed);
	hw = e->durable;
	kb__unlock(&t->mu, KB_MU);
	/* The ack gate, after the fsync and before the answer: a leader whose
	 * lease no longer holds acknowledges nothing (docs/cluster.md).  Nor
	 * may it say "not written": the batches are in the log, and a
	 * successor's recovery serves them.  A failed group commit is the
	 * same: some of its batches may be complete on the volume, and a
	 * successor keeps them.  REQUEST_TIMED_OUT is the answer that means
	 * "outcome unknown": an idempotent producer retries with the same
	 * sequence numbers, which the next leader recognises as duplicates. */
	int16_t ok = failed ? KERR_REQUEST_TIMED_OUT
			    : done && !kb_ptable_ack_ok(t) ? KERR_REQUEST_TIMED_OUT : KERR_NONE;
	while (done) {
		dwaiter *w = done;
		done = w->next;
		w->fn(w->arg, ok, ok != KERR_NONE ? -1 : hw);
		free(w);
	}
}

/* Storage's high-watermark listener (ks_partition_set_listener): the one
 * way an advance of the durable offset reaches waiters and watches, from
 * whichever thread's flush retired it (a flusher, housekeeping, a
 * relinquish's final flush). */
void kb__on_durable(void *arg, ks_partition *p, int64_t hw)
{
	(void)p;
	settle(arg, 0, hw);
}

static void flush_entry(kb_ptable *t, kb_pentry *e)
{
	int64_t durable = -1;
	int tok = t->io_begin ? t->io_begin(t->io_arg) : -1;
	int64_t t0 = ku_mono_ns();
	int rc = ks_partition_flush(e->p, &durable);
	ku_histo_observe(t->m_fsync, (double)(ku_mono_ns() - t0) / 1e9);
	if (t->io_end)
		t->io_end(t->io_arg, tok);
	if (rc)
		ku_counter_add(t->m_poisoned, 1);
	if (rc)
		KLOG_ERR("ptable", "%s/%d: flush failed: %s (partition poisoned)", e->topic->name, e->index,
			 sub_strerror(rc));
	/* Success was announced by the listener; the flush's answer matters
	 * only when the leadership it flushed for has ended (no retire, so
	 * no listener call) or when it failed. */
	settle(e, rc != 0, rc ? -1 : durable);
}

void *kb__flusher_main(void *arg)
{
	kb_ptable *t = arg;
	kb__lock(&t->fmu, KB_FMU);
	if (!t->census_ready) { /* the flushers feed these series: the first one registers them */
		kb__census_init(t);
		t->census_ready = 1;
	}
	for (;;) {
		while (!t->dhead && !t->fstop)
			pthread_cond_wait(&t->fcv, &t->fmu);
		kb_pentry *e = t->dhead;
		if (!e)
			break;
		t->dhead = e->dnext;
		if (!t->dhead)
			t->dtail = NULL;
		KAAS_ASSERT(e->queued && e->refs > 0); /* the queue's reference */
		e->queued = 0; /* appends from now on queue it again */
		kb__unlock(&t->fmu, KB_FMU);
		flush_entry(t, e);
		kb__put_entry(t, e);
		kb__lock(&t->fmu, KB_FMU);
	}
	kb__unlock(&t->fmu, KB_FMU);
	return NULL;
}

void kb__fail_waiters(kb_pentry *e, int16_t err)
{
	dwaiter *w;
	while ((w = e->waiters)) {
		e->waiters = w->next;
		w->fn(w->arg, err, -1);
		free(w);
	}
}

void kb_ptable_dirty(kb_pref *ref)
{
	if (ref && ref->e)
		kb__enqueue_dirty(ref->e->t, ref->e);
}

int kb_ptable_when_durable(kb_pref *ref, int64_t offset, kb_durable_fn fn, void *arg)
{
	kb_pentry *e = ref->e;
	kb_ptable *t = e->t;
	kb__lock(&t->mu, KB_MU);
	if (e->durable >= offset) {
		int64_t hw = e->durable;
		kb__unlock(&t->mu, KB_MU);
		if (!kb_ptable_ack_ok(t))
			fn(arg, KERR_REQUEST_TIMED_OUT, -1); /* written and durable: outcome unknown */
		else
			fn(arg, KERR_NONE, hw);
		return 0;
	}
	dwaiter *w = malloc(sizeof(*w));
	if (!w) {
		kb__unlock(&t->mu, KB_MU);
		return -ENOMEM;
	}
	w->offset = offset;
	w->fn = fn;
	w->arg = arg;
	w->next = e->waiters;
	e->waiters = w;
	kb__unlock(&t->mu, KB_MU);
	kb__enqueue_dirty(t, e);
	return 0;
}

kb_watch *kb_ptable_watch(kb_pref *ref, int64_t offset, kb_watch_fn fn, void *arg)
{
	kb_pentry *e = ref->e;
	kb_ptable *t = e->t;
	kb_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->offset = offset;
	w->fn = fn;
	w->arg = arg;
	kb__lock(&t->mu, KB_MU);
	if (e->durable > offset || e->topic->dropping || t->stopped) {
		fn(arg);
	} else {
		w->e = e;
		w->next = e->watches;
		if (e->watches)
			e->watches->prev = w;
		e->watches = w;
	}
	kb__unlock(&t->mu, KB_MU);
	return w;
}

void kb_ptable_unwatch(kb_ptable *t, kb_watch *w)
{
	if (!w)
		return;
	kb__lock(&t->mu, KB_MU);
	kb_pentry *e = w->e;
	if (e) {
		if (w->prev)
			w->prev->next = w->next;
		else
			e->watches = w->next;
		if (w->next)
			w->next->prev = w->prev;
	}
	kb__unlock(&t->mu, KB_MU);
	free(w);
}

void kb_ptable_wake_all(kb_ptable *t)
{
	kb__lock(&t->mu, KB_MU);
	t->stopped = 1;
	for (int b = 0; b < NBUCKETS; b++)
		for (ptopic *tp = t->buckets[b]; tp; tp = tp->next)
			for (int32_t i = 0; i < tp->n; i++)
				kb__fire_watches(tp->parts[i], 1);
	kb__unlock(&t->mu, KB_MU);
	kb__hold_sweep(t); /* parked produces go ahead (and are refused) */
}

