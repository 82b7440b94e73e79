"""acl_wire.py — CreateAcls, DescribeAcls and DeleteAcls in every version
(v0-v3, flexible from v2) on raw sockets, for test_acl.sh.  The clients
send v0 or v1 only; this covers the flexible encodings and the refusals.

    acl_wire.py denied PORT TOPIC     every version answers CLUSTER_AUTHORIZATION_FAILED
                                      and changes nothing (the connection is
                                      User:ANONYMOUS on the PLAINTEXT listener);
                                      then every other API's own refusal on TOPIC
    acl_wire.py versions PORT         create in v0..v3, describe in v0..v3 (v0 sees
                                      LITERAL bindings only), refusals by name,
                                      delete in v3 and v0
    acl_wire.py disabled PORT         SECURITY_DISABLED on a broker without authorizer
"""
import sys

sys.path.insert(0, "ci/lib")
from kproto import Conn, Dec, Enc, record_batch  # noqa: E402

TOPIC, GROUP, CLUSTER, TXN, DTOKEN = 2, 3, 4, 5, 6
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
READ, WRITE, DESCRIBE, ALTER = 3, 4, 8, 7
DENY, ALLOW = 2, 3


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(c, msg):
    if not c:
        fail(msg)


def create(conn, v, bindings):
    flex = v >= 2
    e = Enc(flex).array(len(bindings))
    for (rt, name, pt, principal, host, op, perm) in bindings:
        e.i8(rt).str(name)
        if v >= 1:
            e.i8(pt)
        e.str(principal).str(host).i8(op).i8(perm).tags()
    e.tags()
    conn.send(30, v, e.done(), flex=flex)
    _, body = conn.recv(flex_header=flex)
    d = Dec(body, flex)
    d.i32()
    out = []
    for _ in range(d.array()):
        out.append((d.i16(), d.str()))
        d.tags()
    return out


def filt(e, v, f):
    rt, name, pt, principal, host, op, perm = f
    e.i8(rt).str(name)
    if v >= 1:
        e.i8(pt)
    e.str(principal).str(host).i8(op).i8(perm)


def describe(conn, v, f):
    flex = v >= 2
    e = Enc(flex)
    filt(e, v, f)
    e.tags()
    conn.send(29, v, e.done(), flex=flex)
    _, body = conn.recv(flex_header=flex)
    d = Dec(body, flex)
    d.i32()
    err, msg = d.i16(), d.str()
    acls = []
    for _ in range(d.array()):
        rt, name = d.i8(), d.str()
        pt = d.i8() if v >= 1 else LITERAL
        for _ in range(d.array()):
            acls.append((rt, name, pt, d.str(), d.str(), d.i8(), d.i8()))
            d.tags()
        d.tags()
    return err, msg, sorted(acls)


def delete(conn, v, filters):
    flex = v >= 2
    e = Enc(flex).array(len(filters))
    for f in filters:
        filt(e, v, f)
        e.tags()
    e.tags()
    conn.send(31, v, e.done(), flex=flex)
    _, body = conn.recv(flex_header=flex)
    d = Dec(body, flex)
    d.i32()
    out = []
    for _ in range(d.array()):
        err, msg = d.i16(), d.str()
        gone = []
        for _ in range(d.array()):
            e2, _m, rt, name = d.i16(), d.str(), d.i8(), d.str()
            pt = d.i8() if v >= 1 else LITERAL
            gone.append((rt, name, pt, d.str(), d.str(), d.i8(), d.i8()))
            check(e2 == 0, "a matching ACL with error %d" % e2)
            d.tags()
        d.tags()
        out.append((err, msg, sorted(gone)))
    return out


EVERYTHING = (ANY, None, ANY, None, None, 1, 1)


def call(conn, key, v, body, flex=False):
    conn.send(key, v, body.done(), flex=flex)
    _, data = conn.recv(flex_header=flex)
    return Dec(data, flex)


