#!/bin/bash
# ci/broker/test_limits.sh — broker-wide limits: queued.max.request.bytes
# (frames wait for room before they are allocated, are granted in the order
# they started waiting, and all get answered once room frees; a SIGTERM with
# waiting frames still drains), max.connections (new connections wait in the
# listen backlog, and are served once one closes), max.connections.per.ip
# (closed at once), slow frames (kaas.request.min.bytes.per.sec: six
# connections announcing 100 MiB frames and trickling them cannot starve
# seven unrelated producers), and bad values refused naming the key.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh limits

# ---- bad values exit 2 naming the key ----------------------------------------
mkdir -p "$T/cfg"
for kv in queued.max.request.bytes=1000 queued.max.request.bytes=-5 queued.max.request.bytes=lots \
	max.connections=0 max.connections=-1 max.connections.per.ip=0 max.connections.per.ip=x \
	kaas.request.min.bytes.per.sec=-1 kaas.request.min.bytes.per.sec=fast; do
	rc=0
	timeout 60 "$BIN/kaas" --data "$T/cfg" --listen 127.0.0.1:0 --trust-unqualified \
		--override "$kv" >"$T/out" 2>"$T/err" </dev/null || rc=$?
	[ "$rc" = 2 ] || { cat "$T/err"; fail "--override $kv exited $rc, expected 2"; }
	grep -q -- "${kv%%=*}: invalid value '${kv#*=}'" "$T/err" || { cat "$T/err"; fail "--override $kv: no message naming the key"; }
done
echo "ok bad queued.max.request.bytes / max.connections / max.connections.per.ip values are refused naming the key"

# ---- queued.max.request.bytes ------------------------------------------------
# 1 MiB of budget, frames of 3 MiB: one frame is admitted alone (nothing else
# is held), every other connection keeps the frame's size and waits.
QMAX=1048576
export KAAS_LOG_LEVEL=debug
BROKER_LOG=$T/q.log broker_start "$T/q" --override queued.max.request.bytes=$QMAX \
	--override kaas.request.min.bytes.per.sec=1024 \
	--override socket.request.max.bytes=4194304 --override message.max.bytes=4194304
$PY - "$BROKER_PORT" "$T/q.log" "$BROKER_PID" <<'PY'
import os, re, signal, sys, time
sys.path.insert(0, "ci/lib")
from kproto import Conn, Enc, Dec, record_batch
port, log, pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
N, VALUE, PART = 6, 3 << 20, 200000

def wait_log(pattern, count, what):
    for _ in range(600):
        found = re.findall(pattern, open(log).read())
        if len(found) >= count:
            return found
        time.sleep(0.1)
    sys.exit("FAIL: %s: %d of %d log lines matching %r" % (what, len(found), count, pattern))

def rx_queue(local_port, remote_port):
    """Bytes the kernel holds unread on the broker's side of a connection."""
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        if int(f[1].split(":")[1], 16) == local_port and int(f[2].split(":")[1], 16) == remote_port:
            return int(f[4].split(":")[1], 16)
    return None

admin = Conn("127.0.0.1", port)
corr = admin.send(3, 4, Enc().array(1).str("limits").i8(1).done())
assert admin.recv()[0] == corr

conns, frames = [], []
for i in range(N):
    c = Conn("127.0.0.1", port)
    body = (Enc().str(None).i16(1).i32(30000).array(1).str("limits").array(1).i32(0)
            .bytes(record_batch([bytes([65 + i]) * VALUE])).done())
    f, corr = c.frame(0, 7, body)
    assert 3 << 20 < len(f) - 4 <= 4 << 20
    c.send_raw(f[:4 + PART])  # the size and a part of the frame, then a stall
    conns.append(c)
    frames.append((f, corr))
ports = {c.s.getsockname()[1]: i for i, c in enumerate(conns)}

waits = wait_log(r"127\.0\.0\.1:(\d+): a \d+-byte request waits for queued\.max\.request\.bytes", N - 1,
                 "connections waiting for the budget")
order = [ports[int(p)] for p in waits]
assert len(set(order)) == N - 1, order
first = (set(range(N)) - set(order)).pop()
print("ok one 3 MiB frame admitted alone, %d wait for queued.max.request.bytes=1 MiB" % (N - 1))
assert len(re.findall(r"queued\.max\.request\.bytes \(\d+\) is used up", open(log).read())) == 1
for i in order:
    q = rx_queue(port, conns[i].s.getsockname()[1])
    assert q is not None and q > 0, "the broker read past the size of a waiting frame (%r)" % q
print("ok the waiting frames were not read: their bytes are still in the kernel")

offsets = set()
for i in [first] + order:  # the budget grants the waiters in the order they waited
    f, corr = frames[i]
    conns[i].send_raw(f[4 + PART:])
    rc, data = conns[i].recv()
    assert rc == corr
    d = Dec(data)
    assert d.array() == 1 and d.str() == "limits" and d.array() == 1 and d.i32() == 0
    err, base = d.i16(), d.i64()
    assert err == 0, "produce error %d" % err
    offsets.add(base)
