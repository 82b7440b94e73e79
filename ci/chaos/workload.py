#!/usr/bin/python3
"""workload.py — real Kafka clients doing numbered work and writing down
everything they saw, for checker.py to judge.

  workload.py run BOOT TOPIC HISTORY --seconds S [--producers N] [--partitions P]
                  [--consumers C] [--group G --members M] [--churn 0|1] [--interval S] [--seed X]
  workload.py final BOOT TOPIC HISTORY --partitions P [--group G]
  workload.py event HISTORY F [key=value ...]      (a nemesis's line: heal, fault)
  workload.py create BOOT TOPIC PARTITIONS         (the topic, before a run)

run:   N idempotent acks=all producers (confluent-kafka, librdkafka) send
       values "<proc>-<n>" to partitions chosen round-robin; C consumers read
       every partition with assign(); M members of one consumer group
       (kafka-python, whose coordinator state names the group generation)
       read with subscribe() and commit what they polled, every commit
       with the generation it was made in; with --churn 1 an admin client
       creates and deletes small topics on the side.  The run ends with
       "stop" (the clients stop producing), and the workload returns once
       every producer has flushed.  Every operation is one history line:
       its invocation and its outcome (ok with the offset, fail for an error
       that is certain the record was not written, info when unknown).
final: a fresh consumer reads every partition from its start to its end
       (the high watermark), each record a "read" line, then "read-end";
       then the group's committed offsets ("committed" lines).
event: appends one line ({"f": F, ...}) with the same clock.
create: creates TOPIC with PARTITIONS partitions (replication factor 1)
       through an admin client; exits 1 naming the error if it fails.

Time is CLOCK_MONOTONIC seconds, shared by every process on the host.
Lines are appended with one write(2) each on an O_APPEND descriptor.
"""
import json
import os
import socket
import random
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

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


def producer_thread(hist, boot, topic, proc, partitions, stop, errors, interval=0.002):
    conf = {"bootstrap.servers": boot, "enable.idempotence": True, "acks": "all",
            "linger.ms": 5, "message.timeout.ms": 60000, "request.timeout.ms": 10000,
            "retry.backoff.ms": 100, "socket.timeout.ms": 10000}
    if os.environ.get("CHAOS_CLIENT_DEBUG"):
        conf["debug"] = os.environ["CHAOS_CLIENT_DEBUG"]
    n = 0
    incarnation = 0

    def done(err, msg, value, part):
        if err is None:
            hist.write(f="send", type="ok", proc=proc, value=value, topic=topic, partition=msg.partition(),
                       offset=msg.offset())
        else:
            definite = err.code() in DEFINITE and not err.retriable() and not err.fatal()
            hist.write(f="send", type="fail" if definite else "info", proc=proc, value=value, topic=topic,
                       partition=part, error=err.name())

    def drop(p, why):
        # A fatal error ends this producer (librdkafka refuses every further
        # record): what it still holds gets its outcome, a new producer (a
        # new producer id) takes over, as an application would.
        hist.write(f="producer-fatal", type="info", proc=proc, incarnation=incarnation, error=why[:400])
        p.flush(15)

    p = Producer(conf)
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
            except KafkaException as e:
                drop(p, str(e))
                incarnation += 1
                p = Producer(conf)
        n += 1
        p.poll(0)
        time.sleep(interval)
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
    """A group member on kafka-python: its coordinator keeps the group
    generation id, which librdkafka does not expose, so every poll and
    commit carries the generation it was made in."""
    from kafka import KafkaConsumer, OffsetAndMetadata
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    state = {"gen": None, "c": None}

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            hist.write(f="revoke", type="ok", proc=proc, group=group, generation=state["gen"],
                       partitions=sorted([tp.topic, tp.partition] for tp in revoked))

        def on_partitions_assigned(self, assigned):
            state["gen"] = state["c"]._coordinator._generation.generation_id
            hist.write(f="assign", type="ok", proc=proc, group=group, generation=state["gen"],
                       partitions=sorted([tp.topic, tp.partition] for tp in assigned))

    c = None
    while c is None and not stop.is_set():
        try:
            c = KafkaConsumer(bootstrap_servers=boot.split(","), group_id=group, enable_auto_commit=False,
                              auto_offset_reset="earliest", session_timeout_ms=10000,
                              heartbeat_interval_ms=1000, request_timeout_ms=30000, max_poll_records=100,
                              reconnect_backoff_max_ms=1000, retry_backoff_ms=200, client_id=proc)
        except Exception as e:  # noqa: BLE001 - no broker reachable yet: try again
            hist.write(f="member-error", type="info", proc=proc, group=group, error=repr(e)[:200])
            time.sleep(1)
    if c is None:
        return
    state["c"] = c
    c.subscribe([topic], listener=Listener())
    pos = {}
    since = 0
    while not stop.is_set():
        try:
            got = c.poll(timeout_ms=200)
        except Exception as e:  # noqa: BLE001 - an outcome, not a crash
            hist.write(f="member-error", type="info", proc=proc, group=group, error=repr(e)[:200])
            time.sleep(0.5)
            continue
        gen = state["gen"]
        for tp, msgs in got.items():
            for m in msgs:
                hist.write(f="poll", type="ok", proc=proc, group=group, generation=gen, topic=m.topic,
                           partition=m.partition, offset=m.offset, value=m.value.decode(errors="replace"))
                since += 1
            if msgs:
                pos[tp] = msgs[-1].offset + 1
        if since >= 50 and pos:
            since = 0
            mine = c.assignment()
            offs = {tp: OffsetAndMetadata(o, "") for tp, o in pos.items() if tp in mine}
            pos = {}
            if not offs:
                continue
            inv = [[tp.topic, tp.partition, o.offset] for tp, o in offs.items()]
            hist.write(f="commit", type="invoke", proc=proc, group=group, generation=gen, offsets=inv)
            try:
                c.commit(offs)
                for tp, o in offs.items():
                    hist.write(f="commit", type="ok", proc=proc, group=group, generation=gen, topic=tp.topic,
                               partition=tp.partition, offset=o.offset)
            except Exception as e:  # noqa: BLE001 - a refused commit is an outcome
                hist.write(f="commit", type="fail", proc=proc, group=group, generation=gen,
                           error=type(e).__name__, detail=str(e)[:200])
    try:
        c.close(autocommit=False)
    except Exception:  # noqa: BLE001
        pass


