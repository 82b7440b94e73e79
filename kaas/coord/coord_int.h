/*
 * coord_int.h — the coordinator's private types, shared by the files of
 * kaas/coord/ only.
 *
 * Locking: one mutex (c->mu) guards every group, member and offset table.
 * Work under it is in-memory and short; file I/O (group files, pid blocks)
 * is never done while holding it.  Responses to parked requests are queued
 * in a kc_outbox while the lock is held and delivered after it is released.
 */
#ifndef KAAS_COORD_INT_H
#define KAAS_COORD_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "kaas/coord/coord.h"
#include "kaas/proto/buf.h"
#include "substrates/sub.h"

/* An owned, NUL-terminated copy of a Kafka string; s == NULL, len == -1 is null. */
typedef struct kc_str {
	char *s;
	int32_t len;
} kc_str;
#define KC_STR_NULL {NULL, -1}

int kc_str_set(kc_str *d, const char *s, int32_t len); /* 0 or -ENOMEM; len -1 = null */
static inline int kc_str_setk(kc_str *d, kaas_str k) { return kc_str_set(d, k.s, k.len); }
void kc_str_free(kc_str *d);
int kc_str_eqk(const kc_str *a, kaas_str b);
int kc_str_eq(const kc_str *a, const kc_str *b);
static inline kaas_str kc_k(const kc_str *a) { kaas_str k = {a->s, a->len}; return k; }
static inline int kc_str_empty(const kc_str *a) { return a->len <= 0; }

/* ---- parked requests ---------------------------------------------------------- */

typedef struct kc_waiter {
	kaas_coord_done_fn done; /* NULL when nobody waits */
	void *ctx;
	int16_t version;
	int flex;
	/* Set only while the handler that parked it still holds c->mu: an answer
	 * produced then goes straight into the handler's own response. */
	kaas_wr *inline_resp;
	int *inline_done;
} kc_waiter;

static inline int kc_waiting(const kc_waiter *w) { return w->done || w->inline_resp; }

typedef struct kc_out {
	struct kc_out *next;
	kc_waiter w;
	kaas_wr resp;
} kc_out;

typedef struct kc_outbox {
	kc_out *head;
	kc_out **tail;
} kc_outbox;

void kc_outbox_init(kc_outbox *o);
/* Queues resp (taken over) for w; w is cleared.  Never fails: when no memory
 * is left the completion runs at once. */
void kc_outbox_add(kc_outbox *o, kc_waiter *w, kaas_wr *resp);
void kc_outbox_deliver(kc_outbox *o); /* call without c->mu held */

/* ---- groups --------------------------------------------------------------------- */

enum kc_state { KC_EMPTY = 0, KC_PREPARING, KC_COMPLETING, KC_STABLE, KC_DEAD };
const char *kc_state_name(int st);

typedef struct kc_proto {
	kc_str name;
	uint8_t *meta;
	int32_t meta_len;
} kc_proto;

typedef struct kc_member {
	struct kc_member *next;
	kc_str id;
	kc_str instance_id;      /* group.instance.id (static membership) or null */
	kc_str client_id;
	kc_str client_host;
	int32_t session_timeout_ms;
	int32_t rebalance_timeout_ms;
	kc_proto *protos;
	int32_t nprotos;
	uint8_t *assignment;
	int32_t assignment_len;
	int64_t deadline;        /* monotonic ms: expires unless it heartbeats */
	int is_new;              /* joined during the current rebalance */
	char *json;              /* its entry in the group file; NULL: build again */
	size_t json_len;
	kc_waiter join;          /* parked JoinGroup */
	kc_waiter sync;          /* parked SyncGroup */
} kc_member;

/* A member id handed out with MEMBER_ID_REQUIRED, not yet joined with it. */
typedef struct kc_pending {
	struct kc_pending *next;
	kc_str id;
	int64_t deadline;
} kc_pending;

typedef struct kc_offset {
	kc_str topic;
	int32_t partition;
	int64_t offset;
	int32_t leader_epoch;
	kc_str metadata;
	int64_t commit_ms;       /* wall clock, for retention */
} kc_offset;

