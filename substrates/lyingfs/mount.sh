#!/bin/bash
# substrates/lyingfs/mount.sh STATE — start one kaas-lyingfs daemon per mount
# point (mA, mB) as recorded in STATE/lyingfs.conf; used by start and crash.
set -euo pipefail
SUB_NAME=lyingfs
. "$(dirname "$0")/../substrate-lib.sh"
STATE=$1
{ read -r bin; read -r mode; } <"$STATE/lyingfs.conf"
flag=; [ "$mode" = 1 ] && flag=--lying
for m in mA mB; do
	# the backing directory as mount source, as passthrough daemons
	# (bindfs) do: it is how preflight finds what stores the bytes
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
