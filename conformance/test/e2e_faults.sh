#!/bin/bash
# e2e_faults.sh — every behavioural check is shown to fail, through the
# fault backend: rename=copy fails rename (every variant) and rename-copy,
# rename=hide only the held-target variant, fsync=lie with a crash fails
# fsync, excl=broken and excl=eperm fail excl, cto=stale fails cto and
# cto=size only its growing variant, an rmdir that keeps failing and a
# holder that keeps the deleted file (leak=) fail unlink-open.  The same layer without a fault passes, so the failures are the
# faults'.
source "$(dirname "$0")/lib.sh"

run_fault() { # NAME URL EXPECTED-EXIT ARGS...
	local name=$1 url=$2 want=$3
	shift 3
	expect_rc "$want" "$KC" check "$url" --json "$name.json" --no-progress "$@"
	validate "$name.json"
}

vol=$(newdir clean)
run_fault clean "fault:$vol?" 0 --checks rename,excl,cto,fsync,rename-copy --iterations 100
for c in rename excl cto rename-copy; do check_verdict clean.json "$c" PASS; done
check_verdict clean.json fsync UNPROVEN
assert_empty "$vol"
pass "the fault layer without a fault passes"

vol=$(newdir copy)
run_fault copy "fault:$vol?rename=copy" 1 --checks rename,rename-copy,excl --iterations 100 --seed 7
check_verdict copy.json rename FAIL
check_verdict copy.json rename-copy FAIL
check_verdict copy.json excl PASS
"$PY" - copy.json <<'PY' || fail "rename=copy evidence"
import json, sys
r = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in r["checks"]}
rn, rc = c["rename"], c["rename-copy"]
bad = sum(v for k, v in rn["counts"].items()
          if k.split(".")[1] in ("missing", "empty", "short", "long", "torn", "read_enoent"))
assert bad > 0 and rn["anomalies"], rn["counts"]
# Each variant fails on its own: torn files in both file variants, and
# directories seen half moved.
for v in ("plain", "held"):
    assert rn["counts"][v + ".empty"] + rn["counts"][v + ".short"] > 0, (v, rn["counts"])
assert rn["counts"]["dir.partial"] > 0, rn["counts"]
assert {a["variant"] for a in rn["anomalies"]} >= {"plain"}, rn["anomalies"]
assert rn["reproduce"] == "--seed 7 --checks rename", rn["reproduce"]
assert rn["anomalies"][0]["trace"], "anomaly without its operation trace"
assert "atomic same-directory rename" == rn["guarantee"]
assert rc["counts"]["inode_changed"] > 0 and rc["counts"]["time_grows"] == 1, rc["counts"]
PY
assert_empty "$vol"
pass "rename=copy fails rename and rename-copy, with counts, traces and the seed"

vol=$(newdir lie)
run_fault lie "fault:$vol?fsync=lie" 1 --checks fsync --crash-cmd "test -n \"\$KAAS_CONFORM_FILE\""
check_verdict lie.json fsync FAIL
[ "$(jget lie.json "r['checks'][0]['counts']['crash_lost']")" = 1 ] || fail "fsync=lie: crash not detected"
[ "$(jget lie.json "r['checks'][0]['counts']['crash_cmd']")" = 1 ] || fail "crash command not run"
grep -q "lost_after_fsync" lie.json || fail "no anomaly for the lost data"
assert_empty "$vol"
pass "fsync=lie + crash fails fsync"

vol=$(newdir excl)
run_fault excl "fault:$vol?excl=broken" 1 --checks excl --iterations 50
check_verdict excl.json excl FAIL
[ "$(jget excl.json "r['checks'][0]['counts']['multi_winner'] > 0")" = True ] || fail "no round with two winners"
assert_empty "$vol"
pass "excl=broken fails excl"

# The reproduce line is a shell command with every argument quoted: a URL
# with '?', '&', a space or a quote pastes back into a shell as it was given,
# and the pasted command repeats the run (same URL, mounts, actors, seed).
vol=$(newdir "odd v'ol")
url="fault:$vol?excl=broken&seed=3"
expect_rc 1 "$KC" check "$url" --mount "fault:$vol?excl=broken&seed=4" --actors 3 --checks excl \
	--iterations 20 --seed 11 --json odd.json --no-progress
line=$(grep '^  reproduce: ' out) || fail "no reproduce line: $(cat out)"
cmd=${line#  reproduce: }
[ "$cmd" = "$(jget odd.json "r['checks'][0]['reproduce_command']")" ] ||
	fail "the table and the report disagree on the command: $cmd"
mkdir again
rc=0
(cd again && PATH="$BINDIR:$PATH" bash -c "$cmd --json again.json --no-progress") >again.out 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat again.out; fail "the pasted command exited $rc, expected 1: $cmd"; }
"$PY" - odd.json again/again.json <<'PY' || fail "the pasted command did not repeat the run"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
for k in ("seed", "iterations"):
    assert a[k] == b[k], (k, a[k], b[k])
