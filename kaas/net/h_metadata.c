/*
 * h_metadata.c — Metadata v0-v12.
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
 * leader_epoch; v8 authorized operations (asked for by two flags: the principal's
 * operations on the topic and the cluster as the authorizer decides them;
 * without one, every operation of the resource type, as Kafka answers); v9 flexible encodings; v10 topic IDs (a topic may be
 * asked for by ID alone: UNKNOWN_TOPIC_ID when no topic has it); v11 drops
 * the cluster's authorized operations; v12 a topic's name may be null in the
 * answer (asked for by an unknown ID).
 *
 * Authorization (kaas/core/acl.h), as Kafka: a listing of all topics shows
 * only those the principal may DESCRIBE; a named topic it may not describe
 * answers TOPIC_AUTHORIZATION_FAILED whether or not it exists, and
 * auto-creation needs CREATE on the cluster or on the topic.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/acl.h"
#include "kaas/core/broker.h"
#include "kaas/core/dyncfg.h"
#include "kaas/net/handlers.h"
#include "kaas/core/leaders.h"
#include "kaas/core/ptable.h"
#include "kaas/topics/topics.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

#define OPS_NOT_ASKED INT32_MIN

typedef struct md_ctx {
	kb_req *req;
	int16_t v;
	int flex;
	int topic_ops; /* include_topic_authorized_operations */
	const kb_leaders *leaders; /* held for the whole answer */
} md_ctx;

static const uint8_t zero_uuid[16];

static void write_partitions(const md_ctx *mc, kw_wr *w, const char *topic, int32_t n)
{
	kb_req *req = mc->req;
	kb_broker *b = req->broker;
	int16_t v = mc->v;
	int flex = mc->flex;
	kw_wr_array(w, flex, n);
	for (int32_t p = 0; p < n; p++) {
		int32_t leader = -1, epoch = -1;
		int16_t err = kb_ptable_leader(b->parts, topic, p, &leader, &epoch);
		if (err == KERR_UNKNOWN_TOPIC_OR_PARTITION)
			err = KERR_LEADER_NOT_AVAILABLE; /* registered, not (yet) open here */
		if (err == KERR_NONE && !kn__broker_reachable(req, mc->leaders, leader)) {
			err = KERR_LISTENER_NOT_FOUND; /* its leader has no such listener */
			leader = -1;
		}
		kw_wr_i16(w, err);
		kw_wr_i32(w, p);
		kw_wr_i32(w, leader);
		if (v >= 7)
			kw_wr_i32(w, epoch);
		kw_wr_array(w, flex, 1); /* replicas: the volume is the only copy */
		kw_wr_i32(w, leader >= 0 ? leader : b->id);
		if (leader >= 0) {
			kw_wr_array(w, flex, 1);
			kw_wr_i32(w, leader);
		} else {
			kw_wr_array(w, flex, 0);
		}
		if (v >= 5)
			kw_wr_array(w, flex, 0); /* offline replicas */
		kw_wr_tags(w, flex);
	}
}

/* One topic entry.  name NULL (v12, asked for by an unknown ID) is written
 * as a null name; id is the topic's wire UUID (zeros when unknown). */
static void write_topic(const md_ctx *mc, kw_wr *w, int16_t err, const char *name, int32_t nlen,
			const uint8_t id[16], int32_t partitions)
{
	kw_wr_i16(w, err);
	kw_wr_strn(w, mc->flex, name, name ? nlen : -1);
	if (mc->v >= 10)
		kw_wr_uuid(w, id ? id : zero_uuid);
	if (mc->v >= 1)
		kw_wr_bool(w, 0); /* is_internal: kaas has no internal topics */
	if (err == KERR_NONE && name) {
		char tn[KAAS_TOPIC_NAME_MAX + 1];
		size_t l = (size_t)nlen < sizeof(tn) - 1 ? (size_t)nlen : sizeof(tn) - 1;
		memcpy(tn, name, l);
		tn[l] = 0;
		write_partitions(mc, w, tn, partitions);
	} else {
		kw_wr_array(w, mc->flex, 0);
	}
	if (mc->v >= 8)
		kw_wr_i32(w, mc->topic_ops && err == KERR_NONE
				     ? kb_authorized_ops(mc->req, KB_RES_TOPIC, name, nlen, KB_OPS_TOPIC)
				     : OPS_NOT_ASKED);
	kw_wr_tags(w, mc->flex);
}

