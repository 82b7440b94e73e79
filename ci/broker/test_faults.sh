#!/bin/bash
# ci/broker/test_faults.sh — a partition whose segment files cannot be
# fsynced (the fault substrate fails every fsync under poison/) never
# acknowledges or serves data, other partitions carry on, and the broker keeps
# re-driving the take-over at ever newer epochs (Rule 2) instead of giving up.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh faults
mkdir -p "$T/vol"
broker_start "fault:$T/vol?failpath=poison/*/*.log:fsync:EIO"

$PY - "$BROKER_PORT" <<'PY'
import sys, time
sys.path.insert(0, "ci/lib")
from kproto import Conn, Dec, Enc, record_batch
port = int(sys.argv[1])
c = Conn("127.0.0.1", port)

def metadata(topics):
    b = Enc().array(len(topics))
    for t in topics:
        b.str(t)
    corr = c.send(3, 7, b.i8(1).done())
    rc, data = c.recv()
    d = Dec(data)
    d.i32()
    for _ in range(d.array()):
        d.i32(); d.str(); d.i32(); d.str()
    d.str(); d.i32()
    out = {}
    for _ in range(d.array()):
        err, name, _i = d.i16(), d.str(), d.i8()
        parts = []
        for _ in range(d.array()):
            perr, idx, leader, epoch = d.i16(), d.i32(), d.i32(), d.i32()
            [d.i32() for _ in range(d.array())]
            [d.i32() for _ in range(d.array())]
            [d.i32() for _ in range(d.array())]
            parts.append((perr, leader, epoch))
        out[name] = (err, parts)
    return out

def produce(topic):
    body = (Enc().str(None).i16(-1).i32(30000).array(1).str(topic).array(1).i32(0)
            .bytes(record_batch([b"x"], ts=1)).done())
    corr = c.send(0, 7, body)
    rc, data = c.recv()
    d = Dec(data)
    d.array(); d.str(); d.array(); d.i32()
    return d.i16(), d.i64()

md = metadata(["poison", "fine"])
assert md["fine"][0] == 0 and md["fine"][1][0][0] == 0, md
err, off = produce("poison")
# REQUEST_TIMED_OUT: written, the flush failed, nothing acknowledged — and
# not "not written" either: the batch may be whole on the volume.
assert err == 7, (err, off)
err, off = produce("poison")
assert err == 56, (err, off)  # KAFKA_STORAGE_ERROR: poisoned, nothing written
for i in range(3):
    err, off = produce("fine")
    assert err == 0 and off == i, (err, off)
print("ok an acks=all produce whose fsync fails answers REQUEST_TIMED_OUT, the next KAFKA_STORAGE_ERROR; "
      "another topic keeps working")
# The poisoned partition stops being offered: Metadata reports it unavailable
# while its take-over is re-driven (and keeps failing here).
deadline = time.time() + 60
while True:
    md = metadata(["poison"])
    if md["poison"][1][0][0] == 5:
        break
    assert time.time() < deadline, md
    time.sleep(0.1)
err, off = produce("poison")
assert err == 56, (err, off)
print("ok the poisoned partition is reported LEADER_NOT_AVAILABLE and refuses produce")
PY

# The take-over is re-driven (wait generously for two retries).
for _ in $(seq 1 600); do
	n=$(grep -c "poison/0: re-driving take-over" "$BROKER_LOGFILE" || true)
	[ "$n" -ge 2 ] && break
	sleep 0.1
done
[ "$n" -ge 2 ] || fail "the failed take-over was not re-driven"
e1=$(grep -o "poison/0: re-driving take-over at epoch [0-9]*" "$BROKER_LOGFILE" | head -1 | grep -o "[0-9]*$")
e2=$(grep -o "poison/0: re-driving take-over at epoch [0-9]*" "$BROKER_LOGFILE" | sed -n 2p | grep -o "[0-9]*$")
# In the cluster the controller assigns the epoch; the leader re-drives at it
# (recovery keeps only what is durable).
[ "$e2" -ge "$e1" ] || fail "re-drives went back to an older epoch ($e1, $e2)"
echo "ok the take-over is re-driven ($e1, $e2, ...)"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC"
[ ! -e "$T/vol/poison/0/manifest.json" ] || grep -q '"high_watermark": *0' "$T/vol/poison/0/manifest.json" ||
	fail "a manifest claims data for the partition that could never sync"
echo "test_faults: all passed"
