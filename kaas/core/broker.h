/*
 * broker.h — the broker as every request handler sees it.
 *
 * Three things live here: the broker configuration (struct kb_config, every
 * setting with its Kafka name), the broker itself (struct kb_broker: id,
 * advertised endpoint, the two volumes, the engines) and the request
 * (struct kb_req: what a handler gets besides the body reader).  The
 * partition table, the one place that answers "do I lead this partition, at
 * which epoch?", has its own header: kaas/core/ptable.h.
 *
 * Guarantees for handler authors (topics, coordinators, data path):
 *
 *  - A handler runs on a worker thread and may block on the volume.  Requests
 *    of one connection reach handlers one at a time and in arrival order; the
 *    responses leave in that order too, whatever order handlers finish in.
 *  - KAAS_DEFERRED (proto/api.h): the handler keeps `req` and completes it
 *    later with kb_req_complete(), from any thread.  The connection goes on
 *    to its next request meanwhile; the deferred response still goes out in
 *    its place.  `req`, the request frame and every kw_str/kw_bytes slice
 *    decoded from it stay valid until kb_req_complete() returns — even when
 *    the client disconnected meanwhile (the response is then dropped).
 *    Copy what you need beyond that point.
 *  - KAAS_NO_RESPONSE: the request gets no response at all (Produce acks=0).
 *  - kb_req_attach_read(): splices a storage read plan into the response
 *    body at the current write position; the server streams those bytes from
 *    the segment files (sendfile(2) when the substrate has kernel
 *    descriptors, read into memory on the worker otherwise).  Only Fetch
 *    needs it.
 *  - kb_timer_start()/kb_broker_run(): work later or elsewhere, always on
 *    a worker thread, never on the event loop (JoinGroup delays, session
 *    expiry, delayed produce/fetch).
 *  - struct kb_broker and its config are read-only after start-up, except
 *    through the engines' own locked APIs.  Settings that change at run
 *    time (dynamic broker configs) are read through kb_broker_dyn()
 *    (kaas/core/dyncfg.h), never by writing cfg.
 */
#ifndef KAAS_SERVER_BROKER_H
#define KAAS_SERVER_BROKER_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/core/leaders.h"
#include "kaas/proto/api.h"
#include "kaas/proto/buf.h"
#include "kaas/storage/storage.h"
#include "substrates/sub.h"

/* ---- configuration ----------------------------------------------------------
 * Every value has one name in the config file (Kafka's where Kafka has the
 * setting), and the main ones a flag and a KAAS_* variable; docs/broker.md
 * lists them.  Precedence: flag > environment > file > default. */
#define KB_CFG_STR 4096
#define KB_LISTENER_OVERRIDES 32
enum { KB_SSL_AUTH_NONE, KB_SSL_AUTH_REQUESTED, KB_SSL_AUTH_REQUIRED };

