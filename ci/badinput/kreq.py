"""kreq.py — one well-formed request for every API and version kaas serves,
encoded from Kafka's message schemas with ci/lib/kproto.py.

Used by badinput.py (truncated and corrupted copies of good requests) and by
kaas/fuzz/mkcorpus.py (the fuzz seed corpus).  Everything here is
written from the protocol specification, independently of kaas's decoders.

    samples(topic, group)  -> [(label, api_key, version, flexible, body), ...]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from kproto import Enc, gzip_compress, record_batch  # noqa: E402

# First flexible version per API (KIP-482) among what kaas serves.
FLEX_FROM = {9: 6, 22: 2, 18: 3, 23: 4}


def _produce(v, topic, batch):
    w = Enc()
    if v >= 3:
        w.str(None)
    return w.i16(-1).i32(30000).array(1).str(topic).array(1).i32(0).bytes(batch).done()


def _fetch(v, topic):
    w = Enc().i32(-1).i32(0).i32(1).i32(1 << 20).i8(0)
    if v >= 7:
        w.i32(0).i32(-1)
    w.array(1).str(topic).array(1).i32(0)
    if v >= 9:
        w.i32(-1)
    w.i64(0)
    if v >= 5:
        w.i64(-1)
    w.i32(1 << 20)
    if v >= 7:
        w.array(0)
    if v >= 11:
        w.str("")
    return w.done()


def _list_offsets(v, topic):
    w = Enc().i32(-1)
    if v >= 2:
        w.i8(0)

    def part(index, epoch, ts):
        w.i32(index)
        if v >= 4:
            w.i32(epoch)  # current_leader_epoch
        w.i64(ts)
        if v == 0:
            w.i32(1)

    w.array(2).str(topic).array(2)
    part(0, -1, -1)
    part(1, 1 << 30, -2)
    w.str(topic + "-none").array(1)
    part(0, 0, 1700000000000)
    return w.done()


def _offset_for_leader_epoch(v, topic):
    flex = v >= 4
    w = Enc(flex)
    if v >= 3:
        w.i32(-1)
    w.array(2).str(topic).array(2)
    for index, current, epoch in ((0, -1, 1), (1, 1 << 30, 0)):
        w.i32(index)
        if v >= 2:
            w.i32(current)
        w.i32(epoch).tags()
    w.tags().str(topic + "-none").array(1).i32(0)
    if v >= 2:
        w.i32(0)
    w.i32(-1).tags().tags()
    return w.tags().done()


def _metadata(v, topic):
    w = Enc()
    if v == 0:
        w.array(1).str(topic)
    else:
        w.array(2).str(topic).str(topic + "-auto")
    if v >= 4:
        w.i8(1)
    return w.done()


def _offset_commit(v, topic, group):
    w = Enc().str(group)
    if v >= 1:
        w.i32(-1).str("")
    if 2 <= v <= 4:
        w.i64(-1)
    if v >= 7:
        w.str(None)
    w.array(1).str(topic).array(1).i32(0).i64(5)
    if v == 1:
        w.i64(-1)
    if v >= 6:
        w.i32(-1)
    w.str("meta")
    return w.done()


def _offset_fetch(v, topic, group):
    flex = v >= 6
    w = Enc(flex).str(group).array(1).str(topic).array(1).i32(0).tags()
    if v >= 7:
        w.i8(0)
    return w.tags().done()


def _join(v, group):
    w = Enc().str(group).i32(10000)
    if v >= 1:
        w.i32(30000)
    w.str("")
    if v >= 5:
        w.str(None)
    meta = Enc().i16(0).array(1).str("t").bytes(b"").done()
    return w.str("consumer").array(1).str("range").bytes(meta).done()


def _heartbeat(v, group):
    w = Enc().str(group).i32(1).str("member-x")
    if v >= 3:
        w.str(None)
    return w.done()


def _leave(v, group):
    if v < 3:
        return Enc().str(group).str("member-x").done()
    return Enc().str(group).array(1).str("member-x").str(None).done()


def _sync(v, group):
    w = Enc().str(group).i32(1).str("member-x")
    if v >= 3:
        w.str(None)
    return w.array(1).str("member-x").bytes(b"\x00\x00").done()


def _describe_groups(v, group):
    w = Enc().array(2).str(group).str("")
    if v >= 3:
        w.i8(1)
    return w.done()


def _api_versions(v):
    if v >= 3:
        return Enc(True).str("kreq").str("1.0").tags().done()
    return b""


def _create_topics(v, topic):
    w = Enc().array(2)
    w.str(topic + "-new").i32(2).i16(1).array(0)
    w.array(2).str("retention.ms").str("60000").str("cleanup.policy").str("delete")
    w.str(topic + "-asg").i32(-1).i16(-1).array(1).i32(0).array(1).i32(1).array(0)
    w.i32(30000)
    if v >= 1:
        w.i8(1)  # validate_only: nothing is written
    return w.done()


def _delete_topics(v, topic):
    return Enc().array(2).str(topic + "-gone").str("..").i32(30000).done()


def _delete_records(v, topic):
    return Enc().array(1).str(topic).array(2).i32(0).i64(0).i32(9).i64(-1).i32(30000).done()


def _init_pid(v):
    flex = v >= 2
    w = Enc(flex).str(None).i32(60000)
    if v >= 3:
        w.i64(-1).i16(-1)
    return w.tags().done()


def _describe_configs(v, topic):
    w = Enc().array(3).i8(2).str(topic).array(None).i8(2).str(topic).array(2).str("retention.ms").str("nope")
    w.i8(4).str("1").array(1).str("num.partitions")
    if v >= 1:
        w.i8(1)
    return w.done()


def _alter_configs(v, topic):
    return (Enc().array(2).i8(2).str(topic).array(1).str("retention.ms").str("3600000")
            .i8(4).str("1").array(0).i8(1).done())


def _create_partitions(v, topic):
    return Enc().array(2).str(topic).i32(3).array(None).str(topic + "-missing").i32(2).array(1).array(1).i32(1) \
        .i32(30000).i8(1).done()


def _delete_groups(v, group):
    return Enc().array(2).str(group).str(group + "-none").done()


def _offset_delete(v, topic, group):
    return Enc().str(group).array(1).str(topic).array(1).i32(0).done()


def samples(topic="kreq", group="kreq-group"):
    batch = record_batch([b"a", b"bb", None], keys=[b"k1", None, b"k3"],
                         headers=[[(b"h", b"v")], [], [(b"x", None)]])
    zbatch = record_batch([b"z" * 300] * 3, codec=1, compress=gzip_compress)
    out = []

    def add(label, api, lo, hi, fn):
        for v in range(lo, hi + 1):
            flex = api in FLEX_FROM and v >= FLEX_FROM[api]
            out.append(("%s-v%d" % (label, v), api, v, flex, fn(v)))

    add("produce", 0, 0, 7, lambda v: _produce(v, topic, batch))
    add("produce-gzip", 0, 7, 7, lambda v: _produce(v, topic, zbatch))
    add("fetch", 1, 4, 11, lambda v: _fetch(v, topic))
    add("list-offsets", 2, 0, 5, lambda v: _list_offsets(v, topic))
    add("metadata", 3, 0, 7, lambda v: _metadata(v, topic))
    add("offset-commit", 8, 0, 7, lambda v: _offset_commit(v, topic, group))
    add("offset-fetch", 9, 0, 7, lambda v: _offset_fetch(v, topic, group))
    add("find-coordinator", 10, 0, 2, lambda v: Enc().str(group).i8(0).done() if v else Enc().str(group).done())
    add("join-group", 11, 0, 5, lambda v: _join(v, group))
    add("heartbeat", 12, 0, 3, lambda v: _heartbeat(v, group))
    add("leave-group", 13, 0, 3, lambda v: _leave(v, group))
    add("sync-group", 14, 0, 3, lambda v: _sync(v, group))
    add("describe-groups", 15, 0, 4, lambda v: _describe_groups(v, group))
    add("list-groups", 16, 0, 2, lambda v: b"")
    add("api-versions", 18, 0, 3, _api_versions)
    add("create-topics", 19, 0, 4, lambda v: _create_topics(v, topic))
    add("delete-topics", 20, 0, 3, lambda v: _delete_topics(v, topic))
    add("delete-records", 21, 0, 1, lambda v: _delete_records(v, topic))
    add("init-producer-id", 22, 0, 4, _init_pid)
    add("offset-for-leader-epoch", 23, 0, 4, lambda v: _offset_for_leader_epoch(v, topic))
    add("describe-configs", 32, 0, 2, lambda v: _describe_configs(v, topic))
    add("alter-configs", 33, 0, 1, lambda v: _alter_configs(v, topic))
    add("create-partitions", 37, 0, 1, lambda v: _create_partitions(v, topic))
    add("delete-groups", 42, 0, 1, lambda v: _delete_groups(v, group))
    add("offset-delete", 47, 0, 0, lambda v: _offset_delete(v, topic, group))
    return out
