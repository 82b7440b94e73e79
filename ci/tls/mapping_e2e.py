"""mapping_e2e.py PLAIN SSL CERTS — ssl.principal.mapping.rules end to end
(ci/tls/test_tls_mapping.sh).  The broker: an authorizer, super.users
User:ANONYMOUS (the PLAINTEXT listener, for set-up) and User:ops, and on
its SSL listener (mutual TLS) rules that map O=kaas-test,CN=<name> to
<name>.  Certificates in CERTS: alice (client.pem), carol, ops (O=kaas-test).

  * ACLs are made for User:alice, the short name, and for
    User:O=kaas-test,CN=carol, carol's whole DN (which no principal is once
    mapped);
  * alice (confluent-kafka) produces to and reads back topic `mapped`;
  * carol (confluent-kafka and kafka-python) is refused:
    TOPIC_AUTHORIZATION_FAILED, and Metadata does not show her the topic;
  * ops, in super.users by the short name, reads it without any ACL.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                         ResourcePattern, ResourceType)
from kafka import KafkaProducer
from kafka.errors import TopicAuthorizationFailedError, KafkaTimeoutError

plain, ssl_boot, certs = sys.argv[1:4]
TOPIC = "mapped"
N = 200


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def ok(msg):
    print("ok " + msg)


def tls(who):
    who = "client" if who == "alice" else who  # gen_certs.sh's alice
    return {"bootstrap.servers": ssl_boot, "security.protocol": "ssl", "ssl.ca.location": certs + "/ca.pem",
            "ssl.certificate.location": "%s/%s.pem" % (certs, who), "ssl.key.location": "%s/%s.key" % (certs, who)}


# ---- set-up through the PLAINTEXT listener (User:ANONYMOUS, a super user) ----------
adm = AdminClient({"bootstrap.servers": plain})
for f in adm.create_topics([NewTopic(TOPIC, 2, 1)]).values():
    f.result(15)
kadm = KafkaAdminClient(bootstrap_servers=plain, request_timeout_ms=10000)
acls = [ACL("User:alice", "*", op, ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType.TOPIC, TOPIC, ACLResourcePatternType.LITERAL))
        for op in (ACLOperation.WRITE, ACLOperation.READ, ACLOperation.DESCRIBE)]
acls.append(ACL("User:alice", "*", ACLOperation.READ, ACLPermissionType.ALLOW,
                ResourcePattern(ResourceType.GROUP, "alice-g", ACLResourcePatternType.LITERAL)))
# carol's whole DN: what her principal would be without the rules
acls += [ACL("User:O=kaas-test,CN=carol", "*", ACLOperation.ALL, ACLPermissionType.ALLOW,
             ResourcePattern(ResourceType.TOPIC, TOPIC, ACLResourcePatternType.LITERAL))]
r = kadm.create_acls(acls)
if r["failed"]:
    fail("CreateAcls: %s" % r["failed"])
kadm.close()
ok("topic %s, ACLs for User:alice and User:O=kaas-test,CN=carol" % TOPIC)
time.sleep(0.5)

# ---- alice: allowed by the ACL on her mapped name ---------------------------------------
errs = []
p = Producer({**tls("alice"), "acks": "all", "linger.ms": 5})
for i in range(N):
    p.produce(TOPIC, key=b"k%d" % i, value=b"alice-%d" % i, partition=i % 2,
              on_delivery=lambda e, m: e and errs.append(e))
left = p.flush(30)
if left or errs:
    fail("alice's produce: %d not delivered, errors %s" % (left, errs[:3]))
c = Consumer({**tls("alice"), "group.id": "alice-g", "enable.auto.commit": False})
c.assign([TopicPartition(TOPIC, q, 0) for q in (0, 1)])
got = set()
deadline = time.time() + 30
while len(got) < N and time.time() < deadline:
    m = c.poll(0.5)
    if m is None or m.error():
        if m is not None and m.error().code() != KafkaError._PARTITION_EOF:
            fail("alice's fetch: %s" % m.error())
        continue
    got.add(m.value())
c.close()
if got != {b"alice-%d" % i for i in range(N)}:
    fail("alice read back %d of %d records" % (len(got), N))
ok("alice (User:alice by the rules) produced and read back %d records over mutual TLS" % N)

# ---- carol: her DN has an ACL, her mapped name has none -------------------------------------
errs = []
p = Producer({**tls("carol"), "acks": "all", "message.timeout.ms": 10000})
p.produce(TOPIC, value=b"carol", on_delivery=lambda e, m: errs.append(e))
p.flush(20)
if not errs or errs[0] is None or errs[0].code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
    fail("carol's produce: %s, want TOPIC_AUTHORIZATION_FAILED" % errs)
md = AdminClient(tls("carol")).list_topics(timeout=10)
if TOPIC in md.topics:
    fail("Metadata shows carol the topic she may not describe")
ok("carol (User:carol, only her whole DN has an ACL): TOPIC_AUTHORIZATION_FAILED, the topic not in Metadata")
host, port = ssl_boot.rsplit(":", 1)
kp = KafkaProducer(bootstrap_servers=ssl_boot, security_protocol="SSL", ssl_cafile=certs + "/ca.pem",
                   ssl_certfile=certs + "/carol.pem", ssl_keyfile=certs + "/carol.key", max_block_ms=8000,
                   ssl_check_hostname=False)
try:
    kp.send(TOPIC, b"carol").get(timeout=10)
    fail("kafka-python: carol's send was acknowledged")
except (TopicAuthorizationFailedError, KafkaTimeoutError) as e:
    ok("kafka-python: carol refused (%s)" % type(e).__name__)
kp.close(timeout=2)

# ---- ops: a super user by the mapped name ---------------------------------------------------
c = Consumer({**tls("ops"), "group.id": "unused", "enable.auto.commit": False})
c.assign([TopicPartition(TOPIC, 0, 0)])
m = None
deadline = time.time() + 20
while time.time() < deadline:
    m = c.poll(0.5)
    if m is not None and not m.error():
        break
    if m is not None and m.error().code() != KafkaError._PARTITION_EOF:
        fail("ops's fetch: %s" % m.error())
c.close()
if m is None or m.error() or not m.value().startswith(b"alice-"):
    fail("ops (super.users=User:ops) could not read %s" % TOPIC)
ok("ops (User:ops in super.users by its mapped name) read %s without an ACL" % TOPIC)
