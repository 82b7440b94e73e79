/*
 * config.h — the table of broker settings behind kb_config_set() (broker.h):
 * one row per key with its type, bounds, default (as text, for --help) and
 * help line.
 */
#ifndef KAAS_SERVER_CONFIG_H
#define KAAS_SERVER_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum kb_config_type {
	KCFG_I16,
	KCFG_I32,
	KCFG_I64,
	KCFG_BOOL,
	KCFG_MINUTES,  /* stored in ms */
	KCFG_HOURS,    /* stored in ms */
	KCFG_TSTYPE,   /* CreateTime | LogAppendTime */
	KCFG_PATH,
	KCFG_LISTENER, /* NAME://host:port[,NAME://host:port...] */
	KCFG_STR,      /* free text, checked where it is used (KB_CFG_STR bytes) */
	KCFG_SSL_AUTH, /* required | requested | none */
	KCFG_STORETYPE, /* PEM (JKS and PKCS12 refused by name) */
	KCFG_AUTHORIZER, /* "", kaas, or Kafka's two ACL authorizer classes */
	KCFG_SASL_MECHS, /* PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 (others refused by name) */
	KCFG_SSL_RULES, /* ssl.principal.mapping.rules: parsed by kb_sslmap_parse */
	KCFG_CLEANUP,  /* delete | compact | compact,delete (either order): KS_CLEANUP_* */
	KCFG_COMPRESSION, /* producer | uncompressed | gzip | snappy | lz4 | zstd: KS_COMPRESS_* */
};

typedef struct kb_config_key {
	const char *key;
	enum kb_config_type type;
	size_t off;
	int64_t min, max;
	const char *dflt;
	const char *help;
} kb_config_key;

extern const kb_config_key kb_config_keys[]; /* ends with a NULL key */

/* Kafka's compression.type values, indexed by KS_COMPRESS_*; ends with NULL. */
extern const char *const kb_compression_names[];

/* "PLAINTEXT://host:port", "host:port", "[::1]:port".  0 or -1. */
int kb_parse_hostport(const char *s, char *host, size_t hostlen, int32_t *port);

/* One line per setting, for --help. */
void kb_config_help(FILE *out);

#endif
