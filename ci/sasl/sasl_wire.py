#!/usr/bin/env python3
"""sasl_wire.py — SASL exchanges by hand on a raw socket, for what no client
library does on purpose (ci/sasl/test_sasl.sh).  Each command exits 0 when
the broker behaved as Kafka does, 1 with a FAIL line otherwise.

  cut HOST PORT N            N SCRAM exchanges cut in the middle: after the
                             handshake, after server-first, half-way through
                             a frame; then one more connection must still work
  preauth HOST PORT TOPIC    ApiVersions is answered before authentication;
                             CreateTopics TOPIC then closes the connection
  big HOST PORT              a 1 MiB frame before authentication is refused
  expire HOST PORT USER PASS MS
                             PLAIN by SaslAuthenticate v1: session_lifetime_ms
                             is MS; Metadata works, and after MS it closes
  salt HOST PORT USER        prints the s= and i= of the SCRAM-SHA-256
                             server-first-message for USER (and cuts there)
  plainport HOST PORT        on a listener without SASL, SaslHandshake and
                             SaslAuthenticate answer ILLEGAL_SASL_STATE and
                             the connection stays usable
  reauth HOST PORT USER PASS OTHER OTHERPASS
                             re-authentication as the same user works, as
                             another user closes the connection
  offers HOST PORT MECH ERR LIST
                             SaslHandshake v1 for MECH answers error ERR and
                             the mechanisms LIST (comma-separated, in order);
                             after an error the connection closes
  lifetime HOST PORT USER PASS
                             prints session_lifetime_ms of a PLAIN login
  frame HOST PORT N answered|closed
                             a SaslHandshake of N bytes (a long mechanism
                             name) is answered (UNSUPPORTED_SASL_MECHANISM)
                             or closes the connection unanswered
"""
import os
import socket
import struct
import sys
import time


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def req(api, ver, corr, body):
    hdr = struct.pack(">hhih", api, ver, corr, 4) + b"wire"
    if api == 36 and ver >= 2:  # flexible: header v2 (tagged fields)
        hdr += b"\x00"
    msg = hdr + body
    return struct.pack(">i", len(msg)) + msg


def recv_exact(s, n):
    data = b""
    while len(data) < n:
        got = s.recv(n - len(data))
        if not got:
            return None
        data += got
    return data


def recv_frame(s):
    h = recv_exact(s, 4)
    if h is None:
        return None
    (n,) = struct.unpack(">i", h)
    return recv_exact(s, n)


def closed(s, timeout=5):
    """True when the broker closed the connection (EOF or reset)."""
    s.settimeout(timeout)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def s16(x):
    return struct.pack(">h", len(x)) + x


def b32(x):
    return struct.pack(">i", len(x)) + x


def handshake(s, mech, corr=1):
    s.sendall(req(17, 1, corr, s16(mech.encode())))
    r = recv_frame(s)
    if r is None:
        fail("closed after SaslHandshake %s" % mech)
    (err,) = struct.unpack(">h", r[4:6])
    if err:
        fail("SaslHandshake %s: error %d" % (mech, err))


def authenticate(s, token, ver=1, corr=2):
    """SaslAuthenticate v0/v1: (error, message, auth_bytes, lifetime) or None when closed."""
    s.sendall(req(36, ver, corr, b32(token)))
    r = recv_frame(s)
    if r is None:
        return None
    p = 4
    (err,) = struct.unpack(">h", r[p:p + 2])
    p += 2
    (ml,) = struct.unpack(">h", r[p:p + 2])
    p += 2
    msg = r[p:p + ml].decode() if ml >= 0 else None
    p += max(ml, 0)
    (bl,) = struct.unpack(">i", r[p:p + 4])
    p += 4
    auth = r[p:p + bl]
    p += bl
    life = struct.unpack(">q", r[p:p + 8])[0] if ver >= 1 else None
    return err, msg, auth, life


def connect(host, port):
    s = socket.create_connection((host, int(port)), timeout=10)
    return s


def metadata(s, corr):
    s.sendall(req(3, 1, corr, struct.pack(">i", 0)))
    return recv_frame(s)


