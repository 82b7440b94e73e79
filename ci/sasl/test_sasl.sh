#!/bin/bash
# ci/sasl/test_sasl.sh — SASL listeners with the real clients.
#
# One broker with three listeners: PLAINTEXT, SASL_PLAINTEXT and SASL_SSL
# (certificates from ci/tls/gen_certs.sh), sasl.enabled.mechanisms with all
# three mechanisms, users made with `kaas users add` while it runs.
#   1. The stored credentials: no password in the file, and StoredKey and
#      ServerKey recomputed here with Python's hashlib from the password, salt
#      and iterations.  Bad input to `kaas users` fails, named.
#   2. Every client with every mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512),
#      over both listeners: kcat all six; confluent-kafka, kafka-python
#      (SaslHandshake v0: unframed tokens), kafkajs (a consumer group) and
#      sarama (plus a 0.11 sarama: PLAIN unframed) each mechanism once,
#      listeners alternating; every record compared (ci/interop/spec.py).
#      The broker logs each connection's principal, User:<name>.
#   3. Refused, each with its reason in the broker's log, while the broker
#      keeps serving: a wrong password and an unknown user (the client is
#      told the same thing for both), a removed user, a disabled mechanism,
#      a client without SASL on the SASL port, TLS to the SASL_PLAINTEXT port,
#      CreateTopics before authentication, a 1 MiB frame before it, SASL
#      exchanges cut in the middle, re-authentication as another user.  An
#      unknown user's SCRAM salt looks like a real one's and stays the same
#      across restarts; on the PLAINTEXT listener the SASL APIs answer
#      ILLEGAL_SASL_STATE.  The volume is unchanged by all of it.
#   4. connections.max.reauth.ms (KIP-368): kafkajs re-authenticates on its
#      connection and every send is acknowledged; a client that does not is
#      closed at its first request after its session.
#   5. Settings refused at start-up by name.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh sasl
spec() { $PY ci/interop/spec.py "$@"; }
K="$PY ci/interop/kcat_tool.py"
C="$PY ci/interop/confluent_e2e.py"
KP="$PY ci/interop/kafka_python_e2e.py"
W="$PY ci/sasl/sasl_wire.py"
CRT=$T/certs
ci/tls/gen_certs.sh "$CRT" > /dev/null || fail "certificates"
N=300
T0=$(($(date +%s%3N) - 3600000))
MECHS=(PLAIN SCRAM-SHA-256 SCRAM-SHA-512)

