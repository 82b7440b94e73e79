/*
 * config.c — broker settings: defaults, the key table, key=value parsing and
 * the properties-file reader.
 *
 * One table lists every setting with its Kafka name, type, bounds and help;
 * the file reader, the --help text (kb_config_help) and the documentation
 * check all come from it, so a setting cannot be parsed without being
 * documented.
 */
#include "kaas/core/broker.h"
#include "kaas/core/config.h"
#include "kaas/core/listeners.h"
#include "kaas/core/sslmap.h"
#include "util/assert.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define OFF(f) offsetof(kb_config, f)

const char *const kb_compression_names[] = {
	[KS_COMPRESS_PRODUCER] = "producer", [KS_COMPRESS_UNCOMPRESSED] = "uncompressed",
	[KS_COMPRESS_GZIP] = "gzip",         [KS_COMPRESS_SNAPPY] = "snappy",
	[KS_COMPRESS_LZ4] = "lz4",           [KS_COMPRESS_ZSTD] = "zstd",
	[KS_COMPRESS_ZSTD + 1] = NULL,
};

const kb_config_key kb_config_keys[] = {
	{"broker.id", KCFG_I32, OFF(broker_id), 0, INT32_MAX, "1",
	 "this broker's node id (--broker-id, KAAS_BROKER_ID)"},
	{"listeners", KCFG_LISTENER, OFF(listeners), 0, 0, "PLAINTEXT://0.0.0.0:9092",
	 "where to listen: NAME://HOST:PORT[,NAME://HOST:PORT...], NAME one of PLAINTEXT, SSL, "
	 "SASL_PLAINTEXT, SASL_SSL or a name of listener.security.protocol.map; HOST:PORT alone is PLAINTEXT "
	 "(--listen, KAAS_LISTEN: one PLAINTEXT listener)"},
	{"advertised.listeners", KCFG_LISTENER, OFF(advertised_listeners), 0, 0, "(listeners)",
	 "the endpoint Metadata gives clients that connected to the listener of the same name "
	 "(--advertise, KAAS_ADVERTISE: the first listener's); a listener without one advertises "
	 "its own address, this host's name for a wildcard"},
	{"listener.security.protocol.map", KCFG_STR, OFF(listener_protocol_map), 0, 0, "",
	 "NAME:PROTOCOL[,...]: the security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) of each listener name that "
	 "is not itself a protocol"},
	{"ssl.keystore.location", KCFG_STR, OFF(ssl_keystore_location), 0, 0, "",
	 "PEM file with this broker's private key and certificate chain (SSL listeners)"},
	{"ssl.keystore.type", KCFG_STORETYPE, OFF(ssl_keystore_type), 0, 0, "PEM",
	 "PEM only: convert a JKS or PKCS12 keystore with keytool/openssl"},
	{"ssl.key.password", KCFG_STR, OFF(ssl_key_password), 0, 0, "",
	 "the passphrase of an encrypted private key"},
	{"ssl.certificate.location", KCFG_STR, OFF(ssl_certificate_location), 0, 0, "",
	 "PEM certificate chain in a file of its own (with ssl.key.location; instead of "
	 "ssl.keystore.location)"},
	{"ssl.key.location", KCFG_STR, OFF(ssl_key_location), 0, 0, "",
	 "PEM private key in a file of its own (with ssl.certificate.location)"},
	{"ssl.truststore.location", KCFG_STR, OFF(ssl_truststore_location), 0, 0, "",
	 "PEM bundle of the CAs whose client certificates are accepted (ssl.client.auth)"},
	{"ssl.truststore.type", KCFG_STORETYPE, OFF(ssl_truststore_type), 0, 0, "PEM",
	 "PEM only"},
	{"ssl.client.auth", KCFG_SSL_AUTH, OFF(ssl_client_auth), 0, 0, "none",
	 "required: refuse a client without a certificate the truststore verifies; requested: "
	 "ask, refuse a bad one, accept none; none: do not ask"},
	{"ssl.enabled.protocols", KCFG_STR, OFF(ssl_enabled_protocols), 0, 0, "TLSv1.2,TLSv1.3",
	 "TLS versions accepted: TLSv1.2, TLSv1.3"},
	{"ssl.cipher.suites", KCFG_STR, OFF(ssl_cipher_suites), 0, 0, "",
	 "comma-separated cipher suites (OpenSSL or IANA names of TLS 1.2 suites, TLS 1.3 "
	 "suites by their TLS_ names); empty: OpenSSL's defaults"},
	{"ssl.principal.mapping.rules", KCFG_SSL_RULES, OFF(ssl_principal_mapping_rules), 0, 0, "DEFAULT",
	 "KIP-371: RULE:pattern/replacement/[LU], ..., DEFAULT: the principal of a client certificate "
	 "on an SSL listener, from its DN (the first rule whose Java regular expression matches the whole "
	 "DN; DEFAULT: the DN itself)"},
	{"sasl.enabled.mechanisms", KCFG_SASL_MECHS, OFF(sasl_enabled_mechanisms), 0, 0,
	 "SCRAM-SHA-256,SCRAM-SHA-512",
	 "the SASL mechanisms of the SASL_PLAINTEXT and SASL_SSL listeners: PLAIN, SCRAM-SHA-256, "
	 "SCRAM-SHA-512 (PLAIN sends the password itself: prefer it on SASL_SSL); users with "
	 "kaas users add"},
	{"connections.max.reauth.ms", KCFG_I64, OFF(connections_max_reauth_ms), 0, INT64_MAX, "0",
	 "a SASL session lasts this long (KIP-368): the client re-authenticates before, or its next "
	 "request after closes the connection; 0: sessions never end"},
	{"sasl.server.max.receive.size", KCFG_I32, OFF(sasl_server_max_receive_size), 64, INT32_MAX,
	 "524288", "largest request accepted on a SASL listener before authentication"},
	{"kaas.ssl.handshake.timeout.ms", KCFG_I64, OFF(ssl_handshake_timeout_ms), 1, INT32_MAX,
	 "10000", "a TLS handshake not finished this long after the connection was accepted "
	 "is dropped"},
	{"metrics.listen", KCFG_LISTENER, OFF(metrics_host), 0, 0, "(off)",
	 "HOST:PORT of the HTTP listener serving /metrics (Prometheus), /healthz and /readyz; "
	 "PORT or :PORT alone listens on loopback (docs/operations.md)"},
	{"log.dirs", KCFG_PATH, OFF(data_url), 0, 0, "(required)",
	 "the data volume: one path or substrate URL (--data, KAAS_DATA); a list is refused"},
	{"kaas.cluster.dir", KCFG_PATH, OFF(cluster_url), 0, 0, "DATA/__cluster",
	 "the cluster directory: registry, assignment, groups, stamp "
	 "(--cluster-dir, KAAS_CLUSTER_DIR)"},
	{"num.partitions", KCFG_I32, OFF(num_partitions), 1, 10000, "1",
	 "partitions of an automatically created topic"},
	{"auto.create.topics.enable", KCFG_BOOL, OFF(auto_create_topics), 0, 1, "true",
	 "create a topic when Metadata asks for one that does not exist"},
	{"default.replication.factor", KCFG_I16, OFF(default_replication_factor), 1, INT16_MAX, "1",
	 "accepted for compatibility; kaas keeps one copy on the shared volume"},
	{"log.retention.ms", KCFG_I64, OFF(log.retention_ms), -1, INT64_MAX, "604800000",
	 "delete segments older than this (-1: keep forever)"},
	{"log.retention.minutes", KCFG_MINUTES, OFF(log.retention_ms), -1, INT64_MAX / 60000, "",
	 "the same in minutes (log.retention.ms wins over it, it wins over .hours)"},
	{"log.retention.hours", KCFG_HOURS, OFF(log.retention_ms), -1, INT64_MAX / 3600000, "168",
	 "the same in hours"},
	{"log.retention.bytes", KCFG_I64, OFF(log.retention_bytes), -1, INT64_MAX, "-1",
	 "delete the oldest segments while a partition is larger (-1: no limit)"},
	{"log.segment.bytes", KCFG_I64, OFF(log.segment_bytes), 1024, INT32_MAX, "1073741824",
	 "roll to a new segment file at this size"},
	{"log.roll.ms", KCFG_I64, OFF(log.segment_ms), 1, INT64_MAX, "604800000",
	 "roll to a new segment when the active one is this old"},
	{"log.roll.hours", KCFG_HOURS, OFF(log.segment_ms), 1, INT64_MAX / 3600000, "168",
	 "the same in hours (log.roll.ms wins)"},
	{"message.max.bytes", KCFG_I32, OFF(log.max_message_bytes), 0, INT32_MAX, "1048588",
	 "largest record batch a producer may send (topic: max.message.bytes)"},
	{"log.index.interval.bytes", KCFG_I32, OFF(log.index_interval_bytes), 0, INT32_MAX, "4096",
	 "bytes between two entries of the sparse offset index"},
	{"log.message.timestamp.type", KCFG_TSTYPE, OFF(log.timestamp_type), 0, 1, "CreateTime",
	 "CreateTime or LogAppendTime"},
	{"log.cleanup.policy", KCFG_CLEANUP, OFF(log.cleanup_compact), 0, 2, "delete",
	 "what topics without a cleanup.policy do with old segments: delete (retention), compact "
	 "(the log cleaner keeps the latest record per key), or compact,delete (both)"},
	{"compression.type", KCFG_COMPRESSION, OFF(log.compression_type), 0, 5, "producer",
	 "the codec batches of topics without their own compression.type are stored with: producer "
	 "(as sent), uncompressed, gzip, snappy, lz4 or zstd (re-encoded on append)"},
	{"log.retention.check.interval.ms", KCFG_I64, OFF(retention_check_interval_ms), 100,
	 INT64_MAX, "300000", "how often retention and segment age are checked"},
	{"kaas.log.scrub.bytes.per.sec", KCFG_I64, OFF(scrub_bytes_per_sec), 0, INT64_MAX, "4194304",
	 "read rate of the background scrub that verifies the CRC-32C of the led partitions' sealed "
	 "segments (0: off)"},
	{"log.cleaner.enable", KCFG_BOOL, OFF(cleaner_enable), 0, 1, "true",
	 "run the log cleaner for topics with cleanup.policy=compact (on a thread of its own)"},
	{"log.cleaner.dedupe.buffer.size", KCFG_I64, OFF(cleaner_dedupe_bytes), 1024, INT64_MAX / 2, "134217728",
	 "memory of the cleaner's key map (24 bytes a key, filled to 90%); a log with more dirty "
	 "keys is cleaned in several passes"},
	{"log.cleaner.io.max.bytes.per.second", KCFG_I64, OFF(cleaner_io_bytes_per_sec), 0, INT64_MAX,
	 "9223372036854775807", "bytes a second the cleaner reads and writes together (0 or the "
	 "default: unlimited)"},
	{"log.cleaner.backoff.ms", KCFG_I64, OFF(cleaner_backoff_ms), 10, INT64_MAX, "15000",
	 "how long the cleaner sleeps when no log needed cleaning"},
	{"kaas.trash.retention.ms", KCFG_I64, OFF(trash_retention_ms), -1, INT64_MAX, "86400000",
	 "how long deleted and reclaimed topic directories stay in DATA/~trash-* before they are "
	 "removed (0: at once, -1: never; `kaas trash empty` removes them earlier)"},
	{"socket.request.max.bytes", KCFG_I64, OFF(socket_request_max_bytes), 64, INT32_MAX,
	 "104857600", "largest request frame; a bigger one closes the connection before "
	 "anything is allocated"},
	{"connections.max.idle.ms", KCFG_I64, OFF(connections_max_idle_ms), -1, INT64_MAX, "600000",
	 "close connections idle this long (-1: never)"},
	{"num.io.threads", KCFG_I32, OFF(num_io_threads), 1, 256, "8",
	 "worker threads that run request handlers"},
	{"kaas.flush.threads", KCFG_I32, OFF(num_flush_threads), 1, 64, "2",
	 "threads that fsync appended data (group commit) for acks=all and the high watermark"},
	{"kaas.flush.pipeline.depth", KCFG_I32, OFF(log.flush_depth), 1, KAAS_FLUSH_DEPTH_MAX, "2",
	 "fsyncs of one partition in flight at once (group commit); each needs a flusher thread, "
	 "so set kaas.flush.threads at least as high"},
	{"kaas.connection.max.buffered.bytes", KCFG_I64, OFF(connection_max_buffered_bytes), 65536,
	 INT64_MAX, "67108864", "per connection (backpressure): with more unsent responses than "
	 "this no further request is processed, with more unanswered requests plus unsent "
	 "responses nothing more is read"},
	{"queued.max.request.bytes", KCFG_I64, OFF(queued_max_request_bytes), -1, INT64_MAX,
	 "536870912", "all connections together: request bytes received and not answered yet; "
	 "a frame waits for room before it is allocated (-1: unbounded, or at least 65536)"},
	{"kaas.request.min.bytes.per.sec", KCFG_I64, OFF(request_min_bytes_per_sec), 0, INT32_MAX,
	 "16384", "a request frame must arrive at least this fast (averaged from its first byte, "
	 "after 5 s) or it is dropped with its connection: it holds its whole size of "
	 "queued.max.request.bytes while it arrives (0: no minimum)"},
	{"max.connections", KCFG_I32, OFF(max_connections), 1, INT32_MAX, "2147483647",
	 "client connections open at once; at the limit new ones wait in the listen backlog"},
	{"max.connections.per.ip", KCFG_I32, OFF(max_connections_per_ip), 1, INT32_MAX,
	 "2147483647", "client connections open at once from one address; a further one is "
	 "closed as soon as it is accepted"},
	{"kaas.shutdown.timeout.ms", KCFG_I64, OFF(shutdown_timeout_ms), 0, INT64_MAX, "30000",
	 "on SIGTERM, how long in-flight requests may take before connections are closed"},
	{"broker.heartbeat.interval.ms", KCFG_I64, OFF(broker_heartbeat_interval_ms), 10, 60000, "250",
	 "how often a broker rewrites CLUSTER/brokers/<id>.json (renewing its lease)"},
	{"broker.session.timeout.ms", KCFG_I64, OFF(broker_session_timeout_ms), 100, 600000, "3000",
	 "a broker whose heartbeat has not moved this long is dead; its lease is this minus a drift "
	 "margin"},
	{"kaas.cluster.stall.timeout.ms", KCFG_I64, OFF(cluster_stall_timeout_ms), 0, 600000, "0",
	 "an fsync or heartbeat write outstanding this long makes the broker give up leadership and exit "
	 "(0: broker.session.timeout.ms less the drift margin and two heartbeat intervals)"},
	{"kaas.cluster.poll.ms", KCFG_I64, OFF(cluster_poll_ms), 10, 60000, "100",
	 "how often peers' heartbeats, the controller and the assignment are read"},
	{"kaas.drain.timeout.ms", KCFG_I64, OFF(drain_timeout_ms), 0, INT64_MAX, "30000",
	 "on SIGTERM, how long to wait for the controller to move this broker's partitions away"},
	{"group.initial.rebalance.delay.ms", KCFG_I64, OFF(group_initial_rebalance_delay_ms), 0,
	 INT64_MAX, "3000", "wait for more members before the first rebalance of a group"},
	{"group.min.session.timeout.ms", KCFG_I64, OFF(group_min_session_timeout_ms), 0, INT64_MAX,
	 "6000", "smallest session timeout a consumer may ask for"},
	{"group.max.session.timeout.ms", KCFG_I64, OFF(group_max_session_timeout_ms), 0, INT64_MAX,
	 "1800000", "largest session timeout a consumer may ask for"},
	{"group.max.size", KCFG_I32, OFF(group_max_size), 1, INT32_MAX, "2147483647",
	 "members per consumer group"},
	{"offsets.retention.minutes", KCFG_I64, OFF(offsets_retention_minutes), 1, INT64_MAX / 60000,
	 "10080", "committed offsets of an empty group are kept this long"},
	{"transaction.max.timeout.ms", KCFG_I64, OFF(transaction_max_timeout_ms), 1, INT32_MAX,
	 "900000", "largest transaction timeout a producer may ask for"},
	{"transactional.id.expiration.ms", KCFG_I64, OFF(transactional_id_expiration_ms), 1,
	 INT32_MAX, "604800000", "forget a transactional id unused this long"},
	{"authorizer.class.name", KCFG_AUTHORIZER, OFF(authorizer_class_name), 0, 0, "",
	 "turns the ACL authorizer on (docs/security.md): kaas, or Kafka's "
	 "org.apache.kafka.metadata.authorizer.StandardAuthorizer or "
	 "kafka.security.authorizer.AclAuthorizer (the same rules); empty: no authorizer, "
	 "everything allowed"},
	{"super.users", KCFG_STR, OFF(super_users), 0, 0, "",
	 "principals the authorizer always allows, separated by ';': User:admin;User:CN=ops,O=corp"},
	{"allow.everyone.if.no.acl.found", KCFG_BOOL, OFF(allow_everyone_if_no_acl), 0, 1, "false",
	 "with the authorizer on, allow a resource that no ACL names to everyone"},
	{"kaas.acl.poll.ms", KCFG_I64, OFF(acl_poll_ms), 10, 3600000, "1000",
	 "how often a broker checks CLUSTER/acls.version for ACL changes made through other "
	 "brokers; they apply within this time"},
	{NULL, 0, 0, 0, 0, NULL, NULL},
};

