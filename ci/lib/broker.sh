# ci/lib/broker.sh — start and stop a real kaas broker for a test.
#
#   source ci/lib/broker.sh
#   broker_start DATA_DIR [extra kaas flags...]   # sets BROKER_PID BROKER_PORT BROKER
#   ... use "$BROKER" (127.0.0.1:PORT) ...
#   broker_restart [extra flags...]               # SIGTERM, then start again on the same port
#   broker_stop                                   # SIGTERM and wait; BROKER_RC = exit code
#   broker_kill                                   # SIGKILL (crash)
#   broker_crash_restart [extra flags...]         # SIGKILL, then start again on the same port
#   broker_refuses [-F] WHAT PATTERN [flags...]   # kaas on $T/data with these flags must
#                                                 # not start, and say PATTERN (-F: fixed string)
#
# The broker listens on 127.0.0.1 port 0 (a free port it picks and logs) and
# starts with --trust-unqualified unless BROKER_QUALIFIED=1.  Its log goes to
# $BROKER_LOG when set at broker_start (default DATA_DIR.log); BROKER_LOGFILE
# names the log in use (restarts append to it).  broker_cleanup stops it whatever
# happened; broker_start pushes it on the cleanup stack of ci/lib/e2e.sh (or,
# without that harness, installs it as the EXIT trap) unless BROKER_NO_TRAP=1
# (then call it from your own trap).
#
# BROKER_WRAP (optional) is a command prefix for the broker, e.g.
# "nsenter --net=/run/netns/NAME" to run it inside a test network namespace
# (the prefix must exec the broker so that BROKER_PID is the broker).
#
# Needs: BIN (the directory holding kaas; default bin), bash.

: "${BIN:=bin}"
BROKER_PID=
BROKER_PORT=
BROKER=
BROKER_RC=
BROKER_DATA=
BROKER_LOGFILE=
BROKER_ARGS=()

# Runs from EXIT traps, often under set -e: no step may fail (a kill of a
# broker that has just exited would end the trap before the rest of it).
broker_cleanup() {
	if [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2>/dev/null; then
		kill -TERM "$BROKER_PID" 2>/dev/null || true
		for _ in $(seq 1 300); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$BROKER_PID" 2>/dev/null || true
		wait "$BROKER_PID" 2>/dev/null || true
	fi
	BROKER_PID=
}

# Waits for the "listening on" line; prints the log and fails on exit/timeout.
_broker_wait_ready() {
	local log=$1 start=$2
	for _ in $(seq 1 600); do
		if ! kill -0 "$BROKER_PID" 2>/dev/null; then
			BROKER_RC=0
			wait "$BROKER_PID" || BROKER_RC=$?
			echo "broker.sh: kaas exited ($BROKER_RC) during start-up; log:" >&2
			tail -n +"$start" "$log" >&2
			BROKER_PID=
			return 1
		fi
		local line
		line=$(tail -n +"$start" "$log" | grep -m1 -o 'listening on [^ ]*:[0-9]*,' || true)
		# In the cluster, a broker leads only after it has watched its peers
		# for a session timeout and applied the assignment: "cluster: ready".
		if [ -n "$line" ] && [ "${BROKER_WAIT_READY:-1}" = 1 ] &&
			! grep -q 'cluster: ready' <(tail -n +"$start" "$log"); then
			line=
		fi
		if [ -n "$line" ]; then
			BROKER_PORT=${line##*:}
			BROKER_PORT=${BROKER_PORT%,}
			BROKER=127.0.0.1:$BROKER_PORT
			return 0
		fi
		sleep 0.1
	done
	echo "broker.sh: kaas did not start within 60 s; log:" >&2
	tail -n +"$start" "$log" >&2
	return 1
}

broker_start() {
	BROKER_DATA=$1
	shift
	BROKER_ARGS=("$@")
	BROKER_LOGFILE=${BROKER_LOG:-${BROKER_DATA##*:}.log}
	case $BROKER_DATA in
	*://* | posix:* | fault:*) ;; # a substrate URL: the caller prepares it
	*) mkdir -p "$BROKER_DATA" ;;
	esac
	if [ "${BROKER_NO_TRAP:-0}" != 1 ]; then
		if declare -F e2e_on_exit >/dev/null; then
			# on the harness's cleanup stack (ci/lib/e2e.sh), once
			[ -n "${_BROKER_ON_STACK:-}" ] || { _BROKER_ON_STACK=1; e2e_on_exit broker_cleanup; }
		else
			trap broker_cleanup EXIT
		fi
	fi
	_broker_launch 0
}

_broker_launch() {
	local port=$1 trust=(--trust-unqualified)
	[ "${BROKER_QUALIFIED:-0}" = 1 ] && trust=()
	touch "$BROKER_LOGFILE"
	local start=$(( $(wc -l < "$BROKER_LOGFILE") + 1 ))
	# shellcheck disable=SC2086 # BROKER_WRAP is a word list
	${BROKER_WRAP:-} "$BIN/kaas" --data "$BROKER_DATA" --listen "127.0.0.1:$port" "${trust[@]}" \
		"${BROKER_ARGS[@]}" >>"$BROKER_LOGFILE" 2>&1 &
	BROKER_PID=$!
	_broker_wait_ready "$BROKER_LOGFILE" "$start"
}

broker_stop() {
	BROKER_RC=
	[ -n "$BROKER_PID" ] || return 0
	kill -TERM "$BROKER_PID" 2>/dev/null || true # it may be on its way out already
	BROKER_RC=0
	wait "$BROKER_PID" || BROKER_RC=$?
	BROKER_PID=
	return 0
}

broker_kill() {
	[ -n "$BROKER_PID" ] || return 0
	kill -KILL "$BROKER_PID" 2>/dev/null || true
	wait "$BROKER_PID" 2>/dev/null || true
	BROKER_PID=
}

# Stops (SIGTERM) and starts again on the same port, so running clients
# reconnect; extra flags replace the previous ones when given.
broker_restart() {
	local port=$BROKER_PORT
	broker_stop
	[ "$BROKER_RC" = 0 ] || { echo "broker.sh: kaas exited $BROKER_RC on SIGTERM" >&2; return 1; }
	[ $# -gt 0 ] && BROKER_ARGS=("$@")
	_broker_launch "$port"
}

# A crash (SIGKILL), then a start on the same port; extra flags replace the
# previous ones when given.
broker_crash_restart() {
	local port=$BROKER_PORT
	broker_kill
	[ $# -gt 0 ] && BROKER_ARGS=("$@")
	_broker_launch "$port"
}

broker_refuses() {
	local how=-q
	if [ "$1" = -F ]; then
		how=-qF
		shift
	fi
	local what=$1 pat=$2
	shift 2
	if "$BIN/kaas" --data "$T/data" --trust-unqualified "$@" >"$T/refused.log" 2>&1; then
		fail "$what: the broker started"
	fi
	grep "$how" -- "$pat" "$T/refused.log" || { cat "$T/refused.log"; fail "$what: no '$pat'"; }
	pass "start-up refused: $what"
}
