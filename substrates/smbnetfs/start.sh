#!/bin/bash
# substrates/smbnetfs/start.sh STATE — Samba's smbd in a private network
# namespace (smbnetfs cannot take a port, so smbd has to own 445 there) and two
# smbnetfs FUSE mounts (libsmbclient underneath, no kernel CIFS) joined to that
# namespace: two SMB clients of one share.  SMB maps POSIX onto Windows
# semantics (exclusive create, rename over an open file, delete of an open
# file all differ) and smbnetfs' fsync does not reach the server: the tool
# must fail it.
set -euo pipefail
SUB_NAME=smbnetfs
. "$(dirname "$0")/../substrate-lib.sh"
sub_init "$1"
sub_start_guard
command -v smbd >/dev/null || sub_die "samba is not installed (ci/deps.sh matrix)"
command -v smbnetfs >/dev/null || sub_die "smbnetfs is not installed (ci/deps.sh matrix)"
ns=kaas-smb-$(head -c4 /dev/urandom | od -An -tx1 | tr -d ' \n')
srv=$STATE/srv
mkdir -p "$srv"/{share,private,lock,state,cache,pid,log,ncalrpc} "$STATE/mA" "$STATE/mB" "$STATE/home/.smb"
cat >"$srv/smb.conf" <<CFG
[global]
  netbios name = KAASMATRIX
  workgroup = WORKGROUP
  server role = standalone server
  interfaces = lo
  bind interfaces only = yes
  smb ports = 445
  disable netbios = yes
  private dir = $srv/private
  lock directory = $srv/lock
  state directory = $srv/state
  cache directory = $srv/cache
  pid directory = $srv/pid
  ncalrpc dir = $srv/ncalrpc
  log file = $srv/log/log.%m
  passdb backend = tdbsam:$srv/private/passdb.tdb
  map to guest = never
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
  server min protocol = SMB2_10
[share]
  path = $srv/share
  read only = no
  force user = root
CFG
mkdir -p "$srv/share/data"
(echo kaas-matrix; echo kaas-matrix) | smbpasswd -c "$srv/smb.conf" -s -a root >/dev/null
sub_netns "$ns"
# its own session: on shutdown smbd signals its whole process group
setsid nsenter --net="/run/netns/$ns" -- smbd --foreground --no-process-group --debug-stdout --configfile="$srv/smb.conf" \
	</dev/null >"$srv/smbd.out" 2>&1 &
sub_record pidnow $!
sub_wait 20 sub_in_ns "$ns" smbclient //127.0.0.1/share -U root%kaas-matrix -c ls \
	|| sub_die "smbd did not serve the share: $(tail -3 "$srv/smbd.out")"
printf '[global]\n  client min protocol = SMB2_10\n  workgroup = WORKGROUP\n' >"$STATE/home/.smb/smb.conf"
printf 'auth "root" "kaas-matrix"\nsmb_query_browsers "false"\nhost 127.0.0.1 visible=true\n' \
	>"$STATE/home/.smb/smbnetfs.conf"
chmod 600 "$STATE/home/.smb/"*
for m in mA mB; do
	sub_record mount "$STATE/$m"
	HOME=$STATE/home sub_in_ns "$ns" smbnetfs "$STATE/$m" -o log_file="$STATE/smbnetfs-$m.log"
done
for m in mA mB; do
	sub_wait 20 test -d "$STATE/$m/127.0.0.1/share/data" \
		|| sub_die "smbnetfs mount $m does not show the share"
done
# Seeing the directory is a lookup; the runs need to write.  smbnetfs
# connects lazily and, after a failed request, answers EIO for a few
# seconds while it reconnects: each mount is usable once a directory made
# through it can be removed through it again.
writable() {
	local d=$STATE/$1/127.0.0.1/share/.kaas-ready-$1
	mkdir -p "$d" && rmdir "$d"
}
for m in mA mB; do
	sub_wait 30 writable $m \
		|| sub_die "the share is not writable through smbnetfs mount $m: $(tail -3 "$STATE/smbnetfs-$m.log" 2>/dev/null)"
done
SUB_URL=$STATE/mA/127.0.0.1/share/data
SUB_MOUNTS=$STATE/mB/127.0.0.1/share/data
SUB_INFO="$(smbd --version) via smbnetfs $(dpkg-query -W -f='${Version}' smbnetfs 2>/dev/null), netns $ns"
sub_publish