/* One OffsetCommit request waiting for its file write. */
typedef struct kc_citem {
	kc_offset off;           /* topic/partition always set; the rest when err == 0 */
	int16_t err;
	int del;                 /* OffsetDelete: remove instead of store */
	int topic_start;         /* first partition of a request topic entry */
} kc_citem;

typedef struct kc_pcommit {
	struct kc_pcommit *next;
	uint64_t seq;
	kc_citem *items;
	size_t n;
	kc_waiter w;
	int is_delete;           /* OffsetDelete (else OffsetCommit) */
} kc_pcommit;

typedef struct kc_group {
	struct kc_group *hnext;  /* hash chain */
	kc_str id;
	int state;
	int32_t generation;
	kc_str protocol_type;
	kc_str protocol;
	kc_str leader;
	kc_member *members;
	int32_t nmembers;
	kc_pending *pending;
	int32_t npending;
	int64_t rebalance_deadline; /* PreparingRebalance: complete the join at this time */
	int initial_delay;          /* the current wait is the initial delay */
	int64_t initial_remaining;
	int new_member_added;
	int64_t empty_since;     /* wall ms: when it last had no members (retention) */

	/* Membership on the volume (docs/groups.md, "Membership survives a
	 * restart"): every write of the group file carries the membership as it
	 * is when the write is serialised.  meta_seq counts the changes that must
	 * reach the volume, meta_written the last one that did. */
	uint64_t meta_seq;
	uint64_t meta_written;
	int64_t meta_retry_at;   /* monotonic ms: re-drive a failed membership write */
	int64_t meta_backoff;
	int sync_pending;        /* CompletingRebalance: the leader's assignment waits for its write */
	uint64_t sync_seq;       /* ... the meta_seq that write must cover */
	int members_loaded;      /* membership was taken from the file once; memory rules after */

	/* offsets: sorted by (topic, partition) */
	int loaded;              /* the group file has been read */
	int loading;
	kc_offset *offs;
	size_t noffs, capoffs;
	int file_exists;         /* a file for it may be on the volume */
	int64_t file_epoch;      /* coordinator_epoch found in the file */
	kc_pcommit *pc_head, **pc_tail;
	uint64_t next_seq;
	int queued;              /* on the flush queue */
	int writing;             /* a write is in flight (c->mu released) */
	int deleting;
	int refs;                /* handlers using it outside c->mu (loading) */
	struct kc_group *fnext;  /* flush queue */
} kc_group;

/* ---- producer ids ----------------------------------------------------------------- */

#define KC_PID_BLOCK_SIZE 1000

typedef struct kc_pids {
	pthread_mutex_t mu;
	int64_t next;            /* next id to hand out */
	int64_t end;             /* one past the last id of the current block */
	int64_t last_block;      /* highest block number seen or claimed; -1 unknown */
} kc_pids;

/* ---- the coordinator ---------------------------------------------------------------- */

struct kaas_coord {
	kaas_coord_config cfg;
	char *host;              /* owned copy of cfg.host */
	sub_vfs *vfs;
	pthread_mutex_t mu;
	pthread_cond_t timer_cv;
	pthread_cond_t flush_cv;
	pthread_cond_t state_cv; /* a load or a write finished */
	kc_group **tab;
	size_t tabsize, ngroups;
	kc_group *fq_head, **fq_tail;
	int stop;
	int draining;            /* parked requests answered; nothing new parks */
	int drain_requested;     /* kaas_coord_drain() was called */
	int timer_kicked;        /* kc_wake_timer() since the timer last looked */
	int threads;
	pthread_t timer_thr, flush_thr;
	kc_pids pids;
	kaas_coord_topic_fn topic_fn;
	void *topic_arg;
	kaas_coord_stats stats;
};

int64_t kc_now(kaas_coord *c);    /* monotonic ms (or the test clock) */
int64_t kc_wall(kaas_coord *c);   /* wall ms, stamped into files */
void kc_wake_timer(kaas_coord *c);

