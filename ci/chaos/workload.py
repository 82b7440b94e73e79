#!/usr/bin/python3
"""workload.py — real Kafka clients doing numbered work and writing down
everything they saw, for checker.py to judge.

  workload.py run BOOT TOPIC HISTORY --seconds S [--producers N] [--partitions P]
                  [--consumers C] [--group G --members M] [--seed X]
  workload.py final BOOT TOPIC HISTORY --partitions P
  workload.py event HISTORY F [key=value ...]      (a nemesis's line: heal, fault)

run:   N idempotent acks=all producers (confluent-kafka, librdkafka) send
       values "<proc>-<n>" to partitions chosen round-robin; C consumers read
       every partition with assign(); M members of one consumer group read
       with subscribe() and commit.  Every operation is one history line:
       its invocation and its outcome (ok with the offset, fail for an error
       that is certain the record was not written, info when unknown).
final: a fresh consumer reads every partition from its start to its end
       (the high watermark), each record a "read" line, then "read-end".
event: appends one line ({"f": F, ...}) with the same clock.

Time is CLOCK_MONOTONIC seconds, shared by every process on the host.
Lines are appended with one write(2) each on an O_APPEND descriptor.
"""
import json
import os
import random
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

# Errors after which the record is certainly not in the log.
DEFINITE = {
    KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE, KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.INVALID_REQUIRED_ACKS, KafkaError.RECORD_LIST_TOO_LARGE,
    KafkaError._MSG_TIMED_OUT_QUEUE if hasattr(KafkaError, "_MSG_TIMED_OUT_QUEUE") else -99999,
}


class History:
    def __init__(self, path):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.mu = threading.Lock()

    def write(self, **op):
        op["t"] = time.monotonic()
        line = (json.dumps(op, sort_keys=True) + "\n").encode()
        with self.mu:
            os.write(self.fd, line)


def producer_thread(hist, boot, topic, proc, partitions, stop, errors):
    p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "acks": "all",
                  "linger.ms": 5, "message.timeout.ms": 60000, "request.timeout.ms": 10000,
                  "retry.backoff.ms": 100, "socket.timeout.ms": 10000})
    n = 0

    def done(err, msg, value, part):
        if err is None:
            hist.write(f="send", type="ok", proc=proc, value=value, topic=topic, partition=msg.partition(),
                       offset=msg.offset())
        else:
            definite = err.code() in DEFINITE and not err.retriable()
            hist.write(f="send", type="fail" if definite else "info", proc=proc, value=value, topic=topic,
                       partition=part, error=err.name())
    while not stop.is_set():
        part = n % partitions
        value = "%s-%d" % (proc, n)
        hist.write(f="send", type="invoke", proc=proc, value=value, topic=topic, partition=part,
                   idempotent=True)
        while True:
            try:
                p.produce(topic, value=value.encode(), partition=part,
                          on_delivery=lambda err, msg, v=value, pt=part: done(err, msg, v, pt))
                break
            except BufferError:
                p.poll(0.05)
        n += 1
        p.poll(0)
        time.sleep(0.002)
    left = p.flush(90)
    if left:
        errors.append("%s: %d records still unacknowledged after 90 s" % (proc, left))


def consumer_thread(hist, boot, topic, proc, partitions, stop):
    c = Consumer({"bootstrap.servers": boot, "group.id": "chaos-assign-" + proc, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    while not stop.is_set():
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        hist.write(f="poll", type="ok", proc=proc, topic=topic, partition=m.partition(), offset=m.offset(),
                   value=m.value().decode(errors="replace"))
    c.close()


def member_thread(hist, boot, topic, proc, group, stop):
    gen = {"n": 0}

    def on_assign(consumer, parts):
        gen["n"] += 1
        hist.write(f="assign", type="ok", proc=proc, group=group, session=gen["n"],
                   partitions=[[tp.topic, tp.partition] for tp in parts])

    c = Consumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                  "heartbeat.interval.ms": 1000})
    c.subscribe([topic], on_assign=on_assign)
    since = 0
    while not stop.is_set():
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        # session: this member's assignment count, so that a re-read after
        # a rebalance is not taken for offsets going backwards.  The group's
        # generation id is not exposed by the client, so no "generation"
        # field: the checker's double-delivery rule needs a true one.
        hist.write(f="poll", type="ok", proc=proc, group=group, session=gen["n"],
                   topic=topic, partition=m.partition(), offset=m.offset(),
                   value=m.value().decode(errors="replace"))
        since += 1
        if since >= 50:
            since = 0
            try:
                out = c.commit(asynchronous=False)
                for tp in out or []:
                    if tp.error is None and tp.offset >= 0:
                        hist.write(f="commit", type="ok", proc=proc, group=group, topic=tp.topic,
                                   partition=tp.partition, offset=tp.offset)
            except Exception as e:  # noqa: BLE001 - a failed commit is an outcome, not a crash
                hist.write(f="commit", type="info", proc=proc, group=group, error=str(e))
    c.close()


def opt(args, name, default, conv=int):
    if name in args:
        return conv(args[args.index(name) + 1])
    return default


def run(argv):
    boot, topic, path = argv[:3]
    rest = argv[3:]
    seconds = opt(rest, "--seconds", 30, float)
    producers = opt(rest, "--producers", 2)
    partitions = opt(rest, "--partitions", 4)
    consumers = opt(rest, "--consumers", 1)
    members = opt(rest, "--members", 0)
    group = opt(rest, "--group", "chaos", str)
    seed = opt(rest, "--seed", 1)
    random.seed(seed)
    hist = History(path)
    hist.write(f="meta", seed=seed, topic=topic, partitions=partitions, producers=producers)
    stop = threading.Event()
    errors = []
    threads = [threading.Thread(target=producer_thread, args=(hist, boot, topic, "p%d" % i, partitions, stop, errors))
               for i in range(producers)]
    threads += [threading.Thread(target=consumer_thread, args=(hist, boot, topic, "c%d" % i, partitions, stop))
                for i in range(consumers)]
    threads += [threading.Thread(target=member_thread, args=(hist, boot, topic, "m%d" % i, group, stop))
                for i in range(members)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(180)
    for e in errors:
        print("workload: " + e, file=sys.stderr)
    return 0


def final(argv):
    boot, topic, path = argv[:3]
    partitions = opt(argv[3:], "--partitions", 4)
    hist = History(path)
    c = Consumer({"bootstrap.servers": boot, "group.id": "chaos-final", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    for part in range(partitions):
        tp = TopicPartition(topic, part)
        lo, hi = c.get_watermark_offsets(tp, timeout=30)
        c.assign([TopicPartition(topic, part, lo)])
        nxt = lo
        deadline = time.monotonic() + 120
        while nxt < hi and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None or m.error():
                continue
            hist.write(f="read", type="ok", proc="final", topic=topic, partition=part, offset=m.offset(),
                       value=m.value().decode(errors="replace"))
            nxt = m.offset() + 1
        if nxt < hi:
            print("workload: %s-%d read back only to %d of %d" % (topic, part, nxt, hi), file=sys.stderr)
            return 1
        hist.write(f="read-end", proc="final", topic=topic, partition=part, low=lo, high=hi)
    c.close()
    return 0


def event(argv):
    path, f = argv[:2]
    kv = dict(a.split("=", 1) for a in argv[2:])
    History(path).write(f=f, **kv)
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    fn = {"run": run, "final": final, "event": event}.get(cmd)
    if fn is None:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(fn(sys.argv[2:]))
