/*
 * glue.c — the coordinator as the broker sees it: kg_coord_open() from the
 * broker's settings and volumes, and one kw_handler_fn per API that turns
 * a kb_req into a kg_coord_call.  Everything else in kaas/coord/ works
 * without a server, which is how the unit tests drive it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kaas/coord/coord.h"
#include "kaas/core/acl.h"
#include "kaas/core/broker.h"
#include "kaas/core/ptable.h"
#include "kaas/proto/kerr.h"

static int16_t topic_exists(void *arg, kw_str topic, int32_t partition)
{
	kb_broker *b = arg;
	char name[256];
	int32_t leader, epoch;
	if (!b->parts || topic.len < 0)
		return KERR_NONE;
	if (topic.len == 0 || topic.len >= (int32_t)sizeof(name))
		return KERR_UNKNOWN_TOPIC_OR_PARTITION; /* longer than any valid topic name */
	memcpy(name, topic.s, (size_t)topic.len);
	name[topic.len] = '\0';
	int16_t err = kb_ptable_leader(b->parts, name, partition, &leader, &epoch);
	return err == KERR_UNKNOWN_TOPIC_OR_PARTITION ? err : KERR_NONE;
}

static int ack_gate(void *arg)
{
	kb_broker *b = arg;
	return !b->parts || kb_ptable_ack_ok(b->parts);
}

static struct kb_leaders *leaders(void *arg)
{
	kb_broker *b = arg;
	return kb_ptable_leaders(b->parts);
}

/* The broker's authorizer; each call's ctx is its kb_req. */
static int authorize(void *authz, int op, int rtype, const char *name, int32_t len, int log)
{
	return log ? kb_authorize(authz, op, rtype, name, len) : kb_authorize_filter(authz, op, rtype, name, len);
}

static int authorize_any(void *authz, int op, int rtype)
{
	return kb_authorize_any(authz, op, rtype);
}

static int32_t authorized_ops(void *authz, int rtype, const char *name, int32_t len, uint32_t supported)
{
	return kb_authorized_ops(authz, rtype, name, len, supported);
}

static const kg_authorizer authorizer = {authorize, authorize_any, authorized_ops};

int kg_coord_open(kb_broker *b, kg_coord **out)
{
	kg_coord_config cfg;
	kg_coord_config_defaults(&cfg);
	cfg.broker_id = b->id;
	cfg.host = b->host;
	cfg.port = b->port;
	cfg.initial_rebalance_delay_ms = b->cfg.group_initial_rebalance_delay_ms;
	cfg.min_session_timeout_ms = b->cfg.group_min_session_timeout_ms;
	cfg.max_session_timeout_ms = b->cfg.group_max_session_timeout_ms;
	cfg.max_group_size = b->cfg.group_max_size;
	cfg.offsets_retention_ms = b->cfg.offsets_retention_minutes * 60000;
	cfg.stopping = &b->stopping;
	cfg.ack_gate = ack_gate;
	cfg.ack_gate_arg = b;
	if (b->parts && b->drain) {
		/* Run by the cluster layer (kaas does so even alone; its drain
		 * hook is set before the coordinator opens): the shards of the
		 * applied leader map say what it coordinates.  Without it (the
		 * fuzz harness) it coordinates every group, as a single broker. */
		cfg.leaders = leaders;
		cfg.leaders_arg = b;
	}
	int rc = kg_coord_create(b->cluster, &cfg, out);
	if (!rc)
		kg_coord_set_topic_check(*out, topic_exists, b);
	if (!rc && b->acl)
		kg_coord_set_authorizer(*out, &authorizer);
	return rc;
}

static void req_done(void *ctx, kw_wr *resp) { kb_req_complete((kb_req *)ctx, resp); }

/* "1.2.3.4:5678" / "[::1]:5678" -> "/1.2.3.4" / "/::1", as Kafka shows it. */
static void client_host(const char *peer, char *out, size_t len)
{
	const char *p = peer ? peer : "";
	size_t n = strlen(p);
	const char *colon = strrchr(p, ':');
	if (colon && strchr(p, ':') != colon)
		colon = p[0] == '[' ? strrchr(p, ']') : NULL; /* bare IPv6: no port */
	if (colon)
		n = (size_t)(colon - p);
	if (p[0] == '[') {
		p++;
		n = n ? n - 1 : 0;
	}
	snprintf(out, len, "/%.*s", (int)n, p);
}

static int handle(kb_req *req, kw_rd *body, kw_wr *resp)
{
	kg_coord *c = req->broker ? req->broker->coord : NULL;
	if (!c)
		return -ENOTCONN; /* the broker did not open a coordinator */
	char host[128];
	client_host(req->peer, host, sizeof(host));
	kg_coord_call call = {
		.api_key = req->api_key,
		.version = req->api_version,
		.flex = req->flex,
		.client_id = req->client_id,
		.client_host = host,
		.adv_host = req->adv_host,
		.adv_port = req->adv_port,
		.listener = req->listener,
		.done = req_done,
		.ctx = req,
	};
	return kg_coord_handle(c, &call, body, resp);
}

int kg_h_find_coordinator(kb_req *req, kw_rd *body, kw_wr *resp) { return handle(req, body, resp); }
int kg_h_join_group(kb_req *req, kw_rd *body, kw_wr *resp) { return handle(req, body, resp); }
int kg_h_heartbeat(kb_req *req, kw_rd *body, kw_wr *resp) { return handle(req, body, resp); }
int kg_h_leave_group(kb_req *req, kw_rd *body, kw_wr *resp) { return handle(req, body, resp); }
int kg_h_sync_group(kb_req *req, kw_rd *body, kw_wr *resp) { return handle(req, body, resp); }
int kg_h_describe_groups(kb_req *req, kw_rd *body, kw_wr *resp) { return handle(req, body, resp); }
int kg_h_list_groups(kb_req *req, kw_rd *body, kw_wr *resp) { return handle(req, body, resp); }
int kg_h_delete_groups(kb_req *req, kw_rd *body, kw_wr *resp) { return handle(req, body, resp); }
int kg_h_offset_commit(kb_req *req, kw_rd *body, kw_wr *resp) { return handle(req, body, resp); }
int kg_h_offset_fetch(kb_req *req, kw_rd *body, kw_wr *resp) { return handle(req, body, resp); }
int kg_h_offset_delete(kb_req *req, kw_rd *body, kw_wr *resp) { return handle(req, body, resp); }
int kg_h_init_producer_id(kb_req *req, kw_rd *body, kw_wr *resp) { return handle(req, body, resp); }