void kb_config_defaults(kb_config *c)
{
	memset(c, 0, sizeof(*c));
	c->broker_id = 1;
	snprintf(c->listen_host, sizeof(c->listen_host), "0.0.0.0");
	c->listen_port = 9092;
	c->metrics_port = -1;
	snprintf(c->listeners, sizeof(c->listeners), "PLAINTEXT://0.0.0.0:9092");
	snprintf(c->ssl_keystore_type, sizeof(c->ssl_keystore_type), "PEM");
	snprintf(c->ssl_truststore_type, sizeof(c->ssl_truststore_type), "PEM");
	snprintf(c->ssl_enabled_protocols, sizeof(c->ssl_enabled_protocols), "TLSv1.2,TLSv1.3");
	c->ssl_client_auth = KB_SSL_AUTH_NONE;
	c->ssl_handshake_timeout_ms = 10000;
	snprintf(c->ssl_principal_mapping_rules, sizeof(c->ssl_principal_mapping_rules), "DEFAULT");
	for (int i = 0; i < 3; i++)
		c->sasl_mech_reauth_ms[i] = -1;
	snprintf(c->sasl_enabled_mechanisms, sizeof(c->sasl_enabled_mechanisms), "SCRAM-SHA-256,SCRAM-SHA-512");
	c->sasl_server_max_receive_size = 524288;
	c->advertise_port = -1; /* unset: follow listeners */
	c->num_partitions = 1;
	c->auto_create_topics = 1;
	c->default_replication_factor = 1;
	ks_log_config_defaults(&c->log);
	c->log.retention_ms = 7LL * 24 * 3600 * 1000;
	c->log.retention_bytes = -1;
	c->log.segment_bytes = 1LL << 30;
	c->log.segment_ms = 7LL * 24 * 3600 * 1000;
	c->log.max_message_bytes = 1048588;
	c->log.index_interval_bytes = 4096;
	c->log.timestamp_type = 0;
	c->retention_check_interval_ms = 300000;
	c->trash_retention_ms = 86400000;
	c->scrub_bytes_per_sec = 4194304;
	c->cleaner_enable = 1;
	c->cleaner_dedupe_bytes = 134217728;
	c->cleaner_io_bytes_per_sec = INT64_MAX;
	c->cleaner_backoff_ms = 15000;
	c->socket_request_max_bytes = 104857600;
	c->connections_max_idle_ms = 600000;
	c->num_io_threads = 8;
	c->num_flush_threads = 2;
	c->connection_max_buffered_bytes = 64LL << 20;
	c->queued_max_request_bytes = 512LL << 20;
	c->request_min_bytes_per_sec = 16384;
	c->max_connections = INT32_MAX;
	c->max_connections_per_ip = INT32_MAX;
	c->shutdown_timeout_ms = 30000;
	c->broker_heartbeat_interval_ms = 250;
	c->broker_session_timeout_ms = 3000;
	c->cluster_stall_timeout_ms = 0; /* from the session (kcl_stall_bound_ms) */
	c->cluster_poll_ms = 100;
	c->drain_timeout_ms = 30000;
	c->group_initial_rebalance_delay_ms = 3000;
	c->group_min_session_timeout_ms = 6000;
	c->group_max_session_timeout_ms = 1800000;
	c->group_max_size = INT32_MAX;
	c->offsets_retention_minutes = 10080;
	c->transaction_max_timeout_ms = 900000;
	c->transactional_id_expiration_ms = 604800000;
	c->acl_poll_ms = 1000;
}

