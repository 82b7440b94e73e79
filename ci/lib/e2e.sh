# ci/lib/e2e.sh — the start every end-to-end test script shares.
#
#   set -euo pipefail
#   cd "$(dirname "$0")/../.."
#   source ci/lib/e2e.sh NAME
#
# Sources ci/lib/broker.sh and sets up:
#   T                 a scratch directory /tmp/kaas-NAME.XXXXXX
#   BROKER_LOG        $T/broker.log (broker_start's log unless a call names another)
#   PY                /usr/bin/python3, the interpreter with Debian's Kafka clients
#   fail MSG...       prints FAIL: MSG and the tail of the broker's log on stderr, exits 1
#   e2e_on_exit CMD   CMD runs at exit, after the broker is stopped, before $T goes
# At exit, whatever happened, the broker is stopped and $T removed.

source ci/lib/broker.sh
PY=/usr/bin/python3
T=$(mktemp -d "/tmp/kaas-${1:?e2e.sh needs the test name}.XXXXXX")
BROKER_LOG=$T/broker.log
BROKER_NO_TRAP=1
_E2E_ON_EXIT=()

e2e_on_exit() {
	_E2E_ON_EXIT+=("$1")
}

_e2e_cleanup() {
	set +e # everything below runs, whatever fails
	broker_cleanup
	local c
	for c in "${_E2E_ON_EXIT[@]}"; do
		eval "$c"
	done
	rm -rf "$T"
}
trap _e2e_cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	if [ -s "${BROKER_LOGFILE:-}" ]; then
		echo "--- broker log (tail) ---" >&2
		tail -n 30 "$BROKER_LOGFILE" >&2
	fi
	exit 1
}
