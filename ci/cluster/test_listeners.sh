#!/bin/bash
# ci/cluster/test_listeners.sh — a client is told about the other brokers by
# their endpoints of the listener it connected to (Kafka's rule), never by
# another listener's: brokers 1 and 2 listen on PLAINTEXT and OUTSIDE,
# broker 3 on PLAINTEXT only.
#   - through a PLAINTEXT port, Metadata lists all three by PLAINTEXT ports;
#   - through an OUTSIDE port, it lists 1 and 2 by their OUTSIDE ports,
#     leaves 3 out, and answers LISTENER_NOT_FOUND for what 3 leads;
#   - a real client bootstrapped on an OUTSIDE port produces to and reads
#     from partitions led by 1 and 2 through OUTSIDE ports only.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh cluster-listeners
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }

two=(--listen "PLAINTEXT://127.0.0.1:0,OUTSIDE://127.0.0.1:0"
	--override listener.security.protocol.map=OUTSIDE:PLAINTEXT
	--override broker.session.timeout.ms=5000 --override num.partitions=6)
cluster_start "$T/data" 2 "${two[@]}" || fail_cl "starting brokers 1 and 2"
# Broker 3: PLAINTEXT only.
CL_N=3
CL_LOG[3]=$T/b3.log
CL_ARGS=(--override broker.session.timeout.ms=5000 --override num.partitions=6)
cluster_launch 3 || fail_cl "starting broker 3"
_cl_boot
outside() { grep -o 'listener OUTSIDE (PLAINTEXT) on 127.0.0.1:[0-9]*' "${CL_LOG[$1]}" | tail -1 | grep -o '[0-9]*$'; }
O1=$(outside 1)
O2=$(outside 2)
[ -n "$O1" ] && [ -n "$O2" ] || fail_cl "no OUTSIDE listener in the logs"
echo "ok brokers: PLAINTEXT ${CL_PORT[1]} ${CL_PORT[2]} ${CL_PORT[3]}, OUTSIDE $O1 $O2"

$PY - "${CL_PORT[1]}" "${CL_PORT[2]}" "${CL_PORT[3]}" "$O1" "$O2" <<'PY' || fail_cl "listeners"
import sys, time
sys.path.insert(0, "ci/lib")
from kcluster import metadata
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

p1, p2, p3, o1, o2 = map(int, sys.argv[1:])
def check(c, msg):
    if not c:
        print("FAIL: " + msg)
        sys.exit(1)

a = AdminClient({"bootstrap.servers": "127.0.0.1:%d" % p1})
for f in a.create_topics([NewTopic("lt", 6, 1)]).values():
    f.result()
# Wait until every partition is led and broker 3 leads some.
end = time.time() + 60
while True:
    md = metadata(p1, ["lt"])
    parts = md["topics"]["lt"][1]
    leaders = [l for (_, l, _) in parts]
    if all(e == 0 for (e, _, _) in parts) and set(leaders) == {1, 2, 3}:
        break
    check(time.time() < end, "partitions not spread over 1, 2, 3: %s" % parts)
    time.sleep(0.2)
print("ok lt led by %s" % leaders)

plain = metadata(p2, ["lt"])["brokers"]
check(plain == {1: ("127.0.0.1", p1), 2: ("127.0.0.1", p2), 3: ("127.0.0.1", p3)},
      "PLAINTEXT view: %s" % plain)
print("ok through PLAINTEXT: %s" % plain)
for port in (o1, o2):
    md = metadata(port, ["lt"])
    check(md["brokers"] == {1: ("127.0.0.1", o1), 2: ("127.0.0.1", o2)},
          "OUTSIDE view through %d: %s" % (port, md["brokers"]))
    for (err, leader, _), want in zip(md["topics"]["lt"][1], leaders):
        if want == 3:
            check(err == 72 and leader == -1, "partition led by 3 through OUTSIDE: %d %d" % (err, leader))
        else:
            check(err == 0 and leader == want, "partition led by %d through OUTSIDE: %d %d" % (want, err, leader))
print("ok through OUTSIDE: brokers 1 and 2 by their OUTSIDE ports, 3 left out (LISTENER_NOT_FOUND)")

# A real client that knows only the OUTSIDE ports.
mine = [i for i, l in enumerate(leaders) if l != 3]
acked = []
pr = Producer({"bootstrap.servers": "127.0.0.1:%d" % o1, "acks": "all", "log_level": 3})
for i in range(60):
    pr.produce("lt", value=b"v%d" % i, partition=mine[i % len(mine)],
               on_delivery=lambda e, m: acked.append(m) if e is None else None)
pr.flush(60)
check(len(acked) == 60, "acknowledged %d of 60 through OUTSIDE" % len(acked))
c = Consumer({"bootstrap.servers": "127.0.0.1:%d" % o2, "group.id": "lt-none", "enable.auto.commit": False,
              "log_level": 3})
c.assign([TopicPartition("lt", p, 0) for p in mine])
got, end = 0, time.time() + 60
while got < 60 and time.time() < end:
    m = c.poll(0.5)
    if m is not None and not m.error():
        got += 1
c.close()
check(got == 60, "read %d of 60 through OUTSIDE" % got)
print("ok a client bootstrapped on OUTSIDE wrote and read 60 records on brokers 1 and 2")
PY
echo "PASS ci/cluster/test_listeners.sh"
