/*
 * admin_configs.c — DescribeConfigs (v0-4) and AlterConfigs (v0-1).
 *
 * Topic resources are the registry's overrides over the broker defaults
 * (tconfig.c decides values, sources and synonyms; the broker synonyms of
 * dynamic keys get their whole chain from dynbroker.c).  Broker resources:
 * "<this broker's id>" lists the broker's main settings, the dynamic ones
 * with the value in force and their chain (this broker's dynamic value,
 * the cluster default, the static setting, Kafka's default); "" lists the
 * cluster-wide dynamic defaults.  AlterConfigs on a broker resource
 * replaces that entity's dynamic set (dynbroker.c); settings that need a
 * restart are refused by name.
 * DescribeConfigs v3 adds each config's type and, when asked for, its
 * documentation (config_docs.c); v4 is v3 in flexible encodings.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/dyncfg.h"
#include "kaas/topics/admin_int.h"
#include "kaas/topics/tconfig.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

enum { RES_TOPIC = 2, RES_BROKER = 4 };

/* ---- the broker resource ------------------------------------------------------------ */

static void bentry(kt_config_list *l, const char *name, const char *value, int is_set)
{
	int8_t src = is_set ? KAAS_CFG_SRC_STATIC_BROKER : KAAS_CFG_SRC_DEFAULT;
	kt_config_entry *e = kt_config_list_add(l, name, value, src, 1);
	if (e && e->value) {
		e->syn[0].name = name;
		e->syn[0].value = strdup(value);
		e->syn[0].source = src;
		if (!e->syn[0].value)
			l->oom = 1;
		else
			e->nsyn = 1;
	}
}

static void bnum(kt_config_list *l, const char *name, int64_t v, int64_t dflt)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%" PRId64, v);
	bentry(l, name, buf, v != dflt);
}

static void bbool(kt_config_list *l, const char *name, int v, int dflt)
{
	bentry(l, name, v ? "true" : "false", (v != 0) != (dflt != 0));
}

static int broker_configs(const kt_admin_ctx *c, kt_config_list *l)
{
	const kb_config *b = c->bcfg, *d = c->bdefaults;
	char buf[4400];
	kb_dynsnap snap, *s = NULL;
	if (c->dyn) {
		kb_dyncfg_snapshot(c->dyn, &snap);
		s = &snap;
	}
#define DYN(k) kt__dyn_broker_entry(c, l, (k), s)
	bnum(l, "broker.id", b->broker_id, d->broker_id);
	snprintf(buf, sizeof(buf), "PLAINTEXT://%s:%d", b->listen_host, b->listen_port);
	bentry(l, "listeners", buf, 1);
	snprintf(buf, sizeof(buf), "PLAINTEXT://%s:%d", b->advertise_host[0] ? b->advertise_host : b->listen_host,
		 b->advertise_port ? b->advertise_port : b->listen_port);
	bentry(l, "advertised.listeners", buf, 1);
	bentry(l, "log.dirs", b->data_url, 1);
	bentry(l, "kaas.cluster.dir", b->cluster_url, b->cluster_url[0] != '\0');
	DYN(KB_DYN_NUM_PARTITIONS);
	DYN(KB_DYN_AUTO_CREATE_TOPICS_ENABLE);
	bnum(l, "default.replication.factor", b->default_replication_factor, d->default_replication_factor);
	DYN(KB_DYN_LOG_RETENTION_MS);
	DYN(KB_DYN_LOG_RETENTION_BYTES);
	DYN(KB_DYN_LOG_SEGMENT_BYTES);
	DYN(KB_DYN_LOG_ROLL_MS);
	DYN(KB_DYN_MESSAGE_MAX_BYTES);
	DYN(KB_DYN_LOG_INDEX_INTERVAL_BYTES);
	DYN(KB_DYN_LOG_MESSAGE_TIMESTAMP_TYPE);
	DYN(KB_DYN_LOG_CLEANUP_POLICY);
	bbool(l, "log.cleaner.enable", b->cleaner_enable, d->cleaner_enable);
	bnum(l, "log.cleaner.dedupe.buffer.size", b->cleaner_dedupe_bytes, d->cleaner_dedupe_bytes);
	bnum(l, "log.cleaner.io.max.bytes.per.second", b->cleaner_io_bytes_per_sec, d->cleaner_io_bytes_per_sec);
	DYN(KB_DYN_COMPRESSION_TYPE);
	bentry(l, "min.insync.replicas", "1", 0);
	bentry(l, "unclean.leader.election.enable", "false", 0);
	bnum(l, "log.retention.check.interval.ms", b->retention_check_interval_ms, d->retention_check_interval_ms);
	bnum(l, "socket.request.max.bytes", b->socket_request_max_bytes, d->socket_request_max_bytes);
	bnum(l, "connections.max.idle.ms", b->connections_max_idle_ms, d->connections_max_idle_ms);
	DYN(KB_DYN_MAX_CONNECTIONS);
	DYN(KB_DYN_MAX_CONNECTIONS_PER_IP);
	bnum(l, "num.io.threads", b->num_io_threads, d->num_io_threads);
	bnum(l, "group.initial.rebalance.delay.ms", b->group_initial_rebalance_delay_ms,
	     d->group_initial_rebalance_delay_ms);
	bnum(l, "group.min.session.timeout.ms", b->group_min_session_timeout_ms, d->group_min_session_timeout_ms);
	bnum(l, "group.max.session.timeout.ms", b->group_max_session_timeout_ms, d->group_max_session_timeout_ms);
	bnum(l, "group.max.size", b->group_max_size, d->group_max_size);
	bnum(l, "offsets.retention.minutes", b->offsets_retention_minutes, d->offsets_retention_minutes);
	bnum(l, "transaction.max.timeout.ms", b->transaction_max_timeout_ms, d->transaction_max_timeout_ms);
	bnum(l, "transactional.id.expiration.ms", b->transactional_id_expiration_ms,
	     d->transactional_id_expiration_ms);
#undef DYN
	return l->oom ? -ENOMEM : 0;
}

