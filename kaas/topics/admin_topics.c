/*
 * admin_topics.c — CreateTopics (v0-4), DeleteTopics (v0-3) and
 * CreatePartitions (v0-1): request decoding, per-topic results, response
 * encoding.  The work itself is the registry's (registry.c).
 *
 * Each request is decoded completely before anything is done, so a request
 * that turns out to be malformed halfway has changed nothing on the volume
 * (the connection is then closed, as Kafka does).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/topics/admin_int.h"
#include "kaas/topics/tconfig.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* Whether entry i's name appears before i (then i is not answered again),
 * and after i (then the name is in the request more than once). */
#define SAME_NAME_BEFORE(arr, i) same_name((arr), sizeof(*(arr)), 0, (i), (i))
#define SAME_NAME_AFTER(arr, i, n) same_name((arr), sizeof(*(arr)), (i) + 1, (n), (i))
static int same_name(const void *arr, size_t stride, int32_t from, int32_t to, int32_t i)
{
	/* Every element type here starts with its kw_str name. */
	const kw_str *ni = (const kw_str *)((const char *)arr + stride * (size_t)i);
	for (int32_t j = from; j < to; j++)
		if (kstr_eq(*(const kw_str *)((const char *)arr + stride * (size_t)j), *ni))
			return 1;
	return 0;
}

/* A replica list must name this broker, once: kaas keeps one copy, on the
 * shared volume, led by one broker (in a cluster the controller places it).
 * Returns a Kafka error code, or -EBADMSG when the list is truncated. */
static int check_replicas(const kt_admin_ctx *c, kw_rd *list, int32_t n, char *msg, size_t msglen)
{
	if (n <= 0) {
		snprintf(msg, msglen, "Replica assignment lists no broker for a partition.");
		return KERR_INVALID_REPLICA_ASSIGNMENT;
	}
	int err = KERR_NONE;
	for (int32_t k = 0; k < n; k++) {
		int32_t b;
		if (kw_rd_i32(list, &b))
			return -EBADMSG;
		if (err == KERR_NONE && (b != c->broker_id || k > 0)) {
			if (b != c->broker_id)
				snprintf(msg, msglen, "Replica assignment names broker %d, which is not in the cluster "
					 "(kaas stores one copy on the shared volume; its leader is broker %d).", b,
					 c->broker_id);
			else
				snprintf(msg, msglen, "Replica assignment lists broker %d more than once.", b);
			err = KERR_INVALID_REPLICA_ASSIGNMENT;
		}
	}
	return err;
}

/* What CreateTopics and CreatePartitions keep of a topic while decoding;
 * the first member of their entry types (so same_name finds the name). */
typedef struct topic_head {
	kw_str name;
	int16_t err;          /* the first error found while decoding, or KERR_NONE */
	char msg[MSG_LEN];
} topic_head;

static void keep_first_error(topic_head *h, int err, const char *msg)
{
	if (err != KERR_NONE && h->err == KERR_NONE) {
		h->err = (int16_t)err;
		snprintf(h->msg, sizeof(h->msg), "%s", msg);
	}
}

/* The error a topic's answer starts from, its message in msg: the one
 * decoding found, else INVALID_REQUEST when the name comes again later in
 * the request ("<what> request contains multiple entries for this topic."). */
static int16_t first_error(const topic_head *h, int repeated, const char *what, char *msg, size_t msglen)
{
	snprintf(msg, msglen, "%s", h->msg);
	if (h->err == KERR_NONE && repeated) {
		snprintf(msg, msglen, "%s request contains multiple entries for this topic.", what);
		return KERR_INVALID_REQUEST;
	}
	return h->err;
}

/* One topic's result: name, error code and, with_msg, the message of an error. */
static void write_result(kw_wr *w, kw_str name, int16_t err, int with_msg, const char *msg)
{
	kw_wr_kstr(w, 0, name);
	kw_wr_i16(w, err);
	if (with_msg)
		kw_wr_str(w, 0, err != KERR_NONE && msg[0] ? msg : NULL);
}

/* ---- CreateTopics ------------------------------------------------------------------ */

typedef struct ct_topic {
	topic_head h;         /* assignment errors */
	int32_t partitions;
	int16_t rf;
	kt_config_kv *cfg;
	int32_t ncfg;
} ct_topic;

