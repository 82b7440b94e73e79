"""badinput.py HOST PORT PID VOLUME — malformed input against a running kaas.

Run by test_badinput.sh.  VOLUME is the directory that holds the broker's
data directory (VOLUME/data): everything under it is snapshotted (names,
types, sizes, SHA-256 of every file) before the hostile requests and
compared after them.

Every hostile case opens its own connection and must end in one of the
outcomes it allows: a response (with the right correlation id, parsed to
its last byte, with the error code the case expects) or a clean disconnect
(EOF or reset, nothing but whole responses before it).  Meanwhile a healthy
client on other connections keeps reading a known topic and must never
fail; at the end the volume must be byte-for-byte what it was, with no
directory named after any invalid topic, and the broker's resident memory
must not have grown by the size of what the frames claimed.

Prints "ok <case>" lines; the first failure raises.
"""
import hashlib
import os
import re
import socket
import struct
import sys
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "lib")]
import kreq  # noqa: E402
from kproto import Dec, Enc, crc32c, record_batch, request  # noqa: E402

HOST, PORT, PID, VOL = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
DATA = os.path.join(VOL, "data")
MAX_FRAME = 104857600  # socket.request.max.bytes (Kafka's default; the broker runs with it)
HEALTHY = "healthy"
NREC = 40

E_NONE, E_CORRUPT, E_UNKNOWN_TOPIC, E_INVALID_TOPIC, E_UNSUPPORTED = 0, 2, 3, 17, 35


class Fail(Exception):
    pass


def want(cond, what):
    if not cond:
        raise Fail(what)


def ok(what):
    print("ok", what, flush=True)


def reset_peak():
    """Resets the broker's VmHWM to its current RSS (Linux 4.0+; we run as root)."""
    try:
        with open("/proc/%d/clear_refs" % PID, "w") as f:
            f.write("5")
    except OSError as e:
        raise Fail("cannot reset the broker's peak RSS: %s" % e)


def rss_kb(field="VmRSS"):
    """The broker's resident memory (VmHWM: its peak so far) in KiB."""
    with open("/proc/%d/status" % PID) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise Fail("broker process %d is gone" % PID)


def alive():
    try:
        os.kill(PID, 0)
        return True
    except OSError:
        return False


# ---- a connection that tells an answer from a disconnect ----------------------------

class Conn:
    def __init__(self, timeout=30.0):
        self.s = socket.create_connection((HOST, PORT), timeout=timeout)
        self.buf = b""
        self.corr = 1000

    def send(self, data):
        try:
            self.s.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def frame(self, payload):
        return struct.pack(">i", len(payload)) + payload

    def req(self, api, version, body, flex=False, client_id=b"badinput"):
        self.corr += 1
        return self.corr, self.frame(request(api, version, self.corr, body, flex, client_id))

    def _read(self, n):
        while len(self.buf) < n:
            try:
                d = self.s.recv(1 << 16)
            except (ConnectionResetError, BrokenPipeError):
                d = b""
            if not d:
                return None
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self):
        """(correlation id, body) or None when the broker closed the connection."""
        h = self._read(4)
        if h is None:
            want(not self.buf, "the broker sent %d stray bytes before closing" % len(self.buf))
            return None
        n = struct.unpack(">i", h)[0]
        want(4 <= n < 64 << 20, "response size %d" % n)
        d = self._read(n)
        want(d is not None, "the broker closed in the middle of a response")
        return struct.unpack(">i", d[:4])[0], d[4:]

    def closed(self):
        """True when the broker closes the connection without sending anything more."""
        r = self.recv()
        want(r is None, "expected a disconnect, got a response (correlation id %s)" % (r[0] if r else None))
        return True

    def close(self):
        self.s.close()


class R(Dec):
    """Response reader (strings via strb(), as bytes); a short response is a Fail."""

    def take(self, n):
        want(self.p + n <= len(self.b), "short response (%d bytes wanted at %d of %d)" % (n, self.p, len(self.b)))
        return super().take(n)

    def end(self, what):
        want(self.p == len(self.b), "%s: %d unparsed response bytes" % (what, len(self.b) - self.p))


