#!/bin/bash
# ci/broker/test_schemas.sh — every API version kaas advertises that
# kafka-python 2.0.2 also implements, encoded and decoded by kafka-python's
# own message classes against a real broker (test_schemas.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/broker.sh
T=$(mktemp -d /tmp/kaas-schemas.XXXXXX)
BROKER_NO_TRAP=1
trap 'broker_cleanup; rm -rf "$T"' EXIT
"$BIN/kaas" --apis > "$T/apis"
BROKER_LOG=$T/broker.log broker_start "$T/d" --override group.initial.rebalance.delay.ms=0
/usr/bin/python3 ci/broker/test_schemas.py 127.0.0.1 "$BROKER_PORT" "$T/apis"
broker_stop
[ "$BROKER_RC" = 0 ] || { echo "FAIL: kaas exited $BROKER_RC"; exit 1; }
echo "test_schemas: all passed"
