"""ci/topics/dynconfig_e2e.py PHASE P1 P2 P3 — dynamic broker configs on a
cluster of three brokers, through confluent-kafka 1.7 and kafka-python 2.0
(kafkajs has a script of its own, dynconfig_kafkajs.js).

librdkafka and kafkajs refuse the broker resource "" (the cluster-wide
default) on the client side; kafka-python's alter_configs sends it, so the
cluster default is set through kafka-python and per-broker values through
the others.

Phases (test_dynconfig.sh runs them in order, with kafkajs and restarts
between):
  setup     topics "plain" (no retention override) and "keep" (retention.ms=-1),
            records two hours old in small segments; static-only settings
            refused by name through both clients, nothing changed
  default   the cluster default log.retention.ms=3600000 (kafka-python), with
            auto.create.topics.enable=false and num.partitions=2: every broker
            describes it (confluent), retention deletes the old segments of
            "plain" on brokers 1 and 3 and not on broker 2 (whose own -1 wins),
            "keep" keeps everything; auto-create refused on every broker, then
            allowed again with the dynamic num.partitions
  after     after restarts: every value still in force
  dropped   broker 2's override removed (by kafkajs): broker 2 describes the
            default and its partitions' old segments go too
  race      two raw IncrementalAlterConfigs clients (no Debian client sends
            it), through brokers 1 and 3 at once, each SETting its own key of
            the cluster default 20 times: no change lost, every broker ends
            with both last values
"""
import threading
import sys
import time

sys.path.insert(0, "ci/lib")
from kproto import Conn, Dec, Enc  # noqa: E402
from kcluster import incremental_alter, metadata  # noqa: E402
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402
from kafka.admin import ConfigResource as KPResource, ConfigResourceType  # noqa: E402

PHASE = sys.argv[1]
PORTS = [int(p) for p in sys.argv[2:5]]
BOOT = ",".join("127.0.0.1:%d" % p for p in PORTS)
DYN_BROKER, DYN_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
HOUR = 3600000


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def ok(msg):
    print("ok " + msg)


def until(pred, secs, what):
    end = time.time() + secs
    while True:
        v = pred()
        if v:
            return v
        if time.time() > end:
            fail("timed out (%d s) waiting for %s" % (secs, what))
        time.sleep(0.2)


admin = AdminClient({"bootstrap.servers": BOOT})


def describe_broker(bid):
    """{name: (value, source, [(syn value, syn source), ...])} from broker bid."""
    (f,) = admin.describe_configs([ConfigResource("broker", str(bid))]).values()
    out = {}
    for k, e in f.result(30).items():
        syns = [(s.value, int(s.source)) for s in e.synonyms.values()] if e.synonyms else []
        out[k] = (e.value, int(e.source), syns)
    return out


def kp_alter_default(configs):
    ka = KafkaAdminClient(bootstrap_servers=BOOT, api_version=(2, 3, 0))
    r = ka.alter_configs([KPResource(ConfigResourceType.BROKER, "", configs=configs)])
    ka.close()
    ((code, msg, _t, name),) = r.resources
    return code, msg


def leaders(topic):
    m = metadata(PORTS[0], [topic])
    err, parts = m["topics"][topic]
    if err:
        return None
    ids = {p: parts[p][1] for p in range(len(parts))}
    return ids if all(v in (1, 2, 3) for v in ids.values()) else None


def low_watermarks(topic, n):
    c = Consumer({"bootstrap.servers": BOOT, "group.id": "wm"})
    lows = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[0] for p in range(n)]
    c.close()
    return lows


def metadata_auto(port, topic):
    """Metadata v7 with allow_auto_topic_creation: (error, partitions)."""
    c = Conn("127.0.0.1", port, timeout=20)
    c.send(3, 7, Enc().array(1).str(topic).i8(1).done())
    _, data = c.recv()
    d = Dec(data)
    d.i32()
    for _ in range(d.array()):
        d.i32(), d.str(), d.i32(), d.str()
    d.str()
    d.i32()
    if d.array() != 1:
        fail("Metadata: not one topic")
    (err, name, _i), parts = (d.i16(), d.str(), d.i8()), d.array()
    c.close()
    return err, parts


