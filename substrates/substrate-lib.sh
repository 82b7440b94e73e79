# substrate-lib.sh — shared by the start/stop scripts of the test substrates
# under substrates/<name>/ (sourced, not run).
#
# The contract every substrate follows:
#
#   substrates/<name>/start.sh STATE   bring the substrate up; STATE is an
#                                      existing empty directory owned by the
#                                      caller.  On success prints, and writes
#                                      to STATE/env, shell assignments:
#        SUB_URL=...        the URL (or path) the conformance tool checks
#        SUB_MOUNTS=...     further URLs of the same share, one per extra
#                           client, space separated (may be empty)
#        SUB_CRASH_CMD=...  a command that simulates a crash of the server
#                           side: a daemon killed and started again (empty
#                           when the substrate has none); kaas-conform
#                           --crash-cmd, which cannot prove durability
#        SUB_POWER_LOSS_CMD=...  a command that simulates a power cut of
#                           the storage: whatever had not reached stable
#                           storage is gone afterwards (empty when none);
#                           kaas-conform --power-loss-cmd, the only hook
#                           that proves durability (docs/conformance.md says
#                           what a faithful one must do)
#        SUB_WRAP=...       a prefix to run the tool under (empty, eatmydata)
#        SUB_INFO=...       one line: what was started (versions, options)
#   substrates/<name>/stop.sh STATE    tear down whatever start managed to set
#                                      up; safe to run twice, after a failed
#                                      start, or while a check is running.
#
# start.sh records every resource in STATE/resources before creating it
# ("mount PATH", "pid PIDFILE", "pidnow PID", "pidkill PIDFILE", "netns NAME",
# "loop DEV", "file PATH" for a file a daemon leaves outside STATE);
# sub_teardown undoes them newest first, so a half-finished start is cleaned
# up like a full one.

SUB_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# fail, pass and the one cleanup stack (e2e_on_exit) of every script.
source "$SUB_LIB_DIR/../ci/lib/e2e.sh" --functions

sub_log() { echo "[$(date +%H:%M:%S)] ${SUB_NAME:-substrate}: $*" >&2; }
sub_die() { sub_log "error: $*"; exit 1; }

# sub_wait SECONDS CMD... — poll CMD every 50 ms until it succeeds.
sub_wait() {
	local deadline=$(( $(date +%s%N) + $1 * 1000000000 )); shift
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s%N)" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}

# sub_init STATE — check the state directory and make sure the caller's
# failure paths tear down what was started so far.
sub_init() {
	STATE=${1:?usage: start.sh STATE_DIR}
	[ -d "$STATE" ] || sub_die "state directory $STATE does not exist"
	STATE=$(cd "$STATE" && pwd)
	: >>"$STATE/resources"
	SUB_URL= SUB_MOUNTS= SUB_CRASH_CMD= SUB_POWER_LOSS_CMD= SUB_WRAP= SUB_INFO=
}

# Used by start.sh: on any failure, undo everything recorded so far.
sub_start_guard() {
	e2e_on_exit '[ "$E2E_RC" = 0 ] || { sub_log "start failed (exit $E2E_RC), tearing down"; sub_teardown "$STATE"; }'
	trap 'exit 130' INT TERM
}

sub_record() { echo "$1 $2" >>"$STATE/resources"; }

# sub_publish — write STATE/env and print it.
sub_publish() {
	{
		printf 'SUB_URL=%q\n' "$SUB_URL"
		printf 'SUB_MOUNTS=%q\n' "$SUB_MOUNTS"
		printf 'SUB_CRASH_CMD=%q\n' "$SUB_CRASH_CMD"
		printf 'SUB_POWER_LOSS_CMD=%q\n' "${SUB_POWER_LOSS_CMD:-}"
		printf 'SUB_WRAP=%q\n' "$SUB_WRAP"
		printf 'SUB_INFO=%q\n' "$SUB_INFO"
	} >"$STATE/env.tmp"
	mv "$STATE/env.tmp" "$STATE/env"
	cat "$STATE/env"
}

# sub_free_port — a TCP port nobody listens on, picked at random so that
# runs side by side rarely collide (the bind that follows is the real test).
sub_free_port() {
	local p i
	for i in $(seq 1 100); do
		p=$(( 20000 + RANDOM % 30000 ))
		ss -Htan "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return 0; }
	done
	return 1
}

# sub_netns NAME — a network namespace with only loopback.  glibc's
# AI_ADDRCONFIG ignores 127.0.0.1, so daemons that resolve their bind address
# need a second loopback address to find one at all.
sub_netns() {
	sub_record netns "$1"
	ip netns add "$1"
	ip netns exec "$1" ip link set lo up
	ip netns exec "$1" ip addr add 127.0.0.2/8 dev lo
}