assert a["substrate"]["url"] == b["substrate"]["url"], b["substrate"]
assert a["substrate"]["mounts"] == b["substrate"]["mounts"], b["substrate"]
assert b["actors"]["count"] == 3, b["actors"]
assert [c["name"] for c in b["checks"]] == ["excl"] and b["checks"][0]["verdict"] == "FAIL", b["checks"]
PY
assert_empty "$vol"
pass "the reproduce command quotes every argument and repeats the run when pasted"

vol=$(newdir cto)
run_fault cto "fault:$vol?cto=stale" 1 --checks cto --iterations 50
check_verdict cto.json cto FAIL
[ "$(jget cto.json "r['checks'][0]['counts'].get('same.stale', 0) > 0")" = True ] || fail "no stale read counted"
assert_empty "$vol"
pass "cto=stale fails cto"

# The variants catch what the others cannot.  A client that caches only the
# size (sshfs, s3fs) reads growing rewrites short and same-size ones right.
vol=$(newdir ctosize)
run_fault ctosize "fault:$vol?cto=size" 1 --checks cto --iterations 30
check_verdict ctosize.json cto FAIL
"$PY" - ctosize.json <<'PY' || fail "cto=size evidence"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
n = c["counts"]
assert n["same.ok"] == n["same.reads"] == 3 * 31, n  # 3 readers, version 0 and 30 more
assert n["renamed.ok"] == n["renamed.reads"] == 3 * 31, n
assert n["grow.short"] > 0 and n["grow.ok"] < n["grow.reads"], n
assert c["anomalies"][0]["variant"] == "grow" and c["anomalies"][0]["kind"] == "short", c["anomalies"][0]
assert "grow short" in c["summary"], c["summary"]
PY
assert_empty "$vol"
pass "cto=size fails only the growing variant"

# A renamer that hides the open target first (libfuse without hard_remove,
# as sshfs does) shows readers a missing name in the held variant only.
vol=$(newdir hide)
run_fault hide "fault:$vol?rename=hide" 1 --checks rename --iterations 50
check_verdict hide.json rename FAIL
"$PY" - hide.json <<'PY' || fail "rename=hide evidence"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
n = c["counts"]
assert n["held.missing"] > 0, n
plain = sum(v for k, v in n.items() if k.startswith("plain.") and k.split(".")[1] not in
            ("renames", "reads", "ok", "versions", "reads_after_stop", "estale_open", "estale_read",
             "final_version"))
assert plain == 0 and n["plain.ok"] > 0 and n["dir.partial"] == 0, n
assert {a["variant"] for a in c["anomalies"]} == {"held"}, c["anomalies"]
assert c["profile"]["errnos"]["held"]["open"]["ENOENT"] == n["held.missing"], c["profile"]["errnos"]
PY
assert_empty "$vol"
pass "rename=hide fails only the held-target variant"

# A loser of O_EXCL told EPERM (SFTP) is flagged although one actor won.
vol=$(newdir eperm)
run_fault eperm "fault:$vol?excl=eperm" 1 --checks excl --iterations 20
check_verdict eperm.json excl FAIL
"$PY" - eperm.json <<'PY' || fail "excl=eperm evidence"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
n = c["counts"]
assert n["one_winner"] == 20 and n["multi_winner"] == 0, n
assert n["loser_eperm"] == 20 * 3 and n["loser_eexist"] == 0, n
assert c["profile"]["errnos"]["EPERM"] == 60, c["profile"]
a = c["anomalies"][0]
assert a["kind"] == "loser_errno" and "EPERM" in a["detail"] and a["trace"], a
PY
assert_empty "$vol"
pass "excl=eperm: the loser's EPERM is classified and fails excl"

# unlink-open: a directory that cannot be removed after the holder closed
# the file fails the check.  Only the deleting actor (actor 1, the --mount)
# sees the fault, so the tool's own clean-up is unaffected.
vol=$(newdir unlink)
run_fault unlink "$vol" 1 --checks unlink-open --actors 2 --mount "fault:$vol?failpath=*/unlink-open/held:rmdir:EBUSY"
check_verdict unlink.json unlink-open FAIL
"$PY" - unlink.json <<'PY' || fail "unlink-open evidence"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
assert c["counts"]["rmdir_after_close_failed"] == 1, c["counts"]
assert c["profile"]["rmdir_while_open"] == "EBUSY" and c["profile"]["rmdir_after_close"] == "EBUSY", c["profile"]
a = c["anomalies"][0]
assert a["kind"] == "not_released" and "rmdir: EBUSY" in a["detail"] and "holds: nothing" in a["detail"], a
assert c["profile"]["listing_after_close"] == [], c["profile"]
PY
assert_empty "$vol"
pass "unlink-open fails when the directory cannot be removed after the close"

