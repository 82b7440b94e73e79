#!/bin/bash
# ci/cluster/test_zombie.sh — the lease: a leader paused (SIGSTOP) under acks=all load,
# with produce requests and group commits in its pipeline and flushes in
# flight, for longer than the session timeout, then resumed (SIGCONT).
# Meanwhile the others must judge it expired and take its partitions over.
# When it wakes, its first heartbeat comes back after its renewal window:
# the lease has lapsed, so it must answer nothing as durable, give its
# partitions up without writing to them and exit (76) to come back as a new
# incarnation.  The checker (ci/chaos/checker.py) then verifies that no
# record was acknowledged that the new leaders do not serve.  Done twice.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh cluster-zombie
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }
PARTS=6
H=$T/history.jsonl
: >"$H"
SESSION=4000
cluster_start "$T/data" 3 --override broker.session.timeout.ms=$SESSION || fail_cl "starting three brokers"
$PY - "$CL_BOOT" "$PARTS" <<'EOF2' || fail_cl "creating the topic"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1]})
for f in a.create_topics([NewTopic("chaos", int(sys.argv[2]), 1)]).values():
    f.result(30)
EOF2
$PY ci/chaos/workload.py run "$CL_BOOT" chaos "$H" --seconds 45 --partitions "$PARTS" \
	--producers 3 --consumers 2 --seed 5 >"$T/workload.log" 2>&1 &
WL=$!
e2e_on_exit "kill $WL 2>/dev/null || true"
ev() { $PY ci/chaos/workload.py event "$H" "$@"; }
leaders_from() {
	$PY - "$1" <<'EOF2' 2>/dev/null || echo "?"
import sys
sys.path.insert(0, "ci/lib")
from kcluster import metadata
err, parts = metadata(int(sys.argv[1]), ["chaos"])["topics"]["chaos"]
print(" ".join(str(p[1]) if p[0] == 0 else "-1" for p in parts))
EOF2
}
sleep 4
for round in 0 1; do
	victim=$(leaders_from "${CL_PORT[1]}" | tr ' ' '\n' | sort | uniq -c | sort -rn | awk 'NR==1{print $2}')
	[[ "$victim" =~ ^[123]$ ]] || fail_cl "no leader to pause"
	other=1; [ "$victim" = 1 ] && other=2
	ev fault kind=stop n="$round" broker="$victim" phase=start
	cluster_stop_sig "$victim" STOP
	t0=$(date +%s.%N)
	moved=
	for _ in $(seq 1 300); do
		l=$(leaders_from "${CL_PORT[$other]}")
		if [ "$l" != "?" ] && ! tr ' ' '\n' <<<"$l" | grep -qx -- "$victim" && ! tr ' ' '\n' <<<"$l" | grep -qx -- "-1"; then
			moved=1
			break
		fi
		sleep 0.1
	done
	[ -n "$moved" ] || { cluster_stop_sig "$victim" CONT; fail_cl "the paused broker's partitions were not taken over"; }
	printf 'ok round %d: broker %s paused; its partitions moved after %.2f s (session %d ms): %s\n' \
		"$round" "$victim" "$(echo "$(date +%s.%N) - $t0" | bc)" "$SESSION" "$l"
	sleep 1
	cluster_stop_sig "$victim" CONT
	rc=
	for _ in $(seq 1 200); do
		cluster_alive "$victim" || { rc=0; wait "${CL_PID[$victim]}" || rc=$?; break; }
		sleep 0.1
	done
	[ -n "$rc" ] || fail_cl "broker $victim kept running after its lease lapsed"
	# 76: the lease lapsed; 77: the watchdog saw the fsync it was in for
	# longer than the stall bound first.  Either way it gave up.
	[ "$rc" = 76 ] || [ "$rc" = 77 ] || fail_cl "broker $victim exited $rc after SIGCONT, not 76/77"
	why=$(grep -o "gives up leadership: [^;]*" "${CL_LOG[$victim]}" | tail -1)
	[ -n "$why" ] || fail_cl "no reason in broker $victim's log"
	echo "ok round $round: resumed, broker $victim exited ($rc) without answering: $why"
	CL_PID[$victim]=
	cluster_launch "$victim" || fail_cl "restarting broker $victim"
	ev fault kind=stop n="$round" phase=end
	sleep 3
done
ev heal
wait $WL || { cat "$T/workload.log" >&2; fail_cl "the workload failed"; }
_cl_boot
$PY ci/chaos/workload.py final "$CL_BOOT" chaos "$H" --partitions "$PARTS" || fail_cl "reading every partition back"
python3 ci/chaos/checker.py "$H" --bound-s 30 --json "$T/verdict.json" || fail_cl "the checker found violations"
acked=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["acknowledged"])' "$T/verdict.json")
[ "$acked" -gt 0 ] || fail_cl "nothing was acknowledged"
python3 ci/cluster/failover_gaps.py "$H" || true
echo "PASS test_zombie: 2 pauses past the session timeout, $acked acknowledged records all served"
