#!/bin/bash
# e2e_layers.sh — preflight sees through stacked mounts and reads mount
# options, without the matrix: an overlay whose upper layer is a tmpfs, a
# bind mount of a tmpfs directory, ext4 on a loop image mounted with
# barriers off, and ext4 on a loop image whose file lives on a tmpfs are
# refused, each naming the layer (or the option) that decided; the same
# stacks on disk are not.  And the durability verdicts: no power-loss hook
# is UNPROVEN (exit 0, exit 4 with --require-power-loss), a power-loss hook
# that keeps the data is PASS, one that drops it is FAIL.
source "$(dirname "$0")/lib.sh"

# preflight_of NAME URL WANT_RC — run preflight only, validate the report.
preflight_of() {
	expect_rc "$3" "$KC" check "$2" --checks preflight --json "$1.json" --no-progress
	validate "$1.json"
}
# decided NAME — the layer that decided, as the report says it.
decided() { jget "$1.json" "[c for c in r['checks'] if c['name'] == 'preflight'][0]['profile']['identities'][0]['decided_by']"; }

ram=$(newdir ram)
mount -t tmpfs -o size=64m "kc-e2e-layers-$$" "$ram"
CLEANUPS+=("umount '$ram'")

# overlay: upper and work on tmpfs -> refused by the upper layer
mkdir -p "$ram/upper" "$ram/work" "$WORK/lower/data" "$WORK/ov"
mount -t overlay "kc-e2e-ov-$$" -o "lowerdir=$WORK/lower,upperdir=$ram/upper,workdir=$ram/work" "$WORK/ov"
CLEANUPS+=("umount '$WORK/ov' 2>/dev/null")
preflight_of ov "$WORK/ov/data" 3
d=$(decided ov)
[[ $d == "overlay upperdir $ram/upper (tmpfs"* ]] || fail "overlay: decided by '$d'"
check_verdict ov.json preflight REFUSED
grep -q "overlay upperdir $ram/upper" out || fail "the table does not name the upper layer"
"$PY" - ov.json "$ram" <<'PY' || fail "overlay layers"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
layers = c["profile"]["identities"][0]["layers"]
assert [l["role"] for l in layers] == ["mount", "overlay upperdir", "overlay workdir"], layers
assert layers[0]["fstype"] == "overlay" and layers[1]["fstype"] == "tmpfs", layers
refused = [f for f in c["profile"]["findings"] if f["level"] == "REFUSED"]
assert {f["layer"] for f in refused} == {1, 2} and all(f["code"] == "not-durable" for f in refused), refused
PY
umount "$WORK/ov"
# the same overlay with its upper layer on disk is not refused
mkdir -p "$WORK/upper" "$WORK/work"
mount -t overlay "kc-e2e-ov2-$$" -o "lowerdir=$WORK/lower,upperdir=$WORK/upper,workdir=$WORK/work" "$WORK/ov"
preflight_of ov2 "$WORK/ov/data" 0
check_verdict ov2.json preflight PASS
umount "$WORK/ov"
# overlay volatile: fsync is ignored by the overlay itself -> refused by option
mount -t overlay "kc-e2e-ov3-$$" -o "lowerdir=$WORK/lower,upperdir=$WORK/upper,workdir=$WORK/work,volatile" "$WORK/ov"
preflight_of ov3 "$WORK/ov/data" 3
grep -q '"code": "overlay-volatile"' ov3.json || fail "overlay volatile not named"
umount "$WORK/ov"
pass "overlay: refused by a tmpfs upper layer and by volatile, not when the upper layer is on disk"

# a bind mount of one directory of a tmpfs: its root field is recorded
mkdir -p "$ram/vol" "$WORK/bind"
mount --bind "$ram/vol" "$WORK/bind"
CLEANUPS+=("umount '$WORK/bind' 2>/dev/null")
preflight_of bind "$WORK/bind" 3
"$PY" - bind.json <<'PY' || fail "bind layers"
import json, sys
c = json.load(open(sys.argv[1]))["checks"][0]
l = c["profile"]["identities"][0]["layers"][0]
assert l["bind"] is True and l["mount_root"] == "/vol" and l["fstype"] == "tmpfs", l
assert any(f["code"] == "bind-mount" for f in c["profile"]["findings"]), c["profile"]["findings"]
PY
umount "$WORK/bind"
pass "a bind mount of a tmpfs directory: refused, its root recorded"

