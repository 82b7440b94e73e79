"""kreq.py — one well-formed request for every API and version kaas serves,
encoded from Kafka's message schemas, plus a v2 record batch builder.

Used by badinput.py (truncated and corrupted copies of good requests) and by
kaas/proto/fuzz/mkcorpus.py (the fuzz seed corpus).  Everything here is
written from the protocol specification, independently of kaas's decoders.

    samples(topic, group)  -> [(label, api_key, version, flexible, body), ...]
    request(api, version, corr, body, flexible, client_id=b"kreq") -> bytes
        the request without its 4-byte size prefix (header + body)
    record_batch(values, ...) -> bytes   a v2 record batch (CRC-32C filled in)
"""
import struct
import zlib

# First flexible version per API (KIP-482) among what kaas serves.
FLEX_FROM = {9: 6, 22: 2, 18: 3}

_CRC = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC.append(_c)


def crc32c(data):
    c = 0xFFFFFFFF
    t = _CRC
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


class W:
    """A tiny writer; `flex` switches strings, bytes and arrays to compact."""

    def __init__(self, flex=False):
        self.b = bytearray()
        self.flex = flex

    def i8(self, v):
        self.b += struct.pack(">b", v)
        return self

    def i16(self, v):
        self.b += struct.pack(">h", v)
        return self

    def i32(self, v):
        self.b += struct.pack(">i", v)
        return self

    def i64(self, v):
        self.b += struct.pack(">q", v)
        return self

    def uvar(self, v):
        while True:
            x = v & 0x7F
            v >>= 7
            if v:
                self.b.append(x | 0x80)
            else:
                self.b.append(x)
                return self

    def var(self, v):
        return self.uvar((v << 1) ^ (v >> 63))

    def s(self, v):
        if v is not None and not isinstance(v, bytes):
            v = v.encode()
        if self.flex:
            self.uvar(0 if v is None else len(v) + 1)
        else:
            self.i16(-1 if v is None else len(v))
        if v:
            self.b += v
        return self

    def by(self, v):
        if self.flex:
            self.uvar(0 if v is None else len(v) + 1)
        else:
            self.i32(-1 if v is None else len(v))
        if v:
            self.b += v
        return self

    def arr(self, n):
        if self.flex:
            return self.uvar(0 if n is None else n + 1)
        return self.i32(-1 if n is None else n)

    def tags(self):
        if self.flex:
            self.uvar(0)
        return self

    def raw(self, d):
        self.b += d
        return self

    def done(self):
        return bytes(self.b)


def record_batch(values, ts=1700000000000, codec=0, magic=2, pid=-1, epoch=-1, seq=-1, keys=None,
                 headers=None, compress=None):
    """A v2 record batch.  `compress` (bytes -> bytes) is applied to the
    records section and `codec` set in the attributes."""
    recs = W()
    for i, v in enumerate(values):
        k = keys[i] if keys else None
        r = W().i8(0).var(0).var(i)
        r.var(-1 if k is None else len(k)).raw(k or b"")
        r.var(-1 if v is None else len(v)).raw(v or b"")
        hs = headers[i] if headers else []
        r.var(len(hs))
        for hn, hv in hs:
            r.var(len(hn)).raw(hn).var(-1 if hv is None else len(hv)).raw(hv or b"")
        body = r.done()
        recs.var(len(body)).raw(body)
    payload = recs.done()
    if compress:
        payload = compress(payload)
    after_crc = (W().i16(codec).i32(len(values) - 1).i64(ts).i64(ts).i64(pid).i16(epoch).i32(seq)
                 .i32(len(values)).raw(payload).done())
    tail = W().i32(-1).i8(magic).raw(struct.pack(">I", crc32c(after_crc))).raw(after_crc).done()
    return W().i64(0).i32(len(tail)).raw(tail).done()


def gzip_compress(data):
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def request(api, version, corr, body, flex, client_id=b"kreq"):
    h = W().i16(api).i16(version).i32(corr)
    h.i16(-1 if client_id is None else len(client_id)).raw(client_id or b"")  # never compact
    if flex:
        h.uvar(0)
    return h.done() + body


def _produce(v, topic, batch):
    w = W()
    if v >= 3:
        w.s(None)
    return w.i16(-1).i32(30000).arr(1).s(topic).arr(1).i32(0).by(batch).done()


def _fetch(v, topic):
    w = W().i32(-1).i32(0).i32(1).i32(1 << 20).i8(0)
    if v >= 7:
        w.i32(0).i32(-1)
    w.arr(1).s(topic).arr(1).i32(0)
    if v >= 9:
        w.i32(-1)
    w.i64(0)
    if v >= 5:
        w.i64(-1)
    w.i32(1 << 20)
    if v >= 7:
        w.arr(0)
    if v >= 11:
        w.s("")
    return w.done()


