#!/bin/bash
# e2e_nfs.sh — kaas-conform qualifies an NFS server with no mount: nfs-ganesha
# (FSAL VFS) in its own network namespace, checked over NFSv3 and NFSv4.0
# through the libnfs backend with three actors, i.e. three NFS clients.
# Every guarantee passes, the delete-while-open profile shows what the server
# does (NFSv3: the holder's handle goes stale; NFSv4: the open file stays
# readable) and no silly-rename, and nothing is left in the export.
set -euo pipefail
source "$(dirname "$0")/lib.sh" # KC, PY, ROOT, $WORK (the current directory), fail, the cleanup stack
GANESHA="$ROOT/substrates/nfs-ganesha"

mkdir "$WORK/srv"
e2e_on_exit "'$GANESHA/stop.sh' '$WORK/srv' --kill >/dev/null 2>&1 || true"
eval "$("$GANESHA/start.sh" "$WORK/srv" vfs)"
in_ns() { nsenter --net="/run/netns/$NFS_NS" -- "$@"; }

for v in 3 4; do
	url="nfs://127.0.0.1/export?version=$v"
	rc=0
	KAAS_NFS_DEBUG=errors in_ns "$KC" check "$url" --actors 3 --json "r$v.json" --no-progress >"out$v" 2>"err$v" || rc=$?
	if [ "$rc" != 0 ]; then
		cat "out$v" "err$v"
		fail "NFSv$v: kaas-conform exited $rc"
	fi
	"$PY" "$ROOT/conformance/test/validate_report.py" "r$v.json" || fail "NFSv$v: report schema"
	"$PY" - "r$v.json" "$v" <<'PY' || { cat "out$v"; fail "NFSv$v: report"; }
import json, sys
r = json.load(open(sys.argv[1]))
v = sys.argv[2]
checks = {c["name"]: c for c in r["checks"]}
assert r["verdict"] in ("PASS", "UNPROVEN", "WARN"), r["verdict"]
for name in ("preflight", "rename", "excl", "cto", "unlink-open", "rename-copy"):
    assert checks[name]["verdict"] == "PASS", (name, checks[name]["verdict"], checks[name]["summary"])
assert checks["fsync"]["verdict"] in ("UNPROVEN", "WARN"), checks["fsync"]["summary"]
a = r["actors"]
assert a["count"] == 3 and a["clients"] == 3 and a["distinct_clients"], a
assert all(x["backend"] == "nfs" for x in a["list"]), a["list"]
# the delete-while-open profile: the server's behaviour, not a client's
p = checks["unlink-open"]["profile"]
assert p["silly_rename"] == "none" and p["listing_while_open"] == [], p
if v == "3":
    assert p["holder"]["read"] == "ESTALE", p["holder"]
else:
    assert p["holder"]["read"] == "ok" and p["holder"]["nlink"] == 0, p["holder"]
# every loser of every O_EXCL round was told EEXIST
assert checks["excl"]["counts"]["loser_eexist"] == 2 * checks["excl"]["counts"]["rounds"], checks["excl"]["counts"]
PY
	grep -q "3 distinct clients" "out$v" || fail "NFSv$v: header does not show 3 clients"
	left=$(ls -A "$NFS_EXPORT_DIR")
	[ -z "$left" ] || fail "NFSv$v: left behind in the export: $left"
	echo "ok: NFSv$v through libnfs, 3 clients: $(sed -n 's/^VERDICT //p' "out$v")"
done
