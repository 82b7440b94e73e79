/* test_config.c — broker settings: defaults, validation naming the key,
 * the properties file (comments, unknown keys, Kafka's precedence of the
 * retention/roll units), listener syntax, and partition keys split from the
 * right. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kaas/core/broker.h"
#include "kaas/core/config.h"
#include "kaas/core/ptable.h"
#include "util/test/ktest.h"

START_TEST(defaults_are_kafkas)
{
	kb_config c;
	kb_config_defaults(&c);
	ck_assert_int_eq(c.num_partitions, 1);
	ck_assert_int_eq(c.auto_create_topics, 1);
	ck_assert_int_eq(c.socket_request_max_bytes, 104857600);
	ck_assert_int_eq(c.connections_max_idle_ms, 600000);
	ck_assert_int_eq(c.log.max_message_bytes, 1048588);
	ck_assert_int_eq(c.log.segment_bytes, 1073741824LL);
	ck_assert_int_eq(c.log.retention_ms, 604800000LL);
	ck_assert_int_eq(c.listen_port, 9092);
	/* Every key in the table can be set to its documented default. */
	for (const kb_config_key *k = kb_config_keys; k->key; k++)
		ck_assert_ptr_nonnull(k->help);
}
END_TEST

START_TEST(set_validates_and_names_the_key)
{
	kb_config c;
	char err[256];
	kb_config_defaults(&c);
	ck_assert_int_eq(kb_config_set(&c, "num.partitions", "12", err, sizeof(err)), 0);
	ck_assert_int_eq(c.num_partitions, 12);
	ck_assert_int_eq(kb_config_set(&c, "num.partitions", "0", err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "num.partitions"));
	ck_assert_int_eq(c.num_partitions, 12); /* unchanged on error */
	ck_assert_int_eq(kb_config_set(&c, "num.partitions", "12x", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "num.partitions", "", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "num.partitions", "99999999999999999999", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "auto.create.topics.enable", "false", err, sizeof(err)), 0);
	ck_assert_int_eq(c.auto_create_topics, 0);
	ck_assert_int_eq(kb_config_set(&c, "auto.create.topics.enable", "yes", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "log.retention.hours", "2", err, sizeof(err)), 0);
	ck_assert_int_eq(c.log.retention_ms, 7200000);
	ck_assert_int_eq(kb_config_set(&c, "log.retention.ms", "-1", err, sizeof(err)), 0);
	ck_assert_int_eq(c.log.retention_ms, -1);
	ck_assert_int_eq(kb_config_set(&c, "log.message.timestamp.type", "LogAppendTime", err, sizeof(err)), 0);
	ck_assert_int_eq(c.log.timestamp_type, 1);
	ck_assert_int_eq(c.log.compression_type, KS_COMPRESS_PRODUCER); /* Kafka's default */
	ck_assert_int_eq(kb_config_set(&c, "compression.type", "zstd", err, sizeof(err)), 0);
	ck_assert_int_eq(c.log.compression_type, KS_COMPRESS_ZSTD);
	ck_assert_int_eq(kb_config_set(&c, "compression.type", "uncompressed", err, sizeof(err)), 0);
	ck_assert_int_eq(c.log.compression_type, KS_COMPRESS_UNCOMPRESSED);
	ck_assert_int_eq(kb_config_set(&c, "compression.type", "brotli", err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "compression.type") && strstr(err, "brotli") &&
		      strstr(err, "uncompressed, zstd, lz4, snappy, gzip, producer"), "%s", err);
	ck_assert_int_eq(c.log.compression_type, KS_COMPRESS_UNCOMPRESSED); /* unchanged on error */
	ck_assert_int_eq(kb_config_set(&c, "no.such.thing", "1", err, sizeof(err)), -ENOENT);
	ck_assert_int_eq(kb_config_set(&c, "log.dirs", "/a,/b", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "log.dirs", "nfs://srv/export?version=3", err, sizeof(err)), 0);
	ck_assert_str_eq(c.data_url, "nfs://srv/export?version=3");
}
END_TEST

