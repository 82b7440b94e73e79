#!/bin/bash
# ci/topics/test_admin.sh — topic admin APIs end to end: a real kaas broker,
# confluent-kafka-python's AdminClient/Producer/Consumer (librdkafka) and
# kcat.  Create, describe, alter, grow and delete topics; DeleteRecords;
# delete + recreate starts at offset 0 every time; the state survives a
# restart.  docs/topics.md describes what is checked.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh topics-admin
data=$T/data

broker_start "$data"
$PY ci/topics/admin_e2e.py "$BROKER" "$data" admin || fail "admin step"
$PY ci/topics/admin_e2e.py "$BROKER" "$data" records || fail "records step"

# A Kafka-CLI-style check with kcat: delete, recreate, produce, and the first
# record of the new topic is at offset 0.
$PY - "$BROKER" <<'EOF' || fail "kcat topic prepare"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1]})
a.create_topics([NewTopic("cli", 1, 1)])["cli"].result()
EOF
printf 'a\nb\nc\n' | kcat -b "$BROKER" -P -t cli -p 0 -X acks=all || fail "kcat produce"
offs=$(kcat -b "$BROKER" -C -t cli -p 0 -o beginning -e -q -f '%o\n' | tr '\n' ' ')
[ "$offs" = "0 1 2 " ] || fail "kcat offsets before recreate: '$offs'"
$PY - "$BROKER" <<'EOF' || fail "recreate cli"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1]})
a.delete_topics(["cli"], operation_timeout=15)["cli"].result()
a.create_topics([NewTopic("cli", 1, 1)])["cli"].result()
EOF
printf 'z\n' | kcat -b "$BROKER" -P -t cli -p 0 -X acks=all || fail "kcat produce after recreate"
out=$(kcat -b "$BROKER" -C -t cli -p 0 -o beginning -e -q -f '%o:%s\n' | tr '\n' ' ')
[ "$out" = "0:z " ] || fail "recreated topic via kcat: '$out' (want '0:z ')"
echo "ok: kcat sees the recreated topic start at offset 0"

# Restart: what was created, altered and deleted stays so.
broker_restart || fail "kaas did not exit cleanly on SIGTERM"
$PY ci/topics/admin_e2e.py "$BROKER" "$data" after || fail "after-restart step"
# The deletes' directories are in the trash until its retention; emptied by hand.
ls "$data" | grep -q '^~trash-' || fail "no trash entry after deletes"
$BIN/kaas trash empty --data "$data" >/dev/null || fail "kaas trash empty"
! ls "$data" | grep -q '^~trash-' || fail "kaas trash empty left entries"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas did not exit cleanly on SIGTERM"
echo "PASS ci/topics/test_admin.sh"
