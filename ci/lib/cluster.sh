# ci/lib/cluster.sh — N kaas brokers on one data directory, for a test.
#
#   source ci/lib/e2e.sh NAME; source ci/lib/cluster.sh
#   cluster_start DIR N [extra kaas flags...]  # brokers 1..N on 127.0.0.1, free ports
#   "$CL_BOOT"                                 # 127.0.0.1:P1,127.0.0.1:P2,...
#   ${CL_PORT[i]} ${CL_PID[i]} ${CL_LOG[i]}    # broker i
#   cluster_kill i        # SIGKILL (no wait for a successor)
#   cluster_term i        # SIGTERM and wait; CL_RC[i] = exit code
#   cluster_stop_sig i SIG   # any signal, no wait
#   cluster_launch i      # (re)start broker i on its port, wait until it says ready
#   cluster_spawn i       # (re)start broker i on its port, no wait (a nemesis
#                         #   that must not block while the volume is away)
#   cluster_wait_ready i  # wait for what cluster_spawn started to say ready
#   cluster_alive i       # 0 when its process runs
#   cluster_revive i      # restart broker i if it gave up leadership (76/77)
#   cluster_sup_ready i   # supervised: wait until its supervisor runs a ready broker
#   cluster_cleanup       # SIGTERM everything still running (e2e_on_exit does it)
#   cluster_bpid i        # the broker's own pid (the supervisor's child when
#                         #   supervised, else CL_PID[i])
#
# CL_SUPERVISE=1 (before cluster_start) runs every broker under
# `kaas supervise` (no --restart: the test restarts, as before), which
# certifies a broker's end the moment waitpid() reports it.  Then CL_PID[i]
# is the supervisor (what `wait` and exit codes are about: it exits with the
# broker's status, 128+N for signal N, after writing the certificate), and
# the signals meant for the broker go to the broker: cluster_kill and
# cluster_stop_sig signal cluster_bpid i.  cluster_kill_supervisor i kill -9s
# the supervisor alone (the broker runs on, orphaned; cleanup still ends it).
#
# Each broker logs to $T/b<i>.log (appended across restarts), runs with
# --trust-unqualified and --broker-id i, listens on 127.0.0.1.  A broker is
# started when its log says both "listening on" and "cluster: ready" (it has
# watched its peers for a session timeout and leads what it was given).
# CL_WRAP (optional) prefixes the command, like BROKER_WRAP.
#
# Brokers on other "hosts" (network namespaces of their own, as in
# ci/cluster/test_nfs_cut.sh): set before cluster_start, per broker i,
#   CL_HOST[i]   the address it listens on and advertises (default 127.0.0.1)
#   CL_NSWRAP[i] a command prefix that runs it there, e.g.
#                "nsenter --net=/run/netns/NS" (after CL_WRAP)

CL_DIR=
CL_N=0
CL_BOOT=
CL_ARGS=()
declare -a CL_PID CL_PORT CL_LOG CL_RC CL_HOST CL_NSWRAP CL_START CL_ORPHAN