START_TEST(listeners)
{
	char host[256];
	int32_t port;
	ck_assert_int_eq(kb_parse_hostport("PLAINTEXT://broker-1.kaas:9093", host, sizeof(host), &port), 0);
	ck_assert_str_eq(host, "broker-1.kaas");
	ck_assert_int_eq(port, 9093);
	ck_assert_int_eq(kb_parse_hostport("[::1]:19092", host, sizeof(host), &port), 0);
	ck_assert_str_eq(host, "::1");
	ck_assert_int_eq(kb_parse_hostport(":9092", host, sizeof(host), &port), 0);
	ck_assert_str_eq(host, "");
	ck_assert_int_eq(kb_parse_hostport("SASL_SSL://h:1", host, sizeof(host), &port), -1);
	ck_assert_int_eq(kb_parse_hostport("h:70000", host, sizeof(host), &port), -1);
	ck_assert_int_eq(kb_parse_hostport("h", host, sizeof(host), &port), -1);
	ck_assert_int_eq(kb_parse_hostport("a:1,b:2", host, sizeof(host), &port), -1);
	ck_assert_int_eq(kb_parse_hostport("h;rm -rf:1", host, sizeof(host), &port), -1);
	kb_config c;
	char err[256];
	kb_config_defaults(&c);
	ck_assert_int_eq(kb_config_set(&c, "advertised.listeners", "h:0", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "listeners", "127.0.0.1:0", err, sizeof(err)), 0);
	ck_assert_int_eq(c.listen_port, 0);
}
END_TEST

/* Several listeners, named ones through the protocol map, each with its
 * advertised endpoint; every inconsistency refused by name. */
