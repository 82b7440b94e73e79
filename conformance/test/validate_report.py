#!/usr/bin/python3
"""validate_report.py REPORT.json [--stamp STAMP.json]

Checks a kaas-conform JSON report (and optionally a qualification stamp)
against the schema documented in docs/formats.md: required members, their
types, the verdict vocabulary, and the rules that tie them together (the
overall verdict is the worst check verdict, exit_code follows the verdict,
a scratch directory left behind makes the verdict ERROR).
Exits non-zero naming the first problem."""
import json
import shlex
import sys

VERDICTS = ["PASS", "UNPROVEN", "WARN", "REFUSED", "FAIL", "ERROR"]
EXIT = {"PASS": 0, "UNPROVEN": 0, "WARN": 0, "FAIL": 1, "ERROR": 2, "REFUSED": 3}
BY = ("power-loss-cmd", "crash-cmd", "writer-kill", "none")


def durability(d, where):
    need(d, "proven", bool, where)
    if need(d, "by", str, where) not in BY:
        raise SystemExit(f"{where}.by: {d['by']!r}")
    need(d, "statement", str, where)
    if d["proven"] and d["by"] != "power-loss-cmd":
        raise SystemExit(f"{where}: proven without a power-loss hook")
CHECKS = ["preflight", "rename", "excl", "cto", "unlink-open", "fsync", "rename-copy", "perf",
          "enospc"]
# a stamp needs these; perf is opt-in
STAMP_CHECKS = [c for c in CHECKS if c not in ("perf", "enospc")]
# The counters formats.md lists per check, present in every report of a
# check that ran to the end ({v}: each variant).
READER = ["reads", "ok", "versions", "reads_after_stop", "missing", "read_enoent", "empty", "short", "long", "torn",
          "backwards", "errors", "estale_open", "estale_read", "renames", "rename_errors",
          "write_errors", "hold_errors", "not_converged", "readers_idle", "final_version"]
CTO = ["reads", "ok", "stale", "short", "long", "torn", "empty", "missing", "future",
       "errors", "write_errors", "estale", "not_converged"]
# Schema 2: checks whose verdict comes from a sample report its detection
# power; the others look once.
SAMPLED = ["rename", "excl", "cto"]
COUNTS = {
    "preflight": ["refused", "warnings"],
    "rename": [f"{v}.{k}" for v in ("plain", "held") for k in READER] +
              [f"dir.{k}" for k in ("renames", "rename_errors", "rounds", "listings",
                                    "complete", "partial", "absent", "both_present",
                                    "neither_present", "estale", "errors",
                                    "not_converged", "readers_idle")],
    "excl": ["rounds", "racers", "one_winner", "multi_winner", "no_winner", "loser_eexist",
             "loser_eperm", "loser_other", "content_mismatch", "winner_write_errors",
             "loser_own_content"],
    "cto": [f"{v}.{k}" for v in ("same", "grow", "renamed") for k in CTO],
    "unlink-open": ["hidden_while_open", "hidden_after_close", "rmdir_after_close_failed",
                    "space_not_freed", "space_unknown", "space_attempts"],
    "fsync": ["interposed_actors", "raw_fsync_ns", "libc_fsync_ns", "open_ns", "create_ns",
              "lookup_ns", "getattr_ns", "round_trip_ns",
              "samples", "fast_fsync", "libc_faster", "crash_bytes", "crash_lost",
              "crash_bytes_lost", "crash_cmd", "power_loss_cmd", "unproven"],
    "perf": ["fsync_p99_us", "target_fsync_p99_us", "target_mibps_x100", "strict",
             "append_4k_p99_us", "mibps_1m_x100", "creates_per_s", "renames_per_s", "unlinks_per_s"],
    "enospc": ["surfaced_at_write", "surfaced_at_fsync", "deferred_to_close", "acked_lost",
               "small_written", "small_lost"],
    "rename-copy": ["ratio_x100", "time_grows", "inode_changed", "old_fd_broken",
                    "content_mismatch", "rename_errors"],
}
IDENTITY = ["backend", "fstype", "fs_magic", "fsid", "source", "options", "mountpoint",
            "root", "volume_key"]


def need(obj, key, typ, where):
    if not isinstance(obj, dict) or key not in obj:
        raise SystemExit(f"{where}: missing '{key}'")
    v = obj[key]
    ok = isinstance(v, typ) and not (typ is int and isinstance(v, bool))
    if not ok:
        raise SystemExit(f"{where}.{key}: expected {typ.__name__}, got {type(v).__name__}")
    return v