typedef struct kb_config {
	/* identity and endpoints */
	int32_t broker_id;              /* broker.id (1) */
	char listen_host[256];          /* listeners=PLAINTEXT://HOST:PORT */
	int32_t listen_port;
	char advertise_host[256];       /* advertised.listeners (defaults to listeners) */
	int32_t advertise_port;
	/* listeners, advertised.listeners and listener.security.protocol.map as
	 * given; kb_listeners_resolve() turns them into kb_listener rows.
	 * listen_host/listen_port (and advertise_*) are the first listener's. */
	char listeners[KB_CFG_STR];
	char advertised_listeners[KB_CFG_STR];
	char listener_protocol_map[KB_CFG_STR];
	/* TLS (SSL and SASL_SSL listeners); PEM files only */
	char ssl_keystore_location[KB_CFG_STR];   /* ssl.keystore.location: key + chain */
	char ssl_keystore_type[16];               /* ssl.keystore.type (PEM) */
	char ssl_key_password[KB_CFG_STR];        /* ssl.key.password */
	char ssl_certificate_location[KB_CFG_STR]; /* ssl.certificate.location: chain alone */
	char ssl_key_location[KB_CFG_STR];        /* ssl.key.location: the key alone */
	char ssl_truststore_location[KB_CFG_STR]; /* ssl.truststore.location: CA bundle */
	char ssl_truststore_type[16];             /* ssl.truststore.type (PEM) */
	int32_t ssl_client_auth;                  /* ssl.client.auth: KB_SSL_AUTH_* */
	char ssl_enabled_protocols[KB_CFG_STR];   /* ssl.enabled.protocols */
	char ssl_cipher_suites[KB_CFG_STR];       /* ssl.cipher.suites */
	int64_t ssl_handshake_timeout_ms;         /* kaas.ssl.handshake.timeout.ms (10000) */
	char ssl_principal_mapping_rules[KB_CFG_STR]; /* ssl.principal.mapping.rules (DEFAULT):
	                                             KIP-371, kaas/core/sslmap.h */
	/* SASL (SASL_PLAINTEXT and SASL_SSL listeners; credentials in CLUSTER/users/) */
	char sasl_enabled_mechanisms[256];        /* sasl.enabled.mechanisms (SCRAM-SHA-256,SCRAM-SHA-512) */
	int64_t connections_max_reauth_ms;        /* connections.max.reauth.ms (0: sessions never end) */
	int32_t sasl_server_max_receive_size;     /* sasl.server.max.receive.size (524288): frames
	                                             before authentication */
	/* listener.name.<name>.<mechanism>.connections.max.reauth.ms only (KIP-368):
	 * -1 where connections_max_reauth_ms holds; indexed PLAIN, SCRAM-SHA-256,
	 * SCRAM-SHA-512 */
	int64_t sasl_mech_reauth_ms[3];
	char data_url[4096];            /* log.dirs: the data volume (path or substrate URL) */
	char cluster_url[4096];         /* kaas.cluster.dir (default DATA/__cluster) */
	int trust_unqualified;          /* --trust-unqualified only (no file key) */

	/* topics */
	int32_t num_partitions;         /* num.partitions (1) */
	int auto_create_topics;         /* auto.create.topics.enable (true) */
	int16_t default_replication_factor; /* default.replication.factor (1; reported only) */
	ks_log_config log;            /* log.retention.ms, log.retention.bytes,
	                                   log.segment.bytes, log.roll.ms,
	                                   message.max.bytes, log.index.interval.bytes,
	                                   log.message.timestamp.type: the defaults a
	                                   topic inherits unless it overrides them */
	int64_t retention_check_interval_ms; /* log.retention.check.interval.ms (300000) */
	int64_t trash_retention_ms;   /* kaas.trash.retention.ms (86400000) */
	int64_t scrub_bytes_per_sec;  /* kaas.log.scrub.bytes.per.sec (4194304; 0: off) */
	int cleaner_enable;           /* log.cleaner.enable (true) */
	int64_t cleaner_dedupe_bytes; /* log.cleaner.dedupe.buffer.size (134217728) */
	int64_t cleaner_io_bytes_per_sec; /* log.cleaner.io.max.bytes.per.second (unlimited) */
	int64_t cleaner_backoff_ms;   /* log.cleaner.backoff.ms (15000) */

	/* network server */
	int64_t socket_request_max_bytes;   /* socket.request.max.bytes (104857600) */
	int64_t connections_max_idle_ms;    /* connections.max.idle.ms (600000) */
	int32_t num_io_threads;             /* num.io.threads (8): handler workers */
	int32_t num_flush_threads;          /* kaas.flush.threads (2): group-commit fsyncs */
	int64_t connection_max_buffered_bytes; /* kaas.connection.max.buffered.bytes (64 MiB):
	                                       per connection, unanswered requests plus
	                                       unsent responses; reading stops above it */
	int64_t queued_max_request_bytes;   /* queued.max.request.bytes (512 MiB; -1 unbounded):
	                                       broker-wide, request bytes received and not
	                                       answered; frames wait for it before allocation */
	int64_t request_min_bytes_per_sec;  /* kaas.request.min.bytes.per.sec (16384; 0 off):
	                                       a frame being received slower is dropped */
	int32_t max_connections;            /* max.connections (2147483647) */
	int32_t max_connections_per_ip;     /* max.connections.per.ip (2147483647) */
	int64_t shutdown_timeout_ms;        /* kaas.shutdown.timeout.ms (30000) */
	char metrics_host[256];             /* metrics.listen=HOST:PORT (off): the HTTP side door
	                                       (/metrics, /healthz, /readyz); no host: loopback */
	int32_t metrics_port;               /* -1: off */

	/* the cluster (kaas/cluster/, docs/cluster.md) */
	int64_t broker_heartbeat_interval_ms; /* broker.heartbeat.interval.ms (250) */
	int64_t broker_session_timeout_ms;    /* broker.session.timeout.ms (3000) */
	int64_t cluster_stall_timeout_ms;     /* kaas.cluster.stall.timeout.ms (0: from the session) */
	int64_t cluster_poll_ms;              /* kaas.cluster.poll.ms (100): membership and assignment */
	int64_t drain_timeout_ms;             /* kaas.drain.timeout.ms (30000): SIGTERM hand-offs */

	/* consumer groups and producer ids (used by kaas/coord/) */
	int64_t group_initial_rebalance_delay_ms; /* group.initial.rebalance.delay.ms (3000) */
	int64_t group_min_session_timeout_ms;     /* group.min.session.timeout.ms (6000) */
	int64_t group_max_session_timeout_ms;     /* group.max.session.timeout.ms (1800000) */
	int32_t group_max_size;                   /* group.max.size (2147483647) */
	int64_t offsets_retention_minutes;        /* offsets.retention.minutes (10080) */
	int64_t transaction_max_timeout_ms;       /* transaction.max.timeout.ms (900000) */
	int64_t transactional_id_expiration_ms;   /* transactional.id.expiration.ms (604800000) */
	/* listener.name.<name>.<key>: one listener's own TLS and SASL settings
	 * over the broker-wide ones (kb_config_for_listener): ssl.*,
	 * sasl.enabled.mechanisms, sasl.server.max.receive.size,
	 * connections.max.reauth.ms and <mechanism>.connections.max.reauth.ms. */
	int nlover;
	struct kb_listener_override {
		char listener[64]; /* as written; matched without regard to case */
		char key[64];      /* the key after the listener's name */
		char value[1024];
	} lover[KB_LISTENER_OVERRIDES];

	/* authorization (kaas/core/acl.h, docs/security.md) */
	char authorizer_class_name[KB_CFG_STR];   /* authorizer.class.name ("": no authorizer) */
	char super_users[KB_CFG_STR];             /* super.users: "User:a;User:b" */
	int allow_everyone_if_no_acl;             /* allow.everyone.if.no.acl.found (false) */
	int64_t acl_poll_ms;                      /* kaas.acl.poll.ms (1000) */
} kb_config;