START_TEST(listener_lists)
{
	kb_config c;
	char err[512];
	kb_listener l[KB_MAX_LISTENERS];
	int n = 0;
	kb_config_defaults(&c);
	ck_assert_int_eq(kb_listeners_resolve(&c, l, &n, err, sizeof(err)), 0);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(l[0].protocol, KB_SEC_PLAINTEXT);
	ck_assert_int_eq(l[0].port, 9092);

	ck_assert_int_eq(kb_config_set(&c, "listeners", "PLAINTEXT://127.0.0.1:9092, SSL://0.0.0.0:9093,"
				       "OUTSIDE://[::1]:9094", err, sizeof(err)), 0);
	ck_assert_str_eq(c.listen_host, "127.0.0.1");
	ck_assert_int_eq(kb_listeners_resolve(&c, l, &n, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "OUTSIDE"));
	ck_assert_int_eq(kb_config_set(&c, "listener.security.protocol.map",
				       "PLAINTEXT:PLAINTEXT,OUTSIDE:SASL_SSL", err, sizeof(err)), 0);
	ck_assert_int_eq(kb_config_set(&c, "advertised.listeners", "SSL://broker-1.example:19093",
				       err, sizeof(err)), 0);
	ck_assert_int_eq(kb_listeners_resolve(&c, l, &n, err, sizeof(err)), 0);
	ck_assert_int_eq(n, 3);
	ck_assert_str_eq(l[1].name, "SSL");
	ck_assert_int_eq(l[1].protocol, KB_SEC_SSL);
	ck_assert_str_eq(l[1].host, "0.0.0.0");
	ck_assert_str_eq(l[1].adv_host, "broker-1.example");
	ck_assert_int_eq(l[1].adv_port, 19093);
	ck_assert_str_eq(l[0].adv_host, "");
	ck_assert_int_eq(l[2].protocol, KB_SEC_SASL_SSL);
	ck_assert_str_eq(l[2].host, "::1");

	ck_assert_int_eq(kb_config_set(&c, "advertised.listeners", "INSIDE://h:1", err, sizeof(err)), 0);
	ck_assert_int_eq(kb_listeners_resolve(&c, l, &n, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "INSIDE"));
	ck_assert_int_eq(kb_config_set(&c, "advertised.listeners", "", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "listener.security.protocol.map", "OUTSIDE:TLS", err, sizeof(err)), 0);
	ck_assert_int_eq(kb_listeners_resolve(&c, l, &n, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "TLS"));

	ck_assert_int_eq(kb_config_set(&c, "listeners", "SSL://h:1,SSL://h:2", err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "twice"));
	ck_assert_int_eq(kb_config_set(&c, "listeners", "SSL://h:1,", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "listeners", "S L://h:1", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "listeners", "SSL://h:65536", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "listeners", "A://a:1,B://b:2,C://c:3,D://d:4,E://e:5,"
				       "F://f:6,G://g:7,H://h:8,I://i:9", err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "more than"));
	ck_assert_int_eq(kb_config_set(&c, "ssl.client.auth", "yes", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "ssl.client.auth", "required", err, sizeof(err)), 0);
	ck_assert_int_eq(c.ssl_client_auth, KB_SSL_AUTH_REQUIRED);
	ck_assert_int_eq(kb_config_set(&c, "ssl.keystore.type", "JKS", err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "PEM"));
	ck_assert_int_eq(kb_config_set(&c, "ssl.keystore.type", "pem", err, sizeof(err)), 0);
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
	kb_config c;
	char err[512];

	/* Kafka's precedence regardless of line order: ms > minutes > hours. */
	write_file(path, "# a comment\n! another\n\nlog.retention.ms = 1234\nlog.retention.hours=5\n"
			 "zookeeper.connect=localhost:2181\nlog.retention.minutes=3\n"
			 "log.roll.ms=777\nlog.roll.hours=9\nnum.partitions=4\n");
	kb_config_defaults(&c);
	warnings = 0;
	ck_assert_int_eq(kb_config_load_file(&c, path, err, sizeof(err), count_warn), 0);
	ck_assert_int_eq(c.log.retention_ms, 1234);
	ck_assert_int_eq(c.log.segment_ms, 777);
	ck_assert_int_eq(c.num_partitions, 4);
	ck_assert_int_eq(warnings, 1); /* zookeeper.connect: ignored with a warning */

	write_file(path, "log.retention.hours=5\nlog.retention.minutes=3\n");
	kb_config_defaults(&c);
	ck_assert_int_eq(kb_config_load_file(&c, path, err, sizeof(err), NULL), 0);
	ck_assert_int_eq(c.log.retention_ms, 180000);

	write_file(path, "num.partitions=2\nmessage.max.bytes=-5\n");
	kb_config_defaults(&c);
	ck_assert_int_eq(kb_config_load_file(&c, path, err, sizeof(err), NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, ":2: message.max.bytes"));

	write_file(path, "just words\n");
	ck_assert_int_eq(kb_config_load_file(&c, path, err, sizeof(err), NULL), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "expected key=value"));
	unlink(path);
	ck_assert_int_eq(kb_config_load_file(&c, path, err, sizeof(err), NULL), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, path));
	ck_assert_ptr_nonnull(strstr(err, "No such file"));

	/* A directory opens, reads as nothing and would pass as an empty
	 * file: it is refused by name. */
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(kb_config_load_file(&c, path, err, sizeof(err), NULL), -EISDIR);
	ck_assert_ptr_nonnull(strstr(err, path));
	ck_assert_ptr_nonnull(strstr(err, "is a directory"));
	rmdir(path);

	/* Unreadable (when not root, who reads anything). */
	write_file(path, "num.partitions=2\n");
	chmod(path, 0);
	if (geteuid() != 0) {
		ck_assert_int_eq(kb_config_load_file(&c, path, err, sizeof(err), NULL), -EACCES);
		ck_assert_ptr_nonnull(strstr(err, path));
		ck_assert_ptr_nonnull(strstr(err, "Permission denied"));
	}
	unlink(path);
}
END_TEST

/* Every key of the table: a malformed value and each bound's neighbour are
 * refused with a message naming the key, leaving the setting unchanged; the
 * bounds themselves are accepted; and the default --help prints is the one
 * kb_config_defaults() sets. */
