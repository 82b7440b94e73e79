#!/bin/bash
# e2e_enospc.sh — out of space must surface at write or fsync, and what was
# reported written must read back.  A 16 MiB tmpfs reports ENOSPC at write:
# PASS.  The same mount behind a client that defers the error to close (the
# fault layer's fsync=lie: writes held until close, as a write-behind
# network client does) FAILs for that reason, with the lost bytes counted.
# A volume with more free space than --enospc allows is not touched (ERROR),
# and --checks enospc without a limit is refused before anything runs.
source "$(dirname "$0")/lib.sh"

small=$(newdir small)
mount -t tmpfs -o size=16m "kc-e2e-nospc-$$" "$small"
CLEANUPS+=("umount '$small'")

expect_rc 0 "$KC" check "$small" --checks enospc --enospc 32m --json p.json --no-progress
validate p.json
"$PY" - p.json <<'PY' || fail "enospc on tmpfs"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
assert c["name"] == "enospc" and c["verdict"] == "PASS", (c["name"], c["verdict"], c["summary"])
k = c["counts"]
assert k["surfaced_at_write"] == 1 and k["deferred_to_close"] == 0 and k["acked_lost"] == 0, k
assert k["acked_bytes"] >= 8 << 20, k
assert c["profile"]["surfaced_at"] == "write" and c["profile"]["error"] == "ENOSPC", c["profile"]
PY
assert_empty "$small"
pass "tmpfs: ENOSPC at write, every acknowledged byte reads back: PASS"

expect_rc 1 "$KC" check "fault:$small?fsync=lie" --checks enospc --enospc 32m --json d.json --no-progress
validate d.json
"$PY" - d.json <<'PY' || fail "enospc behind a deferring client"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
assert c["verdict"] == "FAIL", (c["verdict"], c["summary"])
k = c["counts"]
assert k["deferred_to_close"] == 1 and k["surfaced_at_write"] == 0 and k["surfaced_at_fsync"] == 0, k
assert k["acked_lost"] > 0, k
assert "out of space reported at close only" in c["summary"], c["summary"]
kinds = {a["kind"] for a in c["anomalies"]}
assert kinds == {"deferred_to_close", "acked_lost"}, kinds
PY
grep -q "reproduce: .* --checks enospc --enospc 33554432" out || fail "reproduce hint: $(cat out)"
assert_empty "$small"
pass "a client that reports ENOSPC only at close: FAIL (deferred_to_close, acknowledged bytes lost)"

big=$(newdir big)
expect_rc 2 "$KC" check "$big" --checks enospc --enospc 1m --json b.json --no-progress
grep -q "MiB free, more than --enospc 1 MiB allows to fill" err || fail "no refusal to fill: $(cat err)"
assert_empty "$big"
expect_rc 2 "$KC" check "$big" --checks enospc
grep -q "give --enospc SIZE" err || fail "--checks enospc without a limit: $(cat err)"
expect_rc 2 "$KC" check "$big" --enospc lots
grep -q -- "--enospc: 'lots' is not a size" err || fail "bad size: $(cat err)"
assert_empty "$big"
pass "a volume larger than the limit is never filled; the limit is required and checked"

# A volume that keeps no space accounting (statvfs: 0 blocks, as ceph-fuse
# without a manager) has unknown free space, not 0 bytes: never filled.
expect_rc 2 "$KC" check "fault:$small?statvfs=none" --checks enospc --enospc 32m --json n.json --no-progress
validate n.json
grep -q "reports 0 blocks (no space accounting): the free space must be known before filling" err ||
	fail "no refusal to fill a volume without space accounting: $(cat err)"
"$PY" - n.json <<'PY' || fail "enospc without space accounting"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
assert c["verdict"] == "ERROR" and c["counts"].get("filled_bytes", 0) == 0, c
PY
assert_empty "$small"
pass "a volume without space accounting is never filled"
