/*
 * test_names.c — topic name rules, topic IDs and topic config validation.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/topics/tconfig.h"
#include "kaas/topics/topics.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"
#include "util/test/ktest.h"

static int16_t check_name(const char *s)
{
	char msg[256];
	return kt_topic_name_check(s, s ? (int32_t)strlen(s) : -1, msg, sizeof(msg));
}

START_TEST(names_kafka_rules)
{
	ck_assert_int_eq(check_name("orders"), KERR_NONE);
	ck_assert_int_eq(check_name("a.b_c-D9"), KERR_NONE);
	ck_assert_int_eq(check_name("__consumer_offsets"), KERR_NONE);
	ck_assert_int_eq(check_name("..."), KERR_NONE);
	ck_assert_int_eq(check_name(".x"), KERR_NONE);

	ck_assert_int_eq(check_name(""), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_int_eq(check_name(NULL), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_int_eq(check_name("."), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_int_eq(check_name(".."), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_int_eq(check_name("../x"), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_int_eq(check_name("a/b"), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_int_eq(check_name("/abs"), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_int_eq(check_name("with space"), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_int_eq(check_name("caf\xc3\xa9"), KERR_INVALID_TOPIC_EXCEPTION); /* UTF-8 é */
	ck_assert_int_eq(check_name("\xe2\x80\x8b"), KERR_INVALID_TOPIC_EXCEPTION); /* zero-width space */
	ck_assert_int_eq(check_name("a~b"), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_int_eq(check_name("a\\b"), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_int_eq(check_name("a:b"), KERR_INVALID_TOPIC_EXCEPTION);

	/* A NUL inside the slice is not a legal character either. */
	char msg[128];
	ck_assert_int_eq(kt_topic_name_check("ab\0cd", 5, msg, sizeof(msg)), KERR_INVALID_TOPIC_EXCEPTION);

	char name[300];
	memset(name, 'x', sizeof(name));
	ck_assert_int_eq(kt_topic_name_check(name, 249, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(kt_topic_name_check(name, 250, msg, sizeof(msg)), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_ptr_nonnull(strstr(msg, "249"));
}
END_TEST

START_TEST(name_collisions)
{
	ck_assert(kt_topic_names_collide("a.b", "a_b"));
	ck_assert(kt_topic_names_collide("a_b", "a.b"));
	ck_assert(kt_topic_names_collide("x", "x"));
	ck_assert(!kt_topic_names_collide("a.b", "a-b"));
	ck_assert(!kt_topic_names_collide("a.b", "a.bc"));
}
END_TEST

START_TEST(topic_ids)
{
	char a[KAAS_TOPIC_ID_LEN + 1], b[KAAS_TOPIC_ID_LEN + 1], c[KAAS_TOPIC_ID_LEN + 1];
	uint8_t ab[16], bb[16], cb[16];
	ck_assert_int_eq(kt_topic_id_new(a, ab), 0);
	ck_assert_int_eq(kt_topic_id_new(b, bb), 0);
	ck_assert_str_ne(a, b);
	ck_assert_uint_eq(strlen(a), 36);
	ck_assert_int_eq(a[14], '4'); /* version 4 */
	ck_assert(strchr("89ab", a[19]) != NULL);
	ck_assert_int_eq(kt_topic_id_parse(a, c, cb), 0);
	ck_assert_str_eq(a, c);
	ck_assert_mem_eq(ab, cb, 16);
	/* Upper case is accepted and normalised. */
	char up[KAAS_TOPIC_ID_LEN + 1];
	for (int i = 0; i <= KAAS_TOPIC_ID_LEN; i++)
		up[i] = (char)((a[i] >= 'a' && a[i] <= 'f') ? a[i] - 32 : a[i]);
	ck_assert_int_eq(kt_topic_id_parse(up, c, NULL), 0);
	ck_assert_str_eq(a, c);
	ck_assert_int_eq(kt_topic_id_parse("00000000-0000-0000-0000-000000000000", c, NULL), -EINVAL);
	ck_assert_int_eq(kt_topic_id_parse("not-a-uuid", c, NULL), -EINVAL);
	ck_assert_int_eq(kt_topic_id_parse("0123456789abcdef0123456789abcdef0123", c, NULL), -EINVAL);
	ck_assert_int_eq(kt_topic_id_parse("g1234567-89ab-4def-8123-456789abcdef", c, NULL), -EINVAL);
}
END_TEST

static kt_config_kv kv(const char *n, const char *v)
{
	kt_config_kv x;
	x.name.s = n;
	x.name.len = (int32_t)strlen(n);
	x.value.s = v;
	x.value.len = v ? (int32_t)strlen(v) : -1;
	return x;
}

static int16_t check1(const char *n, const char *v, char *msg, size_t msglen)
{
	kt_config_kv x = kv(n, v);
	return kt_topic_configs_check(&x, 1, msg, msglen);
}

/* key=value, the answer it gets, and (when set) what the message names. */
static const struct cfg_case {
	const char *key, *value;
	int16_t want;
	const char *in_msg;
} cfg_cases[] = {
	{"retention.ms", "86400000", KERR_NONE, NULL},
	{"retention.ms", "-1", KERR_NONE, NULL},
	{"retention.ms", " 1000 ", KERR_NONE, NULL},
	{"retention.bytes", "1073741824", KERR_NONE, NULL},
	{"segment.bytes", "1048576", KERR_NONE, NULL},
	{"segment.ms", "3600000", KERR_NONE, NULL},
	{"max.message.bytes", "2000000", KERR_NONE, NULL},
	{"cleanup.policy", "delete", KERR_NONE, NULL},
	{"message.timestamp.type", "LogAppendTime", KERR_NONE, NULL},
	{"unclean.leader.election.enable", "TRUE", KERR_NONE, NULL},
	{"min.insync.replicas", "2", KERR_NONE, NULL},
	{"compression.type", "producer", KERR_NONE, NULL},

	/* Bad numbers. */
	{"retention.ms", "abc", KERR_INVALID_CONFIG, "retention.ms"},
	{"retention.ms", "12x", KERR_INVALID_CONFIG, NULL},
	{"retention.ms", "", KERR_INVALID_CONFIG, NULL},
	{"retention.ms", "-2", KERR_INVALID_CONFIG, NULL},
	{"retention.ms", "99999999999999999999", KERR_INVALID_CONFIG, NULL},
	{"segment.bytes", "13", KERR_INVALID_CONFIG, NULL},
	{"segment.bytes", "2147483648", KERR_INVALID_CONFIG, NULL},
	{"segment.ms", "0", KERR_INVALID_CONFIG, NULL},
	{"max.message.bytes", "-5", KERR_INVALID_CONFIG, NULL},
	{"min.insync.replicas", "0", KERR_INVALID_CONFIG, NULL},
	{"unclean.leader.election.enable", "yes", KERR_INVALID_CONFIG, NULL},
	{"message.timestamp.type", "createtime", KERR_INVALID_CONFIG, NULL},

	/* Unknown keys, null values. */
	{"retention.hours", "1", KERR_INVALID_CONFIG, "Unknown topic config name: retention.hours"},
	{"", "1", KERR_INVALID_CONFIG, NULL},
	{"retention.ms", NULL, KERR_INVALID_CONFIG, NULL},

	/* cleanup.policy: Kafka's list of compact and delete. */
	{"cleanup.policy", "compact", KERR_NONE, NULL},
	{"cleanup.policy", "compact,delete", KERR_NONE, NULL},
	{"cleanup.policy", "delete, compact", KERR_NONE, NULL},
	{"cleanup.policy", "compact,", KERR_INVALID_CONFIG, "compact, delete"},
	{"cleanup.policy", "purge", KERR_INVALID_CONFIG, "String must be one of: compact, delete"},
	{"compression.type", "gzip", KERR_NONE, NULL},
	{"compression.type", "zstd", KERR_NONE, NULL},
	{"compression.type", "lz4", KERR_NONE, NULL},
	{"compression.type", "snappy", KERR_NONE, NULL},
	{"compression.type", "uncompressed", KERR_NONE, NULL},
	{"compression.type", "none", KERR_INVALID_CONFIG, "String must be one of"},
	{"compression.type", "ZSTD", KERR_INVALID_CONFIG, "String must be one of"},
	{"compression.type", "brotli", KERR_INVALID_CONFIG, "String must be one of"},

	/* Kafka 3.x keys that mean nothing here: accepted, with Kafka's checks. */
	{"message.format.version", "2.8", KERR_NONE, NULL},
	{"message.format.version", "3.0-IV1", KERR_NONE, NULL},
	{"message.format.version", "0.10.2", KERR_NONE, NULL},
	{"message.format.version", "latest", KERR_INVALID_CONFIG, "message.format.version"},
	{"message.format.version", "3.", KERR_INVALID_CONFIG, NULL},
	{"message.downconversion.enable", "false", KERR_NONE, NULL},
	{"leader.replication.throttled.replicas", "0:1, 1:2", KERR_NONE, NULL},
	{"leader.replication.throttled.replicas", "*", KERR_NONE, NULL},
	{"follower.replication.throttled.replicas", "", KERR_NONE, NULL},
	{"follower.replication.throttled.replicas", "0-1", KERR_INVALID_CONFIG, "[PartitionId]:[BrokerId]"},
	{"follower.replication.throttled.replicas", "0:1,", KERR_INVALID_CONFIG, NULL},
	{"preallocate", "true", KERR_NONE, NULL},
	{"file.delete.delay.ms", "1000", KERR_NONE, NULL},
	{"file.delete.delay.ms", "-1", KERR_INVALID_CONFIG, NULL},
	{"flush.messages", "1", KERR_NONE, NULL},
	{"flush.messages", "0", KERR_INVALID_CONFIG, NULL},
	{"flush.ms", "1000", KERR_NONE, NULL},
	{"segment.index.bytes", "4096", KERR_NONE, NULL},
	{"segment.index.bytes", "3", KERR_INVALID_CONFIG, NULL},
	{"segment.jitter.ms", "100", KERR_NONE, NULL},
	{"delete.retention.ms", "1000", KERR_NONE, NULL},
	{"min.compaction.lag.ms", "0", KERR_NONE, NULL},
	{"max.compaction.lag.ms", "0", KERR_INVALID_CONFIG, NULL},
	{"min.cleanable.dirty.ratio", "0.1", KERR_NONE, NULL},
	{"min.cleanable.dirty.ratio", "1.5", KERR_INVALID_CONFIG, "between 0 and 1"},
	{"min.cleanable.dirty.ratio", "half", KERR_INVALID_CONFIG, "DOUBLE"},
	{"local.retention.ms", "-2", KERR_NONE, NULL},
	{"local.retention.bytes", "-3", KERR_INVALID_CONFIG, NULL},
	{"remote.log.copy.disable", "true", KERR_NONE, NULL},
	{"remote.log.delete.on.disable", "false", KERR_NONE, NULL},
	{"compression.gzip.level", "9", KERR_NONE, NULL},
	{"compression.gzip.level", "-1", KERR_NONE, NULL},
	{"compression.gzip.level", "0", KERR_INVALID_CONFIG, NULL},
	{"compression.lz4.level", "18", KERR_INVALID_CONFIG, NULL},
	{"compression.zstd.level", "-7", KERR_NONE, NULL},
	{"compression.zstd.level", "23", KERR_INVALID_CONFIG, NULL},
	{"unclean.leader.election.enable", "false", KERR_NONE, NULL},

	/* Honoured: the storage engine's timestamp bound. */
	{"message.timestamp.difference.max.ms", "3600000", KERR_NONE, NULL},
	{"message.timestamp.difference.max.ms", "0", KERR_INVALID_CONFIG, "not supported"},
	{"message.timestamp.difference.max.ms", "-1", KERR_INVALID_CONFIG, NULL},

	/* Only the value kaas can honour, the refusal naming why. */
	{"remote.storage.enable", "false", KERR_NONE, NULL},
	{"remote.storage.enable", "true", KERR_INVALID_CONFIG, "no tiered storage"},
	{"message.timestamp.before.max.ms", "9223372036854775807", KERR_NONE, NULL},
	{"message.timestamp.before.max.ms", "3600000", KERR_INVALID_CONFIG, "difference.max.ms"},
	{"message.timestamp.after.max.ms", "3600000", KERR_INVALID_CONFIG, "not supported"},
};

/* Every topic config of Kafka 3.x's LogConfig (3.9), with a value it accepts. */
static const char *const kafka3_keys[][2] = {
	{"cleanup.policy", "delete"}, {"compression.gzip.level", "5"}, {"compression.lz4.level", "9"},
	{"compression.type", "producer"}, {"compression.zstd.level", "3"},
	{"delete.retention.ms", "86400000"}, {"file.delete.delay.ms", "60000"},
	{"flush.messages", "10000"}, {"flush.ms", "1000"},
	{"follower.replication.throttled.replicas", "0:1"}, {"index.interval.bytes", "4096"},
	{"leader.replication.throttled.replicas", "*"}, {"local.retention.bytes", "-2"},
	{"local.retention.ms", "-2"}, {"max.compaction.lag.ms", "9223372036854775807"},
	{"max.message.bytes", "1048588"}, {"message.downconversion.enable", "true"},
	{"message.format.version", "3.0-IV1"},
	{"message.timestamp.after.max.ms", "9223372036854775807"},
	{"message.timestamp.before.max.ms", "9223372036854775807"},
	{"message.timestamp.difference.max.ms", "9223372036854775807"},
	{"message.timestamp.type", "CreateTime"}, {"min.cleanable.dirty.ratio", "0.50"},
	{"min.compaction.lag.ms", "0"}, {"min.insync.replicas", "2"}, {"preallocate", "false"},
	{"remote.log.copy.disable", "false"}, {"remote.log.delete.on.disable", "false"},
	{"remote.storage.enable", "false"}, {"retention.bytes", "-1"}, {"retention.ms", "604800000"},
	{"segment.bytes", "1073741824"}, {"segment.index.bytes", "10485760"}, {"segment.jitter.ms", "0"},
	{"segment.ms", "604800000"}, {"unclean.leader.election.enable", "false"},
};

/* All of them at once: accepted, stored, read back from JSON, described
 * with the value set (canonical) and source TOPIC; the no-ops change
 * nothing in the effective log config. */
START_TEST(config_every_kafka3_key)
{
	enum { N = sizeof(kafka3_keys) / sizeof(kafka3_keys[0]) };
	ck_assert_int_eq(N, KAAS_TC_COUNT);
	kt_config_kv set[N];
	for (int i = 0; i < N; i++)
		set[i] = kv(kafka3_keys[i][0], kafka3_keys[i][1]);
	char msg[256] = "";
	kt_tcfg_set s = KAAS_TCFG_SET_INIT, back = KAAS_TCFG_SET_INIT;
	ck_assert_msg(kt_tcfg_set_from_kv(&s, set, N, msg, sizeof(msg)) == KERR_NONE, "%s", msg);
	ck_assert_uint_eq(s.set, (KAAS_TC_COUNT == 64 ? ~0ull : (1ull << KAAS_TC_COUNT) - 1));
	json_t *j = kt_tcfg_set_to_json(&s);
	ck_assert_int_eq(kt_tcfg_set_from_json(&back, j, "t"), 0);
	json_decref(j);
	ck_assert_uint_eq(back.set, s.set);
	ck_assert_str_eq(back.val[KAAS_TC_MIN_CLEANABLE_DIRTY_RATIO], "0.5");
	ck_assert_str_eq(back.val[KAAS_TC_FOLLOWER_REPLICATION_THROTTLED_REPLICAS], "0:1");

	ks_log_config def, eff;
	kt_tcfg_kafka_defaults(&def);
	def.timestamp_difference_max_ms = -1;
	kt_tcfg_apply(&back, &def, &eff);
	ck_assert_int_eq(eff.timestamp_difference_max_ms, -1); /* Long.MAX: no bound */
	ck_assert_int_eq(eff.segment_bytes, def.segment_bytes);

	kt_config_list l = KAAS_CONFIG_LIST_INIT;
	ck_assert_int_eq(kt_tcfg_describe(&back, &def, &l), 0);
	ck_assert_uint_eq(l.n, KAAS_TC_COUNT);
	for (size_t i = 0; i < l.n; i++) {
		ck_assert_int_eq(l.v[i].source, KAAS_CFG_SRC_TOPIC);
		ck_assert_ptr_nonnull(l.v[i].value);
		int found = 0;
		for (int k = 0; k < N; k++)
			found |= strcmp(kafka3_keys[k][0], l.v[i].name) == 0;
		ck_assert_msg(found, "%s described but not a Kafka key", l.v[i].name);
	}
	kt_config_list_free(&l);

	/* Kafka's cross-check of the compaction lags. */
	kt_config_kv lag[2] = {kv("min.compaction.lag.ms", "100"), kv("max.compaction.lag.ms", "10")};
	ck_assert_int_eq(kt_topic_configs_check(lag, 2, msg, sizeof(msg)), KERR_INVALID_CONFIG);
	ck_assert_ptr_nonnull(strstr(msg, "min.compaction.lag.ms"));

	/* A set difference bound reaches the storage engine. */
	kt_config_kv ts = kv("message.timestamp.difference.max.ms", "60000");
	kt_tcfg_set t = KAAS_TCFG_SET_INIT;
	ck_assert_int_eq(kt_tcfg_set_from_kv(&t, &ts, 1, msg, sizeof(msg)), KERR_NONE);
	kt_tcfg_apply(&t, &def, &eff);
	ck_assert_int_eq(eff.timestamp_difference_max_ms, 60000);
	kt_tcfg_set_free(&t);
	kt_tcfg_set_free(&s);
	kt_tcfg_set_free(&back);
}
END_TEST

START_TEST(config_validation)
{
	char msg[256];
	for (size_t i = 0; i < sizeof(cfg_cases) / sizeof(cfg_cases[0]); i++) {
		const struct cfg_case *c = &cfg_cases[i];
		msg[0] = '\0';
		int16_t got = check1(c->key, c->value, msg, sizeof(msg));
		ck_assert_msg(got == c->want, "%s=%s: %d, want %d (%s)", c->key, c->value ? c->value : "(null)", got,
			      c->want, msg);
		if (c->in_msg)
			ck_assert_msg(strstr(msg, c->in_msg), "%s=%s: message '%s' does not name '%s'", c->key,
				      c->value ? c->value : "(null)", msg, c->in_msg);
	}

	/* The same key twice. */
	kt_config_kv two[2] = {kv("retention.ms", "1"), kv("retention.ms", "2")};
	ck_assert_int_eq(kt_topic_configs_check(two, 2, msg, sizeof(msg)), KERR_INVALID_CONFIG);
}
END_TEST

START_TEST(config_apply_and_json_roundtrip)
{
	char msg[256];
	kt_config_kv set[3] = {kv("retention.ms", "1000"), kv("segment.bytes", " 4096"),
				 kv("message.timestamp.type", "LogAppendTime")};
	kt_tcfg_set s = KAAS_TCFG_SET_INIT, back = KAAS_TCFG_SET_INIT;
	ck_assert_int_eq(kt_tcfg_set_from_kv(&s, set, 3, msg, sizeof(msg)), KERR_NONE);
	ks_log_config def, eff;
	kt_tcfg_kafka_defaults(&def);
	def.retention_bytes = 555; /* a broker-level setting survives where not overridden */
	kt_tcfg_apply(&s, &def, &eff);
	ck_assert_int_eq(eff.retention_ms, 1000);
	ck_assert_int_eq(eff.segment_bytes, 4096);
	ck_assert_int_eq(eff.timestamp_type, 1);
	ck_assert_int_eq(eff.retention_bytes, 555);
	ck_assert_int_eq(eff.max_message_bytes, 1048588);

	json_t *j = kt_tcfg_set_to_json(&s);
	ck_assert_ptr_nonnull(j);
	ck_assert_str_eq(json_string_value(json_object_get(j, "segment.bytes")), "4096"); /* canonical */
	json_object_set_new(j, "bogus.key", json_string("1"));
	json_object_set_new(j, "segment.ms", json_string("nope"));
	ck_assert_int_eq(kt_tcfg_set_from_json(&back, j, "t"), 0);
	json_decref(j);
	ck_assert_uint_eq(back.set, s.set); /* invalid entries from a file are skipped */
	ck_assert_str_eq(back.val[KAAS_TC_RETENTION_MS], "1000");

	kt_config_list l = KAAS_CONFIG_LIST_INIT;
	ck_assert_int_eq(kt_tcfg_describe(&back, &def, &l), 0);
	ck_assert_uint_eq(l.n, KAAS_TC_COUNT);
	int seen = 0;
	for (size_t i = 0; i < l.n; i++) {
		kt_config_entry *e = &l.v[i];
		if (strcmp(e->name, "retention.ms") == 0) {
			seen++;
			ck_assert_str_eq(e->value, "1000");
			ck_assert_int_eq(e->source, KAAS_CFG_SRC_TOPIC);
			ck_assert_int_eq(e->nsyn, 2);
			ck_assert_str_eq(e->syn[1].name, "log.retention.ms");
			ck_assert_str_eq(e->syn[1].value, "604800000");
			ck_assert_int_eq(e->syn[1].source, KAAS_CFG_SRC_DEFAULT);
		}
		if (strcmp(e->name, "retention.bytes") == 0) {
			seen++;
			ck_assert_str_eq(e->value, "555");
			ck_assert_int_eq(e->source, KAAS_CFG_SRC_STATIC_BROKER);
			ck_assert_int_eq(e->nsyn, 1);
		}
		if (strcmp(e->name, "cleanup.policy") == 0) {
			seen++;
			ck_assert_str_eq(e->value, "delete");
			ck_assert_int_eq(e->source, KAAS_CFG_SRC_DEFAULT);
		}
	}
	ck_assert_int_eq(seen, 3);
	kt_config_list_free(&l);
	kt_tcfg_set_free(&s);
	kt_tcfg_set_free(&back);
}
END_TEST

int main(void)
{
	ku_log_init_from_env();
	return ktest_main((struct ktest){ .suite = "topics-names", .tcase = "core" },
			  KTEST_LIST(names_kafka_rules,
				     name_collisions,
				     topic_ids,
				     config_validation,
				     config_apply_and_json_roundtrip,
				     config_every_kafka3_key));
}
