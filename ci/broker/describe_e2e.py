#!/usr/bin/python3
"""ci/broker/describe_e2e.py BROKER DATA_DIR — DescribeCluster and
DescribeLogDirs against a real broker.  DescribeLogDirs at every version
(v0-v1 classic, v2-v4 flexible, built with ci/lib/kproto.py) and through
kafka-python's own protocol classes and client (v1): the one log
directory, the partitions led here, and each partition's size equal to the
bytes of its segment files on the volume.  DescribeCluster v0 and v1
(flexible only, which no Debian client sends): cluster id, this broker as
the only broker and the controller, a bad endpoint type refused by name.
IncrementalAlterConfigs v0 and v1: SET, DELETE, validate_only, read back
through confluent-kafka and kafka-python; APPEND, broker settings, unknown
keys and topics and duplicate keys refused without a change."""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from kproto import Conn, Dec, Enc, record_batch  # noqa: E402

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

broker, data = sys.argv[1], sys.argv[2]
host, port = broker.rsplit(":", 1)
TOPIC = "describe-me"


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


admin = AdminClient({"bootstrap.servers": broker})
for f in admin.create_topics([NewTopic(TOPIC, 3, 1), NewTopic("describe-other", 1, 1)]).values():
    f.result(30)

c = Conn(host, int(port))
for part, count in ((0, 5), (2, 12)):
    for i in range(count):
        body = Enc().str(None).i16(-1).i32(10000).array(1).str(TOPIC).array(1).i32(part) \
            .bytes(record_batch([b"r%d" % i] * (i + 1))).done()
        c.send(0, 3, body)
        d = Dec(c.recv()[1])
        d.array(), d.str(), d.array(), d.i32()
        if d.i16():
            fail("produce to partition %d failed" % part)


def on_disk(p):
    return sum(os.path.getsize(f) for f in glob.glob(os.path.join(data, TOPIC, str(p), "*.log")))


want = {p: on_disk(p) for p in range(3)}
if not want[0] or not want[2] or want[1]:
    fail("unexpected segment sizes on the volume: %s" % want)


def log_dirs(v, topics):
    flex = v >= 2
    e = Enc(flex)
    if topics is None:
        e.array(None)
    else:
        e.array(len(topics))
        for name, parts in topics:
            e.str(name).array(len(parts))
            for p in parts:
                e.i32(p)
            e.tags()
    e.tags()
    c.send(35, v, e.done(), flex=flex)
    _, body = c.recv(flex_header=flex)
    d = Dec(body, flex)
    d.i32()
    if v >= 3 and d.i16():
        fail("DescribeLogDirs v%d: top-level error" % v)
    out = {}
    ndirs = d.array()
    if ndirs != 1:
        fail("DescribeLogDirs v%d: %d log dirs" % (v, ndirs))
    if d.i16():
        fail("DescribeLogDirs v%d: dir error" % v)
    path = d.str()
    for _ in range(d.array()):
        name = d.str()
        for _ in range(d.array()):
            idx, size, lag, future = d.i32(), d.i64(), d.i64(), d.i8()
            d.tags()
            if lag != 0 or future:
                fail("DescribeLogDirs v%d: lag %d future %d" % (v, lag, future))
            out[(name, idx)] = size
        d.tags()
    if v >= 4 and (d.i64(), d.i64()) != (-1, -1):
        fail("DescribeLogDirs v4: volume bytes are not 'unknown'")
    d.tags()
    d.tags()
    if d.remain():
        fail("DescribeLogDirs v%d: %d bytes left over" % (v, d.remain()))
    return path, out


for v in range(5):
    path, got = log_dirs(v, None)
    if os.path.realpath(path) != os.path.realpath(data):
        fail("DescribeLogDirs v%d: log dir %s, want %s" % (v, path, data))
    for p in range(3):
        if got.get((TOPIC, p)) != want[p]:
            fail("DescribeLogDirs v%d: %s/%d size %s, on the volume %d" % (v, TOPIC, p, got.get((TOPIC, p)), want[p]))
    if ("describe-other", 0) not in got:
        fail("DescribeLogDirs v%d: all topics did not include describe-other" % v)
    _, some = log_dirs(v, [(TOPIC, [2, 7]), ("no-such-topic", [0])])
    if some != {(TOPIC, 2): want[2]}:
        fail("DescribeLogDirs v%d with a topic list: %s" % (v, some))