_cl_wait() { # _cl_wait i start_line
	local i=$1 start=$2 log=${CL_LOG[$1]}
	for _ in $(seq 1 900); do
		if ! kill -0 "${CL_PID[$i]}" 2>/dev/null; then
			CL_RC[$i]=0
			wait "${CL_PID[$i]}" || CL_RC[$i]=$?
			echo "cluster.sh: broker $i exited (${CL_RC[$i]}) during start-up; log:" >&2
			tail -n +"$start" "$log" | tail -n 40 >&2
			CL_PID[$i]=
			return 1
		fi
		local line
		line=$(tail -n +"$start" "$log" | grep -m1 -o 'listening on [^ ]*:[0-9]*,' || true)
		if [ -n "$line" ] && grep -q 'cluster: ready' <(tail -n +"$start" "$log"); then
			line=${line##*:}
			CL_PORT[$i]=${line%,}
			return 0
		fi
		sleep 0.1
	done
	echo "cluster.sh: broker $i did not become ready within 90 s; log:" >&2
	tail -n +"$start" "$log" | tail -n 40 >&2
	return 1
}

# Starts broker i in the background on port $2 (0: any), appending to its log.
_cl_spawn() {
	local i=$1 port=$2 sup=()
	touch "${CL_LOG[$i]}"
	CL_START[$i]=$(( $(wc -l < "${CL_LOG[$i]}") + 1 ))
	[ "${CL_SUPERVISE:-0}" = 1 ] && sup=(supervise --)
	# shellcheck disable=SC2086 # CL_WRAP and CL_NSWRAP are word lists
	${CL_WRAP:-} ${CL_NSWRAP[$i]:-} "$BIN/kaas" "${sup[@]}" --data "$CL_DIR" --listen "${CL_HOST[$i]:-127.0.0.1}:$port" \
		--broker-id "$i" --trust-unqualified "${CL_ARGS[@]}" >>"${CL_LOG[$i]}" 2>&1 &
	CL_PID[$i]=$!
}

cluster_launch() {
	local i=$1
	_cl_spawn "$i" "${CL_PORT[$i]:-0}"
	_cl_wait "$i" "${CL_START[$i]}"
}

cluster_spawn() { _cl_spawn "$1" "${CL_PORT[$1]:-0}"; }

# The broker process of broker i: the supervisor's only child (it forks
# the broker right away; waits up to 10 s for it), or CL_PID[i] itself.
cluster_bpid() {
	local i=$1 p=${CL_PID[$1]:-} c
	[ -n "$p" ] || return 1
	if [ "${CL_SUPERVISE:-0}" != 1 ]; then echo "$p"; return 0; fi
	for _ in $(seq 1 200); do
		c=$(pgrep -P "$p" | head -1)
		[ -n "$c" ] && { echo "$c"; return 0; }
		kill -0 "$p" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

cluster_wait_ready() { _cl_wait "$1" "${CL_START[$1]:-1}"; }

_cl_boot() {
	CL_BOOT=
	local i
	for i in $(seq 1 "$CL_N"); do
		CL_BOOT=${CL_BOOT:+$CL_BOOT,}${CL_HOST[$i]:-127.0.0.1}:${CL_PORT[$i]}
	done
}

cluster_start() {
	CL_DIR=$1
	CL_N=$2
	shift 2
	CL_ARGS=("$@")
	case $CL_DIR in *://*|*:/*) ;; *) mkdir -p "$CL_DIR" ;; esac
	local i
	for i in $(seq 1 "$CL_N"); do
		CL_LOG[$i]=$T/b$i.log
		CL_PORT[$i]=0
		# Started one after the other: each must find its port before the
		# next one starts; they become ready about together.
		_cl_spawn "$i" 0
	done
	for i in $(seq 1 "$CL_N"); do
		_cl_wait "$i" 1 || return 1
	done
	_cl_boot
}

cluster_alive() { [ -n "${CL_PID[$1]:-}" ] && kill -0 "${CL_PID[$1]}" 2>/dev/null; }

# Supervised, the broker is killed and the supervisor waited for: it ends
# (with 137) once it has written the certificate.
cluster_kill() {
	local i=$1 b
	[ -n "${CL_PID[$i]:-}" ] || return 0
	b=$(cluster_bpid "$i") || b=${CL_PID[$i]}
	kill -KILL "$b" 2>/dev/null || true
	CL_RC[$i]=0
	wait "${CL_PID[$i]}" 2>/dev/null || CL_RC[$i]=$?
	CL_PID[$i]=
}

# kill -9 of broker i's supervisor only; its broker runs on (CL_ORPHAN[i]).
# cluster_sup_ready i [timeout_s]: with CL_SUPERVISE=1, waits until broker
# i's supervisor runs a child whose incarnation said "cluster: ready" (a
# supervisor restarting a broker that gave up — a slow fsync on a loaded
# machine is enough — has no child for a moment, then a joining one).
cluster_sup_ready() {
	local i=$1 end=$((SECONDS + ${2:-60})) log=${CL_LOG[$1]} from
	while [ "$SECONDS" -lt "$end" ]; do
		cluster_alive "$i" || return 1
		from=$(grep -n "supervise: started the broker" "$log" | tail -1 | cut -d: -f1)
		if [ -n "$from" ] && [ -n "$(pgrep -P "${CL_PID[$i]}" | head -1)" ] &&
			grep -q "cluster: ready" <(tail -n +"$from" "$log"); then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

cluster_kill_supervisor() {
	local i=$1
	CL_ORPHAN[$i]=$(cluster_bpid "$i") || CL_ORPHAN[$i]=
	kill -KILL "${CL_PID[$i]}" 2>/dev/null || true
	wait "${CL_PID[$i]}" 2>/dev/null || true
	CL_PID[$i]=
}

cluster_term() {
	local i=$1
	CL_RC[$i]=
	[ -n "${CL_PID[$i]:-}" ] || return 0
	kill -TERM "${CL_PID[$i]}" 2>/dev/null || true
	CL_RC[$i]=0
	wait "${CL_PID[$i]}" || CL_RC[$i]=$?
	CL_PID[$i]=
}

cluster_stop_sig() {
	local b
	b=$(cluster_bpid "$1") || b=${CL_PID[$1]:-}
	[ -n "$b" ] && kill -"$2" "$b" 2>/dev/null
	true
}

# cluster_revive i: what a supervisor does for a broker that gave up its
# leadership on its own.  A broker whose lease lapsed or whose watchdog
# fired (a slow fsync on a loaded machine is enough) exits 76 or 77 with
# the reason in its log, by design, and is started again as a new
# incarnation.  Returns 0 when broker i runs (again), 1 (with the reason on
# stderr) when it died any other way.
cluster_revive() {
	local i=$1 rc=0 why
	cluster_alive "$i" && return 0
	[ -z "${CL_PID[$i]:-}" ] || wait "${CL_PID[$i]}" || rc=$?
	CL_PID[$i]=
	why=$(grep -o "gives up leadership: [^;]*" "${CL_LOG[$i]}" | tail -1)
	if { [ "$rc" != 76 ] && [ "$rc" != 77 ]; } || [ -z "$why" ]; then
		echo "broker $i died: exit $rc, ${why:-no reason in its log}" >&2
		return 1
	fi
	echo "note: broker $i exited $rc ($why); restarted as its supervisor would"
	cluster_launch "$i"
}

cluster_cleanup() {
	set +e
	local i b
	declare -a bp
	for i in $(seq 1 "$CL_N"); do
		if [ -n "${CL_PID[$i]:-}" ]; then
			b=${CL_PID[$i]}
			[ "${CL_SUPERVISE:-0}" = 1 ] && b=$(pgrep -P "${CL_PID[$i]}" | head -1)
			bp[i]=$b
			[ -n "$b" ] && kill -CONT "$b" 2>/dev/null
			kill -TERM "${CL_PID[$i]}" 2>/dev/null
		fi
		# an orphan of a killed supervisor
		[ -n "${CL_ORPHAN[$i]:-}" ] && kill -CONT "${CL_ORPHAN[$i]}" 2>/dev/null && kill -TERM "${CL_ORPHAN[$i]}" 2>/dev/null
	done
	for i in $(seq 1 "$CL_N"); do
		if [ -n "${CL_ORPHAN[$i]:-}" ]; then
			for _ in $(seq 1 300); do kill -0 "${CL_ORPHAN[$i]}" 2>/dev/null || break; sleep 0.1; done
			kill -KILL "${CL_ORPHAN[$i]}" 2>/dev/null
			CL_ORPHAN[$i]=
		fi
		[ -n "${CL_PID[$i]:-}" ] || continue
		for _ in $(seq 1 300); do kill -0 "${CL_PID[$i]}" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "${CL_PID[$i]}" 2>/dev/null; then
			[ -n "${bp[i]:-}" ] && kill -KILL "${bp[i]}" 2>/dev/null
			kill -KILL "${CL_PID[$i]}" 2>/dev/null
		fi
		wait "${CL_PID[$i]}" 2>/dev/null
		CL_PID[$i]=
	done
}

# Prints the tails of every broker's log (for fail messages).
# Last, one digest of each broker (why it gave up, its last warnings), so
# that a reader of a cut-off CI log still sees every broker's story.
cluster_logs() {
	local i
	for i in $(seq 1 "$CL_N"); do
		echo "--- broker $i (tail) ---" >&2
		tail -n "${1:-25}" "${CL_LOG[$i]}" 2>/dev/null | grep -v ' DEBUG ' >&2 || true
	done
	# "|| true": a broker with nothing to show must not end the caller
	# (set -e, pipefail) before its fail message.
	for i in $(seq 1 "$CL_N"); do
		echo "--- broker $i (digest) ---" >&2
		{ grep -E ' (WARN|ERROR) ' "${CL_LOG[$i]}" 2>/dev/null | grep -v -e 'Stale file handle' -e ' gate: ' |
			tail -n 6 >&2; } || true
	done
}
e2e_on_exit cluster_cleanup