def apis_denied(conn, topic):
    """Each API's own answer for a principal without any ACL, on an existing
    topic: Kafka's error code in Kafka's place."""
    t = topic
    d = call(conn, 0, 3, Enc().str(None).i16(-1).i32(5000).array(1).str(t).array(1).i32(0)
             .bytes(record_batch([b"x"])))
    d.array(); d.str(); d.array(); d.i32()
    check(d.i16() == 29, "Produce")
    d = call(conn, 1, 4, Enc().i32(-1).i32(0).i32(1).i32(1 << 20).i8(0).array(1).str(t).array(1)
             .i32(0).i64(0).i32(1 << 20))
    d.i32(); d.array(); d.str(); d.array(); d.i32()
    check(d.i16() == 29, "Fetch")
    d = call(conn, 2, 1, Enc().i32(-1).array(1).str(t).array(1).i32(0).i64(-1))
    d.array(); d.str(); d.array(); d.i32()
    check(d.i16() == 29, "ListOffsets")
    d = call(conn, 23, 2, Enc().array(1).str(t).array(1).i32(0).i32(-1).i32(0))
    d.i32(); d.array(); d.str(); d.array()
    check(d.i16() == 29, "OffsetForLeaderEpoch")
    d = call(conn, 11, 0, Enc().str("g-anon").i32(10000).str("").str("consumer").array(1).str("range").bytes(b""))
    check(d.i16() == 30, "JoinGroup")
    d = call(conn, 14, 0, Enc().str("g-anon").i32(1).str("m").array(0))
    check(d.i16() == 30, "SyncGroup")
    d = call(conn, 12, 0, Enc().str("g-anon").i32(1).str("m"))
    check(d.i16() == 30, "Heartbeat")
    d = call(conn, 13, 0, Enc().str("g-anon").str("m"))
    check(d.i16() == 30, "LeaveGroup")
    d = call(conn, 8, 2, Enc().str("g-anon").i32(-1).str("").i64(-1).array(1).str(t).array(1).i32(0).i64(1).str(""))
    d.array(); d.str(); d.array(); d.i32()
    check(d.i16() == 30, "OffsetCommit")
    d = call(conn, 9, 1, Enc().str("g-anon").array(1).str(t).array(1).i32(0))
    d.array(); d.str(); d.array(); d.i32(); d.i64(); d.str()
    check(d.i16() == 30, "OffsetFetch")
    d = call(conn, 15, 0, Enc().array(1).str("g-anon"))
    d.array()
    check(d.i16() == 30, "DescribeGroups")
    d = call(conn, 42, 0, Enc().array(1).str("g-anon"))
    d.i32(); d.array(); d.str()
    check(d.i16() == 30, "DeleteGroups")
    d = call(conn, 16, 0, Enc())
    check(d.i16() == 0 and d.array() == 0, "ListGroups lists no group")
    d = call(conn, 32, 0, Enc().array(2).i8(2).str(t).array(-1).i8(4).str("").array(-1))
    d.i32(); d.array()
    e1 = d.i16(); d.str(); d.i8(); d.str()
    for _ in range(d.array()):
        d.str(); d.str(); d.i8(); d.i8(); d.i8()
    e2 = d.i16()
    check((e1, e2) == (29, 31), "DescribeConfigs: %s" % ((e1, e2),))
    d = call(conn, 33, 0, Enc().array(1).i8(2).str(t).array(1).str("retention.ms").str("1").i8(0))
    d.i32(); d.array()
    check(d.i16() == 29, "AlterConfigs")
    d = call(conn, 37, 0, Enc().array(1).str(t).i32(9).array(-1).i32(5000).i8(0))
    d.i32(); d.array(); d.str()
    check(d.i16() == 29, "CreatePartitions")
    d = call(conn, 21, 0, Enc().array(1).str(t).array(1).i32(0).i64(-1).i32(5000))
    d.i32(); d.array(); d.str(); d.array(); d.i32(); d.i64()
    check(d.i16() == 29, "DeleteRecords")
    d = call(conn, 19, 0, Enc().array(1).str("anon-new").i32(1).i16(1).array(0).array(0).i32(5000))
    d.array(); d.str()
    check(d.i16() == 29, "CreateTopics")
    d = call(conn, 20, 0, Enc().array(1).str(t).i32(5000))
    d.array(); d.str()
    check(d.i16() == 29, "DeleteTopics")
    d = call(conn, 60, 0, Enc(True).i8(1).tags(), flex=True)
    d.i32()
    check(d.i16() == 31, "DescribeCluster")
    d = call(conn, 35, 0, Enc().array(-1))
    d.i32()
    check(d.array() == 0, "DescribeLogDirs shows no directory")
    print("ok each API's own error: Produce, Fetch, ListOffsets, OffsetForLeaderEpoch, CreatePartitions, "
          "DeleteRecords, CreateTopics, DeleteTopics, DescribeConfigs/AlterConfigs (topic) TOPIC_AUTHORIZATION_FAILED; "
          "Join/Sync/Heartbeat/Leave, OffsetCommit/OffsetFetch, DescribeGroups, DeleteGroups "
          "GROUP_AUTHORIZATION_FAILED; DescribeConfigs (broker), DescribeCluster CLUSTER_AUTHORIZATION_FAILED; "
          "ListGroups and DescribeLogDirs list nothing")


