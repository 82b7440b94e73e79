#!/bin/bash
# substrates/nfs-ganesha/stop.sh — stop what start.sh STATEDIR started:
# ganesha (SIGTERM, SIGKILL after 10 s), rpcbind, the network namespace.
#
#   stop.sh STATEDIR [--kill]
#
# --kill skips ganesha's clean shutdown (1-4 s) when the test does not care
# about it.  Idempotent and safe after a failed or partial start; it never
# removes STATEDIR itself (the caller owns it; the logs are there).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

[ $# -ge 1 ] || die "usage: stop.sh STATEDIR [--kill]"
D=$1
GRACE=10
[ "${2:-}" = --kill ] && GRACE=0
[ -d "$D" ] || exit 0

gp=$(state_get "$D" ganesha_pid)
if is_pid_of "$gp" ganesha.nfsd; then
	if [ "$GRACE" = 0 ]; then kill -KILL "$gp" 2>/dev/null; wait_for 5 eval "! alive $gp"
	else stop_pid "$gp" ganesha.nfsd "$GRACE"; fi
fi
# rpcbind keeps nothing worth a clean shutdown (its /run is a tmpfs of its
# own mount namespace) and takes 2 s to honour SIGTERM.
rp=$(state_get "$D" rpcbind_pid)
if is_pid_of "$rp" rpcbind; then
	kill -KILL "$rp" 2>/dev/null
	wait_for 5 eval "! alive $rp"
fi
# The export's own storage (NFS_EXPORT_ON=tmpfs or loop), once ganesha
# has let go of it.
em=$(state_get "$D" export_mount)
if [ -n "$em" ] && grep -qs " $em " /proc/self/mountinfo; then
	umount "$em" 2>/dev/null || umount -l "$em" 2>/dev/null || true
fi
el=$(state_get "$D" export_loop)
if [ -n "$el" ] && losetup "$el" 2>/dev/null | grep -qF "$D/"; then
	losetup -d "$el" 2>/dev/null || true
fi
state_set "$D" export_mount ""
state_set "$D" export_loop ""
ns=$(state_get "$D" ns)
if [ -n "$ns" ] && [ -e "/run/netns/$ns" ]; then
	# Clients the caller left inside keep the namespace itself alive until
	# they exit; they are the caller's to stop.
	ip netns del "$ns" 2>/dev/null || true
fi
state_set "$D" ganesha_pid ""
state_set "$D" rpcbind_pid ""
exit 0
