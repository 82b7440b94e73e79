#!/usr/bin/env python3
"""report.py — a campaign's figures, from its history (and the brokers' logs).

  report.py HISTORY --out DIR [--verdict verdict.json] [--schedule schedule.txt]
            [--logs DIR] [--session-ms S] [--replay CMD] [--topology T]

Writes into DIR:
  timeline.svg   acknowledged records and errored sends per second over the
                 run, every fault drawn as a band on the same time axis (one
                 lane per kind), the heal as a line
  report.md      the checker's verdict, faults by kind, and the
                 unavailability windows per fault kind (median, p99, max),
                 split into detection, take-over and recovery where the
                 brokers' logs say when they noticed and took over, and
                 judged against the targets
  summary.json   the same numbers, for the campaign table

An unavailability window of a partition after a fault is the longest time
that partition went without an acknowledgement, from the fault's start to
the first acknowledgement after the gap, looking WINDOW_S ahead: what the
clients lived through, metadata refresh and retry back-off included.  Only
windows longer than NOISE_S count (a partition the fault did not touch has
gaps of a few tens of ms).  "isolated" counts only faults with no other
fault in force or starting within ISOLATION_S around them, the figure the
targets are about.  SVG written by hand: no plotting library.
"""
import argparse
import collections
import datetime
import glob
import json
import os
import re
import statistics

WINDOW_S = 20.0
NOISE_S = 0.5
ISOLATION_S = 5.0
COLORS = {"kill9": "#d62728", "stop": "#ff7f0e", "controller": "#8c564b", "rolling": "#9467bd",
          "cut": "#1f77b4", "lossy": "#17becf", "server": "#e377c2", "full": "#bcbd22",
          "clusterdir": "#7f7f7f"}


def pct(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(q * (len(xs) - 1)))))
    return xs[k]


def stats(xs):
    return {"n": len(xs), "median": pct(xs, 0.5), "p99": pct(xs, 0.99), "max": max(xs) if xs else None}


def load(path):
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def faults_of(ops):
    """[(n, kind, start, end, op)] from the fault lines."""
    start, end = {}, {}
    for o in ops:
        if o.get("f") != "fault":
            continue
        k = (o.get("n"), o.get("kind"))
        if o.get("phase") == "start":
            start[k] = o
        elif o.get("phase") == "end":
            end[k] = o
    out = []
    for k, s in start.items():
        e = end.get(k)
        out.append((k[0], k[1], s["t"], e["t"] if e else s["t"], s))
    return sorted(out, key=lambda r: r[2])


LOGLINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z \S+\s+cluster: (.*)$")


def broker_logs(logdir, mono_minus_wall):
    """[(mono t, broker, message)] of the cluster lines of b<i>.log."""
    out = []
    for path in sorted(glob.glob(os.path.join(logdir or "", "b[0-9]*.log"))):
        b = int(re.search(r"b(\d+)\.log$", path).group(1))
        with open(path, errors="replace") as fh:
            for line in fh:
                m = LOGLINE.match(line)
                if not m:
                    continue
                w = datetime.datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").replace(
                    tzinfo=datetime.timezone.utc).timestamp()
                out.append((w + mono_minus_wall, b, m.group(2)))
    out.sort()
    return out


def windows(ops, faults, topic, partitions):
    acks = collections.defaultdict(list)
    for o in ops:
        if o.get("f") == "send" and o.get("type") == "ok" and o.get("topic") == topic:
            acks[o["partition"]].append(o["t"])
    for p in acks:
        acks[p].sort()
    res = []   # (fault row, partition, gap, gap_start, gap_end)
    for row in faults:
        t0 = row[2]
        for p in range(partitions):
            ts = acks.get(p, [])
            best = None
            prev = None
            for t in ts:
                if t > t0 + WINDOW_S:
                    break
                if t > t0:
                    a = max(prev, t0) if prev is not None else t0
                    g = t - a
                    if best is None or g > best[0]:
                        best = (g, a, t)
                prev = t
            if best is not None and best[0] > NOISE_S:
                res.append((row, p, best[0], best[1], best[2]))
    return res


def isolated(faults):
    iso = set()
    for i, r in enumerate(faults):
        ok = True
        for j, q in enumerate(faults):
            if i == j:
                continue
            if q[2] - ISOLATION_S < r[2] < q[3] + ISOLATION_S or r[2] <= q[2] <= r[3] + ISOLATION_S:
                ok = False
                break
        if ok:
            iso.add((r[0], r[1]))
    return iso


