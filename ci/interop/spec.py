"""spec.py — what the interop clients produce, and the record-by-record
comparison of what they consumed with what was produced.

The records of a run are defined here and nowhere else (`record()` below).
The Python clients import this module; the others (kafkajs_e2e.js,
sarama_e2e.go) produce the records this script writes for them:

    spec.py records RUN T0 FROM TO > FILE   records FROM..TO-1, one JSON line each:
        {"i": i, "k": hex|null, "v": hex|null, "h": [[name, hex], ...], "ts": ms}
    spec.py times T0 ID...                  the record times of records ID..., one a line

Record `i` of run RUN:

    key      null when i % 101 == 7, else "<run>-k<i>"
    value    null when i % 211 == 13, empty when i % 53 == 11, else
             "<run>-v<i>-" followed by i % 64 binary bytes ((i*7 + j) % 256)
    headers  none when i % 10 == 3, else
             seq=<i>, [seq=dup when i % 17 == 0], run=<run>, [bin=<i%256,0,255> when i % 5 == 0]
    time     T0 + i (CreateTime, milliseconds)

Clients report what they did as JSON lines, bytes as hex (null for null):

    produced  {"i": id, "p": partition, "o": offset}           one per acknowledged record
    consumed  {"p", "o", "k", "v", "h": [[name, hexvalue], ...], "ts"}
    times     {"ts": target, "p": partition, "o": offset}      ListOffsets answers by time

Checks (check_run):
  * exactly the acknowledged (partition, offset) pairs were consumed — no record
    lost, none extra — and each carries record i's key, value, headers (order
    and duplicates included) and timestamp;
  * per partition the offsets are contiguous from 0 and the ids increase (order);
  * with --at-least-once (a non-idempotent producer retried across a crash):
    extra records are allowed only as exact duplicates of acknowledged ones,
    and the first occurrences still come in order.
  * each ListOffsets-by-time answer is the first offset of that partition whose
    record time is >= the target (-1 when there is none).

The Python clients also share check() (exit 1 with a FAIL line) and ok().
"""
import json
import os
import sys


# TLS for the clients (ci/tls/test_tls.sh): KAAS_TLS_CA is the CA bundle to
# trust, KAAS_TLS_CERT/KAAS_TLS_KEY the client's certificate and key (mutual
# TLS).  SASL (ci/sasl/test_sasl.sh): KAAS_SASL_MECH (PLAIN, SCRAM-SHA-256,
# SCRAM-SHA-512) with KAAS_SASL_USER and KAAS_SASL_PASS; with KAAS_TLS_CA too
# it is SASL_SSL.  Unset: plaintext, as every other test runs.
def tls_librdkafka():
    """librdkafka (confluent-kafka) settings for the KAAS_TLS_* and KAAS_SASL_* variables."""
    ca = os.environ.get("KAAS_TLS_CA")
    mech = os.environ.get("KAAS_SASL_MECH")
    c = {}
    if ca:
        c = {"security.protocol": "ssl", "ssl.ca.location": ca,
             "ssl.endpoint.identification.algorithm": "https"}
        if os.environ.get("KAAS_TLS_CERT"):
            c["ssl.certificate.location"] = os.environ["KAAS_TLS_CERT"]
            c["ssl.key.location"] = os.environ["KAAS_TLS_KEY"]
    if mech:
        c.update({"security.protocol": "sasl_ssl" if ca else "sasl_plaintext", "sasl.mechanisms": mech,
                  "sasl.username": os.environ["KAAS_SASL_USER"], "sasl.password": os.environ["KAAS_SASL_PASS"]})
    return c


def tls_kafka_python():
    """kafka-python keyword arguments for the KAAS_TLS_* and KAAS_SASL_* variables."""
    ca = os.environ.get("KAAS_TLS_CA")
    mech = os.environ.get("KAAS_SASL_MECH")
    c = {}
    if ca:
        c = {"security_protocol": "SSL", "ssl_cafile": ca, "ssl_check_hostname": True}
        if os.environ.get("KAAS_TLS_CERT"):
            c["ssl_certfile"] = os.environ["KAAS_TLS_CERT"]
            c["ssl_keyfile"] = os.environ["KAAS_TLS_KEY"]
    if mech:
        c.update({"security_protocol": "SASL_SSL" if ca else "SASL_PLAINTEXT", "sasl_mechanism": mech,
                  "sasl_plain_username": os.environ["KAAS_SASL_USER"],
                  "sasl_plain_password": os.environ["KAAS_SASL_PASS"]})
    return c


def key_of(run, i):
    if i % 101 == 7:
        return None
    return ("%s-k%d" % (run, i)).encode()


def value_of(run, i):
    if i % 211 == 13:
        return None
    if i % 53 == 11:
        return b""
    return ("%s-v%d-" % (run, i)).encode() + bytes((i * 7 + j) % 256 for j in range(i % 64))


def headers_of(run, i):
    if i % 10 == 3:
        return []
    h = [("seq", str(i).encode())]
    if i % 17 == 0:
        h.append(("seq", b"dup"))
    h.append(("run", run.encode()))
    if i % 5 == 0:
        h.append(("bin", bytes([i % 256, 0, 255])))
    return h


def record(run, i, t0):
    return key_of(run, i), value_of(run, i), headers_of(run, i), t0 + i


def hx(b):
    return None if b is None else b.hex()


def unhx(s):
    return None if s is None else bytes.fromhex(s)


