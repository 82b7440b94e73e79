#!/bin/bash
# e2e_local.sh — kaas-conform on a directory of the local disk: every check
# passes with 4 actors, the reports match their schema, options are honoured,
# several --mount URLs give distinct clients, and nothing is left behind.
source "$(dirname "$0")/lib.sh"

vol=$(newdir vol)
expect_rc 0 "$KC" check "$vol" --actors 4 --seed 12345 --json r.json --junit j.xml --no-progress
validate r.json
# Every guarantee held; without a power-loss hook durability is unproven.
[ "$(jget r.json "r['verdict']")" = UNPROVEN ] || fail "verdict $(jget r.json "r['verdict']")"
[ "$(jget r.json "r['actors']['count']")" = 4 ] || fail "actor count"
[ "$(jget r.json "r['seed']")" = 12345 ] || fail "seed not kept"
[ "$(jget r.json "len(r['checks'])")" = 7 ] || fail "not every check ran"
for c in preflight rename excl cto unlink-open rename-copy; do check_verdict r.json "$c" PASS; done
check_verdict r.json fsync UNPROVEN
# The concurrent checks really ran concurrently and verified something.
"$PY" - r.json <<'PY' || fail "the rename variants did not all run concurrently"
import json, sys
c = [x for x in json.load(open(sys.argv[1]))["checks"] if x["name"] == "rename"][0]["counts"]
# The writer renames 200 times (--iterations, 688 by default, at most 200);
# each of the 3 readers makes at least 688 observations, and every reader
# converged to the final record.
for v in ("plain", "held"):
    assert c[v + ".renames"] == 200 and c[v + ".reads"] >= 688 * 3, (v, c)
    assert c[v + ".final_version"] == c[v + ".renames"] and c[v + ".not_converged"] == 0, (v, c)
# The directory moves while the listers list it, 688 rounds each.
assert c["dir.renames"] >= 688 and c["dir.rounds"] == 688 * 3, c
assert c["dir.complete"] > 0 and c["dir.not_converged"] == 0, c
PY
[ "$(jget r.json "[c['counts']['loser_eexist'] for c in r['checks'] if c['name']=='excl'][0]")" = $((688 * 3)) ] ||
	fail "excl: not every loser got EEXIST"
grep -q "VERDICT UNPROVEN (exit 0)  report: r.json  durability: fsync not disproven: no power-loss hook" out || fail "no final table"
"$PY" - j.xml <<'PY' || fail "JUnit file"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = root.findall(".//testcase")
assert len(cases) == 7, len(cases)
assert not root.findall(".//failure") and not root.findall(".//error")
PY
assert_empty "$vol"
pass "local directory passes with 4 actors; JSON and JUnit reports valid; nothing left behind"

# --checks and --iterations are honoured; --json - writes the report to stdout.
expect_rc 0 "$KC" check "$vol" --checks excl,cto --iterations 17 --actors 3 --json -
"$PY" -c "
import json; r = json.load(open('$WORK/out'))
assert [c['name'] for c in r['checks']] == ['excl', 'cto'], r['checks']
assert r['checks'][0]['counts']['rounds'] == 17
assert r['checks'][0]['counts']['racers'] == 3
# every reader (2 of them) reads version 0 and then each of the 17
assert r['checks'][1]['counts']['same.reads'] == 2 * (17 + 1)
# 17 observations catch an anomaly in 1% of them with 15.7%: said, not hidden
d = r['checks'][1]['detection']
assert d['observations'] == 17 and not d['meets_target'] and 0.15 < d['power'] < 0.16, d
assert any('below the 99.9% target' in n for n in r['checks'][1]['notes']), r['checks'][1]['notes']
" || fail "--checks/--iterations/--json -"
grep -q "VERDICT PASS" err || fail "table not moved to stderr with --json -"
# Growing rewrites stay small however many there are (a new file every 64
# versions), and every read after a close saw its version.
expect_rc 0 "$KC" check "$vol" --checks cto --iterations 150 --actors 2 --json -
"$PY" -c "
import json; c = json.load(open('$WORK/out'))['checks'][0]
n = c['counts']
assert n['grow.reads'] == n['grow.ok'] == 150 + 1, n
lo, hi = c['profile']['grow_bytes']
assert lo < hi <= 64 * 1024, c['profile']
" || fail "growing rewrites are not bounded"
assert_empty "$vol"
pass "--checks, --iterations, --actors and --json - honoured"

# On a terminal (script(1) gives it one) a running check shows a live line —
# operations, rate, anomalies so far — refreshed every 250 ms, then its
# verdict, then the table; redirected output gets no live lines.  rename=copy
# sleeps at least 1 ms per file copied, so the rename check lasts well over
# one refresh.
! grep -q $'\r' out err || fail "live progress written although the output is not a terminal"
script -qec "'$KC' check 'fault:$vol?rename=copy' --checks rename,excl --iterations 50 --json tty.json" /dev/null >tty.out || true
"$PY" - tty.out <<'PY' || fail "live progress on a terminal"
import re, sys
t = open(sys.argv[1], encoding="utf-8", errors="replace", newline="").read()
assert re.search(r"\r\x1b\[K  rename +(plain|held|dir) +\d+ ops +\d+/s  anomalies \d+", t), t
for c, v in (("rename", "FAIL"), ("excl", "PASS")):
    assert re.search(r"\r\x1b\[K  %s +%s +\d+\.\ds  " % (c, v), t), (c, t)
assert "CHECK        VERDICT" in t and "VERDICT FAIL (exit 1)" in t, t
PY
assert_empty "$vol"
pass "live progress and the final table on a terminal"

# Without --json the report goes to ./kaas-conform-report.json.
expect_rc 0 "$KC" check "posix:$vol" --checks preflight
validate kaas-conform-report.json
pass "default report file"

# A report path that is a device is written in place, never renamed over:
# /dev/null must still be the character device afterwards.
expect_rc 0 "$KC" check "posix:$vol" --checks preflight --json /dev/null --junit /dev/null
[ -c /dev/null ] || fail "the report replaced /dev/null with a regular file"
assert_empty "$vol"
pass "a device as the report path is written in place"

# Two mounts of one directory are two clients; actors alternate between them.
mnt=$(newdir mnt)
mount --bind "$vol" "$mnt"
CLEANUPS+=("umount '$mnt'")
expect_rc 0 "$KC" check "$vol" --mount "$mnt" --actors 4 --checks rename,excl,cto --iterations 50 --json m.json
validate m.json
[ "$(jget m.json "r['actors']['clients']")" = 2 ] || fail "expected 2 distinct clients"
[ "$(jget m.json "[a['url'] for a in r['actors']['list']] == ['$vol', '$mnt', '$vol', '$mnt']")" = True ] ||
	fail "actors do not alternate between the mounts"
[ "$(jget m.json "r['substrate']['mounts']")" = "['$mnt']" ] || fail "mounts not reported"
assert_empty "$vol"
pass "--mount gives actors distinct clients (round-robin)"
