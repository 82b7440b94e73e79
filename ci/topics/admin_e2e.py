"""admin_e2e.py BOOTSTRAP DATA_DIR STEP — the topic admin APIs through real clients.

Driven by ci/topics/test_admin.sh against a running kaas broker.  Uses
confluent-kafka-python's AdminClient, Producer and Consumer (librdkafka), and
one DeleteRecords request built with ci/lib/kproto.py (the Debian client
versions have no delete_records call).  Every check raises on a mismatch; the
exit code is 0 only when all passed.

Steps:
  admin      create/describe/alter/grow/delete through the AdminClient
  records    produce, DeleteRecords, delete + recreate: offsets start at 0 again
  after      (after a broker restart) what was created and deleted stays so
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from kproto import Conn, Dec, Enc  # noqa: E402

BOOT, DATA, STEP = sys.argv[1], sys.argv[2], sys.argv[3]


def check(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)
    print("ok:", what)


def admin():
    return AdminClient({"bootstrap.servers": BOOT})


def create(a, topics):
    out = {}
    for name, fut in a.create_topics(topics, request_timeout=15).items():
        try:
            fut.result()
            out[name] = None
        except Exception as e:  # KafkaException carrying a KafkaError
            out[name] = e.args[0]
    return out


def describe(a, res):
    (fut,) = a.describe_configs([res]).values()
    return fut.result()


def stamp(topic):
    with open(os.path.join(DATA, topic, ".topic-id.json")) as f:
        return json.load(f)["topic_id"]


def registry(topic):
    with open(os.path.join(DATA, "__cluster", "topics", topic + ".json")) as f:
        return json.load(f)


def watermarks(topic, partition=0):
    c = Consumer({"bootstrap.servers": BOOT, "group.id": "wm-%d" % os.getpid()})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
    finally:
        c.close()


def produce(topic, n, prefix):
    p = Producer({"bootstrap.servers": BOOT, "acks": "all"})
    errs = []
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=("%s-%d" % (prefix, i)).encode(), partition=0,
                  on_delivery=lambda err, msg: errs.append(err) if err else None)
    p.flush(30)
    check(not errs, "produced %d records to %s" % (n, topic))


def consume_all(topic):
    c = Consumer({"bootstrap.servers": BOOT, "group.id": "c-%d-%f" % (os.getpid(), time.time()),
                  "enable.auto.commit": False})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
    c.assign([TopicPartition(topic, 0, lo)])
    got = []
    deadline = time.time() + 30
    while len(got) < hi - lo and time.time() < deadline:
        m = c.poll(1.0)
        if m is None or (m.error() and m.error().code() == KafkaError._PARTITION_EOF):
            continue
        if m.error():
            raise SystemExit("FAIL: consume %s: %s" % (topic, m.error()))
        got.append((m.offset(), m.value().decode()))
    c.close()
    return got


def delete_records(topic, partition, offset):
    """DeleteRecords v1, by hand: returns (low_watermark, error_code)."""
    host, port = BOOT.rsplit(":", 1)
    c = Conn(host, int(port), timeout=15, client_id="admin-e2e")
    try:
        corr = c.send(21, 1, Enc().array(1).str(topic).array(1).i32(partition).i64(offset).i32(10000).done())
        rc, body = c.recv()
    except EOFError:
        raise SystemExit("FAIL: DeleteRecords: connection closed before the response")
    finally:
        c.close()
    d = Dec(body)
    d.i32()  # throttle_time_ms
    if rc != corr or d.array() != 1:
        raise SystemExit("FAIL: DeleteRecords response header")
    d.str()
    nparts, pidx, low, err = d.array(), d.i32(), d.i64(), d.i16()
    if nparts != 1 or pidx != partition or d.remain() != 0:
        raise SystemExit("FAIL: DeleteRecords response layout")
    return low, err


def step_admin():
    a = admin()
    res = create(a, [
        NewTopic("orders", 3, 1, config={"retention.ms": "3600000", "segment.bytes": "1048576"}),
        NewTopic("rf3", 1, 3),
        NewTopic("../x", 1, 1),
        NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"}),
        NewTopic("purged", 1, 1, config={"cleanup.policy": "purge"}),
        NewTopic("badnum", 1, 1, config={"retention.ms": "soon"}),
        NewTopic("zero", 0, 1),
    ])
    check(res["orders"] is None, "create orders")
    check(res["rf3"] is None, "replication factor 3 is accepted")
    check(res["../x"].code() == KafkaError.TOPIC_EXCEPTION, "../x is an invalid topic name")
    check(not os.path.exists(os.path.join(DATA, "..", "x")), "../x touched nothing on disk")
    check(res["compacted"] is None, "cleanup.policy=compact is accepted")
    check(res["purged"].code() == KafkaError.INVALID_CONFIG and "compact, delete" in res["purged"].str(),
          "cleanup.policy=purge is refused with a message")
    check(res["badnum"].code() == KafkaError.INVALID_CONFIG, "a bad number is INVALID_CONFIG")
    check(res["zero"].code() == KafkaError.INVALID_PARTITIONS, "0 partitions is INVALID_PARTITIONS")
    again = create(a, [NewTopic("orders", 3, 1)])
    check(again["orders"].code() == KafkaError.TOPIC_ALREADY_EXISTS, "creating orders again")

    md = a.list_topics(timeout=15)
    check(len(md.topics["orders"].partitions) == 3, "orders has 3 partitions")
    check(md.topics["rf3"].partitions[0].replicas == [md.topics["rf3"].partitions[0].leader],
          "replicas = [leader]")
    check(registry("orders")["topic_id"] == stamp("orders"), "directory stamped with the registry's topic id")

    cfg = describe(a, ConfigResource("topic", "orders"))
    check(cfg["retention.ms"].value == "3600000" and not cfg["retention.ms"].is_default,
          "describe: retention.ms override")
    check(cfg["segment.bytes"].value == "1048576", "describe: segment.bytes override")
    check(cfg["max.message.bytes"].value == "1048588" and cfg["max.message.bytes"].is_default,
          "describe: max.message.bytes default")
    check(cfg["cleanup.policy"].value == "delete", "describe: cleanup.policy")

    (fut,) = a.alter_configs([ConfigResource("topic", "orders", set_config={"segment.ms": "60000"})]).values()
    fut.result()
    cfg = describe(a, ConfigResource("topic", "orders"))
    check(cfg["segment.ms"].value == "60000", "alter: segment.ms set")
    check(cfg["retention.ms"].value == "604800000" and cfg["retention.ms"].is_default,
          "alter is not incremental: retention.ms reverted to the default")
    (fut,) = a.alter_configs([ConfigResource("topic", "orders", set_config={"cleanup.policy": "purge"})]).values()
    try:
        fut.result()
        check(False, "alter cleanup.policy=purge refused")
    except Exception as e:
        check(e.args[0].code() == KafkaError.INVALID_CONFIG, "alter cleanup.policy=purge refused")

    bcfg = describe(a, ConfigResource("broker", "1"))
    check(not bcfg["num.partitions"].is_read_only and bcfg["num.partitions"].value == "1",
          "describe broker: num.partitions, a dynamic config")
    check(bcfg["broker.id"].is_read_only, "describe broker: broker.id, read-only")
    check("log.retention.ms" in bcfg and "auto.create.topics.enable" in bcfg, "describe broker: main settings")

    (fut,) = a.create_partitions([NewPartitions("orders", 5)]).values()
    fut.result()
    check(len(a.list_topics(timeout=15).topics["orders"].partitions) == 5, "orders grew to 5 partitions")
    (fut,) = a.create_partitions([NewPartitions("orders", 2)]).values()
    try:
        fut.result()
        check(False, "shrinking is refused")
    except Exception as e:
        check(e.args[0].code() == KafkaError.INVALID_PARTITIONS, "shrinking is INVALID_PARTITIONS")

    futs = a.delete_topics(["rf3", "never-existed"], operation_timeout=15)
    futs["rf3"].result()
    try:
        futs["never-existed"].result()
        check(False, "deleting a missing topic fails")
    except Exception as e:
        check(e.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, "deleting a missing topic")
    check("rf3" not in a.list_topics(timeout=15).topics, "rf3 is gone")
    check(not os.path.exists(os.path.join(DATA, "__cluster", "topics", "rf3.json")), "rf3 registry entry gone")


def step_records():
    a = admin()
    check(create(a, [NewTopic("events", 1, 1)])["events"] is None, "create events")
    old_id = stamp("events")
    produce("events", 10, "old")
    check(watermarks("events") == (0, 10), "10 records at offsets 0..9")
    low, err = delete_records("events", 0, 4)
    check(err == 0 and low == 4, "DeleteRecords to 4: low watermark 4")
    check(watermarks("events") == (4, 10), "earliest offset is 4 now")
    low, err = delete_records("events", 0, 99)
    check(err == 1, "DeleteRecords beyond the high watermark: OFFSET_OUT_OF_RANGE")
    low, err = delete_records("events", 7, 0)
    check(err == 3, "DeleteRecords on a missing partition: UNKNOWN_TOPIC_OR_PARTITION")

    for rnd in range(3):
        a.delete_topics(["events"], operation_timeout=15)["events"].result()
        check(create(a, [NewTopic("events", 1, 1)])["events"] is None, "recreate events (round %d)" % rnd)
        new_id = stamp("events")
        check(new_id != old_id, "recreated topic has a new id")
        check(watermarks("events") == (0, 0), "recreated topic starts empty at offset 0")
        produce("events", 1, "new%d" % rnd)
        got = consume_all("events")
        check(got == [(0, "new%d-0" % rnd)], "only the new record, at offset 0")
        old_id = new_id


def step_after():
    a = admin()
    md = a.list_topics(timeout=15)
    check("orders" in md.topics and len(md.topics["orders"].partitions) == 5, "orders survived the restart")
    check("rf3" not in md.topics, "rf3 stays deleted")
    cfg = describe(a, ConfigResource("topic", "orders"))
    check(cfg["segment.ms"].value == "60000", "orders' config survived the restart")
    got = consume_all("events")
    check([v for _, v in got] == ["new2-0"], "events holds only its latest incarnation's record")
    # Deleted topics' directories wait in the trash for its retention (24 h
    # by default), each saying what it was; test_admin.sh empties them.
    trash = [n for n in os.listdir(DATA) if n.startswith("~trash-")]
    names = []
    for n in trash:
        with open(os.path.join(DATA, n, ".trash.json")) as f:
            meta = json.load(f)
        check(meta["reason"] == "deleted", "%s was moved aside by a delete" % n)
        names.append(meta["name"])
    check(names.count("events") >= 2, "the deleted incarnations of events are in the trash: %s" % names)
    check("rf3" in names, "the deleted rf3 is in the trash")
    check(os.listdir(os.path.join(DATA, "__cluster", "deleted-topics")) == [], "no delete left unfinished")


{"admin": step_admin, "records": step_records, "after": step_after}[STEP]()
print("PASS", STEP)
