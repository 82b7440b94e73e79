#!/bin/bash
# e2e_agents.sh — kaas-conform with its actors on other "hosts": three agents,
# each in a network namespace of its own, drive the checks against
# nfs-ganesha in a fourth; the driver runs in a fifth.  Topology:
#
#      driver netns (hub)  10.99.0.1 on bridge br0
#        |-- veth -- ganesha netns   10.99.0.2  (start.sh, NFS 2049/MOUNT 20048/rpcbind)
#        |-- veth -- agent netns 1   10.99.0.11 (kaas-conform agent, port 7070)
#        |-- veth -- agent netns 2   10.99.0.12
#        '-- veth -- agent netns 3   10.99.0.13
#
# The veth pairs are created inside the hub namespace, never in the host's,
# so runs side by side cannot collide; everything is removed on exit.
# Asserted: the checks pass over NFSv3 and NFSv4 with one actor per agent and
# three distinct host identities; an agent refuses a second driver; a driver
# that leaves (close, or vanishes: keepalive) frees the agent; a dead agent
# fails the run with an error naming it, not a hang; an absent agent is a
# clear error before anything runs.
set -euo pipefail
source "$(dirname "$0")/lib.sh" # KC, PY, ROOT, $WORK (the current directory), fail, the cleanup stack
GANESHA="$ROOT/substrates/nfs-ganesha"

TAG=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
HUB=kaasag-$TAG-hub
AGNS=("kaasag-$TAG-a1" "kaasag-$TAG-a2" "kaasag-$TAG-a3")
AGIP=(10.99.0.11 10.99.0.12 10.99.0.13)
AGPID=()
PIDS=()
cleanup() {
	for p in "${PIDS[@]}" "${AGPID[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}" "${AGPID[@]}"; do wait "$p" 2>/dev/null || true; done
	for ns in "${AGNS[@]}" "$HUB"; do ip netns del "$ns" 2>/dev/null || true; done
	"$GANESHA/stop.sh" "$WORK/srv" --kill >/dev/null 2>&1 || true
}
e2e_on_exit cleanup
# fail shows the agents' logs
for f in agent0 agent1 agent2 agent-idle; do e2e_show_log "$WORK/$f.log"; done
hub() { ip netns exec "$HUB" "$@"; }

# ---- topology ---------------------------------------------------------------
mkdir "$WORK/srv"
eval "$("$GANESHA/start.sh" "$WORK/srv" vfs)"
ip netns add "$HUB"
hub ip link set lo up
hub ip link add br0 type bridge
hub ip addr add 10.99.0.1/24 dev br0
hub ip link set br0 up
attach() { # attach NS HUBSIDE ADDR
	hub ip link add "$2" type veth peer name eth9 netns "$1"
	hub ip link set "$2" master br0 up
	ip netns exec "$1" ip link set lo up
	ip netns exec "$1" ip addr add "$3/24" dev eth9
	ip netns exec "$1" ip link set eth9 up
}
attach "$NFS_NS" vs 10.99.0.2
for i in 0 1 2; do
	ip netns add "${AGNS[i]}"
	attach "${AGNS[i]}" "va$i" "${AGIP[i]}"
done
for i in 0 1 2; do
	timeout 10 sh -c "until ip netns exec ${AGNS[i]} bash -c 'exec 3<>/dev/tcp/10.99.0.2/2049' 2>/dev/null; do sleep 0.1; done" ||
		fail "agent namespace $i cannot reach the server"
done

start_agents() { # start_agents VERSION [extra agent options]
	local v=$1 i
	shift
	for i in 0 1 2; do
		KAAS_NFS_DEBUG=errors ip netns exec "${AGNS[i]}" "$KC" agent --listen "${AGIP[i]}:7070" \
			--root "nfs://10.99.0.2/export?version=$v" "$@" >"$WORK/agent$i.log" 2>&1 &
		AGPID[i]=$!
	done
	for i in 0 1 2; do
		timeout 10 sh -c "until grep -q listening '$WORK/agent$i.log'; do sleep 0.05; done" ||
			fail "agent $i did not start"
	done
}
stop_agents() {
	local p
	for p in "${AGPID[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${AGPID[@]}"; do wait "$p" 2>/dev/null || true; done
	AGPID=()
}
AGENTS=(--agent 10.99.0.11:7070 --agent 10.99.0.12:7070 --agent 10.99.0.13:7070)