/* A topic asked for by ID alone (v10+): the registry's topic with that ID. */
static void topic_by_id(const md_ctx *mc, kw_wr *w, const uint8_t id[16])
{
	kb_broker *b = mc->req->broker;
	kt_topic_info *list = NULL;
	size_t cnt = 0;
	if (kt_topics_list(b->topics, &list, &cnt))
		cnt = 0;
	for (size_t i = 0; i < cnt; i++) {
		if (memcmp(list[i].id_bytes, id, 16) == 0) {
			if (!kb_authorize(mc->req, KB_OP_DESCRIBE, KB_RES_TOPIC, list[i].name, -1)) {
				/* Its name is not revealed. */
				write_topic(mc, w, KERR_TOPIC_AUTHORIZATION_FAILED, mc->v >= 12 ? NULL : "", 0, id, 0);
				free(list);
				return;
			}
			write_topic(mc, w, KERR_NONE, list[i].name, (int32_t)strlen(list[i].name),
				    list[i].id_bytes, list[i].partitions);
			free(list);
			return;
		}
	}
	free(list);
	/* v10 and v11 have no null name: an empty one, as Kafka writes. */
	write_topic(mc, w, KERR_UNKNOWN_TOPIC_ID, mc->v >= 12 ? NULL : "", 0, id, 0);
}

