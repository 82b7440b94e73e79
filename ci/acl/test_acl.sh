#!/bin/bash
# ci/acl/test_acl.sh — ACLs on a 2-broker cluster with the real clients.
#
# Two brokers on one data directory, each with a PLAINTEXT and a
# SASL_PLAINTEXT listener, authorizer.class.name=kaas, super.users=User:admin,
# kaas.acl.poll.ms=200; users admin, alice, bob made with `kaas users add`.
#   1. Without any ACL (acl_e2e.py denials): kcat produce and consume, a
#      confluent-kafka consumer group, Metadata (nothing listed, named topics
#      TOPIC_AUTHORIZATION_FAILED whether they exist or not, no auto-create),
#      CreateTopics, DeleteTopics, idempotent and transactional producers,
#      CreateAcls/DescribeAcls by a non-admin (kafka-python and kafkajs);
#      every refusal named in the broker's log; the volume unchanged.
#   2. Raw CreateAcls/DescribeAcls/DeleteAcls v0-v3 (acl_wire.py): refused to
#      User:ANONYMOUS on the PLAINTEXT listener; once it may ALTER the
#      cluster, every version, the refusals by name, v0 seeing LITERAL only.
#   3. Allow and take back (acl_e2e.py allow): ACLs created with kafka-python
#      through broker 1 apply on broker 2 within the poll bound (measured),
#      kafkajs's too; Metadata lists exactly the describable topics; DENY beats
#      ALLOW; super users are never denied; kafka-python's and kafkajs's
#      DeleteAcls take them back on both brokers.
#   4. A hostile file in CLUSTER/acls/: refused by name, every principal but
#      the super users denied until it is removed, then as before.
#   5. A TLS client certificate's principal is the whole subject DN as Java's
#      X500Principal.getName() writes it (Kafka's DEFAULT mapping): an ACL for
#      it applies, one for the CN alone does not.
#   6. Without authorizer.class.name: everything allowed, the ACL APIs answer
#      SECURITY_DISABLED; an unknown authorizer class and a malformed
#      super.users are refused at start-up by name.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh acl
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }
POLL=200
E="$PY ci/acl/acl_e2e.py"
W="$PY ci/acl/acl_wire.py"
# Retries for up to 30 s: a change reaches the other broker within a poll,
# but a busy machine is slow and tests never assert on speed.
eventually() {
	for _ in $(seq 1 60); do
		"$@" > "$T/ev.out" 2>&1 && { cat "$T/ev.out"; return 0; }
		sleep 0.5
	done
	cat "$T/ev.out"
	return 1
}

command -v node >/dev/null || fail "node is not installed (make deps-test)"
npm install --silent --no-audit --no-fund --prefix "$T/npm" kafkajs@2 >"$T/npm.log" 2>&1 ||
	{ cat "$T/npm.log"; fail "npm install kafkajs@2"; }
export NODE_PATH=$T/npm/node_modules KAFKAJS_NO_PARTITIONER_WARNING=1

mkdir -p "$T/data/__cluster"
users() { "$BIN/kaas" users "$@" --cluster-dir "$T/data/__cluster"; }
for u in admin alice bob; do
	echo "$u-pw" | users add --user "$u" > /dev/null || fail "kaas users add $u"
done
args=(--listen "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
	--override sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256
	--override authorizer.class.name=kaas --override super.users=User:admin
	--override kaas.acl.poll.ms=$POLL --override num.partitions=2
	--override broker.session.timeout.ms=5000 --override group.initial.rebalance.delay.ms=100)
# One after the other: two brokers starting at once can race on creating
# the cluster's SASL secret (users/.secret.json), which is not this test's
# subject.
cluster_start "$T/data" 1 "${args[@]}" || fail_cl "starting broker 1"
CL_N=2
CL_LOG[2]=$T/b2.log
cluster_launch 2 || fail_cl "starting broker 2"
_cl_boot
sasl_port() { grep -o 'listener SASL_PLAINTEXT (SASL_PLAINTEXT) on 127.0.0.1:[0-9]*' "${CL_LOG[$1]}" | tail -1 |
	grep -o '[0-9]*$'; }
