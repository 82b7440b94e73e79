/*
 * h_metadata.c — Metadata v0-v7.
 *
 * The broker list is every live broker of the cluster (endpoint from its
 * heartbeat) and every partition's leader and leader epoch come from the
 * leader map the cluster applied (kaas/core/leaders.h); replicas = ISR =
 * [leader], since the shared volume is the only copy.  Without a map (a
 * table nobody drives) this broker is the only one.  Topics that do not
 * exist are created when auto.create.topics.enable is on and the request
 * allows it (v4+ has a flag; older versions always allow it), as Kafka does.
 *
 * Version differences: v1 rack, controller_id, is_internal, and a null topic
 * array meaning "all" (v0: an empty array means all); v2 cluster_id; v3
 * throttle_time_ms; v4 allow_auto_topic_creation; v5 offline_replicas; v7
 * leader_epoch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/broker.h"
#include "kaas/net/handlers.h"
#include "kaas/core/leaders.h"
#include "kaas/core/ptable.h"
#include "kaas/topics/topics.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

static void write_partitions(kb_req *req, kw_wr *w, const char *topic, int32_t n)
{
	kb_broker *b = req->broker;
	int16_t v = req->api_version;
	kw_wr_array(w, 0, n);
	for (int32_t p = 0; p < n; p++) {
		int32_t leader = -1, epoch = -1;
		int16_t err = kb_ptable_leader(b->parts, topic, p, &leader, &epoch);
		if (err == KERR_UNKNOWN_TOPIC_OR_PARTITION)
			err = KERR_LEADER_NOT_AVAILABLE; /* registered, not (yet) open here */
		kw_wr_i16(w, err);
		kw_wr_i32(w, p);
		kw_wr_i32(w, leader);
		if (v >= 7)
			kw_wr_i32(w, epoch);
		kw_wr_array(w, 0, 1); /* replicas: the volume is the only copy */
		kw_wr_i32(w, leader >= 0 ? leader : b->id);
		if (leader >= 0) {
			kw_wr_array(w, 0, 1);
			kw_wr_i32(w, leader);
		} else {
			kw_wr_array(w, 0, 0);
		}
		if (v >= 5)
			kw_wr_array(w, 0, 0); /* offline replicas */
	}
}

static void write_topic(kb_req *req, kw_wr *w, int16_t err, const char *name, int32_t nlen,
			int32_t partitions)
{
	kw_wr_i16(w, err);
	kw_wr_strn(w, 0, name, nlen);
	if (req->api_version >= 1)
		kw_wr_bool(w, 0); /* is_internal: kaas has no internal topics */
	if (err == KERR_NONE) {
		char tn[KAAS_TOPIC_NAME_MAX + 1];
		size_t l = (size_t)nlen < sizeof(tn) - 1 ? (size_t)nlen : sizeof(tn) - 1;
		memcpy(tn, name, l);
		tn[l] = 0;
		write_partitions(req, w, tn, partitions);
	} else {
		kw_wr_array(w, 0, 0);
	}
}

/* One requested topic: look up, auto-create when allowed, write its entry. */
static void one_topic(kb_req *req, kw_wr *w, kw_str name, int allow_auto)
{
	kb_broker *b = req->broker;
	char msg[256];
	kt_topic_info info;
	int16_t err = kt_topic_name_check(name.s, name.len, msg, sizeof(msg));
	if (err != KERR_NONE) {
		write_topic(req, w, err, name.s, name.len < 0 ? 0 : name.len, 0);
		return;
	}
	int rc = kt_topics_lookup(b->topics, name.s, name.len, &info);
	if (rc == -ENOENT && allow_auto && b->cfg.auto_create_topics) {
		err = kt_topics_auto_create(b->topics, name, &info);
		if (err == KERR_NONE)
			KLOG_INFO("metadata", "%s: created topic %.*s (auto.create.topics.enable)", req->peer,
				  name.len, name.s);
	} else if (rc == -ENOENT) {
		err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
	} else if (rc == -EINVAL) {
		err = KERR_INVALID_TOPIC_EXCEPTION;
	} else if (rc) {
		KLOG_WARN("metadata", "looking up topic %.*s: %s", name.len, name.s, strerror(-rc));
		err = KERR_LEADER_NOT_AVAILABLE; /* retriable: the volume hiccuped */
	}
	write_topic(req, w, err, name.s, name.len, err == KERR_NONE ? info.partitions : 0);
}

