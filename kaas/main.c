/*
 * main.c — the kaas broker: configuration, the qualification gate, start-up
 * and the SIGTERM drain.
 *
 * Start-up order: settings (defaults < --config file < KAAS_* environment <
 * flags) -> the descriptor limit raised -> volumes -> qualification gate +
 * self-check -> cluster id -> topic registry -> server (loop, workers,
 * listening socket, not yet serving) -> partition table (knows every
 * partition, leads none) -> join the cluster (kaas/cluster: heartbeat,
 * controller, assignment; the table leads what the assignment gives it) ->
 * coordinator -> serve.  A single broker is a cluster of one that elects
 * itself.  Shutdown (SIGTERM/SIGINT): drain (the controller moves every
 * partition away while this broker keeps answering), stop accepting, finish
 * the requests in flight, relinquish what is left, heartbeat "stopped",
 * exit 0.
 *
 * Exit codes: 0 clean shutdown, 1 runtime failure, 2 bad flag/setting/volume
 * path, 78 (EX_CONFIG) the volume is not qualified.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "qualify/stamp.h"
#include "kaas/cluster/runtime.h"
#include "kaas/cluster/supervise.h"
#include "kaas/coord/coord.h"
#include "kaas/core/acl.h"
#include "kaas/core/broker.h"
#include "kaas/core/config.h"
#include "kaas/core/dyncfg.h"
#include "kaas/core/ptable.h"
#include "kaas/core/users.h"
#include "kaas/net/server.h"
#include "kaas/topics/admin.h"
#include "kaas/topics/topics.h"
#include "kaas/topics/trash.h"
#include "util/log.h"
#include "util/metrics.h"

#define EXIT_USAGE 2
#define EXIT_UNQUALIFIED 78
#define DEFAULT_CLUSTER_SUBDIR "__cluster"

/* Which source last set the data and cluster paths, so that an error about
 * them names where the value came from (a flag, a variable, a file line). */
static char data_src[600] = "--data", cluster_src[600] = "--cluster-dir";

static void usage(FILE *out)
{
	fprintf(out,
		"usage: kaas --data DIR [--cluster-dir DIR] [--listen HOST:PORT] [--advertise HOST:PORT]\n"
		"            [--broker-id N] [--config FILE] [--override KEY=VALUE ...] [--trust-unqualified]\n"
		"       kaas --apis | --help\n"
		"       kaas trash list|empty --data DIR [--older-than DURATION]  (kaas trash --help)\n"
		"       kaas users add|remove|list --cluster-dir DIR [--user NAME]  (kaas users --help)\n"
		"       kaas supervise [--restart] -- FLAGS...  (the broker as a child; kaas supervise --help)\n"
		"\n"
		"A Kafka-compatible broker that keeps every partition on one shared volume.\n"
		"\n"
		"flags (each also a KAAS_* environment variable; flags win over the environment,\n"
		"which wins over the --config file, which wins over the defaults):\n"
		"  --data DIR             the data volume: a path or substrate URL (KAAS_DATA; file: log.dirs)\n"
		"  --cluster-dir DIR      cluster directory (KAAS_CLUSTER_DIR; file: kaas.cluster.dir;\n"
		"                         default DATA/__cluster)\n"
		"  --listen HOST:PORT     listen address (KAAS_LISTEN; file: listeners; default 0.0.0.0:9092;\n"
		"                         port 0 picks a free port, logged at start-up)\n"
		"  --advertise HOST:PORT  endpoint given to clients (KAAS_ADVERTISE; file: advertised.listeners)\n"
		"  --broker-id N          node id (KAAS_BROKER_ID; file: broker.id; default 1)\n"
		"  --config FILE          Kafka-style key=value settings file (KAAS_CONFIG)\n"
		"  --override KEY=VALUE   one setting, as in the file (repeatable)\n"
		"  --trust-unqualified    start even without a passing qualification stamp for the\n"
		"                         volume (KAAS_TRUST_UNQUALIFIED=1): logs a loud warning\n"
		"  --apis                 print the APIs and versions this broker serves, then exit\n"
		"  --help                 this text\n"
		"\n"
		"The broker refuses to start (exit 78) unless CLUSTER/qualification.json holds a passing\n"
		"stamp for the data volume; create one with: kaas-conform check DATA --stamp\n"
		"\n"
		"settings (--config file and --override keys):\n");
	kb_config_help(out);
	fprintf(out, "\nenvironment: KAAS_LOG_LEVEL=error|warn|info|debug (default info)\n"
		     "exit codes: 0 clean shutdown, 1 runtime failure, 2 bad usage or setting, 78 unqualified volume\n");
}

