#!/bin/bash
# substrates/nfs-ganesha/start.sh — an NFS server for tests: nfs-ganesha
# (NFSv3 + NFSv4.0) with rpcbind, alone in a private network namespace, with
# no kernel NFS client, no systemd and no dbus.
#
#   start.sh STATEDIR [vfs|mem] [--lease SECONDS]
#
#   vfs   FSAL_VFS: the export is the directory STATEDIR/export on the local
#         filesystem (honest COMMIT; data survives a ganesha kill because the
#         kernel page cache does).  The default.
#   mem   FSAL_MEM: the export lives in ganesha's memory.  COMMIT says OK and
#         a kill -9 (crash-restart.sh) loses everything: a lying substrate for
#         negative tests.
#   --lease  NFSv4 lease lifetime (default 10 s; short so that dead clients'
#         state goes away quickly).
#
# NFS_EXPORT_ON says what stores a FSAL_VFS export (STATEDIR/export):
#   dir    a directory on the local filesystem (the default);
#   tmpfs  a tmpfs of its own: the server's storage is RAM, which no client
#          can see (preflight on the client says "NFS"), and which survives
#          a restart of ganesha (crash-restart.sh) but not a power cut;
#   loop   ext4 on a loop device over a 256 MiB image in STATEDIR: a disk
#          whose power cut can be modelled.
# With tmpfs and loop, SUB_POWER_LOSS_CMD is powerloss.sh STATEDIR: a
# faithful model of a power cut of the server (ganesha killed, the export's
# storage reduced to what had reached stable storage, ganesha started
# again); with dir there is none (a directory on the root filesystem cannot
# lose its page cache alone).
#
# The environment may preset the FSAL (NFS_FSAL=vfs|mem, for callers of the
# common substrate contract that pass only STATEDIR) and the NFS version of
# SUB_URL (NFS_VERSION=3|4); arguments win over NFS_FSAL.
#
# STATEDIR is created if missing and must not hold a running instance.  On
# success the script prints shell assignments (also saved in STATEDIR/env):
#
#   NFS_NS=kaasnfs-1a2b3c4d         the network namespace; run clients in it
#                                   (ip netns exec, or run.sh STATEDIR CMD...)
#   NFS_SERVER=127.0.0.1            the server address inside NFS_NS
#   NFS_URL3=nfs://127.0.0.1/export?version=3
#   NFS_URL4=nfs://127.0.0.1/export?version=4
#   NFS_EXPORT_DIR=STATEDIR/export  (vfs only) the exported directory
#
# and the variables of the common substrate contract (substrate-lib.sh), for
# the conformance matrix:
#
#   SUB_URL        NFS_URL3, or NFS_URL4 when NFS_VERSION=4 is set
#   SUB_MOUNTS     empty: every vfs opened on SUB_URL is already a client of
#                  its own (libnfs), so --actors N needs no extra URLs
#   SUB_CRASH_CMD  crash-restart.sh STATEDIR (kill -9 ganesha, start again)
#   SUB_WRAP       nsenter --net=/run/netns/NFS_NS: run the tool inside the
#                  namespace, where the server is 127.0.0.1
#   SUB_INFO       one line saying what runs
#
# so a caller does:  eval "$(substrates/nfs-ganesha/start.sh "$dir")"
# and, in its EXIT trap:  substrates/nfs-ganesha/stop.sh "$dir"
# If start.sh fails it has already cleaned up after itself; calling stop.sh
# anyway is harmless.
#
# How it is isolated, so that several instances run side by side:
#   * a network namespace with a random name; lo up plus 127.0.0.2/32 (glibc's
#     AI_ADDRCONFIG ignores a lone 127.0.0.1 and ganesha would then fail to
#     resolve its bind address);
#   * rpcbind in that namespace and in a private mount namespace with its own
#     tmpfs on /run: rpcbind's unix socket and lock file live in /run, and
#     without this two instances would share /run/rpcbind.sock and ganesha
#     would register with the wrong rpcbind;
#   * ganesha entered into rpcbind's network and mount namespaces (nsenter),
#     bound to all addresses of the namespace, so a test can attach veth
#     interfaces to NFS_NS and reach the server from other namespaces;
#   * a unique server epoch (-E) per start (the NFSv3 write verifier);
#   * Graceless NFSv4 with a fresh recovery directory: no grace period.
# Ports inside the namespace are fixed (NFS 2049, MOUNT 20048, rpcbind 111).
#
# Requires root, iproute2, util-linux (nsenter, unshare), rpcbind,
# nfs-ganesha, nfs-ganesha-vfs, nfs-ganesha-mem.  Start takes ~0.1 s.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"

