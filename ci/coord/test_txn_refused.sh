#!/bin/bash
# ci/coord/test_txn_refused.sh — until transactions exist, a transactional
# producer fails at once with a fatal error (TRANSACTIONAL_ID_AUTHORIZATION_
# FAILED, with the reason in FindCoordinator's message) in librdkafka
# (confluent-kafka-python) and kafkajs, instead of retrying until its own
# timeout (docs/groups.md, "Transactions are not supported yet").
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh txn-refused

broker_start "$T/data"
$PY ci/coord/txn_refused.py "$BROKER" || fail "confluent-kafka transactional producer"
grep -q "transactions are not supported" "$BROKER_LOG" || fail "refused transactional id not logged"
if command -v node >/dev/null && command -v npm >/dev/null; then
	mkdir -p "$T/js"
	(cd "$T/js" && npm install --no-audit --no-fund --silent kafkajs@2 >/dev/null) ||
		fail "npm install kafkajs@2"
	NODE_PATH=$T/js/node_modules timeout 120 node ci/coord/txn_refused.js "$BROKER" ||
		fail "kafkajs transactional producer"
else
	fail "node/npm missing (make deps-test)"
fi
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
echo "PASS ci/coord/test_txn_refused.sh"