print("ok DescribeLogDirs v0-v4 (kproto): sizes equal the segment bytes on the volume %s" % want)

# kafka-python: its protocol classes and client, v1.
from kafka.admin import KafkaAdminClient  # noqa: E402
from kafka.protocol.api import Request, Response  # noqa: E402
from kafka.protocol.types import Array, Boolean, Int16, Int32, Int64, Schema, String  # noqa: E402


class DescribeLogDirsResponse_v1(Response):
    API_KEY = 35
    API_VERSION = 1
    SCHEMA = Schema(('throttle_time_ms', Int32),
                    ('log_dirs', Array(('error_code', Int16), ('log_dir', String('utf-8')),
                                       ('topics', Array(('name', String('utf-8')),
                                                        ('partitions', Array(('partition_index', Int32),
                                                                             ('partition_size', Int64),
                                                                             ('offset_lag', Int64),
                                                                             ('is_future_key', Boolean))))))))


class DescribeLogDirsRequest_v1(Request):
    API_KEY = 35
    API_VERSION = 1
    RESPONSE_TYPE = DescribeLogDirsResponse_v1
    SCHEMA = Schema(('topics', Array(('topic', String('utf-8')), ('partitions', Array(Int32)))))


ka = KafkaAdminClient(bootstrap_servers=broker, api_version=(2, 3, 0))
fut = ka._send_request_to_node(ka._client.least_loaded_node(), DescribeLogDirsRequest_v1(topics=[(TOPIC, [0, 1, 2])]))
ka._wait_for_futures([fut])
r = fut.value
(err, ldir, topics), = r.log_dirs
sizes = {(t, p[0]): p[1] for t, ps in topics for p in ps}
if err or sizes != {(TOPIC, p): want[p] for p in range(3)}:
    fail("kafka-python DescribeLogDirs v1: %s %s" % (err, sizes))
ka.close()
print("ok DescribeLogDirs v1 (kafka-python's classes and client): the same sizes")

# DescribeCluster v0 and v1 (flexible).
cluster_id = json.load(open(os.path.join(data, "__cluster", "cluster-id.json"))).get("cluster_id")
for v in (0, 1):
    for etype in ((1, 2, 3) if v else (None,)):
        e = Enc(True).i8(1)
        if v:
            e.i8(etype)
        c.send(60, v, e.tags().done(), flex=True)
        d = Dec(c.recv(flex_header=True)[1], True)
        d.i32()
        err, msg = d.i16(), d.str()
        if v:
            if d.i8() != etype:
                fail("DescribeCluster v1 endpoint type not echoed")
        if etype == 3:
            if err != 42 or "endpoint_type" not in (msg or ""):
                fail("DescribeCluster v1 endpoint type 3: error %d %r" % (err, msg))
            continue
        cid, ctrl = d.str(), d.i32()
        brokers = []
        for _ in range(d.array()):
            brokers.append((d.i32(), d.str(), d.i32(), d.str()))
            d.tags()
        ops = d.i32()
        d.tags()
        if err or not cluster_id or cid != cluster_id or len(brokers) != 1:
            fail("DescribeCluster v%d: err %d cluster %s brokers %s" % (v, err, cid, brokers))
        bid, bhost, bport, rack = brokers[0]
        if ctrl != bid or bport != int(port) or bhost != host or rack is not None or ops != -2**31:
            fail("DescribeCluster v%d: %s controller %d ops %d" % (v, brokers, ctrl, ops))
print("ok DescribeCluster v0-v1: cluster id, one broker that is the controller, bad endpoint type refused")

# IncrementalAlterConfigs v0 (classic) and v1 (flexible), raw; the effect
# read back through confluent-kafka's and kafka-python's describe_configs.
from confluent_kafka.admin import ConfigResource  # noqa: E402
from kafka.admin import ConfigResource as KPResource, ConfigResourceType  # noqa: E402


