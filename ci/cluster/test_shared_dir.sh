#!/bin/bash
# ci/cluster/test_shared_dir.sh — two brokers (ids 1 and 2) started on one data
# directory form a cluster instead of co-owning it.  This is the scenario
# that once lost data: both took every partition over, the first went on
# acknowledging acks=all produces into its old-epoch segments, and consumers
# through the second never saw 100 acknowledged records.  Now:
#   - each partition has exactly one leader, and both brokers say the same;
#   - the broker that does not lead a partition answers NOT_LEADER_OR_FOLLOWER
#     to a produce for it, and writes nothing;
#   - 100 records acknowledged (acks=all) by clients bootstrapped on broker 1
#     are all read, exactly once and in order, by consumers bootstrapped on
#     broker 2;
#   - a second process started with a broker.id already in use refuses to
#     start, saying why, and the cluster is untouched;
#   - a third broker joins; a fresh broker on the volume of an earlier
#     single-broker run continues the epochs above the ones on disk.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh cluster-shared
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }

cluster_start "$T/data" 2 --override broker.session.timeout.ms=5000 || fail_cl "starting two brokers"
echo "ok two brokers on one directory: $CL_BOOT"

$PY - "${CL_PORT[1]}" "${CL_PORT[2]}" <<'PY' || fail_cl "the two-brokers scenario"
import sys, time
sys.path.insert(0, "ci/lib")
from kcluster import metadata, produce
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
p1, p2 = int(sys.argv[1]), int(sys.argv[2])
a = AdminClient({"bootstrap.servers": "127.0.0.1:%d" % p2})
for f in a.create_topics([NewTopic("orders", 4, 1)]).values():
    f.result(30)
# Both brokers converge on one leader per partition.
deadline = time.time() + 30
while True:
    m1, m2 = metadata(p1, ["orders"]), metadata(p2, ["orders"])
    l1 = [x[1] for x in m1["topics"]["orders"][1]]
    l2 = [x[1] for x in m2["topics"]["orders"][1]]
    if l1 == l2 and all(x in (1, 2) for x in l1) and set(l1) == {1, 2}:
        errs = [x[0] for x in m1["topics"]["orders"][1]]
        if errs == [0] * 4:
            break
    assert time.time() < deadline, (m1, m2)
    time.sleep(0.2)
assert set(m1["brokers"]) == {1, 2} and set(m2["brokers"]) == {1, 2}, (m1["brokers"], m2["brokers"])
assert m1["controller"] == m2["controller"] and m1["controller"] in (1, 2), (m1, m2)
print("ok every partition has one leader and both brokers say the same:", l1)
port = {1: p1, 2: p2}
# Wait until every leader actually serves (take-over done), then ask the other.
for part, leader in enumerate(l1):
    other = 2 if leader == 1 else 1
    deadline = time.time() + 30
    while True:
        err, off = produce(port[leader], "orders", part, [b"probe-%d" % part])
        if err == 0:
            break
        assert err in (6, 5), err  # NOT_LEADER / LEADER_NOT_AVAILABLE while taking over
        assert time.time() < deadline, err
        time.sleep(0.2)
    err, _ = produce(port[other], "orders", part, [b"never"])
    assert err == 6, (part, leader, err)  # NOT_LEADER_OR_FOLLOWER
print("ok the broker that does not lead a partition answers NOT_LEADER_OR_FOLLOWER")
acked = {}
p = Producer({"bootstrap.servers": "127.0.0.1:%d" % p1, "acks": "all", "enable.idempotence": True})
def done(err, msg):
    assert err is None, err
    acked.setdefault(msg.partition(), []).append(msg.value())
for i in range(100):
    p.produce("orders", b"v%03d" % i, partition=i % 4, on_delivery=done)
p.flush(60)
assert sum(len(v) for v in acked.values()) == 100, acked
c = Consumer({"bootstrap.servers": "127.0.0.1:%d" % p2, "group.id": "g2", "enable.auto.commit": False})
c.assign([TopicPartition("orders", i, 0) for i in range(4)])
got = {}
deadline = time.time() + 60
while sum(len(v) for v in got.values()) < 104 and time.time() < deadline:
    m = c.poll(0.5)
    if m is not None and not m.error():
        got.setdefault(m.partition(), []).append(m.value())
c.close()
for part in range(4):
    want = [b"probe-%d" % part] + acked.get(part, [])
    assert got.get(part) == want, (part, got.get(part), want)
print("ok 100 records acknowledged through broker 1 are all read through broker 2, once, in order")
PY

# A second process with an id in use: refused, with the reason.
set +e
"$BIN/kaas" --data "$T/data" --listen 127.0.0.1:0 --broker-id 1 --trust-unqualified \
	--override broker.session.timeout.ms=5000 >"$T/dup.log" 2>&1
