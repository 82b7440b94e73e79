#!/bin/bash
# ci/coord/test_groups_sarama.sh — consumer groups with sarama 1.22 (Go,
# Debian's golang-github-shopify-sarama-dev, built in GOPATH mode without
# network), the ConsumerGroup API with config.Version 2.1: two members split
# a 4-partition topic and consume every record once; their commits are on
# the broker (OffsetFetch = high watermarks); after a broker restart a new
# member of the group resumes at the committed offsets and reads only the
# records produced since; the committed offsets end at the high watermarks.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh groups-sarama

command -v go >/dev/null || fail "go is not installed (make deps-test)"
[ -d /usr/share/gocode/src/github.com/Shopify/sarama ] || fail "golang-github-shopify-sarama-dev is not installed"
GO111MODULE=off GOPATH="$T/gopath:/usr/share/gocode" GOCACHE="$T/gocache" GOFLAGS= \
	go build -o "$T/groups_sarama" ci/coord/groups_sarama.go >"$T/build.log" 2>&1 ||
	{ cat "$T/build.log"; fail "go build ci/coord/groups_sarama.go"; }
G() { timeout 300 "$T/groups_sarama" "$@"; }

N=400
M=60
broker_start "$T/data" --override group.initial.rebalance.delay.ms=1000 \
	--override auto.create.topics.enable=false
G setup "$BROKER" sg || fail "create the topic"
G produce "$BROKER" sg 0 $N "$T/acks" || fail "produce records 0..$((N - 1))"
G members "$BROKER" sg sgroup "$T/acks" 0 $N 2 || fail "two members consume the topic"
G offsets "$BROKER" sg sgroup "$T/acks" $N || fail "committed offsets after the two members"
broker_restart || fail "restart"
G produce "$BROKER" sg $N $((N + M)) "$T/acks" || fail "produce records $N..$((N + M - 1))"
G members "$BROKER" sg sgroup "$T/acks" $N $((N + M)) 1 || fail "a new member resumes after the restart"
G offsets "$BROKER" sg sgroup "$T/acks" $((N + M)) || fail "committed offsets at the end"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
echo "PASS ci/coord/test_groups_sarama.sh"
