#!/usr/bin/python3
# ci/topics/identity_e2e.py — the client side of ci/topics/test_identity.sh:
# produce records with acks=all and remember every acknowledged one; after
# the volume was damaged and the broker restarted, ask for the topics the
# way a client does (a Metadata request that may auto-create them) and
# check that every acknowledged record is still there, at its offset, under
# the topic's original ID.
#
#   identity_e2e.py BOOT CLUSTER_DIR STATE produce TOPIC PARTITIONS COUNT
#   identity_e2e.py BOOT CLUSTER_DIR STATE check TOPIC...
#   identity_e2e.py BOOT CLUSTER_DIR STATE delete TOPIC
import json
import os
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOT, CLUSTER, STATE, STEP = sys.argv[1:5]
ARGS = sys.argv[5:]


def check(cond, what):
    if not cond:
        raise SystemExit("FAIL: " + what)
    print("ok:", what)


def load_state():
    if os.path.exists(STATE):
        with open(STATE) as f:
            return json.load(f)
    return {}


def save_state(s):
    with open(STATE + ".tmp", "w") as f:
        json.dump(s, f)
    os.replace(STATE + ".tmp", STATE)


def registry_id(topic):
    with open(os.path.join(CLUSTER, "topics", topic + ".json")) as f:
        return json.load(f)["topic_id"]


def produce(topic, parts, count):
    a = AdminClient({"bootstrap.servers": BOOT})
    a.create_topics([NewTopic(topic, parts, 1)], request_timeout=15)[topic].result()
    p = Producer({"bootstrap.servers": BOOT, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    acked = []

    def on_delivery(err, msg):
        if err is None:
            acked.append([msg.partition(), msg.offset(), msg.value().decode()])

    for i in range(count):
        p.produce(topic, value=("%s-%d" % (topic, i)).encode(), partition=i % parts, on_delivery=on_delivery)
        if i % 50 == 0:
            p.poll(0)
    left = p.flush(60)
    check(left == 0 and len(acked) == count, "%s: %d/%d records acknowledged" % (topic, len(acked), count))
    s = load_state()
    s[topic] = {"id": registry_id(topic), "partitions": parts, "acked": acked}
    save_state(s)


def consume_all(topic, parts, want):
    c = Consumer({"bootstrap.servers": BOOT, "group.id": "identity-e2e", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "allow.auto.create.topics": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
    got = {}
    deadline = time.time() + 60
    while time.time() < deadline and len(got) < want:
        m = c.poll(0.5)
        if m is None or m.error():
            continue
        got[(m.partition(), m.offset())] = m.value().decode()
    c.close()
    return got


def check_topics(topics):
    s = load_state()
    # The first thing a client does: Metadata for the topic, with the
    # default auto-create — which used to recreate the topic and reclaim
    # its data when the registry entry was lost or unreadable.
    p = Producer({"bootstrap.servers": BOOT})
    for t in topics:
        deadline = time.time() + 30
        md = None
        while time.time() < deadline:
            md = p.list_topics(t, timeout=10)
            tm = md.topics.get(t)
            if tm is not None and tm.error is None and len(tm.partitions) > 0:
                break
            time.sleep(0.5)
        tm = md.topics.get(t)
        check(tm is not None and tm.error is None, "%s: Metadata answers the topic" % t)
        check(len(tm.partitions) == s[t]["partitions"], "%s: %d partitions" % (t, s[t]["partitions"]))
        check(registry_id(t) == s[t]["id"], "%s: still topic id %s" % (t, s[t]["id"]))
        acked = s[t]["acked"]
        got = consume_all(t, s[t]["partitions"], len(acked))
        missing = [a for a in acked if got.get((a[0], a[1])) != a[2]]
        check(not missing, "%s: every acknowledged record is consumable (%d/%d; first missing %s)"
              % (t, len(acked) - len(missing), len(acked), missing[:1]))


def delete(topic):
    a = AdminClient({"bootstrap.servers": BOOT})
    a.delete_topics([topic], operation_timeout=15)[topic].result()
    check(True, "%s deleted" % topic)


if STEP == "produce":
    produce(ARGS[0], int(ARGS[1]), int(ARGS[2]))
elif STEP == "check":
    check_topics(ARGS)
elif STEP == "delete":
    delete(ARGS[0])
else:
    raise SystemExit("unknown step " + STEP)
print("PASS", STEP, " ".join(ARGS))
