#!/usr/bin/env bash
# ci/chaos/campaign.sh — a seeded fault campaign against a running 3-broker
# cluster, judged by the history checker (docs/reliability.md).
#
#   CHAOS_SEED=7 CHAOS_FAULTS=200 CHAOS_TOPOLOGY=nfs bash ci/chaos/campaign.sh [OUT_DIR]
#
# CHAOS_TOPOLOGY
#   local  three brokers on one local directory (the default);
#   nfs    one nfs-ganesha holding the data (an ext4 export on a loop device,
#          so that it can fill), a second one holding the cluster directory,
#          and each broker in a network namespace of its own with its own
#          libnfs client, storage and client networks apart (ci/lib/nfstopo.sh).
# Real clients (ci/chaos/workload.py) run all along: idempotent acks=all
# producers over CHAOS_PARTITIONS partitions, assign() consumers, a consumer
# group committing, topic create/delete churn.  The nemesis injects
# CHAOS_FAULTS faults from ci/chaos/schedule.py (the seed alone fixes it),
# then CHAOS_ISOLATED rounds of kill9, controller, stop and cut alone:
#   kill9       kill -9 of a broker, started again at once
#   stop        SIGSTOP of a broker, SIGCONT after the hold
#   controller  kill -9 of the controller (found from Metadata), started again
#   rolling     SIGTERM of every broker in turn, each started again and ready
#               before the next
#   cut         (nfs) a broker's storage link down for the hold
#   lossy       (nfs) a share of a broker's packets to the server dropped
#               (nftables in its namespace) for the hold
#   server      (nfs) the data server killed -9, started again after the hold
#   full        (nfs) the data export filled to the last block, freed after
#               the hold
#   clusterdir  (nfs) the cluster-directory server frozen (SIGSTOP) for the hold
# CHAOS_SUPERVISE=1 (the default on nfs, where brokers share no host and
# only a supervisor can prove one dead) runs every broker under `kaas
# supervise` (ci/lib/cluster.sh CL_SUPERVISE): a kill9 or controller fault
# kills the broker, its supervisor certifies it gone, and its peers take
# over without waiting out its lease; stop faults SIGSTOP the broker, not
# the supervisor.
# A fault that lasts runs on a timer of its own, so faults overlap.  A broker
# that exits (lease lapsed after a pause, refused to start while the volume
# was away) is started again and its exit recorded.  After the last fault
# every broker is made ready, a "heal" line is written, the clients go on for
# CHAOS_TAIL_S, a fresh consumer reads every partition back and
# ci/chaos/checker.py judges the history; ci/chaos/report.py draws the plot
# and the tables into OUT_DIR (default: a scratch directory, removed).
# A violation fails the campaign with the seed and the replay command.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh chaos
source ci/lib/cluster.sh

SEED=${CHAOS_SEED:-1}
FAULTS=${CHAOS_FAULTS:-40}
TOPO=${CHAOS_TOPOLOGY:-local}
PARTS=${CHAOS_PARTITIONS:-12}
SESSION=${CHAOS_SESSION_MS:-3000}
BOUND=${CHAOS_BOUND_S:-20}
TAIL=${CHAOS_TAIL_S:-15}
GAP=${CHAOS_MEAN_GAP_S:-4}
ISO=${CHAOS_ISOLATED:-0}
OUT=${1:-$T/out}
case $TOPO in
local) KINDS=${CHAOS_KINDS:-kill9,stop,controller,rolling} ;;
nfs) KINDS=${CHAOS_KINDS:-kill9,stop,controller,rolling,cut,lossy,server,full,clusterdir} ;;
*) fail "CHAOS_TOPOLOGY must be local or nfs" ;;
esac
SUP=${CHAOS_SUPERVISE:-$([ "$TOPO" = nfs ] && echo 1 || echo 0)}
CL_SUPERVISE=$SUP
REPLAY="CHAOS_SEED=$SEED CHAOS_FAULTS=$FAULTS CHAOS_TOPOLOGY=$TOPO CHAOS_PARTITIONS=$PARTS CHAOS_MEAN_GAP_S=$GAP CHAOS_ISOLATED=$ISO CHAOS_KINDS=$KINDS CHAOS_SUPERVISE=$SUP bash ci/chaos/campaign.sh"
echo "campaign: seed $SEED, $FAULTS faults ($KINDS), topology $TOPO; replay: $REPLAY"
mkdir -p "$OUT"
H=$T/history.jsonl
SCHED=$OUT/schedule.txt
: >"$H"
rm -f "$H.stop"
fail_cl() { cluster_logs 30; fail "$* (seed $SEED; replay: $REPLAY)"; }

