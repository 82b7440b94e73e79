#!/bin/bash
# ci/run-default.sh — the job `make run` runs on its embedded default: qualify
# a local directory (./var/data) with kaas-conform and print the verdict.  On
# PASS the qualification stamp lands in ./var/data/__cluster, where the broker
# looks for it; the JSON report is kept in ./var.  Then start the broker on
# that volume at 127.0.0.1:9092 (Ctrl-C stops it cleanly).
#
# KAAS_RUN_DIR (default ./var) and KAAS_RUN_LISTEN (default 127.0.0.1:9092)
# move the job elsewhere; ci/broker/test_make_run.sh uses them.
#
# KAAS_RUN_BROKERS=N (make run BROKERS=N) starts a cluster instead: brokers
# 1..N on the same directory, on consecutive ports from KAAS_RUN_LISTEN's,
# logging to DIR/broker-<i>.log, each under `kaas supervise --restart` (the
# role a container runtime or systemd plays in production).  A broker that
# exits asking to be started again (75 superseded, 76 lease lapsed, 77
# stalled) or is killed (kill -9, a crash) is certified gone by its
# supervisor at once — its partitions move without waiting out its lease —
# and started again as a new incarnation.  SIGTERM to a supervisor drains
# its broker and stops both (start it again with the command printed).
# Ctrl-C drains and stops them all.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(cd "${BIN:-bin}" && pwd)
dir=${KAAS_RUN_DIR:-./var}
listen=${KAAS_RUN_LISTEN:-127.0.0.1:9092}
mkdir -p "$dir/data"
"$BIN/kaas-conform" check "$dir/data" --actors 4 --stamp --json "$dir/kaas-conform-report.json"
n=${KAAS_RUN_BROKERS:-1}
if [ -n "$n" ] && [ "$n" -gt 1 ] 2>/dev/null; then
	host=${listen%:*}
	base=${listen##*:}
	declare -a pids
	cmd() { echo "$BIN/kaas supervise --restart -- --data $dir/data --listen $host:$((base + $1 - 1)) --broker-id $1"; }
	start_one() {
		# shellcheck disable=SC2046 # cmd prints a word list
		$(cmd "$1") >>"$dir/broker-$1.log" 2>&1 &
		pids[$1]=$!
	}
	# The broker's own pid: its supervisor's child (forked at once).
	child() { local c; for _ in $(seq 1 100); do c=$(pgrep -P "$1" | head -1) && [ -n "$c" ] && { echo "$c"; return; }; sleep 0.05; done; echo "?"; }
	for i in $(seq 1 "$n"); do start_one "$i"; done
	boot=$(for i in $(seq 1 "$n"); do printf '%s%s:%d' "$([ "$i" = 1 ] || echo ,)" "$host" $((base + i - 1)); done)
	cat <<HINT

Started a kaas cluster of $n brokers on one directory ($dir/data), each under
kaas supervise --restart; Ctrl-C stops them all.
  bootstrap: $boot
$(for i in $(seq 1 "$n"); do printf '  broker %d: %s:%d  pid %s (supervisor %d)  log %s\n' "$i" "$host" $((base + i - 1)) "$(child "${pids[$i]}")" "${pids[$i]}" "$dir/broker-$i.log"; done)
In another terminal:
  produce:  seq 1 100 | kcat -b $boot -P -t demo -X acks=all
  consume:  kcat -b $boot -C -t demo -o beginning -e -f '%p %o %s\n'
  leaders:  kcat -b $boot -L
  crash one (certified gone by its supervisor: its partitions move in well under a
    second, and it comes back as a new incarnation, its new pid in its log):
    kill -9 <pid>
  drain one (SIGTERM to the supervisor: partitions handed over, then both exit):
    kill <supervisor pid>
  start broker i again:  $(cmd i | sed 's/broker-id i$/broker-id <i>/; s/:[0-9]* --broker-id/:<port> --broker-id/')

HINT
	stop=0
	# Ctrl-C reaches every supervisor and broker of the terminal's process
	# group by itself (a broker takes a second signal as "stop now", and a
	# supervisor does not pass on what the terminal sent); SIGTERM to this
	# script is passed to the supervisors, which pass it to their brokers.
	trap 'stop=1' INT
	trap 'stop=1; for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done' TERM
	while :; do
		alive=0
		for i in $(seq 1 "$n"); do
			p=${pids[$i]:-}
			[ -n "$p" ] || continue
			if kill -0 "$p" 2>/dev/null; then
				alive=$((alive + 1))
				continue
			fi
			rc=0
			wait "$p" 2>/dev/null || rc=$?
			pids[$i]=
			[ "$stop" = 0 ] && echo "broker $i and its supervisor exited $rc; start it again with: $(cmd "$i")"
		done
		[ "$stop" = 1 ] && [ "$alive" = 0 ] && exit 0
		sleep 0.5
	done
fi

cat <<HINT

Starting the kaas broker on $listen (data in $dir/data; Ctrl-C stops it).
In another terminal:
  produce:  seq 1 10 | kcat -b $listen -P -t demo -X acks=all
  keyed:    printf 'k1:hello\\nk2:world\\n' | kcat -b $listen -P -t demo -K:
  consume:  kcat -b $listen -C -t demo -o beginning -e -f '%k %s (offset %o)\\n'
  metadata: kcat -b $listen -L

HINT
exec "$BIN/kaas" --data "$dir/data" --listen "$listen"
