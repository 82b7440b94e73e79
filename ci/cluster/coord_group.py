"""coord_group.py — a consumer group under coordinator moves, for
ci/cluster/test_coord_move.sh.

  run BOOT TOPIC GROUP OUT --seconds S
      an idempotent acks=all producer for S seconds, two confluent-kafka
      consumers in GROUP committing synchronously after every batch, and a
      watcher that reads the committed offsets (OffsetFetch, through a third
      client that never joins) every 100 ms.  OUT/ready appears once the
      group has committed; OUT/result.json at the end: records delivered and
      consumed, offsets never consumed, committed offsets seen going back.
  find PORT GROUP             FindCoordinator v1 as broker PORT answers it: "err node"
  commit PORT GROUP TOPIC P OFF [WAIT_S]
                              OffsetCommit v2 (generation -1, no member) sent to
                              broker PORT; prints its error, "closed" or "timeout"
  fetch PORT GROUP TOPIC P    OffsetFetch v1 at broker PORT: "err offset"
  sibling GROUP NSHARDS       a group id in the same shard as GROUP (FNV-1a 32-bit
                              of the id's bytes mod NSHARDS, docs/groups.md) —
                              written here independently of the broker's code
"""
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, "ci/lib")
from kproto import Conn, Dec, Enc  # noqa: E402


def fnv1a32(b):
    h = 2166136261
    for x in b:
        h = ((h ^ x) * 16777619) & 0xFFFFFFFF
    return h


def find(port, group):
    c = Conn("127.0.0.1", port, timeout=10)
    c.send(10, 1, Enc().str(group).i8(0).done())
    _, data = c.recv()
    d = Dec(data)
    d.i32()
    err = d.i16()
    d.str()
    node = d.i32()
    c.s.close()
    return err, node


def commit(port, group, topic, part, off, wait_s=10.0):
    c = Conn("127.0.0.1", port, timeout=wait_s)
    body = (Enc().str(group).i32(-1).str("").i64(-1).array(1).str(topic).array(1)
            .i32(part).i64(off).str("").done())
    c.send(8, 2, body)
    try:
        _, data = c.recv()
    except EOFError:
        return "closed"
    except socket.timeout:
        return "timeout"
    except OSError as e:
        return "error:%s" % e
    d = Dec(data)
    d.array(); d.str(); d.array(); d.i32()
    return str(d.i16())


def fetch(port, group, topic, part):
    c = Conn("127.0.0.1", port, timeout=10)
    c.send(9, 1, Enc().str(group).array(1).str(topic).array(1).i32(part).done())
    _, data = c.recv()
    d = Dec(data)
    d.array(); d.str(); d.array(); d.i32()
    off = d.i64()
    d.str()
    err = d.i16()
    c.s.close()
    return err, off


