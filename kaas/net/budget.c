/*
 * budget.c — queued.max.request.bytes: admission of request frames against
 * one broker-wide byte budget, with a FIFO of connections waiting for it
 * (budget.h).  Kept apart from the event loop so it can be tested alone.
 */
#include "kaas/net/budget.h"

#include <stddef.h>

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

static int grant_fitting(kn_budget *b)
{
	int n = 0;
	while (b->qhead && fits(b, b->qhead)) {
		kn_budget_waiter *w = b->qhead;
		unlink_w(&b->qhead, &b->qtail, w);
		b->nqueued--;
		b->kept -= w->kept;
		b->held += w->need;
		w->state = KAAS_BW_GRANTED;
		append_w(&b->ghead, &b->gtail, w);
		n++;
	}
	return n;
}

int kn_budget_acquire(kn_budget *b, kn_budget_waiter *w, int64_t need)
{
	w->need = need;
	w->kept = 0;
	if (!b->qhead && fits(b, w)) {
		b->held += need;
		return 1;
	}
	w->state = KAAS_BW_QUEUED;
	append_w(&b->qhead, &b->qtail, w);
	b->nqueued++;
	return 0;
}

void kn_budget_keep(kn_budget *b, kn_budget_waiter *w, int64_t n)
{
	b->held += n;
	if (w->state == KAAS_BW_QUEUED)
		b->kept += n;
	w->kept += n;
}

int kn_budget_release(kn_budget *b, int64_t n)
{
	b->held -= n;
	return grant_fitting(b);
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
	} else {
		return 0;
	}
	w->state = KAAS_BW_IDLE;
	/* The head may have been waiting behind w, or for what w was granted. */
	return grant_fitting(b);
}
