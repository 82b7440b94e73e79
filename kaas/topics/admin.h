/*
 * admin.h — the admin API handlers (CreateTopics, DeleteTopics,
 * CreatePartitions, DescribeConfigs, AlterConfigs, DeleteRecords) and the
 * glue that lets the topic registry drive the broker's partition table.
 *
 * Dispatch-table rows (none of these versions is flexible):
 *   CreateTopics      19  0-4  kt_h_create_topics
 *   DeleteTopics      20  0-3  kt_h_delete_topics
 *   DeleteRecords     21  0-1  kt_h_delete_records
 *   DescribeConfigs   32  0-2  kt_h_describe_configs
 *   AlterConfigs      33  0-1  kt_h_alter_configs
 *   CreatePartitions  37  0-1  kt_h_create_partitions
 *   IncrementalAlterConfigs 44 0-1 kt_h_incremental_alter_configs (admin_incremental.c)
 *
 * The kt_h_* functions follow the handler contract of proto/api.h: they
 * use req->broker->topics, req->broker->parts and req->broker->cfg, always
 * answer KAAS_HANDLED (they may block on the volume: they run on a worker),
 * and return -EBADMSG for a request that cannot be parsed.
 *
 * The kt_admin_* functions are the same handlers with their dependencies
 * passed in (a registry, the broker config, a way to reach a led partition),
 * so they can be exercised without a running server.
 */
#ifndef KAAS_TOPICS_ADMIN_H
#define KAAS_TOPICS_ADMIN_H

#include <stdint.h>

#include "kaas/proto/api.h"
#include "kaas/proto/buf.h"
#include "kaas/core/broker.h"
#include "kaas/topics/topics.h"

/* ---- the handlers (link module `admin`) --------------------------------------- */
int kt_h_create_topics(kb_req *req, kw_rd *body, kw_wr *resp);
int kt_h_delete_topics(kb_req *req, kw_rd *body, kw_wr *resp);
int kt_h_delete_records(kb_req *req, kw_rd *body, kw_wr *resp);
int kt_h_describe_configs(kb_req *req, kw_rd *body, kw_wr *resp);
int kt_h_alter_configs(kb_req *req, kw_rd *body, kw_wr *resp);
int kt_h_create_partitions(kb_req *req, kw_rd *body, kw_wr *resp);
int kt_h_incremental_alter_configs(kb_req *req, kw_rd *body, kw_wr *resp);

/* Hooks for kt_topics_options.hooks that drive b->parts:
 * topic_changed -> kb_ptable_ensure_topic, topic_dropped ->
 * kb_ptable_drop_topic.  b->parts may be set after the registry opens but
 * before the first create/delete. */
void kt_topics_ptable_hooks(kb_broker *b, kt_topics_hooks *h);

/* Registers the registry's periodic upkeep (kt_topics_tick on b->topics)
 * with the broker's upkeep (kb_broker_upkeep_add), preceded, when b->dyn is
 * set, by the poll of the dynamic broker configs and the application of a
 * changed snapshot (kt_dyn_apply).  Call once after b->topics is open,
 * before serving.  0 or -errno. */
int kt_topics_broker_upkeep(kb_broker *b);

/* Applies the dynamic config snapshot of d (the topic defaults and
 * num.partitions in force) to the registry: every topic that does not
 * override a changed key gets its new effective config, open partitions at
 * once.  The number of topics changed or -errno.  NULL-safe. */
int kt_dyn_apply(kt_topics *reg, struct kb_dyncfg *d);

/* ---- the same, with dependencies passed in (link module `topics`) -------------- */

typedef struct kt_admin_ctx {
	kt_topics *topics;
	const kb_config *bcfg;         /* broker settings for DescribeConfigs BROKER */
	const kb_config *bdefaults;    /* kb_config_defaults(): which settings were set */
	struct kb_dyncfg *dyn;         /* dynamic broker configs (kaas/core/dyncfg.h); NULL:
	                                  broker resources are read-only */
	int32_t broker_id;
	/* DeleteRecords on one partition this broker leads: advance its log
	 * start offset (offset -1 = high watermark).  Returns a Kafka error code;
	 * *low_watermark gets the new log start offset on success. */
	int16_t (*delete_records)(void *arg, kw_str topic, int32_t partition, int64_t offset,
				  int64_t *low_watermark);
	void *arg;
	/* The authorizer (kaas/core/acl.h): 1 when the request may do op on the
	 * resource.  NULL: everything is allowed. */
	int (*authorize)(void *authz, int op, int rtype, const char *name, int32_t len);
	void *authz;
} kt_admin_ctx;

int kt_admin_create_topics(const kt_admin_ctx *c, int16_t version, kw_rd *body, kw_wr *resp);
int kt_admin_delete_topics(const kt_admin_ctx *c, int16_t version, kw_rd *body, kw_wr *resp);
int kt_admin_delete_records(const kt_admin_ctx *c, int16_t version, kw_rd *body, kw_wr *resp);
int kt_admin_describe_configs(const kt_admin_ctx *c, int16_t version, kw_rd *body, kw_wr *resp);
int kt_admin_alter_configs(const kt_admin_ctx *c, int16_t version, kw_rd *body, kw_wr *resp);
int kt_admin_create_partitions(const kt_admin_ctx *c, int16_t version, kw_rd *body, kw_wr *resp);
int kt_admin_incremental_alter_configs(const kt_admin_ctx *c, int16_t version, kw_rd *body, kw_wr *resp);

#endif
