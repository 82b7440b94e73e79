#!/bin/bash
# substrates/tmpfs/start.sh STATE — a private tmpfs mount.  Every guarantee
# holds on it, but nothing survives a reboot, so the tool must refuse it.
set -euo pipefail
SUB_NAME=tmpfs
. "$(dirname "$0")/../substrate-lib.sh"
sub_init "$1"
sub_start_guard
mkdir -p "$STATE/mnt"
sub_record mount "$STATE/mnt"
mount -t tmpfs -o size=256m,mode=0755 "kaas-matrix-tmpfs" "$STATE/mnt"
SUB_URL=$STATE/mnt
SUB_INFO="tmpfs, 256 MiB"
sub_publish
