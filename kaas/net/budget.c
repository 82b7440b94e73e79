/*
 * budget.c — queued.max.request.bytes: admission of request frames against
 * one broker-wide byte budget, with a FIFO of connections waiting for it
 * (budget.h).  Kept apart from the event loop so it can be tested alone.
 */
#include "kaas/net/budget.h"

#include <stddef.h>

void kaas_budget_init(kaas_budget *b, int64_t limit)
{
	*b = (kaas_budget){.limit = limit};
}

int kaas_budget_loose(const kaas_budget *b, int64_t chunk)
{
	return !b->qhead && (b->limit < 0 || b->held + chunk <= b->limit);
}

/* Whether w's request fits.  What waiters keep does not count: counting it,
 * two waiters could each wait for the other's few bytes forever. */
static int fits(const kaas_budget *b, const kaas_budget_waiter *w)
{
	int64_t used = b->held - b->kept;
	return b->limit < 0 || used <= 0 || used + w->need <= b->limit;
}

static void unlink_w(kaas_budget_waiter **head, kaas_budget_waiter **tail, kaas_budget_waiter *w)
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

static void append_w(kaas_budget_waiter **head, kaas_budget_waiter **tail, kaas_budget_waiter *w)
{
	w->next = NULL;
	w->prev = *tail;
	if (*tail)
		(*tail)->next = w;
	else
		*head = w;
	*tail = w;
}

static int grant_fitting(kaas_budget *b)
{
	int n = 0;
	while (b->qhead && fits(b, b->qhead)) {
		kaas_budget_waiter *w = b->qhead;
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

int kaas_budget_acquire(kaas_budget *b, kaas_budget_waiter *w, int64_t need)
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

void kaas_budget_keep(kaas_budget *b, kaas_budget_waiter *w, int64_t n)
{
	b->held += n;
	if (w->state == KAAS_BW_QUEUED)
		b->kept += n;
	w->kept += n;
}

int kaas_budget_release(kaas_budget *b, int64_t n)
{
	b->held -= n;
	return grant_fitting(b);
}

kaas_budget_waiter *kaas_budget_collect(kaas_budget *b)
{
	kaas_budget_waiter *w = b->ghead;
	if (w) {
		unlink_w(&b->ghead, &b->gtail, w);
		w->state = KAAS_BW_IDLE;
	}
	return w;
}

int kaas_budget_cancel(kaas_budget *b, kaas_budget_waiter *w)
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
