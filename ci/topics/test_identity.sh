#!/bin/bash
# ci/topics/test_identity.sh — the broker never deletes data it cannot prove
# is garbage, end to end: a real kaas broker and confluent-kafka-python
# (librdkafka).  Records are produced with acks=all; then, each time with a
# restart and a client Metadata request (default auto-create) after it:
#   1. a topic's .topic-id.json is rewritten with another valid UUID
#      (registry and manifests still name the real one);
#   2. a topic's registry entry is overwritten with garbage;
#   3. the whole cluster directory is lost (a separate --cluster-dir, as on
#      a tmpfs that did not survive a reboot).
# Every acknowledged record must stay consumable under the topic's original
# ID.  Finally a delete moves the topic to the trash (soon after its
# answer), where it stays until `kaas trash empty`.  docs/topics.md states the rules.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh topics-identity
data=$T/data
cl=$T/cluster
state=$T/acked.json
mkdir -p "$data" "$cl"
run() { $PY ci/topics/identity_e2e.py "$BROKER" "$cl" "$state" "$@"; }
uuid() { $PY -c 'import uuid; print(uuid.uuid4())'; }

broker_start "$data" --cluster-dir "$cl"
run produce stamp 3 200 || fail "produce stamp"
run produce reg 2 100 || fail "produce reg"
run produce wipe 1 100 || fail "produce wipe"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas did not exit cleanly on SIGTERM"

# 1. Another valid UUID in the stamp.
printf '{"topic_id":"%s","created_ms":1}\n' "$(uuid)" >"$data/stamp/.topic-id.json"
# 2. Garbage in the registry entry.
printf 'garbage\0\1\2' >"$cl/topics/reg.json"
broker_start "$data" --cluster-dir "$cl"
run check stamp reg wipe || fail "after the rewritten stamp and the garbage registry entry"
grep -q 'WARN.*topic stamp: conflicting identity' "$BROKER_LOGFILE" || fail "the stamp conflict was not logged"
grep -q 'WARN.*topic reg: no readable registry entry.*re-adopted' "$BROKER_LOGFILE" ||
	fail "the re-adoption of reg was not logged"
! grep -q 'reclaiming' "$BROKER_LOGFILE" || fail "something was reclaimed"
ls "$cl/topics" | grep -q '^~lost-' || fail "the garbage registry entry was not kept"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas did not exit cleanly on SIGTERM"

# 3. The cluster directory is lost: registry, assignment, everything.
rm -rf "$cl"
mkdir "$cl"
broker_start "$data" --cluster-dir "$cl"
run check wipe stamp reg || fail "after losing the cluster directory"
! ls "$data" | grep -q '^~' || fail "something was moved aside: $(ls "$data")"

# 4. A delete moves the topic to the trash; it stays there until emptied.
run delete wipe || fail "delete wipe"
# DeleteTopics answers once the topic is gone for clients; the controller
# moves the files to the trash after every broker released them, as Kafka
# deletes a topic's logs after its answer.
entry=
for _ in $(seq 1 300); do
	entry=$(ls "$data" | grep '^~trash-' || true)
	[ -z "$entry" ] || break
	sleep 0.1
done
[ -n "$entry" ] || fail "no trash entry after the delete"
[ -n "$(ls "$data/$entry/0/"*.log)" ] || fail "the trash entry holds no log"
grep -q '"reason":"deleted"' "$data/$entry/.trash.json" || fail "the trash entry does not say why"
broker_restart || fail "kaas did not exit cleanly on SIGTERM"
[ -d "$data/$entry" ] || fail "the trash was emptied by a restart"
$BIN/kaas trash list --data "$data" | grep -q "^trash.*topic=wipe.*reason=deleted" || fail "kaas trash list"
$BIN/kaas trash empty --data "$data" --older-than 1h | grep -q 'removed 0' || fail "kaas trash empty --older-than 1h"
[ -d "$data/$entry" ] || fail "--older-than 1h removed a fresh entry"
$BIN/kaas trash empty --data "$data" | grep -q 'removed 1' || fail "kaas trash empty"
[ ! -e "$data/$entry" ] || fail "kaas trash empty left the entry"
set +e
$BIN/kaas trash empty --data "$data" --older-than soon 2>/dev/null
rc=$?
set -e
[ "$rc" = 2 ] || fail "a bad --older-than gave exit $rc, not 2"
run check stamp reg || fail "the other topics after the delete"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas did not exit cleanly on SIGTERM"
echo "PASS ci/topics/test_identity.sh"
