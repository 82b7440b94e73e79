"""ci/coord/groups_e2e.py — consumer groups, committed offsets and producer
ids with confluent-kafka-python (librdkafka), in phases driven by
test_groups_python.sh around broker restarts and crashes.

  groups_e2e.py BROKER CLUSTER_DIR PHASE [STATE_PREFIX]

The phases "sync" and "close" pause half-way (sync) or at the last record
(close): they write STATE_PREFIX.progress and wait for STATE_PREFIX.go while
the script restarts the broker with SIGTERM.
"""
import os
import re
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BROKER, CLUSTER, PHASE = sys.argv[1], sys.argv[2], sys.argv[3]
TOPIC, GROUP, N, FIRST = "pt", "pg", 100, 40
STATE = os.path.join(CLUSTER, "..", "..", "py-state")


def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)


def consumer(**extra):
    conf = {"bootstrap.servers": BROKER, "group.id": GROUP, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10000}
    conf.update(extra)
    c = Consumer(conf)
    c.subscribe([TOPIC])
    return c


def take(c, n, deadline_s=90):
    got = []
    end = time.time() + deadline_s
    while len(got) < n and time.time() < end:
        m = c.poll(0.5)
        if m is None:
            continue
        check(m.error() is None, "consume error: %s" % m.error())
        got.append((m.partition(), m.offset(), m.value().decode()))
    return got


def pid_blocks():
    return sorted(os.listdir(os.path.join(CLUSTER, "pid-blocks")))


if PHASE == "produce":
    a = AdminClient({"bootstrap.servers": BROKER})
    a.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result()
    p = Producer({"bootstrap.servers": BROKER, "enable.idempotence": True, "acks": "all"})
    for i in range(N):
        p.produce(TOPIC, key=b"k%d" % i, value=b"v%d" % i)
    check(p.flush(30) == 0, "idempotent producer did not deliver everything")
    check(len(pid_blocks()) == 1, "one producer-id block after one producer: %s" % pid_blocks())
    print("ok idempotent producer (InitProducerId) delivered %d records" % N)

elif PHASE == "first":
    c = consumer()
    got = take(c, FIRST)
    check(len(got) == FIRST, "first consumer got %d records" % len(got))
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=10)
    want = {}
    for p, o, _ in got:
        want[p] = max(want.get(p, -1), o + 1)
    for tp in committed:
        check(tp.error is None, "committed(): %s" % tp.error)
        check(tp.offset == want.get(tp.partition, -1001) or (tp.partition not in want and tp.offset < 0),
              "committed offset of %d is %d, want %s" % (tp.partition, tp.offset, want.get(tp.partition)))
    c.close()
    with open(STATE, "w") as f:
        f.write("\n".join(v for _, _, v in got))
    print("ok first member consumed %d records and committed %s" % (FIRST, want))

elif PHASE == "resume":
    # Run after a crash of the broker: the commit must have been durable.
    seen = open(STATE).read().split("\n")
    c = consumer()
    got = take(c, N - FIRST)
    check(len(got) == N - FIRST, "resumed consumer got %d records, want %d" % (len(got), N - FIRST))
    extra = take(c, 1, deadline_s=3)
    check(not extra, "more records than produced: %s" % extra)
    values = seen + [v for _, _, v in got]
    check(sorted(values) == sorted("v%d" % i for i in range(N)),
          "first + resumed is not every record exactly once")
    c.commit(asynchronous=False)
    c.close()
    print("ok after kill -9 the group resumed at its committed offsets: %d + %d records, no repeats" %
          (FIRST, len(got)))

elif PHASE == "admin":
    a = AdminClient({"bootstrap.servers": BROKER})
    groups = {g.id: g for g in a.list_groups(timeout=10)}
    check(GROUP in groups, "list_groups does not show %s: %s" % (GROUP, list(groups)))
    g = groups[GROUP]
    check(g.state == "Empty" and g.protocol_type == "consumer",
          "group %s: state %s, protocol type %s" % (GROUP, g.state, g.protocol_type))
    files = os.listdir(os.path.join(CLUSTER, "groups"))
    check(any(re.fullmatch(re.escape(GROUP) + r"\.[0-9]{10}\.json", f) for f in files),
          "no groups/%s.<epoch>.json: %s" % (GROUP, files))
    # A new idempotent producer after the restarts gets an id from a new block.
    p = Producer({"bootstrap.servers": BROKER, "enable.idempotence": True})
    p.produce(TOPIC, value=b"late")
    check(p.flush(30) == 0, "late producer did not deliver")
    check(len(pid_blocks()) == 2, "a restarted broker claims a new block: %s" % pid_blocks())
    print("ok list_groups shows the group; a new producer id came from a new block %s" % pid_blocks())

elif PHASE == "txn":
    # Transactions are not supported: init_transactions fails instead of
    # pretending.
    p = Producer({"bootstrap.servers": BROKER, "transactional.id": "tx-1", "log_level": 3})
    t0 = time.time()
    try:
        p.init_transactions(3)
        check(False, "init_transactions succeeded")
    except KafkaException as e:
        print("ok init_transactions refused after %.1f s: %s" % (time.time() - t0, e.args[0]))

