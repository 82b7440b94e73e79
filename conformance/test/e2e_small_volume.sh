#!/bin/bash
# e2e_small_volume.sh — rename-copy on a volume too small for its 64 MiB
# probe: it qualifies with a probe sized to the free space and says what the
# timing lost; below 4 MiB free it says exactly what it needs (ERROR), not
# ENOSPC.  Only rename-copy runs (preflight would refuse the tmpfs).
source "$(dirname "$0")/lib.sh"

small=$(newdir small)
mount -t tmpfs -o size=24m "kc-e2e-small-$$" "$small"
CLEANUPS+=("umount '$small'")
expect_rc 0 "$KC" check "$small" --checks rename-copy --json s.json --no-progress
validate s.json
"$PY" - s.json <<'PY' || fail "rename-copy on 24 MiB"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
assert c["verdict"] == "PASS", c
assert c["profile"]["big_bytes"] == 4 << 20, c["profile"]
assert any("the large file is 4 MiB, not 64 MiB" in n for n in c.get("notes", [])), c.get("notes")
PY
assert_empty "$small"
pass "a 24 MiB volume: rename-copy runs with a 4 MiB probe and says so"

tiny=$(newdir tiny)
mount -t tmpfs -o size=3m "kc-e2e-tiny-$$" "$tiny"
CLEANUPS+=("umount '$tiny'")
expect_rc 2 "$KC" check "$tiny" --checks rename-copy --json t.json --no-progress
validate t.json
grep -q "rename-copy needs at least 4096 KiB" err || fail "no statement of what is needed: $(cat err)"
assert_empty "$tiny"
pass "a 3 MiB volume: ERROR naming the free space rename-copy needs"
