/*
 * topics.h — the topic registry: which topics exist, their topic IDs,
 * partition counts and configs.
 *
 * The registry lives on the cluster volume, one file per topic,
 * CLUSTER/topics/<name>.json, claimed with sub_create_excl (two creators on
 * any hosts: exactly one wins) and rewritten with sub_write_atomic.  Each
 * topic directory on the data volume is stamped with the topic's ID in
 * DATA/<topic>/.topic-id.json, so a directory left over from an earlier topic
 * of the same name is recognised instead of being inherited (names are not
 * identities) — and reclaimed only on consistent evidence, into a trash that
 * keeps it for a grace period.  docs/topics.md describes the life cycle and
 * what is guaranteed; docs/formats.md the files.
 *
 * Lookups are served from memory and cheap (one read lock, a hash probe).
 * The memory view follows the volume: a lookup that misses re-reads that one
 * name (at most every miss_ttl_ms), and kt_topics_tick() re-reads the
 * registry directory, so topics created, changed or deleted by other brokers
 * appear and disappear here too.
 *
 * The registry never touches partitions itself: it tells the broker through
 * two hooks (topic appeared/grew/changed; topic goes away) and the broker's
 * partition table opens, takes over, reconfigures or relinquishes them.
 *
 * Kafka-facing operations return a Kafka error code (KERR_*, KERR_NONE on
 * success) and a message for the client in msg; other functions return 0 or
 * a negative errno.  Every function is thread-safe.  A name that breaks
 * Kafka's rules is refused with KERR_INVALID_TOPIC_EXCEPTION before anything
 * on either volume is touched.
 */
#ifndef KAAS_TOPICS_H
#define KAAS_TOPICS_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/proto/buf.h"
#include "kaas/storage/storage.h"
#include "substrates/sub.h"

#define KAAS_TOPIC_NAME_MAX 249         /* Kafka's limit */
#define KAAS_TOPIC_ID_LEN 36            /* "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx" */
#define KAAS_TOPIC_PARTITIONS_MAX 10000 /* per topic; more is INVALID_PARTITIONS */

typedef struct kt_topics kt_topics;

/* ---- names ------------------------------------------------------------------
 * Kafka's rules: 1..249 characters from [a-zA-Z0-9._-], not "." or "..".
 * Returns KERR_NONE or KERR_INVALID_TOPIC_EXCEPTION with a message. */
int16_t kt_topic_name_check(const char *name, int32_t len, char *msg, size_t msglen);

/* ---- topic configs -------------------------------------------------------------
 * Every topic-level setting Kafka 3.x accepts (docs/topics.md lists what
 * each does here).  Values are Kafka's strings; every other name is
 * INVALID_CONFIG ("Unknown topic config name"), as in Kafka.  Three kinds:
 * honoured; accepted with no effect (they mean nothing on one shared
 * volume, or only with a feature that is off); and accepted only at the
 * value kaas can honour, refused otherwise with a message saying why. */
