#!/bin/bash
# substrates/loop-ext4/crash.sh STATE — a simulated power cut, applied to the
# file the conformance tool crashed on (KAAS_CONFORM_PATH, set by
# kaas-conform --crash-cmd).  The disk image is copied while mounted, so the
# copy holds exactly what reached the "disk", not the page cache; the copy's
# journal is replayed (e2fsck, as after a reboot) and the file is read out
# of it with debugfs.  The live file is then made to hold exactly that (or
# removed when the copy has no such file).  The live filesystem stays
# mounted: every client keeps its descriptors and the rest of the run goes
# on; only the file under test goes back to what survived the cut.
set -euo pipefail
SUB_NAME=loop-ext4-crash
. "$(dirname "$0")/../substrate-lib.sh"
STATE=${1:?usage: crash.sh STATE}
live=${KAAS_CONFORM_PATH:?KAAS_CONFORM_PATH is not set (run as kaas-conform --crash-cmd)}
mnt=$STATE/mnt
case $live in "$mnt"/*) ;; *) sub_die "$live is not on $mnt" ;; esac
inner=${live#"$mnt"}
snap=$STATE/snapshot.img
cp --sparse=always "$STATE/disk.0.img" "$snap"
trap 'rm -f "$snap" "$STATE/survivor"' EXIT
rc=0; e2fsck -fy "$snap" >"$STATE/fsck.log" 2>&1 || rc=$?
[ $rc -lt 4 ] || sub_die "e2fsck could not repair the copy (exit $rc)"
rm -f "$STATE/survivor"
debugfs -R "dump \"$inner\" \"$STATE/survivor\"" "$snap" >/dev/null 2>"$STATE/debugfs.log" || true
if [ -f "$STATE/survivor" ] && ! grep -q 'File not found' "$STATE/debugfs.log"; then
	cat "$STATE/survivor" >"$live"
	sub_log "power cut: $inner kept $(stat -c %s "$STATE/survivor") bytes (e2fsck exit $rc)"
else
	rm -f "$live"
	sub_log "power cut: $inner did not survive (e2fsck exit $rc)"
fi