# The schedule first, from the seed alone, so a replay injects the same faults.
python3 ci/chaos/schedule.py --seed "$SEED" --faults "$FAULTS" --kinds "$KINDS" --mean-gap "$GAP" \
	--isolated "$ISO" >"$SCHED"
NSCHED=$(wc -l <"$SCHED")

CLI=()
ARGS=(--override "broker.session.timeout.ms=$SESSION")
DATA=$T/data
if [ "$TOPO" = nfs ]; then
	[ "$(id -u)" = 0 ] || fail "the nfs topology needs root (network namespaces)"
	source ci/lib/nfstopo.sh
	NT_PREFIX=kaaschaos NT_CLUSTER_EXPORT=1 NFS_EXPORT_ON=loop nfstopo_up 3 "$T/g" || fail "the NFS topology"
	CLI=(ip netns exec "$NT_HUB")
	DATA=$NT_URL
	ARGS+=(--cluster-dir "$NT_CLURL")
	echo "campaign: data on $NT_URL (ext4 on a loop device), cluster directory on $NT_CLURL, brokers in namespaces ${NT_NS[*]:1}"
fi

JOBS=()
stop_jobs() {
	local j
	for j in "${JOBS[@]}"; do kill "$j" 2>/dev/null; done
	for j in "${JOBS[@]}"; do wait "$j" 2>/dev/null; done
	JOBS=()
	for j in 1 2 3; do [ -n "${CL_PID[j]:-}" ] && cluster_stop_sig "$j" CONT; done
	return 0
}
WL=
stop_wl() { [ -n "$WL" ] && { kill "$WL" 2>/dev/null; wait "$WL" 2>/dev/null; WL=; }; return 0; }
e2e_on_exit 'cp "$T"/b*.log "$OUT"/ 2>/dev/null; true'
e2e_on_exit stop_wl
e2e_on_exit stop_jobs

cluster_start "$DATA" 3 "${ARGS[@]}" || fail_cl "starting three brokers"
# pid-<i>: the broker's own process (under a supervisor, its child), for SIGSTOP
for i in 1 2 3; do cluster_bpid "$i" >"$T/pid-$i" || echo "${CL_PID[i]}" >"$T/pid-$i"; done
"${CLI[@]}" $PY ci/chaos/workload.py create "$CL_BOOT" chaos "$PARTS" || fail_cl "creating the topic"

# History lines from the shell (the nemesis and its background jobs), on
# the workload's clock (CLOCK_MONOTONIC): one writer process stamps every
# line it reads from a FIFO, so a fault costs no interpreter start-up.
# Writes of one short line to a FIFO are atomic.
mkfifo "$T/ev.fifo"
python3 -S -u -c '
import json, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
src = os.fdopen(os.open(sys.argv[2], os.O_RDWR), "r")   # O_RDWR: never an EOF
for line in src:
    w = line.split()
    if not w:
        continue
    if w[0] == "quit":
        break
    op = {"f": w[0], "t": time.monotonic(), "wall": time.time()}
    for a in w[1:]:
        k, _, v = a.partition("=")
        op[k] = int(v) if v.lstrip("-").isdigit() else v
    os.write(fd, (json.dumps(op, sort_keys=True) + "\n").encode())