enum kt_tcfg {
	KAAS_TC_CLEANUP_POLICY = 0,      /* delete | compact | compact,delete (num: KS_CLEANUP_*) */
	KAAS_TC_COMPRESSION_GZIP_LEVEL,  /* no effect: the broker never compresses */
	KAAS_TC_COMPRESSION_LZ4_LEVEL,   /* no effect */
	KAAS_TC_COMPRESSION_TYPE,        /* producer (batches are stored as produced) */
	KAAS_TC_COMPRESSION_ZSTD_LEVEL,  /* no effect */
	KAAS_TC_DELETE_RETENTION_MS,     /* tombstones of compacted topics */
	KAAS_TC_FILE_DELETE_DELAY_MS,    /* no effect */
	KAAS_TC_FLUSH_MESSAGES,          /* no effect: acks wait for the volume */
	KAAS_TC_FLUSH_MS,                /* no effect */
	KAAS_TC_FOLLOWER_REPLICATION_THROTTLED_REPLICAS, /* no effect: no replication */
	KAAS_TC_INDEX_INTERVAL_BYTES,
	KAAS_TC_LEADER_REPLICATION_THROTTLED_REPLICAS,   /* no effect */
	KAAS_TC_LOCAL_RETENTION_BYTES,   /* no effect: no tiered storage */
	KAAS_TC_LOCAL_RETENTION_MS,      /* no effect */
	KAAS_TC_MAX_COMPACTION_LAG_MS,
	KAAS_TC_MAX_MESSAGE_BYTES,
	KAAS_TC_MESSAGE_DOWNCONVERSION_ENABLE, /* no effect: nothing is down-converted */
	KAAS_TC_MESSAGE_FORMAT_VERSION,  /* no effect (ignored by Kafka 3.x too) */
	KAAS_TC_MESSAGE_TIMESTAMP_AFTER_MAX_MS,  /* only the default (no bound) */
	KAAS_TC_MESSAGE_TIMESTAMP_BEFORE_MAX_MS, /* only the default (no bound) */
	KAAS_TC_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS,
	KAAS_TC_MESSAGE_TIMESTAMP_TYPE,  /* CreateTime | LogAppendTime */
	KAAS_TC_MIN_CLEANABLE_DIRTY_RATIO,
	KAAS_TC_MIN_COMPACTION_LAG_MS,
	KAAS_TC_MIN_INSYNC_REPLICAS,     /* no effect (one copy on the volume) */
	KAAS_TC_PREALLOCATE,             /* no effect */
	KAAS_TC_REMOTE_LOG_COPY_DISABLE, /* no effect: no tiered storage */
	KAAS_TC_REMOTE_LOG_DELETE_ON_DISABLE, /* no effect */
	KAAS_TC_REMOTE_STORAGE_ENABLE,   /* false (true is refused: no tiered storage) */
	KAAS_TC_RETENTION_BYTES,
	KAAS_TC_RETENTION_MS,
	KAAS_TC_SEGMENT_BYTES,
	KAAS_TC_SEGMENT_INDEX_BYTES,     /* no effect: index files are sized by kaas */
	KAAS_TC_SEGMENT_JITTER_MS,       /* no effect: segments roll at segment.ms */
	KAAS_TC_SEGMENT_MS,
	KAAS_TC_UNCLEAN_LEADER_ELECTION_ENABLE, /* no effect */
	KAAS_TC_COUNT
};

/* A name/value pair as decoded from a request (value.len < 0: null). */
typedef struct kt_config_kv {
	kw_str name;
	kw_str value;
} kt_config_kv;

/* Kafka name of a config ("retention.ms") and of its broker-level synonym
 * ("log.retention.ms", NULL when none). */
const char *kt_tcfg_name(int tc);
const char *kt_tcfg_broker_name(int tc);

/* Validates a config set (names known, values well-formed and in range, no
 * name twice).  KERR_NONE or KERR_INVALID_CONFIG with a message naming the
 * key.  Touches nothing. */
int16_t kt_topic_configs_check(const kt_config_kv *kv, size_t n, char *msg, size_t msglen);

/* ---- what a lookup returns ------------------------------------------------------ */
typedef struct kt_topic_info {
	char name[KAAS_TOPIC_NAME_MAX + 1];
	char id[KAAS_TOPIC_ID_LEN + 1]; /* the topic ID, UUIDv4 string */
	uint8_t id_bytes[16];           /* the same, as Kafka's wire uuid */
	int32_t partitions;
	int16_t replication_factor;     /* always 1: the volume is the only copy */
	int64_t created_ms;             /* wall clock of the creating broker */
	ks_log_config cfg;            /* effective: broker defaults + topic overrides */
	uint64_t overrides;             /* bit (1ull << KAAS_TC_*) per config set on the topic */
} kt_topic_info;

/* ---- the broker's side -------------------------------------------------------------
 * Called from the thread doing the operation (a handler, the tick), with no
 * lookup lock held but with the registry's mutation lock held: a hook may
 * look topics up, but must not create, delete or alter topics, nor call
 * kt_topics_tick() or kt_topics_prepare_dir(). */
