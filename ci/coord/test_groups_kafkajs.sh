#!/bin/bash
# ci/coord/test_groups_kafkajs.sh — consumer groups with kafkajs 2 (npm,
# installed into a scratch directory): two members split a topic, commits,
# fetchOffsets/describeGroups/listGroups, a new member resumes, deleteGroups.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/broker.sh
T=$(mktemp -d /tmp/kaas-groups-js.XXXXXX)
BROKER_NO_TRAP=1
BROKER_LOG=$T/broker.log
trap 'broker_cleanup; rm -rf "$T"' EXIT

command -v node >/dev/null && command -v npm >/dev/null || { echo "FAIL: node/npm missing (make deps-test)"; exit 1; }
mkdir -p "$T/js"
(cd "$T/js" && npm install --no-audit --no-fund --silent kafkajs@2 >/dev/null) ||
	{ echo "FAIL: npm install kafkajs@2"; exit 1; }

broker_start "$T/data" --override group.initial.rebalance.delay.ms=1000
if ! NODE_PATH=$T/js/node_modules timeout 300 node ci/coord/groups_kafkajs.js "$BROKER"; then
	echo "--- broker log (tail) ---" >&2
	tail -n 30 "$BROKER_LOG" >&2
	exit 1
fi
broker_stop
[ "$BROKER_RC" = 0 ] || { echo "FAIL: kaas exited $BROKER_RC on SIGTERM"; exit 1; }
echo "PASS ci/coord/test_groups_kafkajs.sh"
