#!/bin/bash
# ci/interop/test_confluent.sh — confluent-kafka-python (librdkafka 2.0)
# against a real kaas broker:
#   1. acks=all producer, half before and half after a broker restart
#      (lz4, then zstd); Consumer.assign() reads everything back and every
#      record is compared with what was acknowledged; offsets_for_times.
#   2. the same with enable.idempotence=true (gzip, then snappy).
#   3. SIGKILL of the broker while an idempotent producer and a plain acks=all
#      producer (max.in.flight=1) are sending: after the restart every
#      acknowledged record is there, in order; no duplicates from the
#      idempotent one.
#   4. AdminClient beyond ci/topics: validate_only, several topics per
#      request, describe of several resources, what max.message.bytes and
#      segment.bytes do, partitions added to a live topic, configs and
#      multi-segment reads across a restart.
NAME=confluent
source "$(dirname "$0")/lib.sh"
C="$PY ci/interop/confluent_e2e.py"

broker_start "$T/data" --override num.partitions=3
T0=$(($(now_ms) - 3600000))
N=6000
H=$((N / 2))

# 1 + 2: a restart in the middle.
$C produce "$BROKER" cf-all cfall "$T0" 0 $H "$T/all.p" --codec=lz4 || fail "acks=all, first half"
$C produce "$BROKER" cf-idem cfidem "$T0" 0 $H "$T/idem.p" --idempotent --codec=gzip || fail "idempotent, first half"
broker_restart || fail "restart"
$C produce "$BROKER" cf-all cfall "$T0" $H $N "$T/all.p" --codec=zstd || fail "acks=all, second half"
$C produce "$BROKER" cf-idem cfidem "$T0" $H $N "$T/idem.p" --idempotent --codec=snappy || fail "idempotent, second half"
for t in all idem; do
	$C consume "$BROKER" "cf-$t" "$T/$t.c" || fail "consume cf-$t"
	$C times "$BROKER" "cf-$t" "$T0" "$T/$t.t" 0 1 1000 $((H - 1)) $H $((H + 1)) 4321 $((N - 1)) $N ||
		fail "offsets_for_times cf-$t"
	spec check "cf$t" "$T0" "$T/$t.p" "$T/$t.c" "$T/$t.t" --expect=$N || fail "cf-$t: consumed != produced"
done

# 3: SIGKILL while two producers are sending.
K=20000
$C produce "$BROKER" cf-kill-idem cfki "$T0" 0 $K "$T/ki.p" --idempotent --slow --codec=lz4 > "$T/ki.out" 2>&1 &
pi=$!
$C produce "$BROKER" cf-kill-all cfka "$T0" 0 $K "$T/ka.p" --slow --inflight=1 > "$T/ka.out" 2>&1 &
pa=$!
# Crash once both have a few thousand acknowledged, or as soon as one is half
# way: on a loaded machine one producer can run far ahead of the other, and
# the crash must still land while both are sending.
for _ in $(seq 1 600); do
	ki=$( (wc -l < "$T/ki.p") 2>/dev/null || echo 0)
	ka=$( (wc -l < "$T/ka.p") 2>/dev/null || echo 0)
	{ [ "$ki" -ge 3000 ] && [ "$ka" -ge 3000 ]; } && break
	{ [ "$ki" -ge $((K / 2)) ] || [ "$ka" -ge $((K / 2)) ]; } && break
	kill -0 $pi 2>/dev/null && kill -0 $pa 2>/dev/null || break
	sleep 0.1
done
acked_ki=$(wc -l < "$T/ki.p")
acked_ka=$(wc -l < "$T/ka.p")
[ "$acked_ki" -lt $K ] && [ "$acked_ka" -lt $K ] || fail "the producers finished before the crash"
broker_crash_restart || fail "start after SIGKILL"
echo "ok broker killed (SIGKILL) after $acked_ki + $acked_ka acknowledged records, restarted"
wait $pi || { cat "$T/ki.out"; fail "idempotent producer across the crash"; }
wait $pa || { cat "$T/ka.out"; fail "acks=all producer across the crash"; }
$C consume "$BROKER" cf-kill-idem "$T/ki.c" || fail "consume cf-kill-idem"
$C consume "$BROKER" cf-kill-all "$T/ka.c" || fail "consume cf-kill-all"
spec check cfki "$T0" "$T/ki.p" "$T/ki.c" --expect=$K || fail "idempotent producer across SIGKILL"
spec check cfka "$T0" "$T/ka.p" "$T/ka.c" --expect=$K --at-least-once || fail "acks=all producer across SIGKILL"

# 4: admin, then a restart, then what it changed.
$C admin1 "$BROKER" "$T/data" || fail "admin"
broker_restart || fail "restart"
$C admin2 "$BROKER" "$T/data" || fail "admin after restart"
interop_done
