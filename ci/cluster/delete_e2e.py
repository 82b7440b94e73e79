#!/usr/bin/python3
"""delete_e2e.py — the client side of ci/cluster/test_delete.sh.

  delete_e2e.py create BOOT TOPIC PARTS          CreateTopics (AdminClient), waiting out "marked for deletion"
  delete_e2e.py fill BOOT TOPIC PARTS N PREFIX   N acks=all records "<PREFIX>-<p>-<i>" into every partition
  delete_e2e.py delete PORT TOPIC                raw DeleteTopics v1 sent to that one broker (not the controller)
  delete_e2e.py leaders PORT TOPIC               "controller leader0 leader1 ..." as that broker answers Metadata
  delete_e2e.py check PORTS TOPIC PARTS N PREFIX through every broker in PORTS (comma-separated) as the only
                                                 bootstrap: each partition spans offsets 0..N-1 and holds exactly
                                                 the N records of PREFIX, in order
Every check raises (exit 1) with a message on a mismatch.
"""
import sys
import time

sys.path.insert(0, "ci/lib")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from kcluster import metadata  # noqa: E402
from kproto import Conn, Dec, Enc  # noqa: E402


def check(ok, what):
    if not ok:
        raise SystemExit("FAIL: " + what)


def create(boot, topic, parts):
    a = AdminClient({"bootstrap.servers": boot})
    deadline = time.time() + 60
    while True:
        try:
            a.create_topics([NewTopic(topic, int(parts), 1)], operation_timeout=30)[topic].result(60)
            return
        except Exception as e:  # noqa: BLE001
            err = e.args[0] if e.args else None
            code = err.code() if hasattr(err, "code") else None
            if time.time() < deadline and code in (KafkaError.TOPIC_ALREADY_EXISTS, KafkaError.REQUEST_TIMED_OUT,
                                                   KafkaError._TIMED_OUT) and "deletion" in str(e):
                time.sleep(0.5)
                continue
            raise


def fill(boot, topic, parts, n, prefix):
    p = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                  "message.timeout.ms": 60000})
    errors = []

    def done(err, msg):
        if err is not None:
            errors.append(err)

    for part in range(int(parts)):
        for i in range(int(n)):
            p.produce(topic, value=("%s-%d-%d" % (prefix, part, i)).encode(), partition=part, on_delivery=done)
        p.poll(0)
    left = p.flush(90)
    check(left == 0 and not errors, "fill %s: %d undelivered, errors %s" % (topic, left, errors[:3]))


def delete(port, topic):
    c = Conn("127.0.0.1", int(port), timeout=60)
    c.send(20, 1, Enc().array(1).str(topic).i32(30000).done())
    _, data = c.recv()
    d = Dec(data)
    d.i32()
    res = {}
    for _ in range(d.array()):
        name = d.str()
        res[name] = d.i16()
    c.s.close()
    check(res.get(topic) == 0, "DeleteTopics %s through port %s answered %s" % (topic, port, res))


def leaders(port, topic):
    m = metadata(int(port), [topic])
    err, parts = m["topics"].get(topic, (-1, []))
    print(m["controller"], " ".join(str(p[1]) if p[0] == 0 else "-1" for p in parts))


def check_topic(ports, topic, parts, n, prefix):
    parts, n = int(parts), int(n)
    for port in ports.split(","):
        c = Consumer({"bootstrap.servers": "127.0.0.1:" + port, "group.id": "check-%s-%s" % (port, time.time()),
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "enable.partition.eof": True})
        for part in range(parts):
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, part), timeout=30)
            check((lo, hi) == (0, n), "via port %s: %s/%d spans [%d, %d), expected [0, %d)" % (port, topic, part,
                                                                                               lo, hi, n))
        c.assign([TopicPartition(topic, part, 0) for part in range(parts)])
        got = {part: [] for part in range(parts)}
        eof = set()
        deadline = time.time() + 60
        while len(eof) < parts and time.time() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise SystemExit("FAIL: via port %s: %s" % (port, m.error()))
            got[m.partition()].append((m.offset(), m.value().decode()))
        c.close()
        check(len(eof) == parts, "via port %s: not every partition read to its end" % port)
        for part in range(parts):
            want = [(i, "%s-%d-%d" % (prefix, part, i)) for i in range(n)]
            check(got[part] == want, "via port %s: %s/%d holds %s, expected only the %d new records" % (
                port, topic, part, got[part][:4], n))
    print("ok: %s: every partition holds exactly the %d new records from offset 0, through ports %s" % (
        topic, n, ports))


cmd, args = sys.argv[1], sys.argv[2:]
{"create": create, "fill": fill, "delete": delete, "leaders": leaders, "check": check_topic}[cmd](*args)