static int parse_i64(const char *s, int64_t *v)
{
	if (!*s)
		return -1;
	char *end;
	errno = 0;
	long long x = strtoll(s, &end, 10);
	if (errno || *end || end == s || isspace((unsigned char)*s))
		return -1;
	*v = x;
	return 0;
}

int kb_parse_hostport(const char *s, char *host, size_t hostlen, int32_t *port)
{
	if (strncmp(s, "PLAINTEXT://", 12) == 0)
		s += 12;
	else if (strstr(s, "://"))
		return -1; /* SSL, SASL: not supported */
	if (strchr(s, ','))
		return -1;
	const char *colon = strrchr(s, ':');
	if (!colon)
		return -1;
	size_t hl = (size_t)(colon - s);
	const char *h = s;
	if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') { /* [::1]:9092 */
		h++;
		hl -= 2;
	}
	if (hl >= hostlen)
		return -1;
	for (size_t i = 0; i < hl; i++)
		if (!(isalnum((unsigned char)h[i]) || strchr(".-_:", h[i])))
			return -1;
	int64_t p;
	if (parse_i64(colon + 1, &p) || p < 0 || p > 65535)
		return -1;
	memcpy(host, h, hl);
	host[hl] = 0;
	*port = (int32_t)p;
	return 0;
}

