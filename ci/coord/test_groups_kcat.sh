#!/bin/bash
# ci/coord/test_groups_kcat.sh — consumer groups with kcat -G (librdkafka
# 2.0): two consumers split a 3-partition topic between them, every record
# is consumed exactly once by the group, the group's committed offsets make
# a later run of the same group start where the last one stopped — also
# after a broker restart and after a broker crash (kill -9).
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh groups-kcat

broker_start "$T/data" --override num.partitions=3
TOPIC=kt

# One group run: consume to the end of every assigned partition, then close
# (which commits).  Prints "partition offset value" lines.
group_run() {
	timeout 120 kcat -b "$BROKER" -G kg -X auto.offset.reset=earliest \
		-X auto.commit.interval.ms=100 -e -q -f '%p %o %s\n' "$TOPIC"
}

seq 1 300 | awk '{print "k"$1":v"$1}' | kcat -b "$BROKER" -P -t "$TOPIC" -K: -X acks=all ||
	fail "produce"

# Two members at once: the group's first rebalance waits for both
# (group.initial.rebalance.delay.ms), they split the partitions.
group_run > "$T/c1" &
p1=$!
group_run > "$T/c2" &
p2=$!
wait $p1 || fail "first consumer"
wait $p2 || fail "second consumer"
cat "$T/c1" "$T/c2" > "$T/all"
[ "$(wc -l < "$T/all")" = 300 ] || fail "the group consumed $(wc -l < "$T/all") records, want 300"
[ "$(cut -d' ' -f3 "$T/all" | sort -u | wc -l)" = 300 ] || fail "records consumed twice or lost"
[ -s "$T/c1" ] && [ -s "$T/c2" ] || fail "one consumer got no partition: c1=$(wc -l < "$T/c1") c2=$(wc -l < "$T/c2")"
[ -z "$(cut -d' ' -f1 "$T/c1" | sort -u | grep -xFf <(cut -d' ' -f1 "$T/c2" | sort -u) || true)" ] ||
	fail "a partition was consumed by both members"
echo "ok two kcat -G members split 300 records: $(wc -l < "$T/c1") + $(wc -l < "$T/c2")"

# Everything is committed: the next run of the group reads nothing.
group_run > "$T/again"
[ ! -s "$T/again" ] || fail "a second run re-read $(wc -l < "$T/again") committed records"
# The file carries the shard epoch it was written at (docs/groups.md).
ls "$T/data/__cluster/groups/" | grep -qx 'kg\.[0-9]\{10\}\.json' ||
	fail "no group file groups/kg.<epoch>.json: $(ls "$T/data/__cluster/groups/")"

# New records after a clean restart: exactly those.
broker_restart || fail "restart"
seq 301 310 | awk '{print "k"$1":v"$1}' | kcat -b "$BROKER" -P -t "$TOPIC" -K: -X acks=all ||
	fail "produce after restart"
group_run > "$T/after"
[ "$(cut -d' ' -f3 "$T/after" | sort | tr '\n' ' ')" = "$(seq 301 310 | sed 's/^/v/' | sort | tr '\n' ' ')" ] ||
	fail "after a restart the group read: $(cut -d' ' -f3 "$T/after" | tr '\n' ' ')"
echo "ok after a restart the group resumes at its committed offsets"

# A crash right after the commits were acknowledged loses none of them.
seq 311 320 | awk '{print "k"$1":v"$1}' | kcat -b "$BROKER" -P -t "$TOPIC" -K: -X acks=all
group_run > "$T/before-crash"
[ "$(wc -l < "$T/before-crash")" = 10 ] || fail "before the crash: $(wc -l < "$T/before-crash") records, want 10"
broker_crash_restart || fail "start after kill -9"
group_run > "$T/after-crash"
[ ! -s "$T/after-crash" ] || fail "after kill -9 the group re-read $(wc -l < "$T/after-crash") records"
echo "ok committed offsets survive kill -9 of the broker"

broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
echo "PASS ci/coord/test_groups_kcat.sh"
