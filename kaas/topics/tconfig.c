/*
 * tconfig.c — topic configs: the keys kaas knows, how their values are
 * validated, how overrides combine with the broker defaults, and what
 * DescribeConfigs reports for them.
 *
 * Values travel as Kafka's strings (that is what the admin APIs carry and
 * what the registry file stores); each is parsed once when it enters, into a
 * canonical string and a number, so a value that was accepted is always
 * re-read the same way.
 */
#include "kaas/topics/tconfig.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/proto/kerr.h"
#include "util/log.h"

enum vtype { VT_LONG, VT_INT, VT_ENUM, VT_BOOL };

typedef struct tcfg_def {
	const char *name;
	const char *broker;       /* broker-level synonym, NULL when none */
	int type;
	int64_t min, max;
	const char *const *enums; /* VT_ENUM: accepted values, NULL-terminated */
	const char *kafka_default;
} tcfg_def;

static const char *const cleanup_vals[] = {"delete", NULL};
static const char *const compression_vals[] = {"producer", NULL};
static const char *const ts_vals[] = {"CreateTime", "LogAppendTime", NULL};

/* Indexed by enum kt_tcfg; sorted by name as Kafka lists them. */
static const tcfg_def defs[KAAS_TC_COUNT] = {
	[KAAS_TC_CLEANUP_POLICY] = {"cleanup.policy", "log.cleanup.policy", VT_ENUM, 0, 0, cleanup_vals,
				    "delete"},
	[KAAS_TC_COMPRESSION_TYPE] = {"compression.type", "compression.type", VT_ENUM, 0, 0,
				      compression_vals, "producer"},
	[KAAS_TC_INDEX_INTERVAL_BYTES] = {"index.interval.bytes", "log.index.interval.bytes", VT_INT, 0,
					  INT32_MAX, NULL, "4096"},
	[KAAS_TC_MAX_MESSAGE_BYTES] = {"max.message.bytes", "message.max.bytes", VT_INT, 0, INT32_MAX, NULL,
				       "1048588"},
	[KAAS_TC_MESSAGE_TIMESTAMP_TYPE] = {"message.timestamp.type", "log.message.timestamp.type", VT_ENUM,
					    0, 0, ts_vals, "CreateTime"},
	[KAAS_TC_MIN_INSYNC_REPLICAS] = {"min.insync.replicas", "min.insync.replicas", VT_INT, 1, INT32_MAX,
					 NULL, "1"},
	[KAAS_TC_RETENTION_BYTES] = {"retention.bytes", "log.retention.bytes", VT_LONG, -1, INT64_MAX, NULL,
				     "-1"},
	[KAAS_TC_RETENTION_MS] = {"retention.ms", "log.retention.ms", VT_LONG, -1, INT64_MAX, NULL,
				  "604800000"},
	[KAAS_TC_SEGMENT_BYTES] = {"segment.bytes", "log.segment.bytes", VT_INT, 14, INT32_MAX, NULL,
				   "1073741824"},
	[KAAS_TC_SEGMENT_MS] = {"segment.ms", "log.roll.ms", VT_LONG, 1, INT64_MAX, NULL, "604800000"},
	[KAAS_TC_UNCLEAN_LEADER_ELECTION_ENABLE] = {"unclean.leader.election.enable",
						    "unclean.leader.election.enable", VT_BOOL, 0, 1, NULL,
						    "false"},
};

const char *kt_tcfg_name(int tc)
{
	return tc >= 0 && tc < KAAS_TC_COUNT ? defs[tc].name : NULL;
}

const char *kt_tcfg_broker_name(int tc)
{
	return tc >= 0 && tc < KAAS_TC_COUNT ? defs[tc].broker : NULL;
}

int kt_tcfg_index(const char *name, size_t len)
{
	for (int i = 0; i < KAAS_TC_COUNT; i++)
		if (strlen(defs[i].name) == len && memcmp(defs[i].name, name, len) == 0)
			return i;
	return -1;
}

void kt_tcfg_kafka_defaults(ks_log_config *c)
{
	c->segment_bytes = 1073741824;
	c->segment_ms = 604800000;
	c->retention_ms = 604800000;
	c->retention_bytes = -1;
	c->max_message_bytes = 1048588;
	c->index_interval_bytes = 4096;
	c->timestamp_type = 0;
}

void kt_tcfg_set_free(kt_tcfg_set *s)
{
	for (int i = 0; i < KAAS_TC_COUNT; i++) {
		free(s->val[i]);
		s->val[i] = NULL;
	}
	s->set = 0;
}

