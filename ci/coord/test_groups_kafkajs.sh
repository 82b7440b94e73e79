#!/bin/bash
# ci/coord/test_groups_kafkajs.sh — consumer groups with kafkajs 2 (npm,
# installed into a scratch directory): two members split a topic, commits,
# fetchOffsets/describeGroups/listGroups, a new member resumes, deleteGroups.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh groups-js

command -v node >/dev/null && command -v npm >/dev/null || fail "node/npm missing (make deps-test)"
mkdir -p "$T/js"
(cd "$T/js" && npm install --no-audit --no-fund --silent kafkajs@2 >/dev/null) ||
	fail "npm install kafkajs@2"

broker_start "$T/data" --override group.initial.rebalance.delay.ms=1000
NODE_PATH=$T/js/node_modules timeout 300 node ci/coord/groups_kafkajs.js "$BROKER" ||
	fail "ci/coord/groups_kafkajs.js"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
echo "PASS ci/coord/test_groups_kafkajs.sh"
