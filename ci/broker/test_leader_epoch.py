"""test_leader_epoch.py — the pieces of ci/broker/test_leader_epoch.sh.

    produce  HOST:PORT TOPIC FIRST COUNT      acks=all, values b"le-<i>", i = FIRST..
    consume  HOST:PORT TOPIC COUNT OUT        librdkafka (confluent-kafka) assign()
                                              from offset 0 until COUNT records;
                                              one "offset value" line each to OUT
    epoch    HOST:PORT TOPIC                  prints the leader epoch Metadata v7 gives
    before   HOST:PORT TOPIC E                raw checks at epoch E (nothing fenced)
    after    HOST:PORT TOPIC E1 E2 END1 END   raw checks after a restart from E1 to E2:
                                              E1 is fenced, E2+1 unknown, epoch E1
                                              ends at END1, E2 at the log end END
    check    OUT COUNT                        every offset 0..COUNT-1 once, in order,
                                              with its own value

The raw checks speak the wire protocol with ci/lib/kproto.py, laid out from
Kafka's message schemas; they share no code with the broker.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from kproto import Conn, Dec, Enc  # noqa: E402

NONE, FENCED, UNKNOWN = 0, 74, 75


def ok(msg):
    print("ok " + msg, flush=True)


def hostport(s):
    h, p = s.rsplit(":", 1)
    return h, int(p)


# ---- librdkafka ------------------------------------------------------------------------

def produce(boot, topic, first, count):
    from confluent_kafka import Producer
    acked, errors = [], []

    def dr(err, msg):
        (errors if err else acked).append(err or msg.offset())

    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 5, "message.timeout.ms": 60000})
    for i in range(first, first + count):
        p.produce(topic, value=b"le-%d" % i, partition=0, on_delivery=dr)
        p.poll(0)
    left = p.flush(60)
    assert left == 0 and not errors, (left, errors[:5])
    assert sorted(acked) == list(range(first, first + count)), (acked[:3], acked[-3:])
    ok("produced %d records at offsets %d-%d" % (count, first, first + count - 1))


def consume(boot, topic, count, out):
    from confluent_kafka import Consumer, TopicPartition
    transport = []
    c = Consumer({"bootstrap.servers": boot, "group.id": "le-assign", "enable.auto.commit": False,
                  "enable.partition.eof": False, "fetch.wait.max.ms": 100,
                  # small fetches, so that the restart lands in the middle of the log
                  "message.max.bytes": 4096, "fetch.max.bytes": 4096, "max.partition.fetch.bytes": 2048,
                  "error_cb": lambda e: transport.append(str(e))})
    c.assign([TopicPartition(topic, 0, 0)])
    n = 0
    deadline = time.time() + 120
    with open(out, "w") as f:
        while n < count:
            assert time.time() < deadline, "consumed %d of %d within 120 s" % (n, count)
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                # Every error a consumed message carries fails the test: after
                # the restart the consumer must carry on without one.
                raise AssertionError("consume error at %d records: %s" % (n, m.error()))
            f.write("%d %s\n" % (m.offset(), m.value().decode()))
            f.flush()
            n += 1
            if n < count // 2:
                time.sleep(0.002)  # slow in the first half, so the restart finds us reading
    c.close()
    ok("librdkafka consumed %d records (%d connection events while the broker restarted)"
       % (n, len(transport)))


def check(out, count):
    got = [line.split() for line in open(out)]
    offs = [int(o) for o, _ in got]
    assert offs == list(range(count)), "offsets: %d lines, first bad at %s" % (
        len(offs), next((i for i, o in enumerate(offs) if o != i), None))
    for o, v in got:
        assert v == "le-%s" % o, (o, v)
    ok("every offset 0-%d consumed once, in order, with its own value" % (count - 1))


# ---- the wire protocol ---------------------------------------------------------------------

def call(c, key, ver, body, flex=False):
    corr = c.send(key, ver, body, flex=flex)
    rc, data = c.recv(flex_header=flex)
    assert rc == corr, (rc, corr)
    return data


def metadata_epoch(c, topic):
    d = Dec(call(c, 3, 7, Enc().array(1).str(topic).i8(0).done()))
    d.i32()  # throttle
    for _ in range(d.array()):
        d.i32(), d.str(), d.i32(), d.str()
    d.str(), d.i32()  # cluster id, controller
    for _ in range(d.array()):
        err, name, _internal = d.i16(), d.str(), d.i8()
        for _ in range(d.array()):
            perr, idx, _leader, epoch = d.i16(), d.i32(), d.i32(), d.i32()
            for _ in range(3):  # replicas, isr, offline
                for _ in range(d.array()):
                    d.i32()
            if idx == 0:
                assert err == 0 and perr == 0, (err, perr)
                return epoch
    raise AssertionError("no partition 0 of %s in Metadata" % topic)


def fetch(c, topic, current):
    """Fetch v11 from offset 0: (error, record bytes) of partition 0."""
    b = (Enc().i32(-1).i32(0).i32(1).i32(1 << 20).i8(0).i32(0).i32(-1)
         .array(1).str(topic).array(1).i32(0).i32(current).i64(0).i64(-1).i32(1 << 16)
         .array(0).str("").done())
    d = Dec(call(c, 1, 11, b))
    d.i32(), d.i16(), d.i32()
    d.array(), d.str(), d.array()
    _idx, err = d.i32(), d.i16()
    d.i64(), d.i64(), d.i64()
    n = d.array()
    for _ in range(max(n, 0)):
        d.i64(), d.i64()
    d.i32()
    return err, d.i32()


def list_offsets(c, topic, ver, current, ts):
    """ListOffsets v4/v5: (error, offset, leader epoch) of partition 0."""
    d = Dec(call(c, 2, ver, Enc().i32(-1).i8(0).array(1).str(topic).array(1)
                 .i32(0).i32(current).i64(ts).done()))
    d.i32(), d.array(), d.str(), d.array()
    _idx, err, _ts, off, epoch = d.i32(), d.i16(), d.i64(), d.i64(), d.i32()
    return err, off, epoch


def ofle(c, topic, ver, current, epoch):
    """OffsetForLeaderEpoch v2-v4: (error, epoch, end offset) of partition 0."""
    flex = ver >= 4
    e = Enc(flex)
    if ver >= 3:
        e.i32(-1)
    e.array(1).str(topic).array(1).i32(0).i32(current).i32(epoch).tags().tags().tags()
    d = Dec(call(c, 23, ver, e.done(), flex), flex)
    d.i32()
    d.array(), d.str(), d.array()
    err, _idx, got, end = d.i16(), d.i32(), d.i32(), d.i64()
    return err, got, end


def before(boot, topic, e):
    c = Conn(*hostport(boot))
    assert metadata_epoch(c, topic) == e
    err, n = fetch(c, topic, e)
    assert err == NONE and n > 0, (err, n)
    for v in (2, 3, 4):
        r = ofle(c, topic, v, e, e)
        assert r[0] == NONE and r[1] == e and r[2] > 0, (v, r)
    ok("at epoch %d: Fetch and OffsetForLeaderEpoch v2-v4 with that epoch are served" % e)


def after(boot, topic, e1, e2, end1, end):
    c = Conn(*hostport(boot))
    got = metadata_epoch(c, topic)
    assert got == e2 and e2 > e1, (got, e1, e2)
    ok("Metadata v7: the leader epoch grew from %d to %d across the restart" % (e1, e2))

    assert fetch(c, topic, e1)[0] == FENCED
    assert fetch(c, topic, e2 + 1)[0] == UNKNOWN
    err, n = fetch(c, topic, e2)
    assert err == NONE and n > 0, (err, n)
    err, n = fetch(c, topic, -1)
    assert err == NONE and n > 0, (err, n)
    ok("Fetch v11: epoch %d FENCED_LEADER_EPOCH, %d UNKNOWN_LEADER_EPOCH, %d and -1 served"
       % (e1, e2 + 1, e2))

    for v in (4, 5):
        assert list_offsets(c, topic, v, e1, -1) == (FENCED, -1, -1)
        assert list_offsets(c, topic, v, e2 + 1, -1) == (UNKNOWN, -1, -1)
        assert list_offsets(c, topic, v, e2, -2) == (NONE, 0, e1), list_offsets(c, topic, v, e2, -2)
        assert list_offsets(c, topic, v, e2, -1) == (NONE, end, e2), list_offsets(c, topic, v, e2, -1)
    ok("ListOffsets v4-v5: stale and future epochs refused; earliest is epoch %d's, latest %d's" % (e1, e2))

    for v in (2, 3, 4):
        assert ofle(c, topic, v, e1, e1) == (FENCED, -1, -1)
        assert ofle(c, topic, v, e2 + 1, e1) == (UNKNOWN, -1, -1)
        assert ofle(c, topic, v, e2, e1) == (NONE, e1, end1), ofle(c, topic, v, e2, e1)
        assert ofle(c, topic, v, -1, e2) == (NONE, e2, end), ofle(c, topic, v, -1, e2)
        assert ofle(c, topic, v, e2, e2 + 1) == (NONE, -1, -1), ofle(c, topic, v, e2, e2 + 1)
    ok("OffsetForLeaderEpoch v2-v4: epoch %d ends at %d, %d at the log end %d; stale/future current "
       "epochs refused" % (e1, end1, e2, end))


def main():
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "produce":
        produce(a[0], a[1], int(a[2]), int(a[3]))
    elif cmd == "consume":
        consume(a[0], a[1], int(a[2]), a[3])
    elif cmd == "epoch":
        print(metadata_epoch(Conn(*hostport(a[0])), a[1]))
    elif cmd == "before":
        before(a[0], a[1], int(a[2]))
    elif cmd == "after":
        after(a[0], a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5]))
    elif cmd == "check":
        check(a[0], int(a[1]))
    else:
        raise SystemExit("unknown command " + cmd)


if __name__ == "__main__":
    main()
