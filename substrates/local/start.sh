#!/bin/bash
# substrates/local/start.sh STATE — a plain directory on the local root
# filesystem (ext4 here).  One kernel, so the actors are processes on one host:
# the positive single-host control of the matrix.
# FAULT=OPTIONS wraps the directory in the fault backend (fault:DIR?OPTIONS,
# docs/substrates.md): a substrate that breaks a guarantee on purpose, for
# testing the matrix itself.
set -euo pipefail
SUB_NAME=local
. "$(dirname "$0")/../substrate-lib.sh"
sub_init "$1"
mkdir -p "$STATE/data"
fstype=$(findmnt -no FSTYPE -T "$STATE/data")
SUB_URL=$STATE/data
SUB_INFO="directory on the local root filesystem ($fstype)"
if [ -n "${FAULT:-}" ]; then
	SUB_URL="fault:$STATE/data?$FAULT"
	SUB_INFO+=", fault backend: $FAULT"
fi
sub_publish