if PHASE == "setup":
    fs = admin.create_topics([NewTopic("plain", 6, 1, config={"segment.bytes": "1024"}),
                              NewTopic("keep", 3, 1, config={"segment.bytes": "1024", "retention.ms": "-1"})])
    for f in fs.values():
        f.result(30)
    lp = until(lambda: leaders("plain"), 30, "leaders of plain")
    until(lambda: leaders("keep"), 30, "leaders of keep")
    if set(lp.values()) != {1, 2, 3}:
        fail("plain is not led by all three brokers: %s" % lp)
    p = Producer({"bootstrap.servers": BOOT, "acks": "all", "linger.ms": 0, "batch.num.messages": 1})
    old = int(time.time() * 1000) - 2 * HOUR
    errs = []
    for topic, n in (("plain", 6), ("keep", 3)):
        for part in range(n):
            for i in range(40):
                p.produce(topic, b"x" * 100, partition=part, timestamp=old + i,
                          on_delivery=lambda e, m: e and errs.append(e))
                p.poll(0)
    p.flush(60)
    if errs:
        fail("produce: %s" % errs[:3])
    if low_watermarks("plain", 6) != [0] * 6:
        fail("retention ran before anything was changed")
    ok("topics plain and keep, 40 two-hour-old records per partition in 1 KiB segments, led by %s" % lp)

    # Static-only settings: refused by name through both clients.
    (f,) = admin.alter_configs([ConfigResource("broker", "1", set_config={
        "listeners": "PLAINTEXT://127.0.0.1:1", "log.retention.ms": "1"})]).values()
    try:
        f.result(30)
        fail("confluent: listeners changed at run time")
    except Exception as e:
        err = e.args[0]
        if err.code() != KafkaError.INVALID_REQUEST or \
                "Cannot update these configs dynamically: [listeners]" not in err.str():
            fail("confluent: listeners refused wrongly: %s" % err)
    code, msg = kp_alter_default({"log.dirs": "/elsewhere", "broker.id": "9"})
    if code != 42 or "log.dirs" not in (msg or "") or "broker.id" not in (msg or ""):
        fail("kafka-python: log.dirs/broker.id refused wrongly: %s %s" % (code, msg))
    code, msg = kp_alter_default({"log.retention.ms": "soon"})
    if code != 42 or "log.retention.ms" not in (msg or ""):
        fail("kafka-python: a bad value was not refused by name: %s %s" % (code, msg))
    for b in (1, 2, 3):
        d = describe_broker(b)
        if d["log.retention.ms"][1] != DEFAULT or d["listeners"][0] == "PLAINTEXT://127.0.0.1:1":
            fail("a refused request changed broker %d: %s" % (b, d["log.retention.ms"]))
    ok("static-only settings refused by name (confluent: [listeners], kafka-python: log.dirs, broker.id), "
       "a bad value refused by name, nothing changed on any broker")