# ---- the checks through three agents -------------------------------------------
for v in 3 4; do
	start_agents "$v"
	rc=0
	# Over NFSv3 with a crash command (one that changes nothing): after it
	# the driver and both agents that were not killed open their URL again
	# (the reopen step, over TCP).
	crash=()
	[ "$v" = 3 ] && crash=(--crash-cmd true)
	timeout 300 ip netns exec "$HUB" "$KC" check "nfs://10.99.0.2/export?version=$v" "${AGENTS[@]}" \
		"${crash[@]}" --json "r$v.json" --no-progress >"out$v" 2>"err$v" || rc=$?
	[ "$rc" = 0 ] || { cat "out$v" "err$v"; fail "NFSv$v through agents: exit $rc"; }
	"$PY" "$ROOT/conformance/test/validate_report.py" "r$v.json" || fail "NFSv$v: report schema"
	"$PY" - "r$v.json" "$v" <<'PY' || { cat "out$v"; fail "NFSv$v through agents: report"; }
import json, sys
r = json.load(open(sys.argv[1]))
checks = {c["name"]: c for c in r["checks"]}
f = checks["fsync"]
if sys.argv[2] == "3":
    assert f["counts"]["crash_cmd"] == 1 and f["profile"]["reopened_after_crash"] == 3, f["profile"]
    assert f["counts"]["crash_lost"] == 0, f["counts"]
for name in ("preflight", "rename", "excl", "cto", "unlink-open", "rename-copy"):
    assert checks[name]["verdict"] == "PASS", (name, checks[name]["summary"])
assert r["verdict"] in ("PASS", "UNPROVEN", "WARN"), r["verdict"]
a = r["actors"]
assert a["kind"] == "agent" and a["count"] == 3, a
assert a["hosts"] == 3 and a["distinct_hosts"] and a["distinct_clients"], a
agents = sorted(x["agent"] for x in a["list"])
assert agents == ["10.99.0.11:7070", "10.99.0.12:7070", "10.99.0.13:7070"], agents
ids = [x["host_id"].split("/") for x in a["list"]]
assert len({i[2] for i in ids}) == 3, ids      # three network namespaces
assert len({i[1] for i in ids}) == 1, ids      # one machine (boot id)
PY
	grep -q "3 agents, 3 distinct clients, 3 hosts" "out$v" || fail "header: $(head -3 "out$v")"
	# The fsync check's crash variant killed a session; the agent took the
	# driver back (reconnect) and kept running.
	grep -q "session 2 with driver" "$WORK/agent0.log" || fail "no reconnect after the crash step"
	echo "ok: NFSv$v through 3 agents in 3 namespaces: $(sed -n 's/^VERDICT //p' "out$v")"
	stop_agents
done

# ---- one driver at a time; a driver that leaves frees the agent -------------------
start_agents 3 --keepalive 2
hold_session() { # hold_session OUTFILE: a "driver" that connects and says nothing
	ip netns exec "$HUB" "$PY" -c '
import socket, sys, time
s = socket.create_connection(("10.99.0.11", 7070), timeout=5)
greeting = s.makefile().readline()
open(sys.argv[1], "w").write(greeting)
time.sleep(600)
' "$1" &
	PIDS+=($!)
	timeout 10 sh -c "until [ -s '$1' ]; do sleep 0.05; done" || fail "no greeting from agent 0"
}
hold_session greet.json
"$PY" -c "import json; g = json.load(open('greet.json')); assert g['ev'] == 'agent' and g['root'].startswith('nfs://10.99.0.2/'), g" ||
	fail "greeting: $(cat greet.json)"
rc=0
timeout 60 ip netns exec "$HUB" "$KC" check "nfs://10.99.0.2/export?version=3" "${AGENTS[@]}" \
	--no-progress --json busy.json >busy.out 2>busy.err || rc=$?
