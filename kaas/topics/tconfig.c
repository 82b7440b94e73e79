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

enum vtype { VT_LONG, VT_INT, VT_ENUM, VT_BOOL, VT_DOUBLE, VT_VERSION, VT_REPLICAS };

/* How kaas treats a key (docs/topics.md has the table). */
enum vkind {
	VK_HONOURED = 0, /* applied to the partitions */
	VK_NOOP,         /* accepted, stored, described; no effect here */
	VK_DEFAULT_ONLY, /* only Kafka's default is accepted; `why` says why */
};

typedef struct tcfg_def {
	const char *name;
	const char *broker;       /* broker-level synonym, NULL when none */
	int type;
	int64_t min, max;
	const char *const *enums; /* VT_ENUM: accepted values, NULL-terminated */
	const char *kafka_default;
	int kind;
	const char *why;          /* VK_DEFAULT_ONLY: the reason other values are refused */
} tcfg_def;

/* Indexed by KS_CLEANUP_*: the canonical forms of Kafka's list. */
static const char *const cleanup_vals[] = {"delete", "compact", "compact,delete", NULL};
/* Indexed by KS_COMPRESS_*. */
static const char *const compression_vals[] = {"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd", NULL};
static const char *const ts_vals[] = {"CreateTime", "LogAppendTime", NULL};

#define NOOP VK_NOOP, NULL
#define HONOURED VK_HONOURED, NULL

/* Indexed by enum kt_tcfg; sorted by name as Kafka lists them.  Types,
 * ranges and defaults are Kafka 3.x's LogConfig. */
