#!/bin/bash
# ci/storage/test_recompress.sh — topic-level compression.type end to end
# (ci/storage/recompress_e2e.py): batches in another codec are stored in
# the topic's, as Kafka does, and confluent-kafka and kafka-python read
# every record; IncrementalAlterConfigs changes the codec of later batches.
# Then a broker started with --override compression.type=gzip: topics
# without their own compression.type store gzip, a dynamic change of the
# cluster-wide default reaches them at the next append, their own wins.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh storage-recompress

broker_start "$T/data"
$PY ci/storage/recompress_e2e.py "$BROKER" "$T/data" || fail "recompress_e2e.py"
grep -E "WARN|ERR" "$BROKER_LOG" | grep -v gate: | grep -i "compress" && fail "the broker warned about compression"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"

BROKER_LOG=$T/broker-gzip.log broker_start "$T/data-gzip" --override compression.type=gzip
$PY ci/storage/recompress_e2e.py "$BROKER" "$T/data-gzip" broker-gzip || fail "recompress_e2e.py broker-gzip"
grep -E "WARN|ERR" "$BROKER_LOGFILE" | grep -v gate: | grep -i "compress" && fail "the broker warned about compression"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
echo "PASS ci/storage/test_recompress.sh"
