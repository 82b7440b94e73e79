#!/bin/bash
# substrates/loop-ext4/start.sh STATE — ext4 on a loop device over a sparse
# image file, with a power-cut crash hook (crash.sh): the image is copied while
# the filesystem is mounted, so the copy holds exactly what reached the "disk";
# the copy is journal-replayed and the crashed file is set back to what it
# holds.  Data that fsync acknowledged must be in the copy.
#
# EATMYDATA=1 runs the tool under eatmydata (fsync made a no-op by
# LD_PRELOAD): the same disk, but the writer lies about durability.
set -euo pipefail
SUB_NAME=loop-ext4
. "$(dirname "$0")/../substrate-lib.sh"
sub_init "$1"
sub_start_guard
size=${LOOP_SIZE_MB:-256}
mkdir -p "$STATE/mnt"
truncate -s "${size}M" "$STATE/disk.0.img"
mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1 "$STATE/disk.0.img"
dev=$(losetup -f --show "$STATE/disk.0.img")
sub_record loop "$dev"
sub_record mount "$STATE/mnt"
# noauto_da_alloc: no implicit flush on rename-over-existing, so only an
# explicit fsync makes data durable (as on most filesystems).
mount -o noauto_da_alloc "$dev" "$STATE/mnt"
mkdir -p "$STATE/mnt/data"
sync -f "$STATE/mnt/data"   # the empty starting point is durable
SUB_URL=$STATE/mnt/data
SUB_CRASH_CMD="bash $(cd "$(dirname "$0")" && pwd)/crash.sh $STATE"
if [ "${EATMYDATA:-0}" = 1 ]; then
	command -v eatmydata >/dev/null || sub_die "eatmydata is not installed"
	SUB_WRAP=eatmydata
fi
SUB_INFO="ext4 on $dev (${size} MiB image, noauto_da_alloc)${SUB_WRAP:+, tool under eatmydata}"
sub_publish
