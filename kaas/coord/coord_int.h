/*
 * coord_int.h — the coordinator's private types, shared by the files of
 * kaas/coord/ only.
 *
 * Locking: one mutex (c->mu) guards every group, member and offset table.
 * Work under it is in-memory and short; file I/O (group files, pid blocks)
 * is never done while holding it.  Responses to parked requests are queued
 * in a kg_outbox while the lock is held and delivered after it is released.
 */
#ifndef KAAS_COORD_INT_H
#define KAAS_COORD_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "kaas/core/acl.h"
#include "kaas/proto/kerr.h"
#include "kaas/coord/coord.h"
#include "kaas/proto/buf.h"
#include "substrates/sub.h"

/* An owned, NUL-terminated copy of a Kafka string; s == NULL, len == -1 is null. */
typedef struct kg_str {
	char *s;
	int32_t len;
} kg_str;
#define KC_STR_NULL {NULL, -1}

int kg__str_set(kg_str *d, const char *s, int32_t len); /* 0 or -ENOMEM; len -1 = null */
static inline int kg_str_setk(kg_str *d, kw_str k) { return kg__str_set(d, k.s, k.len); }
void kg__str_free(kg_str *d);
int kg__str_eqk(const kg_str *a, kw_str b);
int kg__str_eq(const kg_str *a, const kg_str *b);
static inline kw_str kg_k(const kg_str *a) { kw_str k = {a->s, a->len}; return k; }
static inline int kg_str_empty(const kg_str *a) { return a->len <= 0; }

/* ---- parked requests ---------------------------------------------------------- */

typedef struct kg_waiter {
	kg_coord_done_fn done; /* NULL when nobody waits */
	void *ctx;
	int16_t version;
	int flex;
	/* Set only while the handler that parked it still holds c->mu: an answer
	 * produced then goes straight into the handler's own response. */
	kw_wr *inline_resp;
	int *inline_done;
} kg_waiter;

static inline int kg_waiting(const kg_waiter *w) { return w->done || w->inline_resp; }

typedef struct kg_out {
	struct kg_out *next;
	kg_waiter w;
	kw_wr resp;
} kg_out;

typedef struct kg_outbox {
	kg_out *head;
	kg_out **tail;
} kg_outbox;

void kg__outbox_init(kg_outbox *o);
/* Queues resp (taken over) for w; w is cleared.  Never fails: when no memory
 * is left the completion runs at once. */
void kg__outbox_add(kg_outbox *o, kg_waiter *w, kw_wr *resp);
void kg__outbox_deliver(kg_outbox *o); /* call without c->mu held */

/* ---- groups --------------------------------------------------------------------- */

enum kg_state { KC_EMPTY = 0, KC_PREPARING, KC_COMPLETING, KC_STABLE, KC_DEAD };
const char *kg__state_name(int st);

typedef struct kg_proto {
	kg_str name;
	uint8_t *meta;
	int32_t meta_len;
} kg_proto;

typedef struct kg_member {
	struct kg_member *next;
	kg_str id;
	kg_str instance_id;      /* group.instance.id (static membership) or null */
	kg_str client_id;
	kg_str client_host;
	int32_t session_timeout_ms;
	int32_t rebalance_timeout_ms;
	kg_proto *protos;
	int32_t nprotos;
	uint8_t *assignment;
	int32_t assignment_len;
	int64_t deadline;        /* monotonic ms: expires unless it heartbeats */
	int is_new;              /* joined during the current rebalance */
	char *json;              /* its entry in the group file; NULL: build again */
	size_t json_len;
	kg_waiter join;          /* parked JoinGroup */
	/* A static member's new incarnation joining a Stable group (KIP-345):
	 * its JoinGroup waits for the write of meta_seq join_seq (its new id)
	 * and is then answered with the current generation and leader
	 * join_leader, with no rebalance.  0 / null otherwise. */
	uint64_t join_seq;
	kg_str join_leader;
	kg_waiter sync;          /* parked SyncGroup */
} kg_member;

