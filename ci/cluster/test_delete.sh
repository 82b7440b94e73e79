#!/bin/bash
# ci/cluster/test_delete.sh — topic delete across three brokers
# (docs/cluster.md "Topic delete across brokers"), under load: idempotent
# acks=all producers write to two other topics throughout
# (ci/chaos/workload.py), and ci/chaos/checker.py (no code shared with the
# broker) verifies at the end that they lost, duplicated or reordered
# nothing.
#
# 1. A topic whose partitions are led by different brokers is deleted
#    through a broker that is not the controller.  The controller finishes
#    the delete: the directory and the tombstone are gone, no broker holds a
#    descriptor under it (/proc/<pid>/fd), and with kaas.trash.retention.ms=0
#    the trash is gone too.  Re-created under the same name, it starts at
#    offset 0 and serves only the new records through every broker.
# 2. Again, with one of its leaders stopped (SIGSTOP): the delete must wait
#    for that broker to release the partitions (directory and tombstone
#    still there); the controller is killed with SIGKILL meanwhile, the
#    stopped broker resumes, and the next controller's sweep finishes the
#    delete.  Re-created again, it holds only its newest records.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh cluster-delete
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }
DEL="$PY ci/cluster/delete_e2e.py"
PARTS=6
H1=$T/history1.jsonl
H2=$T/history2.jsonl
: >"$H1"
: >"$H2"

# A session and stall bound long enough for a SIGSTOP of ~2 s to be a pause,
# not a lapsed lease or a stall: the stopped broker comes back and must
# release the partitions itself.
cluster_start "$T/data" 3 --override kaas.trash.retention.ms=0 --override broker.session.timeout.ms=6000 \
	--override kaas.cluster.stall.timeout.ms=4500 ||
	fail_cl "starting three brokers"
DATA=$(readlink -f "$T/data")
CL=$DATA/__cluster
ports() { local i p=; for i in 1 2 3; do cluster_alive "$i" && p=${p:+$p,}${CL_PORT[$i]}; done; echo "$p"; }
port_of() { echo "${CL_PORT[$1]}"; }
# Descriptors of broker i whose target matches the (grep -E) pattern.
fds() { ls -l "/proc/${CL_PID[$1]}/fd" 2>/dev/null | grep -cE -- "$2" || true; }
no_old_fds() { # no_old_fds WHAT: no live broker holds anything of the old incarnation
	local i
	for i in 1 2 3; do
		cluster_alive "$i" || continue
		local n
		n=$(fds "$i" "$DATA/doomed/|~trash-|$DATA/.*\(deleted\)")
		[ "$n" = 0 ] || { ls -l "/proc/${CL_PID[$i]}/fd" | grep -E "doomed|trash|deleted" >&2; fail_cl "$1: broker $i still holds $n descriptor(s) of the deleted incarnation"; }
	done
}
finished() { # finished T0: waits until the delete is finished on the volume; prints how long after T0
	for _ in $(seq 1 300); do
		if [ -z "$(ls "$CL/deleted-topics")" ] && [ ! -e "$DATA/doomed" ] && ! ls "$DATA" | grep -q '^~trash-'; then
			printf 'delete finished on the volume %.2f s after the request\n' "$(echo "$(date +%s.%N) - $1" | bc)"
			return 0
		fi
		sleep 0.1
	done
	ls -la "$CL/deleted-topics" "$DATA" >&2
	return 1
}

for t in keep1 keep2 doomed; do
	$DEL create "$CL_BOOT" "$t" "$PARTS" || fail_cl "creating $t"
done
$PY ci/chaos/workload.py run "$CL_BOOT" keep1 "$H1" --seconds 75 --partitions "$PARTS" --producers 1 \
	--consumers 0 --seed 5 >"$T/workload1.log" 2>&1 &
W1=$!
e2e_on_exit "kill $W1 2>/dev/null || true"
$PY ci/chaos/workload.py run "$CL_BOOT" keep2 "$H2" --seconds 75 --partitions "$PARTS" --producers 1 \
	--consumers 0 --seed 6 >"$T/workload2.log" 2>&1 &
W2=$!
e2e_on_exit "kill $W2 2>/dev/null || true"
sleep 2

# ---- 1. delete through a broker that is not the controller ------------------------------
$DEL fill "$CL_BOOT" doomed "$PARTS" 20 old || fail_cl "filling doomed"
read -r ctl leaders < <($DEL leaders "$(port_of 1)" doomed)
distinct=$(tr ' ' '\n' <<<"$leaders" | sort -u | grep -c '^[123]$' || true)
[ "$distinct" -ge 2 ] || fail_cl "doomed is led by fewer than two brokers ($leaders): the test would prove nothing"
holders=0
for i in 1 2 3; do [ "$(fds "$i" "$DATA/doomed/")" -gt 0 ] && holders=$((holders + 1)); done
[ "$holders" -ge 2 ] || fail_cl "only $holders broker(s) hold descriptors under DATA/doomed before the delete"
recv=1
[ "$recv" = "$ctl" ] && recv=2
echo "controller $ctl, doomed led by $leaders, $holders broker(s) with descriptors under it; deleting through broker $recv"
t0=$(date +%s.%N)
$DEL delete "$(port_of "$recv")" doomed || fail_cl "deleting doomed through broker $recv"
printf 'DeleteTopics answered after %.2f s\n' "$(echo "$(date +%s.%N) - $t0" | bc)"
finished "$t0" || fail_cl "the delete did not finish"
grep -q "topic doomed (id .*) released by every broker at generation .*; delete finished" "${CL_LOG[$ctl]}" ||
	fail_cl "the controller (broker $ctl) did not say it finished the delete"