typedef struct kt_topics_hooks {
	void *arg;
	/* A topic exists (created here or seen on the volume), grew, or its
	 * effective config changed: open/take over the partitions not yet open,
	 * apply t->cfg to the open ones.  DATA/<topic>/ is already stamped with
	 * t->id.  0 or -errno; a failure is retried at the next tick. */
	int (*topic_changed)(void *arg, const kt_topic_info *t);
	/* A topic goes away (deleted here or by another broker): relinquish and
	 * close every partition of topic `name` (incarnation topic_id); return 0
	 * only once no descriptor under DATA/<name>/ is open in this process.
	 * The directory is removed afterwards.  0 when nothing was open. */
	int (*topic_dropped)(void *arg, const char *name, const char *topic_id);
	/* Only the effective config of a known topic changed (the broker
	 * defaults moved: kt_topics_set_defaults): apply t->cfg to the open
	 * partitions.  0 or -errno (then topic_changed re-drives it at the
	 * next tick).  NULL: topic_changed at the next tick. */
	int (*config_changed)(void *arg, const kt_topic_info *t);
} kt_topics_hooks;

typedef struct kt_topics_options {
	sub_vfs *cluster;              /* CLUSTER root (registry under topics/) */
	sub_vfs *data;                 /* DATA root (topic directories) */
	ks_log_config defaults;      /* the broker's log.* settings */
	int32_t num_partitions;        /* num.partitions: CreateTopics -1 and auto-create */
	int16_t default_replication_factor; /* default.replication.factor (reported only) */
	/* A top-level DATA name kaas uses itself ("__cluster" when the cluster dir
	 * is DATA/__cluster); creating a topic of that name is refused.  NULL: none. */
	const char *reserved_name;
	int64_t miss_ttl_ms;           /* a missing name is re-read at most this often (1000) */
	int64_t refresh_ms;            /* kt_topics_tick() works at most this often (5000) */
	int64_t claim_grace_ms;        /* an incomplete registry file unchanged this long
	                                  is abandoned and reclaimed (30000) */
	int64_t trash_retention_ms;    /* kaas.trash.retention.ms: a deleted or reclaimed
	                                  directory stays in DATA/~trash-* this long (24 h);
	                                  0: removed at once; -1: kept until `kaas trash empty` */
	kt_topics_hooks hooks;       /* may be left zero (no partitions: tests, tools) */
	/* Several brokers on the volume (kaas always runs as a cluster): the
	 * directory and the tombstone of a deleted topic are the controller's
	 * (kt_topics_delete_finish, once every broker closed the partitions).
	 * This registry then removes the entry, closes its own partitions and
	 * records the ID as deleted, and never renames the directory of a
	 * pending delete.  0: it finishes every delete itself (one process on
	 * the volume: unit tests, tools). */
	int controller_deletes;
	/* With controller_deletes: how long DeleteTopics waits for the delete
	 * to finish before answering (success either way: the topic is gone),
	 * and how long CreateTopics of a name whose earlier incarnation is
	 * still being deleted waits for that before refusing (10000). */
	int64_t delete_wait_ms;
} kt_topics_options;

/* Kafka's defaults for the log settings; num.partitions 1; the timings above. */
void kt_topics_options_init(kt_topics_options *o);

/* Reads the registry, then runs the start-up sweep: finishes interrupted
 * deletes, re-adopts directories holding records that no readable registry
 * entry names (rebuilding the entry from the volume), warns about other
 * orphaned ones (never deleting a directory it cannot prove belongs to a
 * deleted topic).  Does not
 * call topic_changed for the existing topics: list them and start the
 * partition table with them.  0 or -errno (the cluster volume unreadable). */
int kt_topics_open(const kt_topics_options *o, kt_topics **out);
void kt_topics_close(kt_topics *reg); /* NULL-safe */

/* The broker defaults in force (those the registry was opened with, or the
 * last kt_topics_set_defaults). */
void kt_topics_defaults(kt_topics *reg, ks_log_config *out);

/* Dynamic broker configs changed the defaults a topic inherits: recomputes
 * every topic's effective config, and calls config_changed for each one
 * that changed (a failure is re-driven by the tick).  num_partitions < 1
 * leaves num.partitions as it is.  The number of topics changed, or the
 * first -errno of a hook. */
int kt_topics_set_defaults(kt_topics *reg, const ks_log_config *d, int32_t num_partitions);

