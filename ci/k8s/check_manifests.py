#!/usr/bin/python3
"""ci/k8s/check_manifests.py — check the Kubernetes manifests of ci/k8s/.

    /usr/bin/python3 ci/k8s/check_manifests.py [JOB_YAML [PVC_YAML]]

No cluster and no schema download (Debian has no kubeconform): the fields
these manifests use are checked against the Kubernetes API types they belong
to (an unknown or misspelt field is an error, as `kubectl apply
--validate=strict` would say), with the types and required fields of each,
and then the pieces are checked against each other — what has to agree for
the Job to run at all: the Service selects the pods and names them, the
anti-affinity selects the same pods, the driver's agent list names exactly
the agent pods and their port, the volume is the RWX claim, the replica
counts add up.  Run it after editing the manifests.  Exit 0 when all is
well, 1 with one line per problem otherwise.
"""
import os
import re
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
problems = []


def bad(msg):
    problems.append(msg)


# The API fields these manifests may use: name -> type, where a type is
# str/int/bool, a dict (an object: its own fields), a list [type], or MAP
# (string -> string).  "!" after a name: required.
MAP = "map"
QUANTITY = "quantity"
META = {"name!": str, "namespace": str, "labels": MAP, "annotations": MAP}
LABEL_SELECTOR = {"matchLabels": MAP, "matchExpressions": [{"key!": str, "operator!": str, "values": [str]}]}
POD_AFFINITY_TERM = {"topologyKey!": str, "labelSelector": LABEL_SELECTOR, "namespaces": [str],
                     "namespaceSelector": LABEL_SELECTOR}
AFFINITY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [POD_AFFINITY_TERM],
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight!": int,
                                                              "podAffinityTerm!": POD_AFFINITY_TERM}],
    },
    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [POD_AFFINITY_TERM]},
    "nodeAffinity": dict,
}
SEC_CTX = {"runAsUser": int, "runAsGroup": int, "runAsNonRoot": bool, "fsGroup": int,
           "allowPrivilegeEscalation": bool, "readOnlyRootFilesystem": bool, "privileged": bool,
           "capabilities": {"add": [str], "drop": [str]}, "seccompProfile": {"type!": str}}
RESOURCES = {"requests": {"cpu": QUANTITY, "memory": QUANTITY},
             "limits": {"cpu": QUANTITY, "memory": QUANTITY}}
CONTAINER = {
    "name!": str, "image!": str, "imagePullPolicy": str, "command": [str], "args": [str],
    "env": [{"name!": str, "value": str, "valueFrom": dict}], "workingDir": str,
    "ports": [{"containerPort!": int, "name": str, "protocol": str}],
    "volumeMounts": [{"name!": str, "mountPath!": str, "readOnly": bool, "subPath": str}],
    "resources": RESOURCES, "securityContext": SEC_CTX,
}
POD_SPEC = {
    "containers!": [CONTAINER], "initContainers": [CONTAINER], "restartPolicy": str,
    "subdomain": str, "hostname": str, "affinity": AFFINITY, "securityContext": SEC_CTX,
    "serviceAccountName": str, "nodeSelector": MAP, "tolerations": [dict],
    "terminationGracePeriodSeconds": int,
    "volumes": [{"name!": str, "persistentVolumeClaim": {"claimName!": str, "readOnly": bool},
                 "emptyDir": dict}],
}
KINDS = {
    ("v1", "Service"): {
        "apiVersion!": str, "kind!": str, "metadata!": META,
        "spec!": {"clusterIP": str, "publishNotReadyAddresses": bool, "selector": MAP, "type": str,
                  "ports": [{"name": str, "port!": int, "targetPort": int, "protocol": str}]},
    },
    ("batch/v1", "Job"): {
        "apiVersion!": str, "kind!": str, "metadata!": META,
        "spec!": {"completionMode": str, "completions": int, "parallelism": int, "backoffLimit": int,
                  "activeDeadlineSeconds": int, "ttlSecondsAfterFinished": int,
                  "template!": {"metadata": {"labels": MAP, "annotations": MAP}, "spec!": POD_SPEC}},
    },
    ("v1", "PersistentVolumeClaim"): {
        "apiVersion!": str, "kind!": str, "metadata!": META,
        "spec!": {"accessModes!": [str], "storageClassName": str, "volumeMode": str,
                  "resources!": {"requests!": {"storage!": QUANTITY}}},
    },
}


def check(node, schema, where):
    if schema is MAP:
        if not isinstance(node, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in node.items()):
            bad(f"{where}: expected a map of strings")
        return
    if schema is QUANTITY:
        if not re.fullmatch(r"[0-9]+(\.[0-9]+)?(m|k|Ki|Mi|Gi|Ti|M|G|T)?", str(node)):
            bad(f"{where}: '{node}' is not a quantity")
        return
    if schema is dict:
        if not isinstance(node, dict):
            bad(f"{where}: expected an object")
        return
    if isinstance(schema, list):
        if not isinstance(node, list):
            bad(f"{where}: expected a list")
            return
        for i, x in enumerate(node):
            check(x, schema[0], f"{where}[{i}]")
        return
    if isinstance(schema, dict):
        if not isinstance(node, dict):
            bad(f"{where}: expected an object")
            return
        fields = {k.rstrip("!"): v for k, v in schema.items()}
        for k in schema:
            if k.endswith("!") and k[:-1] not in node:
                bad(f"{where}: required field {k[:-1]} missing")
        for k, v in node.items():
            if k not in fields:
                bad(f"{where}: unknown field {k}")
            else:
                check(v, fields[k], f"{where}.{k}")
        return
    # str/int/bool; YAML's bool is an int in Python: keep them apart
    if schema is int and (isinstance(node, bool) or not isinstance(node, int)):
        bad(f"{where}: expected an integer, got {node!r}")
    elif schema is not int and not isinstance(node, schema):
        bad(f"{where}: expected {schema.__name__}, got {node!r}")


