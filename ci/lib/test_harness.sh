#!/bin/bash
# ci/lib/test_harness.sh — the end-to-end harness itself (ci/lib/e2e.sh):
# the cleanup stack runs newest first, every command even when one fails,
# with the script's exit status kept and visible as E2E_RC; the scratch
# directory goes last; fail exits 1 and shows the logs it was given; the
# --functions form (conformance/test/lib.sh, substrates/substrate-lib.sh)
# makes no scratch directory; a command that fails under set -e is named
# with its line and call chain; substrate-lib.sh's start guard tears down only
# a failed start.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh harness

# run NAME BODY — BODY as a script of its own, on the harness; its stdout
# and stderr in $T/NAME.out, its exit status in $T/NAME.rc.
run() {
	local rc=0
	bash -c "set -euo pipefail; cd '$PWD'; $2" >"$T/$1.out" 2>&1 || rc=$?
	echo "$rc" >"$T/$1.rc"
}

run order 'source ci/lib/e2e.sh h-order; echo "$T" >'"$T"'/order.t
	e2e_on_exit "echo one; false"
	e2e_on_exit "echo two \$E2E_RC; [ -d \"\$T\" ] && echo t-still-there"
	CLEANUPS+=("echo three")
	exit 3'
[ "$(cat "$T/order.rc")" = 3 ] || fail "exit status lost: $(cat "$T/order.rc")"
[ "$(cat "$T/order.out")" = "$(printf 'three\ntwo 3\nt-still-there\none')" ] ||
	fail "cleanups not newest first, or not all run: $(cat "$T/order.out")"
[ ! -e "$(cat "$T/order.t")" ] || fail "scratch directory left: $(cat "$T/order.t")"

run fail 'source ci/lib/e2e.sh h-fail; echo "the last words" >"$T/x.log"; e2e_show_log "$T/x.log"
	e2e_on_exit "echo cleaned"; fail "on purpose"; echo not-reached'
[ "$(cat "$T/fail.rc")" = 1 ] || fail "fail exited $(cat "$T/fail.rc")"
grep -q '^FAIL: on purpose$' "$T/fail.out" || fail "no FAIL line: $(cat "$T/fail.out")"
grep -q '^the last words$' "$T/fail.out" || fail "log tail not shown: $(cat "$T/fail.out")"
grep -q '^cleaned$' "$T/fail.out" || fail "cleanup did not run after fail"
! grep -q not-reached "$T/fail.out" || fail "fail did not exit"

run errexit 'source ci/lib/e2e.sh h-errexit; quiet() { false || true; }; deep() { quiet; ( set +e; false; echo sub-ok ); false; }
	deep; echo not-reached'
[ "$(cat "$T/errexit.rc")" = 1 ] || fail "a failed command under set -e exited $(cat "$T/errexit.rc")"
grep -q "^e2e: .*: 'false' exited 1; the script stops here (set -e)$" "$T/errexit.out" ||
	fail "the failed command is not named: $(cat "$T/errexit.out")"
grep -q '^e2e:   in deep called from ' "$T/errexit.out" || fail "no call chain: $(cat "$T/errexit.out")"
[ "$(grep -c '^e2e: ' "$T/errexit.out")" = 2 ] || fail "handled failures reported too: $(cat "$T/errexit.out")"
grep -q '^sub-ok$' "$T/errexit.out" || fail "set +e stretch cut short: $(cat "$T/errexit.out")"
! grep -q not-reached "$T/errexit.out" || fail "set -e did not stop the script"

run funcs 'source ci/lib/e2e.sh --functions; echo "T=${T:-unset}"; declare -F fail e2e_on_exit pass >/dev/null && echo defined'
[ "$(cat "$T/funcs.out")" = "$(printf 'T=unset\ndefined')" ] || fail "--functions: $(cat "$T/funcs.out")"

mkdir "$T/st"
: >"$T/st/resources"
run guard_ok "SUB_NAME=t; . substrates/substrate-lib.sh; STATE='$T/st'; sub_start_guard; touch '$T/st/f'; sub_record file '$T/st/f'"
[ -e "$T/st/f" ] || fail "a successful start was torn down: $(cat "$T/guard_ok.out")"
run guard_bad "SUB_NAME=t; . substrates/substrate-lib.sh; STATE='$T/st'; sub_start_guard; sub_die broken"
[ "$(cat "$T/guard_bad.rc")" = 1 ] || fail "sub_die exited $(cat "$T/guard_bad.rc")"
[ ! -e "$T/st/f" ] || fail "a failed start was not torn down: $(cat "$T/guard_bad.out")"

echo "PASS ci/lib/test_harness.sh"
