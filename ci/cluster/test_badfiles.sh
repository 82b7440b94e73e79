#!/bin/bash
# ci/cluster/test_badfiles.sh — cluster files written by "another host" that are
# truncated, of a newer version, or claim impossible values, dropped into a
# running three-broker cluster.  Every broker must log a named refusal,
# keep running, and never act on them: no phantom broker in Metadata, the
# partitions keep their leaders and keep accepting writes, a damaged
# assignment pointer is replaced by the controller, a damaged controller
# claim above the current epoch is waited out and superseded (the
# controller steps down, as it must for a claim that might be a real
# candidate's, and a new one is elected above it).  Complete, well-formed
# claims at the highest epoch a name can hold (and just below it) are
# impossible (docs/cluster.md): refused by name, never followed, so the
# election above the damaged claims still happens and every broker applies
# the new controller's assignment.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh cluster-badfiles
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }
SESSION=4000
cluster_start "$T/data" 3 --override broker.session.timeout.ms=$SESSION || fail_cl "starting three brokers"
C=$T/data/__cluster
$PY - "$CL_BOOT" <<'EOF2' || fail_cl "creating the topic"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1]})
for f in a.create_topics([NewTopic("bad", 3, 1)]).values():
    f.result(30)
EOF2
snap() {
	$PY - "${CL_PORT[1]}" "${CL_PORT[2]}" "${CL_PORT[3]}" <<'EOF2'
import sys
sys.path.insert(0, "ci/lib")
from kcluster import metadata
out = []
for p in sys.argv[1:]:
    m = metadata(int(p), ["bad"])
    out.append("%s|%s" % (",".join(str(b) for b in sorted(m["brokers"])),
                          ",".join("%d" % x[1] for x in m["topics"]["bad"][1])))
print(" ".join(out))
EOF2
}
before=$(snap)
echo "before: $before"
hb=$(cat "$C/brokers/1.json")
# Heartbeats: truncated, newer version, impossible seq, a name that lies.
printf '%s' "${hb:0:60}" >"$C/brokers/9.json"
$PY - "$C/brokers" "$hb" <<'EOF2'
import json, sys
d, hb = sys.argv[1], json.loads(sys.argv[2])
def put(name, **kw):
    h = dict(hb); h.update(kw)
    open("%s/%s" % (d, name), "w").write(json.dumps(h))
put("8.json", id=8, version=99)
put("7.json", id=7, seq=-5)
put("6.json", id=5)
put("4.json", id=4, incarnation=2**60)
EOF2
# Controller claims: one above the current epoch that is cut short (an
# undecided claim), one whose content names another epoch, an 11-digit name.
ce=$(ls "$C/controller" | sed -n 's/^\([0-9]\{10\}\)\.json$/\1/p' | sort | tail -1)
ce=$((10#$ce))
hostile=$((ce + 1))
printf '{"version":1,"epoch":%d,"own' "$hostile" >"$C/controller/$(printf %010d "$hostile").json"
echo '{"version":1,"epoch":3,"owner":9}' >"$C/controller/$(printf %010d $((ce + 2))).json"
echo '{}' >"$C/controller/99999999999.json"
$PY - "$C/controller" <<'EOF2'
import json, sys
for epoch in (9999999999, 9999999998):
    c = {"version": 1, "epoch": epoch, "owner": 9, "incarnation": 5, "incarnation_nonce": "00000000000000aa",
         "nonce": "00000000000000bb", "endpoint": "10.9.9.9:9092", "wall_ms": 0}
    open("%s/%010d.json" % (sys.argv[1], epoch), "w").write(json.dumps(c))
EOF2
# The assignment pointer: a newer version.
cp "$C/assignment.json" "$T/ptr.good"
$PY - "$C/assignment.json" <<'EOF2'
import json, sys
p = json.load(open(sys.argv[1])); p["version"] = 99
open(sys.argv[1], "w").write(json.dumps(p))
EOF2
echo "ok hostile files written (controller epoch was $ce)"

# Writes keep working throughout; the cluster recovers a controller above
# the hostile claims.
$PY - "$CL_BOOT" "$ce" "$C" <<'EOF2' || fail_cl "the cluster under hostile files"
import os, sys, time
sys.path.insert(0, "ci/lib")
from confluent_kafka import Producer
boot, ce, cdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
p = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True,
              "message.timeout.ms": 30000})
