/*
 * coord.h — the group coordinator and the producer-ID allocator.
 *
 * One kg_coord per broker.  It answers the consumer-group APIs (classic
 * protocol, as a Kafka 2.x broker does), keeps each group's committed
 * offsets and membership (generation, members, assignments: they survive a
 * restart, as Kafka's GroupMetadata records do) in CLUSTER/groups/<group>.json
 * and hands out producer IDs from blocks claimed under CLUSTER/pid-blocks/
 * (docs/groups.md, docs/formats.md).
 *
 * In a cluster (cfg.leaders set) a group belongs to shard
 * kg_shard_of(group id) of the applied leader map; only the shard's owner
 * coordinates it, at the shard's epoch, and writes its file under a name
 * that carries the epoch: groups/<group>.<epoch:10>.json, newest epoch wins
 * (docs/groups.md, "Coordinators in a cluster").
 *
 * Wiring into the broker (kaas/core, kaas/net):
 *   - after b->cluster is open:   kg_coord_open(b, &b->coord)
 *   - dispatch rows: the kg_h_* functions below, one per API, with the
 *     version ranges of DESIGN §8 (noted beside each);
 *   - SIGTERM: the coordinator watches b->stopping and answers every parked
 *     JoinGroup/SyncGroup with NOT_COORDINATOR (clients look for the
 *     coordinator again), so the server's drain is not held up; after the
 *     server has drained, kg_coord_close(b->coord) writes every accepted
 *     offset commit and stops the threads.
 *
 * Threads: the coordinator runs two of its own — a timer thread (loading the
 * groups on the volume at start, session expiry, rebalance and initial
 * delays) and a flusher (group files).  The handlers may be called from
 * any number of worker threads at once.
 */
#ifndef KAAS_COORD_H
#define KAAS_COORD_H

#include <stdint.h>

#include "kaas/proto/api.h"
#include "kaas/proto/buf.h"
#include "substrates/sub.h"

typedef struct kg_coord kg_coord;
struct kb_broker;

/* Settings (Kafka's names in docs/groups.md). */
typedef struct kg_coord_config {
	int32_t broker_id;
	const char *host;                   /* advertised endpoint (FindCoordinator) */
	int32_t port;
	int64_t initial_rebalance_delay_ms; /* group.initial.rebalance.delay.ms (3000) */
	int64_t min_session_timeout_ms;     /* group.min.session.timeout.ms (6000) */
	int64_t max_session_timeout_ms;     /* group.max.session.timeout.ms (1800000) */
	int32_t max_group_size;             /* group.max.size (2147483647) */
	int64_t offsets_retention_ms;       /* offsets.retention.minutes * 60000 (7 days); <= 0: forever */
	int64_t offsets_retention_check_ms; /* offsets.retention.check.interval.ms (600000) */
	int32_t offset_metadata_max_bytes;  /* offset.metadata.max.bytes (4096) */
	int64_t new_member_join_timeout_ms; /* a new member must rejoin within (300000) */
	int64_t coordinator_epoch;          /* without a leader map: the epoch of every group (0) */
	/* The applied leader map (kb_ptable_leaders: a new reference or NULL).
	 * Set: the coordinator is driven by the cluster's shards; NULL from it
	 * means no map yet (nothing is coordinated here).  Unset: this broker
	 * coordinates every group at coordinator_epoch. */
	struct kb_leaders *(*leaders)(void *arg);
	void *leaders_arg;
	/* When it points at a flag that becomes non-zero (the broker's
	 * b->stopping), the coordinator drains as kg_coord_drain() does. */
	volatile int *stopping;
	/* The ack gate (kb_ptable_set_ack_gate): asked after a commit's file
	 * write returned and before the commit is answered; 0 answers
	 * NOT_COORDINATOR (this broker's lease no longer holds).  NULL: open. */
	int (*ack_gate)(void *arg);
	void *ack_gate_arg;
	/* Tests: no threads; time comes from now_ms(); kg_coord_tick() and
	 * kg_coord_flush() do the threads' work. */
	int manual;
	int64_t (*now_ms)(void *arg);   /* monotonic ms */
	int64_t (*wall_ms)(void *arg);  /* wall-clock ms (commit times, retention) */
	void *now_arg;
} kg_coord_config;