/* One listener: a name (PLAINTEXT, SSL, or one of listener.security.protocol.map),
 * its security protocol, where it binds and what Metadata answers on it. */
enum { KB_SEC_PLAINTEXT, KB_SEC_SSL, KB_SEC_SASL_PLAINTEXT, KB_SEC_SASL_SSL };
typedef struct kb_listener {
	char name[64];
	int protocol;         /* KB_SEC_* */
	char host[256];       /* bind address ("" or 0.0.0.0: every address) */
	int32_t port;         /* 0: any */
	char adv_host[256];   /* advertised.listeners entry of the same name; "" = none */
	int32_t adv_port;
} kb_listener;

/* Parses c's listener settings into out[0..*n).  Every name is unique, has a
 * protocol (its own name, or the map's entry), and an advertised entry names
 * a listener.  0 or -EINVAL with the reason in err. */
int kb_listeners_resolve(const kb_config *c, kb_listener *out, int *n, char *err, size_t errlen);
const char *kb_security_protocol_name(int protocol);

/* Kafka's defaults (and ours for the kaas.* keys). */
void kb_config_defaults(kb_config *c);

/* Applies one key=value (file syntax).  Returns 0, or -EINVAL with a message
 * naming the key in err; -ENOENT for a key kaas does not know. */
