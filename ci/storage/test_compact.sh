#!/bin/bash
# ci/storage/test_compact.sh — log compaction end to end with real clients
# (ci/storage/compact_e2e.py): many updates per key cleaned to the latest
# value per key, tombstones, positions in gaps, a Connect-style read of a
# compacted config topic by two clients; the cleaned log survives a
# restart (a new leadership reads the same view).
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh storage-compact

broker_start "$T/data" --override log.cleaner.backoff.ms=200 \
	--override log.cleaner.dedupe.buffer.size=1048576
$PY ci/storage/compact_e2e.py "$BROKER" || { grep -E "clean|WARN|ERR" "$BROKER_LOG" | grep -v gate: | tail -20 >&2; fail "compact_e2e.py"; }
grep -q "cleaned \[" "$BROKER_LOG" || fail "the broker logged no clean"
broker_restart || fail "restart"
$PY - "$BROKER" <<'PYEOF' || fail "the cleaned log after a restart"
import sys, uuid
from confluent_kafka import Consumer, TopicPartition, OFFSET_BEGINNING
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": uuid.uuid4().hex})
lo, hi = c.get_watermark_offsets(TopicPartition("cmp", 0), timeout=10)
c.assign([TopicPartition("cmp", 0, OFFSET_BEGINNING)])
latest, n = {}, 0
while c.position([TopicPartition("cmp", 0)])[0].offset < hi:
    m = c.poll(1)
    if m is None or m.error():
        continue
    n += 1
    if m.value() is None:
        latest.pop(m.key(), None)
    else:
        latest[m.key()] = m.value()
c.close()
assert len(latest) == 35, len(latest)
assert all(v.startswith(b"v") for v in latest.values())
assert n < 8005 // 4, n
print("ok the cleaned log after a restart: %d records, %d keys" % (n, len(latest)))
PYEOF
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
# No garbage: every cleaned file is named by clean.json, no plain segment
# below its clean_end is left, nothing temporary.
for d in "$T"/data/cmp/0 "$T"/data/connect-configs/0; do
	$PY - "$d" <<'PYEOF' || fail "files left in $d"
import json, os, re, sys
d = sys.argv[1]
names = sorted(os.listdir(d))
c = json.load(open(os.path.join(d, "clean.json")))
named = {"%010d-%020d.c%020d" % (e, b, c["generation"]) for e, b in c["segments"]}
for n in names:
    assert ".tmp." not in n, n
    m = re.match(r"^(\d{10})-(\d{20})(\.c\d{20})?\.(log|index|timeindex)$", n)
    if not m:
        continue
    if m.group(3):
        assert n.rsplit(".", 1)[0] in named, "%s: not named by clean.json %s" % (n, sorted(named))
    else:
        assert int(m.group(2)) >= c["clean_end"], "%s: replaced, below clean_end %d" % (n, c["clean_end"])
print("ok %s: %d files, all referenced" % (d, len(names)))
PYEOF
done
echo "PASS ci/storage/test_compact.sh"
