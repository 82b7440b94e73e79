#!/bin/bash
# ci/cluster/test_failover.sh — three brokers on one directory under idempotent acks=all
# producers (ci/chaos/workload.py: real clients writing a history), while
# the leader of the most partitions is killed with SIGKILL again and again,
# and, every other round, the controller instead.  After each kill the
# survivors must converge: a controller that is alive (a new one elected
# when the old one died), every partition led by a live broker.  The killed
# broker comes back as a new incarnation.  At the end a fresh consumer
# reads every partition back and ci/chaos/checker.py (no code shared with
# the broker) verifies every acknowledged record is there exactly once, in
# produce order per partition.  Failover times are printed, not asserted.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh cluster-failover
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }
ROUNDS=${FAILOVER_ROUNDS:-6}
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

$PY ci/chaos/workload.py run "$CL_BOOT" chaos "$H" --seconds $((ROUNDS * 9 + 15)) --partitions "$PARTS" \
	--producers 2 --consumers 1 --seed 3 >"$T/workload.log" 2>&1 &
WL=$!
e2e_on_exit "kill $WL 2>/dev/null || true"
sleep 3

# state PORT: "controller leader0 leader1 ..." as broker PORT answers Metadata.
state() {
	$PY - "$1" <<'EOF2' 2>/dev/null || echo "?"
import sys
sys.path.insert(0, "ci/lib")
from kcluster import metadata
m = metadata(int(sys.argv[1]), ["chaos"])
err, parts = m["topics"]["chaos"]
print(m["controller"], " ".join(str(p[1]) if p[0] == 0 else "-1" for p in parts))
EOF2
}
live_port() { local i; for i in 1 2 3; do [ "$i" != "$1" ] && cluster_alive "$i" && { echo "${CL_PORT[$i]}"; return; }; done; }
ev() { $PY ci/chaos/workload.py event "$H" "$@"; }

for ((r = 0; r < ROUNDS; r++)); do
	kill -0 $WL 2>/dev/null || { cat "$T/workload.log" >&2; fail_cl "the workload died before round $r"; }
	read -r ctl leaders < <(state "${CL_PORT[1]}")
	if ((r % 2 == 1)); then
		victim=$ctl
		what=controller
	else
		victim=$(tr ' ' '\n' <<<"$leaders" | sort | uniq -c | sort -rn | awk 'NR==1{print $2}')
		what="leader of the most partitions"
	fi
	[[ "$victim" =~ ^[123]$ ]] || fail_cl "round $r: no victim in '$ctl $leaders'"
	ev fault kind=kill9 n="$r" broker="$victim" phase=start
	t0=$(date +%s.%N)
	cluster_kill "$victim"
	survivor=$(live_port "$victim")
	ok=
	for _ in $(seq 1 300); do
		read -r nctl nleaders < <(state "$survivor")
		if [[ "$nctl" =~ ^[123]$ ]] && [ "$nctl" != "$victim" ] &&
			! tr ' ' '\n' <<<"$nleaders" | grep -qx -- "$victim" &&
			! tr ' ' '\n' <<<"$nleaders" | grep -qx -- "-1"; then
			ok=1
			break
		fi
		sleep 0.1
	done
	t1=$(date +%s.%N)
	[ -n "$ok" ] || fail_cl "round $r: after killing broker $victim ($what) the survivors did not converge ($nctl $nleaders)"
	printf 'ok round %d: killed broker %s (%s); controller %s, leaders %s after %.2f s\n' \
		"$r" "$victim" "$what" "$nctl" "$nleaders" "$(echo "$t1 - $t0" | bc)"
	sleep 1
	cluster_launch "$victim" || fail_cl "round $r: restarting broker $victim"
	ev fault kind=kill9 n="$r" phase=end
	sleep 2
done
ev heal
wait $WL || { cat "$T/workload.log" >&2; fail_cl "the workload failed"; }
_cl_boot
$PY ci/chaos/workload.py final "$CL_BOOT" chaos "$H" --partitions "$PARTS" || fail_cl "reading every partition back"
python3 ci/chaos/checker.py "$H" --bound-s 30 --json "$T/verdict.json" || fail_cl "the checker found violations"
acked=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["acknowledged"])' "$T/verdict.json")
[ "$acked" -gt 0 ] || fail_cl "nothing was acknowledged: the test tested nothing"
python3 ci/cluster/failover_gaps.py "$H" || true
grep -h "gone (same-host token refused)" "$T"/b*.log | head -3 || true
echo "PASS test_failover: $ROUNDS kills, $acked acknowledged records, none lost, duplicated or reordered"