# ext4 on a loop device: barriers off over the loop's write-back cache
# -> refused by option; its image on a tmpfs -> refused by the backing file
img=$WORK/disk.img
truncate -s 64M "$img"
mkfs.ext4 -q -F "$img"
dev=$(losetup -f --show "$img")
CLEANUPS+=("losetup -d '$dev' 2>/dev/null")
mkdir -p "$WORK/ext4"
mount -o barrier=0 "$dev" "$WORK/ext4"
CLEANUPS+=("umount '$WORK/ext4' 2>/dev/null")
preflight_of nob "$WORK/ext4" 3
grep -q '"option": "nobarrier"' nob.json || fail "the barrier option is not named"
grep -q "write barriers off" out || fail "the table does not explain the option"
[[ $(decided nob) == "mount $WORK/ext4 (ext4 from $dev"* ]] || fail "nobarrier: decided by '$(decided nob)'"
umount "$WORK/ext4"
mount "$dev" "$WORK/ext4"
preflight_of bar "$WORK/ext4" 0
check_verdict bar.json preflight PASS
"$PY" - bar.json "$img" <<'PY' || fail "loop layers"
import json, sys
layers = json.load(open(sys.argv[1]))["checks"][0]["profile"]["identities"][0]["layers"]
roles = [l["role"] for l in layers]
assert roles[:3] == ["mount", "block device", "loop backing file"], roles
assert layers[1]["kind"] == "loop" and layers[1]["backing_file"] == sys.argv[2], layers[1]
PY
umount "$WORK/ext4"
losetup -d "$dev"
truncate -s 64M "$ram/disk.img"
mkfs.ext4 -q -F "$ram/disk.img"
dev=$(losetup -f --show "$ram/disk.img")
CLEANUPS+=("losetup -d '$dev' 2>/dev/null")
mount "$dev" "$WORK/ext4"
preflight_of ramimg "$WORK/ext4" 3
[[ $(decided ramimg) == "loop backing file $ram/disk.img (tmpfs"* ]] || fail "loop on tmpfs: decided by '$(decided ramimg)'"
umount "$WORK/ext4"
losetup -d "$dev"
pass "ext4 on a loop device: barrier=0 refused by option, an image on tmpfs by its backing file, barriers on pass"

# durability: the verdict names what was proven
vol=$(newdir vol)
expect_rc 0 "$KC" check "$vol" --checks fsync --json u.json --no-progress
validate u.json
check_verdict u.json fsync UNPROVEN
grep -q "durability: fsync not disproven: no power-loss hook" out || fail "no durability line"
expect_rc 4 "$KC" check "$vol" --checks fsync --json r.json --no-progress --require-power-loss
validate r.json
[ "$(jget r.json "r['verdict']")" = UNPROVEN ] || fail "required proof: verdict"
grep -q "VERDICT UNPROVEN (exit 4)" out || fail "required proof: final line"
# a power-loss hook that keeps the data proves it; one that drops it fails
expect_rc 0 "$KC" check "$vol" --checks fsync --json p.json --no-progress --require-power-loss \
	--power-loss-cmd true
validate p.json
check_verdict p.json fsync PASS
[ "$(jget p.json "r['durability']['statement']")" = "survived a power loss" ] || fail "proven statement"
expect_rc 1 "$KC" check "$vol" --checks fsync --json l.json --no-progress \
	--power-loss-cmd 'truncate -s 4096 "$KAAS_CONFORM_PATH"'
check_verdict l.json fsync FAIL
expect_rc 2 "$KC" check "$vol" --crash-cmd true --power-loss-cmd true
expect_rc 2 "$KC" check "$vol" --checks rename --require-power-loss
grep -q "needs the fsync check" err || fail "--require-power-loss without fsync"
assert_empty "$vol"
pass "durability: UNPROVEN without a power-loss hook (exit 4 when required), PASS or FAIL with one"
