#!/bin/bash
# ci/cluster/test_nfs_cut.sh — the realistic topology, and a broker cut off
# from the volume while it leads partitions under load.
#
#   hub netns:  bridge brc 10.97.0.1 (the clients: producers, consumers, checks)
#               bridge brs            (the storage network, no address)
#   ganesha netns (substrates/nfs-ganesha/start.sh)   10.96.0.2 on brs
#   broker netns i = 1..3: 10.96.0.1i on brs (to the server, veth s<i>)
#                          10.97.0.1i on brc (to the clients, veth c<i>)
#
# Each broker is its own libnfs client of the one server (--data
# nfs://10.96.0.2/..., no mount), in a network namespace of its own, so no
# two brokers share a client cache or a host identity (the same-host token
# probe cannot prove anything across them: only the lease can).  Idempotent
# acks=all producers write many partitions (ci/chaos/workload.py) while the
# storage link of the broker leading the most partitions is cut (its veth
# taken down in the hub) for longer than the session timeout; its client
# link stays up, so its clients reach it until it gives up — it could
# answer, and it must not acknowledge.  Then the link comes back.  Asserted: the
# others take its partitions over while it is cut (a bystander that gave up
# its own lease meanwhile, because the whole host stalled past the session
# timeout, is restarted as a supervisor would and must then take them over);
# it exits 76 (lease
# lapsed) or 77 (watchdog) and starts again cleanly as a new incarnation;
# ci/chaos/checker.py finds every acknowledged record exactly once and in
# order, and no read of a record the log does not hold; at the end every
# namespace, veth, ganesha and rpcbind process and mount is gone (the
# teardown runs on failure too).  Done twice: the second cut takes the
# controller.  NFS_VERSION=4 runs it over NFSv4.0 (default 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh cluster-nfscut
source ci/lib/cluster.sh
fail_cl() { cluster_logs 30; fail "$@"; }
[ "$(id -u)" = 0 ] || fail "needs root (network namespaces)"
VER=${NFS_VERSION:-3}
PARTS=12
SESSION=3000
H=$T/history.jsonl
: >"$H"

source ci/lib/nfstopo.sh
WL=
GANESHA_PID=
RPCBIND_PID=
stop_wl() { [ -n "$WL" ] && { kill "$WL" 2>/dev/null; wait "$WL" 2>/dev/null; WL=; }; return 0; }
hub() { nt_hub "$@"; }

# ---- topology (ci/lib/nfstopo.sh) ------------------------------------------------------
NT_PREFIX=kaascut nfstopo_up 3 "$T/g" || fail "the NFS topology"
e2e_on_exit stop_wl
GANESHA_PID=$(sed -n 's/^ganesha_pid=//p' "$T/g/state" | tail -1)
RPCBIND_PID=$(sed -n 's/^rpcbind_pid=//p' "$T/g/state" | tail -1)
[ -n "$GANESHA_PID" ] && [ -n "$RPCBIND_PID" ] || fail "no ganesha/rpcbind pid in $T/g/state"
TAGS=("$NT_HUB" "${NT_NS[@]:1}" "$NFS_NS")
URL=$NT_URL
echo "ok topology: ganesha in $NFS_NS, three broker namespaces, storage and client networks apart; $URL"

# ---- three brokers, a topic, the workload ----------------------------------------------
cluster_start "$URL" 3 --override broker.session.timeout.ms=$SESSION || fail_cl "starting three brokers over NFS"
hub $PY ci/chaos/workload.py create "$CL_BOOT" chaos "$PARTS" || fail_cl "creating the topic"
hub $PY ci/chaos/workload.py run "$CL_BOOT" chaos "$H" --seconds 70 --partitions "$PARTS" \
	--producers 3 --consumers 1 --seed 11 >"$T/workload.log" 2>&1 &
WL=$!
ev() { $PY ci/chaos/workload.py event "$H" "$@"; }

