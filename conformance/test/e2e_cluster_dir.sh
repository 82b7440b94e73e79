#!/bin/bash
# e2e_cluster_dir.sh — a cluster directory on another volume than the data is
# qualified too.  On tmpfs it is REFUSED by kaas-conform (preflight names the
# cluster directory, no stamp), and the broker refuses to start (exit 78)
# when its stamp does not qualify that directory: a stamp written for the
# data volume alone, or one whose cluster directory was another volume.  On
# disk it passes, the stamp records it, and the broker starts.
source "$(dirname "$0")/lib.sh"
source "$ROOT/ci/lib/broker.sh"
KAAS="$BINDIR/kaas"
[ -x "$KAAS" ] || fail "missing $KAAS (build first)"

ram=$(newdir ram)
mount -t tmpfs -o size=16m "kc-e2e-cl-$$" "$ram"
CLEANUPS+=("umount '$ram'")

mkdir "$ram/cluster"
BIN=$BINDIR
# kaas-conform: the cluster directory on tmpfs is REFUSED, no stamp.
vol=$(newdir vol)
expect_rc 3 "$KC" check "$vol" --cluster-dir "$ram/cluster" --stamp --iterations 20 --json t.json --no-progress
validate t.json
"$PY" - t.json <<'PY' || fail "the report does not refuse the cluster directory"
import json, sys
r = json.load(open(sys.argv[1]))
pf = r["checks"][0]
assert pf["name"] == "preflight" and pf["verdict"] == "REFUSED", (pf["name"], pf["verdict"])
assert pf["summary"].startswith("the cluster directory:"), pf["summary"]
cd = r["cluster_dir"]
assert cd["verdict"] == "REFUSED" and cd["same_volume"] is False and cd["fstype"] == "tmpfs", cd
assert any(i.get("role") == "cluster-dir" for i in pf["profile"]["identities"]), pf["profile"]["identities"]
PY
grep -q "no stamp written: the verdict is REFUSED" out || fail "no word about the stamp: $(cat out)"
[ ! -e "$ram/cluster/qualification.json" ] || fail "a stamp was written into a refused cluster directory"
pass "kaas-conform: a cluster directory on tmpfs is REFUSED, naming it, and gets no stamp"

# On disk (another directory of the data's filesystem): PASS, recorded.
disk=$(newdir diskcluster)
expect_rc 0 "$KC" check "$vol" --cluster-dir "$disk" --stamp --iterations 20 --json d.json --no-progress
validate d.json
[ "$(jget "$disk/qualification.json" "r['cluster_dir']['volume_key'] == r['volume']['volume_key']")" = True ] ||
	fail "the stamp does not record the cluster directory: $(cat "$disk/qualification.json")"

# The broker.  Qualified stamps, copied where the broker is pointed, must
# still be refused for a tmpfs cluster directory.
BROKER_QUALIFIED=1
brk() { # brk WANT DATA CLUSTER: the broker's exit status within a few seconds
	local rc=0
	timeout 10 "$KAAS" --data "$2" --cluster-dir "$3" --listen 127.0.0.1:0 >"$WORK/bout" 2>"$WORK/berr" </dev/null || rc=$?
	[ "$rc" = "$1" ] || { cat "$WORK/berr"; fail "kaas --data $2 --cluster-dir $3: exit $rc, expected $1"; }
}
# (a) the stamp of a run without --cluster-dir: qualifies the data volume only
vol2=$(newdir vol2)
expect_rc 0 "$KC" check "$vol2" --stamp --iterations 20 --no-progress --json "$WORK/cluster-dir-report.json"
mkdir -p "$ram/c1"
cp "$vol2/__cluster/qualification.json" "$ram/c1/"
brk 78 "$vol2" "$ram/c1"
grep -q "refusing to start: the cluster directory $ram/c1 is not qualified (the cluster directory is on volume 'tmpfs:fsid:.*', not on the data volume, and the stamp does not qualify it)" "$WORK/berr" ||
	fail "broker message: $(cat "$WORK/berr")"
grep -q "kaas-conform check $vol2 --cluster-dir $ram/c1 --stamp" "$WORK/berr" || fail "no command to run: $(cat "$WORK/berr")"
# (b) the stamp that qualified a cluster directory on disk, copied to tmpfs
mkdir -p "$ram/c2"
cp "$disk/qualification.json" "$ram/c2/"
brk 78 "$vol" "$ram/c2"
grep -q "the stamp qualifies a cluster directory on volume '.*', this one is on 'tmpfs:fsid:" "$WORK/berr" ||
	fail "broker message: $(cat "$WORK/berr")"
pass "the broker refuses (exit 78) a tmpfs cluster directory its stamp does not qualify"

# (c) on disk: the broker starts.
BROKER_LOG="$WORK/broker.log" broker_start "$vol" --cluster-dir "$disk"
grep -q "the data volume has a passing qualification stamp" "$WORK/broker.log" || fail "gate: $(cat "$WORK/broker.log")"
broker_stop
pass "a qualified cluster directory on disk: the broker starts"
