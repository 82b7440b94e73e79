/*
 * admin_incremental.c — IncrementalAlterConfigs (v0-v1, flexible from v1).
 *
 * Topics: the operations (SET, DELETE) are applied to the topic's current
 * overrides and the result goes through the same validation and the same
 * atomic registry write as AlterConfigs (kt_topics_alter_configs), so a
 * request either changes the topic as asked or changes nothing.  APPEND and
 * SUBTRACT are for list-valued configs, and no topic config kaas keeps is a
 * list: refused with INVALID_CONFIG naming the key.  The read of the current
 * overrides and the write are two registry calls: two incremental requests
 * on one topic at the same instant may lose one of their changes (the last
 * write wins, as with two AlterConfigs).
 *
 * Brokers: the dynamic broker configs (dynbroker.c, kaas/core/dyncfg.h).
 * SET and DELETE change "" (the cluster-wide default) or this broker's own
 * set; the store's read-modify-write is retried on a lost race, so unlike
 * topics no concurrent change is lost.  A setting that needs a restart is
 * refused by name with INVALID_REQUEST ("Cannot update these configs
 * dynamically"), as Kafka refuses its static settings.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/proto/kerr.h"
#include "kaas/topics/admin_int.h"
#include "util/log.h"

enum { RES_TOPIC = 2, RES_BROKER = 4 };
enum { OP_SET = 0, OP_DELETE = 1, OP_APPEND = 2, OP_SUBTRACT = 3 };

typedef struct iop {
	kw_str name;
	int8_t op;
	kw_str value;
} iop;

typedef struct ires {
	int8_t type;
	kw_str name;
	int32_t n;
	iop *ops;
} ires;

/* Like ADMIN_ARRAY, for either encoding. */
#define IARRAY(rd, flex, min_elem, n, p)                                     \
	do {                                                                 \
		KRD_ARRAY((rd), (flex), (min_elem), &(n));                   \
		if ((n) < 0)                                                 \
			(n) = 0;                                             \
		if ((n) > 0 && !((p) = calloc((size_t)(n), sizeof(*(p))))) { \
			(n) = 0;                                             \
			rc = -ENOMEM;                                        \
			goto out;                                            \
		}                                                            \
	} while (0)

static int16_t alter_topic(const kt_admin_ctx *c, const ires *r, int validate_only, char *msg, size_t msglen)
{
	kt_config_list l = KAAS_CONFIG_LIST_INIT;
	int16_t err = kt_topics_describe_configs(c->topics, r->name, &l, msg, msglen);
	if (err != KERR_NONE)
		return err;
	kt_config_kv *kv = calloc(l.n + (size_t)r->n + 1, sizeof(*kv));
	size_t n = 0;
	if (!kv) {
		snprintf(msg, msglen, "out of memory");
		err = KERR_UNKNOWN_SERVER_ERROR;
		goto out;
	}
	for (size_t i = 0; i < l.n; i++)
		if (l.v[i].source == KAAS_CFG_SRC_TOPIC && l.v[i].value)
			kv[n++] = (kt_config_kv){{l.v[i].name, (int32_t)strlen(l.v[i].name)},
						  {l.v[i].value, (int32_t)strlen(l.v[i].value)}};
	for (int32_t k = 0; k < r->n && err == KERR_NONE; k++) {
		const iop *o = &r->ops[k];
		size_t at = n;
		for (size_t i = 0; i < n; i++)
			if (kstr_eq(kv[i].name, o->name))
				at = i;
		switch (o->op) {
		case OP_SET:
			if (o->value.len < 0) {
				snprintf(msg, msglen, "Null value not supported for : %.*s", (int)o->name.len, o->name.s);
				err = KERR_INVALID_REQUEST;
				break;
			}
			kv[at] = (kt_config_kv){o->name, o->value};
			if (at == n)
				n++;
			break;
		case OP_DELETE:
			if (at < n)
				kv[at] = kv[--n];
			break;
		case OP_APPEND:
		case OP_SUBTRACT:
			snprintf(msg, msglen, "Config value append/subtract is not allowed for config key %.*s: kaas "
				 "keeps no list-valued topic configs", (int)o->name.len, o->name.s);
			err = KERR_INVALID_CONFIG;
			break;
		default:
			snprintf(msg, msglen, "Unknown config operation %d for %.*s", o->op, (int)o->name.len, o->name.s);
			err = KERR_INVALID_REQUEST;
		}
	}
	if (err == KERR_NONE)
		err = kt_topics_alter_configs(c->topics, r->name, kv, n, validate_only, msg, msglen);
out:
	free(kv);
	kt_config_list_free(&l);
	return err;
}

