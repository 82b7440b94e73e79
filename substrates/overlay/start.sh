#!/bin/bash
# substrates/overlay/start.sh STATE — a kernel overlay mount (lower layer on
# the local disk).  UPPER=tmpfs (the default) puts the upper and work
# directories on a tmpfs of their own: every file written through the
# overlay lives in RAM although the mount says "overlay", which preflight
# must refuse by resolving the upperdir.  UPPER=disk puts them on the local
# disk: the positive control (the overlay itself is not the problem).
set -euo pipefail
SUB_NAME=overlay
. "$(dirname "$0")/../substrate-lib.sh"
sub_init "$1"
sub_start_guard
upper=${UPPER:-tmpfs}
case $upper in tmpfs|disk) ;; *) sub_die "UPPER must be tmpfs or disk" ;; esac
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || sub_die "no overlay filesystem in this kernel"
mkdir -p "$STATE/lower/data" "$STATE/rw" "$STATE/mnt"
if [ "$upper" = tmpfs ]; then
	sub_record mount "$STATE/rw"
	mount -t tmpfs -o size=512m,mode=0755 "kaas-matrix-overlay-upper" "$STATE/rw"
fi
mkdir -p "$STATE/rw/upper" "$STATE/rw/work"
sub_record mount "$STATE/mnt"
mount -t overlay "kaas-matrix-overlay" \
	-o "lowerdir=$STATE/lower,upperdir=$STATE/rw/upper,workdir=$STATE/rw/work" "$STATE/mnt"
SUB_URL=$STATE/mnt/data
SUB_INFO="overlay, lower on $(findmnt -no FSTYPE -T "$STATE/lower"), upper and work on $(findmnt -no FSTYPE -T "$STATE/rw/upper")"
sub_publish