' "$H" "$T/ev.fifo" &
EVW=$!
e2e_on_exit 'kill $EVW 2>/dev/null; true'
ev() { echo "$*" >"$T/ev.fifo"; }
ev_sync() { # the writer has written everything before this line
	local m=sync-$RANDOM$RANDOM
	ev mark id="$m"
	for _ in $(seq 1 100); do grep -q "\"$m\"" "$H" && return 0; sleep 0.05; done
}

"${CLI[@]}" $PY ci/chaos/workload.py run "$CL_BOOT" chaos "$H" --seconds 0 --partitions "$PARTS" \
	--producers 3 --consumers 1 --members 2 --group chaos-g --churn 1 --interval 0.02 --seed "$SEED" \
	>"$OUT/workload.log" 2>&1 &
WL=$!
sleep 5

# ---- the nemesis -----------------------------------------------------------------------
# A broker that is not running is started again (and its exit recorded);
# one whose start is under way is left alone.
respawn() { # respawn i why
	local i=$1
	cluster_spawn "$i"
	cluster_bpid "$i" >"$T/pid-$i" || echo "${CL_PID[i]}" >"$T/pid-$i"
	ev broker broker="$i" what=spawn why="$2" pid="${CL_PID[i]}"
}
reap() {
	local i rc
	for i in 1 2 3; do
		[ -n "${CL_PID[i]:-}" ] || { respawn "$i" absent; continue; }
		kill -0 "${CL_PID[i]}" 2>/dev/null && continue
		rc=0
		wait "${CL_PID[i]}" || rc=$?
		ev broker broker="$i" what=exit rc="$rc" pid="${CL_PID[i]}"
		echo "$(date +%T) broker $i exited $rc; started again" >>"$OUT/nemesis.log"
		# A broker may give up (76 lease lapsed, 77 watchdog) or refuse to
		# start while its volume is away (1, 2); a signal is a crash.
		[ "$rc" -lt 128 ] || echo "$rc $i" >>"$T/odd-exits"
		CL_PID[i]=
		sleep 0.2
		respawn "$i" "exit-$rc"
	done
}
controller() { # the controller as a live broker's Metadata names it, or -1
	local i
	for i in 1 2 3; do
		cluster_alive "$i" || continue
		"${CLI[@]}" timeout 5 $PY - "${CL_HOST[i]:-127.0.0.1}" "${CL_PORT[i]}" <<'EOF' 2>/dev/null && return 0
import sys
sys.path.insert(0, "ci/lib")
from kcluster import metadata
c = metadata(int(sys.argv[2]), ["chaos"], host=sys.argv[1])["controller"]
print(c)
sys.exit(0 if c in (1, 2, 3) else 1)
EOF
	done
	echo -1
}
lock() { until mkdir "$T/lock-$1" 2>/dev/null; do sleep 0.1; done; }
unlock() { rmdir "$T/lock-$1" 2>/dev/null; true; }
# A fault that lasts, on its own timer (a background job): start, hold, end.
lasting() { # n kind target hold param
	local n=$1 kind=$2 tg=$3 hold=$4 param=$5 key pid
	# A job runs to its end whatever fails (a SIGCONT to a broker killed
	# meanwhile, say): the fault is always undone and its lock released.
	set +e
	case $kind in stop) key=stop-$tg ;; cut | lossy) key=link-$tg ;; *) key=$kind ;; esac
	lock "$key"
	trap 'unlock "$key"' EXIT
	case $kind in
	stop)
		pid=$(cat "$T/pid-$tg")
		ev fault kind=stop n="$n" broker="$tg" phase=start
		kill -STOP "$pid" 2>/dev/null
		sleep "$hold"
		kill -CONT "$pid" 2>/dev/null
		;;
	cut)
		ev fault kind=cut n="$n" broker="$tg" phase=start
		nt_cut "$tg"
		sleep "$hold"
		nt_uncut "$tg"
		;;
	lossy)
		ev fault kind=lossy n="$n" broker="$tg" loss="$param" phase=start
		nt_lossy "$tg" "$param"
		sleep "$hold"
		nt_unlossy "$tg"
		;;
	server)
		ev fault kind=server n="$n" phase=start
		nt_server_kill
		sleep "$hold"
		nt_server_start >>"$OUT/nemesis.log" 2>&1 || { sleep 1; nt_server_start >>"$OUT/nemesis.log" 2>&1; } ||
			echo "server $n: ganesha did not start again" >>"$T/nemesis-errors"
		;;
	full)
		ev fault kind=full n="$n" phase=start
		local avail
		avail=$(df --output=avail -B1 "$NT_EXPORT" | tail -1 | tr -d ' ')
		fallocate -l "$avail" "$NT_EXPORT/filler" 2>/dev/null || true
		dd if=/dev/zero of="$NT_EXPORT/filler2" bs=4k status=none 2>/dev/null || true
		ev fault kind=full n="$n" phase=filled avail_kib="$(df --output=avail -k "$NT_EXPORT" | tail -1 | tr -d ' ')"
		sleep "$hold"
		rm -f "$NT_EXPORT/filler" "$NT_EXPORT/filler2"
		;;
	clusterdir)
		ev fault kind=clusterdir n="$n" phase=start
		nt_server_pause "$NT_CLDIR"
		sleep "$hold"
		nt_server_resume "$NT_CLDIR"
		;;
	esac
	ev fault kind="$kind" n="$n" phase=end
}

