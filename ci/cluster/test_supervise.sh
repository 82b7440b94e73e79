#!/bin/bash
# ci/cluster/test_supervise.sh — the fast path across hosts: brokers under
# `kaas supervise`, each in a network namespace of its own with its own
# libnfs client of one nfs-ganesha (ci/lib/nfstopo.sh), so no same-host
# token probe can prove anything between them: only a supervisor can.
#
# Under idempotent acks=all producers (ci/chaos/workload.py):
#   1. kill -9 of the broker leading the most partitions.  Its supervisor
#      exits 137 after writing brokers/<id>-<inc>-<nonce>.gone ("by":
#      "supervisor", "killed by signal 9"); the survivors log that
#      incarnation gone "by supervisor" — a line they only write for a peer
#      they still judged alive, i.e. before any session-timeout verdict —
#      and take its partitions over (a survivor that gave up on a slow
#      fsync meanwhile and restarted is excused; the other is not);
#      restarted, its next incarnation finds the predecessor certified
#      instead of waiting it out.
#   2. SIGSTOP of a supervised leader: no certificate for it while it is
#      stopped (its child lives), none of the survivors calls it gone, and
#      its partitions still move (by the lease); after SIGCONT it exits
#      76/77 and only then is it certified.
#   3. kill -9 of a supervisor alone: its broker runs on (its heartbeat
#      keeps moving), and no certificate appears, neither then nor after
#      that orphan is drained and exits, since no supervisor saw it end.
# Then ci/chaos/checker.py finds every acknowledged record exactly once and
# in order.  NFS_VERSION=4 runs it over NFSv4.0 (default 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh cluster-supervise
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }
[ "$(id -u)" = 0 ] || fail "needs root (network namespaces)"
VER=${NFS_VERSION:-3}
PARTS=9
SESSION=6000
H=$T/history.jsonl
: >"$H"
rm -f "$H.stop"

source ci/lib/nfstopo.sh
WL=
stop_wl() { [ -n "$WL" ] && { touch "$H.stop"; wait "$WL" 2>/dev/null; WL=; }; return 0; }
hub() { nt_hub "$@"; }

NT_PREFIX=kaassup nfstopo_up 3 "$T/g" || fail "the NFS topology"
e2e_on_exit stop_wl
CL_SUPERVISE=1
cluster_start "$NT_URL" 3 --override broker.session.timeout.ms=$SESSION || fail_cl "starting three supervised brokers over NFS"
BR=$NT_EXPORT/cl/__cluster/brokers
[ -f "$BR/1.json" ] || fail_cl "no heartbeat file at $BR/1.json"
for i in 1 2 3; do
	b=$(cluster_bpid "$i") || fail_cl "no broker process under supervisor $i"
	[ "$b" != "${CL_PID[i]}" ] || fail "broker $i is not a child of its supervisor"
	grep -q "supervise: broker $i (pid $b) is incarnation" "${CL_LOG[i]}" || fail_cl "broker $i did not report its incarnation"
done
echo "ok: three brokers, each under kaas supervise in its own namespace, reported their incarnations; $NT_URL"

hub $PY ci/chaos/workload.py create "$CL_BOOT" chaos "$PARTS" || fail_cl "creating the topic"
hub $PY ci/chaos/workload.py run "$CL_BOOT" chaos "$H" --seconds 0 --partitions "$PARTS" \
	--producers 3 --consumers 1 --seed 5 >"$T/workload.log" 2>&1 &
WL=$!
ev() { $PY ci/chaos/workload.py event "$H" "$@"; }

