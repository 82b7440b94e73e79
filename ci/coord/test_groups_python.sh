#!/bin/bash
# ci/coord/test_groups_python.sh — confluent-kafka-python (librdkafka): an
# idempotent producer (InitProducerId), a consumer group member that commits
# and leaves, a broker crash (kill -9), a new member that resumes exactly
# at the committed offsets, ListGroups, a new producer-id block after the
# restarts, kafka-python (pure Python) taking the group over where librdkafka
# left it, a transactional producer that is refused, and group membership
# across SIGTERM restarts: a member that commits every record synchronously
# sees none twice, a member that closes right after the restart keeps its
# final commit.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh groups-py

broker_start "$T/data/d" --override group.initial.rebalance.delay.ms=200
CL=$T/data/d/__cluster
$PY ci/coord/groups_e2e.py "$BROKER" "$CL" produce || fail "produce"
$PY ci/coord/groups_e2e.py "$BROKER" "$CL" first || fail "first member"
broker_crash_restart || fail "start after kill -9"
$PY ci/coord/groups_e2e.py "$BROKER" "$CL" resume || fail "resume after crash"
$PY ci/coord/groups_e2e.py "$BROKER" "$CL" admin || fail "admin"
$PY ci/coord/groups_e2e.py "$BROKER" "$CL" kafka-python || fail "kafka-python takes over the group"
$PY ci/coord/groups_e2e.py "$BROKER" "$CL" txn || fail "transactional producer"
grep -q "transactions are not supported" "$BROKER_LOG" || fail "refused transactional id not logged"

# A SIGTERM restart while a member is consuming (PHASE pauses at its
# progress file until the go file exists).
restart_under() {
	local phase=$1
	$PY ci/coord/groups_e2e.py "$BROKER" "$CL" "$phase" "$T/$phase" &
	local pid=$!
	for _ in $(seq 1 1200); do [ -s "$T/$phase.progress" ] && break; kill -0 $pid 2>/dev/null || break; sleep 0.1; done
	[ -s "$T/$phase.progress" ] || { wait $pid || true; fail "$phase: the member did not get to the restart"; }
	broker_restart || fail "$phase: restart"
	touch "$T/$phase.go"
	wait $pid || fail "$phase: membership across a SIGTERM restart"
}
restart_under sync
restart_under close
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
echo "PASS ci/coord/test_groups_python.sh"
