#!/bin/bash
# ci/cluster/test_full_data.sh — the data volume full, the cluster directory
# on a filesystem of its own.
#
# Three brokers keep their partitions on a small ext4 image (a loop device,
# substrates/loop-ext4) and their cluster directory (--cluster-dir:
# heartbeats, controller claims, assignments, group offsets, the topic
# registry) on another filesystem.  Idempotent acks=all producers and
# assign() consumers run all along (ci/chaos/workload.py; no consumer group:
# every broker still coordinates the groups it is asked about, so a group
# whose members reach different brokers is not consistent yet — see
# docs/cluster.md).  Then the data filesystem is filled to the last block.
# While it is full:
#   * a real client (librdkafka, no retries) producing to the topic gets
#     KAFKA_STORAGE_ERROR, and nothing it sends is acknowledged;
#   * every broker's heartbeat keeps moving and none crashes;
#   * the controller is killed (kill -9): another is elected and assigns
#     the dead broker's partitions to the living (who cannot take them over
#     until there is space, and keep trying);
#   * consumer-group offset commits (one client, one coordinator) succeed
#     and read back.
# All topics share the one data volume, so no topic can carry on producing;
# instead, once the space is freed, produce recovers on every partition
# without a restart of the brokers that stayed up (the poisoned partitions
# are taken over again, Rule 2).  ci/chaos/checker.py then finds every
# acknowledged record exactly once and in order, and every partition
# acknowledging again within its bound after the heal.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh cluster-full
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }
[ "$(id -u)" = 0 ] || fail "needs root (a loop device)"
PARTS=6
H=$T/history.jsonl
: >"$H"
WL=
TOPPER=
stop_topper() { [ -n "$TOPPER" ] && { kill "$TOPPER" 2>/dev/null; wait "$TOPPER" 2>/dev/null || true; TOPPER=; }; return 0; }
stop_wl() { [ -n "$WL" ] && { kill "$WL" 2>/dev/null; wait "$WL" 2>/dev/null || true; WL=; }; return 0; }

e2e_on_exit 'substrates/loop-ext4/stop.sh "$T/disk" >/dev/null 2>&1'
mkdir -p "$T/disk"
eval "$(LOOP_SIZE_MB=48 substrates/loop-ext4/start.sh "$T/disk" 2>"$T/disk.err")" ||
	{ cat "$T/disk.err" >&2; fail "the loop-mounted ext4 data filesystem"; }
e2e_on_exit stop_wl
e2e_on_exit cluster_cleanup
e2e_on_exit stop_topper
DATA=$SUB_URL
CLDIR=$T/cluster
mkdir -p "$CLDIR"
[ "$(stat -c %d "$DATA")" != "$(stat -c %d "$CLDIR")" ] || fail "data and cluster directory share a filesystem"
echo "ok data on $SUB_INFO; cluster directory on $(stat -f -c %T "$CLDIR") ($(df --output=source "$CLDIR" | tail -1))"

cluster_start "$DATA" 3 --cluster-dir "$CLDIR" --override broker.session.timeout.ms=3000 ||
	fail_cl "starting three brokers"
[ -z "$(ls "$DATA/__cluster" 2>/dev/null)" ] || fail_cl "cluster files on the data volume: $(ls "$DATA/__cluster")"
$PY - "$CL_BOOT" "$PARTS" <<'EOF2' || fail_cl "creating the topic"
import sys
from confluent_kafka.admin import AdminClient, NewTopic
a = AdminClient({"bootstrap.servers": sys.argv[1]})
for f in a.create_topics([NewTopic(t, int(sys.argv[2]), 1) for t in ("chaos", "probe")]).values():
    f.result(30)
EOF2
$PY ci/chaos/workload.py run "$CL_BOOT" chaos "$H" --seconds 75 --partitions "$PARTS" \
	--producers 2 --consumers 1 --seed 3 >"$T/workload.log" 2>&1 &
