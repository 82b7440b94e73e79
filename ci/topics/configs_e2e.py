"""ci/topics/configs_e2e.py — Kafka 3.x's topic configuration surface with
two clients: confluent-kafka's AdminClient (librdkafka) and kafka-python's
KafkaAdminClient.  Every key Kafka 3.x accepts is accepted at create time
and by AlterConfigs, DescribeConfigs reports the values back; the values
kaas cannot honour are refused with a message that says why; and an
honoured one (message.timestamp.difference.max.ms) changes what a
producer may append.

  configs_e2e.py BROKER
"""
import sys
import time

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

BROKER = sys.argv[1]

# Every topic config of Kafka 3.x's LogConfig, with a non-default value
# Kafka accepts (the reported value is the canonical form on the right).
KAFKA3 = {
    "cleanup.policy": ("delete", "delete"),
    "compression.gzip.level": ("5", "5"),
    "compression.lz4.level": ("10", "10"),
    "compression.type": ("zstd", "zstd"),
    "compression.zstd.level": ("7", "7"),
    "delete.retention.ms": ("1000", "1000"),
    "file.delete.delay.ms": ("1000", "1000"),
    "flush.messages": ("1000", "1000"),
    "flush.ms": ("1000", "1000"),
    "follower.replication.throttled.replicas": ("0:1, 1:1", "0:1,1:1"),
    "index.interval.bytes": ("8192", "8192"),
    "leader.replication.throttled.replicas": ("*", "*"),
    "local.retention.bytes": ("1000000", "1000000"),
    "local.retention.ms": ("100000", "100000"),
    "max.compaction.lag.ms": ("100000", "100000"),
    "max.message.bytes": ("2000000", "2000000"),
    "message.downconversion.enable": ("false", "false"),
    "message.format.version": ("2.8", "2.8"),
    "message.timestamp.after.max.ms": ("9223372036854775807", "9223372036854775807"),
    "message.timestamp.before.max.ms": ("9223372036854775807", "9223372036854775807"),
    "message.timestamp.difference.max.ms": ("86400000", "86400000"),
    "message.timestamp.type": ("CreateTime", "CreateTime"),
    "min.cleanable.dirty.ratio": ("0.25", "0.25"),
    "min.compaction.lag.ms": ("10", "10"),
    "min.insync.replicas": ("2", "2"),
    "preallocate": ("true", "true"),
    "remote.log.copy.disable": ("false", "false"),
    "remote.log.delete.on.disable": ("false", "false"),
    "remote.storage.enable": ("false", "false"),
    "retention.bytes": ("100000000", "100000000"),
    "retention.ms": ("3600000", "3600000"),
    "segment.bytes": ("10000000", "10000000"),
    "segment.index.bytes": ("100000", "100000"),
    "segment.jitter.ms": ("100", "100"),
    "segment.ms": ("3600000", "3600000"),
    "unclean.leader.election.enable": ("true", "true"),
}

# Refused, and the message must say why.
REFUSED = [
    ("cleanup.policy", "purge", "compact, delete"),
    ("compression.type", "brotli", "String must be one of"),
    ("compression.type", "none", "String must be one of"),
    ("remote.storage.enable", "true", "tiered storage"),
    ("message.timestamp.before.max.ms", "3600000", "difference.max.ms"),
]


def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)


a = AdminClient({"bootstrap.servers": BROKER})


def describe(topic):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return a.describe_configs([res])[res].result()


def create(topic, config):
    return a.create_topics([NewTopic(topic, 2, 1, config=config)])[topic]


# librdkafka: create with every key at once.
create("cfg-all", {k: v for k, (v, _) in KAFKA3.items()}).result()
got = describe("cfg-all")
missing = sorted(set(KAFKA3) - set(got))
check(not missing, "DescribeConfigs does not list %s" % missing)
for k, (_, want) in KAFKA3.items():
    e = got[k]
    check(e.value == want, "%s: described %r, set %r" % (k, e.value, want))
    check(e.source == 1, "%s: source %s, want DYNAMIC_TOPIC_CONFIG" % (k, e.source))
print("ok confluent-kafka: CreateTopics with all %d Kafka 3.x topic configs; DescribeConfigs "
      "reports each back" % len(KAFKA3))

# Each refusal: an INVALID_CONFIG that names the reason.
for i, (k, v, why) in enumerate(REFUSED):
    try:
        create("cfg-refused-%d" % i, {k: v}).result()
        check(False, "%s=%s was accepted" % (k, v))
    except KafkaException as e:
        err = e.args[0]
        check(err.name() == "INVALID_CONFIG", "%s=%s: %s" % (k, v, err.name()))
        check(why in err.str(), "%s=%s: message does not say why: %s" % (k, v, err.str()))
        print("ok refused %s=%s: %s" % (k, v, err.str()))
check(not [t for t in a.list_topics(timeout=10).topics if t.startswith("cfg-refused")],
      "a refused topic was created")

# AlterConfigs (replace) with a no-op key: accepted, described, and the
# rest reverts to the broker settings.
res = ConfigResource(ConfigResource.Type.TOPIC, "cfg-all",
                     set_config={"message.format.version": "3.0-IV1", "flush.ms": "5"})