static int bad(char *err, size_t errlen, const char *key, const char *value, const char *why)
{
	snprintf(err, errlen, "%s: invalid value '%s' (%s)", key, value, why);
	return -EINVAL;
}

/* sasl.enabled.mechanisms: a comma list, each once, stored without blanks. */
static int sasl_mechs(char *dst, const char *value, char *err, size_t errlen, const char *key)
{
	static const char *const known[] = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"};
	char out[256] = "";
	int seen[3] = {0, 0, 0};
	for (const char *p = value;;) {
		while (*p == ' ')
			p++;
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		while (n && p[n - 1] == ' ')
			n--;
		int i;
		for (i = 0; i < 3; i++)
			if (strlen(known[i]) == n && strncmp(known[i], p, n) == 0)
				break;
		if (i == 3) {
			char why[160];
			int other = (n == 6 && strncmp(p, "GSSAPI", 6) == 0) || (n == 11 && strncmp(p, "OAUTHBEARER", 11) == 0);
			snprintf(why, sizeof(why), "'%.*s' %s; kaas offers PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512",
				 (int)(n > 40 ? 40 : n), p, other ? "is not supported" : "is not a SASL mechanism");
			return bad(err, errlen, key, value, why);
		}
		if (seen[i]++)
			return bad(err, errlen, key, value, "a mechanism named twice");
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", *out ? "," : "", known[i]);
		if (!e)
			break;
		p = e + 1;
	}
	snprintf(dst, 256, "%s", out);
	return 0;
}

