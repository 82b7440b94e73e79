#!/bin/bash
# ci/cluster/test_coord_move.sh — a consumer group while its coordinator
# moves: three brokers, an idempotent producer, two confluent-kafka
# consumers of one group committing after every batch, and a watcher that
# reads the committed offsets every 100 ms (ci/cluster/coord_group.py).
# The broker that coordinates the group is
#   1. drained (SIGTERM): the shard is handed off, the broker exits 0;
#   2. killed (kill -9): the shard is taken over when it is proven gone;
#   3. paused (SIGSTOP) past the session timeout, with an OffsetCommit of a
#      group of the same shard waiting in its socket, then resumed: it must
#      not acknowledge that commit, the successor must never show it, and
#      the broker exits (lease lapsed).
# Each time the consumers find the new coordinator (which restored the
# members from the group file, so no rebalance is needed; a member that
# does rejoin resumes at the committed offsets): the
# watcher never sees a committed offset go back, every delivered record is
# consumed, and at the end the commits reach the end of every partition.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh cluster-coord-move
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; [ -f "$T/run.log" ] && tail -5 "$T/run.log" >&2; fail "$@"; }
SESSION=4000
NSHARDS=16 # KCL_NSHARDS: the shard count every assignment has
TOPIC=cm
GROUP=cmg
CG=ci/cluster/coord_group.py
cluster_start "$T/data" 3 --override broker.session.timeout.ms=$SESSION || fail_cl "starting three brokers"
$PY - "$CL_BOOT" <<'EOF2' || fail_cl "creating the topic"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1]})
for f in a.create_topics([NewTopic("cm", 6, 1)]).values():
    f.result(30)
EOF2

# The coordinator of group $1 as broker $2 (an index) names it; "" if none.
coord_of() {
	local r
	r=$($PY $CG find "${CL_PORT[$2]}" "$1")
	[ "${r%% *}" = 0 ] && echo "${r##* }" || echo ""
}
# Waits until broker $2 names a live coordinator for $1 other than $3.
moved_from() {
	local c
	for _ in $(seq 1 300); do
		c=$(coord_of "$1" "$2")
		if [ -n "$c" ] && [ "$c" != "$3" ] && cluster_alive "$c"; then
			echo "$c"
			return 0
		fi
		sleep 0.1
	done
	return 1
}
other_than() { [ "$1" = 1 ] && echo 2 || echo 1; }

$PY $CG run "$CL_BOOT" $TOPIC $GROUP "$T/out" --seconds 55 >"$T/run.log" 2>&1 &
RUN=$!
e2e_on_exit "kill $RUN 2>/dev/null || true"
for _ in $(seq 1 300); do [ -f "$T/out/ready" ] && break; sleep 0.1; done
[ -f "$T/out/ready" ] || fail_cl "the group never committed"
sleep 2

# 1. SIGTERM: a planned hand-off.
c=$(coord_of $GROUP 1)
[[ "$c" =~ ^[123]$ ]] || fail_cl "no coordinator for $GROUP"
# One coordinator, whichever broker is asked.
for i in 2 3; do
	[ "$(coord_of $GROUP $i)" = "$c" ] || fail_cl "broker $i names $(coord_of $GROUP $i) for $GROUP, broker 1 names $c"
done
for i in 1 2 3; do
	[ "$i" = "$c" ] && continue
	r=$($PY $CG fetch "${CL_PORT[$i]}" $GROUP $TOPIC 0)
	[ "${r%% *}" = 16 ] || fail_cl "OffsetFetch of $GROUP at broker $i (not its coordinator) answered '$r', not NOT_COORDINATOR"
done
t0=$(date +%s.%N)
cluster_term "$c"
[ "${CL_RC[$c]}" = 0 ] || fail_cl "broker $c exited ${CL_RC[$c]} after SIGTERM"
n=$(moved_from $GROUP "$(other_than "$c")" "$c") || fail_cl "the group's coordinator did not move off drained broker $c"
printf 'ok drain: broker %s (the coordinator) exited 0; broker %s coordinates %s (%.1f s after SIGTERM)\n' \
	"$c" "$n" $GROUP "$(echo "$(date +%s.%N) - $t0" | bc)"
cluster_launch "$c" || fail_cl "restarting broker $c"
sleep 4

# 2. kill -9.
c=$(coord_of $GROUP 1)
[[ "$c" =~ ^[123]$ ]] || fail_cl "no coordinator for $GROUP"
t0=$(date +%s.%N)
cluster_kill "$c"
n=$(moved_from $GROUP "$(other_than "$c")" "$c") || fail_cl "the group's coordinator did not move off killed broker $c"
printf 'ok kill -9: broker %s (the coordinator) killed; broker %s coordinates %s (%.1f s after)\n' \
	"$c" "$n" $GROUP "$(echo "$(date +%s.%N) - $t0" | bc)"
