"""test_protocol.py HOST PORT APIS_FILE MAX_FRAME — the broker's wire behaviour,
driven with raw frames: ApiVersions v0-v3 against the dispatch table,
unsupported versions, unknown API keys, frame-size limits, malformed bodies,
pipelining, acks=0, long-poll fetches answered in order, and backpressure.

Each check prints "ok <name>"; the first failure raises and exits non-zero.
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from kproto import Conn, Dec, Enc, api_versions, read_apis, record_batch  # noqa: E402

HOST, PORT, APIS_FILE, MAX_FRAME = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])


def ok(name):
    print("ok", name, flush=True)


def produce_body(topic, partition, batch, acks=-1, timeout=30000):
    return (Enc().str(None).i16(acks).i32(timeout).array(1).str(topic).array(1).i32(partition)
            .bytes(batch).done())


def parse_produce_v7(data):
    d = Dec(data)
    out = []
    for _ in range(d.array()):
        name = d.str()
        for _ in range(d.array()):
            out.append((name, d.i32(), d.i16(), d.i64(), d.i64(), d.i64()))
    d.i32()
    return out


def metadata_v4(conn, topics, auto=True):
    b = Enc().array(len(topics))
    for t in topics:
        b.str(t)
    corr = conn.send(3, 4, b.i8(1 if auto else 0).done())
    rc, data = conn.recv()
    assert rc == corr
    d = Dec(data)
    d.i32()
    brokers = []
    for _ in range(d.array()):
        brokers.append((d.i32(), d.str(), d.i32(), d.str()))
    d.str()
    d.i32()
    res = {}
    for _ in range(d.array()):
        err, name, _internal = d.i16(), d.str(), d.i8()
        parts = []
        for _ in range(d.array()):
            perr, idx, leader = d.i16(), d.i32(), d.i32()
            reps = [d.i32() for _ in range(d.array())]
            isr = [d.i32() for _ in range(d.array())]
            parts.append((perr, idx, leader, reps, isr))
        res[name] = (err, parts)
    return brokers, res


def fetch_v11_body(topic, partition, offset, max_wait, min_bytes=1):
    return (Enc().i32(-1).i32(max_wait).i32(min_bytes).i32(50 << 20).i8(0).i32(0).i32(-1)
            .array(1).str(topic).array(1).i32(partition).i32(-1).i64(offset).i64(-1).i32(1 << 20)
            .array(0).str("").done())


def parse_fetch_v11(data):
    d = Dec(data)
    d.i32()
    top_err = d.i16()
    d.i32()
    parts = []
    for _ in range(d.array()):
        d.str()
        for _ in range(d.array()):
            idx, err, hw, _lso, _ls = d.i32(), d.i16(), d.i64(), d.i64(), d.i64()
            n = d.array()
            for _ in range(max(n, 0)):
                d.i64()
                d.i64()
            d.i32()
            recs = d.bytes()
            parts.append((idx, err, hw, recs))
    return top_err, parts


# ---- ApiVersions ------------------------------------------------------------------
expected = read_apis(APIS_FILE)
assert expected[18] == (0, 3) and expected[0] == (0, 7) and expected[1] == (4, 11), expected
c = Conn(HOST, PORT)
for v in range(4):
    err, got = api_versions(c, v)
    assert err == 0, (v, err)
    assert got == expected, (v, got, expected)
ok("ApiVersions v0-v3 advertise exactly the dispatch table")

# A version above the range: error 35 and the list in the v0 layout.
corr = c.send(18, 7, b"")
rc, data = c.recv()
d = Dec(data)
assert rc == corr and d.i16() == 35, "ApiVersions v7 must answer UNSUPPORTED_VERSION"
n = d.array()
assert n == len(expected)
ok("ApiVersions with an unsupported version answers UNSUPPORTED_VERSION in v0 layout")

# Unsupported version of another API: an error answer, and the connection lives on.
corr = c.send(0, 99, b"\x00\x01\x02")
rc, data = c.recv()
assert rc == corr and Dec(data).i16() == 35
corr = c.send(3, 2, Enc().array(0).done())  # Metadata v2, no topics: still served
rc, _ = c.recv()
assert rc == corr
ok("unsupported Produce version answered with UNSUPPORTED_VERSION, connection kept")

# Below the minimum too (Fetch v3: kaas serves 4-11).
corr = c.send(1, 3, b"")
rc, data = c.recv()
assert rc == corr and Dec(data).i16() == 35
ok("a version below the minimum is UNSUPPORTED_VERSION too")

# ---- pipelining: kafka-python's probe --------------------------------------------
p = Conn(HOST, PORT)
f1, c1 = p.frame(18, 0, b"")
f2, c2 = p.frame(3, 0, Enc().array(0).done())
p.send_raw(f1 + f2)
r1, d1 = p.recv()
r2, d2 = p.recv()
assert (r1, r2) == (c1, c2), (r1, r2, c1, c2)
assert Dec(d1).i16() == 0
dm = Dec(d2)
nb = dm.array()
assert nb == 1
node, host, port = dm.i32(), dm.str(), dm.i32()
assert port == PORT, (host, port)
ok("pipelined ApiVersions v0 + Metadata v0 answered in order")

# ---- produce, acks, long poll ------------------------------------------------------
brokers, md = metadata_v4(p, ["proto-lp"])
err, parts = md["proto-lp"]
assert err == 0 and len(parts) == 1 and parts[0][2] == node and parts[0][3] == [node] and parts[0][4] == [node]
ok("Metadata auto-creates a topic; replicas = ISR = [leader]")

corr = p.send(0, 7, produce_body("proto-lp", 0, record_batch([b"a", b"b"])))
rc, data = p.recv()
res = parse_produce_v7(data)
assert rc == corr and res[0][2] == 0 and res[0][3] == 0, res
ok("Produce v7 acks=all appends at offset 0")

# acks=0 gets no response: the next answer on the connection is the next request's.
f1, c1 = p.frame(0, 7, produce_body("proto-lp", 0, record_batch([b"c"]), acks=0))
f2, c2 = p.frame(18, 1, b"")
p.send_raw(f1 + f2)
rc, _ = p.recv()
assert rc == c2, (rc, c1, c2)
ok("Produce acks=0 sends no response")

# acks=0 to a partition that does not exist: no answer can carry the error,
# so the connection is closed (Kafka's way of telling the producer).
x = Conn(HOST, PORT)
x.send(0, 7, produce_body("proto-lp", 7, record_batch([b"lost"]), acks=0))
assert x.closed_by_peer(), "a failed acks=0 produce left the connection open"
x.close()
ok("a failed acks=0 Produce closes the connection")

# Invalid acks value.
corr = p.send(0, 7, produce_body("proto-lp", 0, record_batch([b"x"]), acks=2))
rc, data = p.recv()
assert parse_produce_v7(data)[0][2] == 21  # INVALID_REQUIRED_ACKS
ok("acks=2 is INVALID_REQUIRED_ACKS")

# Wait until the acks=0 record is visible (HW = 3), then park a fetch at 3.
deadline = time.time() + 60
while True:
    corr = p.send(1, 11, fetch_v11_body("proto-lp", 0, 0, 0))
    rc, data = p.recv()
    te, fp = parse_fetch_v11(data)
    if fp[0][2] >= 3:
        break
    assert time.time() < deadline, "acks=0 data never became visible"
    time.sleep(0.1)
assert te == 0 and fp[0][1] == 0 and fp[0][3], fp
ok("Fetch v11 returns the records up to the high watermark")

lp = Conn(HOST, PORT)
f1, c1 = lp.frame(1, 11, fetch_v11_body("proto-lp", 0, 3, 120000))
f2, c2 = lp.frame(18, 0, b"")
lp.send_raw(f1 + f2)  # the ApiVersions answer must wait behind the parked fetch
time.sleep(0.5)
corr = p.send(0, 7, produce_body("proto-lp", 0, record_batch([b"wake-up"])))
rc, data = p.recv()
assert parse_produce_v7(data)[0][3] == 3
r1, d1 = lp.recv()
r2, _ = lp.recv()
assert (r1, r2) == (c1, c2), "responses out of order around a parked fetch"
te, fp = parse_fetch_v11(d1)
assert te == 0 and fp[0][1] == 0 and fp[0][2] == 4 and fp[0][3] and b"wake-up" in fp[0][3], fp
ok("a parked fetch is woken by a produce and answered before the pipelined request")

# acks=all with a tiny timeout: answered with NONE (the flush won) or
# REQUEST_TIMED_OUT (the timer won), never left hanging; the data is appended
# either way and becomes durable.
codes = set()
for i in range(20):
    corr = p.send(0, 7, produce_body("proto-lp", 0, record_batch([b"t%d" % i]), timeout=1))
    rc, data = p.recv()
    assert rc == corr
    codes.add(parse_produce_v7(data)[0][2])
assert codes <= {0, 7}, codes
deadline = time.time() + 60
while True:
    corr = p.send(1, 11, fetch_v11_body("proto-lp", 0, 0, 0))
    rc, data = p.recv()
    hw = parse_fetch_v11(data)[1][0][2]
    if hw == 24:
        break
    assert time.time() < deadline, hw
    time.sleep(0.1)
ok("acks=all with timeout_ms=1 answers %s and all 20 batches become durable" % sorted(codes))

# Out of range and stale leader epoch.
corr = p.send(1, 11, fetch_v11_body("proto-lp", 0, 1000, 0))
rc, data = p.recv()
assert parse_fetch_v11(data)[1][0][1] == 1  # OFFSET_OUT_OF_RANGE
ok("fetch beyond the high watermark is OFFSET_OUT_OF_RANGE")

# ListOffsets v1: earliest, latest.
for ts, want in ((-2, 0), (-1, 24)):
    corr = p.send(2, 1, Enc().i32(-1).array(1).str("proto-lp").array(1).i32(0).i64(ts).done())
    rc, data = p.recv()
    d = Dec(data)
    d.array(); d.str(); d.array()
    idx, err, _t, off = d.i32(), d.i16(), d.i64(), d.i64()
    assert err == 0 and off == want, (ts, err, off)
ok("ListOffsets v1 earliest/latest")

# Incremental fetch sessions are not kept.
b = bytearray(fetch_v11_body("proto-lp", 0, 0, 0))
b[4 * 4 + 1:4 * 4 + 5] = (77).to_bytes(4, "big")  # session_id = 77
corr = p.send(1, 11, bytes(b))
rc, data = p.recv()
assert parse_fetch_v11(data)[0] == 70  # FETCH_SESSION_ID_NOT_FOUND
ok("an unknown fetch session is FETCH_SESSION_ID_NOT_FOUND")

# ---- hostile frames --------------------------------------------------------------
def must_close(raw, name):
    x = Conn(HOST, PORT)
    x.send_raw(raw)
    assert x.closed_by_peer(), name + ": connection not closed"
    x.close()
    # The broker still serves others.
    err, _ = api_versions(c, 0)
    assert err == 0
    ok(name)


must_close(Enc().i32(MAX_FRAME + 1).raw(b"\0" * 16).done(), "frame above socket.request.max.bytes closes")
must_close(Enc().i32(-5).done(), "negative frame size closes")
must_close(Enc().i32(4).raw(b"\0\0\0\0").done(), "frame shorter than a header closes")
x = Conn(HOST, PORT)
f, _ = x.frame(999, 0, b"")
x.send_raw(f)
assert x.closed_by_peer(), "unknown API key: not closed"
ok("unknown API key closes the connection")
# Metadata v1 whose topic count claims a billion entries.
x = Conn(HOST, PORT)
f, _ = x.frame(3, 1, Enc().i32(1 << 30).done())
x.send_raw(f)
assert x.closed_by_peer(), "hostile count: not closed"
ok("a count larger than the request closes the connection")
# A truncated Produce body.
x = Conn(HOST, PORT)
f, _ = x.frame(0, 7, produce_body("proto-lp", 0, record_batch([b"a"]))[:-10])
x.send_raw(f)
assert x.closed_by_peer(), "truncated produce: not closed"
ok("a truncated Produce closes the connection")
err, _ = api_versions(c, 3)
assert err == 0
ok("the broker keeps serving after hostile frames")

# ---- backpressure ----------------------------------------------------------------
# A client that pipelines requests with large answers and never reads: the
# broker must stop processing and then stop reading (bounded memory), and
# still answer every request, in order, once the client reads.
bp = Conn(HOST, PORT)
names = ["bp-missing-%04d-" % i + "n" * 200 for i in range(1000)]
req = Enc().array(len(names))
for nm in names:
    req.str(nm)
req = req.i8(0).done()  # allow_auto_topic_creation = false
frames = [bp.frame(3, 4, req) for _ in range(400)]
data = b"".join(f for f, _ in frames)
bp.s.setblocking(False)
sent = 0
last = time.time()
while sent < len(data) and time.time() - last < 3.0:
    try:
        sent += bp.s.send(data[sent:sent + (1 << 20)])
        last = time.time()
    except BlockingIOError:
        time.sleep(0.02)
assert sent < len(data) // 2, "the broker took %d of %d bytes from a client that reads nothing" % (sent, len(data))
accepted = sent
bp.s.setblocking(True)
bp.s.settimeout(300)
import threading  # noqa: E402

t = threading.Thread(target=lambda: bp.s.sendall(data[accepted:]))
t.start()
for f, corr in frames:
    rc, body = bp.recv()
    assert rc == corr
    d = Dec(body)
    d.i32()
    for _ in range(d.array()):
        d.i32(); d.str(); d.i32(); d.str()
    d.str(); d.i32()
    assert d.array() == len(names)
    assert d.i16() == 3  # UNKNOWN_TOPIC_OR_PARTITION (auto-create not allowed)
t.join()
ok("backpressure: %.1f of %d MB taken while the client read nothing; all %d answered in order"
   % (accepted / 1048576.0, len(data) >> 20, len(frames)))
print("protocol: all passed")
