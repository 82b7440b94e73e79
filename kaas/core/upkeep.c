/*
 * upkeep.c — the partition table's periodic work (kb_ptable_housekeep, on a
 * worker every second): noticing partitions poisoned by a failed write,
 * taking failed and poisoned ones over again at a new epoch (within the
 * descriptor limit), the background scrub of the leaders' sealed segments
 * (scrub.c), and retention and age-based rolls on the leaders.  Log
 * compaction runs on a thread of its own (cleaner.c): a pass can take
 * minutes at a bounded I/O rate and must not hold up this round.
 */
#include <errno.h>
#include <stdlib.h>

#include "kaas/core/ptable_int.h"
#include "util/clock.h"
#include "util/grow.h"
#include "util/log.h"

/* ---- housekeeping ---------------------------------------------------------------------------------- */

/* The leaders of the topics not being dropped, each with a reference (kb__put_entry
 * each one), so their partitions can be visited without holding mu across the
 * partition locks (an append may hold one through a slow write).  Out of
 * memory, the list stops short: the rest wait for the next round. */
kb_pentry **kb__ref_leaders(kb_ptable *t, size_t *n)
{
	kb_pentry **v = NULL;
	size_t nv = 0, cap = 0;
	kb__lock(&t->mu, KB_MU);
	for (int b = 0; b < NBUCKETS && !t->stopped; b++)
		for (ptopic *tp = t->buckets[b]; tp; tp = tp->next) {
			if (tp->dropping)
				continue;
			for (int32_t i = 0; i < tp->n; i++) {
				kb_pentry *e = tp->parts[i];
				if (e->state != PE_LEADER || !e->p)
					continue;
				if (KAAS_GROW(v, nv, cap, 64))
					goto out;
				e->refs++;
				v[nv++] = e;
			}
		}
out:
	kb__unlock(&t->mu, KB_MU);
	*n = nv;
	return v;
}

/* Re-drives failed and poisoned partitions with a new epoch (Rule 2); ctl
 * held.  At the descriptor limit the rest of a round would fail the same
 * way, one error line each: they wait for their next turn instead, with a
 * longer delay, and one line says how many. */
static void redrive_failed(kb_ptable *t, int64_t now)
{
	kb_pentry **todo = NULL;
	int32_t *eps = NULL;
	size_t nt = 0, cap = 0, i = 0;
	kb__lock(&t->mu, KB_MU);
	for (int b = 0; b < NBUCKETS; b++)
		for (ptopic *tp = t->buckets[b]; tp; tp = tp->next)
			for (int32_t k = 0; k < tp->n; k++) {
				kb_pentry *e = tp->parts[k];
				if (e->state == PE_FAILED && e->retry_at_ms <= now && !KAAS_GROW(todo, nt, cap, 16))
					todo[nt++] = e;
			}
	kb__unlock(&t->mu, KB_MU);
	if (nt == 0 || !(eps = calloc(nt, sizeof(int32_t))))
		goto out;
	for (i = 0; i < nt; i++)
		eps[i] = kb__next_epoch(t, todo[i]->topic->name, todo[i]->index, todo[i]->epoch);
	if (kb__assign_write(t))
		goto out;
	for (i = 0; i < nt;) {
		KLOG_INFO("ptable", "%s/%d: re-driving take-over at epoch %d", todo[i]->topic->name, todo[i]->index,
			  eps[i]);
		int rc = kb__entry_take_over(t, todo[i], eps[i]);
		i++;
		if (rc == -EMFILE || rc == -ENFILE)
			break;
	}
	if (i < nt) {
		int64_t delay = 0;
		kb__lock(&t->mu, KB_MU);
		for (size_t k = i; k < nt; k++) {
			kb_pentry *e = todo[k];
			e->retry_delay_ms = e->retry_delay_ms ? e->retry_delay_ms * 2 : RETRY_MIN_MS;
			if (e->retry_delay_ms > RETRY_MAX_MS)
				e->retry_delay_ms = RETRY_MAX_MS;
			e->retry_at_ms = now + e->retry_delay_ms;
			delay = e->retry_delay_ms;
		}
		kb__unlock(&t->mu, KB_MU);
		KLOG_WARN("ptable", "out of descriptors: %zu more partition(s) wait to be led (next attempt in about "
			  "%lld s; raise the descriptor limit, ulimit -n)", nt - i, (long long)(delay / 1000));
	}
out:
	free(eps);
	free(todo);
}

void kb_ptable_housekeep(kb_ptable *t)
{
	int64_t now = ku_mono_ms();
	size_t nl;
	kb_pentry **lead = kb__ref_leaders(t, &nl);
	for (size_t i = 0; i < nl; i++) {
		int32_t ep;
		if (ks_partition_state_of(lead[i]->p, &ep) == KAAS_PART_POISONED) {
			kb__lock(&t->mu, KB_MU);
			if (lead[i]->state == PE_LEADER) {
				lead[i]->state = PE_FAILED;
				lead[i]->err = -EIO;
				lead[i]->retry_at_ms = now;
				KLOG_WARN("ptable", "%s/%d: poisoned by a failed write; taking it over again",
					  lead[i]->topic->name, lead[i]->index);
			}
			kb__unlock(&t->mu, KB_MU);
		}
	}
	kb__scrub_round(t, lead, nl, now);
	for (size_t i = 0; i < nl; i++)
		kb__put_entry(t, lead[i]);
	free(lead);

	if (kb__trylock(&t->ctl, KB_CTL)) {
		/* Driven: the cluster's driver re-drives at the assigned epoch. */
		if (!t->stopped && !t->driven)
			redrive_failed(t, now);
		kb__unlock(&t->ctl, KB_CTL);
	}
	/* Retention and age-based rolls, without holding ctl. */
	if (now - t->last_retention_ms < t->b->cfg.retention_check_interval_ms)
		return;
	t->last_retention_ms = now;
	size_t n;
	kb_pentry **refs = kb__ref_leaders(t, &n);
	int64_t wall = ku_wall_ms();
	for (size_t i = 0; i < n; i++) {
		int r = ks_partition_housekeep(refs[i]->p, wall);
		if (r > 0)
			KLOG_INFO("ptable", "%s/%d: retention deleted %d segment(s)", refs[i]->topic->name,
				  refs[i]->index, r);
		else if (r < 0)
			KLOG_WARN("ptable", "%s/%d: housekeeping: %s", refs[i]->topic->name, refs[i]->index,
				  sub_strerror(r));
		kb__put_entry(t, refs[i]);
	}
	free(refs);
}

