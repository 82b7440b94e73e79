"""kcluster.py — raw Kafka requests the cluster tests need: Metadata v7 as
one broker answers it, a Produce v7 sent to one broker whatever it
leads (so a test sees exactly what that broker says), and one
IncrementalAlterConfigs SET (the error code and message exactly as the
broker gave them, which admin clients turn into exceptions)."""
import sys

sys.path.insert(0, "ci/lib")
from kproto import Conn, Dec, Enc, record_batch  # noqa: E402


def metadata(port, topics=None, host="127.0.0.1"):
    """{"brokers": {id: (host, port)}, "controller": id,
        "topics": {name: (err, [(err, leader, epoch), ...])}}"""
    c = Conn(host, port, timeout=20)
    b = Enc()
    if topics is None:
        b.i32(-1)
    else:
        b.array(len(topics))
        for t in topics:
            b.str(t)
    c.send(3, 7, b.i8(0).done())
    _, data = c.recv()
    d = Dec(data)
    d.i32()
    brokers = {}
    for _ in range(d.array()):
        bid, host, bport, _rack = d.i32(), d.str(), d.i32(), d.str()
        brokers[bid] = (host, bport)
    d.str()
    controller = d.i32()
    out = {}
    for _ in range(d.array()):
        err, name, _i = d.i16(), d.str(), d.i8()
        parts = []
        for _ in range(d.array()):
            perr, _idx, leader, epoch = d.i16(), d.i32(), d.i32(), d.i32()
            [d.i32() for _ in range(d.array())]
            [d.i32() for _ in range(d.array())]
            [d.i32() for _ in range(d.array())]
            parts.append((perr, leader, epoch))
        out[name] = (err, parts)
    c.s.close()
    return {"brokers": brokers, "controller": controller, "topics": out}


def produce(port, topic, partition, values, acks=-1, host="127.0.0.1"):
    """The error code broker `port` answers for one batch (and the offset)."""
    c = Conn(host, port, timeout=30)
    body = (Enc().str(None).i16(acks).i32(30000).array(1).str(topic).array(1).i32(partition)
            .bytes(record_batch(values, ts=1)).done())
    c.send(0, 7, body)
    _, data = c.recv()
    d = Dec(data)
    d.array(); d.str(); d.array(); d.i32()
    err, off = d.i16(), d.i64()
    c.s.close()
    return err, off


def incremental_alter(port, rtype, name, key, value, host="127.0.0.1"):
    """IncrementalAlterConfigs v1 with one SET of key=value on resource
    (rtype: 2 topic, 4 broker; name "" for the cluster-wide default):
    (error code, error message)."""
    c = Conn(host, int(port), timeout=30)
    e = Enc(True).array(1).i8(rtype).str(name).array(1).str(key).i8(0).str(value).tags().tags()
    c.send(44, 1, e.i8(0).tags().done(), flex=True)
    d = Dec(c.recv(flex_header=True)[1], True)
    d.i32()
    d.array()
    err, msg = d.i16(), d.str()
    c.close()
    return err, msg
