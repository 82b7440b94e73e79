#!/bin/bash
# ci/bench/partitions.sh — how far one broker goes in partitions: for 1,000 /
# 10,000 / 30,000 partitions, created through CreateTopics by a client, the
# broker is restarted and serves a produce to a sample; descriptors, RSS and
# start-up time per count go to results/bench/partitions-<UTC stamp>.md/.json
# (and partitions.md, the latest).  Figures and ratios, no timed asserts; a
# count that does not fit is reported with what happened.
#
# Environment:
#   BIN                      directory holding kaas (default bin)
#   KAAS_BENCH_DIR           where the data directories go (default ./var; not tmpfs)
#   KAAS_BENCH_OUT           results directory (default results/bench)
#   KAAS_BENCH_PARTITIONS    the counts (default "1000 10000 30000")
#   KAAS_BENCH_NOFILE        also run every count with RLIMIT_NOFILE set to this
#                            (needs root above the hard limit), to separate the
#                            descriptor limit from everything else
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${BIN:=bin}"
OUT=${KAAS_BENCH_OUT:-results/bench}
COUNTS=${KAAS_BENCH_PARTITIONS:-1000 10000 30000}
[ -x "$BIN/kaas" ] || { echo "partitions.sh: $BIN/kaas is missing (make)" >&2; exit 1; }
base=${KAAS_BENCH_DIR:-var}
mkdir -p "$base" "$OUT"
WORK=$(mktemp -d "$base/kaas-partitions.XXXXXX")
WORK=$(cd "$WORK" && pwd)
trap 'rm -rf "$WORK"' EXIT
STAMP=$(date -u +%Y%m%d-%H%M%S)
JL=$WORK/partitions.jsonl
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo "?") # what is measured, taken before
# shellcheck disable=SC2086
python3 ci/bench/partitions.py "$BIN/kaas" "$WORK" "$JL" $COUNTS
if [ -n "${KAAS_BENCH_NOFILE:-}" ]; then
	# shellcheck disable=SC2086
	python3 ci/bench/partitions.py "$BIN/kaas" "$WORK" "$JL" $COUNTS --nofile "$KAAS_BENCH_NOFILE"
fi
python3 ci/bench/partitions_report.py "$JL" "$OUT/partitions-$STAMP" "$COMMIT" "$(nproc)"
echo "partitions.sh: wrote $OUT/partitions-$STAMP.md and .json, and $OUT/partitions.md"
