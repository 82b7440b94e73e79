/*
 * member.h — membership: the heartbeat file every broker rewrites, the
 * certificates that prove an incarnation gone, and the liveness of peers as
 * one observer sees them.
 *
 * CLUSTER/brokers/<id>.json is written only by broker <id> (sub_write_atomic,
 * one write at a time, seq + 1 each time).  A peer is judged by the
 * *observer's* monotonic clock alone: dead when the (incarnation, seq) it
 * shows has not changed for the session timeout, measured from the end of
 * the read that first showed it to the start of a read that still shows it.
 * Wall clocks are never compared across hosts.  docs/cluster.md proves why
 * this pairs safely with the leader's lease (lease.h).
 *
 * Faster than the session timeout, an incarnation is dead when something
 * proves it can never acknowledge again: its own heartbeat says "stopped" or
 * "fenced" (written only after its acknowledgement gate closed for good), or
 * CLUSTER/brokers/<id>-<incarnation:016x>-<nonce:016x>.gone exists (created
 * exclusively by whoever holds a kernel-level proof of the process's end: its
 * supervisor after waitpid() (supervise.h), or a successor on the same host).  A *newer incarnation*
 * of the same id is not such a proof (the older one may be paused): it wins
 * the id, the older must step down, but the older's lease is still waited
 * out.
 *
 * Only one incarnation of an id writes the file at a time, by rule: a new
 * incarnation that finds the file showing another live one waits until it
 * has seen that one expire (or proven gone) before its first write, and says
 * so in `pred`.  Observers take that as the end of the predecessor's lease
 * (the predecessor's lease ended before the new one decided; see
 * docs/cluster.md).  An older incarnation that sees a newer one steps down.
 *
 * Not thread-safe: one view per observer thread (the membership poller).
 */
#ifndef KAAS_CLUSTER_MEMBER_H
#define KAAS_CLUSTER_MEMBER_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/core/leaders.h"
#include "substrates/sub.h"

#define KCL_HB_VERSION 1
#define KCL_HB_MAX_BYTES 4096 /* a heartbeat file longer than this is refused */
#define KCL_ID_MAX 2147483647
#define KCL_SEQ_MAX 9007199254740991LL /* 2^53-1: exact in every JSON reader */

enum kcl_state {
	KCL_ST_RUNNING = 1,  /* may lead partitions and shards */
	KCL_ST_DRAINING = 2, /* SIGTERM: move everything away from me, then I exit */
	KCL_ST_FENCED = 3,   /* gave up leadership for good (stall, lapsed lease) */
	KCL_ST_STOPPED = 4,  /* exited cleanly after relinquishing everything */
};

/* (controller epoch, generation) of an assignment document; ordered. */
typedef struct kcl_gen {
	int64_t controller_epoch;
	int64_t generation;
} kcl_gen;

int kcl_gen_cmp(kcl_gen a, kcl_gen b);

/* Who a process is: the id is configured, the incarnation chosen at start
 * (kcl_incarnation_next), the nonce random.  Ordered by (incarnation, nonce):
 * the greater one is the newer and wins the id. */
typedef struct kcl_incarn {
	uint64_t incarnation; /* 1..2^53-1 */
	uint64_t nonce;       /* random, != 0 */
} kcl_incarn;

int kcl_incarn_cmp(kcl_incarn a, kcl_incarn b);

/* The next incarnation number: above the one the id's file last showed
 * (prev, 0 when none or unreadable) and at least the wall clock in ms, so it
 * grows across restarts even when the file was lost. */
uint64_t kcl_incarnation_next(uint64_t prev, int64_t wall_ms);

typedef struct kcl_hb {
	int32_t id;            /* 0..2^31-1 */
	kcl_incarn inc;
	int64_t seq;           /* 1..2^53-1, +1 per write of this incarnation */
	int state;             /* enum kcl_state */
	char endpoint[256];    /* "host:port" clients connect to (the first listener's) */
	int nlst;              /* every listener's advertised endpoint; 0: not said */
	kb_endpoint lst[KB_MAX_LISTENERS];
	char rack[64];         /* "" when none */
	char host_id[128];     /* boot id and namespaces, for same-host proofs; "" unknown */
	kcl_gen released;      /* holds nothing this assignment does not give it; {0,0}: none yet */
	int64_t wall_ms;       /* informational only */
	/* The incarnation this one replaced and how its end was established:
	 * pred_how = KCL_PRED_NONE (first of the id, or the file was absent),
	 * KCL_PRED_EXPIRED (seen unchanged at pred_seq for a session timeout by
	 * this incarnation before its first write), KCL_PRED_GONE (proven). */
	int pred_how;
	kcl_incarn pred;
	int64_t pred_seq;
} kcl_hb;

enum { KCL_PRED_NONE = 0, KCL_PRED_EXPIRED = 1, KCL_PRED_GONE = 2 };

/* JSON text of a heartbeat (*out malloc'd).  -EINVAL for an invalid hb. */
int kcl_hb_encode(const kcl_hb *hb, char **out, size_t *len);

/* Parses and validates; on failure err names the field and the reason.
 * -EBADMSG truncated/garbage, -EPROTONOSUPPORT newer version, -EINVAL,
 * -ERANGE impossible values. */
