#!/bin/bash
# test_make_run_cluster.sh — `make run BROKERS=3` (ci/run-default.sh's
# cluster mode): three brokers on one qualified directory, each under
# `kaas supervise --restart`.  kcat produces and consumes through the
# bootstrap list; a broker killed with kill -9 is certified gone by its
# supervisor (or by a peer on the same host, whichever is first; its peers
# say so in their logs), comes back as a new
# incarnation, and no acknowledged record is lost; SIGTERM to the job
# drains every broker and ends every process it started.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${BIN:=bin}"
export BIN
source ci/lib/e2e.sh --functions
e2e_scratch tmp kaas-make-run-cluster
e2e_show_log "$tmp/log"
pid=
stop_run() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		pkill -KILL -f -- "--data $tmp/var/data" 2>/dev/null || true
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
}
e2e_on_exit stop_run

# Three consecutive free ports.
base=$(/usr/bin/python3 - <<'EOF'
import random, socket
for _ in range(200):
    b = random.randrange(20000, 60000)
    try:
        ss = []
        for p in range(b, b + 3):
            s = socket.socket(); s.bind(("127.0.0.1", p)); ss.append(s)
        print(b); break
    except OSError:
        pass
    finally:
        for s in ss: s.close()
EOF
)
[ -n "$base" ] || fail "no three free consecutive ports"
boot="127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))"
KAAS_RUN_BROKERS=3 KAAS_RUN_DIR="$tmp/var" KAAS_RUN_LISTEN="127.0.0.1:$base" bash ci/run-default.sh >"$tmp/log" 2>&1 &
pid=$!
for i in 1 2 3; do e2e_show_log "$tmp/var/broker-$i.log"; done
for _ in $(seq 1 1800); do
	n=0
	for i in 1 2 3; do grep -q "ready: broker $i" "$tmp/var/broker-$i.log" 2>/dev/null && n=$((n + 1)); done
	[ "$n" = 3 ] && break
	kill -0 "$pid" 2>/dev/null || fail "the job exited before its brokers were ready"
	sleep 0.1
done
[ "$n" = 3 ] || fail "the three brokers were not ready within 180 s"
grep -q "bootstrap: $boot" "$tmp/log" || fail "no bootstrap hint for $boot"
sup2=$(sed -n 's/^  broker 2: .*(supervisor \([0-9]*\)).*/\1/p' "$tmp/log")
[ -n "$sup2" ] || fail "no supervisor pid for broker 2 in the hint"
echo "ok three brokers ready under their supervisors ($boot)"

produce() { # produce FROM TO
	seq "$1" "$2" | sed 's/^/record-/' | kcat -b "$boot" -P -t demo -X acks=all -X enable.idempotence=true \
		-X message.timeout.ms=60000 2>"$tmp/kcat.err" || fail "kcat produce $1..$2 failed: $(cat "$tmp/kcat.err")"
}
consumed() {
	kcat -b "$boot" -C -t demo -o beginning -e -q -f '%s\n' 2>"$tmp/kcat.err" | sort -t- -k2 -n ||
		fail "kcat consume failed: $(cat "$tmp/kcat.err")"
}
produce 1 50

# kill -9 of broker 2's process: its supervisor certifies the end and
# restarts it; the others take over by that proof, not by the lease.
b2=$(pgrep -P "$sup2" | head -1)
[ -n "$b2" ] || fail "broker 2's supervisor $sup2 has no child"
kill -KILL "$b2"
# The certificate is one exclusive create: whoever is first writes it, the
# supervisor (after waitpid) or a peer on the same host (which sees the
# process gone); the peers' log names the writer.  Either proof is the
# certificate; the supervisor must have seen it in place all the same.
gone="broker 2 incarnation [0-9]* is gone (exit certificate by \(supervisor\|same-host\)"
for _ in $(seq 1 600); do
	grep -q "$gone" "$tmp/var/broker-1.log" "$tmp/var/broker-3.log" 2>/dev/null && break
	sleep 0.1
done
grep -q "$gone" "$tmp/var/broker-1.log" "$tmp/var/broker-3.log" ||
	fail "no peer saw broker 2's end certified"
# A same-host peer may write it first and be read before the supervisor,
# a waitpid and a round trip later, has seen it in place: wait for that too.
certified="supervise: certified: brokers/2-.*\.gone is in place"
for _ in $(seq 1 600); do
	grep -q "$certified" "$tmp/var/broker-2.log" 2>/dev/null && break
	sleep 0.1
done
grep -q "$certified" "$tmp/var/broker-2.log" ||
	fail "broker 2's supervisor did not certify its end"
for _ in $(seq 1 1800); do
	[ "$(grep -c "ready: broker 2" "$tmp/var/broker-2.log")" -ge 2 ] && break
	sleep 0.1
done
[ "$(grep -c "ready: broker 2" "$tmp/var/broker-2.log")" -ge 2 ] || fail "broker 2 did not come back"
kill -0 "$sup2" 2>/dev/null || fail "broker 2's supervisor exited instead of restarting it"
echo "ok kill -9 of broker 2 ($b2): certified gone ($(grep -o "exit certificate by [a-z-]*" "$tmp/var/broker-1.log" "$tmp/var/broker-3.log" | head -1 | sed "s/.*by //")), back as a new incarnation"

produce 51 100
got=$(consumed)
want=$(seq 1 100 | sed 's/^/record-/')
[ "$got" = "$want" ] || fail "consumed records differ from the 100 acknowledged ones: $(diff <(echo "$want") <(echo "$got") | head -5)"
echo "ok 100 acknowledged records consumed once each"

kill -TERM "$pid"
rc=0
for _ in $(seq 1 900); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "the job still runs 90 s after SIGTERM"
wait "$pid" || rc=$?
pid=
[ "$rc" = 0 ] || fail "the job exited $rc on SIGTERM"
! pgrep -f -- "--data $tmp/var/data" >/dev/null || fail "a broker or supervisor of the job still runs"
echo "PASS test_make_run_cluster: three supervised brokers, a kill -9 certified, 100 records, clean stop"
