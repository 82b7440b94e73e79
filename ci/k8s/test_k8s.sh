#!/bin/bash
# ci/k8s/test_k8s.sh — the Kubernetes Job of ci/k8s/, without a cluster:
#
#   1. check_manifests.py accepts the committed manifests and refuses each of
#      a set of broken copies (a misspelt field, a wrong type, a missing
#      required field, anti-affinity on another topology or other pods, an
#      agent list that misses a pod, a non-RWX claim, a Service that selects
#      nothing);
#   2. the container script of the Job runs as Kubernetes would run it: four
#      "pods" in four network namespaces on one bridge, each resolving the
#      headless Service's pod names through its own /etc/hosts (ip netns
#      exec mounts /etc/netns/NS/hosts), JOB_COMPLETION_INDEX 0 to 3, the
#      volume a local directory standing in for the RWX claim.  The driver
#      waits for the agents, runs every check through them, prints the JSON
#      report, writes the stamp and exits 0; the agents leave by themselves
#      once it is done (--exit-when-idle, shortened here from 600 s).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BINDIR=${BIN:-bin}
case $BINDIR in /*) ;; *) BINDIR="$ROOT/$BINDIR" ;; esac
[ -x "$BINDIR/kaas-conform" ] || { echo "missing $BINDIR/kaas-conform (build first)"; exit 1; }
PY=/usr/bin/python3
CHECK=$ROOT/ci/k8s/check_manifests.py
JOB=$ROOT/ci/k8s/kaas-conform-job.yaml
PVC=$ROOT/ci/k8s/pvc.yaml
source "$ROOT/ci/lib/e2e.sh" --functions

e2e_scratch WORK kaas-k8s /var/tmp
TAG=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
HUB=kaask8s-$TAG-hub
PODS=("kaask8s-$TAG-p0" "kaask8s-$TAG-p1" "kaask8s-$TAG-p2" "kaask8s-$TAG-p3")
PIDS=()
pods_down() {
	local p ns
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	for ns in "${PODS[@]}" "$HUB"; do
		ip netns del "$ns" 2>/dev/null || true
		rm -rf "/etc/netns/$ns"
	done
}
e2e_on_exit 'cd /; pods_down'

# ---- 1. the manifest checker ------------------------------------------------------
"$PY" "$CHECK" "$JOB" "$PVC" >"$WORK/check.out" 2>&1 || { cat "$WORK/check.out"; fail "the committed manifests do not pass"; }
# serialise NAME PYTHON — apply PYTHON to the documents (svc, job, pvc; pod
# and c are the Job's pod spec and container) and write them as NAME-*.yaml.
serialise() {
	"$PY" - "$JOB" "$PVC" "$WORK/$1-job.yaml" "$WORK/$1-pvc.yaml" "$2" <<'PY'
import sys, yaml
svc, job = list(yaml.safe_load_all(open(sys.argv[1])))
pvc = yaml.safe_load(open(sys.argv[2]))
pod = job["spec"]["template"]["spec"]
c = pod["containers"][0]
exec(sys.argv[5])
yaml.safe_dump_all([svc, job], open(sys.argv[3], "w"))
yaml.safe_dump(pvc, open(sys.argv[4], "w"))
PY
}
# mutate NAME WANT PYTHON — the checker must refuse the changed copy with a
# line matching WANT.
mutate() {
	local rc=0
	serialise "$1" "$3"
	"$PY" "$CHECK" "$WORK/$1-job.yaml" "$WORK/$1-pvc.yaml" >"$WORK/$1.out" 2>&1 || rc=$?
	[ "$rc" = 1 ] || fail "check_manifests accepted $1 (exit $rc)"
	grep -qE -- "$2" "$WORK/$1.out" || fail "$1: '$(cat "$WORK/$1.out")' does not say '$2'"
}
serialise copy pass
"$PY" "$CHECK" "$WORK/copy-job.yaml" "$WORK/copy-pvc.yaml" >/dev/null ||
	fail "the checker refuses a re-serialised copy of the manifests"
mutate typo "unknown field completionsMode" 'job["spec"]["completionsMode"] = job["spec"].pop("completionMode")'
mutate type "containerPort: expected an integer" 'c["ports"][0]["containerPort"] = "7070"'
mutate required "required field image missing" 'del c["image"]'
mutate quantity "is not a quantity" 'pvc["spec"]["resources"]["requests"]["storage"] = "ten gigs"'
mutate topology "anti-affinity" 'pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] = "topology.kubernetes.io/zone"'
mutate otherpods "anti-affinity" 'pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]["matchLabels"] = {"app": "other"}'
mutate preferred "anti-affinity" 'a = pod["affinity"]["podAntiAffinity"]; a["preferredDuringSchedulingIgnoredDuringExecution"] = [{"weight": 100, "podAffinityTerm": a.pop("requiredDuringSchedulingIgnoredDuringExecution")[0]}]'
mutate agents "AGENTS" 'c["env"][0]["value"] = " ".join(c["env"][0]["value"].split()[:2])'
mutate replicas "completions" 'job["spec"]["parallelism"] = 2'
mutate rwo "ReadWriteMany" 'pvc["spec"]["accessModes"] = ["ReadWriteOnce"]'
mutate selector "selector" 'svc["spec"]["selector"] = {"app.kubernetes.io/name": "other"}'
mutate subdomain "subdomain" 'pod["subdomain"] = "elsewhere"'
mutate claim "claim" 'pod["volumes"][0]["persistentVolumeClaim"]["claimName"] = "other"'
mutate root "--root /data" 'c["args"][0] = c["args"][0].replace("--root /data", "--root /mnt")'
echo "ok: check_manifests.py passes the manifests and refuses 14 kinds of broken copy"

# ---- 2. the Job's pods, as network namespaces -----------------------------------------
"$PY" - "$JOB" "$WORK" <<'PY'
import sys, yaml
svc, job = list(yaml.safe_load_all(open(sys.argv[1])))
c = job["spec"]["template"]["spec"]["containers"][0]
env = {e["name"]: e["value"] for e in c["env"]}
# the container's command line, exactly, as a script; only the volume path
# and the agents' idle time are changed for the test
script = c["args"][0].replace("/data", "$KAAS_K8S_DATA").replace("--exit-when-idle 600", "--exit-when-idle 2")
open(sys.argv[2] + "/pod.sh", "w").write(script)
open(sys.argv[2] + "/agents", "w").write(env["AGENTS"])
assert c["command"] == ["/bin/bash", "-c"], c["command"]
assert job["spec"]["completions"] == 4
PY
mkdir "$WORK/data"
ip netns add "$HUB"
ip netns exec "$HUB" ip link set lo up
ip netns exec "$HUB" ip link add br0 type bridge
ip netns exec "$HUB" ip link set br0 up
hosts=$(printf '127.0.0.1 localhost\n'; for i in 0 1 2 3; do echo "10.98.0.$((10 + i)) kaas-conform-$i.kaas-conform"; done)
for i in 0 1 2 3; do
	ns=${PODS[i]}
	ip netns add "$ns"
	mkdir -p "/etc/netns/$ns"
	echo "$hosts" >"/etc/netns/$ns/hosts"
	ip netns exec "$HUB" ip link add "v$i" type veth peer name eth0 netns "$ns"
	ip netns exec "$HUB" ip link set "v$i" master br0 up
	ip netns exec "$ns" ip link set lo up
	ip netns exec "$ns" ip addr add "10.98.0.$((10 + i))/24" dev eth0
	ip netns exec "$ns" ip link set eth0 up
done
pod() { # pod INDEX — the container of pod INDEX, as the kubelet would start it
	ip netns exec "${PODS[$1]}" env -i PATH="$BINDIR:/usr/sbin:/usr/bin:/sbin:/bin" HOSTNAME="kaas-conform-$1" \
		JOB_COMPLETION_INDEX="$1" AGENTS="$(cat "$WORK/agents")" KAAS_K8S_DATA="$WORK/data" \
		/bin/bash -c "$(cat "$WORK/pod.sh")"
}
# the driver first: it must wait for agents that are not up yet
pod 0 >"$WORK/driver.json" 2>"$WORK/driver.err" &
drv=$!
PIDS+=("$drv")
sleep 1
for i in 1 2 3; do
	pod "$i" >"$WORK/agent$i.log" 2>&1 &
	PIDS+=($!)
done
rc=0
timeout 300 tail --pid="$drv" -f /dev/null || fail "the driver did not finish"
wait "$drv" || rc=$?
[ "$rc" = 0 ] || { cat "$WORK/driver.err"; fail "the driver pod exited $rc"; }
"$PY" - "$WORK/driver.json" "$WORK/data" <<'PY' || { cat "$WORK/driver.err"; fail "driver report"; }
import json, os, sys
r = json.load(open(sys.argv[1]))
assert r["verdict"] in ("PASS", "UNPROVEN", "WARN"), r["verdict"]
a = r["actors"]
assert a["kind"] == "agent" and a["count"] == 3 and a["hosts"] == 3 and a["distinct_hosts"], a
assert sorted(x["agent"] for x in a["list"]) == [f"kaas-conform-{i}.kaas-conform:7070" for i in (1, 2, 3)], a["list"]
assert all(c["verdict"] in ("PASS", "UNPROVEN", "WARN") for c in r["checks"]), [(c["name"], c["verdict"]) for c in r["checks"]]
if r["verdict"] in ("PASS", "UNPROVEN"):
    s = json.load(open(os.path.join(sys.argv[2], "__cluster", "qualification.json")))
    assert s["verdict"] == r["verdict"], s
PY
# the agents go by themselves once the driver has gone
for i in 1 2 3; do
	p=${PIDS[i]}
	timeout 60 tail --pid="$p" -f /dev/null || fail "agent pod $i did not exit after the driver left"
	rc=0
	wait "$p" || rc=$?
	[ "$rc" = 0 ] || { cat "$WORK/agent$i.log"; fail "agent pod $i exited $rc"; }
done
PIDS=()
echo "ok: the Job's script: driver and 3 agents in 4 namespaces by their Service names, $("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["verdict"])' "$WORK/driver.json"), agents gone after it"
