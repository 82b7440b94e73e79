#!/bin/bash
# e2e_cleanup.sh — a scratch directory the volume refuses to remove at the end
# of a run (nfs-ganesha's FSAL_MEM answers EIO for an open file) does not
# throw the results away: the table, the JSON report and the JUnit file are
# written with the verdict ERROR (exit 2), name the directory left behind and
# the error, and no stamp is written.  The fault layer makes rmdir of the
# scratch directory itself (not of anything below it) fail with EIO; the same
# layer without that rule passes and leaves only the stamp.
source "$(dirname "$0")/lib.sh"

# The scratch directory is ~kaas-conform-<16 hex>; '?' cannot appear in a
# fault URL's options (they follow its last '?'), and '*' would also match
# the checks' own directories below it.
hex=$(printf '[0-9a-f]%.0s' $(seq 16))

vol=$(newdir stuck)
expect_rc 2 "$KC" check "fault:$vol?failpath=~kaas-conform-$hex:rmdir:EIO" --iterations 20 --stamp \
	--json r.json --junit j.xml --no-progress
[ -f r.json ] || fail "no JSON report"
validate r.json
left=$(ls -A "$vol")
case $left in
"~kaas-conform-"*) ;;
*) fail "expected the scratch directory (and nothing else) left in the volume, found: $left" ;;
esac
[ ! -e "$vol/__cluster" ] || fail "a stamp was written although the scratch directory was left: $(ls -AR "$vol/__cluster")"
"$PY" - r.json "$left" <<'PY' || fail "the report does not say what was left behind"
import json, sys
r, left = json.load(open(sys.argv[1])), sys.argv[2]
assert r["verdict"] == "ERROR" and r["exit_code"] == 2, (r["verdict"], r["exit_code"])
cl = r["cleanup"]
assert cl["ok"] is False, cl
assert cl["left"].endswith("/" + left), (cl, left)
assert cl["error"] == "Input/output error", cl
assert left in r["error"] and "scratch directory" in r["error"], r["error"]
# The checks' own results are all there, untouched.
assert [c["name"] for c in r["checks"]] == ["preflight", "rename", "excl", "cto", "unlink-open",
                                             "fsync", "rename-copy"], r["checks"]
assert all(c["verdict"] == ("UNPROVEN" if c["name"] == "fsync" else "PASS") for c in r["checks"]), [(c["name"], c["verdict"]) for c in r["checks"]]
PY
"$PY" - j.xml "$left" <<'PY' || fail "the JUnit file does not report the clean-up"
import sys, xml.etree.ElementTree as ET
t, left = ET.parse(sys.argv[1]).getroot(), sys.argv[2]
assert t.get("tests") == "8" and t.get("errors") == "1" and t.get("failures") == "0", t.attrib
cases = {c.get("name"): c for c in t.iter("testcase")}
e = cases["cleanup"].find("error")
assert e is not None and left in e.get("message") and "Input/output error" in e.get("message"), e
# a plain pass: nothing but its properties (guarantee, detection power)
assert all([x.tag for x in c] == ["properties"] for n, c in cases.items() if n not in ("cleanup", "fsync")), "a check is not a plain pass"
assert cases["fsync"].find("system-out").text.startswith("UNPROVEN: fsync not disproven"), "fsync is not UNPROVEN"
PY
grep -q "^rename-copy  *PASS" out || fail "no table: $(cat out)"
grep -q "^  left: .*/$left\$" out || fail "the table does not name what was left: $(cat out)"
grep -q "no stamp written: the verdict is ERROR" out || fail "no word about the stamp: $(cat out)"
grep -q "VERDICT ERROR (exit 2)  report: r.json" out || fail "final line: $(cat out)"
grep -q "cannot remove the scratch directory .*$left: Input/output error" err || fail "stderr: $(cat err)"
pass "a scratch directory that cannot be removed: every report written, verdict ERROR, the leftover named, no stamp"

# The control: the same fault layer without the rule passes, leaves only the
# stamp, and its report says the clean-up succeeded.
vol=$(newdir clean)
expect_rc 0 "$KC" check "fault:$vol?" --iterations 20 --stamp --json c.json --no-progress
validate c.json
[ "$(jget c.json "r['cleanup']")" = "{'ok': True, 'leftovers': []}" ] || fail "cleanup of a clean run: $(jget c.json "r['cleanup']")"
[ "$(ls -A "$vol")" = __cluster ] || fail "more than the stamp left: $(ls -A "$vol")"
[ -f "$vol/__cluster/qualification.json" ] || fail "no stamp after PASS"
pass "the same layer without the rule passes, cleans up and writes the stamp"