errs, n = [], 0
def cb(e, m):
    if e: errs.append(e)
end = time.time() + 12
while time.time() < end:
    for part in range(3):
        p.produce("bad", b"x", partition=part, on_delivery=cb)
        n += 1
    p.poll(0)
    time.sleep(0.05)
p.flush(60)
assert not errs, errs[:3]
print("ok %d acks=all writes acknowledged while the hostile files were there" % n)
import json
best = 0
for f in os.listdir(os.path.join(cdir, "controller")):
    if len(f) == 15 and f.endswith(".json") and int(f[:10]) < 9999999998:
        try:
            c = json.load(open(os.path.join(cdir, "controller", f)))
            if c.get("epoch") == int(f[:10]) and "incarnation" in c:
                best = max(best, c["epoch"])
        except ValueError:
            pass
assert best > ce + 2, (best, ce)
print("ok a controller was elected at epoch %d, above the hostile claims (%d, %d), below the impossible ones"
      % (best, ce + 1, ce + 2))
p = json.load(open(os.path.join(cdir, "assignment.json")))
assert p["controller_epoch"] == best, (p, best)
print("ok the assignment in force is the new controller's (epoch %d)" % best)
open(os.path.join(cdir, "..", "..", "best_epoch"), "w").write(str(best))
EOF2
best=$(cat "$T/best_epoch")
for i in 1 2 3; do
	grep -q "applying assignment epoch $best " "${CL_LOG[$i]}" || fail_cl "broker $i never applied epoch $best's assignment"
done
echo "ok every broker applied the assignment of controller epoch $best"
md_ctl=$($PY -c 'import sys; sys.path.insert(0, "ci/lib"); from kcluster import metadata; print(metadata(int(sys.argv[1]))["controller"])' "${CL_PORT[1]}")
[[ "$md_ctl" =~ ^[123]$ ]] || fail_cl "Metadata names controller '$md_ctl'"
for what in "refusing controller/9999999998.json: epoch 9999999998 is impossible"; do
	grep -q "$what" "$T"/b*.log || fail_cl "no log line '$what'"
	echo "ok logged: $(grep -h -m1 "$what" "$T"/b*.log | head -1 | sed 's/^[^ ]* //' | cut -c1-200)"
done
for i in 1 2 3; do cluster_alive "$i" || fail_cl "broker $i died"; done
after=$(snap)
echo "after:  $after"
for s in $after; do
	[ "${s%%|*}" = "1,2,3" ] || fail_cl "a broker list is not {1,2,3}: $after"
done
[ "$before" = "$after" ] || fail_cl "leaders changed: '$before' -> '$after'"
echo "ok no phantom broker in Metadata, the partitions kept their leaders"
for what in "refusing brokers/9.json" "refusing brokers/8.json" "refusing brokers/7.json" \
	"refusing brokers/6.json" "refusing brokers/4.json" "refusing assignment.json" "refusing controller/"; do
	grep -q "$what" "$T"/b*.log || fail_cl "no log line '$what'"
	echo "ok logged: $(grep -h -m1 "$what" "$T"/b*.log | head -1 | sed 's/^[^ ]* //' | cut -c1-160)"
done
$PY -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["version"] == 1, p' "$C/assignment.json" ||
	fail_cl "the damaged pointer was not replaced"
echo "ok the controller replaced the damaged assignment pointer"
echo "PASS test_badfiles"