/* ---- DescribeConfigs ------------------------------------------------------------------ */

typedef struct dc_res {
	int8_t type;
	kw_str name;
	int32_t nkeys;        /* 0 (null or empty): all */
	kw_str *keys;
} dc_res;

static int wanted(const dc_res *r, const char *name)
{
	if (r->nkeys <= 0)
		return 1; /* null or empty: every config (as Kafka answers both) */
	size_t len = strlen(name);
	for (int32_t i = 0; i < r->nkeys; i++)
		if (r->keys[i].len == (int32_t)len && memcmp(r->keys[i].s, name, len) == 0)
			return 1;
	return 0;
}

static void write_configs(kw_wr *w, int16_t version, int include_synonyms, int include_docs,
			  const dc_res *r, const kt_config_list *l)
{
	int flex = version >= 4;
	size_t cnt_off = flex ? 0 : kw_wr_reserve_i32(w);
	int32_t n = 0;
	for (size_t i = 0; l && i < l->n; i++)
		n += wanted(r, l->v[i].name);
	if (flex)
		kw_wr_array(w, 1, n); /* a varint cannot be patched: counted first */
	n = 0;
	for (size_t i = 0; l && i < l->n; i++) {
		const kt_config_entry *e = &l->v[i];
		if (!wanted(r, e->name))
			continue;
		kw_wr_str(w, flex, e->name);
		kw_wr_str(w, flex, e->sensitive ? NULL : e->value);
		kw_wr_bool(w, e->read_only);
		if (version == 0)
			kw_wr_bool(w, e->source == KAAS_CFG_SRC_DEFAULT);
		else
			kw_wr_i8(w, e->source);
		kw_wr_bool(w, e->sensitive);
		if (version >= 1) {
			int32_t ns = include_synonyms ? e->nsyn : 0;
			kw_wr_array(w, flex, ns);
			for (int32_t k = 0; k < ns; k++) {
				kw_wr_str(w, flex, e->syn[k].name);
				kw_wr_str(w, flex, e->sensitive ? NULL : e->syn[k].value);
				kw_wr_i8(w, e->syn[k].source);
				kw_wr_tags(w, flex);
			}
		}
		if (version >= 3) {
			int8_t type;
			const char *doc = kt__config_doc(e->name, &type);
			kw_wr_i8(w, type);
			kw_wr_str(w, flex, include_docs ? doc : NULL);
		}
		kw_wr_tags(w, flex);
		n++;
	}
	if (!flex)
		kw_wr_patch_i32(w, cnt_off, n);
}