static void print_apis(void)
{
	for (size_t i = 0; i < kn_dispatch_table_len; i++) {
		const kw_api *a = &kn_dispatch_table[i];
		if (!a->handler)
			continue;
		if (a->flexible_from >= 0 && a->flexible_from <= a->max)
			printf("%d %s %d-%d flexible-from %d\n", a->key, a->name, a->min, a->max, a->flexible_from);
		else
			printf("%d %s %d-%d\n", a->key, a->name, a->min, a->max);
	}
}

static void warn_cb(const char *msg) { KLOG_WARN("config", "%s", msg); }

static int die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int die(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "kaas: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(code);
}

/* One flag or environment value, routed through the settings table so every
 * source is validated the same way. */
static void apply(kb_config *cfg, const char *what, const char *key, const char *value)
{
	char err[512];
	if (kb_config_set(cfg, key, value, err, sizeof(err)))
		die(EXIT_USAGE, "%s: %s", what, err);
}

static int is_url(const char *s)
{
	const char *colon = strchr(s, ':'), *slash = strchr(s, '/');
	return colon && (!slash || colon < slash) && strncmp(s, "posix:", 6) != 0;
}

/* DATA/__cluster as a substrate URL: a sub-path of the data URL. */
static void default_cluster_url(const char *data, char *out, size_t len)
{
	const char *q = strchr(data, '?');
	size_t base = q ? (size_t)(q - data) : strlen(data);
	while (base > 0 && data[base - 1] == '/' && base > 1)
		base--;
	if (snprintf(out, len, "%.*s/%s%s", (int)base, data, DEFAULT_CLUSTER_SUBDIR, q ? q : "") >= (int)len)
		die(EXIT_USAGE, "%s %s: URL too long", data_src, data);
}

static int load_cluster_id(kb_broker *b)
{
	/* The first broker to start on a cluster directory names it (O_EXCL). */
	uint8_t u[16];
	FILE *r = fopen("/dev/urandom", "r");
	if (!r || fread(u, 1, sizeof(u), r) != sizeof(u)) {
		if (r)
			fclose(r);
		return -EIO;
	}
	fclose(r);
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char id[32];
	int k = 0;
	uint32_t acc = 0;
	int bits = 0;
	for (int i = 0; i < 16; i++) {
		acc = (acc << 8) | u[i];
		bits += 8;
		while (bits >= 6) {
			id[k++] = b64[(acc >> (bits - 6)) & 63];
			bits -= 6;
		}
	}
	if (bits > 0)
		id[k++] = b64[(acc << (6 - bits)) & 63];
	id[k] = 0;
	char doc[128];
	snprintf(doc, sizeof(doc), "{\"cluster_id\": \"%s\"}\n", id);
	int rc = sub_create_excl(b->cluster, "cluster-id.json", doc, strlen(doc));
	if (rc && rc != -EEXIST)
		return rc;
	for (int attempt = 0; attempt < 50; attempt++) {
		char *buf = NULL;
		size_t len = 0;
		rc = sub_read_file(b->cluster, "cluster-id.json", 4096, &buf, &len);
		if (rc)
			return rc;
		json_t *j = json_loadb(buf, len, 0, NULL);
		free(buf);
		const char *s = json_string_value(json_object_get(j, "cluster_id"));
		if (s && *s && strlen(s) < sizeof(b->cluster_id)) {
			snprintf(b->cluster_id, sizeof(b->cluster_id), "%s", s);
			json_decref(j);
			return 0;
		}
		json_decref(j);
		usleep(20000); /* another broker's claim is still being written */
	}
	return -EBADMSG;
}

