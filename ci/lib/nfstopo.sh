# shellcheck shell=bash disable=SC2034  # it sets variables for its caller
# ci/lib/nfstopo.sh — the realistic cluster topology for a test: one
# nfs-ganesha and N brokers, each broker in a network namespace of its own
# with its own libnfs client, storage and client networks apart.
#
#   source ci/lib/e2e.sh NAME; source ci/lib/cluster.sh; source ci/lib/nfstopo.sh
#   nfstopo_up N [STATEDIR]   # ganesha + hub + N broker namespaces; sets
#                             #   CL_HOST[i], CL_NSWRAP[i] for cluster_start,
#                             #   NT_URL (nfs://10.96.0.2/export/cl?version=V),
#                             #   NT_DIR (ganesha's state directory),
#                             #   NT_EXPORT (the exported directory, on this host)
#   nt_hub CMD...             # run CMD in the hub (where the clients live)
#   nt_cut i / nt_uncut i     # take broker i's storage link down / up
#   nt_lossy i PCT / nt_unlossy i   # drop PCT % of broker i's packets to the
#                             #   server (nftables in its namespace)
#   nt_server_kill [DIR] / nt_server_start [DIR]   # kill -9 the NFS server
#                             #   (default NT_DIR) / start it again (new epoch)
#   nt_server_pause [DIR] / nt_server_resume [DIR] # SIGSTOP / SIGCONT it
#   nfstopo_down              # everything gone (also pushed on e2e_on_exit)
#
# NT_CLUSTER_EXPORT=1 before nfstopo_up starts a second nfs-ganesha at
# 10.96.0.3 on the storage network for the cluster directory: NT_CLDIR
# (its state directory), NT_CLURL (nfs://10.96.0.3/export/cl?version=V).
#
#   hub netns:  bridge brc 10.97.0.1 (the clients: producers, consumers, checks)
#               bridge brs            (the storage network, no address)
#   ganesha netns (substrates/nfs-ganesha/start.sh)   10.96.0.2 on brs
#   broker netns i: 10.96.0.1i on brs (to the server, veth s<i> in the hub)
#                   10.97.0.1i on brc (to the clients, veth c<i>)
#
# No two brokers share a client cache or a host identity.  Set before
# nfstopo_up: NFS_VERSION (3, default, or 4), NFS_EXPORT_ON (dir, tmpfs,
# loop: see substrates/nfs-ganesha/start.sh), NT_PREFIX (namespace names,
# default kaastopo).  Needs root.

NT_N=0
NT_DIR=
NT_URL=
NT_EXPORT=
NT_HUB=
NT_NS=()
NT_CLDIR=
NT_CLURL=

nt_hub() { ip netns exec "$NT_HUB" "$@"; }

_nt_attach() { # NS BRIDGE HUBSIDE NSSIDE ADDR
	nt_hub ip link add "$3" type veth peer name "$4" netns "$1"
	nt_hub ip link set "$3" master "$2" up
	ip netns exec "$1" ip link set lo up
	ip netns exec "$1" ip addr add "$5/24" dev "$4"
	ip netns exec "$1" ip link set "$4" up
}