assert offsets == set(range(N)), offsets
grants = wait_log(r"127\.0\.0\.1:(\d+): the \d+-byte request has room", N - 1, "grants")
assert [ports[int(p)] for p in grants] == order, ([ports[int(p)] for p in grants], order)
wait_log(r"every waiting request has room again after \d+ ms \((\d+) waited", 1, "end of the pause")
print("ok every frame answered once room freed; the waiters were granted in the order they waited")

# Waiting frames and SIGTERM: the drain closes them and the broker exits.
stall = []
for i in range(3):
    c = Conn("127.0.0.1", port)
    body = (Enc().str(None).i16(1).i32(30000).array(1).str("limits").array(1).i32(0)
            .bytes(record_batch([b"z" * VALUE])).done())
    f, _ = c.frame(0, 7, body)
    c.send_raw(f[:4 + PART])
    stall.append(c)
wait_log(r"a \d+-byte request waits for queued\.max\.request\.bytes", N - 1 + 2, "waits before SIGTERM")
admin.close()
for c in conns:
    c.close()
os.kill(pid, signal.SIGTERM)
for c in stall:
    assert c.closed_by_peer(timeout=120), "a waiting connection was not closed by the drain"
    c.close()
print("ok SIGTERM closes the connections whose frames wait for the budget")
PY
for _ in $(seq 1 600); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC after draining waiting connections"
unset KAAS_LOG_LEVEL