static void gate(kb_broker *b, int explicit_cluster)
{
	sub_identity id;
	char why[512];
	int rc = sub_identity_of(b->data, &id);
	if (rc)
		snprintf(why, sizeof(why), "cannot identify the data volume: %s", sub_strerror(rc));
	else
		rc = kq_stamp_verify(b->cluster, &id, why, sizeof(why));
	if (rc) {
		if (!b->cfg.trust_unqualified) {
			fprintf(stderr,
				"kaas: refusing to start: the data volume %s is not qualified (%s).\n"
				"kaas: qualify it first:  kaas-conform check %s --stamp%s%s\n"
				"kaas: (or start with --trust-unqualified at your own risk)\n",
				b->cfg.data_url, why, b->cfg.data_url, explicit_cluster ? " --cluster-dir " : "",
				explicit_cluster ? b->cfg.cluster_url : "");
			exit(EXIT_UNQUALIFIED);
		}
		KLOG_WARN("gate", "*******************************************************************");
		KLOG_WARN("gate", "* --trust-unqualified: starting on a volume WITHOUT a passing     *");
		KLOG_WARN("gate", "* qualification (%s).", why);
		KLOG_WARN("gate", "* Acknowledged writes may be lost or corrupted if the filesystem  *");
		KLOG_WARN("gate", "* breaks the substrate contract. Run: kaas-conform check %s --stamp", b->cfg.data_url);
		KLOG_WARN("gate", "*******************************************************************");
	} else {
		KLOG_INFO("gate", "the data volume has a passing qualification stamp");
	}
	/* A cluster directory on another volume is qualified too (its layers). */
	if (explicit_cluster && !rc && (rc = kq_stamp_verify_cluster(b->cluster, &id, why, sizeof(why)))) {
		if (!b->cfg.trust_unqualified) {
			fprintf(stderr, "kaas: refusing to start: the cluster directory %s is not qualified (%s).\n"
					"kaas: qualify it:  kaas-conform check %s --cluster-dir %s --stamp\n",
				b->cfg.cluster_url, why, b->cfg.data_url, b->cfg.cluster_url);
			exit(EXIT_UNQUALIFIED);
		}
		KLOG_WARN("gate", "--trust-unqualified: the cluster directory is not qualified (%s)", why);
	}
	/* Every start: a sub-second probe of O_EXCL and rename on the volume(s). */
	rc = kq_selfcheck(b->cluster, "", why, sizeof(why));
	if (!rc && explicit_cluster)
		rc = kq_selfcheck(b->data, "", why, sizeof(why));
	if (rc) {
		if (!b->cfg.trust_unqualified) {
			fprintf(stderr, "kaas: refusing to start: the start-up self-check failed: %s\n"
					"kaas: re-qualify the volume: kaas-conform check %s --stamp%s%s\n",
				why, b->cfg.data_url, explicit_cluster ? " --cluster-dir " : "",
				explicit_cluster ? b->cfg.cluster_url : "");
			exit(EXIT_UNQUALIFIED);
		}
		KLOG_WARN("gate", "start-up self-check FAILED (%s); continuing because of --trust-unqualified", why);
	} else {
		KLOG_INFO("gate", "start-up self-check passed (O_EXCL, rename)");
	}
}

