#!/bin/bash
# ci/cluster/test_rolling.sh — a rolling restart of every broker of a three-broker
# cluster under idempotent acks=all load.  Each SIGTERM is a drain: the
# broker says "draining", the controller moves its partitions away (planned
# hand-offs), it relinquishes them as the new assignment arrives, exits 0
# when it leads nothing, and is started again.  The controller is restarted
# too (a new one is elected).  Verified: every drain ended because nothing
# was led any more (not by its timeout); the checker finds every
# acknowledged record exactly once and in order; no send failed in a way
# the clients could see (librdkafka retries retriable errors — only others
# would reach the history as failures); and every partition a drain handed
# over was taken over without a recovery scan (the relinquish record
# matched: docs/storage.md, "Relinquish record").
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh cluster-rolling
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }
PARTS=6
H=$T/history.jsonl
: >"$H"
cluster_start "$T/data" 3 || fail_cl "starting three brokers"
$PY - "$CL_BOOT" "$PARTS" <<'EOF2' || fail_cl "creating the topic"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1]})
for f in a.create_topics([NewTopic("chaos", int(sys.argv[2]), 1)]).values():
    f.result(30)
EOF2
$PY ci/chaos/workload.py run "$CL_BOOT" chaos "$H" --seconds 40 --partitions "$PARTS" \
	--producers 2 --consumers 1 --seed 9 >"$T/workload.log" 2>&1 &
WL=$!
e2e_on_exit "kill $WL 2>/dev/null || true"
ev() { $PY ci/chaos/workload.py event "$H" "$@"; }
sleep 4
for i in 1 2 3; do
	kill -0 $WL 2>/dev/null || { cat "$T/workload.log" >&2; fail_cl "the workload died before broker $i"; }
	# The other logs first: every relinquish counted below (after
	# `before`) then has its take-over after `obefore`.
	for j in 1 2 3; do obefore[$j]=$(wc -l <"${CL_LOG[$j]}"); done
	before=$(wc -l <"${CL_LOG[$i]}")
	ev fault kind=restart n="$i" broker="$i" phase=start
	cluster_term "$i"
	[ "${CL_RC[$i]}" = 0 ] || fail_cl "broker $i exited ${CL_RC[$i]} on SIGTERM"
	drain=$(tail -n +"$before" "${CL_LOG[$i]}" | grep -o "drain done after [0-9]* ms: .*" || true)
	case $drain in
	*"nothing led here any more"*) ;;
	*) fail_cl "broker $i: the drain did not hand everything over: '$drain'" ;;
	esac
	moved=$(tail -n +"$((before + 1))" "${CL_LOG[$i]}" | grep -c "relinquished epoch" || true)
	echo "ok broker $i drained ($moved partition(s) handed over): $drain"
	# The successors' take-overs of what it handed over trusted its record
	# (its restart below moves some back: those are planned too).
	for _ in $(seq 50); do
		trusted=0
		for j in 1 2 3; do
			[ "$j" = "$i" ] && continue
			n=$(tail -n +"$((obefore[$j] + 1))" "${CL_LOG[$j]}" | grep -c "no recovery scan" || true)
			trusted=$((trusted + n))
		done
		[ "$trusted" -ge "$moved" ] && break
		sleep 0.1
	done
	echo "ok $trusted take-over(s) of what broker $i handed over trusted its relinquish record (no recovery scan)"
	[ "$trusted" -ge "$moved" ] ||
		fail_cl "broker $i handed over $moved partition(s) but only $trusted take-over(s) trusted its relinquish record"
	cluster_launch "$i" || fail_cl "restarting broker $i"
	ev fault kind=restart n="$i" phase=end
	sleep 3
done
ev heal
wait $WL || { cat "$T/workload.log" >&2; fail_cl "the workload failed"; }
_cl_boot
$PY ci/chaos/workload.py final "$CL_BOOT" chaos "$H" --partitions "$PARTS" || fail_cl "reading every partition back"
python3 ci/chaos/checker.py "$H" --bound-s 30 --json "$T/verdict.json" || fail_cl "the checker found violations"
python3 - "$H" <<'EOF2' || fail_cl "clients saw failures"
import json, sys
ops = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sends = [o for o in ops if o.get("f") == "send" and o.get("type") in ("ok", "fail", "info")]
bad = [o for o in sends if o["type"] != "ok"]
assert sends and not bad, (len(sends), bad[:5])
print("ok %d sends, every one acknowledged: clients saw only retriable errors" % len(sends))
EOF2
python3 ci/cluster/failover_gaps.py "$H" || true
echo "PASS test_rolling: every broker restarted under load, nothing lost"