S1=127.0.0.1:$(sasl_port 1)
S2=127.0.0.1:$(sasl_port 2)
[ "$S1" != 127.0.0.1: ] && [ "$S2" != 127.0.0.1: ] || fail_cl "no SASL listeners in the logs"
grep -q "authorizer on: 0 binding(s), 0 refused file(s), 1 super user(s), allow.everyone.if.no.acl.found=false" \
	"${CL_LOG[1]}" || fail_cl "the authorizer is not on"

# admin (a super user, no ACL needed) makes the topics and some records
$PY - "$S1" <<'PY' || fail_cl "admin's topics"
import sys, time
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1], "security.protocol": "SASL_PLAINTEXT",
                 "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "admin", "sasl.password": "admin-pw"})
for t, f in a.create_topics([NewTopic(n, 2, 1) for n in ("orders", "secret", "logs-a")]).items():
    f.result(30)
print("ok admin created orders, secret, logs-a")
PY
printf 'r1\nr2\nr3\n' | kcat -b "$S2" -P -t orders -X security.protocol=sasl_plaintext -X sasl.mechanisms=PLAIN \
	-X sasl.username=admin -X sasl.password=admin-pw -X acks=all || fail_cl "admin's kcat produce"
pass "super user admin created topics and produced without any ACL"

# ---- 1. every request refused, the volume unchanged ---------------------------------
snap() {
	(cd "$T/data" && find . -type f \( ! -path './__cluster/*' -o -path './__cluster/topics/*' \
		-o -path './__cluster/acls/*' -o -path './__cluster/acls.version' -o -path './__cluster/groups/*' \) \
		-printf '%P %s\n' | sort &&
		find . -type f -name '*.log' -print0 | sort -z | xargs -0 md5sum)
}
sleep 1
snap > "$T/before"
$E denials "$S1" "$S2" || fail_cl "denials"
sleep 1
snap > "$T/after"
diff "$T/before" "$T/after" || fail_cl "refused requests changed the volume"
pass "without ACLs every request is refused; the volume is unchanged"
log_has() { grep -q -- "$1" "${CL_LOG[1]}" "${CL_LOG[2]}" || fail_cl "no '$1' in the brokers' logs"; }
log_has "Principal = User:alice is Denied Operation = DESCRIBE from host = 127.0.0.1 on resource = TOPIC:orders"
log_has "Principal = User:alice is Denied Operation = DESCRIBE from host = 127.0.0.1 on resource = GROUP:g-1"
log_has "Principal = User:alice is Denied Operation = CREATE from host = 127.0.0.1 on resource = TOPIC:alice-new"
log_has "Principal = User:alice is Denied Operation = DELETE from host = 127.0.0.1 on resource = TOPIC:orders"
log_has "Principal = User:bob is Denied Operation = DESCRIBE from host = 127.0.0.1 on resource = TRANSACTIONAL_ID:tx-bob"
log_has "Principal = User:alice is Denied Operation = ALTER from host = 127.0.0.1 on resource = CLUSTER:kafka-cluster"
pass "each refusal is in the brokers' logs as Kafka's authorizer logs it"

