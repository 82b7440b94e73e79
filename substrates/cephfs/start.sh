#!/bin/bash
# substrates/cephfs/start.sh STATE — a single-node Ceph cluster (one monitor,
# one memstore OSD, one MDS, no authentication) in a private network
# namespace, and two ceph-fuse mounts joined to it, each its own Ceph client
# (client.mA, client.mB).  CephFS is coherent across clients (capabilities),
# stronger than close-to-open, once the kernel page cache of the ceph-fuse
# mounts is off (the [client] section below says why): the tool must pass it.
# FUSE_PAGECACHE_OFF=false leaves that cache on, ceph-fuse's default.
# OSD_STORE=bluestore keeps data on a file instead of in the OSD's memory.
# No manager runs, and ceph-fuse answers statfs from the manager's pool
# statistics: statvfs reports 0 blocks, which kaas-conform takes for "no
# space accounting" (rename-copy then uses its full 64 MiB file; unlink-open
# says the accounting is unavailable).  The OSD's own figures (admin socket,
# perf dump: osd.stat_bytes_used) peak at about 72 MB in a whole run of the
# checks, rename-copy's 64 MiB file included, and fall back to a few MB once
# the MDS has purged what the checks deleted: the 1 GiB memstore is far from
# the 95% full ratio at which the OSD would stop taking writes.
set -euo pipefail
SUB_NAME=cephfs
. "$(dirname "$0")/../substrate-lib.sh"
sub_init "$1"
sub_start_guard
for c in ceph-mon ceph-osd ceph-mds ceph-fuse ceph monmaptool ceph-authtool; do
	command -v $c >/dev/null || sub_die "$c is not installed (ci/deps.sh matrix)"
done
ns=kaas-ceph-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
mkdir -p "$STATE"/{run,log,mon/ceph-a,osd/ceph-0,mds/ceph-a,mA,mB}
fsid=$(cat /proc/sys/kernel/random/uuid)
conf=$STATE/ceph.conf
cat >"$conf" <<CFG
[global]
fsid = $fsid
mon initial members = a
mon host = [v2:127.0.0.1:3300,v1:127.0.0.1:6789]
public addr = 127.0.0.1
auth cluster required = none
auth service required = none
auth client required = none
osd pool default size = 1
osd pool default min size = 1
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
mon data avail warn = 2
mon data avail crit = 1
osd crush chooseleaf type = 0
# A PG may serve reads only within its read lease, 0.8 x the heartbeat grace
# (16 s by default).  When the OSD is stalled for longer than that (a loaded
# 2-core machine, a paused VM) its PGs turn "laggy", and with a single OSD
# Ceph 16 never re-checks them: every later op waits "for readable" forever
# and the clients hang in fsync.  One OSD has no heartbeat peers, so a long
# grace costs nothing here; it only stretches the lease past any stall.
osd heartbeat grace = 300
run dir = $STATE/run
admin socket = $STATE/run/\$cluster-\$name.asok
log file = $STATE/log/\$name.log
mon data = $STATE/mon/\$cluster-\$id
osd data = $STATE/osd/\$cluster-\$id
mds data = $STATE/mds/\$cluster-\$id
pid file = $STATE/run/\$name.pid
[osd]
osd objectstore = ${OSD_STORE:-memstore}
memstore device bytes = 1073741824
bluestore block create = true
bluestore block size = 2147483648
bluestore fsck on mkfs = false
osd memory target = 939524096
[mds]
# reply only once the journal has the change: with early (unsafe) replies,
# another client's lookup of a just-renamed name waits for the next journal
# flush, up to the 5 s MDS tick, which makes every cross-client step slow
mds early reply = false
[client]
client mount timeout = 30
# ceph-fuse keeps file data in two caches: its own, which the MDS keeps
# coherent through capabilities, and the kernel's page cache of the FUSE
# mount, which ceph-fuse invalidates asynchronously when it loses a
# capability.  A reader that opens right after another client's close can
# still be served the old pages (seen once in 600 same-size reads).  With the
# kernel page cache off every read goes through ceph-fuse's coherent cache.
fuse disable pagecache = ${FUSE_PAGECACHE_OFF:-true}
CFG
in_ns() { sub_in_ns "$ns" "$@"; }
ceph_() { in_ns ceph -c "$conf" --connect-timeout 20 "$@"; }
sub_netns "$ns"
monmaptool --create --addv a "[v2:127.0.0.1:3300,v1:127.0.0.1:6789]" --fsid "$fsid" "$STATE/monmap" >/dev/null
ceph-authtool --create-keyring "$STATE/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
ceph-mon -c "$conf" --mkfs -i a --monmap "$STATE/monmap" --keyring "$STATE/mon.keyring"
# the daemons fork into the background and write their pid files; their
# memory-backed state is thrown away, so teardown SIGKILLs them
sub_record pidkill "$STATE/run/mon.a.pid"
in_ns ceph-mon -c "$conf" -i a
osd_uuid=$(cat /proc/sys/kernel/random/uuid)
id=$(ceph_ osd new "$osd_uuid")
in_ns ceph-osd -c "$conf" -i "$id" --mkfs --osd-uuid "$osd_uuid" >>"$STATE/log/osd-mkfs.log" 2>&1
sub_record pidkill "$STATE/run/osd.$id.pid"
in_ns ceph-osd -c "$conf" -i "$id"
ceph_ osd pool create cephfs_metadata 8 >/dev/null 2>&1
ceph_ osd pool create cephfs_data 8 >/dev/null 2>&1
ceph_ fs new cephfs cephfs_metadata cephfs_data >/dev/null 2>&1
sub_record pidkill "$STATE/run/mds.a.pid"
in_ns ceph-mds -c "$conf" -i a
sub_wait 60 sh -c "nsenter --net=/run/netns/$ns -- ceph -c '$conf' mds stat 2>/dev/null | grep -q up:active" \
	|| sub_die "the MDS did not become active: $(ceph_ -s 2>&1 | tail -5)"
for m in mA mB; do
	# the client's pid is waited for after its unmount: ceph-fuse must end
	# its MDS session while the MDS is still there
	sub_record pid "$STATE/run/client.$m.pid"
	sub_record mount "$STATE/$m"
	in_ns ceph-fuse -c "$conf" -n "client.$m" "$STATE/$m" >>"$STATE/log/fuse-$m.out" 2>&1
done
mkdir "$STATE/mA/data"
sub_wait 10 test -d "$STATE/mB/data" || sub_die "mount B does not see mount A's directory"
SUB_URL=$STATE/mA/data
SUB_MOUNTS=$STATE/mB/data
SUB_INFO="$(ceph --version | awk '{print "ceph", $3}') (mon, ${OSD_STORE:-memstore} osd, mds) in netns $ns, two ceph-fuse clients, kernel page cache $([ "${FUSE_PAGECACHE_OFF:-true}" = true ] && echo off || echo on)"
sub_publish
