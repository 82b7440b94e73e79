#!/usr/bin/python3
"""ci/broker/metrics_e2e.py BROKER METRICS_URL [--poison] — the broker's
metrics against a known workload: N acks=all Produce v3 requests on one
connection move the Produce request counter and the latency histogram's
count by exactly N, the topic's bytes-in by exactly the record bytes sent,
and the group-commit batch sizes by exactly N offsets; a committed offset K
on a partition whose high watermark is H shows as consumer lag H - K for
that group and partition, and a second commit moves it.  --poison: on a
volume failing fsyncs, one KAFKA_STORAGE_ERROR answer and the poisoned
partition are counted."""
import os
import re
import sys
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from kproto import Conn, Dec, Enc, record_batch  # noqa: E402

from confluent_kafka import Consumer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

broker, url = sys.argv[1], sys.argv[2]
POISON = len(sys.argv) > 3 and sys.argv[3] == "--poison"
host, port = broker.rsplit(":", 1)
N = 40
TOPIC = "obs-metrics"


def scrape():
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        assert r.status == 200, r.status
        ctype = r.headers["Content-Type"]
        assert ctype.startswith("text/plain; version=0.0.4"), ctype
        return r.read().decode()


def value(text, series):
    m = re.search("^" + re.escape(series) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def total(text, prefix):
    """Sum of every series of `prefix` whose labels include api="Produce"."""
    s = 0.0
    for m in re.finditer("^" + re.escape(prefix) + r"\{([^}]*)\} (\S+)$", text, re.M):
        if 'api="Produce"' in m.group(1):
            s += float(m.group(2))
    return s


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


if POISON:
    # The volume fails every fsync of topic "poison": an acks=all produce is
    # answered REQUEST_TIMED_OUT (written, not known durable) and the
    # partition is poisoned; the next one is answered KAFKA_STORAGE_ERROR.
    admin = AdminClient({"bootstrap.servers": broker})
    for f in admin.create_topics([NewTopic("poison", 1, 1)]).values():
        f.result(30)
    before = scrape()
    c = Conn(host, int(port))
    body = Enc().str(None).i16(-1).i32(30000).array(1).str("poison").array(1).i32(0) \
        .bytes(record_batch([b"x"])).done()
    for want in (7, 56):
        c.send(0, 3, body)
        d = Dec(c.recv()[1])
        d.array(), d.str(), d.array(), d.i32()
        err = d.i16()
        if err != want:
            fail("produce on a failing volume answered %d, not %d" % (err, want))
    after = scrape()
    for name in ("REQUEST_TIMED_OUT", "KAFKA_STORAGE_ERROR"):
        series = 'kaas_partition_errors_total{api="Produce",error="%s"}' % name
        if value(after, series) - value(before, series) != 1:
            fail("%s moved by %s" % (series, value(after, series) - value(before, series)))
    if value(after, "kaas_partitions_poisoned_total") - value(before, "kaas_partitions_poisoned_total") < 1:
        fail("kaas_partitions_poisoned_total did not move")
    print("ok a failed fsync: one REQUEST_TIMED_OUT and one KAFKA_STORAGE_ERROR answer counted, "
          "the poisoned partition counted")
    sys.exit(0)

admin = AdminClient({"bootstrap.servers": broker})
for f in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
    f.result(30)

before = scrape()
c = Conn(host, int(port))
sent = 0
for i in range(N):
    batch = record_batch([b"value-%d" % i])
    sent += len(batch)
    body = Enc().str(None).i16(-1).i32(10000).array(1).str(TOPIC).array(1).i32(0).bytes(batch).done()
    c.send(0, 3, body)
    _, resp = c.recv()
    d = Dec(resp)
    assert d.array() == 1 and d.str() == TOPIC and d.array() == 1
    d.i32()
    err = d.i16()
    if err:
        fail("produce %d answered error %d" % (i, err))
after = scrape()

dreq = total(after, "kaas_requests_total") - total(before, "kaas_requests_total")
dcnt = total(after, "kaas_request_duration_seconds_count") - total(before, "kaas_request_duration_seconds_count")
din = value(after, 'kaas_topic_bytes_in_total{topic="%s"}' % TOPIC) - \
    value(before, 'kaas_topic_bytes_in_total{topic="%s"}' % TOPIC)
if dreq != N:
    fail("Produce requests counter moved by %s for %d requests" % (dreq, N))
if dcnt != N:
    fail("Produce latency histogram count moved by %s for %d requests" % (dcnt, N))
if value(after, 'kaas_requests_total{api="Produce",version="3"}') < N:
    fail("the v3 series does not hold the %d requests" % N)
dfs = value(after, "kaas_group_commit_fsync_seconds_count") - value(before, "kaas_group_commit_fsync_seconds_count")
dbatch = value(after, "kaas_group_commit_offsets_sum") - value(before, "kaas_group_commit_offsets_sum")
if dfs < 1 or dbatch != N:
    fail("group commits: %s fsyncs, %s offsets made durable for %d acks=all records" % (dfs, dbatch, N))
if din != sent:
    fail("bytes in moved by %s for %d record bytes sent" % (din, sent))
print("ok %d Produce requests: counter +%d, histogram count +%d, bytes in +%d; %d group commits covered %d offsets"
      % (N, dreq, dcnt, din, dfs, dbatch))

# Consumer lag: commit K, expect H - K; then commit H, expect 0.
cons = Consumer({"bootstrap.servers": broker, "group.id": "obs-lag", "enable.auto.commit": False})
for k, want in ((15, N - 15), (N, 0)):
    cons.commit(offsets=[TopicPartition(TOPIC, 0, k)], asynchronous=False)
    series = 'kaas_consumer_group_lag{group="obs-lag",topic="%s",partition="0"}' % TOPIC
    text = scrape()
    if not re.search("^" + re.escape(series) + " ", text, re.M):
        fail("no lag series for the committed group: " + series)
    got = value(text, series)
    if got != want:
        fail("lag %s after committing %d of %d, want %d" % (got, k, N, want))
    print("ok lag %d after committing offset %d (high watermark %d)" % (got, k, N))
cons.close()
if value(scrape(), 'kaas_partitions{state="led"}') < 1:
    fail("partitions led is not counted")
print("ok partitions led counted")