def incremental(v, resources, validate_only=False):
    flex = v >= 1
    e = Enc(flex).array(len(resources))
    for rtype, name, ops in resources:
        e.i8(rtype).str(name).array(len(ops))
        for key, op, val in ops:
            e.str(key).i8(op).str(val).tags()
        e.tags()
    e.i8(1 if validate_only else 0).tags()
    c.send(44, v, e.done(), flex=flex)
    d = Dec(c.recv(flex_header=flex)[1], flex)
    d.i32()
    out = []
    for _ in range(d.array()):
        err, msg, rtype, name = d.i16(), d.str(), d.i8(), d.str()
        d.tags()
        out.append((err, msg))
    d.tags()
    if d.remain():
        fail("IncrementalAlterConfigs v%d: %d bytes left over" % (v, d.remain()))
    return out


def ck_configs():
    res = admin.describe_configs([ConfigResource("topic", TOPIC)])
    (_, f), = res.items()
    return {k: (e.value, e.source) for k, e in f.result(30).items()}


def kp_configs():
    ka = KafkaAdminClient(bootstrap_servers=broker, api_version=(2, 3, 0))
    r = ka.describe_configs([KPResource(ConfigResourceType.TOPIC, TOPIC)])
    ka.close()
    (_, _, _, _, entries), = r[0].resources
    return {e[0]: e[1] for e in entries}


DYN = 1  # DYNAMIC_TOPIC_CONFIG
(err, msg), = incremental(0, [(2, TOPIC, [("retention.ms", 0, "3600000")])])
if err or ck_configs()["retention.ms"] != ("3600000", DYN):
    fail("IncrementalAlterConfigs v0 SET retention.ms: %d %s %s" % (err, msg, ck_configs().get("retention.ms")))
(err, msg), = incremental(1, [(2, TOPIC, [("max.message.bytes", 0, "2000")])])
kp = kp_configs()
if err or kp.get("max.message.bytes") != "2000" or kp.get("retention.ms") != "3600000":
    fail("IncrementalAlterConfigs v1 SET kept the other override? %d %s %s" % (err, msg, kp))
(err, msg), = incremental(1, [(2, TOPIC, [("retention.ms", 0, "1")])], validate_only=True)
if err or ck_configs()["retention.ms"] != ("3600000", DYN):
    fail("validate_only changed the topic: %d %s" % (err, msg))
(err, msg), = incremental(1, [(2, TOPIC, [("retention.ms", 1, None)])])
cc = ck_configs()
if err or cc["retention.ms"][1] == DYN or cc["max.message.bytes"] != ("2000", DYN):
    fail("IncrementalAlterConfigs DELETE retention.ms: %d %s %s" % (err, msg, cc))
print("ok IncrementalAlterConfigs v0/v1: SET, SET keeping other overrides, validate_only, DELETE "
      "(read back by confluent-kafka and kafka-python)")
refusals = incremental(1, [(2, TOPIC, [("cleanup.policy", 2, "compact")]),
                           (4, "", [("log.retention.ms", 0, "5"), ("num.io.threads", 0, "2")]),
                           (2, "describe-other", [("no.such.config", 0, "1")]),
                           (2, "no-such-topic", [("retention.ms", 0, "1")])])
(e1, m1), (e2, m2), (e3, m3), (e4, m4) = refusals
if e1 != 40 or "cleanup.policy" not in (m1 or ""):
    fail("APPEND: %d %s" % (e1, m1))
if e2 != 42 or "Cannot update these configs dynamically: [num.io.threads]" not in (m2 or ""):
    fail("a broker config that needs a restart was not refused by name: %d %s" % (e2, m2))
if e3 != 40 or e4 != 3:
    fail("unknown config %d %s / unknown topic %d %s" % (e3, m3, e4, m4))
(e5, m5), = incremental(0, [(2, TOPIC, [("retention.ms", 0, "5"), ("retention.ms", 1, None)])])
if e5 != 42:
    fail("duplicate keys: %d %s" % (e5, m5))
if ck_configs()["max.message.bytes"] != ("2000", DYN) or ck_configs()["retention.ms"][1] == DYN:
    fail("a refused request changed the topic")
(bf,) = admin.describe_configs([ConfigResource("broker", "1")]).values()
if bf.result(30)["log.retention.ms"].source != 5:
    fail("the refused broker request changed log.retention.ms (dynamic, in the same resource)")
print("ok IncrementalAlterConfigs refusals: APPEND, broker settings by name, unknown key and topic, "
      "duplicate keys; nothing changed")