# leaders I: the leader of every partition as broker I answers Metadata.
leaders() {
	hub $PY - "${CL_HOST[$1]}" "${CL_PORT[$1]}" <<'EOF2' 2>/dev/null || echo "?"
import sys
sys.path.insert(0, "ci/lib")
from kcluster import metadata
m = metadata(int(sys.argv[2]), ["chaos"], host=sys.argv[1])
err, parts = m["topics"]["chaos"]
print("c%d" % m["controller"], " ".join(str(p[1]) if p[0] == 0 else "-1" for p in parts))
EOF2
}
# moved_once VICTIM: asks each other broker once; prints that Metadata and
# succeeds when one shows every partition on a live leader other than
# VICTIM and a controller other than VICTIM; otherwise prints what each
# answered (or why it did not) and fails.
moved_once() {
	local i peers=()
	for i in 1 2 3; do [ "$i" = "$1" ] || peers+=("$i=${CL_HOST[$i]}:${CL_PORT[$i]}"); done
	hub $PY - "$1" "${peers[@]}" <<'EOF2'
import sys
sys.path.insert(0, "ci/lib")
from kcluster import metadata
victim = int(sys.argv[1])
last = {}
for a in sys.argv[2:]:
    bid, (host, port) = a.split("=")[0], a.split("=")[1].rsplit(":", 1)
    try:
        m = metadata(int(port), ["chaos"], host=host)
        err, parts = m["topics"]["chaos"]
        seen = (m["controller"], [p[1] if p[0] == 0 else -1 for p in parts])
        last[bid] = seen
        if err == 0 and parts and all(l not in (-1, victim) for l in seen[1]) and seen[0] not in (-1, victim):
            print("c%d" % seen[0], " ".join(map(str, seen[1])), "(as broker %s answers)" % bid)
            sys.exit(0)
    except Exception as e:
        last[bid] = repr(e)
print("not moved; last seen:", "; ".join("broker %s: %s" % kv for kv in sorted(last.items())))
sys.exit(1)
EOF2
}
# wait_moved VICTIM DEADLINE_S: moved_once until it succeeds or the
# deadline passes; what it printed last is in $moved.  A broker other than
# VICTIM that gave up its leadership meanwhile (a host that stalls past the
# session timeout lapses every lease on it, as designed) is started again as
# its supervisor would, so the take-over is still asserted; dying any other
# way fails.  Not in a subshell: a restarted broker is this shell's child.
wait_moved() {
	local i end=$(($(date +%s) + $2))
	while :; do
		moved=$(moved_once "$1") && return 0
		[ "$(date +%s)" -lt "$end" ] || return 1
		for i in 1 2 3; do
			[ "$i" = "$1" ] || cluster_revive "$i" || { moved+="; broker $i died"; return 1; }
		done
		sleep 0.2
	done
}
sleep 5
kill -0 "$WL" 2>/dev/null || { cat "$T/workload.log" >&2; fail_cl "the workload died before the first cut"; }

