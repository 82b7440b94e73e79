#!/usr/bin/env python3
"""checker.py — judges a history of Kafka operations, and nothing else.

It shares no code with the broker and trusts nothing the broker says beyond
what a client saw: the history is written by the workload clients (one JSON
object a line, format in docs/reliability.md), and the verdict follows from
it alone.

Properties checked (each violation is printed with the operations around it):

  lost              an acknowledged record is not in the final read of its
                    partition
  duplicate         a record is in the final read more than once
  moved             an acknowledged record is in the final read at another
                    offset than the one its acknowledgement named
  reorder           an idempotent producer's acknowledged records of one
                    partition are not in the log in the order it sent them
  phantom           a consumer saw a value nobody sent
  failed-present    a record whose send failed definitely is in the log
  divergent         a consumer saw, at an offset, another value than the
                    final read has there (two logs for one partition)
  ghost-read        a consumer saw a record the final read of its partition
                    does not hold at all (it read state that was later
                    torn away: never acknowledged, or lost)
  backwards         one consumer's offsets of a partition went backwards
                    within one assignment
  commit-backwards  a group's committed offset of a partition went backwards
                    (between two acknowledged commits, or the offset the
                    group holds at the end is below one it acknowledged)
  double-delivery   two members of one group saw the same record in the same
                    generation
  unavailable       after the last heal, a partition took longer than the
                    bound to acknowledge a record again (or never did)

Usage: checker.py HISTORY [--bound-s S] [--json OUT [--json-max N]]
Exit: 0 no violation, 1 violations, 2 the history cannot be read.
"""
import argparse
import collections
import json
import sys

KINDS = ("lost", "duplicate", "moved", "reorder", "phantom", "failed-present", "divergent",
         "ghost-read", "backwards", "commit-backwards", "double-delivery", "unavailable")


class History:
    """The history, indexed for the checks."""

    def __init__(self, lines):
        self.ops = lines
        self.meta = {}
        self.sends = {}          # value -> {"invoke": op, "outcome": op or None}
        self.final = collections.defaultdict(dict)   # (topic, partition) -> offset -> [ops]
        self.final_parts = set()
        self.polls = []          # consumer observations (not the final read)
        self.commits = []
        self.assigns = []
        self.heals = []
        self.committed = []      # the group's offsets read at the end
        for op in lines:
            f, ty = op.get("f"), op.get("type")
            if f == "meta":
                self.meta.update(op)
            elif f == "send":
                v = op["value"]
                s = self.sends.setdefault(v, {"invoke": None, "outcome": None})
                if ty == "invoke":
                    s["invoke"] = op
                else:
                    # a later definite outcome wins over an earlier "info"
                    if s["outcome"] is None or s["outcome"]["type"] == "info":
                        s["outcome"] = op
            elif f == "read" and ty == "ok":
                key = (op["topic"], op["partition"])
                self.final[key].setdefault(op["offset"], []).append(op)
            elif f == "read-end":
                self.final_parts.add((op["topic"], op["partition"]))
            elif f == "poll" and ty == "ok":
                self.polls.append(op)
            elif f == "commit" and ty == "ok":
                self.commits.append(op)
            elif f == "assign" and ty == "ok":
                self.assigns.append(op)
            elif f == "heal":
                self.heals.append(op)
            elif f == "committed" and ty == "ok":
                self.committed.append(op)


def load(path):
    ops = []
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            try:
                op = json.loads(line)
            except ValueError as e:
                raise ValueError("%s:%d: not JSON: %s" % (path, n, e))
            if not isinstance(op, dict) or "f" not in op:
                raise ValueError("%s:%d: an operation needs an \"f\"" % (path, n))
            op.setdefault("i", n)
            ops.append(op)
    return ops


