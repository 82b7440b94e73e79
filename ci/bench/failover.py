#!/usr/bin/python3
"""ci/bench/failover.py KAAS WORKDIR OUT.json [--kills N] [--stops N]
[--drains N] [--partitions P] — how long a partition is unavailable when
its leader goes away, on three brokers sharing one directory with the
default timeouts:

  kill     kill -9 of a broker (round robin, the controller included);
  stop     SIGSTOP of a broker past the session timeout (its lease runs
           out; after SIGCONT it exits as designed and is started again);
  drain    SIGTERM of a broker (planned hand-offs).

A probe per partition sends one acks=all batch every PROBE_GAP seconds to
the broker Metadata names as its leader (a fresh connection, a 0.5 s
timeout, Metadata asked again after every failure).  A partition's
unavailability after a fault is the time from its first failed send to
the next acknowledged one.  Each is split with the brokers' own log
timestamps into
  detection  the fault -> the controller publishes the assignment that
             moves the partition (for a drain the old leader serves on
             until it relinquishes: its first failure comes after this),
  take-over  publication -> the new leader starts taking it over (pointer
             poll, the old owner's `released` or proof of death),
  recovery   the take-over itself (open, recovery scan, manifest),
  client     the new leader ready -> the probe's first acknowledged send.
The victim is started again after every fault (its partitions then move
back: planned hand-offs, not counted).  Figures and ratios against the
session timeout and the probe's own round trip measured before the first
fault; nothing is asserted."""
import json
import re
import signal
import statistics
import sys
import threading
import time

sys.path.insert(0, "ci/lib")
sys.path.insert(0, "ci/bench")
import kcluster  # noqa: E402
from bcluster import Cluster, machine, stamp  # noqa: E402
from kproto import Conn, Dec, Enc, record_batch  # noqa: E402

kaas, work, outp = sys.argv[1:4]
args = sys.argv[4:]


def opt(name, default):
    return type(default)(args[args.index(name) + 1]) if name in args else default


KILLS = opt("--kills", 20)
STOPS = opt("--stops", 4)
DRAINS = opt("--drains", 6)
NPART = opt("--partitions", 6)
SESSION_MS = 3000  # the default; reported, not changed
PROBE_GAP = 0.02
TIMEOUT = 0.5
TOPIC = "fo"

# Metadata through a connection that gives up after TIMEOUT (a stopped
# broker accepts connections and never answers).
kcluster.Conn = lambda host, port, timeout=0, **kw: Conn(host, port, timeout=TIMEOUT)

cl = Cluster(kaas, work, 3)
probes = {p: [] for p in range(NPART)}  # (sent, done, ok)
leader_port = {}
stop_probes = threading.Event()
lock = threading.Lock()


def refresh(p):
    ports = sorted(cl.ports.values())
    for k in range(len(ports)):
        port = ports[(p + k) % len(ports)]
        try:
            m = kcluster.metadata(port, [TOPIC])
            b = m["brokers"]
            err, parts = m["topics"][TOPIC]
            if err == 0 and p < len(parts) and parts[p][1] in b:
                leader_port[p] = b[parts[p][1]][1]
                return
        except (OSError, EOFError, KeyError, ValueError):
            continue


def send(port, p):
    c = Conn("127.0.0.1", port, timeout=TIMEOUT)
    try:
        body = (Enc().str(None).i16(-1).i32(int(TIMEOUT * 1000)).array(1).str(TOPIC).array(1).i32(p)
                .bytes(record_batch([b"probe"], ts=int(time.time() * 1000))).done())
        c.send(0, 7, body)
        _, data = c.recv()
        d = Dec(data)
        d.array(); d.str(); d.array(); d.i32()
        return d.i16()
    finally:
        c.s.close()


def probe(p):
    while not stop_probes.is_set():
        if p not in leader_port:
            refresh(p)
        t0 = time.time()
        ok = False
        try:
            ok = p in leader_port and send(leader_port[p], p) == 0
        except (OSError, EOFError, ValueError):
            ok = False
        t1 = time.time()
        with lock:
            probes[p].append((t0, t1, ok))
        if not ok:
            leader_port.pop(p, None)
        time.sleep(PROBE_GAP)


def leaders():
    for i in sorted(cl.ports):
        if not cl.alive(i):
            continue
        try:
            m = kcluster.metadata(cl.ports[i], [TOPIC])
            return m["controller"], [x[1] for x in m["topics"][TOPIC][1]]
        except (OSError, EOFError, KeyError, ValueError):
            continue
    return None, []


def wait(pred, secs):
    end = time.time() + secs
    while time.time() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def acked_since(p, t):
    with lock:
        return any(ok and s >= t for s, _, ok in probes[p])


