#!/usr/bin/env python3
"""partitions.py — one broker leading many partitions (run by partitions.sh).

For each partition count: a fresh data directory, one broker, the topics
created by a client through CreateTopics (100 partitions a topic), the
broker restarted, a produce served to a sample of partitions, and what that
cost: descriptors and RSS of the broker after the creation and after the
restart, start-up time (exec to "listening"), shutdown time, how many
partitions Metadata reports led.  Figures and ratios only; nothing here
asserts a speed.  A count that does not fit is reported with what happened
(the broker's own words) rather than failing the run.

usage: partitions.py KAAS WORKDIR OUT_JSON COUNT... [--nofile N]
"""
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from kproto import Conn, Enc, Dec, record_batch  # noqa: E402

PER_TOPIC = 100
START_TIMEOUT = 1800
SAMPLE = 100


def proc_figures(pid):
    fds = len(os.listdir("/proc/%d/fd" % pid))
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return fds, rss


class Broker:
    def __init__(self, kaas, data, log, nofile):
        self.kaas, self.data, self.log, self.nofile = kaas, data, log, nofile
        self.p = None
        self.port = None

    def start(self):
        """(seconds from exec to 'listening', None) or (None, why)."""
        start_at = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        out = open(self.log, "a")
        t0 = time.time()
        self.p = subprocess.Popen([self.kaas, "--data", self.data, "--listen", "127.0.0.1:0",
                                   "--trust-unqualified"], stdout=out, stderr=subprocess.STDOUT)
        out.close()
        while time.time() - t0 < START_TIMEOUT:
            with open(self.log) as f:
                f.seek(start_at)
                text = f.read()
            m = re.search(r"listening on [^ ]*:(\d+),", text)
            if m:
                self.port = int(m.group(1))
                return time.time() - t0, None
            if self.p.poll() is not None:
                why = [l for l in text.splitlines() if "kaas:" in l or "ERROR" in l][-3:]
                return None, "exited %d during start-up: %s" % (self.p.returncode, " | ".join(why))
            time.sleep(0.05)
        return None, "not listening after %d s" % START_TIMEOUT

    def stop(self):
        """(seconds, exit code) of a SIGTERM."""
        if not self.p or self.p.poll() is not None:
            return 0.0, self.p.returncode if self.p else None
        t0 = time.time()
        self.p.send_signal(signal.SIGTERM)
        try:
            rc = self.p.wait(timeout=900)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        return time.time() - t0, rc


def create_topics(port, names, parts):
    """CreateTopics v1, ten topics a request; {error code: count}, messages."""
    c = Conn("127.0.0.1", port, timeout=600)
    errors, messages = {}, set()
    for i in range(0, len(names), 10):
        batch = names[i:i + 10]
        e = Enc().array(len(batch))
        for n in batch:
            e.str(n).i32(parts).i16(1).array(0).array(0)
        c.send(19, 1, e.i32(600000).i8(0).done())
        _, data = c.recv()
        d = Dec(data)
        for _ in range(d.array()):
            d.str()
            err, msg = d.i16(), d.str()
            errors[err] = errors.get(err, 0) + 1
            if msg:
                messages.add(msg)
    c.close()
    return errors, sorted(messages)[:3]


def led_partitions(port, names):
    """Partitions Metadata v1 reports with a leader and no error."""
    c = Conn("127.0.0.1", port, timeout=600)
    led = 0
    for i in range(0, len(names), 100):
        batch = names[i:i + 100]
        e = Enc().array(len(batch))
        for n in batch:
            e.str(n)
        c.send(3, 1, e.done())
        _, data = c.recv()
        d = Dec(data)
        for _ in range(d.array()):
            d.i32(), d.str(), d.i32(), d.str()
        d.i32()
        for _ in range(d.array()):
            d.i16(), d.str(), d.i8()
            for _ in range(d.array()):
                err, _p, leader = d.i16(), d.i32(), d.i32()
                for _ in range(d.array()):
                    d.i32()
                for _ in range(d.array()):
                    d.i32()
                led += err == 0 and leader >= 0
    c.close()
    return led