def split(win, logs):
    """detection / take-over / recovery of one window from the brokers' logs."""
    row, p, gap, a, b = win
    t0, victim = row[2], row[4].get("broker")
    det = tko = None
    # The window may open after the fault (the victim back, its partitions
    # handed back to it): the phases are of the window, from its start.
    lo = max(t0, a - 1.0)
    for t, br, msg in logs:
        if t < lo:
            continue
        if t > b:
            break
        if det is None and victim is not None and br != victim and (
                msg.startswith("broker %s incarnation" % victim) and "is gone" in msg):
            det = t
        if det is None and br != victim and msg.startswith("applying assignment epoch"):
            det = t
        if msg.startswith("chaos/%d: leader at epoch" % p):
            tko = t
    if det is None or tko is None or not (lo <= det <= tko <= b):
        return None
    return (max(0.0, det - a), tko - det, b - tko)


def svg_timeline(ops, faults, path, title):
    t_first = min(o["t"] for o in ops)
    t_last = max(o["t"] for o in ops)
    span = max(1.0, t_last - t_first)
    nb = int(span) + 1
    ack = [0] * nb
    err = [0] * nb
    for o in ops:
        f, ty = o.get("f"), o.get("type")
        i = int(o["t"] - t_first)
        if f == "send" and ty == "ok":
            ack[i] += 1
        elif (f in ("send", "commit", "admin") and ty in ("fail", "info")) or \
                f in ("member-error", "producer-fatal"):
            err[i] += 1
    heal = [o["t"] for o in ops if o.get("f") == "heal"]
    kinds = [k for k in COLORS if any(f[1] == k for f in faults)]
    W, L, R = 1200, 60, 20
    lane_h, top = 12, 30
    strip = top + lane_h * len(kinds)
    ch_top, ch_h = strip + 20, 260
    H = ch_top + ch_h + 50
    ymax = max(1, max(ack), max(err))

    def x(t):
        return L + (t - t_first) / span * (W - L - R)

    def y(v):
        return ch_top + ch_h - v / ymax * ch_h

    e = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">'
         % (W, H), '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="16" font-size="13">%s</text>' % (L, title)]
    for li, k in enumerate(kinds):
        yy = top + li * lane_h
        e.append('<text x="%d" y="%d" text-anchor="end" fill="%s">%s</text>' % (L - 4, yy + 9, COLORS[k], k))
        for f in faults:
            if f[1] != k:
                continue
            x0, x1 = x(f[2]), max(x(f[3]), x(f[2]) + 1.5)
            e.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"/>' % (x0, yy, x1 - x0, lane_h - 2, COLORS[k]))
            e.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" opacity="0.10"/>'
                     % (x0, ch_top, x1 - x0, ch_h, COLORS[k]))
    # axes
    e.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, ch_top + ch_h, W - R, ch_top + ch_h))
    e.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (L, ch_top, L, ch_top + ch_h))
    for v in (0, ymax // 2, ymax):
        e.append('<text x="%d" y="%.1f" text-anchor="end">%d</text>' % (L - 4, y(v) + 4, v))
    step = max(10, int(span / 12 / 10 + 1) * 10)
    for s in range(0, int(span) + 1, step):
        e.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (x(t_first + s), ch_top + ch_h + 14, s))
    e.append('<text x="%d" y="%d" text-anchor="middle">seconds</text>' % ((L + W) // 2, ch_top + ch_h + 30))

    def line(vals, color):
        pts = " ".join("%.1f,%.1f" % (x(t_first + i + 0.5), y(v)) for i, v in enumerate(vals))
        return '<polyline fill="none" stroke="%s" stroke-width="1.2" points="%s"/>' % (color, pts)
    e.append(line(ack, "#2ca02c"))
    e.append(line(err, "#d62728"))
    for h in heal:
        e.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black" stroke-dasharray="4,3"/>'
                 % (x(h), top, x(h), ch_top + ch_h))
        e.append('<text x="%.1f" y="%d">heal</text>' % (x(h) + 3, ch_top + 12))
    ly = H - 10
    e.append('<rect x="%d" y="%d" width="14" height="3" fill="#2ca02c"/><text x="%d" y="%d">acknowledged records / s</text>'
             % (L, ly - 4, L + 18, ly))
    e.append('<rect x="%d" y="%d" width="14" height="3" fill="#d62728"/><text x="%d" y="%d">errors / s (sends, commits, admin, group)</text>'
             % (L + 200, ly - 4, L + 218, ly))
    e.append('<text x="%d" y="%d">bands: faults (start to end), shaded over the chart</text>' % (L + 480, ly))
    e.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(e) + "\n")


