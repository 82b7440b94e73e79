"""ci/storage/recompress_e2e.py — topic-level compression.type with two
clients: confluent-kafka (librdkafka) and kafka-python; with broker-gzip,
the broker-level compression.type instead.

  recompress_e2e.py BROKER DATA_DIR              # topic level
  recompress_e2e.py BROKER DATA_DIR broker-gzip  # broker started with
                                                 # --override compression.type=gzip

* topic rc-gzip (compression.type=gzip): confluent-kafka sends lz4 and
  uncompressed batches, kafka-python uncompressed ones; every stored batch
  is gzip (read from the segment files), and both clients read every record
  back (kafka-python here has no lz4 codec: it can read the lz4 records
  only because the broker stored them as gzip);
* topic rc-zstd (compression.type=zstd): confluent-kafka's lz4 and
  uncompressed batches and kafka-python's gzip and uncompressed ones are
  stored zstd; confluent-kafka reads them all;
* topic rc-alter: created with producer (batches kept as sent), then
  IncrementalAlterConfigs (raw, no Debian client sends it) sets snappy:
  DescribeConfigs shows it and later batches are stored snappy, the earlier
  ones stay as they were.

broker-gzip (topics without their own compression.type inherit the broker's):
* topic bc-plain (no compression.type): DescribeConfigs shows gzip from
  STATIC_BROKER_CONFIG; uncompressed batches from both clients are stored
  gzip and read back by both;
* topic bc-own (compression.type=zstd): its own value wins, batches stored zstd;
* IncrementalAlterConfigs on the cluster-wide broker resource "" sets lz4:
  bc-plain then shows lz4 from DYNAMIC_DEFAULT_BROKER_CONFIG and stores its
  later batches lz4 (the earlier stay gzip), bc-own stays zstd; brotli is
  refused with INVALID_REQUEST naming compression.type.
"""
import glob
import os
import struct
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from kcluster import incremental_alter  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewTopic  # noqa: E402
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402

BROKER, DATA = sys.argv[1], sys.argv[2]
MODE = sys.argv[3] if len(sys.argv) > 3 else "topic"
CODEC = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
N = 400  # records per producer run


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def ok(msg):
    print("ok", msg)


def stored_codecs(topic):
    """[(base offset, record count, codec name)] of every batch in the
    topic's segment files, in offset order."""
    out = []
    for log in sorted(glob.glob(os.path.join(DATA, topic, "*", "*.log"))):
        b = open(log, "rb").read()
        pos = 0
        while pos + 61 <= len(b):
            base, length = struct.unpack(">qi", b[pos:pos + 12])
            if length <= 0:
                break
            attrs, = struct.unpack(">h", b[pos + 21:pos + 23])
            count, = struct.unpack(">i", b[pos + 57:pos + 61])
            out.append((base, count, CODEC.get(attrs & 7, "?")))
            pos += 12 + length
    return sorted(out)


def produce_ck(topic, codec, tag):
    p = Producer({"bootstrap.servers": BROKER, "acks": "all", "compression.codec": codec,
                  "linger.ms": 20, "enable.idempotence": True})
    errs = []
    for i in range(N):
        p.produce(topic, key=b"k%d" % (i % 50), value=(b"%s-%d-" % (tag.encode(), i)) * 20, partition=0,
                  on_delivery=lambda e, m: e and errs.append(e))
    p.flush(60)
    if errs:
        fail("confluent-kafka %s into %s: %s" % (codec, topic, errs[:3]))


def produce_kp(topic, codec, tag):
    p = KafkaProducer(bootstrap_servers=BROKER, acks="all", compression_type=codec, linger_ms=20)
    futs = [p.send(topic, key=b"k%d" % (i % 50), value=(b"%s-%d-" % (tag.encode(), i)) * 20, partition=0)
            for i in range(N)]
    for f in futs:
        f.get(timeout=60)
    p.close()