int kn_h_metadata(kb_req *req, kw_rd *body, kw_wr *resp)
{
	kb_broker *b = req->broker;
	int16_t v = req->api_version;
	int32_t n;
	kw_str *names = NULL;
	KRD_ARRAY(body, 0, 2, &n);
	if (n > 0) {
		names = calloc((size_t)n, sizeof(*names));
		if (!names)
			return -ENOMEM;
		for (int32_t i = 0; i < n; i++)
			KRD_STR(body, 0, &names[i]);
	}
	int8_t allow_auto = 1;
	if (v >= 4)
		KRD_I8(body, &allow_auto);

	if (v >= 3)
		kw_wr_i32(resp, 0); /* throttle_time_ms */
	/* As Kafka: this broker by the endpoint of the listener the request
	 * arrived on.  The others by the endpoint they registered. */
	const char *self_host = req->adv_host ? req->adv_host : b->host;
	int32_t self_port = req->adv_host ? req->adv_port : b->port;
	kb_leaders *m = kb_ptable_leaders(b->parts);
	int self_listed = 0;
	size_t nb = 0;
	for (size_t i = 0; m && i < m->nbrokers; i++) {
		nb += m->brokers[i].live || m->brokers[i].id == b->id;
		self_listed |= m->brokers[i].id == b->id;
	}
	kw_wr_array(resp, 0, (int32_t)(nb + !self_listed));
	if (!self_listed) {
		kw_wr_i32(resp, b->id);
		kw_wr_str(resp, 0, self_host);
		kw_wr_i32(resp, self_port);
		if (v >= 1)
			kw_wr_strn(resp, 0, NULL, -1); /* rack */
	}
	for (size_t i = 0; m && i < m->nbrokers; i++) {
		const kb_lbroker *lb = &m->brokers[i];
		if (!lb->live && lb->id != b->id)
			continue;
		kw_wr_i32(resp, lb->id);
		kw_wr_str(resp, 0, lb->id == b->id ? self_host : lb->host);
		kw_wr_i32(resp, lb->id == b->id ? self_port : lb->port);
		if (v >= 1)
			kw_wr_strn(resp, 0, lb->rack[0] ? lb->rack : NULL, lb->rack[0] ? (int32_t)strlen(lb->rack) : -1);
	}
	if (v >= 2)
		kw_wr_str(resp, 0, b->cluster_id[0] ? b->cluster_id : NULL);
	if (v >= 1) /* admin requests work on every broker; clients send them here */
		kw_wr_i32(resp, m && m->controller >= 0 ? m->controller : b->id);
	kb_leaders_put(m);

	int all = n < 0 || (v == 0 && n == 0);
	if (all) {
		kt_topic_info *list = NULL;
		size_t cnt = 0;
		if (kt_topics_list(b->topics, &list, &cnt))
			cnt = 0;
		kw_wr_array(resp, 0, (int32_t)cnt);
		for (size_t i = 0; i < cnt; i++)
			write_topic(req, resp, KERR_NONE, list[i].name, (int32_t)strlen(list[i].name),
				    list[i].partitions);
		free(list);
	} else {
		kw_wr_array(resp, 0, n);
		for (int32_t i = 0; i < n; i++)
			one_topic(req, resp, names[i], allow_auto);
	}
	free(names);
	return KAAS_HANDLED;
err_parse:
	free(names);
	return -EBADMSG;
}