/* One requested topic: look up, auto-create when allowed, write its entry. */
static void one_topic(const md_ctx *mc, kw_wr *w, kw_str name, int allow_auto)
{
	kb_req *req = mc->req;
	kb_broker *b = req->broker;
	char msg[256];
	kt_topic_info info;
	int16_t err = kt_topic_name_check(name.s, name.len, msg, sizeof(msg));
	if (err != KERR_NONE) {
		write_topic(mc, w, err, name.s ? name.s : "", name.len < 0 ? 0 : name.len, NULL, 0);
		return;
	}
	if (!kb_authorize(req, KB_OP_DESCRIBE, KB_RES_TOPIC, name.s, name.len)) {
		/* Whether it exists is not revealed. */
		write_topic(mc, w, KERR_TOPIC_AUTHORIZATION_FAILED, name.s, name.len, NULL, 0);
		return;
	}
	int rc = kt_topics_lookup(b->topics, name.s, name.len, &info);
	if (rc == -ENOENT && allow_auto && kb_broker_dyn(b, KB_DYN_AUTO_CREATE_TOPICS_ENABLE) &&
	    !kb_authorize_filter(req, KB_OP_CREATE, KB_RES_CLUSTER, KB_ACL_CLUSTER_NAME, -1) &&
	    !kb_authorize(req, KB_OP_CREATE, KB_RES_TOPIC, name.s, name.len)) {
		err = KERR_TOPIC_AUTHORIZATION_FAILED;
	} else if (rc == -ENOENT && allow_auto && kb_broker_dyn(b, KB_DYN_AUTO_CREATE_TOPICS_ENABLE)) {
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
	write_topic(mc, w, err, name.s, name.len, err == KERR_NONE ? info.id_bytes : NULL,
		    err == KERR_NONE ? info.partitions : 0);
}

typedef struct md_want {
	kw_str name;    /* len -1: asked for by ID (v10+) */
	uint8_t id[16];
} md_want;

int kn_h_metadata(kb_req *req, kw_rd *body, kw_wr *resp)
{
	kb_broker *b = req->broker;
	int16_t v = req->api_version;
	int flex = v >= 9;
	md_ctx mc = {req, v, flex, 0, NULL};
	int32_t n;
	md_want *want = NULL;
	KRD_ARRAY(body, flex, v >= 10 ? 17 : 2, &n);
	if (n > 0) {
		want = calloc((size_t)n, sizeof(*want));
		if (!want)
			return -ENOMEM;
		for (int32_t i = 0; i < n; i++) {
			if (v >= 10)
				KRD_UUID(body, want[i].id);
			KRD_STR(body, flex, &want[i].name);
			/* Before v10 a name is required; from v10 a null name
			 * needs a non-zero ID to stand for. */
			KRD_EXPECT(body, want[i].name.len >= 0 || (v >= 10 && memcmp(want[i].id, zero_uuid, 16)),
				   "topics[].name");
			KRD_TAGS(body, flex);
		}
	}
	int8_t allow_auto = 1, cluster_ops = 0, topic_ops = 0;
	if (v >= 4)
		KRD_I8(body, &allow_auto);
	if (v >= 8 && v <= 10)
		KRD_I8(body, &cluster_ops);
	if (v >= 8)
		KRD_I8(body, &topic_ops);
	KRD_TAGS(body, flex);
	mc.topic_ops = topic_ops != 0;

	if (v >= 3)
		kw_wr_i32(resp, 0); /* throttle_time_ms */
	kb_leaders *m = kb_ptable_leaders(b->parts);
	mc.leaders = m;
	kn_bview *bv = NULL;
	size_t nb = 0;
	if (kn__brokers_visible(req, m, &bv, &nb)) {
		kb_leaders_put(m);
		free(want);
		return -ENOMEM;
	}
	kw_wr_array(resp, flex, (int32_t)nb);
	for (size_t i = 0; i < nb; i++) {
		kw_wr_i32(resp, bv[i].id);
		kw_wr_str(resp, flex, bv[i].host);
		kw_wr_i32(resp, bv[i].port);
		if (v >= 1)
			kw_wr_str(resp, flex, bv[i].rack);
		kw_wr_tags(resp, flex);
	}
	free(bv);
	if (v >= 2)
		kw_wr_str(resp, flex, b->cluster_id[0] ? b->cluster_id : NULL);
	if (v >= 1) /* admin requests work on every broker; clients send them here */
		kw_wr_i32(resp, m && m->controller >= 0 ? m->controller : b->id);

	int all = n < 0 || (v == 0 && n == 0);
	if (all) {
		kt_topic_info *list = NULL;
		size_t cnt = 0;
		if (kt_topics_list(b->topics, &list, &cnt))
			cnt = 0;
		/* Only the topics the principal may describe, as Kafka. */
		size_t shown = 0;
		for (size_t i = 0; i < cnt; i++)
			if (kb_authorize_filter(req, KB_OP_DESCRIBE, KB_RES_TOPIC, list[i].name, -1))
				list[shown++] = list[i];
		cnt = shown;
		kw_wr_array(resp, flex, (int32_t)cnt);
		for (size_t i = 0; i < cnt; i++)
			write_topic(&mc, resp, KERR_NONE, list[i].name, (int32_t)strlen(list[i].name),
				    list[i].id_bytes, list[i].partitions);
		free(list);
	} else {
		kw_wr_array(resp, flex, n);
		for (int32_t i = 0; i < n; i++) {
			if (want[i].name.len < 0)
				topic_by_id(&mc, resp, want[i].id);
			else
				one_topic(&mc, resp, want[i].name, allow_auto);
		}
	}
	if (v >= 8 && v <= 10)
		kw_wr_i32(resp, cluster_ops ? kb_authorized_ops(req, KB_RES_CLUSTER, KB_ACL_CLUSTER_NAME, -1,
								 KB_OPS_CLUSTER)
					    : OPS_NOT_ASKED);
	kw_wr_tags(resp, flex);
	kb_leaders_put(m);
	free(want);
	return KAAS_HANDLED;
err_parse:
	free(want);
	return -EBADMSG;
}