[ $# -ge 1 ] || die "usage: start.sh STATEDIR [vfs|mem] [--lease SECONDS]"
D=$1; shift
FSAL=${NFS_FSAL:-vfs}
EXPORT_ON=${NFS_EXPORT_ON:-dir}
case $EXPORT_ON in dir|tmpfs|loop) ;; *) die "NFS_EXPORT_ON must be dir, tmpfs or loop" ;; esac
SUBVER=${NFS_VERSION:-3}
case $SUBVER in 3|4) ;; *) die "NFS_VERSION must be 3 or 4" ;; esac
LEASE=10
while [ $# -gt 0 ]; do
	case $1 in
	vfs|mem) FSAL=$1 ;;
	--lease) [ $# -ge 2 ] || die "--lease needs a value"; LEASE=$2; shift ;;
	*) die "unknown argument '$1' (expected vfs, mem or --lease N)" ;;
	esac
	shift
done
case $LEASE in ''|*[!0-9]*) die "--lease must be a number of seconds" ;; esac
[ "$(id -u)" = 0 ] || die "must run as root (network namespaces)"
for c in ip nsenter unshare rpcbind rpcinfo ganesha.nfsd; do
	command -v "$c" >/dev/null || die "missing command '$c' (see ci/deps.sh)"
done
[ -e "$GANESHA_PLUGINS/libfsal${FSAL}.so" ] || die "FSAL $FSAL not installed ($GANESHA_PLUGINS)"

mkdir -p "$D"
D=$(cd "$D" && pwd)
if is_pid_of "$(state_get "$D" ganesha_pid)" ganesha.nfsd ||
	is_pid_of "$(state_get "$D" rpcbind_pid)" rpcbind; then
	die "$D already holds a running instance (stop.sh it first)"
fi
rm -f "$D/state" "$D/env"
mkdir -p "$D/export" "$D/recov"
rm -rf "${D:?}/recov/"*

NS=kaasnfs-$(od -An -N4 -tx4 /dev/urandom | tr -d ' \n')
state_set "$D" ns "$NS"
state_set "$D" fsal "$FSAL"
state_set "$D" export_on "$EXPORT_ON"

# From here on a failure undoes everything.
trap 'rc=$?; if [ $rc != 0 ]; then "$HERE/stop.sh" "$D" >/dev/null 2>&1 || true; fi; exit $rc' EXIT

if [ "$FSAL" = vfs ] && [ "$EXPORT_ON" = tmpfs ]; then
	state_set "$D" export_mount "$D/export"
	mount -t tmpfs -o size=512m,mode=0755 "kaas-ganesha-ram" "$D/export"
elif [ "$FSAL" = vfs ] && [ "$EXPORT_ON" = loop ]; then
	# Allocated up front, not sparse: filling the export (a test's disk-full
	# fault) must fill this image, never the disk that holds it.
	fallocate -l 256M "$D/export.img" 2>/dev/null || truncate -s 256M "$D/export.img"
	mkfs.ext4 -q -F -E lazy_itable_init=1,lazy_journal_init=1,nodiscard "$D/export.img"
	dev=$(losetup -f --show "$D/export.img")
	state_set "$D" export_loop "$dev"
	state_set "$D" export_mount "$D/export"
	# noauto_da_alloc: only an explicit fsync (COMMIT) makes data durable
	mount -o noauto_da_alloc "$dev" "$D/export"
	sync -f "$D/export"   # the empty export is durable
fi

if [ "$FSAL" = vfs ]; then
	EXPORT_PATH=$D/export
	FSAL_BLOCK='FSAL { Name = VFS; }'
	MEM_BLOCK=
else
	EXPORT_PATH=/export
	FSAL_BLOCK='FSAL { Name = MEM; }'
	# FSAL_MEM keeps only the first Inode_Size bytes of every file (the
	# default is 0) and reads back 'a' for everything beyond: without this,
	# every read of a written file is garbage.  2 MiB is its maximum.
	MEM_BLOCK='MEM { Inode_Size = 2097152; }'
