#!/bin/bash
# e2e_small_volume.sh — rename-copy on a volume too small for its 64 MiB
# probe: it qualifies with a probe sized to the free space and says what the
# timing lost; below 4 MiB free it waits (bounded) for deleted space to come
# back, then says exactly what it needs (ERROR), not ENOSPC.  Only rename-copy runs (preflight would refuse the tmpfs).
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
grep -q "after waiting [0-9]* ms for deleted files to be reclaimed" err || fail "the wait is not said: $(cat err)"
"$PY" - t.json <<'PY' || fail "the wait on a volume that stays small"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
assert c["verdict"] == "ERROR", c
assert c["profile"]["space_wait_ms"] >= 10000, c["profile"]
PY
assert_empty "$tiny"
pass "a 3 MiB volume: ERROR naming the free space rename-copy needs, after a bounded wait"

# Space a deletion gives back late (a background purge) is waited for: a
# 6 MiB volume 3 MiB full, the file deleted once the run is under way.
late=$(newdir late)
mount -t tmpfs -o size=6m "kc-e2e-late-$$" "$late"
CLEANUPS+=("umount '$late'")
head -c 3M /dev/zero >"$late/hog"
"$KC" check "$late" --checks rename-copy --json l.json --no-progress >lout 2>lerr &
lpid=$!
for _ in $(seq 200); do compgen -G "$late/~kaas-conform-*/owner,*" >/dev/null && break; sleep 0.05; done
sleep 2
rm "$late/hog"
rc=0; wait $lpid || rc=$?
[ "$rc" = 0 ] || fail "rename-copy after the space came back: exit $rc: $(cat lerr)"
validate l.json
"$PY" - l.json <<'PY' || fail "rename-copy once the space came back"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
p = c["profile"]
assert c["verdict"] == "PASS", c
assert p["free_bytes_first"] < 4 << 20 and p["free_bytes"] >= 4 << 20, p
assert 0 < p["space_wait_ms"] < 10000 and p["big_bytes"] == 1 << 20, p
PY
assert_empty "$late"
pass "a volume whose space comes back while the check waits: rename-copy runs"

# No space accounting (statvfs: 0 blocks, as ceph-fuse without a Ceph
# manager) is not "0 KiB free": the full 64 MiB probe, and a note saying why.
big=$(newdir big)
expect_rc 0 "$KC" check "fault:$big?statvfs=none" --checks rename-copy --json n.json --no-progress
validate n.json
"$PY" - n.json <<'PY' || fail "rename-copy without space accounting"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
assert c["verdict"] == "PASS", c
assert c["profile"]["big_bytes"] == 64 << 20 and "free_bytes" not in c["profile"], c["profile"]
assert any("keeps no space accounting" in n for n in c.get("notes", [])), c.get("notes")
PY
assert_empty "$big"
pass "a volume without space accounting: rename-copy runs its 64 MiB probe and says why"

# ... and when such a volume is really full, the write that does not fit
# is an ERROR, never a PASS.
expect_rc 2 "$KC" check "fault:$tiny?statvfs=none" --checks rename-copy --json f.json --no-progress
validate f.json
"$PY" - f.json <<'PY' || fail "rename-copy on a full volume without space accounting"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
assert c["verdict"] == "ERROR", c
assert "ENOSPC" in c["error"] or "No space" in c["error"], c["error"]
PY
assert_empty "$tiny"
pass "a 3 MiB volume without space accounting: the 64 MiB probe does not fit, ERROR"
