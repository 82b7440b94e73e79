"""ci/coord/static_e2e.py — KIP-345 static membership with confluent-kafka
(librdkafka): two members with group.instance.id split a 4-partition topic;
one is closed and started again within session.timeout.ms.  The other sees
no revoke and no assign, the restarted one gets exactly its partitions
back in the same generation, and both go on reading and committing.
ListGroups v4 (raw frames: these clients do not send it) shows the group's
state, and its StatesFilter selects it.

  static_e2e.py BROKER
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from kproto import Conn, Dec, Enc  # noqa: E402

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

BROKER = sys.argv[1]
TOPIC, GROUP, NPART = "st", "sg", 4


def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)


ADMIN = AdminClient({"bootstrap.servers": BROKER})
ADMIN.create_topics([NewTopic(TOPIC, NPART, 1)])[TOPIC].result()
prod = Producer({"bootstrap.servers": BROKER, "acks": "all"})


def produce(tag, n_per_part=5):
    for p in range(NPART):
        for i in range(n_per_part):
            prod.produce(TOPIC, value=b"%s-%d-%d" % (tag.encode(), p, i), partition=p)
    check(prod.flush(30) == 0, "produce %s" % tag)


produce("a")


class Member:
    def __init__(self, inst):
        self.inst = inst
        self.events = []  # ("assign"|"revoke", [partitions], time)
        self.assigned = set()
        self.seen = []
        self.c = Consumer({"bootstrap.servers": BROKER, "group.id": GROUP,
                           "group.instance.id": inst, "session.timeout.ms": 10000,
                           "heartbeat.interval.ms": 500, "enable.auto.commit": False,
                           "auto.offset.reset": "earliest", "log_level": 3})
        self.c.subscribe([TOPIC], on_assign=self.on_assign, on_revoke=self.on_revoke)

    def on_assign(self, c, parts):
        self.assigned = {p.partition for p in parts}
        self.events.append(("assign", sorted(self.assigned), time.time()))

    def on_revoke(self, c, parts):
        self.events.append(("revoke", sorted(p.partition for p in parts), time.time()))
        self.assigned = set()

    def poll(self, t=0.1):
        m = self.c.poll(t)
        if m is not None and not m.error():
            self.seen.append((m.partition(), m.offset()))
            self.c.commit(message=m, asynchronous=False)  # raises if refused
        return m


def pump(members, secs, until=None):
    end = time.time() + secs
    while time.time() < end:
        for m in members:
            m.poll(0.05)
        if until and until():
            return True
    return until() if until else True


a, b = Member("inst-a"), Member("inst-b")
check(pump([a, b], 60, lambda: a.assigned and b.assigned and
           a.assigned | b.assigned == set(range(NPART)) and not a.assigned & b.assigned),
      "two static members did not split the topic: %s %s" % (a.assigned, b.assigned))
check(pump([a, b], 30, lambda: len(a.seen) + len(b.seen) >= 5 * NPART), "first records not read")
a_events, b_parts = list(a.events), set(b.assigned)
print("ok two static members: a %s, b %s" % (sorted(a.assigned), sorted(b_parts)))


def list_groups_v4(states):
    host, port = BROKER.rsplit(":", 1)
    c = Conn(host, int(port))
    e = Enc(flex=True).array(len(states))
    for s in states:
        e.str(s)
    c.send(16, 4, e.tags().done(), flex=True)
    _, body = c.recv(flex_header=True)
    c.close()
    d = Dec(body, flex=True)
    d.i32()
    check(d.i16() == 0, "ListGroups v4 error")
    out = {}
    for _ in range(d.array()):
        gid, _pt, st = d.str(), d.str(), d.str()
        d.tags()
        out[gid] = st
    return out


lg = list_groups_v4([])
check(lg.get(GROUP) == "Stable", "ListGroups v4: %s" % lg)
check(GROUP in list_groups_v4(["stable"]), "StatesFilter [stable] leaves the group out")
check(GROUP not in list_groups_v4(["Empty", "PreparingRebalance"]), "StatesFilter keeps a Stable group")
print("ok ListGroups v4: %s is Stable; the StatesFilter selects it" % GROUP)

# b restarts: close (a static member sends no LeaveGroup) and a new
# consumer with the same group.instance.id, well within the session timeout.
b.c.close()
t0 = time.time()
b2 = Member("inst-b")
check(pump([a, b2], 30, lambda: b2.assigned), "the restarted member got no assignment")
took = time.time() - t0
check(b2.assigned == b_parts, "the restarted member got %s, had %s" % (sorted(b2.assigned), sorted(b_parts)))
print("ok the restarted member got %s back after %.2f s" % (sorted(b2.assigned), took))
# a keeps polling through a few heartbeat intervals: nothing happens to it.
produce("b")
check(pump([a, b2], 30, lambda: len(b2.seen) >= 5 * len(b_parts) and
           sum(1 for p, _ in a.seen) >= 10 * len(a.assigned)),
      "records after the restart not read: a %d b2 %d" % (len(a.seen), len(b2.seen)))
pump([a, b2], 3)
check(a.events == a_events, "the other member saw a rebalance: %s" % a.events[len(a_events):])
check(len(b2.events) == 1 and b2.events[0][0] == "assign", "the restarted member: %s" % b2.events)
check(b2.seen and all(p in b_parts for p, _ in b2.seen), "b2 read outside its partitions")
# b2 resumed at b's commits: its first offsets continue where b stopped.
b_next = {}
for p, o in b.seen:
    b_next[p] = max(b_next.get(p, 0), o + 1)
first = {}
for p, o in b2.seen:
    first.setdefault(p, o)
check(all(first[p] == b_next.get(p, 0) for p in first), "b2 did not resume at b's commits: %s vs %s"
      % (first, b_next))
committed = a.c.committed([TopicPartition(TOPIC, p) for p in range(NPART)], timeout=10)
check(all(tp.offset == 10 for tp in committed), "committed offsets: %s" % [(tp.partition, tp.offset) for tp in committed])
print("ok no revoke or assign at the other member; the restarted member resumed at the commits; "
      "every partition committed at 10")
lg = list_groups_v4([])
check(lg.get(GROUP) == "Stable", "ListGroups v4 after the restart: %s" % lg)
a.c.close()
b2.c.close()
