#!/bin/bash
# e2e_environment.sh — what identity and environment decide: a tmpfs
# directory is refused (exit 3) although it behaves, and a run under
# eatmydata (an LD_PRELOADed no-op fsync) is flagged by the fsync check.
source "$(dirname "$0")/lib.sh"

command -v eatmydata >/dev/null || fail "eatmydata is not installed (ci/deps.sh test)"

vol=$(newdir eat)
expect_rc 1 eatmydata "$KC" check "$vol" --checks fsync,excl --json eat.json --iterations 20
validate eat.json
check_verdict eat.json fsync FAIL
check_verdict eat.json excl PASS
"$PY" - eat.json <<'PY' || fail "eatmydata evidence"
import json, sys
c = [x for x in json.load(open(sys.argv[1]))["checks"] if x["name"] == "fsync"][0]
assert c["counts"]["interposed_actors"] > 0, c["counts"]
a = c["anomalies"][0]
assert a["kind"] == "interposed" and "libeatmydata" in a["detail"], a
probe = c["profile"]["probes"][0]
assert "libeatmydata" in probe["fsync_object"], probe
PY
assert_empty "$vol"
# Without the preload the same volume passes that check.
expect_rc 0 "$KC" check "$vol" --checks fsync --json ok.json
check_verdict ok.json fsync UNPROVEN
pass "eatmydata is flagged (dladdr names libeatmydata); without it fsync passes"

tmp=$(newdir tmpfs)
mount -t tmpfs -o size=256m "kc-e2e-$$" "$tmp"
CLEANUPS+=("umount '$tmp'")
expect_rc 3 "$KC" check "$tmp" --json tmpfs.json --iterations 50
validate tmpfs.json
check_verdict tmpfs.json preflight REFUSED
for c in rename excl cto; do check_verdict tmpfs.json "$c" PASS; done
[ "$(jget tmpfs.json "r['verdict']")" = REFUSED ] || fail "overall verdict"
grep -q "not durable\|in memory only" tmpfs.json || fail "refusal not explained"
grep -q "VERDICT REFUSED (exit 3)" out || fail "table"
assert_empty "$tmp"
pass "a tmpfs directory is refused (exit 3), with the reason"

# The identity comes from the mount that holds the path, found in mountinfo
# even when the mount point's name needs escaping there (a space is \040).
sp="$WORK/mount point"
mkdir "$sp"
mount -t tmpfs -o size=16m "kc-e2e-sp-$$" "$sp"
CLEANUPS+=("umount '$sp'")
mkdir "$sp/sub dir"
expect_rc 3 "$KC" check "$sp/sub dir" --checks preflight --json sp.json
validate sp.json
"$PY" - sp.json "$sp" "kc-e2e-sp-$$" <<'PY' || fail "identity from mountinfo"
import json, sys
r = json.load(open(sys.argv[1]))
i = r["substrate"]["identity"]
assert i["mountpoint"] == sys.argv[2] and i["fstype"] == "tmpfs", i
assert i["source"] == sys.argv[3] and i["fs_magic"] == "0x1021994", i
assert i["root"] == sys.argv[2] + "/sub dir" and "size=16384k" in i["options"], i
assert i["volume_key"].startswith("tmpfs:fsid:"), i
PY
pass "identity: statfs magic and the mountinfo entry of a mount point with a space"
