#!/bin/bash
# substrates/bind/start.sh STATE — a bind mount of one directory of a tmpfs
# (mountinfo's root field names the directory).  The path looks like any
# other directory; what stores it is RAM, which preflight must refuse.
set -euo pipefail
SUB_NAME=bind
. "$(dirname "$0")/../substrate-lib.sh"
sub_init "$1"
sub_start_guard
mkdir -p "$STATE/ram" "$STATE/mnt"
sub_record mount "$STATE/ram"
mount -t tmpfs -o size=256m,mode=0755 "kaas-matrix-bind-ram" "$STATE/ram"
mkdir -p "$STATE/ram/volumes/v1"
sub_record mount "$STATE/mnt"
mount --bind "$STATE/ram/volumes/v1" "$STATE/mnt"
SUB_URL=$STATE/mnt
SUB_INFO="bind mount of /volumes/v1 of a tmpfs"
sub_publish
