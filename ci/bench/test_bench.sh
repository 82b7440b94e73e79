#!/bin/bash
# ci/bench/test_bench.sh — the machinery of `make bench`, end to end, in its
# quick form (KAAS_BENCH_QUICK=1, about half a minute): every benchmark
# program runs and checks its own work (records appended are all there and
# durable, every produced message is delivered, the consumer sees every
# offset without a gap), the broker starts and stops cleanly, and the report
# is written with every section filled.  No timing is asserted: only that
# each measurement happened, completed correctly and was reported.
set -euo pipefail
cd "$(dirname "$0")/../.."

source ci/lib/e2e.sh --functions
e2e_scratch scratch kaas-bench-test
mkdir -p "$scratch/out" "$scratch/dir"

if ! KAAS_BENCH_QUICK=1 KAAS_BENCH_OUT="$scratch/out" KAAS_BENCH_DIR="$scratch/dir" \
	bash ci/bench/run.sh >"$scratch/log" 2>&1; then
	echo "test_bench: ci/bench/run.sh failed:" >&2
	tail -40 "$scratch/log" >&2
	exit 1
fi

/usr/bin/python3 - "$scratch" <<'PY'
import glob, json, os, sys

scratch = sys.argv[1]
out = os.path.join(scratch, "out")
fails = []


def check(cond, what):
    if not cond:
        fails.append(what)


runs = glob.glob(os.path.join(out, "2*.json"))
check(len(runs) == 1, "one run report: %s" % runs)
doc = json.load(open(runs[0]))
s, lines = doc["summary"], doc["measurements"]
check(not [j for j in lines if "error" in j], "no failed step: %s" % [j for j in lines if "error" in j])
check(doc["env"].get("quick") is True, "the env records the quick run")

# Storage: every configuration compared all three modes and group commit was measured.
check(len(s["storage"]) == 3, "three storage configurations, got %d" % len(s["storage"]))
for r in s["storage"]:
    for k in ("device_mbps", "naive_mbps", "gc_mbps", "bandwidth_mbps"):
        check((r[k] or 0) > 0, "%s: %s > 0" % (r["config"], k))
    check(r["gc_over_device"] and r["gc_over_device"]["median"] > 0, "%s: gc / device" % r["config"])
    # A lone appender has nobody to share an fsync with: every acks=all
    # flush of new data must sync, so there is at least one fsync per batch.
    if r["appenders"] == 1:
        check(0 < r["gc_batches_per_fsync"] <= 1.0, "%s: a flush without an fsync (%.2f batches per fsync)"
              % (r["config"], r["gc_batches_per_fsync"]))
for j in lines:
    if j.get("kind") == "compare":  # naive: one request at a time per partition, each synced
        check(0 < j["modes"]["naive"]["ops_per_fsync"] <= 1.0, "%s: naive shared an fsync" % j["label"])
check((s["nosync_mbps"] or 0) > 0, "append-only measured")
# compression.type: appends recompressed to zstd and gzip, each with its
# ratio to the same batches stored as sent.
rc = s.get("recompress") or {}
check(set(rc) == {"zstd", "gzip"} and all((r["over_producer"] or 0) > 0 for r in rc.values()),
      "recompression measured with its ratio: %s" % rc)

# Reads: every mode of the read benchmark.
for m in ("plans_per_s", "plan_pread", "raw_pread", "plan_sendfile", "raw_sendfile", "cold_plan_pread",
          "cold_raw_pread"):
    check((s["read"].get(m) or 0) > 0, "read: %s" % m)
check((s["loopback_mbps"] or 0) > 0 and (s["loopback_rtt_p50_us"] or 0) > 0, "loopback limits")

# Broker: four produce runs, the consumer read back every message they delivered.
prod = {p["step"]: p for p in s["produce"]}
check(set(prod) == {"produce:acks1", "produce:acksall", "produce:acksall-lz4", "produce:acksall-zstd"},
      "produce runs: %s" % sorted(prod))
delivered = sum(j["msgs"] for j in lines if j.get("kind") == "produce" and j["step"] in prod)
check(s["consume"] and s["consume"]["msgs"] == delivered and delivered > 0,
      "consumed %s of %s delivered" % (s["consume"] and s["consume"]["msgs"], delivered))