def load(path):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    for i, d in enumerate(docs):
        key = (d.get("apiVersion"), d.get("kind")) if isinstance(d, dict) else None
        if key not in KINDS:
            bad(f"{os.path.basename(path)}: document {i}: unexpected apiVersion/kind {key}")
            continue
        check(d, KINDS[key], f"{os.path.basename(path)}:{d['kind']}")
    return docs


def main():
    job_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "kaas-conform-job.yaml")
    pvc_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(HERE, "pvc.yaml")
    docs = load(job_path) + load(pvc_path)
    if problems:
        return report()
    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    if sorted((k, len(v)) for k, v in by_kind.items()) != [("Job", 1), ("PersistentVolumeClaim", 1),
                                                           ("Service", 1)]:
        bad(f"expected one Service, one Job and one PersistentVolumeClaim, got {sorted(by_kind)}")
        return report()
    svc, job, pvc = by_kind["Service"][0], by_kind["Job"][0], by_kind["PersistentVolumeClaim"][0]
    js = job["spec"]
    tmpl = js["template"]
    pod = tmpl["spec"]
    labels = tmpl.get("metadata", {}).get("labels", {})

    # the PVC is shared by every node
    if "ReadWriteMany" not in pvc["spec"]["accessModes"]:
        bad("pvc: accessModes must include ReadWriteMany (every pod mounts it)")

    # the Service names the pods: headless, selects them, subdomain = its name
    if svc["spec"].get("clusterIP") != "None":
        bad("service: must be headless (clusterIP: None) to give each pod a DNS name")
    sel = svc["spec"].get("selector", {})
    if not sel or any(labels.get(k) != v for k, v in sel.items()):
        bad(f"service: selector {sel} does not select the Job's pods {labels}")
    if pod.get("subdomain") != svc["metadata"]["name"]:
        bad(f"job: pod subdomain {pod.get('subdomain')!r} is not the Service's name "
            f"{svc['metadata']['name']!r}: the pods would get no DNS names")

    # one pod per index, all running at once, never retried
    if js.get("completionMode") != "Indexed":
        bad("job: completionMode must be Indexed (JOB_COMPLETION_INDEX picks driver or agent)")
    n = js.get("completions")
    if not isinstance(n, int) or n < 3 or js.get("parallelism") != n:
        bad(f"job: completions ({n}) must equal parallelism ({js.get('parallelism')}), at least 3 "
            "(a driver and two agents): the driver waits for every agent")
        return report()
    if pod.get("restartPolicy") != "Never" or js.get("backoffLimit") != 0:
        bad("job: restartPolicy Never and backoffLimit 0 (a failed qualification is not retried)")
    if not js.get("activeDeadlineSeconds"):
        bad("job: activeDeadlineSeconds must bound the run")

    # every pod on its own node
    terms = pod.get("affinity", {}).get("podAntiAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", [])
    if not any(t["topologyKey"] == "kubernetes.io/hostname"
               and t.get("labelSelector", {}).get("matchLabels")
               and all(labels.get(k) == v for k, v in t["labelSelector"]["matchLabels"].items())
               for t in terms):
        bad("job: required pod anti-affinity on kubernetes.io/hostname selecting the Job's own pods "
            "is missing: two actors on one node would share one kernel client")

    # the container: its port, its volume, its agent list
    if len(pod["containers"]) != 1:
        bad("job: expected one container")
        return report()
    c = pod["containers"][0]
    ports = [p["containerPort"] for p in c.get("ports", [])]
    svc_ports = [p.get("targetPort", p["port"]) for p in svc["spec"].get("ports", [])]
    if len(ports) != 1 or svc_ports != ports:
        bad(f"job: container ports {ports} and Service target ports {svc_ports} must be the one agent port")
        return report()
    port = ports[0]
    vols = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = c.get("volumeMounts", [])
    data = [m for m in mounts if m["name"] in vols
            and vols[m["name"]].get("persistentVolumeClaim", {}).get("claimName") == pvc["metadata"]["name"]]
    if len(data) != 1:
        bad(f"job: the container must mount the claim {pvc['metadata']['name']!r} exactly once")
        return report()
    mpath = data[0]["mountPath"]
    for m in mounts:
        if m["name"] not in vols:
            bad(f"job: volumeMount {m['name']!r} names no volume")
    script = "\n".join(c.get("command", []) + c.get("args", []))
    env = {e["name"]: e.get("value", "") for e in c.get("env", [])}
    agents = env.get("AGENTS", "").split()
    want = [f"{job['metadata']['name']}-{i}.{svc['metadata']['name']}:{port}" for i in range(1, n)]
    if agents != want:
        bad(f"job: AGENTS {agents} must name the agent pods 1..{n - 1}: {want}")
    for needle, why in ((f"--listen 0.0.0.0:{port}", "the agents listen on the agent port"),
                        (f"--root {mpath}", "the agents' root is the mounted volume"),
                        (f"kaas-conform check {mpath}", "the driver checks the mounted volume"),
                        ("JOB_COMPLETION_INDEX", "the index chooses driver or agent"),
                        ("--exit-when-idle", "agents leave once the driver is done"),
                        ('--agent "$a"', "the driver uses every agent of AGENTS")):
        if needle not in script:
            bad(f"job: the container script lacks '{needle}' ({why})")
    return report()


def report():
    for p in problems:
        print(f"check_manifests: {p}")
    if not problems:
        print("check_manifests: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
