#!/usr/bin/env bash
# ci/chaos/test_checker.sh — the history checker finds each violation it
# names in a history made to hold exactly that one, and none in a clean one.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 ci/chaos/test_checker.py 2>&1 | tail -n 3
echo "PASS ci/chaos/test_checker.sh"