/* A member id handed out with MEMBER_ID_REQUIRED, not yet joined with it. */
typedef struct kg_pending {
	struct kg_pending *next;
	kg_str id;
	int64_t deadline;
} kg_pending;

typedef struct kg_offset {
	kg_str topic;
	int32_t partition;
	int64_t offset;
	int32_t leader_epoch;
	kg_str metadata;
	int64_t commit_ms;       /* wall clock, for retention */
} kg_offset;

/* One OffsetCommit request waiting for its file write. */
typedef struct kg_citem {
	kg_offset off;           /* topic/partition always set; the rest when err == 0 */
	int16_t err;
	int del;                 /* OffsetDelete: remove instead of store */
	int topic_start;         /* first partition of a request topic entry */
} kg_citem;

typedef struct kg_pcommit {
	struct kg_pcommit *next;
	uint64_t seq;
	kg_citem *items;
	size_t n;
	kg_waiter w;
	int is_delete;           /* OffsetDelete (else OffsetCommit) */
} kg_pcommit;

typedef struct kg_group {
	struct kg_group *hnext;  /* hash chain */
	kg_str id;
	int state;
	int32_t generation;
	kg_str protocol_type;
	kg_str protocol;
	kg_str leader;
	kg_member *members;
	int32_t nmembers;
	kg_pending *pending;
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
	kg_offset *offs;
	size_t noffs, capoffs;
	int file_exists;         /* a file for it may be on the volume */
	int64_t file_epoch;      /* coordinator_epoch found in the file */
	int64_t epoch;           /* the shard epoch it is served at: its file's name */
	kg_pcommit *pc_head, **pc_tail;
	uint64_t next_seq;
	int queued;              /* on the flush queue */
	int writing;             /* a write is in flight (c->mu released) */
	int deleting;
	int refs;                /* handlers using it outside c->mu (loading) */
	struct kg_group *fnext;  /* flush queue */
} kg_group;

/* ---- producer ids ----------------------------------------------------------------- */

#define KC_PID_BLOCK_SIZE 1000

typedef struct kg_pids {
	pthread_mutex_t mu;
	int64_t next;            /* next id to hand out */
	int64_t end;             /* one past the last id of the current block */
	int64_t last_block;      /* highest block number seen or claimed; -1 unknown */
} kg_pids;

/* ---- shards (a cluster's group-coordinator shards, as this broker holds them) ---- */

#define KG_SHARDS_MAX 1024 /* as many as an assignment may have */

enum kg_shard_state { KG_SH_NONE = 0, KG_SH_LOADING, KG_SH_READY };

typedef struct kg_shard {
	int state;
	int64_t epoch;           /* the epoch it is loading or served at */
} kg_shard;

/* ---- the coordinator ---------------------------------------------------------------- */

struct kg_coord {
	kg_coord_config cfg;
	const kg_authorizer *authz; /* NULL: everything allowed; read-only once serving */
	char *host;              /* owned copy of cfg.host */
	sub_vfs *vfs;
	pthread_mutex_t mu;
	pthread_cond_t timer_cv;
	pthread_cond_t flush_cv;
	pthread_cond_t state_cv; /* a load or a write finished */
	kg_group **tab;
	size_t tabsize, ngroups;
	kg_group *fq_head, **fq_tail;
	int stop;
	int draining;            /* parked requests answered; nothing new parks */
	int drain_requested;     /* kg_coord_drain() was called */
	int timer_kicked;        /* kg__wake_timer() since the timer last looked */
	int threads;
	pthread_t timer_thr, flush_thr;
	kg_pids pids;
	kg_coord_topic_fn topic_fn;
	void *topic_arg;
	kg_coord_stats stats;
	kg_shard *shards;        /* driven: one per shard of the applied map */
	int32_t nshards;
	int64_t shard_gen[2];    /* the map (controller epoch, generation) last synced */
	int shard_clear;         /* ... and its clearance */
	kg_outbox late;          /* answers from where no outbox was at hand (the timer sends them) */
};

