#!/bin/bash
# e2e_matrix.sh — the real-substrate matrix (ci/matrix) itself:
#
#   * its judge: a report matches its expectation only with the expected
#     verdict, every named check failing with evidence (anomalies, a counted
#     refusal, interposition or loss) and, with "pass", every other check
#     passing.  A wrong verdict, a configuration failing for the wrong reason
#     (another check, or only refused by preflight), a failure without
#     evidence, a missing check and a malformed expectation are all caught;
#   * the whole pipeline on real runs: a matching configuration exits 0, a
#     mismatching one exits 1 naming why, and the results files hold the
#     runs, the tool version and the date;
#   * a hung filesystem (kaas-lyingfs with fsync and unlink hanging): the run is
#     cut off at its timeout and the matrix ends, leaving nothing;
#   * teardown when the matrix is interrupted in the middle of a run, by
#     SIGTERM to the matrix alone or SIGINT to its process group: no process,
#     mount, loop device or network namespace of it is left, and its
#     scratch directory is gone.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BINDIR=${BIN:-bin}
case $BINDIR in /*) ;; *) BINDIR="$ROOT/$BINDIR" ;; esac
[ -x "$BINDIR/kaas-conform" ] || { echo "missing $BINDIR/kaas-conform (build first)"; exit 1; }
export BIN=$BINDIR
SUB_NAME=e2e-matrix
. "$ROOT/substrates/substrate-lib.sh"
MATRIX=$ROOT/ci/matrix
PY=/usr/bin/python3

e2e_scratch WORK kaas-e2e-matrix /var/tmp
BG=()
kill_bg() {
	local p
	for p in "${BG[@]}"; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done
	for p in "${BG[@]}"; do wait "$p" 2>/dev/null || true; done
}
e2e_on_exit 'cd /; kill_bg'
cd "$WORK"

# ---- the judge, on reports written here --------------------------------------------
cat >expect <<'EOF'
# test expectations
t-pass   PASS|WARN -
t-fail   FAIL      rename,cto
t-only   FAIL      fsync      pass
t-ref    REFUSED   preflight
EOF
# report NAME VERDICT CHECK=VERDICT:EVIDENCE... — EVIDENCE is the
# anomalies_total (for preflight the refused count, for fsync crash_lost).
report() {
	local name=$1 v=$2 c items=()
	shift 2
	for c in "$@"; do
		local n=${c%%=*} rest=${c#*=}
		local cv=${rest%%:*} ev=${rest#*:}
		case $n in
		preflight) items+=("{\"name\":\"$n\",\"verdict\":\"$cv\",\"anomalies_total\":0,\"counts\":{\"refused\":$ev}}") ;;
		fsync) items+=("{\"name\":\"$n\",\"verdict\":\"$cv\",\"anomalies_total\":0,\"counts\":{\"crash_lost\":$ev,\"interposed_actors\":0}}") ;;
		*) items+=("{\"name\":\"$n\",\"verdict\":\"$cv\",\"anomalies_total\":$ev,\"counts\":{}}") ;;
		esac
	done
	local IFS=,
	echo "{\"verdict\":\"$v\",\"checks\":[${items[*]}]}" >"$name.json"
}
matches() { "$MATRIX" --expect expect --judge "$1.json" "$2" >"$1.why" 2>&1 || fail "$1 should match $2: $(cat "$1.why")"; }
differs() { # differs REPORT CONFIG WHY-PATTERN
	local rc=0
	"$MATRIX" --expect expect --judge "$1.json" "$2" >"$1.why" 2>&1 || rc=$?
	[ "$rc" = 1 ] || fail "$1 against $2: exit $rc, expected 1 ($(cat "$1.why"))"
	grep -qE "$3" "$1.why" || fail "$1 against $2: '$(cat "$1.why")' does not say '$3'"
}
report ok PASS preflight=PASS:0 rename=PASS:0 fsync=WARN:0
matches ok t-pass
report err ERROR preflight=PASS:0 rename=ERROR:0
differs err t-pass "verdict ERROR, expected PASS\|WARN"
differs ok t-fail "verdict PASS, expected FAIL"
report fail2 FAIL preflight=PASS:0 rename=FAIL:12 excl=PASS:0 cto=FAIL:3 fsync=PASS:0
matches fail2 t-fail
# failing, but for another reason than the one named
report other FAIL preflight=PASS:0 rename=PASS:0 excl=FAIL:40 cto=FAIL:3
differs other t-fail "check rename: PASS, expected FAIL"
# refused by preflight, the named guarantees untested or holding
report refused REFUSED preflight=REFUSED:1 rename=PASS:0 cto=PASS:0
differs refused t-fail "verdict REFUSED, expected FAIL"
differs refused t-fail "check rename: PASS, expected FAIL"
# the named checks fail without anything to show for it
report noev FAIL rename=FAIL:0 cto=FAIL:2
differs noev t-fail "check rename: FAIL without evidence"
report absent FAIL rename=FAIL:5
differs absent t-fail "check cto: absent, expected FAIL"
# "pass": nothing but the named check may fail
report only FAIL preflight=PASS:0 rename=PASS:0 cto=WARN:0 fsync=FAIL:1
matches only t-only
report only2 FAIL preflight=PASS:0 rename=FAIL:4 fsync=FAIL:1
differs only2 t-only "check rename: FAIL, expected PASS, UNPROVEN or WARN"
report only3 FAIL preflight=PASS:0 fsync=FAIL:0
differs only3 t-only "check fsync: FAIL without evidence"
report ref REFUSED preflight=REFUSED:1 rename=PASS:0 fsync=WARN:0
matches ref t-ref
report ref0 REFUSED preflight=REFUSED:0
differs ref0 t-ref "check preflight: REFUSED without evidence"
rc=0
"$MATRIX" --expect expect --judge ok.json t-nothing >nothing.out 2>&1 || rc=$?
[ "$rc" = 2 ] || fail "a configuration without an expectation: exit $rc"
printf 't-bad PASS\n' >bad-expect
rc=0
"$MATRIX" --expect bad-expect --judge ok.json t-bad >bad.out 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "bad line for t-bad" bad.out || fail "a malformed expectation: exit $rc, $(cat bad.out)"
# the committed expectations parse, and name a configuration of the matrix each
for c in $(awk '!/^#/ && NF { print $1 }' "$ROOT/ci/matrix.expect"); do
	grep -q "\"$c|" "$MATRIX" || fail "ci/matrix.expect names $c, which ci/matrix does not run"
done
rc=0
# (a local directory without a power-loss hook: every guarantee held, fsync unproven)
report unproven UNPROVEN preflight=PASS:0 rename=PASS:0 fsync=UNPROVEN:0
"$MATRIX" --judge unproven.json local >/dev/null 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "ci/matrix.expect does not parse, or a passing report does not match 'local' (exit $rc)"
rc=0
"$MATRIX" --judge ok.json local >/dev/null 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a PASS without a power-loss hook matched 'local', which expects UNPROVEN (exit $rc)"
echo "ok: the judge wants the verdict, the named failures with evidence, and with 'pass' nothing else"

# ---- the pipeline on real runs -------------------------------------------------------
cat >expect2 <<'EOF'
t-copy   FAIL      rename      any
t-copy2  FAIL      excl
t-plain  PASS|WARN -
EOF
run_matrix() { # run_matrix OUT ARGS... — exit status in $rc
	rc=0
	TMPDIR=$WORK "$MATRIX" --expect expect2 --runs 1 "${@:2}" >"$1" 2>&1 || rc=$?
}
run_matrix good.out --results "$WORK/res" --config "t-copy|local|FAULT=rename=copy|no|20|rename,excl" \
	--config "t-plain|local||no|20|rename,excl"
[ "$rc" = 0 ] || { cat good.out; fail "matching configurations: exit $rc"; }
grep -qx "2 passed, 0 failed" good.out || fail "no closing line: $(tail -3 good.out)"
/usr/bin/python3 - "$WORK/res" <<'PY' || fail "results files"
import json, sys, os
d = sys.argv[1]
r = json.load(open(os.path.join(d, "t-copy.json")))
assert r["config"] == "t-copy" and r["matches"] and r["problems"] == "", r
assert r["expected"] == {"verdict": "FAIL", "must_fail": ["rename"], "others": "any"}, r["expected"]
assert r["tool_version"].startswith("kaas-conform ") and r["date"].endswith("Z"), r
assert len(r["runs"]) == 1 and r["runs"][0]["seed"] == 1 and r["runs"][0]["exit_code"] == 1, r["runs"]
rep = r["runs"][0]["report"]
assert rep["verdict"] == "FAIL", rep["verdict"]
assert [c["verdict"] for c in rep["checks"] if c["name"] == "rename"] == ["FAIL"]
assert "<scratch>" in json.dumps(rep) and "/var/tmp/" not in json.dumps(rep)
md = open(os.path.join(d, "README.md")).read()
assert "| t-copy | FAIL | FAIL (rename) | yes |" in md, md
assert "| t-plain | PASS |" in md or "| t-plain | WARN |" in md, md
PY
run_matrix bad.out --no-results --config "t-copy2|local|FAULT=rename=copy|no|20|rename,excl"
[ "$rc" = 1 ] || { cat bad.out; fail "a configuration failing for another reason: exit $rc"; }
grep -q "MISMATCH: check excl: PASS, expected FAIL" bad.out || fail "mismatch not named: $(cat bad.out)"
grep -qx "0 passed, 1 failed" bad.out || fail "no closing line: $(tail -3 bad.out)"
run_matrix none.out --no-results --config "t-none|local||no|20|rename"
[ "$rc" = 1 ] && grep -q "t-none has no line in .*expect2" none.out || fail "a configuration without expectation: exit $rc"
echo "ok: the matrix exits 0 when every run matches, 1 naming the mismatch otherwise; results hold the runs"

# ---- a hung filesystem ---------------------------------------------------------------------
# Every fsync and unlink of this kaas-lyingfs hangs until the daemon dies:
# the tool's writer, and its driver removing its scratch, wait in the kernel
# beyond any signal.  The run is interrupted at its timeout and killed after
# the grace; the matrix goes on, names the run as having no report, and its
# teardown (which kills the FUSE daemons) ends the stuck waits, leaving
# nothing behind.
cat >expect4 <<'EOF'
t-hang   PASS|WARN -
EOF
t0=$(date +%s)
rc=0
mkdir -p "$WORK/hang"
TMPDIR=$WORK/hang MATRIX_RUN_TIMEOUT=3 MATRIX_KILL_GRACE=2 timeout 300 "$MATRIX" --expect expect4 --runs 1 \
	--no-results --config "t-hang|lyingfs|LYINGFS_HANG=fsync,unlink|no|5|fsync" >hang.out 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat hang.out; fail "a hung filesystem: the matrix exited $rc, expected 1"; }
grep -q "seed 1: no report" hang.out || { cat hang.out; fail "a hung run is not named as having no report"; }
grep -qx "0 passed, 1 failed" hang.out || fail "no closing line: $(tail -3 hang.out)"
sub_leftovers "$WORK/hang" || { cat hang.out; fail "a hung filesystem: left behind"; }
[ -z "$(ls -A "$WORK/hang")" ] || fail "a hung filesystem: scratch left: $(ls -A "$WORK/hang")"
echo "ok: a filesystem whose fsync never returns: the run is cut off, the matrix ends ($(( $(date +%s) - t0 )) s), nothing is left"

# ---- interrupted in the middle of a run -------------------------------------------------
# interrupt NAME SIGNAL TARGET ROW — start the matrix on ROW (a long run),
# wait until the tool runs, send SIGNAL to the matrix (TARGET=pid) or its
# process group (TARGET=group); afterwards nothing of the run may be left.
interrupt() {
	local name=$1 sig=$2 target=$3 row=$4 cfg=${4%%|*} tmp=$WORK/int-$1 pid st ns=
	mkdir -p "$tmp"
	# a process group of its own, with SIGINT as a terminal would deliver
	# it (a background job of a script starts with SIGINT ignored, and a
	# shell cannot trap a signal ignored at its start)
	TMPDIR=$tmp "$PY" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.setsid()
os.execvp(sys.argv[1], sys.argv[1:])' "$MATRIX" --expect expect3 --runs 1 --no-results --config "$row" >"$name.out" 2>&1 &
	pid=$!
	BG+=("$pid")
	sub_wait 60 tool_running "$tmp" || { cat "$name.out"; fail "$name: the tool never ran"; }
	st=$(echo "$tmp"/kaas-matrix.*/"$cfg")
	[ -f "$st/state" ] && ns=$(sed -n 's/^ns=//p' "$st/state")
	sleep 1
	if [ "$target" = group ]; then kill "-$sig" -- "-$pid"; else kill "-$sig" "$pid"; fi
	rc=0
	timeout 120 tail --pid="$pid" -f /dev/null || fail "$name: the matrix did not end after SIG$sig"
	wait "$pid" || rc=$?
	BG=()
	[ "$rc" != 0 ] || fail "$name: an interrupted matrix exited 0"
	sub_leftovers "$tmp" || { cat "$name.out"; fail "$name: left behind after SIG$sig"; }
	[ -z "$ns" ] || [ ! -e "/run/netns/$ns" ] || fail "$name: namespace $ns left behind"
	[ -z "$(ls -A "$tmp")" ] || fail "$name: scratch left: $(ls -A "$tmp")"
	echo "ok: $name: SIG$sig to the $target in the middle of a run leaves nothing behind"
}
# tool_running DIR — a kaas-conform process whose command line names DIR.
tool_running() {
	local p
	for p in $(pgrep -x kaas-conform); do
		grep -qF "$1" "/proc/$p/cmdline" 2>/dev/null && return 0
	done
	return 1
}
cat >expect3 <<'EOF'
t-loop   PASS|WARN -
t-nfs    PASS|WARN -
EOF
interrupt loop TERM pid "t-loop|loop-ext4||no|5000|rename"
interrupt nfs INT group "t-nfs|nfs-ganesha|NFS_FSAL=vfs NFS_VERSION=3|no|5000|rename"
