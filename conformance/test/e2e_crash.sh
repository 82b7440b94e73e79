#!/bin/bash
# e2e_crash.sh — a --crash-cmd that puts another filesystem where the URL
# points (a FUSE daemon mounted again, a disk image copy mounted in place):
# after it, the driver and every actor open the URL again, so the fsynced
# file is read from what the command left there, and the checks after fsync
# run on it too.  Shown with a bind mount replaced by one of a copy (lazy
# unmount: descriptors on the old mount go on working, so a tool that kept
# them would silently check the old filesystem) and with the directory
# renamed aside and copied back.
source "$(dirname "$0")/lib.sh"

# The URL is a bind mount of disk-a.  The crash command copies it to disk-b,
# loses the fsynced file's tail in the copy (as a lying disk would), and
# mounts disk-b in its place.
a=$(newdir disk-a) b=$(newdir disk-b) url=$(newdir url)
mount --bind "$a" "$url"
CLEANUPS+=("umount -l '$url' 2>/dev/null; umount -l '$url' 2>/dev/null")
cmd='cp -a "$KAAS_CONFORM_URL/." '"'$b/'"' && truncate -s 4096 '"'$b/'"'"$KAAS_CONFORM_FILE" &&
umount -l "$KAAS_CONFORM_URL" && mount --bind '"'$b'"' "$KAAS_CONFORM_URL"'
expect_rc 1 "$KC" check "$url" --actors 3 --checks fsync,rename-copy --crash-cmd "$cmd" \
	--json lossy.json --no-progress
validate lossy.json
check_verdict lossy.json fsync FAIL
check_verdict lossy.json rename-copy PASS
"$PY" - lossy.json <<'PY' || fail "lossy copy: evidence"
import json, sys
c = {x["name"]: x for x in json.load(open(sys.argv[1]))["checks"]}["fsync"]
n, p = c["counts"], c["profile"]
assert n["crash_cmd"] == 1 and n["crash_lost"] == 1, n
# read from the copy: 4096 bytes, not the whole MiB the old mount still has
assert p["crash_verify"]["status"] == "short" and p["crash_verify"]["bytes"] == 4096, p["crash_verify"]
assert n["crash_bytes_lost"] == (1 << 20) - 4096, n
# the driver and the two actors that were not killed opened the URL again
assert p["reopened_after_crash"] == 3, p
assert c["anomalies"][0]["kind"] == "lost_after_fsync", c["anomalies"]
PY
# The run ended on disk-b (scratch removed there); disk-a, no longer
# mounted anywhere, keeps the old scratch with the whole file.
assert_empty "$b"
old=$(ls -A "$a")
[ -n "$old" ] && [ "$(stat -c %s "$a/$old/fsync/crash")" = 1048576 ] ||
	fail "disk-a does not hold the old scratch: $old"
rm -rf "${a:?}/$old"
umount -l "$url"
umount -l "$url" 2>/dev/null || true
pass "a crash command that mounts a lossy copy in place: fsync FAIL, read from the copy; the run goes on there"

# The directory renamed aside and copied back whole: everything passes, on
# the new directory.
vol=$(newdir vol)
cmd='mv "$KAAS_CONFORM_URL" "$KAAS_CONFORM_URL.old" && cp -a "$KAAS_CONFORM_URL.old" "$KAAS_CONFORM_URL"'
expect_rc 0 "$KC" check "$vol" --actors 3 --checks fsync,rename-copy --crash-cmd "$cmd" \
	--json copy.json --no-progress
validate copy.json
check_verdict copy.json fsync UNPROVEN
check_verdict copy.json rename-copy PASS
[ "$(jget copy.json "[c for c in r['checks'] if c['name'] == 'fsync'][0]['profile']['reopened_after_crash']")" = 3 ] ||
	fail "not every handle was opened again"
assert_empty "$vol"
[ -n "$(ls -A "$vol.old")" ] || fail "the old directory was cleaned instead of the new one"
rm -rf "$vol.old"
pass "a crash command that replaces the directory: the run continues on the new one, nothing left there"
