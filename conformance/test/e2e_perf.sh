#!/bin/bash
# e2e_perf.sh — the opt-in perf check: figures at Kafka's write sizes and
# the metadata rates in the report, a verdict against the targets given
# (a miss is WARN, FAIL with --perf-strict), the figures in the stamp, and
# bad targets refused.  Never asserts a speed: the targets are set far
# above or below anything a disk does.
source "$(dirname "$0")/lib.sh"

vol=$(newdir vol)
expect_rc 0 "$KC" check "$vol" --checks perf --perf-fsync-p99-ms 100000 --json p.json --no-progress
validate p.json
check_verdict p.json perf PASS
"$PY" - p.json <<'PY' || fail "perf figures"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
rows = c["profile"]["append"]
assert [x["bytes"] for x in rows] == [1024, 4096, 16384, 65536, 262144, 1048576], rows
for x in rows:
    assert x["ops"] >= 20 and 0 <= x["fsync_p50_us"] <= x["fsync_p99_us"] <= x["max_us"], x
    assert x["p50_us"] <= x["p99_us"] and x["mib_per_s"] > 0, x
m = c["profile"]["meta"]
assert m["ops"] >= 20 and min(m["create_per_s"], m["rename_per_s"], m["unlink_per_s"]) > 0, m
n = c["counts"]
assert n["fsync_p99_us"] == max(x["fsync_p99_us"] for x in rows), n
assert n["target_fsync_p99_us"] == 100000 * 1000, n
assert c["detection"]["kind"] == "single", c["detection"]
PY
grep -q "^perf .*PASS" out || fail "no perf line in the table"
assert_empty "$vol"
pass "perf: append+fsync percentiles at 1 KiB..1 MiB and metadata rates, PASS against a loose target"

expect_rc 0 "$KC" check "$vol" --checks perf --perf-fsync-p99-ms 0.0001 --json w.json --no-progress
check_verdict w.json perf WARN
grep -q "fsync misses its target" out || fail "the miss is not said"
expect_rc 1 "$KC" check "$vol" --checks perf --perf-fsync-p99-ms 0.0001 --perf-strict --json f.json --no-progress
check_verdict f.json perf FAIL
[ "$(jget f.json "r['checks'][0]['reproduce_command'].endswith('--perf-fsync-p99-ms 0.000 --perf-strict') or '--perf-strict' in r['checks'][0]['reproduce_command']")" = True ] ||
	fail "the reproduce command drops the targets"
expect_rc 0 "$KC" check "$vol" --checks perf --perf-fsync-p99-ms 100000 --perf-min-mibps 900000 --json t.json --no-progress
check_verdict t.json perf WARN
grep -q "throughput misses its target" out || fail "the throughput miss is not said"
pass "a missed target is a WARN, a FAIL with --perf-strict"

expect_rc 0 "$KC" check "$vol" --perf --perf-fsync-p99-ms 100000 --stamp --iterations 20 --json s.json --no-progress
"$PY" "$VALIDATE" s.json --stamp "$vol/__cluster/qualification.json" || fail "stamp with perf does not validate"
[ "$(jget "$vol/__cluster/qualification.json" "r['perf']['counts']['fsync_p99_us'] > 0 and len(r['perf']['append']) == 6")" = True ] ||
	fail "the stamp does not record the perf figures"
pass "--perf with --stamp records the figures in the stamp"

for bad in "--perf-fsync-p99-ms 0" "--perf-fsync-p99-ms x" "--perf-min-mibps -3" "--perf-fsync-p99-ms"; do
	expect_rc 2 "$KC" check "$vol" --checks perf $bad
	grep -q -- "--perf-" err || fail "$bad: no clear error: $(cat err)"
done
pass "bad perf targets are refused by name"
