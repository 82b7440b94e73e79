# ci/interop/lib.sh — what the interop tests share.  Source it from a test
# script after setting NAME:
#
#   NAME=kcat; source "$(dirname "$0")/lib.sh"
#
# It cds to the repository root, sources ci/lib/broker.sh, makes a scratch
# directory $T (removed on exit, with the broker stopped) and defines:
#   fail MSG...        print MSG and the broker log's tail, exit 1
#   crash_restart      SIGKILL the broker, start it again on the same port
#   now_ms             wall-clock milliseconds
#   spec ARGS...       ci/interop/spec.py (the record-by-record comparison)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source ci/lib/broker.sh
PY=/usr/bin/python3
T=$(mktemp -d "/tmp/kaas-interop-$NAME.XXXXXX")
BROKER_NO_TRAP=1
BROKER_LOG=$T/broker.log
_interop_t0=$(date +%s)
trap 'broker_cleanup; rm -rf "$T"' EXIT

fail() {
	echo "FAIL: $*" >&2
	if [ -f "$BROKER_LOG" ]; then
		echo "--- broker log (tail) ---" >&2
		tail -n 30 "$BROKER_LOG" >&2
	fi
	exit 1
}

crash_restart() {
	local port=$BROKER_PORT
	broker_kill
	_broker_launch "$port"
}

now_ms() { date +%s%3N; }

spec() { $PY ci/interop/spec.py "$@"; }

# Stops the broker, which must exit 0, and prints the suite's duration.
interop_done() {
	broker_stop
	[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
	echo "PASS ci/interop/test_$NAME.sh ($(($(date +%s) - _interop_t0)) s)"
}