static const tcfg_def defs[KAAS_TC_COUNT] = {
	[KAAS_TC_CLEANUP_POLICY] = {"cleanup.policy", "log.cleanup.policy", VT_ENUM, 0, 0, cleanup_vals,
				    "delete", HONOURED},
	[KAAS_TC_COMPRESSION_GZIP_LEVEL] = {"compression.gzip.level", "compression.gzip.level", VT_INT, -1, 9,
					    NULL, "-1", HONOURED},
	[KAAS_TC_COMPRESSION_LZ4_LEVEL] = {"compression.lz4.level", "compression.lz4.level", VT_INT, 1, 17,
					   NULL, "9", HONOURED},
	[KAAS_TC_COMPRESSION_TYPE] = {"compression.type", "compression.type", VT_ENUM, 0, 0,
				      compression_vals, "producer", HONOURED},
	[KAAS_TC_COMPRESSION_ZSTD_LEVEL] = {"compression.zstd.level", "compression.zstd.level", VT_INT,
					    -131072, 22, NULL, "3", HONOURED},
	[KAAS_TC_DELETE_RETENTION_MS] = {"delete.retention.ms", "log.cleaner.delete.retention.ms", VT_LONG, 0,
					 INT64_MAX, NULL, "86400000", HONOURED},
	[KAAS_TC_FILE_DELETE_DELAY_MS] = {"file.delete.delay.ms", "log.segment.delete.delay.ms", VT_LONG, 0,
					  INT64_MAX, NULL, "60000", NOOP},
	[KAAS_TC_FLUSH_MESSAGES] = {"flush.messages", "log.flush.interval.messages", VT_LONG, 1, INT64_MAX,
				    NULL, "9223372036854775807", NOOP},
	[KAAS_TC_FLUSH_MS] = {"flush.ms", "log.flush.interval.ms", VT_LONG, 0, INT64_MAX, NULL,
			      "9223372036854775807", NOOP},
	[KAAS_TC_FOLLOWER_REPLICATION_THROTTLED_REPLICAS] = {"follower.replication.throttled.replicas", NULL,
							     VT_REPLICAS, 0, 0, NULL, "", NOOP},
	[KAAS_TC_INDEX_INTERVAL_BYTES] = {"index.interval.bytes", "log.index.interval.bytes", VT_INT, 0,
					  INT32_MAX, NULL, "4096", HONOURED},
	[KAAS_TC_LEADER_REPLICATION_THROTTLED_REPLICAS] = {"leader.replication.throttled.replicas", NULL,
							   VT_REPLICAS, 0, 0, NULL, "", NOOP},
	[KAAS_TC_LOCAL_RETENTION_BYTES] = {"local.retention.bytes", "log.local.retention.bytes", VT_LONG, -2,
					   INT64_MAX, NULL, "-2", NOOP},
	[KAAS_TC_LOCAL_RETENTION_MS] = {"local.retention.ms", "log.local.retention.ms", VT_LONG, -2, INT64_MAX,
					NULL, "-2", NOOP},
	[KAAS_TC_MAX_COMPACTION_LAG_MS] = {"max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
					   VT_LONG, 1, INT64_MAX, NULL, "9223372036854775807", HONOURED},
	[KAAS_TC_MAX_MESSAGE_BYTES] = {"max.message.bytes", "message.max.bytes", VT_INT, 0, INT32_MAX, NULL,
				       "1048588", HONOURED},
	[KAAS_TC_MESSAGE_DOWNCONVERSION_ENABLE] = {"message.downconversion.enable",
						   "log.message.downconversion.enable", VT_BOOL, 0, 1, NULL,
						   "true", NOOP},
	[KAAS_TC_MESSAGE_FORMAT_VERSION] = {"message.format.version", "log.message.format.version",
					    VT_VERSION, 0, 0, NULL, "3.0-IV1", NOOP},
	[KAAS_TC_MESSAGE_TIMESTAMP_AFTER_MAX_MS] = {"message.timestamp.after.max.ms",
						    "log.message.timestamp.after.max.ms", VT_LONG, 0, INT64_MAX,
						    NULL, "9223372036854775807", VK_DEFAULT_ONLY,
						    "kaas bounds record timestamps only with "
						    "message.timestamp.difference.max.ms (the same bound into the "
						    "past and the future) yet"},
	[KAAS_TC_MESSAGE_TIMESTAMP_BEFORE_MAX_MS] = {"message.timestamp.before.max.ms",
						     "log.message.timestamp.before.max.ms", VT_LONG, 0, INT64_MAX,
						     NULL, "9223372036854775807", VK_DEFAULT_ONLY,
						     "kaas bounds record timestamps only with "
						     "message.timestamp.difference.max.ms (the same bound into the "
						     "past and the future) yet"},
	[KAAS_TC_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS] = {"message.timestamp.difference.max.ms",
							 "log.message.timestamp.difference.max.ms", VT_LONG, 1,
							 INT64_MAX, NULL, "9223372036854775807", HONOURED},
	[KAAS_TC_MESSAGE_TIMESTAMP_TYPE] = {"message.timestamp.type", "log.message.timestamp.type", VT_ENUM,
					    0, 0, ts_vals, "CreateTime", HONOURED},
	[KAAS_TC_MIN_CLEANABLE_DIRTY_RATIO] = {"min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio",
					       VT_DOUBLE, 0, 1, NULL, "0.5", HONOURED},
	[KAAS_TC_MIN_COMPACTION_LAG_MS] = {"min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms",
					   VT_LONG, 0, INT64_MAX, NULL, "0", HONOURED},
	[KAAS_TC_MIN_INSYNC_REPLICAS] = {"min.insync.replicas", "min.insync.replicas", VT_INT, 1, INT32_MAX,
					 NULL, "1", NOOP},
	[KAAS_TC_PREALLOCATE] = {"preallocate", "log.preallocate", VT_BOOL, 0, 1, NULL, "false", NOOP},
	[KAAS_TC_REMOTE_LOG_COPY_DISABLE] = {"remote.log.copy.disable", NULL, VT_BOOL, 0, 1, NULL, "false",
					     NOOP},
	[KAAS_TC_REMOTE_LOG_DELETE_ON_DISABLE] = {"remote.log.delete.on.disable", NULL, VT_BOOL, 0, 1, NULL,
						  "false", NOOP},
	[KAAS_TC_REMOTE_STORAGE_ENABLE] = {"remote.storage.enable", NULL, VT_BOOL, 0, 1, NULL, "false",
					   VK_DEFAULT_ONLY,
					   "kaas has no tiered storage: every segment stays on the shared volume"},
	[KAAS_TC_RETENTION_BYTES] = {"retention.bytes", "log.retention.bytes", VT_LONG, -1, INT64_MAX, NULL,
				     "-1", HONOURED},
	[KAAS_TC_RETENTION_MS] = {"retention.ms", "log.retention.ms", VT_LONG, -1, INT64_MAX, NULL,
				  "604800000", HONOURED},
	[KAAS_TC_SEGMENT_BYTES] = {"segment.bytes", "log.segment.bytes", VT_INT, 14, INT32_MAX, NULL,
				   "1073741824", HONOURED},
	[KAAS_TC_SEGMENT_INDEX_BYTES] = {"segment.index.bytes", "log.index.size.max.bytes", VT_INT, 4,
					 INT32_MAX, NULL, "10485760", NOOP},
	[KAAS_TC_SEGMENT_JITTER_MS] = {"segment.jitter.ms", "log.roll.jitter.ms", VT_LONG, 0, INT64_MAX, NULL,
				       "0", NOOP},
	[KAAS_TC_SEGMENT_MS] = {"segment.ms", "log.roll.ms", VT_LONG, 1, INT64_MAX, NULL, "604800000",
				HONOURED},
	[KAAS_TC_UNCLEAN_LEADER_ELECTION_ENABLE] = {"unclean.leader.election.enable",
						    "unclean.leader.election.enable", VT_BOOL, 0, 1, NULL,
						    "false", NOOP},
};