int kt_admin_create_topics(const kt_admin_ctx *c, int16_t version, kw_rd *rd, kw_wr *w)
{
	ct_topic *t = NULL;
	int32_t n = 0, timeout_ms;
	int8_t validate_only = 0;
	int rc = -EBADMSG;
	ADMIN_ARRAY(rd, 16, n, t);
	/* CREATE on the cluster covers every topic; else each topic's own. */
	static const kw_str cluster_name = {KB_ACL_CLUSTER_NAME, sizeof(KB_ACL_CLUSTER_NAME) - 1};
	int cluster_create = c->authorize && kt__authorized(c, KB_OP_CREATE, KB_RES_CLUSTER, cluster_name);
	for (int32_t i = 0; i < n; i++) {
		ct_topic *x = &t[i];
		int32_t nassign;
		KRD_STR(rd, 0, &x->h.name);
		KRD_I32(rd, &x->partitions);
		KRD_I16(rd, &x->rf);
		KRD_ARRAY(rd, 0, 8, &nassign);
		if (nassign > 0 && (x->partitions != -1 || x->rf != -1))
			keep_first_error(&x->h, KERR_INVALID_REQUEST, "Both numPartitions or replicationFactor and "
					 "replicasAssignments were set. Both cannot be used at the same time.");
		for (int32_t a = 0; a < nassign; a++) {
			int32_t pidx, nb;
			char m[MSG_LEN];
			KRD_I32(rd, &pidx);
			KRD_ARRAY(rd, 0, 4, &nb);
			int e = check_replicas(c, rd, nb, m, sizeof(m));
			if (e < 0)
				goto err_parse;
			if (e == KERR_NONE && pidx != a) {
				snprintf(m, sizeof(m), "Partitions in the replica assignment must be numbered 0..%d in "
					 "order; found %d at position %d.", nassign - 1, pidx, a);
				e = KERR_INVALID_REPLICA_ASSIGNMENT;
			}
			keep_first_error(&x->h, e, m);
		}
		if (nassign > 0 && !x->h.err) {
			x->partitions = nassign;
			x->rf = 1;
		}
		ADMIN_ARRAY(rd, 4, x->ncfg, x->cfg);
		for (int32_t k = 0; k < x->ncfg; k++) {
			KRD_STR(rd, 0, &x->cfg[k].name);
			KRD_STR(rd, 0, &x->cfg[k].value);
		}
	}
	KRD_I32(rd, &timeout_ms);
	if (version >= 1)
		KRD_I8(rd, &validate_only);
	(void)timeout_ms; /* creation is synchronous: done before the response */

	if (version >= 2)
		kw_wr_i32(w, 0); /* throttle_time_ms */
	size_t cnt_off = kw_wr_reserve_i32(w);
	int32_t nres = 0;
	for (int32_t i = 0; i < n; i++) {
		ct_topic *x = &t[i];
		if (SAME_NAME_BEFORE(t, i))
			continue; /* one result per name */
		char msg[MSG_LEN];
		int16_t err = first_error(&x->h, SAME_NAME_AFTER(t, i, n), "Create topics", msg, sizeof(msg));
		if (err == KERR_NONE && !cluster_create && !kt__authorized(c, KB_OP_CREATE, KB_RES_TOPIC, x->h.name)) {
			snprintf(msg, sizeof(msg), "Authorization failed.");
			err = KERR_TOPIC_AUTHORIZATION_FAILED;
		}
		if (err == KERR_NONE) {
			kt_topic_spec spec = {x->h.name, x->partitions, x->rf, x->cfg, (size_t)x->ncfg};
			err = kt_topics_create(c->topics, &spec, validate_only != 0, NULL, msg, sizeof(msg));
		}
		write_result(w, x->h.name, err, version >= 1, msg);
		nres++;
	}
	kw_wr_patch_i32(w, cnt_off, nres);
	rc = KAAS_HANDLED;
	goto out;
err_parse:
	KLOG_DEBUG("admin", "CreateTopics v%d: malformed request (%s)", version, rd->err);
	rc = -EBADMSG;
out:
	for (int32_t i = 0; i < n; i++)
		free(t[i].cfg);
	free(t);
	return rc;
}

/* ---- DeleteTopics -------------------------------------------------------------------- */

