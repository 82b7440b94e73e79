#!/bin/bash
# ci/coord/test_groups_wire.sh — the coordinator APIs in raw frames against a
# real broker: the advertised versions, the JoinGroup v4 member-id handshake,
# FindCoordinator, OffsetCommit/OffsetFetch v7 (flexible), a hostile group id
# on the volume, and SIGTERM while a JoinGroup is parked: the join is
# answered NOT_COORDINATOR at once and the broker exits 0 without waiting for
# kaas.shutdown.timeout.ms.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh groups-wire

# A first rebalance that waits a minute, and a drain that would wait ten.
broker_start "$T/data" --override group.initial.rebalance.delay.ms=60000 \
	--override kaas.shutdown.timeout.ms=600000
$PY - "$BROKER_PORT" "$BROKER_PID" "$T/data/__cluster" <<'PY'
import os, re, signal, sys, time
sys.path.insert(0, "ci/lib")
from kproto import Conn, Enc, Dec, api_versions

port, pid, cluster = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]

def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)

c = Conn("127.0.0.1", port, client_id="wire")
err, apis = api_versions(c, 3)
want = {8: (0, 7), 9: (0, 7), 10: (0, 2), 11: (0, 5), 12: (0, 3), 13: (0, 3), 14: (0, 3),
        15: (0, 4), 16: (0, 4), 22: (0, 4), 42: (0, 1), 47: (0, 0)}
for k, v in want.items():
    check(apis.get(k) == v, "ApiVersions: api %d advertised %s, want %s" % (k, apis.get(k), v))
print("ok ApiVersions advertises the coordinator APIs and versions of DESIGN §8")

# FindCoordinator v2 for a group: this broker.
c.send(10, 2, Enc().str("g").i8(0).done())
_, b = c.recv()
d = Dec(b)
d.i32()
check(d.i16() == 0, "FindCoordinator error")
d.str()
check(d.i32() == 1, "coordinator node id")
d.str()
check(d.i32() == port, "coordinator port")

def join(conn, v, member):
    e = Enc().str("wg").i32(10000)
    if v >= 1:
        e.i32(20000)
    e.str(member)
    if v >= 5:
        e.str(None)
    e.str("consumer").array(1).str("range").bytes(b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff")
    return conn.send(11, v, e.done())

def join_resp(b, v):
    d = Dec(b)
    if v >= 2:
        d.i32()
    return d.i16(), d.i32(), d.str(), d.str(), d.str()

# v4: the first join hands out the member id.  Right after start-up the
# group's shard may still be loading: COORDINATOR_LOAD_IN_PROGRESS (14) is
# retriable, and clients ask again, as here.
deadline = time.monotonic() + 60
while True:
    join(c, 4, "")
    _, b = c.recv()
    err, gen, proto, leader, member = join_resp(b, 4)
    if err != 14 or time.monotonic() > deadline:
        break
    time.sleep(0.1)
check(err == 79 and gen == -1 and member.startswith("wire-"),
      "JoinGroup v4 without id: err %d gen %d member %r" % (err, gen, member))
print("ok JoinGroup v4 answers MEMBER_ID_REQUIRED with", member)

# OffsetCommit v7 (an empty group takes generation -1 commits) and
# OffsetFetch v7 (flexible) for a hostile group id.
hostile = "../../etc/x"
c.send(3, 1, Enc().array(1).str("t").done())  # Metadata v1: auto-creates topic t
c.recv()
# The creation completes after that answer (LEADER_NOT_AVAILABLE at first,
# as in Kafka); a commit for t before it is registered is refused.
from kcluster import metadata
deadline = time.monotonic() + 60
while True:
    err, parts = metadata(port, ["t"])["topics"].get("t", (-1, []))
    if err == 0 and parts and parts[0][0] == 0 and parts[0][1] == 1:
        break
    check(time.monotonic() < deadline, "topic t not led a minute after auto-creation: %s" % ((err, parts),))
    time.sleep(0.1)
e = Enc().str(hostile).i32(-1).str("").str(None).array(1).str("t").array(1)
e.i32(0).i64(77).i32(-1).str("meta")
c.send(8, 7, e.done())
_, b = c.recv()
d = Dec(b)
d.i32(); d.array(); d.str(); d.array(); d.i32()
err = d.i16()
check(err == 0, "OffsetCommit v7: error %d" % err)
e = Enc(True).str(hostile).array(1).str("t").array(1).i32(0).tags().i8(1).tags()
c.send(9, 7, e.done(), flex=True)
_, b = c.recv(flex_header=True)
d = Dec(b, True)
d.i32()
check(d.array() == 1, "OffsetFetch topics")
d.str(); d.array(); d.i32()
off = d.i64()
d.i32()
meta = d.str()
check(off == 77 and meta == "meta" and d.i16() == 0, "OffsetFetch v7: %d %r" % (off, meta))
names = os.listdir(os.path.join(cluster, "groups"))
check(len(names) == 1 and re.fullmatch(r"%2E\.%2F\.\.%2Fetc%2Fx\.[0-9]{10}\.json", names[0]),
      "group files: %s" % names)
check(not os.path.exists(os.path.join(cluster, "..", "etc")), "a group id escaped groups/")
print("ok OffsetCommit/OffsetFetch v7; '../../etc/x' is stored as groups/%s" % names[0])

# The second join parks (the initial delay is a minute)...
corr = join(c, 4, member)
time.sleep(0.5)
# ...SIGTERM: it is answered at once, NOT_COORDINATOR.
os.kill(pid, signal.SIGTERM)
c.s.settimeout(30)
rc, b = c.recv()
check(rc == corr, "the parked JoinGroup was answered")
err = join_resp(b, 4)[0]
check(err == 16, "parked JoinGroup answered %d, want NOT_COORDINATOR (16)" % err)
print("ok SIGTERM answers the parked JoinGroup with NOT_COORDINATOR")
PY
# The broker must now exit by itself, long before kaas.shutdown.timeout.ms.
for _ in $(seq 1 300); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$BROKER_PID" 2>/dev/null || fail "the broker is still draining 30 s after SIGTERM"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC"
echo "PASS ci/coord/test_groups_wire.sh"
