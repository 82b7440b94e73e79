"""bcluster.py — three (or N) kaas brokers on one local directory for the
cluster benchmarks (control.py, failover.py): start, kill, restart, and
read what their logs say, with the brokers' own timestamps (one host, one
clock)."""
import os
import re
import resource
import signal
import subprocess
import time
from datetime import datetime, timezone

TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z")


def stamp(line):
    """The wall-clock time a log line carries, as a Unix time, or None."""
    m = TS.match(line)
    if not m:
        return None
    return datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()


class Cluster:
    def __init__(self, kaas, work, n=3, overrides=(), nofile=65536):
        self.kaas, self.work, self.n = kaas, work, n
        self.data = os.path.join(work, "data")
        os.makedirs(self.data, exist_ok=True)
        self.overrides = list(overrides)
        self.nofile = nofile
        self.procs, self.logs, self.ports = {}, {}, {}

    def _limits(self):
        # A led partition holds a few descriptors; raise the limit as far as
        # allowed (the broker itself goes to the hard limit).
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (self.nofile, self.nofile))
        except (ValueError, OSError):
            pass

    def launch(self, i):
        self.logs[i] = os.path.join(self.work, "b%d.log" % i)
        mark = self.nlines(i) if os.path.exists(self.logs[i]) else 0
        cmd = [self.kaas, "--data", self.data, "--listen", "127.0.0.1:%d" % self.ports.get(i, 0),
               "--broker-id", str(i), "--trust-unqualified"]
        for o in self.overrides:
            cmd += ["--override", o]
        with open(self.logs[i], "a") as log:
            self.procs[i] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, preexec_fn=self._limits)
        return mark

    def start(self, timeout=120):
        marks = {i: self.launch(i) for i in range(1, self.n + 1)}
        for i in marks:
            self.wait_ready(i, marks[i], timeout)

    def lines(self, i, start=0):
        with open(self.logs[i], errors="replace") as f:
            return f.read().splitlines()[start:]

    def nlines(self, i):
        return len(self.lines(i))

    def wait_ready(self, i, start, timeout=120):
        end = time.time() + timeout
        while time.time() < end:
            ls = self.lines(i, start)
            port = None
            for ln in ls:
                m = re.search(r"listening on [^ ]*:(\d+),", ln)
                if m:
                    port = int(m.group(1))
            if port and any("cluster: ready" in ln for ln in ls):
                self.ports[i] = port
                return
            if self.procs[i].poll() is not None:
                raise SystemExit("broker %d exited %s:\n%s" % (i, self.procs[i].returncode, "\n".join(ls[-20:])))
            time.sleep(0.1)
        raise SystemExit("broker %d was not ready within %d s" % (i, timeout))

    def alive(self, i):
        return i in self.procs and self.procs[i].poll() is None

    def signal(self, i, sig):
        self.procs[i].send_signal(sig)

    def kill(self, i):
        self.procs[i].kill()
        self.procs[i].wait()

    def wait_exit(self, i, timeout=60):
        try:
            return self.procs[i].wait(timeout)
        except subprocess.TimeoutExpired:
            self.procs[i].kill()
            return self.procs[i].wait()

    def boot(self):
        return ",".join("127.0.0.1:%d" % self.ports[i] for i in sorted(self.ports))

    def stop(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    # ---- what the logs say ----

    def takeovers(self, i, start=0):
        """(time, n, name, ms) per take-over line from line `start`: one per
        partition ("t/p: leader at epoch E (take-over M ms)"), or one per
        batch ("took over N partition(s) in M ms")."""
        out = []
        for ln in self.lines(i, start):
            m = re.search(r"cluster: (\S+/\d+): leader at epoch \d+ \(take-over (\d+) ms", ln)
            if m:
                out.append((stamp(ln), 1, m.group(1), int(m.group(2))))
                continue
            m = re.search(r"cluster: took over (\d+) partition\(s\) in (\d+) ms", ln)
            if m:
                out.append((stamp(ln), int(m.group(1)), None, int(m.group(2))))
        return out

    def ntaken(self, i, start=0):
        return sum(x[1] for x in self.takeovers(i, start))

    def published(self, i, start=0):
        """(time, generation, partitions moved) per publication."""
        out = []
        for ln in self.lines(i, start):
            m = re.search(r"published generation (\d+) .*?(\d+) partition\(s\) moved", ln)
            if m:
                out.append((stamp(ln), int(m.group(1)), int(m.group(2))))
        return out


def proc_io(pid):
    """/proc/PID/io plus CPU seconds (user + system)."""
    d = {}
    for ln in open("/proc/%d/io" % pid):
        k, v = ln.split(":")
        d[k] = int(v)
    st = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    d["cpu"] = (int(st[11]) + int(st[12])) / os.sysconf("SC_CLK_TCK")
    return d


def machine():
    def pressure(what):
        try:
            return float(open("/proc/pressure/" + what).readline().split()[1].split("=")[1])
        except (OSError, IndexError, ValueError):
            return None
    return {"load": os.getloadavg()[0], "cpus": os.cpu_count(), "cpu_pressure": pressure("cpu"),
            "io_pressure": pressure("io")}