def run(boot, topic, group, out, seconds):
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    os.makedirs(out, exist_ok=True)
    lock = threading.Lock()
    delivered = {}   # partition -> set of offsets
    consumed = {}    # partition -> set of offsets
    stats = {"commit_ok": 0, "commit_failed": 0, "produce_failed": 0, "rebalances": 0}
    backwards = []
    producing = threading.Event()
    producing.set()
    stop = threading.Event()
    nparts = [0]

    def produce():
        p = Producer({"bootstrap.servers": boot, "enable.idempotence": True, "acks": "all",
                      "linger.ms": 5, "message.timeout.ms": 120000})

        def dr(err, msg):
            with lock:
                if err:
                    stats["produce_failed"] += 1
                else:
                    delivered.setdefault(msg.partition(), set()).add(msg.offset())
        end = time.time() + seconds
        i = 0
        while time.time() < end:
            try:
                p.produce(topic, value=b"v%d" % i, key=b"k%d" % i, on_delivery=dr)
                i += 1
            except BufferError:
                pass
            p.poll(0.004)
        p.flush(120)
        producing.clear()

    def consume(name):
        conf = {"bootstrap.servers": boot, "group.id": group, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500, "socket.timeout.ms": 6000,
                "coordinator.query.interval.ms": 1000, "topic.metadata.refresh.interval.ms": 2000,
                "max.poll.interval.ms": 60000, "client.id": name}

        def on_assign(c, parts):
            with lock:
                stats["rebalances"] += 1
        c = Consumer(conf)
        c.subscribe([topic], on_assign=on_assign)
        while not stop.is_set():
            msgs = c.consume(num_messages=200, timeout=0.3)
            got = False
            for m in msgs:
                if m.error():
                    continue
                got = True
                with lock:
                    consumed.setdefault(m.partition(), set()).add(m.offset())
            if not got:
                continue
            try:
                c.commit(asynchronous=False)
                with lock:
                    stats["commit_ok"] += 1
                if not os.path.exists(os.path.join(out, "ready")):
                    open(os.path.join(out, "ready"), "w").close()
            except KafkaException:
                with lock:
                    stats["commit_failed"] += 1
        c.close()

    def watch():
        w = Consumer({"bootstrap.servers": boot, "group.id": group, "socket.timeout.ms": 6000,
                      "coordinator.query.interval.ms": 1000})
        md = w.list_topics(topic, timeout=30)
        nparts[0] = len(md.topics[topic].partitions)
        tps = [TopicPartition(topic, p) for p in range(nparts[0])]
        last = {}
        while not stop.is_set():
            try:
                got = w.committed(tps, timeout=5)
            except KafkaException:
                time.sleep(0.1)
                continue
            now = time.time()
            for tp in got:
                if tp.error or tp.offset < 0:
                    continue
                prev = last.get(tp.partition)
                if prev is not None and tp.offset < prev[0]:
                    backwards.append({"partition": tp.partition, "from": prev[0], "to": tp.offset,
                                      "after_s": round(now - prev[1], 3)})
                last[tp.partition] = (tp.offset, now)
            with lock:
                st = dict(last)
            with open(os.path.join(out, "committed.json.tmp"), "w") as f:
                json.dump({str(k): v[0] for k, v in st.items()}, f)
            os.replace(os.path.join(out, "committed.json.tmp"), os.path.join(out, "committed.json"))
            time.sleep(0.1)
        w.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume, args=("c1",)),
               threading.Thread(target=consume, args=("c2",)), threading.Thread(target=watch)]
    for t in threads:
        t.start()
    t0 = time.time()
    deadline = t0 + seconds + 150
    done = False
    while time.time() < deadline:
        time.sleep(0.5)
        if producing.is_set():
            continue
        with lock:
            missing = sum(len(offs - consumed.get(p, set())) for p, offs in delivered.items())
        try:
            with open(os.path.join(out, "committed.json")) as f:
                com = {int(k): v for k, v in json.load(f).items()}
        except (OSError, ValueError):
            com = {}
        with lock:
            ends = {p: max(offs) + 1 for p, offs in delivered.items()}
        if missing == 0 and all(com.get(p, -1) >= e for p, e in ends.items()):
            done = True
            break
    stop.set()
    for t in threads:
        t.join(60)
    with lock:
        miss = {str(p): sorted(offs - consumed.get(p, set()))[:20] for p, offs in delivered.items()
                if offs - consumed.get(p, set())}
        res = {"done": done, "delivered": sum(len(v) for v in delivered.values()),
               "consumed_distinct": sum(len(v) for v in consumed.values()),
               "missing": miss, "backwards": backwards, **stats}
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res))
    return 0 if done and not miss and not backwards else 1


def main():
    a = sys.argv[1:]
    if a[0] == "run":
        secs = float(a[a.index("--seconds") + 1]) if "--seconds" in a else 40
        sys.exit(run(a[1], a[2], a[3], a[4], secs))
    if a[0] == "find":
        try:
            print("%d %d" % find(int(a[1]), a[2]))
        except (OSError, EOFError):
            print("-1 -1")
    elif a[0] == "commit":
        print(commit(int(a[1]), a[2], a[3], int(a[4]), int(a[5]),
                     float(a[6]) if len(a) > 6 else 10.0), flush=True)
    elif a[0] == "fetch":
        try:
            print("%d %d" % fetch(int(a[1]), a[2], a[3], int(a[4])))
        except (OSError, EOFError):
            print("-1 -1")
    elif a[0] == "sibling":
        n = int(a[2])
        want = fnv1a32(a[1].encode()) % n
        i = 0
        while fnv1a32(("zombie-%d" % i).encode()) % n != want:
            i += 1
        print("zombie-%d" % i)


if __name__ == "__main__":
    main()
