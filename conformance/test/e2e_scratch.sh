#!/bin/bash
# e2e_scratch.sh — the scratch directory belongs to its run.  Removed under a
# running check, it is the run's ERROR with that reason, not a verdict on the
# filesystem.  Left behind by a run killed with SIGKILL, the next run on the
# same host removes it (that pid is gone); a leftover owned by another host,
# or with no owner record, is only reported with its age, and `kaas-conform
# clean` removes it when asked (--older-than keeps the younger ones).
source "$(dirname "$0")/lib.sh"

# 1. The scratch directory removed during the rename check.
vol=$(newdir vanish)
( rc=0; "$KC" check "$vol" --checks rename --iterations 100000 --no-progress --json v.json >vout 2>verr || rc=$?; echo $rc >vrc ) &
for _ in $(seq 100); do compgen -G "$vol/~kaas-conform-*/rename" >/dev/null && break; sleep 0.05; done
sleep 0.3
rm -rf "$vol"/~kaas-conform-* 2>/dev/null || rm -rf "$vol"/~kaas-conform-* 2>/dev/null || true
wait
[ "$(cat vrc)" = 2 ] || fail "exit $(cat vrc), expected 2: $(tail -n 5 vout verr)"
validate v.json
"$PY" - v.json <<'PY' || fail "the report does not blame the vanished directory"
import json, sys
r = json.load(open(sys.argv[1]))
c = r["checks"][0]
assert r["verdict"] == "ERROR" and c["verdict"] == "ERROR", (r["verdict"], c["verdict"])
assert "scratch directory" in c["error"] and "vanished during the check" in c["error"], c["error"]
assert "no verdict on the volume" in r["error"], r["error"]
PY
grep -q "^rename  *ERROR" vout || fail "table: $(cat vout)"
pass "a scratch directory removed under the rename check: ERROR naming it, not a rename FAIL"

# 2. A run killed with SIGKILL leaves its directory; the next run removes it.
vol=$(newdir killed)
"$KC" check "$vol" --checks rename --iterations 100000 --no-progress --json /dev/null >/dev/null 2>&1 &
kpid=$!
for _ in $(seq 100); do compgen -G "$vol/~kaas-conform-*/owner,*" >/dev/null && break; sleep 0.05; done
kill -9 $kpid
wait $kpid 2>/dev/null || true
left=$(cd "$vol" && ls -d ~kaas-conform-* 2>/dev/null) || true
[ -n "$left" ] || fail "the killed run left no scratch directory (nothing to test)"
rec=$(cd "$vol/$left" && ls -d owner,*)
"$PY" - "$rec" $kpid <<'PY' || fail "owner record: $rec"
import sys
_, pid, start, ms, host = sys.argv[1].split(",", 4)
# the host id in characters every volume stores (SMB refuses ':' and '|',
# smbnetfs decodes %XX)
assert int(pid) == int(sys.argv[2]) and int(start) > 0 and int(ms) > 0 and "=2Fnetns=3A" in host, sys.argv[1]
assert all(c.isalnum() or c in "._-=" for c in host), sys.argv[1]
PY
# A leftover of a run on another host (still live, for all this host knows),
# and one with no owner record.
mkdir "$vol/~kaas-conform-00000000000000bb"
mkdir -p "$vol/~kaas-conform-00000000000000aa/owner,1,5,$(( $(date +%s%3N) - 7200000 )),elsewhere=2F1234abcd=2Fnetns=3A1"
expect_rc 0 "$KC" check "$vol" --checks rename --iterations 50 --no-progress --json k.json
validate k.json
grep -q "removed leftover scratch directory $left" out || fail "the dead run's directory was not removed: $(cat out)"
[ ! -e "$vol/$left" ] || fail "$left still there"
grep -q "leftover scratch directory ~kaas-conform-00000000000000aa (2h00m old) not removed: owned by a run on host elsewhere/" out ||
	fail "another host's leftover not reported with its age: $(cat out)"
grep -q "leftover scratch directory ~kaas-conform-00000000000000bb .* not removed: it has no owner record" out ||
	fail "an ownerless leftover not reported: $(cat out)"
[ -d "$vol/~kaas-conform-00000000000000aa" ] && [ -d "$vol/~kaas-conform-00000000000000bb" ] ||
	fail "a leftover that is not provably dead was removed"
"$PY" - k.json "$left" <<'PY' || fail "the report's leftovers"
import json, sys
r, left = json.load(open(sys.argv[1])), sys.argv[2]
st = {l["name"]: l["state"] for l in r["cleanup"]["leftovers"]}
assert st == {left: "removed", "~kaas-conform-00000000000000aa": "left", "~kaas-conform-00000000000000bb": "left"}, st
PY
pass "a SIGKILLed run's directory is removed by the next run; another host's and an ownerless one are reported, kept"

# 3. clean: --older-than keeps the young one, then without it both go.
touch -d '-10 minutes' "$vol/~kaas-conform-00000000000000bb"
expect_rc 0 "$KC" clean "$vol" --older-than 1h
grep -q "removed leftover scratch directory ~kaas-conform-00000000000000aa" out || fail "clean --older-than 1h: $(cat out)"
[ -d "$vol/~kaas-conform-00000000000000bb" ] || fail "clean --older-than 1h removed a 10-minute-old leftover"
grep -q "1 removed, 1 left" out || fail "clean summary: $(cat out)"
expect_rc 0 "$KC" clean "$vol"
grep -q "1 removed, 0 left" out || fail "clean: $(cat out)"
assert_empty "$vol"
expect_rc 2 "$KC" clean "$vol" --older-than soon
grep -q "older-than: 'soon' is not a duration" err || fail "bad duration: $(cat err)"
pass "kaas-conform clean removes leftovers explicitly, --older-than keeps the younger"
