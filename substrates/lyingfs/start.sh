#!/bin/bash
# substrates/lyingfs/start.sh STATE — two kaas-lyingfs mounts (two clients) of
# one backing directory, with a crash hook that SIGKILLs both daemons and
# mounts them again.  LYING=1: fsync is a no-op and data is held in the
# daemon until close, so acknowledged data dies with the daemon (must fail
# fsync honesty); LYING=0 (default): an honest passthrough (must pass).
# BACKING=tmpfs puts the backing directory on a tmpfs of its own: the
# passthrough then stores its files in RAM, which preflight must see through
# the mount (each daemon names its backing directory as the mount source).
# The binary: $LYINGFS_BIN, else $BIN/kaas-lyingfs (BIN relative to the
# repository root, default bin).
set -euo pipefail
SUB_NAME=lyingfs
. "$(dirname "$0")/../substrate-lib.sh"
sub_init "$1"
sub_start_guard
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${LYINGFS_BIN:-${BIN:-bin}/kaas-lyingfs}
case $bin in /*) ;; *) bin=$top/$bin ;; esac
[ -x "$bin" ] || sub_die "$bin not built (make matrix builds it; it needs libfuse3-dev)"
[ -e /dev/fuse ] || sub_die "no /dev/fuse"
mode=${LYING:-0}
mkdir -p "$STATE/back" "$STATE/mA" "$STATE/mB"
if [ "${BACKING:-disk}" = tmpfs ]; then
	sub_record mount "$STATE/back"
	mount -t tmpfs -o size=512m "lyingfs-back" "$STATE/back"
fi
mkdir -p "$STATE/back/data"
stale=${STALE_NAMES:-0} split=${SPLIT_DIRS:-0}
[[ $stale =~ ^[01]$ ]] || sub_die "STALE_NAMES must be 0 or 1"
[[ $split =~ ^[0-9]+$ ]] || sub_die "SPLIT_DIRS must be a number"
printf '%s\n%s\n%s\n%s\n' "$bin" "$mode" "$stale" "$split" >"$STATE/lyingfs.conf"
bash "$(dirname "$0")/mount.sh" "$STATE"
SUB_URL=$STATE/mA/data
SUB_MOUNTS=$STATE/mB/data
SUB_CRASH_CMD="bash $(cd "$(dirname "$0")" && pwd)/crash.sh $STATE"
extra=
[ "$stale" = 1 ] && extra+=", the second mount's names never revalidated"
[ "$split" != 0 ] && extra+=", every ${split}th directory rename split entry by entry"
SUB_INFO="kaas-lyingfs $([ "$mode" = 1 ] && echo LYING || echo honest), two mounts over one directory on $(findmnt -no FSTYPE -T "$STATE/back")$extra"
[ "${BACKING:-disk}" = tmpfs ] && SUB_INFO+=" (a tmpfs of its own)"
sub_publish