nfstopo_up() {
	NT_N=$1
	NT_DIR=${2:-$T/g}
	local ver=${NFS_VERSION:-3} tag i
	tag=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
	NT_HUB=${NT_PREFIX:-kaastopo}-$tag-hub
	e2e_on_exit nfstopo_down
	eval "$(NFS_VERSION=$ver substrates/nfs-ganesha/start.sh "$NT_DIR" vfs 2>"$NT_DIR.err")" ||
		{ cat "$NT_DIR.err" >&2; echo "nfstopo: starting nfs-ganesha failed" >&2; return 1; }
	e2e_show_log "$NT_DIR/ganesha.log"
	NT_EXPORT=$NFS_EXPORT_DIR
	ip netns add "$NT_HUB"
	nt_hub ip link set lo up
	nt_hub ip link add brs type bridge
	nt_hub ip link add brc type bridge
	nt_hub ip addr add 10.97.0.1/24 dev brc
	nt_hub ip link set brs up
	nt_hub ip link set brc up
	_nt_attach "$NFS_NS" brs vg eth5 10.96.0.2
	for i in $(seq 1 "$NT_N"); do
		NT_NS[i]=${NT_PREFIX:-kaastopo}-$tag-b$i
		ip netns add "${NT_NS[i]}"
		_nt_attach "${NT_NS[i]}" brs "s$i" eths "10.96.0.1$i"
		_nt_attach "${NT_NS[i]}" brc "c$i" ethc "10.97.0.1$i"
		timeout 20 sh -c "until ip netns exec ${NT_NS[i]} bash -c 'exec 3<>/dev/tcp/10.96.0.2/2049' 2>/dev/null; do sleep 0.1; done" ||
			{ echo "nfstopo: broker namespace $i cannot reach the NFS server" >&2; return 1; }
		# Only the storage network leads to the server.
		if ip netns exec "${NT_NS[i]}" timeout 2 bash -c 'exec 3<>/dev/tcp/10.97.0.1/2049' 2>/dev/null; then
			echo "nfstopo: the client network reaches port 2049" >&2
			return 1
		fi
		CL_HOST[i]=10.97.0.1$i
		CL_NSWRAP[i]="env KAAS_NFS_DEBUG=errors nsenter --net=/run/netns/${NT_NS[i]}"
	done
	mkdir -p "$NT_EXPORT/cl"
	NT_URL="nfs://10.96.0.2/export/cl?version=$ver"
	if [ "${NT_CLUSTER_EXPORT:-0}" = 1 ]; then
		NT_CLDIR=$NT_DIR-cl
		eval "$(NFS_EXPORT_ON=dir NFS_VERSION=$ver substrates/nfs-ganesha/start.sh "$NT_CLDIR" vfs 2>"$NT_CLDIR.err")" ||
			{ cat "$NT_CLDIR.err" >&2; echo "nfstopo: starting the cluster-directory nfs-ganesha failed" >&2; return 1; }
		_nt_attach "$NFS_NS" brs vg2 eth6 10.96.0.3
		mkdir -p "$NFS_EXPORT_DIR/cl"
		NT_CLURL="nfs://10.96.0.3/export/cl?version=$ver"
		for i in $(seq 1 "$NT_N"); do
			timeout 20 sh -c "until ip netns exec ${NT_NS[i]} bash -c 'exec 3<>/dev/tcp/10.96.0.3/2049' 2>/dev/null; do sleep 0.1; done" ||
				{ echo "nfstopo: broker namespace $i cannot reach the cluster-directory server" >&2; return 1; }
		done
	fi
}

_nt_gpid() { sed -n 's/^ganesha_pid=//p' "${1:-$NT_DIR}/state" | tail -1; }
nt_server_kill() {
	local p
	p=$(_nt_gpid "${1:-}")
	[ -n "$p" ] || return 1
	kill -KILL "$p" 2>/dev/null || true
	timeout 10 sh -c "while kill -0 $p 2>/dev/null && ! grep -q '^State:.*Z' /proc/$p/status 2>/dev/null; do sleep 0.05; done"
}
nt_server_start() {
	(
		. substrates/nfs-ganesha/lib.sh
		d=${1:-$NT_DIR}
		anchor=$(state_get "$d" rpcbind_pid)
		wait_for 10 sh -c "! nsenter -t $anchor -n ss -Hltn 'sport = :2049' | grep -q LISTEN" || exit 1
		start_ganesha "$d"
	)
}
nt_server_pause() { kill -STOP "$(_nt_gpid "${1:-}")"; }
nt_server_resume() { kill -CONT "$(_nt_gpid "${1:-}")"; }

nt_cut() { nt_hub ip link set "s$1" down; }
nt_uncut() { nt_hub ip link set "s$1" up; }

nt_lossy() {
	ip netns exec "${NT_NS[$1]}" nft -f - <<EOF
table inet kaaslossy {
	chain out { type filter hook output priority 0; ip daddr 10.96.0.2 numgen random mod 100 < $2 drop; }
	chain in { type filter hook input priority 0; ip saddr 10.96.0.2 numgen random mod 100 < $2 drop; }
}
EOF
}
nt_unlossy() { ip netns exec "${NT_NS[$1]}" nft delete table inet kaaslossy 2>/dev/null || true; }

nfstopo_down() {
	set +e
	local i
	for i in $(seq 1 "$NT_N"); do
		nt_hub ip link set "s$i" up 2>/dev/null
	done
	cluster_cleanup
	for i in $(seq 1 "$NT_N"); do ip netns del "${NT_NS[i]}" 2>/dev/null; done
	[ -n "$NT_HUB" ] && ip netns del "$NT_HUB" 2>/dev/null
	[ -n "$NT_CLDIR" ] && { kill -CONT "$(_nt_gpid "$NT_CLDIR")" 2>/dev/null; substrates/nfs-ganesha/stop.sh "$NT_CLDIR" --kill >/dev/null 2>&1; }
	[ -n "$NT_DIR" ] && { kill -CONT "$(_nt_gpid "$NT_DIR")" 2>/dev/null; substrates/nfs-ganesha/stop.sh "$NT_DIR" --kill >/dev/null 2>&1; }
	NT_N=0
	NT_HUB=
	return 0
}
