/*
 * brokers.c — the brokers a client is told about (Metadata, DescribeCluster):
 * the live members of the applied leader map, each by its endpoint of the
 * listener the request arrived on.
 *
 * Kafka answers a client of listener L with every broker's L endpoint and
 * leaves out a broker that has no listener L (its partitions then answer
 * LISTENER_NOT_FOUND), so that a TLS client is never sent to a plaintext
 * port.  This broker is always listed, by the endpoint of the request's own
 * listener; without a leader map it is the only one.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/broker.h"
#include "kaas/core/leaders.h"
#include "kaas/net/handlers.h"

static void self_of(const kb_req *req, kn_bview *v)
{
	const kb_broker *b = req->broker;
	v->id = b->id;
	v->host = req->adv_host ? req->adv_host : b->host;
	v->port = req->adv_host ? req->adv_port : b->port;
	v->rack = NULL;
}

int kn__brokers_visible(const kb_req *req, const kb_leaders *m, kn_bview **out, size_t *n)
{
	const kb_broker *b = req->broker;
	size_t cap = (m ? m->nbrokers : 0) + 1, k = 0;
	kn_bview *v = calloc(cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	int self_listed = 0;
	for (size_t i = 0; m && i < m->nbrokers; i++)
		self_listed |= m->brokers[i].id == b->id;
	if (!self_listed)
		self_of(req, &v[k++]);
	for (size_t i = 0; m && i < m->nbrokers; i++) {
		const kb_lbroker *lb = &m->brokers[i];
		if (lb->id == b->id) {
			self_of(req, &v[k]);
			v[k++].rack = lb->rack[0] ? lb->rack : NULL;
			continue;
		}
		if (!lb->live || kb_lbroker_endpoint(lb, req->listener, &v[k].host, &v[k].port))
			continue;
		v[k].id = lb->id;
		v[k++].rack = lb->rack[0] ? lb->rack : NULL;
	}
	*out = v;
	*n = k;
	return 0;
}

int kn__broker_reachable(const kb_req *req, const kb_leaders *m, int32_t id)
{
	if (!m || id == req->broker->id)
		return 1;
	const kb_lbroker *lb = kb_leaders_broker(m, id);
	const char *h;
	int32_t p;
	return !lb || kb_lbroker_endpoint(lb, req->listener, &h, &p) == 0;
}
