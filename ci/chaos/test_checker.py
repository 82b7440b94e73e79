#!/usr/bin/env python3
"""test_checker.py — the history checker finds every violation it names, in
histories made to hold exactly one, and finds nothing in a clean one."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checker  # noqa: E402


def load(path):
    with open(path) as fh:
        return json.load(fh)


class H:
    """Builds a history the way the workload writes one."""

    def __init__(self):
        self.ops = [{"f": "meta", "seed": 42}]
        self.t = 0.0

    def op(self, **kw):
        self.t += 0.01
        kw.setdefault("t", self.t)
        self.ops.append(kw)
        return self

    def send(self, proc, value, topic, part, offset, outcome="ok", idem=True, error=None):
        self.op(f="send", type="invoke", proc=proc, value=value, topic=topic, partition=part, idempotent=idem)
        out = {"f": "send", "type": outcome, "proc": proc, "value": value, "topic": topic, "partition": part}
        if outcome == "ok":
            out["offset"] = offset
        if error:
            out["error"] = error
        return self.op(**out)

    def read(self, topic, part, values):
        for off, v in values:
            self.op(f="read", type="ok", proc="final", topic=topic, partition=part, offset=off, value=v)
        return self.op(f="read-end", proc="final", topic=topic, partition=part)

    def check(self, bound_s=5.0):
        for n, op in enumerate(self.ops, 1):
            op["i"] = n
        hist = checker.History(self.ops)
        return sorted({v["kind"] for v in checker.Checker(hist, bound_s).run()})


def clean():
    h = H()
    h.send("p1", "a", "t", 0, 0).send("p1", "b", "t", 0, 1).send("p2", "c", "t", 1, 0)
    h.op(f="poll", type="ok", proc="c1", group="g", generation=1, topic="t", partition=0, offset=0, value="a")
    h.op(f="poll", type="ok", proc="c1", group="g", generation=1, topic="t", partition=0, offset=1, value="b")
    h.op(f="commit", type="ok", proc="c1", group="g", topic="t", partition=0, offset=2)
    h.read("t", 0, [(0, "a"), (1, "b")]).read("t", 1, [(0, "c")])
    return h


class TestChecker(unittest.TestCase):
    def test_clean_history_passes(self):
        self.assertEqual(clean().check(), [])

    def test_lost(self):
        h = H().send("p1", "a", "t", 0, 0).send("p1", "b", "t", 0, 1).read("t", 0, [(0, "a")])
        self.assertEqual(h.check(), ["lost"])

    def test_unacknowledged_absence_is_fine(self):
        h = H().send("p1", "a", "t", 0, 0).send("p1", "b", "t", 0, None, outcome="info", error="timed out")
        self.assertEqual(h.read("t", 0, [(0, "a")]).check(), [])

    def test_duplicate(self):
        h = H().send("p1", "a", "t", 0, 0).read("t", 0, [(0, "a"), (1, "a")])
        self.assertEqual(h.check(), ["duplicate"])

    def test_moved(self):
        h = H().send("p1", "x", "t", 0, 0).send("p1", "a", "t", 0, 5).read("t", 0, [(0, "x"), (1, "a")])
        self.assertIn("moved", h.check())

    def test_reorder(self):
        h = H().send("p1", "a", "t", 0, 1).send("p1", "b", "t", 0, 0).read("t", 0, [(0, "b"), (1, "a")])
        self.assertIn("reorder", h.check())

    def test_reorder_not_claimed_for_a_plain_producer(self):
        h = H().send("p1", "a", "t", 0, 1, idem=False).send("p1", "b", "t", 0, 0, idem=False)
        self.assertEqual(h.read("t", 0, [(0, "b"), (1, "a")]).check(), [])

    def test_phantom(self):
        h = H().send("p1", "a", "t", 0, 0).read("t", 0, [(0, "a"), (1, "zz")])
        self.assertEqual(h.check(), ["phantom"])

    def test_failed_present(self):
        h = H().send("p1", "a", "t", 0, None, outcome="fail", error="RECORD_TOO_LARGE")
        self.assertEqual(h.read("t", 0, [(0, "a")]).check(), ["failed-present"])

    def test_divergent(self):
        h = H().send("p1", "a", "t", 0, 0).send("p1", "b", "t", 0, 1)
        h.op(f="poll", type="ok", proc="c1", topic="t", partition=0, offset=0, value="b")
        self.assertIn("divergent", h.read("t", 0, [(0, "a"), (1, "b")]).check())

    def test_backwards(self):
        h = H().send("p1", "a", "t", 0, 0).send("p1", "b", "t", 0, 1)
        h.op(f="poll", type="ok", proc="c1", topic="t", partition=0, offset=1, value="b")
        h.op(f="poll", type="ok", proc="c1", topic="t", partition=0, offset=0, value="a")
        self.assertEqual(h.read("t", 0, [(0, "a"), (1, "b")]).check(), ["backwards"])

    def test_rereading_after_a_new_assignment_is_not_backwards(self):
        h = H().send("p1", "a", "t", 0, 0).send("p1", "b", "t", 0, 1)
        h.op(f="poll", type="ok", proc="c1", group="g", generation=1, topic="t", partition=0, offset=1, value="b")
        h.op(f="poll", type="ok", proc="c1", group="g", generation=2, topic="t", partition=0, offset=0, value="a")
        self.assertEqual(h.read("t", 0, [(0, "a"), (1, "b")]).check(), [])

    def test_commit_backwards(self):
        h = clean()
        h.op(f="commit", type="ok", proc="c1", group="g", topic="t", partition=0, offset=1)
        self.assertEqual(h.check(), ["commit-backwards"])

    def test_ghost_read(self):
        # a consumer saw a record that a fault then tore out of the log
        h = H().send("p1", "a", "t", 0, 0).send("p1", "b", "t", 0, None, outcome="info", error="timed out")
        h.op(f="poll", type="ok", proc="c1", topic="t", partition=0, offset=1, value="b")
        self.assertEqual(h.read("t", 0, [(0, "a")]).check(), ["ghost-read"])

    def test_committed_at_the_end_below_an_acknowledged_commit(self):
        h = clean()
        h.op(f="committed", type="ok", proc="final", group="g", topic="t", partition=0, offset=2)
        self.assertEqual(h.check(), [])
        h.op(f="committed", type="ok", proc="final", group="g", topic="t", partition=0, offset=0)
        self.assertEqual(h.check(), ["commit-backwards"])

    def test_double_delivery(self):
        h = H().send("p1", "a", "t", 0, 0)
        h.op(f="poll", type="ok", proc="c1", group="g", generation=3, topic="t", partition=0, offset=0, value="a")
        h.op(f="poll", type="ok", proc="c2", group="g", generation=3, topic="t", partition=0, offset=0, value="a")
        self.assertEqual(h.read("t", 0, [(0, "a")]).check(), ["double-delivery"])

    def test_unavailable_after_heal(self):
        h = H().send("p1", "a", "t", 0, 0)
        h.op(f="heal")
        h.op(f="send", type="invoke", proc="p1", value="b", topic="t", partition=0, idempotent=True)
        h.t += 30
        h.op(f="send", type="ok", proc="p1", value="b", topic="t", partition=0, offset=1)
        self.assertEqual(h.read("t", 0, [(0, "a"), (1, "b")]).check(bound_s=5), ["unavailable"])
        self.assertEqual(h.check(bound_s=60), [])

    def test_the_command_line(self):
        with tempfile.TemporaryDirectory() as d:
            good, bad, out = (os.path.join(d, n) for n in ("good", "bad", "out.json"))
            with open(good, "w") as fh:
                fh.write("\n".join(json.dumps(o) for o in clean().ops) + "\n")
            lost = H().send("p1", "a", "t", 0, 0).read("t", 0, [])
            with open(bad, "w") as fh:
                fh.write("\n".join(json.dumps(o) for o in lost.ops) + "\n")
            self.assertEqual(checker.main([good, "--json", out]), 0)
            self.assertTrue(load(out)["summary"]["valid"])
            self.assertEqual(checker.main([bad, "--json", out]), 1)
            self.assertEqual(load(out)["summary"]["violations"]["lost"], 1)
            with open(bad, "w") as fh:
                fh.write("{not json\n")
            self.assertEqual(checker.main([bad]), 2)


if __name__ == "__main__":
    unittest.main(verbosity=1)
