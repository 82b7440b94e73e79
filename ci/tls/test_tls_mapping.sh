#!/bin/bash
# ci/tls/test_tls_mapping.sh — ssl.principal.mapping.rules (KIP-371) end to
# end: mutual TLS, the authorizer, and the short names the rules give.
#
# Certificates from ci/tls/gen_certs.sh plus, from the same CA, carol and ops
# (O=kaas-test) and dave (O=elsewhere).  One broker: PLAINTEXT (for set-up,
# User:ANONYMOUS a super user) and SSL with ssl.client.auth=required and
#   ssl.principal.mapping.rules=RULE:^O=kaas-test,CN=([A-Za-z]+)$/$1/L
#   1. mapping_e2e.py: an ACL on User:alice lets alice produce and read back
#      (confluent-kafka); carol, whose whole DN has an ACL but whose mapped
#      name has none, is refused (confluent-kafka, kafka-python); ops is a
#      super user by its mapped name.  The broker's log shows the mapping.
#   2. dave's DN matches no rule (there is no DEFAULT): the connection is
#      refused, named in the log; the broker keeps serving.
#   3. Per listener: another SSL listener without rules keeps the whole DN.
#   4. A bad rule is refused at start-up, naming the rule (broker-wide and
#      per listener).
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh tls-mapping
CRT=$T/certs
ci/tls/gen_certs.sh "$CRT" || fail "certificates"
leaf() { # name subject
	openssl req -newkey rsa:2048 -nodes -keyout "$CRT/$1.key" -out "$CRT/$1.csr" -subj "$2" 2>/dev/null &&
		printf 'extendedKeyUsage=clientAuth\n' > "$CRT/$1.ext" &&
		openssl x509 -req -in "$CRT/$1.csr" -CA "$CRT/ca.pem" -CAkey "$CRT/ca.key" -set_serial "$RANDOM$RANDOM" \
			-out "$CRT/$1.pem" -extfile "$CRT/$1.ext" -days 30 2>/dev/null || fail "certificate $1"
}
leaf carol "/CN=carol/O=kaas-test"
leaf ops "/CN=Ops/O=kaas-test"
leaf dave "/CN=dave/O=elsewhere"
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
RAW_PORT=$(free_port)
RULES='RULE:^O=kaas-test,CN=([A-Za-z]+)$/$1/L'

KAAS_LOG_LEVEL=debug broker_start "$T/data" \
	--listen "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,RAW://127.0.0.1:$RAW_PORT" \
	--override listener.security.protocol.map=RAW:SSL \
	--override "ssl.keystore.location=$CRT/server.keystore.pem" \
	--override "ssl.truststore.location=$CRT/ca.pem" --override ssl.client.auth=required \
	--override "listener.name.ssl.ssl.principal.mapping.rules=$RULES" \
	--override authorizer.class.name=kaas --override 'super.users=User:ANONYMOUS;User:ops' \
	--override kaas.acl.poll.ms=100 --override auto.create.topics.enable=false || fail "broker start"
SSL=127.0.0.1:$(grep -o 'listener SSL (SSL) on 127.0.0.1:[0-9]*' "$BROKER_LOG" | tail -1 | grep -o '[0-9]*$')

# ---- 1. ACLs and super.users see the mapped names ---------------------------------------
$PY ci/tls/mapping_e2e.py "$BROKER" "$SSL" "$CRT" || fail "mapping_e2e.py"
grep -q "ssl.principal.mapping.rules map O=kaas-test,CN=alice to alice" "$BROKER_LOG" || fail "alice's mapping in the log"
grep -q "ssl.principal.mapping.rules map O=kaas-test,CN=Ops to ops" "$BROKER_LOG" || fail "ops's mapping (lower-cased)"
grep -q "on listener SSL, principal User:carol," "$BROKER_LOG" || fail "carol's principal in the log"
pass "ACLs and super.users see the names the rules give: alice allowed, carol denied, ops a super user"

# ---- 2. a DN no rule maps --------------------------------------------------------------
from=$(($(wc -l < "$BROKER_LOG") + 1))
if kcat -L -m 4 -b "$SSL" -X security.protocol=ssl -X "ssl.ca.location=$CRT/ca.pem" \
	-X "ssl.certificate.location=$CRT/dave.pem" -X "ssl.key.location=$CRT/dave.key" > "$T/d.out" 2>&1; then
	cat "$T/d.out"
	fail "dave's certificate, which no rule maps, was accepted"
fi
for _ in $(seq 1 50); do
	grep -q "client certificate O=elsewhere,CN=dave on listener SSL refused: no rule" <(tail -n +"$from" "$BROKER_LOG") && break
	sleep 0.1
done
grep -q "client certificate O=elsewhere,CN=dave on listener SSL refused: no rule of ssl.principal.mapping.rules applies to it" <(tail -n +"$from" "$BROKER_LOG") ||
	fail "dave's refusal is not in the log"
kill -0 "$BROKER_PID" || fail "the broker died"
pass "a certificate no rule maps is refused, named in the log"

# ---- 3. a listener without rules keeps the whole DN -------------------------------------
kcat -L -m 10 -b "127.0.0.1:$RAW_PORT" -X security.protocol=ssl -X "ssl.ca.location=$CRT/ca.pem" \
	-X "ssl.certificate.location=$CRT/dave.pem" -X "ssl.key.location=$CRT/dave.key" > /dev/null ||
	fail "dave on RAW (no rules)"
grep -q "on listener RAW, principal User:O=elsewhere,CN=dave," "$BROKER_LOG" || fail "RAW did not keep the whole DN"
pass "RAW, without rules of its own (DEFAULT), keeps the whole DN: User:O=elsewhere,CN=dave"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"

# ---- 4. bad rules refused at start-up ---------------------------------------------------
bad() { broker_refuses -F "$@"; }
bad "a rule with a bad flag" "ssl.principal.mapping.rules: invalid rule 'RULE:^CN=(.*)\$/\$1/X'" \
	--override 'ssl.principal.mapping.rules=DEFAULT, RULE:^CN=(.*)$/$1/X'
bad "a pattern that does not compile" "invalid rule 'RULE:^CN=(.*\$/\$1/' (the pattern does not compile" \
	--override 'ssl.principal.mapping.rules=RULE:^CN=(.*$/$1/'
bad "a group the pattern lacks, on one listener" \
	"listener.name.ssl.ssl.principal.mapping.rules: invalid rule 'RULE:^CN=.*\$/\$1/' (the replacement names group \$1" \
	--listen SSL://127.0.0.1:0 --override "ssl.keystore.location=$CRT/server.keystore.pem" \
	--override 'listener.name.ssl.ssl.principal.mapping.rules=RULE:^CN=.*$/$1/'
bad "no rule at all" "ssl.principal.mapping.rules: no rule" --override 'ssl.principal.mapping.rules= , '
echo "PASS ci/tls/test_tls_mapping.sh"