# unlink-open: a holder that never lets go of the file it closed (fault
# leak=, actor 0 only) keeps the deleted file's space: the check fails on
# the space, after a second attempt with a fresh file, while the directory
# itself is removed.  The fault's kept descriptors close when the actor ends.
# On a private tmpfs: free space there moves only with what the check does,
# whereas on the shared disk other processes' deletes can look like the free
# (the rule errs towards PASS).  The same tmpfs without the leak passes.
vol=$(newdir leak)
mount -t tmpfs -o size=128m "kc-e2e-leak-$$" "$vol"
CLEANUPS+=("umount '$vol'")
run_fault noleak "$vol" 0 --checks unlink-open --actors 2
check_verdict noleak.json unlink-open PASS
[ "$(jget noleak.json "r['checks'][0]['counts']['space_attempts']")" = 1 ] || fail "no leak: a second attempt"
run_fault leak "fault:$vol?leak=*/victim" 1 --checks unlink-open --actors 2 --mount "$vol"
check_verdict leak.json unlink-open FAIL
"$PY" - leak.json <<'PY' || fail "unlink-open space evidence"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
n, p = c["counts"], c["profile"]
assert n["space_not_freed"] == 1 and n["space_unknown"] == 0, n
assert n["rmdir_after_close_failed"] == 0 and n["space_attempts"] == 2, n
assert len(p["space_attempts"]) == 1 and not p["space_attempts"][0]["freed"], p["space_attempts"]
assert p["space_attempts"][0]["conclusive"], p["space_attempts"]
# the file was seen arriving, and nothing came back in either attempt
sp = p["space"]
assert sp["avail_before"] - sp["avail_held"] >= 16 << 20, sp
assert sp["rise"] < 16 << 20 and p["space_attempts"][0]["rise"] < 16 << 20, (sp, p["space_attempts"])
a = c["anomalies"][0]
assert a["kind"] == "space_not_freed" and "2 attempts" in a["detail"], a
assert "space was not freed" in c["summary"], c["summary"]
PY
assert_empty "$vol"
pass "unlink-open fails when the holder keeps the deleted file (fault leak=): the space is not freed"

# rename-copy: a descriptor opened before the renames that can no longer
# read, and a renamed file that does not read back, each fail the check.
vol=$(newdir rcopy)
run_fault rcopy "$vol" 1 --checks rename-copy --actors 2 --mount "fault:$vol?failpath=*/rename-copy/big*:pread:EIO"
check_verdict rcopy.json rename-copy FAIL
"$PY" - rcopy.json <<'PY' || fail "rename-copy evidence"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
n = c["counts"]
assert n["old_fd_broken"] == 1 and n["content_mismatch"] == 1 and n["inode_changed"] == 0, n
kinds = {a["kind"]: a["detail"] for a in c["anomalies"]}
assert "EIO" in kinds["old_fd_broken"] and "EIO" in kinds["content_mismatch"], kinds
PY
assert_empty "$vol"
pass "rename-copy fails when the old descriptor or the moved file cannot be read"

# Errors are classified: ESTALE at open is retried and reported, never a
# violation; ENOENT inside read() after a successful open (s3fs) is one.
vol=$(newdir classify)
# Every open of the plain target answers ESTALE: nothing is violated, but
# that variant verified nothing, so the check is inconclusive (WARN, exit 0).
run_fault estale "fault:$vol?failpath=*/rename/plain:open:ESTALE" 0 --checks rename --iterations 50
check_verdict estale.json rename WARN
"$PY" - estale.json <<'PY' || fail "ESTALE classification"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
assert c["counts"]["plain.estale_open"] > 0 and c["counts"]["plain.ok"] == 0, c["counts"]
assert c["counts"]["held.ok"] > 0 and c["anomalies_total"] == 0, c["counts"]
assert c["profile"]["errnos"]["plain"]["open"]["ESTALE"] == c["counts"]["plain.estale_open"]
assert "ESTALE retried" in c["summary"] and "plain" in c["summary"], c["summary"]
PY
run_fault enoent "fault:$vol?failpath=*/rename/held:pread:ENOENT" 1 --checks rename --iterations 50
check_verdict enoent.json rename FAIL
[ "$(jget enoent.json "r['checks'][0]['counts']['held.read_enoent'] > 0")" = True ] || fail "ENOENT in read not counted"
[ "$(jget enoent.json "r['checks'][0]['profile']['errnos']['held']['read']['ENOENT'] > 0")" = True ] ||
	fail "ENOENT in read not classified"
assert_empty "$vol"
pass "ESTALE at open is retried and reported; ENOENT in read is a violation"
