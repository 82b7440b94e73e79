#!/usr/bin/env python3
"""batches.py DIR [FROM TO] — the record batches of one partition's segment
files (Kafka v2, as on the wire), for a post-mortem of a campaign's
violation: per batch its file, offsets, the producer id, epoch and base
sequence it was written with, and the leader epoch that wrote it.  Reads
the files only; shares no code with the broker."""
import glob
import os
import struct
import sys


def batches(path):
    with open(path, "rb") as fh:
        data = fh.read()
    off = 0
    while off + 61 <= len(data):
        base, blen = struct.unpack_from(">qi", data, off)
        if blen <= 0 or off + 12 + blen > len(data):
            break
        lepoch, magic = struct.unpack_from(">ib", data, off + 12)
        attrs, lod, _ts0, _ts1, pid, pepoch, bseq, n = struct.unpack_from(">hiqqqhii", data, off + 21)
        yield base, base + lod, pid, pepoch, bseq, n, lepoch, magic
        off += 12 + blen


def main(argv):
    d = argv[0]
    lo = int(argv[1]) if len(argv) > 1 else -1
    hi = int(argv[2]) if len(argv) > 2 else 1 << 62
    for f in sorted(glob.glob(os.path.join(d, "*.log"))):
        for b in batches(f):
            if b[1] >= lo and b[0] <= hi:
                print("%s [%d..%d] pid=%d epoch=%d seq=%d n=%d leader_epoch=%d" % ((os.path.basename(f),) + b[:7]))


if __name__ == "__main__":
    main(sys.argv[1:])
