#!/usr/bin/python3
"""ci/bench/control.py KAAS WORKDIR OUT.json [--partitions N] [--topics T]
[--idle-secs S] — what the control plane costs at N partitions (default
10 000 in 10 topics) on three brokers sharing one directory:

  idle     for S seconds with nothing changing, per broker: bytes read
           through read(2)/pread(2) (/proc/PID/io rchar: no client is
           connected, so this is the volume; directory listings are not
           in it), read and write calls, CPU share;
  kill     kill -9 of a broker that is not the controller: kill -> the
           controller publishes the new generation -> every moved
           partition taken over (the survivors' take-over log lines);
  rejoin   that broker started again: its share moves back once it has
           watched its peers for a session (planned hand-offs: the old
           owners relinquish, it takes over): publication -> all taken.

Times come from the brokers' own log timestamps.  Prints one JSON line and
writes it to OUT.json.  Figures, never asserts."""
import json
import re
import sys
import time

sys.path.insert(0, "ci/lib")
sys.path.insert(0, "ci/bench")
from bcluster import Cluster, machine, proc_io  # noqa: E402
from kcluster import metadata  # noqa: E402

kaas, work, outp = sys.argv[1:4]
args = sys.argv[4:]


def opt(name, default):
    return type(default)(args[args.index(name) + 1]) if name in args else default


NPARTS = opt("--partitions", 10000)
NTOPICS = opt("--topics", 10)
IDLE = opt("--idle-secs", 65.0)
SESSION = opt("--session-ms", 3000)
TOPICS = ["ctl%d" % t for t in range(NTOPICS)]


def wait_for(what, pred, secs):
    end = time.time() + secs
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise SystemExit("control.py: timed out waiting for %s" % what)


def leaders(port):
    """{broker: partitions it leads} as broker `port` answers Metadata, or
    None while some partition has no live leader."""
    try:
        m = metadata(port, TOPICS)
    except OSError:
        return None
    count = {}
    for _, (err, parts) in m["topics"].items():
        if err:
            return None
        for perr, leader, _ in parts:
            if perr or leader < 0:
                return None
            count[leader] = count.get(leader, 0) + 1
    return count


cl = Cluster(kaas, work, 3, ["broker.session.timeout.ms=%d" % SESSION])
result = {"kind": "control", "partitions": NPARTS, "topics": NTOPICS, "brokers": 3, "session_ms": SESSION,
          "machine_start": machine()}
try:
    cl.start()
    marks = {i: cl.nlines(i) for i in cl.procs}
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": cl.boot(), "socket.timeout.ms": 300000})
    per = NPARTS // NTOPICS
    t0 = time.time()
    # One topic per request: a loaded machine may need long for each.
    for t in TOPICS:
        for f in a.create_topics([NewTopic(t, per, 1)], operation_timeout=300, request_timeout=300).values():
            f.result(600)
    del a  # it would keep reconnecting to the broker killed below

    def converged():
        c = leaders(cl.ports[1])
        if not c or sum(c.values()) != per * NTOPICS:
            return None
        return c if all(cl.ntaken(i, marks[i]) >= c.get(i, 0) for i in cl.procs) else None
    c = wait_for("the first assignment taken over", converged, 900)
    last = max(x[0] for i in cl.procs for x in cl.takeovers(i, marks[i]))
    result["create"] = {"secs_to_all_led": last - t0, "leaders": {str(k): v for k, v in c.items()}}
    time.sleep(3)

    # ---- idle ----
    idle_marks = {i: cl.nlines(i) for i in cl.procs}
    a0 = {i: proc_io(cl.procs[i].pid) for i in cl.procs}
    time.sleep(IDLE)
    a1 = {i: proc_io(cl.procs[i].pid) for i in cl.procs}
    # The loop's own account of a pass (logged every 30 s): the last one
    # logged in the idle window covers 30 s of it.
    loop = {}
    for i in cl.procs:
        for ln in cl.lines(i, idle_marks[i]):
            m = re.search(r"cluster: loop: (\d+) passes in \d+ ms, per pass (\d+) us \(membership (\d+), "
                          r"assignment (\d+), controller (\d+), driver (\d+), leaders (\d+)\); balances (\d+), "
                          r"skipped (\d+)", ln)
            if m:
                v = [int(x) for x in m.groups()]
                loop[str(i)] = dict(zip(("passes", "pass_us", "membership_us", "assignment_us", "controller_us",
                                         "driver_us", "leaders_us", "balances", "balances_skipped"), v))
    result["idle_loop"] = loop
    ctl = metadata(cl.ports[1])["controller"]
    result["idle_secs"] = IDLE
    result["idle"] = {str(i): {"bytes_per_s": (a1[i]["rchar"] - a0[i]["rchar"]) / IDLE,
                               "reads_per_s": (a1[i]["syscr"] - a0[i]["syscr"]) / IDLE,
                               "writes_per_s": (a1[i]["syscw"] - a0[i]["syscw"]) / IDLE,
                               "cpu_share": (a1[i]["cpu"] - a0[i]["cpu"]) / IDLE,
                               "controller": i == ctl} for i in cl.procs}
    result["machine_idle"] = machine()

    if "--idle-only" in args:
        raise SystemExit(0)

    # ---- kill -9 of a broker that is not the controller ----
    victim = 3 if ctl != 3 else 2
    moved = c.get(victim, 0)
    survivors = [i for i in cl.procs if i != victim]
    marks = {i: cl.nlines(i) for i in cl.procs}
    tk = time.time()
    cl.kill(victim)
    wait_for("the victim's partitions taken over", lambda: sum(cl.ntaken(i, marks[i]) for i in survivors) >= moved,
             600)
    pubs = [p for p in cl.published(ctl, marks[ctl]) if p[2] > 0]
    tos = [x[0] for i in survivors for x in cl.takeovers(i, marks[i])]
    result["kill"] = {"victim": victim, "moved": moved, "kill_to_publish_s": pubs[0][0] - tk if pubs else None,
                      "publish_to_all_led_s": max(tos) - pubs[0][0] if pubs else None,
                      "kill_to_all_led_s": max(tos) - tk}

    # ---- the victim back: its share moves back to it ----
    marks = {i: cl.nlines(i) for i in cl.procs}
    tr = time.time()
    cl.launch(victim)
    cl.wait_ready(victim, marks[victim])

    def back():
        c2 = leaders(cl.ports[ctl])
        return c2 and c2.get(victim, 0) > 0 and cl.ntaken(victim, marks[victim]) >= c2[victim] and c2
    c2 = wait_for("partitions moved back", back, 600)
    pubs = [p for p in cl.published(ctl, marks[ctl]) if p[2] > 0]
    tos = [x[0] for x in cl.takeovers(victim, marks[victim])]
    result["rejoin"] = {"moved": c2[victim], "restart_to_publish_s": pubs[0][0] - tr if pubs else None,
                        "publish_to_all_led_s": max(tos) - pubs[0][0] if pubs else None,
                        "per_partition_ms": 1000 * (max(tos) - pubs[0][0]) / c2[victim] if pubs else None}
    result["machine_end"] = machine()
finally:
    cl.stop()
    print(json.dumps(result))
    with open(outp, "w") as f:
        json.dump(result, f, indent=1)