elif PHASE == "default":
    code, msg = kp_alter_default({"log.retention.ms": str(HOUR), "auto.create.topics.enable": "false",
                                  "num.partitions": "2"})
    if code != 0:
        fail("kafka-python: setting the cluster default: %s %s" % (code, msg))

    def converged():
        d = [describe_broker(b) for b in (1, 2, 3)]
        return d if all(d[i - 1]["auto.create.topics.enable"][0] == "false" for i in (1, 2, 3)) else None
    t0 = time.time()
    d1, d2, d3 = until(converged, 10, "every broker to describe the new default")
    took = time.time() - t0
    for b, d in ((1, d1), (3, d3)):
        v, src, syns = d["log.retention.ms"]
        if (v, src) != (str(HOUR), DYN_DEFAULT):
            fail("broker %d: log.retention.ms %s source %d" % (b, v, src))
    # (confluent-kafka keys synonyms by name, so the chain, whose entries
    # share one name, is checked through kafkajs.)
    v, src, syns = d2["log.retention.ms"]
    if (v, src) != ("-1", DYN_BROKER):
        fail("broker 2: its own value does not win: %s %d %s" % (v, src, syns))
    if d1["num.partitions"][:2] != ("2", DYN_DEFAULT):
        fail("num.partitions: %s" % (d1["num.partitions"],))
    ok("the cluster default is described by all three brokers within %.1f s; broker 2's own value "
       "wins there (DYNAMIC_BROKER_CONFIG -1 over DYNAMIC_DEFAULT_BROKER_CONFIG %d)" % (took, HOUR))

    lp = leaders("plain")

    def cut():
        lows = low_watermarks("plain", 6)
        done = all(lows[p] > 0 for p in range(6) if lp[p] != 2)
        return lows if done else None
    lows = until(cut, 20, "retention on brokers 1 and 3")
    time.sleep(2)  # a few more retention rounds: broker 2 must still keep everything
    lows = low_watermarks("plain", 6)
    for part in range(6):
        if lp[part] == 2 and lows[part] != 0:
            fail("plain/%d on broker 2 lost segments despite its own retention -1: %s" % (part, lows))
        if lp[part] != 2 and lows[part] == 0:
            fail("plain/%d: no retention %s" % (part, lows))
    if low_watermarks("keep", 3) != [0] * 3:
        fail("keep (retention.ms=-1 on the topic) lost segments")
    ok("retention deleted the old segments of plain on brokers 1 and 3 (log start %s, leaders %s), "
       "none on broker 2 nor of keep (its topic override wins)" % (lows, lp))

    # auto.create.topics.enable=false on every broker ...
    for port in PORTS:
        err, _ = metadata_auto(port, "auto-off")
        if err != 3:
            fail("auto-create not refused on port %d: error %d" % (port, err))
    # ... and back (AlterConfigs replaces the set: auto-create reverts to the static true).
    code, msg = kp_alter_default({"log.retention.ms": str(HOUR), "num.partitions": "2"})
    if code != 0:
        fail("kafka-python: resetting auto-create: %s %s" % (code, msg))
    until(lambda: describe_broker(3)["auto.create.topics.enable"][0] == "true", 10, "auto-create back")
    err, n = until(lambda: (lambda r: r if r[0] == 0 else None)(metadata_auto(PORTS[2], "auto-on")), 10,
                   "auto-create of auto-on")
    if n != 2:
        fail("auto-created topic has %d partitions, not the dynamic num.partitions=2" % n)
    ok("auto.create.topics.enable=false refused auto-creation on every broker; re-enabled, broker 3 "
       "auto-created a topic with the dynamic num.partitions=2")

elif PHASE == "after":
    d1, d2, d3 = (describe_broker(b) for b in (1, 2, 3))
    for b, d in ((1, d1), (3, d3)):
        if d["log.retention.ms"][:2] != (str(HOUR), DYN_DEFAULT):
            fail("after restarts, broker %d: %s" % (b, d["log.retention.ms"]))
    if d2["log.retention.ms"][:2] != ("-1", DYN_BROKER):
        fail("after restarts, broker 2: %s" % (d2["log.retention.ms"],))
    ok("after restarting brokers 1 and 2 every value is still in force")

elif PHASE == "dropped":
    d2 = until(lambda: (lambda d: d if d["log.retention.ms"][1] == DYN_DEFAULT else None)(describe_broker(2)),
               10, "broker 2 to fall back to the default")
    if d2["log.retention.ms"][0] != str(HOUR):
        fail("broker 2 after the override went: %s" % (d2["log.retention.ms"],))
    until(lambda: all(x > 0 for x in low_watermarks("plain", 6)), 20, "retention on every partition")
    ok("broker 2's override removed: it describes the default and retention cut every partition of plain")
elif PHASE == "race":
    def incremental(port, key, value):
        return incremental_alter(port, 4, "", key, value)
    errors = []

    def client(port, key, base):
        for i in range(20):
            err, msg = incremental(port, key, str(base + i))
            if err:
                errors.append((port, key, i, err, msg))
    th = [threading.Thread(target=client, args=(PORTS[0], "log.index.interval.bytes", 5000)),
          threading.Thread(target=client, args=(PORTS[2], "log.roll.ms", 90000000))]
    for t in th:
        t.start()
    for t in th:
        t.join()
    if errors:
        fail("concurrent incremental alters failed: %s" % errors[:3])

    def both(b):
        d = describe_broker(b)
        return d["log.index.interval.bytes"][:2] == ("5019", DYN_DEFAULT) and \
            d["log.roll.ms"][:2] == ("90000019", DYN_DEFAULT) and d["log.retention.ms"][0] == str(HOUR)
    for b in (1, 2, 3):
        until(lambda: both(b), 10, "broker %d to show both last values" % b)
    ok("40 concurrent IncrementalAlterConfigs through brokers 1 and 3: no change lost, every broker "
       "shows log.index.interval.bytes=5019 and log.roll.ms=90000019 beside log.retention.ms")
else:
    fail("unknown phase " + PHASE)
