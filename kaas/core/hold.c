/*
 * hold.c — what a producer is told around a take-over: produce requests
 * parked while a take-over of one of their partitions is pending or under
 * way on this broker (released in order once it ends, or timed out), and
 * the refused batches of idempotent producers remembered so that the gap a
 * refusal leaves is not judged against them.  ptable.h has the contract,
 * docs/cluster.md ("What a producer is told") the reasons.
 *
 * Parked requests form one list, oldest first (mu).  A request waits while
 * one of its partitions is pending or an earlier parked or released request
 * shares a partition or the connection with it, so the requests of one
 * connection run in the order they arrived, each after the one before it
 * finished its appends (kb_ptable_hold_done), whatever worker runs them.
 * A request's timer handle is given back by whoever takes it off the
 * parked state first (the sweep that releases it, a time-out of an earlier
 * request of its connection, or its own timer); its memory by the last of
 * its two references (the caller's, the timer's).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/leaders.h"
#include "kaas/core/ptable_int.h"
#include "util/clock.h"
#include "util/log.h"

enum { H_PARKED = 1, H_RUNNING = 2, H_TIMED_OUT = 3 };

struct kb_hold {
	struct kb_hold *prev, *next; /* the parked list (mu), while linked */
	struct kb_hold *rnext;       /* a sweep's or a time-out's batch */
	int linked;
	kb_ptable *t;
	uint64_t conn;
	kb_hold_key *keys;
	size_t n;
	kb_hold_fn fn;
	void *arg;
	int state;
	kb_timer *timer;
	int refs; /* mu */
};

/* ---- pending take-overs ------------------------------------------------------------------------- */

/* mu held */
static int entry_pending(kb_ptable *t, ptopic *tp, int32_t i)
{
	kb_pentry *e = tp->parts[i];
	if (e->taking)
		return 1;
	if (!t->leaders || t->stopped || tp->dropping)
		return 0;
	int32_t leader, epoch;
	if (kb_leaders_find(t->leaders, tp->name, i, &leader, &epoch) || leader != t->b->id || epoch <= 0)
		return 0;
	if (e->state == PE_LEADER && e->epoch >= epoch)
		return 0;
	/* A take-over that failed at this epoch answers KAFKA_STORAGE_ERROR
	 * until it is re-driven (then it is `taking` again). */
	if (e->state == PE_FAILED && e->tried_epoch == epoch)
		return 0;
	return 1;
}

/* mu held */
static int key_pending(kb_ptable *t, const kb_hold_key *k)
{
	if (k->topic.len <= 0)
		return 0;
	ptopic *tp = kb__find_topic(t, k->topic.s, (size_t)k->topic.len);
	if (!tp || tp->dropping || k->partition < 0 || k->partition >= tp->n)
		return 0;
	return entry_pending(t, tp, k->partition);
}

int kb_ptable_pending(kb_ptable *t, kw_str topic, int32_t partition)
{
	kb_hold_key k = {topic, partition};
	kb__lock(&t->mu, KB_MU);
	int p = key_pending(t, &k);
	kb__unlock(&t->mu, KB_MU);
	return p;
}

/* ---- parked requests ---------------------------------------------------------------------------- */

int kb__entry_take_over(kb_ptable *t, kb_pentry *e, int32_t epoch)
{
	kb__lock(&t->mu, KB_MU);
	e->taking = 1;
	kb__unlock(&t->mu, KB_MU);
	int rc = kb__entry_take_over_io(t, e, epoch);
	kb__lock(&t->mu, KB_MU);
	e->taking = 0;
	kb__unlock(&t->mu, KB_MU);
	kb__hold_sweep(t); /* what waited for it goes now, in order */
	return rc;
}

static int same_key(const kb_hold_key *a, const kb_hold_key *b)
{
	return a->partition == b->partition && a->topic.len == b->topic.len &&
	       memcmp(a->topic.s, b->topic.s, (size_t)a->topic.len) == 0;
}

