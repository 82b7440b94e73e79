#!/bin/bash
# substrates/lyingfs/crash.sh STATE — the "crash": SIGKILL both FUSE daemons
# (whatever they held in memory is gone), detach the dead mounts and mount
# again over the same backing directory.
set -euo pipefail
SUB_NAME=lyingfs-crash
. "$(dirname "$0")/../substrate-lib.sh"
STATE=${1:?usage: crash.sh STATE}
for m in mA mB; do
	p=$(sub_pid_of "$STATE/lyingfs-$m.pid") || true
	[ -n "$p" ] && kill -KILL "$p" 2>/dev/null || true
done
for m in mA mB; do
	p=$(sub_pid_of "$STATE/lyingfs-$m.pid") || true
	[ -n "$p" ] && sub_wait 5 eval "! sub_alive $p"
	fusermount3 -uz "$STATE/$m" 2>/dev/null || umount -l "$STATE/$m" 2>/dev/null || true
done
bash "$(dirname "$0")/mount.sh" "$STATE"
sub_log "daemons killed and remounted"