def identity(obj, where):
    for k in IDENTITY:
        need(obj, k, str, where)
    if not obj["fs_magic"].startswith("0x"):
        raise SystemExit(f"{where}.fs_magic: not hex")


KINDS = ["process", "agent"]


def actors(act, where):
    """The actors object of a report or stamp: the run's kind is its
    actors' kind; an agent actor names its agent, a forked one has none."""
    n = need(act, "count", int, where)
    kind = need(act, "kind", str, where)
    need(act, "clients", int, where)
    need(act, "distinct_clients", bool, where)
    need(act, "hosts", int, where)
    need(act, "distinct_hosts", bool, where)
    lst = need(act, "list", list, where)
    if len(lst) != n:
        raise SystemExit(f"{where}: count and list disagree")
    kinds = set()
    for i, a in enumerate(lst):
        w = f"{where}.list[{i}]"
        if need(a, "index", int, w) != i:
            raise SystemExit(f"{w}: index out of order")
        for k in ("kind", "url", "host", "client", "backend"):
            need(a, k, str, w)
        need(a, "pid", int, w)
        if a["kind"] not in KINDS:
            raise SystemExit(f"{w}.kind: {a['kind']!r} is not one of {KINDS}")
        if (a["kind"] == "agent") != ("agent" in a):
            raise SystemExit(f"{w}: an agent actor names its agent, a process has none")
        if "agent" in a:
            need(a, "agent", str, w)
        kinds.add(a["kind"])
    if not kinds and kind not in KINDS:
        raise SystemExit(f"{where}.kind: {kind!r} is not one of {KINDS}")
    want = kinds.pop() if len(kinds) == 1 else ("mixed" if kinds else kind)
    if kind != want:
        raise SystemExit(f"{where}.kind: {kind!r}, but the actors are {want!r}")
    return n


