/*
 * h_admin.c — admin APIs that describe the broker itself: DescribeCluster
 * (v0-v1) and DescribeLogDirs (v0-v4).
 *
 * DescribeCluster answers what Metadata says about brokers: the live
 * members of the applied leader map and the controller (every broker
 * answers admin requests); it needs DESCRIBE on the cluster
 * (CLUSTER_AUTHORIZATION_FAILED, no brokers), and the authorized operations
 * are the principal's when asked for with an authorizer, INT32_MIN ("not
 * provided") without one, as Kafka answers.  DescribeLogDirs needs
 * DESCRIBE on the cluster too.
 *
 * DescribeLogDirs reports one log directory, the data volume, with the
 * partitions this broker leads and their sizes summed from the segment
 * metadata in memory (ks_partition_size): no file is read.  offset_lag is
 * 0 and is_future_key false: there are no replicas to catch up.  The
 * volume's total and usable bytes (v4) are -1 (unknown): a substrate that
 * is not a kernel mount has no statvfs, and a shared volume's free space is
 * everyone's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/acl.h"
#include "kaas/core/leaders.h"
#include "kaas/core/ptable.h"
#include "kaas/net/handlers.h"
#include "kaas/proto/kerr.h"
#include "kaas/topics/topics.h"

#define ADMIN_INT32_MIN (-2147483647 - 1)

int kn_h_describe_cluster(kb_req *req, kw_rd *body, kw_wr *resp)
{
	kb_broker *b = req->broker;
	int8_t include_ops = 0, endpoint_type = 1;
	KRD_I8(body, &include_ops);
	if (req->api_version >= 1)
		KRD_I8(body, &endpoint_type);
	KRD_TAGS(body, 1);
	kw_wr_i32(resp, 0); /* throttle_time_ms */
	int denied = !kb_authorize_cluster(req, KB_OP_DESCRIBE);
	if (denied) {
		kw_wr_i16(resp, KERR_CLUSTER_AUTHORIZATION_FAILED);
		kw_wr_str(resp, 1, "Cluster authorization failed.");
	} else if (endpoint_type != 1 && endpoint_type != 2) {
		kw_wr_i16(resp, KERR_INVALID_REQUEST);
		kw_wr_str(resp, 1, "endpoint_type must be 1 (brokers) or 2 (controllers)");
	} else {
		kw_wr_i16(resp, KERR_NONE);
		kw_wr_str(resp, 1, NULL);
	}
	if (req->api_version >= 1)
		kw_wr_i8(resp, endpoint_type);
	kw_wr_str(resp, 1, b->cluster_id);
	if (denied) { /* reveals nothing */
		kw_wr_i32(resp, -1);
		kw_wr_array(resp, 1, 0);
		kw_wr_i32(resp, ADMIN_INT32_MIN);
		kw_wr_tags(resp, 1);
		return KAAS_HANDLED;
	}
	/* The brokers and the controller as Metadata lists them: the live
	 * members of the applied leader map, this broker always among them. */
	kb_leaders *m = kb_ptable_leaders(b->parts);
	kw_wr_i32(resp, m && m->controller >= 0 ? m->controller : b->id);
	kn_bview *bv = NULL;
	size_t nb = 0;
	if (kn__brokers_visible(req, m, &bv, &nb)) {
		kb_leaders_put(m);
		return -ENOMEM;
	}
	kw_wr_array(resp, 1, (int32_t)nb);
	for (size_t i = 0; i < nb; i++) {
		kw_wr_i32(resp, bv[i].id);
		kw_wr_str(resp, 1, bv[i].host);
		kw_wr_i32(resp, bv[i].port);
		kw_wr_str(resp, 1, bv[i].rack);
		kw_wr_tags(resp, 1);
	}
	free(bv);
	kb_leaders_put(m);
	kw_wr_i32(resp, include_ops && kb_authorizer_on(req)
				? kb_authorized_ops(req, KB_RES_CLUSTER, KB_ACL_CLUSTER_NAME, -1, KB_OPS_CLUSTER)
				: ADMIN_INT32_MIN);
	kw_wr_tags(resp, 1);
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}

/* One topic of the answer: its name and the led partitions with sizes. */
typedef struct dl_topic {
	char name[KAAS_TOPIC_NAME_MAX + 1];
	int32_t n;
	int32_t *idx;
	int64_t *size;
} dl_topic;