start() {
	broker_start "$T/data" --listen "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0" \
		--override sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512 \
		--override "ssl.keystore.location=$CRT/server.keystore.pem" \
		--override num.partitions=3 --override group.initial.rebalance.delay.ms=100 "$@" || fail "broker start"
	SP=127.0.0.1:$(grep -o 'listener SASL_PLAINTEXT (SASL_PLAINTEXT) on 127.0.0.1:[0-9]*' "$BROKER_LOG" | tail -1 |
		grep -o '[0-9]*$')
	SS=127.0.0.1:$(grep -o 'listener SASL_SSL (SASL_SSL) on 127.0.0.1:[0-9]*' "$BROKER_LOG" | tail -1 | grep -o '[0-9]*$')
	[ "$SP" != 127.0.0.1: ] && [ "$SS" != 127.0.0.1: ] || fail "no SASL listeners in the log"
}
stop() {
	broker_stop
	[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
}
users() { "$BIN/kaas" users "$@" --cluster-dir "$T/data/__cluster"; }

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

start
# ---- 1. users and their stored credentials ----------------------------------------
printf 'alice-pw\n' > "$T/alice.pw"
users add --user alice --password-file "$T/alice.pw" > "$T/u.out" || fail "kaas users add alice"
grep -q "added user alice (SCRAM-SHA-256, SCRAM-SHA-512" "$T/u.out" || fail "users add: $(cat "$T/u.out")"
echo 'bob-pw' | users add --user bob --mechanism SCRAM-SHA-256 --iterations 4096 > /dev/null || fail "users add bob"
echo 'x' | users add --user 'carol,=x' > /dev/null || fail "a user name with ',' and '='"
users list > "$T/list"
grep -q $'^alice\tSCRAM-SHA-256(8192),SCRAM-SHA-512(8192)$' "$T/list" || fail "users list: $(cat "$T/list")"
grep -q $'^bob\tSCRAM-SHA-256(4096)$' "$T/list" || fail "users list: $(cat "$T/list")"
! grep -rq 'alice-pw' "$T/data/__cluster/users" || fail "the password is in the cluster directory"
$PY - "$T/data/__cluster/users/alice.json" alice-pw <<'EOF' || fail "the stored SCRAM keys are not RFC 5802's"
import base64, hashlib, hmac, json, sys
u = json.load(open(sys.argv[1]))
assert u["user"] == "alice" and u["version"] == 1
for mech, h in (("SCRAM-SHA-256", "sha256"), ("SCRAM-SHA-512", "sha512")):
    c = u["scram"][mech]
    salted = hashlib.pbkdf2_hmac(h, sys.argv[2].encode(), base64.b64decode(c["salt"]), c["iterations"])
    ck = hmac.new(salted, b"Client Key", h).digest()
    assert base64.b64decode(c["stored_key"]) == hashlib.new(h, ck).digest(), mech
    assert base64.b64decode(c["server_key"]) == hmac.new(salted, b"Server Key", h).digest(), mech
print("ok StoredKey and ServerKey of both mechanisms recomputed with hashlib")
EOF
pass "kaas users add/list; the stored credentials are RFC 5802's, the password is nowhere"
badu() { # what pattern args... (stdin: /dev/null)
	local what=$1 pat=$2 rc=0
	shift 2
	users "$@" < /dev/null > "$T/bad.out" 2>&1 || rc=$?
	[ "$rc" != 0 ] || fail "kaas users $what: exit 0"
	grep -q -- "$pat" "$T/bad.out" || fail "kaas users $what: no '$pat' in: $(cat "$T/bad.out")"
}
badu "an empty password" "is empty" add --user dave
badu "a password on the command line" "unexpected argument" add --user dave secret
badu "PLAIN as a mechanism" "SCRAM-SHA-256 or SCRAM-SHA-512" add --user dave --mechanism PLAIN
badu "too few iterations" "a number from 4096" add --user dave --iterations 100
badu "a control character in the name" "control characters" add --user $'da\tve'
badu "a name too long" "1 to 80 bytes" add --user "$(printf 'x%.0s' $(seq 1 81))"
badu "removing an unknown user" "no user dave" remove --user dave
env -u KAAS_CLUSTER_DIR "$BIN/kaas" users add --user dave < /dev/null > "$T/bad.out" 2>&1 &&
	fail "kaas users add without --cluster-dir: exit 0"
grep -q "is required" "$T/bad.out" || fail "kaas users without --cluster-dir: $(cat "$T/bad.out")"
pass "kaas users refuses bad input by name, non-zero exit"

# ---- 2. every client, every mechanism, both listeners --------------------------------
export KAAS_SASL_USER=alice KAAS_SASL_PASS=alice-pw
kc() { # mech listener(SP|SS)
	local m=$1 l=$2
	if [ "$l" = SS ]; then
		echo -X security.protocol=sasl_ssl -X "ssl.ca.location=$CRT/ca.pem" -X sasl.mechanisms="$m" \
			-X sasl.username=alice -X sasl.password=alice-pw
	else
		echo -X security.protocol=sasl_plaintext -X sasl.mechanisms="$m" -X sasl.username=alice \
			-X sasl.password=alice-pw
	fi
}
for m in "${MECHS[@]}"; do
	for l in SP SS; do
		t=kc-$m-$l
		# shellcheck disable=SC2046 # kc prints words
		$K gen none 0 $N | kcat -b "${!l}" -P -t "$t" -K $'\t' -X acks=all $(kc "$m" $l) ||
			fail "kcat -P over $l with $m"
		# shellcheck disable=SC2046
		kcat -b "${!l}" -C -t "$t" -o beginning -e -q -f '%k\n' $(kc "$m" $l) > "$T/$t.c" ||
			fail "kcat -C over $l with $m"
		[ "$(grep -c . "$T/$t.c")" = $N ] || fail "kcat over $l with $m: $(grep -c . "$T/$t.c") records, want $N"
	done
done
pass "kcat: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 over SASL_PLAINTEXT and SASL_SSL, $N records each"

i=0
for m in "${MECHS[@]}"; do
	export KAAS_SASL_MECH=$m
	# listeners alternate per client and mechanism
	for c in cf kp kj sr; do
		i=$((i + 1))
		if [ $((i % 2)) = 0 ]; then B=$SS; export KAAS_TLS_CA=$CRT/ca.pem; lname=SASL_SSL
		else B=$SP; unset KAAS_TLS_CA; lname=SASL_PLAINTEXT; fi
		r=$c$i
		case $c in
		cf)
			$C produce "$B" "t-$r" "$r" "$T0" 0 $N "$T/$r.p" || fail "confluent produce ($m, $lname)"
			$C consume "$B" "t-$r" "$T/$r.c" || fail "confluent consume ($m, $lname)" ;;
		kp)
			$KP produce "$B" "t-$r" "$r" "$T0" 0 $N "$T/$r.p" || fail "kafka-python produce ($m, $lname)"
			$KP consume "$B" "t-$r" "$T/$r.c" || fail "kafka-python consume ($m, $lname)" ;;
		kj)
			spec records "$r" "$T0" 0 $N > "$T/$r.r"
			$J produce "$B" "t-$r" "$T/$r.r" "$T/$r.p" || fail "kafkajs produce ($m, $lname)"
			touch "$T/$r.go" "$T/$r.go.2"
			$J group "$B" "t-$r" "g-$r" $N "$T/$r.c" "$T/$r.progress" "$T/$r.go" ||
				fail "kafkajs consumer group ($m, $lname)" ;;
		sr)
			spec records "$r" "$T0" 0 $N > "$T/$r.r"
			$S produce "$B" "t-$r" "$T/$r.r" "$T/$r.p" gzip || fail "sarama produce ($m, $lname)"
			$S consume "$B" "t-$r" "$T/$r.c" || fail "sarama consume ($m, $lname)" ;;
		esac
		spec check "$r" "$T0" "$T/$r.p" "$T/$r.c" --expect=$N || fail "$c ($m, $lname): consumed != produced"
		echo "ok $c with $m over $lname: $N records compared"
	done