/* SET and DELETE on the entity's dynamic set; the store re-reads and
 * re-applies them if another writer got in first, so two incremental
 * requests at once both take effect. */
static int16_t alter_broker(const kt_admin_ctx *c, const ires *r, int validate_only, char *msg, size_t msglen)
{
	kt_dyn_op *ops = calloc(r->n > 0 ? (size_t)r->n : 1, sizeof(*ops));
	if (!ops) {
		snprintf(msg, msglen, "out of memory");
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	for (int32_t k = 0; k < r->n; k++)
		ops[k] = (kt_dyn_op){r->ops[k].name, r->ops[k].op, r->ops[k].value};
	int16_t err = kt__dyn_alter(c, r->name, ops, (size_t)r->n, 0, validate_only, msg, msglen);
	free(ops);
	return err;
}

int kt_admin_incremental_alter_configs(const kt_admin_ctx *c, int16_t version, kw_rd *rd, kw_wr *w)
{
	int flex = version >= 1;
	ires *r = NULL;
	int32_t n = 0;
	int8_t validate_only = 0;
	int rc = -EBADMSG;
	IARRAY(rd, flex, 4, n, r);
	for (int32_t i = 0; i < n; i++) {
		KRD_I8(rd, &r[i].type);
		KRD_STR(rd, flex, &r[i].name);
		IARRAY(rd, flex, 4, r[i].n, r[i].ops);
		for (int32_t k = 0; k < r[i].n; k++) {
			KRD_STR(rd, flex, &r[i].ops[k].name);
			KRD_I8(rd, &r[i].ops[k].op);
			KRD_STR(rd, flex, &r[i].ops[k].value);
			KRD_TAGS(rd, flex);
		}
		KRD_TAGS(rd, flex);
	}
	KRD_I8(rd, &validate_only);
	KRD_TAGS(rd, flex);

	kw_wr_i32(w, 0); /* throttle_time_ms */
	kw_wr_array(w, flex, n);
	for (int32_t i = 0; i < n; i++) {
		char msg[MSG_LEN] = "";
		int16_t err = KERR_NONE;
		for (int32_t j = 0; j < n && err == KERR_NONE; j++)
			if (j != i && r[j].type == r[i].type && kstr_eq(r[j].name, r[i].name)) {
				snprintf(msg, sizeof(msg), "Incremental alter configs request contains the same resource "
					 "more than once");
				err = KERR_INVALID_REQUEST;
			}
		for (int32_t a = 0; a < r[i].n && err == KERR_NONE; a++)
			for (int32_t b = a + 1; b < r[i].n && err == KERR_NONE; b++)
				if (kstr_eq(r[i].ops[a].name, r[i].ops[b].name)) {
					snprintf(msg, sizeof(msg), "Error due to duplicate config keys: %.*s",
						 (int)r[i].ops[a].name.len, r[i].ops[a].name.s);
					err = KERR_INVALID_REQUEST;
				}
		if (err == KERR_NONE)
			err = kt__configs_authz(c, r[i].type, r[i].name, KB_OP_ALTER_CONFIGS, msg, sizeof(msg));
		if (err != KERR_NONE) {
			/* answered below */
		} else if (r[i].type == RES_TOPIC) {
			err = alter_topic(c, &r[i], validate_only != 0, msg, sizeof(msg));
		} else if (r[i].type == RES_BROKER) {
			err = alter_broker(c, &r[i], validate_only != 0, msg, sizeof(msg));
		} else {
			snprintf(msg, sizeof(msg), "Resource type %d is not supported by kaas", r[i].type);
			err = KERR_INVALID_REQUEST;
		}
		kw_wr_i16(w, err);
		kw_wr_str(w, flex, err != KERR_NONE && msg[0] ? msg : NULL);
		kw_wr_i8(w, r[i].type);
		kw_wr_kstr(w, flex, r[i].name);
		kw_wr_tags(w, flex);
	}
	kw_wr_tags(w, flex);
	rc = KAAS_HANDLED;
	goto out;
err_parse:
	KLOG_DEBUG("admin", "IncrementalAlterConfigs v%d: malformed request (%s)", version, rd->err);
	rc = -EBADMSG;
out:
	for (int32_t i = 0; i < n; i++)
		free(r[i].ops);
	free(r);
	return rc;
}