/* Group table (c->mu held). */
kc_group *kc_group_find(kaas_coord *c, kaas_str id);
kc_group *kc_group_new(kaas_coord *c, kaas_str id); /* NULL on ENOMEM */
void kc_group_unlink_free(kaas_coord *c, kc_group *g);
/* A group that nobody references: no members, offsets, pending commits. */
int kc_group_is_idle(const kc_group *g);
void kc_group_maybe_drop(kaas_coord *c, kc_group *g);

/* Finds the group and makes sure its file has been read (c->mu held on entry
 * and exit; released while reading).  create: make an in-memory group when
 * none exists on the volume.  Returns KERR_NONE with *out set (may be NULL
 * when !create and the group does not exist), or a Kafka error code
 * (COORDINATOR_LOAD_IN_PROGRESS after a read error, NOT_COORDINATOR when the
 * file was written by a newer coordinator epoch). */
int16_t kc_group_get(kaas_coord *c, kaas_str id, int create, kc_group **out);

/* Kafka's group-id rule per API (empty ids only for offsets/describe/delete). */
int kc_group_id_ok(kaas_str id, int allow_empty);

/* The flush queue (c->mu held). */
void kc_flush_enqueue(kaas_coord *c, kc_group *g);

/* Offsets (offsets.c; c->mu held). */
kc_offset *kc_offset_find(kc_group *g, kaas_str topic, int32_t partition);
int kc_offset_put(kc_group *g, const kc_offset *o); /* copies; 0 or -ENOMEM */
void kc_offset_remove(kc_group *g, kaas_str topic, int32_t partition);
void kc_offset_free(kc_offset *o);
void kc_offsets_clear(kc_group *g);
void kc_pcommit_free(kc_pcommit *pc);

/* Group files (groupfile.c). */
int kc_group_path(kaas_str id, char *path, size_t len); /* "groups/<enc>.json" */
/* Serialises the durable offsets plus the pending commits up to `upto`;
 * *count gets the number of offsets in it.  NULL on ENOMEM. */
char *kc_group_serialize(kaas_coord *c, kc_group *g, uint64_t upto, size_t *len, size_t *count);
/* The JSON document for g with offsets v[0..n) (malloc'd, NUL-terminated). */
char *kc_group_serialize_view(kaas_coord *c, kc_group *g, const kc_offset *v, size_t n);
/* Reads and parses a group's file: 0, -ENOENT, -EBADMSG (malformed),
 * -ENOTUNIQ (the file belongs to another group id: a hash collision of two
 * long ids) or -errno. */
typedef struct kc_loaded {
	int32_t generation;
	kc_str protocol_type;
	int64_t coordinator_epoch;
	kc_offset *offs;
	size_t noffs;
	/* version 2: the membership (members == NULL, nmembers == 0 for an
	 * empty group and for version 1 files) */
	int state;               /* KC_EMPTY, KC_STABLE or KC_PREPARING */
	kc_str protocol;
	kc_str leader;
	kc_member *members;      /* list, in the file's order */
	int32_t nmembers;
} kc_loaded;
#define KC_LOADED_INIT {0, KC_STR_NULL, 0, NULL, 0, KC_EMPTY, KC_STR_NULL, KC_STR_NULL, NULL, 0}
int kc_group_file_read(kaas_coord *c, kaas_str id, kc_loaded *out);
/* why (may be NULL) gets a static description of what is wrong with a file
 * that is refused with -EBADMSG, naming the field. */
int kc_group_file_parse(const char *buf, size_t len, kc_str *id_out, kc_loaded *out,
			const char **why);
void kc_loaded_free(kc_loaded *l);
/* Group ids of the files under groups/ (hashed names are read for theirs). */
int kc_ids_on_volume(kaas_coord *c, kc_str **out, size_t *nout);

/* Group-id encoding for file names (gname.c). */
#define KC_GNAME_MAX 200 /* longest encoded name, without ".json" */
/* Writes the file-name stem for id into out (>= KC_GNAME_MAX + 1 bytes).
 * Returns 0 (reversible) or 1 (long id: prefix + '~' + hash; the id is only
 * in the file's contents). */
