#!/bin/bash
# test_make_run.sh — the job behind `make run` (ci/run-default.sh): it must
# qualify the default local volume, stamp it, and start a broker that trusts
# the volume because of that stamp (not because of --trust-unqualified); kcat
# then produces and consumes through it, and Ctrl-C stops it with exit 0.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${BIN:=bin}"
export BIN
source ci/lib/e2e.sh --functions
e2e_scratch tmp kaas-make-run
e2e_show_log "$tmp/log"
pid=
stop_run() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
}
e2e_on_exit stop_run

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
KAAS_RUN_DIR="$tmp/var" KAAS_RUN_LISTEN="127.0.0.1:$port" bash ci/run-default.sh >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 1 1200); do
	grep -q "listening on" "$tmp/log" && break
	kill -0 "$pid" 2>/dev/null || fail "the job exited before the broker listened"
	sleep 0.1
done
grep -q "listening on" "$tmp/log" || fail "the broker did not start within 120 s"

grep -qE "VERDICT (PASS|UNPROVEN)" "$tmp/log" || fail "no PASS or UNPROVEN verdict printed"
[ -s "$tmp/var/data/__cluster/qualification.json" ] || fail "no qualification stamp"
[ -s "$tmp/var/kaas-conform-report.json" ] || fail "no JSON report"
grep -q "kcat -b 127.0.0.1:$port" "$tmp/log" || fail "no kcat hint for the listening address"
if grep -qi "unqualified" "$tmp/log"; then fail "the broker started without trusting the stamp"; fi

seq 1 50 | sed 's/^/record-/' | kcat -b "127.0.0.1:$port" -P -t demo -X acks=all 2>"$tmp/kcat.err" ||
	fail "kcat produce failed: $(cat "$tmp/kcat.err")"
got=$(kcat -b "127.0.0.1:$port" -C -t demo -o beginning -e -q -f '%o %s\n' 2>"$tmp/kcat.err") ||
	fail "kcat consume failed: $(cat "$tmp/kcat.err")"
want=$(seq 1 50 | awk '{ printf "%d record-%d\n", $1 - 1, $1 }')
[ "$got" = "$want" ] || fail "consumed records differ from produced ones"

kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
pid=
[ "$rc" = 0 ] || fail "the broker exited $rc on SIGINT"
echo "test_make_run: ok (qualified, stamped, 50 records through kcat, clean exit)"
