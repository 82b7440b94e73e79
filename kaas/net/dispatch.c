/*
 * dispatch.c — the dispatch table: the single source of what kaas serves.
 *
 * One row per API with the version range of DESIGN §8 and its first flexible
 * version (KIP-482).  The server dispatches only rows with a handler, and
 * ApiVersions advertises exactly those rows, so what is advertised is what
 * is served.  Never raise a minimum: librdkafka switches features on by
 * exact versions (docs/broker.md).
 *
 * Adding an API: write the handler (proto/api.h contract), declare it in
 * your module's header, include that header here and put its name in the
 * row.  docs/broker.md's version table is checked against `kaas --apis`.
 */
#include "kaas/net/server.h"

#include <errno.h>

#include "kaas/coord/coord.h"
#include "kaas/proto/header.h"
#include "kaas/net/handlers.h"
#include "kaas/topics/admin.h"
#include "kaas/proto/kerr.h"

const kw_api kn_dispatch_table[] = {
	/* key, min, max, flexible_from, name, handler */
	{KAAS_API_PRODUCE, 0, 7, 9, "Produce", kn_h_produce},
	{KAAS_API_FETCH, 4, 11, 12, "Fetch", kn_h_fetch},
	{KAAS_API_LIST_OFFSETS, 0, 5, 6, "ListOffsets", kn_h_list_offsets},
	{KAAS_API_METADATA, 0, 12, 9, "Metadata", kn_h_metadata},
	{KAAS_API_OFFSET_COMMIT, 0, 7, 8, "OffsetCommit", kg_h_offset_commit},
	{KAAS_API_OFFSET_FETCH, 0, 7, 6, "OffsetFetch", kg_h_offset_fetch},
	{KAAS_API_FIND_COORDINATOR, 0, 2, 3, "FindCoordinator", kg_h_find_coordinator},
	{KAAS_API_JOIN_GROUP, 0, 5, 6, "JoinGroup", kg_h_join_group},
	{KAAS_API_HEARTBEAT, 0, 3, 4, "Heartbeat", kg_h_heartbeat},
	{KAAS_API_LEAVE_GROUP, 0, 3, 4, "LeaveGroup", kg_h_leave_group},
	{KAAS_API_SYNC_GROUP, 0, 3, 4, "SyncGroup", kg_h_sync_group},
	{KAAS_API_DESCRIBE_GROUPS, 0, 4, 5, "DescribeGroups", kg_h_describe_groups},
	{KAAS_API_LIST_GROUPS, 0, 4, 3, "ListGroups", kg_h_list_groups},
	{KAAS_API_SASL_HANDSHAKE, 0, 1, -1, "SaslHandshake", kn_h_sasl_handshake},
	{KAAS_API_API_VERSIONS, 0, 3, 3, "ApiVersions", kn_h_api_versions},
	{KAAS_API_CREATE_TOPICS, 0, 4, 5, "CreateTopics", kt_h_create_topics},
	{KAAS_API_DELETE_TOPICS, 0, 3, 4, "DeleteTopics", kt_h_delete_topics},
	{KAAS_API_DELETE_RECORDS, 0, 1, 2, "DeleteRecords", kt_h_delete_records},
	{KAAS_API_INIT_PRODUCER_ID, 0, 4, 2, "InitProducerId", kg_h_init_producer_id},
	{KAAS_API_OFFSET_FOR_LEADER_EPOCH, 0, 4, 4, "OffsetForLeaderEpoch", kn_h_offset_for_leader_epoch},
	{KAAS_API_ADD_PARTITIONS_TO_TXN, 0, 1, 3, "AddPartitionsToTxn", NULL},
	{KAAS_API_ADD_OFFSETS_TO_TXN, 0, 1, 3, "AddOffsetsToTxn", NULL},
	{KAAS_API_END_TXN, 0, 1, 3, "EndTxn", NULL},
	{KAAS_API_TXN_OFFSET_COMMIT, 0, 3, 3, "TxnOffsetCommit", NULL},
	{KAAS_API_DESCRIBE_ACLS, 0, 3, 2, "DescribeAcls", kn_h_describe_acls},
	{KAAS_API_CREATE_ACLS, 0, 3, 2, "CreateAcls", kn_h_create_acls},
	{KAAS_API_DELETE_ACLS, 0, 3, 2, "DeleteAcls", kn_h_delete_acls},
	{KAAS_API_DESCRIBE_CONFIGS, 0, 4, 4, "DescribeConfigs", kt_h_describe_configs},
	{KAAS_API_ALTER_CONFIGS, 0, 1, 2, "AlterConfigs", kt_h_alter_configs},
	{KAAS_API_DESCRIBE_LOG_DIRS, 0, 4, 2, "DescribeLogDirs", kn_h_describe_log_dirs},
	{KAAS_API_SASL_AUTHENTICATE, 0, 2, 2, "SaslAuthenticate", kn_h_sasl_authenticate},
	{KAAS_API_CREATE_PARTITIONS, 0, 1, 2, "CreatePartitions", kt_h_create_partitions},
	{KAAS_API_DELETE_GROUPS, 0, 1, 2, "DeleteGroups", kg_h_delete_groups},
	{KAAS_API_INCREMENTAL_ALTER_CONFIGS, 0, 1, 1, "IncrementalAlterConfigs", kt_h_incremental_alter_configs},
	{KAAS_API_OFFSET_DELETE, 0, 0, -1, "OffsetDelete", kg_h_offset_delete},
	{KAAS_API_DESCRIBE_CLUSTER, 0, 1, 0, "DescribeCluster", kn_h_describe_cluster},
};
const size_t kn_dispatch_table_len = sizeof(kn_dispatch_table) / sizeof(kn_dispatch_table[0]);

/* ApiVersions v0-v3.  v3 carries the client's software name and version
 * (compact strings) which kaas accepts without judging them. */
int kn_h_api_versions(kb_req *req, kw_rd *body, kw_wr *resp)
{
	if (req->api_version >= 3) {
		kw_str name, version;
		KRD_STR(body, 1, &name);
		KRD_STR(body, 1, &version);
		KRD_TAGS(body, 1);
	}
	kw_api_versions_write(resp, req->api_version, KERR_NONE, kn_dispatch_table,
				kn_dispatch_table_len);
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}