/* Whether a request (conn, keys) must come after h (mu held). */
static int behind(const kb_hold *h, uint64_t conn, const kb_hold_key *keys, size_t n)
{
	if (h->state != H_PARKED && h->state != H_RUNNING)
		return 0;
	if (h->conn == conn)
		return 1;
	for (size_t i = 0; i < h->n; i++)
		for (size_t k = 0; k < n; k++)
			if (same_key(&h->keys[i], &keys[k]))
				return 1;
	return 0;
}

/* mu held: may h go ahead now? */
static int blocked(kb_ptable *t, const kb_hold *h)
{
	for (size_t i = 0; i < h->n; i++)
		if (key_pending(t, &h->keys[i]))
			return 1;
	for (const kb_hold *o = t->holds; o && o != h; o = o->next)
		if (behind(o, h->conn, h->keys, h->n))
			return 1;
	return 0;
}

static void unlink_hold(kb_ptable *t, kb_hold *h)
{
	if (!h->linked)
		return;
	if (h->prev)
		h->prev->next = h->next;
	else
		t->holds = h->next;
	if (h->next)
		h->next->prev = h->prev;
	else
		t->holds_tail = h->prev;
	h->prev = h->next = NULL;
	h->linked = 0;
}

/* mu held; 1 when the caller must free h (after dropping mu). */
static int unref(kb_hold *h)
{
	KAAS_ASSERT(h->refs > 0);
	return --h->refs == 0;
}

static void hold_free(kb_hold *h)
{
	free(h->keys);
	free(h);
}

/* Gives back the timer handle of a hold this thread took off H_PARKED
 * (not from its own timer callback): a timer prevented from running drops
 * the timer's reference here, one that fired drops it in its callback. */
static void give_back_timer(kb_ptable *t, kb_hold *h)
{
	if (kb_timer_cancel(t->b, h->timer) == 1) {
		kb__lock(&t->mu, KB_MU);
		int last = unref(h);
		kb__unlock(&t->mu, KB_MU);
		KAAS_ASSERT(!last); /* the caller's reference lasts until hold_done */
		(void)last;
	}
}

static void run_released(void *arg)
{
	kb_hold *h = arg;
	h->fn(h->arg, 0);
}

void kb__hold_sweep(kb_ptable *t)
{
	kb_hold *go = NULL, **tail = &go;
	kb__lock(&t->mu, KB_MU);
	for (kb_hold *h = t->holds; h; h = h->next)
		if (h->state == H_PARKED && (t->stopped || !blocked(t, h))) {
			h->state = H_RUNNING;
			h->rnext = NULL;
			*tail = h;
			tail = &h->rnext;
		}
	kb__unlock(&t->mu, KB_MU);
	while (go) {
		kb_hold *h = go;
		go = h->rnext;
		give_back_timer(t, h);
		if (kb_broker_run(t->b, run_released, h))
			run_released(h); /* no worker to be had: here, in order */
	}
}

static void on_hold_timeout(void *arg)
{
	kb_hold *h = arg;
	kb_ptable *t = h->t;
	kb_hold *out = NULL, **tail = &out;
	kb__lock(&t->mu, KB_MU);
	if (h->state != H_PARKED) {
		/* Released or timed out by someone else, who gives the handle back. */
		int last = unref(h);
		kb__unlock(&t->mu, KB_MU);
		if (last)
			hold_free(h);
		return;
	}
	/* Every request of the connection parked behind it goes with it: none of
	 * them may be judged after the take-over once this one was refused. */
	for (kb_hold *x = h, *nx; x; x = nx) {
		nx = x->next;
		if (x == h || (x->state == H_PARKED && x->conn == h->conn)) {
			x->state = H_TIMED_OUT;
			unlink_hold(t, x);
			x->rnext = NULL;
			*tail = x;
			tail = &x->rnext;
		}
	}
	kb__unlock(&t->mu, KB_MU);
	KLOG_INFO("ptable", "a produce waited its timeout for a take-over here; answered as not led");
	while (out) {
		kb_hold *x = out;
		out = x->rnext;
		if (x == h) {
			kb_timer_cancel(t->b, h->timer); /* fired: the handle is given back */
			kb__lock(&t->mu, KB_MU);
			int last = unref(h);
			kb__unlock(&t->mu, KB_MU);
			KAAS_ASSERT(!last);
			(void)last;
		} else {
			give_back_timer(t, x);
		}
		x->fn(x->arg, 1);
	}
	kb__hold_sweep(t); /* what waited behind them may go now */
}