void kg_coord_config_defaults(kg_coord_config *cfg);

/* "Does partition topic/partition exist?" — OffsetCommit answers
 * UNKNOWN_TOPIC_OR_PARTITION for the ones that do not.  Returns a Kafka
 * error code (KERR_NONE when it exists). */
typedef int16_t (*kg_coord_topic_fn)(void *arg, kw_str topic, int32_t partition);

/* Opens a coordinator on the cluster volume.  Creates groups/ and
 * pid-blocks/ when missing.  Nothing is read eagerly: a group's file is read
 * when a request first names it. */
int kg_coord_create(sub_vfs *cluster, const kg_coord_config *cfg, kg_coord **out);
void kg_coord_set_topic_check(kg_coord *c, kg_coord_topic_fn fn, void *arg);

/* The broker's authorizer (kaas/core/acl.h), asked with each call's ctx:
 * authorize is 1 when the call may do op on the resource (`log` 0 for
 * listings that leave out what it may not see), authorize_any Kafka's
 * authorizeByResourceType, authorized_ops the bits of `supported` allowed.
 * Set once before serving; none set (unit tests): everything is allowed. */
typedef struct kg_authorizer {
	int (*authorize)(void *ctx, int op, int rtype, const char *name, int32_t len, int log);
	int (*authorize_any)(void *ctx, int op, int rtype);
	int32_t (*authorized_ops)(void *ctx, int rtype, const char *name, int32_t len, uint32_t supported);
} kg_authorizer;
void kg_coord_set_authorizer(kg_coord *c, const kg_authorizer *a);

/* The broker's way in: settings from b->cfg, volume b->cluster, topic
 * existence from b->parts.  Starts the threads. */
int kg_coord_open(struct kb_broker *b, kg_coord **out);

/* A SIGTERM drain has begun: parked JoinGroup/SyncGroup requests are
 * answered with NOT_COORDINATOR at once and no new ones are parked, so the
 * server's "finish requests in flight" is not held up by a rebalance that
 * waits for other members.  Offset commits go on being written.  Does not
 * block (safe on the event loop). */
void kg_coord_drain(kg_coord *c);

/* Flushes pending commits (their requests are answered), answers parked
 * requests with NOT_COORDINATOR, stops the threads, frees.  NULL-safe. */
void kg_coord_close(kg_coord *c);

/* Which broker coordinates key (a group id, or a transactional id when
 * key_type is 1)?  Without a leader map: this one.  With one: the owner of
 * shard kg_shard_of(key), by its endpoint for the listener named `listener`
 * (NULL: its first; host gets a copy); COORDINATOR_NOT_AVAILABLE when the
 * shard has no live owner or the owner has no such listener.  Returns
 * KERR_NONE and fills node/host/port, or a Kafka error code. */
int16_t kg_coord_owner(kg_coord *c, int8_t key_type, kw_str key, const char *listener,
		       int32_t *node, char *host, size_t hostlen, int32_t *port);

/* The shard of a group id: FNV-1a (32-bit: offset basis 2166136261, prime
 * 16777619) over the id's bytes, modulo nshards.  Identical on every broker
 * and every version; it never changes (docs/groups.md).  0 when nshards <= 0. */
int32_t kg_shard_of(const char *id, size_t len, int32_t nshards);

/* ---- the Kafka APIs (kw_handler_fn; the broker's dispatch table) ---------- */
int kg_h_find_coordinator(kb_req *req, kw_rd *body, kw_wr *resp); /* 10: v0-2 */
int kg_h_join_group(kb_req *req, kw_rd *body, kw_wr *resp);       /* 11: v0-5 */
int kg_h_heartbeat(kb_req *req, kw_rd *body, kw_wr *resp);        /* 12: v0-3 */
int kg_h_leave_group(kb_req *req, kw_rd *body, kw_wr *resp);      /* 13: v0-3 */
int kg_h_sync_group(kb_req *req, kw_rd *body, kw_wr *resp);       /* 14: v0-3 */
int kg_h_describe_groups(kb_req *req, kw_rd *body, kw_wr *resp);  /* 15: v0-4 */
int kg_h_list_groups(kb_req *req, kw_rd *body, kw_wr *resp);      /* 16: v0-2 */
int kg_h_delete_groups(kb_req *req, kw_rd *body, kw_wr *resp);    /* 42: v0-1 */
int kg_h_offset_commit(kb_req *req, kw_rd *body, kw_wr *resp);    /* 8: v0-7 */
int kg_h_offset_fetch(kb_req *req, kw_rd *body, kw_wr *resp);     /* 9: v0-7, flexible 6+ */
int kg_h_offset_delete(kb_req *req, kw_rd *body, kw_wr *resp);    /* 47: v0 */
int kg_h_init_producer_id(kb_req *req, kw_rd *body, kw_wr *resp); /* 22: v0-4, flexible 2+ */