WL=$!
ev() { $PY ci/chaos/workload.py event "$H" "$@"; }
seqs() { # the heartbeat seq of every broker, from the cluster directory
	local i
	for i in 1 2 3; do
		$PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["seq"])' "$CLDIR/brokers/$i.json" 2>/dev/null || echo -1
	done | tr '\n' ' '
}
controller() {
	$PY - "$1" <<'EOF2' 2>/dev/null || echo -1
import sys
sys.path.insert(0, "ci/lib")
from kcluster import metadata
print(metadata(int(sys.argv[1]), ["chaos"])["controller"])
EOF2
}
sleep 6
kill -0 "$WL" 2>/dev/null || { cat "$T/workload.log" >&2; fail_cl "the workload died before the disk filled"; }

# ---- fill the data filesystem ------------------------------------------------------------
ev fault kind=full phase=start
dd if=/dev/zero of="$DATA/../filler" bs=1M status=none 2>/dev/null || true
dd if=/dev/zero of="$DATA/../filler2" bs=4k status=none 2>/dev/null || true
sync -f "$DATA"
avail=$(df --output=avail -k "$DATA" | tail -1 | tr -d ' ')
[ "$avail" -lt 64 ] || fail "the data filesystem still has $avail KiB free"
echo "ok the data filesystem is full ($avail KiB free)"
tfull=$(date +%s)
# Keeps it full: any block freed meanwhile (ext4 giving back a closed
# file's preallocation, a killed broker's reservations) is taken at once.
$PY -c '
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
b = bytes(4096)
while True:
    try:
        os.write(fd, b)
    except OSError:
        time.sleep(0.02)
' "$DATA/../filler3" &
TOPPER=$!
declare -A PID0
for i in 1 2 3; do PID0[$i]=${CL_PID[$i]}; done

# A real client: librdkafka without retries sees KAFKA_STORAGE_ERROR and no
# acknowledgement, on every partition it tries.
$PY - "$CL_BOOT" "$PARTS" <<'EOF2' || fail_cl "produce to the full volume"
import sys, time
from confluent_kafka import Producer, KafkaError
boot, parts = sys.argv[1], int(sys.argv[2])
seen, acked = {}, []
deadline = time.monotonic() + 60
def dr(err, msg):
    if err is None:
        acked.append((msg.partition(), msg.offset()))
    else:
        seen.setdefault(err.name(), 0)
        seen[err.name()] += 1
        if err.code() == KafkaError.KAFKA_STORAGE_ERROR:
            got.add(msg.partition())
got = set()
p = Producer({"bootstrap.servers": boot, "acks": "all", "retries": 0, "enable.idempotence": False,
              "message.timeout.ms": 20000, "linger.ms": 0})
# Every try writes a batch per partition; the first batches may still fit
# in a block that was allocated before the disk filled.
n = 0
while time.monotonic() < deadline and len(got) < parts:
    for part in range(parts):
        p.produce("probe", value=b"x" * 4000, partition=part, on_delivery=dr)
    n += parts
    p.flush(25)
    time.sleep(0.2)
print("produce while full: %d sent, errors %s, KAFKA_STORAGE_ERROR on partitions %s, %d acknowledged"
      % (n, seen, sorted(got), len(acked)))
assert len(got) == parts, "KAFKA_STORAGE_ERROR not seen on every partition"
assert not acked, "acknowledged while the volume was full: %s" % acked
EOF2

# Heartbeats move on while the data volume is full.
s0=$(seqs); sleep 2; s1=$(seqs)
read -r -a A <<<"$s0"; read -r -a B <<<"$s1"
for i in 0 1 2; do
	[ "${A[i]}" -ge 0 ] && [ "${B[i]}" -gt "${A[i]}" ] || fail_cl "broker $((i + 1))'s heartbeat did not move while the data volume was full ($s0 -> $s1)"
done
echo "ok heartbeats move while full: seq $s0-> $s1"

