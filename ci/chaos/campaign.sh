#!/usr/bin/env bash
# ci/chaos/campaign.sh — a seeded fault campaign against a running broker,
# judged by the history checker (docs/reliability.md).
#
#   CHAOS_SEED=7 CHAOS_FAULTS=12 bash ci/chaos/campaign.sh [OUT_DIR]
#
# Real clients (ci/chaos/workload.py: idempotent acks=all producers, assign()
# consumers, a consumer group committing) run while the nemesis injects
# CHAOS_FAULTS faults, chosen and spaced by CHAOS_SEED: kill -9 and restart,
# SIGSTOP/SIGCONT, a clean restart.  After the last fault heals, the clients
# go on for a while, a fresh consumer reads every partition back, and
# ci/chaos/checker.py judges the history; a violation fails the campaign.
# The same seed gives the same schedule.  OUT_DIR (default: a scratch
# directory, removed) keeps history.jsonl, verdict.json, schedule.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh chaos

SEED=${CHAOS_SEED:-1}
FAULTS=${CHAOS_FAULTS:-6}
PARTS=${CHAOS_PARTITIONS:-4}
BOUND=${CHAOS_BOUND_S:-20}
OUT=${1:-$T/out}
mkdir -p "$OUT"
H=$OUT/history.jsonl
SCHED=$OUT/schedule.txt
: > "$H"
: > "$SCHED"
RANDOM=$SEED

broker_start "$T/data" || fail "broker start"
$PY - "$BROKER" "$PARTS" <<'EOF' || fail "creating the topic"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1]})
for f in a.create_topics([NewTopic("chaos", int(sys.argv[2]), 1)]).values():
    f.result(30)
EOF

# The schedule first, from the seed alone, so a replay injects the same faults.
kinds=(kill9 stop restart)
declare -a KIND GAP HOLD
for ((i = 0; i < FAULTS; i++)); do
	KIND[i]=${kinds[RANDOM % ${#kinds[@]}]}
	GAP[i]=$((2 + RANDOM % 4))     # seconds of normal running before the fault
	HOLD[i]=$((1 + RANDOM % 3))    # seconds a SIGSTOP lasts
	echo "$i ${KIND[i]} gap=${GAP[i]}s hold=${HOLD[i]}s" >> "$SCHED"
done
total=0
for ((i = 0; i < FAULTS; i++)); do total=$((total + GAP[i] + HOLD[i] + 3)); done
TAIL=15 # seconds of running after the last heal: what the availability bound is judged on

$PY ci/chaos/workload.py run "$BROKER" chaos "$H" --seconds $((total + TAIL)) --partitions "$PARTS" \
	--producers 2 --consumers 1 --members 2 --seed "$SEED" > "$OUT/workload.log" 2>&1 &
WL=$!
e2e_on_exit "kill $WL 2>/dev/null || true"

ev() { $PY ci/chaos/workload.py event "$H" "$@"; }
start=$(date +%s)
for ((i = 0; i < FAULTS; i++)); do
	sleep "${GAP[i]}"
	kill -0 $WL 2>/dev/null || { cat "$OUT/workload.log" >&2; fail "the workload died before fault $i"; }
	ev fault kind="${KIND[i]}" n="$i" phase=start
	case ${KIND[i]} in
	kill9) broker_crash_restart || fail "restart after kill -9 (fault $i)" ;;
	stop)
		kill -STOP "$BROKER_PID"
		sleep "${HOLD[i]}"
		kill -CONT "$BROKER_PID"
		;;
	restart) broker_restart || fail "clean restart (fault $i)" ;;
	esac
	ev fault kind="${KIND[i]}" n="$i" phase=end
done
ev heal
echo "campaign: $FAULTS faults in $(($(date +%s) - start)) s (seed $SEED); clients run on"
wait $WL || { cat "$OUT/workload.log" >&2; fail "the workload failed"; }
$PY ci/chaos/workload.py final "$BROKER" chaos "$H" --partitions "$PARTS" || fail "reading every partition back"
python3 ci/chaos/checker.py "$H" --bound-s "$BOUND" --json "$OUT/verdict.json" ||
	fail "the checker found violations (seed $SEED; replay: CHAOS_SEED=$SEED CHAOS_FAULTS=$FAULTS)"
acked=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["acknowledged"])' "$OUT/verdict.json")
[ "$acked" -gt 0 ] || fail "nothing was acknowledged: the campaign tested nothing"
echo "PASS ci/chaos/campaign.sh: $FAULTS faults, $acked acknowledged records, no violation (seed $SEED)"
