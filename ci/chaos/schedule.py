#!/usr/bin/env python3
"""schedule.py — a fault campaign's schedule, from its seed alone.

  schedule.py --seed S --faults F --kinds kill9,stop,... [--brokers N] [--mean-gap G] [--isolated R]

Prints one fault a line, in the order the nemesis injects them:

  N AT KIND TARGET HOLD PARAM

  AT      planned start, seconds after the campaign's first fault
  TARGET  a broker number, or "-" (the controller, found when the fault
          starts; every broker for rolling; the server for server, full,
          clusterdir)
  HOLD    seconds the fault lasts (stop, cut, lossy, server, full,
          clusterdir); 0 for the instant ones (kill9, controller, rolling)
  PARAM   lossy: percent of packets dropped; otherwise 0

The kinds are drawn in shuffled rounds, so F faults hold every kind at
least F // len(kinds) times.  About one fault in four starts together with
the one before it (within 0.3 s), and a fault that lasts (a hold) overlaps
whatever starts during it: faults come alone and combined.  Nothing but the
seed and the arguments goes in: the same seed gives the same schedule.
--isolated R appends R rounds of kill9, controller, stop and cut (the last
two held past the session timeout), each 14 s after the one before: the
faults the unavailability targets are about, alone.
"""
import argparse
import random

HOLDS = {  # kind -> (min, max) seconds
    "stop": (0.5, 4.5),       # around the session timeout: sometimes the lease lapses
    "cut": (1.0, 6.0),
    "lossy": (2.0, 6.0),
    "server": (0.5, 5.0),
    "full": (2.0, 6.0),
    "clusterdir": (0.5, 5.0),
}
TARGETED = {"kill9", "stop", "cut", "lossy"}


ISOLATED = ("kill9", "controller", "stop", "cut")
ISOLATED_GAP_S = 14.0


def schedule(seed, faults, kinds, brokers=3, mean_gap=4.0, isolated=0):
    rnd = random.Random(seed)
    out = []
    at = 0.0
    bag = []
    for n in range(faults):
        if not bag:
            bag = list(kinds)
            rnd.shuffle(bag)
        kind = bag.pop()
        if n:
            if rnd.random() < 0.25:
                at += round(rnd.uniform(0.0, 0.3), 2)
            else:
                at += round(rnd.uniform(1.0, 2 * mean_gap - 1.0), 2)
        target = str(rnd.randint(1, brokers)) if kind in TARGETED else "-"
        lo, hi = HOLDS.get(kind, (0, 0))
        hold = round(rnd.uniform(lo, hi), 2) if hi else 0
        param = rnd.choice((20, 35, 50)) if kind == "lossy" else 0
        out.append((n, round(at, 2), kind, target, hold, param))
    # The isolated tail: faults the targets are about, alone, each after
    # the cluster had time to settle (a stop and a cut held past the
    # session timeout, so that the lease is lost).
    n = len(out)
    for r in range(isolated):
        for kind in ISOLATED:
            if kind not in kinds:
                continue
            at += ISOLATED_GAP_S
            target = str(rnd.randint(1, brokers)) if kind in TARGETED else "-"
            hold = {"stop": 4.5, "cut": 5.0}.get(kind, 0)
            out.append((n, round(at, 2), kind, target, hold, 0))
            n += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--faults", type=int, required=True)
    ap.add_argument("--kinds", required=True)
    ap.add_argument("--brokers", type=int, default=3)
    ap.add_argument("--mean-gap", type=float, default=4.0)
    ap.add_argument("--isolated", type=int, default=0,
                    help="rounds of isolated faults (%s) after the mixed ones" % ", ".join(ISOLATED))
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    for row in schedule(a.seed, a.faults, kinds, a.brokers, a.mean_gap, a.isolated):
        print("%d %.2f %s %s %.2f %d" % row)


if __name__ == "__main__":
    main()
