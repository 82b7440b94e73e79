#!/bin/bash
# conformance/test/lib.sh — what the kaas-conform end-to-end tests add to the
# shared harness (ci/lib/e2e.sh: fail, pass, the cleanup stack CLEANUPS /
# e2e_on_exit): the binary, a scratch area $WORK (the current directory,
# removed at exit) and small assertions about reports.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$ROOT/ci/lib/e2e.sh" --functions
BINDIR=${BIN:-bin}
case $BINDIR in /*) ;; *) BINDIR="$ROOT/$BINDIR" ;; esac
KC="$BINDIR/kaas-conform"
PY=/usr/bin/python3
VALIDATE="$ROOT/conformance/test/validate_report.py"
[ -x "$KC" ] || { echo "missing $KC (build first)"; exit 1; }

# /var/tmp is on disk on Debian (a /tmp on tmpfs would be refused as a volume).
e2e_scratch WORK kc-e2e "${KC_TEST_TMPDIR:-/var/tmp}"
cd "$WORK"
e2e_on_exit 'cd /' # out of $WORK before it goes

# newdir NAME: an empty directory to use as a volume.
newdir() { mkdir -p "$WORK/$1"; echo "$WORK/$1"; }

# expect_rc WANT CMD...: runs CMD, stdout to $WORK/out, stderr to $WORK/err.
expect_rc() {
	local want=$1 rc=0
	shift
	"$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
	if [ "$rc" != "$want" ]; then
		echo "--- stdout"; cat "$WORK/out"; echo "--- stderr"; cat "$WORK/err"
		fail "exit $rc, expected $want: $*"
	fi
}

# assert_empty DIR: the run left nothing behind in the volume.
assert_empty() {
	local left
	left=$(ls -A "$1")
	[ -z "$left" ] || fail "left behind in $1: $left"
}

# jq-like access with python: jget FILE EXPR (EXPR uses r for the report).
jget() { "$PY" -c "import json,sys; r=json.load(open(sys.argv[1])); print($2)" "$1"; }

# check_verdict FILE NAME VERDICT
check_verdict() {
	local got
	got=$(jget "$1" "[c['verdict'] for c in r['checks'] if c['name']=='$2'][0]")
	[ "$got" = "$3" ] || fail "check $2 is $got, expected $3 ($(jget "$1" "[c['summary'] for c in r['checks'] if c['name']=='$2'][0]"))"
}

validate() { "$PY" "$VALIDATE" "$1" || fail "report $1 does not match the schema"; }
