/*
 * tconfig.h — private to kaas/topics/: a topic's config overrides, topic IDs
 * and the bits the registry and the admin codecs share.
 */
#ifndef KAAS_TOPICS_TCONFIG_H
#define KAAS_TOPICS_TCONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "kaas/topics/topics.h"

/* The configs set on one topic (overrides of the broker defaults). */
typedef struct kt_tcfg_set {
	uint64_t set;                  /* bit (1ull << KAAS_TC_*) */
	char *val[KAAS_TC_COUNT];      /* canonical string of each set key (malloc'd) */
	int64_t num[KAAS_TC_COUNT];    /* parsed: numbers, enums as indexes, booleans 0/1 */
} kt_tcfg_set;

#define KAAS_TCFG_SET_INIT {0, {0}, {0}}

void kt_tcfg_set_free(kt_tcfg_set *s);
int kt_tcfg_set_copy(kt_tcfg_set *dst, const kt_tcfg_set *src);

/* Index of a config name, or -1. */
int kt_tcfg_index(const char *name, size_t len);

/* The longest canonical value (a throttled-replica list can be long). */
#define KT_TCFG_VALUE_MAX 1024

/* Parses one value for config `tc`: canonical string into canon (>= 64
 * bytes; KT_TCFG_VALUE_MAX for every value to fit) and its number.  KERR_NONE or KERR_INVALID_CONFIG with a message. */
int16_t kt_tcfg_parse(int tc, const char *value, size_t len, char *canon, size_t canonlen,
			int64_t *num, char *msg, size_t msglen);

/* Builds a set from request pairs (validating each). */
int16_t kt_tcfg_set_from_kv(kt_tcfg_set *s, const kt_config_kv *kv, size_t n, char *msg,
			      size_t msglen);

/* JSON object {"name": "value", ...} <-> set.  from_json skips (and logs)
 * entries that do not validate: a file written elsewhere may be newer. */
json_t *kt_tcfg_set_to_json(const kt_tcfg_set *s);
int kt_tcfg_set_from_json(kt_tcfg_set *s, json_t *obj, const char *topic);

/* Effective log config: the broker defaults with the overrides applied. */
void kt_tcfg_apply(const kt_tcfg_set *s, const ks_log_config *defaults, ks_log_config *out);

/* The describe list for one topic. */
int kt_tcfg_describe(const kt_tcfg_set *s, const ks_log_config *defaults, kt_config_list *out);

/* Kafka's default log config (what "source DEFAULT" means). */
void kt_tcfg_kafka_defaults(ks_log_config *c);

/* Topic IDs: random UUIDv4; string form lowercase hex with dashes. */
int kt_topic_id_new(char out[KAAS_TOPIC_ID_LEN + 1], uint8_t bytes[16]);
/* Parses and normalises (lowercase) a UUID string; 0 or -EINVAL. */
int kt_topic_id_parse(const char *s, char out[KAAS_TOPIC_ID_LEN + 1], uint8_t bytes[16]);

/* Kafka's collision rule: '.' and '_' are the same in metric names. */
int kt_topic_names_collide(const char *a, const char *b);

#endif