class Checker:
    def __init__(self, hist, bound_s):
        self.h = hist
        self.bound_s = bound_s
        self.violations = []

    def flag(self, kind, msg, *ops):
        assert kind in KINDS
        self.violations.append({"kind": kind, "message": msg,
                                "ops": sorted({o["i"] for o in ops if o is not None})})

    # -- the log as the final read found it --------------------------------
    def final_value_at(self, topic, partition, offset):
        got = self.h.final.get((topic, partition), {}).get(offset)
        return got[0]["value"] if got else None

    def final_positions(self):
        pos = collections.defaultdict(list)   # value -> [(topic, partition, offset, op)]
        for (t, p), offs in self.h.final.items():
            for off, ops in offs.items():
                for op in ops:
                    pos[op["value"]].append((t, p, off, op))
        return pos

    def check_log(self):
        pos = self.final_positions()
        for v, where in pos.items():
            if len(where) > 1:
                self.flag("duplicate", "%s is in the log %d times (offsets %s)"
                          % (v, len(where), ", ".join("%s-%d@%d" % (t, p, o) for t, p, o, _ in where)),
                          *[w[3] for w in where])
            s = self.h.sends.get(v)
            if s is None or s["invoke"] is None:
                self.flag("phantom", "%s is in the log but was never sent" % v, where[0][3])
            elif s["outcome"] is not None and s["outcome"]["type"] == "fail":
                self.flag("failed-present", "%s is in the log although its send failed (%s)"
                          % (v, s["outcome"].get("error", "?")), s["outcome"], where[0][3])
        for v, s in self.h.sends.items():
            out = s["outcome"]
            if out is None or out["type"] != "ok":
                continue
            key = (out["topic"], out["partition"])
            if key not in self.h.final_parts:
                continue  # the final read did not cover this partition: nothing to say
            where = [w for w in pos.get(v, []) if (w[0], w[1]) == key]
            if not where:
                self.flag("lost", "%s was acknowledged at %s-%d@%d and is not in the log"
                          % (v, key[0], key[1], out["offset"]), s["invoke"], out)
            elif out.get("offset") is not None and out["offset"] >= 0 and \
                    all(w[2] != out["offset"] for w in where):
                self.flag("moved", "%s was acknowledged at offset %d and is in the log at %s"
                          % (v, out["offset"], ", ".join(str(w[2]) for w in where)), out, where[0][3])

    def check_order(self):
        pos = self.final_positions()
        seq = collections.defaultdict(list)   # (proc, topic, partition) -> [(invoke index, value, offset)]
        for v, s in self.h.sends.items():
            inv, out = s["invoke"], s["outcome"]
            if inv is None or out is None or out["type"] != "ok" or not inv.get("idempotent"):
                continue
            key = (out["topic"], out["partition"])
            where = [w for w in pos.get(v, []) if (w[0], w[1]) == key]
            if where:
                seq[(inv["proc"], key[0], key[1])].append((inv["i"], v, where[0][2], inv))
        for (proc, t, p), rows in seq.items():
            rows.sort()
            for a, b in zip(rows, rows[1:]):
                if b[2] <= a[2]:
                    self.flag("reorder", "%s sent %s before %s, but %s-%d has them at %d and %d"
                              % (proc, a[1], b[1], t, p, a[2], b[2]), a[3], b[3])

    # -- what consumers saw --------------------------------------------------
    def check_polls(self):
        last = {}
        seen_in_gen = {}
        held = collections.defaultdict(set)   # (topic, partition) -> values in the final read
        for (t, p), offs in self.h.final.items():
            for ops in offs.values():
                held[(t, p)].update(o["value"] for o in ops)
        for op in self.h.polls:
            t, p, off, v = op["topic"], op["partition"], op["offset"], op["value"]
            s = self.h.sends.get(v)
            if s is None or s["invoke"] is None:
                self.flag("phantom", "%s read %s at %s-%d@%d, which was never sent"
                          % (op["proc"], v, t, p, off), op)
            if (t, p) in self.h.final_parts:
                fv = self.final_value_at(t, p, off)
                if fv is not None and fv != v:
                    self.flag("divergent", "%s read %s at %s-%d@%d; the log has %s there"
                              % (op["proc"], v, t, p, off, fv), op)
                elif v not in held[(t, p)]:
                    s = self.h.sends.get(v) or {}
                    out = s.get("outcome")
                    self.flag("ghost-read", "%s read %s at %s-%d@%d, which the log does not hold (its send: %s)"
                              % (op["proc"], v, t, p, off, out["type"] if out else "no outcome"),
                              op, s.get("invoke"), out)
            k = (op["proc"], op.get("group"), op.get("generation"), op.get("session", 0), t, p)
            prev = last.get(k)
            if prev is not None and off <= prev["offset"]:
                self.flag("backwards", "%s read %s-%d@%d after @%d in one assignment"
                          % (op["proc"], t, p, off, prev["offset"]), prev, op)
            last[k] = op
            g = op.get("group")
            if g is not None and op.get("generation") is not None:
                gk = (g, op["generation"], v)
                other = seen_in_gen.get(gk)
                if other is not None and other["proc"] != op["proc"]:
                    self.flag("double-delivery", "%s and %s of group %s both got %s in generation %s"
                              % (other["proc"], op["proc"], g, v, op["generation"]), other, op)
                seen_in_gen.setdefault(gk, op)

    def check_commits(self):
        last = {}
        for op in self.h.commits:
            k = (op["group"], op["topic"], op["partition"])
            prev = last.get(k)
            if prev is not None and op["offset"] < prev["offset"]:
                self.flag("commit-backwards", "group %s committed %s-%d at %d after %d"
                          % (op["group"], op["topic"], op["partition"], op["offset"], prev["offset"]),
                          prev, op)
            last[k] = op
        for op in self.h.committed:
            k = (op["group"], op["topic"], op["partition"])
            prev = last.get(k)
            if prev is not None and op["offset"] < prev["offset"]:
                self.flag("commit-backwards", "group %s holds %s-%d at %d at the end; %d was acknowledged"
                          % (op["group"], op["topic"], op["partition"], op["offset"], prev["offset"]),
                          prev, op)

    def check_availability(self):
        if not self.h.heals:
            return
        heal = max(self.h.heals, key=lambda o: o["t"])
        th = heal["t"]
        first_ok = {}
        attempted = set()
        for s in self.h.sends.values():
            inv, out = s["invoke"], s["outcome"]
            if inv is None:
                continue
            if inv["t"] >= th and "topic" in inv:
                attempted.add((inv["topic"], inv.get("partition")))
            if out is not None and out["type"] == "ok" and out["t"] >= th:
                k = (out["topic"], out["partition"])
                if k not in first_ok or out["t"] < first_ok[k]["t"]:
                    first_ok[k] = out
        parts = {(t, p) for (t, p) in attempted if p is not None} | set(first_ok)
        for k in sorted(parts):
            got = first_ok.get(k)
            if got is None:
                self.flag("unavailable", "%s-%d acknowledged nothing after the last heal" % k, heal)
            elif got["t"] - th > self.bound_s:
                self.flag("unavailable", "%s-%d took %.2f s after the last heal to acknowledge (bound %.1f s)"
                          % (k[0], k[1], got["t"] - th, self.bound_s), heal, got)

    def run(self):
        self.check_log()
        self.check_order()
        self.check_polls()
        self.check_commits()
        self.check_availability()
        return self.violations


