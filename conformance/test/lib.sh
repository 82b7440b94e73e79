#!/bin/bash
# conformance/test/lib.sh — shared by the kaas-conform end-to-end tests:
# the binary, a scratch area removed on exit, and small assertions.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BINDIR=${BIN:-bin}
case $BINDIR in /*) ;; *) BINDIR="$ROOT/$BINDIR" ;; esac
KC="$BINDIR/kaas-conform"
PY=/usr/bin/python3
VALIDATE="$ROOT/conformance/test/validate_report.py"
[ -x "$KC" ] || { echo "missing $KC (build first)"; exit 1; }

# /var/tmp is on disk on Debian (a /tmp on tmpfs would be refused as a volume).
WORK=$(mktemp -d "${KC_TEST_TMPDIR:-/var/tmp}/kc-e2e.XXXXXX")
CLEANUPS=()
cleanup() {
	local i
	for ((i = ${#CLEANUPS[@]} - 1; i >= 0; i--)); do eval "${CLEANUPS[i]}" || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK"

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

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