enum { O_DATA = 256, O_CLUSTER, O_LISTEN, O_ADVERTISE, O_ID, O_CONFIG, O_OVERRIDE, O_TRUST, O_APIS, O_HELP };
static const struct option opts[] = {
	{"data", required_argument, 0, O_DATA},
	{"cluster-dir", required_argument, 0, O_CLUSTER},
	{"listen", required_argument, 0, O_LISTEN},
	{"advertise", required_argument, 0, O_ADVERTISE},
	{"broker-id", required_argument, 0, O_ID},
	{"config", required_argument, 0, O_CONFIG},
	{"override", required_argument, 0, O_OVERRIDE},
	{"trust-unqualified", no_argument, 0, O_TRUST},
	{"apis", no_argument, 0, O_APIS},
	{"help", no_argument, 0, O_HELP},
	{0, 0, 0, 0},
};


static void note_source(const kb_config *cfg, const char *data_was, const char *cluster_was, const char *what,
			const char *what_cluster)
{
	if (strcmp(cfg->data_url, data_was) != 0)
		snprintf(data_src, sizeof(data_src), "%s", what);
	if (strcmp(cfg->cluster_url, cluster_was) != 0)
		snprintf(cluster_src, sizeof(cluster_src), "%s", what_cluster);
}

/* Where the settings file came from, for its error messages. */
typedef struct config_source {
	const char *path; /* NULL: none */
	const char *what; /* "--config" or "KAAS_CONFIG" */
} config_source;

/* Pass 1 over the flags: --config, --help, --apis and syntax errors. */
static config_source first_pass(int argc, char **argv)
{
	config_source src = {getenv("KAAS_CONFIG"), "KAAS_CONFIG"};
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_CONFIG:
			src = (config_source){optarg, "--config"};
			break;
		case O_HELP:
			usage(stdout);
			exit(0);
		case O_APIS:
			print_apis();
			exit(0);
		case '?':
			if (optopt)
				die(EXIT_USAGE, "%s needs a value (see --help)", argv[optind - 1]);
			die(EXIT_USAGE, "unknown option %s (see --help)", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die(EXIT_USAGE, "unexpected argument '%s' (see --help)", argv[optind]);
	return src;
}

static void load_config_file(kb_config *cfg, const config_source *src)
{
	char err[1024];
	if (!src->path)
		return;
	if (!*src->path)
		die(EXIT_USAGE, "%s: an empty file name", src->what);
	if (kb_config_load_file(cfg, src->path, err, sizeof(err), warn_cb))
		die(EXIT_USAGE, "%s %s", src->what, err);
	char d[600], c[600];
	snprintf(d, sizeof(d), "log.dirs in %s", src->path);
	snprintf(c, sizeof(c), "kaas.cluster.dir in %s", src->path);
	note_source(cfg, "", "", d, c);
}

/* The KAAS_* environment, between the file and the flags. */
static void apply_environment(kb_config *cfg)
{
	static const struct {
		const char *env, *key;
	} envs[] = {
		{"KAAS_DATA", "log.dirs"},          {"KAAS_CLUSTER_DIR", "kaas.cluster.dir"},
		{"KAAS_LISTEN", "listeners"},       {"KAAS_ADVERTISE", "advertised.listeners"},
		{"KAAS_BROKER_ID", "broker.id"},
	};
	for (size_t i = 0; i < sizeof(envs) / sizeof(envs[0]); i++) {
		const char *v = getenv(envs[i].env);
		if (v && *v)
			apply(cfg, envs[i].env, envs[i].key, v);
	}
	if (getenv("KAAS_DATA") && *getenv("KAAS_DATA"))
		snprintf(data_src, sizeof(data_src), "KAAS_DATA");
	if (getenv("KAAS_CLUSTER_DIR") && *getenv("KAAS_CLUSTER_DIR"))
		snprintf(cluster_src, sizeof(cluster_src), "KAAS_CLUSTER_DIR");
	const char *tu = getenv("KAAS_TRUST_UNQUALIFIED");
	if (tu && *tu) {
		if (strcmp(tu, "1") == 0 || strcmp(tu, "true") == 0)
			cfg->trust_unqualified = 1;
		else if (strcmp(tu, "0") != 0 && strcmp(tu, "false") != 0)
			die(EXIT_USAGE, "KAAS_TRUST_UNQUALIFIED: invalid value '%s' (use 1 or 0)", tu);
	}
	const char *ll = getenv("KAAS_LOG_LEVEL"); /* applied by ku_log_init_from_env() */
	if (ll && *ll && strcmp(ll, "error") != 0 && strcmp(ll, "warn") != 0 && strcmp(ll, "info") != 0 &&
	    strcmp(ll, "debug") != 0)
		die(EXIT_USAGE, "KAAS_LOG_LEVEL: invalid value '%s' (use error, warn, info or debug)", ll);
}

/* Pass 2: the flags, which win over everything else. */
static void apply_flags(kb_config *cfg, int argc, char **argv)
{
	char err[1024];
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_DATA:
			apply(cfg, "--data", "log.dirs", optarg);
			snprintf(data_src, sizeof(data_src), "--data");
			break;
		case O_CLUSTER:
			apply(cfg, "--cluster-dir", "kaas.cluster.dir", optarg);
			snprintf(cluster_src, sizeof(cluster_src), "--cluster-dir");
			break;
		case O_LISTEN:
			apply(cfg, "--listen", "listeners", optarg);
			break;
		case O_ADVERTISE:
			apply(cfg, "--advertise", "advertised.listeners", optarg);
			break;
		case O_ID:
			apply(cfg, "--broker-id", "broker.id", optarg);
			break;
		case O_OVERRIDE: {
			char data_was[sizeof(cfg->data_url)], cluster_was[sizeof(cfg->cluster_url)];
			snprintf(data_was, sizeof(data_was), "%s", cfg->data_url);
			snprintf(cluster_was, sizeof(cluster_was), "%s", cfg->cluster_url);
			char kv[8192];
			snprintf(kv, sizeof(kv), "%s", optarg);
			char *eq = strchr(kv, '=');
			if (!eq)
				die(EXIT_USAGE, "--override %s: expected KEY=VALUE", optarg);
			*eq = 0;
			if (kb_config_set(cfg, kv, eq + 1, err, sizeof(err)))
				die(EXIT_USAGE, "--override: %s", err);
			note_source(cfg, data_was, cluster_was, "--override log.dirs", "--override kaas.cluster.dir");
			break;
		}
		case O_TRUST:
			cfg->trust_unqualified = 1;
			break;
		}
	}
}