def fmt(v):
    return "—" if v is None else "%.2f" % v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("history")
    ap.add_argument("--out", required=True)
    ap.add_argument("--verdict")
    ap.add_argument("--schedule")
    ap.add_argument("--logs")
    ap.add_argument("--session-ms", type=float, default=3000)
    ap.add_argument("--replay", default="")
    ap.add_argument("--topology", default="?")
    a = ap.parse_args()
    ops = load(a.history)
    meta = next((o for o in ops if o.get("f") == "meta"), {})
    topic, parts = meta.get("topic", "chaos"), meta.get("partitions", 1)
    faults = faults_of(ops)
    verdict = json.load(open(a.verdict)) if a.verdict else {}
    vs = verdict.get("summary", {})
    logs = broker_logs(a.logs, meta["t"] - meta["wall"]) if a.logs and "wall" in meta else []
    wins = windows(ops, faults, topic, parts)
    iso = isolated(faults)
    by_kind = collections.defaultdict(list)
    by_kind_iso = collections.defaultdict(list)
    phases = collections.defaultdict(lambda: ([], [], []))
    for w in wins:
        k = w[0][1]
        by_kind[k].append(w[2])
        if (w[0][0], k) in iso:
            by_kind_iso[k].append(w[2])
            sp = split(w, logs)
            if sp:
                for i in range(3):
                    phases[k][i].append(sp[i])
    count = collections.Counter(f[1] for f in faults)
    drains, per_part = [], []
    moving = {}   # broker -> partitions relinquished since its drain began
    for _, b, msg in logs:
        if msg.startswith("draining: asking the controller"):
            moving[b] = 0
        elif b in moving and re.match(r"\S+/\d+: relinquished epoch", msg):
            moving[b] += 1
        m = re.match(r"drain done after (\d+) ms", msg)
        if m:
            drains.append(int(m.group(1)))
            n = moving.pop(b, 0)
            if n:
                per_part.append(int(m.group(1)) / n)
    exits = collections.Counter(str(o.get("rc")) for o in ops if o.get("f") == "broker" and o.get("what") == "exit")
    heal_t = max([o["t"] for o in ops if o.get("f") == "heal"] or [float("inf")])
    late_exits = collections.Counter(str(o.get("rc")) for o in ops if o.get("f") == "broker"
                                     and o.get("what") == "exit" and o["t"] > heal_t)
    fatals = sum(1 for o in ops if o.get("f") == "producer-fatal")
    S = a.session_ms / 1000
    targets = {  # kind -> (median bound, max bound) in seconds
        "kill9": (1.0, 2.0), "controller": (1.0, 2.0),
        "stop": (None, S + 1), "cut": (None, S + 1), "clusterdir": (None, S + 1),
    }
    summary = {
        "seed": vs.get("seed", meta.get("seed")), "topology": a.topology, "replay": a.replay,
        "faults": dict(count), "faults_total": sum(count.values()),
        "acknowledged": vs.get("acknowledged"), "violations": vs.get("violations", {}), "valid": vs.get("valid"),
        "unavailability": {k: stats(v) for k, v in by_kind.items()},
        "unavailability_isolated": {k: stats(v) for k, v in by_kind_iso.items()},
        "phases_isolated": {k: {n: stats(p[i]) for i, n in enumerate(("detection", "takeover", "recovery"))}
                            for k, p in phases.items()},
        "drain_ms": stats(drains), "drain_ms_per_partition": stats(per_part), "broker_exits": dict(exits),
        "broker_exits_after_heal": dict(late_exits), "producer_fatal_errors": fatals,
        "duration_s": round(max(o["t"] for o in ops) - min(o["t"] for o in ops), 1),
    }
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1, sort_keys=True)
    svg_timeline(ops, faults, os.path.join(a.out, "timeline.svg"),
                 "seed %s, %s topology: %d faults, %s acknowledged, %s" % (
                     summary["seed"], a.topology, summary["faults_total"], summary["acknowledged"],
                     "no violation" if summary["valid"] else "VIOLATIONS"))
    v = summary["violations"]
    lines = ["# Chaos campaign, seed %s (%s topology)" % (summary["seed"], a.topology), "",
             "Replay: `%s`" % a.replay, "",
             "![throughput, errors and faults over time](timeline.svg)", "",
             "## Verdict", "",
             "%s: %s operations, %s acknowledged records, %s partitions read back; %s." % (
                 "valid" if summary["valid"] else "**INVALID**", vs.get("operations"), vs.get("acknowledged"),
                 vs.get("final_read_partitions"),
                 ", ".join("%s %d" % (k, n) for k, n in v.items() if n) or "no violation"), "",
             "| lost | duplicated | reordered | other violations |", "| --- | --- | --- | --- |",
             "| %d | %d | %d | %d |" % (v.get("lost", 0), v.get("duplicate", 0), v.get("reorder", 0),
                                      sum(n for k, n in v.items() if k not in ("lost", "duplicate", "reorder"))), "",
             "## Unavailability per fault kind", "",
             "Windows of partitions that went > %.1f s without an acknowledgement after a fault started "
             "(seconds; n = partition windows).  All faults, then isolated faults only (no other fault "
             "within %.0f s), with the target." % (NOISE_S, ISOLATION_S), "",
             "| kind | faults | all: n | median | p99 | max | isolated: n | median | p99 | max | target |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for k in COLORS:
        if k not in count:
            continue
        s, si = stats(by_kind.get(k, [])), stats(by_kind_iso.get(k, []))
        tg = targets.get(k)
        if tg:
            tgs = "median ≤ %.0f s, max ≤ %.0f s" % tg if tg[0] else "max ≤ session + 1 s = %.1f s" % tg[1]
            if si["n"] == 0:
                tgs += " — no isolated window"
            else:
                ok = (tg[0] is None or si["median"] <= tg[0]) and si["max"] <= tg[1]
                tgs += " — met" if ok else " — **missed**"
        else:
            tgs = "—"
        lines.append("| %s | %d | %d | %s | %s | %s | %d | %s | %s | %s | %s |" % (
            k, count[k], s["n"], fmt(s["median"]), fmt(s["p99"]), fmt(s["max"]),
            si["n"], fmt(si["median"]), fmt(si["p99"]), fmt(si["max"]), tgs))
    lines += ["", "## Detection, take-over, recovery (isolated faults, from the brokers' logs)", "",
              "Measured from the start of the window (which may open after the fault: the victim back and its partitions "
              "handed back to it).  detection: → a survivor logs the victim gone or applies a new assignment; "
              "take-over: → the new leader logs `leader at epoch`; recovery: → the first acknowledgement.", "",
              "| kind | n | detection median / max | take-over median / max | recovery median / max |",
              "| --- | --- | --- | --- | --- |"]
    for k, ph in summary["phases_isolated"].items():
        d, t, r = ph["detection"], ph["takeover"], ph["recovery"]
        lines.append("| %s | %d | %s / %s | %s / %s | %s / %s |" % (
            k, d["n"], fmt(d["median"]), fmt(d["max"]), fmt(t["median"]), fmt(t["max"]),
            fmt(r["median"]), fmt(r["max"])))
    dm = summary["drain_ms"]
    dp = summary["drain_ms_per_partition"]
    lines += ["", "Drain (SIGTERM: the controller moves the broker's partitions away): %d drains, median %s ms, "
              "max %s ms; per partition moved (target ≤ 100 ms): %d drains that moved any, median %s ms, max %s ms%s." % (
                  dm["n"], dm["median"], dm["max"], dp["n"], fmt(dp["median"]), fmt(dp["max"]),
                  "" if not dp["n"] else (" — met" if dp["max"] <= 100 else " — **missed**")), "",
              "Broker exits (exit code: count): %s; after the heal, with no fault in force: %s." % (
                  ", ".join("%s: %d" % kv for kv in sorted(exits.items())) or "none",
                  ", ".join("%s: %d" % kv for kv in sorted(late_exits.items())) or "none"), "",
              "Producers ended by a fatal idempotence error (a new producer took over): %d." % fatals, ""]
    with open(os.path.join(a.out, "report.md"), "w") as fh:
        fh.write("\n".join(lines))
    print("report: %s/report.md, timeline.svg, summary.json" % a.out)


if __name__ == "__main__":
    main()
