#!/bin/bash
# ci/coord/test_groups_deleted_topic.sh — a topic deleted (and created
# again) under a subscribed consumer group: Metadata stops listing it at
# once, commits answer UNKNOWN_TOPIC_OR_PARTITION per partition, and
# confluent-kafka and kafka-python consumers close promptly (docs/groups.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh groups-deltopic

broker_start "$T/data" --override group.initial.rebalance.delay.ms=200
timeout 300 $PY ci/coord/deleted_topic_e2e.py "$BROKER" || fail "deleted topic under a group"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
echo "PASS ci/coord/test_groups_deleted_topic.sh"
