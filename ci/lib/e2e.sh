# ci/lib/e2e.sh — the one harness of the end-to-end scripts: one fail, one
# cleanup stack, one scratch directory.  A test script starts with
#
#   set -euo pipefail
#   cd "$(dirname "$0")/../.."          # the repository root
#   source ci/lib/e2e.sh NAME
#
# and gets:
#   T                 a scratch directory /tmp/kaas-NAME.XXXXXX (E2E_TMPDIR
#                     instead of /tmp), removed last at exit
#   BROKER_LOG        $T/broker.log (broker_start's log unless a call names another)
#   PY                /usr/bin/python3, the interpreter with Debian's Kafka clients
#   ci/lib/broker.sh  broker_start & co.; a started broker is stopped at exit
#   an ERR trap       a command that ends the script under set -e is named on
#                     stderr ("e2e: FILE:LINE: 'CMD' exited N"), with the
#                     functions it was called from
#
# Libraries that set up on their own terms (conformance/test/lib.sh,
# substrates/substrate-lib.sh) source it with --functions and get the
# functions only:
#   fail MSG...        FAIL: MSG on stderr, then the tail of every log named by
#                      e2e_show_log (and of the broker's log), exit 1
#   pass MSG...        ok: MSG
#   e2e_on_exit CMD    push CMD on the cleanup stack.  At exit, whatever
#                      happened, the stack runs newest first (what was set up
#                      last is torn down first), every command even when one
#                      fails; E2E_RC holds the script's exit status meanwhile.
#                      CLEANUPS+=(CMD) is the same push.
#   e2e_show_log FILE  fail shows the tail of FILE too
#   e2e_scratch VAR PREFIX [BASE]  sets VAR to a fresh directory
#                      BASE/PREFIX.XXXXXX (BASE: E2E_TMPDIR or /tmp), removed
#                      at exit; with E2E_KEEP=DIR a failing script's scratch
#                      directories are copied into DIR first (every log whole;
#                      E2E_KEEP_ALL=1: a passing script's too)
#
# Each script is registered in the module.mk of the folder it lives in
# (E2E_TESTS += dir/test_x.sh); `make e2e E2E=x` runs the scripts whose
# path contains x.

if [ -z "${_E2E_FUNCS:-}" ]; then
	_E2E_FUNCS=1
	CLEANUPS=()
	E2E_LOGS=()
	E2E_RC=0
	_E2E_TRAPPED=

	_e2e_cleanup() {
		E2E_RC=$?
		set +e # everything below runs, whatever fails
		local i
		for ((i = ${#CLEANUPS[@]} - 1; i >= 0; i--)); do
			eval "${CLEANUPS[i]}"
		done
		CLEANUPS=()
		return "$E2E_RC"
	}

	e2e_on_exit() {
		CLEANUPS+=("$1")
		if [ -z "$_E2E_TRAPPED" ]; then
			_E2E_TRAPPED=1
			trap _e2e_cleanup EXIT
		fi
	}

	e2e_show_log() { E2E_LOGS+=("$1"); }

	_e2e_keep() {
		[ -n "${E2E_KEEP:-}" ] && { [ "$E2E_RC" != 0 ] || [ -n "${E2E_KEEP_ALL:-}" ]; } || return 0
		mkdir -p "$E2E_KEEP" && cp -a "$1" "$E2E_KEEP/" 2>/dev/null
		echo "kept $1 in $E2E_KEEP" >&2
	}

	e2e_scratch() {
		local _d
		_d=$(mktemp -d "${3:-${E2E_TMPDIR:-/tmp}}/$2.XXXXXX")
		e2e_on_exit "_e2e_keep '$_d'; rm -rf '$_d'"
		printf -v "$1" '%s' "$_d"
	}

	fail() {
		echo "FAIL: $*" >&2
		local f
		for f in "${E2E_LOGS[@]}" ${BROKER_LOGFILE:+"$BROKER_LOGFILE"}; do
			if [ -s "$f" ]; then
				echo "--- $f (tail) ---" >&2
				tail -n 30 "$f" >&2
			fi
		done
		exit 1
	}

	pass() { echo "ok: $*"; }

	# A script under set -e that dies on a failed command says which one:
	# without this, a command that fails outside an if or a || (an echo
	# into a full disk, a wait on a child that died) ends the test with no
	# word in its log.  Only when errexit is on: scripts that turn it off
	# for a stretch (set +e) handle their failures themselves.
	_e2e_err() {
		local rc=$1 line=$2 cmd=$3 i
		case $- in *e*) ;; *) return 0 ;; esac
		{
			echo "e2e: ${BASH_SOURCE[1]:-?}:$line: '$cmd' exited $rc; the script stops here (set -e)"
			for ((i = 1; i < ${#FUNCNAME[@]}; i++)); do
				[ "${FUNCNAME[i]}" != main ] || break
				echo "e2e:   in ${FUNCNAME[i]} called from ${BASH_SOURCE[i + 1]:-?}:${BASH_LINENO[i]}"
			done
		} >&2
		return 0
	}
fi

if [ "${1:?source ci/lib/e2e.sh NAME (or --functions)}" != --functions ] && [ -z "${_E2E_TEST:-}" ]; then
	_E2E_TEST=$1
	set -E # errtrace: the ERR trap in functions and subshells too
	trap '_e2e_err $? $LINENO "$BASH_COMMAND"' ERR
	source ci/lib/broker.sh # registers broker_cleanup with e2e_on_exit at broker_start
	PY=/usr/bin/python3
	e2e_scratch T "kaas-$1" # first pushed: removed last
	BROKER_LOG=$T/broker.log
fi