/* The SASL settings Kafka takes per listener; ssl.* are all per listener. */
static const char *const sasl_listener_keys[] = {"sasl.enabled.mechanisms", "sasl.server.max.receive.size",
						  "connections.max.reauth.ms"};
static const char *const mech_prefix[3] = {"plain.", "scram-sha-256.", "scram-sha-512."};

/* 1 for a SASL key (including <mechanism>.connections.max.reauth.ms), 0 for
 * an ssl.* one, -1 for one kaas does not take per listener. */
static int listener_key_kind(const char *sub)
{
	if (strncmp(sub, "ssl.", 4) == 0)
		return 0;
	for (size_t i = 0; i < sizeof(sasl_listener_keys) / sizeof(sasl_listener_keys[0]); i++)
		if (!strcmp(sub, sasl_listener_keys[i]))
			return 1;
	for (int m = 0; m < 3; m++)
		if (!strncasecmp(sub, mech_prefix[m], strlen(mech_prefix[m])) &&
		    !strcmp(sub + strlen(mech_prefix[m]), "connections.max.reauth.ms"))
			return 1;
	return -1;
}

/* One per-listener key (as it follows listener.name.<name>.) applied to c;
 * errors name full, the key as written. */
static int set_listener_key(kb_config *c, const char *full, const char *sub, const char *value, char *err,
			    size_t errlen)
{
	char sub_err[512];
	const char *named = sub; /* the key kb_config_set's error begins with */
	int rc;
	for (int m = 0; m < 3; m++)
		if (!strncasecmp(sub, mech_prefix[m], strlen(mech_prefix[m]))) {
			named = "connections.max.reauth.ms";
			/* KIP-368's <mechanism>.connections.max.reauth.ms: the
			 * bounds of connections.max.reauth.ms */
			int64_t keep = c->connections_max_reauth_ms;
			rc = kb_config_set(c, "connections.max.reauth.ms", value, sub_err, sizeof(sub_err));
			if (!rc)
				c->sasl_mech_reauth_ms[m] = c->connections_max_reauth_ms;
			c->connections_max_reauth_ms = keep;
			goto out;
		}
	rc = kb_config_set(c, sub, value, sub_err, sizeof(sub_err));
out:
	if (rc) {
		/* "sub: invalid value ..." becomes "full: invalid value ..." */
		const char *why = sub_err;
		size_t nl = strlen(named);
		if (!strncmp(sub_err, named, nl) && !strncmp(sub_err + nl, ": ", 2))
			why = sub_err + nl + 2;
		snprintf(err, errlen, "%s: %s", full, why);
		return rc == -ENOENT ? -EINVAL : rc;
	}
	return 0;
}

