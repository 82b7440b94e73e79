#!/bin/bash
# substrates/lyingfs/mount.sh STATE — start one kaas-lyingfs daemon per mount
# point (mA, mB) as recorded in STATE/lyingfs.conf; used by start and crash.
set -euo pipefail
SUB_NAME=lyingfs
. "$(dirname "$0")/../substrate-lib.sh"
STATE=$1
# lyingfs.conf: the binary, LYING, then (optional) STALE_NAMES and
# SPLIT_DIRS: mB's name lookups never revalidate / every Nth directory
# rename is split, on both mounts
{ read -r bin; read -r mode; read -r stale || stale=0; read -r split || split=0; } <"$STATE/lyingfs.conf"
flag=; [ "$mode" = 1 ] && flag=--lying
for m in mA mB; do
	names=0; [ "$m" = mB ] && names=${stale:-0}
	# the backing directory as mount source, as passthrough daemons
	# (bindfs) do: it is how preflight finds what stores the bytes
	LYINGFS_STALE_NAMES=$names LYINGFS_SPLIT_DIRS=${split:-0} \
	setsid "$bin" $flag "$STATE/back" "$STATE/$m" -f -o "fsname=$STATE/back" \
		</dev/null >>"$STATE/lyingfs-$m.log" 2>&1 &
	# teardown goes newest first: SIGTERM (the daemon unmounts and exits),
	# then make sure the mount is gone
	echo "mount $STATE/$m" >>"$STATE/resources"
	echo "pidnow $!" >>"$STATE/resources"
	echo $! >"$STATE/lyingfs-$m.pid"
done
for m in mA mB; do
	sub_wait 10 sh -c "findmnt -no FSTYPE \"$STATE/$m\" | grep -q ^fuse" \
		|| sub_die "kaas-lyingfs did not mount $STATE/$m: $(tail -3 "$STATE/lyingfs-$m.log")"
done