# TLS: produce and consume over the SSL listener, each with its plaintext ratio.
tls = s.get("tls") or {}
check(tls.get("produce") and tls["produce"]["msgs"] > 0 and tls["produce"]["over_plaintext"],
      "produce over TLS with its ratio to plaintext: %s" % tls.get("produce"))
check(tls.get("consume") and tls["consume"]["msgs"] == delivered and tls["consume"]["over_plaintext"],
      "consume over TLS read every message (%s) with its ratio: %s" % (delivered, tls.get("consume")))
# SASL_SSL (SCRAM-SHA-256): the same, with its ratio to plaintext.
sasl = s.get("sasl_ssl") or {}
check(sasl.get("produce") and sasl["produce"]["msgs"] > 0 and sasl["produce"]["over_plaintext"],
      "produce over SASL_SSL with its ratio to plaintext: %s" % sasl.get("produce"))
check(sasl.get("consume") and sasl["consume"]["msgs"] == delivered and sasl["consume"]["over_plaintext"],
      "consume over SASL_SSL read every message (%s) with its ratio: %s" % (delivered, sasl.get("consume")))
check(s.get("ktls") and isinstance(s["ktls"].get("available"), bool) and s["ktls"].get("why"),
      "whether the kernel does TLS, and why: %s" % s.get("ktls"))
check(s["storage_ref"] and s["storage_ref"]["records_per_s"] > 0, "storage reference measured")
check(len(s["latency"]) == 2 and all(l["msgs"] > 0 and l["p50_us"] > 0 for l in s["latency"]), "latency runs")
check((s["fsync_small_p50_us"] or 0) > 0, "fsync probe around the acks=all latency run")
check(all(j.get("cpu_secs") is not None for j in lines if j.get("kind") == "broker-cpu"), "broker CPU sampled")

# The conformance tool's default run and the instruction counts.
check(s["conform"] and s["conform"].get("verdict") in ("PASS", "UNPROVEN"), "kaas-conform PASS or UNPROVEN: %s" % s["conform"])
if not s["callgrind_skipped"]:
    cg = {(c["codec"], c["records"]): c for c in s["callgrind"]}
    check(set(cg) == {("none", 100), ("lz4", 100), ("zstd", 100), ("none", 1000)}, "callgrind runs: %s" % set(cg))
    check(all(c["ir_per_batch"] > 0 and c["top"] for c in cg.values()), "callgrind counted instructions")
    # The step functions it looks up still exist: validation everywhere,
    # decompression under the compressed runs.
    check(all(c["inclusive"].get("ks__kb_validate", 0) > 0 for c in cg.values()), "callgrind found ks__kb_validate")
    check(all(c["inclusive"].get("ks_inflate_next", 0) > 0 and c["decompress_pct"] > 0
              for k, c in cg.items() if k[0] != "none"), "callgrind found decompression (ks_inflate_next)")
    # Validation decompresses: a compressed batch costs more than a plain one.
    if ("none", 100) in cg and ("lz4", 100) in cg:
        check(cg[("lz4", 100)]["ir_per_batch"] > cg[("none", 100)]["ir_per_batch"], "lz4 validation decompresses")

# The report: the markdown of the run and the README pointing at it, with no
# path of this run's scratch directory in anything written.
stamp = doc["stamp"]
md = open(os.path.join(out, stamp + ".md")).read()
for sec in ("## Headline", "## Storage engine: append + flush", "## Storage engine: read plans",
            "## Broker end to end", "## Instructions on the append hot path", "## Conformance tool"):
    check(sec in md, "section %r" % sec)
check("Failed steps" not in md, "no failed steps in the markdown")
check("over SASL_SSL" in md and "Kernel TLS (kTLS) on this machine" in md, "the SASL_SSL rows and the kTLS note")
readme = open(os.path.join(out, "README.md")).read()
check("(%s.md)" % stamp in readme and "## Run %s" % stamp in readme, "README lists and shows the run")
for f in glob.glob(os.path.join(out, "*")):
    check(scratch not in open(f, errors="replace").read(), "no scratch path in %s" % os.path.basename(f))

if fails:
    print("test_bench: FAILED:\n  " + "\n  ".join(fails), file=sys.stderr)
    sys.exit(1)
print("test_bench: ok (%d measurements)" % len(lines))
PY
