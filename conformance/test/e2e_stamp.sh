#!/bin/bash
# e2e_stamp.sh — the qualification stamp: written (atomically, into
# <URL>/__cluster or --cluster-dir) only when the verdict is PASS; accepted by
# kq_stamp_verify (kaas-conform stamp-verify) for the same volume, rejected
# for another volume, and absent after a failing or refused run.
source "$(dirname "$0")/lib.sh"

vol=$(newdir vol)
expect_rc 0 "$KC" check "$vol" --stamp --iterations 50 --json r.json
stamp="$vol/__cluster/qualification.json"
[ -f "$stamp" ] || fail "no stamp after PASS"
"$PY" "$VALIDATE" r.json --stamp "$stamp" || fail "stamp schema"
[ "$(jget "$stamp" "r['volume']['volume_key'] == '$(jget r.json "r['substrate']['identity']['volume_key']")'")" = True ] ||
	fail "stamp names another volume than the report"
grep -q "stamp written: .*__cluster/qualification.json" out || fail "stamp not announced"
[ "$(ls -A "$vol")" = __cluster ] || fail "more than the stamp left: $(ls -A "$vol")"
[ "$(ls -A "$vol/__cluster")" = qualification.json ] || fail "temp files next to the stamp"
expect_rc 0 "$KC" stamp-verify "$vol"
grep -q "qualified" out || fail "stamp-verify output"
pass "PASS writes a valid stamp that verifies for the same volume"

# Another volume (a tmpfs) holding a copy of that stamp is not qualified by it.
other=$(newdir other)
mount -t tmpfs -o size=256m "kc-stamp-$$" "$other"
CLEANUPS+=("umount '$other'")
mkdir "$other/__cluster"
cp "$stamp" "$other/__cluster/"
expect_rc 1 "$KC" stamp-verify "$other"
grep -q "qualifies volume '.*', this volume is 'tmpfs:fsid:" err || fail "rejection reason: $(cat err)"
[ "$(wc -l <err)" = 1 ] || fail "rejection is not one line"
# A stamp that was tampered into a failing one is rejected too.
sed -E 's/"verdict": "(PASS|UNPROVEN)"/"verdict": "FAIL"/' "$stamp" >"$other/__cluster/qualification.json"
expect_rc 1 "$KC" stamp-verify "$vol" --cluster-dir "$other/__cluster"
grep -q "not PASS" err || fail "a FAIL stamp was accepted"
pass "the stamp is rejected for another volume and when it does not record PASS"

# --cluster-dir: the stamp lands there, and only there.
cl=$(newdir cluster)
vol2=$(newdir vol2)
expect_rc 0 "$KC" check "$vol2" --stamp --cluster-dir "$cl" --iterations 20
[ -f "$cl/qualification.json" ] || fail "no stamp in --cluster-dir"
assert_empty "$vol2"
expect_rc 0 "$KC" stamp-verify "$vol2" --cluster-dir "$cl"
expect_rc 1 "$KC" stamp-verify "$vol2"
grep -q "no qualification stamp" err || fail "missing stamp not reported"
pass "--cluster-dir holds the stamp"

# No stamp when the verdict is not PASS: FAIL (fault) and REFUSED (tmpfs).
vol3=$(newdir vol3)
expect_rc 1 "$KC" check "fault:$vol3?excl=broken" --stamp --iterations 20
grep -q "no stamp written: the verdict is FAIL" out || fail "FAIL run did not say why there is no stamp"
assert_empty "$vol3"
rm -rf "$other/__cluster"
expect_rc 3 "$KC" check "$other" --stamp --iterations 20
assert_empty "$other"
# WARN exits 0 but is not PASS: every open of one rename target answers
# ESTALE, so that variant verifies nothing.
vol4=$(newdir vol4)
expect_rc 0 "$KC" check "fault:$vol4?failpath=*/rename/plain:open:ESTALE" --stamp --iterations 20 --json w.json
[ "$(jget w.json "r['verdict']")" = WARN ] || fail "expected WARN, got $(jget w.json "r['verdict']")"
grep -q "no stamp written: the verdict is WARN" out || fail "WARN run did not say why there is no stamp"
assert_empty "$vol4"
pass "FAIL, REFUSED and WARN runs write no stamp"

# Actors that are agents: the stamp and the report record kind "agent", for
# the run and for every actor.  The agents listen on loopback in a network
# namespace of their own, so fixed ports cannot collide with anything.
NS=kcst-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
ip netns add "$NS"
CLEANUPS+=("ip netns del '$NS'")
ip netns exec "$NS" ip link set lo up
vol5=$(newdir vol5)
for p in 7070 7071; do
	ip netns exec "$NS" "$KC" agent --listen "127.0.0.1:$p" --root "$vol5" >"agent$p.log" 2>&1 &
	CLEANUPS+=("kill $! 2>/dev/null; wait $! 2>/dev/null")
done
for p in 7070 7071; do
	timeout 10 sh -c "until grep -q listening agent$p.log; do sleep 0.05; done" ||
		fail "agent $p did not start: $(cat "agent$p.log")"
done
expect_rc 0 ip netns exec "$NS" "$KC" check "$vol5" --agent 127.0.0.1:7070 --agent 127.0.0.1:7071 \
	--stamp --iterations 20 --json agents.json --no-progress
stamp5="$vol5/__cluster/qualification.json"
"$PY" "$VALIDATE" agents.json --stamp "$stamp5" || fail "report or stamp of an agent run"
"$PY" - agents.json "$stamp5" <<'PY' || fail "the actors' kind"
import json, sys
r, s = (json.load(open(p)) for p in sys.argv[1:3])
for where, a in (("report", r["actors"]), ("stamp", s["actors"])):
    assert a["kind"] == "agent", (where, a)
    assert [x["kind"] for x in a["list"]] == ["agent", "agent"], (where, a["list"])
    assert sorted(x["agent"] for x in a["list"]) == ["127.0.0.1:7070", "127.0.0.1:7071"], (where, a)
PY
pass "actors that are agents are recorded as agents in the report and the stamp"
