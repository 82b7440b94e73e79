#!/usr/bin/env python3
"""table.py DIR — the campaign table over every run in DIR (each a
directory with the summary.json that report.py wrote), as Markdown on
stdout: faults injected by kind, acknowledged records, lost, duplicated,
reordered and other violations, and unavailability per fault kind against
the targets."""
import glob
import json
import os
import sys

KINDS = ("kill9", "stop", "controller", "rolling", "cut", "lossy", "server", "full", "clusterdir")


def f2(v):
    return "—" if v is None else "%.2f" % v


def main(d):
    runs = []
    for p in sorted(glob.glob(os.path.join(d, "*", "summary.json"))):
        with open(p) as fh:
            runs.append((os.path.basename(os.path.dirname(p)), json.load(fh)))
    out = ["# Chaos campaigns", "",
           "Written by `make chaos` (ci/chaos/table.py); how to read it: "
           "[docs/reliability.md](../../docs/reliability.md).  Each run's plot and tables are in its directory.", "",
           "| run | topology | seed | faults | acknowledged | lost | duplicated | reordered | other violations | verdict | duration |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, s in runs:
        v = s.get("violations", {})
        other = sum(n for k, n in v.items() if k not in ("lost", "duplicate", "reorder"))
        out.append("| [%s](%s/report.md) | %s | %s | %d | %s | %d | %d | %d | %d | %s | %.0f s |" % (
            name, name, s.get("topology"), s.get("seed"), s.get("faults_total", 0), s.get("acknowledged"),
            v.get("lost", 0), v.get("duplicate", 0), v.get("reorder", 0), other,
            "valid" if s.get("valid") else "**violations**", s.get("duration_s", 0)))
    out += ["", "## Faults by kind", "", "| run | " + " | ".join(KINDS) + " |",
            "| --- |" + " --- |" * len(KINDS)]
    for name, s in runs:
        out.append("| %s | " % name + " | ".join(str(s.get("faults", {}).get(k, 0)) for k in KINDS) + " |")
    out += ["", "## Unavailability per fault kind (seconds; partition windows > 0.5 s)", "",
            "Targets: kill -9 median ≤ 1 s, max ≤ 2 s; a lost lease (stop, cut, cluster directory) ≤ session "
            "timeout + 1 s; drain ≤ 100 ms per partition.  \"isolated\": faults with no other within 5 s.", "",
            "| run | kind | all: n | median | p99 | max | isolated: n | median | p99 | max |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, s in runs:
        for k in KINDS:
            a = s.get("unavailability", {}).get(k)
            i = s.get("unavailability_isolated", {}).get(k) or {"n": 0, "median": None, "p99": None, "max": None}
            if not a:
                continue
            out.append("| %s | %s | %d | %s | %s | %s | %d | %s | %s | %s |" % (
                name, k, a["n"], f2(a["median"]), f2(a["p99"]), f2(a["max"]),
                i["n"], f2(i["median"]), f2(i["p99"]), f2(i["max"])))
        dm = s.get("drain_ms_per_partition", {})
        if dm.get("n"):
            out.append("| %s | drain, ms per partition moved | %d | %s | %s | %s | | | | |" % (
                name, dm["n"], f2(dm["median"]), f2(dm["p99"]), f2(dm["max"])))
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/chaos")