def read_jsonl(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def check(cond, what):
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        sys.exit(1)


def ok(what):
    print("ok", what, flush=True)


class Fail(Exception):
    pass


def _want(cond, what):
    if not cond:
        raise Fail(what)


def check_run(run, t0, produced, consumed, times=(), at_least_once=False, expect=None):
    """Raises Fail with the first difference; returns a summary string."""
    acked = {}
    for r in produced:
        key = (r["p"], r["o"])
        _want(r["o"] >= 0, "record %d acknowledged without an offset" % r["i"])
        _want(key not in acked, "two records acknowledged at partition %d offset %d" % key)
        acked[key] = r["i"]
    ids = sorted(acked.values())
    _want(len(set(ids)) == len(ids) or at_least_once,
          "a record was acknowledged twice (the producer retried it as a new record)")
    if expect is not None:
        _want(len(set(ids)) == expect, "%d distinct records acknowledged, want %d" % (len(set(ids)), expect))

    byp = {}
    seen = set()
    for c in consumed:
        k = (c["p"], c["o"])
        _want(k not in seen, "partition %d offset %d consumed twice" % k)
        seen.add(k)
        byp.setdefault(c["p"], []).append(c)

    def id_of(c):
        """The record id a consumed record carries (its key, else its seq header)."""
        if c["k"] is not None:
            return int(unhx(c["k"]).decode().rsplit("-k", 1)[1])
        for n, v in c["h"]:
            if n == "seq" and unhx(v) != b"dup":
                return int(unhx(v).decode())
        v = unhx(c["v"])
        if v and v.startswith(run.encode() + b"-v"):
            return int(v[len(run) + 2:].split(b"-", 1)[0])
        return None

    def same(c, i):
        k, v, h, ts = record(run, i, t0)
        _want(unhx(c["k"]) == k, "p%d o%d: key %r, want %r (record %d)" % (c["p"], c["o"], unhx(c["k"]), k, i))
        _want(unhx(c["v"]) == v, "p%d o%d: value %r, want %r (record %d)" % (c["p"], c["o"], unhx(c["v"]), v, i))
        got_h = [(n, unhx(x)) for n, x in c["h"]]
        _want(got_h == h, "p%d o%d: headers %r, want %r (record %d)" % (c["p"], c["o"], got_h, h, i))
        _want(c["ts"] == ts, "p%d o%d: timestamp %r, want %d (record %d)" % (c["p"], c["o"], c["ts"], ts, i))

    for key, i in acked.items():
        _want(key in seen, "acknowledged record %d at partition %d offset %d was not consumed" % (i, key[0], key[1]))
    dups = 0
    for p, recs in byp.items():
        recs.sort(key=lambda c: c["o"])
        offs = [c["o"] for c in recs]
        _want(offs == list(range(offs[0], offs[0] + len(offs))) and offs[0] == 0,
              "partition %d: offsets not contiguous from 0: %s..." % (p, offs[:10]))
        last = -1
        first_seen = set()
        for c in recs:
            k = (c["p"], c["o"])
            if k in acked:
                i = acked[k]
            else:
                _want(at_least_once, "p%d o%d: a record nobody acknowledged" % k)
                i = id_of(c)
                _want(i is not None and i in set(acked.values()),
                      "p%d o%d: an unacknowledged record that is no duplicate" % k)
                dups += 1
            same(c, i)
            if i in first_seen:
                continue
            first_seen.add(i)
            _want(i > last, "partition %d: record %d after record %d (out of order)" % (p, i, last))
            last = i

    # ListOffsets by time: the first offset whose record time is >= target.
    ts_of = {}
    for (p, o), i in acked.items():
        ts_of.setdefault(p, []).append((o, t0 + i))
    for t in times:
        cand = [o for o, ts in ts_of.get(t["p"], []) if ts >= t["ts"]]
        want = min(cand) if cand else -1
        _want(t["o"] == want, "offset for time %d in partition %d is %d, want %d" % (t["ts"], t["p"], t["o"], want))
    return "%d records in %d partition(s) match record by record%s%s" % (
        len(consumed), len(byp), ", %d duplicate(s) of acknowledged records" % dups if dups else "",
        ", %d offset-for-time answers exact" % len(times) if times else "")


def record_line(run, i, t0):
    """Record i as the JSON line `spec.py records` writes."""
    k, v, h, ts = record(run, i, t0)
    return json.dumps({"i": i, "k": hx(k), "v": hx(v), "h": [[n, hx(x)] for n, x in h], "ts": ts},
                      separators=(",", ":"))


def main(argv):
    """spec.py check RUN T0 PRODUCED CONSUMED [TIMES] [--at-least-once] [--expect N]
       spec.py records RUN T0 FROM TO
       spec.py times T0 ID..."""
    if argv[:1] == ["records"] and len(argv) == 5:
        run, t0, first, end = argv[1], int(argv[2]), int(argv[3]), int(argv[4])
        sys.stdout.write("".join(record_line(run, i, t0) + "\n" for i in range(first, end)))
        return 0
    if argv[:1] == ["times"] and len(argv) >= 2:
        t0 = int(argv[1])
        sys.stdout.write("".join("%d\n" % (t0 + int(i)) for i in argv[2:]))
        return 0
    args = [a for a in argv if not a.startswith("--")]
    opts = [a for a in argv if a.startswith("--")]
    expect = None
    for o in opts:
        if o.startswith("--expect="):
            expect = int(o.split("=", 1)[1])
    if len(args) < 5 or args[0] != "check":
        print(main.__doc__, file=sys.stderr)
        return 2
    run, t0 = args[1], int(args[2])
    produced, consumed = read_jsonl(args[3]), read_jsonl(args[4])
    times = read_jsonl(args[5]) if len(args) > 5 else []
    try:
        print("ok", run + ":", check_run(run, t0, produced, consumed, times, "--at-least-once" in opts, expect))
    except Fail as e:
        print("FAIL", run + ":", e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