def produce_sample(port, names, parts, n):
    """acks=1 produces to n random partitions, one request each: how many succeed."""
    rnd = random.Random(7)
    c = Conn("127.0.0.1", port, timeout=120)
    ok = 0
    for _ in range(n):
        t, p = rnd.choice(names), rnd.randrange(parts)
        body = (Enc().str(None).i16(1).i32(30000).array(1).str(t).array(1).i32(p)
                .bytes(record_batch([b"sample"])).done())
        c.send(0, 3, body)
        _, data = c.recv()
        d = Dec(data)
        d.array(), d.str(), d.array(), d.i32()
        ok += d.i16() == 0
    c.close()
    return ok


def run(kaas, work, count, nofile):
    parts = min(PER_TOPIC, count)
    names = ["bench-%05d" % i for i in range(count // parts)]
    data = os.path.join(work, "p%d-%s" % (count, nofile or "ambient"))
    os.makedirs(data)
    log = data + ".log"
    b = Broker(kaas, data, log, nofile)
    r = {"partitions": count, "topics": len(names), "nofile": nofile or
         resource.getrlimit(resource.RLIMIT_NOFILE)[1]}
    t, why = b.start()
    if t is None:
        r["failed"] = "first start: " + why
        return r
    r["empty_startup_s"] = round(t, 3)
    t0 = time.time()
    try:
        errors, msgs = create_topics(b.port, names, parts)
    except Exception as e:  # the broker went away, or answered nothing
        r["failed"] = "CreateTopics: %r" % e
        b.stop()
        return r
    r["create_s"] = round(time.time() - t0, 3)
    r["create_errors"] = {str(k): v for k, v in errors.items()}
    r["create_messages"] = msgs
    r["led_after_create"] = led_partitions(b.port, names)
    r["fds_after_create"], r["rss_kib_after_create"] = proc_figures(b.p.pid)
    r["shutdown_s"], r["shutdown_rc"] = b.stop()
    r["shutdown_s"] = round(r["shutdown_s"], 3)
    t, why = b.start()
    if t is None:
        r["failed"] = "restart: " + why
        return r
    r["startup_s"] = round(t, 3)
    r["fds_after_restart"], r["rss_kib_after_restart"] = proc_figures(b.p.pid)
    r["led_after_restart"] = led_partitions(b.port, names)
    r["sample_n"] = SAMPLE
    r["sample_ok"] = produce_sample(b.port, names, parts, SAMPLE)
    s, rc = b.stop()
    r["second_shutdown_rc"] = rc
    with open(log) as f:
        text = f.read()
    r["lead_failures_logged"] = len(re.findall(r"taking over at epoch \d+ failed", text))
    r["emfile_logged"] = len(re.findall(r"Too many open files", text))
    return r


def main():
    args = sys.argv[1:]
    nofile = None
    if "--nofile" in args:
        i = args.index("--nofile")
        nofile = int(args[i + 1])
        del args[i:i + 2]
    kaas, work, out = args[0], args[1], args[2]
    counts = [int(c) for c in args[3:]]
    results = []
    if nofile:
        # Raised here, inherited by every broker; above the hard limit that
        # takes CAP_SYS_RESOURCE, which a container may not have.
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        except (OSError, ValueError) as e:
            why = "cannot set RLIMIT_NOFILE to %d: %s (the hard limit is %d)" % (
                nofile, e, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
            print("partitions: " + why, flush=True)
            with open(out, "a") as f:
                for n in counts:
                    f.write(json.dumps({"partitions": n, "nofile": nofile, "failed": why}) + "\n")
            return
    for n in counts:
        print("partitions: %d partition(s)%s ..." % (n, " at RLIMIT_NOFILE %d" % nofile if nofile else ""),
              flush=True)
        r = run(kaas, work, n, nofile)
        print("partitions: " + json.dumps(r), flush=True)
        results.append(r)
        subprocess.run(["rm", "-rf", os.path.join(work, "p%d-%s" % (n, nofile or "ambient"))])
    with open(out, "a") as f:
        for r in results:
            f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