a.alter_configs([res])[res].result()
got = describe("cfg-all")
check(got["message.format.version"].value == "3.0-IV1", "alter message.format.version")
check(got["flush.ms"].value == "5" and got["flush.ms"].source == 1, "alter flush.ms")
check(got["preallocate"].value == "false" and got["preallocate"].source == 5,
      "preallocate did not revert to the default: %r" % got["preallocate"].value)
res = ConfigResource(ConfigResource.Type.TOPIC, "cfg-all", set_config={"cleanup.policy": "purge"})
try:
    a.alter_configs([res])[res].result()
    check(False, "AlterConfigs cleanup.policy=purge accepted")
except KafkaException as e:
    check("compact, delete" in e.args[0].str(), "alter refusal: %s" % e.args[0].str())
# (AlterConfigs replaces the whole set: the two overrides above stay set.)
res = ConfigResource(ConfigResource.Type.TOPIC, "cfg-all",
                     set_config={"message.format.version": "3.0-IV1", "flush.ms": "5",
                                 "cleanup.policy": "compact,delete"})
a.alter_configs([res])[res].result()
check(describe("cfg-all")["cleanup.policy"].value == "compact,delete", "alter cleanup.policy=compact,delete")
print("ok confluent-kafka: AlterConfigs with no-op keys; cleanup.policy=compact,delete by AlterConfigs")

# An honoured key: records further than message.timestamp.difference.max.ms
# from the broker's clock are refused.
create("cfg-ts", {"message.timestamp.difference.max.ms": "60000"}).result()
p = Producer({"bootstrap.servers": BROKER, "acks": "all"})
results = []
now = int(time.time() * 1000)
p.produce("cfg-ts", value=b"now", partition=0, timestamp=now,
          on_delivery=lambda err, m: results.append(("now", err)))
p.produce("cfg-ts", value=b"old", partition=1, timestamp=now - 3600 * 1000,
          on_delivery=lambda err, m: results.append(("old", err)))
p.flush(30)
r = dict(results)
check(r.get("now") is None and "now" in r, "current record refused: %s" % r.get("now"))
check(r.get("old") is not None and r["old"].name() == "INVALID_TIMESTAMP",
      "an hour-old record was not refused INVALID_TIMESTAMP: %s" % r.get("old"))
print("ok message.timestamp.difference.max.ms=60000: an hour-old record is INVALID_TIMESTAMP")

# kafka-python: the same surface through another client's codecs.
from kafka.admin import ConfigResource as KConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.admin import NewTopic as KNewTopic

ka = KafkaAdminClient(bootstrap_servers=BROKER)
ka.create_topics([KNewTopic("cfg-kp", 1, 1, topic_configs={
    "message.format.version": "2.8", "unclean.leader.election.enable": "true",
    "leader.replication.throttled.replicas": "0:1", "min.cleanable.dirty.ratio": "0.5",
    "preallocate": "true", "segment.jitter.ms": "10"})])
resp = ka.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "cfg-kp")])
entries = {}
for r in resp:
    for res_ in r.resources:
        check(res_[0] == 0, "kafka-python describe error %s" % (res_,))
        for e in res_[4]:
            entries[e[0]] = e[1]
check(entries.get("message.format.version") == "2.8", "kafka-python: %r" % entries.get("message.format.version"))
check(entries.get("leader.replication.throttled.replicas") == "0:1", "kafka-python throttled list")
check(entries.get("min.cleanable.dirty.ratio") == "0.5", "kafka-python ratio")
check(entries.get("segment.jitter.ms") == "10", "kafka-python jitter")
check(set(KAFKA3) <= set(entries), "kafka-python: missing %s" % sorted(set(KAFKA3) - set(entries)))
ka.create_topics([KNewTopic("cfg-kp-lz4", 1, 1, topic_configs={"compression.type": "lz4"})])
resp = ka.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "cfg-kp-lz4")])
entries = {e[0]: e[1] for r in resp for res_ in r.resources for e in res_[4]}
check(entries.get("compression.type") == "lz4", "kafka-python: compression.type %r" % entries.get("compression.type"))
print("ok kafka-python created a topic with compression.type=lz4 and described it back")
try:
    ka.create_topics([KNewTopic("cfg-kp-bad", 1, 1, topic_configs={"compression.type": "brotli"})])
    check(False, "kafka-python: compression.type=brotli accepted")
except Exception as e:  # kafka.errors.InvalidConfigurationError
    check("InvalidConfig" in type(e).__name__ or "INVALID_CONFIG" in str(e).upper() or "40" in str(e),
          "kafka-python refusal: %r" % e)
    print("ok kafka-python refused compression.type=brotli: %s" % e)
ka.alter_configs([KConfigResource(ConfigResourceType.TOPIC, "cfg-kp",
                                  configs={"flush.messages": "1", "message.downconversion.enable": "false"})])
resp = ka.describe_configs([KConfigResource(ConfigResourceType.TOPIC, "cfg-kp")])
entries = {e[0]: e[1] for r in resp for res_ in r.resources for e in res_[4]}
check(entries.get("flush.messages") == "1", "kafka-python alter flush.messages")
check(entries.get("message.downconversion.enable") == "false", "kafka-python alter downconversion")
ka.close()
print("ok kafka-python: create, describe and alter with no-op keys")