def settle(secs=30):
    """Every broker alive leads its share again and every partition was
    acknowledged after that."""
    def even():
        ctl, ls = leaders()
        return ctl in cl.ports and len(ls) == NPART and all(
            ls.count(i) in (NPART // 3, -(-NPART // 3)) for i in cl.ports)
    wait(even, secs)
    t = time.time()
    wait(lambda: all(acked_since(p, t) for p in range(NPART)), secs)


faults = []


def fault(kind, victim):
    ctl, ls = leaders()
    affected = [p for p, x in enumerate(ls) if x == victim]
    marks = {i: cl.nlines(i) for i in cl.procs}
    t = time.time()
    if kind == "kill":
        cl.kill(victim)
    elif kind == "stop":
        cl.signal(victim, signal.SIGSTOP)
    else:
        cl.signal(victim, signal.SIGTERM)
    wait(lambda: all(acked_since(p, t + 0.001) for p in affected), 30)
    if kind == "stop":
        cl.signal(victim, signal.SIGCONT)
    rc = cl.wait_exit(victim, 60) if kind != "kill" else -9
    faults.append({"kind": kind, "victim": victim, "controller": ctl, "t": t, "affected": affected,
                   "marks": marks, "exit": rc})
    mark = cl.launch(victim)
    cl.wait_ready(victim, mark)
    settle()


def analyse(f):
    """Per affected partition: unavailability and its split."""
    out = []
    t = f["t"]
    # Every broker's log lines after the fault, with their time.
    pubs, tos = [], {}
    for i, mk in f["marks"].items():
        for ln in cl.lines(i, mk):
            ts = stamp(ln)
            if ts is None or ts < t - 0.05 or ts > t + 30:
                continue
            m = re.search(r"published generation \d+ .*?(\d+) partition\(s\) moved", ln)
            if m and int(m.group(1)) > 0:
                pubs.append(ts)
            m = re.search(r"cluster: %s/(\d+): leader at epoch \d+ \(take-over (\d+) ms" % TOPIC, ln)
            if m and i != f["victim"]:
                q = int(m.group(1))
                if q not in tos or ts < tos[q][0]:  # the first take-over after the fault
                    tos[q] = (ts, int(m.group(2)) / 1000.0)
    pubs.sort()
    for p in f["affected"]:
        with lock:
            ps = [x for x in probes[p] if x[1] >= t and x[0] <= t + 30]
        fails = [x for x in ps if not x[2]]
        if not fails:
            out.append({"partition": p, "unavailable_s": 0.0, "no_failed_send": True})
            continue
        start = max(fails[0][0], t)
        oks = [x for x in ps if x[2] and x[0] >= fails[0][0]]
        if not oks:
            out.append({"partition": p, "unavailable_s": None, "error": "no acknowledged send within 30 s"})
            continue
        end = oks[0][1]
        r = {"partition": p, "unavailable_s": end - start}
        pub = next((x for x in pubs if x >= t - 0.05), None)
        if pub is not None and p in tos:
            led, ms = tos[p]
            r.update({"detection_s": pub - t, "takeover_s": (led - ms) - pub, "recovery_s": ms,
                      "client_s": end - led})
        out.append(r)
    return out


def dist(v):
    v = sorted(x for x in v if x is not None)
    if not v:
        return None
    return {"n": len(v), "median": statistics.median(v), "p90": v[max(0, -(-9 * len(v) // 10) - 1)], "max": v[-1],
            "min": v[0]}


result = {"kind": "failover", "partitions": NPART, "session_ms": SESSION_MS, "probe_gap_s": PROBE_GAP,
          "probe_timeout_s": TIMEOUT, "machine_start": machine()}
threads = []
try:
    cl.start()
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": cl.boot()})
    for fu in a.create_topics([NewTopic(TOPIC, NPART, 1)]).values():
        fu.result(60)
    del a
    threads = [threading.Thread(target=probe, args=(p,), daemon=True) for p in range(NPART)]
    for th in threads:
        th.start()
    settle()
    t_base = time.time()
    time.sleep(3)
    with lock:
        rtts = [e - s for p in probes for s, e, ok in probes[p] if ok and s >= t_base]
    result["probe_rtt_s"] = dist(rtts)
    n = 0
    for k in range(KILLS):
        fault("kill", 1 + n % 3)
        n += 1
    for k in range(STOPS):
        fault("stop", 1 + n % 3)
        n += 1
    for k in range(DRAINS):
        fault("drain", 1 + n % 3)
        n += 1
finally:
    stop_probes.set()
    for th in threads:
        th.join(5)
    cl.stop()

rtt = result["probe_rtt_s"]["median"] if result.get("probe_rtt_s") else None
S = SESSION_MS / 1000.0
for kind in ("kill", "stop", "drain"):
    fs = [f for f in faults if f["kind"] == kind]
    samples = []
    for f in fs:
        for r in analyse(f):
            r["victim"], r["was_controller"] = f["victim"], f["victim"] == f["controller"]
            samples.append(r)
    u = dist([s["unavailable_s"] for s in samples])
    summary = {"faults": len(fs), "samples": samples, "unavailable_s": u}
    for part in ("detection_s", "takeover_s", "recovery_s", "client_s"):
        summary[part] = dist([s.get(part) for s in samples])
    if u:
        summary["median_over_session"] = u["median"] / S
        summary["max_over_session"] = u["max"] / S
        if rtt:
            summary["median_over_probe_rtt"] = u["median"] / rtt
    summary["exits"] = [f["exit"] for f in fs]
    result[kind] = summary
result["machine_end"] = machine()
with open(outp, "w") as f:
    json.dump(result, f, indent=1)
print(json.dumps({k: (v if not isinstance(v, dict) or "samples" not in v else
                      {kk: vv for kk, vv in v.items() if kk != "samples"}) for k, v in result.items()}))
