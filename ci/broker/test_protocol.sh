#!/bin/bash
# ci/broker/test_protocol.sh — the broker's wire behaviour with raw frames
# (test_protocol.py), the idle-connection timeout, and a SIGTERM that
# arrives while a long poll is parked.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/broker.sh
PY=/usr/bin/python3
T=$(mktemp -d /tmp/kaas-proto.XXXXXX)
BROKER_NO_TRAP=1
trap 'broker_cleanup; rm -rf "$T"' EXIT

"$BIN/kaas" --apis > "$T/apis"
MAX=8388608
BROKER_LOG=$T/a.log broker_start "$T/a" --override socket.request.max.bytes=$MAX \
	--override kaas.connection.max.buffered.bytes=1048576
$PY ci/broker/test_protocol.py 127.0.0.1 "$BROKER_PORT" "$T/apis" "$MAX"
broker_stop
[ "$BROKER_RC" = 0 ] || { echo "FAIL: kaas exited $BROKER_RC on SIGTERM"; exit 1; }
grep -q "request size .* outside" "$T/a.log" || { echo "FAIL: oversized frame not logged"; exit 1; }
grep -q "unknown API key 999" "$T/a.log" || { echo "FAIL: unknown API key not logged"; exit 1; }
grep -q "malformed Metadata v1 request" "$T/a.log" || { echo "FAIL: parse failure not logged with its field"; exit 1; }
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
[ "$BROKER_RC" = 0 ] || { echo "FAIL: kaas exited $BROKER_RC after the drain"; exit 1; }
grep -q "relinquished 1 partition" "$T/c.log" || { echo "FAIL: no relinquish logged"; cat "$T/c.log"; exit 1; }
echo "test_protocol: all passed"
