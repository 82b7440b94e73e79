/*
 * registry_int.h — private to registry.c: the registry object and its
 * in-memory entries.
 */
#ifndef KAAS_TOPICS_REGISTRY_INT_H
#define KAAS_TOPICS_REGISTRY_INT_H

#include <pthread.h>
#include <stdint.h>

#include "topics/tconfig.h"
#include "topics/topics.h"

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

#endif
