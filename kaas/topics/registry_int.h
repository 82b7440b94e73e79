/*
 * registry_int.h — private to registry.c: the registry object and its
 * in-memory entries.
 */
#ifndef KAAS_TOPICS_REGISTRY_INT_H
#define KAAS_TOPICS_REGISTRY_INT_H

#include <pthread.h>
#include <stdint.h>

#include "kaas/topics/tconfig.h"
#include "kaas/topics/topics.h"

/* What reading a registry file found. */
enum { RF_OK = 0, RF_MISSING = 1, RF_INCOMPLETE = 2, RF_CORRUPT = 3 };

typedef struct topic_ent {
	kt_topic_info info;
	kt_tcfg_set ov;          /* the topic's overrides */
	int64_t generation;        /* bumped by every rewrite of the file */
	uint64_t f_ino, f_size;    /* the file as last read: change detection */
	int64_t f_mtime;
	int dir_ready;             /* DATA/<name> carries this ID's stamp (seen by this process) */
	int unsynced;              /* topic_changed must be called (again) */
} topic_ent;

/* An incomplete claim (or ~abandoned- file) and since when it is unchanged. */
typedef struct claim_seen {
	char key[300];
	uint64_t ino, size;
	int64_t mtime;
	int64_t first_mono;
	uint64_t round;            /* the tick that last saw it */
} claim_seen;

#define TRASH_LIST_MAX 8
typedef struct trash_list {
	char v[TRASH_LIST_MAX][256];
	size_t n;
} trash_list;

struct kt_topics {
	kt_topics_options o;
	char reserved[256];

	pthread_rwlock_t lock;     /* guards ents, neg, seq */
	topic_ent **ents;          /* sorted by name */
	size_t n, cap;
	uint64_t seq;              /* bumped by every change of ents */
	struct {
		char name[KAAS_TOPIC_NAME_MAX + 1];
		int64_t mono;
	} *neg;                    /* names recently found missing on the volume */
	size_t nneg;

	pthread_mutex_t defmu;     /* guards o.defaults and o.num_partitions (dynamic
	                              broker configs change them: kt_topics_set_defaults) */
	pthread_mutex_t op;        /* serialises mutations and the tick; guards claims */
	claim_seen *claims;
	size_t nclaims;
	uint64_t round;            /* tick counter: forgets claims no longer seen */
	int64_t last_tick_mono;    /* when the tick last did its work */
	int ticked;
};

/* Paths (docs/formats.md).  '~' is not in Kafka's topic alphabet, so these
 * never collide with a topic. */
#define REG_DIR "topics"
#define TOMB_DIR "deleted-topics"
#define STAMP_NAME ".topic-id.json"
#define TRASH_PREFIX "~trash-"
#define ABANDONED_PREFIX "~abandoned-"
#define LOST_PREFIX "~lost-"
#define KEPT_PREFIX "~kept-"
#define REG_FILE_MAX (64 * 1024)
#define NEG_MAX 4096
#define FORMAT_VERSION 1

/* ---- shared by registry.c, reg_dirs.c, reg_ops.c, reg_upkeep.c -------------- */
int kt__rand_hex(char *dst, size_t n);
void kt__reg_path(char *dst, size_t len, const char *name);
int16_t kt__storage_fail(char *msg, size_t msglen, const char *what, int rc);
void kt__ent_free(topic_ent *e);
void kt__ent_fill_info(kt_topics *reg, topic_ent *e);
int32_t kt__num_partitions(kt_topics *reg); /* num.partitions now (dynamic) */
int kt__ent_parse(kt_topics *reg, const char *name, const char *buf, size_t len, topic_ent **out, char *why, size_t whylen);
char *kt__ent_json(const topic_ent *e);
int kt__reg_read(kt_topics *reg, const char *name, topic_ent **out, sub_stat *st, char *why, size_t whylen);
topic_ent *kt__mem_find(kt_topics *reg, const char *name);
int kt__mem_put(kt_topics *reg, topic_ent *e);
void kt__mem_remove(kt_topics *reg, const char *name);
int kt__mem_merge(kt_topics *reg, topic_ent *e);
int kt__name_from(const char *s, int32_t len, char out[KAAS_TOPIC_NAME_MAX + 1]);
int kt__hook_changed(kt_topics *reg, const char *name);
int kt__hook_dropped(kt_topics *reg, const char *name, const char *id);
int kt__claim_abandoned(kt_topics *reg, const char *key, const sub_stat *st);
void kt__claims_expire(kt_topics *reg);
void kt__claim_forget(kt_topics *reg, const char *key);
int kt__settle_aside(kt_topics *reg, const char *aside);
int kt__reclaim_claim(kt_topics *reg, const char *name);
int kt__stamp_read(kt_topics *reg, const char *name, char id[KAAS_TOPIC_ID_LEN + 1]);
int kt__stamp_write(kt_topics *reg, const kt_topic_info *t);
int kt__move_to_trash(kt_topics *reg, const char *name, const char *old_id, const char *reason, trash_list *tl);
/* Renames DATA/<name> aside as a trash.h entry of `kind` (KT_TRASH or
 * KT_QUARANTINE) after checking its stamp is expect_id; -EAGAIN (and put
 * back) when the directory changed identity meanwhile. */
int kt__move_aside(kt_topics *reg, const char *name, const char *expect_id, int kind, const char *reason,
		   trash_list *tl);
int kt__trash_sweep(kt_topics *reg);

/* What DATA/<name>/ says about its identity (reg_ident.c). */
#define KT_VOL_IDS 4
typedef struct kt__vol {
	int exists, not_dir;
	int stamp_rc;                        /* 0, -ENOENT (unstamped), -EBADMSG (unreadable) */
	char stamp[KAAS_TOPIC_ID_LEN + 1];
	int32_t partitions;                  /* highest partition directory + 1 */
	int holds_data;                      /* a segment log with bytes in it */
	struct {
		char id[KAAS_TOPIC_ID_LEN + 1];
		int n;
	} ids[KT_VOL_IDS];                   /* topic ids named by manifests, with counts */
	int nids, ids_overflow;
	int bad_manifests;                   /* manifests whose topic_id is not a UUID */
} kt__vol;
enum { KT_VERDICT_ADOPT = 1, KT_VERDICT_RECLAIM = 2, KT_VERDICT_QUARANTINE = 3 };
int kt__vol_scan(kt_topics *reg, const char *name, kt__vol *v);
int kt__vol_manifests(const kt__vol *v, const char *id);
int kt__deleted_record(kt_topics *reg, const char *name, const char *id);
int kt__is_deleted(kt_topics *reg, const char *id);
int kt__judge_foreign_stamp(kt_topics *reg, const kt_topic_info *t, const kt__vol *v, char *why, size_t whylen);
int kt__adopt_from_volume(kt_topics *reg, const char *name);
void kt__adopt_orphans(kt_topics *reg);
int kt__prepare_dir_locked(kt_topics *reg, const kt_topic_info *t, trash_list *tl);
void kt__trash_remove(kt_topics *reg, trash_list *tl);
/* whole = 0 (controller_deletes, not the controller): closes this
 * process's partitions and records the ID as deleted, leaving the directory
 * and the tombstone. */
int kt__finish_delete(kt_topics *reg, const char *name, const char *id, int call_hooks, int whole, trash_list *tl);
/* 1 when a tombstone names `name` (a delete of it is in progress), 0, -errno. */
int kt__tomb_pending(kt_topics *reg, const char *name);
int kt__load_all(kt_topics *reg);
int kt__redrive_tombstones(kt_topics *reg, int call_hooks, const char *only, trash_list *tl);

#endif
