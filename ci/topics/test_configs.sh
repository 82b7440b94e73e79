#!/bin/bash
# ci/topics/test_configs.sh — Kafka 3.x's topic configs with confluent-kafka
# (librdkafka) and kafka-python: every key accepted and described back, the
# values kaas cannot honour refused with the reason, an honoured timestamp
# bound refusing old records; the overrides survive a restart.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh topics-configs

broker_start "$T/data"
$PY ci/topics/configs_e2e.py "$BROKER" || fail "configs_e2e.py"
broker_restart || fail "restart"
$PY - "$BROKER" <<'PYEOF' || fail "overrides after the restart"
import sys
from confluent_kafka.admin import AdminClient, ConfigResource
a = AdminClient({"bootstrap.servers": sys.argv[1]})
r = ConfigResource(ConfigResource.Type.TOPIC, "cfg-kp")
got = a.describe_configs([r])[r].result()
# kafka-python's AlterConfigs replaced the overrides with these two.
assert got["message.downconversion.enable"].value == "false", got["message.downconversion.enable"].value
assert got["flush.messages"].value == "1", got["flush.messages"].value
assert got["message.format.version"].source == 5, "AlterConfigs replaces: the rest reverts"
r = ConfigResource(ConfigResource.Type.TOPIC, "cfg-all")
got = a.describe_configs([r])[r].result()
assert got["message.format.version"].value == "3.0-IV1", got["message.format.version"].value
assert got["flush.ms"].value == "5", got["flush.ms"].value
print("ok no-op overrides survive a restart")
PYEOF
grep -q "ignoring config" "$BROKER_LOG" && fail "the registry dropped a config on reload"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
echo "PASS ci/topics/test_configs.sh"
