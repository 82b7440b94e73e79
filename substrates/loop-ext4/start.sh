#!/bin/bash
# substrates/loop-ext4/start.sh STATE — ext4 on a loop device over a sparse
# image file, with a power-cut crash hook (crash.sh): the image is copied while
# the filesystem is mounted, so the copy holds exactly what reached the "disk";
# the copy is journal-replayed and the crashed file is set back to what it
# holds.  Data that fsync acknowledged must be in the copy.
#
# EATMYDATA=1 runs the tool under eatmydata (libc's fsync made a no-op by
# LD_PRELOAD).  The tool calls fsync as a raw system call, so its data is
# still durable: what must fail is the interposition check.
#
# DROP_FSYNC=1 runs the tool under strace, which answers every fsync,
# fdatasync, syncfs, sync and sync_file_range system call with 0 without
# letting the kernel see it: a lie no interposition check can see, which
# only the power cut can catch (the negative control of crash.sh).
#
# MOUNT_OPTS=... adds mount options (MOUNT_OPTS=barrier=0: write barriers
# off, which preflight must refuse: the loop device has a volatile write
# cache, so fsync would no longer reach the image).
#
# crash.sh models a power cut, so it is published as SUB_POWER_LOSS_CMD
# (kaas-conform --power-loss-cmd); SUB_CRASH_CMD names it too, for callers
# that only want a crash.
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
extra=${MOUNT_OPTS:-}
mount -o "noauto_da_alloc${extra:+,$extra}" "$dev" "$STATE/mnt"
mkdir -p "$STATE/mnt/data"
sync -f "$STATE/mnt/data"   # the empty starting point is durable
SUB_URL=$STATE/mnt/data
SUB_CRASH_CMD="bash $(cd "$(dirname "$0")" && pwd)/crash.sh $STATE"
SUB_POWER_LOSS_CMD=$SUB_CRASH_CMD
how=
if [ "${EATMYDATA:-0}" = 1 ]; then
	command -v eatmydata >/dev/null || sub_die "eatmydata is not installed"
	SUB_WRAP=eatmydata how=", tool under eatmydata"
elif [ "${DROP_FSYNC:-0}" = 1 ]; then
	command -v strace >/dev/null || sub_die "strace is not installed (ci/deps.sh)"
	calls=fsync,fdatasync,syncfs,sync,sync_file_range
	SUB_WRAP="strace -f -qq --seccomp-bpf -o /dev/null -e trace=$calls -e inject=$calls:retval=0"
	how=", every fsync system call of the tool answered 0 by strace and never run"
fi
SUB_INFO="ext4 on $dev (${size} MiB image, noauto_da_alloc${extra:+,$extra})$how"
sub_publish
