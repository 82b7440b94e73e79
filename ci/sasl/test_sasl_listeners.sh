#!/bin/bash
# ci/sasl/test_sasl_listeners.sh — per-listener SASL settings
# (listener.name.<name>.sasl.enabled.mechanisms & co.) with real clients.
#
# One broker, three SASL_PLAINTEXT listeners and the broker-wide
# sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256:
#   SASL_PLAINTEXT  its own mechanisms PLAIN; connections.max.reauth.ms
#                   600000 for the listener, 2000 for PLAIN on it
#                   (listener.name.sasl_plaintext.plain.connections.max.reauth.ms)
#   INTERNAL        its own mechanisms SCRAM-SHA-512, its own
#                   sasl.server.max.receive.size=2000
#   OTHER           nothing of its own: the broker-wide settings
#   1. kcat, confluent-kafka and kafka-python produce and read back with the
#      mechanism each listener offers; every record compared.
#   2. Refused with the mechanism a listener does not offer: kcat and
#      confluent-kafka with PLAIN on INTERNAL (both told what INTERNAL offers),
#      kafka-python with SCRAM-SHA-512 on SASL_PLAINTEXT; by hand,
#      SaslHandshake answers UNSUPPORTED_SASL_MECHANISM with the listener's own
#      list and closes.  The broker's log names the listener.
#   3. The session lifetime and the frame limit before authentication are
#      each listener's own.
#   4. Per-listener settings refused at start-up, each by its full key.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh sasl-listeners
spec() { $PY ci/interop/spec.py "$@"; }
K="$PY ci/interop/kcat_tool.py"
C="$PY ci/interop/confluent_e2e.py"
KP="$PY ci/interop/kafka_python_e2e.py"
W="$PY ci/sasl/sasl_wire.py"
N=300
T0=$(($(date +%s%3N) - 3600000))
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
IN_PORT=$(free_port)
OT_PORT=$(free_port)

broker_start "$T/data" \
	--listen "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:$IN_PORT,OTHER://127.0.0.1:$OT_PORT" \
	--override listener.security.protocol.map=INTERNAL:SASL_PLAINTEXT,OTHER:SASL_PLAINTEXT \
	--override sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256 \
	--override listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN \
	--override listener.name.sasl_plaintext.connections.max.reauth.ms=600000 \
	--override listener.name.sasl_plaintext.plain.connections.max.reauth.ms=2000 \
	--override listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512 \
	--override listener.name.INTERNAL.sasl.server.max.receive.size=2000 \
	--override num.partitions=3 || fail "broker start"
SP=127.0.0.1:$(grep -o 'listener SASL_PLAINTEXT (SASL_PLAINTEXT) on 127.0.0.1:[0-9]*' "$BROKER_LOG" | tail -1 |
	grep -o '[0-9]*$')
IN=127.0.0.1:$IN_PORT
OT=127.0.0.1:$OT_PORT
grep -q "SASL on listener INTERNAL: mechanisms SCRAM-SHA-512," "$BROKER_LOG" || fail "INTERNAL's mechanisms in the log"
grep -q "SASL on listener SASL_PLAINTEXT: mechanisms PLAIN, connections.max.reauth.ms=600000, PLAIN 2000 ms" \
	"$BROKER_LOG" || fail "SASL_PLAINTEXT's settings in the log"
grep -q "SASL on listener OTHER: mechanisms PLAIN,SCRAM-SHA-256, connections.max.reauth.ms=0," "$BROKER_LOG" ||
	fail "OTHER does not have the broker-wide settings"
printf 'alice-pw\n' | "$BIN/kaas" users add --user alice --cluster-dir "$T/data/__cluster" > /dev/null ||
	fail "kaas users add"