int kb_config_set(kb_config *c, const char *key, const char *value, char *err, size_t errlen);

/* The settings a listener runs with: c with the listener.name.<name>.*
 * overrides of that listener applied (*out malloc'd).  0, or -EINVAL naming
 * an override that names no listener of c, or a SASL setting of a listener
 * without SASL (err); -ENOMEM. */
int kb_config_for_listener(const kb_config *c, const char *listener, kb_config **out, char *err,
			   size_t errlen);

/* Reads a Kafka-style properties file (key=value, '#'/'!' comments).  Unknown
 * keys are reported through `warn` (may be NULL) and skipped, as Kafka does;
 * a bad value is an error naming the file, line and key. */
int kb_config_load_file(kb_config *c, const char *path, char *err, size_t errlen,
			  void (*warn)(const char *msg));

/* ---- the broker ------------------------------------------------------------ */

struct kb_ptable;   /* kaas/core/ptable.h: which partitions this broker leads */
struct kb_dyncfg;   /* kaas/core/dyncfg.h: dynamic broker configs */
struct kt_topics;   /* topics/: the topic registry (CLUSTER/topics/) */
struct kg_coord;    /* coord/: consumer groups, producer ids, transactions */
typedef struct kb_timer kb_timer;
typedef void (*kb_work_fn)(void *arg);

/* What the network server provides to the engines (set by the server before
 * any handler runs; unit tests of a handler may leave it NULL). */
typedef struct kb_server_ops {
	void (*complete)(void *server, kb_req *req, kw_wr *resp);
	int (*run)(void *server, kb_work_fn fn, void *arg);
	kb_timer *(*timer_start)(void *server, int64_t delay_ms, kb_work_fn fn, void *arg);
	int (*timer_cancel)(void *server, kb_timer *t);
} kb_server_ops;

#define KAAS_UPKEEP_MAX 8

typedef struct kb_broker {
	kb_config cfg;              /* validated; read-only after start-up */
	int32_t id;                   /* = cfg.broker_id */
	const char *host;             /* advertised host and port (Metadata, FindCoordinator) */
	int32_t port;                 /* of the first listener */
	kb_endpoint adv[KB_MAX_LISTENERS]; /* every listener's, set by the server once bound */
	int nadv;
	sub_vfs *data;                /* DATA: DATA/<topic>/<partition>/ */
	sub_vfs *cluster;             /* CLUSTER: registry, assignment, groups, stamp */
	char cluster_id[64];          /* Metadata v2+ cluster_id (CLUSTER/cluster-id.json) */

	struct kb_ptable *parts;    /* never NULL once serving */
	struct kb_dyncfg *dyn;      /* dynamic broker configs (kaas/core/dyncfg.h): the
	                               run-time values over cfg; NULL: cfg alone */
	struct kt_topics *topics;   /* the topic registry */
	struct kg_coord *coord;     /* group coordinator + producer ids */
	struct kb_acl *acl;         /* the authorizer (kaas/core/acl.h); NULL: none, all allowed */
	struct ku_metrics *metrics; /* the broker's counters (util/metrics.h); may be NULL */

	const kb_server_ops *ops;
	void *server;
	struct {                      /* periodic upkeep of the modules above the core */
		kb_work_fn fn;
		void *arg;
	} upkeep[KAAS_UPKEEP_MAX];
	int nupkeep;                  /* registered before serving; read-only after */
	/* SIGTERM, before the server stops reading requests: hands every
	 * partition to other brokers while still answering (NOT_LEADER as they
	 * move); returns when nothing is led here any more.  NULL: none. */
	void (*drain)(void *arg);
	void *drain_arg;
	/* 1 once every group-coordinator shard the applied leader map gives
	 * this broker is served here; the cluster's "ready" waits for it.
	 * Set by the program before the cluster starts; NULL: nothing to
	 * wait for. */
	int (*coord_settled)(void *arg);
	void *coord_settled_arg;
	int joining;                  /* 1 from the cluster's start until this broker first
	                                 leads its share (atomic: /readyz reads it) */
	volatile int stopping;        /* set when SIGTERM/SIGINT arrives; read it with
	                                 __atomic_load_n(&b->stopping, __ATOMIC_ACQUIRE) */
} kb_broker;