cluster_launch "$c" || fail_cl "restarting broker $c"
sleep 4

# 3. SIGSTOP past the session timeout: a zombie coordinator.
ZG=$($PY $CG sibling $GROUP $NSHARDS)
c=$(coord_of $GROUP 1)
[[ "$c" =~ ^[123]$ ]] || fail_cl "no coordinator for $GROUP"
[ "$(coord_of "$ZG" 1)" = "$c" ] || fail_cl "$ZG (same shard as $GROUP by FNV-1a) has another coordinator"
r=$($PY $CG commit "${CL_PORT[$c]}" "$ZG" $TOPIC 0 7)
[ "$r" = 0 ] || fail_cl "a commit of $ZG at its coordinator answered $r"
cluster_stop_sig "$c" STOP
t0=$(date +%s.%N)
# A commit that waits in the paused broker's socket until after its lease is gone.
$PY $CG commit "${CL_PORT[$c]}" "$ZG" $TOPIC 0 424242 60 >"$T/zombie_commit" 2>&1 &
ZC=$!
o=$(other_than "$c")
n=$(moved_from $GROUP "$o" "$c") || { cluster_stop_sig "$c" CONT; fail_cl "the paused coordinator's shard was not taken over"; }
for _ in $(seq 1 100); do
	r=$($PY $CG fetch "${CL_PORT[$n]}" "$ZG" $TOPIC 0)
	[ "${r%% *}" = 0 ] && break
	sleep 0.1
done
[ "$r" = "0 7" ] || { cluster_stop_sig "$c" CONT; fail_cl "the new coordinator shows $ZG at '$r', not '0 7'"; }
printf 'ok pause: broker %s (the coordinator) stopped; broker %s took %s over after %.1f s (session %d ms)\n' \
	"$c" "$n" $GROUP "$(echo "$(date +%s.%N) - $t0" | bc)" $SESSION
sleep 1
cluster_stop_sig "$c" CONT
rc=
for _ in $(seq 1 200); do
	cluster_alive "$c" || { rc=0; wait "${CL_PID[$c]}" || rc=$?; break; }
	sleep 0.1
done
[ -n "$rc" ] || fail_cl "broker $c kept running after its lease lapsed"
[ "$rc" = 76 ] || [ "$rc" = 77 ] || fail_cl "broker $c exited $rc after SIGCONT, not 76/77"
CL_PID[$c]=
wait "$ZC" || true
zr=$(cat "$T/zombie_commit")
[ "$zr" != 0 ] || fail_cl "the zombie acknowledged a commit after its lease lapsed"
sleep 1
r=$($PY $CG fetch "${CL_PORT[$n]}" "$ZG" $TOPIC 0)
[ "$r" = "0 7" ] || fail_cl "after the zombie resumed, $ZG shows '$r' (its unacknowledged commit is visible)"
echo "ok zombie: the commit waiting in its socket was answered '$zr' (not acknowledged); $ZG still shows 7; broker $c exited $rc"
cluster_launch "$c" || fail_cl "restarting broker $c"
_cl_boot

# The group carries on to the end of every partition.
st=0
wait $RUN || st=$?
[ -f "$T/out/result.json" ] || fail_cl "no result from the group (exit $st)"
$PY - "$T/out/result.json" <<'EOF2' || fail_cl "the group's history is wrong: $(cat "$T/out/result.json")"
import json, sys
r = json.load(open(sys.argv[1]))
errs = []
if r["backwards"]:
    errs.append("committed offsets went back: %s" % r["backwards"][:5])
if r["missing"]:
    errs.append("delivered records never consumed: %s" % r["missing"])
if not r["done"]:
    errs.append("the group did not commit the end of every partition in time")
if r["delivered"] < 1000 or r["commit_ok"] < 50:
    errs.append("too little traffic: %d delivered, %d commits" % (r["delivered"], r["commit_ok"]))
# No rebalance is needed: the successor restores the members from the group
# file, and the consumers find it and go on heartbeating (assignments are
# counted, not required).
for e in errs:
    print(e, file=sys.stderr)
print("ok the group: %d records delivered, all consumed (%d distinct); %d commits (%d refused, retried); "
      "%d assignments; committed offsets never went back" %
      (r["delivered"], r["consumed_distinct"], r["commit_ok"], r["commit_failed"], r["rebalances"]))
sys.exit(1 if errs else 0)
EOF2
ls "$T/data/__cluster/groups/" | grep -q "^$GROUP\.[0-9]\{10\}\.json$" || fail_cl "no epoch-named file for $GROUP"
echo "ok group files: $(ls "$T/data/__cluster/groups/" | grep "^$GROUP\." | tr '\n' ' ')"
echo "PASS test_coord_move: drain, kill -9 and pause of the coordinator under a committing group"
