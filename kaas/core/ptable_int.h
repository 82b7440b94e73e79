/*
 * ptable_int.h — what the partition table's files share: its structures, its
 * lock order and the internals one file calls in another (kb__*).
 *   ptable.c   the table itself: topics, entries, references, take-over and
 *              relinquish, housekeeping, shutdown
 *   epoch.c    leadership epochs on the volume (CLUSTER/assignment.json)
 *   durable.c  durability: the flushers, acks=all waiters, long-poll watches
 *   upkeep.c   periodic work: re-driving failed partitions, retention
 *   hold.c     requests parked while a take-over is pending, refused
 *              producers' batches remembered
 *
 * Locks, always taken in this order (kb__lock asserts it):
 *   ctl  serialises the control operations (start, ensure, drop, re-drive,
 *        shutdown) and owns the assignment document; held across volume I/O
 *   fmu  the flusher's dirty queue (queueing an entry takes a reference
 *        under mu while holding it)
 *   mu   the topic map, entry states, reference counts, durability waiters
 *        and long-poll watches; never held across volume I/O, and storage's
 *        partition locks are never taken under it
 * A partition is used through references (kb_pref); dropping a topic waits
 * for them under mu/refs_cv, after which nobody can reach its partitions.
 */
#ifndef KAAS_CORE_PTABLE_INT_H
#define KAAS_CORE_PTABLE_INT_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "kaas/core/ptable.h"
#include "util/assert.h"

#define ASSIGNMENT_FILE "assignment.json"
#define ASSIGNMENT_MAX (64u << 20)
#define RETRY_MIN_MS 1000
#define RETRY_MAX_MS 60000
#define PAR_MAX 8 /* threads that take partitions over or let them go at once */

enum { PE_IDLE = 0, PE_LEADER = 1, PE_FAILED = 2 };

typedef struct dwaiter {
	struct dwaiter *next;
	int64_t offset;
	kb_durable_fn fn;
	void *arg;
} dwaiter;

struct kb_watch {
	kb_pentry *e; /* NULL once fired or detached */
	struct kb_watch *prev, *next;
	int64_t offset;
	kb_watch_fn fn;
	void *arg;
};

typedef struct ptopic ptopic;

struct kb_pentry {
	kb_ptable *t;
	ptopic *topic;
	int32_t index;
	ks_partition *p;
	int32_t epoch;
	int32_t tried_epoch;   /* the last epoch a take-over was attempted at (driven mode) */
	int state;
	int err;               /* -errno of the last failed open/take-over */
	int64_t retry_at_ms;   /* monotonic */
	int64_t retry_delay_ms;
	/* ks_partition_failed_end of the partition when it was last closed: a
	 * leadership that ended by an I/O failure, for the next take-over
	 * (the partition is closed and opened again in between). */
	ks_failed_end failed_end;
	int refs;
	int64_t durable;       /* the highest durable offset storage announced (mu) */
	dwaiter *waiters;
	struct kb_watch *watches;
	int queued;            /* in the dirty queue (fmu) */
	kb_pentry *dnext;
	int taking;            /* a take-over of it is under way (mu) */
	struct kb_refusal *refused; /* hold.c: refused producers' batches (mu) */
	int nrefused;
};

struct ptopic {
	ptopic *next;          /* hash chain */
	char *name;
	char topic_id[40];
	int has_id;
	ks_log_config cfg;
	int32_t n;
	kb_pentry **parts;
	int dropping;
};

#define NBUCKETS 1024
#define KB_FD_RESERVE 64

void kb__census_init(kb_ptable *t); /* census.c: the group-commit metrics */

struct kb_ptable {
	kb_broker *b;
	pthread_mutex_t ctl;
	pthread_mutex_t mu;
	pthread_cond_t refs_cv;
	ptopic *buckets[NBUCKETS];
	json_t *assign;        /* {"version","controller_epoch","partitions":{}} (ctl) */
	int64_t last_retention_ms;
	int stopped;
	int driven;            /* led by the cluster: no self-assignment */
	kb_gate_fn gate;
	void *gate_arg;
	kb_io_begin_fn io_begin;
	kb_io_end_fn io_end;
	void *io_arg;
	kb_tk_guard_fn tk_guard;   /* asked before a take-over changes the volume */
	void *tk_guard_arg;
	struct kb_leaders *leaders; /* applied leader map (mu) */
	struct kb_hold *holds, *holds_tail; /* hold.c: parked requests, oldest first (mu) */
	int nrefusing;         /* hold.c: entries remembering a refused batch (atomic) */
	ks_scrub_rate scrub_rate;   /* the scrub's token bucket (housekeeping only) */
	int scrub_started;
	size_t scrub_next;          /* where the next scrub round starts in the leader list */

	/* Descriptors held back (on /dev/null) for relinquishing: writing a
	 * manifest and a snapshot needs a few, and at the descriptor limit a
	 * relinquish that cannot get them loses the partition's state (ctl). */
	int reserve[KB_FD_RESERVE];
	int nreserve;

	pthread_mutex_t fmu;
	pthread_cond_t fcv;
	kb_pentry *dhead, *dtail;
	int fstop;
	int nflushers;
	pthread_t *flushers;

	struct kb_cleaner_th *cleaner; /* cleaner.c: the log cleaner's thread (NULL: none) */

