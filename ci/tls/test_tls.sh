#!/bin/bash
# ci/tls/test_tls.sh — TLS listeners with the real clients.
#
# Certificates come from ci/tls/gen_certs.sh (openssl CLI).  One broker with
# three listeners: PLAINTEXT, SSL, and OUTSIDE (PLAINTEXT by
# listener.security.protocol.map, advertised as localhost:PORT).
#   1. ssl.client.auth=none, key and chain in one PEM (ssl.keystore.location):
#      kcat, confluent-kafka-python, kafka-python, kafkajs (a consumer group:
#      FindCoordinator must answer the SSL endpoint) and sarama produce over
#      TLS and read back; every record compared (ci/interop/spec.py, kcat_tool.py).
#      Metadata on each listener answers that listener's endpoint.
#   2. ssl.client.auth=required, certificate and encrypted key in files of
#      their own (ssl.certificate.location, ssl.key.location, ssl.key.password),
#      TLSv1.3 only: the same clients with a client certificate (mutual TLS); the
#      principal of the connection is the certificate's subject.  Refused, each
#      with its reason in the broker's log, while the broker keeps serving: no
#      client certificate, an expired one, one from an untrusted CA, a client
#      that does not trust the broker's CA, TLS 1.2 only, plaintext to the SSL
#      port, TLS to the PLAINTEXT port, a handshake that never finishes
#      (kaas.ssl.handshake.timeout.ms).  The volume is unchanged by all of it.
#   3. Settings refused at start-up by name.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh tls
spec() { $PY ci/interop/spec.py "$@"; }
K="$PY ci/interop/kcat_tool.py"
C="$PY ci/interop/confluent_e2e.py"
KP="$PY ci/interop/kafka_python_e2e.py"
CRT=$T/certs
ci/tls/gen_certs.sh "$CRT" || fail "certificates"
N=2000
H=$((N / 2))
T0=$(($(date +%s%3N) - 3600000))

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
OUT_PORT=$(free_port)

