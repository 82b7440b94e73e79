# ci/interop/lib.sh — what the interop tests share.  Source it from a test
# script after setting NAME:
#
#   NAME=kcat; source "$(dirname "$0")/lib.sh"
#
# It cds to the repository root, sources ci/lib/e2e.sh (the scratch
# directory $T, PY, fail, the broker stopped at exit) and defines:
#   now_ms             wall-clock milliseconds
#   spec ARGS...       ci/interop/spec.py: the records of a run (spec records,
#                      spec times) and the record-by-record comparison (spec check)
#   interop_done       stop the broker (it must exit 0), print the duration
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source ci/lib/e2e.sh "interop-$NAME"
_interop_t0=$(date +%s)

now_ms() { date +%s%3N; }

spec() { $PY ci/interop/spec.py "$@"; }

# Stops the broker, which must exit 0, and prints the suite's duration.
interop_done() {
	broker_stop
	[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM"
	echo "PASS ci/interop/test_$NAME.sh ($(($(date +%s) - _interop_t0)) s)"
}