def summary(hist, violations):
    acked = sum(1 for s in hist.sends.values() if s["outcome"] and s["outcome"]["type"] == "ok")
    counts = collections.Counter(v["kind"] for v in violations)
    return {
        "seed": hist.meta.get("seed"),
        "operations": len(hist.ops),
        "sends": len(hist.sends),
        "acknowledged": acked,
        "final_read_partitions": len(hist.final_parts),
        "violations": {k: counts.get(k, 0) for k in KINDS},
        "valid": not violations,
    }


def context(hist, v, width=2):
    idx = {op["i"]: n for n, op in enumerate(hist.ops)}
    rows = set()
    for i in v["ops"]:
        n = idx.get(i)
        if n is None:
            continue
        rows.update(range(max(0, n - width), min(len(hist.ops), n + width + 1)))
    return [hist.ops[n] for n in sorted(rows)]


def main(argv=None):
    ap = argparse.ArgumentParser(description="judge a history of Kafka operations")
    ap.add_argument("history")
    ap.add_argument("--bound-s", type=float, default=10.0,
                    help="how long after the last heal every partition must acknowledge again")
    ap.add_argument("--json", help="write the summary and violations here")
    ap.add_argument("--max-print", type=int, default=20)
    ap.add_argument("--json-max", type=int, default=-1,
                    help="list at most this many violations in --json (the counts stay whole)")
    a = ap.parse_args(argv)
    try:
        hist = History(load(a.history))
    except (OSError, ValueError, KeyError) as e:
        print("checker: %s" % e, file=sys.stderr)
        return 2
    try:
        violations = Checker(hist, a.bound_s).run()
    except KeyError as e:
        print("checker: an operation lacks the field %s" % e, file=sys.stderr)
        return 2
    s = summary(hist, violations)
    for v in violations[:a.max_print]:
        print("VIOLATION %s: %s (seed %s)" % (v["kind"], v["message"], s["seed"]))
        for op in context(hist, v):
            print("    %s" % json.dumps(op, sort_keys=True))
    if len(violations) > a.max_print:
        print("... and %d more" % (len(violations) - a.max_print))
    print("checker: %d operations, %d sends, %d acknowledged, %d partitions read back; %s"
          % (s["operations"], s["sends"], s["acknowledged"], s["final_read_partitions"],
             "no violation" if s["valid"] else ", ".join("%s %d" % (k, n) for k, n in s["violations"].items() if n)))
    if a.json:
        with open(a.json, "w") as fh:
            listed = violations if a.json_max < 0 else violations[:a.json_max]
            json.dump({"summary": s, "violations": listed}, fh, indent=1)
    return 0 if s["valid"] else 1


if __name__ == "__main__":
    sys.exit(main())
