"""kafka_python_e2e.py — kafka-python (pure Python, Debian python3-kafka)
against kaas, in phases that test_kafka_python.sh runs around a restart.

  produce BOOT TOPIC RUN T0 FROM TO OUT
      KafkaProducer without api_version (it probes the broker: ApiVersions v0
      and Metadata v0 pipelined on one connection), acks=all, gzip; spec.py's
      records FROM..TO-1; the acknowledged ones appended to OUT.
  consume BOOT TOPIC OUT
      KafkaConsumer.assign() + seek_to_beginning(), up to the end offsets.
  times BOOT TOPIC T0 OUT ID...
      offsets_for_times() for the times of records ID...
  group BOOT TOPIC GROUP N
      a group member (subscribe) reads N records, commits, and the committed
      offsets equal the end offsets.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402

import spec  # noqa: E402
from spec import check, ok  # noqa: E402


def produce(boot, topic, run, t0, first, end, out):
    p = KafkaProducer(bootstrap_servers=boot, acks="all", compression_type="gzip", linger_ms=5,
                      retries=5, request_timeout_ms=60000, **spec.tls_kafka_python())
    v = p.config["api_version"]
    check(isinstance(v, tuple) and v >= (2, 1, 0),
          "kafka-python probed broker version %r (want >= 2.1: record format v2, headers, Fetch v10+)" % (v,))
    ok("kafka-python probed the broker as Kafka %s without api_version set" % ".".join(map(str, v)))
    futs = []
    for i in range(first, end):
        k, val, h, ts = spec.record(run, i, t0)
        futs.append((i, p.send(topic, key=k, value=val, headers=h, timestamp_ms=ts)))
    p.flush(120)
    with open(out, "a") as f:
        for i, fut in futs:
            md = fut.get(timeout=60)
            f.write(json.dumps({"i": i, "p": md.partition, "o": md.offset}) + "\n")
    p.close()
    ok("%s: %d records acknowledged (acks=all, gzip)" % (topic, end - first))


def consume(boot, topic, out):
    c = KafkaConsumer(bootstrap_servers=boot, enable_auto_commit=False, group_id=None,
                      fetch_max_wait_ms=100, **spec.tls_kafka_python())
    parts = sorted(c.partitions_for_topic(topic) or [])
    check(parts, "no partitions for %s" % topic)
    tps = [TopicPartition(topic, p) for p in parts]
    c.assign(tps)
    c.seek_to_beginning()
    end = c.end_offsets(tps)
    check(all(v == 0 for v in c.beginning_offsets(tps).values()), "beginning offsets are not 0")
    got = []
    deadline = time.time() + 120
    while any(c.position(tp) < end[tp] for tp in tps) and time.time() < deadline:
        for tp, msgs in c.poll(timeout_ms=1000).items():
            for m in msgs:
                check(m.timestamp_type == 0, "p%d o%d: timestamp type %d" % (m.partition, m.offset, m.timestamp_type))
                got.append({"p": m.partition, "o": m.offset, "k": spec.hx(m.key), "v": spec.hx(m.value),
                            "h": [[n, spec.hx(v)] for n, v in m.headers], "ts": m.timestamp})
    check(all(c.position(tp) >= end[tp] for tp in tps), "did not reach the end offsets %s" % end)
    c.close()
    with open(out, "w") as f:
        for g in got:
            f.write(json.dumps(g) + "\n")
    ok("%s: consumed %d records from %d partitions with assign()" % (topic, len(got), len(parts)))


def times(boot, topic, t0, out, ids):
    c = KafkaConsumer(bootstrap_servers=boot, group_id=None)
    parts = sorted(c.partitions_for_topic(topic))
    with open(out, "w") as f:
        for i in ids:
            res = c.offsets_for_times({TopicPartition(topic, p): t0 + i for p in parts})
            for tp, oat in res.items():
                f.write(json.dumps({"ts": t0 + i, "p": tp.partition, "o": -1 if oat is None else oat.offset}) + "\n")
    c.close()
    ok("%s: offsets_for_times for %d times" % (topic, len(ids)))


def group(boot, topic, gid, n):
    c = KafkaConsumer(topic, bootstrap_servers=boot, group_id=gid, auto_offset_reset="earliest",
                      enable_auto_commit=False, fetch_max_wait_ms=100, session_timeout_ms=10000)
    got = []
    deadline = time.time() + 120
    while len(got) < n and time.time() < deadline:
        for tp, msgs in c.poll(timeout_ms=1000).items():
            got.extend((m.partition, m.offset) for m in msgs)
    check(len(got) == n and len(set(got)) == n, "the group member read %d records (%d distinct), want %d" %
          (len(got), len(set(got)), n))
    c.commit()
    tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
    end = c.end_offsets(tps)
    for tp in tps:
        check(c.committed(tp) == end[tp], "committed %s for %s, end offset %d" % (c.committed(tp), tp, end[tp]))
    c.close()
    ok("group %s: one member read all %d records, committed offsets = end offsets" % (gid, n))


def main(a):
    if a[0] == "produce":
        produce(a[1], a[2], a[3], int(a[4]), int(a[5]), int(a[6]), a[7])
    elif a[0] == "consume":
        consume(a[1], a[2], a[3])
    elif a[0] == "times":
        times(a[1], a[2], int(a[3]), a[4], [int(x) for x in a[5:]])
    elif a[0] == "group":
        group(a[1], a[2], a[3], int(a[4]))
    else:
        check(False, "unknown phase " + a[0])


if __name__ == "__main__":
    main(sys.argv[1:])
