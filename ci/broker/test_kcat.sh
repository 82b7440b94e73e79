#!/bin/bash
# ci/broker/test_kcat.sh — kcat (librdkafka) against a real broker: keyed
# records with headers in every compression codec, acks=all, a broker restart
# (SIGTERM) between the two halves of the records, everything consumed back and compared
# record by record; consuming from a timestamp; and after the final SIGTERM,
# every partition's manifest persisted with no segment of a wrong epoch.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh kcat
N=${KCAT_RECORDS:-20000}
HALF=$((N / 2))

# Small segments so reads cross segment boundaries; 3 partitions per topic.
broker_start "$T/data" --override num.partitions=3 \
	--override log.segment.bytes=262144
epochs_before=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1])).get("version",0))' \
	"$T/data/__cluster/assignment.json" 2>/dev/null || echo 0)

gen() { # gen CODEC FROM TO: key:value lines
	awk -v c="$1" -v a="$2" -v b="$3" 'BEGIN { for (i = a; i <= b; i++)
		printf "%s-k%06d:%s-value-%d-%s\n", c, i, c, i, substr("abcdefghijklmnopqrstuvwxyz0123456789", 1 + i % 30) }'
}
produce() { # produce CODEC FROM TO
	gen "$1" "$2" "$3" | timeout 120 kcat -b "$BROKER" -P -t "kc-$1" -K: -z "$1" -H "codec=$1" -H "h2=x" \
		-X acks=all -X message.send.max.retries=10 -X retry.backoff.ms=200 2>>"$T/kcat.err" ||
		{ cat "$T/kcat.err"; fail "kcat produce $1 $2-$3"; }
}

CODECS="none gzip snappy lz4 zstd"
for c in $CODECS; do produce "$c" 1 "$HALF"; done
echo "ok produced $HALF keyed records with headers in each codec (acks=all)"

broker_restart || fail "restart"
grep -q "relinquished 15 partition(s)" "$BROKER_LOGFILE" || fail "SIGTERM did not relinquish the 15 partitions"
echo "ok restarted (SIGTERM: 15 partitions relinquished)"

for c in $CODECS; do produce "$c" $((HALF + 1)) "$N"; done
echo "ok produced the second half after the restart"

for c in $CODECS; do
	timeout 120 kcat -b "$BROKER" -C -t "kc-$c" -o beginning -e -q -f '%k:%s|%h\n' > "$T/got-$c" ||
		fail "kcat consume $c"
	gen "$c" 1 "$N" | sed "s/\$/|codec=$c,h2=x/" | sort > "$T/want-$c"
	sort "$T/got-$c" > "$T/got-$c.sorted"
	if ! cmp -s "$T/want-$c" "$T/got-$c.sorted"; then
		diff "$T/want-$c" "$T/got-$c.sorted" | head -5
		fail "$c: consumed records differ from produced ($(wc -l < "$T/got-$c") of $N)"
	fi
	# Within a partition the keys come back in the order they were produced.
	timeout 120 kcat -b "$BROKER" -C -t "kc-$c" -o beginning -e -q -f '%p %k\n' |
		awk '{ if (($1 in last) && $2 < last[$1]) { print "out of order: " $0; bad = 1 } last[$1] = $2 }
		     END { exit bad }' || fail "$c: a partition returned records out of order"
	echo "ok $c: $N records consumed back exactly (keys, values, headers, per-partition order)"
done

# Consume from a timestamp: only what was produced after it.
gen ts 1 500 | timeout 60 kcat -b "$BROKER" -P -t kc-ts -K: -X acks=all || fail "produce ts 1"
sleep 1.2
TS=$(($(date +%s%N) / 1000000))
sleep 0.2
gen ts 501 800 | timeout 60 kcat -b "$BROKER" -P -t kc-ts -K: -X acks=all || fail "produce ts 2"
got=$(timeout 60 kcat -b "$BROKER" -C -t kc-ts -o "s@$TS" -e -q -f '%k\n' | sort)
want=$(gen ts 501 800 | cut -d: -f1 | sort)
[ "$got" = "$want" ] || fail "consume from timestamp returned $(echo "$got" | wc -l) records, expected 300"
echo "ok consuming from a timestamp returns exactly the later records"

broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"

# The batches on disk really are compressed with each codec.  librdkafka
# falls back to no compression silently when the broker's API ranges do not
# suit it, and it also sends a batch uncompressed when compressing did not
# shrink it -- which happens to batches of a record or two, whose number
# depends on timing.  So: every batch of more than 16 records carries the
# codec, and the codec is on at least one batch.
$PY - "$T/data" <<'PY' || fail "stored batches do not carry the codec they were produced with"
import glob, os, struct, sys
codecs = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
for name, want in codecs.items():
    n = hit = 0
    plain = []
    for path in glob.glob(os.path.join(sys.argv[1], "kc-" + name, "*", "*.log")):
        data = open(path, "rb").read()
        pos = 0
        while pos + 61 <= len(data):
            length = struct.unpack(">i", data[pos + 8:pos + 12])[0]
            if length <= 0 or pos + 12 + length > len(data):
                break
            codec = struct.unpack(">h", data[pos + 21:pos + 23])[0] & 7
            records = struct.unpack(">i", data[pos + 57:pos + 61])[0]
            assert codec in (0, want), (name, path, pos, codec)
            n += 1
            hit += codec == want
            if codec != want:
                plain.append((records, 12 + length))
            pos += 12 + length
    big = [p for p in plain if p[0] > 16]
    assert n > 0 and hit > 0 and not big, \
        "%s: %d of %d batches carry codec %d; uncompressed (records, bytes): %s" % (name, hit, n, want, plain)
    print("ok %s: %d of %d stored batches carry codec %d%s" %
          (name, hit, n, want, "; the others hold %s record(s)" % sorted(set(p[0] for p in plain)) if plain else ""))
PY

# After SIGTERM: every partition has its manifest at the epoch the cluster's
# assignment gave it, and no segment is named with a later epoch.
$PY - "$T/data" "$N" <<'PY' || fail "on-volume state after SIGTERM"
import json, os, re, sys
root, n = sys.argv[1], int(sys.argv[2])
# The cluster's assignment: the pointer names the current document.
ptr = json.load(open(os.path.join(root, "__cluster", "assignment.json")))
doc = json.load(open(os.path.join(root, "__cluster", ptr["document"])))
assign = {"%s-%d" % (t["name"], i): {"epoch": e} for t in doc["topics"] for i, e in enumerate(t["epochs"])}
seen = 0
for key, a in assign.items():
    topic, part = key.rsplit("-", 1)
    d = os.path.join(root, topic, part)
    m = json.load(open(os.path.join(d, "manifest.json")))
    assert m["epoch"] == a["epoch"], (key, m, a)
    if topic != "kc-ts":
        assert a["epoch"] >= 2, (key, a)  # taken over again after the restart
    epochs = set()
    for f in os.listdir(d):
        mm = re.match(r"^(\d{10})-(\d{20})\.log$", f)
        if mm:
            epochs.add(int(mm.group(1)))
    assert epochs and max(epochs) <= a["epoch"], (key, epochs, a)
    if topic.startswith("kc-") and topic != "kc-ts":
        seen += m["high_watermark"]
assert seen == 5 * n, (seen, 5 * n)
print("ok after SIGTERM: %d manifests at their assigned epochs, no segment of a later epoch, "
      "high watermarks sum to %d" % (len(assign), seen))
PY

# A substrate without kernel descriptors (the fault backend wrapping a
# directory): fetches are read into memory on the workers instead of sendfile.
mkdir -p "$T/f"
BROKER_LOG=$T/fault.log broker_start "fault:$T/f" --override log.segment.bytes=65536
gen fb 1 5000 | timeout 120 kcat -b "$BROKER" -P -t kc-fault -K: -z lz4 -X acks=all || fail "produce on fault:"
got=$(timeout 120 kcat -b "$BROKER" -C -t kc-fault -o beginning -e -q -f '%k:%s\n' | md5sum)
[ "$got" = "$(gen fb 1 5000 | md5sum)" ] || fail "records read back through pread differ"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas on fault: exited $BROKER_RC"
echo "ok without kernel descriptors (fault: substrate) fetches are served by pread"
echo "test_kcat: all passed"
