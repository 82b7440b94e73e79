#!/bin/bash
# ci/broker/test_protocol.sh — the broker's wire behaviour with raw frames
# (test_protocol.py), the idle-connection timeout, and a SIGTERM that
# arrives while a long poll is parked.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh proto

"$BIN/kaas" --apis > "$T/apis"
MAX=8388608
BROKER_LOG=$T/a.log broker_start "$T/a" --override socket.request.max.bytes=$MAX \
	--override kaas.connection.max.buffered.bytes=1048576
$PY ci/broker/test_protocol.py 127.0.0.1 "$BROKER_PORT" "$T/apis" "$MAX"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
grep -q "request size .* outside" "$T/a.log" || fail "oversized frame not logged"
grep -q "unknown API key 999" "$T/a.log" || fail "unknown API key not logged"
grep -q "malformed Metadata v1 request" "$T/a.log" || fail "parse failure not logged with its field"
echo "ok SIGTERM after the protocol suite exits 0; rejected frames are logged"

# Idle connections are closed after connections.max.idle.ms.
BROKER_LOG=$T/b.log broker_start "$T/b" --override connections.max.idle.ms=1000
$PY - "$BROKER_PORT" <<'PY'
import sys, os
sys.path.insert(0, "ci/lib")
from kproto import Conn, api_versions
c = Conn("127.0.0.1", int(sys.argv[1]))
assert api_versions(c, 0)[0] == 0
assert c.closed_by_peer(timeout=60), "idle connection was not closed"
print("ok idle connection closed (connections.max.idle.ms)")
# Waiting for an answer is not idle: a fetch parked three times as long as
# the idle timeout gets its answer.
from kproto import Enc, Dec
c = Conn("127.0.0.1", int(sys.argv[1]))
corr = c.send(3, 4, Enc().array(1).str("idle-lp").i8(1).done())
assert c.recv()[0] == corr
body = (Enc().i32(-1).i32(3000).i32(1 << 20).i32(1 << 20).i8(0).i32(0).i32(-1).array(1).str("idle-lp")
        .array(1).i32(0).i32(-1).i64(0).i64(-1).i32(1 << 20).array(0).str("").done())
corr = c.send(1, 11, body)
rc, data = c.recv()
assert rc == corr
d = Dec(data); d.i32(); assert d.i16() == 0
print("ok a connection with a parked fetch outlives connections.max.idle.ms and gets its answer")
PY
broker_stop

# SIGTERM while a fetch is parked: it is answered, then the broker exits 0.
BROKER_LOG=$T/c.log broker_start "$T/c"
$PY - "$BROKER_PORT" "$BROKER_PID" <<'PY'
import os, signal, sys, time
sys.path.insert(0, "ci/lib")
sys.argv += ["x", "0"]
from kproto import Conn, Enc, Dec
port, pid = int(sys.argv[1]), int(sys.argv[2])
c = Conn("127.0.0.1", port)
corr = c.send(3, 4, Enc().array(1).str("drain").i8(1).done())
assert c.recv()[0] == corr
body = (Enc().i32(-1).i32(300000).i32(1).i32(1 << 20).i8(0).i32(0).i32(-1).array(1).str("drain")
        .array(1).i32(0).i32(-1).i64(0).i64(-1).i32(1 << 20).array(0).str("").done())
corr = c.send(1, 11, body)
time.sleep(1.0)
os.kill(pid, signal.SIGTERM)
rc, data = c.recv()
assert rc == corr
d = Dec(data); d.i32(); assert d.i16() == 0
assert c.closed_by_peer(timeout=60)
print("ok SIGTERM answers a parked long poll, then closes the connection")
PY
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC after the drain"
grep -q "relinquished 1 partition" "$T/c.log" || fail "no relinquish logged"

# The drain order: after SIGTERM no connection is accepted while requests
# received before it are still being answered (a client that has not read
# its answers keeps the broker draining), every such request is answered in
# order, then partitions are relinquished and the broker exits 0.
BROKER_LOG=$T/d.log broker_start "$T/d" --override kaas.connection.max.buffered.bytes=1048576 \
	--override kaas.shutdown.timeout.ms=300000
$PY - "$BROKER_PORT" "$BROKER_PID" <<'PY'
import os, signal, socket, sys, time
sys.path.insert(0, "ci/lib")
from kproto import Conn, Enc, Dec
port, pid = int(sys.argv[1]), int(sys.argv[2])
c = Conn("127.0.0.1", port)
corr = c.send(3, 4, Enc().array(1).str("drain-order").i8(1).done())
assert c.recv()[0] == corr
# Pipeline requests with large answers and read none of them.
names = ["drain-missing-%04d-" % i + "n" * 200 for i in range(1000)]
req = Enc().array(len(names))
for nm in names:
    req.str(nm)
req = req.i8(0).done()
frames = [c.frame(3, 4, req) for _ in range(400)]  # far more than socket buffers hold
c.s.setblocking(False)
data = b"".join(f for f, _ in frames)
sent, last = 0, time.time()
while sent < len(data) and time.time() - last < 3.0:
    try:
        sent += c.s.send(data[sent:sent + (1 << 20)])
        last = time.time()
    except BlockingIOError:
        time.sleep(0.02)
os.kill(pid, signal.SIGTERM)
# Stop accepting: new connections are refused while the broker still drains.
deadline = time.time() + 60
while True:
    try:
        x = socket.create_connection(("127.0.0.1", port), timeout=5)
        x.close()
    except ConnectionRefusedError:
        break
    assert time.time() < deadline, "the broker still accepts connections after SIGTERM"
    time.sleep(0.05)
os.kill(pid, 0)  # still alive: it waits for our unread answers
# Finish in flight: every request it received is answered, in order, then EOF.
c.s.setblocking(True)
c.s.settimeout(120)
got = 0
for f, corr in frames:
    try:
        rc, body = c.recv()
    except EOFError:
        break
    assert rc == corr, (rc, corr)
    d = Dec(body); d.i32()
    for _ in range(d.array()):
        d.i32(); d.str(); d.i32(); d.str()
    d.str(); d.i32()
    assert d.array() == len(names)
    got += 1
assert got >= 1, "no request answered after SIGTERM"
assert c.closed_by_peer(timeout=60)
print("ok SIGTERM: connections refused while draining; %d of %d pipelined requests answered in order, then closed"
      % (got, len(frames)))
PY
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC after the drain"
drain=$(grep -n "SIGTERM: draining" "$T/d.log" | head -1 | cut -d: -f1)
rel=$(grep -n "relinquished 1 partition" "$T/d.log" | head -1 | cut -d: -f1)
[ -n "$drain" ] && [ -n "$rel" ] && [ "$drain" -lt "$rel" ] || fail "drain/relinquish order"
m=$(cat "$T/d/drain-order/0/manifest.json")
echo "$m" | grep -q '"epoch"' || fail "no manifest written at relinquish: $m"
echo "ok drained, then relinquished (manifest written), exit 0"
echo "test_protocol: all passed"