/* ---- the request ------------------------------------------------------------ */

struct kb_splices; /* private to the server */

struct kb_req {
	kb_broker *broker;
	int16_t api_key;
	int16_t api_version;
	int32_t correlation_id;
	kw_str client_id;       /* slice of the frame; len -1 when null */
	int flex;                 /* body uses KIP-482 encodings: the `flex` argument of
	                             KRD_STR/KRD_ARRAY/KRD_TAGS and kw_wr_str/array/tags */
	int64_t received_ms;      /* monotonic ms when the frame had fully arrived */
	uint64_t conn_id;         /* unique per connection, for logs */
	const char *peer;         /* "ip:port" of the client, for logs */
	const char *adv_host;     /* the endpoint advertised by the listener the request */
	int32_t adv_port;         /* arrived on (NULL: the broker's, b->host/b->port) */
	const char *listener;     /* that listener's name (NULL: the first) */
	const char *principal;    /* "User:NAME" authenticated by SASL, else "User:CN=..." of a TLS
	                             client certificate, else "User:ANONYMOUS" */
	struct kb_splices *splices; /* private: file ranges spliced into the response */
	struct kn_sasl *sasl;     /* private to the server (kaas/net/sasl.h): the connection's SASL
	                             exchange and its settings; NULL on a listener without SASL */
	const struct kn_sasl_env *sasl_env;
};

/* Splices the ranges of `plan` into `resp` at its current end, as if their
 * bytes had been written there.  The caller writes the length prefix
 * (plan->total) first.  Takes over the plan's references (the plan is reset):
 * the segment files stay open until the response has been sent.  Returns 0
 * or -errno (the plan is then released and the response unusable). */
int kb_req_attach_read(kb_req *req, kw_wr *resp, ks_read_plan *plan);

/* Runs fn(arg) on a worker thread soon.  0 or -errno. */
int kb_broker_run(kb_broker *b, kb_work_fn fn, void *arg);

/* Runs fn(arg) on a worker thread after delay_ms (monotonic).  Returns a
 * handle or NULL (out of memory).  Every handle must be given back exactly
 * once with kb_timer_cancel(), also after it fired: it returns 1 when fn
 * was prevented from running, 0 when the timer had fired (fn has run, is
 * running, or is queued to run: synchronise with fn yourself, e.g. with a
 * reference count, before freeing what arg points to). */
kb_timer *kb_timer_start(kb_broker *b, int64_t delay_ms, kb_work_fn fn, void *arg);
int kb_timer_cancel(kb_broker *b, kb_timer *t);

/* Periodic upkeep.  A module above the core that needs regular work (the
 * topic registry's re-reads and re-drives, say) registers fn once before the
 * broker serves; the network server calls kb_broker_upkeep() on a worker
 * every housekeeping period, which runs the partition table's housekeeping
 * and then every registered fn in registration order.  Nothing runs once the
 * broker is stopping.  add: 0, or -ENOSPC past KAAS_UPKEEP_MAX. */
int kb_broker_upkeep_add(kb_broker *b, kb_work_fn fn, void *arg);
void kb_broker_upkeep(kb_broker *b);

#endif