/* Settings that are valid alone but not together, or missing. */
static void check_settings(const kb_config *cfg, const config_source *src)
{
	if (!cfg->data_url[0]) {
		if (src->path)
			die(EXIT_USAGE, "--data is required (or KAAS_DATA); the settings file %s (%s) has no log.dirs; "
				       "see --help", src->path, src->what);
		die(EXIT_USAGE, "--data is required (or KAAS_DATA, or log.dirs in the --config file); see --help");
	}
	if (cfg->group_min_session_timeout_ms > cfg->group_max_session_timeout_ms)
		die(EXIT_USAGE, "group.min.session.timeout.ms is larger than group.max.session.timeout.ms");
}

/* Each led partition holds descriptors (its log and indexes), each
 * connection one: the soft limit a shell hands out (often 1,024) is far too
 * low, and the hard limit is the administrator's real answer. */
static void raise_descriptor_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl)) {
		KLOG_WARN("kaas", "descriptors: getrlimit(RLIMIT_NOFILE): %s; keeping the limit as it is",
			  strerror(errno));
		return;
	}
	rlim_t old = rl.rlim_cur;
	if (rl.rlim_cur >= rl.rlim_max) {
		KLOG_INFO("kaas", "descriptors: limit %llu (already the hard limit)", (unsigned long long)old);
		return;
	}
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		KLOG_WARN("kaas", "descriptors: raising the soft limit from %llu to the hard limit %llu failed: %s",
			  (unsigned long long)old, (unsigned long long)rl.rlim_max, strerror(errno));
		return;
	}
	KLOG_INFO("kaas", "descriptors: soft limit raised from %llu to the hard limit %llu",
		  (unsigned long long)old, (unsigned long long)rl.rlim_cur);
}

