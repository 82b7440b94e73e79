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
# shellcheck disable=SC2086
python3 ci/bench/partitions.py "$BIN/kaas" "$WORK" "$JL" $COUNTS
if [ -n "${KAAS_BENCH_NOFILE:-}" ]; then
	# shellcheck disable=SC2086
	python3 ci/bench/partitions.py "$BIN/kaas" "$WORK" "$JL" $COUNTS --nofile "$KAAS_BENCH_NOFILE"
fi
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo "?")
python3 - "$JL" "$OUT/partitions-$STAMP" "$COMMIT" "$(nproc)" <<'PY'
import json, sys
jl, out, commit, cpus = sys.argv[1:]
rows = [json.loads(l) for l in open(jl)]
json.dump({"commit": commit, "cpus": int(cpus), "runs": rows}, open(out + ".json", "w"), indent=1)
def g(r, k, fmt="%s"):
    return fmt % r[k] if k in r else "-"
lines = ["# One broker, many partitions (ci/bench/partitions.sh)", "",
         "commit %s, %s CPUs; data on the local disk; 100 partitions a topic, created through "
         "CreateTopics; restart = SIGTERM, then a new broker on the same data." % (commit, cpus), "",
         "| partitions | RLIMIT_NOFILE | CreateTopics errors | led after create | fds after create | "
         "RSS after create (MiB) | shutdown s | start-up s | led after restart | fds after restart | "
         "RSS after restart (MiB) | fds / partition | RSS KiB / partition | start-up ms / partition | "
         "sample produces ok | outcome |",
         "|" + "---|" * 16]
for r in rows:
    n = r["partitions"]
    led = r.get("led_after_restart")
    per = lambda k, d=1: ("%.2f" % (r[k] / d / n)) if k in r else "-"
    outcome = r.get("failed") or ("all led" if led == n else "%d of %d led; %d take-over failures logged (%d EMFILE)"
                                  % (led or 0, n, r.get("lead_failures_logged", 0), r.get("emfile_logged", 0)))
    lines.append("| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        n, r["nofile"], json.dumps(r.get("create_errors", {})), g(r, "led_after_create"),
        g(r, "fds_after_create"), ("%.0f" % (r["rss_kib_after_create"] / 1024)) if "rss_kib_after_create" in r else "-",
        g(r, "shutdown_s"), g(r, "startup_s"), g(r, "led_after_restart"), g(r, "fds_after_restart"),
        ("%.0f" % (r["rss_kib_after_restart"] / 1024)) if "rss_kib_after_restart" in r else "-",
        per("fds_after_restart"), per("rss_kib_after_restart"),
        ("%.2f" % (r["startup_s"] * 1000 / n)) if "startup_s" in r else "-",
        "%s/%s" % (r.get("sample_ok", "-"), r.get("sample_n", "-")), outcome))
lines += ["", "CreateTopics errors: {Kafka error code: topics}; 0 is success.  Raw figures: %s.json." %
          out.rsplit("/", 1)[-1]]
text = "\n".join(lines) + "\n"
open(out + ".md", "w").write(text)
open(out.rsplit("/", 1)[0] + "/partitions.md", "w").write(text)
print(text)
PY
echo "partitions.sh: wrote $OUT/partitions-$STAMP.md and .json, and $OUT/partitions.md"
