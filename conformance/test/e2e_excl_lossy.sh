#!/bin/bash
# e2e_excl_lossy.sh — the O_EXCL race over a lossy link.  nfs-ganesha in its
# namespace; the racers (libnfs clients, one TCP connection each) in a client
# namespace joined to it by a veth pair whose both ends drop, duplicate and
# delay packets (netem).  The link must really be lossy (netem counts drops,
# TCP counts retransmitted segments), and through it every round must still
# have exactly one winner, every loser must be told EEXIST, and every EEXIST
# must be about another racer's claim (a retransmitted create answering
# EEXIST for its own file is the failure this looks for).  The broker's
# controller election is exactly this race.
#
# The link is impaired with netem (loss, duplication, delay) where the kernel
# has it, else with an nftables egress chain on each end (loss and
# duplication by numgen; no delay: nftables cannot hold a packet back).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BINDIR=${BIN:-bin}
case $BINDIR in /*) ;; *) BINDIR="$ROOT/$BINDIR" ;; esac
KC="$BINDIR/kaas-conform"
PY=/usr/bin/python3
GANESHA="$ROOT/substrates/nfs-ganesha"
[ -x "$KC" ] || { echo "missing $KC (build first)"; exit 1; }
ROUNDS=${KC_LOSSY_ROUNDS:-60}
NETEM=${KC_LOSSY_NETEM:-loss 5% duplicate 5% delay 20ms 5ms}

WORK=$(mktemp -d /tmp/kc-e2e-lossy.XXXXXX)
CLNS=kaaslossy-$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
cleanup() {
	ip netns del "$CLNS" 2>/dev/null || true
	"$GANESHA/stop.sh" "$WORK/srv" --kill >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
trap "exit 130" INT TERM
cd "$WORK"
fail() { echo "FAIL: $*" >&2; exit 1; }
cl() { ip netns exec "$CLNS" "$@"; }

mkdir "$WORK/srv"
eval "$("$GANESHA/start.sh" "$WORK/srv" vfs)"
ip netns add "$CLNS"
cl ip link set lo up
cl ip link add eth0 type veth peer name lossy0 netns "$NFS_NS"
cl ip addr add 10.98.0.2/24 dev eth0
cl ip link set eth0 up
ip netns exec "$NFS_NS" ip addr add 10.98.0.1/24 dev lossy0
ip netns exec "$NFS_NS" ip link set lossy0 up
timeout 10 sh -c "until ip netns exec $CLNS bash -c 'exec 3<>/dev/tcp/10.98.0.1/2049' 2>/dev/null; do sleep 0.1; done" ||
	fail "the client namespace cannot reach the server"
# Both directions: requests and replies are each dropped, duplicated (and
# with netem delayed).
LOSS=${KC_LOSSY_LOSS_PCT:-5} DUP=${KC_LOSSY_DUP_PCT:-5}
# shellcheck disable=SC2086 # NETEM is a word list
if cl tc qdisc add dev eth0 root netem $NETEM 2>/dev/null; then
	IMPAIR="netem $NETEM"
	# shellcheck disable=SC2086
	ip netns exec "$NFS_NS" tc qdisc add dev lossy0 root netem $NETEM
	drops() { ip netns exec "$1" tc -s qdisc show dev "$2" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1; }
elif command -v nft >/dev/null; then
	IMPAIR="nftables: loss $LOSS%, duplicate $DUP% (this kernel has no netem: no delay)"
	impair() { # impair NS DEV
		ip netns exec "$1" nft -f - <<NFT
table netdev lossy {
	chain egress {
		type filter hook egress device "$2" priority 0;
		numgen random mod 100 < $LOSS counter drop
		numgen random mod 100 < $DUP counter dup to "$2"
	}
}
NFT
	}
	impair "$CLNS" eth0
	impair "$NFS_NS" lossy0
	drops() { ip netns exec "$1" nft list chain netdev lossy egress | sed -n 's/.*counter packets \([0-9]*\).*drop.*/\1/p' | head -1; }
else
	fail "neither netem (tc) nor nftables (nft) is available to make the link lossy"
fi
echo "link: $IMPAIR"

for v in ${KC_LOSSY_VERSIONS:-3 4}; do
	cl nstat -n >/dev/null # reset the namespace's counters
	rc=0
	timeout 600 ip netns exec "$CLNS" "$KC" check "nfs://10.98.0.1/export?version=$v" --actors 3 \
		--checks excl --iterations "$ROUNDS" --json "r$v.json" --no-progress >"out$v" 2>"err$v" || rc=$?
	retrans=$(cl nstat -az TcpRetransSegs | awk '/TcpRetransSegs/ {print $2}')
	d1=$(drops "$CLNS" eth0)
	d2=$(drops "$NFS_NS" lossy0)
	echo "NFSv$v: exit $rc; the link dropped $d1 requests-side and $d2 replies-side packets; $retrans TCP segments retransmitted"
	[ -f "r$v.json" ] || { cat "out$v" "err$v"; fail "NFSv$v: exit $rc and no report"; }
	[ "${d1:-0}" -gt 0 ] && [ "${d2:-0}" -gt 0 ] || fail "NFSv$v: the link lost nothing (the impairment is not in effect)"
	[ "${retrans:-0}" -gt 0 ] || fail "NFSv$v: no TCP retransmission: the race did not cross a lossy link"
	"$PY" "$ROOT/conformance/test/validate_report.py" "r$v.json" || fail "NFSv$v: report schema"
	"$PY" - "r$v.json" "$ROUNDS" <<'PY' || { cat "out$v" "err$v"; fail "NFSv$v: the O_EXCL race over a lossy link"; }
import json, sys
r, rounds = json.load(open(sys.argv[1])), int(sys.argv[2])
c = r["checks"][0]
k = c["counts"]
print(f"  excl: {c['verdict']}: {c['summary']}")
assert c["name"] == "excl" and k["rounds"] == rounds, k
assert k["loser_own_content"] == 0, k      # no EEXIST for one's own create
assert k["multi_winner"] == 0 and k["no_winner"] == 0, k
assert k["loser_eexist"] == 2 * rounds, k  # every loser told EEXIST
assert c["verdict"] == "PASS", (c["verdict"], c["summary"])
assert r["actors"]["clients"] == 3, r["actors"]
PY
	echo "ok: NFSv$v: $ROUNDS O_EXCL rounds of 3 libnfs clients over a lossy link ($IMPAIR)"
done