int kt_admin_describe_configs(const kt_admin_ctx *c, int16_t version, kw_rd *rd, kw_wr *w)
{
	dc_res *r = NULL;
	int32_t n = 0;
	int8_t include_synonyms = 0, include_docs = 0;
	int flex = version >= 4;
	int rc = -EBADMSG;
	ADMIN_ARRAY_F(rd, flex, flex ? 4 : 7, n, r);
	for (int32_t i = 0; i < n; i++) {
		KRD_I8(rd, &r[i].type);
		KRD_STR(rd, flex, &r[i].name);
		ADMIN_ARRAY_F(rd, flex, flex ? 1 : 2, r[i].nkeys, r[i].keys);
		for (int32_t k = 0; k < r[i].nkeys; k++)
			KRD_STR(rd, flex, &r[i].keys[k]);
		KRD_TAGS(rd, flex);
	}
	if (version >= 1)
		KRD_I8(rd, &include_synonyms);
	if (version >= 3)
		KRD_I8(rd, &include_docs);
	KRD_TAGS(rd, flex);

	kw_wr_i32(w, 0); /* throttle_time_ms */
	kw_wr_array(w, flex, n);
	for (int32_t i = 0; i < n; i++) {
		kt_config_list l = KAAS_CONFIG_LIST_INIT;
		char msg[MSG_LEN] = "";
		int16_t err = kt__configs_authz(c, r[i].type, r[i].name, KB_OP_DESCRIBE_CONFIGS, msg, sizeof(msg));
		int32_t entity = 0;
		if (err != KERR_NONE) {
			/* answered below */
		} else if (r[i].type == RES_TOPIC) {
			err = kt_topics_describe_configs(c->topics, r[i].name, &l, msg, sizeof(msg));
			if (err == KERR_NONE)
				kt__dyn_topic_chain(c, &l);
			if (err == KERR_NONE && l.oom) {
				snprintf(msg, sizeof(msg), "out of memory");
				err = KERR_UNKNOWN_SERVER_ERROR;
			}
		} else if (r[i].type == RES_BROKER) {
			err = kt__dyn_entity(c, r[i].name, &entity, msg, sizeof(msg));
			if (err == KERR_NONE &&
			    (entity == KB_DYN_DEFAULT ? kt__dyn_default_configs(c, &l) : broker_configs(c, &l))) {
				snprintf(msg, sizeof(msg), "out of memory");
				err = KERR_UNKNOWN_SERVER_ERROR;
			}
		} else {
			snprintf(msg, sizeof(msg), "Resource type %d is not supported by kaas", r[i].type);
			err = KERR_INVALID_REQUEST;
		}
		kw_wr_i16(w, err);
		kw_wr_str(w, flex, err != KERR_NONE ? msg : NULL);
		kw_wr_i8(w, r[i].type);
		kw_wr_kstr(w, flex, r[i].name);
		write_configs(w, version, include_synonyms != 0, include_docs != 0, &r[i],
			      err == KERR_NONE ? &l : NULL);
		kw_wr_tags(w, flex);
		kt_config_list_free(&l);
	}
	kw_wr_tags(w, flex);
	rc = KAAS_HANDLED;
	goto out;
err_parse:
	KLOG_DEBUG("admin", "DescribeConfigs v%d: malformed request (%s)", version, rd->err);
	rc = -EBADMSG;
out:
	for (int32_t i = 0; i < n; i++)
		free(r[i].keys);
	free(r);
	return rc;
}

/* ---- AlterConfigs ------------------------------------------------------------------------ */

typedef struct ac_res {
	int8_t type;
	kw_str name;
	int32_t ncfg;
	kt_config_kv *cfg;
} ac_res;