elif PHASE == "kafka-python":
    # Another client library takes over the group where librdkafka left it.
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient
    p = KafkaProducer(bootstrap_servers=BROKER)
    for i in range(5):
        p.send(TOPIC, b"kp%d" % i)
    p.flush()
    p.close()
    c = KafkaConsumer(TOPIC, bootstrap_servers=BROKER, group_id=GROUP, auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=6000)
    got = sorted(m.value.decode() for m in c)
    c.commit()
    c.close()
    check(got == sorted(["late"] + ["kp%d" % i for i in range(5)]),
          "kafka-python resumed the group with %s" % got)
    a = KafkaAdminClient(bootstrap_servers=BROKER)
    offs = a.list_consumer_group_offsets(GROUP)
    check(sum(o.offset for o in offs.values()) == N + 6, "committed offsets: %s" % offs)
    a.close()
    print("ok kafka-python resumed the librdkafka group at its committed offsets")

elif PHASE in ("sync", "close"):
    # The member keeps its place in the group across a SIGTERM restart of
    # the broker (kaas keeps the membership on the volume, as Kafka does in
    # __consumer_offsets): "sync" commits every record synchronously and must
    # see no record twice and no refused commit; "close" closes right after
    # the restart and its final commit (auto commit on close) must be kept.
    from confluent_kafka import KafkaError
    prefix = sys.argv[4]
    topic, n = "st", 200
    group = "pg-" + PHASE
    quiet = {"log_level": 2}  # the restart's "connection refused" lines are expected
    a = AdminClient(dict(quiet, **{"bootstrap.servers": BROKER}))
    if topic not in a.list_topics(timeout=10).topics:
        a.create_topics([NewTopic(topic, 2, 1)])[topic].result()
        p = Producer(dict(quiet, **{"bootstrap.servers": BROKER, "acks": "all"}))
        for i in range(n):
            p.produce(topic, key=b"k%d" % i, value=b"s%d" % i, partition=i % 2)
        check(p.flush(30) == 0, "producer did not deliver everything")
    conf = dict(quiet, **{"bootstrap.servers": BROKER, "group.id": group, "auto.offset.reset": "earliest",
                          "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    if PHASE == "sync":
        conf["enable.auto.commit"] = False
    else:  # only the close commits
        conf.update({"enable.auto.commit": True, "auto.commit.interval.ms": 3600000})
    c = Consumer(conf)
    c.subscribe([topic])
    pause_at = n // 2 if PHASE == "sync" else n

    def member_ids():
        gs = [g for g in a.list_groups(group=group, timeout=10) if g.id == group]
        return sorted(m.id for m in gs[0].members) if gs else []

    seen, twice, transient = {}, 0, 0
    before = None
    end = time.time() + 180
    while len(seen) < n and time.time() < end:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            # The broker going away and coming back is reported, then retried.
            check(m.error().code() in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN),
                  "consume error: %s" % m.error())
            transient += 1
            continue
        key = (m.partition(), m.offset())
        if key in seen:
            twice += 1
        seen[key] = m.value().decode()
        if PHASE == "sync":
            try:
                c.commit(message=m, asynchronous=False)
            except KafkaException as e:
                check(False, "commit of %d:%d refused after %d records: %s" %
                      (key[0], key[1], len(seen), e.args[0]))
        if len(seen) == pause_at and before is None:
            before = member_ids()
            check(len(before) == 1, "one member before the restart: %s" % before)
            with open(prefix + ".progress", "w") as f:
                f.write(str(len(seen)))
            for _ in range(2400):
                if os.path.exists(prefix + ".go"):
                    break
                time.sleep(0.05)
            check(os.path.exists(prefix + ".go"), "the broker restart did not happen")
    check(len(seen) == n, "%s: %d of %d records" % (PHASE, len(seen), n))
    check(twice == 0, "%s: %d records delivered twice across the broker restart" % (PHASE, twice))
    check(sorted(seen.values()) == sorted("s%d" % i for i in range(n)), "not every record once")
    if PHASE == "sync":
        after = member_ids()
        check(after == before, "the member rejoined across the restart: %s -> %s" % (before, after))
    c.close()  # "close": right after the restart, with nothing committed yet
    c2 = Consumer({"bootstrap.servers": BROKER, "group.id": group, "enable.auto.commit": False})
    tps = c2.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
    c2.close()
    offs = {tp.partition: tp.offset for tp in tps}
    check(offs == {0: n // 2, 1: n // 2}, "%s: committed offsets %s, want %d on each partition" %
          (PHASE, offs, n // 2))
    print("ok %s: %d records, none twice, member %s kept across a SIGTERM restart, committed %s%s" %
          (PHASE, n, before, offs, " by the close right after the restart" if PHASE == "close" else ""))

else:
    check(False, "unknown phase " + PHASE)