for i in 1 2 3; do
	[ "$i" = "$ctl" ] && continue
	! grep -q "topic doomed (id .*deleted): directory moved" "${CL_LOG[$i]}" ||
		fail_cl "broker $i, not the controller, moved the directory"
done
no_old_fds "after the delete"
pass "1: deleted through broker $recv, finished by the controller (broker $ctl); no descriptor left, no trash"

$DEL create "$CL_BOOT" doomed "$PARTS" || fail_cl "re-creating doomed"
$DEL fill "$CL_BOOT" doomed "$PARTS" 5 new1 || fail_cl "filling the new doomed"
$DEL check "$(ports)" doomed "$PARTS" 5 new1 || fail_cl "the re-created doomed"
read -r _ leaders < <($DEL leaders "$(port_of 1)" doomed)
echo "re-created doomed led by $leaders"

# ---- 2. the controller killed while the delete waits for a stopped leader ---------------
read -r ctl leaders < <($DEL leaders "$(port_of 1)" doomed)
stopped=
for i in 1 2 3; do
	[ "$i" != "$ctl" ] && tr ' ' '\n' <<<"$leaders" | grep -qx "$i" && { stopped=$i; break; }
done
[ -n "$stopped" ] || fail_cl "no broker but the controller leads doomed ($leaders)"
for i in 1 2 3; do [ "$i" != "$ctl" ] && [ "$i" != "$stopped" ] && recv=$i; done
echo "controller $ctl; stopping broker $stopped (leads part of doomed: $leaders); deleting through broker $recv"
cluster_stop_sig "$stopped" STOP
t0=$(date +%s.%N)
$DEL delete "$(port_of "$recv")" doomed >"$T/delete2.log" 2>&1 &
DP=$!
sleep 1.5
[ -n "$(ls "$CL/deleted-topics")" ] || { kill -CONT "${CL_PID[$stopped]}"; fail_cl "the tombstone is gone while broker $stopped still holds the partitions"; }
[ -e "$DATA/doomed" ] || { kill -CONT "${CL_PID[$stopped]}"; fail_cl "the directory went while broker $stopped still holds the partitions"; }
[ "$(fds "$stopped" "$DATA/doomed/")" -gt 0 ] || { kill -CONT "${CL_PID[$stopped]}"; fail_cl "the stopped broker holds nothing under doomed: the test would prove nothing"; }
cluster_kill "$ctl"
sleep 0.3
cluster_stop_sig "$stopped" CONT
echo "killed the controller (broker $ctl) between tombstone and trash; broker $stopped resumed"
finished "$t0" || fail_cl "the next controller did not finish the delete"
cluster_alive "$stopped" || fail_cl "broker $stopped exited after SIGCONT: its release was not what ended the wait"
wait $DP || { cat "$T/delete2.log" >&2; fail_cl "DeleteTopics through broker $recv"; }
nctl=
for i in 1 2 3; do
	[ "$i" = "$ctl" ] && continue
	grep -q "unfinished topic delete(s) to re-drive" "${CL_LOG[$i]}" &&
		grep -q "topic doomed (id .*) released by every broker at generation .*; delete finished" "${CL_LOG[$i]}" &&
		nctl=$i
done
[ -n "$nctl" ] || fail_cl "no surviving controller says it re-drove and finished the delete"
no_old_fds "after the next controller's delete"
pass "2: the controller died between tombstone and trash; broker $nctl, the next controller, finished the delete"

cluster_launch "$ctl" || fail_cl "restarting broker $ctl"
_cl_boot
$DEL create "$CL_BOOT" doomed "$PARTS" || fail_cl "re-creating doomed again"
$DEL fill "$CL_BOOT" doomed "$PARTS" 7 new2 || fail_cl "filling the newest doomed"
for i in 1 2 3; do cluster_alive "$i" || fail_cl "broker $i is not running"; done
$DEL check "$(ports)" doomed "$PARTS" 7 new2 || fail_cl "the doomed re-created after the controller died"

# ---- the other topics lost nothing -----------------------------------------------------------
for i in 1 2 3; do cluster_alive "$i" || fail_cl "broker $i is not running"; done
wait $W1 || { cat "$T/workload1.log" >&2; fail_cl "the keep1 workload failed"; }
wait $W2 || { cat "$T/workload2.log" >&2; fail_cl "the keep2 workload failed"; }
total=0
for k in 1 2; do
	h=$T/history$k.jsonl
	$PY ci/chaos/workload.py final "$CL_BOOT" "keep$k" "$h" --partitions "$PARTS" || fail_cl "reading keep$k back"
	python3 ci/chaos/checker.py "$h" --bound-s 30 --json "$T/verdict$k.json" || fail_cl "the checker found violations in keep$k"
	acked=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["acknowledged"])' "$T/verdict$k.json")
	[ "$acked" -gt 0 ] || fail_cl "nothing was acknowledged on keep$k: the test tested nothing"
	total=$((total + acked))
done
echo "PASS test_delete: two deletes across brokers (one finished by the next controller), $total acknowledged records on the other topics, none lost"
