#!/bin/bash
# substrates/glusterfs/start.sh STATE — GlusterFS: glusterd and a one-brick
# volume in a private network namespace, two FUSE client mounts joined to it
# (two clients).  CONSISTENT=1 (default) turns the client-side performance
# translators and the kernel attribute/entry caches off, which is what makes
# close-to-open hold (must pass); CONSISTENT=0 keeps the stock settings
# (stale reads after another client's close).
set -euo pipefail
SUB_NAME=glusterfs
. "$(dirname "$0")/../substrate-lib.sh"
sub_init "$1"
sub_start_guard
command -v glusterd >/dev/null || sub_die "glusterfs-server is not installed (ci/deps.sh matrix)"
consistent=${CONSISTENT:-1}
ns=kaas-gl-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
mkdir -p "$STATE"/{state,run,log,brick,mA,mB}
cat >"$STATE/glusterd.vol" <<VOL
volume management
    type mgmt/glusterd
    option working-directory $STATE/state
    option run-directory $STATE/run
    option glusterd-sockfile $STATE/run/glusterd.socket
    option transport-type socket
    option transport.socket.listen-port 24007
    option ping-timeout 0
    option event-threads 1
end-volume
VOL
sub_netns "$ns"
setsid nsenter --net="/run/netns/$ns" -- glusterd -N -f "$STATE/glusterd.vol" \
	-p "$STATE/run/glusterd.pid" -l "$STATE/log/glusterd.log" </dev/null >"$STATE/log/glusterd.out" 2>&1 &
sub_record pidnow $!
cli() { sub_in_ns "$ns" gluster --glusterd-sock="$STATE/run/glusterd.socket" --log-file="$STATE/log/cli.log" --mode=script "$@"; }
sub_wait 20 cli pool list || sub_die "glusterd did not come up: $(tail -3 "$STATE/log/glusterd.log")"
# the CLI refuses "localhost" as a brick host; the namespace's second
# loopback address is accepted and is this node
cli volume create gv0 "127.0.0.2:$STATE/brick" force >/dev/null
fopts=()
if [ "$consistent" = 1 ]; then
	for o in quick-read io-cache stat-prefetch read-ahead write-behind open-behind readdir-ahead nl-cache; do
		cli volume set gv0 "performance.$o" off >/dev/null
	done
	fopts=(--attribute-timeout=0 --entry-timeout=0 --negative-timeout=0 --fopen-keep-cache=no)
fi
cli volume start gv0 >/dev/null
# glusterd puts the brick's control socket and log under /var/run/gluster and
# /var/log/glusterfs whatever its own directories are; the brick dies with the
# namespace and cannot remove them, so teardown does
brick=$(sub_pid_of "$(ls "$STATE"/run/vols/gv0/*.pid 2>/dev/null | head -1)")
[ -n "$brick" ] || sub_die "no brick process after volume start: $(tail -3 "$STATE/log/glusterd.log")"
brick_arg() { tr '\0' '\n' <"/proc/$brick/cmdline" | grep -A1 -x -- "$1" | sed -n 2p; }
for f in "$(brick_arg -S)" "$(brick_arg -l)"; do
	case $f in /var/*) sub_record file "$f" ;; esac
done
for m in mA mB; do
	sub_record mount "$STATE/$m"
	sub_in_ns "$ns" glusterfs --volfile-server=127.0.0.2 --volfile-id=gv0 "${fopts[@]}" \
		--log-file="$STATE/log/fuse-$m.log" --pid-file="$STATE/run/fuse-$m.pid" "$STATE/$m"
done
for m in mA mB; do
	sub_wait 20 sh -c "findmnt -no FSTYPE '$STATE/$m' | grep -q fuse && stat '$STATE/$m/.' >/dev/null" \
		|| sub_die "glusterfs mount $m did not come up: $(tail -3 "$STATE/log/fuse-$m.log")"
done
mkdir "$STATE/mA/data"
sub_wait 10 test -d "$STATE/mB/data" || sub_die "mount B does not see mount A's directory"
SUB_URL=$STATE/mA/data
SUB_MOUNTS=$STATE/mB/data
SUB_INFO="$(glusterfs --version | head -1), one brick, netns $ns, $([ "$consistent" = 1 ] && echo "client caches off" || echo "stock caching")"
sub_publish
