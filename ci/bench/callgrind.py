#!/usr/bin/python3
"""callgrind.py CODEC N RUN_JSON SELF_TXT INCL_TXT — one JSON line summarising a
callgrind run of `kaas-bench append --mode nosync --count N` collected inside
ks_partition_append only (--toggle-collect): instructions per batch and per
record, and the functions that cost the most (self cost).

Instruction counts do not depend on the machine's load, so they track the
append hot path's cost from commit to commit even where timings are noise.
"""
import json
import re
import sys

LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(.*)$")

# The append's steps, by the functions that do them (inclusive cost):
# ks__kb_validate (all of validation); ks__kb_walk_records (the uncompressed record
# walk); walk_records (the walk itself, static: it may be inlined into its
# callers and then has no row); ks_inflate_next (decompression, which the
# compressed walk pulls piece by piece as it validates); ku_crc32c;
# ks__p_index_batch; sub_pwrite_full.
STEPS = ("ks__kb_validate", "ks__kb_walk_records", "walk_records", "ks_inflate_next", "ku_crc32c", "ks__p_index_batch",
         "sub_pwrite_full")


def rows(path):
    """(Ir, percent, name) rows of a callgrind_annotate listing."""
    out = []
    try:
        text = open(path).read().splitlines()
    except OSError:
        return out
    for line in text:
        if "Auto-annotated source" in line:
            break  # per-line annotations follow; only the function table counts
        m = LINE.match(line)
        if m:
            out.append((int(m.group(1).replace(",", "")), float(m.group(2)), m.group(3).strip()))
    return out


def short(name):
    """'kaas/storage/batch.c:rd_varlong [/path/kaas-bench]' -> 'rd_varlong';
    an anonymous function of a library -> 'libisal.so.2 (anonymous)'."""
    obj = ""
    m = re.search(r"\[(.*)\]\s*$", name)
    if m:
        obj = m.group(1).rsplit("/", 1)[-1]
        name = name[: m.start()].strip()
    fn = name.rsplit(":", 1)[-1] if ":" in name else name
    if fn.startswith("0x") or name.startswith("???"):
        return "%s (anonymous)" % (obj or "?")
    return fn


def main():
    codec, n, run_json, self_txt, incl_txt = sys.argv[1:6]
    n = int(n)
    run = json.loads(open(run_json).read().strip().splitlines()[-1])
    self_rows = rows(self_txt)
    total = next((ir for ir, _, name in self_rows if name == "PROGRAM TOTALS"), 0)
    top = {}
    for ir, pct, name in self_rows:
        if name == "PROGRAM TOTALS":
            continue
        key = short(name)
        top[key] = top.get(key, 0) + ir
    top = sorted(top.items(), key=lambda kv: -kv[1])[:8]
    incl = {}
    for ir, pct, name in rows(incl_txt):
        key = short(name)
        if key in STEPS:
            incl[key] = max(incl.get(key, 0), ir)
    per_batch = total / n if n else 0
    out = {
        "step": "callgrind:%s-%s" % (codec, run["records"]), "round": 0, "kind": "callgrind", "codec": codec, "batches": n,
        "records": run["records"], "record_size": run["record_size"], "batch_bytes": run["batch_bytes"],
        "ir_total": total, "ir_per_batch": per_batch,
        "ir_per_record": per_batch / run["records"] if run["records"] else 0,
        "ir_per_kib_records": per_batch / (run["records"] * run["record_size"] / 1024.0)
        if run["records"] and run["record_size"] else 0,
        "top": [{"fn": k, "ir_per_batch": v / n, "pct": 100.0 * v / total if total else 0} for k, v in top],
        "inclusive": {k: v / n for k, v in incl.items()},
        # Steps with no row: inlined (walk_records) or not on this path
        # (ks_inflate_next without compression) -- or renamed.
        "missing": [k for k in STEPS if k not in incl],
        "decompress_pct": 100.0 * incl.get("ks_inflate_next", 0) / total if total else 0,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