def call(api, version, body, flex=False):
    """A request on a fresh connection: its response body, or None if closed."""
    c = Conn()
    corr, f = c.req(api, version, body, flex)
    c.send(f)
    r = c.recv()
    c.close()
    if r is None:
        return None
    want(r[0] == corr, "correlation id %d, sent %d" % (r[0], corr))
    return r[1]


# ---- the healthy client ----------------------------------------------------------------

def fetch_healthy(c):
    """Fetch v4 of HEALTHY/0 from offset 0: the record values, in order."""
    body = (Enc().i32(-1).i32(0).i32(1).i32(1 << 20).i8(0).array(1).str(HEALTHY).array(1).i32(0).i64(0)
            .i32(1 << 20).done())
    corr, f = c.req(1, 4, body)
    want(c.send(f), "healthy fetch: send failed")
    r = c.recv()
    want(r is not None and r[0] == corr, "healthy fetch: no answer")
    d = R(r[1])
    d.i32()
    want(d.array() == 1 and d.strb() == HEALTHY.encode() and d.array() == 1, "healthy fetch: layout")
    d.i32()
    err, hw = d.i16(), d.i64()
    d.i64()
    for _ in range(max(d.array(), 0)):
        d.i64()
        d.i64()
    recs = d.bytes() or b""
    d.end("healthy fetch")
    want(err == 0 and hw == NREC, "healthy fetch: error %d, high watermark %d" % (err, hw))
    return parse_values(recs)


def parse_values(recs):
    """Values of the records of uncompressed v2 batches."""
    out, pos = [], 0
    while pos + 61 <= len(recs):
        blen = struct.unpack(">i", recs[pos + 8:pos + 12])[0]
        b = recs[pos:pos + 12 + blen]
        count = struct.unpack(">i", b[57:61])[0]
        r = R(b[61:])
        var = r.varint
        for _ in range(count):
            var()  # length
            r.i8()
            var()
            var()
            kl = var()
            if kl > 0:
                r.take(kl)
            vl = var()
            out.append(r.take(vl) if vl >= 0 else None)
            for _ in range(var()):
                r.take(var())
                hl = var()
                if hl > 0:
                    r.take(hl)
        pos += 12 + blen
    return out


class Healthy(threading.Thread):
    """Keeps one connection and opens fresh ones; every round must work."""

    def __init__(self):
        super().__init__(daemon=True)
        self.rounds = 0
        self.error = None
        self.stop = threading.Event()

    def run(self):
        try:
            keep = Conn()
            while not self.stop.is_set():
                for c in (keep, Conn()):
                    corr, f = c.req(18, 3, Enc(True).str("healthy").str("1").tags().done(), flex=True)
                    want(c.send(f), "healthy ApiVersions: send failed")
                    r = c.recv()
                    want(r is not None and r[0] == corr and R(r[1]).i16() == 0, "healthy ApiVersions failed")
                    vals = fetch_healthy(c)
                    want(vals == [b"healthy-%d" % i for i in range(NREC)], "healthy fetch: wrong records")
                    if c is not keep:
                        c.close()
                self.rounds += 1
                time.sleep(0.02)
            keep.close()
        except Exception as e:  # reported by the main thread
            self.error = "%s: %s" % (type(e).__name__, e)


# ---- the volume -----------------------------------------------------------------------

