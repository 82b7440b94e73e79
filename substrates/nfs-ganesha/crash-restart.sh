#!/bin/bash
# substrates/nfs-ganesha/crash-restart.sh — simulate a server crash: SIGKILL
# the ganesha of STATEDIR (no shutdown, nothing flushed) and start it again
# with the same configuration and a new epoch.  With FSAL_MEM the exported
# data is gone afterwards; with FSAL_VFS it survives (the kernel page cache
# outlives ganesha), which makes VFS the positive control.
#
#   crash-restart.sh STATEDIR
#
# Suitable as a conformance --crash-cmd.  Clients see their connection reset;
# NFSv3 clients continue, NFSv4 clients must establish a new client ID.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

[ $# -ge 1 ] || die "usage: crash-restart.sh STATEDIR"
D=$(cd "$1" && pwd)
gp=$(state_get "$D" ganesha_pid)
is_pid_of "$gp" ganesha.nfsd || die "no running ganesha in $D"
anchor=$(state_get "$D" rpcbind_pid)
kill -KILL "$gp"
wait_for 10 eval "! alive $gp" || die "ganesha $gp survived SIGKILL"
# The listening socket goes with the process; wait until the port is free so
# the new instance can bind it.
wait_for 10 sh -c "! nsenter -t $anchor -n ss -Hltn 'sport = :2049' | grep -q LISTEN" ||
	die "port 2049 still in use"
start_ganesha "$D"
echo "ganesha restarted: pid $(state_get "$D" ganesha_pid) epoch $(state_get "$D" epoch)"