/* ---- reads -------------------------------------------------------------------------
 * lookup: 0, -ENOENT (no such topic), -EINVAL (invalid name), or -errno
 * (the volume failed while re-reading a missed name). */
int kt_topics_lookup(kt_topics *reg, const char *name, int32_t len, kt_topic_info *out);

/* Every topic, sorted by name; *out is malloc'd (free()).  0 or -ENOMEM. */
int kt_topics_list(kt_topics *reg, kt_topic_info **out, size_t *n);

/* ---- Kafka-facing operations ----------------------------------------------------- */

typedef struct kt_topic_spec {
	kw_str name;
	int32_t partitions;            /* >= 1, or -1 for num.partitions */
	int16_t replication_factor;    /* >= 1, or -1 for the default; reported as 1 */
	const kt_config_kv *configs;
	size_t nconfigs;
} kt_topic_spec;

/* CreateTopics.  KERR_NONE (out filled when not NULL), INVALID_TOPIC_EXCEPTION,
 * INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG,
 * TOPIC_ALREADY_EXISTS (also while another creator's claim is being written,
 * and, with controller_deletes, while an earlier incarnation of the name is
 * still being deleted after waiting delete_wait_ms for it: "marked for
 * deletion", as Kafka says),
 * UNKNOWN_SERVER_ERROR (the volume failed; msg says how).  validate_only
 * checks everything, including existence, and writes nothing. */
int16_t kt_topics_create(kt_topics *reg, const kt_topic_spec *spec, int validate_only,
			   kt_topic_info *out, char *msg, size_t msglen);

/* Metadata's auto-create: the topic with num.partitions and no overrides.
 * KERR_NONE when it exists now (created here or by someone else; out
 * filled), INVALID_TOPIC_EXCEPTION, LEADER_NOT_AVAILABLE while another
 * creator's claim is incomplete or the volume failed (clients retry). */
int16_t kt_topics_auto_create(kt_topics *reg, kw_str name, kt_topic_info *out);

/* DeleteTopics.  KERR_NONE once the registry entry is gone (the topic no
 * longer exists for clients); relinquishing its partitions and removing
 * DATA/<name>/ follow at once and are re-driven by kt_topics_tick() if they
 * fail.  With controller_deletes the directory is left to the controller
 * and the call waits (up to delete_wait_ms, without holding any lock) for
 * the tombstone to go.  UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION,
 * UNKNOWN_SERVER_ERROR. */
int16_t kt_topics_delete(kt_topics *reg, kw_str name, char *msg, size_t msglen);
/* The same in two halves, for a request naming several topics (one wait for
 * all): _start does everything but the wait and fills id (the deleted
 * incarnation; "" unless KERR_NONE); _wait waits for every id given ("" are
 * skipped) until delete_wait_ms, and returns at once without
 * controller_deletes. */
int16_t kt_topics_delete_start(kt_topics *reg, kw_str name, char id[KAAS_TOPIC_ID_LEN + 1], char *msg,
				 size_t msglen);
void kt_topics_delete_wait(kt_topics *reg, const char (*ids)[KAAS_TOPIC_ID_LEN + 1], size_t n);

/* CreatePartitions: grows the topic to `count` partitions.
 * INVALID_PARTITIONS unless count > current (and <= the maximum),
 * UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_SERVER_ERROR. */
int16_t kt_topics_add_partitions(kt_topics *reg, kw_str name, int32_t count, int validate_only,
				   char *msg, size_t msglen);

/* AlterConfigs (non-incremental, as Kafka's: the given set replaces every
 * override; unspecified keys revert to the broker default).  INVALID_CONFIG,
 * UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, UNKNOWN_SERVER_ERROR. */
int16_t kt_topics_alter_configs(kt_topics *reg, kw_str name, const kt_config_kv *kv, size_t n,
				  int validate_only, char *msg, size_t msglen);

/* ---- deletes across brokers (controller_deletes) ----------------------------------
 * A delete in progress is its tombstone, CLUSTER/deleted-topics/<id>.json.
 * The controller lists them, waits until no broker may still hold the
 * partitions (kaas/cluster/tdelete.c), then finishes each. */