# ---- slow frames: six slow-loris connections, seven unrelated producers -------
# The defaults (queued.max.request.bytes 512 MiB, socket.request.max.bytes
# 100 MiB): five announced 100 MiB frames are admitted, the sixth waits, and
# every later request waits behind it.  With no minimum rate nothing is
# served while the frames trickle in (the control run); with the default
# minimum every producer is served once the slow frames are dropped.
slowloris() { # DIR MIN_RATE EXPECT(served|starved)
	BROKER_LOG=$T/$1.log broker_start "$T/$1" --override kaas.request.min.bytes.per.sec=$2
	$PY - "$BROKER_PORT" "$T/$1.log" "$3" <<'PY'
import re, socket, struct, sys, threading, time
sys.path.insert(0, "ci/lib")
from kproto import Conn, Enc, Dec, record_batch
port, log, expect = int(sys.argv[1]), sys.argv[2], sys.argv[3]
SLOW, PRODUCERS, SIZE = 6, 7, 104857600 - 64

def produce_body(value):
    return (Enc().str(None).i16(1).i32(30000).array(1).str("loris").array(1).i32(0)
            .bytes(record_batch([value])).done())

admin = Conn("127.0.0.1", port)
corr = admin.send(3, 4, Enc().array(1).str("loris").i8(1).done())
assert admin.recv()[0] == corr
admin.close()

slow = []
for i in range(SLOW):
    c = Conn("127.0.0.1", port)
    c.send_raw(struct.pack(">i", SIZE) + struct.pack(">hhi", 0, 7, 1))  # size + a header start
    slow.append(c)
stop = threading.Event()
def trickle():  # one byte a second on each, until the broker drops it
    while not stop.wait(1.0):
        for c in slow:
            try:
                c.s.send(b"x")
            except OSError:
                pass
threading.Thread(target=trickle, daemon=True).start()
for _ in range(600):
    if re.search(r"queued\.max\.request\.bytes \(\d+\) is used up", open(log).read()):
        break
    time.sleep(0.1)
else:
    sys.exit("FAIL: the slow frames did not use up queued.max.request.bytes")
assert re.search(r"WARN .*queued\.max\.request\.bytes \(\d+\) is used up", open(log).read()), \
    "a starved budget is not a WARN"

# Seven producers on connections of their own, each one small record.
served = [None] * PRODUCERS
def producer(i):
    try:
        c = Conn("127.0.0.1", port, timeout=45)
        t0 = time.time()
        corr = c.send(0, 7, produce_body(b"unrelated-%d" % i))
        rc, data = c.recv()
        d = Dec(data)
        assert rc == corr and d.array() == 1 and d.str() == "loris" and d.array() == 1 and d.i32() == 0
        served[i] = (d.i16(), time.time() - t0)
        c.close()
    except Exception as e:  # a timeout: not served
        served[i] = ("not served", repr(e))
threads = [threading.Thread(target=producer, args=(i,), daemon=True) for i in range(PRODUCERS)]
for t in threads:
    t.start()
deadline = 40 if expect == "served" else 12
for t in threads:
    t.join(deadline)
ok = [s for s in served if s is not None and s[0] == 0]
if expect == "starved":
    # The control: without a minimum rate, no producer is served while the
    # frames trickle (this is the attack the minimum rate answers).
    assert not ok, "served without the minimum rate: %r" % served
    print("ok control: with kaas.request.min.bytes.per.sec=0, 0 of %d producers served in %d s" %
          (PRODUCERS, deadline))
    stop.set()
    for c in slow:
        c.close()
    sys.exit(0)
assert len(ok) == PRODUCERS, "only %d of %d producers served: %r" % (len(ok), PRODUCERS, served)
print("ok all %d unrelated producers served behind %d slow 100 MiB frames (slowest after %.1f s)" %
      (PRODUCERS, SLOW, max(s[1] for s in ok)))
for c in slow:
    assert c.closed_by_peer(timeout=60), "a slow-loris connection was not closed"
stop.set()
drops = re.findall(r"WARN .*a (\d+)-byte request arrived at \d+ bytes/s .* below kaas\.request\.min\.bytes\.per\.sec=16384",
                   open(log).read())
assert len(drops) == SLOW and all(int(n) == SIZE for n in drops), drops
print("ok each slow frame was dropped with a WARN naming kaas.request.min.bytes.per.sec (%d)" % len(drops))
PY
	broker_stop
	[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC"
}
slowloris loris0 0 starved
slowloris loris 16384 served

# ---- max.connections ---------------------------------------------------------
BROKER_LOG=$T/c.log broker_start "$T/c" --override max.connections=3
$PY - "$BROKER_PORT" "$T/c.log" <<'PY'
import re, socket, sys, time
sys.path.insert(0, "ci/lib")
from kproto import Conn, api_versions
port, log = int(sys.argv[1]), sys.argv[2]

def wait_log(pattern, what):
    for _ in range(600):
        if re.search(pattern, open(log).read()):
            return
        time.sleep(0.1)
    sys.exit("FAIL: no log line for " + what)

open3 = [Conn("127.0.0.1", port) for _ in range(3)]
for c in open3:
    assert api_versions(c, 0)[0] == 0
# Further connections complete in the kernel's backlog but are not accepted.
extra = [Conn("127.0.0.1", port) for _ in range(3)]
corrs = [c.send(18, 0, b"") for c in extra]
wait_log(r"max\.connections \(3\) connections open: new connections wait in the listen backlog",
         "max.connections reached")
# Not accepted: nothing is read from them, so nothing comes back (and they are not closed).
for c in extra:
    c.s.settimeout(1.0)
    try:
        d = c.s.recv(1)
        sys.exit("FAIL: a connection beyond max.connections got %r" % d)
    except socket.timeout:
        pass
    c.s.settimeout(60.0)
print("ok at max.connections=3 further connections wait in the backlog without an answer")
# Each close lets one more in; each waiting one gets its answer in turn.
for i, c in enumerate(extra):
    open3[i].close()
    rc, _ = c.recv()
    assert rc == corrs[i]
print("ok closing a connection admits a waiting one, which gets its answer")
for c in extra:
    c.close()
wait_log(r"below max\.connections \(3\) with no connection left waiting", "the end of the episode")
# Once per episode, not once per connection.
n = len(re.findall(r"max\.connections \(3\) connections open", open(log).read()))
assert n == 1, "max.connections logged %d times in one episode" % n
print("ok max.connections logged once for the episode")
PY
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC"

# ---- max.connections.per.ip --------------------------------------------------
BROKER_LOG=$T/p.log broker_start "$T/p" --override max.connections.per.ip=2
$PY - "$BROKER_PORT" "$T/p.log" <<'PY'
import re, socket, sys, time
sys.path.insert(0, "ci/lib")
from kproto import Conn, api_versions
port, log = int(sys.argv[1]), sys.argv[2]
two = [Conn("127.0.0.1", port) for _ in range(2)]
for c in two:
    assert api_versions(c, 0)[0] == 0
for _ in range(3):
    c = Conn("127.0.0.1", port)
    assert c.closed_by_peer(timeout=60), "a third connection from 127.0.0.1 was not closed"
    c.close()
lines = re.findall(r"127\.0\.0\.1 has \d+ connection\(s\) open, max\.connections\.per\.ip is 2", open(log).read())
assert len(lines) == 1, lines
print("ok max.connections.per.ip=2 closes a third connection from the same address, logged once")
# Another address is not limited by 127.0.0.1's connections.
s = socket.create_connection(("127.0.0.1", port), timeout=60, source_address=("127.0.0.2", 0))
o = Conn.__new__(Conn); o.s, o.corr, o.client_id, o.buf = s, 0, "kproto", b""
assert api_versions(o, 0)[0] == 0
o.close()
# Below the limit again: a new connection is served.
two[0].close()
for _ in range(600):
    c = Conn("127.0.0.1", port)
    try:
        assert api_versions(c, 0)[0] == 0
        break
    except (EOFError, ConnectionResetError):
        c.close()  # the close of two[0] was not processed yet
        time.sleep(0.1)
else:
    sys.exit("FAIL: no connection accepted after one closed")
assert re.search(r"127\.0\.0\.1 is below max\.connections\.per\.ip again", open(log).read())
print("ok once one closes, 127.0.0.1 may connect again; 127.0.0.2 was never limited")
PY
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC"
echo "ok test_limits"
