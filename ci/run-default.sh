#!/bin/bash
# ci/run-default.sh — the job `make run` runs on its embedded default: qualify
# a local directory (./var/data) with kaas-conform and print the verdict.  On
# PASS the qualification stamp lands in ./var/data/__cluster, where the broker
# looks for it; the JSON report is kept in ./var.  Then start the broker on
# that volume at 127.0.0.1:9092 (Ctrl-C stops it cleanly).
#
# KAAS_RUN_DIR (default ./var) and KAAS_RUN_LISTEN (default 127.0.0.1:9092)
# move the job elsewhere; ci/broker/test_make_run.sh uses them.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(cd "${BIN:-bin}" && pwd)
dir=${KAAS_RUN_DIR:-./var}
listen=${KAAS_RUN_LISTEN:-127.0.0.1:9092}
mkdir -p "$dir/data"
"$BIN/kaas-conform" check "$dir/data" --actors 4 --stamp --json "$dir/kaas-conform-report.json"
cat <<HINT

Starting the kaas broker on $listen (data in $dir/data; Ctrl-C stops it).
In another terminal:
  produce:  seq 1 10 | kcat -b $listen -P -t demo -X acks=all
  keyed:    printf 'k1:hello\\nk2:world\\n' | kcat -b $listen -P -t demo -K:
  consume:  kcat -b $listen -C -t demo -o beginning -e -f '%k %s (offset %o)\\n'
  metadata: kcat -b $listen -L

HINT
exec "$BIN/kaas" --data "$dir/data" --listen "$listen"