# ---- 2. the ACL APIs on the wire, every version --------------------------------------
$W denied "${CL_PORT[1]}" orders || fail_cl "the ACL APIs and every other API for User:ANONYMOUS"
snap > "$T/after"
diff "$T/before" "$T/after" || fail_cl "refused ACL requests changed the volume"
$PY - "$S1" <<'PY' || fail_cl "admin's ACL for User:ANONYMOUS"
import sys
from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                         ResourcePattern, ResourceType)
a = KafkaAdminClient(bootstrap_servers=sys.argv[1], security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                     sasl_plain_username="admin", sasl_plain_password="admin-pw")
r = a.create_acls([ACL("User:ANONYMOUS", "127.0.0.1", ACLOperation.ALTER, ACLPermissionType.ALLOW,
                       ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", ACLResourcePatternType.LITERAL))])
assert r["succeeded"] and not r["failed"], r
PY
eventually $W denied-no "${CL_PORT[2]}" || fail_cl "User:ANONYMOUS's ALTER on broker 2"
$W versions "${CL_PORT[2]}" || fail_cl "the ACL APIs v0-v3"
pass "CreateAcls, DescribeAcls, DeleteAcls v0-v3 on the wire (ALTER on the cluster implies DESCRIBE)"

# ---- 3. allow, then take back, on both brokers -----------------------------------------
$E allow "$S1" "$S2" $POLL || fail_cl "allow and take back"
log_has "FindCoordinator for transactional.id 'tx-alice': transactions are not supported"
log_has "Principal = User:bob is Denied Operation = WRITE from host = 127.0.0.1 on resource = TOPIC:orders"
log_has "Principal = User:bob is Denied Operation = READ from host = 127.0.0.1 on resource = TOPIC:orders"
log_has "Principal = User:bob is Denied Operation = READ from host = 127.0.0.1 on resource = GROUP:g-bob"
pass "ACLs made and removed through either broker apply on both within the poll bound"

# ---- 4. a hostile file ---------------------------------------------------------------
$PY - "$S1" <<'PY' || fail_cl "alice's WRITE again"
import sys
from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                         ResourcePattern, ResourceType)
a = KafkaAdminClient(bootstrap_servers=sys.argv[1], security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                     sasl_plain_username="admin", sasl_plain_password="admin-pw")
r = a.create_acls([ACL("User:alice", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                       ResourcePattern(ResourceType.TOPIC, "orders", ACLResourcePatternType.LITERAL))])
assert r["succeeded"] and not r["failed"], r
PY
eventually $E closed "$S2" ok || fail_cl "alice's WRITE"
BAD=$T/data/__cluster/acls/$(printf 'f%.0s' $(seq 1 64)).json
printf '{"version":1,"resource_type":"TOPIC"' > "$BAD"
# Nothing announces it: a broker finds it at its first request after the
# backstop listing period (30 polls, 6 s here).
t0=$(date +%s)
for _ in $(seq 1 60); do
	$E closed "$S2" denied > /dev/null 2>&1 && break
	sleep 0.5
done
echo "ok the hostile file took effect after $(($(date +%s) - t0)) s"
grep -q "acls/ffff.*\.json: refused (not a JSON object" "${CL_LOG[1]}" "${CL_LOG[2]}" || fail_cl "the hostile file is not refused by name"
$E closed "$S2" denied || fail_cl "the authorizer stays open with a refused file"
printf 'r4\n' | kcat -b "$S2" -P -t orders -X security.protocol=sasl_plaintext -X sasl.mechanisms=PLAIN \
	-X sasl.username=admin -X sasl.password=admin-pw -X acks=all || fail_cl "the super user with a refused file"
rm -f "$BAD"
eventually $E closed "$S2" ok || fail_cl "alice's WRITE after the hostile file was removed"
kill -0 "${CL_PID[1]}" && kill -0 "${CL_PID[2]}" || fail_cl "a broker died"
pass "a hostile ACL file is refused by name and denies all but super users until removed"
cluster_term 1
cluster_term 2
[ "${CL_RC[1]}" = 0 ] && [ "${CL_RC[2]}" = 0 ] || fail_cl "exit codes ${CL_RC[1]} ${CL_RC[2]}"

# ---- 5. TLS client certificates: the whole DN, as Kafka writes it ---------------------
CRT=$T/certs
ci/tls/gen_certs.sh "$CRT" > /dev/null || fail "certificates"
(cd "$CRT" && openssl req -utf8 -newkey rsa:2048 -nodes -keyout zoe.key -out zoe.csr \
	-subj "/CN=Zoë, the 2nd/OU=eng/O=kaas-test/emailAddress=z@example.com" &&
	printf 'extendedKeyUsage=clientAuth\n' > zoe.ext &&
	openssl x509 -req -in zoe.csr -CA ca.pem -CAkey ca.key -set_serial 4242 -out zoe.pem -extfile zoe.ext \
		-days 30) > "$T/zoe.log" 2>&1 || { cat "$T/zoe.log"; fail "zoe's certificate"; }
ZOE='User:1.2.840.113549.1.9.1=#160d7a406578616d706c652e636f6d,O=kaas-test,OU=eng,CN=Zoë\, the 2nd'
CL_ARGS=(--listen "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"
	--override sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256 --override "ssl.keystore.location=$CRT/server.keystore.pem"
	--override "ssl.truststore.location=$CRT/ca.pem" --override ssl.client.auth=required
	--override authorizer.class.name=kaas --override super.users=User:admin --override kaas.acl.poll.ms=$POLL
	--override broker.session.timeout.ms=5000)
CL_N=1
cluster_launch 1 || fail_cl "a broker with an SSL listener"
S1=127.0.0.1:$(sasl_port 1)
L1=127.0.0.1:$(grep -o 'listener SSL (SSL) on 127.0.0.1:[0-9]*' "${CL_LOG[1]}" | tail -1 | grep -o '[0-9]*$')
tls_produce() { # name
	printf 'tls\n' | kcat -b "$L1" -P -t orders -X security.protocol=ssl -X "ssl.ca.location=$CRT/ca.pem" \
		-X "ssl.certificate.location=$CRT/$1.pem" -X "ssl.key.location=$CRT/$1.key" -X acks=all \
		-X message.timeout.ms=5000 > "$T/tls.out" 2>&1 && ! grep -q ERROR "$T/tls.out"
}
tls_produce zoe && fail_cl "zoe produced without an ACL"
grep -qF "Principal = $ZOE is Denied Operation = DESCRIBE" "${CL_LOG[1]}" ||
	fail_cl "the principal is not the whole DN as Java's X500Principal.getName() writes it"
$PY - "$S1" "$ZOE" <<'PY' || fail_cl "ACLs for certificate principals"
import sys
from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType, KafkaAdminClient,
                         ResourcePattern, ResourceType)
a = KafkaAdminClient(bootstrap_servers=sys.argv[1], security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                     sasl_plain_username="admin", sasl_plain_password="admin-pw")
t = ResourcePattern(ResourceType.TOPIC, "orders", ACLResourcePatternType.LITERAL)
r = a.create_acls([ACL(sys.argv[2], "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, t),
                   ACL("User:CN=alice", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW, t)])
assert len(r["succeeded"]) == 2 and not r["failed"], r
PY
# the broker that created them applies them before it answers
tls_produce zoe || { cat "$T/tls.out"; fail_cl "zoe's produce with an ACL for her certificate's DN"; }
tls_produce client && fail_cl "an ACL for User:CN=alice let the certificate O=kaas-test,CN=alice in"
grep -qF "Principal = User:O=kaas-test,CN=alice is Denied" "${CL_LOG[1]}" || fail_cl "alice's certificate principal"
pass "TLS: the principal is the whole DN (UTF-8, escapes, OID=#hex) as in Kafka; ACLs for it apply, a CN alone does not"
cluster_term 1

# ---- 6. no authorizer ----------------------------------------------------------------
CL_ARGS=(--listen "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0" --override sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256
	--override broker.session.timeout.ms=5000)
CL_N=1
cluster_launch 1 || fail_cl "a broker without authorizer"
S1=127.0.0.1:$(sasl_port 1)
$W disabled "${CL_PORT[1]}" || fail_cl "SECURITY_DISABLED"
printf 'b1\n' | kcat -b "$S1" -P -t orders -X security.protocol=sasl_plaintext -X sasl.mechanisms=PLAIN \
	-X sasl.username=bob -X sasl.password=bob-pw -X acks=all || fail_cl "bob's produce without authorizer"
pass "without an authorizer everything is allowed and the ACL APIs answer SECURITY_DISABLED"
cluster_term 1
mkdir -p "$T/data2"
"$BIN/kaas" --data "$T/data2" --trust-unqualified --override authorizer.class.name=com.example.MyAuthorizer \
	> "$T/bad.log" 2>&1 && fail "an unknown authorizer class: the broker started"
grep -q "kaas cannot load a Java class" "$T/bad.log" || fail "an unknown authorizer class: $(cat "$T/bad.log")"
"$BIN/kaas" --data "$T/data2" --trust-unqualified --override authorizer.class.name=kaas \
	--override 'super.users=User:a;bob' > "$T/bad.log" 2>&1 && fail "a malformed super.users: the broker started"
grep -q 'super.users: "bob" is not a principal' "$T/bad.log" || fail "a malformed super.users: $(cat "$T/bad.log")"
pass "start-up refused by name: an unknown authorizer class, a malformed super.users"
echo "PASS ci/acl/test_acl.sh"
