#!/bin/bash
# ci/broker/test_schemas.sh — every API version kaas advertises that
# kafka-python 2.0.2 also implements, encoded and decoded by kafka-python's
# own message classes against a real broker (test_schemas.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh schemas
"$BIN/kaas" --apis > "$T/apis"
broker_start "$T/d" --override group.initial.rebalance.delay.ms=0
$PY ci/broker/test_schemas.py 127.0.0.1 "$BROKER_PORT" "$T/apis"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC"
echo "test_schemas: all passed"