# The controller is killed: another is elected, partitions get leaders.
ctl=$(controller "${CL_PORT[1]}")
[[ "$ctl" =~ ^[123]$ ]] || fail_cl "no controller in Metadata ($ctl)"
other=1; [ "$ctl" = 1 ] && other=2
claims0=$(ls "$CLDIR/controller" | sort | tail -1)
cluster_kill "$ctl"
ev fault kind=kill9 broker="$ctl" phase=start
newctl=
for _ in $(seq 1 300); do
	c=$(controller "${CL_PORT[$other]}")
	if [[ "$c" =~ ^[123]$ ]] && [ "$c" != "$ctl" ]; then newctl=$c; break; fi
	sleep 0.2
done
[ -n "$newctl" ] || fail_cl "no new controller within 60 s after killing controller $ctl while full"
claims1=$(ls "$CLDIR/controller" | sort | tail -1)
[ "$claims1" != "$claims0" ] || fail_cl "no new controller claim ($claims0)"
# The new controller moves the dead broker's partitions in the assignment
# (on the cluster directory); the new leaders cannot take them over until
# there is space (they re-drive it), so Metadata shows them unavailable
# meanwhile — never on the dead broker.
$PY - "${CL_PORT[$other]}" "$ctl" "$CLDIR" <<'EOF2' || fail_cl "partitions of the killed controller not reassigned"
import json, os, sys, time
sys.path.insert(0, "ci/lib")
from kcluster import metadata
port, dead, cl = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
deadline, last = time.monotonic() + 60, None
while time.monotonic() < deadline:
    try:
        ptr = json.load(open(os.path.join(cl, "assignment.json")))
        doc = json.load(open(os.path.join(cl, ptr["document"])))
        leaders = {t["name"]: t["leaders"] for t in doc["topics"]}
        m = metadata(port, ["chaos", "probe"])
        md = {t: [(p[0], p[1]) for p in m["topics"][t][1]] for t in ("chaos", "probe")}
        last = (ptr["controller"], leaders, md)
        if ptr["controller"] != dead and all(l not in (-1, dead) for t in ("chaos", "probe") for l in leaders[t]) \
                and all(l != dead for t in md for _, l in md[t]):
            print("ok assignment by controller %d: %s; Metadata (err, leader): %s" % last)
            sys.exit(0)
    except (OSError, ValueError, KeyError):
        pass
    time.sleep(0.2)
print("last (controller, assignment, Metadata):", last)
sys.exit(1)
EOF2
echo "ok controller $ctl killed while full: broker $newctl elected ($claims0 -> $claims1)"

# Consumer-group offsets are committed and read back while full.
$PY - "$CL_BOOT" "$PARTS" <<'EOF2' || fail_cl "offset commit while full"
import sys, time
from confluent_kafka import Consumer, TopicPartition, KafkaException
boot, parts = sys.argv[1], int(sys.argv[2])
c = Consumer({"bootstrap.servers": boot, "group.id": "full-commits", "enable.auto.commit": False})
want = [TopicPartition("chaos", p, 7 + p) for p in range(parts)]
deadline, err = time.monotonic() + 60, None
while time.monotonic() < deadline:
    try:
        res = c.commit(offsets=want, asynchronous=False)
        if all(r.error is None for r in res):
            got = c.committed([TopicPartition("chaos", p) for p in range(parts)], timeout=20)
            if [g.offset for g in got] == [w.offset for w in want]:
                print("ok offsets committed and read back while full:", [g.offset for g in got])
                sys.exit(0)
            err = "read back %s" % [g.offset for g in got]
        else:
            err = [str(r.error) for r in res]
    except KafkaException as e:
        err = str(e)
    time.sleep(0.5)
print("no successful commit within 60 s:", err)
sys.exit(1)
EOF2
# Full for a while longer: the take-overs keep failing and are re-driven,
# the survivors' heartbeats keep moving.
while [ $(($(date +%s) - tfull)) -lt 20 ]; do sleep 0.5; done
s0=$(seqs); sleep 2; s1=$(seqs)
read -r -a A <<<"$s0"; read -r -a B <<<"$s1"
for i in 1 2 3; do
	[ "$i" = "$ctl" ] && continue
	cluster_alive "$i" || fail_cl "broker $i died while the data volume was full"
	[ "${B[i - 1]}" -gt "${A[i - 1]}" ] || fail_cl "broker $i's heartbeat stopped while the data volume was full ($s0 -> $s1)"