start=$(date +%s.%N)
while read -r n at kind tg hold param; do
	if [ "$n" -ge "$FAULTS" ]; then
		# an isolated fault: the ones before it over, then 12 s to settle
		for j in "${JOBS[@]}"; do wait "$j" || true; done
		JOBS=()
		settle=$(( $(date +%s) + 12 ))
		while [ "$(date +%s)" -lt "$settle" ]; do reap; sleep 0.2; done
		start=$(echo "$(date +%s.%N) - $at" | bc)
	fi
	# until the planned time, keep every broker running
	while :; do
		reap
		[ "$(echo "$(date +%s.%N) - $start < $at" | bc)" = 1 ] || break
		sleep 0.2
	done
	kill -0 "$WL" 2>/dev/null || { cat "$OUT/workload.log" >&2; fail_cl "the workload died before fault $n"; }
	echo "$(date +%T) fault $n: $kind $tg hold=$hold param=$param" >>"$OUT/nemesis.log"
	case $kind in
	kill9)
		ev fault kind=kill9 n="$n" broker="$tg" phase=start
		cluster_kill "$tg"
		respawn "$tg" kill9
		ev fault kind=kill9 n="$n" broker="$tg" phase=end
		;;
	controller)
		c=$(controller)
		if [[ "$c" =~ ^[123]$ ]]; then
			ev fault kind=controller n="$n" broker="$c" phase=start
			cluster_kill "$c"
			respawn "$c" controller
			ev fault kind=controller n="$n" broker="$c" phase=end
		else
			ev fault kind=controller n="$n" phase=skipped why=no-controller
			echo "$(date +%T) fault $n: no controller to kill" >>"$OUT/nemesis.log"
		fi
		;;
	rolling)
		ev fault kind=rolling n="$n" phase=start
		for i in 1 2 3; do
			reap
			ev fault kind=rolling n="$n" broker="$i" phase=term
			cluster_term "$i"
			ev broker broker="$i" what=exit rc="${CL_RC[i]}" why=sigterm
			# 143: the SIGTERM came before the broker installed its handler
		# (it was still starting); any other signal is a crash.
		[ "${CL_RC[i]}" -lt 128 ] || [ "${CL_RC[i]}" = 143 ] || echo "${CL_RC[i]} $i sigterm" >>"$T/odd-exits"
			respawn "$i" rolling
			if cluster_wait_ready "$i" 2>>"$OUT/nemesis.log"; then
				ev broker broker="$i" what=ready
			else
				echo "$(date +%T) rolling $n: broker $i not ready" >>"$OUT/nemesis.log"
			fi
		done
		ev fault kind=rolling n="$n" phase=end
		;;
	*)
		lasting "$n" "$kind" "$tg" "$hold" "$param" &
		JOBS+=($!)
		;;
	esac