int kt_tcfg_set_copy(kt_tcfg_set *dst, const kt_tcfg_set *src)
{
	kt_tcfg_set t = KAAS_TCFG_SET_INIT;
	for (int i = 0; i < KAAS_TC_COUNT; i++) {
		if (!(src->set & (1u << i)))
			continue;
		if (!(t.val[i] = strdup(src->val[i]))) {
			kt_tcfg_set_free(&t);
			return -ENOMEM;
		}
		t.num[i] = src->num[i];
		t.set |= 1u << i;
	}
	kt_tcfg_set_free(dst);
	*dst = t;
	return 0;
}

/* Strict decimal integer with optional sign; Kafka trims surrounding blanks. */
static int parse_i64(const char *s, size_t len, int64_t *out)
{
	while (len && isspace((unsigned char)*s)) {
		s++;
		len--;
	}
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	if (len == 0 || len > 20)
		return -EINVAL;
	char buf[24];
	memcpy(buf, s, len);
	buf[len] = '\0';
	size_t i = (buf[0] == '-' || buf[0] == '+') ? 1 : 0;
	if (!buf[i])
		return -EINVAL;
	for (size_t j = i; buf[j]; j++)
		if (!isdigit((unsigned char)buf[j]))
			return -EINVAL;
	errno = 0;
	char *end;
	long long v = strtoll(buf, &end, 10);
	if (errno || *end)
		return -ERANGE;
	*out = v;
	return 0;
}

