#!/bin/bash
# ci/broker/test_kafka_python.sh — kafka-python (pure Python, Debian's
# python3-kafka) against a real broker: its version probing (ApiVersions v0 +
# Metadata v0 pipelined, no api_version set) must succeed; one producer keeps
# producing across a broker restart; a consumer reads everything back, in
# order, record by record.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh kpy
PYPID=
e2e_on_exit '[ -z "$PYPID" ] || kill "$PYPID" 2>/dev/null'
broker_start "$T/data"
mkfifo "$T/step" "$T/done"

$PY - "$BROKER" "$T/step" "$T/done" <<'PY' &
import sys
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
bs, step, done = sys.argv[1], sys.argv[2], sys.argv[3]
p = KafkaProducer(bootstrap_servers=bs, acks="all", retries=20, retry_backoff_ms=250,
                  reconnect_backoff_ms=100, request_timeout_ms=30000)
v = p.config["api_version"]
assert v >= (0, 11), "kafka-python probed %r: too old for the v2 record format" % (v,)
print("ok kafka-python probed the broker as Kafka %s (no api_version given)" % ".".join(map(str, v)), flush=True)
sent = []
def burst(a, b):
    futs = [p.send("kpy", key=b"k%d" % i, value=b"value-%d" % i, headers=[("n", b"%d" % i)])
            for i in range(a, b)]
    p.flush(60)
    for f in futs:
        f.get(timeout=60)
    sent.extend(range(a, b))
burst(0, 3000)
open(step, "w").write("restart\n")   # the shell restarts the broker
open(done).read()
burst(3000, 6000)
print("ok produced 6000 records across a broker restart", flush=True)
c = KafkaConsumer(bootstrap_servers=bs, group_id=None, enable_auto_commit=False,
                  consumer_timeout_ms=10000, fetch_max_wait_ms=200)
tp = TopicPartition("kpy", 0)
c.assign([tp])
c.seek_to_beginning(tp)
got = []
for m in c:
    got.append((m.offset, m.key, m.value, m.headers))
    if len(got) == len(sent):
        break
assert len(got) == len(sent), (len(got), len(sent))
for i, (off, k, val, h) in enumerate(got):
    assert off == i and k == b"k%d" % i and val == b"value-%d" % i and h == [("n", b"%d" % i)], got[i]
end = c.end_offsets([tp])[tp]
assert end == len(sent), end
print("ok kafka-python consumed %d records back in order (offsets, keys, values, headers)" % len(got), flush=True)
PY
PYPID=$!
timeout 300 bash -c 'read -r _ < "$1"' _ "$T/step" || fail "the producer did not get to the restart"
broker_restart
echo "ok broker restarted under a connected kafka-python producer"
echo go > "$T/done"
wait $PYPID
PYPID=
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC"
echo "test_kafka_python: all passed"
