#!/bin/bash
# ci/topics/test_dynconfig.sh — dynamic broker configs on three brokers
# sharing one directory, through three clients (confluent-kafka 1.7,
# kafka-python 2.0, kafkajs 2): a cluster-wide log.retention.ms set at run
# time is described by every broker and deletes the old segments of a topic
# without an override; broker 2's own value wins there only; static-only
# settings are refused by name and change nothing; auto-create and
# num.partitions follow the dynamic values; everything survives restarts;
# removing broker 2's value makes it follow the default at once; two
# clients' concurrent IncrementalAlterConfigs through two brokers lose nothing.  The
# version files on the volume are checked last (write-once names only).
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh dynconfig
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }

command -v node >/dev/null && command -v npm >/dev/null || fail "node/npm missing (make deps-test)"
mkdir -p "$T/js"
(cd "$T/js" && npm install --no-audit --no-fund --silent kafkajs@2 >/dev/null) || fail "npm install kafkajs@2"
JS() { NODE_PATH=$T/js/node_modules timeout 120 node ci/topics/dynconfig_kafkajs.js "$@"; }
PYD() { timeout 300 $PY ci/topics/dynconfig_e2e.py "$1" "${CL_PORT[1]}" "${CL_PORT[2]}" "${CL_PORT[3]}"; }

cluster_start "$T/data" 3 --override log.retention.check.interval.ms=500 \
	--override broker.session.timeout.ms=5000 || fail_cl "starting three brokers"
echo "ok three brokers: $CL_BOOT"

PYD setup || fail_cl "setup"
JS override "$CL_BOOT" || fail_cl "kafkajs: broker 2's own value"
PYD default || fail_cl "the cluster default"

cluster_term 2
cluster_launch 2 || fail_cl "restarting broker 2"
cluster_term 1
cluster_launch 1 || fail_cl "restarting broker 1"
_cl_boot
echo "ok brokers 2 and 1 restarted"
PYD after || fail_cl "after the restarts"
JS after "$CL_BOOT" || fail_cl "kafkajs after the restarts"
JS drop "$CL_BOOT" || fail_cl "kafkajs: dropping broker 2's value"
PYD dropped || fail_cl "after the drop"
PYD race || fail_cl "concurrent incremental alters"

# The volume: write-once versions, the newest few kept, nothing else.
V=$T/data/__cluster/configs/brokers
ls "$V/default" | grep -qvE '^[0-9]{20}\.json$' && fail "unexpected files in $V/default: $(ls "$V/default")"
n=$(ls "$V/default" | wc -l)
[ "$n" -ge 1 ] || fail "no version of the default"
newest=$V/default/$(ls "$V/default" | tail -1)
grep -q '"log.retention.ms":"3600000"' "$newest" && grep -q '"log.roll.ms":"90000019"' "$newest" ||
	fail "newest default version: $(cat "$newest")"
grep -q '"configs":{}' "$V/2/$(ls "$V/2" | tail -1)" || fail "newest version of broker 2 is not empty"
grep -h "refusing CLUSTER/configs" "$T"/b*.log && fail "a version written by a broker was refused"
echo "ok the versions on the volume: $n of the default (up to $(ls "$V/default" | tail -1)), broker 2's newest empty"

for i in 1 2 3; do
	cluster_term "$i"
	[ "${CL_RC[$i]}" = 0 ] || fail_cl "broker $i exited ${CL_RC[$i]} on SIGTERM"
done
echo "PASS ci/topics/test_dynconfig.sh"
