/*
 * handlers.c — the admin handlers as the dispatch table calls them, and the
 * registry's hooks into the broker's partition table.
 *
 * Everything here is glue: it takes the registry, the broker config and the
 * partition table out of the request's broker and hands them to the
 * kt_admin_* codecs (admin_*.c), which know nothing about the server.
 */
#include <errno.h>
#include <pthread.h>

#include "kaas/core/acl.h"
#include "kaas/core/dyncfg.h"
#include "kaas/core/ptable.h"
#include "kaas/topics/admin.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

static kb_config defaults;
static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;

static void defaults_init(void)
{
	kb_config_defaults(&defaults);
}

/* DeleteRecords on a partition this broker leads. */
static int16_t delete_records_via_ptable(void *arg, kw_str topic, int32_t partition, int64_t offset,
					 int64_t *low_watermark)
{
	kb_broker *b = arg;
	kb_pref ref = KAAS_PREF_INIT;
	if (!b->parts)
		return KERR_NOT_LEADER_OR_FOLLOWER;
	int16_t err = kb_ptable_get(b->parts, topic, partition, &ref);
	if (err != KERR_NONE)
		return err;
	int16_t perr = KERR_NONE;
	int rc = ks_partition_delete_records(ref.p, offset, low_watermark, &perr);
	kb_pref_put(&ref);
	if (rc < 0)
		return KERR_KAFKA_STORAGE_ERROR;
	/* A durable answer: only while the lease holds, after the write; the
	 * new log start is on the volume for a successor, so the answer is
	 * "outcome unknown", not "not done". */
	if (perr == KERR_NONE && !kb_ptable_ack_ok(b->parts))
		return KERR_REQUEST_TIMED_OUT;
	return perr;
}

static int authorize(void *authz, int op, int rtype, const char *name, int32_t len)
{
	return kb_authorize(authz, op, rtype, name, len);
}

static void ctx_of(kb_req *req, kt_admin_ctx *c)
{
	pthread_once(&defaults_once, defaults_init);
	c->topics = req->broker->topics;
	c->bcfg = &req->broker->cfg;
	c->bdefaults = &defaults;
	c->dyn = req->broker->dyn;
	c->broker_id = req->broker->id;
	c->delete_records = delete_records_via_ptable;
	c->arg = req->broker;
	c->authorize = authorize;
	c->authz = req;
}

#define HANDLER(h, impl)                                                \
	int h(kb_req *req, kw_rd *body, kw_wr *resp)              \
	{                                                               \
		kt_admin_ctx c = {0};                                 \
		if (!req->broker || !req->broker->topics)               \
			return -EINVAL;                                 \
		ctx_of(req, &c);                                        \
		return impl(&c, req->api_version, body, resp);          \
	}

HANDLER(kt_h_create_topics, kt_admin_create_topics)
HANDLER(kt_h_delete_topics, kt_admin_delete_topics)
HANDLER(kt_h_delete_records, kt_admin_delete_records)
HANDLER(kt_h_describe_configs, kt_admin_describe_configs)
HANDLER(kt_h_alter_configs, kt_admin_alter_configs)
HANDLER(kt_h_create_partitions, kt_admin_create_partitions)
HANDLER(kt_h_incremental_alter_configs, kt_admin_incremental_alter_configs)

/* ---- the registry's hooks ------------------------------------------------------------ */

static int hook_changed(void *arg, const kt_topic_info *t)
{
	kb_broker *b = arg;
	if (!b->parts)
		return -EAGAIN; /* not serving yet: the tick re-drives it */
	kb_topic_desc d = {t->name, t->id, t->partitions, t->cfg};
	int rc = kb_ptable_ensure_topic(b->parts, &d);
	/* In a cluster the controller assigns the new partitions a moment
	 * later: wait for that (bounded), so "created" means "served". */
	if (!rc) {
		int w = kb_ptable_wait_led(b->parts, t->name, 2 * b->cfg.broker_session_timeout_ms);
		if (w < 0)
			rc = w; /* CreateTopics says which partitions could not be led */
	}
	return rc;
}

/* Only the inherited defaults moved: the new config, no waiting. */
static int hook_config_changed(void *arg, const kt_topic_info *t)
{
	kb_broker *b = arg;
	if (!b->parts)
		return -EAGAIN;
	int rc = kb_ptable_set_config(b->parts, t->name, &t->cfg);
	return rc == -ENOENT ? -EAGAIN : rc; /* not in the table yet: topic_changed re-drives it */
}

static int hook_dropped(void *arg, const char *name, const char *topic_id)
{
	kb_broker *b = arg;
	(void)topic_id;
	return b->parts ? kb_ptable_drop_topic(b->parts, name) : 0;
}

void kt_topics_ptable_hooks(kb_broker *b, kt_topics_hooks *h)
{
	h->arg = b;
	h->topic_changed = hook_changed;
	h->topic_dropped = hook_dropped;
	h->config_changed = hook_config_changed;
}

static void upkeep(void *arg)
{
	kt_topics_tick(arg); /* works every refresh_ms; failures are re-driven by the next tick */
}

/* Dynamic broker configs: every upkeep period (about a second) each broker
 * re-reads the two version directories (two listings when nothing
 * changed) and applies a new snapshot's topic defaults to the registry. */
static uint64_t dyn_applied_gen;

static void dyn_upkeep(void *arg)
{
	kb_broker *b = arg;
	int rc = kb_dyncfg_poll(b->dyn);
	if (rc < 0)
		KLOG_WARN("dyncfg", "reading the dynamic broker configs: %s (the values in force stay)", sub_strerror(rc));
	uint64_t gen = kb_dyncfg_gen(b->dyn);
	if (gen == dyn_applied_gen)
		return;
	if (kt_dyn_apply(b->topics, b->dyn) >= 0)
		dyn_applied_gen = gen; /* else tried again next time */
}

int kt_topics_broker_upkeep(kb_broker *b)
{
	if (b->dyn) {
		dyn_applied_gen = kb_dyncfg_gen(b->dyn); /* the registry opened with these */
		int rc = kb_broker_upkeep_add(b, dyn_upkeep, b);
		if (rc)
			return rc;
	}
	return kb_broker_upkeep_add(b, upkeep, b->topics);
}
