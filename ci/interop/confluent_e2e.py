"""confluent_e2e.py — confluent-kafka-python (librdkafka) against kaas, in
phases that test_confluent.sh runs around broker restarts and crashes.

  produce BOOT TOPIC RUN T0 FROM TO OUT [--idempotent] [--codec=C] [--slow] [--inflight=N]
        records FROM..TO-1 of spec.py with acks=all; every acknowledged record
        is appended to OUT at once ({"i", "p", "o"}); exits 1 on any
        delivery error.  --slow paces the records so that a crash can land
        in the middle.
  consume BOOT TOPIC OUT
        Consumer.assign() every partition from the beginning to the high
        watermark; writes spec.py's consumed lines.
  times BOOT TOPIC T0 OUT ID...
        offsets_for_times() for the times of records ID... in every partition.
  admin1 BOOT DATA / admin2 BOOT DATA
        AdminClient and the effect of topic configs, before / after a restart.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from confluent_kafka import (TIMESTAMP_CREATE_TIME, Consumer, KafkaError, KafkaException,  # noqa: E402
                             Producer, TopicPartition)
from confluent_kafka.admin import (AdminClient, ConfigResource, ConfigSource, NewPartitions,  # noqa: E402
                                  NewTopic)

import spec  # noqa: E402
from spec import check, ok  # noqa: E402


def opt(args, name, default=None):
    for a in args:
        if a.startswith("--" + name + "="):
            return a.split("=", 1)[1]
    return default


def produce(boot, topic, run, t0, first, end, out, args):
    conf = {"bootstrap.servers": boot, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": 180000, "enable.idempotence": "--idempotent" in args,
            "compression.codec": opt(args, "codec", "none"), **spec.tls_librdkafka()}
    if opt(args, "inflight"):
        conf["max.in.flight.requests.per.connection"] = int(opt(args, "inflight"))
    p = Producer(conf)
    errors = []
    f = open(out, "a")

    def dr(err, msg, i):
        if err:
            errors.append((i, str(err)))
            return
        f.write(json.dumps({"i": i, "p": msg.partition(), "o": msg.offset()}) + "\n")
        f.flush()

    slow = "--slow" in args
    for i in range(first, end):
        k, v, h, ts = spec.record(run, i, t0)
        while True:
            try:
                p.produce(topic, key=k, value=v, headers=h or None, timestamp=ts,
                          on_delivery=lambda err, msg, i=i: dr(err, msg, i))
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
        if slow and i % 100 == 99:
            p.poll(0.02)
    left = p.flush(200)
    f.close()
    check(left == 0, "%d records still undelivered after flush" % left)
    check(not errors, "delivery errors: %s" % errors[:5])
    ok("%s: %d records acknowledged (acks=all%s, %s)" % (topic, end - first, ", idempotent" if conf[
        "enable.idempotence"] else "", conf["compression.codec"]))


def consume(boot, topic, out):
    c = Consumer({"bootstrap.servers": boot, "group.id": "interop-assign", "enable.auto.commit": False,
                  "enable.partition.eof": True, "check.crcs": True, **spec.tls_librdkafka()})
    md = c.list_topics(topic, timeout=30)
    parts = sorted(md.topics[topic].partitions)
    hw = {}
    for p in parts:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        check(lo == 0, "partition %d starts at %d" % (p, lo))
        hw[p] = hi
    c.assign([TopicPartition(topic, p, 0) for p in parts])
    got, done = [], set(p for p in parts if hw[p] == 0)
    deadline = time.time() + 120
    while len(done) < len(parts) and time.time() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                if m.offset() >= hw[m.partition()]:
                    done.add(m.partition())
                continue
            check(False, "consume: %s" % m.error())
        tt, ts = m.timestamp()
        check(tt == TIMESTAMP_CREATE_TIME, "p%d o%d: timestamp type %d" % (m.partition(), m.offset(), tt))
        got.append({"p": m.partition(), "o": m.offset(), "k": spec.hx(m.key()), "v": spec.hx(m.value()),
                    "h": [[n, spec.hx(v)] for n, v in (m.headers() or [])], "ts": ts})
    c.close()
    check(len(done) == len(parts), "did not reach the high watermarks %s" % hw)
    with open(out, "w") as f:
        for g in got:
            f.write(json.dumps(g) + "\n")
    ok("%s: consumed %d records from %d partitions with assign()" % (topic, len(got), len(parts)))


def times(boot, topic, t0, out, ids):
    c = Consumer({"bootstrap.servers": boot, "group.id": "interop-times"})
    parts = sorted(c.list_topics(topic, timeout=30).topics[topic].partitions)
    with open(out, "w") as f:
        for i in ids:
            res = c.offsets_for_times([TopicPartition(topic, p, t0 + i) for p in parts], timeout=30)
            for tp in res:
                check(tp.error is None, "offsets_for_times: %s" % tp.error)
                f.write(json.dumps({"ts": t0 + i, "p": tp.partition, "o": tp.offset}) + "\n")
    c.close()
    ok("%s: offsets_for_times for %d times" % (topic, len(ids)))


# ---- admin: beyond ci/topics (validate_only, several topics per request, what
# configs do to produce/fetch, partitions added to a live topic) -----------------

def results(futs):
    out = {}
    for name, fut in futs.items():
        try:
            fut.result()
            out[name] = None
        except KafkaException as e:
            out[name] = e.args[0]
    return out


def describe(a, resources):
    out = {}
    for res, fut in a.describe_configs(resources, request_timeout=30).items():
        out[res.name] = fut.result()
    return out


def source(entry):
    s = entry.source
    return s.value if isinstance(s, ConfigSource) else s


def produce_one(boot, topic, value, partition=-1):
    p = Producer({"bootstrap.servers": boot, "acks": "all", "message.timeout.ms": 30000})
    res = []
    p.produce(topic, value=value, partition=partition,
              on_delivery=lambda err, msg: res.append((err, msg.partition(), msg.offset())))
    p.flush(60)
    return res[0]


def admin1(boot, data):
    a = AdminClient({"bootstrap.servers": boot})
    # validate_only: checked, nothing written.
    r = results(a.create_topics([NewTopic("ad-dry", 4, 1, config={"retention.ms": "1000"})],
                                validate_only=True, request_timeout=30))
    check(r["ad-dry"] is None, "validate_only create of ad-dry: %s" % r["ad-dry"])
    check("ad-dry" not in a.list_topics(timeout=30).topics, "validate_only created ad-dry")
    check(not os.path.exists(os.path.join(data, "ad-dry")), "validate_only made a directory")
    r = results(a.create_topics([NewTopic("ad-dry", 1, 1, config={"retention.ms": "x"})], validate_only=True))
    check(r["ad-dry"] is not None and r["ad-dry"].code() == KafkaError.INVALID_CONFIG,
          "validate_only still validates configs")
    ok("create_topics(validate_only=True) validates and creates nothing")

    # Several topics in one request, each with its own outcome.
    r = results(a.create_topics([
        NewTopic("ad-small", 2, 1, config={"max.message.bytes": "2000"}),
        NewTopic("ad-seg", 1, 1, config={"segment.bytes": "16384", "retention.ms": "-1"}),
        NewTopic("ad-grow", 1, 1),
        NewTopic("ad-bad.name/x", 1, 1),
    ], request_timeout=30))
    check(r["ad-small"] is None and r["ad-seg"] is None and r["ad-grow"] is None, "create three: %s" % r)
    check(r["ad-bad.name/x"].code() == KafkaError.TOPIC_EXCEPTION, "the invalid one alone fails")
    md = a.list_topics(timeout=30)
    for name, n in (("ad-small", 2), ("ad-seg", 1), ("ad-grow", 1)):
        check(name in md.topics and len(md.topics[name].partitions) == n, "%s has %d partitions" % (name, n))
        for pm in md.topics[name].partitions.values():
            check(pm.leader == 1 and pm.replicas == [1] and pm.isrs == [1], "%s: leader/replicas/isr" % name)
    ok("one CreateTopics request: three created, the invalid name refused alone")

    # Describe several resources at once; sources say what is overridden.
    d = describe(a, [ConfigResource("topic", "ad-small"), ConfigResource("topic", "ad-seg"),
                     ConfigResource("broker", "1")])
    small, seg, broker = d["ad-small"], d["ad-seg"], d["1"]
    check(small["max.message.bytes"].value == "2000" and
          source(small["max.message.bytes"]) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value,
          "ad-small max.message.bytes override with source DYNAMIC_TOPIC_CONFIG")
    check(source(small["segment.bytes"]) == ConfigSource.DEFAULT_CONFIG.value and
          small["segment.bytes"].is_default, "ad-small segment.bytes is the default")
    check(seg["segment.bytes"].value == "16384" and seg["retention.ms"].value == "-1", "ad-seg overrides")
    check(broker["socket.request.max.bytes"].is_read_only, "broker configs are read-only")
    ok("describe_configs of two topics and the broker in one request, with sources")

    # max.message.bytes is enforced by the broker.
    err, _, _ = produce_one(boot, "ad-small", b"x" * 5000)
    check(err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE,
          "a 5000-byte record to a max.message.bytes=2000 topic: %s" % err)
    err, _, off = produce_one(boot, "ad-small", b"y" * 500, partition=1)
    check(err is None and off == 0, "a small record is accepted: %s" % err)
    (fut,) = a.alter_configs([ConfigResource("topic", "ad-small", set_config={"max.message.bytes": "100000"})
                              ]).values()
    fut.result()
    err, _, off = produce_one(boot, "ad-small", b"z" * 5000, partition=1)
    check(err is None and off == 1, "after alter_configs the 5000-byte record is accepted: %s" % err)
    ok("max.message.bytes: MSG_SIZE_TOO_LARGE, then accepted after alter_configs")

    # segment.bytes=16384: many segments; consumed across them after the restart (admin2).
    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 2, "batch.size": 4096})
    for i in range(2000):
        p.produce("ad-seg", key=b"s%d" % i, value=b"seg-%06d-" % i + b"." * 200)
    check(p.flush(60) == 0, "produce to ad-seg")
    segs = [n for n in os.listdir(os.path.join(data, "ad-seg", "0")) if n.endswith(".log")]
    check(len(segs) >= 10, "segment.bytes=16384 gave %d segment files for ~440 KB" % len(segs))
    ok("segment.bytes=16384 rolls %d segments" % len(segs))

    # Partitions added to a live topic are produced to and fetched from.
    err, _, _ = produce_one(boot, "ad-grow", b"before", partition=0)
    check(err is None, "produce to ad-grow")
    (fut,) = a.create_partitions([NewPartitions("ad-grow", 3)]).values()
    fut.result()
    for part in (1, 2):
        deadline = time.time() + 30
        while True:
            err, gp, off = produce_one(boot, "ad-grow", b"new-%d" % part, partition=part)
            if err is None or time.time() > deadline:
                break
            time.sleep(0.5)  # the producer's metadata may not know the partition yet
        check(err is None and gp == part and off == 0, "produce to new partition %d: %s" % (part, err))
    ok("create_partitions: the new partitions take records at offset 0")

    # Deleting two topics in one request; auto-create brings one back empty.
    r = results(a.delete_topics(["ad-dry-never", "ad-grow"], operation_timeout=30))
    check(r["ad-grow"] is None and r["ad-dry-never"].code() == KafkaError.UNKNOWN_TOPIC_OR_PART,
          "delete two: %s" % r)
    err, gp, off = produce_one(boot, "ad-grow", b"reborn")
    check(err is None and off == 0, "auto-created ad-grow after delete starts at 0: %s %s" % (err, off))
    check(len(a.list_topics(timeout=30).topics["ad-grow"].partitions) == 3,
          "the auto-created topic has num.partitions (3) partitions")
    ok("delete_topics of two names; auto-create recreates one empty")


def admin2(boot, data):
    a = AdminClient({"bootstrap.servers": boot})
    d = describe(a, [ConfigResource("topic", "ad-small"), ConfigResource("topic", "ad-seg")])
    check(d["ad-small"]["max.message.bytes"].value == "100000", "altered config survived the restart")
    check(d["ad-seg"]["segment.bytes"].value == "16384", "ad-seg config survived the restart")
    c = Consumer({"bootstrap.servers": boot, "group.id": "interop-admin", "enable.auto.commit": False})
    c.assign([TopicPartition("ad-seg", 0, 0)])
    got = []
    deadline = time.time() + 60
    while len(got) < 2000 and time.time() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        check(m.error() is None, "consume ad-seg: %s" % m.error())
        got.append((m.offset(), m.key(), m.value()))
    c.close()
    check([g[0] for g in got] == list(range(2000)), "ad-seg offsets 0..1999 across segments")
    check(all(k == b"s%d" % o and v == b"seg-%06d-" % o + b"." * 200 for o, k, v in got),
          "ad-seg records intact across segment boundaries")
    ok("2000 records read back across %d segments after the restart" %
       len([n for n in os.listdir(os.path.join(data, "ad-seg", "0")) if n.endswith(".log")]))
    r = results(a.delete_topics(["ad-small", "ad-seg"], operation_timeout=30))
    check(r == {"ad-small": None, "ad-seg": None}, "delete both: %s" % r)
    check("ad-seg" not in a.list_topics(timeout=30).topics, "ad-seg deleted")
    ok("deleted both after the restart")


def main(argv):
    phase = argv[0]
    if phase == "produce":
        boot, topic, run, t0, first, end, out = argv[1:8]
        produce(boot, topic, run, int(t0), int(first), int(end), out, argv[8:])
    elif phase == "consume":
        consume(*argv[1:4])
    elif phase == "times":
        times(argv[1], argv[2], int(argv[3]), argv[4], [int(x) for x in argv[5:]])
    elif phase == "admin1":
        admin1(argv[1], argv[2])
    elif phase == "admin2":
        admin2(argv[1], argv[2])
    else:
        check(False, "unknown phase %s" % phase)


if __name__ == "__main__":
    main(sys.argv[1:])
