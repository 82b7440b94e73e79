#!/bin/bash
# ci/interop/test_cut_batches.sh — Fetch answers that end inside a batch, as
# Kafka sends them (docs/broker.md): 20000 records in batches of about
# 17 KiB, read back by every client with a 25000-byte partition fetch limit,
# so that every answer holds one whole batch and the start of the next.
# First a raw Fetch v4 shows the cut; then kcat, confluent-kafka-python,
# kafka-python, kafkajs and sarama each consume every offset exactly once,
# in order (a client that took the cut batch for a whole one, or stalled on
# it, fails here).
NAME=cut_batches
source "$(dirname "$0")/lib.sh"
for c in kcat node go; do command -v $c >/dev/null || fail "$c is not installed (make deps-test)"; done
[ -d /usr/share/gocode/src/github.com/Shopify/sarama ] || fail "golang-github-shopify-sarama-dev is not installed"

broker_start "$T/data" --override num.partitions=1
N=20000
LIMIT=25000
for i in $(seq 0 $((N - 1))); do printf 'v%06d-%0160d\n' "$i" 0; done >"$T/in"
kcat -P -b "$BROKER" -t cut -X batch.num.messages=100 -X linger.ms=200 -X compression.codec=none \
	-X acks=all <"$T/in" || fail "kcat produce"

# The raw answer: LIMIT bytes, whole batches and then a cut one.
$PY - "$BROKER" $LIMIT <<'PY' || fail "raw fetch"
import struct, sys
sys.path.insert(0, "ci/lib")
from kproto import Conn, Dec, Enc
host, port = sys.argv[1].rsplit(":", 1)
limit = int(sys.argv[2])
c = Conn(host, int(port))
body = (Enc().i32(-1).i32(0).i32(1).i32(limit).i8(0).array(1).str("cut").array(1)
        .i32(0).i64(0).i32(limit).done())
corr = c.send(1, 4, body)
rc, data = c.recv()
assert rc == corr
d = Dec(data)
d.i32(); d.array(); d.str(); d.array(); d.i32()
err, hw = d.i16(), d.i64()
d.i64(); d.array()
recs = d.bytes() or b""
pos = whole = 0
while pos + 12 <= len(recs):
    base, blen = struct.unpack(">qi", recs[pos:pos + 12])
    if pos + 12 + blen > len(recs):
        break
    whole += 1
    pos += 12 + blen
if err or len(recs) != limit or whole < 1 or pos == len(recs):
    print("FAIL: fetch of %d bytes: error %d, %d bytes, %d whole batches, %d cut" %
          (limit, err, len(recs), whole, len(recs) - pos), file=sys.stderr)
    sys.exit(1)
print("ok raw Fetch v4 of %d bytes: %d whole batch(es) and %d bytes of the next" % (limit, whole, len(recs) - pos))
PY

# Every client's offsets: 0..N-1, each once, in order.
check() { # client file
	$PY - "$2" $N "$1" $LIMIT <<'PY' || fail "$1 consumed wrongly"
import sys
path, n, name, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
offs = [int(l) for l in open(path) if l.strip()]
if offs != list(range(n)):
    gap = next((i for i, o in enumerate(offs) if o != i), len(offs))
    print("FAIL: %s: %d records, wrong from position %d" % (name, len(offs), gap), file=sys.stderr)
    sys.exit(1)
print("ok %s: offsets 0..%d once each, in order, %s-byte fetches" % (name, n - 1, limit))
PY
}

kcat -C -b "$BROKER" -t cut -o beginning -e -q -X max.partition.fetch.bytes=$LIMIT -f '%o\n' >"$T/kcat" ||
	fail "kcat consume"
check kcat "$T/kcat"

$PY - "$BROKER" $N $LIMIT >"$T/confluent" <<'PY' || fail "confluent-kafka consume"
import sys
from confluent_kafka import Consumer, TopicPartition
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "cut", "enable.auto.commit": False,
              "max.partition.fetch.bytes": int(sys.argv[3])})
c.assign([TopicPartition("cut", 0, 0)])
n = 0
while n < int(sys.argv[2]):
    m = c.poll(30)
    if m is None:
        break
    if not m.error():
        print(m.offset())
        n += 1
c.close()
PY
check confluent-kafka-python "$T/confluent"

$PY - "$BROKER" $N $LIMIT >"$T/kafka-python" <<'PY' || fail "kafka-python consume"
import sys
from kafka import KafkaConsumer, TopicPartition
c = KafkaConsumer(bootstrap_servers=sys.argv[1], enable_auto_commit=False, consumer_timeout_ms=30000,
                  max_partition_fetch_bytes=int(sys.argv[3]), fetch_max_bytes=int(sys.argv[3]))
tp = TopicPartition("cut", 0)
c.assign([tp])
c.seek(tp, 0)
n = 0
for m in c:
    print(m.offset)
    n += 1
    if n >= int(sys.argv[2]):
        break
c.close()
PY
check kafka-python "$T/kafka-python"

npm install --silent --no-audit --no-fund --prefix "$T/npm" kafkajs@2 >"$T/npm.log" 2>&1 ||
	{ cat "$T/npm.log"; fail "npm install kafkajs@2"; }
NODE_PATH=$T/npm/node_modules KAFKAJS_NO_PARTITIONER_WARNING=1 timeout 120 node - "$BROKER" $N $LIMIT \
	>"$T/kafkajs" <<'JS' || fail "kafkajs consume"
const { Kafka, logLevel } = require('kafkajs')
const [broker, n, limit] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])]
const c = new Kafka({ brokers: [broker], logLevel: logLevel.NOTHING })
  .consumer({ groupId: 'cut-js', maxBytesPerPartition: limit, maxBytes: limit, maxWaitTimeInMs: 100 })
let got = 0
;(async () => {
  await c.connect()
  await c.subscribe({ topic: 'cut', fromBeginning: true })
  await new Promise(resolve => c.run({
    eachMessage: async ({ message }) => { console.log(message.offset); if (++got >= n) resolve() }
  }))
  await c.disconnect()
})().catch(e => { console.error(e); process.exit(1) })
JS
check kafkajs "$T/kafkajs"

mkdir -p "$T/go"
cat >"$T/go/cut.go" <<'GO'
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/Shopify/sarama"
)

func main() {
	n, _ := strconv.Atoi(os.Args[2])
	limit, _ := strconv.Atoi(os.Args[3])
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V2_1_0_0
	cfg.Consumer.Fetch.Default = int32(limit)
	cfg.Consumer.Fetch.Max = int32(limit)
	c, err := sarama.NewConsumer([]string{os.Args[1]}, cfg)
	if err != nil {
		panic(err)
	}
	pc, err := c.ConsumePartition("cut", 0, 0)
	if err != nil {
		panic(err)
	}
	for i := 0; i < n; i++ {
		fmt.Println((<-pc.Messages()).Offset)
	}
	pc.Close()
	c.Close()
}
GO
GO111MODULE=off GOPATH="$T/gopath:/usr/share/gocode" GOCACHE="$T/gocache" GOFLAGS= \
	go build -o "$T/cut" "$T/go/cut.go" >"$T/build.log" 2>&1 || { cat "$T/build.log"; fail "go build"; }
timeout 120 "$T/cut" "$BROKER" $N $LIMIT >"$T/sarama" || fail "sarama consume"
check sarama "$T/sarama"
interop_done
