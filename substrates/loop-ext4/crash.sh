#!/bin/bash
# substrates/loop-ext4/crash.sh STATE — simulated power cut.  Copies the disk
# image while mounted (what the block device holds, not the page cache), drops
# the live filesystem, replays the journal on the copy as a reboot would, and
# mounts the copy at the same place.  Open descriptors keep pointing at the
# old, detached filesystem; anything opened afterwards sees the survivor.
set -euo pipefail
SUB_NAME=loop-ext4-crash
. "$(dirname "$0")/../substrate-lib.sh"
STATE=${1:?usage: crash.sh STATE}
gen=$(cat "$STATE/generation")
next=$(( gen + 1 ))
cp --sparse=always "$STATE/disk.$gen.img" "$STATE/disk.$next.img"
old=$(findmnt -no SOURCE "$STATE/mnt")
umount -l "$STATE/mnt"
[ -n "$old" ] && { losetup -d "$old" 2>/dev/null || true; }
rc=0; e2fsck -fy "$STATE/disk.$next.img" >"$STATE/fsck.$next.log" 2>&1 || rc=$?
[ $rc -lt 4 ] || sub_die "e2fsck could not repair the image (exit $rc)"
dev=$(losetup -f --show "$STATE/disk.$next.img")
echo "loop $dev" >>"$STATE/resources"
echo "mount $STATE/mnt" >>"$STATE/resources"
mount -o noauto_da_alloc "$dev" "$STATE/mnt"
echo "$next" >"$STATE/generation"
# the old image is still written by descriptors opened before the cut; it is
# no longer the disk, so drop its name
rm -f "$STATE/disk.$gen.img"
sub_log "power cut simulated: generation $gen -> $next on $dev (e2fsck exit $rc)"
