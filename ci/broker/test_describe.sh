#!/bin/bash
# ci/broker/test_describe.sh — DescribeCluster, DescribeLogDirs and
# IncrementalAlterConfigs against a real broker (describe_e2e.py: raw
# requests at every version, kafka-python's protocol classes for
# DescribeLogDirs, confluent-kafka and kafka-python reading configs back).
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh describe
broker_start "$T/data"
$PY ci/broker/describe_e2e.py "$BROKER" "$T/data" || fail "DescribeCluster / DescribeLogDirs"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "broker exit $BROKER_RC"