def _list_offsets(v, topic):
    w = W().i32(-1)
    if v >= 2:
        w.i8(0)
    w.arr(2).s(topic).arr(2).i32(0).i64(-1)
    if v == 0:
        w.i32(1)
    w.i32(1).i64(-2)
    if v == 0:
        w.i32(1)
    w.s(topic + "-none").arr(1).i32(0).i64(1700000000000)
    if v == 0:
        w.i32(1)
    return w.done()


def _metadata(v, topic):
    w = W()
    if v == 0:
        w.arr(1).s(topic)
    else:
        w.arr(2).s(topic).s(topic + "-auto")
    if v >= 4:
        w.i8(1)
    return w.done()


def _offset_commit(v, topic, group):
    w = W().s(group)
    if v >= 1:
        w.i32(-1).s("")
    if 2 <= v <= 4:
        w.i64(-1)
    if v >= 7:
        w.s(None)
    w.arr(1).s(topic).arr(1).i32(0).i64(5)
    if v == 1:
        w.i64(-1)
    if v >= 6:
        w.i32(-1)
    w.s("meta")
    return w.done()


def _offset_fetch(v, topic, group):
    flex = v >= 6
    w = W(flex).s(group).arr(1).s(topic).arr(1).i32(0).tags()
    if v >= 7:
        w.i8(0)
    return w.tags().done()


def _join(v, group):
    w = W().s(group).i32(10000)
    if v >= 1:
        w.i32(30000)
    w.s("")
    if v >= 5:
        w.s(None)
    meta = W().i16(0).arr(1).s("t").by(b"").done()
    return w.s("consumer").arr(1).s("range").by(meta).done()


def _heartbeat(v, group):
    w = W().s(group).i32(1).s("member-x")
    if v >= 3:
        w.s(None)
    return w.done()


def _leave(v, group):
    if v < 3:
        return W().s(group).s("member-x").done()
    return W().s(group).arr(1).s("member-x").s(None).done()


def _sync(v, group):
    w = W().s(group).i32(1).s("member-x")
    if v >= 3:
        w.s(None)
    return w.arr(1).s("member-x").by(b"\x00\x00").done()


def _describe_groups(v, group):
    w = W().arr(2).s(group).s("")
    if v >= 3:
        w.i8(1)
    return w.done()


def _api_versions(v):
    if v >= 3:
        return W(True).s("kreq").s("1.0").tags().done()
    return b""


def _create_topics(v, topic):
    w = W().arr(2)
    w.s(topic + "-new").i32(2).i16(1).arr(0).arr(2).s("retention.ms").s("60000").s("cleanup.policy").s("delete")
    w.s(topic + "-asg").i32(-1).i16(-1).arr(1).i32(0).arr(1).i32(1).arr(0)
    w.i32(30000)
    if v >= 1:
        w.i8(1)  # validate_only: nothing is written
    return w.done()


def _delete_topics(v, topic):
    return W().arr(2).s(topic + "-gone").s("..").i32(30000).done()


def _delete_records(v, topic):
    return W().arr(1).s(topic).arr(2).i32(0).i64(0).i32(9).i64(-1).i32(30000).done()


def _init_pid(v):
    flex = v >= 2
    w = W(flex).s(None).i32(60000)
    if v >= 3:
        w.i64(-1).i16(-1)
    return w.tags().done()


def _describe_configs(v, topic):
    w = W().arr(3).i8(2).s(topic).arr(None).i8(2).s(topic).arr(2).s("retention.ms").s("nope")
    w.i8(4).s("1").arr(1).s("num.partitions")
    if v >= 1:
        w.i8(1)
    return w.done()


def _alter_configs(v, topic):
    return (W().arr(2).i8(2).s(topic).arr(1).s("retention.ms").s("3600000")
            .i8(4).s("1").arr(0).i8(1).done())


def _create_partitions(v, topic):
    return W().arr(2).s(topic).i32(3).arr(None).s(topic + "-missing").i32(2).arr(1).arr(1).i32(1) \
        .i32(30000).i8(1).done()


def _delete_groups(v, group):
    return W().arr(2).s(group).s(group + "-none").done()


def _offset_delete(v, topic, group):
    return W().s(group).arr(1).s(topic).arr(1).i32(0).done()


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
    add("list-offsets", 2, 0, 3, lambda v: _list_offsets(v, topic))
    add("metadata", 3, 0, 7, lambda v: _metadata(v, topic))
    add("offset-commit", 8, 0, 7, lambda v: _offset_commit(v, topic, group))
    add("offset-fetch", 9, 0, 7, lambda v: _offset_fetch(v, topic, group))
    add("find-coordinator", 10, 0, 2, lambda v: W().s(group).i8(0).done() if v else W().s(group).done())
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
    add("describe-configs", 32, 0, 2, lambda v: _describe_configs(v, topic))
    add("alter-configs", 33, 0, 1, lambda v: _alter_configs(v, topic))
    add("create-partitions", 37, 0, 1, lambda v: _create_partitions(v, topic))
    add("delete-groups", 42, 0, 1, lambda v: _delete_groups(v, group))
    add("offset-delete", 47, 0, 0, lambda v: _offset_delete(v, topic, group))
    return out
