#!/bin/bash
# ci/interop/test_kafka_python.sh — kafka-python (Debian python3-kafka, pure
# Python) against a real kaas broker: the producer probes the broker version
# itself (no api_version), produces half of the records before and half after
# a broker restart (acks=all, gzip); an assign() consumer reads everything
# back and every record is compared with what was acknowledged;
# offsets_for_times; a consumer-group member reads and commits everything.
NAME=kafka_python
source "$(dirname "$0")/lib.sh"
K="$PY ci/interop/kafka_python_e2e.py"

broker_start "$T/data" --override num.partitions=3 --override group.initial.rebalance.delay.ms=100
T0=$(($(now_ms) - 3600000))
N=4000
H=$((N / 2))

$K produce "$BROKER" kp kp "$T0" 0 $H "$T/p" || fail "produce, first half"
broker_restart || fail "restart"
$K produce "$BROKER" kp kp "$T0" $H $N "$T/p" || fail "produce, second half"
$K consume "$BROKER" kp "$T/c" || fail "consume"
$K times "$BROKER" kp "$T0" "$T/t" 0 7 $((H - 1)) $H 3333 $((N - 1)) $N || fail "offsets_for_times"
spec check kp "$T0" "$T/p" "$T/c" "$T/t" --expect=$N || fail "consumed != produced"
$K group "$BROKER" kp kp-group $N || fail "consumer group"
interop_done
