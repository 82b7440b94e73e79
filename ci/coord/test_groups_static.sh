#!/bin/bash
# ci/coord/test_groups_static.sh — KIP-345 static membership with
# confluent-kafka (librdkafka): a member with group.instance.id restarted
# within its session timeout gets its partitions back with no rebalance of
# the other member; ListGroups v4 shows the state (docs/groups.md).
# kafka-python 2.0, kafkajs 2 and sarama 1.22 have no group.instance.id.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh groups-static

broker_start "$T/data" --override group.initial.rebalance.delay.ms=500
$PY ci/coord/static_e2e.py "$BROKER" || fail "static membership"
grep -q "static member inst-b rejoined as .*no rebalance" "$BROKER_LOG" ||
	fail "the rejoin was not taken in without a rebalance"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
echo "PASS ci/coord/test_groups_static.sh"
