#!/bin/bash
# ci/badinput/test_badinput.sh — malformed frames and hostile requests against
# a real kaas broker (badinput.py): truncated frames and headers, negative and
# oversized lengths (an oversized frame must cost no memory), huge counts and
# string lengths, unknown API keys, unsupported versions of every API,
# truncated copies of a good request of every API and version, corrupt record
# batches and a decompression bomb, invalid topic names through every API that
# takes one.  Each must end in an error answer or a clean disconnect, while a
# healthy client keeps working on other connections; the volume must be
# byte-for-byte unchanged.  Afterwards the broker stops cleanly and has
# logged every refusal without an internal error.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh badinput
t0=$(date +%s)

# The volume directory holds only the data directory, so that anything
# created outside DATA shows up next to it.
mkdir -p "$T/vol"
broker_start "$T/vol/data" --override group.initial.rebalance.delay.ms=0
$PY ci/badinput/badinput.py 127.0.0.1 "$BROKER_PORT" "$BROKER_PID" "$T/vol" || fail "bad input suite"
broker_stop
[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC on SIGTERM after the bad input"
grep -q "request size .* outside" "$BROKER_LOG" || fail "oversized frames were not logged"
grep -q "malformed .* request" "$BROKER_LOG" || fail "malformed requests were not logged"
if grep -E "^[^ ]+ ERROR " "$BROKER_LOG" | grep -v " gate: " > "$T/errors"; then
	head "$T/errors" >&2
	fail "the broker logged internal errors for bad input"
fi
echo "PASS ci/badinput/test_badinput.sh ($(($(date +%s) - t0)) s)"
