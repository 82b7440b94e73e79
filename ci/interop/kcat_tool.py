"""kcat_tool.py — input and checks for test_kcat.sh.

  gen CODEC FROM TO
      kcat -P -K'\\t' input: record i is  k<i:06d> TAB <CODEC>-v<i:06d>-<filler>
  check CODEC N PARTITIONS CONSUMED
      CONSUMED is kcat -C -f '%p\\t%o\\t%T\\t%k\\t%s\\t%h\\n' of the whole topic.
      Every record 0..N-1 exactly once, key and value intact, in the partition
      librdkafka's default partitioner picks for its key (CRC-32 of the key
      modulo the partition count), offsets contiguous from 0 and ids
      increasing in each partition, the headers of its half (records below
      N/2 were produced before the broker restart).  Prints the targets for
      the by-timestamp check: "<ts> <expected offset per partition ...>" lines.
  bytime TARGETS_LINE QUERY CONSUMED PARTITIONS
      QUERY is kcat -Q output, CONSUMED kcat -C -o s@TS output (%p %o): both
      must start exactly at the expected offsets.
  codecs HOST:PORT TOPIC PARTITIONS CODEC
      Raw Fetch v4 of every partition: every stored batch carries the codec
      it was produced with (kaas stores and serves batches as produced).
"""
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from kproto import Conn, Dec, Enc  # noqa: E402

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
FILL = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def value(codec, i):
    return "%s-v%06d-%s" % (codec, i, FILL[i % 23:i % 23 + 20 + i % 31])


def headers(n, i):
    half = 1 if i < n // 2 else 2
    return "half=%d,dup=a,dup=b,empty=" % half


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def gen(codec, first, end):
    out = sys.stdout
    for i in range(first, end):
        out.write("k%06d\t%s\n" % (i, value(codec, i)))


def read_consumed(path):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            w = line.split("\t")
            if len(w) != 6:
                fail("unparsable kcat line %r" % line)
            recs.append((int(w[0]), int(w[1]), int(w[2]), w[3], w[4], w[5]))
    return recs


