#!/usr/bin/env bash
# ci/chaos/test_campaign.sh — a short seeded fault campaign (make test's
# bounded run of make chaos): six faults of every kind against one broker,
# real clients, the history checker's verdict.
set -euo pipefail
cd "$(dirname "$0")/../.."
CHAOS_SEED=${CHAOS_SEED:-11} CHAOS_FAULTS=${CHAOS_FAULTS:-6} exec bash ci/chaos/campaign.sh
