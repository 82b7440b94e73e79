#!/usr/bin/env bash
# ci/chaos/test_campaign.sh — make test's bounded run of make chaos: a short
# seeded campaign against a running 3-broker cluster, two faults of every
# kind, real clients, the history checker's verdict; any violation fails.
# As root (network namespaces) on the NFS topology, where every kind
# exists; otherwise on a local directory.  About two to three minutes.
set -euo pipefail
cd "$(dirname "$0")/../.."
topo=local
[ "$(id -u)" = 0 ] && command -v ganesha.nfsd >/dev/null && topo=nfs
case ${CHAOS_TOPOLOGY:-$topo} in nfs) n=18 ;; *) n=8 ;; esac
CHAOS_SEED=${CHAOS_SEED:-11} CHAOS_FAULTS=${CHAOS_FAULTS:-$n} CHAOS_TOPOLOGY=${CHAOS_TOPOLOGY:-$topo} \
	CHAOS_MEAN_GAP_S=${CHAOS_MEAN_GAP_S:-3} CHAOS_TAIL_S=${CHAOS_TAIL_S:-10} exec bash ci/chaos/campaign.sh