def churn_thread(hist, boot, seed, stop):
    """Topics created and deleted on the side, every operation recorded."""
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": boot})
    rnd = random.Random(seed)
    n = 0
    while not stop.is_set():
        name = "churn-%d-%d" % (seed, n)
        n += 1
        for op in ("create", "delete"):
            hist.write(f="admin", type="invoke", proc="churn", op=op, topic=name)
            try:
                if op == "create":
                    fut = a.create_topics([NewTopic(name, 1 + rnd.randrange(3), 1)], operation_timeout=15)
                else:
                    fut = a.delete_topics([name], operation_timeout=15)
                fut[name].result(30)
                hist.write(f="admin", type="ok", proc="churn", op=op, topic=name)
            except Exception as e:  # noqa: BLE001 - an outcome
                hist.write(f="admin", type="fail", proc="churn", op=op, topic=name, error=str(e)[:200])
            if stop.wait(1 + rnd.random() * 2):
                break


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
    churn = opt(rest, "--churn", 0)
    interval = opt(rest, "--interval", 0.002, float)
    random.seed(seed)
    hist = History(path)
    hist.write(f="meta", seed=seed, topic=topic, partitions=partitions, producers=producers,
               wall=time.time(), host=socket.gethostname())
    stop = threading.Event()
    errors = []
    threads = [threading.Thread(target=producer_thread,
                                args=(hist, boot, topic, "p%d" % i, partitions, stop, errors, interval))
               for i in range(producers)]
    threads += [threading.Thread(target=consumer_thread, args=(hist, boot, topic, "c%d" % i, partitions, stop))
                for i in range(consumers)]
    threads += [threading.Thread(target=member_thread, args=(hist, boot, topic, "m%d" % i, group, stop))
                for i in range(members)]
    if churn:
        threads.append(threading.Thread(target=churn_thread, args=(hist, boot, seed, stop)))
    for t in threads:
        t.daemon = True
        t.start()
    # --seconds 0: until SIGTERM or a file named HISTORY.stop appears
    t_end = time.monotonic() + seconds if seconds > 0 else None
    while not (t_end and time.monotonic() >= t_end) and not os.path.exists(path + ".stop"):
        time.sleep(0.2)
    hist.write(f="stop")
    stop.set()
    # Producers flush (up to 90 s each, together); readers get 20 s in all:
    # kafka-python's poll can block while it looks for a coordinator, and
    # a reader stuck there holds nothing the checker needs.
    deadline = time.monotonic() + 120
    for t in threads[:producers]:
        t.join(max(0, deadline - time.monotonic()))
    deadline = time.monotonic() + 20
    for t in threads[producers:]:
        t.join(max(0, deadline - time.monotonic()))
        if t.is_alive():
            print("workload: %s still running at the end (left behind)" % t.name, file=sys.stderr)
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
    group = opt(argv[3:], "--group", None, str)
    if group:
        g = Consumer({"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False})
        deadline = time.monotonic() + 90
        while True:
            # the coordinator may be moving (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS): ask again
            try:
                got = g.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=20)
                break
            except KafkaException as e:
                if time.monotonic() > deadline:
                    # recorded, not fatal here: the campaign reports it after the checker
                    hist.write(f="committed", type="fail", proc="final", group=group, error=str(e)[:300])
                    got = []
                    break
                time.sleep(1)
        for tp in got:
            hist.write(f="committed", type="ok" if tp.error is None else "fail", proc="final", group=group,
                       topic=tp.topic, partition=tp.partition, offset=tp.offset)
        g.close()
    return 0


def event(argv):
    path, f = argv[:2]
    kv = dict(a.split("=", 1) for a in argv[2:])
    History(path).write(f=f, **kv)
    return 0


def create(argv):
    from confluent_kafka.admin import AdminClient, NewTopic
    boot, topic, parts = argv[0], argv[1], int(argv[2])
    a = AdminClient({"bootstrap.servers": boot})
    for name, f in a.create_topics([NewTopic(topic, parts, 1)]).items():
        try:
            f.result(60)
        except Exception as e:
            print("creating %s: %s" % (name, e), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    fn = {"run": run, "final": final, "event": event, "create": create}.get(cmd)
    if fn is None:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(fn(sys.argv[2:]))