	struct ku_metric *m_fsync, *m_batch, *m_poisoned; /* census.c; NULL without metrics */
	int census_ready; /* they are registered (fmu) */
};

/* The lock order, asserted: a thread takes a lock only while it holds
 * none that comes after it, and never one twice. */
enum { KB_CTL = 1, KB_FMU = 2, KB_MU = 4 };
#ifdef KAAS_ASSERTS
extern __thread unsigned kb__held;
#endif
static inline void kb__take(unsigned which)
{
#ifdef KAAS_ASSERTS
	KAAS_ASSERT((kb__held & ~(which - 1u)) == 0);
	kb__held |= which;
#else
	(void)which;
#endif
}
static inline void kb__drop(unsigned which)
{
#ifdef KAAS_ASSERTS
	KAAS_ASSERT(kb__held & which);
	kb__held &= ~which;
#else
	(void)which;
#endif
}
static inline void kb__lock(pthread_mutex_t *m, unsigned which)
{
	kb__take(which);
	pthread_mutex_lock(m);
}
static inline int kb__trylock(pthread_mutex_t *m, unsigned which)
{
	if (pthread_mutex_trylock(m))
		return 0;
	kb__take(which);
	return 1;
}
static inline void kb__unlock(pthread_mutex_t *m, unsigned which)
{
	kb__drop(which);
	pthread_mutex_unlock(m);
}
static inline void kb__assert_held(unsigned which)
{
#ifdef KAAS_ASSERTS
	KAAS_ASSERT((kb__held & which) == which);
#else
	(void)which;
#endif
}

/* ptable.c */
/* calloc(3), failing on purpose for the tests as SQLite's fault simulation
 * does: while kb__alloc_fail_at is > 0 it counts down, and the call that
 * takes it to 0 returns NULL.  Start-up, topic and entry allocations use it. */
extern int kb__alloc_fail_at;
void *kb__calloc(size_t n, size_t size);
uint32_t kb__hash_name(const char *s, size_t n);
/* Opens (if needed) and takes e over at `epoch` (ctl held); 0 or the
 * take-over's -errno, e's state says the same.  hold.c: marks e `taking`
 * around the volume work (ptable.c, kb__entry_take_over_io), so that
 * produces for it wait, and releases them after. */
int kb__entry_take_over(kb_ptable *t, kb_pentry *e, int32_t epoch);
int kb__entry_take_over_io(kb_ptable *t, kb_pentry *e, int32_t epoch);
/* driven.c: the storage take-over of e->p at epoch, with the table's
 * take-over guard (if any) and e's failed end. */
int kb__storage_take_over(kb_ptable *t, kb_pentry *e, int32_t epoch);
/* Takes e[i] over at epoch[i] (epoch NULL: relinquishes and closes them) on
 * the calling thread plus up to PAR_MAX-1 more; ctl held.  0 or the first
 * relinquish error. */
int kb__par_run(kb_ptable *t, kb_pentry **e, const int32_t *epoch, size_t n);
ptopic *kb__find_topic(kb_ptable *t, const char *name, size_t n); /* mu held */

/* epoch.c: assignment.json (ctl held) */
void kb__part_key(char *dst, size_t len, const char *topic, int32_t partition);
void kb__part_dir(char *dst, size_t len, const char *topic, int32_t partition);
json_t *kb__assign_partitions(kb_ptable *t);
void kb__assign_reset(kb_ptable *t);
int kb__assign_load(kb_ptable *t);
int kb__assign_write(kb_ptable *t);
void kb__assign_del_topic(kb_ptable *t, const char *topic, int32_t n);
/* Picks and records (in memory) the next epoch of a partition: one more than
 * the larger of assignment.json's, the partition's files' and at_least. */
int32_t kb__next_epoch(kb_ptable *t, const char *topic, int32_t partition, int32_t at_least);
int32_t kb__disk_epoch(kb_ptable *t, const char *topic, int32_t partition);

/* durable.c */
void kb__fire_watches(kb_pentry *e, int all);          /* mu held */
void kb__fail_waiters(kb_pentry *e, int16_t err);      /* mu held */
void kb__enqueue_dirty(kb_ptable *t, kb_pentry *e);
void kb__put_entry(kb_ptable *t, kb_pentry *e);
/* upkeep.c: the leaders of the topics not being dropped, each with a
 * reference (kb__put_entry each); *n of them. */
kb_pentry **kb__ref_leaders(kb_ptable *t, size_t *n);
/* cleaner.c: the log cleaner's thread (log.cleaner.enable); stop joins it
 * (a clean in progress stops at its next batch, having swapped nothing). */
int kb__cleaner_start(kb_ptable *t);
void kb__cleaner_stop(kb_ptable *t);
void *kb__flusher_main(void *arg);
void kb__on_durable(void *arg, ks_partition *p, int64_t hw); /* ks_hw_listener */

/* hold.c: re-checks the parked requests (without mu) after anything that
 * may end a take-over's wait: a take-over's end, a new leader map, a
 * relinquish, a drop, the stop.  Releases what may go ahead. */
void kb__hold_sweep(kb_ptable *t);
void kb__entry_free(kb_pentry *e); /* NULL-safe: the entry and its refusals */

/* scrub.c: one round of the background scrub over the leaders (each held
 * by a reference), within the broker-wide byte rate. */
void kb__scrub_round(kb_ptable *t, kb_pentry **lead, size_t n, int64_t now);

#endif