int kb_ptable_hold(kb_ptable *t, uint64_t conn_id, const kb_hold_key *keys, size_t n, int64_t timeout_ms,
		   kb_hold_fn fn, void *arg, kb_hold **out)
{
	*out = NULL;
	/* Without the lease nothing is served; without timers nothing could
	 * bound the wait: go ahead (the lookups answer). */
	if (n == 0 || timeout_ms <= 0 || !t->b->ops || !kb_ptable_ack_ok(t))
		return 0;
	kb__lock(&t->mu, KB_MU);
	int need = 0;
	if (t->stopped) /* nothing would release it: the lookups answer */
		n = 0;
	for (size_t i = 0; i < n && !need; i++)
		need = key_pending(t, &keys[i]);
	for (const kb_hold *o = t->holds; o && !need && n; o = o->next)
		need = behind(o, conn_id, keys, n);
	kb__unlock(&t->mu, KB_MU);
	if (!need)
		return 0;
	kb_hold *h = calloc(1, sizeof(*h));
	kb_hold_key *k = h ? calloc(n, sizeof(*k)) : NULL;
	if (!k) {
		free(h);
		return -ENOMEM;
	}
	memcpy(k, keys, n * sizeof(*k));
	h->t = t;
	h->conn = conn_id;
	h->keys = k;
	h->n = n;
	h->fn = fn;
	h->arg = arg;
	h->state = H_PARKED;
	h->refs = 2; /* the caller's and the timer's */
	kb__lock(&t->mu, KB_MU);
	/* Linked and timed under mu: neither a sweep nor the timer can see
	 * the hold before both are in place. */
	h->timer = kb_timer_start(t->b, timeout_ms, on_hold_timeout, h);
	if (!h->timer) {
		kb__unlock(&t->mu, KB_MU);
		hold_free(h);
		return -ENOMEM;
	}
	h->prev = t->holds_tail;
	if (t->holds_tail)
		t->holds_tail->next = h;
	else
		t->holds = h;
	t->holds_tail = h;
	h->linked = 1;
	kb__unlock(&t->mu, KB_MU);
	*out = h;
	/* The take-over may have ended between the check and the link. */
	kb__hold_sweep(t);
	return 1;
}

void kb_ptable_hold_done(kb_ptable *t, kb_hold *h)
{
	if (!h)
		return;
	kb__lock(&t->mu, KB_MU);
	unlink_hold(t, h);
	int last = unref(h);
	kb__unlock(&t->mu, KB_MU);
	if (last)
		hold_free(h);
	kb__hold_sweep(t);
}

/* ---- refused batches ---------------------------------------------------------------------------- */

struct kb_refusal {
	int64_t pid;
	int16_t epoch;
	int32_t seq;
	int64_t at_ms;
};

void kb__entry_free(kb_pentry *e)
{
	if (e && e->nrefused)
		__atomic_sub_fetch(&e->t->nrefusing, 1, __ATOMIC_RELAXED);
	if (e)
		free(e->refused);
	free(e);
}

/* mu held: keeps the count of entries remembering a refusal, which lets
 * the data path skip the lock while nothing is remembered anywhere. */
