/*
 * tkguard.h — the successor's guard: what a take-over asks right before
 * every step that moves, renames, truncates, unlinks or sets aside anything
 * on the volume (kb_ptable_set_takeover_guard, ks_takeover_guard_fn).
 *
 * A take-over is a few volume round trips, and the checks made before it
 * started (the lease, the assignment this broker last read) can be long
 * stale by the time it changes a file: the process may have been paused,
 * or stuck in a hung NFS call, in between.  So the guard asks again:
 *
 *   lease       does this incarnation's lease still hold, under the term
 *               the take-overs were started in (kcl_lease_holds)?
 *   assignment  does the assignment on the volume, read again now, still
 *               give this broker incarnation the partition at the epoch
 *               being taken over?  The pointer (a couple of hundred bytes)
 *               is read every time; a document only when the pointer names
 *               another generation than the one the take-overs act for,
 *               and then once per generation.
 *
 * The answer is the storage guard's: 0 with *ceiling the partition's epoch
 * in the newest assignment (above the one taken over: a newer leader was
 * named, and storage abandons), or -ETIME (lease), -ESTALE (not ours any
 * more), or the errno of a pointer or document that cannot be read (then
 * nothing is known, and the take-over is abandoned and re-driven).
 *
 * Thread-safe: the table runs take-overs on a few threads at once.
 */
#ifndef KAAS_CLUSTER_TKGUARD_H
#define KAAS_CLUSTER_TKGUARD_H

#include <pthread.h>
#include <stdint.h>

#include "kaas/cluster/assignment.h"
#include "kaas/cluster/lease.h"
#include "kaas/cluster/member.h"
#include "substrates/sub.h"

typedef struct kcl_tkguard {
	pthread_mutex_t mu;
	sub_vfs *v;        /* the cluster directory */
	kcl_lease *lease;
	int32_t id;
	kcl_incarn inc;
	int armed;         /* kcl_tkguard_arm was called: gen and term are set */
	kcl_gen gen;       /* the generation the take-overs act for */
	uint64_t term;     /* the lease term they were started under */
	kcl_assign doc;    /* a newer document read for a check (cached) */
	int have_doc;
	int logged;        /* a refusal of this arming was logged */
	uint64_t checks, refusals, docs_read;
} kcl_tkguard;

int kcl_tkguard_init(kcl_tkguard *g, sub_vfs *v, kcl_lease *lease, int32_t id, kcl_incarn inc);
void kcl_tkguard_destroy(kcl_tkguard *g);

/* Before a batch of take-overs: they act for generation gen, under the
 * lease's current term. */
void kcl_tkguard_arm(kcl_tkguard *g, kcl_gen gen);

/* The check for topic/partition being taken over at epoch (see above);
 * why (may be NULL) says what refused it. */
int kcl_tkguard_check(kcl_tkguard *g, const char *topic, int32_t partition, int32_t epoch, int32_t *ceiling,
		      char *why, size_t whylen);

/* kb_tk_guard_fn over a kcl_tkguard (arg), logging the first refusal of
 * each arming. */
int kcl_tkguard_fn(void *arg, const char *topic, int32_t partition, int32_t epoch, const char *step,
		   int32_t *ceiling);

#endif