_Static_assert(KAAS_TC_COUNT <= 64, "kt_tcfg_set.set is a 64-bit mask");

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
		if (!(src->set & (1ull << i)))
			continue;
		if (!(t.val[i] = strdup(src->val[i]))) {
			kt_tcfg_set_free(&t);
			return -ENOMEM;
		}
		t.num[i] = src->num[i];
		t.set |= 1ull << i;
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

static void trim(const char **value, size_t *len)
{
	while (*len && isspace((unsigned char)**value)) {
		(*value)++;
		(*len)--;
	}
	while (*len && isspace((unsigned char)(*value)[*len - 1]))
		(*len)--;
}

/* Kafka's MetadataVersion strings: "0.10.2", "2.8", "3.0-IV1", "2.8-IV0"... */
static int version_ok(const char *v, size_t len)
{
	size_t i = 0, parts = 0;
	while (i < len) {
		size_t d = 0;
		while (i < len && isdigit((unsigned char)v[i]) && d < 4) {
			i++;
			d++;
		}
		if (!d)
			return 0;
		parts++;
		if (i < len && v[i] == '.') {
			i++;
			continue;
		}
		break;
	}
	if (parts < 2 || parts > 4)
		return 0;
	if (i == len)
		return 1;
	if (len - i < 4 || memcmp(v + i, "-IV", 3) != 0)
		return 0;
	for (i += 3; i < len; i++)
		if (!isdigit((unsigned char)v[i]))
			return 0;
	return 1;
}

/* Kafka's ThrottledReplicaListValidator: "", "*", or "partition:broker,...";
 * the canonical form drops the blanks around entries. */
static int replicas_canon(const char *v, size_t len, char *canon, size_t canonlen)
{
	size_t o = 0;
	if (len == 1 && v[0] == '*') {
		snprintf(canon, canonlen, "*");
		return 0;
	}
	for (size_t i = 0; i < len;) {
		size_t e = i;
		while (e < len && v[e] != ',')
			e++;
		const char *it = v + i;
		size_t n = e - i;
		trim(&it, &n);
		size_t colon = 0, digits = 0;
		for (size_t k = 0; k < n; k++) {
			if (it[k] == ':' && !colon && digits)
				colon = k;
			else if (!isdigit((unsigned char)it[k]))
				return -EINVAL;
			else
				digits++;
		}
		if (!colon || colon + 1 >= n)
			return -EINVAL;
		if (o + n + 2 > canonlen)
			return -E2BIG;
		if (o)
			canon[o++] = ',';
		memcpy(canon + o, it, n);
		o += n;
		i = e + 1;
		if (e < len && e + 1 == len)
			return -EINVAL; /* a trailing comma */
	}
	canon[o] = '\0';
	return 0;
}