/* ---- the same without a server (unit tests, tools) ---------------------------- */

/* Completion of a KAAS_DEFERRED call: takes over resp (resets it). */
typedef void (*kg_coord_done_fn)(void *ctx, kw_wr *resp);

typedef struct kg_coord_call {
	int16_t api_key;
	int16_t version;
	int flex;                /* the body uses flexible encodings */
	kw_str client_id;      /* len -1 when null */
	const char *client_host; /* as DescribeGroups shows it: "/127.0.0.1" */
	kg_coord_done_fn done; /* for KAAS_DEFERRED answers */
	void *ctx;
	const char *adv_host;    /* this broker as the client's listener advertises it */
	int32_t adv_port;        /* (NULL: the coordinator's configured endpoint) */
	const char *listener;    /* that listener's name (NULL: the first) */
} kg_coord_call;

/* Decodes body, acts, and writes the response body into resp (KAAS_HANDLED)
 * or arranges for call->done(call->ctx, resp) later (KAAS_DEFERRED).
 * -EBADMSG when the body does not parse (body->err names the field). */
int kg_coord_handle(kg_coord *c, const kg_coord_call *call, kw_rd *body, kw_wr *resp);

/* manual mode: one pass of the timer thread's work at now_ms(); one flush of
 * every group with pending changes.  Both deliver completions before they
 * return. */
void kg_coord_tick(kg_coord *c);
void kg_coord_flush(kg_coord *c);
/* One retention pass (the timer runs it every offsets_retention_check_ms):
 * offsets of groups that have had no members for the retention time, and
 * were not committed within it, are removed (KIP-211).  Queues the writes;
 * in manual mode follow with kg_coord_flush(). */
void kg_coord_expire_offsets(kg_coord *c);

/* Reads every group file under groups/ that this broker coordinates and is
 * not in memory yet, restoring the groups' members (the timer thread does it
 * when the coordinator starts; otherwise a group is read when a request
 * first names it).  Driven by a leader map: follows the map instead — lets
 * go of shards lost, takes over (loads and claims) shards gained. */
void kg_coord_load_groups(kg_coord *c);

/* 1 when every shard the applied leader map gives this broker is served
 * here (its groups read and claimed at the map's epoch); 0 while one is not
 * yet (the map waits for its old owner, or the load is under way: the
 * timer thread is woken to do it).  1 without a leader map and while the
 * ack gate is closed (nothing is this broker's to serve then).  The
 * cluster says "ready" only after it, so that a client which comes once
 * the broker is ready finds its group rather than
 * COORDINATOR_LOAD_IN_PROGRESS. */
int kg_coord_settled(kg_coord *c);

/* Counters for tests and the bench. */
typedef struct kg_coord_stats {
	uint64_t commits;        /* OffsetCommit requests that changed offsets */
	uint64_t group_writes;   /* group files written */
	uint64_t write_failures;
	uint64_t write_unacked;  /* written, but the shard or the lease was gone after: not acknowledged */
	uint64_t pid_blocks;     /* producer-ID blocks claimed */
	uint64_t expired;        /* offsets removed by retention */
} kg_coord_stats;
void kg_coord_get_stats(kg_coord *c, kg_coord_stats *st);

/* census.c: every committed offset held in memory, for the consumer-lag
 * metric (no I/O; the coordinator's lock is held: fn must be quick and call
 * nothing of the coordinator).  Strings are not NUL-terminated. */
typedef void (*kg_offset_fn)(void *arg, const char *group, size_t glen, const char *topic, size_t tlen,
			     int32_t partition, int64_t offset);
void kg_coord_each_offset(kg_coord *c, kg_offset_fn fn, void *arg);

#endif