# ---- 1. each listener's own mechanism, three clients --------------------------------
sasl() { echo -X security.protocol=sasl_plaintext -X sasl.mechanisms="$1" -X sasl.username=alice -X sasl.password=alice-pw; }
kc_round() { # bootstrap mechanism topic
	# shellcheck disable=SC2046 # sasl prints words
	$K gen none 0 $N | kcat -b "$1" -P -t "$3" -K $'\t' -X acks=all $(sasl "$2") || fail "kcat -P $3 ($2 on $1)"
	# shellcheck disable=SC2046
	kcat -b "$1" -C -t "$3" -o beginning -e -q -f '%k\n' $(sasl "$2") > "$T/$3.c" || fail "kcat -C $3"
	[ "$(grep -c . "$T/$3.c")" = $N ] || fail "kcat $3: $(grep -c . "$T/$3.c") records, want $N"
}
kc_round "$SP" PLAIN kc-sp
kc_round "$IN" SCRAM-SHA-512 kc-in
kc_round "$OT" SCRAM-SHA-256 kc-ot
pass "kcat: PLAIN on SASL_PLAINTEXT, SCRAM-SHA-512 on INTERNAL, SCRAM-SHA-256 on OTHER (broker-wide), $N records each"
export KAAS_SASL_USER=alice KAAS_SASL_PASS=alice-pw
KAAS_SASL_MECH=SCRAM-SHA-512 $C produce "$IN" cf-in cfin "$T0" 0 $N "$T/cfin.p" || fail "confluent produce (INTERNAL)"
KAAS_SASL_MECH=SCRAM-SHA-512 $C consume "$IN" cf-in "$T/cfin.c" || fail "confluent consume (INTERNAL)"
spec check cfin "$T0" "$T/cfin.p" "$T/cfin.c" --expect=$N || fail "confluent (INTERNAL): consumed != produced"
KAAS_SASL_MECH=PLAIN $KP produce "$SP" kp-sp kpsp "$T0" 0 $N "$T/kpsp.p" || fail "kafka-python produce (SASL_PLAINTEXT)"
KAAS_SASL_MECH=PLAIN $KP consume "$SP" kp-sp "$T/kpsp.c" || fail "kafka-python consume (SASL_PLAINTEXT)"
spec check kpsp "$T0" "$T/kpsp.p" "$T/kpsp.c" --expect=$N || fail "kafka-python (SASL_PLAINTEXT): consumed != produced"
pass "confluent-kafka with SCRAM-SHA-512 on INTERNAL, kafka-python with PLAIN on SASL_PLAINTEXT: $N records each compared"

# ---- 2. the mechanism a listener does not offer --------------------------------------
since() { tail -n +"$1" "$BROKER_LOG" > "$T/since"; }
logged() { # from pattern what
	for _ in $(seq 1 50); do since "$1" && grep -q -- "$2" "$T/since" && return 0; sleep 0.1; done
	fail "$3: the broker's log does not say '$2'"
}
from=$(($(wc -l < "$BROKER_LOG") + 1))
# shellcheck disable=SC2046
if kcat -L -m 4 -b "$IN" $(sasl PLAIN) > "$T/r.out" 2>&1; then
	cat "$T/r.out"
	fail "kcat with PLAIN on INTERNAL (SCRAM-SHA-512 only) was accepted"
fi
grep -q "SCRAM-SHA-512" "$T/r.out" || { cat "$T/r.out"; fail "kcat is not told what INTERNAL offers"; }
logged "$from" "SASL handshake on listener INTERNAL failed: mechanism 'PLAIN' is not enabled" "kcat PLAIN on INTERNAL"
pass "kcat: PLAIN refused on INTERNAL, told it offers SCRAM-SHA-512 ($(grep -o '[^:]*SCRAM-SHA-512[^)]*' "$T/r.out" | head -1))"
from=$(($(wc -l < "$BROKER_LOG") + 1))
$PY - "$IN" <<'EOF' || fail "confluent-kafka with PLAIN on INTERNAL"
import sys
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
errs = []
a = AdminClient({"bootstrap.servers": sys.argv[1], "security.protocol": "sasl_plaintext", "sasl.mechanisms": "PLAIN",
                 "sasl.username": "alice", "sasl.password": "alice-pw", "error_cb": lambda e: errs.append(str(e))})
try:
    a.list_topics(timeout=4)
    sys.exit("FAIL: Metadata answered over PLAIN on a SCRAM-SHA-512 listener")
except KafkaException:
    pass
for _ in range(20):  # error_cb is served by poll()
    if any("SCRAM-SHA-512" in e for e in errs):
        break
    a.poll(0.5)
if not any("SCRAM-SHA-512" in e for e in errs):
    sys.exit("FAIL: librdkafka was not told the listener's mechanisms: %s" % errs)
print("ok confluent-kafka refused: %s" % next(e for e in errs if "SCRAM-SHA-512" in e))
EOF
logged "$from" "SASL handshake on listener INTERNAL failed: mechanism 'PLAIN' is not enabled" "confluent PLAIN on INTERNAL"
# kafka-python raises the handshake's error only if it reads the answer before
# it sees the connection close (Kafka closes too): it gives up on the broker.
from=$(($(wc -l < "$BROKER_LOG") + 1))
$PY - "$SP" <<'EOF' || fail "kafka-python with SCRAM-SHA-512 on SASL_PLAINTEXT"
import sys
from kafka import KafkaAdminClient
from kafka.errors import NoBrokersAvailable, UnsupportedSaslMechanismError
try:
    KafkaAdminClient(bootstrap_servers=sys.argv[1], security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
                     sasl_plain_username="alice", sasl_plain_password="alice-pw", request_timeout_ms=5000)
    sys.exit("FAIL: kafka-python authenticated with SCRAM-SHA-512 on a PLAIN listener")