/* Printable form of a client value for messages (no control bytes). */
static void show(char *dst, size_t dstlen, const char *s, size_t len)
{
	size_t j = 0;
	for (size_t i = 0; i < len && j + 1 < dstlen; i++)
		dst[j++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	dst[j] = '\0';
	if (len >= dstlen && dstlen > 4)
		memcpy(dst + dstlen - 4, "...", 4);
}

int16_t kt_tcfg_parse(int tc, const char *value, size_t len, char *canon, size_t canonlen, int64_t *num,
			char *msg, size_t msglen)
{
	const tcfg_def *d = &defs[tc];
	char shown[80];
	show(shown, sizeof(shown), value, len);
	if (d->type == VT_LONG || d->type == VT_INT) {
		int64_t v;
		if (parse_i64(value, len, &v)) {
			snprintf(msg, msglen, "Invalid value %s for configuration %s: Not a number of type %s",
				 shown, d->name, d->type == VT_INT ? "INT" : "LONG");
			return KERR_INVALID_CONFIG;
		}
		if (v < d->min || v > d->max) {
			if (d->max == INT64_MAX || d->max == INT32_MAX)
				snprintf(msg, msglen, "Invalid value %s for configuration %s: Value must be at least %" PRId64,
					 shown, d->name, d->min);
			else
				snprintf(msg, msglen, "Invalid value %s for configuration %s: Value must be between %" PRId64
					 " and %" PRId64, shown, d->name, d->min, d->max);
			return KERR_INVALID_CONFIG;
		}
		snprintf(canon, canonlen, "%" PRId64, v);
		*num = v;
		return KERR_NONE;
	}
	/* Strings: Kafka trims blanks around list and enum values too. */
	while (len && isspace((unsigned char)*value)) {
		value++;
		len--;
	}
	while (len && isspace((unsigned char)value[len - 1]))
		len--;
	if (d->type == VT_BOOL) {
		if (len == 4 && strncasecmp(value, "true", 4) == 0) {
			*num = 1;
			snprintf(canon, canonlen, "true");
			return KERR_NONE;
		}
		if (len == 5 && strncasecmp(value, "false", 5) == 0) {
			*num = 0;
			snprintf(canon, canonlen, "false");
			return KERR_NONE;
		}
		snprintf(msg, msglen, "Invalid value %s for configuration %s: Expected value to be either true or false",
			 shown, d->name);
		return KERR_INVALID_CONFIG;
	}
	for (int i = 0; d->enums[i]; i++) {
		if (strlen(d->enums[i]) == len && memcmp(d->enums[i], value, len) == 0) {
			*num = i;
			snprintf(canon, canonlen, "%s", d->enums[i]);
			return KERR_NONE;
		}
	}
	if (tc == KAAS_TC_CLEANUP_POLICY) {
		if (memmem(value, len, "compact", 7))
			snprintf(msg, msglen, "cleanup.policy=%s is not supported: kaas does not compact logs; "
				 "only cleanup.policy=delete is available", shown);
		else
			snprintf(msg, msglen, "Invalid value %s for configuration cleanup.policy: "
				 "String must be one of: delete", shown);
		return KERR_INVALID_CONFIG;
	}
	if (tc == KAAS_TC_COMPRESSION_TYPE) {
		snprintf(msg, msglen, "compression.type=%s is not supported: kaas stores record batches as the "
			 "producer compressed them; only compression.type=producer is available", shown);
		return KERR_INVALID_CONFIG;
	}
	snprintf(msg, msglen, "Invalid value %s for configuration %s: String must be one of: CreateTime, "
		 "LogAppendTime", shown, d->name);
	return KERR_INVALID_CONFIG;
}

int16_t kt_topic_configs_check(const kt_config_kv *kv, size_t n, char *msg, size_t msglen)
{
	kt_tcfg_set s = KAAS_TCFG_SET_INIT;
	int16_t err = kt_tcfg_set_from_kv(&s, kv, n, msg, msglen);
	kt_tcfg_set_free(&s);
	return err;
}

int16_t kt_tcfg_set_from_kv(kt_tcfg_set *s, const kt_config_kv *kv, size_t n, char *msg, size_t msglen)
{
	kt_tcfg_set t = KAAS_TCFG_SET_INIT;
	int16_t err = KERR_NONE;
	for (size_t i = 0; i < n; i++) {
		char shown[80];
		show(shown, sizeof(shown), kv[i].name.s ? kv[i].name.s : "", kv[i].name.len > 0 ? (size_t)kv[i].name.len : 0);
		int tc = kv[i].name.len > 0 ? kt_tcfg_index(kv[i].name.s, (size_t)kv[i].name.len) : -1;
		if (tc < 0) {
			snprintf(msg, msglen, "Unknown topic config name: %s", shown);
			err = KERR_INVALID_CONFIG;
			goto out;
		}
		if (t.set & (1u << tc)) {
			snprintf(msg, msglen, "Config %s is given more than once", shown);
			err = KERR_INVALID_CONFIG;
			goto out;
		}
		if (kv[i].value.len < 0) {
			snprintf(msg, msglen, "Null value not supported for topic config %s", shown);
			err = KERR_INVALID_CONFIG;
			goto out;
		}
		char canon[64];
		int64_t num;
		err = kt_tcfg_parse(tc, kv[i].value.s, (size_t)kv[i].value.len, canon, sizeof(canon), &num, msg,
				      msglen);
		if (err)
			goto out;
		if (!(t.val[tc] = strdup(canon))) {
			snprintf(msg, msglen, "out of memory");
			err = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
		t.num[tc] = num;
		t.set |= 1u << tc;
	}
	kt_tcfg_set_free(s);
	*s = t;
	return KERR_NONE;
out:
	kt_tcfg_set_free(&t);
	return err;
}

json_t *kt_tcfg_set_to_json(const kt_tcfg_set *s)
{
	json_t *o = json_object();
	if (!o)
		return NULL;
	for (int i = 0; i < KAAS_TC_COUNT; i++) {
		if (!(s->set & (1u << i)))
			continue;
		if (json_object_set_new(o, defs[i].name, json_string(s->val[i]))) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

int kt_tcfg_set_from_json(kt_tcfg_set *s, json_t *obj, const char *topic)
{
	kt_tcfg_set t = KAAS_TCFG_SET_INIT;
	const char *key;
	json_t *v;
	if (!json_is_object(obj))
		return -EINVAL;
	json_object_foreach(obj, key, v)
	{
		int tc = kt_tcfg_index(key, strlen(key));
		char canon[64], msg[256];
		int64_t num;
		if (tc < 0 || !json_is_string(v)) {
			KLOG_WARN("topics", "topic %s: ignoring config %s in the registry file (unknown here)", topic, key);
			continue;
		}
		if (kt_tcfg_parse(tc, json_string_value(v), json_string_length(v), canon, sizeof(canon), &num, msg,
				    sizeof(msg))) {
			KLOG_WARN("topics", "topic %s: ignoring config in the registry file: %s", topic, msg);
			continue;
		}
		free(t.val[tc]);
		if (!(t.val[tc] = strdup(canon))) {
			kt_tcfg_set_free(&t);
			return -ENOMEM;
		}
		t.num[tc] = num;
		t.set |= 1u << tc;
	}
	kt_tcfg_set_free(s);
	*s = t;
	return 0;
}

void kt_tcfg_apply(const kt_tcfg_set *s, const ks_log_config *defaults, ks_log_config *out)
{
	*out = *defaults;
	if (s->set & (1u << KAAS_TC_SEGMENT_BYTES))
		out->segment_bytes = s->num[KAAS_TC_SEGMENT_BYTES];
	if (s->set & (1u << KAAS_TC_SEGMENT_MS))
		out->segment_ms = s->num[KAAS_TC_SEGMENT_MS];
	if (s->set & (1u << KAAS_TC_RETENTION_MS))
		out->retention_ms = s->num[KAAS_TC_RETENTION_MS];
	if (s->set & (1u << KAAS_TC_RETENTION_BYTES))
		out->retention_bytes = s->num[KAAS_TC_RETENTION_BYTES];
	if (s->set & (1u << KAAS_TC_MAX_MESSAGE_BYTES))
		out->max_message_bytes = (int32_t)s->num[KAAS_TC_MAX_MESSAGE_BYTES];
	if (s->set & (1u << KAAS_TC_INDEX_INTERVAL_BYTES))
		out->index_interval_bytes = (int32_t)s->num[KAAS_TC_INDEX_INTERVAL_BYTES];
	if (s->set & (1u << KAAS_TC_MESSAGE_TIMESTAMP_TYPE))
		out->timestamp_type = (int32_t)s->num[KAAS_TC_MESSAGE_TIMESTAMP_TYPE];
}

/* The broker-level value of a config as a string, and whether it differs
 * from Kafka's default (then it was set in the broker's configuration). */
static void broker_value(int tc, const ks_log_config *b, char *dst, size_t len, int *is_static)
{
	ks_log_config k;
	kt_tcfg_kafka_defaults(&k);
	int64_t bv, kv;
	switch (tc) {
	case KAAS_TC_SEGMENT_BYTES: bv = b->segment_bytes; kv = k.segment_bytes; break;
	case KAAS_TC_SEGMENT_MS: bv = b->segment_ms; kv = k.segment_ms; break;
	case KAAS_TC_RETENTION_MS: bv = b->retention_ms; kv = k.retention_ms; break;
	case KAAS_TC_RETENTION_BYTES: bv = b->retention_bytes; kv = k.retention_bytes; break;
	case KAAS_TC_MAX_MESSAGE_BYTES: bv = b->max_message_bytes; kv = k.max_message_bytes; break;
	case KAAS_TC_INDEX_INTERVAL_BYTES: bv = b->index_interval_bytes; kv = k.index_interval_bytes; break;
	case KAAS_TC_MESSAGE_TIMESTAMP_TYPE:
		snprintf(dst, len, "%s", b->timestamp_type == 1 ? "LogAppendTime" : "CreateTime");
		*is_static = b->timestamp_type != k.timestamp_type;
		return;
	default:
		/* Not a broker setting in kaas: Kafka's default, always. */
		snprintf(dst, len, "%s", defs[tc].kafka_default);
		*is_static = 0;
		return;
	}
	snprintf(dst, len, "%" PRId64, bv);
	*is_static = bv != kv;
}

static char *xstrdup(kt_config_list *l, const char *s)
{
	if (!s)
		return NULL;
	char *d = strdup(s);
	if (!d)
		l->oom = 1;
	return d;
}

kt_config_entry *kt_config_list_add(kt_config_list *l, const char *name, const char *value, int8_t source,
					int read_only)
{
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 16;
		kt_config_entry *nv = realloc(l->v, ncap * sizeof(*nv));
		if (!nv) {
			l->oom = 1;
			return NULL;
		}
		l->v = nv;
		l->cap = ncap;
	}
	kt_config_entry *e = &l->v[l->n++];
	memset(e, 0, sizeof(*e));
	e->name = name;
	e->value = xstrdup(l, value);
	e->source = source;
	e->read_only = read_only;
	return e;
}

void kt_config_list_free(kt_config_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].value);
		for (int j = 0; j < l->v[i].nsyn; j++)
			free(l->v[i].syn[j].value);
	}
	free(l->v);
	l->v = NULL;
	l->n = l->cap = 0;
	l->oom = 0;
}

