"""compact_e2e.py BROKER — log compaction as clients see it.

A topic with cleanup.policy=compact gets many updates per key from an
idempotent producer; the broker's cleaner compacts it; a consumer reading
from offset 0 ends with the latest value of every key (and no deleted key),
reads fewer records than were written, and sees offsets that only grow.
Consumer positions in the gaps compaction leaves work: a committed offset
inside a gap resumes at the next record, and so does an assignment there.
Then Kafka Connect's start-up pattern on a compacted config topic: two
clients (confluent-kafka and kafka-python) each read it from the beginning
to the end offset they asked for, and agree on the configuration.
"""
import sys
import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition, OFFSET_BEGINNING, KafkaError
from confluent_kafka.admin import AdminClient, NewTopic

BROKER = sys.argv[1]
a = AdminClient({"bootstrap.servers": BROKER})


def check(ok, what):
    if not ok:
        print("FAIL:", what)
        sys.exit(1)


def create(name, cfg):
    t = NewTopic(name, num_partitions=1, replication_factor=1, config=cfg)
    a.create_topics([t])[name].result()


COMPACT = {"cleanup.policy": "compact", "segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "86400000"}


def read_all(topic, group=None, start=OFFSET_BEGINNING, tmo=30):
    """Every (offset, key, value) from `start` to the end offset asked for first."""
    c = Consumer({"bootstrap.servers": BROKER, "group.id": group or "r-" + uuid.uuid4().hex,
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.assign([TopicPartition(topic, 0, start)])
    out = []
    deadline = time.time() + tmo
    while time.time() < deadline:
        pos = c.position([TopicPartition(topic, 0)])[0].offset
        if pos >= hi:
            break
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        out.append((m.offset(), m.key(), m.value()))
    pos = c.position([TopicPartition(topic, 0)])[0].offset
    c.close()
    check(pos >= hi, "%s: position %d never reached the end offset %d (stuck in a gap?)" % (topic, pos, hi))
    return out, hi


# ---- many updates per key, cleaned ------------------------------------------------
create("cmp", COMPACT)
p = Producer({"bootstrap.servers": BROKER, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
KEYS, N = 40, 6000
latest = {}
for i in range(N):
    k = b"k%d" % (i % KEYS)
    v = b"v%d-%s" % (i, b"x" * 20)
    p.produce("cmp", key=k, value=v)
    latest[k] = v
    if i % 500 == 499:
        p.flush(30)  # batches of their own: only sealed segments are cleaned
# Deleted keys: a tombstone each, then more updates of other keys so that
# the tombstones' segment is sealed and cleaned too.
for j in range(5):
    k = b"k%d" % j
    p.produce("cmp", key=k, value=None)
    latest.pop(k)
for i in range(N, N + 2000):
    k = b"k%d" % (5 + i % (KEYS - 5))
    v = b"v%d-%s" % (i, b"x" * 20)
    p.produce("cmp", key=k, value=v)
    latest[k] = v
    if i % 500 == 499:
        p.flush(30)
check(p.flush(30) == 0, "producer flush")
total = N + 5 + 2000

deadline = time.time() + 90
while True:
    recs, hi = read_all("cmp")
    if len(recs) < total // 4 or time.time() > deadline:
        break
    time.sleep(1)
check(hi == total, "end offset %d, %d records were written" % (hi, total))
check(len(recs) < total // 4, "not compacted: %d of %d records still there" % (len(recs), total))
offs = [o for o, _, _ in recs]
check(all(b > a_ for a_, b in zip(offs, offs[1:])), "offsets do not grow")
seen = {}
for o, k, v in recs:
    if v is None:
        seen.pop(k, None)
    else:
        seen[k] = v
check(seen == latest, "latest values differ: %d keys read, %d expected; first bad %r" %
      (len(seen), len(latest), next((k for k in latest if seen.get(k) != latest[k]), None)))
check(offs[-1] + 1 - len(offs) > 1000, "no gaps left by compaction")
print("ok compacted: %d of %d records, latest value of each of %d keys, %d deleted keys gone"
      % (len(recs), total, len(latest), 5))

# ---- positions in gaps ---------------------------------------------------------------
present = set(offs)
gap = next(o for o in range(offs[0] // 2, offs[-1]) if o not in present)
nxt = min(o for o in offs if o > gap)
g = "gap-" + uuid.uuid4().hex
c = Consumer({"bootstrap.servers": BROKER, "group.id": g, "enable.auto.commit": False})
c.commit(offsets=[TopicPartition("cmp", 0, gap)], asynchronous=False)
c.close()
c = Consumer({"bootstrap.servers": BROKER, "group.id": g, "enable.auto.commit": False,
              "auto.offset.reset": "error"})
c.subscribe(["cmp"])
m, deadline = None, time.time() + 30
while time.time() < deadline:
    m = c.poll(0.5)
    if m is not None and not m.error():
        break
c.close()
check(m is not None and not m.error() and m.offset() == nxt,
      "resumed from a committed offset in a gap (%d): got %r, want %d" % (gap, m and m.offset(), nxt))
part, _ = read_all("cmp", start=gap)
check(part and part[0][0] == nxt and len(part) == len([o for o in offs if o >= gap]),
      "an assignment at %d in a gap does not read on from %d" % (gap, nxt))
print("ok a committed offset and an assignment inside a gap resume at the next record")

# ---- Kafka Connect's start-up: read the config topic to its end -----------------------
create("connect-configs", COMPACT)
cfg = {}
for rev in range(300):
    for conn in range(10):
        k = b"connector-%d" % conn
        v = b'{"rev":%d,"tasks.max":"%d","pad":"%s"}' % (rev, conn + 1, b"p" * 30)
        p.produce("connect-configs", key=k, value=v)
        cfg[k] = v
    if rev % 10 == 9:
        p.flush(30)  # batches of their own: a segment holds many, so most get sealed
p.produce("connect-configs", key=b"connector-9", value=None)
cfg.pop(b"connector-9")
check(p.flush(30) == 0, "producer flush")
deadline = time.time() + 90
while True:
    recs, hi = read_all("connect-configs")
    if len(recs) < 1500 or time.time() > deadline:
        break
    time.sleep(1)
check(len(recs) < 1500, "config topic not compacted: %d records" % len(recs))


def view(recs):
    s = {}
    for _, k, v in recs:
        if v is None:
            s.pop(k, None)
        else:
            s[k] = v
    return s


v1 = view(recs)
# The second worker uses another client library, its own end-offset read.
from kafka import KafkaConsumer, TopicPartition as KTP  # noqa: E402
kc = KafkaConsumer(bootstrap_servers=BROKER, enable_auto_commit=False, group_id=None,
                   api_version_auto_timeout_ms=10000)
tp = KTP("connect-configs", 0)
kc.assign([tp])
kc.seek_to_beginning(tp)
end = kc.end_offsets([tp])[tp]
krecs, deadline = [], time.time() + 30
while kc.position(tp) < end and time.time() < deadline:
    for batch in kc.poll(timeout_ms=500).values():
        krecs.extend((r.offset, r.key, r.value) for r in batch)
pos = kc.position(tp)
kc.close()
check(pos >= end, "kafka-python: position %d never reached the end offset %d" % (pos, end))
v2 = view(krecs)
check(v1 == cfg and v2 == cfg, "the two workers disagree or miss the latest config: %d / %d / %d keys"
      % (len(v1), len(v2), len(cfg)))
print("ok two clients read the compacted config topic to its end and agree (%d records of %d)"
      % (len(recs), 3001))
