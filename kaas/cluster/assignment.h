/*
 * assignment.h — who leads what: the controller's assignment on the volume.
 *
 * Two kinds of file, so that polling costs almost nothing while nothing
 * changes (docs/cluster.md has the sizes):
 *
 *   CLUSTER/assignment/<controller_epoch:10>-<generation:20>.json
 *       the document: every partition's leader and leader epoch, every
 *       group-coordinator shard's owner and epoch, the broker incarnations
 *       the leaders stand for.  Write-once: a fresh name per generation,
 *       written with sub_write_atomic, never rewritten.
 *   CLUSTER/assignment.json
 *       the pointer: a couple of hundred bytes naming the current document
 *       (controller epoch, generation), rewritten with sub_write_atomic
 *       after the document is durable.
 *
 * Brokers read the pointer every poll and the document only when the
 * pointer names a generation they have not applied.  A pointer or document
 * of a controller epoch below the highest one a reader has seen is ignored:
 * a deposed controller's late write is never applied.  Documents are
 * validated whole (counts, ids, epochs, names) before anything is used; a
 * reader keeps its last applied assignment when the new one is refused.
 */
#ifndef KAAS_CLUSTER_ASSIGNMENT_H
#define KAAS_CLUSTER_ASSIGNMENT_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/cluster/member.h"
#include "substrates/sub.h"

#define KCL_ASSIGN_VERSION 1
#define KCL_APTR_VERSION 1
#define KCL_PARTS_MAX 100000     /* per topic */
#define KCL_TOTAL_PARTS_MAX 1000000
#define KCL_BROKERS_MAX 10000
#define KCL_SHARDS_MAX 1024
#define KCL_TOPIC_NAME_MAX 249
#define KCL_EPOCH32_MAX 2147483647
#define KCL_ASSIGN_MAX_BYTES (64u << 20)
#define KCL_APTR_MAX_BYTES 4096

typedef struct kcl_slot {
	int32_t leader; /* broker id, -1: nobody (no live broker) */
	int32_t epoch;  /* leader epoch (>= 1 when led); bumped at every move */
} kcl_slot;

typedef struct kcl_atopic {
	char name[KCL_TOPIC_NAME_MAX + 1];
	char topic_id[37]; /* "" when unknown */
	int32_t n;
	kcl_slot *parts;
} kcl_atopic;

typedef struct kcl_abroker {
	int32_t id;
	kcl_incarn inc; /* the incarnation the slots of this id stand for */
} kcl_abroker;

typedef struct kcl_assign {
	kcl_gen gen;
	int32_t controller;
	size_t nbrokers;
	kcl_abroker *brokers; /* sorted by id */
	size_t ntopics;
	kcl_atopic *topics;   /* sorted by name (strcmp) */
	int32_t nshards;
	kcl_slot *shards;
} kcl_assign;

void kcl_assign_free(kcl_assign *a); /* frees the members, NULL-safe */

/* Deep copy-free helpers for builders: allocate topics/brokers/shards. */
int kcl_assign_alloc(kcl_assign *a, size_t nbrokers, size_t ntopics, int32_t nshards);
int kcl_atopic_alloc(kcl_atopic *t, const char *name, const char *topic_id, int32_t n);

/* Structural validation (what decode checks, for documents built in memory). */
int kcl_assign_check(const kcl_assign *a, char *err, size_t errlen);

int kcl_assign_encode(const kcl_assign *a, char **out, size_t *len);
int kcl_assign_decode(const char *buf, size_t len, kcl_assign *out, char *err, size_t errlen);

const kcl_atopic *kcl_assign_topic(const kcl_assign *a, const char *name);
const kcl_abroker *kcl_assign_broker(const kcl_assign *a, int32_t id);

/* ---- the pointer ---------------------------------------------------------------- */

typedef struct kcl_aptr {
	kcl_gen gen;
	int32_t controller;
	int64_t doc_bytes;     /* size of the document, checked on read */
	int64_t wall_ms;       /* informational */
} kcl_aptr;

int kcl_aptr_encode(const kcl_aptr *p, char **out, size_t *len);
int kcl_aptr_decode(const char *buf, size_t len, kcl_aptr *out, char *err, size_t errlen);
int kcl_assign_doc_path(kcl_gen g, char *dst, size_t dstlen);

/* Reads and decodes the pointer (err names the file and the reason). */
int kcl_aptr_read(sub_vfs *v, kcl_aptr *p, char *err, size_t errlen);
/* Reads the document the pointer names, checked whole (its size against
 * the pointer's, its generation against its name); -ENOENT when it was
 * cleaned up meanwhile (read the pointer again). */
int kcl_assign_read(sub_vfs *v, const kcl_aptr *p, kcl_assign *out, char *err, size_t errlen);

/* The controller publishes: document (write-once name), then pointer.  The
 * caller checked kcl_ctl_superseded and its lease just before. */
int kcl_assign_publish(sub_vfs *v, const kcl_assign *a, int64_t wall_ms, char *err, size_t errlen);

/* Removes documents older than the newest `keep` (never `current`).  A
 * reader that loses the race to a removed document reads the pointer again. */
int kcl_assign_cleanup(sub_vfs *v, kcl_gen current, unsigned keep, unsigned *removed);

/* ---- the reader ---------------------------------------------------------------- */

typedef struct kcl_areader {
	kcl_gen applied;        /* the last document returned; {0,0} none */
	int64_t max_epoch;      /* highest controller epoch seen anywhere */
	int pointer_present;    /* the last poll found assignment.json (readable or not) */
	int pointer_valid;      /* ... and it decoded: pointer_gen is what it names */
	kcl_gen pointer_gen;
	uint64_t polls, docs_read, refused; /* docs_read: documents applied */
} kcl_areader;

/* A controller epoch learnt elsewhere (a claim in controller/). */
void kcl_areader_note_epoch(kcl_areader *r, int64_t controller_epoch);

/* One poll.  Returns 0 when nothing changed (or no pointer yet), 1 with a
 * new validated document in *out (the caller frees it; r->applied is now
 * its generation), -ESTALE when the pointer or document belongs to an older
 * controller epoch (ignored; err says so), or another -errno with err
 * naming the file and the reason (the last applied document stays in
 * force). */
int kcl_assign_poll(sub_vfs *v, kcl_areader *r, kcl_assign *out, char *err, size_t errlen);

#endif
