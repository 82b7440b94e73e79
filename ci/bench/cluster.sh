#!/bin/bash
# ci/bench/cluster.sh — the cluster's figures: what the control plane costs
# at 10,000 partitions on three brokers (idle reads per broker, time from an
# assignment change to every broker converged; ci/bench/control.py) and how
# long a partition is unavailable after kill -9, SIGSTOP and SIGTERM of its
# leader (ci/bench/failover.py).  Writes results/bench/cluster-<UTC
# stamp>.md/.json and cluster.md (the latest).  Figures, ratios and
# distributions; nothing is asserted on speed.  About 8 minutes.
#
# Environment:
#   BIN                      directory holding kaas (default bin)
#   KAAS_BENCH_DIR           where the data directories go (default ./var; not tmpfs)
#   KAAS_BENCH_OUT           results directory (default results/bench)
#   KAAS_BENCH_CTL_PARTITIONS  partitions of the control-plane run (default 10000)
#   KAAS_BENCH_KILLS / _STOPS / _DRAINS  faults of each kind (default 20 / 4 / 6)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${BIN:=bin}"
OUT=${KAAS_BENCH_OUT:-results/bench}
[ -x "$BIN/kaas" ] || { echo "cluster.sh: $BIN/kaas is missing (make)" >&2; exit 1; }
base=${KAAS_BENCH_DIR:-var}
mkdir -p "$base" "$OUT"
WORK=$(mktemp -d "$base/kaas-cluster-bench.XXXXXX")
WORK=$(cd "$WORK" && pwd)
trap 'rm -rf "$WORK"' EXIT
STAMP=$(date -u +%Y%m%d-%H%M%S)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
mkdir -p "$WORK/control" "$WORK/failover"
rc=0
/usr/bin/python3 ci/bench/control.py "$BIN/kaas" "$WORK/control" "$WORK/control.json" \
	--partitions "${KAAS_BENCH_CTL_PARTITIONS:-10000}" >"$WORK/control.out" 2>"$WORK/control.err" || {
	rc=1
	echo "cluster.sh: the control-plane run failed:" >&2
	tail -5 "$WORK/control.err" >&2
}
/usr/bin/python3 ci/bench/failover.py "$BIN/kaas" "$WORK/failover" "$WORK/failover.json" \
	--kills "${KAAS_BENCH_KILLS:-20}" --stops "${KAAS_BENCH_STOPS:-4}" --drains "${KAAS_BENCH_DRAINS:-6}" \
	>"$WORK/failover.out" 2>"$WORK/failover.err" || {
	rc=1
	echo "cluster.sh: the failover run failed:" >&2
	tail -5 "$WORK/failover.err" >&2
}
/usr/bin/python3 ci/bench/cluster_report.py "$WORK/control.json" "$WORK/failover.json" "$OUT/cluster-$STAMP" "$COMMIT"
echo "cluster.sh: wrote $OUT/cluster-$STAMP.md and .json, and $OUT/cluster.md"
exit $rc
