"""failover_gaps.py HISTORY — informational: for every fault event in a
workload history, the longest time any partition went without an
acknowledged send in the 20 s after the fault (its unavailability as the
clients saw it: detection, take-over, recovery and the clients' metadata
refresh).  Prints median and max over faults; asserts nothing."""
import json
import statistics
import sys


def main(path):
    ops = [json.loads(line) for line in open(path) if line.strip()]
    faults = [o["t"] for o in ops if o.get("f") == "fault" and o.get("phase") == "start"]
    oks = sorted((o["t"], o["partition"]) for o in ops if o.get("f") == "send" and o.get("type") == "ok")
    gaps = []
    for ft in faults:
        last, worst = {}, 0.0
        for t, p in oks:
            if t < ft - 1 or t > ft + 20:
                continue
            if p in last:
                worst = max(worst, t - max(last[p], ft))
            last[p] = t
        if last:
            gaps.append(worst)
    if not gaps:
        print("failover: no fault with acknowledged sends after it")
        return
    print("failover (longest gap between acknowledgements of a partition after a fault), %d faults: median %.2f s, max %.2f s"
          % (len(gaps), statistics.median(gaps), max(gaps)))


if __name__ == "__main__":
    main(sys.argv[1])