def report(r):
    if need(r, "schema_version", int, "report") != 2:
        raise SystemExit("report: unknown schema_version")
    det = need(r, "detection", dict, "report")
    rate = need(det, "rate", float, "detection")
    target = need(det, "target_power", float, "detection")
    needed = need(det, "needed", int, "detection")
    if not (0 < rate < 1 and 0 < target < 1 and needed >= 1):
        raise SystemExit("detection: rate, target_power or needed out of range")
    need(r, "tool", str, "report")
    need(r, "tool_version", str, "report")
    verdict = need(r, "verdict", str, "report")
    if verdict not in VERDICTS:
        raise SystemExit(f"report: bad verdict {verdict}")
    dur = need(r, "durability", dict, "report")
    durability(dur, "durability")
    required = need(dur, "required", bool, "durability")
    want_exit = 4 if verdict == "UNPROVEN" and required else EXIT[verdict]
    if need(r, "exit_code", int, "report") != want_exit:
        raise SystemExit("report: exit_code does not follow the verdict")
    if verdict == "ERROR":
        need(r, "error", str, "report")
    sub = need(r, "substrate", dict, "report")
    need(sub, "url", str, "substrate")
    for m in need(sub, "mounts", list, "substrate"):
        if not isinstance(m, str):
            raise SystemExit("substrate.mounts: not strings")
    identity(need(sub, "identity", dict, "substrate"), "substrate.identity")
    act = need(r, "actors", dict, "report")
    n = actors(act, "actors")
    if not 1 <= act["clients"] <= max(n, 1):
        raise SystemExit("actors: count/list/clients disagree")
    seed = need(r, "seed", int, "report")
    if not 0 <= seed < 2**53:
        raise SystemExit("report: seed out of range")
    need(r, "iterations", int, "report")
    need(r, "started_at", str, "report")
    need(r, "duration_ms", int, "report")
    worst = "PASS"
    names = []
    for i, c in enumerate(need(r, "checks", list, "report")):
        w = f"checks[{i}]"
        name = need(c, "name", str, w)
        if name not in CHECKS or name in names:
            raise SystemExit(f"{w}: bad or repeated name {name}")
        names.append(name)
        need(c, "guarantee", str, w)
        v = need(c, "verdict", str, w)
        if v not in VERDICTS:
            raise SystemExit(f"{w}: bad verdict {v}")
        if VERDICTS.index(v) > VERDICTS.index(worst):
            worst = v
        need(c, "summary", str, w)
        need(c, "duration_ms", int, w)
        need(c, "iterations", int, w)
        counts = need(c, "counts", dict, w)
        for k, val in counts.items():
            if not isinstance(val, int) or isinstance(val, bool):
                raise SystemExit(f"{w}.counts.{k}: not an integer")
        if v != "ERROR":
            for k in COUNTS[name]:
                if k not in counts:
                    raise SystemExit(f"{w}.counts: missing documented counter '{k}'")
        total = need(c, "anomalies_total", int, w)
        an = need(c, "anomalies", list, w)
        if len(an) > 10 or len(an) > total:
            raise SystemExit(f"{w}: more anomalies listed than counted")
        for j, a in enumerate(an):
            aw = f"{w}.anomalies[{j}]"
            need(a, "kind", str, aw)
            need(a, "actor", int, aw)
            need(a, "iteration", int, aw)
            need(a, "detail", str, aw)
            trace = need(a, "trace", list, aw)
            if not trace:
                raise SystemExit(f"{aw}.trace: an anomaly comes with its operation trace")
            for t in trace:
                if not isinstance(t, str):
                    raise SystemExit(f"{aw}.trace: not strings")
            if "variant" in a:
                need(a, "variant", str, aw)
        for nt in need(c, "notes", list, w):
            if not isinstance(nt, str):
                raise SystemExit(f"{w}.notes: not strings")
        prof = need(c, "profile", dict, w)
        if v == "UNPROVEN" and name != "fsync":
            raise SystemExit(f"{w}: only fsync can be UNPROVEN")
        if name == "fsync" and v in ("PASS", "UNPROVEN"):
            durability(need(prof, "durability", dict, f"{w}.profile"), f"{w}.profile.durability")
            if (v == "PASS") != prof["durability"]["proven"]:
                raise SystemExit(f"{w}: PASS exactly when durability was proven")
        if name == "preflight":
            for k, ident in enumerate(need(prof, "identities", list, f"{w}.profile")):
                iw = f"{w}.profile.identities[{k}]"
                need(ident, "decided_by", str, iw)
                for li, layer in enumerate(need(ident, "layers", list, iw)):
                    need(layer, "role", str, f"{iw}.layers[{li}]")
                    need(layer, "depth", int, f"{iw}.layers[{li}]")
                    need(layer, "path", str, f"{iw}.layers[{li}]")
        cd = need(c, "detection", dict, w)
        kind = need(cd, "kind", str, f"{w}.detection")
        if kind != ("sampled" if name in SAMPLED else "single"):
            raise SystemExit(f"{w}.detection.kind: {kind!r}")
        if kind == "sampled":
            dw = f"{w}.detection"
            need(cd, "observation", str, dw)
            obs = need(cd, "observations", int, dw)
            pw = need(cd, "power", float, dw) if obs > 0 else cd.get("power")
            if need(cd, "meets_target", bool, dw) != (pw >= target):
                raise SystemExit(f"{dw}: meets_target disagrees with power {pw} and target {target}")
            if obs >= needed and not cd["meets_target"] and v != "ERROR":
                raise SystemExit(f"{dw}: {obs} observations ({needed} needed) yet below target")
            if v != "ERROR" and name in ("rename", "cto"):
                per = need(prof, "per_reader", dict, f"{w}.profile")
                for var, readers in per.items():
                    stuck = 0
                    for k, rd in enumerate(readers):
                        rw = f"{w}.profile.per_reader.{var}[{k}]"
                        need(rd, "actor", int, rw)
                        need(rd, "reads", int, rw)
                        verdict_r = need(rd, "verdict", str, rw)
                        if verdict_r not in ("converged", "not_converged", "idle"):
                            raise SystemExit(f"{rw}.verdict: {verdict_r!r}")
                        stuck += verdict_r == "not_converged"
                    if counts.get(f"{var}.not_converged") != stuck:
                        raise SystemExit(f"{w}: {var}.not_converged is not the number of readers that did not converge")
                    if stuck and v != "FAIL":
                        raise SystemExit(f"{w}: a reader did not converge, yet the verdict is {v}")
        if v in ("FAIL", "WARN") and name != "preflight":
            need(c, "reproduce", str, w)
        if "reproduce" in c:
            cmd = need(c, "reproduce_command", str, w)
            try:
                argv = shlex.split(cmd)
            except ValueError as e:
                raise SystemExit(f"{w}.reproduce_command: not a shell command ({e})")
            if argv[:3] != ["kaas-conform", "check", sub["url"]]:
                raise SystemExit(f"{w}.reproduce_command: does not check {sub['url']!r}: {argv[:3]}")
            if argv[-2:] != ["--checks", name] and ["--checks", name] != argv[-4:-2]:
                raise SystemExit(f"{w}.reproduce_command: does not name the check")
            if str(r["seed"]) not in argv:
                raise SystemExit(f"{w}.reproduce_command: not the run's seed")
        if v == "ERROR":
            need(c, "error", str, w)
    if [x for x in CHECKS if x in names] != names:
        raise SystemExit("checks: not in the documented order")
    cl = need(r, "cleanup", dict, "report")
    for i, lo in enumerate(need(cl, "leftovers", list, "cleanup")):
        need(lo, "name", str, f"cleanup.leftovers[{i}]")
        need(lo, "age_ms", int, f"cleanup.leftovers[{i}]")
        need(lo, "why", str, f"cleanup.leftovers[{i}]")
        if need(lo, "state", str, f"cleanup.leftovers[{i}]") not in ("removed", "left", "live"):
            raise SystemExit(f"cleanup.leftovers[{i}].state: {lo['state']!r}")
    if "cluster_dir" in r:
        cd = need(r, "cluster_dir", dict, "report")
        need(cd, "volume_key", str, "cluster_dir")
        if need(cd, "verdict", str, "cluster_dir") not in ("PASS", "WARN", "REFUSED"):
            raise SystemExit(f"cluster_dir.verdict: {cd['verdict']!r}")
    if need(cl, "ok", bool, "cleanup"):
        if "left" in cl or "error" in cl:
            raise SystemExit("cleanup: ok, yet it names something left behind")
    else:
        need(cl, "left", str, "cleanup")
        need(cl, "error", str, "cleanup")
        if verdict != "ERROR":
            raise SystemExit(f"report: the scratch directory was left behind, but the verdict is {verdict}")
    # --require-power-loss: an unproven fsync is the verdict over warnings
    if verdict == "UNPROVEN" and required and worst in ("UNPROVEN", "WARN"):
        worst = verdict
    if verdict != "ERROR" and worst != verdict:
        raise SystemExit(f"report: verdict {verdict} but the worst check is {worst}")


