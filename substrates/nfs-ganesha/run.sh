#!/bin/bash
# substrates/nfs-ganesha/run.sh STATEDIR CMD... — run CMD in the network
# namespace of the instance (where the server is 127.0.0.1).  The mount
# namespace is the caller's, so files the caller sees stay visible.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
[ $# -ge 2 ] || die "usage: run.sh STATEDIR CMD..."
D=$1; shift
ns=$(state_get "$D" ns)
[ -n "$ns" ] || die "$D: no namespace (not started?)"
exec nsenter --net="/run/netns/$ns" -- "$@"
