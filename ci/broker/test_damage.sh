#!/bin/bash
# ci/broker/test_damage.sh — damage the broker did not cause, on the real
# broker: a bit flipped in an early sealed segment after a kill -9, and
# another after a clean shutdown.  The broker must keep every later
# segment (nothing truncated or deleted), log the damage as an ERROR naming
# the file, and answer a consumer that reaches it CORRUPT_MESSAGE instead
# of skipping to the next segment (librdkafka reports error 2 as "Broker:
# Invalid message"); records after the damage stay readable.  Then epochs of
# 2^31-1 in the manifest and a segment name: refused, not obeyed.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh damage
command -v kcat >/dev/null || fail "kcat is not installed"
VOL=$T/vol
PART=$VOL/d/0
broker_start "$VOL" --override log.segment.bytes=2048

seq -f "%040g" 1 400 | kcat -P -b "$BROKER" -t d -p 0 -X acks=all -X batch.num.messages=5 \
	-X linger.ms=0 2>"$T/produce.err" || fail "produce: $(cat "$T/produce.err")"
n=$(kcat -C -b "$BROKER" -t d -p 0 -o beginning -e -q -f '%o\n' | wc -l)
[ "$n" = 400 ] || fail "consumed $n of 400 before any damage"
logs_before=$(ls "$PART"/*.log | wc -l)
[ "$logs_before" -ge 8 ] || fail "only $logs_before segments; the test needs 8"

# Flips a byte in the records of the first batch of the n-th segment (by
# name) and prints that batch's first and next offset.
flip() {
	$PY - "$1" <<'PY'
import struct, sys
path = sys.argv[1]
with open(path, "r+b") as f:
    head = f.read(61)
    base, = struct.unpack(">q", head[0:8])
    last_delta, = struct.unpack(">i", head[23:27])
    f.seek(61 + 5)
    b = f.read(1)
    f.seek(61 + 5)
    f.write(bytes([b[0] ^ 0x10]))
print(base, base + last_delta + 1)
PY
}
seg() { ls "$PART"/*.log | sort | sed -n "$1p"; }

# 1. kill -9, then a bit flip in segment 2 of at least 8.
broker_kill
victim=$(seg 2)
read -r lo hi < <(flip "$victim")
broker_crash_restart
logs_after=$(find "$PART" -name '*.log' | wc -l)
[ "$logs_after" -ge "$logs_before" ] ||
	fail "segments on disk $logs_before -> $logs_after after the restart: the broker deleted data"
timeout 15 kcat -C -b "$BROKER" -t d -p 0 -o beginning -e -f '%o\n' -X check.crcs=true \
	>"$T/c1.out" 2>"$T/c1.err" || true
got=$(grep -c '^[0-9]' "$T/c1.out" || true)
[ "$got" = "$lo" ] || fail "from the start: $got records, want the $lo before the damage ($(tail -3 "$T/c1.err"))"
[ "$(tail -n1 "$T/c1.out")" = $((lo - 1)) ] || fail "the read did not stop before the damage"
grep -qiE 'corrupt|Invalid message' "$T/c1.err" || fail "the consumer was not told of the corruption: $(tail -3 "$T/c1.err")"
rest=$(kcat -C -b "$BROKER" -t d -p 0 -o "$hi" -e -q -f '%o\n' -X check.crcs=true | wc -l)
[ "$rest" = $((400 - hi)) ] || fail "after the damage: $rest records, want $((400 - hi))"
grep -q "are damaged" "$BROKER_LOGFILE" || fail "no ERROR naming the damaged range in the broker's log"
grep "are damaged" "$BROKER_LOGFILE" | grep -q "$(basename "$victim")" || fail "the ERROR does not name the file"
ls "$PART/quarantine/$(basename "$victim")" >/dev/null 2>&1 || fail "the damaged segment is not in quarantine/"
echo "ok kill -9 and a bit flip in segment 2 of $logs_before: $lo records before it and $rest after it served, offsets [$lo, $hi) answered CORRUPT_MESSAGE, nothing deleted"

# 2. A clean shutdown, then a flip in segment 4: not skipped either.
broker_stop
[ "$BROKER_RC" = 0 ] || fail "SIGTERM exited $BROKER_RC"
victim=$(seg 4)
read -r lo2 hi2 < <(flip "$victim")
broker_crash_restart
timeout 15 kcat -C -b "$BROKER" -t d -p 0 -o "$hi" -e -f '%o\n' -X check.crcs=true \
	>"$T/c2.out" 2>"$T/c2.err" || true
got=$(grep -c '^[0-9]' "$T/c2.out" || true)
[ "$got" = $((lo2 - hi)) ] || fail "after a clean close: $got records from $hi, want $((lo2 - hi)) up to the damage at $lo2"
grep -qiE 'corrupt|Invalid message' "$T/c2.err" || fail "after a clean close the consumer was not told of the corruption"
rest=$(kcat -C -b "$BROKER" -t d -p 0 -o "$hi2" -e -q -f '%o\n' | wc -l)
[ "$rest" = $((400 - hi2)) ] || fail "after the second damage: $rest records, want $((400 - hi2))"
echo "ok a bit flip after a clean shutdown: the consumer stops at $lo2 with CORRUPT_MESSAGE instead of jumping, $rest records after it served"

# 3. Another host's numbers: a manifest and a segment name claiming epoch
# 2^31-1 must not leave the partition unleadable (it was: -ESTALE at every
# epoch the broker could pick, NOT_LEADER_OR_FOLLOWER for ever).
broker_stop
[ "$BROKER_RC" = 0 ] || fail "SIGTERM exited $BROKER_RC"
$PY - "$PART/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["epoch"] = 2147483647
open(sys.argv[1], "w").write(json.dumps(m))
PY
: >"$PART/2147483647-00000000000000000400.log"
broker_crash_restart
echo foreign-test | kcat -P -b "$BROKER" -t d -p 0 -X acks=all -X message.timeout.ms=15000 \
	2>"$T/p3.err" || fail "produce after the foreign epochs: $(cat "$T/p3.err")"
last=$(kcat -C -b "$BROKER" -t d -p 0 -o -1 -e -q -f '%o %s\n')
[ "$last" = "400 foreign-test" ] || fail "after the foreign epochs the log ends with '$last'"
ls "$PART"/quarantine/foreign.*2147483647-00000000000000000400.log >/dev/null 2>&1 ||
	fail "the foreign segment was not kept in quarantine/"
ls "$PART"/quarantine/foreign.*manifest.json >/dev/null 2>&1 || fail "the foreign manifest was not kept"
grep -q "2147483647 is above any issued" "$BROKER_LOGFILE" || fail "no ERROR naming the foreign epoch"
echo "ok a manifest and a segment name of epoch 2^31-1: reported, moved aside, the partition led and appended to"
echo "test_damage: all passed"
