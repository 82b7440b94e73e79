"""kproto.py — just enough of the Kafka wire protocol to poke a broker from
tests: framing, request headers (v1/v2), an encoder and a decoder of the
primitive types, and a v2 record batch builder.

    from kproto import Conn, Enc, Dec
    c = Conn(host, port)
    corr = c.send(18, 0, b"")            # ApiVersions v0, empty body
    corr2, body = c.recv()               # the response body after the header

Everything is big-endian, as on the wire.  Enc(flex=True) / Dec(b, flex=True)
speak the flexible (KIP-482) encodings: str, bytes and array are compact and
tags() writes (reads) a tagged-field section; in the classic encodings
tags() does nothing, as those versions have none.
"""
import socket
import struct
import zlib


class Enc:
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

    def uvarint(self, v):
        while True:
            byte = v & 0x7F
            v >>= 7
            if v:
                self.b.append(byte | 0x80)
            else:
                self.b.append(byte)
                return self

    def varint(self, v):
        return self.uvarint((v << 1) ^ (v >> 63))

    def _len(self, n, classic):
        """A length or count: n + 1 as a uvarint when flexible (0 is null),
        else `classic` (i16 or i32) with -1 for null."""
        if self.flex:
            return self.uvarint(0 if n is None or n < 0 else n + 1)
        return classic(-1 if n is None else n)

    def str(self, s):
        """A string (str or bytes; None is null)."""
        d = s.encode() if isinstance(s, str) else s
        self._len(None if d is None else len(d), self.i16)
        return self.raw(d or b"")

    def bytes(self, d):
        self._len(None if d is None else len(d), self.i32)
        return self.raw(d or b"")

    def array(self, n):
        """An array's count (None is null); the elements follow."""
        return self._len(n, self.i32)

    def tags(self):
        """An empty tagged-field section (flexible versions only)."""
        return self.uvarint(0) if self.flex else self

    def raw(self, d):
        self.b += d
        return self

    def done(self):
        return bytes(self.b)


class Dec:
    def __init__(self, b, flex=False):
        self.b = b
        self.p = 0
        self.flex = flex

    def remain(self):
        return len(self.b) - self.p

    def take(self, n):
        if self.p + n > len(self.b):
            raise ValueError("short response: wanted %d bytes at %d of %d" % (n, self.p, len(self.b)))
        d = self.b[self.p:self.p + n]
        self.p += n
        return d

    def i8(self):
        return struct.unpack(">b", self.take(1))[0]

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def uvarint(self):
        v = shift = 0
        while True:
            byte = self.take(1)[0]
            v |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return v
            shift += 7

    def varint(self):
        u = self.uvarint()
        return (u >> 1) ^ -(u & 1)

    def _len(self, classic):
        return self.uvarint() - 1 if self.flex else classic()

    def strb(self):
        """A string as the bytes sent (None when null)."""
        n = self._len(self.i16)
        return None if n < 0 else bytes(self.take(n))

    def str(self):
        s = self.strb()
        return None if s is None else s.decode()

    def bytes(self):
        n = self._len(self.i32)
        return None if n < 0 else bytes(self.take(n))

    def array(self):
        return self._len(self.i32)

    def tags(self):
        if self.flex:
            for _ in range(self.uvarint()):
                self.uvarint()
                self.take(self.uvarint())


def request(api_key, version, corr, body, flex=False, client_id="kproto"):
    """A request without its size prefix: header v1, or v2 (a tagged-field
    section after the client id, which is never compact) when `flex`."""
    h = Enc().i16(api_key).i16(version).i32(corr).str(client_id)
    if flex:
        h.uvarint(0)
    return h.done() + body


# ---- record batches (magic 2) --------------------------------------------------

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


def record_batch(values, ts=1700000000000, codec=0, magic=2, pid=-1, epoch=-1, seq=-1, keys=None,
                 headers=None, compress=None):
    """A v2 record batch of `values` (bytes or None), with optional `keys`
    and `headers` ([(name, value)] per record).  `compress` (bytes -> bytes)
    is applied to the records section and `codec` set in the attributes."""
    recs = Enc()
    for i, v in enumerate(values):
        k = keys[i] if keys else None
        r = Enc().i8(0).varint(0).varint(i)
        r.varint(-1 if k is None else len(k)).raw(k or b"")
        r.varint(-1 if v is None else len(v)).raw(v or b"")
        hs = headers[i] if headers else []
        r.varint(len(hs))
        for hn, hv in hs:
            r.varint(len(hn)).raw(hn).varint(-1 if hv is None else len(hv)).raw(hv or b"")
        body = r.done()
        recs.varint(len(body)).raw(body)
    payload = recs.done()
    if compress:
        payload = compress(payload)
    after_crc = (Enc().i16(codec).i32(len(values) - 1).i64(ts).i64(ts).i64(pid).i16(epoch).i32(seq)
                 .i32(len(values)).raw(payload).done())
    tail = Enc().i32(-1).i8(magic).raw(struct.pack(">I", crc32c(after_crc))).raw(after_crc).done()
    return Enc().i64(0).i32(len(tail)).raw(tail).done()


def gzip_compress(data):
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


# ---- a client connection ----------------------------------------------------------

class Conn:
    def __init__(self, host, port, timeout=60.0, client_id="kproto"):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.corr = 0
        self.client_id = client_id
        self.buf = b""

    def frame(self, api_key, version, body, flex=False, corr=None):
        """A whole request frame (length prefix included)."""
        if corr is None:
            self.corr += 1
            corr = self.corr
        payload = request(api_key, version, corr, body, flex, self.client_id)
        return struct.pack(">i", len(payload)) + payload, corr

    def send(self, api_key, version, body, flex=False):
        f, corr = self.frame(api_key, version, body, flex)
        self.s.sendall(f)
        return corr

    def send_raw(self, data):
        self.s.sendall(data)

    def _read(self, n):
        while len(self.buf) < n:
            d = self.s.recv(1 << 20)
            if not d:
                raise EOFError("connection closed by the broker")
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv(self, flex_header=False):
        """(correlation id, body) of the next response."""
        size = struct.unpack(">i", self._read(4))[0]
        data = self._read(size)
        d = Dec(data, flex_header)
        corr = d.i32()
        d.tags()
        return corr, data[d.p:]

    def closed_by_peer(self, timeout=30.0):
        """True once the broker has closed the connection (EOF or reset)."""
        self.s.settimeout(timeout)
        try:
            while True:
                d = self.s.recv(65536)
                if not d:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.s.close()


def read_apis(path):
    """{api_key: (min, max)} from a file `kaas --apis` wrote."""
    out = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            lo, hi = w[2].split("-")
            out[int(w[0])] = (int(lo), int(hi))
    return out


def api_versions(conn, version=0):
    """{api_key: (min, max)} and the error code, via ApiVersions `version`."""
    flex = version >= 3
    body = Enc(flex).str("kproto").str("1.0").tags().done() if flex else b""
    corr = conn.send(18, version, body, flex=flex)
    rc, data = conn.recv()
    assert rc == corr, (rc, corr)
    d = Dec(data, flex)
    err = d.i16()
    out = {}
    for _ in range(d.array()):
        k, lo, hi = d.i16(), d.i16(), d.i16()
        d.tags()
        out[k] = (lo, hi)
    return err, out