int kt_admin_delete_topics(const kt_admin_ctx *c, int16_t version, kw_rd *rd, kw_wr *w)
{
	kw_str *names = NULL;
	int32_t n = 0, timeout_ms;
	int rc = -EBADMSG;
	ADMIN_ARRAY(rd, 2, n, names);
	for (int32_t i = 0; i < n; i++)
		KRD_STR(rd, 0, &names[i]);
	KRD_I32(rd, &timeout_ms);
	(void)timeout_ms;

	if (version >= 1)
		kw_wr_i32(w, 0);
	size_t cnt_off = kw_wr_reserve_i32(w);
	int32_t nres = 0;
	/* Answered once the registry entries are gone, as Kafka answers once
	 * the deletion is in its metadata: the controller finishes the
	 * directories after (docs/cluster.md), and a re-create waits for it. */
	char (*ids)[KAAS_TOPIC_ID_LEN + 1] = calloc(n ? (size_t)n : 1, sizeof(*ids));
	if (!ids) {
		rc = -ENOMEM;
		goto out;
	}
	for (int32_t i = 0; i < n; i++) {
		if (SAME_NAME_BEFORE(names, i))
			continue; /* asked twice: deleted once, answered once */
		char msg[MSG_LEN];
		int16_t err = KERR_TOPIC_AUTHORIZATION_FAILED;
		snprintf(msg, sizeof(msg), "Topic authorization failed.");
		if (kt__authorized(c, KB_OP_DELETE, KB_RES_TOPIC, names[i]))
			err = kt_topics_delete_start(c->topics, names[i], ids[i], msg, sizeof(msg));
		write_result(w, names[i], err, 0, msg);
		nres++;
	}
	free(ids);
	kw_wr_patch_i32(w, cnt_off, nres);
	rc = KAAS_HANDLED;
	goto out;
err_parse:
	KLOG_DEBUG("admin", "DeleteTopics v%d: malformed request (%s)", version, rd->err);
	rc = -EBADMSG;
out:
	free(names);
	return rc;
}

/* ---- CreatePartitions ------------------------------------------------------------------ */

typedef struct cp_topic {
	topic_head h;         /* assignment errors */
	int32_t count;
	int32_t nassign;      /* -1: null (no assignment given) */
} cp_topic;

int kt_admin_create_partitions(const kt_admin_ctx *c, int16_t version, kw_rd *rd, kw_wr *w)
{
	cp_topic *t = NULL;
	int32_t n = 0, timeout_ms;
	int8_t validate_only;
	int rc = -EBADMSG;
	ADMIN_ARRAY(rd, 10, n, t);
	for (int32_t i = 0; i < n; i++) {
		cp_topic *x = &t[i];
		KRD_STR(rd, 0, &x->h.name);
		KRD_I32(rd, &x->count);
		KRD_ARRAY(rd, 0, 4, &x->nassign);
		for (int32_t a = 0; a < x->nassign; a++) {
			int32_t nb;
			char m[MSG_LEN];
			KRD_ARRAY(rd, 0, 4, &nb);
			int e = check_replicas(c, rd, nb, m, sizeof(m));
			if (e < 0)
				goto err_parse;
			keep_first_error(&x->h, e, m);
		}
	}
	KRD_I32(rd, &timeout_ms);
	KRD_I8(rd, &validate_only);
	(void)timeout_ms;

	kw_wr_i32(w, 0); /* throttle_time_ms */
	size_t cnt_off = kw_wr_reserve_i32(w);
	int32_t nres = 0;
	for (int32_t i = 0; i < n; i++) {
		cp_topic *x = &t[i];
		if (SAME_NAME_BEFORE(t, i))
			continue;
		char msg[MSG_LEN];
		int16_t err = first_error(&x->h, SAME_NAME_AFTER(t, i, n), "Create partitions", msg, sizeof(msg));
		if (err == KERR_NONE && !kt__authorized(c, KB_OP_ALTER, KB_RES_TOPIC, x->h.name)) {
			snprintf(msg, sizeof(msg), "Topic authorization failed.");
			err = KERR_TOPIC_AUTHORIZATION_FAILED;
		}
		if (err == KERR_NONE && x->nassign >= 0) {
			/* An assignment must cover exactly the new partitions. */
			kt_topic_info info;
			if (kt_topics_lookup(c->topics, x->h.name.s, x->h.name.len, &info) == 0 &&
			    x->count > info.partitions && x->nassign != x->count - info.partitions) {
				snprintf(msg, sizeof(msg), "Increasing the number of partitions by %d but %d assignments "
					 "provided.", x->count - info.partitions, x->nassign);
				err = KERR_INVALID_REPLICA_ASSIGNMENT;
			}
		}
		if (err == KERR_NONE)
			err = kt_topics_add_partitions(c->topics, x->h.name, x->count, validate_only != 0, msg,
							 sizeof(msg));
		write_result(w, x->h.name, err, 1, msg);
		nres++;
	}
	kw_wr_patch_i32(w, cnt_off, nres);
	rc = KAAS_HANDLED;
	goto out;
err_parse:
	KLOG_DEBUG("admin", "CreatePartitions v%d: malformed request (%s)", version, rd->err);
	rc = -EBADMSG;
out:
	free(t);
	return rc;
}
