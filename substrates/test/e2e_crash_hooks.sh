#!/bin/bash
# e2e_crash_hooks.sh — the crash hooks of the real-substrate matrix catch a
# lie, and only a lie.  For each lying substrate the fsync check passes
# without the hook (so the data is written, readable and survives the
# writer's death) and fails with it, with the loss counted; the honest twin
# passes with the hook:
#
#   nfs-ganesha FSAL_MEM   crash-restart.sh (kill -9 and start again)
#   kaas-lyingfs --lying   crash.sh (the daemons forget what they hold), one
#                          mount, so the reader sees what the daemon holds
#   ext4 on a loop device  crash.sh (power cut: the image copied while
#                          mounted); fsync dropped at the system call by
#                          strace is the lie, a plain run the honest twin
#
# Every substrate is started and stopped with its own start.sh/stop.sh, and
# nothing of it may be left afterwards (sub_check_clean, sub_leftovers).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BINDIR=${BIN:-bin}
case $BINDIR in /*) ;; *) BINDIR="$ROOT/$BINDIR" ;; esac
KC=$BINDIR/kaas-conform
LYINGFS=$BINDIR/kaas-lyingfs
PY=/usr/bin/python3
[ -x "$KC" ] || { echo "missing $KC (build first)"; exit 1; }
[ -x "$LYINGFS" ] || { echo "missing $LYINGFS (it needs libfuse3-dev: ci/deps.sh test)"; exit 1; }
SUB_NAME=e2e-crash-hooks
. "$ROOT/substrates/substrate-lib.sh"

# /var/tmp: on disk (a tmpfs /tmp would not do for the lyingfs backing dir).
e2e_scratch WORK kaas-crash-hooks /var/tmp
UP=()   # "substrate state" pairs still up
stop_all_up() {
	local i
	for ((i = ${#UP[@]} - 1; i >= 0; i--)); do
		set -- ${UP[i]}
		bash "$ROOT/substrates/$1/stop.sh" "$2" >/dev/null 2>&1 || true
	done
}
e2e_on_exit stop_all_up

# up NAME SUBSTRATE [VAR=VALUE...] — start a substrate into $WORK/NAME and
# load its SUB_* variables.
up() {
	local name=$1 sub=$2 st=$WORK/$1
	shift 2
	mkdir -p "$st"
	UP+=("$sub $st")
	env "$@" LYINGFS_BIN="$LYINGFS" bash "$ROOT/substrates/$sub/start.sh" "$st" >"$st.env" 2>"$st.err" ||
		{ cat "$st.err"; fail "$name: start failed"; }
	SUB_URL= SUB_MOUNTS= SUB_CRASH_CMD= SUB_WRAP=
	eval "$(grep -E '^SUB_(URL|MOUNTS|CRASH_CMD|POWER_LOSS_CMD|WRAP)=' "$st.env")"
	[ -n "$SUB_CRASH_CMD" ] || fail "$name: start.sh gave no crash command"
}

# down NAME SUBSTRATE — stop it; nothing may be left.
down() {
	local st=$WORK/$1
	bash "$ROOT/substrates/$2/stop.sh" "$st" >"$st.stop" 2>&1 || { cat "$st.stop"; fail "$1: stop failed"; }
	unset 'UP[${#UP[@]}-1]'
	if [ -f "$st/resources.done" ]; then
		sub_check_clean "$st" || fail "$1: a recorded resource is still there"
	fi
	sub_leftovers "$st" || fail "$1: something of it is still there"
}

# fsync_check NAME WANT-VERDICT WANT-LOST [kaas-conform args...] — run the
# fsync check (plus cto, which must pass: the data written is the data read)
# under SUB_WRAP; the fsync verdict must be WANT-VERDICT ("PASS|WARN" allowed)
# and crash_lost WANT-LOST.
fsync_check() {
	local name=$1 want=$2 lost=$3 rc=0
	shift 3
	# shellcheck disable=SC2086
	$SUB_WRAP "$KC" check "$SUB_URL" --actors 3 --iterations 40 --seed 11 --checks preflight,cto,fsync \
		--no-progress --json "$WORK/$name.json" "$@" >"$WORK/$name.out" 2>&1 || rc=$?
	"$PY" - "$WORK/$name.json" "$want" "$lost" <<'PY' || { cat "$WORK/$name.out"; fail "$name: exit $rc"; }
import json, os, sys
r = json.load(open(sys.argv[1]))
c = {x["name"]: x for x in r["checks"]}
want, lost = sys.argv[2].split("|"), int(sys.argv[3])
cto = c["cto"]
if os.environ.get("CTO_RENAME_REFUSED") and cto["verdict"] != "PASS":
    # FSAL_MEM answers EIO to every rename over an existing name: the
    # renamed-over variant fails by its writer's errors alone, and the
    # in-place variants must still read back every version written.
    n = cto["counts"]
    for v in ("same", "grow"):
        assert n[v + ".reads"] > 0 and n[v + ".ok"] == n[v + ".reads"], n
    assert n["renamed.write_errors"] > 0, n
    assert all(a["kind"] in ("write_error", "stale", "not_converged") for a in cto["anomalies"]), cto["anomalies"]
else:
    assert cto["verdict"] == "PASS", cto["summary"]
f = c["fsync"]
assert f["verdict"] in want, (f["verdict"], f["summary"])
assert f["counts"]["crash_lost"] == lost, f["counts"]
if lost:
    assert f["counts"]["crash_bytes_lost"] > 0 and f["counts"]["crash_cmd"] == 1, f["counts"]
    assert f["counts"]["interposed_actors"] == 0, f["counts"]   # the loss alone decides
PY
	echo "ok: $name: fsync $(sed -n 's/^fsync  *//p' "$WORK/$name.out" | head -1)"
}