START_TEST(every_key_validates)
{
	char err[512];
	int n = 0;
	for (const kb_config_key *k = kb_config_keys; k->key; k++, n++) {
		kb_config c, d;
		kb_config_defaults(&c);
		kb_config_defaults(&d);
		const char *bad_values[] = {"x", "", "1,2", "PLAINTEXT://h:99999"};
		for (size_t i = 0; i < sizeof(bad_values) / sizeof(bad_values[0]); i++) {
			const char *v = bad_values[i];
			if (k->type == KCFG_PATH && (strcmp(v, "x") == 0 || v[0] == 'P'))
				continue; /* a path, or a URL the substrate layer judges at start-up */
			if (k->type == KCFG_STR)
				continue; /* free text (a file name, a list) judged where it is used */
			if (k->type == KCFG_AUTHORIZER && !v[0])
				continue; /* empty: no authorizer */
			err[0] = 0;
			ck_assert_msg(kb_config_set(&c, k->key, v, err, sizeof(err)) == -EINVAL, "%s accepted '%s'",
				      k->key, v);
			ck_assert_msg(strstr(err, k->key) != NULL, "%s: error does not name the key: %s", k->key, err);
			ck_assert_msg(memcmp(&c, &d, sizeof(c)) == 0, "%s='%s' changed the config", k->key, v);
		}
		if (k->type == KCFG_I16 || k->type == KCFG_I32 || k->type == KCFG_I64 || k->type == KCFG_MINUTES ||
		    k->type == KCFG_HOURS) {
			char v[64];
			if (k->min > INT64_MIN) {
				snprintf(v, sizeof(v), "%lld", (long long)k->min - 1);
				ck_assert_msg(kb_config_set(&c, k->key, v, err, sizeof(err)) == -EINVAL,
					      "%s accepted %s below its minimum", k->key, v);
				ck_assert_ptr_nonnull(strstr(err, k->key));
			}
			if (k->max < INT64_MAX) {
				snprintf(v, sizeof(v), "%lld", (long long)k->max + 1);
				ck_assert_msg(kb_config_set(&c, k->key, v, err, sizeof(err)) == -EINVAL,
					      "%s accepted %s above its maximum", k->key, v);
			}
			ck_assert_msg(memcmp(&c, &d, sizeof(c)) == 0, "%s: a refused value changed the config", k->key);
			snprintf(v, sizeof(v), "%lld", (long long)k->max);
			ck_assert_msg(kb_config_set(&c, k->key, v, err, sizeof(err)) == 0, "%s refused its maximum: %s",
				      k->key, err);
			snprintf(v, sizeof(v), "%lld", (long long)k->min);
			ck_assert_msg(kb_config_set(&c, k->key, v, err, sizeof(err)) == 0, "%s refused its minimum: %s",
				      k->key, err);
		}
		/* The documented default is the real one. */
		if (k->dflt[0] && k->dflt[0] != '(' && strcmp(k->dflt, "DATA/__cluster") != 0) {
			kb_config e;
			kb_config_defaults(&e);
			ck_assert_msg(kb_config_set(&e, k->key, k->dflt, err, sizeof(err)) == 0, "%s: default '%s': %s",
				      k->key, k->dflt, err);
			ck_assert_msg(memcmp(&e, &d, sizeof(e)) == 0, "%s: --help says the default is '%s', it is not",
				      k->key, k->dflt);
		}
	}
	ck_assert_int_ge(n, 30);
}
END_TEST