# Starts the broker with the three listeners and SETTINGS...; sets SSL_PORT.
start() {
	broker_start "$T/data" --listen "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,OUTSIDE://127.0.0.1:$OUT_PORT" \
		--override listener.security.protocol.map=OUTSIDE:PLAINTEXT \
		--override "advertised.listeners=OUTSIDE://localhost:$OUT_PORT" \
		--override num.partitions=3 --override group.initial.rebalance.delay.ms=100 "$@" ||
		fail "broker start"
	SSL_PORT=$(grep -o 'listener SSL (SSL) on 127.0.0.1:[0-9]*' "$BROKER_LOG" | tail -1 | grep -o '[0-9]*$')
	[ -n "$SSL_PORT" ] || fail "no SSL listener in the log"
	SSL=127.0.0.1:$SSL_PORT
}
stop() {
	broker_stop
	[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
}

kc_tls=(-X security.protocol=ssl -X "ssl.ca.location=$CRT/ca.pem")
kc_me=(-X "ssl.certificate.location=$CRT/client.pem" -X "ssl.key.location=$CRT/client.key")

# kcat over TLS: produce (in two halves, as kcat_tool.py expects), consume,
# compare.  ARGS: topic, then extra -X.
kcat_round() {
	local t=$1
	shift
	$K gen none 0 $H | kcat -b "$SSL" -P -t "$t" -K $'\t' -X acks=all -X linger.ms=20 \
		-H half=1 -H dup=a -H dup=b -H empty= "$@" || fail "kcat -P $t over TLS"
	$K gen none $H $N | kcat -b "$SSL" -P -t "$t" -K $'\t' -X acks=all -X linger.ms=20 \
		-H half=2 -H dup=a -H dup=b -H empty= "$@" || fail "kcat -P $t over TLS"
	kcat -b "$SSL" -C -t "$t" -o beginning -e -q "$@" -f '%p\t%o\t%T\t%k\t%s\t%h\n' > "$T/$t.c" ||
		fail "kcat -C $t over TLS"
	$K check none $N 3 "$T/$t.c" > /dev/null || fail "$t: consumed != produced (kcat)"
	pass "kcat over TLS ($t): $N records compared"
}

# The Python clients, kafkajs and sarama over TLS (KAAS_TLS_* set by the caller).
clients_round() {
	local s=$1
	$C produce "$SSL" "cf-$s" "cf$s" "$T0" 0 $N "$T/cf$s.p" --codec=lz4 || fail "confluent produce ($s)"
	$C consume "$SSL" "cf-$s" "$T/cf$s.c" || fail "confluent consume ($s)"
	spec check "cf$s" "$T0" "$T/cf$s.p" "$T/cf$s.c" --expect=$N || fail "confluent ($s): consumed != produced"
	$KP produce "$SSL" "kp-$s" "kp$s" "$T0" 0 $N "$T/kp$s.p" || fail "kafka-python produce ($s)"
	$KP consume "$SSL" "kp-$s" "$T/kp$s.c" || fail "kafka-python consume ($s)"
	spec check "kp$s" "$T0" "$T/kp$s.p" "$T/kp$s.c" --expect=$N || fail "kafka-python ($s): consumed != produced"
	spec records "kj$s" "$T0" 0 $N > "$T/kj$s.r"
	$J produce "$SSL" "kj-$s" "$T/kj$s.r" "$T/kj$s.p" --gzip || fail "kafkajs produce ($s)"
	touch "$T/kj$s.go" "$T/kj$s.go.2"
	$J group "$SSL" "kj-$s" "kj-group-$s" $N "$T/kj$s.c" "$T/kj$s.progress" "$T/kj$s.go" ||
		fail "kafkajs consumer group ($s)"
	spec check "kj$s" "$T0" "$T/kj$s.p" "$T/kj$s.c" --expect=$N || fail "kafkajs ($s): consumed != produced"
	$S admin "$SSL" "sr-$s" || fail "sarama admin ($s)"
	spec records "sr$s" "$T0" 0 $N > "$T/sr$s.r"
	$S produce "$SSL" "sr-$s" "$T/sr$s.r" "$T/sr$s.p" zstd || fail "sarama produce ($s)"
	$S consume "$SSL" "sr-$s" "$T/sr$s.c" || fail "sarama consume ($s)"
	spec check "sr$s" "$T0" "$T/sr$s.p" "$T/sr$s.c" --expect=$N || fail "sarama ($s): consumed != produced"
}

# Metadata on a listener names the endpoint of that listener.
meta_is() { # bootstrap want kcat-args...
	local b=$1 want=$2
	shift 2
	kcat -L -b "$b" -m 15 "$@" > "$T/md" 2>&1 || { cat "$T/md"; fail "kcat -L $b"; }
	grep -q "broker 1 at $want " "$T/md" || { cat "$T/md"; fail "Metadata via $b does not advertise $want"; }
}

# ---- the clients' tools ---------------------------------------------------------
command -v node >/dev/null || fail "node is not installed (make deps-test)"
npm install --silent --no-audit --no-fund --prefix "$T/npm" kafkajs@2 >"$T/npm.log" 2>&1 ||
	{ cat "$T/npm.log"; fail "npm install kafkajs@2"; }
export NODE_PATH=$T/npm/node_modules KAFKAJS_NO_PARTITIONER_WARNING=1
J="node ci/interop/kafkajs_e2e.js"
GO111MODULE=off GOPATH="$T/gopath:/usr/share/gocode" GOCACHE="$T/gocache" GOFLAGS= \
	go build -o "$T/sarama_e2e" ci/interop/sarama_e2e.go >"$T/build.log" 2>&1 ||
	{ cat "$T/build.log"; fail "go build sarama_e2e"; }
S="$T/sarama_e2e"

# ---- 1. server-only TLS ---------------------------------------------------------
start --override "ssl.keystore.location=$CRT/server.keystore.pem"
meta_is "$BROKER" "$BROKER"
meta_is "$SSL" "$SSL" "${kc_tls[@]}"
meta_is "127.0.0.1:$OUT_PORT" "localhost:$OUT_PORT"
pass "three listeners, Metadata answers each one's own endpoint"
kcat_round kc-tls "${kc_tls[@]}"
export KAAS_TLS_CA=$CRT/ca.pem
clients_round tls
pass "server-only TLS: confluent-kafka, kafka-python, kafkajs (group), sarama: $N records each compared"
# What went in over TLS reads back over plaintext.
kcat -b "$BROKER" -C -t cf-tls -o beginning -e -q -f '%o\n' | grep -c . > "$T/n" || true
[ "$(cat "$T/n")" = $N ] || fail "cf-tls over PLAINTEXT: $(cat "$T/n") records, want $N"
stop

# ---- 2. mutual TLS and refusals --------------------------------------------------
KAAS_LOG_LEVEL=debug start --override "ssl.certificate.location=$CRT/server.pem" \
	--override "ssl.key.location=$CRT/server.enc.key" --override ssl.key.password=kaas-secret \
	--override "ssl.truststore.location=$CRT/ca.pem" --override ssl.client.auth=required \
	--override ssl.enabled.protocols=TLSv1.3 --override kaas.ssl.handshake.timeout.ms=1500 \
	--override ssl.cipher.suites=TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256
kcat_round kc-mtls "${kc_tls[@]}" "${kc_me[@]}"
grep -q "principal User:O=kaas-test,CN=alice" "$BROKER_LOG" ||
	fail "the client certificate's subject is not the connection's principal"
grep -q "TLSv1.3 TLS_AES_256_GCM_SHA384 on listener SSL" "$BROKER_LOG" ||
	fail "ssl.cipher.suites / ssl.enabled.protocols were not what was negotiated"
! grep -q "TLSv1.3 TLS_AES_128_GCM_SHA256" "$BROKER_LOG" || fail "a cipher suite outside ssl.cipher.suites was used"
export KAAS_TLS_CERT=$CRT/client.pem KAAS_TLS_KEY=$CRT/client.key
clients_round mtls
pass "mutual TLS: kcat, confluent-kafka, kafka-python, kafkajs (group), sarama: $N records each compared"
unset KAAS_TLS_CA KAAS_TLS_CERT KAAS_TLS_KEY

# The partitions and the topic registry: names, sizes, segment contents.  The
# rest of the cluster directory changes on the broker's own timers (its
# heartbeat, old assignment versions collected), whoever connects.
snap() {
	(cd "$T/data" && find . -type f \( ! -path './__cluster/*' -o -path './__cluster/topics/*' \) \
		-printf '%P %s\n' | sort &&
		find . -type f -name '*.log' -print0 | sort -z | xargs -0 md5sum)
}
sleep 1
snap > "$T/before"
grep -q "\.log$" "$T/before" || fail "the volume snapshot holds no segment file"
# The broker's log from line $1 into $T/since (`tail | grep -q` under
# pipefail fails when grep stops reading a long log early).
since() { tail -n +"$1" "$BROKER_LOG" > "$T/since"; }
# refused: kcat args..., and what the broker's log must say
refused() { # what log-pattern kcat-args...
	local what=$1 pat=$2
	shift 2
	local from=$(($(wc -l < "$BROKER_LOG") + 1))
	if kcat -L -m 4 "$@" > "$T/r.out" 2>&1; then
		cat "$T/r.out"
		fail "$what: the connection was accepted"
	fi
	for _ in $(seq 1 50); do since "$from" && grep -q -- "$pat" "$T/since" && break; sleep 0.1; done
	since "$from"
	grep -q -- "$pat" "$T/since" || fail "$what: the broker's log does not say '$pat'"
	kill -0 "$BROKER_PID" || fail "$what: the broker died"
	pass "refused: $what"
}
refused "no client certificate" "peer did not return a certificate" -b "$SSL" "${kc_tls[@]}"
refused "an expired client certificate" "certificate has expired" -b "$SSL" "${kc_tls[@]}" \
	-X "ssl.certificate.location=$CRT/oldclient.pem" -X "ssl.key.location=$CRT/oldclient.key"
refused "a client certificate from an untrusted CA" "unable to get local issuer certificate" -b "$SSL" \
	"${kc_tls[@]}" -X "ssl.certificate.location=$CRT/badclient.pem" -X "ssl.key.location=$CRT/badclient.key"
refused "a client that does not trust the broker's CA" "refused" -b "$SSL" -X security.protocol=ssl \
	-X "ssl.ca.location=$CRT/otherca.pem" "${kc_me[@]}"
from=$(($(wc -l < "$BROKER_LOG") + 1))
if openssl s_client -connect "$SSL" -tls1_2 -CAfile "$CRT/ca.pem" -cert "$CRT/client.pem" -key "$CRT/client.key" \
	</dev/null > "$T/s.out" 2>&1; then
	cat "$T/s.out"
	fail "a TLS 1.2 client was accepted with ssl.enabled.protocols=TLSv1.3"
fi
sleep 0.5
since "$from"
grep -q "unsupported protocol" "$T/since" || fail "TLS 1.2: no 'unsupported protocol' in the log"
pass "refused: a TLS 1.2 client on a TLSv1.3 listener"
refused "plaintext to the SSL port" "not TLS: a plaintext client" -b "$SSL"
refused "TLS to the PLAINTEXT port" "a TLS handshake on the PLAINTEXT listener" -b "$BROKER" "${kc_tls[@]}" "${kc_me[@]}"
# A client that connects and never finishes its handshake is dropped.
from=$(($(wc -l < "$BROKER_LOG") + 1))
$PY - "$SSL_PORT" <<'EOF' || fail "a silent client on the SSL port was not dropped"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(10)
t = time.time()
s.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
try:
    got = s.recv(100)
except socket.timeout:
    sys.exit("still open after 10 s")
print("ok: closed after %.1f s (%r)" % (time.time() - t, got[:10]))
EOF
grep -q "TLS handshake not finished within kaas.ssl.handshake.timeout.ms" <(tail -n +$from "$BROKER_LOG") ||
	fail "the handshake timeout is not in the log"
# The broker still serves mutual TLS after all of it.
kcat -L -m 10 -b "$SSL" "${kc_tls[@]}" "${kc_me[@]}" > /dev/null || fail "mutual TLS after the refusals"
snap > "$T/after"
diff "$T/before" "$T/after" || fail "the refused connections changed the volume"
pass "the volume is unchanged by every refused connection"
stop

# ---- per-listener TLS: listener.name.<name>.ssl.* over ssl.* ------------------------
# SSL asks for no client certificate; INTERNAL (an SSL listener too) requires one.
IN_PORT=$(free_port)
broker_start "$T/data" --listen "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,INTERNAL://127.0.0.1:$IN_PORT" \
	--override listener.security.protocol.map=INTERNAL:SSL \
	--override "ssl.keystore.location=$CRT/server.keystore.pem" \
	--override "listener.name.internal.ssl.truststore.location=$CRT/ca.pem" \
	--override listener.name.internal.ssl.client.auth=required || fail "broker start (per-listener TLS)"
SSL_PORT=$(grep -o 'listener SSL (SSL) on 127.0.0.1:[0-9]*' "$BROKER_LOG" | tail -1 | grep -o '[0-9]*$')
kcat -L -m 10 -b "127.0.0.1:$SSL_PORT" "${kc_tls[@]}" > /dev/null || fail "SSL without a client certificate"
if kcat -L -m 4 -b "127.0.0.1:$IN_PORT" "${kc_tls[@]}" > "$T/in.out" 2>&1; then
	cat "$T/in.out"
	fail "INTERNAL accepted a client without a certificate"
fi
kcat -L -m 10 -b "127.0.0.1:$IN_PORT" "${kc_tls[@]}" "${kc_me[@]}" > /dev/null || fail "INTERNAL with a client certificate"
grep -q "peer did not return a certificate" "$BROKER_LOG" || fail "INTERNAL's refusal is not in the log"
stop
pass "per listener: SSL without client certificates, INTERNAL (listener.name.internal.ssl.client.auth=required) only with one"

# ---- 3. settings refused at start-up ------------------------------------------------
bad() { broker_refuses "$@"; }
bad "SSL listener without a keystore" "needs ssl.keystore.location" --listen SSL://127.0.0.1:0
bad "wrong key password" "ssl.key.location" --listen SSL://127.0.0.1:0 \
	--override "ssl.certificate.location=$CRT/server.pem" --override "ssl.key.location=$CRT/server.enc.key" \
	--override ssl.key.password=wrong
bad "client auth without a truststore" "needs ssl.truststore.location" --listen SSL://127.0.0.1:0 \
	--override "ssl.keystore.location=$CRT/server.keystore.pem" --override ssl.client.auth=required
bad "TLSv1.1" "TLSv1.1" --listen SSL://127.0.0.1:0 \
	--override "ssl.keystore.location=$CRT/server.keystore.pem" --override ssl.enabled.protocols=TLSv1.1
bad "an unknown cipher suite" "unknown cipher suite" --listen SSL://127.0.0.1:0 \
	--override "ssl.keystore.location=$CRT/server.keystore.pem" --override ssl.cipher.suites=TLS_NOPE
bad "a JKS keystore" "PEM files only" --override ssl.keystore.type=JKS
bad "a name without a protocol" "does not name it" --listen INSIDE://127.0.0.1:0
bad "a per-listener setting for no listener" "no listener is named OTHER" --listen SSL://127.0.0.1:0 \
	--override "ssl.keystore.location=$CRT/server.keystore.pem" --override listener.name.OTHER.ssl.client.auth=none
bad "a per-listener setting that is not ssl.*" "only ssl.\* settings" \
	--override listener.name.ssl.num.partitions=3
bad "a bad per-listener value" "listener.name.ssl.ssl.client.auth" \
	--override listener.name.ssl.ssl.client.auth=sometimes
echo "PASS ci/tls/test_tls.sh"
