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

	/* Compaction is refused with a message saying why. */
	{"cleanup.policy", "compact", KERR_INVALID_CONFIG, "compact"},
	{"cleanup.policy", "compact,delete", KERR_INVALID_CONFIG, NULL},
	{"cleanup.policy", "purge", KERR_INVALID_CONFIG, NULL},
	{"compression.type", "gzip", KERR_INVALID_CONFIG, NULL},
};

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
				     config_apply_and_json_roundtrip));
}