START_TEST(partition_keys_split_from_the_right)
{
	char t[256];
	int32_t p;
	ck_assert_int_eq(kb_partition_key_parse("orders-3", t, sizeof(t), &p), 0);
	ck_assert_str_eq(t, "orders");
	ck_assert_int_eq(p, 3);
	ck_assert_int_eq(kb_partition_key_parse("my-topic.v2-with-dashes-17", t, sizeof(t), &p), 0);
	ck_assert_str_eq(t, "my-topic.v2-with-dashes");
	ck_assert_int_eq(p, 17);
	ck_assert_int_eq(kb_partition_key_parse("t--1", t, sizeof(t), &p), 0); /* topic "t-", partition 1 */
	ck_assert_str_eq(t, "t-");
	ck_assert_int_eq(kb_partition_key_parse("orders", t, sizeof(t), &p), -EINVAL);
	ck_assert_int_eq(kb_partition_key_parse("orders-", t, sizeof(t), &p), -EINVAL);
	ck_assert_int_eq(kb_partition_key_parse("-3", t, sizeof(t), &p), -EINVAL);
	ck_assert_int_eq(kb_partition_key_parse("a-3x", t, sizeof(t), &p), -EINVAL);
	ck_assert_int_eq(kb_partition_key_parse("a-99999999999", t, sizeof(t), &p), -EINVAL);
	ck_assert_int_eq(kb_partition_key_parse("abcdef-1", t, 4, &p), -ENAMETOOLONG);
}
END_TEST

START_TEST(request_and_connection_limits)
{
	kb_config c;
	char err[256];
	kb_config_defaults(&c);
	ck_assert_int_eq(c.queued_max_request_bytes, 512LL << 20);
	ck_assert_int_eq(c.max_connections, 2147483647);
	ck_assert_int_eq(c.max_connections_per_ip, 2147483647);
	ck_assert_int_eq(c.connection_max_buffered_bytes, 64LL << 20);
	ck_assert_int_eq(kb_config_set(&c, "queued.max.request.bytes", "-1", err, sizeof(err)), 0);
	ck_assert_int_eq(c.queued_max_request_bytes, -1);
	ck_assert_int_eq(kb_config_set(&c, "queued.max.request.bytes", "65536", err, sizeof(err)), 0);
	ck_assert_int_eq(c.queued_max_request_bytes, 65536);
	const char *bad_q[] = {"0", "65535", "-2", "1MiB", ""};
	for (size_t i = 0; i < sizeof(bad_q) / sizeof(*bad_q); i++) {
		err[0] = 0;
		ck_assert_int_eq(kb_config_set(&c, "queued.max.request.bytes", bad_q[i], err, sizeof(err)), -EINVAL);
		ck_assert_ptr_nonnull(strstr(err, "queued.max.request.bytes"));
	}
	ck_assert_int_eq(c.queued_max_request_bytes, 65536);
	ck_assert_int_eq(kb_config_set(&c, "max.connections", "3", err, sizeof(err)), 0);
	ck_assert_int_eq(c.max_connections, 3);
	ck_assert_int_eq(kb_config_set(&c, "max.connections", "0", err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "max.connections"));
	ck_assert_int_eq(kb_config_set(&c, "max.connections", "2147483648", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "max.connections.per.ip", "1", err, sizeof(err)), 0);
	ck_assert_int_eq(c.max_connections_per_ip, 1);
	ck_assert_int_eq(kb_config_set(&c, "max.connections.per.ip", "-1", err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "max.connections.per.ip"));
	ck_assert_int_eq(c.max_connections, 3);
}
END_TEST

/* listener.name.<name>.<SASL key>: one listener's own, the others the
 * broker's; errors name the whole key. */