def stamp(s):
    if need(s, "kind", str, "stamp") != "kaas-qualification":
        raise SystemExit("stamp: wrong kind")
    if need(s, "schema_version", int, "stamp") != 2:
        raise SystemExit("stamp: unknown schema_version")
    durability(need(s, "durability", dict, "stamp"), "stamp.durability")
    need(s, "tool", str, "stamp")
    need(s, "tool_version", str, "stamp")
    if need(s, "verdict", str, "stamp") not in ("PASS", "UNPROVEN"):
        raise SystemExit("stamp: a stamp is only written on PASS or UNPROVEN")
    identity(need(s, "volume", dict, "stamp"), "stamp.volume")
    actors(need(s, "actors", dict, "stamp"), "stamp.actors")
    got = [need(c, "name", str, "stamp.checks") for c in need(s, "checks", list, "stamp")]
    if sorted(x for x in got if x not in ("perf", "enospc")) != sorted(STAMP_CHECKS):
        raise SystemExit("stamp: not every check recorded")
    if ("perf" in got) != ("perf" in s):
        raise SystemExit("stamp: the perf check ran but its figures are not recorded (or the reverse)")
    for c in s["checks"]:
        cv = need(c, "verdict", str, "stamp.checks")
        if cv != "PASS" and not (c["name"] == "fsync" and cv == "UNPROVEN"):
            raise SystemExit("stamp: a check is not PASS")
        need(c, "summary", str, "stamp.checks")
    need(s, "seed", int, "stamp")
    need(s, "iterations", int, "stamp")
    need(s, "qualified_at", str, "stamp")
    need(s, "qualified_at_ms", int, "stamp")
    need(s, "host", str, "stamp")
    need(s, "url", str, "stamp")


def main():
    args = sys.argv[1:]
    if len(args) == 3 and args[1] == "--stamp":
        stamp(json.load(open(args[2])))
        args = args[:1]
    if len(args) != 1:
        raise SystemExit(__doc__)
    report(json.load(open(args[0])))


if __name__ == "__main__":
    main()
