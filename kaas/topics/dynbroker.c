/*
 * dynbroker.c — dynamic broker configs as the admin APIs and the topic
 * registry see them: which broker resource a request names, the
 * DescribeConfigs entries with their precedence chain as synonyms, the
 * edits of AlterConfigs and IncrementalAlterConfigs, and applying a new
 * snapshot's topic defaults (log.*, message.max.bytes, compression.type,
 * num.partitions) to the registry, which hands each changed topic's
 * effective config to its open partitions.
 *
 * The store itself (versions on the volume, validation, publication) is
 * kaas/core/dyncfg.c: the broker core reads the values, this layer writes
 * them on behalf of the admin APIs.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/dyncfg.h"
#include "kaas/proto/kerr.h"
#include "kaas/topics/admin_int.h"
#include "kaas/topics/tconfig.h"
#include "util/log.h"

/* ---- which broker resource ------------------------------------------------------------------- */

int16_t kt__dyn_entity(const kt_admin_ctx *c, kw_str name, int32_t *entity, char *msg, size_t msglen)
{
	char buf[16];
	if (name.len <= 0) {
		*entity = KB_DYN_DEFAULT; /* "" and null: the cluster-wide default */
		return KERR_NONE;
	}
	int n = snprintf(buf, sizeof(buf), "%d", c->broker_id);
	if (name.len == n && memcmp(name.s, buf, (size_t)n) == 0) {
		*entity = c->broker_id;
		return KERR_NONE;
	}
	char shown[64];
	size_t j = 0;
	for (int32_t i = 0; i < name.len && j + 1 < sizeof(shown); i++)
		shown[j++] = (name.s[i] >= 0x20 && name.s[i] < 0x7f) ? name.s[i] : '?';
	shown[j] = '\0';
	snprintf(msg, msglen, "Unexpected broker id, expected %d or empty string, but received %s", c->broker_id,
		 shown);
	return KERR_INVALID_REQUEST;
}

/* ---- describe ------------------------------------------------------------------------------------ */

static void syn_add(kt_config_list *l, kt_config_entry *e, const char *name, const char *value, int8_t src)
{
	if (e->nsyn >= (int)(sizeof(e->syn) / sizeof(e->syn[0])))
		return;
	kt_config_synonym *s = &e->syn[e->nsyn];
	s->name = name;
	s->value = strdup(value);
	s->source = src;
	if (!s->value)
		l->oom = 1;
	else
		e->nsyn++;
}

/* The broker-level chain of key k under the name `as`, most specific
 * first: this broker's dynamic value, the cluster default, the static
 * setting (when it differs from Kafka's default), Kafka's default. */
