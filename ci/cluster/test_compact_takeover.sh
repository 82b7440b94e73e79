#!/bin/bash
# ci/cluster/test_compact_takeover.sh — compaction composes with take-over
# (docs/storage.md, "Compaction"): three brokers, a compacted topic whose
# leader's cleaner is slowed to a crawl (log.cleaner.io.max.bytes.per.second)
# so that a pass is seen in progress (its .tmp.clean file); then
#   1. the leader is killed with SIGKILL mid-pass: the new leader's cleaner
#      carries on (it swaps a clean.json of its own epoch) and leaves no
#      file of the dead pass behind;
#   2. the next leader is stopped (SIGSTOP) mid-pass until another broker
#      takes the partition over and cleans, then continued: the stale
#      leader never swaps its clean.json in (the epoch fence and the lease
#      guard) and logs no clean of the partition after it resumed;
# and consumers (confluent-kafka, kafka-python) reading from offset 0 see
# the latest acknowledged value of every key; the cleaner's metrics count
# the passes and report the partition's dirty ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh cluster-compact-takeover
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }
S=$T/latest.json
D=$T/data/cc/0
H=ci/cluster/compact_takeover.py

cluster_start "$T/data" 3 --override log.cleaner.backoff.ms=200 \
	--override log.cleaner.io.max.bytes.per.second=150000 \
	--override log.cleaner.dedupe.buffer.size=1048576 \
	--override metrics.listen=127.0.0.1:0 || fail_cl "starting three brokers"
$PY $H create "$CL_BOOT" || fail_cl "creating the topic"

leader() { # "<broker> <epoch>" as a live broker answers
	local i
	for i in 1 2 3; do
		cluster_alive "$i" && $PY $H leader "${CL_PORT[$i]}" 2>/dev/null && return
	done
	echo "? ?"
}
# "<broker> <epoch>" once a live broker names a leader (a broker that has
# not yet seen the new topic answers "?"), up to 30 s.
wait_leader() {
	local l e
	for _ in $(seq 1 300); do
		read -r l e < <(leader)
		[[ "$l" =~ ^[123]$ ]] && { echo "$l $e"; return 0; }
		sleep 0.1
	done
	echo "? ?"
}
clean_epoch() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["epoch"])' "$D/clean.json" 2>/dev/null || echo -1; }
# Waits until the partition is led by a live broker other than $1.
moved_from() {
	local l e
	for _ in $(seq 1 300); do
		read -r l e < <(leader)
		if [[ "$l" =~ ^[123]$ ]] && [ "$l" != "$1" ] && cluster_alive "$l"; then
			echo "$l $e"
			return 0
		fi
		sleep 0.1
	done
	return 1
}
# Waits for a pass in progress: the cleaner's temp file, which lives for
# a pass's copy phase only (a fraction of a second when little is dirty).
# The poll forks nothing (compgen is a builtin, the nap a read timeout on a
# pipe nobody writes), so a loaded machine cannot stretch its period past
# that window.
mid_pass() {
	local nap end=$((SECONDS + 90))
	exec {nap}<> <(:)
	while [ "$SECONDS" -lt "$end" ]; do
		if compgen -G "$D/.*.tmp.clean" >/dev/null; then exec {nap}>&-; return 0; fi
		read -r -t 0.005 -u "$nap" _ || true
	done
	exec {nap}>&-
	return 1
}
# Waits for broker $1 to log a clean of cc/0 after line $2 of its log.
cleaned_by() {
	for _ in $(seq 1 900); do
		grep -q "cc/0: cleaned \[" <(tail -n +"$2" "${CL_LOG[$1]}") && return 0
		sleep 0.1
	done
	return 1
}

# ---- 1. SIGKILL mid-pass ----------------------------------------------------
# Passes run while the producer writes (each finds new dirty data).
$PY $H produce "$CL_BOOT" 1 "$S" >"$T/round1.log" 2>&1 &
PR=$!
e2e_on_exit "kill $PR 2>/dev/null || true"
read -r L1 E1 < <(wait_leader)
[[ "$L1" =~ ^[123]$ ]] || fail_cl "no leader of cc/0"
mid_pass || fail_cl "broker $L1 started no clean of cc/0"
cluster_kill "$L1"
pass "broker $L1 (epoch $E1) killed with SIGKILL while its cleaner was writing $(ls "$D"/.*.tmp.clean 2>/dev/null | head -1 | xargs -r basename)"
read -r L2 E2 < <(moved_from "$L1") || fail_cl "nobody took cc/0 over from broker $L1"
wait $PR || { cat "$T/round1.log" >&2; fail_cl "round 1's producer"; }
cat "$T/round1.log"
cleaned_by "$L2" 1 || fail_cl "the new leader (broker $L2, epoch $E2) did not clean cc/0"
[ "$(clean_epoch)" = "$E2" ] || fail_cl "clean.json is of epoch $(clean_epoch), want the new leader's $E2"
pass "broker $L2 took cc/0 over at epoch $E2 and its cleaner swapped clean.json of epoch $E2"
cluster_launch "$L1" || fail_cl "restarting broker $L1"
$PY $H check "$CL_BOOT" "$S" || fail_cl "reading after the kill"

