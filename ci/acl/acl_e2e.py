"""acl_e2e.py — ACLs on a 2-broker cluster with the real clients, for
test_acl.sh.  Brokers: SASL_PLAINTEXT ports S1 and S2; users admin (in
super.users), alice and bob, passwords NAME-pw.

    acl_e2e.py denials S1 S2        alice and bob without any ACL: every request
                                    refused with Kafka's error, nothing revealed
    acl_e2e.py allow S1 S2 POLL_MS  ACLs made through one broker apply on both
                                    (the time measured), then taken back
    acl_e2e.py closed S1 ok|denied  whether alice's allowed produce works (the
                                    hostile-file step)

Clients: kcat (produce and consume), confluent-kafka (metadata, consumer
groups, CreateTopics, DeleteTopics, idempotent and transactional
producers), kafka-python's admin client and kafkajs's (CreateAcls,
DescribeAcls, DeleteAcls).
"""
import json
import os
import subprocess
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                         KafkaAdminClient, ResourcePattern, ResourcePatternFilter, ResourceType)

JS = ["node", "ci/acl/acl_kafkajs.js"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(c, msg):
    if not c:
        fail(msg)


def ok(msg):
    print("ok " + msg)


def cf(boot, user, **extra):
    c = {"bootstrap.servers": boot, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-256",
         "sasl.username": user, "sasl.password": user + "-pw"}
    c.update(extra)
    return c


def kp_admin(boot, user):
    return KafkaAdminClient(bootstrap_servers=boot, security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                            sasl_plain_username=user, sasl_plain_password=user + "-pw", request_timeout_ms=10000)


def kcat_args(boot, user):
    return ["kcat", "-b", boot, "-X", "security.protocol=sasl_plaintext", "-X", "sasl.mechanisms=PLAIN",
            "-X", "sasl.username=" + user, "-X", "sasl.password=" + user + "-pw"]


def kcat_produce(boot, user, topic, lines):
    r = subprocess.run(kcat_args(boot, user) + ["-P", "-t", topic, "-X", "acks=all", "-X", "message.timeout.ms=5000"],
                       input="".join("%s\n" % x for x in lines), capture_output=True, text=True, timeout=60)
    return r.returncode == 0 and "ERROR" not in r.stderr, r.stderr


def kcat_consume(boot, user, topic):
    r = subprocess.run(kcat_args(boot, user) + ["-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n",
                                                "-X", "topic.metadata.refresh.interval.ms=500"],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout.split(), r.stderr


def js(cmd, boot, user, arg):
    env = dict(os.environ, KAAS_SASL_USER=user, KAAS_SASL_PASS=user + "-pw")
    r = subprocess.run(JS + [cmd, boot, json.dumps(arg)], capture_output=True, text=True, env=env, timeout=60)
    return r.returncode, r.stdout.strip().splitlines(), r.stderr


def topics_seen(boot, user):
    md = AdminClient(cf(boot, user)).list_topics(timeout=10)
    return set(md.topics)


def topic_error(boot, user, topic):
    md = AdminClient(cf(boot, user)).list_topics(topic=topic, timeout=10)
    t = md.topics.get(topic)
    return t.error.code() if t is not None and t.error is not None else None


def group_errors(boot, user, group, topic, want_records=0, seconds=10):
    """Errors a consumer of `group` meets, and the records it got."""
    c = Consumer(cf(boot, user, **{"group.id": group, "auto.offset.reset": "earliest",
                                    "enable.auto.commit": False, "session.timeout.ms": 6000}))
    c.subscribe([topic])
    errs, recs = set(), []
    end = time.time() + seconds
    while time.time() < end:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            errs.add(m.error().code())
            if m.error().code() in (KafkaError.GROUP_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED):
                break
            continue
        recs.append(m.value().decode())
        if want_records and len(recs) >= want_records:
            try:
                c.commit(asynchronous=False)
            except KafkaException as e:
                errs.add(e.args[0].code())
            break
    c.close()
    return errs, recs


def producer_error(boot, user, **extra):
    """The fatal or delivery error an idempotent/transactional producer meets (None: delivered)."""
    seen = []
    p = Producer(cf(boot, user, **dict({"error_cb": lambda e: seen.append(e.code()),
                                        "message.timeout.ms": 5000}, **extra)))
    if "transactional.id" in extra:
        try:
            p.init_transactions(10)
        except KafkaException as e:
            return e.args[0].code()
        return None
    got = []
    try:
        p.produce("orders", b"idem", on_delivery=lambda e, m: got.append(e))
        p.flush(10)
    except KafkaException as e:  # a fatal error
        return e.args[0].code()
    if seen:
        return seen[0]
    return got[0].code() if got and got[0] is not None else None


def acl(rt, name, principal, op, perm=ACLPermissionType.ALLOW, pt=ACLResourcePatternType.LITERAL, host="*"):
    return ACL(principal=principal, host=host, operation=op, permission_type=perm,
               resource_pattern=ResourcePattern(rt, name, pt))


def everything(principal=None):
    return ACLFilter(principal=principal, host=None, operation=ACLOperation.ANY, permission_type=ACLPermissionType.ANY,
                     resource_pattern=ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY))


def until(what, f, seconds=10):
    t0 = time.time()
    while True:
        if f():
            return time.time() - t0
        if time.time() - t0 > seconds:
            fail("%s: not within %d s" % (what, seconds))
        time.sleep(0.05)


def denials(s1, s2):
    for boot in (s1, s2):
        good, err = kcat_produce(boot, "alice", "orders", ["a1"])
        check(not good and "authorization failed" in err.lower(), "kcat produce without ACL: %s" % err)
        rc, recs, err = kcat_consume(boot, "alice", "orders")
        check(rc != 0 and not recs and "authorization failed" in err.lower(), "kcat consume without ACL: %s" % err)
    ok("kcat: produce and consume refused, Topic authorization failed, on both brokers")
    seen = topics_seen(s1, "alice")
    check(not (seen & {"orders", "secret", "logs-a"}), "alice's Metadata shows %s" % seen)
    for t in ("orders", "secret", "no-such-topic"):
        check(topic_error(s2, "alice", t) == KafkaError.TOPIC_AUTHORIZATION_FAILED, "Metadata for %s" % t)
    check("no-such-topic" not in topics_seen(s1, "admin"), "Metadata without CREATE auto-created a topic")
    ok("Metadata: alice sees no topic; named ones, existing or not, answer TOPIC_AUTHORIZATION_FAILED")
    errs, recs = group_errors(s1, "alice", "g-1", "orders")
    check(KafkaError.GROUP_AUTHORIZATION_FAILED in errs and not recs, "consumer group without ACL: %s" % errs)
    ok("confluent consumer group g-1: GROUP_AUTHORIZATION_FAILED")
    ac = AdminClient(cf(s2, "alice"))
    f = ac.create_topics([NewTopic("alice-new", 1, 1)])["alice-new"]
    try:
        f.result(15)
        fail("alice created a topic without CREATE")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, "CreateTopics: %s" % e)
    ac = AdminClient(cf(s1, "alice"))
    f = ac.delete_topics(["orders"], operation_timeout=10)["orders"]
    try:
        f.result(15)
        fail("alice deleted a topic without DELETE")
    except KafkaException as e:
        check(e.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, "DeleteTopics: %s" % e)
    check({"orders", "secret"} <= topics_seen(s1, "admin"), "a refused DeleteTopics deleted")
    ok("CreateTopics and DeleteTopics: TOPIC_AUTHORIZATION_FAILED, nothing created or deleted")
    e = producer_error(s2, "bob", **{"enable.idempotence": True})
    check(e in (KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TOPIC_AUTHORIZATION_FAILED),
          "idempotent producer without ACL: %s" % e)
    e = producer_error(s1, "bob", **{"transactional.id": "tx-bob"})
    check(e == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional producer without ACL: %s" % e)
    ok("InitProducerId: idempotent CLUSTER_AUTHORIZATION_FAILED, transactional TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
    a = kp_admin(s1, "alice")
    r = a.create_acls([acl(ResourceType.TOPIC, "orders", "User:alice", ACLOperation.ALL)])
    check(not r["succeeded"] and len(r["failed"]) == 1 and
          "ClusterAuthorizationFailed" in type(r["failed"][0][1]).__name__ + str(r["failed"][0][1]),
          "kafka-python CreateAcls by alice: %s" % r)
    try:
        out = a.describe_acls(everything())
        check("ClusterAuthorizationFailed" in repr(out), "kafka-python DescribeAcls by alice: %s" % (out,))
    except Exception as ex:  # kafka-python raises the broker's error
        check("ClusterAuthorizationFailed" in type(ex).__name__ + repr(ex), "DescribeAcls by alice: %r" % ex)
    a.close()
    rc, out, _ = js("describe", s2, "bob", {"principal": "User:bob", "resourceName": "orders",
                                               "resourcePatternType": "MATCH"})
    check(rc == 3 and "CLUSTER_AUTHORIZATION_FAILED" in " ".join(out), "kafkajs DescribeAcls by bob: %s" % out)
    rc, out, _ = js("create", s2, "bob", [{"resourceType": "CLUSTER", "resourceName": "kafka-cluster",
                                            "principal": "User:bob", "operation": "ALL", "permissionType": "ALLOW"}])
    check(rc == 3 and "CLUSTER_AUTHORIZATION_FAILED" in " ".join(out), "kafkajs CreateAcls by bob: %s" % out)
    ok("CreateAcls/DescribeAcls by alice (kafka-python) and bob (kafkajs): CLUSTER_AUTHORIZATION_FAILED")


def allow(s1, s2, poll_ms):
    # Generous: the test proves the change applies on the other broker; the
    # time it took is printed, never asserted (a busy machine is slow).
    bound = poll_ms / 1000.0 + 30.0
    a = kp_admin(s1, "admin")
    want = [acl(ResourceType.TOPIC, "orders", "User:alice", ACLOperation.WRITE),
            acl(ResourceType.TOPIC, "orders", "User:alice", ACLOperation.READ),
            acl(ResourceType.GROUP, "g-", "User:alice", ACLOperation.READ, pt=ACLResourcePatternType.PREFIXED),
            acl(ResourceType.CLUSTER, "kafka-cluster", "User:alice", ACLOperation.CREATE),
            acl(ResourceType.TRANSACTIONAL_ID, "tx-alice", "User:alice", ACLOperation.WRITE)]
    bobs = [acl(ResourceType.TOPIC, "orders", "User:bob", ACLOperation.DESCRIBE),
            acl(ResourceType.GROUP, "g-bob", "User:bob", ACLOperation.DESCRIBE)]
    r = a.create_acls(want + bobs)
    check(len(r["succeeded"]) == len(want) + 2 and not r["failed"], "kafka-python CreateAcls: %s" % r)
    # alice's produce through the other broker: allowed within the bound
    took = until("alice's WRITE on broker 2", lambda: kcat_produce(s2, "alice", "orders", ["a1", "a2"])[0], bound)
    ok("kafka-python CreateAcls through broker 1; kcat produce allowed through broker 2 after %.2f s" % took)
    rc, out, err = js("create", s2, "admin", [{"resourceType": "TOPIC", "resourceName": "logs-",
                                               "resourcePatternType": "PREFIXED", "principal": "User:alice",
                                               "operation": "DESCRIBE", "permissionType": "ALLOW"}])
    check(rc == 0, "kafkajs CreateAcls: %s %s" % (out, err))
    until("alice sees logs-a", lambda: "logs-a" in topics_seen(s1, "alice"), bound)
    seen = topics_seen(s1, "alice")
    check("orders" in seen and "logs-a" in seen and "secret" not in seen, "alice's Metadata: %s" % seen)
    check(topic_error(s1, "alice", "secret") == KafkaError.TOPIC_AUTHORIZATION_FAILED, "Metadata for secret")
    ok("Metadata through broker 1 lists orders and logs-a (kafkajs's PREFIXED DESCRIBE), hides secret")
    rc, recs, err = kcat_consume(s1, "alice", "orders")
    check(rc == 0 and "a1" in recs and "a2" in recs, "kcat consume with READ: %s %s" % (recs, err))
    errs, recs = group_errors(s2, "alice", "g-1", "orders", want_records=2)
    check(not errs and len(recs) >= 2, "consumer group g-1 with READ: %s %s" % (errs, recs))
    errs, _ = group_errors(s2, "alice", "other-group", "orders")
    check(KafkaError.GROUP_AUTHORIZATION_FAILED in errs, "group other-group: %s" % errs)
    ok("kcat consume; confluent group g-1 (PREFIXED g-) consumed and committed; other-group refused")
    ac = AdminClient(cf(s2, "alice"))
    ac.create_topics([NewTopic("alice-new", 1, 1)])["alice-new"].result(30)
    e = producer_error(s1, "alice", **{"enable.idempotence": True})
    check(e is None, "alice's idempotent producer with WRITE on orders: %s" % e)
    e = producer_error(s1, "bob", **{"enable.idempotence": True})
    check(e == KafkaError.CLUSTER_AUTHORIZATION_FAILED, "bob's idempotent producer with DESCRIBE only: %s" % e)
    # bob may describe orders and g-bob: now Produce, Fetch and JoinGroup themselves refuse
    good, err = kcat_produce(s2, "bob", "orders", ["b1"])
    check(not good and "authorization failed" in err.lower(), "bob's produce with DESCRIBE only: %s" % err)
    rc, recs, err = kcat_consume(s1, "bob", "orders")
    check(rc != 0 and not recs and "authorization failed" in err.lower(), "bob's fetch with DESCRIBE only: %s" % err)
    errs, recs = group_errors(s1, "bob", "g-bob", "orders")
    check(KafkaError.GROUP_AUTHORIZATION_FAILED in errs and not recs, "bob's JoinGroup: %s" % errs)
    ok("bob with DESCRIBE only: Produce (WRITE), Fetch (READ), JoinGroup (READ on g-bob) refused")
    e = producer_error(s2, "alice", **{"transactional.id": "tx-alice"})
    check(e is not None, "a transactional producer: kaas has no transactions yet")
    ok("CreateTopics with CREATE on the cluster; idempotent producer with WRITE on a topic (KIP-679); "
       "transactional id tx-alice past the authorizer (to kaas's 'no transactions yet')")
    # describe with both clients
    out = a.describe_acls(everything("User:alice"))
    acls = out[0] if isinstance(out, tuple) else out
    check(len(acls) == 6, "kafka-python DescribeAcls: %s" % (out,))
    r = a.delete_acls([everything("User:bob")])
    check(len(r[0][1]) == 2, "kafka-python DeleteAcls of bob's: %s" % (r,))
    got = []
    for name in ("orders", "g-1", "logs-a", "kafka-cluster", "tx-alice"):  # kafkajs wants a name: MATCH filters
        rc, lines, err = js("describe", s2, "admin", {"principal": "User:alice", "resourceName": name,
                                                      "resourcePatternType": "MATCH"})
        check(rc == 0, "kafkajs DescribeAcls: %s %s" % (lines, err))
        got += [(x["resourceType"], x["resourceName"], x["operation"]) for x in map(json.loads, lines)]
    check(sorted(got) == sorted([("CLUSTER", "kafka-cluster", "CREATE"), ("GROUP", "g-", "READ"),
                                 ("TOPIC", "logs-", "DESCRIBE"), ("TOPIC", "orders", "READ"),
                                 ("TOPIC", "orders", "WRITE"), ("TRANSACTIONAL_ID", "tx-alice", "WRITE")]),
          "kafkajs DescribeAcls (MATCH): %s" % got)
    ok("DescribeAcls: kafka-python and kafkajs (MATCH filters) both list alice's 6 bindings")
    # DENY beats ALLOW; super users are never denied
    rc, out, err = js("create", s1, "admin", [
        {"resourceType": "TOPIC", "resourceName": "orders", "principal": "User:alice", "operation": "READ",
         "permissionType": "DENY"},
        {"resourceType": "TOPIC", "resourceName": "*", "principal": "User:admin", "operation": "ALL",
         "permissionType": "DENY"}])
    check(rc == 0, "kafkajs CreateAcls DENY: %s %s" % (out, err))
    until("the DENY on broker 2", lambda: kcat_consume(s2, "alice", "orders")[0] != 0, bound)
    check(kcat_produce(s2, "alice", "orders", ["a3"])[0], "DENY READ also denied WRITE")
    check(kcat_produce(s2, "admin", "orders", ["adm"])[0], "a DENY on a super user denied it")
    ok("DENY READ beats ALLOW READ on broker 2 (WRITE still allowed); DENY ALL does not touch super user admin")
    # take it back through broker 2: denied again on both
    r = a.delete_acls([ACLFilter(principal="User:alice", host=None, operation=ACLOperation.ANY,
                                 permission_type=ACLPermissionType.ANY,
                                 resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, "orders",
                                                                        ACLResourcePatternType.LITERAL))])
    check(len(r) == 1 and len(r[0][1]) == 3, "kafka-python DeleteAcls: %s" % (r,))
    took = [until("alice's WRITE gone on broker %d" % i,
                  lambda b=b: not kcat_produce(b, "alice", "orders", ["gone"])[0], bound)
            for i, b in ((1, s1), (2, s2))]
    ok("kafka-python DeleteAcls (3 bindings); produce refused again on broker 1 after %.2f s, "
       "broker 2 after %.2f s" % tuple(took))
    rc, lines, err = js("delete", s1, "admin", [
        {"principal": "User:alice", "resourceName": n, "resourcePatternType": "MATCH"}
        for n in ("g-1", "logs-a", "kafka-cluster", "tx-alice")] + [
        {"principal": "User:admin", "resourceType": "TOPIC", "resourceName": "*", "resourcePatternType": "LITERAL"}])
    check(rc == 0 and len(lines) == 5, "kafkajs DeleteAcls: %s %s" % (lines, err))
    until("alice's group READ gone", lambda: KafkaError.GROUP_AUTHORIZATION_FAILED in
          group_errors(s2, "alice", "g-1", "orders", seconds=5)[0], bound)
    check(not (topics_seen(s2, "alice") & {"orders", "logs-a", "alice-new"}), "alice still sees topics")
    a.close()
    ok("kafkajs DeleteAcls (the other 5); alice's group and Metadata refused again on broker 2")


def closed(s1, want):
    good = kcat_produce(s1, "alice", "orders", ["c"])[0]
    check(good == (want == "ok"), "alice's produce with WRITE: %s, want %s" % (good, want))
    ok("alice's produce: %s" % ("allowed" if good else "refused"))


def main():
    cmd = sys.argv[1]
    if cmd == "denials":
        denials(sys.argv[2], sys.argv[3])
    elif cmd == "allow":
        allow(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif cmd == "closed":
        closed(sys.argv[2], sys.argv[3])
    else:
        fail("unknown command " + cmd)


main()
