/*
 * config_docs.c — what DescribeConfigs v3+ says about each config when a
 * client asks for documentation: its type (Kafka's ConfigType codes) and one
 * sentence on what it does *in kaas*.  Where kaas accepts a setting only
 * for compatibility (there is no replication, the volume is the only copy),
 * the sentence says so, so that a person reading an admin tool's output is
 * not misled.
 */
#include <stddef.h>
#include <string.h>

#include "kaas/topics/admin_int.h"

typedef struct cdoc {
	const char *name;
	int8_t type;
	const char *doc;
} cdoc;

enum { T_BOOLEAN = 1, T_STRING = 2, T_INT = 3, T_LONG = 5, T_DOUBLE = 6, T_LIST = 7 };

/* Sorted by name (strcmp): looked up by bsearch. */
static const cdoc docs[] = {
	{"advertised.listeners", T_STRING, "The endpoint of each listener that Metadata and FindCoordinator give to clients connected to it."},
	{"auto.create.topics.enable", T_BOOLEAN, "Whether a Metadata request for a topic that does not exist creates it with the broker's defaults; dynamic: AlterConfigs on the broker resource changes it at run time."},
	{"broker.id", T_INT, "This broker's id in the cluster; brokers sharing a volume must have distinct ids."},
	{"cleanup.policy", T_LIST, "What happens to old segments: 'delete' removes them by retention.ms and retention.bytes; 'compact' keeps the latest record per key."},
	{"compression.gzip.level", T_INT, "The gzip level used when the topic's compression.type makes the broker recompress."},
	{"compression.lz4.level", T_INT, "The lz4 level used when the topic's compression.type makes the broker recompress."},
	{"compression.type", T_STRING, "The codec batches are stored with; 'producer' keeps what the producer sent.  On a broker resource: the default of topics that do not set one; dynamic: AlterConfigs on the broker resource changes it at run time."},
	{"compression.zstd.level", T_INT, "The zstd level used when the topic's compression.type makes the broker recompress."},
	{"connections.max.idle.ms", T_LONG, "Connections idle for longer than this are closed by the broker."},
	{"default.replication.factor", T_INT, "Accepted for compatibility: the shared volume is the only copy, so every partition has one replica."},
	{"delete.retention.ms", T_LONG, "How long a tombstone (a record with a null value) is kept in a compacted topic after its segment was cleaned."},
	{"file.delete.delay.ms", T_LONG, "Accepted for compatibility: segments past retention are unlinked once nothing references them."},
	{"flush.messages", T_LONG, "Accepted for compatibility: every acknowledged batch is already fsynced (group commit)."},
	{"flush.ms", T_LONG, "Accepted for compatibility: every acknowledged batch is already fsynced (group commit)."},
	{"follower.replication.throttled.replicas", T_LIST, "Accepted for compatibility: there are no followers to throttle."},
	{"group.initial.rebalance.delay.ms", T_INT, "How long a new consumer group waits for more members before its first rebalance."},
	{"group.max.session.timeout.ms", T_INT, "The longest session timeout a group member may ask for."},
	{"group.max.size", T_INT, "The most members a consumer group may have."},
	{"group.min.session.timeout.ms", T_INT, "The shortest session timeout a group member may ask for."},
	{"index.interval.bytes", T_INT, "How many bytes of log lie between two entries of the sparse offset and time indexes."},
	{"kaas.cluster.dir", T_STRING, "Where the cluster's control files live (heartbeats, controller, assignment, registry, groups) when not beside the data."},
	{"leader.replication.throttled.replicas", T_LIST, "Accepted for compatibility: there are no followers to throttle."},
	{"listeners", T_STRING, "The addresses the broker accepts connections on, one per listener name."},
	{"local.retention.bytes", T_LONG, "Accepted for compatibility: kaas has no tiered storage."},
	{"local.retention.ms", T_LONG, "Accepted for compatibility: kaas has no tiered storage."},
	{"log.cleaner.dedupe.buffer.size", T_LONG, "Memory of the log cleaner's key map (24 bytes a key); a log with more dirty keys is cleaned in several passes."},
	{"log.cleaner.enable", T_BOOLEAN, "Whether the broker runs the log cleaner for topics with cleanup.policy=compact."},
	{"log.cleaner.io.max.bytes.per.second", T_LONG, "Bytes a second the log cleaner reads and writes together; the default means no limit."},
	{"log.cleanup.policy", T_LIST, "The broker's default cleanup.policy for topics that do not set one; dynamic: AlterConfigs on the broker resource changes it at run time."},
	{"log.dirs", T_STRING, "The data volume: a path or an nfs:// URL shared by every broker of the cluster."},
	{"log.index.interval.bytes", T_INT, "The broker's default index.interval.bytes; dynamic: AlterConfigs on the broker resource changes it at run time."},
	{"log.message.timestamp.type", T_STRING, "The broker's default message.timestamp.type; dynamic: AlterConfigs on the broker resource changes it at run time."},
	{"log.retention.bytes", T_LONG, "The broker's default retention.bytes; dynamic: AlterConfigs on the broker resource changes it at run time."},
	{"log.retention.check.interval.ms", T_LONG, "How often the leader of each partition applies retention."},
	{"log.retention.ms", T_LONG, "The broker's default retention.ms; dynamic: AlterConfigs on the broker resource changes it at run time."},
	{"log.roll.ms", T_LONG, "The broker's default segment.ms; dynamic: AlterConfigs on the broker resource changes it at run time."},
	{"log.segment.bytes", T_INT, "The broker's default segment.bytes; dynamic: AlterConfigs on the broker resource changes it at run time."},
	{"max.compaction.lag.ms", T_LONG, "The longest a record may stay uncompacted in a compacted topic before its segment is cleaned whatever the dirty ratio."},
	{"max.connections", T_INT, "Client connections open at once on this broker; at the limit new ones wait in the listen backlog. Dynamic."},
	{"max.connections.per.ip", T_INT, "Client connections open at once from one address; a further one is closed when accepted. Dynamic."},
	{"max.message.bytes", T_INT, "The largest record batch the topic accepts, after compression."},
	{"message.downconversion.enable", T_BOOLEAN, "Accepted for compatibility: kaas serves only the v2 record format and never down-converts."},
	{"message.format.version", T_STRING, "Accepted for compatibility: batches are always stored in the v2 record format."},
	{"message.max.bytes", T_INT, "The broker's default max.message.bytes; dynamic: AlterConfigs on the broker resource changes it at run time."},
	{"message.timestamp.after.max.ms", T_LONG, "How far in the future a record's CreateTime may be before the batch is refused."},
	{"message.timestamp.before.max.ms", T_LONG, "How far in the past a record's CreateTime may be before the batch is refused."},
	{"message.timestamp.difference.max.ms", T_LONG, "How far a record's CreateTime may be from the broker's clock before the batch is refused."},
	{"message.timestamp.type", T_STRING, "Whether records keep the producer's timestamp (CreateTime) or get the broker's at append (LogAppendTime)."},
	{"min.cleanable.dirty.ratio", T_DOUBLE, "The share of a compacted log not yet cleaned above which the leader cleans it."},
	{"min.compaction.lag.ms", T_LONG, "The shortest time a record stays uncompacted in a compacted topic."},
	{"min.insync.replicas", T_INT, "Accepted for compatibility: an acknowledged batch is durable on the shared volume, the only copy."},
	{"num.io.threads", T_INT, "The worker threads that run the requests which may block on the volume."},
	{"num.partitions", T_INT, "The partition count of topics created without one; dynamic: AlterConfigs on the broker resource changes it at run time."},
	{"offsets.retention.minutes", T_INT, "How long the committed offsets of an empty consumer group are kept."},
	{"preallocate", T_BOOLEAN, "Accepted for compatibility: segment files are not preallocated."},
	{"remote.log.copy.disable", T_BOOLEAN, "Accepted for compatibility: kaas has no tiered storage."},
	{"remote.log.delete.on.disable", T_BOOLEAN, "Accepted for compatibility: kaas has no tiered storage."},
	{"remote.storage.enable", T_BOOLEAN, "Accepted for compatibility: kaas has no tiered storage."},
	{"retention.bytes", T_LONG, "The most bytes a partition keeps before its oldest segments are deleted; -1 is no limit."},
	{"retention.ms", T_LONG, "How long a segment is kept after its newest record before it is deleted; -1 is forever."},
	{"segment.bytes", T_INT, "The size at which a partition's active segment is closed and a new one started."},
	{"segment.index.bytes", T_INT, "Accepted for compatibility: index files grow as needed."},
	{"segment.jitter.ms", T_LONG, "A random amount taken off segment.ms per segment, so that partitions do not roll together."},
	{"segment.ms", T_LONG, "The age at which a partition's active segment is closed and a new one started, even if it is not full."},
	{"socket.request.max.bytes", T_INT, "The largest request the broker reads; a bigger one closes the connection."},
	{"transaction.max.timeout.ms", T_INT, "The longest transaction timeout a producer may ask for (transactions are refused by kaas today)."},
	{"transactional.id.expiration.ms", T_INT, "How long an idle transactional id is remembered (transactions are refused by kaas today)."},
	{"unclean.leader.election.enable", T_BOOLEAN, "Accepted for compatibility: a new leader always reads the one copy on the volume, so no election is unclean."},
};

static int cmp(const void *k, const void *e) { return strcmp(k, ((const cdoc *)e)->name); }

const char *kt__config_doc(const char *name, int8_t *type)
{
	const cdoc *d = bsearch(name, docs, sizeof(docs) / sizeof(docs[0]), sizeof(docs[0]), cmp);
	*type = d ? d->type : 0; /* 0: UNKNOWN */
	return d ? d->doc : NULL;
}

int kt__config_docs_sorted(void)
{
	for (size_t i = 1; i < sizeof(docs) / sizeof(docs[0]); i++)
		if (strcmp(docs[i - 1].name, docs[i].name) >= 0)
			return 0;
	return 1;
}