done <"$SCHED"
for j in "${JOBS[@]}"; do wait "$j" || true; done
JOBS=()
t_faults=$(echo "$(date +%s.%N) - $start" | bc)

# ---- heal: every broker running and ready ----------------------------------------------
all_ready() { # every broker running and ready (started again if it is not)
	local ok i
	for _ in $(seq 1 5); do
		reap
		ok=1
		for i in 1 2 3; do
			if ! grep -q 'cluster: ready' <(tail -n +"${CL_START[i]:-1}" "${CL_LOG[i]}"); then
				cluster_wait_ready "$i" 2>>"$OUT/nemesis.log" || ok=
			fi
		done
		[ -n "$ok" ] && return 0
	done
	return 1
}
for i in 1 2 3; do cluster_stop_sig "$i" CONT; done
all_ready || fail_cl "the brokers did not all become ready after the last fault"
ev heal
ev_sync
echo "campaign: $NSCHED faults in ${t_faults%.*} s (seed $SEED); every broker ready; clients run on for $TAIL s"
# No fault any more; a broker that exits now is recorded (after the heal
# line) and started again, and the checker judges the availability bound.
t_end=$(( $(date +%s) + TAIL ))
while [ "$(date +%s)" -lt "$t_end" ]; do reap; sleep 0.2; done
touch "$H.stop"
wait "$WL" || { WL=; cat "$OUT/workload.log" >&2; fail_cl "the workload failed"; }
WL=
all_ready || fail_cl "the brokers did not all become ready for the final read"
_cl_boot
"${CLI[@]}" $PY ci/chaos/workload.py final "$CL_BOOT" chaos "$H" --partitions "$PARTS" --group chaos-g ||
	fail_cl "reading every partition back"
ev_sync
cp "$T"/b*.log "$OUT"/ 2>/dev/null || true
verdict=0
python3 ci/chaos/checker.py "$H" --bound-s "$BOUND" --json "$OUT/verdict.json" --json-max 300 >"$OUT/checker.txt" || verdict=$?
cat "$OUT/checker.txt"
python3 ci/chaos/report.py "$H" --out "$OUT" --verdict "$OUT/verdict.json" --schedule "$SCHED" \
	--logs "$OUT" --session-ms "$SESSION" --replay "$REPLAY" --topology "$TOPO" || fail "the report"
gzip -c "$H" >"$OUT/history.jsonl.gz"
if [ "$verdict" != 0 ]; then
	# the partitions' files, for the post-mortem (ci/chaos/batches.py reads them)
	root=$T/data
	[ "$TOPO" = nfs ] && root=$NT_EXPORT/cl
	mkdir -p "$OUT/data"
	for d in "$root"/chaos*; do [ -d "$d" ] && cp -a "$d" "$OUT/data/"; done
fi
[ "$verdict" = 0 ] || fail "the checker found violations (seed $SEED; replay: $REPLAY)"
[ ! -s "$T/nemesis-errors" ] || fail "the nemesis failed: $(cat "$T/nemesis-errors")"
! grep -q '"f": "committed".*"type": "fail"' "$H" ||
	fail "the group's coordinator did not answer for its committed offsets within 90 s of the end (seed $SEED; replay: $REPLAY)"
[ ! -s "$T/odd-exits" ] || fail_cl "brokers exited in an unexpected way (rc broker): $(tr '\n' ';' <"$T/odd-exits")"
acked=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"]["acknowledged"])' "$OUT/verdict.json")
[ "$acked" -gt 0 ] || fail "nothing was acknowledged: the campaign tested nothing"
if [ "$SUP" = 1 ]; then
	# How the kills were proven: by the supervisors' certificates (peers'
	# log lines), against the lease for everything else.
	ncert=$(cat "$T"/b*.log | grep -c "is gone (exit certificate by supervisor" || true)
	echo "campaign: supervised brokers; peers took $ncert end(s) of an incarnation as certified by its supervisor"
fi
echo "PASS ci/chaos/campaign.sh: $NSCHED faults ($TOPO), $acked acknowledged records, no violation (seed $SEED)"
