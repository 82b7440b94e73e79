/*
 * dyncfg.h — dynamic broker configs: the settings that change at run time,
 * on every broker of the cluster, without a restart (Kafka's
 * DYNAMIC_BROKER_CONFIG and DYNAMIC_DEFAULT_BROKER_CONFIG).
 *
 * Two entities hold values: the cluster-wide default (Kafka's broker
 * resource "") and each broker ("<id>").  Precedence, per key: this
 * broker's value > the cluster default > the static setting (file,
 * environment, flags: b->cfg) > Kafka's default.  Only the keys of the
 * table below can be dynamic; every other broker setting is refused by name.
 *
 * On the volume each entity is a directory of write-once versions,
 * CLUSTER/configs/brokers/<default|id>/<seq:020>.json, each the complete
 * state of the entity, created with sub_create_excl; the highest valid one
 * is the state (docs/cluster.md "Dynamic broker configs" has the protocol,
 * docs/formats.md the file).  Writers never overwrite: a read-modify-write
 * that loses the race for the next name re-reads and tries again, so two
 * brokers altering at once never lose an update.
 *
 * Publication.  b->cfg stays read-only after start-up.  The store keeps the
 * current state in a snapshot (kb_dynsnap, plain data) that is replaced
 * whole under the store's mutex and copied out under it
 * (kb_dyncfg_snapshot); the effective value of every key is mirrored in an
 * array of 64-bit atomics, so hot readers (the accept path on the event
 * loop, Metadata's auto-create) read one value without a lock
 * (kb_broker_dyn).  Each such value stands alone, so a reader that sees the
 * old value of one key and the new of another is still correct for each.
 *
 * Thread-safe; blocking I/O (a handler or the upkeep, never the loop).
 */
#ifndef KAAS_CORE_DYNCFG_H
#define KAAS_CORE_DYNCFG_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/core/broker.h"
#include "substrates/sub.h"

/* The keys that can change at run time. */
enum kb_dyn_key {
	KB_DYN_LOG_RETENTION_MS = 0,
	KB_DYN_LOG_RETENTION_BYTES,
	KB_DYN_LOG_SEGMENT_BYTES,
	KB_DYN_LOG_ROLL_MS,
	KB_DYN_MESSAGE_MAX_BYTES,
	KB_DYN_LOG_INDEX_INTERVAL_BYTES,
	KB_DYN_LOG_MESSAGE_TIMESTAMP_TYPE,
	KB_DYN_LOG_CLEANUP_POLICY,
	KB_DYN_COMPRESSION_TYPE,
	KB_DYN_NUM_PARTITIONS,
	KB_DYN_AUTO_CREATE_TOPICS_ENABLE,
	KB_DYN_MAX_CONNECTIONS,
	KB_DYN_MAX_CONNECTIONS_PER_IP,
	KB_DYN_COUNT
};

#define KB_DYN_VALUE_MAX 32   /* canonical text of any dynamic value */
#define KB_DYN_DEFAULT (-1)   /* the entity "cluster-wide default" */

/* Kafka name of a dynamic key, NULL out of range. */
const char *kb_dyn_name(int k);
/* Index of a dynamic key, -1 when the name is not dynamic. */
int kb_dyn_index(const char *name, size_t len);

/* Validates one value as the static config does (kb_config_set: the same
 * type, bounds and rules; blanks around it trimmed as in the file) and
 * writes its canonical text.  0 or -EINVAL with err naming the key. */
int kb_dyn_check(int k, const char *value, size_t len, char canon[KB_DYN_VALUE_MAX], char *err,
		 size_t errlen);
/* The value key k has in c, as canonical text. */
void kb_dyn_format(int k, const kb_config *c, char canon[KB_DYN_VALUE_MAX]);

/* The values set at one entity. */
typedef struct kb_dyn_set {
	uint32_t set;                          /* bit (1u << k) */
	char val[KB_DYN_COUNT][KB_DYN_VALUE_MAX];
} kb_dyn_set;

enum { KB_DYN_LEVEL_DEFAULT = 0, KB_DYN_LEVEL_BROKER = 1 };