/* The request's pairs are the entity's whole new set (Kafka's
 * non-incremental semantics: a key left out reverts to the next level). */
static int16_t alter_broker(const kt_admin_ctx *c, const ac_res *r, int validate_only, char *msg, size_t msglen)
{
	kt_dyn_op *ops = calloc(r->ncfg > 0 ? (size_t)r->ncfg : 1, sizeof(*ops));
	if (!ops) {
		snprintf(msg, msglen, "out of memory");
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	for (int32_t k = 0; k < r->ncfg; k++)
		ops[k] = (kt_dyn_op){r->cfg[k].name, KT_DYN_SET, r->cfg[k].value};
	int16_t err = KERR_NONE;
	for (int32_t a = 0; a < r->ncfg && err == KERR_NONE; a++)
		for (int32_t b = a + 1; b < r->ncfg && err == KERR_NONE; b++)
			if (kstr_eq(ops[a].name, ops[b].name)) {
				snprintf(msg, msglen, "Error due to duplicate config keys: %.*s", (int)ops[a].name.len,
					 ops[a].name.s);
				err = KERR_INVALID_REQUEST;
			}
	if (err == KERR_NONE)
		err = kt__dyn_alter(c, r->name, ops, (size_t)r->ncfg, 1, validate_only, msg, msglen);
	free(ops);
	return err;
}

int kt_admin_alter_configs(const kt_admin_ctx *c, int16_t version, kw_rd *rd, kw_wr *w)
{
	ac_res *r = NULL;
	int32_t n = 0;
	int8_t validate_only;
	int rc = -EBADMSG;
	ADMIN_ARRAY(rd, 7, n, r);
	for (int32_t i = 0; i < n; i++) {
		KRD_I8(rd, &r[i].type);
		KRD_STR(rd, 0, &r[i].name);
		ADMIN_ARRAY(rd, 4, r[i].ncfg, r[i].cfg);
		for (int32_t k = 0; k < r[i].ncfg; k++) {
			KRD_STR(rd, 0, &r[i].cfg[k].name);
			KRD_STR(rd, 0, &r[i].cfg[k].value);
		}
	}
	KRD_I8(rd, &validate_only);

	kw_wr_i32(w, 0); /* throttle_time_ms */
	kw_wr_i32(w, n);
	for (int32_t i = 0; i < n; i++) {
		char msg[MSG_LEN] = "";
		int16_t err = KERR_NONE;
		for (int32_t j = 0; j < n && err == KERR_NONE; j++) {
			if (j != i && r[j].type == r[i].type && kstr_eq(r[j].name, r[i].name)) {
				snprintf(msg, sizeof(msg), "Alter configs request contains the same resource more than once");
				err = KERR_INVALID_REQUEST;
			}
		}
		if (err == KERR_NONE)
			err = kt__configs_authz(c, r[i].type, r[i].name, KB_OP_ALTER_CONFIGS, msg, sizeof(msg));
		if (err != KERR_NONE) {
			/* answered below */
		} else if (r[i].type == RES_TOPIC) {
			err = kt_topics_alter_configs(c->topics, r[i].name, r[i].cfg, (size_t)r[i].ncfg, validate_only != 0,
							msg, sizeof(msg));
		} else if (r[i].type == RES_BROKER) {
			err = alter_broker(c, &r[i], validate_only != 0, msg, sizeof(msg));
		} else {
			snprintf(msg, sizeof(msg), "Resource type %d is not supported by kaas", r[i].type);
			err = KERR_INVALID_REQUEST;
		}
		kw_wr_i16(w, err);
		kw_wr_str(w, 0, err != KERR_NONE && msg[0] ? msg : NULL);
		kw_wr_i8(w, r[i].type);
		kw_wr_kstr(w, 0, r[i].name);
	}
	rc = KAAS_HANDLED;
	goto out;
err_parse:
	KLOG_DEBUG("admin", "AlterConfigs v%d: malformed request (%s)", version, rd->err);
	rc = -EBADMSG;
out:
	for (int32_t i = 0; i < n; i++)
		free(r[i].cfg);
	free(r);
	return rc;
}
