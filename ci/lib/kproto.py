"""kproto.py — just enough of the Kafka wire protocol to poke a broker from
tests: framing, request headers (v1/v2), primitive encoders and a reader.

    from kproto import Conn, Enc, Dec
    c = Conn(host, port)
    corr = c.send(18, 0, b"")            # ApiVersions v0, empty body
    corr2, body = c.recv()               # the response body after the header

Everything is big-endian, as on the wire.  Flexible (KIP-482) encodings:
Enc.cstr/cbytes/carray/tags and Dec.cstr/carray/tags.
"""
import socket
import struct


class Enc:
    def __init__(self):
        self.b = bytearray()

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

    def str(self, s):
        if s is None:
            return self.i16(-1)
        d = s.encode() if isinstance(s, str) else s
        self.i16(len(d))
        self.b += d
        return self

    def cstr(self, s):
        if s is None:
            return self.uvarint(0)
        d = s.encode() if isinstance(s, str) else s
        self.uvarint(len(d) + 1)
        self.b += d
        return self

    def bytes(self, d):
        if d is None:
            return self.i32(-1)
        self.i32(len(d))
        self.b += d
        return self

    def array(self, n):
        return self.i32(n)

    def carray(self, n):
        return self.uvarint(0 if n is None or n < 0 else n + 1)

    def tags(self):
        return self.uvarint(0)

    def raw(self, d):
        self.b += d
        return self

    def done(self):
        return bytes(self.b)


class Dec:
    def __init__(self, b):
        self.b = b
        self.p = 0

    def remain(self):
        return len(self.b) - self.p

    def _take(self, n):
        if self.p + n > len(self.b):
            raise ValueError("short response: wanted %d bytes at %d of %d" % (n, self.p, len(self.b)))
        d = self.b[self.p:self.p + n]
        self.p += n
        return d

    def i8(self):
        return struct.unpack(">b", self._take(1))[0]

    def i16(self):
        return struct.unpack(">h", self._take(2))[0]

    def i32(self):
        return struct.unpack(">i", self._take(4))[0]

    def i64(self):
        return struct.unpack(">q", self._take(8))[0]

    def uvarint(self):
        v = shift = 0
        while True:
            byte = self._take(1)[0]
            v |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return v
            shift += 7

    def str(self):
        n = self.i16()
        return None if n < 0 else self._take(n).decode()

    def cstr(self):
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode()

    def bytes(self):
        n = self.i32()
        return None if n < 0 else bytes(self._take(n))

    def array(self):
        return self.i32()

    def carray(self):
        return self.uvarint() - 1

    def tags(self):
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


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
        h = Enc().i16(api_key).i16(version).i32(corr).str(self.client_id)
        if flex:
            h.tags()
        payload = h.done() + body
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
        d = Dec(data)
        corr = d.i32()
        if flex_header:
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


def api_versions(conn, version=0):
    """{api_key: (min, max)} and the error code, via ApiVersions `version`."""
    body = b""
    if version >= 3:
        body = Enc().cstr("kproto").cstr("1.0").tags().done()
    corr = conn.send(18, version, body, flex=version >= 3)
    rc, data = conn.recv()
    assert rc == corr, (rc, corr)
    d = Dec(data)
    err = d.i16()
    n = d.carray() if version >= 3 else d.array()
    out = {}
    for _ in range(n):
        k, lo, hi = d.i16(), d.i16(), d.i16()
        if version >= 3:
            d.tags()
        out[k] = (lo, hi)
    return err, out