done
unset KAAS_TLS_CA
export KAAS_SASL_MECH=PLAIN KAAS_SASL_V0=1
spec records sr0 "$T0" 0 $N > "$T/sr0.r"
$S produce "$SP" t-sr0 "$T/sr0.r" "$T/sr0.p" gzip || fail "sarama 0.11 produce (PLAIN unframed)"
$S consume "$SP" t-sr0 "$T/sr0.c" || fail "sarama 0.11 consume"
spec check sr0 "$T0" "$T/sr0.p" "$T/sr0.c" --expect=$N || fail "sarama 0.11: consumed != produced"
unset KAAS_SASL_V0 KAAS_SASL_MECH
grep -q "SASL authenticated User:alice with SCRAM-SHA-512 on listener SASL_SSL" "$BROKER_LOG" ||
	fail "no principal User:alice in the broker's log"
grep -q "SASL authenticated User:alice with PLAIN on listener SASL_PLAINTEXT (unframed tokens)" "$BROKER_LOG" ||
	fail "no unframed (SaslHandshake v0) login in the broker's log"
pass "confluent-kafka, kafka-python, kafkajs (group), sarama with each mechanism, sarama 0.11 unframed: all compared"

# ---- 3. refusals ----------------------------------------------------------------------
snap() {
	(cd "$T/data" && find . -type f \( ! -path './__cluster/*' -o -path './__cluster/topics/*' \
		-o -path './__cluster/users/*' \) -printf '%P %s\n' | sort &&
		find . -type f -name '*.log' -print0 | sort -z | xargs -0 md5sum)
}
sleep 1
snap > "$T/before"
since() { tail -n +"$1" "$BROKER_LOG" > "$T/since"; }
# refused: what log-pattern kcat-args...; the client's complaint in $T/r.out
refused() {
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
sp=(-b "$SP" -X security.protocol=sasl_plaintext)
refused "a wrong password (PLAIN)" "PLAIN on listener SASL_PLAINTEXT failed: wrong password" "${sp[@]}" \
	-X sasl.mechanisms=PLAIN -X sasl.username=alice -X sasl.password=nope
grep -o 'SASL authentication error: [^(]*' "$T/r.out" | head -1 > "$T/wrong.msg"
refused "an unknown user (PLAIN)" "PLAIN on listener SASL_PLAINTEXT failed: unknown user" "${sp[@]}" \
	-X sasl.mechanisms=PLAIN -X sasl.username=mallory -X sasl.password=nope
grep -o 'SASL authentication error: [^(]*' "$T/r.out" | head -1 > "$T/unknown.msg"
[ -s "$T/wrong.msg" ] && diff "$T/wrong.msg" "$T/unknown.msg" || fail "PLAIN tells a wrong password from an unknown user"
refused "a wrong password (SCRAM-SHA-256)" "SCRAM-SHA-256 on listener SASL_PLAINTEXT failed: wrong password" \
	"${sp[@]}" -X sasl.mechanisms=SCRAM-SHA-256 -X sasl.username=alice -X sasl.password=nope
grep -o 'SASL authentication error: [^(]*' "$T/r.out" | head -1 > "$T/wrong.msg"
refused "an unknown user (SCRAM-SHA-256)" "SCRAM-SHA-256 on listener SASL_PLAINTEXT failed: unknown user" \
	"${sp[@]}" -X sasl.mechanisms=SCRAM-SHA-256 -X sasl.username=mallory -X sasl.password=nope
grep -o 'SASL authentication error: [^(]*' "$T/r.out" | head -1 > "$T/unknown.msg"
[ -s "$T/wrong.msg" ] && diff "$T/wrong.msg" "$T/unknown.msg" || fail "SCRAM tells a wrong password from an unknown user"
pass "a wrong password and an unknown user get the same answer: $(cat "$T/wrong.msg")"
refused "a user without that mechanism's credential" "has no SCRAM-SHA-512 credential" "${sp[@]}" \
	-X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=bob -X sasl.password=bob-pw
refused "a client without SASL on the SASL port" "Metadata before SASL authentication" -b "$SP"
refused "TLS to the SASL_PLAINTEXT port" "a TLS handshake on the PLAINTEXT listener SASL_PLAINTEXT" -b "$SP" \
	-X security.protocol=ssl -X "ssl.ca.location=$CRT/ca.pem"
refused "plaintext to the SASL_SSL port" "not TLS: a plaintext client" -b "$SS" -X security.protocol=sasl_plaintext \
	-X sasl.mechanisms=PLAIN -X sasl.username=alice -X sasl.password=alice-pw
$W plainport 127.0.0.1 "$BROKER_PORT" || fail "the SASL APIs on the PLAINTEXT listener"
$W salt 127.0.0.1 "${SP#*:}" mallory > "$T/salt.mallory" || fail "an unknown user's server-first-message"
$W salt 127.0.0.1 "${SP#*:}" alice > "$T/salt.alice" || fail "alice's server-first-message"
# an unknown user looks like a real one: a 32-byte salt, the default iterations
grep -Eq '^s=[A-Za-z0-9+/]{43}=,i=8192$' "$T/salt.mallory" || fail "decoy: $(cat "$T/salt.mallory")"
grep -Eq '^s=[A-Za-z0-9+/]{43}=,i=8192$' "$T/salt.alice" || fail "alice: $(cat "$T/salt.alice")"
$W preauth 127.0.0.1 "${SP#*:}" preauth-topic || fail "CreateTopics before authentication"
$W big 127.0.0.1 "${SP#*:}" || fail "a large frame before authentication"
grep -q "sasl.server.max.receive.size, before SASL authentication" "$BROKER_LOG" || fail "the large frame is not in the log"
$W cut 127.0.0.1 "${SP#*:}" 30 || fail "SASL exchanges cut in the middle"
echo 'dave-pw' | users add --user dave > /dev/null || fail "users add dave"
$W reauth 127.0.0.1 "${SP#*:}" alice alice-pw dave dave-pw || fail "re-authentication as another user"
grep -q "re-authentication as another user (dave)" "$BROKER_LOG" || fail "the principal change is not in the log"
users remove --user dave > /dev/null || fail "users remove dave"
refused "a removed user" "PLAIN on listener SASL_PLAINTEXT failed: unknown user" "${sp[@]}" \
	-X sasl.mechanisms=PLAIN -X sasl.username=dave -X sasl.password=dave-pw
kcat -L -m 10 "${sp[@]}" -X sasl.mechanisms=SCRAM-SHA-256 -X sasl.username=alice -X sasl.password=alice-pw \
	> "$T/md" || fail "alice after the refusals"
! grep -q preauth-topic "$T/md" || fail "CreateTopics before authentication created the topic"
snap > "$T/after"
diff "$T/before" "$T/after" || fail "the refused requests changed the volume"
pass "the volume is unchanged by every refused request; the broker still serves"
stop

# PLAIN disabled: refused at the handshake.
start --override sasl.enabled.mechanisms=SCRAM-SHA-512
refused "a mechanism that is not enabled" "mechanism 'PLAIN' is not enabled" -b "$SP" \
	-X security.protocol=sasl_plaintext -X sasl.mechanisms=PLAIN -X sasl.username=alice -X sasl.password=alice-pw
stop

# ---- 4. connections.max.reauth.ms ---------------------------------------------------------
start --override connections.max.reauth.ms=3000
$W salt 127.0.0.1 "${SP#*:}" mallory > "$T/salt.mallory2" || fail "an unknown user's server-first-message"
diff "$T/salt.mallory" "$T/salt.mallory2" || fail "an unknown user's salt changed across a restart"
pass "an unknown user's SCRAM salt is stable across restarts, shaped like a real user's"
export KAAS_SASL_MECH=SCRAM-SHA-256
node ci/sasl/reauth_kafkajs.js "$SP" reauth-kj 9 || fail "kafkajs across re-authentications"
n=$(grep -c "SASL re-authenticated User:alice with SCRAM-SHA-256" "$BROKER_LOG" || true)
[ "$n" -ge 2 ] || fail "kafkajs re-authenticated $n time(s) in 9 s of 3 s sessions"
pass "kafkajs re-authenticated $n times on its connections, every send acknowledged"
$W expire 127.0.0.1 "${SP#*:}" alice alice-pw 3000 || fail "session expiry"
grep -q "SASL session of User:alice ended (connections.max.reauth.ms=3000)" "$BROKER_LOG" ||
	fail "the expired session is not in the log"
pass "a client that does not re-authenticate is closed at its first request after its session"
unset KAAS_SASL_MECH
stop

# ---- 5. settings refused at start-up ------------------------------------------------------
bad() { broker_refuses "$@"; }
bad "GSSAPI" "'GSSAPI' is not supported" --override sasl.enabled.mechanisms=GSSAPI
bad "an unknown mechanism" "is not a SASL mechanism" --override sasl.enabled.mechanisms=PLAIN,MD5
bad "SASL_SSL without a keystore" "needs ssl.keystore.location" --listen SASL_SSL://127.0.0.1:0
echo "PASS ci/sasl/test_sasl.sh"