/* Fills t with the partitions of `want` (all when n < 0) that are led here. */
static int collect(kb_broker *b, dl_topic *t, int32_t nparts, const int32_t *want, int32_t nwant)
{
	int32_t cap = nwant >= 0 ? nwant : nparts;
	t->idx = calloc(cap > 0 ? (size_t)cap : 1, sizeof(int32_t));
	t->size = calloc(cap > 0 ? (size_t)cap : 1, sizeof(int64_t));
	if (!t->idx || !t->size)
		return -ENOMEM;
	kw_str name = {t->name, (int32_t)strlen(t->name)};
	for (int32_t i = 0; i < cap; i++) {
		int32_t p = nwant >= 0 ? want[i] : i;
		if (p < 0 || p >= nparts)
			continue;
		kb_pref ref = KAAS_PREF_INIT;
		if (kb_ptable_get(b->parts, name, p, &ref) != KERR_NONE)
			continue; /* not led here: its leader reports it */
		t->idx[t->n] = p;
		t->size[t->n] = ks_partition_size(ref.p);
		t->n++;
		kb_pref_put(&ref);
	}
	return 0;
}

static void write_log_dirs(kb_req *req, kw_wr *w, const dl_topic *ts, size_t nt)
{
	int16_t v = req->api_version;
	int flex = v >= 2;
	kw_wr_i32(w, 0); /* throttle_time_ms */
	if (!kb_authorize_cluster(req, KB_OP_DESCRIBE)) {
		/* As Kafka: v3+ say why, older versions get no directories. */
		if (v >= 3)
			kw_wr_i16(w, KERR_CLUSTER_AUTHORIZATION_FAILED);
		kw_wr_array(w, flex, 0);
		kw_wr_tags(w, flex);
		return;
	}
	if (v >= 3)
		kw_wr_i16(w, KERR_NONE);
	kw_wr_array(w, flex, 1);
	kw_wr_i16(w, KERR_NONE);
	kw_wr_str(w, flex, req->broker->cfg.data_url);
	int32_t shown = 0;
	for (size_t i = 0; i < nt; i++)
		shown += ts[i].n > 0;
	kw_wr_array(w, flex, shown);
	for (size_t i = 0; i < nt; i++) {
		if (ts[i].n == 0)
			continue;
		kw_wr_str(w, flex, ts[i].name);
		kw_wr_array(w, flex, ts[i].n);
		for (int32_t k = 0; k < ts[i].n; k++) {
			kw_wr_i32(w, ts[i].idx[k]);
			kw_wr_i64(w, ts[i].size[k]);
			kw_wr_i64(w, 0);    /* offset_lag */
			kw_wr_bool(w, 0); /* is_future_key */
			kw_wr_tags(w, flex);
		}
		kw_wr_tags(w, flex);
	}
	if (v >= 4) {
		kw_wr_i64(w, -1); /* total_bytes: unknown */
		kw_wr_i64(w, -1); /* usable_bytes */
	}
	kw_wr_tags(w, flex);
	kw_wr_tags(w, flex);
}

int kn_h_describe_log_dirs(kb_req *req, kw_rd *body, kw_wr *resp)
{
	kb_broker *b = req->broker;
	int flex = req->api_version >= 2;
	dl_topic *ts = NULL;
	size_t nt = 0;
	int rc = -ENOMEM;
	int32_t n;
	int32_t *want = NULL;
	KRD_ARRAY(body, flex, 3, &n);
	if (n < 0) {
		kt_topic_info *list = NULL;
		size_t cnt = 0;
		if (kt_topics_list(b->topics, &list, &cnt))
			goto out;
		ts = calloc(cnt ? cnt : 1, sizeof(*ts));
		if (!ts) {
			free(list);
			goto out;
		}
		for (size_t i = 0; i < cnt; i++) {
			snprintf(ts[nt].name, sizeof(ts[nt].name), "%s", list[i].name);
			if (collect(b, &ts[nt++], list[i].partitions, NULL, -1)) {
				free(list);
				goto out;
			}
		}
		free(list);
	} else {
		ts = calloc(n ? (size_t)n : 1, sizeof(*ts));
		if (!ts)
			goto out;
		for (int32_t i = 0; i < n; i++) {
			kw_str name;
			int32_t np;
			KRD_STR(body, flex, &name);
			KRD_ARRAY(body, flex, 4, &np);
			free(want);
			want = calloc(np > 0 ? (size_t)np : 1, sizeof(int32_t));
			if (!want)
				goto out;
			for (int32_t k = 0; k < np; k++)
				KRD_I32(body, &want[k]);
			KRD_TAGS(body, flex);
			kt_topic_info info;
			if (name.len <= 0 || kt_topics_lookup(b->topics, name.s, name.len, &info))
				continue; /* unknown topics are left out, as Kafka does */
			snprintf(ts[nt].name, sizeof(ts[nt].name), "%s", info.name);
			if (collect(b, &ts[nt++], info.partitions, want, np > 0 ? np : 0))
				goto out;
		}
	}
	KRD_TAGS(body, flex);
	write_log_dirs(req, resp, ts, nt);
	rc = KAAS_HANDLED;
	goto out;
err_parse:
	rc = -EBADMSG;
out:
	for (size_t i = 0; ts && i < nt; i++) {
		free(ts[i].idx);
		free(ts[i].size);
	}
	free(ts);
	free(want);
	return rc;
}