/* The data volume and the cluster directory (DATA/__cluster by default);
 * returns whether the cluster directory was given explicitly. */
static int open_volumes(kb_broker *b)
{
	kb_config *cfg = &b->cfg;
	char err[1024];
	int explicit_cluster = cfg->cluster_url[0] != 0;
	int rc = sub_open_url(cfg->data_url, &b->data, err, sizeof(err));
	if (rc)
		die(EXIT_USAGE, "%s %s: %s", data_src, cfg->data_url, err);
	if (!explicit_cluster) {
		if (is_url(cfg->data_url))
			default_cluster_url(cfg->data_url, cfg->cluster_url, sizeof(cfg->cluster_url));
		else if (snprintf(cfg->cluster_url, sizeof(cfg->cluster_url), "%s/%s", cfg->data_url,
				  DEFAULT_CLUSTER_SUBDIR) >= (int)sizeof(cfg->cluster_url))
			die(EXIT_USAGE, "%s %s: path too long", data_src, cfg->data_url);
		rc = sub_mkdirs(b->data, DEFAULT_CLUSTER_SUBDIR, 0755);
		if (rc)
			die(1, "creating %s: %s", cfg->cluster_url, sub_strerror(rc));
	}
	rc = sub_open_url(cfg->cluster_url, &b->cluster, err, sizeof(err));
	if (rc)
		die(EXIT_USAGE, "%s %s: %s", explicit_cluster ? cluster_src : "the cluster directory (default DATA/__cluster)",
		    cfg->cluster_url, err);
	return explicit_cluster;
}

/* The topic registry and the (still empty) partition table. */
static void open_registry(kb_broker *b, int explicit_cluster)
{
	kb_config *cfg = &b->cfg;
	kt_topics_options to;
	kt_topics_options_init(&to);
	to.cluster = b->cluster;
	to.data = b->data;
	to.defaults = cfg->log;
	to.num_partitions = cfg->num_partitions;
	if (b->dyn) { /* the dynamic values in force win over the static ones */
		to.defaults.retention_ms = kb_broker_dyn(b, KB_DYN_LOG_RETENTION_MS);
		to.defaults.retention_bytes = kb_broker_dyn(b, KB_DYN_LOG_RETENTION_BYTES);
		to.defaults.segment_bytes = kb_broker_dyn(b, KB_DYN_LOG_SEGMENT_BYTES);
		to.defaults.segment_ms = kb_broker_dyn(b, KB_DYN_LOG_ROLL_MS);
		to.defaults.max_message_bytes = (int32_t)kb_broker_dyn(b, KB_DYN_MESSAGE_MAX_BYTES);
		to.defaults.index_interval_bytes = (int32_t)kb_broker_dyn(b, KB_DYN_LOG_INDEX_INTERVAL_BYTES);
		to.defaults.timestamp_type = (int32_t)kb_broker_dyn(b, KB_DYN_LOG_MESSAGE_TIMESTAMP_TYPE);
		to.defaults.cleanup_compact = (int32_t)kb_broker_dyn(b, KB_DYN_LOG_CLEANUP_POLICY);
		to.defaults.compression_type = (int32_t)kb_broker_dyn(b, KB_DYN_COMPRESSION_TYPE);
		to.num_partitions = (int32_t)kb_broker_dyn(b, KB_DYN_NUM_PARTITIONS);
	}
	to.default_replication_factor = cfg->default_replication_factor;
	to.trash_retention_ms = cfg->trash_retention_ms;
	to.reserved_name = explicit_cluster ? NULL : DEFAULT_CLUSTER_SUBDIR;
	/* A topic created through another broker reaches the controller (which
	 * assigns it) and every broker through this re-read: one listing a
	 * second keeps "created" to "led" short. */
	to.refresh_ms = 1000;
	/* Deletes are finished by the controller once every broker closed the
	 * partitions; DeleteTopics and a re-create wait for that as long as a
	 * take-over may (a peer's lease running out). */
	to.controller_deletes = 1;
	to.delete_wait_ms = 2 * cfg->broker_session_timeout_ms;
	kt_topics_ptable_hooks(b, &to.hooks);
	int rc = kt_topics_open(&to, &b->topics);
	if (rc)
		die(1, "opening the topic registry in %s: %s", cfg->cluster_url, sub_strerror(rc));
	rc = kb_ptable_create(b, &b->parts);
	if (rc)
		die(1, "partition table: %s", strerror(-rc));
	kb_ptable_set_driven(b->parts); /* it leads what the cluster's assignment says */
	rc = kt_topics_broker_upkeep(b);
	if (rc)
		die(1, "topic registry upkeep: %s", strerror(-rc));
}

