#!/usr/bin/python3
"""ci/bench/scrape.py KAAS WORKDIR [PARTITIONS] — the cost of one metrics
scrape of a broker leading PARTITIONS partitions (default 10 000; 10 topics)
with one record in each and a consumer group committed on each, so that the
lag collector emits one series per partition.  Prints one JSON line: the
scrape's size, its series, and the median and 90th percentile of 30 timed
scrapes (a figure, never an assert)."""
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

kaas, work = sys.argv[1], sys.argv[2]
asked = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
total = asked
ntopics = 10
os.makedirs(os.path.join(work, "data"), exist_ok=True)
log = open(os.path.join(work, "broker.log"), "w")


def more_descriptors():
    """A leader keeps descriptors per partition; the scrape does not care
    how many, so raise the limit when allowed (root) rather than measure
    fewer partitions."""
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (8 * total + 4096, 8 * total + 4096))
    except (ValueError, OSError):
        pass


# A led partition holds about three descriptors (segment, index, time
# index); where the hard limit cannot be raised, measure what fits and say so.
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
if os.geteuid() != 0 or hard < 8 * total + 4096:
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (8 * total + 4096, 8 * total + 4096))
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        if hard != resource.RLIM_INFINITY and 3 * total + 3000 > hard:
            total = max(ntopics, (hard - 3000) // 3 // ntopics * ntopics)
per = total // ntopics


p = subprocess.Popen([kaas, "--data", os.path.join(work, "data"), "--listen", "127.0.0.1:0", "--trust-unqualified",
                      "--override", "metrics.listen=127.0.0.1:0"], stdout=log, stderr=subprocess.STDOUT,
                     preexec_fn=more_descriptors)
try:
    broker = murl = None
    for _ in range(600):
        text = open(os.path.join(work, "broker.log")).read()
        m = re.search(r"serving (http://127\.0\.0\.1:\d+)/metrics", text)
        b = re.search(r"listening on (127\.0\.0\.1:\d+),", text)
        if m and b:
            murl, broker = m.group(1), b.group(1)
            break
        if p.poll() is not None:
            sys.exit("scrape.py: the broker exited: " + text[-2000:])
        time.sleep(0.1)
    admin = AdminClient({"bootstrap.servers": broker, "socket.timeout.ms": 300000})
    names = ["scrape-%d" % i for i in range(ntopics)]
    for n in names:  # one at a time: each creates and takes over its partitions
        for f in admin.create_topics([NewTopic(n, per, 1)], operation_timeout=900,
                                     request_timeout=300).values():
            f.result(1000)
    prod = Producer({"bootstrap.servers": broker, "linger.ms": 50, "acks": 1})
    for n in names:
        for k in range(per):
            prod.produce(n, b"x", partition=k)
        prod.flush(120)
    cons = Consumer({"bootstrap.servers": broker, "group.id": "scrape-bench", "enable.auto.commit": False})
    cons.commit(offsets=[TopicPartition(n, k, 0) for n in names for k in range(per)], asynchronous=False)
    cons.close()
    times = []
    body = b""
    for _ in range(31):
        t0 = time.perf_counter()
        with urllib.request.urlopen(murl + "/metrics", timeout=60) as r:
            body = r.read()
        times.append(time.perf_counter() - t0)
    times = times[1:]
    lines = [ln for ln in body.decode().splitlines() if ln and not ln.startswith("#")]
    lag = sum(1 for ln in lines if ln.startswith("kaas_consumer_group_lag{"))
    times.sort()
    print(json.dumps({"kind": "scrape", "partitions": total, "partitions_asked": asked,
                      "limited_by": None if total == asked else "RLIMIT_NOFILE %d" % hard, "series": len(lines), "lag_series": lag,
                      "bytes": len(body), "ms_median": round(statistics.median(times) * 1e3, 2),
                      "ms_p90": round(times[int(len(times) * 0.9)] * 1e3, 2)}))
finally:
    p.terminate()
    try:
        p.wait(120)
    except subprocess.TimeoutExpired:
        p.kill()