/* listener.name.<name>.<key>=value: validated against a scratch copy, kept
 * for kb_config_for_listener. */
static int set_listener_override(kb_config *c, const char *key, const char *value, char *err,
				 size_t errlen)
{
	const char *name = key + strlen("listener.name."), *dot = strchr(name, '.');
	size_t nlen = dot ? (size_t)(dot - name) : 0;
	const char *sub = dot ? dot + 1 : "";
	if (nlen == 0 || nlen >= sizeof(c->lover[0].listener))
		return bad(err, errlen, key, value, "expected listener.name.<listener>.<setting>");
	for (size_t i = 0; i < nlen; i++)
		if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != '-')
			return bad(err, errlen, key, value, "the listener name has a character a listener name cannot");
	if (listener_key_kind(sub) < 0) {
		snprintf(err, errlen, "%s: only ssl.* settings, sasl.enabled.mechanisms, sasl.server.max.receive.size "
			 "and [<mechanism>.]connections.max.reauth.ms can be given per listener", key);
		return -EINVAL;
	}
	if (strlen(sub) >= sizeof(c->lover[0].key) || strlen(value) >= sizeof(c->lover[0].value))
		return bad(err, errlen, key, value, "too long");
	kb_config *tmp = malloc(sizeof(*tmp));
	if (!tmp) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	kb_config_defaults(tmp);
	int rc = set_listener_key(tmp, key, sub, value, err, errlen);
	free(tmp);
	if (rc)
		return rc;
	int i;
	for (i = 0; i < c->nlover; i++)
		if (strlen(c->lover[i].listener) == nlen && !strncasecmp(c->lover[i].listener, name, nlen) &&
		    !strcasecmp(c->lover[i].key, sub))
			break;
	if (i == c->nlover) {
		if (c->nlover == KB_LISTENER_OVERRIDES)
			return bad(err, errlen, key, value, "more per-listener settings than kaas keeps (32)");
		c->nlover++;
	}
	snprintf(c->lover[i].listener, sizeof(c->lover[i].listener), "%.*s", (int)nlen, name);
	snprintf(c->lover[i].key, sizeof(c->lover[i].key), "%s", sub);
	snprintf(c->lover[i].value, sizeof(c->lover[i].value), "%s", value);
	return 0;
}

int kb_config_for_listener(const kb_config *c, const char *listener, kb_config **out, char *err,
			   size_t errlen)
{
	kb_listener rows[KB_MAX_LISTENERS];
	int n = 0;
	int rc = kb_listeners_resolve(c, rows, &n, err, errlen);
	if (rc)
		return rc;
	for (int i = 0; i < c->nlover; i++) {
		int at = -1;
		for (int j = 0; j < n; j++)
			if (!strcasecmp(rows[j].name, c->lover[i].listener))
				at = j;
		if (at < 0) {
			snprintf(err, errlen, "listener.name.%s.%s: no listener is named %s", c->lover[i].listener,
				 c->lover[i].key, c->lover[i].listener);
			return -EINVAL;
		}
		int p = rows[at].protocol;
		if (listener_key_kind(c->lover[i].key) == 1 && p != KB_SEC_SASL_PLAINTEXT && p != KB_SEC_SASL_SSL) {
			snprintf(err, errlen, "listener.name.%s.%s: listener %s is %s, it has no SASL", c->lover[i].listener,
				 c->lover[i].key, rows[at].name, kb_security_protocol_name(p));
			return -EINVAL;
		}
	}
	kb_config *lc = malloc(sizeof(*lc));
	if (!lc) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	*lc = *c;
	for (int i = 0; i < c->nlover; i++) {
		if (strcasecmp(c->lover[i].listener, listener))
			continue;
		rc = set_listener_key(lc, c->lover[i].key, c->lover[i].key, c->lover[i].value, err, errlen);
		KAAS_ASSERT(rc == 0); /* validated when it was set */
		if (rc) {
			free(lc);
			return rc;
		}
	}
	*out = lc;
	return 0;
}