/* The ACL authorizer, when authorizer.class.name asks for one. */
static void open_authorizer(kb_broker *b)
{
	kb_config *cfg = &b->cfg;
	if (!cfg->authorizer_class_name[0]) {
		if (cfg->super_users[0])
			KLOG_WARN("kaas", "super.users is set but authorizer.class.name is not: no authorizer, "
					  "every request is allowed");
		return;
	}
	kb_acl_options o = {b->cluster, cfg->super_users, cfg->allow_everyone_if_no_acl, cfg->acl_poll_ms, 0};
	char err[512];
	int rc = kb_acl_open(&o, &b->acl, err, sizeof(err));
	if (rc == -EINVAL)
		die(EXIT_USAGE, "%s", err);
	if (rc)
		die(1, "the authorizer: %s", strerror(-rc));
}

/* b->coord_settled: not before the coordinator is open. */
static int coord_settled(void *arg)
{
	kb_broker *b = arg;
	kg_coord *c = __atomic_load_n(&b->coord, __ATOMIC_ACQUIRE);
	return c && kg_coord_settled(c);
}

/* Every partition of every registered topic, taken over at a fresh epoch. */
static void start_partitions(kb_broker *b)
{
	kt_topic_info *list = NULL;
	size_t ntopics = 0;
	int rc = kt_topics_list(b->topics, &list, &ntopics);
	if (rc)
		die(1, "listing topics: %s", strerror(-rc));
	kb_topic_desc *descs = calloc(ntopics ? ntopics : 1, sizeof(*descs));
	if (!descs)
		die(1, "out of memory listing %zu topic(s)", ntopics);
	int64_t nparts = 0;
	for (size_t i = 0; i < ntopics; i++) {
		kt_topics_prepare_dir(b->topics, &list[i]);
		descs[i] = (kb_topic_desc){list[i].name, list[i].id, list[i].partitions, list[i].cfg};
		nparts += list[i].partitions;
	}
	rc = kb_ptable_start(b->parts, descs, ntopics);
	if (rc == -ENOMEM)
		die(1, "out of memory building the partition table (%zu topic(s), %lld partition(s))", ntopics,
		    (long long)nparts);
	if (rc)
		die(1, "partition table: %s", sub_strerror(rc));
	free(descs);
	free(list);
	KLOG_INFO("kaas", "%zu topic(s), %lld partition(s) known; leading what the cluster assigns", ntopics,
		  (long long)nparts);
}

/* The endpoint given to clients where no listener is known (FindCoordinator
 * of the cluster's other brokers, logs): the first listener's. */
static void advertise(kb_broker *b, kn_server *srv)
{
	kn_server_advertised(srv, &b->host, &b->port);
}

/* After the drain: relinquish every partition, close everything.  The exit
 * code says whether every partition was relinquished. */