int16_t kt_tcfg_parse(int tc, const char *value, size_t len, char *canon, size_t canonlen, int64_t *num,
			char *msg, size_t msglen)
{
	const tcfg_def *d = &defs[tc];
	char shown[80];
	show(shown, sizeof(shown), value, len);
	*num = 0;
	if (d->type == VT_LONG || d->type == VT_INT) {
		int64_t v;
		if (parse_i64(value, len, &v) || (d->type == VT_INT && (v < INT32_MIN || v > INT32_MAX))) {
			snprintf(msg, msglen, "Invalid value %s for configuration %s: Not a number of type %s",
				 shown, d->name, d->type == VT_INT ? "INT" : "LONG");
			return KERR_INVALID_CONFIG;
		}
		if (tc == KAAS_TC_COMPRESSION_GZIP_LEVEL && v == 0) {
			snprintf(msg, msglen, "Invalid value 0 for configuration %s: Value must be between 1 and 9, "
				 "or -1 (the default)", d->name);
			return KERR_INVALID_CONFIG;
		}
		if (tc == KAAS_TC_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS && v == 0) {
			snprintf(msg, msglen, "%s=0 is not supported: kaas cannot require record timestamps to "
				 "equal its clock; use 1 or more", d->name);
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
		goto check_default;
	}
	/* Strings: Kafka trims blanks around list and enum values too. */
	trim(&value, &len);
	if (d->type == VT_BOOL) {
		if (len == 4 && strncasecmp(value, "true", 4) == 0) {
			*num = 1;
			snprintf(canon, canonlen, "true");
			goto check_default;
		}
		if (len == 5 && strncasecmp(value, "false", 5) == 0) {
			*num = 0;
			snprintf(canon, canonlen, "false");
			goto check_default;
		}
		snprintf(msg, msglen, "Invalid value %s for configuration %s: Expected value to be either true or false",
			 shown, d->name);
		return KERR_INVALID_CONFIG;
	}
	if (d->type == VT_DOUBLE) {
		char buf[64], *end;
		if (len == 0 || len >= sizeof(buf))
			goto bad_double;
		memcpy(buf, value, len);
		buf[len] = '\0';
		errno = 0;
		double x = strtod(buf, &end);
		if (errno || *end || x != x)
			goto bad_double;
		if (x < (double)d->min || x > (double)d->max) {
			snprintf(msg, msglen, "Invalid value %s for configuration %s: Value must be between %" PRId64
				 " and %" PRId64, shown, d->name, d->min, d->max);
			return KERR_INVALID_CONFIG;
		}
		/* Java's Double.toString for the usual ratios: "0.5", "1.0". */
		snprintf(canon, canonlen, "%.17g", x);
		for (int prec = 1; prec <= 17; prec++) {
			snprintf(canon, canonlen, "%.*g", prec, x);
			if (strtod(canon, NULL) == x)
				break;
		}
		if (!strpbrk(canon, ".e"))
			strncat(canon, ".0", canonlen - strlen(canon) - 1);
		return KERR_NONE;
bad_double:
		snprintf(msg, msglen, "Invalid value %s for configuration %s: Not a number of type DOUBLE", shown,
			 d->name);
		return KERR_INVALID_CONFIG;
	}
	if (d->type == VT_VERSION) {
		if (!version_ok(value, len) || len >= canonlen) {
			snprintf(msg, msglen, "Invalid value %s for configuration %s: not a Kafka version "
				 "(e.g. 2.8 or 3.0-IV1)", shown, d->name);
			return KERR_INVALID_CONFIG;
		}
		memcpy(canon, value, len);
		canon[len] = '\0';
		return KERR_NONE;
	}
	if (d->type == VT_REPLICAS) {
		int rc = replicas_canon(value, len, canon, canonlen);
		if (rc == -E2BIG) {
			snprintf(msg, msglen, "Invalid value for configuration %s: longer than %zu bytes", d->name,
				 canonlen - 1);
			return KERR_INVALID_CONFIG;
		}
		if (rc) {
			snprintf(msg, msglen, "Invalid value %s for configuration %s: must be the literal '*' or a "
				 "list of replicas in the format [PartitionId]:[BrokerId],...", shown, d->name);
			return KERR_INVALID_CONFIG;
		}
		return KERR_NONE;
	}
	for (int i = 0; d->enums[i]; i++) {
		if (strlen(d->enums[i]) == len && memcmp(d->enums[i], value, len) == 0) {
			*num = i;
			snprintf(canon, canonlen, "%s", d->enums[i]);
			return KERR_NONE;
		}
	}
	if (tc == KAAS_TC_CLEANUP_POLICY) {
		/* Kafka's list: "delete,compact", "compact, delete", ... */
		int bits = 0, bad = 0;
		size_t i = 0;
		while (i <= len && !bad) {
			size_t j = i;
			while (j < len && value[j] != ',')
				j++;
			size_t a = i, b = j;
			while (a < b && (value[a] == ' ' || value[a] == '\t'))
				a++;
			while (b > a && (value[b - 1] == ' ' || value[b - 1] == '\t'))
				b--;
			if (b - a == 6 && memcmp(value + a, "delete", 6) == 0)
				bits |= 1;
			else if (b - a == 7 && memcmp(value + a, "compact", 7) == 0)
				bits |= 2;
			else
				bad = 1;
			i = j + 1;
		}
		if (!bad && bits) {
			*num = bits == 1 ? KS_CLEANUP_DELETE : bits == 2 ? KS_CLEANUP_COMPACT : KS_CLEANUP_COMPACT_DELETE;
			snprintf(canon, canonlen, "%s", cleanup_vals[*num]);
			return KERR_NONE;
		}
		snprintf(msg, msglen, "Invalid value %s for configuration cleanup.policy: "
			 "String must be one of: compact, delete", shown);
		return KERR_INVALID_CONFIG;
	}
	if (tc == KAAS_TC_COMPRESSION_TYPE) {
		snprintf(msg, msglen, "Invalid value %s for configuration compression.type: String must be one "
			 "of: uncompressed, zstd, lz4, snappy, gzip, producer", shown);
		return KERR_INVALID_CONFIG;
	}
	snprintf(msg, msglen, "Invalid value %s for configuration %s: String must be one of: CreateTime, "
		 "LogAppendTime", shown, d->name);
	return KERR_INVALID_CONFIG;
check_default:
	if (d->kind == VK_DEFAULT_ONLY && strcmp(canon, d->kafka_default) != 0) {
		snprintf(msg, msglen, "%s=%s is not supported: %s; only %s=%s is available", d->name, shown,
			 d->why, d->name, d->kafka_default);
		return KERR_INVALID_CONFIG;
	}
	return KERR_NONE;
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
		if (t.set & (1ull << tc)) {
			snprintf(msg, msglen, "Config %s is given more than once", shown);
			err = KERR_INVALID_CONFIG;
			goto out;
		}
		if (kv[i].value.len < 0) {
			snprintf(msg, msglen, "Null value not supported for topic config %s", shown);
			err = KERR_INVALID_CONFIG;
			goto out;
		}
		char canon[KT_TCFG_VALUE_MAX];
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
		t.set |= 1ull << tc;
	}
	int64_t minlag = (t.set & (1ull << KAAS_TC_MIN_COMPACTION_LAG_MS)) ? t.num[KAAS_TC_MIN_COMPACTION_LAG_MS] : 0;
	int64_t maxlag = (t.set & (1ull << KAAS_TC_MAX_COMPACTION_LAG_MS)) ? t.num[KAAS_TC_MAX_COMPACTION_LAG_MS]
									    : INT64_MAX;
	if (minlag > maxlag) {
		snprintf(msg, msglen, "conflict topic config setting min.compaction.lag.ms (%" PRId64
			 ") > max.compaction.lag.ms (%" PRId64 ")", minlag, maxlag);
		err = KERR_INVALID_CONFIG;
		goto out;
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
		if (!(s->set & (1ull << i)))
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
		char canon[KT_TCFG_VALUE_MAX], msg[256];
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
		t.set |= 1ull << tc;
	}
	kt_tcfg_set_free(s);
	*s = t;
	return 0;
}

