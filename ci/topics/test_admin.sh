#!/bin/bash
# ci/topics/test_admin.sh — topic admin APIs end to end: a real kaas broker,
# confluent-kafka-python's AdminClient/Producer/Consumer (librdkafka) and
# kcat.  Create, describe, alter, grow and delete topics; DeleteRecords;
# delete + recreate starts at offset 0 every time; the state survives a
# restart.  docs/topics.md describes what is checked.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${BIN:=bin}"
PY=/usr/bin/python3

work=$(mktemp -d /tmp/kaas-topics-admin.XXXXXX)
data=$work/data
log=$work/broker.log
pid=
mkdir -p "$data"

stop() {
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	local rc=0
	wait "$pid" || rc=$?
	pid=
	return $rc
}

cleanup() {
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# Starts kaas on port $1 (0: any free port) and sets BROKER.
start() {
	local from=$(( $(cat "$log" 2>/dev/null | wc -l) + 1 ))
	"$BIN/kaas" --data "$data" --listen "127.0.0.1:$1" --trust-unqualified >>"$log" 2>&1 &
	pid=$!
	for _ in $(seq 1 300); do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "kaas exited during start-up:" >&2
			tail -n +"$from" "$log" >&2
			exit 1
		fi
		local line
		line=$(tail -n +"$from" "$log" | grep -m1 -o 'listening on [^ ]*:[0-9]*' || true)
		if [ -n "$line" ]; then
			port=${line##*:}
			BROKER=127.0.0.1:$port
			return 0
		fi
		sleep 0.1
	done
	echo "kaas did not start:" >&2
	tail -n +"$from" "$log" >&2
	exit 1
}

fail() {
	echo "FAIL: $*" >&2
	echo "--- broker log (tail) ---" >&2
	tail -n 40 "$log" >&2
	exit 1
}

start 0
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
stop || fail "kaas did not exit cleanly on SIGTERM"
start "$port"
$PY ci/topics/admin_e2e.py "$BROKER" "$data" after || fail "after-restart step"
stop || fail "kaas did not exit cleanly on SIGTERM"
echo "PASS ci/topics/test_admin.sh"