# ---- nfs-ganesha FSAL_MEM ------------------------------------------------------
up mem nfs-ganesha NFS_FSAL=mem NFS_VERSION=3
# FSAL_MEM must keep what is written (Inode_Size): a file reads back exactly.
head -c 300000 /dev/urandom >"$WORK/blob"
ns=${SUB_WRAP##*/}
nsenter --net="/run/netns/$ns" nfs-cp "$WORK/blob" "nfs://127.0.0.1/export/blob?version=3" >/dev/null
nsenter --net="/run/netns/$ns" nfs-cat "nfs://127.0.0.1/export/blob?version=3" >"$WORK/blob.back"
cmp -s "$WORK/blob" "$WORK/blob.back" || fail "FSAL_MEM did not give back what was written"
CTO_RENAME_REFUSED=1 fsync_check mem-nocrash "UNPROVEN|WARN" 0
CTO_RENAME_REFUSED=1 fsync_check mem-crash FAIL 1 --crash-cmd "$SUB_CRASH_CMD"
down mem nfs-ganesha
[ ! -e "/run/netns/$ns" ] || fail "the FSAL_MEM server's namespace is still there"

# ---- kaas-lyingfs ---------------------------------------------------------------
up lying lyingfs LYING=1
fsync_check lying-nocrash "UNPROVEN|WARN" 0
fsync_check lying-crash FAIL 1 --crash-cmd "$SUB_CRASH_CMD"
# with two mounts, the reader is another daemon that never got the data
fsync_check lying-crash-2 FAIL 1 --mount "$SUB_MOUNTS" --crash-cmd "$SUB_CRASH_CMD"
down lying lyingfs
up honest lyingfs LYING=0
fsync_check honest-crash "UNPROVEN|WARN" 0 --mount "$SUB_MOUNTS" --crash-cmd "$SUB_CRASH_CMD"
down honest lyingfs

# ---- ext4 on a loop device, power cut ------------------------------------------------
up loop loop-ext4
fsync_check loop-crash "UNPROVEN|WARN" 0 --crash-cmd "$SUB_CRASH_CMD"
# the same hook declared as what it is, a power cut: the proven form
fsync_check loop-powerloss "PASS|WARN" 0 --power-loss-cmd "$SUB_POWER_LOSS_CMD" --require-power-loss
down loop loop-ext4
up dropped loop-ext4 DROP_FSYNC=1
fsync_check dropped-nocrash "UNPROVEN|WARN" 0
fsync_check dropped-crash FAIL 1 --crash-cmd "$SUB_CRASH_CMD"
down dropped loop-ext4
echo "ok: every crash hook catches its lie and passes its honest twin; nothing left behind"