int kb_config_set(kb_config *c, const char *key, const char *value, char *err, size_t errlen)
{
	const kb_config_key *k;
	if (strncmp(key, "listener.name.", 14) == 0)
		return set_listener_override(c, key, value, err, errlen);
	for (k = kb_config_keys; k->key; k++)
		if (strcmp(k->key, key) == 0)
			break;
	if (!k->key) {
		snprintf(err, errlen, "%s: unknown setting", key);
		return -ENOENT;
	}
	char *base = (char *)c;
	char why[96];
	int64_t v = 0;
	switch (k->type) {
	case KCFG_I16:
	case KCFG_I32:
	case KCFG_I64:
	case KCFG_MINUTES:
	case KCFG_HOURS:
		if (parse_i64(value, &v))
			return bad(err, errlen, key, value, "not an integer");
		if (v < k->min || v > k->max) {
			snprintf(why, sizeof(why), "must be between %" PRId64 " and %" PRId64, k->min, k->max);
			return bad(err, errlen, key, value, why);
		}
		if (v == 0 && k->off == OFF(connections_max_idle_ms))
			return bad(err, errlen, key, value, "0 would close every connection; -1 disables the timeout");
		if (v >= 0 && v < 65536 && k->off == OFF(queued_max_request_bytes))
			return bad(err, errlen, key, value, "must be -1 (unbounded) or at least 65536");
		if (k->type == KCFG_I16)
			*(int16_t *)(base + k->off) = (int16_t)v;
		else if (k->type == KCFG_I32)
			*(int32_t *)(base + k->off) = (int32_t)v;
		else if (k->type == KCFG_I64)
			*(int64_t *)(base + k->off) = v;
		else
			*(int64_t *)(base + k->off) =
				v < 0 ? -1 : v * (k->type == KCFG_MINUTES ? 60000LL : 3600000LL);
		return 0;
	case KCFG_BOOL:
		if (strcmp(value, "true") == 0)
			*(int *)(base + k->off) = 1;
		else if (strcmp(value, "false") == 0)
			*(int *)(base + k->off) = 0;
		else
			return bad(err, errlen, key, value, "must be true or false");
		return 0;
	case KCFG_TSTYPE:
		if (strcmp(value, "CreateTime") == 0)
			*(int32_t *)(base + k->off) = 0;
		else if (strcmp(value, "LogAppendTime") == 0)
			*(int32_t *)(base + k->off) = 1;
		else
			return bad(err, errlen, key, value, "must be CreateTime or LogAppendTime");
		return 0;
	case KCFG_PATH: {
		char *dst = base + k->off;
		if (!*value)
			return bad(err, errlen, key, value, "empty");
		if (strchr(value, ','))
			return bad(err, errlen, key, value, "one directory only: kaas keeps all data on one shared volume");
		if (strlen(value) >= sizeof(c->data_url))
			return bad(err, errlen, key, value, "too long");
		snprintf(dst, sizeof(c->data_url), "%s", value);
		return 0;
	}
	case KCFG_LISTENER: {
		if (k->off == OFF(metrics_host)) {
			char host[256], colon[16];
			int32_t port;
			const char *hp = value;
			if (strlen(value) < 8 && value[0] && !strchr(value, ':')) {
				snprintf(colon, sizeof(colon), ":%s", value); /* a port alone */
				hp = colon;
			}
			if (kb_parse_hostport(hp, host, sizeof(host), &port))
				return bad(err, errlen, key, value, "expected PLAINTEXT://HOST:PORT or HOST:PORT");
			snprintf(c->metrics_host, sizeof(c->metrics_host), "%s", host[0] ? host : "127.0.0.1");
			c->metrics_port = port;
			return 0;
		}
		kb_listener l[KB_MAX_LISTENERS];
		int n = 0;
		char why[256];
		if (strlen(value) >= KB_CFG_STR)
			return bad(err, errlen, key, value, "too long");
		if (kb__listener_list_parse(value, l, &n, why, sizeof(why)))
			return bad(err, errlen, key, value, why);
		if (k->off == OFF(listeners)) {
			snprintf(c->listen_host, sizeof(c->listen_host), "%s", l[0].host);
			c->listen_port = l[0].port;
		} else {
			for (int i = 0; i < n; i++)
				if (l[i].port == 0)
					return bad(err, errlen, key, value, "an advertised port cannot be 0");
			snprintf(c->advertise_host, sizeof(c->advertise_host), "%s", l[0].host);
			c->advertise_port = l[0].port;
		}
		snprintf(base + k->off, KB_CFG_STR, "%s", value);
		return 0;
	}
	case KCFG_STR:
		if (strlen(value) >= KB_CFG_STR)
			return bad(err, errlen, key, value, "too long");
		snprintf(base + k->off, KB_CFG_STR, "%s", value);
		return 0;
	case KCFG_SSL_AUTH:
		if (strcmp(value, "required") == 0)
			*(int32_t *)(base + k->off) = KB_SSL_AUTH_REQUIRED;
		else if (strcmp(value, "requested") == 0)
			*(int32_t *)(base + k->off) = KB_SSL_AUTH_REQUESTED;
		else if (strcmp(value, "none") == 0)
			*(int32_t *)(base + k->off) = KB_SSL_AUTH_NONE;
		else
			return bad(err, errlen, key, value, "must be required, requested or none");
		return 0;
	case KCFG_AUTHORIZER:
		if (*value && strcmp(value, "kaas") != 0 &&
		    strcmp(value, "org.apache.kafka.metadata.authorizer.StandardAuthorizer") != 0 &&
		    strcmp(value, "kafka.security.authorizer.AclAuthorizer") != 0)
			return bad(err, errlen, key, value, "kaas cannot load a Java class: use kaas (or "
				   "Kafka's StandardAuthorizer or AclAuthorizer, which mean the same), or leave it empty");
		snprintf(base + k->off, KB_CFG_STR, "%s", value);
		return 0;
	case KCFG_SASL_MECHS:
		return sasl_mechs(base + k->off, value, err, errlen, key);
	case KCFG_SSL_RULES: {
		char why[512];
		if (strlen(value) >= KB_CFG_STR)
			return bad(err, errlen, key, value, "too long");
		int rc = kb_sslmap_parse(value, NULL, why, sizeof(why));
		if (rc) {
			snprintf(err, errlen, "%s: %s", key, why);
			return rc;
		}
		snprintf(base + k->off, KB_CFG_STR, "%s", value);
		return 0;
	}
	case KCFG_CLEANUP: {
		/* Kafka's list syntax, as the topic-level cleanup.policy takes it. */
		int del = 0, comp = 0;
		const char *p = value;
		while (*p) {
			const char *e = strchr(p, ',');
			size_t n = e ? (size_t)(e - p) : strlen(p);
			while (n && isspace((unsigned char)*p)) {
				p++;
				n--;
			}
			while (n && isspace((unsigned char)p[n - 1]))
				n--;
			if (n == 6 && memcmp(p, "delete", 6) == 0)
				del = 1;
			else if (n == 7 && memcmp(p, "compact", 7) == 0)
				comp = 1;
			else
				return bad(err, errlen, key, value, "must be delete, compact or compact,delete");
			if (!e)
				break;
			p = e + 1;
		}
		if (!del && !comp)
			return bad(err, errlen, key, value, "must be delete, compact or compact,delete");
		*(int32_t *)(base + k->off) = comp ? (del ? KS_CLEANUP_COMPACT_DELETE : KS_CLEANUP_COMPACT)
						   : KS_CLEANUP_DELETE;
		return 0;
	}
	case KCFG_COMPRESSION:
		/* Exactly Kafka's names, as the topic-level compression.type takes them. */
		for (int i = 0; kb_compression_names[i]; i++)
			if (strcmp(value, kb_compression_names[i]) == 0) {
				*(int32_t *)(base + k->off) = i;
				return 0;
			}
		return bad(err, errlen, key, value,
			   "must be one of: uncompressed, zstd, lz4, snappy, gzip, producer");
	case KCFG_STORETYPE:
		if (strcasecmp(value, "PEM") == 0) {
			snprintf(base + k->off, 16, "PEM");
			return 0;
		}
		if (strcasecmp(value, "JKS") == 0 || strcasecmp(value, "PKCS12") == 0)
			return bad(err, errlen, key, value, "kaas reads PEM files only: convert the store "
				   "(keytool -importkeystore to PKCS12, then openssl pkcs12 -nodes) and set PEM");
		return bad(err, errlen, key, value, "must be PEM");
	}
	snprintf(err, errlen, "%s: unhandled setting type", key);
	return -EINVAL;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	char *e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

int kb_config_load_file(kb_config *c, const char *path, char *err, size_t errlen,
			  void (*warn)(const char *msg))
{
	FILE *f = fopen(path, "r");
	if (!f) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot open the settings file: %s", path, strerror(e));
		return -e;
	}
	/* fopen(3) opens a directory; reading it would then fail and look like
	 * an empty file. */
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "%s: is a directory, not a settings file (key=value lines)", path);
		fclose(f);
		return -EISDIR;
	}
	char line[8192];
	int lineno = 0, rc = 0;
	/* Kafka's precedence whatever the order of the lines: log.retention.ms >
	 * .minutes > .hours, log.roll.ms > log.roll.hours. */
	static const char *const prio[] = {"log.retention.ms", "log.retention.minutes",
					   "log.retention.hours", "log.roll.ms", "log.roll.hours"};
	enum { NPRIO = 5 };
	int have[NPRIO] = {0};
	int64_t pval[NPRIO] = {0};
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			snprintf(err, errlen, "%s:%d: line too long", path, lineno);
			rc = -EINVAL;
			goto out;
		}
		char *s = trim(line);
		if (!*s || *s == '#' || *s == '!')
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			snprintf(err, errlen, "%s:%d: expected key=value", path, lineno);
			rc = -EINVAL;
			goto out;
		}
		*eq = 0;
		char *key = trim(s), *val = trim(eq + 1);
		char e2[512];
		int r = kb_config_set(c, key, val, e2, sizeof(e2));
		if (r == -ENOENT) {
			if (warn) {
				char m[600];
				snprintf(m, sizeof(m), "%s:%d: ignoring unknown setting %s", path, lineno, key);
				warn(m);
			}
			continue;
		}
		if (r) {
			snprintf(err, errlen, "%s:%d: %s", path, lineno, e2);
			rc = r;
			goto out;
		}
		for (int i = 0; i < NPRIO; i++)
			if (strcmp(key, prio[i]) == 0) {
				have[i] = 1;
				pval[i] = i < 3 ? c->log.retention_ms : c->log.segment_ms;
			}
	}
	if (ferror(f)) {
		int e = errno ? errno : EIO;
		snprintf(err, errlen, "%s: reading the settings file after line %d: %s", path, lineno, strerror(e));
		rc = -e;
		goto out;
	}
	for (int i = 2; i >= 0; i--) /* lowest priority first, so the highest is applied last */
		if (have[i])
			c->log.retention_ms = pval[i];
	for (int i = 4; i >= 3; i--)
		if (have[i])
			c->log.segment_ms = pval[i];
out:
	fclose(f);
	return rc;
}

void kb_config_help(FILE *out)
{
	for (const kb_config_key *k = kb_config_keys; k->key; k++)
		fprintf(out, "  %-36s %s [default: %s]\n", k->key, k->help, *k->dflt ? k->dflt : "unset");
}