typedef struct kb_dynsnap {
	uint64_t gen;                /* bumped by every change applied here */
	int64_t seq[2];              /* version applied per level (0: none) */
	kb_dyn_set level[2];         /* [KB_DYN_LEVEL_DEFAULT], [KB_DYN_LEVEL_BROKER] */
	int64_t eff[KB_DYN_COUNT];   /* effective value (numbers; enums and booleans as 0/1) */
	char eff_text[KB_DYN_COUNT][KB_DYN_VALUE_MAX];
} kb_dynsnap;

typedef struct kb_dyncfg kb_dyncfg;

/* Timings (docs/cluster.md): a writer that has not read back its version
 * within write_deadline_ms of listing the directory does not acknowledge
 * it; a version seen incomplete for abandon_ms is abandoned, and a version
 * is removed only once it has been `keep` below the newest for clean_ms
 * (both well over the deadline: the writer of an acknowledged version was
 * always done, and never wrote to a name that cleanup had freed). */
typedef struct kb_dyncfg_options {
	int64_t write_deadline_ms;   /* 3000 */
	int64_t abandon_ms;          /* 10000 */
	int64_t clean_ms;            /* 10000 */
	int keep;                    /* versions kept per entity at least (8) */
} kb_dyncfg_options;
void kb_dyncfg_options_init(kb_dyncfg_options *o);

/* Opens the store of broker `broker_id` over the static settings `stat`
 * (copied) and reads both entities once.  A bad version on the volume is
 * refused by name (logged) and the highest good one used.  o may be NULL.
 * 0 or -errno (the cluster volume failed). */
int kb_dyncfg_open(sub_vfs *cluster, const kb_config *stat, int32_t broker_id,
		   const kb_dyncfg_options *o, kb_dyncfg **out);
void kb_dyncfg_close(kb_dyncfg *d); /* NULL-safe */

/* Re-reads both entities (two listings; a version file only when the
 * highest name changed) and publishes a new snapshot if anything changed.
 * 1 when it did, 0 when nothing changed, -errno (the last state stays). */
int kb_dyncfg_poll(kb_dyncfg *d);

void kb_dyncfg_snapshot(kb_dyncfg *d, kb_dynsnap *out);
uint64_t kb_dyncfg_gen(kb_dyncfg *d);
int64_t kb_dyncfg_value(kb_dyncfg *d, int k); /* effective, lock-free */
int32_t kb_dyncfg_broker_id(const kb_dyncfg *d);
const kb_config *kb_dyncfg_static(const kb_dyncfg *d);

/* Alters one entity (KB_DYN_DEFAULT or a broker id): reads the highest
 * version, lets edit() change a copy of its set (edit returns a Kafka
 * error code with msg, KERR_NONE to go on), writes the next version with
 * sub_create_excl and reads it back; lost races are re-read and edited
 * again.  validate_only: edit, write nothing.  On success the snapshot is
 * republished before it returns.  Returns a Kafka error code: edit's,
 * UNKNOWN_SERVER_ERROR (the volume failed, or the outcome is unknown: msg
 * says which). */
typedef int16_t (*kb_dyn_edit_fn)(void *arg, kb_dyn_set *s, char *msg, size_t msglen);
int16_t kb_dyncfg_alter(kb_dyncfg *d, int32_t entity, kb_dyn_edit_fn edit, void *arg, int validate_only,
			char *msg, size_t msglen);

/* The effective value of key k on broker b: its store's when it has one
 * (b->dyn), else the static setting.  Lock-free. */
int64_t kb_broker_dyn(const kb_broker *b, int k);

/* ---- for tests ------------------------------------------------------------------- */
/* Parses a version file of `entity` named seq; 0 (set filled), -EINVAL
 * (refused: why says which field), -EAGAIN (incomplete: not yet a JSON
 * object). */
int kb__dyn_parse(const char *buf, size_t len, int32_t entity, int64_t seq, kb_dyn_set *s, char *why,
		  size_t whylen);

#endif
