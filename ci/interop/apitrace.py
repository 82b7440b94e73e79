"""apitrace.py LISTEN_PORT UPSTREAM_PORT OUT — a TCP proxy on 127.0.0.1 that
forwards Kafka connections to a broker and appends "client_id api_key
version" for every request to OUT.

How docs/compat.md's table of the API versions each client uses was made:
start kaas with --advertise 127.0.0.1:LISTEN_PORT (so clients come back
through the proxy after the bootstrap Metadata), run the client, then

    sort OUT | uniq -c

Runs until killed.
"""
import socket
import struct
import sys
import threading

LISTEN, UPSTREAM, OUT = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
out = open(OUT, "a")


class RequestLog:
    """Fed the client's bytes; writes one line per whole request frame."""

    def __init__(self):
        self.buf = b""

    def __call__(self, d):
        self.buf += d
        buf = self.buf
        while len(buf) >= 4:
            n = struct.unpack(">i", buf[:4])[0]
            if n < 8 or len(buf) < 4 + n:
                break
            key, ver, _ = struct.unpack(">hhi", buf[4:12])
            cl = struct.unpack(">h", buf[12:14])[0] if n >= 10 else -1
            cid = buf[14:14 + cl].decode(errors="replace") if cl > 0 else "-"
            with lock:
                out.write("%s %d %d\n" % (cid.replace(" ", "_"), key, ver))
                out.flush()
            buf = buf[4 + n:]
        self.buf = buf


def pump(src, dst, seen=None):
    """Copies src to dst until either side closes; seen(bytes) sees each chunk."""
    try:
        while True:
            d = src.recv(1 << 16)
            if not d:
                break
            dst.sendall(d)
            if seen:
                seen(d)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", LISTEN))
    ls.listen(64)
    while True:
        c, _ = ls.accept()
        try:
            u = socket.create_connection(("127.0.0.1", UPSTREAM))
        except OSError:  # the broker is restarting: the client retries
            c.close()
            continue
        threading.Thread(target=pump, args=(c, u, RequestLog()), daemon=True).start()
        threading.Thread(target=pump, args=(u, c), daemon=True).start()


if __name__ == "__main__":
    main()