except (NoBrokersAvailable, UnsupportedSaslMechanismError) as e:
    print("ok kafka-python refused: %r" % e)
EOF
logged "$from" "SASL handshake on listener SASL_PLAINTEXT failed: mechanism 'SCRAM-SHA-512' is not enabled" \
	"kafka-python SCRAM-SHA-512 on SASL_PLAINTEXT"
$W offers 127.0.0.1 "$IN_PORT" PLAIN 33 SCRAM-SHA-512 || fail "SaslHandshake PLAIN on INTERNAL"
$W offers 127.0.0.1 "${SP#*:}" SCRAM-SHA-256 33 PLAIN || fail "SaslHandshake SCRAM-SHA-256 on SASL_PLAINTEXT"
$W offers 127.0.0.1 "$OT_PORT" SCRAM-SHA-512 33 PLAIN,SCRAM-SHA-256 || fail "SaslHandshake SCRAM-SHA-512 on OTHER"
$W offers 127.0.0.1 "$OT_PORT" SCRAM-SHA-256 0 PLAIN,SCRAM-SHA-256 || fail "SaslHandshake SCRAM-SHA-256 on OTHER"
pass "SaslHandshake: UNSUPPORTED_SASL_MECHANISM with each listener's own mechanisms, then closed"
kill -0 "$BROKER_PID" || fail "the broker died"

# ---- 3. session lifetime and frame limit per listener ------------------------------------
[ "$($W lifetime 127.0.0.1 "${SP#*:}" alice alice-pw)" = 2000 ] || fail "PLAIN on SASL_PLAINTEXT: session lifetime"
[ "$($W lifetime 127.0.0.1 "$OT_PORT" alice alice-pw)" = 0 ] || fail "PLAIN on OTHER: a session lifetime"
$W expire 127.0.0.1 "${SP#*:}" alice alice-pw 2000 || fail "the PLAIN session on SASL_PLAINTEXT did not end"
pass "session_lifetime_ms: 2000 for PLAIN on SASL_PLAINTEXT (mechanism over listener), none on OTHER"
$W frame 127.0.0.1 "$OT_PORT" 4000 answered || fail "a 4000-byte frame on OTHER"
from=$(($(wc -l < "$BROKER_LOG") + 1))
$W frame 127.0.0.1 "$IN_PORT" 4000 closed || fail "a 4000-byte frame on INTERNAL"
logged "$from" "sasl.server.max.receive.size, before SASL authentication" "the frame on INTERNAL"
$W frame 127.0.0.1 "$IN_PORT" 1500 answered || fail "a 1500-byte frame on INTERNAL"
pass "sasl.server.max.receive.size: 2000 on INTERNAL (4000 bytes closed, 1500 answered), the default on OTHER"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"

# ---- 4. refused at start-up, by the full key -------------------------------------------
bad() { broker_refuses "$@"; }
bad "an unknown mechanism for one listener" \
	"listener.name.sasl_plaintext.sasl.enabled.mechanisms: invalid value 'PLAIN,MD5' ('MD5' is not a SASL mechanism" \
	--listen SASL_PLAINTEXT://127.0.0.1:0 --override listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,MD5
bad "a bad lifetime for one mechanism" "listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms: invalid value 'soon'" \
	--listen SASL_PLAINTEXT://127.0.0.1:0 --override listener.name.sasl_plaintext.scram-sha-256.connections.max.reauth.ms=soon
bad "a tiny receive size for one listener" "listener.name.sasl_plaintext.sasl.server.max.receive.size: invalid value '10'" \
	--listen SASL_PLAINTEXT://127.0.0.1:0 --override listener.name.sasl_plaintext.sasl.server.max.receive.size=10
bad "SASL settings for a listener without SASL" \
	"listener.name.plaintext.sasl.enabled.mechanisms: listener PLAINTEXT is PLAINTEXT, it has no SASL" \
	--listen PLAINTEXT://127.0.0.1:0 --override listener.name.plaintext.sasl.enabled.mechanisms=PLAIN
bad "SASL settings for no listener" "listener.name.outside.sasl.enabled.mechanisms: no listener is named outside" \
	--listen SASL_PLAINTEXT://127.0.0.1:0 --override listener.name.outside.sasl.enabled.mechanisms=PLAIN
bad "a SASL setting Kafka does not take per listener" "only ssl.\* settings, sasl.enabled.mechanisms" \
	--listen SASL_PLAINTEXT://127.0.0.1:0 --override listener.name.sasl_plaintext.sasl.kerberos.service.name=kafka
echo "PASS ci/sasl/test_sasl_listeners.sh"
