# substrates/nfs-ganesha/lib.sh — shared by start.sh, stop.sh, crash-restart.sh
# and run.sh (sourced, not executed).  See start.sh for the layout of a state
# directory and what each file in it means.

GANESHA_PLUGINS=${GANESHA_PLUGINS:-/usr/lib/x86_64-linux-gnu/ganesha}

die() { echo "nfs-ganesha: $*" >&2; exit 1; }

# wait_for SECONDS CMD... — poll CMD every 20 ms until it succeeds.
wait_for() {
	local deadline=$(( $(date +%s%N) + $1 * 1000000000 )); shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s%N)" -lt "$deadline" ] || return 1
		sleep 0.02
	done
}

# state_get DIR KEY — one value from DIR/state (KEY=VALUE lines).
state_get() {
	[ -f "$1/state" ] || return 0
	sed -n "s/^$2=//p" "$1/state" | tail -n 1
}

state_set() {	# state_set DIR KEY VALUE
	local tmp="$1/state.tmp.$$"
	{ [ -f "$1/state" ] && grep -v "^$2=" "$1/state"; echo "$2=$3"; } >"$tmp" || true
	mv -f "$tmp" "$1/state"
}

# is_pid_of PID NAME — the process exists and its command is NAME (guards
# against signalling a recycled pid).
is_pid_of() {
	[ -n "$1" ] && [ -r "/proc/$1/comm" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] && alive "$1"
}

# alive PID — the process exists and is not a zombie (an exited server whose
# parent, often init, has not reaped it yet is gone for our purposes).
alive() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# stop_pid PID NAME SECONDS — SIGTERM, wait, then SIGKILL.
stop_pid() {
	is_pid_of "$1" "$2" || return 0
	kill -TERM "$1" 2>/dev/null || true
	if ! wait_for "$3" eval "! alive $1"; then
		kill -KILL "$1" 2>/dev/null || true
		wait_for 5 eval "! alive $1" || true
	fi
}

# A server epoch (-E) that differs from every previous start in this state
# directory: NFSv3 clients detect a server restart by a changed write
# verifier, which ganesha derives from the epoch.
next_epoch() {
	local last now
	last=$(state_get "$1" epoch)
	now=$(date +%s)
	if [ -n "$last" ] && [ "$now" -le "$last" ]; then now=$((last + 1)); fi
	echo "$now"
}

# start_ganesha DIR — start ganesha.nfsd inside the namespaces of the
# instance's rpcbind (network and private mount namespace) and wait until it
# serves.
start_ganesha() {
	local d=$1 anchor epoch pid
	anchor=$(state_get "$d" rpcbind_pid)
	is_pid_of "$anchor" rpcbind || die "rpcbind of $d is not running"
	epoch=$(next_epoch "$d")
	state_set "$d" epoch "$epoch"
	[ -f "$d/ganesha.log" ] && mv -f "$d/ganesha.log" "$d/ganesha.log.$epoch"
	rm -f "$d/ganesha.pid"
	setsid nsenter -t "$anchor" -m -n -- ganesha.nfsd -F -f "$d/ganesha.conf" \
		-L "$d/ganesha.log" -p "$d/ganesha.pid" -E "$epoch" \
		</dev/null >>"$d/ganesha.out" 2>&1 &
	pid=$!
	state_set "$d" ganesha_pid "$pid"
	if ! wait_for 20 grep -q "NFS SERVER INITIALIZED" "$d/ganesha.log"; then
		echo "nfs-ganesha: ganesha did not start; its log says:" >&2
		grep -E "CRIT|FATAL|MAJ" "$d/ganesha.log" 2>/dev/null | grep -v -E "DBUS|krb5|keytab" >&2 || true
		return 1
	fi
	# NFSv3 clients that use the portmapper need the registrations.
	wait_for 10 nsenter -t "$anchor" -n rpcinfo -T tcp 127.0.0.1 nfs 3 ||
		{ echo "nfs-ganesha: NFSv3 not registered with rpcbind" >&2; return 1; }
	wait_for 10 nsenter -t "$anchor" -n rpcinfo -T tcp 127.0.0.1 mountd 3 ||
		{ echo "nfs-ganesha: MOUNT not registered with rpcbind" >&2; return 1; }
}
