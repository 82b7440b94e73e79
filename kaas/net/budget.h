/*
 * budget.h — the broker-wide budget of request bytes (queued.max.request.bytes):
 * bytes of frames received, or being received, and not answered yet.
 *
 * A connection asks for a frame's size before allocating it.  When the
 * budget cannot cover it, the connection waits in a FIFO; releases grant the
 * waiters in that order, and a waiter that does not fit stops the line
 * (nobody overtakes it, so a large frame is never starved by small ones).
 * Fair share: while others wait, a connection that already holds more than
 * its share (the limit divided among the connections holding bytes or
 * waiting) is passed over until it holds less, so one connection pipelining
 * requests cannot take the budget from the others.  A waiter is always
 * granted when nothing is held but what waiters kept while waiting
 * (kn_budget_keep), so a frame larger than the whole budget is still
 * served, alone, and kept bytes never stop the line.
 *
 * What holds the budget longest is a frame that is slow to arrive: the
 * server drops those (kaas.request.min.bytes.per.sec, conn.c).
 *
 * Loop-thread only; no allocation: waiters are embedded in their owner.
 */
#ifndef KAAS_SERVER_BUDGET_H
#define KAAS_SERVER_BUDGET_H

#include <stdint.h>

enum { KAAS_BW_IDLE = 0, KAAS_BW_QUEUED, KAAS_BW_GRANTED };

typedef struct kn_budget_waiter {
	struct kn_budget_waiter *prev, *next;
	int64_t need; /* bytes asked for */
	int64_t kept; /* bytes charged for it while it waits (kn_budget_keep) */
	int64_t held; /* everything its owner holds (grants, kept, minus owned releases) */
	uint64_t seq; /* queueing order */
	int state;    /* KAAS_BW_* */
} kn_budget_waiter;

typedef struct kn_budget {
	int64_t limit; /* -1: unbounded */
	int64_t held;   /* everything charged, kept bytes included */
	int64_t kept;   /* bytes kept by the waiters in the queue */
	int nqueued;
	int nholders;   /* owners whose held > 0 */
	uint64_t seq;
	uint64_t passed; /* grants that passed over a waiter above its share */
	kn_budget_waiter *qhead, *qtail; /* waiting, in arrival order */
	kn_budget_waiter *ghead, *gtail; /* granted, not collected yet */
} kn_budget;

void kn_budget_init(kn_budget *b, int64_t limit);

/* Nobody waits and `chunk` more bytes fit: a reader may take in a whole
 * chunk of frames without asking frame by frame first. */
int kn_budget_loose(const kn_budget *b, int64_t chunk);

/* Asks for `need` bytes for w (which must be idle).  1: granted, held grows
 * by need.  0: w is queued behind the waiters already there (also when the
 * bytes would fit: nobody overtakes the queue). */
int kn_budget_acquire(kn_budget *b, kn_budget_waiter *w, int64_t need);

/* Charges n bytes a queued w has already read and keeps while it waits (no
 * admission: they are in memory).  They stay charged after the grant, until
 * released; while w waits they count against no grant. */
void kn_budget_keep(kn_budget *b, kn_budget_waiter *w, int64_t n);

/* Gives n bytes back and moves the queue's head to the granted list for as
 * long as it fits.  Returns how many waiters were granted.  The _owned form
 * also takes them from what w's owner holds (its fair share). */
int kn_budget_release(kn_budget *b, int64_t n);
int kn_budget_release_owned(kn_budget *b, kn_budget_waiter *w, int64_t n);

/* The share of one connection while others wait: the limit divided among
 * the owners holding bytes and the waiters holding none. */
int64_t kn_budget_share(const kn_budget *b);

/* The oldest granted waiter (now idle again), or NULL. */
kn_budget_waiter *kn_budget_collect(kn_budget *b);

/* Takes w out of the queue or the granted list, giving back what a grant
 * added (its kept bytes stay charged: the caller releases them with what it
 * frees).  Returns how many waiters that granted. */
int kn_budget_cancel(kn_budget *b, kn_budget_waiter *w);

#endif
