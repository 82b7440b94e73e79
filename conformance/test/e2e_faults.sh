#!/bin/bash
# e2e_faults.sh — every behavioural check is shown to fail, through the
# fault backend: rename=copy fails rename and rename-copy, fsync=lie with a
# crash fails fsync, excl=broken fails excl, cto=stale fails cto.  The same
# layer without a fault passes, so the failures are the faults'.
source "$(dirname "$0")/lib.sh"

run_fault() { # NAME URL EXPECTED-EXIT ARGS...
	local name=$1 url=$2 want=$3
	shift 3
	expect_rc "$want" "$KC" check "$url" --json "$name.json" --no-progress "$@"
	validate "$name.json"
}

vol=$(newdir clean)
run_fault clean "fault:$vol?" 0 --checks rename,excl,cto,fsync,rename-copy --iterations 100
for c in rename excl cto fsync rename-copy; do check_verdict clean.json "$c" PASS; done
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

vol=$(newdir cto)
run_fault cto "fault:$vol?cto=stale" 1 --checks cto --iterations 50
check_verdict cto.json cto FAIL
[ "$(jget cto.json "r['checks'][0]['counts'].get('same.stale', 0) > 0")" = True ] || fail "no stale read counted"
assert_empty "$vol"
pass "cto=stale fails cto"

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
