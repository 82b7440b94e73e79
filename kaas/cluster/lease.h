/*
 * lease.h — the leader's lease and the stall watchdog.
 *
 * A broker acknowledges a produce (acks=1 and acks=all alike), an offset
 * commit or any other write only while kcl_lease_holds(): checked after the
 * fsync that made the write durable and before the answer is released.  The
 * lease is renewed by heartbeat writes (member.h), one at a time:
 *
 *   issue   = monotonic time taken before the heartbeat write is issued
 *   renewal = the write returned 0 (temp, fsync, rename, directory fsync:
 *             the server has it) before the window closed
 *   window  = closes session timeout - drift margin after the issue of the
 *             anchor: the last write known to have reached the server
 *             (credited or not), or, before any such, the first write that
 *             may have (a failed write may have landed all the same)
 *   valid until issue + session timeout - drift margin
 *
 * A renewal confirmed after the window closed is not credited: the lease has
 * lapsed, and it stays lapsed for this incarnation's leadership — a peer may
 * already have decided it expired and taken its partitions over.  Peers
 * that judged an incarnation expired never trust it again, so the owner must
 * drop every partition and shard (without writing to them), certify its old
 * incarnation gone (member.h, by "self"), take a new incarnation and only
 * then call kcl_lease_restart() to lead again.  That rule is
 * what makes the argument in docs/cluster.md go through: every credited
 * renewal reached the server before any observer could have judged an
 * earlier write expired.  (Volume calls are assumed to have taken effect,
 * if ever, by the time they return: hard mounts, not soft ones.)
 *
 * The stall watchdog: every fsync, heartbeat write or other volume call that
 * the ack path depends on is registered while outstanding; one outstanding
 * longer than the stall bound makes kcl_wd_check() report it, and the owner
 * gives up leadership at once (kcl_lease_give_up), long before a hung NFS
 * call would time out — CockroachDB's disk-stall rule.
 *
 * Both are thread-safe (flusher threads check the lease and register fsyncs
 * while the heartbeat thread renews).
 */
#ifndef KAAS_CLUSTER_LEASE_H
#define KAAS_CLUSTER_LEASE_H

#include <pthread.h>
#include <stdint.h>

/* Rate error allowed between two hosts' monotonic clocks, in parts per
 * million, and the smallest margin; see kcl_drift_margin_ms. */
#define KCL_DRIFT_PPM 1000
#define KCL_DRIFT_MIN_MS 25

/* The margin a lease gives away so that two clocks that run at rates up to
 * KCL_DRIFT_PPM apart still order its end before any observer's verdict:
 * at least 2 * ppm * session (plus slack), never below KCL_DRIFT_MIN_MS. */
int64_t kcl_drift_margin_ms(int64_t session_ms);

/* The stall watchdog's bound: stall_ms when the operator set one, else the
 * latest that still fires before the lease could lapse with a heartbeat
 * interval to spare, S - D - 2 * heartbeat (2475 ms at the defaults), and
 * never below a third of S.  A heartbeat write that hangs began at most one
 * interval after the last credited renewal, so the watchdog ends it before
 * the lease would have.  Any earlier turns a slow fsync that would have
 * completed into a restart and a take-over; a fixed bound would also make
 * a longer session (set to ride out a slow volume) give up on the same
 * fsync as the default one. */
int64_t kcl_stall_bound_ms(int64_t stall_ms, int64_t session_ms, int64_t heartbeat_ms);

enum kcl_lease_st {
	KCL_LEASE_NONE = 0,  /* never renewed (or restarted): holds nothing */
	KCL_LEASE_VALID,     /* renewed; holds until valid_until */
	KCL_LEASE_LAPSED,    /* ran out, or a renewal came back too late */
	KCL_LEASE_GIVEN_UP,  /* the watchdog or a step-down ended it for good */
};

typedef struct kcl_lease {
	pthread_mutex_t mu;
	int64_t session_ns, drift_ns;
	int64_t valid_until_ns;
	int64_t issue_ns;      /* of the outstanding renewal */
	int64_t anchor_ns;     /* issue of the last write that reached the server */
	int has_anchor;
	int outstanding;       /* a renewal is in flight */
	int state;             /* enum kcl_lease_st, as of the last transition */
	uint64_t term;         /* +1 at every restart: leadership taken under an older term is void */
	char why[128];         /* why it lapsed or was given up */
} kcl_lease;

/* session_ms > 0 and drift_ms in [0, session_ms); -EINVAL otherwise. */
int kcl_lease_init(kcl_lease *l, int64_t session_ms, int64_t drift_ms);
void kcl_lease_destroy(kcl_lease *l);

/* Before issuing a heartbeat write: records the issue time.  -EBUSY when a
 * renewal is already outstanding (renewals are serialised: that is part of
 * the argument), -ECANCELED after give-up. */
int kcl_lease_renew_begin(kcl_lease *l, int64_t now_ns);

/* The write returned rc at now_ns.  0 when the renewal was credited;
 * -ETIME when it came back after the lease had run out (now lapsed);
 * rc itself when the write failed (the lease runs on to its old end);
 * -ECANCELED after give-up. */
int kcl_lease_renew_end(kcl_lease *l, int rc, int64_t now_ns);

/* 1 while the lease holds at now_ns (a lease found expired is marked lapsed). */
int kcl_lease_holds(kcl_lease *l, int64_t now_ns);

/* Nanoseconds left (0 when it does not hold). */
int64_t kcl_lease_remaining(kcl_lease *l, int64_t now_ns);

/* Ends the lease for good (this incarnation will never acknowledge again). */
void kcl_lease_give_up(kcl_lease *l, const char *why);

/* After a lapse, once every partition and shard was dropped and the process
 * took a new incarnation: back to NONE under a new term.  -EBUSY while a renewal is outstanding (its late
 * confirmation must not count), -EINVAL unless lapsed, -ECANCELED after
 * give-up. */
int kcl_lease_restart(kcl_lease *l);

/* State as of now_ns (VALID turns LAPSED when its end has passed). */
int kcl_lease_state(kcl_lease *l, int64_t now_ns, uint64_t *term);
const char *kcl_lease_state_name(int st);

/* ---- the stall watchdog ----------------------------------------------------- */

#define KCL_WD_SLOTS 256

enum kcl_wd_kind { KCL_WD_FSYNC = 1, KCL_WD_HEARTBEAT, KCL_WD_META };

typedef struct kcl_wd {
	pthread_mutex_t mu;
	int64_t bound_ns;
	int64_t start_ns[KCL_WD_SLOTS]; /* 0: free */
	uint8_t kind[KCL_WD_SLOTS];
	unsigned untracked;            /* begins that found no free slot */
	int64_t untracked_since_ns;
} kcl_wd;

int kcl_wd_init(kcl_wd *w, int64_t bound_ms);
void kcl_wd_destroy(kcl_wd *w);

/* Registers an outstanding call; returns its slot (>= 0).  With every slot
 * taken the call is still counted (slot -1), conservatively as if it began
 * when the first such call did: a stall must not hide behind a full table. */
int kcl_wd_begin(kcl_wd *w, int kind, int64_t now_ns);
void kcl_wd_end(kcl_wd *w, int slot, int64_t now_ns);

/* 1 when a registered call has been outstanding for the bound or longer:
 * *kind and *age_ns describe the oldest. 0 otherwise. */
int kcl_wd_check(kcl_wd *w, int64_t now_ns, int *kind, int64_t *age_ns);
const char *kcl_wd_kind_name(int kind);

#endif
