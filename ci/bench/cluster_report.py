#!/usr/bin/python3
"""cluster_report.py CONTROL.json FAILOVER.json OUTPREFIX COMMIT — the
markdown of the cluster benchmarks (control-plane cost, failover) and one
JSON holding both: OUTPREFIX.md, OUTPREFIX.json."""
import json
import os
import sys

ctl_p, fo_p, prefix, commit = sys.argv[1:5]


def load(p):
    try:
        return json.load(open(p))
    except (OSError, ValueError) as e:
        return {"error": "%s: %s" % (p, e)}


ctl, fo = load(ctl_p), load(fo_p)
md = ["# Cluster benchmarks (`ci/bench/cluster.sh`)", "",
      "Commit %s.  Three brokers on one local directory, loopback, default timeouts unless said." % commit,
      "Figures and ratios from one run on one machine (its load is given: the machine is shared); "
      "nothing here is a pass/fail.", ""]


def mach(m):
    if not m:
        return "?"
    return "load %.1f on %d CPUs, CPU pressure %s%%, I/O pressure %s%%" % (
        m.get("load", 0), m.get("cpus", 0), m.get("cpu_pressure"), m.get("io_pressure"))


def f(x, unit="", nd=2):
    return "—" if x is None else ("%.*f%s" % (nd, x, unit))


md += ["## Control plane at %s partitions" % ctl.get("partitions", "?"), ""]
k = r = c = None
if "error" in ctl or "idle" not in ctl:
    md += ["Not measured: %s" % ctl.get("error", "incomplete run"), ""]
else:
    md += ["Machine while idle: %s." % mach(ctl.get("machine_idle")), "",
           "Idle, %d s with nothing changing (per broker; `/proc/PID/io`: bytes through read(2)/pread(2), "
           "which here is the volume; directory listings are not counted in bytes):" % ctl["idle_secs"], "",
           "| broker | role | bytes read/s | read calls/s | write calls/s | CPU share |",
           "| --- | --- | --- | --- | --- | --- |"]
    for b, v in sorted(ctl["idle"].items()):
        md.append("| %s | %s | %.0f | %.0f | %.1f | %.1f%% |" % (
            b, "controller" if v["controller"] else "broker", v["bytes_per_s"], v["reads_per_s"],
            v["writes_per_s"], 100 * v["cpu_share"]))
    lp = ctl.get("idle_loop") or {}
    if lp:
        md += ["", "The cluster loop's own account of a pass while idle (one pass per `kaas.cluster.poll.ms`):", "",
               "| broker | per pass | membership | assignment poll | controller | driver | leader map | "
               "balances / skipped |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for b, v in sorted(lp.items()):
            md.append("| %s | %d us | %d us | %d us | %d us | %d us | %d us | %d / %d |" % (
                b, v["pass_us"], v["membership_us"], v["assignment_us"], v["controller_us"], v["driver_us"],
                v["leaders_us"], v["balances"], v["balances_skipped"]))
    k, r, c = ctl.get("kill"), ctl.get("rejoin"), ctl["create"]
    if not k or not r:
        md += ["", "Convergence: not measured (the run stopped early).", ""]
        k = r = None
if k and r:
    md += ["", "Convergence (brokers' log timestamps):", "",
           "| change | partitions moved | to publication | publication → every partition led |",
           "| --- | --- | --- | --- |",
           "| kill -9 of broker %d | %d | %s after the kill | %s |" % (
               k["victim"], k["moved"], f(k["kill_to_publish_s"], " s"), f(k["publish_to_all_led_s"], " s")),
           "| broker %d back (planned hand-offs) | %d | %s after the restart (one session of watching) | %s "
           "(%s per partition) |" % (
               k["victim"], r["moved"], f(r["restart_to_publish_s"], " s"), f(r["publish_to_all_led_s"], " s"),
               f(r["per_partition_ms"], " ms")),
           "", "Creating the %d topics and leading all of it took %.1f s." % (ctl["topics"], c["secs_to_all_led"]),
           ""]

md += ["## Failover", ""]
if "error" in fo or "kill" not in fo:
    md += ["Not measured: %s" % fo.get("error", "incomplete run"), ""]
else:
    S = fo["session_ms"] / 1000.0
    rtt = fo.get("probe_rtt_s") or {}
    md += ["Machine: %s." % mach(fo.get("machine_start")), "",
           "%d partitions; a probe per partition sends one acks=all batch every %.0f ms to the leader Metadata "
           "names (fresh connection, %.1f s timeout).  Unavailability = first failed send → next acknowledged "
           "send.  Session timeout S = %.1f s; the probe's own round trip before the first fault (the limit of "
           "this run): median %s, p90 %s." % (
               fo["partitions"], 1000 * fo["probe_gap_s"], fo["probe_timeout_s"], S,
               f(rtt.get("median"), " s", 4), f(rtt.get("p90"), " s", 4)), "",
           "| fault | faults | partition samples | median | p90 | max | median / S | max / S | median / probe RTT |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    names = {"kill": "kill -9 of the leader", "stop": "SIGSTOP of the leader (lost lease)",
             "drain": "SIGTERM drain (planned)"}
    for kind in ("kill", "stop", "drain"):
        s = fo.get(kind) or {}
        u = s.get("unavailable_s")
        if not u:
            md.append("| %s | %d | 0 | — | — | — | — | — | — |" % (names[kind], s.get("faults", 0)))
            continue
        md.append("| %s | %d | %d | %s | %s | %s | %s | %s | %s |" % (
            names[kind], s["faults"], u["n"], f(u["median"], " s", 3), f(u["p90"], " s", 3), f(u["max"], " s", 3),
            f(s.get("median_over_session"), "", 3), f(s.get("max_over_session"), "", 3),
            f(s.get("median_over_probe_rtt"), "", 0)))
    md += ["", "Split (brokers' log timestamps; median / max in seconds):", "",
           "| fault | detection: fault → publication | take-over: publication → take-over starts | "
           "recovery: the take-over | client: ready → first ack |", "| --- | --- | --- | --- | --- |"]
    for kind in ("kill", "stop", "drain"):
        s = fo.get(kind) or {}
        cells = []
        for part in ("detection_s", "takeover_s", "recovery_s", "client_s"):
            d = s.get(part)
            cells.append("%s / %s" % (f(d["median"], "", 3), f(d["max"], "", 3)) if d else "—")
        md.append("| %s | %s |" % (names[kind], " | ".join(cells)))
    md += ["", "Exit codes of the victims: %s." % ", ".join(
        "%s %s" % (k, sorted(set((fo.get(k) or {}).get("exits", [])))) for k in ("kill", "stop", "drain")), ""]

open(prefix + ".md", "w").write("\n".join(md) + "\n")
json.dump({"commit": commit, "control": ctl, "failover": fo}, open(prefix + ".json", "w"), indent=1)
latest = os.path.join(os.path.dirname(prefix), "cluster.md")
open(latest, "w").write("\n".join(md) + "\n")
print("\n".join(md))