static void add_syn(kt_config_list *l, kt_config_entry *e, const char *name, const char *value, int8_t src)
{
	if (e->nsyn >= (int)(sizeof(e->syn) / sizeof(e->syn[0])))
		return;
	kt_config_synonym *s = &e->syn[e->nsyn++];
	s->name = name;
	s->value = xstrdup(l, value);
	s->source = src;
}

int kt_tcfg_describe(const kt_tcfg_set *s, const ks_log_config *defaults, kt_config_list *out)
{
	for (int i = 0; i < KAAS_TC_COUNT; i++) {
		char bval[64];
		int is_static;
		broker_value(i, defaults, bval, sizeof(bval), &is_static);
		int8_t bsrc = is_static ? KAAS_CFG_SRC_STATIC_BROKER : KAAS_CFG_SRC_DEFAULT;
		int set = (s->set & (1u << i)) != 0;
		kt_config_entry *e = kt_config_list_add(out, defs[i].name, set ? s->val[i] : bval,
							    set ? KAAS_CFG_SRC_TOPIC : bsrc, 0);
		if (!e)
			break;
		if (set)
			add_syn(out, e, defs[i].name, s->val[i], KAAS_CFG_SRC_TOPIC);
		add_syn(out, e, defs[i].broker, bval, bsrc);
	}
	return out->oom ? -ENOMEM : 0;
}
