/*
 * leaders.h — the applied leader map: who leads each partition and shard of
 * the cluster, at which epoch, and how clients reach each broker.
 *
 * The cluster layer builds one from the assignment it applied and the live
 * brokers it sees, and hands it to the partition table
 * (kb_ptable_apply_leaders); Metadata, FindCoordinator and the not-leader
 * answers read it (kb_ptable_leaders).  A map is immutable once applied and
 * reference counted, so a reader holds a consistent picture for a whole
 * request while the cluster applies the next one.  Without a map (a table
 * not driven by a cluster) readers fall back to "this broker leads what it
 * has open".
 */
#ifndef KAAS_CORE_LEADERS_H
#define KAAS_CORE_LEADERS_H

#include <stddef.h>
#include <stdint.h>

#define KB_MAX_LISTENERS 8

/* One advertised endpoint of a broker: the listener's name and where its
 * clients connect. */
typedef struct kb_endpoint {
	char name[64];
	char host[256];
	int32_t port;
} kb_endpoint;

typedef struct kb_lbroker {
	int32_t id;
	char host[256]; /* the first listener's endpoint */
	int32_t port;
	char rack[64];  /* "" when none */
	int live;       /* seen alive now (a dead leader stays listed until moved) */
	int nlst;       /* 0: the broker did not say (an older kaas): host/port for all */
	kb_endpoint lst[KB_MAX_LISTENERS];
} kb_lbroker;

typedef struct kb_ltopic {
	char *name;
	char topic_id[40]; /* "" when unknown */
	int32_t n;
	int32_t *leader;   /* per partition; -1: nobody */
	int32_t *epoch;
} kb_ltopic;

typedef struct kb_leaders {
	int refs;                 /* atomic */
	int64_t controller_epoch, generation;
	int32_t controller;       /* -1 when unknown */
	size_t nbrokers;
	kb_lbroker *brokers;      /* sorted by id */
	size_t ntopics;
	kb_ltopic *topics;        /* sorted by name (strcmp) */
	int32_t nshards;          /* group-coordinator shards */
	int32_t *shard_leader, *shard_epoch;
	/* The successor rule holds for this broker at this generation: every
	 * other incarnation has released it or is gone, so a shard it newly
	 * gives this broker may be served (kcl_view_clear_for).  Shards kept at
	 * the same epoch need no new clearance. */
	int clear;
} kb_leaders;

/* An empty map with one reference; the builder fills the arrays (calloc'd,
 * freed by the last kb_leaders_put). */
kb_leaders *kb_leaders_new(size_t nbrokers, size_t ntopics, int32_t nshards);
int kb_ltopic_init(kb_ltopic *t, const char *name, const char *topic_id, int32_t n);
void kb_leaders_get(kb_leaders *m);
void kb_leaders_put(kb_leaders *m); /* NULL-safe */

/* 0 with the leader and epoch, -ENOENT when the map has no such partition. */
int kb_leaders_find(const kb_leaders *m, const char *topic, int32_t partition, int32_t *leader,
		    int32_t *epoch);
const kb_lbroker *kb_leaders_broker(const kb_leaders *m, int32_t id);

/* How a client of the listener named `listener` reaches lb: that listener's
 * endpoint (0), lb's only endpoint when it named none (0), or -ENOENT when
 * lb has no listener of that name, which Kafka answers by leaving the broker
 * out and LISTENER_NOT_FOUND for what it leads.  listener NULL: the first. */
int kb_lbroker_endpoint(const kb_lbroker *lb, const char *listener, const char **host,
			int32_t *port);

#endif