int64_t kg__now(kg_coord *c);    /* monotonic ms (or the test clock) */
int64_t kg__wall(kg_coord *c);   /* wall ms, stamped into files */
void kg__wake_timer(kg_coord *c);

/* Group table (c->mu held). */
kg_group *kg__group_find(kg_coord *c, kw_str id);
kg_group *kg__group_new(kg_coord *c, kw_str id); /* NULL on ENOMEM */
void kg__group_unlink_free(kg_coord *c, kg_group *g);
/* A group that nobody references: no members, offsets, pending commits. */
int kg__group_is_idle(const kg_group *g);
void kg__group_maybe_drop(kg_coord *c, kg_group *g);

/* Finds the group and makes sure its file has been read (c->mu held on entry
 * and exit; released while reading).  create: make an in-memory group when
 * none exists on the volume.  Returns KERR_NONE with *out set (may be NULL
 * when !create and the group does not exist), or a Kafka error code
 * (COORDINATOR_LOAD_IN_PROGRESS after a read error, NOT_COORDINATOR when the
 * file was written by a newer coordinator epoch). */
int16_t kg__group_get(kg_coord *c, kw_str id, int create, kg_group **out);
/* The same for a shard's loader (loader = 1: a shard being taken over is
 * served to it). */
int16_t kg__group_get_as(kg_coord *c, kw_str id, int create, int loader, kg_group **out);
/* Writes g's file at g->epoch and removes the older epochs' (shards.c;
 * c->mu held, released around the I/O).  0 or -errno of the write. */
int kg__group_claim(kg_coord *c, kg_group *g);

/* Does this broker serve gid now (c->mu held)?  KERR_NONE with *epoch the
 * epoch its file is written at; NOT_COORDINATOR when another broker owns
 * its shard (or no map, or the ack gate is closed);
 * COORDINATOR_LOAD_IN_PROGRESS while the shard is being taken over here.
 * loader: the shard's loader itself asks (a loading shard is served). */
int16_t kg__serve_epoch(kg_coord *c, kw_str gid, int loader, int64_t *epoch);
/* This broker no longer coordinates g at g->epoch (c->mu held): commits
 * waiting for a write and parked JoinGroup/SyncGroup requests are answered
 * NOT_COORDINATOR and the group is forgotten (read again from the volume
 * if it is ever served here again).  g stays allocated: the caller drops it
 * (kg__group_maybe_drop) where nothing else holds it. */
void kg__group_disown(kg_coord *c, kg_group *g, kg_outbox *ob);
/* Shards (coord.c): follow the applied leader map — disown the groups of
 * shards lost, take over (load and claim) the shards gained once the map
 * is clear.  c->mu held; released while loading. */
void kg__shards_sync(kg_coord *c, kg_outbox *ob);

/* Kafka's group-id rule per API (empty ids only for offsets/describe/delete). */
int kg__group_id_ok(kw_str id, int allow_empty);

/* The flush queue (c->mu held). */
void kg__flush_enqueue(kg_coord *c, kg_group *g);

/* Offsets (offsets.c; c->mu held). */
kg_offset *kg__offset_find(kg_group *g, kw_str topic, int32_t partition);
int kg__offset_put(kg_group *g, const kg_offset *o); /* copies; 0 or -ENOMEM */
void kg__offset_remove(kg_group *g, kw_str topic, int32_t partition);
void kg__offset_free(kg_offset *o);
void kg__offsets_clear(kg_group *g);
void kg__pcommit_free(kg_pcommit *pc);

/* Group files (groupfile.c). */
/* "groups/<enc>.json" at epoch 0, "groups/<enc>.<epoch:10>.json" above. */
int kg__group_path(kw_str id, int64_t epoch, char *path, size_t len);
/* Serialises the durable offsets plus the pending commits up to `upto`;
 * *count gets the number of offsets in it.  NULL on ENOMEM. */