def main():
    cmd, port = sys.argv[1], int(sys.argv[2])
    conn = Conn("127.0.0.1", port)
    if cmd in ("denied", "disabled"):
        want = 31 if cmd == "denied" else 54
        b = (TOPIC, "wire", LITERAL, "User:ANONYMOUS", "*", READ, ALLOW)
        for v in range(4):
            r = create(conn, v, [b])
            check(r == [(want, r[0][1])] and r[0][1], "CreateAcls v%d: %s" % (v, r))
            err, msg, acls = describe(conn, v, EVERYTHING if v else (ANY, None, LITERAL, None, None, 1, 1))
            check(err == want and msg and acls == [], "DescribeAcls v%d: %s %s %s" % (v, err, msg, acls))
            r = delete(conn, v, [EVERYTHING])
            check(r[0][0] == want and r[0][2] == [], "DeleteAcls v%d: %s" % (v, r))
        print("ok CreateAcls/DescribeAcls/DeleteAcls v0-v3 answer %s, with a message" %
              ("CLUSTER_AUTHORIZATION_FAILED" if want == 31 else "SECURITY_DISABLED"))
        if cmd == "denied":
            apis_denied(conn, sys.argv[3])
            # InitProducerId v0: idempotent, then transactional
            for txn, code in ((None, 31), ("tx-anon", 53)):
                conn.send(22, 0, Enc().str(txn).i32(60000).done())
                _, body = conn.recv()
                d = Dec(body)
                d.i32()
                err, pid = d.i16(), d.i64()
                check(err == code and pid == -1, "InitProducerId %s: %d %d" % (txn, err, pid))
            for key, kt, code in (("g-anon", 0, 30), ("tx-anon", 1, 53)):
                conn.send(10, 1, Enc().str(key).i8(kt).done())
                _, body = conn.recv()
                d = Dec(body)
                d.i32()
                err = d.i16()
                check(err == code, "FindCoordinator %s: %d" % (key, err))
            print("ok InitProducerId: CLUSTER_AUTHORIZATION_FAILED (idempotent), TRANSACTIONAL_ID_AUTHORIZATION_FAILED; "
                  "FindCoordinator: GROUP_ and TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
        return
    if cmd == "denied-no":  # DescribeAcls is allowed now
        err, msg, _ = describe(conn, 1, EVERYTHING)
        check(err == 0, "DescribeAcls: %d %s" % (err, msg))
        print("ok DescribeAcls allowed")
        return
    check(cmd == "versions", "unknown command " + cmd)
    made = []
    for v in range(4):
        b = [(TOPIC, "wire-v%d" % v, LITERAL, "User:w%d" % v, "*", READ, ALLOW),
             (GROUP, "wg-v%d" % v, PREFIXED if v else LITERAL, "User:w%d" % v, "127.0.0.1", DESCRIBE, DENY)]
        r = create(conn, v, b)
        check([e for e, _ in r] == [0, 0], "CreateAcls v%d: %s" % (v, r))
        made += b
    # the same binding again: success, one binding
    check([e for e, _ in create(conn, 3, made[:1])] == [0], "CreateAcls of an existing binding")
    bad = [
        (DTOKEN, "t", LITERAL, "User:x", "*", READ, ALLOW),
        (TOPIC, "t", MATCH, "User:x", "*", READ, ALLOW),
        (TOPIC, "", LITERAL, "User:x", "*", READ, ALLOW),
        (CLUSTER, "other", LITERAL, "User:x", "*", ALTER, ALLOW),
        (TOPIC, "t", LITERAL, "alice", "*", READ, ALLOW),
        (TOPIC, "t", LITERAL, "User:x", "example.com", READ, ALLOW),
        (TOPIC, "t", LITERAL, "User:x", "*", 1, ALLOW),
        (TOPIC, "t", LITERAL, "User:x", "*", READ, 1),
    ]
    r = create(conn, 3, bad)
    check([e for e, _ in r] == [42] * len(bad) and all(m for _, m in r), "refusals: %s" % r)
    print("ok refused with INVALID_REQUEST and a message: " + "; ".join(m for _, m in r))
    want = sorted(made)
    for v in range(1, 4):
        err, _, acls = describe(conn, v, (ANY, None, ANY, "User:w%d" % v, None, 1, 1))
        check(err == 0 and acls == sorted(b for b in made if b[3] == "User:w%d" % v), "DescribeAcls v%d: %s" % (v, acls))
    err, _, acls = describe(conn, 0, (ANY, None, LITERAL, None, None, 1, 1))
    got = [a for a in acls if a[3].startswith("User:w")]
    check(err == 0 and got == sorted(b for b in made if b[2] == LITERAL), "DescribeAcls v0: %s" % got)
    err, _, acls = describe(conn, 3, (GROUP, "wg-v2-x", MATCH, None, None, 1, 1))
    check(err == 0 and [a[1] for a in acls] == ["wg-v2"], "MATCH filter: %s" % acls)
    err, msg, _ = describe(conn, 3, (0, None, ANY, None, None, 1, 1))
    check(err == 42 and msg, "an UNKNOWN filter: %s %s" % (err, msg))
    print("ok DescribeAcls v0-v3 (v0 sees LITERAL only), MATCH filters, unknown filters refused")
    r = delete(conn, 3, [(ANY, None, ANY, "User:w%d" % v, None, 1, 1) for v in (1, 2, 3)])
    check([x[0] for x in r] == [0, 0, 0] and [len(x[2]) for x in r] == [2, 2, 2], "DeleteAcls v3: %s" % r)
    r = delete(conn, 0, [(TOPIC, "wire-v0", LITERAL, None, None, 1, 1), (TOPIC, "wire-v0", LITERAL, None, None, 1, 1)])
    check([len(x[2]) for x in r] in ([1, 0], [1, 1]), "DeleteAcls v0: %s" % r)
    r = delete(conn, 1, [(ANY, None, ANY, "User:w0", None, 1, 1)])
    check(len(r[0][2]) == 1, "DeleteAcls v1: %s" % r)
    err, _, acls = describe(conn, 2, EVERYTHING)
    check(err == 0 and not [a for a in acls if a[3].startswith("User:w")], "left after deletes: %s" % acls)
    print("ok DeleteAcls v0, v1, v3: each filter's bindings returned and gone")
    print("ok %d bindings made in v0-v3 (two per version), %d left" % (len(made), 0))


main()