def cmd_cut(host, port, n):
    for i in range(int(n)):
        s = connect(host, port)
        handshake(s, "SCRAM-SHA-256")
        kind = i % 3
        if kind == 1:
            r = authenticate(s, b"n,,n=alice,r=cutnonce%d" % i)
            if r is None or r[0] != 0 or not r[2].startswith(b"r=cutnonce"):
                fail("no server-first-message: %r" % (r,))
        elif kind == 2:
            m = req(36, 1, 2, b32(b"n,,n=alice,r=half"))
            s.sendall(m[: len(m) // 2])  # and never the rest
        s.close()
    print("ok %s exchanges cut in the middle" % n)


def cmd_preauth(host, port, topic):
    s = connect(host, port)
    s.sendall(req(18, 0, 1, b""))
    r = recv_frame(s)
    if r is None or struct.unpack(">h", r[4:6])[0] != 0:
        fail("ApiVersions before authentication was not answered")
    t = topic.encode()
    body = struct.pack(">i", 1) + s16(t) + struct.pack(">ihi", 1, 1, 0) + struct.pack(">i", 0) + struct.pack(">i", 5000)
    s.sendall(req(19, 0, 2, body))
    if not closed(s):
        fail("CreateTopics before authentication did not close the connection")
    print("ok ApiVersions answered, CreateTopics before authentication closed the connection")


def cmd_big(host, port):
    s = connect(host, port)
    s.sendall(struct.pack(">i", 1 << 20) + b"\x00" * 4096)
    if not closed(s):
        fail("a 1 MiB frame before authentication was not refused")
    print("ok a 1 MiB frame before authentication closed the connection")


def plain_login(s, user, pw, ver=1, corr=2):
    handshake(s, "PLAIN", corr)
    return authenticate(s, b"\0" + user.encode() + b"\0" + pw.encode(), ver, corr + 1)


def cmd_expire(host, port, user, pw, ms):
    ms = int(ms)
    s = connect(host, port)
    r = plain_login(s, user, pw)
    if r is None or r[0] != 0:
        fail("PLAIN login: %r" % (r,))
    if r[3] != ms:
        fail("session_lifetime_ms is %r, want %d" % (r[3], ms))
    if metadata(s, 10) is None:
        fail("Metadata within the session failed")
    time.sleep(ms / 1000 + 1)
    if metadata(s, 11) is not None:
        fail("Metadata after the session ended was answered")
    print("ok session_lifetime_ms=%d; the first request after it closed the connection" % ms)


def cmd_salt(host, port, user):
    s = connect(host, port)
    handshake(s, "SCRAM-SHA-256")
    r = authenticate(s, b"n,,n=" + user.encode() + b",r=saltprobe")
    if r is None or r[0] != 0:
        fail("no server-first-message for %s: %r" % (user, r))
    print(",".join(a for a in r[2].decode().split(",") if a[:2] in ("s=", "i=")))


def cmd_plainport(host, port):
    s = connect(host, port)
    s.sendall(req(17, 1, 1, s16(b"PLAIN")))
    r = recv_frame(s)
    if r is None or struct.unpack(">h", r[4:6])[0] != 34:
        fail("SaslHandshake on a plaintext listener: %r" % (r,))
    r = authenticate(s, b"\0a\0b", 0, 2)
    if r is None or r[0] != 34:
        fail("SaslAuthenticate on a plaintext listener: %r" % (r,))
    if metadata(s, 3) is None:
        fail("the connection closed after ILLEGAL_SASL_STATE")
    print("ok ILLEGAL_SASL_STATE on a listener without SASL (%s); the connection still serves" % r[1])


def cmd_reauth(host, port, user, pw, other, otherpw):
    s = connect(host, port)
    r = plain_login(s, user, pw)
    if r is None or r[0] != 0:
        fail("PLAIN login: %r" % (r,))
    r = plain_login(s, user, pw, corr=5)
    if r is None or r[0] != 0:
        fail("re-authentication as the same user: %r" % (r,))
    if metadata(s, 10) is None:
        fail("Metadata after re-authentication failed")
    r = plain_login(s, other, otherpw, corr=20)
    if r is None or r[0] != 58:
        fail("re-authentication as another user was not refused: %r" % (r,))
    if not closed(s):
        fail("the connection stayed open after a re-authentication as another user")
    print("ok re-authentication keeps the principal; another one closes (%s)" % r[1])


def cmd_offers(host, port, mech, want_err, want_list):
    s = connect(host, port)
    s.sendall(req(17, 1, 1, s16(mech.encode())))
    r = recv_frame(s)
    if r is None:
        fail("SaslHandshake %s: closed unanswered" % mech)
    (err,) = struct.unpack(">h", r[4:6])
    (n,) = struct.unpack(">i", r[6:10])
    p, got = 10, []
    for _ in range(n):
        (ml,) = struct.unpack(">h", r[p:p + 2])
        got.append(r[p + 2:p + 2 + ml].decode())
        p += 2 + ml
    if err != int(want_err) or ",".join(got) != want_list:
        fail("SaslHandshake %s: error %d, mechanisms %s; want error %s, mechanisms %s" % (mech, err, got, want_err,
                                                                                           want_list))
    if err and not closed(s):
        fail("SaslHandshake %s: error %d and the connection stayed open" % (mech, err))
    print("ok SaslHandshake %s: error %d, offered %s" % (mech, err, ",".join(got)))


def cmd_lifetime(host, port, user, pw):
    s = connect(host, port)
    r = plain_login(s, user, pw)
    if r is None or r[0] != 0:
        fail("PLAIN login: %r" % (r,))
    print(r[3])


def cmd_frame(host, port, n, want):
    s = connect(host, port)
    pad = int(n) - 16  # the frame: a 14-byte header, the string and its 2-byte length
    s.sendall(req(17, 1, 1, s16(b"X" * pad)))
    r = recv_frame(s)
    if want == "answered" and (r is None or struct.unpack(">h", r[4:6])[0] != 33):
        fail("a %s-byte SaslHandshake was not answered UNSUPPORTED_SASL_MECHANISM: %r" % (n, r and r[:8]))
    if want == "closed" and r is not None:
        fail("a %s-byte SaslHandshake was answered" % n)
    print("ok a %s-byte SaslHandshake: %s" % (n, want))


if __name__ == "__main__":
    cmds = {"cut": cmd_cut, "preauth": cmd_preauth, "big": cmd_big, "expire": cmd_expire, "reauth": cmd_reauth,
            "salt": cmd_salt, "plainport": cmd_plainport, "offers": cmd_offers, "lifetime": cmd_lifetime,
            "frame": cmd_frame}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](*sys.argv[2:])