# inc I: "<incarnation> <incarnation hex> <nonce hex> <seq>" from brokers/I.json
inc() {
	python3 - "$BR/$1.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(d["incarnation"], "%016x" % d["incarnation"], d["nonce"], d["seq"])
EOF
}
cert() { echo "$BR/$1-$2-$3.gone"; } # id inc-hex nonce-hex
# lead: the broker leading the most partitions, as a live broker's Metadata says
cat >"$T/lead.py" <<'EOF'
import collections, sys
sys.path.insert(0, "ci/lib")
from kcluster import metadata
m = metadata(int(sys.argv[2]), ["chaos"], host=sys.argv[1])
err, parts = m["topics"]["chaos"]
c = collections.Counter(p[1] for p in parts if p[0] == 0 and p[1] in (1, 2, 3))
assert c
print(c.most_common(1)[0][0])
EOF
lead() {
	local i
	for i in 1 2 3; do
		cluster_alive "$i" || continue
		hub $PY "$T/lead.py" "${CL_HOST[i]}" "${CL_PORT[i]}" 2>/dev/null && return 0
	done
	return 1
}
# wait_moved VICTIM DEADLINE_S: until another broker's Metadata shows no
# partition on VICTIM (or leaderless) and a controller other than VICTIM.
wait_moved() {
	local i peers=()
	for i in 1 2 3; do [ "$i" = "$1" ] || peers+=("${CL_HOST[$i]}:${CL_PORT[$i]}"); done
	hub $PY - "$1" "$2" "${peers[@]}" <<'EOF'
import sys, time
sys.path.insert(0, "ci/lib")
from kcluster import metadata
victim, deadline = int(sys.argv[1]), time.monotonic() + float(sys.argv[2])
peers = [a.rsplit(":", 1) for a in sys.argv[3:]]
n, last = 0, None
while time.monotonic() < deadline:
    host, port = peers[n % len(peers)]
    n += 1
    try:
        m = metadata(int(port), ["chaos"], host=host)
        err, parts = m["topics"]["chaos"]
        lead = [p[1] if p[0] == 0 else -1 for p in parts]
        last = (m["controller"], lead)
        if err == 0 and parts and all(l not in (-1, victim) for l in lead) and m["controller"] not in (-1, victim):
            print("c%d" % m["controller"], " ".join(map(str, lead)))
            sys.exit(0)
    except Exception as e:
        last = repr(e)
    time.sleep(0.2)
print("not moved; last seen:", last)
sys.exit(1)
EOF
}
lines() { wc -l <"${CL_LOG[$1]}"; }
sleep 4
kill -0 "$WL" 2>/dev/null || { cat "$T/workload.log" >&2; fail_cl "the workload died"; }

# ---- 1. kill -9 of a supervised leader ----------------------------------------------
v=$(lead) || fail_cl "no leader found"
read -r VINC VHEX VNONCE _ < <(inc "$v")
C=$(cert "$v" "$VHEX" "$VNONCE")
declare -a at
for i in 1 2 3; do at[i]=$(lines "$i"); done
ev fault kind=kill9 n=0 broker="$v" phase=start
cluster_kill "$v"
ev fault kind=kill9 n=0 broker="$v" phase=end
[ "${CL_RC[v]}" = 137 ] || fail_cl "broker $v's supervisor exited ${CL_RC[v]}, not 137 (the broker's kill -9)"
[ -f "$C" ] || fail_cl "no certificate $C after the supervisor ended"
grep -q '"by":"supervisor"' "$C" && grep -q 'killed by signal 9' "$C" || fail_cl "certificate $C says $(cat "$C")"
grep -q "supervise: broker $v incarnation $VINC (pid [0-9]*) killed by signal 9; certifying it gone" <(tail -n +"${at[v]}" "${CL_LOG[v]}") ||
	fail_cl "broker $v's supervisor did not log the kill"
moved=$(wait_moved "$v" 30) || fail_cl "broker $v's partitions were not taken over: $moved"
took=0
for i in 1 2 3; do
	[ "$i" = "$v" ] && continue
	# The certificate is an exclusive create and then its contents: a peer
	# that reads it in between takes the name as the proof (it is) and logs
	# its writer as "?".  Who wrote it is checked on the file itself above.
	if grep -q -E "broker $v incarnation $VINC is gone \(exit certificate by (supervisor: killed by signal 9|\?)\)" \
		<(tail -n +"${at[i]}" "${CL_LOG[i]}"); then
		took=$((took + 1))
		continue
	fi
	# A survivor that gave up meanwhile (its watchdog on a slow fsync, 77,
	# or a host stall past its lease, 76) and restarted under its
	# supervisor never saw broker $v alive to call it gone; the other must.
	grep -q -E "supervise: broker $i incarnation [0-9]+ \(pid [0-9]+\) exited 7[67];" <(tail -n +"${at[i]}" "${CL_LOG[i]}") ||
		fail_cl "broker $i did not take broker $v's incarnation $VINC as certified gone by its supervisor"
	echo "note: broker $i gave up and restarted meanwhile: $(grep -o "gives up leadership: [^;]*" <(tail -n +"${at[i]}" "${CL_LOG[i]}") | tail -1)"
done
[ "$took" -ge 1 ] || fail_cl "no survivor took broker $v's incarnation $VINC as certified gone by its supervisor"
echo "ok 1: kill -9 of broker $v (leader): $(basename "$C") by its supervisor, $took survivor(s) took it as gone by supervisor, partitions moved: $moved"
cluster_launch "$v" || fail_cl "restarting broker $v"
grep -q "the previous incarnation $VINC is gone (exit certificate by supervisor" <(tail -n +"${at[v]}" "${CL_LOG[v]}") ||
	fail_cl "broker $v's next incarnation did not find its predecessor certified"
# Ready means it watched for a session: it has removed its id's older certificates.
[ ! -e "$C" ] || fail_cl "broker $v's new incarnation left its predecessor's certificate $C"
echo "ok 1: broker $v back; its new incarnation found the predecessor certified, did not wait it out, and removed the certificate once settled"
sleep 3