static void recount(kb_pentry *e, int before)
{
	int after = e->nrefused > 0;
	if (before != after)
		__atomic_add_fetch(&e->t->nrefusing, after ? 1 : -1, __ATOMIC_RELAXED);
}

/* mu held */
static kb_pentry *entry_of(kb_ptable *t, kw_str topic, int32_t partition)
{
	if (topic.len <= 0)
		return NULL;
	ptopic *tp = kb__find_topic(t, topic.s, (size_t)topic.len);
	if (!tp || partition < 0 || partition >= tp->n)
		return NULL;
	return tp->parts[partition];
}

/* mu held: the producer's slot, or -1; expired ones are dropped on the way. */
static int refusal_find(kb_pentry *e, int64_t pid, int64_t now)
{
	for (int i = 0; i < e->nrefused;) {
		if (now - e->refused[i].at_ms > KB_REFUSAL_TTL_MS) {
			e->refused[i] = e->refused[--e->nrefused];
			continue;
		}
		if (e->refused[i].pid == pid)
			return i;
		i++;
	}
	return -1;
}

void kb_ptable_refusal_note(kb_ptable *t, kw_str topic, int32_t partition, int64_t pid, int16_t epoch,
			    int32_t seq)
{
	if (pid < 0 || seq < 0)
		return;
	int64_t now = ku_mono_ms();
	kb__lock(&t->mu, KB_MU);
	kb_pentry *e = entry_of(t, topic, partition);
	if (e && !e->refused)
		e->refused = calloc(KB_REFUSALS, sizeof(*e->refused));
	if (e && e->refused) {
		int before = e->nrefused > 0;
		int i = refusal_find(e, pid, now);
		if (i >= 0 && e->refused[i].epoch == epoch && e->refused[i].seq <= seq) {
			/* The earliest refused batch of the epoch is where it resumes. */
			e->refused[i].at_ms = now;
		} else {
			if (i < 0 && e->nrefused == KB_REFUSALS) {
				int old = 0;
				for (int k = 1; k < e->nrefused; k++)
					if (e->refused[k].at_ms < e->refused[old].at_ms)
						old = k;
				i = old;
			} else if (i < 0) {
				i = e->nrefused++;
			}
			e->refused[i] = (struct kb_refusal){pid, epoch, seq, now};
		}
		recount(e, before);
	}
	kb__unlock(&t->mu, KB_MU);
}

int kb_ptable_refusal_check(kb_ptable *t, kw_str topic, int32_t partition, int64_t pid, int16_t epoch,
			    int32_t seq)
{
	if (pid < 0 || !__atomic_load_n(&t->nrefusing, __ATOMIC_RELAXED))
		return 0;
	int hit = 0;
	kb__lock(&t->mu, KB_MU);
	kb_pentry *e = entry_of(t, topic, partition);
	int before = e && e->nrefused > 0;
	int i = e && e->refused ? refusal_find(e, pid, ku_mono_ms()) : -1;
	if (i >= 0)
		hit = e->refused[i].epoch == epoch && seq > e->refused[i].seq;
	if (e)
		recount(e, before);
	kb__unlock(&t->mu, KB_MU);
	return hit;
}

void kb_ptable_refusal_clear(kb_ptable *t, kw_str topic, int32_t partition, int64_t pid)
{
	/* Every accepted batch of an idempotent producer comes here: nothing
	 * remembered anywhere (the usual case) costs no lock. */
	if (pid < 0 || !__atomic_load_n(&t->nrefusing, __ATOMIC_RELAXED))
		return;
	kb__lock(&t->mu, KB_MU);
	kb_pentry *e = entry_of(t, topic, partition);
	int before = e && e->nrefused > 0;
	int i = e && e->nrefused ? refusal_find(e, pid, ku_mono_ms()) : -1;
	if (i >= 0)
		e->refused[i] = e->refused[--e->nrefused];
	if (e)
		recount(e, before);
	kb__unlock(&t->mu, KB_MU);
}
