#!/bin/bash
# substrates/lyingfs/crash.sh STATE — a simulated crash and restart of both
# FUSE daemons: SIGUSR1 makes each forget everything it holds in memory, as
# a daemon that died and was started again would have, while the mounts (and
# the descriptors the clients hold on them) stay.  Killing the daemon for
# real would end its mount, and nothing that had the old mount open could
# go on.  Waits until both daemons have done it.
set -euo pipefail
SUB_NAME=lyingfs-crash
. "$(dirname "$0")/../substrate-lib.sh"
STATE=${1:?usage: crash.sh STATE}
crashes() { grep -c 'kaas-lyingfs: crash ' "$STATE/lyingfs-$1.log" || true; }
for m in mA mB; do
	p=$(sub_pid_of "$STATE/lyingfs-$m.pid")
	sub_alive "$p" || sub_die "the $m daemon is not running"
	before=$(crashes $m)
	kill -USR1 "$p"
	sub_wait 10 eval "[ \$(crashes $m) -gt $before ]" || sub_die "the $m daemon did not acknowledge the crash"
	sub_log "$m: $(grep 'kaas-lyingfs: crash ' "$STATE/lyingfs-$m.log" | tail -1)"
done