# ---- 2. SIGSTOP of a supervised leader: the lease, and no certificate ------------------
v=$(lead) || fail_cl "no leader found"
read -r VINC VHEX VNONCE _ < <(inc "$v")
C=$(cert "$v" "$VHEX" "$VNONCE")
for i in 1 2 3; do at[i]=$(lines "$i"); done
ev fault kind=stop n=1 broker="$v" phase=start
cluster_stop_sig "$v" STOP
moved=$(wait_moved "$v" 60) || { cluster_stop_sig "$v" CONT; fail_cl "broker $v's partitions did not move while it was stopped: $moved"; }
sleep 1
[ ! -e "$C" ] || { cluster_stop_sig "$v" CONT; fail_cl "a certificate $C exists while broker $v is only stopped: $(cat "$C")"; }
cluster_alive "$v" || fail_cl "broker $v's supervisor ended while its broker was stopped"
for i in 1 2 3; do
	[ "$i" = "$v" ] && continue
	! grep -q "broker $v incarnation $VINC is gone" <(tail -n +"${at[i]}" "${CL_LOG[i]}") ||
		{ cluster_stop_sig "$v" CONT; fail_cl "broker $i took the stopped broker $v as gone"; }
done
echo "ok 2: broker $v stopped: no certificate, nobody called it gone; its partitions moved by the lease: $moved"
cluster_stop_sig "$v" CONT
ev fault kind=stop n=1 broker="$v" phase=end
for _ in $(seq 1 300); do cluster_alive "$v" || break; sleep 0.1; done
! cluster_alive "$v" || fail_cl "broker $v runs on 30 s after SIGCONT with its lease lapsed"
ctext=$(cat "$C") || fail_cl "no certificate $C after broker $v exited"
cluster_revive "$v" || fail_cl "broker $v did not give up with 76/77 after its pause"
echo "ok 2: after SIGCONT broker $v gave up ($(grep -o "gives up leadership: [^;]*" "${CL_LOG[v]}" | tail -1)); certified then: $ctext"
sleep 3

# ---- 3. a supervisor killed: its broker runs on, nobody certifies it -------------------
w=$(( v % 3 + 1 ))
# A bystander may have given up meanwhile (its watchdog on a slow fsync) and
# be restarting under its supervisor: the step needs a running incarnation.
cluster_sup_ready "$w" || fail_cl "broker $w's supervisor runs no ready broker"
read -r WINC WHEX WNONCE WSEQ < <(inc "$w")
C=$(cert "$w" "$WHEX" "$WNONCE")
cluster_kill_supervisor "$w"
orphan=${CL_ORPHAN[w]}
[ -n "$orphan" ] || fail_cl "no broker process under broker $w's supervisor"
sleep 2
kill -0 "$orphan" 2>/dev/null || fail_cl "broker $w died with its supervisor"
read -r winc _ _ wseq < <(inc "$w")
[ "$winc" = "$WINC" ] && [ "$wseq" -gt "$WSEQ" ] || fail_cl "broker $w's heartbeat stopped after its supervisor was killed ($WINC/$WSEQ -> $winc/$wseq)"
[ ! -e "$C" ] || fail_cl "a certificate $C exists for a broker that runs"
echo "ok 3: broker $w's supervisor killed: broker $w runs on (heartbeat $WSEQ -> $wseq), no certificate"
kill -TERM "$orphan"
for _ in $(seq 1 300); do kill -0 "$orphan" 2>/dev/null || break; sleep 0.1; done
! kill -0 "$orphan" 2>/dev/null || fail_cl "the orphaned broker $w did not drain and exit"
CL_ORPHAN[w]=
sleep 1
[ ! -e "$C" ] || fail_cl "a certificate $C appeared though no supervisor saw broker $w end: $(cat "$C")"
grep -q '"state":"stopped"' "$BR/$w.json" || fail_cl "broker $w did not stop cleanly: $(cat "$BR/$w.json")"
echo "ok 3: the orphan drained and stopped; still no certificate for it"
cluster_launch "$w" || fail_cl "restarting broker $w"

# ---- the history ----------------------------------------------------------------------
sleep 4
touch "$H.stop"
wait "$WL" || { WL=; cat "$T/workload.log" >&2; fail_cl "the workload failed"; }
WL=
for i in 1 2 3; do cluster_revive "$i" || fail_cl "broker $i is not running at the end"; done
_cl_boot
hub $PY ci/chaos/workload.py final "$CL_BOOT" chaos "$H" --partitions "$PARTS" || fail_cl "reading every partition back"
python3 ci/chaos/checker.py "$H" --bound-s 40 --json "$T/verdict.json" || fail_cl "the checker found violations"
acked=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["acknowledged"])' "$T/verdict.json")
[ "$acked" -gt 0 ] || fail_cl "nothing was acknowledged"
echo "PASS test_supervise: kill -9 certified by the supervisor across namespaces over NFSv$VER, SIGSTOP and a killed supervisor certified nothing, $acked acknowledged records all served"