# sub_in_ns NS CMD... — run CMD in the network namespace but in the caller's
# mount namespace ("ip netns exec" would hide FUSE mounts made inside it).
sub_in_ns() { local ns=$1; shift; nsenter --net="/run/netns/$ns" -- "$@"; }

sub_is_mounted() { mountpoint -q "$1" 2>/dev/null; }

sub_unmount() {
	local m=$1 i
	for i in 1 2 3 4 5 6 7 8 9 10; do
		# a dead FUSE daemon leaves a mount that mountpoint(1) cannot stat
		grep -qs " $m " /proc/self/mountinfo || return 0
		fusermount3 -u "$m" 2>/dev/null || umount "$m" 2>/dev/null || true
		grep -qs " $m " /proc/self/mountinfo || return 0
		sleep 0.2
	done
	sub_log "unmounting $m lazily (still busy)"
	fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
}

# sub_alive PID — running (a zombie waiting for its reaper is not).
sub_alive() {
	[ -n "$1" ] && [ -r "/proc/$1/stat" ] || return 1
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# sub_kill PID [SECONDS] — SIGTERM, wait, then SIGKILL.
sub_kill() {
	local p=$1 t=${2:-10}
	sub_alive "$p" || return 0
	kill -TERM "$p" 2>/dev/null || true
	sub_wait "$t" eval "! sub_alive $p" || { sub_log "pid $p ignored SIGTERM, killing"; kill -KILL "$p" 2>/dev/null || true; }
	sub_wait 5 eval "! sub_alive $p" || true
}

sub_pid_of() { [ -s "$1" ] && tr -dc '0-9' <"$1"; }

# sub_teardown STATE — undo every recorded resource, newest first.
sub_teardown() {
	local st=$1 kind what
	[ -f "$st/resources" ] || return 0
	tac "$st/resources" | while read -r kind what; do
		case $kind in
		mount) sub_unmount "$what" ;;
		pid) sub_kill "$(sub_pid_of "$what")" ;;
		pidnow) sub_kill "$what" ;;
		# daemons whose state is thrown away: no point in a clean shutdown
		pidkill) p=$(sub_pid_of "$what"); if sub_alive "$p"; then kill -KILL "$p"; sub_wait 5 eval "! sub_alive $p" || true; fi ;;
		netns)
			if [ -e "/run/netns/$what" ]; then
				for p in $(ip netns pids "$what" 2>/dev/null); do sub_kill "$p" 5; done
				ip netns del "$what" 2>/dev/null || sub_log "could not delete netns $what"
			fi ;;
		loop)
			if losetup "$what" 2>/dev/null | grep -qF "$st"; then
				losetup -d "$what" 2>/dev/null || true
				# detaching completes when the last user lets go
				sub_wait 10 eval "! losetup '$what' 2>/dev/null | grep -qF '$st'" ||
					sub_log "loop device $what is still attached"
			fi ;;
		file) rm -f "$what" ;;
		esac
	done
	mv -f "$st/resources" "$st/resources.done"
}

# sub_check_clean STATE — fail loudly if anything recorded is still there.
sub_check_clean() {
	local st=$1 kind what bad=0
	[ -f "$st/resources.done" ] || return 0
	while read -r kind what; do
		case $kind in
		mount) grep -qs " $what " /proc/self/mountinfo && { sub_log "still mounted: $what"; bad=1; } ;;
		pid|pidkill) p=$(sub_pid_of "$what"); sub_alive "$p" && { sub_log "still running: $p ($what)"; bad=1; } ;;
		pidnow) sub_alive "$what" && { sub_log "still running: $what"; bad=1; } ;;
		netns) [ -e "/run/netns/$what" ] && { sub_log "netns left: $what"; bad=1; } ;;
		loop) losetup "$what" 2>/dev/null | grep -q "$st" && { sub_log "loop device left: $what"; bad=1; } ;;
		file) [ -e "$what" ] || [ -L "$what" ] && { sub_log "file left: $what"; bad=1; } ;;
		esac
	done <"$st/resources.done"
	return $bad
}

# sub_leftovers STATE — what is still there of STATE whether recorded or not:
# a process whose command line names STATE, a mount under STATE, a loop
# device backed by a file in STATE.  Names each on stderr; fails if any.
sub_leftovers() {
	local st=$1 bad=0 l
	while read -r l; do
		[ -n "$l" ] && { sub_log "process left: $l"; bad=1; }
	done < <(pgrep -af -- "$st" || true)
	while read -r l; do
		[ -n "$l" ] && { sub_log "mount left: $l"; bad=1; }
	done < <(awk -v p="$st/" 'index($5, p) == 1 || $5 == substr(p, 1, length(p) - 1) { print $5 }' /proc/self/mountinfo)
	while read -r l; do
		[ -n "$l" ] && { sub_log "loop device left: $l"; bad=1; }
	done < <(losetup -a 2>/dev/null | grep -F "($st/" || true)
	return $bad
}