# ---- 2. SIGSTOP mid-pass, continued after another broker cleaned ------------
read -r L2 E2 < <(wait_leader)
$PY $H produce "$CL_BOOT" 2 "$S" >"$T/round2.log" 2>&1 &
PR=$!
e2e_on_exit "kill $PR 2>/dev/null || true"
mid_pass || fail_cl "broker $L2 started no second clean of cc/0"
cluster_stop_sig "$L2" STOP
pass "broker $L2 (epoch $E2) stopped with SIGSTOP mid-pass"
read -r L3 E3 < <(moved_from "$L2") || { cluster_stop_sig "$L2" CONT; fail_cl "nobody took cc/0 over from the stopped broker $L2"; }
wait $PR || { cluster_stop_sig "$L2" CONT; cat "$T/round2.log" >&2; fail_cl "round 2's producer"; }
cat "$T/round2.log"
cleaned_by "$L3" 1 || { cluster_stop_sig "$L2" CONT; fail_cl "broker $L3 (epoch $E3) did not clean cc/0"; }
[ "$(clean_epoch)" = "$E3" ] || { cluster_stop_sig "$L2" CONT; fail_cl "clean.json of epoch $(clean_epoch), want $E3"; }
GEN3=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["generation"])' "$D/clean.json")
MARK=$(( $(wc -l < "${CL_LOG[$L2]}") + 1 ))
cluster_stop_sig "$L2" CONT
pass "broker $L3 took over at epoch $E3 and cleaned; broker $L2 continued"
# The stale pass had most of its throttled I/O still to do: give it time to
# reach its swap, while the new leader keeps taking writes.
$PY $H produce "$CL_BOOT" 3 "$S" || fail_cl "round 3"
sleep 5
if tail -n +"$MARK" "${CL_LOG[$L2]}" | grep "cc/0: cleaned \["; then
	fail_cl "broker $L2 swapped a clean of cc/0 in after it lost the partition"
fi
E_NOW=$(clean_epoch)
[ "$E_NOW" -ge "$E3" ] || fail_cl "clean.json went back to epoch $E_NOW (the stale leader's $E2?)"
read -r LN EN < <(wait_leader)
[ "$E_NOW" = "$EN" ] || [ "$E_NOW" = "$E3" ] || fail_cl "clean.json of epoch $E_NOW, neither $E3 nor the leader's $EN"
pass "broker $L2 resumed and swapped nothing: clean.json is of epoch $E_NOW (generation $GEN3 or later)"
# A broker continued after its lease ran out gives it up and exits to start
# again as a new incarnation; one that stays up refuses its pass's swap
# (the lease guard or the epoch fence; kaas/storage/test/test_clean_fence.c
# drives each of them deterministically).
if cluster_alive "$L2"; then
	grep -q "cc/0: clean pass of generation [0-9]* not swapped in" <(tail -n +"$MARK" "${CL_LOG[$L2]}") ||
		fail_cl "broker $L2 is still up and logged no refused swap of its stale pass"
	pass "broker $L2 stayed up; its stale pass was refused: $(tail -n +"$MARK" "${CL_LOG[$L2]}" | grep -o 'not swapped in: .*' | head -1)"
else
	grep -q "gives up leadership" <(tail -n +"$MARK" "${CL_LOG[$L2]}") ||
		fail_cl "broker $L2 exited without giving up its leadership"
	pass "broker $L2 gave up its leadership on resuming and exited (to start again as a new incarnation)"
fi

# ---- the result -------------------------------------------------------------
$PY $H check "$CL_BOOT" "$S" || fail_cl "reading after the stop"
for f in "$D"/*; do
	case $(basename "$f") in *.tmp.*) fail_cl "temp file left: $f" ;; esac
done
# Every cleaned file is named by clean.json; no plain segment below its
# clean_end is left (the dead and the stale passes left nothing behind).
$PY - "$D" <<'PYEOF' || fail_cl "files left in $D"
import json, os, re, sys
d = sys.argv[1]
c = json.load(open(os.path.join(d, "clean.json")))
named = {"%010d-%020d.c%020d" % (e, b, c["generation"]) for e, b in c["segments"]}
for n in sorted(os.listdir(d)):
    m = re.match(r"^(\d{10})-(\d{20})(\.c\d{20})?\.(log|index|timeindex)$", n)
    if not m:
        continue
    if m.group(3):
        assert n.rsplit(".", 1)[0] in named, "%s: not named by clean.json" % n
    else:
        assert int(m.group(2)) >= c["clean_end"], "%s: below clean_end %d" % (n, c["clean_end"])
print("ok %s: every cleaned file is named by clean.json, nothing below clean_end left" % d)
PYEOF
# Metrics of the partition's leader.
read -r LN EN < <(wait_leader)
MURL=$(grep -o 'serving http://127.0.0.1:[0-9]*' "${CL_LOG[$LN]}" | tail -1 | sed 's/serving //')
curl -fsS "$MURL/metrics" >"$T/metrics.txt" || fail_cl "scraping $MURL"
$PY - "$T/metrics.txt" <<'PYEOF' || fail_cl "cleaner metrics"
import re, sys
m = {}
for line in open(sys.argv[1]):
    if line.startswith("kaas_cleaner"):
        k, v = line.rsplit(" ", 1)
        m[k] = float(v)
assert m.get("kaas_cleaner_passes_total", 0) >= 1, m
assert m.get('kaas_cleaner_bytes_total{direction="read"}', 0) > 0, m
assert m.get('kaas_cleaner_bytes_total{direction="written"}', 0) > 0, m
assert m.get("kaas_cleaner_records_removed_total", 0) > 0, m
assert "kaas_cleaner_errors_total" in m and "kaas_cleaner_last_pass_seconds" in m, m
r = [v for k, v in m.items() if k.startswith("kaas_cleaner_dirty_ratio{") and 'topic="cc"' in k]
assert len(r) == 1 and 0 <= r[0] <= 1, m
print("ok the leader's cleaner metrics: %d passes, %d bytes read, %d records removed, dirty ratio %.3f"
      % (m["kaas_cleaner_passes_total"], m['kaas_cleaner_bytes_total{direction="read"}'],
         m["kaas_cleaner_records_removed_total"], r[0]))
PYEOF
echo "PASS ci/cluster/test_compact_takeover.sh"