for round in 0 1; do
	l=$(leaders 1)
	[ "$l" != "?" ] || l=$(leaders 2)
	ctl=${l%% *}; ctl=${ctl#c}
	if [ "$round" = 0 ]; then
		# the broker leading the most partitions that is not the controller
		victim=$(tr ' ' '\n' <<<"${l#* }" | grep -vx -- "$ctl" | grep -x '[123]' | sort | uniq -c | sort -rn | awk 'NR==1{print $2}')
	else
		victim=$ctl
	fi
	[[ "$victim" =~ ^[123]$ ]] || fail_cl "no broker to cut (Metadata: $l)"
	nled=$(tr ' ' '\n' <<<"${l#* }" | grep -cx -- "$victim" || true)
	[ "$nled" -gt 0 ] || fail_cl "broker $victim leads nothing to cut (Metadata: $l)"
	ev fault kind=cut n="$round" broker="$victim" phase=start
	nt_cut "$victim"
	t0=$(date +%s.%N)
	wait_moved "$victim" 60 || {
		nt_uncut "$victim"
		alive=
		for i in 1 2 3; do
			if cluster_alive "$i"; then alive+=" $i:running"; else
				rc=0; [ -z "${CL_PID[$i]:-}" ] || wait "${CL_PID[$i]}" || rc=$?
				alive+=" $i:exited($rc)"
			fi
		done
		fail_cl "broker $victim's partitions were not taken over while it was cut off ($moved; brokers:$alive)"
	}
	tm=$(echo "$(date +%s.%N) - $t0" | bc)
	echo "ok round $round: broker $victim (leading $nled of $PARTS$([ "$victim" = "$ctl" ] && echo ", the controller")) cut off; taken over after ${tm} s (session $SESSION ms): $moved"
	# The client link is up: the cut broker still hears its clients.
	if hub timeout 5 $PY -c 'import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3)' \
		"${CL_HOST[$victim]}" "${CL_PORT[$victim]}" 2>/dev/null; then
		echo "ok round $round: broker $victim still accepts client connections while cut off"
	fi
	# Keep the cut well past the session timeout, then heal it.
	while [ "$(echo "$(date +%s.%N) - $t0 < 2 * $SESSION / 1000 + 2" | bc)" = 1 ]; do sleep 0.2; done
	nt_uncut "$victim"
	ev fault kind=cut n="$round" phase=end
	rc=
	for _ in $(seq 1 900); do
		cluster_alive "$victim" || { rc=0; wait "${CL_PID[$victim]}" || rc=$?; break; }
		sleep 0.1
	done
	[ -n "$rc" ] || fail_cl "broker $victim kept running 90 s after its path came back, with its lease lapsed"
	[ "$rc" = 76 ] || [ "$rc" = 77 ] || fail_cl "broker $victim exited $rc, not 76/77 (lease lapsed / watchdog)"
	why=$(grep -o "gives up leadership: [^;]*" "${CL_LOG[$victim]}" | tail -1)
	[ -n "$why" ] || fail_cl "no reason in broker $victim's log"
	echo "ok round $round: broker $victim exited ($rc): $why"
	CL_PID[$victim]=
	cluster_launch "$victim" || fail_cl "restarting broker $victim in its namespace"
	echo "ok round $round: broker $victim back as a new incarnation ($(leaders "$victim"))"
	sleep 4
	# A broker that was not cut may have given up too (its watchdog fires on
	# an fsync slower than kaas.cluster.stall.timeout.ms, which a loaded
	# machine can produce): that is safe by design; it comes back as a new
	# incarnation, as under a supervisor.  Dying any other way fails.
	for i in 1 2 3; do cluster_revive "$i" || fail_cl "broker $i is not running after round $round"; done
done
ev heal
wait "$WL" || { WL=; cat "$T/workload.log" >&2; fail_cl "the workload failed"; }
WL=
for i in 1 2 3; do cluster_revive "$i" || fail_cl "broker $i is not running at the end"; done
_cl_boot
hub $PY ci/chaos/workload.py final "$CL_BOOT" chaos "$H" --partitions "$PARTS" || fail_cl "reading every partition back"
python3 ci/chaos/checker.py "$H" --bound-s 40 --json "$T/verdict.json" || fail_cl "the checker found violations"
acked=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["acknowledged"])' "$T/verdict.json")
[ "$acked" -gt 0 ] || fail_cl "nothing was acknowledged"
python3 ci/cluster/failover_gaps.py "$H" || true

# ---- teardown, checked -----------------------------------------------------------------
stop_wl
nfstopo_down
left=$(ip netns list | grep -F -e "${TAGS[0]}" -e "${TAGS[1]}" -e "${TAGS[2]}" -e "${TAGS[3]}" -e "${TAGS[4]}" || true)
[ -z "$left" ] || fail "namespaces left behind: $left"
# running: the process exists and is not a zombie (ganesha and rpcbind
# were started by setsid: init reaps them, in its own time).
running() { local st; st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1); [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]; }
for p in "$GANESHA_PID" "$RPCBIND_PID" "${CL_PID[@]}"; do
	[ -n "$p" ] || continue
	for _ in $(seq 1 100); do running "$p" || break; sleep 0.1; done
	! running "$p" || fail "process $p ($(cat /proc/"$p"/comm 2>/dev/null)) still runs"
done
! grep -qF "$T" /proc/self/mountinfo || fail "a mount under $T is left: $(grep -F "$T" /proc/self/mountinfo)"
ip -o link | grep -qE "kaascut|(^| )(s[123]|c[123]|vg)@" && fail "a veth is left in the host namespace"
echo "ok teardown: no namespace, veth, ganesha, rpcbind or broker process, no mount left"
echo "PASS test_nfs_cut: 2 storage-link cuts past the session timeout over NFSv$VER, $acked acknowledged records all served"
