/*
 * budget.c — queued.max.request.bytes: admission of request frames against
 * one broker-wide byte budget, with a FIFO of connections waiting for it
 * (budget.h).  Kept apart from the event loop so it can be tested alone.
 */
#include "kaas/net/budget.h"

#include <stddef.h>

#include "util/assert.h"

void kn_budget_init(kn_budget *b, int64_t limit)
{
	*b = (kn_budget){.limit = limit};
}

int kn_budget_loose(const kn_budget *b, int64_t chunk)
{
	return !b->qhead && (b->limit < 0 || b->held + chunk <= b->limit);
}

/* Whether w's request fits.  What waiters keep does not count: counting it,
 * two waiters could each wait for the other's few bytes forever. */
static int fits(const kn_budget *b, const kn_budget_waiter *w)
{
	int64_t used = b->held - b->kept;
	return b->limit < 0 || used <= 0 || used + w->need <= b->limit;
}

static void unlink_w(kn_budget_waiter **head, kn_budget_waiter **tail, kn_budget_waiter *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		*head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		*tail = w->prev;
	w->prev = w->next = NULL;
}

static void append_w(kn_budget_waiter **head, kn_budget_waiter **tail, kn_budget_waiter *w)
{
	w->next = NULL;
	w->prev = *tail;
	if (*tail)
		(*tail)->next = w;
	else
		*head = w;
	*tail = w;
}

/* The sums the admission relies on.  Cheap enough for every call in the
 * asserting builds only: it walks the queue. */
static void check(const kn_budget *b)
{
	KAAS_ASSERT(b->held >= 0 && b->kept >= 0 && b->kept <= b->held);
	KAAS_ASSERT(b->nqueued >= 0 && b->nholders >= 0);
#ifdef KAAS_ASSERTS
	int64_t kept = 0;
	int n = 0;
	for (const kn_budget_waiter *w = b->qhead; w; w = w->next, n++) {
		KAAS_ASSERT(w->state == KAAS_BW_QUEUED);
		KAAS_ASSERT(!w->next || w->seq < w->next->seq); /* FIFO */
		kept += w->kept;
	}
	KAAS_ASSERT(n == b->nqueued && kept == b->kept);
#endif
}

static void owner_add(kn_budget *b, kn_budget_waiter *w, int64_t n)
{
	if (w->held <= 0 && w->held + n > 0)
		b->nholders++;
	else if (w->held > 0 && w->held + n <= 0)
		b->nholders--;
	w->held += n;
	KAAS_ASSERT(w->held >= 0);
}

int64_t kn_budget_share(const kn_budget *b)
{
	if (b->limit < 0)
		return INT64_MAX;
	int64_t owners = b->nholders;
	for (const kn_budget_waiter *w = b->qhead; w; w = w->next)
		owners += w->held <= 0;
	return owners > 0 ? b->limit / owners : b->limit;
}

static void grant(kn_budget *b, kn_budget_waiter *w)
{
	KAAS_ASSERT(w->state == KAAS_BW_QUEUED && fits(b, w)); /* granted <= capacity, or alone */
	unlink_w(&b->qhead, &b->qtail, w);
	b->nqueued--;
	b->kept -= w->kept;
	b->held += w->need;
	owner_add(b, w, w->need);
	w->state = KAAS_BW_GRANTED;
	append_w(&b->ghead, &b->gtail, w);
}

/* In queue order: a waiter that does not fit stops the line; one that fits
 * but whose owner already holds more than its share while others wait is
 * passed over (it is granted once it holds less, or waits alone). */
static int grant_fitting(kn_budget *b)
{
	int n = 0;
	int64_t share = b->qhead ? kn_budget_share(b) : 0;
	kn_budget_waiter *w = b->qhead;
	while (w && fits(b, w)) {
		kn_budget_waiter *nx = w->next;
		int64_t other = w->held - w->kept; /* held apart from this frame */
		if (other > 0 && other + w->kept + w->need > share && b->nqueued > 1) {
			w = nx;
			continue;
		}
		if (w != b->qhead)
			b->passed++;
		grant(b, w);
		n++;
		w = nx;
	}
	/* Only over-share waiters were left, and they fit: grant the oldest,
	 * nobody else wants the room. */
	if (n == 0 && b->qhead && b->nqueued == 1 && fits(b, b->qhead)) {
		grant(b, b->qhead);
		n++;
	}
	check(b);
	return n;
}

int kn_budget_acquire(kn_budget *b, kn_budget_waiter *w, int64_t need)
{
	KAAS_ASSERT(w->state == KAAS_BW_IDLE && need >= 0);
	w->need = need;
	w->kept = 0;
	if (!b->qhead && fits(b, w)) {
		b->held += need;
		owner_add(b, w, need);
		check(b);
		return 1;
	}
	w->state = KAAS_BW_QUEUED;
	w->seq = ++b->seq;
	append_w(&b->qhead, &b->qtail, w);
	b->nqueued++;
	check(b);
	return 0;
}

void kn_budget_keep(kn_budget *b, kn_budget_waiter *w, int64_t n)
{
	KAAS_ASSERT(n >= 0);
	b->held += n;
	if (w->state == KAAS_BW_QUEUED)
		b->kept += n;
	w->kept += n;
	owner_add(b, w, n);
	check(b);
}

int kn_budget_release(kn_budget *b, int64_t n)
{
	KAAS_ASSERT(n >= 0);
	b->held -= n;
	return grant_fitting(b);
}

int kn_budget_release_owned(kn_budget *b, kn_budget_waiter *w, int64_t n)
{
	if (w)
		owner_add(b, w, -n);
	return kn_budget_release(b, n);
}

kn_budget_waiter *kn_budget_collect(kn_budget *b)
{
	kn_budget_waiter *w = b->ghead;
	if (w) {
		unlink_w(&b->ghead, &b->gtail, w);
		w->state = KAAS_BW_IDLE;
	}
	return w;
}

int kn_budget_cancel(kn_budget *b, kn_budget_waiter *w)
{
	if (w->state == KAAS_BW_QUEUED) {
		unlink_w(&b->qhead, &b->qtail, w);
		b->nqueued--;
		b->kept -= w->kept;
	} else if (w->state == KAAS_BW_GRANTED) {
		unlink_w(&b->ghead, &b->gtail, w);
		b->held -= w->need;
		owner_add(b, w, -w->need);
	} else {
		return 0;
	}
	w->state = KAAS_BW_IDLE;
	/* The head may have been waiting behind w, or for what w was granted. */
	return grant_fitting(b);
}
