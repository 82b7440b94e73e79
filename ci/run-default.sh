#!/bin/bash
# ci/run-default.sh — the job `make run` runs on its embedded default: qualify
# a local directory (./var/data) with kaas-conform and print the verdict.  On
# PASS the qualification stamp lands in ./var/data/__cluster, where the broker
# looks for it; the JSON report is kept in ./var.  Then start the broker on
# that volume at 127.0.0.1:9092 (Ctrl-C stops it cleanly).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p var/data
"${BIN:-bin}/kaas-conform" check ./var/data --actors 4 --stamp --json var/kaas-conform-report.json
cat <<'HINT'

Starting the kaas broker on 127.0.0.1:9092 (data in ./var/data; Ctrl-C stops it).
In another terminal:
  produce:  seq 1 10 | kcat -b 127.0.0.1:9092 -P -t demo -X acks=all
  keyed:    printf 'k1:hello\nk2:world\n' | kcat -b 127.0.0.1:9092 -P -t demo -K:
  consume:  kcat -b 127.0.0.1:9092 -C -t demo -o beginning -e -f '%k %s (offset %o)\n'
  metadata: kcat -b 127.0.0.1:9092 -L

HINT
exec "${BIN:-bin}/kaas" --data ./var/data --listen 127.0.0.1:9092
