#!/bin/bash
# ci/broker/test_leader_epoch.sh — leader epochs as clients see them
# (KIP-320) across a broker restart, which takes every partition over at a
# higher epoch as a move to another broker does:
#   * librdkafka (confluent-kafka) consumes a partition with assign(); the
#     broker is restarted while it reads; more records are produced at the
#     new epoch; it carries on with no error, every offset once, in order.
#     Its requests go through ci/interop/apitrace.py, and the versions it
#     sent are printed (docs/compat.md's table).
#   * raw requests (test_leader_epoch.py): Metadata v7's epoch grew; Fetch
#     v11, ListOffsets v4-v5 and OffsetForLeaderEpoch v2-v4 answer
#     FENCED_LEADER_EPOCH for the old epoch and UNKNOWN_LEADER_EPOCH for a
#     newer one; OffsetForLeaderEpoch places the old epoch's end where the
#     new one began and the new one's at the log end.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh leader-epoch
LE="$PY ci/broker/test_leader_epoch.py"
N=2000 # records per epoch

PROXY_PORT=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
broker_start "$T/d" --advertise "127.0.0.1:$PROXY_PORT"
$PY ci/interop/apitrace.py "$PROXY_PORT" "$BROKER_PORT" "$T/trace" &
PROXY_PID=$!
e2e_on_exit "kill $PROXY_PID 2>/dev/null; wait $PROXY_PID 2>/dev/null"
VIA=127.0.0.1:$PROXY_PORT

$LE produce "$BROKER" le 0 $N || fail "producing at the first epoch"
E1=$($LE epoch "$BROKER" le) || fail "Metadata v7"
$LE before "$BROKER" le "$E1" || fail "raw checks at epoch $E1"

$LE consume "$VIA" le $((2 * N)) "$T/got" > "$T/consumer.out" 2>&1 &
CONSUMER=$!
e2e_on_exit "kill $CONSUMER 2>/dev/null; wait $CONSUMER 2>/dev/null"
for _ in $(seq 1 600); do
	[ -f "$T/got" ] && [ "$(wc -l < "$T/got")" -ge 300 ] && break
	kill -0 $CONSUMER 2>/dev/null || { cat "$T/consumer.out" >&2; fail "the consumer ended early"; }
	sleep 0.1
done
AT=$(wc -l < "$T/got")
[ "$AT" -ge 300 ] && [ "$AT" -lt $N ] || fail "consumer at $AT records when the restart began (want 300..$N)"

broker_restart --advertise "127.0.0.1:$PROXY_PORT" || fail "restart"
E2=$($LE epoch "$BROKER" le) || fail "Metadata v7 after the restart"
$LE produce "$BROKER" le $N $N || fail "producing at the second epoch"
$LE after "$BROKER" le "$E1" "$E2" $N $((2 * N)) || fail "raw checks after the restart"

wait $CONSUMER || { cat "$T/consumer.out" >&2; fail "the consumer failed"; }
cat "$T/consumer.out"
$LE check "$T/got" $((2 * N)) || fail "what librdkafka consumed"
echo "ok restarted with the consumer at record $AT of $N (epoch $E1 -> $E2)"

# What librdkafka sent (through the proxy: the bootstrap pair goes direct).
echo "librdkafka requests (count client api version):"
awk '{print $2" "$3}' "$T/trace" | sort -n | uniq -c | sed 's/^/  /'
grep -q ' 1 11$' "$T/trace" || fail "librdkafka did not fetch with Fetch v11"

broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC"
echo "test_leader_epoch: all passed"