void kt_tcfg_apply(const kt_tcfg_set *s, const ks_log_config *defaults, ks_log_config *out)
{
	*out = *defaults;
	if (s->set & (1ull << KAAS_TC_SEGMENT_BYTES))
		out->segment_bytes = s->num[KAAS_TC_SEGMENT_BYTES];
	if (s->set & (1ull << KAAS_TC_SEGMENT_MS))
		out->segment_ms = s->num[KAAS_TC_SEGMENT_MS];
	if (s->set & (1ull << KAAS_TC_RETENTION_MS))
		out->retention_ms = s->num[KAAS_TC_RETENTION_MS];
	if (s->set & (1ull << KAAS_TC_RETENTION_BYTES))
		out->retention_bytes = s->num[KAAS_TC_RETENTION_BYTES];
	if (s->set & (1ull << KAAS_TC_MAX_MESSAGE_BYTES))
		out->max_message_bytes = (int32_t)s->num[KAAS_TC_MAX_MESSAGE_BYTES];
	if (s->set & (1ull << KAAS_TC_INDEX_INTERVAL_BYTES))
		out->index_interval_bytes = (int32_t)s->num[KAAS_TC_INDEX_INTERVAL_BYTES];
	if (s->set & (1ull << KAAS_TC_MESSAGE_TIMESTAMP_TYPE))
		out->timestamp_type = (int32_t)s->num[KAAS_TC_MESSAGE_TIMESTAMP_TYPE];
	if (s->set & (1ull << KAAS_TC_CLEANUP_POLICY))
		out->cleanup_compact = (int32_t)s->num[KAAS_TC_CLEANUP_POLICY];
	if (s->set & (1ull << KAAS_TC_COMPRESSION_TYPE))
		out->compression_type = (int32_t)s->num[KAAS_TC_COMPRESSION_TYPE];
	if (s->set & (1ull << KAAS_TC_COMPRESSION_GZIP_LEVEL))
		out->compression_gzip_level = (int32_t)s->num[KAAS_TC_COMPRESSION_GZIP_LEVEL];
	if (s->set & (1ull << KAAS_TC_COMPRESSION_LZ4_LEVEL))
		out->compression_lz4_level = (int32_t)s->num[KAAS_TC_COMPRESSION_LZ4_LEVEL];
	if (s->set & (1ull << KAAS_TC_COMPRESSION_ZSTD_LEVEL))
		out->compression_zstd_level = (int32_t)s->num[KAAS_TC_COMPRESSION_ZSTD_LEVEL];
	if (s->set & (1ull << KAAS_TC_DELETE_RETENTION_MS))
		out->delete_retention_ms = s->num[KAAS_TC_DELETE_RETENTION_MS];
	if (s->set & (1ull << KAAS_TC_MIN_COMPACTION_LAG_MS))
		out->min_compaction_lag_ms = s->num[KAAS_TC_MIN_COMPACTION_LAG_MS];
	if (s->set & (1ull << KAAS_TC_MAX_COMPACTION_LAG_MS))
		out->max_compaction_lag_ms = s->num[KAAS_TC_MAX_COMPACTION_LAG_MS];
	if ((s->set & (1ull << KAAS_TC_MIN_CLEANABLE_DIRTY_RATIO)) && s->val[KAAS_TC_MIN_CLEANABLE_DIRTY_RATIO])
		out->min_cleanable_dirty_ratio = strtod(s->val[KAAS_TC_MIN_CLEANABLE_DIRTY_RATIO], NULL);
	if (s->set & (1ull << KAAS_TC_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS)) {
		int64_t v = s->num[KAAS_TC_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS];
		out->timestamp_difference_max_ms = v == INT64_MAX ? -1 : v; /* Kafka's default: no bound */
	}
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
	case KAAS_TC_COMPRESSION_TYPE:
		snprintf(dst, len, "%s",
			 b->compression_type > KS_COMPRESS_PRODUCER && b->compression_type <= KS_COMPRESS_ZSTD
				 ? compression_vals[b->compression_type] : "producer");
		*is_static = b->compression_type > KS_COMPRESS_PRODUCER && b->compression_type <= KS_COMPRESS_ZSTD;
		return;
	case KAAS_TC_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS:
		/* <= 0 in the storage engine's config is "no bound", Kafka's default. */
		bv = b->timestamp_difference_max_ms > 0 ? b->timestamp_difference_max_ms : INT64_MAX;
		kv = INT64_MAX;
		break;
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
		int set = (s->set & (1ull << i)) != 0;
		kt_config_entry *e = kt_config_list_add(out, defs[i].name, set ? s->val[i] : bval,
							    set ? KAAS_CFG_SRC_TOPIC : bsrc, 0);
		if (!e)
			break;
		if (set)
			add_syn(out, e, defs[i].name, s->val[i], KAAS_CFG_SRC_TOPIC);
		if (defs[i].broker)
			add_syn(out, e, defs[i].broker, bval, bsrc);
	}
	return out->oom ? -ENOMEM : 0;
}
