#!/bin/bash
# ci/interop/test_kafkajs.sh — kafkajs 2 (pure JavaScript, from npm) against a
# real kaas broker: a producer sends half of the records before and half
# after a broker restart (gzip, then idempotent); a consumer-group member
# reads them back and the broker is restarted again half-way through its
# reading (no record twice: the member keeps its place) and once more before
# it closes (its final commit is kept); every record is compared with what
# was acknowledged, the group's committed offsets reach the high watermarks;
# offsets by timestamp; the admin client (describeCluster, createTopics,
# describe/alterConfigs, createPartitions, deleteTopicRecords,
# fetchTopicOffsets, listGroups, deleteGroups, deleteTopics) with a restart
# in between.
NAME=kafkajs
source "$(dirname "$0")/lib.sh"
command -v node >/dev/null || fail "node is not installed (make deps-test)"
npm install --silent --no-audit --no-fund --prefix "$T/npm" kafkajs@2 >"$T/npm.log" 2>&1 ||
	{ cat "$T/npm.log"; fail "npm install kafkajs@2"; }
export NODE_PATH=$T/npm/node_modules KAFKAJS_NO_PARTITIONER_WARNING=1
echo "ok kafkajs $(node -p 'require("kafkajs/package.json").version') installed"
J="node ci/interop/kafkajs_e2e.js"

broker_start "$T/data" --override num.partitions=3 --override group.initial.rebalance.delay.ms=100
T0=$(($(now_ms) - 3600000))
N=6000
H=$((N / 2))

spec records kj "$T0" 0 $H >"$T/r1"
spec records kj "$T0" $H $N >"$T/r2"
$J produce "$BROKER" kj "$T/r1" "$T/p" --gzip || fail "produce, first half"
broker_restart || fail "restart"
$J produce "$BROKER" kj "$T/r2" "$T/p" --idempotent || fail "produce, second half"
$J times "$BROKER" kj "$T/t" $(spec times "$T0" 0 5 $((H - 1)) $H 4999 $((N - 1)) $N) || fail "offsets by timestamp"

$J group "$BROKER" kj kj-group $N "$T/c" "$T/progress" "$T/go" &
cons=$!
for _ in $(seq 1 1200); do [ -s "$T/progress" ] && break; kill -0 $cons 2>/dev/null || break; sleep 0.1; done
[ -s "$T/progress" ] || fail "the group member did not get half-way"
broker_restart || fail "restart while the group member reads"
touch "$T/go"
for _ in $(seq 1 1200); do [ -s "$T/progress.2" ] && break; kill -0 $cons 2>/dev/null || break; sleep 0.1; done
[ -s "$T/progress.2" ] || fail "the group member did not reach the last record"
broker_restart || fail "restart before the group member closes"
touch "$T/go.2"
wait $cons || fail "consumer group across two restarts"
spec check kj "$T0" "$T/p" "$T/c" "$T/t" --expect=$N || fail "consumed != produced"

$J admin "$BROKER" "$T/data" || fail "admin"
broker_restart || fail "restart"
$J admin-after "$BROKER" "$T/data" || fail "admin after the restart"
interop_done
