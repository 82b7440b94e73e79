/*
 * admin.h — the admin API handlers (CreateTopics, DeleteTopics,
 * CreatePartitions, DescribeConfigs, AlterConfigs, DeleteRecords) and the
 * glue that lets the topic registry drive the broker's partition table.
 *
 * Dispatch-table rows (none of these versions is flexible):
 *   CreateTopics      19  0-4  kaas_h_create_topics
 *   DeleteTopics      20  0-3  kaas_h_delete_topics
 *   DeleteRecords     21  0-1  kaas_h_delete_records
 *   DescribeConfigs   32  0-2  kaas_h_describe_configs
 *   AlterConfigs      33  0-1  kaas_h_alter_configs
 *   CreatePartitions  37  0-1  kaas_h_create_partitions
 *
 * The kaas_h_* functions follow the handler contract of proto/api.h: they
 * use req->broker->topics, req->broker->parts and req->broker->cfg, always
 * answer KAAS_HANDLED (they may block on the volume: they run on a worker),
 * and return -EBADMSG for a request that cannot be parsed.
 *
 * The kaas_admin_* functions are the same handlers with their dependencies
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
int kaas_h_create_topics(kaas_req *req, kaas_rd *body, kaas_wr *resp);
int kaas_h_delete_topics(kaas_req *req, kaas_rd *body, kaas_wr *resp);
int kaas_h_delete_records(kaas_req *req, kaas_rd *body, kaas_wr *resp);
int kaas_h_describe_configs(kaas_req *req, kaas_rd *body, kaas_wr *resp);
int kaas_h_alter_configs(kaas_req *req, kaas_rd *body, kaas_wr *resp);
int kaas_h_create_partitions(kaas_req *req, kaas_rd *body, kaas_wr *resp);

/* Hooks for kaas_topics_options.hooks that drive b->parts:
 * topic_changed -> kaas_ptable_ensure_topic, topic_dropped ->
 * kaas_ptable_drop_topic.  b->parts may be set after the registry opens but
 * before the first create/delete. */
void kaas_topics_ptable_hooks(kaas_broker *b, kaas_topics_hooks *h);

/* Registers the registry's periodic upkeep (kaas_topics_tick on b->topics)
 * with the broker's upkeep (kaas_broker_upkeep_add).  Call once after
 * b->topics is open, before serving.  0 or -errno. */
int kaas_topics_broker_upkeep(kaas_broker *b);

/* ---- the same, with dependencies passed in (link module `topics`) -------------- */

typedef struct kaas_admin_ctx {
	kaas_topics *topics;
	const kaas_config *bcfg;         /* broker settings for DescribeConfigs BROKER */
	const kaas_config *bdefaults;    /* kaas_config_defaults(): which settings were set */
	int32_t broker_id;
	/* DeleteRecords on one partition this broker leads: advance its log
	 * start offset (offset -1 = high watermark).  Returns a Kafka error code;
	 * *low_watermark gets the new log start offset on success. */
	int16_t (*delete_records)(void *arg, kaas_str topic, int32_t partition, int64_t offset,
				  int64_t *low_watermark);
	void *arg;
} kaas_admin_ctx;

int kaas_admin_create_topics(const kaas_admin_ctx *c, int16_t version, kaas_rd *body, kaas_wr *resp);
int kaas_admin_delete_topics(const kaas_admin_ctx *c, int16_t version, kaas_rd *body, kaas_wr *resp);
int kaas_admin_delete_records(const kaas_admin_ctx *c, int16_t version, kaas_rd *body, kaas_wr *resp);
int kaas_admin_describe_configs(const kaas_admin_ctx *c, int16_t version, kaas_rd *body, kaas_wr *resp);
int kaas_admin_alter_configs(const kaas_admin_ctx *c, int16_t version, kaas_rd *body, kaas_wr *resp);
int kaas_admin_create_partitions(const kaas_admin_ctx *c, int16_t version, kaas_rd *body, kaas_wr *resp);

#endif