static int stop_broker(kb_broker *b, kn_server *srv, kcl_rt *crt)
{
	KLOG_INFO("kaas", "stopping: relinquishing partitions");
	kg_coord_close(b->coord);
	b->coord = NULL;
	kcl_rt_stop(crt); /* no more take-overs; the lease holds on while relinquishing */
	int src = kb_ptable_shutdown(b->parts);
	kcl_rt_finish(crt);
	kn_server_destroy(srv);
	kt_topics_close(b->topics);
	kb_ptable_destroy(b->parts);
	kb_dyncfg_close(b->dyn);
	b->dyn = NULL;
	kb_acl_close(b->acl);
	sub_destroy(b->cluster);
	sub_destroy(b->data);
	ku_metrics_destroy(b->metrics);
	KLOG_INFO("kaas", "stopped%s", src ? " (some partitions failed to relinquish)" : "");
	return src ? 1 : 0;
}

int main(int argc, char **argv)
{
	ku_log_init_from_env();
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1 && strcmp(argv[1], "trash") == 0)
		return kt_trash_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "users") == 0)
		return kb_users_main(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "supervise") == 0)
		return kcl_supervise_main(argc - 1, argv + 1);

	static kb_broker broker;
	kb_broker *b = &broker;
	kb_config *cfg = &b->cfg;
	kb_config_defaults(cfg);

	/* Settings: defaults < --config file < KAAS_* environment < flags. */
	config_source src = first_pass(argc, argv);
	load_config_file(cfg, &src);
	apply_environment(cfg);
	apply_flags(cfg, argc, argv);
	check_settings(cfg, &src);
	raise_descriptor_limit();
	if (ku_metrics_create(&b->metrics))
		die(1, "out of memory for the broker's metrics");

	int explicit_cluster = open_volumes(b);
	b->id = cfg->broker_id;
	gate(b, explicit_cluster);
	int rc = load_cluster_id(b);
	if (rc)
		die(1, "reading or creating the cluster id (cluster-id.json in %s): %s", cfg->cluster_url,
		    sub_strerror(rc));
	rc = kb_dyncfg_open(b->cluster, cfg, b->id, NULL, &b->dyn);
	if (rc)
		die(1, "reading the dynamic broker configs (configs/brokers/ in %s): %s", cfg->cluster_url,
		    sub_strerror(rc));
	open_registry(b, explicit_cluster);
	open_authorizer(b);

	/* The server (event loop, workers, listening socket) before the
	 * partitions: its descriptors are few and must not be the ones that
	 * run out, and a busy port is known before minutes of take-overs. */
	char err[1024];
	kn_server *srv = NULL;
	rc = kn_server_create(b, &srv, err, sizeof(err));
	if (rc)
		die(rc == -EADDRINUSE || rc == -EACCES || rc == -EINVAL ? EXIT_USAGE : 1, "%s", err);
	start_partitions(b);
	advertise(b, srv);

	/* The cluster says "ready" only once the coordinator serves the
	 * shards it is given; it opens after the runtime (it needs the drain
	 * hook), so until then it serves none. */
	b->coord_settled = coord_settled;
	b->coord_settled_arg = b;
	kcl_rt *crt = NULL;
	rc = kcl_rt_start(b, &crt, err, sizeof(err));
	if (rc)
		die(rc == -EINVAL ? EXIT_USAGE : 1, "%s", err);
	b->drain = (void (*)(void *))kcl_rt_drain;
	b->drain_arg = crt;

	kg_coord *coord = NULL;
	rc = kg_coord_open(b, &coord);
	if (rc)
		die(1, "group coordinator: %s", strerror(-rc));
	__atomic_store_n(&b->coord, coord, __ATOMIC_RELEASE); /* the cluster thread reads it */

	KLOG_INFO("kaas", "broker %d listening on %s:%d, advertised as %s:%d (cluster %s)", b->id,
		  cfg->listen_host, kn_server_port(srv), b->host, b->port, b->cluster_id);
	kn_server_run(srv);
	return stop_broker(b, srv, crt);
}