done
avail=$(df --output=avail -k "$DATA" | tail -1 | tr -d ' ')
[ "$avail" -lt 64 ] || fail "the data filesystem did not stay full ($avail KiB free)"
retries=$(cat "$T"/b*.log | grep -c "taking over at epoch .* failed: No space left on device" || true)
[ "$retries" -gt 0 ] || fail_cl "no take-over was re-driven while full"
echo "ok full for $(($(date +%s) - tfull)) s: survivors alive, heartbeats $s0-> $s1, $retries take-over attempts refused by ENOSPC and re-driven"
stop_topper

# ---- free the space ---------------------------------------------------------------------
rm -f "$DATA/../filler" "$DATA/../filler2" "$DATA/../filler3"
sync -f "$DATA"
ev fault kind=full phase=end
echo "ok space freed ($(df --output=avail -k "$DATA" | tail -1 | tr -d ' ') KiB)"
$PY - "$CL_BOOT" "$PARTS" <<'EOF2' || fail_cl "produce did not recover after the space was freed"
import sys, time
from confluent_kafka import Producer
boot, parts = sys.argv[1], int(sys.argv[2])
ok = {}
def dr(err, msg):
    if err is None:
        ok[msg.partition()] = msg.offset()
p = Producer({"bootstrap.servers": boot, "acks": "all", "enable.idempotence": True,
              "message.timeout.ms": 90000, "linger.ms": 0})
for part in range(parts):
    p.produce("probe", value=b"after", partition=part, on_delivery=dr)
p.flush(100)
print("produce after the space returned: acknowledged on partitions", sorted(ok))
assert sorted(ok) == list(range(parts))
EOF2
for i in 1 2 3; do
	[ "$i" = "$ctl" ] && continue
	[ "${CL_PID[$i]}" = "${PID0[$i]}" ] && cluster_alive "$i" || fail_cl "broker $i was restarted or died"
done
echo "ok produce recovered on every partition without restarting brokers $(for i in 1 2 3; do [ "$i" != "$ctl" ] && printf '%s ' "$i"; done)"
cluster_launch "$ctl" || fail_cl "restarting broker $ctl"
ev fault kind=kill9 phase=end
ev heal
wait "$WL" || { WL=; cat "$T/workload.log" >&2; fail_cl "the workload failed"; }
WL=
_cl_boot
for i in 1 2 3; do cluster_alive "$i" || fail_cl "broker $i is not running at the end"; done
grep -l "Segmentation\|AddressSanitizer\|assertion" "$T"/b*.log && fail_cl "a broker crashed"
$PY ci/chaos/workload.py final "$CL_BOOT" chaos "$H" --partitions "$PARTS" || fail_cl "reading every partition back"
python3 ci/chaos/checker.py "$H" --bound-s 40 --json "$T/verdict.json" || fail_cl "the checker found violations"
# Informational: records acknowledged while the volume was full (a record
# may still fit in the unused end of a block a segment already has).
python3 - "$H" <<'EOF2'
import json, sys
ops = [json.loads(l) for l in open(sys.argv[1])]
t = {o.get("phase"): o["t"] for o in ops if o["f"] == "fault" and o.get("kind") == "full"}
n = sum(1 for o in ops if o["f"] == "send" and o.get("type") == "ok" and t["start"] + 1 < o["t"] < t["end"])
print("acknowledged while the data volume was full (from 1 s after the fill): %d of the workload's sends" % n)
EOF2
acked=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["acknowledged"])' "$T/verdict.json")
[ "$acked" -gt 0 ] || fail_cl "nothing was acknowledged"
echo "PASS test_full_data: full data volume, cluster directory apart; $acked acknowledged records all served"
