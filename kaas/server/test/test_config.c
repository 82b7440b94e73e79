/* test_config.c — broker settings: defaults, validation naming the key,
 * the properties file (comments, unknown keys, Kafka's precedence of the
 * retention/roll units), listener syntax, and partition keys split from the
 * right. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/broker.h"
#include "server/config.h"
#include "server/ptable.h"

START_TEST(defaults_are_kafkas)
{
	kaas_config c;
	kaas_config_defaults(&c);
	ck_assert_int_eq(c.num_partitions, 1);
	ck_assert_int_eq(c.auto_create_topics, 1);
	ck_assert_int_eq(c.socket_request_max_bytes, 104857600);
	ck_assert_int_eq(c.connections_max_idle_ms, 600000);
	ck_assert_int_eq(c.log.max_message_bytes, 1048588);
	ck_assert_int_eq(c.log.segment_bytes, 1073741824LL);
	ck_assert_int_eq(c.log.retention_ms, 604800000LL);
	ck_assert_int_eq(c.listen_port, 9092);
	/* Every key in the table can be set to its documented default. */
	for (const kaas_config_key *k = kaas_config_keys; k->key; k++)
		ck_assert_ptr_nonnull(k->help);
}
END_TEST

START_TEST(set_validates_and_names_the_key)
{
	kaas_config c;
	char err[256];
	kaas_config_defaults(&c);
	ck_assert_int_eq(kaas_config_set(&c, "num.partitions", "12", err, sizeof(err)), 0);
	ck_assert_int_eq(c.num_partitions, 12);
	ck_assert_int_eq(kaas_config_set(&c, "num.partitions", "0", err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "num.partitions"));
	ck_assert_int_eq(c.num_partitions, 12); /* unchanged on error */
	ck_assert_int_eq(kaas_config_set(&c, "num.partitions", "12x", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kaas_config_set(&c, "num.partitions", "", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kaas_config_set(&c, "num.partitions", "99999999999999999999", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kaas_config_set(&c, "auto.create.topics.enable", "false", err, sizeof(err)), 0);
	ck_assert_int_eq(c.auto_create_topics, 0);
	ck_assert_int_eq(kaas_config_set(&c, "auto.create.topics.enable", "yes", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kaas_config_set(&c, "log.retention.hours", "2", err, sizeof(err)), 0);
	ck_assert_int_eq(c.log.retention_ms, 7200000);
	ck_assert_int_eq(kaas_config_set(&c, "log.retention.ms", "-1", err, sizeof(err)), 0);
	ck_assert_int_eq(c.log.retention_ms, -1);
	ck_assert_int_eq(kaas_config_set(&c, "log.message.timestamp.type", "LogAppendTime", err, sizeof(err)), 0);
	ck_assert_int_eq(c.log.timestamp_type, 1);
	ck_assert_int_eq(kaas_config_set(&c, "no.such.thing", "1", err, sizeof(err)), -ENOENT);
	ck_assert_int_eq(kaas_config_set(&c, "log.dirs", "/a,/b", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kaas_config_set(&c, "log.dirs", "nfs://srv/export?version=3", err, sizeof(err)), 0);
	ck_assert_str_eq(c.data_url, "nfs://srv/export?version=3");
}
END_TEST

START_TEST(listeners)
{
	char host[256];
	int32_t port;
	ck_assert_int_eq(kaas_parse_hostport("PLAINTEXT://broker-1.kaas:9093", host, sizeof(host), &port), 0);
	ck_assert_str_eq(host, "broker-1.kaas");
	ck_assert_int_eq(port, 9093);
	ck_assert_int_eq(kaas_parse_hostport("[::1]:19092", host, sizeof(host), &port), 0);
	ck_assert_str_eq(host, "::1");
	ck_assert_int_eq(kaas_parse_hostport(":9092", host, sizeof(host), &port), 0);
	ck_assert_str_eq(host, "");
	ck_assert_int_eq(kaas_parse_hostport("SASL_SSL://h:1", host, sizeof(host), &port), -1);
	ck_assert_int_eq(kaas_parse_hostport("h:70000", host, sizeof(host), &port), -1);
	ck_assert_int_eq(kaas_parse_hostport("h", host, sizeof(host), &port), -1);
	ck_assert_int_eq(kaas_parse_hostport("a:1,b:2", host, sizeof(host), &port), -1);
	ck_assert_int_eq(kaas_parse_hostport("h;rm -rf:1", host, sizeof(host), &port), -1);
	kaas_config c;
	char err[256];
	kaas_config_defaults(&c);
	ck_assert_int_eq(kaas_config_set(&c, "advertised.listeners", "h:0", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kaas_config_set(&c, "listeners", "127.0.0.1:0", err, sizeof(err)), 0);
	ck_assert_int_eq(c.listen_port, 0);
}
END_TEST

static int warnings;
static void count_warn(const char *m)
{
	(void)m;
	warnings++;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(properties_file)
{
	char path[] = "/tmp/kaas-cfg-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	kaas_config c;
	char err[512];

	/* Kafka's precedence regardless of line order: ms > minutes > hours. */
	write_file(path, "# a comment\n! another\n\nlog.retention.ms = 1234\nlog.retention.hours=5\n"
			 "zookeeper.connect=localhost:2181\nlog.retention.minutes=3\n"
			 "log.roll.ms=777\nlog.roll.hours=9\nnum.partitions=4\n");
	kaas_config_defaults(&c);
	warnings = 0;
	ck_assert_int_eq(kaas_config_load_file(&c, path, err, sizeof(err), count_warn), 0);
	ck_assert_int_eq(c.log.retention_ms, 1234);
	ck_assert_int_eq(c.log.segment_ms, 777);
	ck_assert_int_eq(c.num_partitions, 4);
	ck_assert_int_eq(warnings, 1); /* zookeeper.connect: ignored with a warning */

	write_file(path, "log.retention.hours=5\nlog.retention.minutes=3\n");
	kaas_config_defaults(&c);
	ck_assert_int_eq(kaas_config_load_file(&c, path, err, sizeof(err), NULL), 0);
	ck_assert_int_eq(c.log.retention_ms, 180000);

	write_file(path, "num.partitions=2\nmessage.max.bytes=-5\n");
	kaas_config_defaults(&c);
	ck_assert_int_eq(kaas_config_load_file(&c, path, err, sizeof(err), NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, ":2: message.max.bytes"));

	write_file(path, "just words\n");
	ck_assert_int_eq(kaas_config_load_file(&c, path, err, sizeof(err), NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "expected key=value"));
	unlink(path);
	ck_assert_int_lt(kaas_config_load_file(&c, path, err, sizeof(err), NULL), 0);
}
END_TEST

START_TEST(partition_keys_split_from_the_right)
{
	char t[256];
	int32_t p;
	ck_assert_int_eq(kaas_partition_key_parse("orders-3", t, sizeof(t), &p), 0);
	ck_assert_str_eq(t, "orders");
	ck_assert_int_eq(p, 3);
	ck_assert_int_eq(kaas_partition_key_parse("my-topic.v2-with-dashes-17", t, sizeof(t), &p), 0);
	ck_assert_str_eq(t, "my-topic.v2-with-dashes");
	ck_assert_int_eq(p, 17);
	ck_assert_int_eq(kaas_partition_key_parse("t--1", t, sizeof(t), &p), 0); /* topic "t-", partition 1 */
	ck_assert_str_eq(t, "t-");
	ck_assert_int_eq(kaas_partition_key_parse("orders", t, sizeof(t), &p), -EINVAL);
	ck_assert_int_eq(kaas_partition_key_parse("orders-", t, sizeof(t), &p), -EINVAL);
	ck_assert_int_eq(kaas_partition_key_parse("-3", t, sizeof(t), &p), -EINVAL);
	ck_assert_int_eq(kaas_partition_key_parse("a-3x", t, sizeof(t), &p), -EINVAL);
	ck_assert_int_eq(kaas_partition_key_parse("a-99999999999", t, sizeof(t), &p), -EINVAL);
	ck_assert_int_eq(kaas_partition_key_parse("abcdef-1", t, 4, &p), -ENAMETOOLONG);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");
	tcase_add_test(tc, defaults_are_kafkas);
	tcase_add_test(tc, set_validates_and_names_the_key);
	tcase_add_test(tc, listeners);
	tcase_add_test(tc, properties_file);
	tcase_add_test(tc, partition_keys_split_from_the_right);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
