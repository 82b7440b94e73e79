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
	kaas_topic_info info;
	kaas_tcfg_set ov;          /* the topic's overrides */
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
	char v[TRASH_LIST_MAX][128];
	size_t n;
} trash_list;

struct kaas_topics {
	kaas_topics_options o;
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
int kt_rand_hex(char *dst, size_t n);
void kt_reg_path(char *dst, size_t len, const char *name);
int16_t kt_storage_fail(char *msg, size_t msglen, const char *what, int rc);
void kt_ent_free(topic_ent *e);
void kt_ent_fill_info(kaas_topics *reg, topic_ent *e);
int kt_ent_parse(kaas_topics *reg, const char *name, const char *buf, size_t len, topic_ent **out, char *why, size_t whylen);
char *kt_ent_json(const topic_ent *e);
int kt_reg_read(kaas_topics *reg, const char *name, topic_ent **out, sub_stat *st, char *why, size_t whylen);
topic_ent *kt_mem_find(kaas_topics *reg, const char *name);
int kt_mem_put(kaas_topics *reg, topic_ent *e);
void kt_mem_remove(kaas_topics *reg, const char *name);
int kt_mem_merge(kaas_topics *reg, topic_ent *e);
int kt_name_from(const char *s, int32_t len, char out[KAAS_TOPIC_NAME_MAX + 1]);
int kt_hook_changed(kaas_topics *reg, const char *name);
int kt_hook_dropped(kaas_topics *reg, const char *name, const char *id);
int kt_claim_abandoned(kaas_topics *reg, const char *key, const sub_stat *st);
void kt_claims_expire(kaas_topics *reg);
void kt_claim_forget(kaas_topics *reg, const char *key);
int kt_settle_aside(kaas_topics *reg, const char *aside);
int kt_reclaim_claim(kaas_topics *reg, const char *name);
int kt_stamp_read(kaas_topics *reg, const char *name, char id[KAAS_TOPIC_ID_LEN + 1]);
int kt_stamp_write(kaas_topics *reg, const kaas_topic_info *t);
int kt_move_to_trash(kaas_topics *reg, const char *name, const char *old_id, trash_list *tl);
int kt_prepare_dir_locked(kaas_topics *reg, const kaas_topic_info *t, trash_list *tl);
void kt_trash_remove(kaas_topics *reg, trash_list *tl);
int kt_finish_delete(kaas_topics *reg, const char *name, const char *id, int call_hooks, trash_list *tl);
int kt_load_all(kaas_topics *reg);
int kt_redrive_tombstones(kaas_topics *reg, int call_hooks, const char *only, trash_list *tl);
void kt_warn_orphans(kaas_topics *reg);

#endif
