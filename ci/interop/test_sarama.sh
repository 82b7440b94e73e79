#!/bin/bash
# ci/interop/test_sarama.sh — sarama (Go, Debian's package, built in GOPATH
# mode without network) against a real kaas broker with config.Version 2.1:
# ClusterAdmin creates the topic; a SyncProducer sends half of the records
# before and half after a broker restart (zstd, then snappy); a
# PartitionConsumer per partition reads everything back and every record is
# compared with what was acknowledged; offsets by time; DeleteRecords (which
# sarama sends to the controller).
NAME=sarama
source "$(dirname "$0")/lib.sh"
command -v go >/dev/null || fail "go is not installed (make deps-test)"
[ -d /usr/share/gocode/src/github.com/Shopify/sarama ] || fail "golang-github-shopify-sarama-dev is not installed"
GO111MODULE=off GOPATH="$T/gopath:/usr/share/gocode" GOCACHE="$T/gocache" GOFLAGS= \
	go build -o "$T/sarama_e2e" ci/interop/sarama_e2e.go >"$T/build.log" 2>&1 ||
	{ cat "$T/build.log"; fail "go build sarama_e2e"; }
S="$T/sarama_e2e"

broker_start "$T/data" --override auto.create.topics.enable=false
T0=$(($(now_ms) - 3600000))
N=6000
H=$((N / 2))

$S admin "$BROKER" sr || fail "admin"
spec records sr "$T0" 0 $H >"$T/r1"
spec records sr "$T0" $H $N >"$T/r2"
$S produce "$BROKER" sr "$T/r1" "$T/p" zstd || fail "produce, first half"
broker_restart || fail "restart"
$S produce "$BROKER" sr "$T/r2" "$T/p" snappy || fail "produce, second half"
$S consume "$BROKER" sr "$T/c" || fail "consume"
$S times "$BROKER" sr "$T/t" $(spec times "$T0" 0 2 $((H - 1)) $H 4567 $((N - 1)) $N) || fail "offsets by time"
spec check sr "$T0" "$T/p" "$T/c" "$T/t" --expect=$N || fail "consumed != produced"
$S records "$BROKER" sr || fail "DeleteRecords"
interop_done