int kcl_hb_decode(const char *buf, size_t len, kcl_hb *out, char *err, size_t errlen);

/* brokers/<id>.json (err may be NULL for writes). */
int kcl_hb_path(int32_t id, char *dst, size_t dstlen);
int kcl_hb_write(sub_vfs *v, const kcl_hb *hb);
/* -ENOENT when the broker never wrote one; decode errors as above; also
 * refuses a file whose id is not the one its name says. */
int kcl_hb_read(sub_vfs *v, int32_t id, kcl_hb *out, char *err, size_t errlen);

/* The exit certificate of one incarnation (write-once, sub_create_excl).
 * `by` says who proved it ("supervisor", "self", "same-host"), for the log.
 * Writing an existing one is success (the fact is the same). */
int kcl_gone_path(int32_t id, kcl_incarn inc, char *dst, size_t dstlen);
int kcl_gone_write(sub_vfs *v, int32_t id, kcl_incarn inc, const char *by);
/* The same, saying how it ended (e.g. "killed by signal 9"), for the log. */
int kcl_gone_write_how(sub_vfs *v, int32_t id, kcl_incarn inc, const char *by, const char *how);
#define KCL_GONE_BY_MAX 32
#define KCL_GONE_HOW_MAX 64
/* 1 exists (by and how filled from its content: "?" and "" where it says
 * nothing readable), 0 not, -errno. */
int kcl_gone_read(sub_vfs *v, int32_t id, kcl_incarn inc, char *by, size_t bylen, char *how,
		  size_t howlen);
/* The (id, incarnation) a certificate's file name stands for; -EINVAL for
 * any other name. */
int kcl_gone_parse_name(const char *name, int32_t *id, kcl_incarn *inc);
/* 1 exists, 0 not, -errno. */
int kcl_gone_exists(sub_vfs *v, int32_t id, kcl_incarn inc);

/* ---- liveness as one observer sees it ------------------------------------- */

enum kcl_live {
	KCL_LIVE_UNKNOWN = 0, /* never seen */
	KCL_LIVE_ALIVE,       /* seq moved within the session timeout */
	KCL_LIVE_EXPIRED,     /* seq unchanged for the session timeout: its lease is over */
	KCL_LIVE_GONE,        /* proven unable to acknowledge (stopped, fenced, .gone) */
};

typedef struct kcl_peer {
	int32_t id;
	kcl_incarn inc;
	int64_t seq;
	int state;
	kcl_gen released;
	int64_t changed_ns; /* end of the read that first showed (inc, seq) */
	int live;           /* enum kcl_live */
	int superseded;     /* a newer incarnation of the id has been seen */
	char endpoint[256];
	int nlst;
	kb_endpoint lst[KB_MAX_LISTENERS];
	char rack[64];
} kcl_peer;

typedef struct kcl_view {
	int64_t session_ns;
	int64_t started_ns;   /* when the observer began to watch */
	kcl_peer *peers;      /* one per (id, incarnation) ever seen and not dropped */
	size_t n, cap;
} kcl_view;

void kcl_view_init(kcl_view *v, int64_t session_ms, int64_t now_ns);
void kcl_view_free(kcl_view *v);

/* Feeds one successful read of brokers/<id>.json: read_start_ns taken
 * before the read was issued, read_end_ns after it returned.  A newer
 * incarnation supersedes the older ones (they stay, to be waited out).  An
 * older incarnation showing up again (two processes sharing an id) is
 * recorded as alive too: that is what it is.  0 or -ENOMEM. */
int kcl_view_observe(kcl_view *v, const kcl_hb *hb, int64_t read_start_ns, int64_t read_end_ns);

/* A read of brokers/<id>.json that ended at read_end_ns found no file, or a
 * file that did not decode (maybe a newer writer's).  That is no evidence of
 * silence: every incarnation of the id not yet expired or gone counts as
 * changed now, so none expires on the strength of a read that showed
 * nothing of it. */
void kcl_view_unreadable(kcl_view *v, int32_t id, int64_t read_end_ns);

/* An exit certificate for (id, inc) was found. */
void kcl_view_proven_gone(kcl_view *v, int32_t id, kcl_incarn inc);

/* The peer as last judged, or NULL. */
const kcl_peer *kcl_view_get(const kcl_view *v, int32_t id, kcl_incarn inc);
/* The newest incarnation of id seen, or NULL. */
const kcl_peer *kcl_view_current(const kcl_view *v, int32_t id);

/* 1 when the observer has watched for a whole session timeout: before that,
 * an incarnation it never saw (overwritten by a newer one before it looked)
 * may still hold a lease, and nothing may be taken over by expiry. */
int kcl_view_settled(const kcl_view *v, int64_t now_ns);

/* 1 when no incarnation other than `self` may still hold a lease on a
 * partition moved in assignment generation `moved_in`: every one seen is
 * expired or gone, or reports released >= moved_in; and the view is settled. */
int kcl_view_clear_for(const kcl_view *v, kcl_incarn self, int32_t self_id, kcl_gen moved_in,
		       int64_t now_ns);

/* Forgets incarnations that are expired or gone and superseded (nothing can
 * depend on them any more). */
void kcl_view_prune(kcl_view *v);

const char *kcl_state_name(int state);
const char *kcl_live_name(int live);

#endif