char *kg__group_serialize(kg_coord *c, kg_group *g, uint64_t upto, size_t *len, size_t *count);
/* The JSON document for g with offsets v[0..n) (malloc'd, NUL-terminated). */
char *kg__group_serialize_view(kg_coord *c, kg_group *g, const kg_offset *v, size_t n);
/* Reads and parses a group's file: 0, -ENOENT, -EBADMSG (malformed),
 * -ENOTUNIQ (the file belongs to another group id: a hash collision of two
 * long ids) or -errno. */
typedef struct kg_loaded {
	int32_t generation;
	kg_str protocol_type;
	int64_t coordinator_epoch;
	kg_offset *offs;
	size_t noffs;
	/* version 2: the membership (members == NULL, nmembers == 0 for an
	 * empty group and for version 1 files) */
	int state;               /* KC_EMPTY, KC_STABLE or KC_PREPARING */
	kg_str protocol;
	kg_str leader;
	kg_member *members;      /* list, in the file's order */
	int32_t nmembers;
} kg_loaded;
#define KC_LOADED_INIT {0, KC_STR_NULL, 0, NULL, 0, KC_EMPTY, KC_STR_NULL, KC_STR_NULL, NULL, 0}
/* The newest of a group's files (the highest epoch whose contents name
 * this group; the legacy name is epoch 0): 0 with *epoch its epoch,
 * -ENOENT when there is none, -EBADMSG when the newest is unreadable (never
 * an older one instead: that would move offsets back). */
int kg__group_file_read(kg_coord *c, kw_str id, kg_loaded *out, int64_t *epoch);
/* Removes the group's files of epochs below `below` whose contents name this
 * group (after the file at `below` is durable).  Idempotent: missing files
 * are fine.  Returns the number removed or -errno of the listing. */
int kg__group_files_prune(kg_coord *c, kw_str id, int64_t below);
/* Parses "<stem>.<10 digits>.json" / "<stem>.json": 0 with the stem (NUL-
 * terminated, in stem[stemlen]) and the epoch (-1 for a legacy name), or
 * -EINVAL for names that are neither. */
int kg__group_fname_parse(const char *name, char *stem, size_t stemlen, int64_t *epoch);
/* why (may be NULL) gets a static description of what is wrong with a file
 * that is refused with -EBADMSG, naming the field. */
int kg__group_file_parse(const char *buf, size_t len, kg_str *id_out, kg_loaded *out,
			const char **why);
void kg__loaded_free(kg_loaded *l);
/* Group ids of the files under groups/ (hashed names are read for theirs). */
int kg__ids_on_volume(kg_coord *c, kg_str **out, size_t *nout);

/* Group-id encoding for file names (gname.c). */
#define KC_GNAME_MAX 200 /* longest encoded name, without ".json" */
/* Writes the file-name stem for id into out (>= KC_GNAME_MAX + 1 bytes).
 * Returns 0 (reversible) or 1 (long id: prefix + '~' + hash; the id is only
 * in the file's contents). */
int kg__gname_encode(const char *id, size_t len, char *out, size_t outlen);
/* Decodes a stem; -EINVAL when it is not an encoding, -ENOTUNIQ when it is a
 * hashed one (read the file for the id).  out gets a NUL after len bytes. */
int kg__gname_decode(const char *stem, char *out, size_t outlen, size_t *len);

/* The group state machine (group.c; c->mu held). */
void kg__group_tick(kg_coord *c, kg_group *g, int64_t now, int64_t *next, kg_outbox *ob);
void kg__group_shutdown(kg_coord *c, kg_group *g, kg_outbox *ob);
void kg__member_free(kg_member *m);
/* The member with this id (NULL for an empty or unknown id). */
kg_member *kg__member_find(kg_group *g, kw_str id);
/* Is member_id a static member's older incarnation: does instance id inst
 * (len -1 when null) now belong to another member id? */
