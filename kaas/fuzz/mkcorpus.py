#!/usr/bin/python3
"""mkcorpus.py — writes the fuzz seed corpus (kaas/fuzz/corpus/).

  corpus/request/<label>   one well-formed request (header + body, no size
                           prefix) for every API and version kaas serves,
                           from ci/badinput/kreq.py, plus a few hostile ones
  corpus/batch/<label>     Produce `records` fields: v2 batches uncompressed
                           and in every codec, several batches in a row,
                           idempotent and timestamped ones

Run from the repository root when the request encoders or the served
versions change; the output is committed.  Files named found-* are inputs
that `make fuzz` discovered (minimised with libFuzzer's -merge=1) and are
kept as they are.  Needs the zstd and lz4 commands
(Debian zstd, lz4) for those codecs; snappy is written by hand (literals).
"""
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "..", "ci", d) for d in ("badinput", "lib")]
import kproto  # noqa: E402
import kreq  # noqa: E402
from kproto import Enc, record_batch  # noqa: E402


def request(api, version, corr, body, flex):
    return kproto.request(api, version, corr, body, flex, client_id="kreq")


def tool(cmd, data):
    return subprocess.run(cmd, input=data, stdout=subprocess.PIPE, check=True).stdout


def snappy_literals(data):
    """A valid raw snappy block made of literals only."""
    out = bytearray()
    n = len(data)
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            break
    for i in range(0, len(data), 65536):
        chunk = data[i:i + 65536]
        if len(chunk) <= 60:
            out.append((len(chunk) - 1) << 2)
        else:
            out.append(61 << 2)
            out += struct.pack("<H", len(chunk) - 1)
        out += chunk
    return bytes(out)


def xerial(block):
    return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(block)) + block


def write(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    root = os.path.join(HERE, "corpus")
    req_dir, batch_dir = os.path.join(root, "request"), os.path.join(root, "batch")
    sasl_dir = os.path.join(root, "sasl")
    for d in (req_dir, batch_dir, sasl_dir):
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            if not f.startswith("found-"):
                os.unlink(os.path.join(d, f))

    for i, (label, api, v, flex, body) in enumerate(kreq.samples()):
        write(req_dir, label, request(api, v, 100 + i, body, flex))
    hostile = {
        "metadata-v1-huge-count": request(3, 1, 1, Enc().i32(0x7FFFFFFF).done(), False),
        "produce-v7-truncated": request(0, 7, 1, kreq.samples()[7][4][:-9], False),
        "api-versions-v3-bad-tags": request(18, 3, 1, Enc(True).str("a").str("b").uvarint(3).uvarint(1).uvarint(99)
                                            .done(), True),
        "unsupported-version": request(19, 99, 1, b"\x00" * 8, False),
        "unknown-api": request(999, 0, 1, b"", False),
        "short-header": struct.pack(">hh", 3, 1),
        "create-topics-v4-bad-names": request(19, 4, 1, Enc().array(3).str("../x").i32(1).i16(1).array(0).array(0)
                                              .str("a" * 250).i32(1).i16(1).array(0).array(0)
                                              .str("a\0b").i32(1).i16(1).array(0).array(0).i32(1000).i8(0)
                                              .done(), False),
        "join-sync-heartbeat-group": request(11, 5, 1, Enc().str("fz").i32(6000).i32(100).str("").str("inst")
                                             .str("consumer").array(1).str("range").bytes(b"\x00\x01").done(), False),
    }
    for name, data in hostile.items():
        write(req_dir, name, data)

    # SASL exchanges (fuzz_sasl.c): mechanism byte, then 2-byte-length tokens.
    def sasl(mech, *toks):
        return bytes([mech]) + b"".join(struct.pack(">H", len(t)) + t for t in toks)
    nonce = b"rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    for name, data in {
        "plain-ok": sasl(0, b"\0user\0pencil"),
        "plain-authzid": sasl(4, b"user\0user\0pencil"),
        "plain-wrong": sasl(0, b"\0user\0pencils"),
        "plain-three-nuls": sasl(0, b"\0a\0b\0c"),
        "scram256-rfc7677": sasl(1, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                                 b"c=biws,r=" + nonce + b",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="),
        "scram256-bad-proof": sasl(1, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
                                   b"c=biws,r=" + nonce + b",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVR="),
        "scram512-unknown": sasl(2, b"n,a=bob,n=bob,r=abc,ext=1", b"c=bixhPWJvYiw=,r=abc%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                                 b"p=" + b"A" * 86 + b"=="),
        "scram-escapes": sasl(1, b"y,,n=u=2Cx=3D,r=a", b"c=eSws,r=a,p=AAAA", b"more"),
    }.items():
        write(sasl_dir, name, data)

    recs = [b"value-%d" % i * (1 + i % 5) for i in range(20)]
    keys = [None if i % 4 == 0 else b"k%d" % i for i in range(20)]
    hdrs = [[(b"h%d" % j, b"v" * j) for j in range(i % 3)] for i in range(20)]
    plain = record_batch(recs, keys=keys, headers=hdrs)
    write(batch_dir, "plain", plain)
    write(batch_dir, "one-record", record_batch([b"x"]))
    write(batch_dir, "null-value", record_batch([None], keys=[b"tombstone"]))
    write(batch_dir, "idempotent", record_batch(recs[:5], pid=1000, epoch=0, seq=0))
    write(batch_dir, "three-batches", plain + record_batch([b"a", b"b"]) + record_batch([b"c"], pid=7, epoch=1, seq=3))
    write(batch_dir, "gzip", record_batch(recs, keys=keys, headers=hdrs, codec=1, compress=kproto.gzip_compress))
    write(batch_dir, "snappy", record_batch(recs, keys=keys, codec=2, compress=snappy_literals))
    write(batch_dir, "snappy-xerial", record_batch(recs, codec=2, compress=lambda d: xerial(snappy_literals(d))))
    write(batch_dir, "lz4", record_batch(recs, headers=hdrs, codec=3, compress=lambda d: tool(["lz4", "-c", "-q"], d)))
    write(batch_dir, "zstd", record_batch(recs, keys=keys, codec=4, compress=lambda d: tool(["zstd", "-c", "-q"], d)))
    write(batch_dir, "log-append-time", record_batch(recs[:3], codec=0x08))
    print("wrote %d requests and %d batches" % (len(os.listdir(req_dir)), len(os.listdir(batch_dir))))


if __name__ == "__main__":
    main()