START_TEST(per_listener_sasl)
{
	kb_config c;
	char err[512];
	kb_config_defaults(&c);
	ck_assert_int_eq(kb_config_set(&c, "listeners", "SASL_PLAINTEXT://:0,INTERNAL://:0,SSL://:0", err, sizeof(err)), 0);
	ck_assert_int_eq(kb_config_set(&c, "listener.security.protocol.map", "INTERNAL:SASL_SSL", err, sizeof(err)), 0);
	ck_assert_int_eq(kb_config_set(&c, "sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256", err, sizeof(err)), 0);
	ck_assert_int_eq(kb_config_set(&c, "listener.name.internal.sasl.enabled.mechanisms", "SCRAM-SHA-512", err,
				       sizeof(err)), 0);
	ck_assert_int_eq(kb_config_set(&c, "listener.name.internal.connections.max.reauth.ms", "60000", err,
				       sizeof(err)), 0);
	ck_assert_int_eq(kb_config_set(&c, "listener.name.internal.SCRAM-SHA-512.connections.max.reauth.ms", "5000",
				       err, sizeof(err)), 0);
	ck_assert_int_eq(kb_config_set(&c, "listener.name.internal.sasl.server.max.receive.size", "4096", err,
				       sizeof(err)), 0);
	ck_assert_int_eq(kb_config_set(&c, "listener.name.ssl.ssl.principal.mapping.rules", "RULE:^CN=(.*)$/$1/L",
				       err, sizeof(err)), 0);
	kb_config *lc = NULL;
	ck_assert_int_eq(kb_config_for_listener(&c, "INTERNAL", &lc, err, sizeof(err)), 0);
	ck_assert_str_eq(lc->sasl_enabled_mechanisms, "SCRAM-SHA-512");
	ck_assert_int_eq(lc->connections_max_reauth_ms, 60000);
	ck_assert_int_eq(lc->sasl_mech_reauth_ms[2], 5000);
	ck_assert_int_eq(lc->sasl_mech_reauth_ms[0], -1);
	ck_assert_int_eq(lc->sasl_server_max_receive_size, 4096);
	ck_assert_str_eq(lc->ssl_principal_mapping_rules, "DEFAULT");
	free(lc);
	ck_assert_int_eq(kb_config_for_listener(&c, "SASL_PLAINTEXT", &lc, err, sizeof(err)), 0);
	ck_assert_str_eq(lc->sasl_enabled_mechanisms, "PLAIN,SCRAM-SHA-256");
	ck_assert_int_eq(lc->connections_max_reauth_ms, 0);
	ck_assert_int_eq(lc->sasl_mech_reauth_ms[2], -1);
	ck_assert_int_eq(lc->sasl_server_max_receive_size, 524288);
	free(lc);
	ck_assert_int_eq(kb_config_for_listener(&c, "SSL", &lc, err, sizeof(err)), 0);
	ck_assert_str_eq(lc->ssl_principal_mapping_rules, "RULE:^CN=(.*)$/$1/L");
	free(lc);
	/* refusals, each naming the whole key */
	ck_assert_int_eq(kb_config_set(&c, "listener.name.internal.sasl.enabled.mechanisms", "GSSAPI", err, sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strncmp(err, "listener.name.internal.sasl.enabled.mechanisms: invalid value 'GSSAPI'", 69) == 0,
		      "%s", err);
	ck_assert_int_eq(kb_config_set(&c, "listener.name.internal.plain.connections.max.reauth.ms", "-5", err,
				       sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "listener.name.internal.plain.connections.max.reauth.ms: invalid value '-5'"), "%s", err);
	ck_assert_int_eq(kb_config_set(&c, "listener.name.internal.gssapi.connections.max.reauth.ms", "5", err,
				       sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_config_set(&c, "listener.name.ssl.ssl.principal.mapping.rules", "RULE:x", err, sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strstr(err, "listener.name.ssl.ssl.principal.mapping.rules: invalid rule 'RULE:x'"), "%s", err);
	/* a SASL key on the SSL listener: refused once the listeners are known */
	ck_assert_int_eq(kb_config_set(&c, "listener.name.ssl.sasl.enabled.mechanisms", "PLAIN", err, sizeof(err)), 0);
	ck_assert_int_eq(kb_config_for_listener(&c, "INTERNAL", &lc, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "listener.name.ssl.sasl.enabled.mechanisms: listener SSL is SSL, it has no SASL"), "%s",
		      err);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "config", .tcase = "config" },
			  KTEST_LIST(defaults_are_kafkas, set_validates_and_names_the_key,
				     listeners, listener_lists, properties_file,
				     partition_keys_split_from_the_right, every_key_validates,
				     request_and_connection_limits, per_listener_sasl));
}