int kg__member_fenced(kg_group *g, kw_str member_id, kw_str inst);
/* A field that the group file holds changed: drop the member's cached entry. */
static inline void kg_member_touch(kg_member *m)
{
	free(m->json);
	m->json = NULL;
}
/* The membership changed in a way the volume must learn (a member left,
 * expired or was fenced, the group emptied): queue a write of the file. */
void kg__group_meta_changed(kg_coord *c, kg_group *g);
/* Takes over the membership of a file read when the group is first loaded:
 * Stable, or PreparingRebalance when the file says a rebalance was due;
 * every session timer starts at now. */
void kg__group_restore(kg_coord *c, kg_group *g, kg_loaded *l, int64_t now);
/* After a write of the group file (c->mu held): ok says whether it reached
 * the volume, upto is the meta_seq it carried.  Completes (or fails) a
 * SyncGroup that waited for the write. */
void kg__group_meta_written(kg_coord *c, kg_group *g, int ok, uint64_t upto, kg_outbox *ob);
/* DescribeGroups' member array for g (metadata and assignment when Stable). */
void kg__describe_members(const kg_group *g, int16_t v, kw_wr *w);
/* Is topic in a member's consumer-protocol subscription?  1, 0, or -1 when a
 * member's metadata cannot be read (callers then assume it is). */
int kg__group_subscribed(const kg_group *g, kw_str topic);
/* The coordinator-side checks every group API starts with: a valid id,
 * and this broker coordinating it.  KERR_NONE or the error to answer. */
int16_t kg__group_status(kg_coord *c, kw_str gid, int allow_empty);

/* The authorizer's answer for the call (kg_coord_call.authorize). */
static inline int kg__authorized(const kg_coord *c, const kg_coord_call *call, int op, int rtype, kw_str name)
{
	return !c->authz || c->authz->authorize(call->ctx, op, rtype, name.s, name.len < 0 ? 0 : name.len, 1);
}
static inline int kg__visible(const kg_coord *c, const kg_coord_call *call, int op, int rtype, kw_str name)
{
	return !c->authz || c->authz->authorize(call->ctx, op, rtype, name.s, name.len < 0 ? 0 : name.len, 0);
}
/* kg__group_status after op on the group is authorized, as Kafka checks:
 * GROUP_AUTHORIZATION_FAILED before anything about the group is said. */
static inline int16_t kg__group_authz(kg_coord *c, const kg_coord_call *call, kw_str gid, int allow_empty,
				      int op)
{
	if (!kg__authorized(c, call, op, KB_RES_GROUP, gid))
		return KERR_GROUP_AUTHORIZATION_FAILED;
	return kg__group_status(c, gid, allow_empty);
}

/* The API handlers (one per API). */
int kg__api_find_coordinator(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w);
int kg__api_join_group(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w);
int kg__api_sync_group(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w);
int kg__api_heartbeat(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w);
int kg__api_leave_group(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w);
int kg__api_describe_groups(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w);
int kg__api_list_groups(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w);
int kg__api_delete_groups(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w);
int kg__api_offset_commit(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w);
int kg__api_offset_fetch(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w);
int kg__api_offset_delete(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w);
int kg__api_init_producer_id(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w);

/* Producer ids (pid.c). */
int kg__pids_init(kg_pids *p);
void kg__pids_destroy(kg_pids *p);
/* Next producer id; claims a block when the current one is used up.  0 or -errno. */
int kg__pid_next(kg_coord *c, int64_t *pid);
/* Was pid handed out by some coordinator (its block exists)?  1, 0, or -errno. */
int kg__pid_issued(kg_coord *c, int64_t pid);

/* Offsets flush (offsets.c): writes g's file for its pending changes; called
 * with c->mu held, releases it around the I/O. */
void kg__group_write(kg_coord *c, kg_group *g, kg_outbox *ob);
/* Fails and drops every pending commit of g with err (c->mu held). */
void kg__group_fail_commits(kg_coord *c, kg_group *g, int16_t err, kg_outbox *ob);

#endif
