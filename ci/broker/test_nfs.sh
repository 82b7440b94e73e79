#!/bin/bash
# ci/broker/test_nfs.sh — the broker on an NFS export it reaches through
# libnfs (no mount): nfs-ganesha in a private network namespace, the volume
# qualified by kaas-conform over NFS, the broker started on the stamped
# volume, kcat producing and consuming across a restart, for NFSv4 and
# NFSv3; after SIGTERM the manifests on the export match.
set -euo pipefail
cd "$(dirname "$0")/../.."
source ci/lib/e2e.sh nfsb
BINABS=$(cd "$BIN" && pwd)
e2e_on_exit 'substrates/nfs-ganesha/stop.sh "$T/g" >/dev/null 2>&1'

eval "$(substrates/nfs-ganesha/start.sh "$T/g" 2>"$T/ganesha.err")" || { cat "$T/ganesha.err"; fail "nfs-ganesha"; }
W=$SUB_WRAP
export BROKER_WRAP=$W
echo "ok nfs-ganesha up in $NFS_NS"

for ver in 4 3; do
	url="nfs://127.0.0.1/export/v$ver?version=$ver"
	mkdir -p "$NFS_EXPORT_DIR/v$ver"
	# Qualify (retry a timing WARN, which writes no stamp).
	for attempt in 1 2 3; do
		(cd "$T" && $W "$BINABS/kaas-conform" check "$url" --actors 2 --stamp >"$T/conform.out" 2>&1) ||
			{ cat "$T/conform.out"; fail "kaas-conform over NFSv$ver"; }
		[ -s "$NFS_EXPORT_DIR/v$ver/__cluster/qualification.json" ] && break
	done
	[ -s "$NFS_EXPORT_DIR/v$ver/__cluster/qualification.json" ] || { cat "$T/conform.out"; fail "no stamp on NFSv$ver"; }
	# The broker starts (and restarts) on the stamped volume without
	# --trust-unqualified: the stamp and the start-up self-check (two threads
	# racing O_EXCL in one libnfs client, a rename over a file) must pass.
	BROKER_QUALIFIED=1
	BROKER_LOG=$T/broker-v$ver.log broker_start "$url" --override num.partitions=2
	grep -q "passing qualification stamp" "$BROKER_LOGFILE" || fail "stamp not recognised over NFSv$ver"
	grep -q "start-up self-check passed" "$BROKER_LOGFILE" || fail "self-check did not pass over NFSv$ver"
	seq 1 3000 | sed 's/^/k&:v&/' | $W timeout 120 kcat -b "$BROKER" -P -t nfs -K: -z zstd -X acks=all ||
		fail "produce over NFSv$ver"
	broker_restart || fail "restart over NFSv$ver"
	[ "$(grep -c "start-up self-check passed" "$BROKER_LOGFILE")" = 2 ] ||
		fail "self-check did not pass at the restart over NFSv$ver"
	seq 3001 6000 | sed 's/^/k&:v&/' | $W timeout 120 kcat -b "$BROKER" -P -t nfs -K: -X acks=all ||
		fail "produce after restart over NFSv$ver"
	got=$($W timeout 120 kcat -b "$BROKER" -C -t nfs -o beginning -e -q -f '%k:%s\n' | sort | md5sum)
	want=$(seq 1 6000 | sed 's/^/k&:v&/' | sort | md5sum)
	[ "$got" = "$want" ] || fail "records read back over NFSv$ver differ"
	broker_stop
	[ "$BROKER_RC" = 0 ] || fail "kaas exited $BROKER_RC over NFSv$ver"
	hw=0
	for p in 0 1; do
		m="$NFS_EXPORT_DIR/v$ver/nfs/$p/manifest.json"
		[ -s "$m" ] || fail "no manifest for nfs/$p"
		hw=$((hw + $($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["high_watermark"])' "$m")))
	done
	[ "$hw" = 6000 ] || fail "manifests hold $hw records, expected 6000"
	echo "ok NFSv$ver via libnfs: qualified, 6000 records across a restart read back, manifests persisted"
done
echo "test_nfs: all passed"