[ "$rc" = 2 ] || { cat busy.out busy.err; fail "second driver: exit $rc, expected 2"; }
grep -q "10.99.0.11:7070.*refused.*one driver at a time" busy.err || fail "refusal not explained: $(cat busy.err)"
echo "ok: an agent serving a driver refuses a second one"

# The first "driver" closes its connection: the agent is free at once.
kill -KILL "${PIDS[0]}"
wait "${PIDS[0]}" 2>/dev/null || true
PIDS=()
timeout 10 sh -c "until grep -q 'session 1 .* ended' '$WORK/agent0.log'; do sleep 0.05; done" ||
	fail "agent 0 did not notice the driver leaving"
hold_session greet2.json
# This one vanishes without closing: its link goes down, only keepalive can
# tell.  The agent must end the session by itself and accept others again.
hub ip link set va0 down
timeout 30 sh -c "until grep -q 'session 2 .* ended' '$WORK/agent0.log'; do sleep 0.2; done" ||
	fail "agent 0 kept the session of a vanished driver"
hub ip link set va0 up
kill -KILL "${PIDS[0]}"
wait "${PIDS[0]}" 2>/dev/null || true
PIDS=()
echo "ok: a driver that closes or vanishes (keepalive) frees the agent"

# ---- a dead agent fails the run with a clear error, not a hang ----------------------
timeout 300 ip netns exec "$HUB" "$KC" check "nfs://10.99.0.2/export?version=3" "${AGENTS[@]}" \
	--no-progress --json dead.json >dead.out 2>dead.err &
drv=$!
PIDS+=("$drv")
timeout 20 sh -c "until grep -q 'session [0-9]* with driver' '$WORK/agent2.log'; do sleep 0.05; done" ||
	fail "the driver did not reach agent 2"
sleep 1
kill -KILL "${AGPID[2]}"
wait "${AGPID[2]}" 2>/dev/null || true
rc=0
wait "$drv" || rc=$?
PIDS=()
[ "$rc" = 2 ] || { cat dead.out dead.err; fail "dead agent: exit $rc, expected 2"; }
grep -q "actor 2.*lost its agent 10.99.0.13:7070" dead.out dead.err ||
	fail "the error does not name the dead agent: $(cat dead.err)"
echo "ok: a dead agent ends the run with an error naming it"
stop_agents

# ---- an agent nobody listens at: an error before anything runs -----------------------
rc=0
timeout 60 ip netns exec "$HUB" "$KC" check "nfs://10.99.0.2/export?version=3" "${AGENTS[@]}" \
	--no-progress >none.out 2>none.err || rc=$?
[ "$rc" = 2 ] || fail "absent agents: exit $rc"
grep -q "agent 10.99.0.11:7070 (actor 0): cannot connect" none.err || fail "absent agent: $(cat none.err)"
echo "ok: an absent agent is reported before the run starts"

# ---- --exit-when-idle: an agent of a batch job ends after its driver left -------------
ip netns exec "${AGNS[0]}" "$KC" agent --listen "${AGIP[0]}:7070" --root "nfs://10.99.0.2/export?version=3" \
	--exit-when-idle 1 >"$WORK/agent-idle.log" 2>&1 &
AGPID=($!)
timeout 10 sh -c "until grep -q listening '$WORK/agent-idle.log'; do sleep 0.05; done" || fail "idle agent did not start"
sleep 2
kill -0 "${AGPID[0]}" 2>/dev/null || fail "the agent exited before any driver came"
ip netns exec "$HUB" "$PY" -c '
import socket
s = socket.create_connection(("10.99.0.11", 7070), timeout=5)
assert b"\"ev\":\"agent\"" in s.makefile("rb").readline()
s.close()
'
rc=0
timeout 15 sh -c "while [ -d /proc/${AGPID[0]} ] && ! grep -q '^State:.*Z' /proc/${AGPID[0]}/status; do sleep 0.1; done" ||
	fail "the agent did not exit when idle"
wait "${AGPID[0]}" || rc=$?
AGPID=()
[ "$rc" = 0 ] || fail "idle exit status $rc"
grep -q "idle for 1 s after 1 session" "$WORK/agent-idle.log" || fail "idle exit not logged"
echo "ok: --exit-when-idle ends the agent after its driver left"