static void chain(kt_config_list *l, kt_config_entry *e, int k, const kb_dynsnap *s, const kt_admin_ctx *c,
		  const char *as)
{
	uint32_t bit = 1u << k;
	char sv[KB_DYN_VALUE_MAX], dv[KB_DYN_VALUE_MAX];
	if (s && (s->level[KB_DYN_LEVEL_BROKER].set & bit))
		syn_add(l, e, as, s->level[KB_DYN_LEVEL_BROKER].val[k], KAAS_CFG_SRC_DYNAMIC_BROKER);
	if (s && (s->level[KB_DYN_LEVEL_DEFAULT].set & bit))
		syn_add(l, e, as, s->level[KB_DYN_LEVEL_DEFAULT].val[k], KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
	kb_dyn_format(k, c->bcfg, sv);
	kb_dyn_format(k, c->bdefaults, dv);
	if (strcmp(sv, dv) != 0)
		syn_add(l, e, as, sv, KAAS_CFG_SRC_STATIC_BROKER);
	syn_add(l, e, as, dv, KAAS_CFG_SRC_DEFAULT);
}

static void replace_value(kt_config_list *l, kt_config_entry *e, const char *v)
{
	free(e->value);
	e->value = strdup(v);
	if (!e->value)
		l->oom = 1;
}

/* An entry for a dynamic key on this broker: the value in force, the
 * source it comes from, the chain as synonyms; writable when there is a
 * store to write to. */
int kt__dyn_broker_entry(const kt_admin_ctx *c, kt_config_list *l, int k, const kb_dynsnap *s)
{
	kt_config_entry *e = kt_config_list_add(l, kb_dyn_name(k), "", KAAS_CFG_SRC_DEFAULT, c->dyn == NULL);
	if (!e)
		return -ENOMEM;
	chain(l, e, k, s, c, kb_dyn_name(k));
	if (e->nsyn > 0) {
		replace_value(l, e, e->syn[0].value);
		e->source = e->syn[0].source;
	}
	return l->oom ? -ENOMEM : 0;
}

/* The cluster-wide default resource (""): only what is set there, as
 * Kafka lists it. */
int kt__dyn_default_configs(const kt_admin_ctx *c, kt_config_list *l)
{
	if (!c->dyn)
		return 0;
	kb_dynsnap s;
	kb_dyncfg_snapshot(c->dyn, &s);
	for (int k = 0; k < KB_DYN_COUNT; k++) {
		if (!(s.level[KB_DYN_LEVEL_DEFAULT].set & (1u << k)))
			continue;
		kt_config_entry *e = kt_config_list_add(l, kb_dyn_name(k), s.level[KB_DYN_LEVEL_DEFAULT].val[k],
							KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER, 0);
		if (e)
			syn_add(l, e, kb_dyn_name(k), s.level[KB_DYN_LEVEL_DEFAULT].val[k],
				KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
	}
	return l->oom ? -ENOMEM : 0;
}

/* A topic's list from the registry: its broker synonyms of dynamic keys
 * get the whole chain, and a key the topic does not override shows the
 * value in force and where it comes from. */
void kt__dyn_topic_chain(const kt_admin_ctx *c, kt_config_list *l)
{
	kb_dynsnap s;
	if (c->dyn)
		kb_dyncfg_snapshot(c->dyn, &s);
	for (size_t i = 0; i < l->n; i++) {
		kt_config_entry *e = &l->v[i];
		int tc = kt_tcfg_index(e->name, strlen(e->name));
		const char *bn = tc >= 0 ? kt_tcfg_broker_name(tc) : NULL;
		int k = bn ? kb_dyn_index(bn, strlen(bn)) : -1;
		if (k < 0)
			continue;
		for (int j = 0; j < e->nsyn; j++)
			free(e->syn[j].value);
		e->nsyn = 0;
		if (e->source == KAAS_CFG_SRC_TOPIC && e->value)
			syn_add(l, e, e->name, e->value, KAAS_CFG_SRC_TOPIC);
		int first = e->nsyn;
		chain(l, e, k, c->dyn ? &s : NULL, c, bn);
		if (e->source != KAAS_CFG_SRC_TOPIC && e->nsyn > first) {
			replace_value(l, e, e->syn[first].value);
			e->source = e->syn[first].source;
		}
	}
}

/* ---- alter ---------------------------------------------------------------------------------------- */

typedef struct edit_arg {
	const kt_dyn_op *ops;
	size_t n;
	int replace;
} edit_arg;

static int16_t edit(void *arg, kb_dyn_set *s, char *msg, size_t msglen)
{
	const edit_arg *a = arg;
	if (a->replace)
		s->set = 0; /* AlterConfigs: the request is the whole set */
	for (size_t i = 0; i < a->n; i++) {
		const kt_dyn_op *o = &a->ops[i];
		int k = kb_dyn_index(o->name.s, (size_t)o->name.len);
		if (o->op == KT_DYN_DELETE) {
			s->set &= ~(1u << k);
			continue;
		}
		char err[256];
		if (kb_dyn_check(k, o->value.s, (size_t)o->value.len, s->val[k], err, sizeof(err))) {
			snprintf(msg, msglen, "Invalid config value: %s", err); /* checked before: cannot happen */
			return KERR_INVALID_REQUEST;
		}
		s->set |= 1u << k;
	}
	return KERR_NONE;
}

static void shown(char *dst, size_t len, kw_str s)
{
	size_t j = 0;
	for (int32_t i = 0; i < s.len && j + 1 < len; i++)
		dst[j++] = (s.s[i] >= 0x20 && s.s[i] < 0x7f) ? s.s[i] : '?';
	dst[j] = '\0';
}

int16_t kt__dyn_alter(const kt_admin_ctx *c, kw_str name, const kt_dyn_op *ops, size_t n, int replace,
		      int validate_only, char *msg, size_t msglen)
{
	int32_t entity;
	int16_t err = kt__dyn_entity(c, name, &entity, msg, msglen);
	if (err != KERR_NONE)
		return err;
	char ename[16];
	if (entity == KB_DYN_DEFAULT)
		snprintf(ename, sizeof(ename), "%s", "");
	else
		snprintf(ename, sizeof(ename), "%d", entity);
	/* Kafka's wording for settings that need a restart, every one named. */
	size_t off = 0;
	int nrefused = 0;
	for (size_t i = 0; i < n; i++) {
		if (ops[i].name.len > 0 && kb_dyn_index(ops[i].name.s, (size_t)ops[i].name.len) >= 0)
			continue;
		char nm[128];
		shown(nm, sizeof(nm), ops[i].name);
		if (!nrefused++)
			off = (size_t)snprintf(msg, msglen, "Cannot update these configs dynamically: [");
		if (off < msglen)
			off += (size_t)snprintf(msg + off, msglen - off, "%s%s", nrefused > 1 ? ", " : "", nm);
	}
	if (nrefused) {
		if (off < msglen)
			snprintf(msg + off, msglen - off, "] (kaas reads them at start-up: set them in the broker's "
				 "config file, environment or flags and restart it)");
		return KERR_INVALID_REQUEST;
	}
	for (size_t i = 0; i < n; i++) {
		const kt_dyn_op *o = &ops[i];
		char nm[128], canon[KB_DYN_VALUE_MAX], why[256];
		shown(nm, sizeof(nm), o->name);
		int k = kb_dyn_index(o->name.s, (size_t)o->name.len);
		if (o->op == KT_DYN_APPEND || o->op == KT_DYN_SUBTRACT) {
			snprintf(msg, msglen, "Config value %s is not allowed for config key: %s (not a list)",
				 o->op == KT_DYN_APPEND ? "append" : "subtract", nm);
			return KERR_INVALID_CONFIG;
		}
		if (o->op != KT_DYN_SET && o->op != KT_DYN_DELETE) {
			snprintf(msg, msglen, "Unknown config operation %d for %s", o->op, nm);
			return KERR_INVALID_REQUEST;
		}
		if (o->op == KT_DYN_DELETE)
			continue;
		if (o->value.len < 0) {
			snprintf(msg, msglen, "Null value not supported for : %s", nm);
			return KERR_INVALID_REQUEST;
		}
		if (kb_dyn_check(k, o->value.s, (size_t)o->value.len, canon, why, sizeof(why))) {
			snprintf(msg, msglen, "Invalid config value for resource ConfigResource(type=BROKER, name='%s'): %s",
				 ename, why);
			return KERR_INVALID_REQUEST;
		}
	}
	if (!c->dyn) {
		snprintf(msg, msglen, "this broker has no dynamic config store");
		return KERR_INVALID_REQUEST;
	}
	edit_arg a = {ops, n, replace};
	err = kb_dyncfg_alter(c->dyn, entity, edit, &a, validate_only, msg, msglen);
	if (err == KERR_NONE && !validate_only) {
		KLOG_INFO("admin", "dynamic configs of broker resource '%s' %s (%zu key(s))", ename,
			  replace ? "replaced" : "changed", n);
		int rc = kt_dyn_apply(c->topics, c->dyn);
		if (rc < 0)
			KLOG_WARN("admin", "applying the new topic defaults: %s (the upkeep retries)", sub_strerror(rc));
	}
	return err;
}

/* ---- applying a snapshot ---------------------------------------------------------------------------- */

/* The snapshot is read and applied under one lock, so of two applies (the
 * upkeep's and a handler's after its own change) the later one always
 * applies a snapshot at least as new: the registry never ends on an older
 * one. */
static pthread_mutex_t apply_mu = PTHREAD_MUTEX_INITIALIZER;

int kt_dyn_apply(kt_topics *reg, kb_dyncfg *d)
{
	if (!reg || !d)
		return 0;
	kb_dynsnap s;
	pthread_mutex_lock(&apply_mu);
	kb_dyncfg_snapshot(d, &s);
	ks_log_config log;
	kt_topics_defaults(reg, &log);
	log.retention_ms = s.eff[KB_DYN_LOG_RETENTION_MS];
	log.retention_bytes = s.eff[KB_DYN_LOG_RETENTION_BYTES];
	log.segment_bytes = s.eff[KB_DYN_LOG_SEGMENT_BYTES];
	log.segment_ms = s.eff[KB_DYN_LOG_ROLL_MS];
	log.max_message_bytes = (int32_t)s.eff[KB_DYN_MESSAGE_MAX_BYTES];
	log.index_interval_bytes = (int32_t)s.eff[KB_DYN_LOG_INDEX_INTERVAL_BYTES];
	log.timestamp_type = (int32_t)s.eff[KB_DYN_LOG_MESSAGE_TIMESTAMP_TYPE];
	log.cleanup_compact = (int32_t)s.eff[KB_DYN_LOG_CLEANUP_POLICY];
	log.compression_type = (int32_t)s.eff[KB_DYN_COMPRESSION_TYPE];
	int rc = kt_topics_set_defaults(reg, &log, (int32_t)s.eff[KB_DYN_NUM_PARTITIONS]);
	pthread_mutex_unlock(&apply_mu);
	if (rc > 0)
		KLOG_INFO("topics", "new broker defaults applied to %d topic(s) without overrides", rc);
	return rc;
}
