"""ci/cluster/compact_takeover.py — the client side of
ci/cluster/test_compact_takeover.sh.

  compact_takeover.py create BOOT
  compact_takeover.py produce BOOT ROUND STATE    # 30000 updates over 300 keys, acks=all
  compact_takeover.py leader PORT                 # "<leader> <epoch>" of cc/0
  compact_takeover.py check BOOT STATE            # both clients from offset 0

STATE is a JSON file of the latest acknowledged value per key (the
producer's delivery reports, in order per partition)."""
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from kcluster import metadata  # noqa: E402

TOPIC, KEYS, N = "cc", 300, 30000


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def create(boot):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": boot})
    a.create_topics([NewTopic(TOPIC, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "65536", "min.cleanable.dirty.ratio": "0.3",
        "min.compaction.lag.ms": "0", "delete.retention.ms": "3600000",
        # lz4 from the producer, stored gzip (kafka-python here reads no lz4).
        "compression.type": "gzip"})])[TOPIC].result(30)


def produce(boot, rnd, state):
    from confluent_kafka import Producer
    latest = json.load(open(state)) if os.path.exists(state) else {}
    p = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True, "linger.ms": 10,
                  "compression.codec": "lz4", "batch.num.messages": 200})
    errs = []

    def dr(err, m):
        if err:
            errs.append(err)
        else:
            latest[m.key().decode()] = m.value().decode()

    for i in range(N):
        k = "key-%d" % (i % KEYS)
        while True:
            try:
                p.produce(TOPIC, key=k, value="r%d-%d-%s" % (rnd, i, "x" * 80), partition=0, on_delivery=dr)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    if p.flush(120):
        fail("round %d: records still in flight after 120 s" % rnd)
    if errs:
        fail("round %d: %d delivery errors, first %s" % (rnd, len(errs), errs[0]))
    json.dump(latest, open(state, "w"))
    print("ok round %d: %d updates over %d keys acknowledged" % (rnd, N, KEYS))


def leader(port):
    err, parts = metadata(int(port), [TOPIC])["topics"][TOPIC]
    print(parts[0][1], parts[0][2])


def read_confluent(boot):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": boot, "group.id": uuid.uuid4().hex, "enable.auto.commit": False})
    lo, hi = c.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=20)
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got, n = {}, 0
    deadline = time.time() + 90
    while time.time() < deadline:
        pos = c.position([TopicPartition(TOPIC, 0)])[0].offset
        if pos >= hi:
            break
        m = c.poll(1)
        if m is None:
            continue
        if m.error():
            fail("confluent-kafka: %s" % m.error())
        got[m.key().decode()] = m.value().decode()
        n += 1
    c.close()
    return got, n, hi


def read_kafka_python(boot, hi):
    from kafka import KafkaConsumer, TopicPartition
    c = KafkaConsumer(bootstrap_servers=boot.split(","), enable_auto_commit=False, auto_offset_reset="earliest")
    tp = TopicPartition(TOPIC, 0)
    c.assign([tp])
    c.seek(tp, 0)
    got, n = {}, 0
    deadline = time.time() + 90
    while c.position(tp) < hi and time.time() < deadline:
        for recs in c.poll(timeout_ms=1000).values():
            for r in recs:
                got[r.key.decode()] = r.value.decode()
                n += 1
    c.close()
    return got, n


def check(boot, state):
    latest = json.load(open(state))
    got, n, hi = read_confluent(boot)
    if got != latest:
        bad = sorted(k for k in latest if got.get(k) != latest[k])
        fail("confluent-kafka from 0: %d keys differ from the latest acknowledged, e.g. %s: %r != %r"
             % (len(bad), bad[:1], got.get(bad[0]) if bad else None, latest[bad[0]] if bad else None))
    kgot, kn = read_kafka_python(boot, hi)
    if kgot != latest:
        fail("kafka-python from 0: %d keys differ" % sum(1 for k in latest if kgot.get(k) != latest[k]))
    if n >= hi // 2:
        fail("%d records read for %d offsets: the log was not compacted" % (n, hi))
    print("ok confluent-kafka and kafka-python from offset 0: the latest value of all %d keys "
          "(%d records for %d offsets)" % (len(latest), n, hi))


cmd = sys.argv[1]
if cmd == "create":
    create(sys.argv[2])
elif cmd == "produce":
    produce(sys.argv[2], int(sys.argv[3]), sys.argv[4])
elif cmd == "leader":
    leader(sys.argv[2])
elif cmd == "check":
    check(sys.argv[2], sys.argv[3])
