#!/bin/bash
# ci/bench/run.sh — what `make bench` runs: storage engine, read path and
# broker end to end, each as absolute numbers and as a ratio against a limit
# measured in the same run on the same machine (docs/performance.md).
#
# Writes results/bench/<UTC stamp>.md and .json (+ .svg plots when gnuplot
# is installed) and rewrites results/bench/README.md with the latest tables.
#
# Environment:
#   BIN                  directory holding kaas and kaas-conform (default bin)
#   KAAS_BENCH_PROGS     directory holding kaas-bench and kaas-bench-rdk (set
#                        by `make bench`; otherwise built with make bench-progs)
#   KAAS_BENCH_DIR       where the scratch directory goes: the volume being
#                        measured (default ./var; never tmpfs for fsync numbers)
#   KAAS_BENCH_CYCLES    alternation cycles per storage configuration (default 10)
#   KAAS_BENCH_SLICE     seconds per mode per cycle (default 0.15)
#   KAAS_BENCH_SECS      seconds per read/loopback measurement (default 1)
#   KAAS_BENCH_ROUNDS    rounds of the read and loopback measurements (default 3)
#   KAAS_BENCH_E2E_SECS  seconds per broker measurement (default 4)
#   KAAS_BENCH_OUT       results directory (default results/bench)
#   KAAS_BENCH_QUICK=1   a smoke run: fewer configurations, short measurements
#   KAAS_BENCH_COMMIT    the commit measured, when the tree is an export (git
#                        archive) rather than a checkout
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD

: "${BIN:=bin}"
SECS=${KAAS_BENCH_SECS:-1}
ROUNDS=${KAAS_BENCH_ROUNDS:-3}
CYCLES=${KAAS_BENCH_CYCLES:-10}
SLICE=${KAAS_BENCH_SLICE:-0.15}
E2E_SECS=${KAAS_BENCH_E2E_SECS:-4}
OUT=${KAAS_BENCH_OUT:-results/bench}
QUICK=${KAAS_BENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then
	SECS=0.3 ROUNDS=1 CYCLES=2 SLICE=0.1 E2E_SECS=1
fi

if [ -z "${KAAS_BENCH_PROGS:-}" ]; then
	make -s BUILD="${BUILD:-build}" BIN="$BIN" bench-progs all
	KAAS_BENCH_PROGS=${BUILD:-build}/rel/ci/bench
fi
KB=$KAAS_BENCH_PROGS/kaas-bench
KRDK=$KAAS_BENCH_PROGS/kaas-bench-rdk
for f in "$KB" "$KRDK" "$BIN/kaas" "$BIN/kaas-conform"; do
	[ -x "$f" ] || { echo "run.sh: $f is missing (make bench builds it)" >&2; exit 1; }
done
# Plots and instruction counts are optional: without gnuplot or valgrind
# those sections say "skipped".  make bench installed them when it could;
# this script only looks (it also runs under make e2e, which installs nothing).
bash ci/deps.sh --check bench >/dev/null 2>&1 || echo "run.sh: some bench packages are missing (ci/deps.sh bench)" >&2

base=${KAAS_BENCH_DIR:-var}
mkdir -p "$base"
WORK=$(mktemp -d "$base/kaas-bench.XXXXXX")
WORK=$(cd "$WORK" && pwd)
JL=$WORK/results.jsonl
FAILED=0

source ci/lib/broker.sh
cleanup() {
	broker_cleanup
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { printf '%s  %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

# rec STEP ROUND CMD...: runs CMD, tags each JSON line it prints with the
# step and round, appends them to the results; a failure is recorded too.
rec() {
	local step=$1 round=$2 rc=0 out
	shift 2
	out=$("$@" 2>"$WORK/stderr") || rc=$?
	if [ $rc -ne 0 ]; then
		FAILED=1
		log "FAILED ($rc): $*"
		sed 's/^/    /' "$WORK/stderr" | tail -5 >&2
		/usr/bin/python3 -c 'import json,sys; print(json.dumps({"step":sys.argv[1],"round":int(sys.argv[2]),"error":sys.argv[3]}))' \
			"$step" "$round" "exit $rc: $(tail -1 "$WORK/stderr")" >>"$JL"
		return 0
	fi
	[ -z "$out" ] || printf '%s\n' "$out" | sed "s/^{/{\"step\":\"$step\",\"round\":$round,/" >>"$JL"
}

# The value of field F in the last JSON line of step S (for chaining runs).
field() {
	/usr/bin/python3 - "$JL" "$1" "$2" <<'EOF'
import json, sys
val = ""
for line in open(sys.argv[1]):
    if not line.strip():
        continue
    j = json.loads(line)
    if j.get("step") == sys.argv[2] and sys.argv[3] in j:
        val = j[sys.argv[3]]
print(val)
EOF
}

# ---- the machine ---------------------------------------------------------------------
STAMP=$(date -u +%Y%m%d-%H%M%S)
fstype=$(findmnt -n -o FSTYPE -T "$WORK" 2>/dev/null || stat -f -c %T "$WORK")
source_dev=$(df -P "$WORK" | awk 'NR==2 {print $1}')
/usr/bin/python3 - "$JL" "$STAMP" "$fstype" "$source_dev" "$SECS" "$ROUNDS" "$E2E_SECS" "$QUICK" \
	"$CYCLES" "$SLICE" <<'EOF'
import json, os, platform, subprocess, sys
jl, stamp, fstype, dev, secs, rounds, e2e, quick, cycles, slice_ = sys.argv[1:]
def pressure(what):
    """avg10 of 'some' in /proc/pressure/WHAT: % of time tasks waited."""
    try:
        return float(open("/proc/pressure/" + what).readline().split()[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        return None
def sh(*a):
    try:
        return subprocess.run(a, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""
cpu = ""
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
mem = 0
for line in open("/proc/meminfo"):
    if line.startswith("MemTotal"):
        mem = int(line.split()[1]) // 1024
env = {"step": "env", "round": 0, "kind": "env", "stamp": stamp, "fstype": fstype, "device": dev,
       "cpus": os.cpu_count(), "cpu": cpu, "mem_mib": mem, "kernel": platform.release(),
       "load_start": os.getloadavg()[0],
       "commit": os.environ.get("KAAS_BENCH_COMMIT") or sh("git", "rev-parse", "--short", "HEAD"),
       "dirty": not os.environ.get("KAAS_BENCH_COMMIT")
                and bool(sh("git", "status", "--porcelain", "--untracked-files=no")),
       "secs": float(secs), "rounds": int(rounds), "e2e_secs": float(e2e), "quick": quick == "1",
       "cycles": int(cycles), "slice": float(slice_),
       "cpu_pressure_start": pressure("cpu"), "io_pressure_start": pressure("io")}
print(json.dumps(env), file=open(jl, "a"))
EOF
case $fstype in
tmpfs|ramfs) log "WARNING: $WORK is on $fstype: fsync costs nothing there, the storage numbers mean little" ;;
esac
log "bench: scratch $WORK ($fstype on $source_dev)"

# ---- loopback limits (also measured again before the broker runs) ----------------------------
log "net: loopback TCP stream and round trip"
for r in $(seq 1 "$ROUNDS"); do
	rec net "$r" "$KB" net --secs "$SECS" --rtt-count 3000
done

# ---- storage: append + flush against the device -------------------------------------------
# Configurations: appenders partitions records record-size [fsync delay].
# Each is one `kaas-bench compare`: device, bandwidth, naive and gc take
# turns in short slices, so every ratio compares measurements taken moments
# apart.  With a fifth field every fsync (the device loop's and the
# engine's) first waits that many microseconds: a model of a volume whose
# fsync is a round trip away (NFS COMMIT), where fsyncs in flight overlap.
CONFIGS=("1 1 100 1024" "4 1 100 1024" "16 1 100 1024" "4 4 100 1024" "16 4 100 1024"
	"1 1 10 100" "16 1 10 100" "4 1 100 1024 2000" "16 1 10 100 2000")
[ "$QUICK" = 1 ] && CONFIGS=("1 1 100 1024" "4 1 100 1024" "1 1 10 100")
SD=$WORK/storage
mkdir -p "$SD"
for c in "${CONFIGS[@]}"; do
	read -r n m rcount rsize delay <<<"$c"
	delay=${delay:-0}
	cfg="a${n}-p${m}-r${rcount}x${rsize}"
	[ "$delay" = 0 ] || cfg="$cfg-d${delay}"
	log "storage: $n appenders, $m partitions, batches of $rcount x $rsize B, fsync delay $delay us:" \
		"$CYCLES cycles of ${SLICE}s slices"
	rec "compare:$cfg" 0 "$KB" compare --dir "$SD" --appenders "$n" --partitions "$m" --records "$rcount" \
		--record-size "$rsize" --cycles "$CYCLES" --slice "$SLICE" --label "$cfg" --fsync-delay-us "$delay"
done
# The engine without waiting for the device: CPU and page cache only.
log "storage: append without flush (nosync), $ROUNDS rounds"
for r in $(seq 1 "$ROUNDS"); do
	rec "nosync" "$r" "$KB" append --dir "$SD" --mode nosync --count 2000
done

# The CPU cost of a topic's compression.type: lz4 batches of 100 x 1 KiB
# text appended as they are (producer) and recompressed to zstd and gzip,
# taking turns within each round so that each ratio is of one moment.
log "storage: append with recompression (compression.type) vs without, $ROUNDS rounds"
for r in $(seq 1 "$ROUNDS"); do
	for tc in producer zstd gzip; do
		rec "recompress" "$r" "$KB" append --dir "$SD" --mode nosync --count 1000 --codec lz4 --payload text \
			--topic-codec "$tc" --label "recompress-$tc"
	done
done

# ---- storage: read plans -----------------------------------------------------------------
log "read: plans vs raw pread/sendfile, hot and cold cache"
RD=$WORK/read
mkdir -p "$RD"
rsecs=$(/usr/bin/python3 -c "print(max(0.2, $SECS / 2))")
rec read 0 "$KB" read --dir "$RD" --mib "$([ "$QUICK" = 1 ] && echo 32 || echo 128)" --secs "$rsecs" --rounds "$ROUNDS"
rm -rf "$RD"

# ---- broker end to end -----------------------------------------------------------------------
# The loopback limit once more, right before the broker runs it limits.
log "net: loopback TCP stream and round trip, before the broker runs"
for r in $(seq 1 "$ROUNDS"); do
	rec net "$((ROUNDS + r))" "$KB" net --secs "$SECS" --rtt-count 3000
done
# Kernel TLS: whether this kernel has the `tls` upper layer protocol that
# OpenSSL's SSL_sendfile needs (the TLS figures say which path they measured).
/usr/bin/python3 - >>"$JL" <<'EOF'
import errno, json, socket
out = {"step": "ktls", "round": 0, "kind": "ktls"}
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(1)
c = socket.create_connection(l.getsockname())
try:
    c.setsockopt(socket.IPPROTO_TCP, 31, b"tls")  # TCP_ULP
    out.update(available=True, why="setsockopt(TCP_ULP, tls) succeeds")
except OSError as e:
    out.update(available=False, why="setsockopt(TCP_ULP, \"tls\"): %s: the kernel has no TLS upper layer "
               "(CONFIG_TLS unset or the tls module absent)" % errno.errorcode.get(e.errno, e.errno))
print(json.dumps(out))
EOF
log "broker: starting kaas on $WORK/broker (PLAINTEXT, SSL and SASL_SSL listeners)"
# TLS: a CA and a server certificate for the SSL and SASL_SSL listeners (the
# TLS and SASL_SSL figures are ratios to the plaintext ones of the same run).
ci/tls/gen_certs.sh "$WORK/certs" || { echo "run.sh: certificates" >&2; exit 1; }
BROKER_NO_TRAP=1 BROKER_LOG=$WORK/broker.log broker_start "$WORK/broker" \
	--listen "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0" \
	--override "ssl.keystore.location=$WORK/certs/server.keystore.pem" --override sasl.enabled.mechanisms=SCRAM-SHA-256 ||
	{ echo "run.sh: the broker did not start" >&2; exit 1; }
SSL_BROKER=127.0.0.1:$(grep -o 'listener SSL (SSL) on 127.0.0.1:[0-9]*' "$WORK/broker.log" | tail -1 | grep -o '[0-9]*$')
SASL_BROKER=127.0.0.1:$(grep -o 'listener SASL_SSL (SASL_SSL) on 127.0.0.1:[0-9]*' "$WORK/broker.log" | tail -1 |
	grep -o '[0-9]*$')
printf 'bench-pw\n' | "$BIN/kaas" users add --user bench --mechanism SCRAM-SHA-256 --cluster-dir "$WORK/broker/__cluster" \
	>/dev/null || { echo "run.sh: kaas users add" >&2; exit 1; }
T=bench-$STAMP
rec create 0 "$KRDK" create --brokers "$BROKER" --topic "$T" --partitions 1
broker_cpu() { # CPU seconds (user + system) the broker has used so far
	awk -v t="$(getconf CLK_TCK)" '{ print ($14 + $15) / t }' "/proc/$BROKER_PID/stat"
}
# e2e STEP CMD...: rec, plus the broker's CPU time during the step (client
# and broker share this machine's cores).
e2e() {
	local step=$1 c0 c1
	shift
	c0=$(broker_cpu)
	rec "$step" 0 "$@"
	c1=$(broker_cpu)
	echo "{\"step\":\"$step:broker\",\"round\":0,\"kind\":\"broker-cpu\",\"cpu_secs\":$(awk "BEGIN { print $c1 - $c0 }")}" >>"$JL"
}
produce() { # step acks compression [extra flags]
	local step=$1 acks=$2 codec=$3
	shift 3
	log "broker: $step (acks=$acks, compression=$codec)"
	e2e "$step" "$KRDK" produce --brokers "$BROKER" --topic "$T" --acks "$acks" --compression "$codec" \
		--secs "$E2E_SECS" --label "$step" "$@"
}
produce "produce:acks1" 1 none
# The engine alone with the batches librdkafka sends (the size the acks=1 run
# saw), right before and right after the acks=all run: its reference.
bmsgs=$(field "produce:acks1" avg_batch_msgs)
bmsgs=$(/usr/bin/python3 -c "print(max(1, round(float('${bmsgs:-0}' or 0))))")
storage_ref() {
	log "broker: storage reference, batches of $bmsgs x 1 KiB records, 4 appenders, 1 partition"
	rec "storage-ref" "$1" "$KB" append --dir "$SD" --appenders 4 --partitions 1 --records "$bmsgs" \
		--record-size 1024 --payload text --mode gc --secs "$SECS"
}
storage_ref 1
produce "produce:acksall" all none
storage_ref 2
produce "produce:acksall-lz4" all lz4
produce "produce:acksall-zstd" all zstd
total=0
for s in produce:acks1 produce:acksall produce:acksall-lz4 produce:acksall-zstd; do
	v=$(field "$s" msgs)
	total=$((total + ${v:-0}))
done
log "broker: consume all $total messages from the beginning"
e2e "consume" "$KRDK" consume --brokers "$BROKER" --topic "$T" --partitions 1 --count "$total"
# The same over TLS (OpenSSL on the broker's loop; Fetch reads the ranges and
# writes them through SSL_write unless the kernel does TLS) and over
# SASL_SSL, then plaintext once more so that each TLS and SASL_SSL figure
# sits between two plaintext ones.
log "broker: produce acks=1 and consume over TLS"
KAAS_BENCH_TLS_CA=$WORK/certs/ca.pem e2e "produce:acks1-tls" "$KRDK" produce --brokers "$SSL_BROKER" --topic "$T" \
	--acks 1 --compression none --secs "$E2E_SECS" --label "produce:acks1-tls"
KAAS_BENCH_TLS_CA=$WORK/certs/ca.pem e2e "consume:tls" "$KRDK" consume --brokers "$SSL_BROKER" --topic "$T" \
	--partitions 1 --count "$total"
# SASL_SSL: SCRAM-SHA-256 once per connection, then the same TLS data path.
log "broker: produce acks=1 and consume over SASL_SSL (SCRAM-SHA-256)"
export KAAS_BENCH_SASL_USER=bench KAAS_BENCH_SASL_PASS=bench-pw
KAAS_BENCH_TLS_CA=$WORK/certs/ca.pem KAAS_BENCH_SASL_MECH=SCRAM-SHA-256 e2e "produce:acks1-sasl_ssl" "$KRDK" produce \
	--brokers "$SASL_BROKER" --topic "$T" --acks 1 --compression none --secs "$E2E_SECS" --label "produce:acks1-sasl_ssl"
KAAS_BENCH_TLS_CA=$WORK/certs/ca.pem KAAS_BENCH_SASL_MECH=SCRAM-SHA-256 e2e "consume:sasl_ssl" "$KRDK" consume \
	--brokers "$SASL_BROKER" --topic "$T" --partitions 1 --count "$total"
produce "produce:acks1-again" 1 none
e2e "consume:again" "$KRDK" consume --brokers "$BROKER" --topic "$T" --partitions 1 --count "$total"
RATE=1000
log "broker: latency at a fixed $RATE msg/s, linger.ms=0"
# The floor of an acks=all answer is one small write + fsync: measured by the
# raw device loop right before and right after the acks=all run.
fsync_probe() {
	rec "fsync-probe" "$1" "$KB" device --dir "$SD" --threads 1 --files 1 --size 1200 --secs "$SECS" \
		--label fsync-probe
}
fsync_probe 1
e2e "latency:acksall" "$KRDK" produce --brokers "$BROKER" --topic "$T" --acks all --rate "$RATE" \
	--linger-ms 0 --secs "$E2E_SECS" --label "latency:acksall"
fsync_probe 2
e2e "latency:acks1" "$KRDK" produce --brokers "$BROKER" --topic "$T" --acks 1 --rate "$RATE" \
	--linger-ms 0 --secs "$E2E_SECS" --label "latency:acks1"
broker_stop
if [ "$BROKER_RC" != 0 ]; then
	log "FAILED: the broker exited $BROKER_RC on SIGTERM"
	FAILED=1
fi

# ---- the conformance tool, default run on a local directory (informational) ---------------------
log "conform: kaas-conform check on a local directory"
mkdir -p "$WORK/conform"
t0=$(date +%s.%N)
crc=0
"$BIN/kaas-conform" check "$WORK/conform" --no-progress --json "$WORK/conform.json" >/dev/null 2>&1 || crc=$?
t1=$(date +%s.%N)
/usr/bin/python3 - "$JL" "$WORK/conform.json" "$crc" "$t0" "$t1" <<'EOF'
import json, sys
jl, rep, rc, t0, t1 = sys.argv[1:]
out = {"step": "conform", "round": 0, "kind": "conform", "exit": int(rc), "secs": float(t1) - float(t0)}
try:
    r = json.load(open(rep))
    out["verdict"] = r.get("verdict")
    out["tool_secs"] = r.get("duration_ms", 0) / 1000.0
    out["checks"] = [{"name": c.get("name"), "verdict": c.get("verdict"),
                      "secs": c.get("duration_ms", 0) / 1000.0} for c in r.get("checks", [])]
except (OSError, ValueError) as e:
    out["error"] = "no report: %s" % e
print(json.dumps(out), file=open(jl, "a"))
EOF

# ---- instruction counts of the append hot path (repeatable on a loaded machine) ---------------------
if command -v valgrind >/dev/null && command -v callgrind_annotate >/dev/null; then
	CG=$WORK/cg
	mkdir -p "$CG"
	N=300
	[ "$QUICK" = 1 ] && N=50
	# compression records record-size: 1 KiB records plain and compressed,
	# and small records, where the per-record walk dominates.
	for c in "none 100 1024" "lz4 100 1024" "zstd 100 1024" "none 1000 100"; do
		read -r codec rcount rsize <<<"$c"
		tag=$codec-$rcount
		log "callgrind: ks_partition_append, $N batches of $rcount x $rsize B, compression $codec"
		rm -rf "$CG/data" && mkdir -p "$CG/data"
		if valgrind --tool=callgrind --callgrind-out-file="$CG/out.$tag" \
			--toggle-collect=ks_partition_append "$KB" append --dir "$CG/data" --mode nosync \
			--count $N --codec "$codec" --records "$rcount" --record-size "$rsize" --payload text \
			>"$CG/run.$tag" 2>"$CG/vg.$tag"; then
			callgrind_annotate --auto=no "$CG/out.$tag" >"$CG/self.$tag" 2>/dev/null || true
			callgrind_annotate --auto=no --inclusive=yes "$CG/out.$tag" >"$CG/incl.$tag" 2>/dev/null || true
			/usr/bin/python3 ci/bench/callgrind.py "$codec" $N "$CG/run.$tag" "$CG/self.$tag" \
				"$CG/incl.$tag" >>"$JL"
		else
			FAILED=1
			log "FAILED: callgrind run ($tag)"
			tail -3 "$CG/vg.$tag" >&2
		fi
	done
else
	echo '{"step":"callgrind","round":0,"skipped":"valgrind is not installed"}' >>"$JL"
fi

# ---- one metrics scrape at 10 000 partitions (a broker of its own) ---------------------------------
log "metrics: one scrape of a broker leading 10 000 partitions"
rec scrape 0 /usr/bin/python3 ci/bench/scrape.py "$BIN/kaas" "$WORK/scrape" 10000

# ---- report ---------------------------------------------------------------------------------
/usr/bin/python3 - "$JL" <<'EOF'
import json, os, sys
def pressure(what):
    try:
        return float(open("/proc/pressure/" + what).readline().split()[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        return None
print(json.dumps({"step": "env-end", "round": 0, "kind": "env-end", "load_end": os.getloadavg()[0],
                  "cpu_pressure_end": pressure("cpu"), "io_pressure_end": pressure("io")}),
      file=open(sys.argv[1], "a"))
EOF
mkdir -p "$OUT"
/usr/bin/python3 ci/bench/report.py "$JL" "$OUT" "$STAMP"
log "bench: wrote $OUT/$STAMP.md, $OUT/$STAMP.json and $OUT/README.md"
exit $FAILED