typedef struct kt_tombstone {
	char name[KAAS_TOPIC_NAME_MAX + 1];
	char id[KAAS_TOPIC_ID_LEN + 1];
} kt_tombstone;

/* Every valid tombstone (invalid ones are logged and left for an
 * operator); *out is malloc'd (free()).  0 or -errno. */
int kt_topics_tombstones(kt_topics *reg, kt_tombstone **out, size_t *n);

/* The last step of the delete of incarnation `id` of `name`, once nothing
 * references its partitions: removes a registry entry still naming `id`,
 * records `id` as deleted, renames DATA/<name> into the trash only when its
 * stamp names `id` (a directory stamped with another ID, unstamped or
 * unreadable is reported and left), removes the tombstone, then the trash
 * entry when kaas.trash.retention.ms is 0 (else the trash keeps it for its
 * retention).  Calls no hook.  Idempotent: 0 also when there is nothing left
 * to do.  -EBUSY when a registry operation of this process is running
 * (retry later; it never waits for one), other -errno from the volumes. */
int kt_topics_delete_finish(kt_topics *reg, const char *name, const char *id);

/* ---- DescribeConfigs -------------------------------------------------------------- */

enum kt_config_source {            /* Kafka's ConfigSource numbers */
	KAAS_CFG_SRC_UNKNOWN = 0,
	KAAS_CFG_SRC_TOPIC = 1,          /* DYNAMIC_TOPIC_CONFIG */
	KAAS_CFG_SRC_DYNAMIC_BROKER = 2,
	KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER = 3,
	KAAS_CFG_SRC_STATIC_BROKER = 4,  /* set in the broker's config file/flags/env */
	KAAS_CFG_SRC_DEFAULT = 5,        /* Kafka's default */
};

typedef struct kt_config_synonym {
	const char *name;                /* static string */
	char *value;                     /* malloc'd */
	int8_t source;
} kt_config_synonym;

typedef struct kt_config_entry {
	const char *name;                /* static string */
	char *value;                     /* malloc'd; NULL = null (sensitive) */
	int8_t source;
	int read_only;
	int sensitive;
	int nsyn;                        /* synonyms, most specific first */
	kt_config_synonym syn[5];        /* topic, broker, cluster default, static, default */
} kt_config_entry;

typedef struct kt_config_list {
	kt_config_entry *v;
	size_t n, cap;
	int oom;                         /* sticky allocation failure */
} kt_config_list;
#define KAAS_CONFIG_LIST_INIT {NULL, 0, 0, 0}

/* Appends an entry (copies value); sets l->oom on allocation failure. */
kt_config_entry *kt_config_list_add(kt_config_list *l, const char *name, const char *value,
					int8_t source, int read_only);
void kt_config_list_free(kt_config_list *l); /* safe to repeat */

/* Every topic config kaas knows with its effective value, source and
 * synonyms (topic override, then the broker setting).  KERR_NONE,
 * UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION, UNKNOWN_SERVER_ERROR. */
int16_t kt_topics_describe_configs(kt_topics *reg, kw_str name, kt_config_list *out,
				     char *msg, size_t msglen);

/* ---- upkeep --------------------------------------------------------------------------- */

/* Makes DATA/<name>/ exist and carry this topic's stamp.  A directory
 * stamped with another topic ID is moved to the trash only when it is proven
 * to be an earlier, deleted incarnation, adopted when its manifests name this
 * topic, quarantined otherwise (docs/topics.md "Identity"); an unstamped one
 * is adopted.  Idempotent and cheap once done (remembered per topic ID).
 * Create does it already; the partition table may call it before opening
 * partitions to re-drive a create whose stamping failed. */
int kt_topics_prepare_dir(kt_topics *reg, const kt_topic_info *t);

/* Periodic upkeep, on a worker thread: call it often (every second is
 * fine); it does its work at most every refresh_ms and returns 0 at once
 * otherwise.  The work: re-reads the
 * registry directory (topics created/changed/deleted elsewhere reach the
 * hooks), re-drives interrupted creates and deletes, removes reclaimed
 * directories, empties trash older than trash_retention_ms, reclaims
 * abandoned registry claims.  0 or the first -errno
 * (everything is still attempted). */
int kt_topics_tick(kt_topics *reg);

#endif
