#!/bin/bash
# ci/run-default.sh — the job `make run` runs on its embedded default: qualify
# a local directory (./var/data) with kaas-conform and print the verdict.  On
# PASS the qualification stamp lands in ./var/data/__cluster, where the broker
# looks for it; the JSON report is kept in ./var.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p var/data
exec "${BIN:-bin}/kaas-conform" check ./var/data --actors 4 --stamp --json var/kaas-conform-report.json