int kc_gname_encode(const char *id, size_t len, char *out, size_t outlen);
/* Decodes a stem; -EINVAL when it is not an encoding, -ENOTUNIQ when it is a
 * hashed one (read the file for the id).  out gets a NUL after len bytes. */
int kc_gname_decode(const char *stem, char *out, size_t outlen, size_t *len);

/* The group state machine (group.c; c->mu held). */
void kc_group_tick(kaas_coord *c, kc_group *g, int64_t now, int64_t *next, kc_outbox *ob);
void kc_group_shutdown(kaas_coord *c, kc_group *g, kc_outbox *ob);
void kc_member_free(kc_member *m);
/* The member with this id (NULL for an empty or unknown id). */
kc_member *kc_member_find(kc_group *g, kaas_str id);
/* Is member_id a static member's older incarnation: does instance id inst
 * (len -1 when null) now belong to another member id? */
int kc_member_fenced(kc_group *g, kaas_str member_id, kaas_str inst);
/* A field that the group file holds changed: drop the member's cached entry. */
static inline void kc_member_touch(kc_member *m)
{
	free(m->json);
	m->json = NULL;
}
/* The membership changed in a way the volume must learn (a member left,
 * expired or was fenced, the group emptied): queue a write of the file. */
void kc_group_meta_changed(kaas_coord *c, kc_group *g);
/* Takes over the membership of a file read when the group is first loaded:
 * Stable, or PreparingRebalance when the file says a rebalance was due;
 * every session timer starts at now. */
void kc_group_restore(kaas_coord *c, kc_group *g, kc_loaded *l, int64_t now);
/* After a write of the group file (c->mu held): ok says whether it reached
 * the volume, upto is the meta_seq it carried.  Completes (or fails) a
 * SyncGroup that waited for the write. */
void kc_group_meta_written(kaas_coord *c, kc_group *g, int ok, uint64_t upto, kc_outbox *ob);
/* DescribeGroups' member array for g (metadata and assignment when Stable). */
void kc_describe_members(const kc_group *g, int16_t v, kaas_wr *w);
/* Is topic in a member's consumer-protocol subscription?  1, 0, or -1 when a
 * member's metadata cannot be read (callers then assume it is). */
int kc_group_subscribed(const kc_group *g, kaas_str topic);
/* The coordinator-side checks every group API starts with: a valid id,
 * and this broker coordinating it.  KERR_NONE or the error to answer. */
int16_t kc_group_status(kaas_coord *c, kaas_str gid, int allow_empty);

/* The API handlers (one per API). */
int kc_api_find_coordinator(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w);
int kc_api_join_group(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w);
int kc_api_sync_group(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w);
int kc_api_heartbeat(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w);
int kc_api_leave_group(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w);
int kc_api_describe_groups(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w);
int kc_api_list_groups(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w);
int kc_api_delete_groups(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w);
int kc_api_offset_commit(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w);
int kc_api_offset_fetch(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w);
int kc_api_offset_delete(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w);
int kc_api_init_producer_id(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w);

/* Producer ids (pid.c). */
int kc_pids_init(kc_pids *p);
void kc_pids_destroy(kc_pids *p);
/* Next producer id; claims a block when the current one is used up.  0 or -errno. */
int kc_pid_next(kaas_coord *c, int64_t *pid);
/* Was pid handed out by some coordinator (its block exists)?  1, 0, or -errno. */
int kc_pid_issued(kaas_coord *c, int64_t pid);

/* Offsets flush (offsets.c): writes g's file for its pending changes; called
 * with c->mu held, releases it around the I/O. */
void kc_group_write(kaas_coord *c, kc_group *g, kc_outbox *ob);
/* Fails and drops every pending commit of g with err (c->mu held). */
void kc_group_fail_commits(kaas_coord *c, kc_group *g, int16_t err, kc_outbox *ob);

#endif