def snapshot():
    out = {}
    for root, dirs, files in os.walk(VOL):
        rel = os.path.relpath(root, VOL)
        out[rel + "/"] = "dir"
        for f in files:
            p = os.path.join(root, f)
            if os.path.basename(root) == "brokers" and re.fullmatch(r"\.?[0-9]+\.json(\.tmp\.[0-9a-f]+)?", f):
                # heartbeats, and the temp file each rewrite renames into
                # place: rewritten every broker.heartbeat.interval.ms by design
                continue
            if os.path.islink(p):
                out[os.path.join(rel, f)] = "link " + os.readlink(p)
                continue
            with open(p, "rb") as fh:
                out[os.path.join(rel, f)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def diff(a, b):
    d = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            d.append("%s: %s -> %s" % (k, "absent" if k not in a else a[k][:12], "absent" if k not in b else b[k][:12]))
    return d


# ---- setup ----------------------------------------------------------------------------

def setup():
    body = Enc().array(1).str(HEALTHY).i32(1).i16(1).array(0).array(0).i32(30000).done()
    r = R(call(19, 0, body))
    want(r.array() == 1 and r.strb() == HEALTHY.encode() and r.i16() == 0, "create %s" % HEALTHY)
    batch = record_batch([b"healthy-%d" % i for i in range(NREC)])
    body = Enc().str(None).i16(-1).i32(30000).array(1).str(HEALTHY).array(1).i32(0).bytes(batch).done()
    r = R(call(0, 7, body))
    r.array()
    r.strb()
    r.array()
    want(r.i32() == 0 and r.i16() == 0 and r.i64() == 0, "produce to %s" % HEALTHY)
    c = Conn()
    want(fetch_healthy(c) == [b"healthy-%d" % i for i in range(NREC)], "read back %s" % HEALTHY)
    c.close()
    ok("set up topic %s with %d records" % (HEALTHY, NREC))


# ---- framing ---------------------------------------------------------------------------

def sized(payload):
    return struct.pack(">i", len(payload)) + payload


def framing():
    cases = [
        ("negative frame size -1", struct.pack(">i", -1)),
        ("negative frame size -2^31", struct.pack(">i", -2 ** 31)),
        ("frame size 0", struct.pack(">i", 0)),
        ("frame size 7 (shorter than a header)", struct.pack(">i", 7) + b"\0" * 7),
        ("frame size 2^31-1", struct.pack(">i", 2 ** 31 - 1) + b"\0" * 64),
        ("header without client_id", struct.pack(">i", 8) + struct.pack(">hhi", 18, 0, 1)),
        ("client_id longer than the frame", struct.pack(">i", 12) + struct.pack(">hhih", 18, 0, 1, 100) + b"ab"),
        ("client_id length -2", struct.pack(">i", 10) + struct.pack(">hhih", 18, 0, 1, -2)),
        ("flexible header with a tag count beyond the frame",
         sized(Enc().i16(18).i16(3).i32(1).str("x").uvarint(1 << 40).done())),
        ("flexible header with a tag larger than the frame",
         sized(Enc().i16(18).i16(3).i32(1).str("x").uvarint(1).uvarint(0).uvarint(1000).done())),
        ("flexible header with an overlong varint",
         sized(Enc().i16(18).i16(3).i32(1).str("x").raw(b"\xff" * 11).done())),
    ]
    for name, raw in cases:
        c = Conn()
        c.send(raw)
        c.closed()
        c.close()
        ok("framing: %s -> disconnect" % name)

    # Truncated: the frame or its size prefix never completes; the client leaves.
    for name, raw in (("2 of 4 size bytes", b"\0\0"),
                      ("half a frame", struct.pack(">i", 100) + b"\0" * 50),
                      ("a header cut after the api key", struct.pack(">i", 30) + struct.pack(">h", 3))):
        c = Conn()
        c.send(raw)
        time.sleep(0.05)
        c.close()
        ok("framing: %s, then the client goes away" % name)

    # A good request followed by a bad frame in the same packet: the
    # connection closes; the good one may be answered first (or dropped with
    # the connection), but nothing else arrives.
    c = Conn()
    corr, f = c.req(18, 0, b"")
    c.send(f + struct.pack(">i", -7))
    r = c.recv()
    if r is not None:
        want(r[0] == corr, "pipelined good request: correlation id %d, sent %d" % (r[0], corr))
        c.closed()
    c.close()
    ok("framing: a request pipelined before a bad frame -> %sdisconnect" % ("its answer, then " if r else ""))

    # Above socket.request.max.bytes: refused from the size alone, before any
    # allocation.  Keep sending what the frame claims; the broker must neither
    # read it into memory nor keep the connection.
    reset_peak()
    before = rss_kb("VmHWM")
    c = Conn()
    chunk = b"\xab" * (1 << 20)
    sent = 0
    dropped = not c.send(struct.pack(">i", MAX_FRAME + 1))
    while not dropped and sent < 64 << 20:
        dropped = not c.send(chunk)
        sent += len(chunk)
    if not dropped:
        c.closed()
    c.close()
    grown = rss_kb("VmHWM") - before
    want(grown < 16 << 10, "peak RSS grew by %d KiB after an oversized frame" % grown)
    ok("framing: size %d > socket.request.max.bytes -> disconnect after %d MiB sent, peak RSS +%d KiB"
       % (MAX_FRAME + 1, sent >> 20, grown))


# ---- headers: unknown APIs and unsupported versions -------------------------------------

def apis():
    body = call(18, 0, b"")
    r = R(body)
    want(r.i16() == 0, "ApiVersions")
    out = {}
    for _ in range(r.array()):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        out[k] = (lo, hi)
    return out


def versions(served):
    for key in (999, -1, 32767, 4, 5, 6, 7, 17, 23, 24, 25, 26, 28, 36, 50):
        if key in served:
            continue
        c = Conn()
        corr, f = c.req(key, 0, b"\0" * 16)
        c.send(f)
        c.closed()
        c.close()
    ok("unknown or unserved API keys (999, -1, 32767, 4-7, 17, 23-28, 36, 50) -> disconnect")

    n = 0
    for key, (lo, hi) in sorted(served.items()):
        c = Conn()
        for v in sorted({lo - 1, hi + 1, 32767, -32768, -1} - set(range(lo, hi + 1))):
            corr, f = c.req(key, v, b"\x00\x01\x02\x03")
            want(c.send(f), "send")
            r = c.recv()
            want(r is not None, "api %d v%d: connection dropped instead of UNSUPPORTED_VERSION" % (key, v))
            want(r[0] == corr, "api %d v%d: correlation id" % (key, v))
            d = R(r[1])
            want(d.i16() == E_UNSUPPORTED, "api %d v%d: error is not UNSUPPORTED_VERSION" % (key, v))
            if key == 18:  # the v0 layout, so a client can read the supported range
                want(d.array() == len(served), "ApiVersions v%d error answer lists %d APIs" % (v, len(served)))
            n += 1
        # The connection still serves.
        corr, f = c.req(18, 1, b"")
        c.send(f)
        r = c.recv()
        want(r is not None and r[0] == corr and R(r[1]).i16() == 0, "api %d: connection unusable after" % key)
        c.close()
    ok("unsupported versions of all %d served APIs (%d requests) -> UNSUPPORTED_VERSION, connection kept"
       % (len(served), n))


# ---- bodies ----------------------------------------------------------------------------

def hostile_bodies():
    huge = 0x7FFFFFFF
    cases = [
        ("Metadata v1 topic count 2^31-1", 3, 1, Enc().i32(huge).done()),
        ("Metadata v1 topic count -2", 3, 1, Enc().i32(-2).done()),
        ("Metadata v1 topic name length 32767", 3, 1, Enc().i32(1).i16(32767).raw(b"abc").done()),
        ("Metadata v1 topic name length -5", 3, 1, Enc().i32(1).i16(-5).done()),
        ("Produce v7 topic count 2^31-1", 0, 7, Enc().str(None).i16(1).i32(1000).i32(huge).done()),
        ("Produce v7 partition count 2^31-1", 0, 7,
         Enc().str(None).i16(1).i32(1000).i32(1).str(HEALTHY).i32(huge).done()),
        ("Produce v7 records length 2^31-1", 0, 7,
         Enc().str(None).i16(1).i32(1000).i32(1).str(HEALTHY).i32(1).i32(0).i32(huge).raw(b"\0" * 70).done()),
        ("Produce v7 records length -2", 0, 7,
         Enc().str(None).i16(1).i32(1000).i32(1).str(HEALTHY).i32(1).i32(0).i32(-2).done()),
        ("Fetch v11 partition count 2^31-1", 1, 11,
         Enc().i32(-1).i32(0).i32(1).i32(1 << 20).i8(0).i32(0).i32(-1).i32(1).str(HEALTHY).i32(huge).done()),
        ("ListOffsets v1 topic count 2^31-1", 2, 1, Enc().i32(-1).i32(huge).done()),
        ("CreateTopics v4 config count 2^31-1", 19, 4,
         Enc().i32(1).str("bi-x").i32(1).i16(1).i32(0).i32(huge).done()),
        ("CreateTopics v4 assignment broker count 2^31-1", 19, 4,
         Enc().i32(1).str("bi-x").i32(-1).i16(-1).i32(1).i32(0).i32(huge).done()),
        ("DeleteTopics v3 name count 2^31-1", 20, 3, Enc().i32(huge).done()),
        ("DescribeConfigs v2 config-name count 2^31-1", 32, 2, Enc().i32(1).i8(2).str(HEALTHY).i32(huge).done()),
        ("AlterConfigs v1 config count 2^31-1", 33, 1, Enc().i32(1).i8(2).str(HEALTHY).i32(huge).done()),
        ("CreatePartitions v1 assignment count 2^31-1", 37, 1, Enc().i32(1).str(HEALTHY).i32(4).i32(huge).done()),
        ("DeleteRecords v1 partition count 2^31-1", 21, 1, Enc().i32(1).str(HEALTHY).i32(huge).done()),
        ("JoinGroup v5 protocol count 2^31-1", 11, 5,
         Enc().str("g").i32(10000).i32(10000).str("").str(None).str("consumer").i32(huge).done()),
        ("JoinGroup v5 protocol metadata length 2^31-1", 11, 5,
         Enc().str("g").i32(10000).i32(10000).str("").str(None).str("consumer").i32(1).str("range").i32(huge).done()),
        ("SyncGroup v3 assignment count 2^31-1", 14, 3, Enc().str("g").i32(1).str("m").str(None).i32(huge).done()),
        ("OffsetCommit v7 partition count 2^31-1", 8, 7,
         Enc().str("g").i32(-1).str("").str(None).i32(1).str(HEALTHY).i32(huge).done()),
        ("DescribeGroups v4 group count 2^31-1", 15, 4, Enc().i32(huge).done()),
        ("DeleteGroups v1 group count 2^31-1", 42, 1, Enc().i32(huge).done()),
        ("OffsetDelete v0 partition count 2^31-1", 47, 0, Enc().str("g").i32(1).str(HEALTHY).i32(huge).done()),
    ]
    flex_cases = [
        ("ApiVersions v3 software name length 2^40", 18, 3, Enc(True).uvarint(1 << 40).done()),
        ("ApiVersions v3 overlong varint", 18, 3, Enc(True).raw(b"\x80" * 12).done()),
        ("OffsetFetch v7 topic count 2^40", 9, 7, Enc(True).str("g").uvarint(1 << 40).done()),
        ("OffsetFetch v6 partition count 2^31", 9, 6,
         Enc(True).str("g").uvarint(2).str(HEALTHY).uvarint(1 << 31).done()),
        ("OffsetFetch v6 tagged field larger than the request", 9, 6,
         Enc(True).str("g").uvarint(0).uvarint(1).uvarint(5).uvarint(1 << 30).done()),
        ("InitProducerId v4 transactional id length 2^32", 22, 4, Enc(True).uvarint(1 << 32).done()),
    ]
    for name, api, v, body in cases:
        want(call(api, v, body) is None, "%s: answered instead of refused" % name)
    for name, api, v, body in flex_cases:
        want(call(api, v, body, flex=True) is None, "%s: answered instead of refused" % name)
    ok("%d requests with huge or negative counts and lengths -> disconnect" % (len(cases) + len(flex_cases)))

    # Every good request cut short at several points: a disconnect (or, where
    # the cut lands on a field boundary that leaves a valid request, an answer).
    # The first byte alone and all but the last byte can never be a whole
    # request; a cut in the middle may happen to leave one.
    n = closed = 0
    for label, api, v, flex, body in kreq.samples(topic="bi-trunc", group="bi-trunc"):
        if not body:
            continue
        for cut in sorted({0, 1, len(body) // 3, len(body) // 2, len(body) - 1}):
            r = call(api, v, body[:cut], flex)
            n += 1
            closed += r is None
            want(r is None or cut not in (0, 1, len(body) - 1),
                 "%s cut to %d of %d bytes was answered" % (label, cut, len(body)))
    ok("%d truncated requests of every API and version: %d disconnects, %d answers" % (n, closed, n - closed))


def produce_v7(topic, batch, partition=0):
    body = Enc().str(None).i16(-1).i32(30000).array(1).str(topic).array(1).i32(partition).bytes(batch).done()
    resp = call(0, 7, body)
    want(resp is not None, "Produce v7 to %r: disconnect" % topic)
    r = R(resp)
    want(r.array() == 1, "produce response topics")
    r.strb()
    want(r.array() == 1, "produce response partitions")
    idx, err, base = r.i32(), r.i16(), r.i64()
    r.i64()
    r.i64()
    r.i32()
    r.end("Produce v7")
    return err, base


def bad_batches():
    good = record_batch([b"x", b"y"])
    b = bytearray(good)
    b[30] ^= 0xFF
    cases = [("a flipped byte (CRC mismatch)", bytes(b))]
    b = bytearray(good)
    b[16] = 1
    cases.append(("magic 1", bytes(b)))
    b = bytearray(good)
    struct.pack_into(">i", b, 8, len(good) + 1000)
    cases.append(("batch length beyond the records", bytes(b)))
    b = bytearray(good)
    struct.pack_into(">i", b, 8, 10)
    cases.append(("batch length below the header", bytes(b)))
    cases.append(("record count 5 for 2 records", record_batch([b"x", b"y"])[:57] + struct.pack(">i", 5) +
                  record_batch([b"x", b"y"])[61:]))
    cases.append(("gzip batch whose payload is not gzip", record_batch([b"x"], codec=1, compress=lambda d: b"junk" * 10)))
    cases.append(("codec 7", record_batch([b"x"], codec=7)))
    cases.append(("control batch from a client", record_batch([b"x"], codec=0x20)))
    cases.append(("16 bytes of garbage", b"\x00" * 8 + b"\xff" * 8))
    for name, batch in cases:
        # A batch whose CRC is fixed up after the edit, so only the edit is wrong.
        if name.startswith("record count"):
            bb = bytearray(batch)
            struct.pack_into(">I", bb, 17, crc32c(bytes(bb[21:])))
            batch = bytes(bb)
        err, base = produce_v7(HEALTHY, batch)
        want(err != E_NONE and base == -1, "Produce of %s: error %d, base offset %d" % (name, err, base))
    ok("%d malformed record batches -> error answers (CORRUPT_MESSAGE and the like), nothing appended"
       % len(cases))

    # Decompression bombs: the broker walks the records of compressed batches
    # as it inflates them in 64 KiB pieces, up to a bound (max(64 x
    # max.message.bytes, 256 MiB)); a batch that inflates beyond it is refused
    # and none costs more memory than a piece and the codec's window.  The
    # zeros of the first two are no records (refused at the first byte); the
    # third is one well-formed record of 2 GiB, refused at the bound.
    for label, codec, comp in (("gzip, 512 MiB of zeros", 1, gzip_bomb(512 << 20)),
                               ("zstd, 4 GiB in RLE blocks", 4, zstd_bomb(4 << 30)),
                               ("zstd, one 2 GiB record", 4, zstd_record_bomb((1 << 31) - 64))):
        reset_peak()
        before = rss_kb("VmHWM")
        err, base = produce_v7(HEALTHY, record_batch([b""], codec=codec, compress=lambda d: comp))
        grown = rss_kb("VmHWM") - before
        want(err != E_NONE, "a %s bomb was accepted" % label)
        want(err == 10 or "record" not in label,  # MESSAGE_TOO_LARGE
             "a %s bomb: error %d, not MESSAGE_TOO_LARGE" % (label, err))
        want(grown < 32 << 10, "peak RSS grew by %d KiB for a %s bomb" % (grown, label))
        ok("decompression bomb (%s in %d KiB) -> error %d, peak RSS +%d MiB"
           % (label, len(comp) >> 10, err, grown >> 10))


def gzip_bomb(n):
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    z = bytes(1 << 20)
    return b"".join(c.compress(z) for _ in range(n >> 20)) + c.flush()


def zstd_record_bomb(vlen):
    """A zstd frame of one whole record (null key, no headers) whose value is
    vlen zero bytes: the record's start in a raw block, the value and the
    header count (0) in 128 KiB RLE blocks."""
    body = 1 + 1 + 1 + 1 + len(Enc().varint(vlen).done()) + vlen + 1
    start = Enc().varint(body).i8(0).varint(0).varint(0).varint(-1).varint(vlen).done()
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    out += bytes([0x00, 0x38])  # no content size, no checksum; window 128 KiB
    out += struct.pack("<I", len(start) << 3)[:3] + start
    left, blk = vlen + 1, 128 << 10
    while left:
        n = min(left, blk)
        left -= n
        out += struct.pack("<I", (n << 3) | (1 << 1) | (left == 0))[:3] + b"\0"
    return bytes(out)


def zstd_bomb(n):
    """A zstd frame of n zero bytes made of 128 KiB RLE blocks (4 bytes each)."""
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    out += bytes([0x00, 0x38])  # no content size, no checksum; window 128 KiB
    blk = 128 << 10
    nblk = n // blk
    for i in range(nblk):
        out += struct.pack("<I", (blk << 3) | (1 << 1) | (i == nblk - 1))[:3] + b"\0"
    return bytes(out)


# ---- invalid topic names --------------------------------------------------------------

BAD_NAMES = [b"../x", b"..", b".", b"a" * 250, b"a/b", b"a\0b", b"", b"/abs", b"x/../../y", b"a b", b"\xc3\xa9",
             b"a\nb", b"\xff\xfe", b"~trash-x", b"__cluster", b"a" * 32767, b"../" * 20 + b"etc"]


def metadata_v4(names):
    w = Enc().array(len(names))
    for n in names:
        w.str(n)
    resp = call(3, 4, w.i8(1).done())
    want(resp is not None, "Metadata v4 with invalid names: disconnect")
    r = R(resp)
    r.i32()
    for _ in range(r.array()):
        r.i32()
        r.strb()
        r.i32()
        r.strb()
    r.strb()
    r.i32()
    out = {}
    for _ in range(r.array()):
        err, name, _ = r.i16(), r.strb(), r.i8()
        for _ in range(r.array()):
            r.i16()
            r.i32()
            r.i32()
            for _ in range(r.array()):
                r.i32()
            for _ in range(r.array()):
                r.i32()
        out[name] = err
    r.end("Metadata v4")
    return out


def names_by_request(name):
    res = {}
    # Metadata v4 with auto-create on.
    md = metadata_v4([name])
    want(md.get(name) in (E_INVALID_TOPIC, E_UNKNOWN_TOPIC), "Metadata: %r -> %s" % (name[:40], md))
    res["Metadata"] = md[name]
    # Produce v7.
    err, _ = produce_v7(name, record_batch([b"x"]))
    want(err in (E_INVALID_TOPIC, E_UNKNOWN_TOPIC), "Produce: %r -> %d" % (name[:40], err))
    res["Produce"] = err
    # CreateTopics v0-v4: always INVALID_TOPIC_EXCEPTION.
    for v in range(5):
        w = Enc().array(1).str(name).i32(1).i16(1).array(0).array(0).i32(30000)
        if v >= 1:
            w.i8(0)
        resp = call(19, v, w.done())
        want(resp is not None, "CreateTopics v%d %r: disconnect" % (v, name[:40]))
        r = R(resp)
        if v >= 2:
            r.i32()
        want(r.array() == 1 and r.strb() == name, "CreateTopics v%d: name not echoed" % v)
        err = r.i16()
        if v >= 1:
            r.strb()
        r.end("CreateTopics v%d" % v)
        want(err == E_INVALID_TOPIC, "CreateTopics v%d: %r -> %d" % (v, name[:40], err))
    res["CreateTopics"] = E_INVALID_TOPIC
    # DeleteTopics v0-v3.
    for v in range(4):
        resp = call(20, v, Enc().array(1).str(name).i32(30000).done())
        want(resp is not None, "DeleteTopics v%d %r: disconnect" % (v, name[:40]))
        r = R(resp)
        if v >= 1:
            r.i32()
        want(r.array() == 1 and r.strb() == name, "DeleteTopics v%d: name not echoed" % v)
        err = r.i16()
        r.end("DeleteTopics v%d" % v)
        want(err in (E_INVALID_TOPIC, E_UNKNOWN_TOPIC), "DeleteTopics v%d: %r -> %d" % (v, name[:40], err))
    res["DeleteTopics"] = err
    # The admin APIs that name a topic: an error answer, never a disconnect.
    for label, api, v, body in (
            ("CreatePartitions", 37, 1, Enc().array(1).str(name).i32(2).array(None).i32(30000).i8(0).done()),
            ("AlterConfigs", 33, 1, Enc().array(1).i8(2).str(name).array(1).str("retention.ms").str("1").i8(0).done()),
            ("DescribeConfigs", 32, 2, Enc().array(1).i8(2).str(name).array(None).i8(0).done()),
            ("DeleteRecords", 21, 1, Enc().array(1).str(name).array(1).i32(0).i64(0).i32(30000).done()),
            ("ListOffsets", 2, 1, Enc().i32(-1).array(1).str(name).array(1).i32(0).i64(-1).done()),
            ("OffsetCommit", 8, 2, Enc().str("bi-g").i32(-1).str("").i64(-1).array(1).str(name).array(1).i32(0).i64(1)
             .str("").done())):
        resp = call(api, v, body)
        want(resp is not None, "%s %r: disconnect" % (label, name[:40]))
    return res


def topic_names():
    seen = {}
    for name in BAD_NAMES:
        res = names_by_request(name)
        for k, v in res.items():
            seen.setdefault(k, set()).add(v)
    ok("%d invalid topic names (../x, .., ., 250 chars, a/b, NUL, ...) via Metadata auto-create, Produce, "
       "CreateTopics v0-4, DeleteTopics v0-3 and six more APIs: error codes %s"
       % (len(BAD_NAMES), {k: sorted(v) for k, v in sorted(seen.items())}))


# ---- main -----------------------------------------------------------------------------

def main():
    setup()
    served = apis()
    time.sleep(1.5)  # let the creation settle (registry upkeep, manifests)
    before = snapshot()
    rss0 = rss_kb()
    h = Healthy()
    h.start()
    try:
        framing()
        versions(served)
        hostile_bodies()
        bad_batches()
        topic_names()
    finally:
        time.sleep(0.3)
        h.stop.set()
        h.join(60)
    want(alive(), "the broker died")
    want(h.error is None, "the healthy client failed: %s" % h.error)
    want(h.rounds >= 5, "the healthy client completed only %d rounds" % h.rounds)
    ok("a healthy client on other connections completed %d rounds (ApiVersions + Fetch) throughout" % h.rounds)
    time.sleep(1.5)  # let any (wrong) background write land before comparing
    after = snapshot()
    d = diff(before, after)
    want(not d, "the volume changed:\n  " + "\n  ".join(d[:20]))
    for name in BAD_NAMES:
        for root, dirs, files in os.walk(VOL):
            rel = os.path.relpath(os.path.join(root, name.decode(errors="surrogateescape")), VOL) + "/"
            want(name.decode(errors="surrogateescape") not in dirs or rel in before,
                 "a directory named %r exists under %s" % (name[:40], root))
    want(sorted(os.listdir(VOL)) == ["data"], "something was created next to the data directory: %s"
         % os.listdir(VOL))
    ok("volume unchanged: %d entries, same names and SHA-256 before and after" % len(after))
    grown = rss_kb() - rss0
    want(grown < 256 << 10, "RSS grew by %d KiB over the suite" % grown)
    ok("broker RSS %d -> %d KiB" % (rss0, rss0 + grown))

    # Controls: the same paths accept good input, so the refusals above are
    # about the input.  Produce v0-v2 (v2 batches), a 249-character name.
    for v in (0, 1, 2):
        body = Enc().i16(-1).i32(30000).array(1).str(HEALTHY).array(1).i32(0).bytes(record_batch([b"v%d" % v])).done()
        r = R(call(0, v, body))
        want(r.array() == 1 and r.strb() == HEALTHY.encode() and r.array() == 1, "Produce v%d layout" % v)
        idx, err, base = r.i32(), r.i16(), r.i64()
        if v >= 2:
            r.i64()
        if v >= 1:
            r.i32()
        r.end("Produce v%d" % v)
        want(err == 0 and base == NREC + v, "Produce v%d: error %d, base offset %d" % (v, err, base))
    long_ok = b"a" * 249
    r = R(call(19, 1, Enc().array(1).str(long_ok).i32(1).i16(1).array(0).array(0).i32(30000).i8(0).done()))
    want(r.array() == 1 and r.strb() == long_ok and r.i16() == 0, "a 249-character topic name is valid")
    want(os.path.isdir(os.path.join(DATA, long_ok.decode())), "no directory for the 249-character topic")
    ok("controls: Produce v0-v2 append; a 249-character topic is created")


if __name__ == "__main__":
    try:
        main()
    except Fail as e:
        print("FAIL:", e, file=sys.stderr)
        sys.exit(1)
