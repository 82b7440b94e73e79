#!/bin/bash
# substrates/sshfs/start.sh STATE — a private sshd on a free loopback port
# (key authentication, internal-sftp) and two sshfs mounts of one directory:
# two SFTP clients.  Default sshfs caching (attribute, directory and entry
# caches on): readers see stale sizes after another client's close, so the
# tool must fail it.  SSHFS_OPTS adds mount options.
set -euo pipefail
SUB_NAME=sshfs
. "$(dirname "$0")/../substrate-lib.sh"
sub_init "$1"
sub_start_guard
command -v sshfs >/dev/null || sub_die "sshfs is not installed (ci/deps.sh matrix)"
[ -x /usr/sbin/sshd ] || sub_die "openssh-server is not installed (ci/deps.sh matrix)"
mkdir -p "$STATE/export/data" "$STATE/mA" "$STATE/mB" "$STATE/keys"
chmod 700 "$STATE/keys"
mkdir -p /run/sshd   # privilege-separation directory sshd insists on
ssh-keygen -q -t ed25519 -N '' -f "$STATE/keys/host"
ssh-keygen -q -t ed25519 -N '' -f "$STATE/keys/client"
cp "$STATE/keys/client.pub" "$STATE/keys/authorized_keys"
# a known-hosts file of its own: ssh may rewrite that file by renaming a
# temporary over it, which must never happen to /dev/null
: >"$STATE/known_hosts"
port=$(sub_free_port)
cat >"$STATE/sshd_config" <<CFG
Port $port
ListenAddress 127.0.0.1
HostKey $STATE/keys/host
PidFile $STATE/sshd.pid
AuthorizedKeysFile $STATE/keys/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
Subsystem sftp internal-sftp
CFG
sub_record pid "$STATE/sshd.pid"
/usr/sbin/sshd -f "$STATE/sshd_config" -E "$STATE/sshd.log"
sub_wait 10 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port" || sub_die "sshd did not listen on $port"
for m in mA mB; do
	# in the foreground (-f) of a process of our own, so that teardown knows
	# the daemon and its ssh and waits for both to be gone: unmounting alone
	# leaves them exiting in the background
	setsid sshfs -f "root@127.0.0.1:$STATE/export" "$STATE/$m" -p "$port" \
		-o IdentityFile="$STATE/keys/client",StrictHostKeyChecking=no \
		-o UserKnownHostsFile="$STATE/known_hosts",UpdateHostKeys=no,LogLevel=ERROR,BatchMode=yes \
		${SSHFS_OPTS:+-o "$SSHFS_OPTS"} </dev/null >>"$STATE/sshfs-$m.log" 2>&1 &
	sub_record pidnow $!
	sub_record mount "$STATE/$m"
	sub_wait 20 sh -c "findmnt -no FSTYPE '$STATE/$m' | grep -q fuse" ||
		sub_die "sshfs did not mount $m: $(tail -3 "$STATE/sshfs-$m.log")"
done
# sshfs starts its ssh detached (its parent is init): find them by the
# known-hosts file only they use
for p in $(pgrep -x ssh || true); do
	grep -qF "$STATE/known_hosts" "/proc/$p/cmdline" 2>/dev/null && sub_record pidnow "$p"
done
SUB_URL=$STATE/mA/data
SUB_MOUNTS=$STATE/mB/data
SUB_INFO="$(sshfs --version 2>&1 | grep -i "^sshfs version" || echo sshfs) over $(/usr/sbin/sshd -V 2>&1 | head -1 || true) on 127.0.0.1:$port, options: ${SSHFS_OPTS:-default caching}"
sub_publish