fi
cat >"$D/ganesha.conf" <<EOF
# Generated by substrates/nfs-ganesha/start.sh — one test instance.
NFS_CORE_PARAM {
	NFS_Port = 2049;
	MNT_Port = 20048;          # fixed, so v3 clients can skip the portmapper
	Protocols = 3, 4;
	Enable_NLM = false;
	Enable_RQUOTA = false;
	Enable_UDP = false;
	mount_path_pseudo = true;  # the v3 MOUNT path equals the v4 pseudo path
	Plugins_Dir = $GANESHA_PLUGINS;
}
NFSv4 {
	Graceless = true;
	Grace_Period = 1;
	Lease_Lifetime = $LEASE;
	RecoveryRoot = $D/recov;
	Minor_Versions = 0, 1, 2;
	Only_Numeric_Owners = true;
}
NFS_KRB5 { Active_krb5 = false; }
EXPORT_DEFAULTS { SecType = sys; Squash = No_Root_Squash; }
EXPORT {
	Export_Id = 1;
	Path = $EXPORT_PATH;
	Pseudo = /export;
	Access_Type = RW;
	Squash = No_Root_Squash;
	SecType = sys;
	Protocols = 3, 4;
	Transports = TCP;
	$FSAL_BLOCK
}
LOG { Default_Log_Level = EVENT; }
$MEM_BLOCK
EOF

ip netns add "$NS"
ip netns exec "$NS" ip link set lo up
ip netns exec "$NS" ip addr add 127.0.0.2/32 dev lo

# rpcbind anchors the private mount namespace (tmpfs on /run) that ganesha
# joins.  Its pid is the pid of this chain of execs.
setsid ip netns exec "$NS" unshare --mount --propagation private \
	sh -c 'mount -t tmpfs -o mode=0755 tmpfs /run && exec rpcbind -f' \
	</dev/null >"$D/rpcbind.out" 2>&1 &
state_set "$D" rpcbind_pid "$!"
wait_for 10 ip netns exec "$NS" rpcinfo -p 127.0.0.1 ||
	die "rpcbind did not start: $(cat "$D/rpcbind.out")"
is_pid_of "$(state_get "$D" rpcbind_pid)" rpcbind || die "rpcbind exited: $(cat "$D/rpcbind.out")"

start_ganesha "$D"

url3='nfs://127.0.0.1/export?version=3'
url4='nfs://127.0.0.1/export?version=4'
suburl=$url3; [ "$SUBVER" = 4 ] && suburl=$url4
{
	printf 'NFS_NS=%q\n' "$NS"
	printf 'NFS_SERVER=%q\n' 127.0.0.1
	printf 'NFS_URL3=%q\n' "$url3"
	printf 'NFS_URL4=%q\n' "$url4"
	[ "$FSAL" = vfs ] && printf 'NFS_EXPORT_DIR=%q\n' "$D/export"
	printf 'NFS_STATEDIR=%q\n' "$D"
	printf 'SUB_URL=%q\n' "$suburl"
	printf 'SUB_MOUNTS=%q\n' ""
	printf 'SUB_CRASH_CMD=%q\n' "$HERE/crash-restart.sh $D"
	if [ "$FSAL" = vfs ] && [ "$EXPORT_ON" != dir ]; then
		printf 'SUB_POWER_LOSS_CMD=%q\n' "$HERE/powerloss.sh $D"
	else
		printf 'SUB_POWER_LOSS_CMD=%q\n' ""
	fi
	printf 'SUB_WRAP=%q\n' "nsenter --net=/run/netns/$NS"
	printf 'SUB_INFO=%q\n' "$(ganesha.nfsd -v 2>/dev/null | sed -n 's/.*Release = //p' | head -1 | sed 's/^/nfs-ganesha /') FSAL_${FSAL^^}$([ "$FSAL" = vfs ] && echo " (export on $EXPORT_ON)"), NFSv$SUBVER via libnfs, lease ${LEASE}s, netns $NS"
} >"$D/env.tmp"
mv -f "$D/env.tmp" "$D/env"
cat "$D/env"