rc=$?
set -e
[ "$rc" != 0 ] || fail_cl "a second broker 1 started"
grep -q "broker.id 1 is in use by a running broker" "$T/dup.log" || { cat "$T/dup.log" >&2; fail_cl "no reason given"; }
cluster_alive 1 && cluster_alive 2 || fail_cl "the cluster did not survive the duplicate"
echo "ok a second process with broker.id 1 refuses to start: $(grep -o 'broker.id 1 is in use[^:]*' "$T/dup.log")"

# The stall bound follows the session unless set, and is checked against it.
grep -q "broker 1 joined as incarnation [0-9]* (session 5000 ms, heartbeat 250 ms, stall bound 4475 ms" "${CL_LOG[1]}" ||
	fail_cl "broker 1 with a 5 s session does not report the stall bound 5000 - 25 - 2 * 250 ms"
for bad in "kaas.cluster.stall.timeout.ms=5000:must be below broker.session.timeout.ms (5000)" \
	"kaas.cluster.stall.timeout.ms=5:must be 0 (from the session) or at least 10"; do
	set +e
	"$BIN/kaas" --data "$T/data" --listen 127.0.0.1:0 --broker-id 7 --trust-unqualified \
		--override broker.session.timeout.ms=5000 --override "${bad%%:*}" >"$T/bad.log" 2>&1
	rc=$?
	set -e
	[ "$rc" != 0 ] || fail_cl "a broker with ${bad%%:*} started"
	grep -qF "${bad#*:}" "$T/bad.log" || { cat "$T/bad.log" >&2; fail_cl "${bad%%:*}: no reason given"; }
done
[ ! -e "$T/data/__cluster/brokers/7.json" ] || fail_cl "a refused broker 7 wrote a heartbeat"
echo "ok the stall bound follows the session unless set (4475 ms for 5 s); 5000 and 5 are refused with the reason"

# A third broker joins and gets a share.
CL_N=3
CL_LOG[3]=$T/b3.log
cluster_launch 3 || fail_cl "broker 3"
# Ready means it leads its share of an assignment that counts it: the
# controller counts a joiner later than the joiner's own watch ends, and
# the assignment before that gives it nothing.
r=$(grep -o "ready: broker 3 leads [0-9]* partition(s)" "${CL_LOG[3]}" | tail -1)
[ -n "$r" ] && [ "$(echo "$r" | awk '{print $5}')" -ge 1 ] ||
	fail_cl "broker 3 said ready leading nothing of 4 partitions over 3 brokers: ${r:-no ready line}"
echo "ok broker 3 said ready once it led its share: $r"
$PY - "${CL_PORT[1]}" <<'PY' || fail_cl "the third broker's share"
import sys, time
sys.path.insert(0, "ci/lib")
from kcluster import metadata
deadline = time.time() + 30
while True:
    m = metadata(int(sys.argv[1]), ["orders"])
    leaders = [x[1] for x in m["topics"]["orders"][1]]
    if 3 in leaders and set(m["brokers"]) == {1, 2, 3}:
        break
    assert time.time() < deadline, m
    time.sleep(0.2)
print("ok a third broker joins and leads a share:", leaders)
PY

# Migration: a volume an earlier single broker led (its assignment.json
# format, epochs on disk) is taken over with epochs above the disk's.
for i in 1 2 3; do cluster_term "$i"; done
epochs_before=$($PY -c '
import os, re, sys
best = []
for part in range(4):
    b = 0
    for f in os.listdir(os.path.join(sys.argv[1], str(part))):
        m = re.match(r"^(\d{10})-\d{20}\.log$", f)
        if m: b = max(b, int(m.group(1)))
    best.append(str(b))
print(",".join(best))' "$T/data/orders")
cat >"$T/data/__cluster/assignment.json" <<JSON
{"version": 7, "controller_epoch": 0, "partitions": {"orders-0": {"leader": 1, "epoch": 1}}}
JSON
rm -rf "$T/data/__cluster/assignment"
CL_N=1
cluster_launch 1 || fail_cl "restart on the migrated volume"
$PY - "${CL_PORT[1]}" "$epochs_before" <<'PY' || fail_cl "migration"
import sys, time
sys.path.insert(0, "ci/lib")
from kcluster import metadata, produce
port, before = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(",")]
m = metadata(port, ["orders"])
eps = [x[2] for x in m["topics"]["orders"][1]]
assert all(e > b for e, b in zip(eps, before)) and min(before) >= 1, (eps, before)
for part in range(4):
    err, _ = produce(port, "orders", part, [b"after"])
    assert err == 0, (part, err)
print("ok after a single-broker assignment.json the epochs continue above the disk's (%s): %s" % (before, eps))
PY
echo "PASS test_shared_dir"
