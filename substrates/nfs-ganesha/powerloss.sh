#!/bin/bash
# substrates/nfs-ganesha/powerloss.sh STATEDIR — a power cut of the NFS
# server, for kaas-conform --power-loss-cmd.  A faithful model must take
# away everything that had not reached stable storage, not only the server
# process:
#
#   1. ganesha is killed with SIGKILL (no shutdown, nothing flushed);
#   2. the export's storage is reduced to what it would hold after the cut:
#      NFS_EXPORT_ON=tmpfs — RAM holds nothing after a power cut: the
#        export is emptied;
#      NFS_EXPORT_ON=loop — the image is copied while mounted, so the copy
#        holds exactly what reached the "disk" (not the page cache), the
#        copy's journal is replayed (e2fsck) and the file under test
#        (KAAS_CONFORM_FILE, relative to the export) is set back to what the
#        copy holds, or removed when it has none; the rest of the live
#        filesystem stays, so the run can go on;
#   3. ganesha is started again with a new epoch (the NFSv3 write verifier
#      changes, so clients learn of the restart).
#
# A restart alone (crash-restart.sh) is not a power cut: the page cache and
# a tmpfs outlive the process.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

[ $# -ge 1 ] || die "usage: powerloss.sh STATEDIR"
D=$(cd "$1" && pwd)
on=$(state_get "$D" export_on)
gp=$(state_get "$D" ganesha_pid)
is_pid_of "$gp" ganesha.nfsd || die "no running ganesha in $D"
anchor=$(state_get "$D" rpcbind_pid)
kill -KILL "$gp"
wait_for 10 eval "! alive $gp" || die "ganesha $gp survived SIGKILL"
case $on in
tmpfs)
	find "$D/export" -mindepth 1 -delete
	echo "power cut: the RAM export is empty" >&2 ;;
loop)
	inner=${KAAS_CONFORM_FILE:?KAAS_CONFORM_FILE is not set (run as kaas-conform --power-loss-cmd)}
	inner=/${inner#/}
	snap=$D/powerloss.img
	trap 'rm -f "$snap" "$D/survivor"' EXIT
	cp --sparse=always "$D/export.img" "$snap"
	rc=0; e2fsck -fy "$snap" >"$D/fsck.log" 2>&1 || rc=$?
	[ $rc -lt 4 ] || die "e2fsck could not repair the copy (exit $rc)"
	rm -f "$D/survivor"
	debugfs -R "dump \"$inner\" \"$D/survivor\"" "$snap" >/dev/null 2>"$D/debugfs.log" || true
	if [ -f "$D/survivor" ] && ! grep -q 'File not found' "$D/debugfs.log"; then
		cat "$D/survivor" >"$D/export$inner"
		echo "power cut: $inner kept $(stat -c %s "$D/survivor") bytes (e2fsck exit $rc)" >&2
	else
		rm -f "$D/export$inner"
		echo "power cut: $inner did not survive (e2fsck exit $rc)" >&2
	fi ;;
*) die "export on '${on:-dir}': a power cut cannot be modelled (NFS_EXPORT_ON=tmpfs or loop)" ;;
esac
wait_for 10 sh -c "! nsenter -t $anchor -n ss -Hltn 'sport = :2049' | grep -q LISTEN" ||
	die "port 2049 still in use"
start_ganesha "$D"
echo "ganesha restarted after the power cut: pid $(state_get "$D" ganesha_pid) epoch $(state_get "$D" epoch)" >&2