def read_ck(topic, want):
    c = Consumer({"bootstrap.servers": BROKER, "group.id": uuid.uuid4().hex, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.time() + 60
    while len(got) < len(want) and time.time() < deadline:
        m = c.poll(1)
        if m is None:
            continue
        if m.error():
            fail("confluent-kafka consumer on %s: %s" % (topic, m.error()))
        got.append((m.offset(), m.key(), m.value()))
    c.close()
    check_read("confluent-kafka", topic, got, want)


def read_kp(topic, want):
    c = KafkaConsumer(bootstrap_servers=BROKER, auto_offset_reset="earliest", enable_auto_commit=False,
                      consumer_timeout_ms=10000)
    tp = __import__("kafka").TopicPartition(topic, 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = []
    deadline = time.time() + 60
    while len(got) < len(want) and time.time() < deadline:
        for recs in c.poll(timeout_ms=1000).values():
            got.extend((r.offset, r.key, r.value) for r in recs)
    c.close()
    check_read("kafka-python", topic, got, want)


def check_read(client, topic, got, want):
    if [g[0] for g in got] != list(range(len(want))):
        fail("%s on %s: offsets %s..., want 0..%d" % (client, topic, [g[0] for g in got][:5], len(want) - 1))
    if [(g[1], g[2]) for g in got] != want:
        bad = next(i for i, (g, w) in enumerate(zip(got, want)) if (g[1], g[2]) != w)
        fail("%s on %s: record %d is %r, want %r" % (client, topic, bad, got[bad][1:], want[bad]))
    ok("%s read all %d records of %s in order" % (client, len(want), topic))


def expected(runs):
    w = []
    for tag in runs:
        w.extend((b"k%d" % (i % 50), (b"%s-%d-" % (tag.encode(), i)) * 20) for i in range(N))
    return w


def wait_durable(topic, n):
    deadline = time.time() + 30
    while time.time() < deadline:
        if sum(c for _, c, _ in stored_codecs(topic)) >= n:
            return
        time.sleep(0.2)
    fail("%s: the segment files hold %d records, want %d" % (topic, sum(c for _, c, _ in stored_codecs(topic)), n))


def check_codecs(topic, want_codec, n):
    wait_durable(topic, n)
    batches = stored_codecs(topic)
    codecs = sorted({c for _, _, c in batches})
    if codecs != [want_codec]:
        fail("%s: stored batches are %s, want only %s" % (topic, codecs, want_codec))
    ok("%s: all %d stored batches (%d records) are %s" % (topic, len(batches), n, want_codec))


def src_of(entry):
    return getattr(entry.source, "value", entry.source)


def iac_raw(rtype, name, key, value):
    host, port = BROKER.rsplit(":", 1)
    return incremental_alter(port, rtype, name, key, value, host=host)


def topic_compression(a, topic):
    r = ConfigResource(ConfigResource.Type.TOPIC, topic)
    e = a.describe_configs([r])[r].result()["compression.type"]
    return e.value, src_of(e)


def broker_level():
    a = AdminClient({"bootstrap.servers": BROKER})
    a.create_topics([NewTopic("bc-plain", 1, 1)])["bc-plain"].result()
    a.create_topics([NewTopic("bc-own", 1, 1, config={"compression.type": "zstd"})])["bc-own"].result()
    got = topic_compression(a, "bc-plain")
    if got != ("gzip", ConfigSource.STATIC_BROKER_CONFIG.value):
        fail("bc-plain: DescribeConfigs compression.type %r, want gzip from STATIC_BROKER_CONFIG" % (got,))
    got = topic_compression(a, "bc-own")
    if got != ("zstd", ConfigSource.DYNAMIC_TOPIC_CONFIG.value):
        fail("bc-own: DescribeConfigs compression.type %r, want its own zstd" % (got,))
    ok("bc-plain inherits the broker's gzip (STATIC_BROKER_CONFIG), bc-own keeps its zstd")

    produce_ck("bc-plain", "none", "ck-none")
    produce_kp("bc-plain", None, "kp-none")
    check_codecs("bc-plain", "gzip", 2 * N)
    want = expected(["ck-none", "kp-none"])
    read_ck("bc-plain", want)
    read_kp("bc-plain", want)
    produce_ck("bc-own", "none", "own-1")
    check_codecs("bc-own", "zstd", N)

    err, msg = iac_raw(4, "", "compression.type", "lz4")
    if err != 0:
        fail("IncrementalAlterConfigs broker '' compression.type=lz4: error %d %s" % (err, msg))
    deadline = time.time() + 10
    while topic_compression(a, "bc-plain") != ("lz4", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value):
        if time.time() > deadline:
            fail("bc-plain: DescribeConfigs shows %r after the broker default became lz4"
                 % (topic_compression(a, "bc-plain"),))
        time.sleep(0.2)
    if topic_compression(a, "bc-own")[0] != "zstd":
        fail("bc-own: compression.type %r after the broker default changed, want zstd"
             % (topic_compression(a, "bc-own"),))
    ok("IncrementalAlterConfigs set the cluster-wide compression.type=lz4; bc-plain follows, bc-own does not")
    produce_ck("bc-plain", "none", "after")
    produce_ck("bc-own", "none", "own-2")
    wait_durable("bc-plain", 3 * N)
    batches = stored_codecs("bc-plain")
    before = {c for b, _, c in batches if b < 2 * N}
    after = {c for b, _, c in batches if b >= 2 * N}
    if before != {"gzip"} or after != {"lz4"}:
        fail("bc-plain: before the alter %s (want gzip), after %s (want lz4)" % (before, after))
    ok("bc-plain: batches before the alter stay gzip, later uncompressed ones are stored lz4")
    read_ck("bc-plain", expected(["ck-none", "kp-none", "after"]))
    check_codecs("bc-own", "zstd", 2 * N)

    err, msg = iac_raw(4, "", "compression.type", "brotli")
    if err != 42 or "compression.type" not in (msg or "") or "must be one of" not in (msg or ""):
        fail("IncrementalAlterConfigs broker compression.type=brotli: %d %r, want INVALID_REQUEST (42)"
             % (err, msg))
    ok("IncrementalAlterConfigs broker compression.type=brotli refused: %s" % msg)


if MODE == "broker-gzip":
    broker_level()
    sys.exit(0)
if MODE != "topic":
    fail("unknown mode %r (topic or broker-gzip)" % MODE)

a = AdminClient({"bootstrap.servers": BROKER})
for t, ct in (("rc-gzip", "gzip"), ("rc-zstd", "zstd"), ("rc-alter", "producer")):
    a.create_topics([NewTopic(t, 1, 1, config={"compression.type": ct})])[t].result()
    r = ConfigResource(ConfigResource.Type.TOPIC, t)
    got = a.describe_configs([r])[r].result()["compression.type"].value
    if got != ct:
        fail("%s: DescribeConfigs compression.type=%r, want %r" % (t, got, ct))
ok("created rc-gzip, rc-zstd, rc-alter; DescribeConfigs reports gzip, zstd, producer")

# gzip topic: lz4 and uncompressed from librdkafka, uncompressed from kafka-python.
produce_ck("rc-gzip", "lz4", "ck-lz4")
produce_ck("rc-gzip", "none", "ck-none")
produce_kp("rc-gzip", None, "kp-none")
check_codecs("rc-gzip", "gzip", 3 * N)
want = expected(["ck-lz4", "ck-none", "kp-none"])
read_ck("rc-gzip", want)
read_kp("rc-gzip", want)

# zstd topic: lz4 / uncompressed from librdkafka, gzip / uncompressed from kafka-python.
produce_ck("rc-zstd", "lz4", "ck-lz4")
produce_ck("rc-zstd", "none", "ck-none")
produce_kp("rc-zstd", "gzip", "kp-gzip")
produce_kp("rc-zstd", None, "kp-none")
check_codecs("rc-zstd", "zstd", 4 * N)
read_ck("rc-zstd", expected(["ck-lz4", "ck-none", "kp-gzip", "kp-none"]))

# producer, then IncrementalAlterConfigs to snappy.
produce_ck("rc-alter", "lz4", "before")
check_codecs("rc-alter", "lz4", N)
err, msg = iac_raw(2, "rc-alter", "compression.type", "snappy")
if err != 0:
    fail("IncrementalAlterConfigs compression.type=snappy: error %d %s" % (err, msg))
r = ConfigResource(ConfigResource.Type.TOPIC, "rc-alter")
deadline = time.time() + 10
while a.describe_configs([r])[r].result()["compression.type"].value != "snappy":
    if time.time() > deadline:
        fail("rc-alter: DescribeConfigs does not show snappy after IncrementalAlterConfigs")
    time.sleep(0.2)
ok("IncrementalAlterConfigs set compression.type=snappy on rc-alter; DescribeConfigs shows it")
time.sleep(1.5)  # the registry's refresh reaches the partition
produce_ck("rc-alter", "gzip", "after")
wait_durable("rc-alter", 2 * N)
batches = stored_codecs("rc-alter")
before = {c for b, _, c in batches if b < N}
after = {c for b, _, c in batches if b >= N}
if before != {"lz4"} or after != {"snappy"}:
    fail("rc-alter: before the alter %s (want lz4), after %s (want snappy)" % (before, after))
ok("rc-alter: batches before the alter stay lz4, later gzip batches are stored snappy")
read_ck("rc-alter", expected(["before", "after"]))
# An unknown value is refused by IncrementalAlterConfigs with the reason.
err, msg = iac_raw(2, "rc-alter", "compression.type", "brotli")
if err != 40 or "String must be one of" not in (msg or ""):
    fail("IncrementalAlterConfigs compression.type=brotli: %d %r, want INVALID_CONFIG (40)" % (err, msg))
ok("IncrementalAlterConfigs compression.type=brotli refused: %s" % msg)
