#!/bin/bash
# ci/lib/run_tests.sh — runs end-to-end scripts, several at a time.
#
#   bash ci/lib/run_tests.sh [-j N] SCRIPT...
#
# A SCRIPT ending in .sh runs under bash; anything else (a unit-test
# program) is executed as it is.
# Most end-to-end tests spend their time waiting (for session timeouts, for
# clients to time out, for servers to start), not computing: on two cores a
# whole `make test` used a quarter of the CPU it had.  Running N of them at
# once (default 3; E2E_JOBS in the Makefile) shortens the wall time without
# making any test faster than it asserts: tests never assert on speed, and
# each one works in its own scratch directory, on ports the kernel picks, in
# network namespaces with random names, and checks for leftovers by its own
# state directory only, so they do not see each other.
#
# Each script's output goes to a file and is printed whole when it ends,
# headed "== SCRIPT" and followed by "-- SCRIPT: N s" (so logs read as if the
# scripts had run one after another).  Exit status 1 when any script failed;
# the failures are listed at the end.  SIGINT/SIGTERM stop every running
# script's process group.
set -uo pipefail
jobs=3
if [ "${1:-}" = -j ]; then
	jobs=$2
	shift 2
fi
case $jobs in '' | *[!0-9]* | 0) echo "run_tests: -j wants a positive number, got '$jobs'" >&2; exit 2 ;; esac
logs=$(mktemp -d "${TMPDIR:-/tmp}/kaas-e2e-logs.XXXXXX")
declare -A start name_of log_of
failed=()
running=0
n=0

stop_all() {
	local p
	for p in "${!name_of[@]}"; do
		kill -TERM -- "-$p" 2>/dev/null || true
	done
	wait
	rm -rf "$logs"
	exit 130
}
trap stop_all INT TERM

# finish PID RC — print one script's log and account for it.
finish() {
	local pid=$1 rc=$2 t=${name_of[$1]}
	echo "== $t"
	cat "${log_of[$pid]}"
	if [ "$rc" != 0 ]; then
		# The exit status, and the room left where the logs are: a script
		# whose disk filled up may have had no room to say why.
		echo "FAILED: $t (exit $rc; $(df -Ph "$logs" 2>/dev/null | awk 'NR==2 {print $4 " free on " $6}'))"
		failed+=("$t")
	fi
	echo "-- $t: $(($(date +%s) - start[$pid])) s"
	rm -f "${log_of[$pid]}"
	unset "name_of[$pid]" "start[$pid]" "log_of[$pid]"
	running=$((running - 1))
}

reap_one() {
	local pid rc=0
	wait -n -p pid || rc=$?
	[ -n "${pid:-}" ] && finish "$pid" "$rc"
}

for t in "$@"; do
	while [ "$running" -ge "$jobs" ]; do reap_one; done
	# Its own process group (setsid), so that stopping it stops its children.
	n=$((n + 1))
	case $t in
	*.sh) setsid bash "$t" >"$logs/$n.log" 2>&1 </dev/null & ;;
	*) setsid "$t" >"$logs/$n.log" 2>&1 </dev/null & ;;
	esac
	pid=$!
	log_of[$pid]=$logs/$n.log
	name_of[$pid]=$t
	start[$pid]=$(date +%s)
	running=$((running + 1))
done
while [ "$running" -gt 0 ]; do reap_one; done
rm -rf "$logs"
if [ ${#failed[@]} -gt 0 ]; then
	echo "${#failed[@]} failed: ${failed[*]}"
	exit 1
fi
exit 0