def check(codec, n, nparts, path):
    recs = read_consumed(path)
    seen = [False] * n
    byp = {}
    for p, o, ts, k, v, h in recs:
        if not (k.startswith("k") and k[1:].isdigit()):
            fail("p%d o%d: key %r" % (p, o, k))
        i = int(k[1:])
        if i >= n or seen[i]:
            fail("p%d o%d: record %d is unexpected or consumed twice" % (p, o, i))
        seen[i] = True
        if v != value(codec, i):
            fail("p%d o%d: value %r, want %r" % (p, o, v, value(codec, i)))
        if h != headers(n, i):
            fail("p%d o%d: headers %r, want %r" % (p, o, h, headers(n, i)))
        want_p = zlib.crc32(k.encode()) % nparts
        if p != want_p:
            fail("record %d in partition %d, the partitioner says %d" % (i, p, want_p))
        byp.setdefault(p, []).append((o, i, ts))
    missing = [i for i in range(n) if not seen[i]]
    if missing:
        fail("%d records missing, first %s" % (len(missing), missing[:5]))
    for p, lst in byp.items():
        lst.sort()
        if [o for o, _, _ in lst] != list(range(len(lst))):
            fail("partition %d: offsets not contiguous from 0" % p)
        ids = [i for _, i, _ in lst]
        if ids != sorted(ids):
            fail("partition %d: records out of order" % p)
    print("ok %s: %d records, keys/values/headers/partitions/offsets/order all as produced" % (codec, n),
          file=sys.stderr)
    # By-timestamp targets: the first record after the restart, and two records
    # in the middle of the second half whose time is newer than their
    # predecessor's (so the answer is that very record, inside its batch).
    first_after = min((ts for p, lst in byp.items() for o, i, ts in lst if i == n // 2))
    targets = [first_after]
    for frac in (0.6, 0.85):
        i0 = int(n * frac)
        p0 = zlib.crc32(b"k%06d" % i0) % nparts
        lst = byp[p0]
        j = [x[1] for x in lst].index(i0) if i0 in [x[1] for x in lst] else None
        while j is not None and j + 1 < len(lst) and lst[j + 1][2] <= lst[j][2]:
            j += 1
        if j is not None and j + 1 < len(lst):
            targets.append(lst[j + 1][2])
    for ts in targets:
        exp = []
        for p in range(nparts):
            cand = [o for o, _, t in byp.get(p, []) if t >= ts]
            exp.append(min(cand) if cand else -1)
        print(ts, " ".join(str(x) for x in exp))


def bytime(targets_line, query, consumed, nparts):
    w = targets_line.split()
    ts, exp = int(w[0]), [int(x) for x in w[1:]]
    got = {}
    with open(query) as f:
        for line in f:
            # "<topic> [<p>] offset <o>"
            parts = line.split()
            if len(parts) >= 4 and parts[-2] == "offset":
                got[int(parts[-3].strip("[]"))] = int(parts[-1])
    for p in range(nparts):
        if got.get(p) != exp[p]:
            fail("kcat -Q %d: partition %d answered %s, want %d" % (ts, p, got.get(p), exp[p]))
    first = {}
    with open(consumed) as f:
        for line in f:
            if line.strip():
                p, o = (int(x) for x in line.split())
                first.setdefault(p, o)
    for p in range(nparts):
        if exp[p] >= 0 and first.get(p) != exp[p]:
            fail("kcat -o s@%d: partition %d started at %s, want %d" % (ts, p, first.get(p), exp[p]))
    print("ok by timestamp %d: kcat -Q and -o s@ give offsets %s" % (ts, exp))


def fetch_batches(host, port, topic, partition):
    """Walks every stored batch of a partition with raw Fetch v4 requests."""
    c = Conn(host, port)
    off, out = 0, []
    while True:
        body = (Enc().i32(-1).i32(0).i32(1).i32(64 << 20).i8(0).array(1).str(topic).array(1)
                .i32(partition).i64(off).i32(16 << 20).done())
        corr = c.send(1, 4, body)
        rc, data = c.recv()
        assert rc == corr
        d = Dec(data)
        d.i32()
        d.array()
        d.str()
        d.array()
        d.i32()
        err, hw = d.i16(), d.i64()
        d.i64()
        n = d.array()
        for _ in range(max(n, 0)):
            d.i64()
            d.i64()
        recs = d.bytes() or b""
        if err:
            fail("fetch %s/%d at %d: error %d" % (topic, partition, off, err))
        pos = 0
        while pos + 61 <= len(recs):
            base, blen = struct.unpack(">qi", recs[pos:pos + 12])
            if pos + 12 + blen > len(recs):
                break
            attrs, last_delta = struct.unpack(">hi", recs[pos + 21:pos + 27])
            out.append((base, attrs, last_delta + 1))
            off = base + last_delta + 1
            pos += 12 + blen
        if off >= hw:
            c.close()
            return out, hw
        if pos == 0:
            fail("fetch %s/%d at %d: no whole batch in %d bytes" % (topic, partition, off, len(recs)))


def codecs(hostport, topic, nparts, codec):
    host, port = hostport.rsplit(":", 1)
    want = CODECS[codec]
    nb = 0
    for p in range(nparts):
        batches, hw = fetch_batches(host, int(port), topic, p)
        # librdkafka sends a batch uncompressed when compressing did not make
        # it smaller, which only happens to batches of a record or two.
        bad = [b for b in batches if b[1] & 7 != want and not (b[1] & 7 == 0 and b[2] <= 2)]
        if bad:
            fail("%s/%d: batch at %d (%d records) has codec %d, produced with %s" %
                 (topic, p, bad[0][0], bad[0][2], bad[0][1] & 7, codec))
        if sum(b[2] for b in batches) != hw:
            fail("%s/%d: batches hold %d records, high watermark %d" % (topic, p, sum(b[2] for b in batches), hw))
        nb += len(batches)
    print("ok %s: all %d stored batches are %s-compressed as produced" % (topic, nb, codec))


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "gen":
        gen(a[1], int(a[2]), int(a[3]))
    elif a[0] == "check":
        check(a[1], int(a[2]), int(a[3]), a[4])
    elif a[0] == "bytime":
        bytime(a[1], a[2], a[3], int(a[4]))
    elif a[0] == "codecs":
        codecs(a[1], a[2], int(a[3]), a[4])
    else:
        fail("unknown command " + a[0])
