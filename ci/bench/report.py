#!/usr/bin/python3
"""report.py RESULTS.jsonl OUTDIR STAMP — turns the JSON lines collected by
ci/bench/run.sh into OUTDIR/STAMP.json (summary + every raw measurement),
OUTDIR/STAMP.md (tables), OUTDIR/STAMP-storage.svg (when gnuplot is there)
and OUTDIR/README.md (the latest tables and the list of runs).

Every comparison is made within one round (the limit measured right before
the thing it limits) and the median over rounds is reported, so a machine
whose load changes during the run shows a lower limit, not a false
regression.  Standard library only.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(x, nd=0, unit=""):
    if x is None:
        return "—"
    return ("{:,.%df}" % nd).format(x) + unit


def fr(x):
    return "—" if x is None else "%.2f" % x


def fus(us):
    """Microseconds, shown as µs below 10 ms, else ms."""
    if us is None:
        return "—"
    if us < 10000:
        return "%.0f µs" % us
    return "%.1f ms" % (us / 1000.0)


class Run:
    def __init__(self, lines):
        self.lines = lines
        self.env = next((j for j in lines if j.get("kind") == "env"), {})
        self.env_end = next((j for j in lines if j.get("kind") == "env-end"), {})
        self.errors = [j for j in lines if "error" in j]

    def step(self, name):
        return [j for j in self.lines if j.get("step") == name and "error" not in j]

    def by_round(self, name):
        return {j["round"]: j for j in self.step(name)}

    def one(self, name):
        s = self.step(name)
        return s[-1] if s else None


def spread(d):
    """A ratio's {"median","p25","p75",...} from kaas-bench compare."""
    return d if isinstance(d, dict) else {}


def fsp(d):
    """'1.26 (1.10–1.41)': the median and the interquartile range over cycles."""
    d = spread(d)
    if d.get("median") is None:
        return "—"
    return "**%.2f** (%.2f–%.2f)" % (d["median"], d["p25"], d["p75"])


def summarize(run):
    s = {}
    # Loopback.
    net = [j for j in run.step("net") if j.get("mode") == "stream"]
    rtt = [j for j in run.step("net") if j.get("mode") == "rtt"]
    s["loopback_mbps"] = median([j["mbps"] for j in net])
    s["loopback_rtt_p50_us"] = median([j["lat"]["p50_us"] for j in rtt])
    s["loopback_rtt_p99_us"] = median([j["lat"]["p99_us"] for j in rtt])
    # Storage: one kaas-bench compare per configuration.
    rows = []
    for j in run.lines:
        if j.get("kind") != "compare":
            continue
        md, ra = j["modes"], j["ratios"]
        rows.append({
            "config": j["label"], "appenders": j["appenders"], "partitions": j["partitions"],
            "records": j["records"], "record_size": j["record_size"], "batch_bytes": j["batch_bytes"],
            "cycles": j["cycles"], "slice_secs": j["slice_secs"], "fsync_delay_us": j.get("fsync_delay_us", 0),
            "device_mbps": md["device"]["mbps_overall"], "bandwidth_mbps": md["bandwidth"]["mbps_overall"],
            "naive_mbps": md["naive"]["mbps_overall"], "gc_mbps": md["gc"]["mbps_overall"],
            "gc_batches_per_fsync": md["gc"]["ops_per_fsync"],
            "gc_p50_us": md["gc"]["lat"]["p50_us"], "gc_p99_us": md["gc"]["lat"]["p99_us"],
            "naive_p50_us": md["naive"]["lat"]["p50_us"], "device_p50_us": md["device"]["lat"]["p50_us"],
            "gc_over_device": ra["gc_over_device"], "naive_over_device": ra["naive_over_device"],
            "gc_over_naive": ra["gc_over_naive"], "gc_over_bandwidth": ra["gc_over_bandwidth"],
            "device_over_bandwidth": ra["device_over_bandwidth"],
        })
    s["storage"] = rows
    nos = run.step("nosync")
    s["nosync_mbps"] = median([j["mbps"] for j in nos])
    s["nosync_p50_us"] = median([j["lat"]["p50_us"] for j in nos])
    # Recompression: appends into a zstd or gzip topic over appends kept as
    # sent (producer), each pair from the same round.
    rc_by = {}
    for j in run.step("recompress"):
        rc_by.setdefault(j.get("topic_codec"), {})[j["round"]] = j
    base = rc_by.get("producer", {})
    s["recompress"] = {tc: {"mbps": median([j["mbps"] for j in v.values()]),
                            "p50_us": median([j["lat"]["p50_us"] for j in v.values()]),
                            "over_producer": median([ratio(v[r]["mbps"], base[r]["mbps"]) for r in v if r in base])}
                       for tc, v in rc_by.items() if tc != "producer"}
    s["recompress_producer_mbps"] = median([j["mbps"] for j in base.values()])
    # Reads.
    reads = [j for j in run.step("read")]
    by = {}
    for j in reads:
        by.setdefault(j["mode"], {})[j["round"]] = j
    rd = {m: median([j["mbps"] for j in v.values()]) for m, v in by.items()}
    rd["plans_per_s"] = median([j["plans_per_s"] for j in by.get("plan", {}).values()])

    def rr(a, b):
        A, B = by.get(a, {}), by.get(b, {})
        return median([ratio(A[r]["mbps"], B[r]["mbps"]) for r in A if r in B])

    rd["plan_pread_over_raw"] = rr("plan_pread", "raw_pread")
    rd["plan_sendfile_over_raw"] = rr("plan_sendfile", "raw_sendfile")
    rd["cold_plan_over_raw"] = rr("cold_plan_pread", "cold_raw_pread")
    rd["raw_sendfile_over_loopback"] = ratio(rd.get("raw_sendfile"), s["loopback_mbps"])
    if reads:
        rd["log_bytes"] = reads[0]["log_bytes"]
        rd["max_bytes"] = reads[0]["max_bytes"]
    s["read"] = rd
    # Broker.
    refs = run.step("storage-ref")
    ref = refs and {"records": refs[0]["records"], "batch_bytes": refs[0]["batch_bytes"],
                    "mbps": statistics.mean(j["mbps"] for j in refs),
                    "records_per_s": statistics.mean(j["records_per_s"] for j in refs),
                    "records_per_s_each": [j["records_per_s"] for j in refs],
                    "batches_per_fsync": statistics.mean(j["batches_per_fsync"] for j in refs)}
    s["storage_ref"] = ref or None
    def cores(j, st):
        """CPU cores the client and the broker used during step st."""
        b = run.one(st + ":broker")
        secs = j.get("secs") or 0
        return (ratio(j.get("cpu_secs"), secs), ratio(b and b.get("cpu_secs"), secs))

    prod = []
    for st in ("produce:acks1", "produce:acksall", "produce:acksall-lz4", "produce:acksall-zstd"):
        j = run.one(st)
        if not j:
            continue
        cc, bc = cores(j, st)
        prod.append({"step": st, "acks": j["acks"], "compression": j["compression"], "mbps": j["mbps"],
                     "msgs_per_s": j["msgs_per_s"], "avg_batch_msgs": j["avg_batch_msgs"],
                     "client_cores": cc, "broker_cores": bc,
                     "over_storage": ratio(j["msgs_per_s"], ref["records_per_s"] if ref else None),
                     "over_loopback": ratio(j["mbps"], s["loopback_mbps"])})
    s["produce"] = prod
    c = run.one("consume")
    s["consume"] = c and {"mbps": c["mbps"], "msgs_per_s": c["msgs_per_s"], "msgs": c["msgs"],
                          "client_cores": cores(c, "consume")[0], "broker_cores": cores(c, "consume")[1],
                          "over_raw_sendfile": ratio(c["mbps"], rd.get("raw_sendfile")),
                          "over_loopback": ratio(c["mbps"], s["loopback_mbps"])}
    # TLS: each figure over the mean of the plaintext runs before and after it.
    def tls_pair(tls_step, plain_steps):
        t = run.one(tls_step)
        plain = [j for j in (run.one(x) for x in plain_steps) if j]
        if not t or not plain:
            return None
        pm = statistics.mean(j["msgs_per_s"] for j in plain)
        pc = statistics.mean(cores(j, x)[1] or 0 for j, x in zip(plain, plain_steps))
        return {"mbps": t["mbps"], "msgs": t["msgs"], "msgs_per_s": t["msgs_per_s"], "plain_msgs_per_s": pm,
                "over_plaintext": ratio(t["msgs_per_s"], pm), "broker_cores": cores(t, tls_step)[1],
                "plain_broker_cores": pc}
    s["tls"] = {"produce": tls_pair("produce:acks1-tls", ("produce:acks1", "produce:acks1-again")),
                "consume": tls_pair("consume:tls", ("consume", "consume:again"))}
    s["sasl_ssl"] = {"produce": tls_pair("produce:acks1-sasl_ssl", ("produce:acks1", "produce:acks1-again")),
                     "consume": tls_pair("consume:sasl_ssl", ("consume", "consume:again"))}
    s["ktls"] = next((j for j in run.lines if j.get("kind") == "ktls"), None)
    # One small write + fsync, measured right before and after the acks=all
    # latency run: the floor of an acks=all answer at that moment.
    probes = run.step("fsync-probe")
    s["fsync_small_p50_us"] = median([j["lat"]["p50_us"] for j in probes])
    s["fsync_small_p99_us"] = median([j["lat"]["p99_us"] for j in probes])
    lat = []
    for a in ("all", "1"):
        j = run.one("latency:acks" + a)
        if not j:
            continue
        cc, bc = cores(j, "latency:acks" + a)
        floor = s["fsync_small_p50_us"] if a == "all" else s["loopback_rtt_p50_us"]
        floor99 = s["fsync_small_p99_us"] if a == "all" else s["loopback_rtt_p99_us"]
        lat.append({"acks": a, "rate": j["rate"], "msgs": j["msgs"], "p50_us": j["lat"]["p50_us"],
                    "client_cores": cc, "broker_cores": bc,
                    "p90_us": j["lat"]["p90_us"], "p99_us": j["lat"]["p99_us"], "max_us": j["lat"]["max_us"],
                    "floor": "small write+fsync" if a == "all" else "loopback round trip",
                    "floor_us": floor, "p50_over_floor": ratio(j["lat"]["p50_us"], floor),
                    "floor_p99_us": floor99, "p99_over_floor": ratio(j["lat"]["p99_us"], floor99)})
    s["latency"] = lat
    s["conform"] = run.one("conform")
    s["callgrind"] = [j for j in run.lines if j.get("kind") == "callgrind"]
    s["scrape"] = next((j for j in run.lines if j.get("kind") == "scrape"), None)
    s["callgrind_skipped"] = next((j["skipped"] for j in run.lines if j.get("step") == "callgrind"
                                   and "skipped" in j), None)
    return s


def cfg_label(r):
    d = r.get("fsync_delay_us") or 0
    return "%s × %s, %s × %s B%s" % (r["appenders"], r["partitions"], r["records"], r["record_size"],
                                    ", fsync + %g ms" % (d / 1000.0) if d else "")


def markdown(run, s, stamp, plot):
    e = run.env
    L = []
    w = L.append
    w("# kaas benchmark run %s" % stamp)
    w("")
    def pr(k, end):
        v = (run.env_end if end else e).get(k)
        return "—" if v is None else "%.0f%%" % v

    w("Commit `%s`%s, %s CPUs (%s), %s MiB RAM, Linux %s.  Scratch directory on **%s** (`%s`).  "
      "Load average %.1f at the start, %.1f at the end; CPU pressure %s → %s, I/O pressure %s → %s "
      "(share of the last 10 s in which some task waited, /proc/pressure).  Storage: %s cycles of %s s slices per "
      "configuration; reads and loopback: %s s × %s rounds; broker: %s s per measurement%s.  "
      "How to read this: docs/performance.md."
      % (e.get("commit", "?"), " (with uncommitted changes)" if e.get("dirty") else "", e.get("cpus"), e.get("cpu"),
         e.get("mem_mib"), e.get("kernel"), e.get("fstype"), e.get("device"), e.get("load_start", 0),
         run.env_end.get("load_end", 0), pr("cpu_pressure_start", 0), pr("cpu_pressure_end", 1),
         pr("io_pressure_start", 0), pr("io_pressure_end", 1), e.get("cycles"), e.get("slice"), e.get("secs"),
         e.get("rounds"), e.get("e2e_secs"), " — **quick smoke run, not a measurement**" if e.get("quick") else ""))
    w("")
    if run.errors:
        w("**Failed steps:** " + "; ".join("%s (round %s): %s" % (j["step"], j["round"], j["error"])
                                          for j in run.errors))
        w("")
    # Headline.
    w("## Headline")
    w("")
    w("| what | measured | limit measured in the same run | ratio |")
    w("| --- | --- | --- | --- |")
    rows = s["storage"]
    for r in rows:
        if r["appenders"] == 16 and r["partitions"] == 1 and not r.get("fsync_delay_us"):
            w("| append+flush (group commit), %s appenders, 1 partition, %s B batches | %s MB/s, %s batches per fsync "
              "| device pwrite+fsync, same sizes and concurrency: %s MB/s | %s; one fsync per request: %.2f |"
              % (r["appenders"], fmt(r["batch_bytes"]), fmt(r["gc_mbps"], 1), fmt(r["gc_batches_per_fsync"], 1),
                 fmt(r["device_mbps"], 1), fsp(r["gc_over_device"]), spread(r["naive_over_device"]).get("median", 0)))
    big = [r for r in rows if (r["batch_bytes"] or 0) > 65536 and not r.get("fsync_delay_us")]
    best = max(big, key=lambda r: spread(r["gc_over_bandwidth"]).get("median") or 0) if big else None
    if best:
        w("| append+flush closest to the device's bandwidth (%s) | %s MB/s | the device with 4 MiB writes + fsync, "
          "same concurrency: %s MB/s | %s |"
          % (cfg_label(best), fmt(best["gc_mbps"], 1), fmt(best["bandwidth_mbps"], 1), fsp(best["gc_over_bandwidth"])))
    rd = s["read"]
    w("| fetch-style read, plans + sendfile over loopback | %s MB/s | raw sendfile of the same file: %s MB/s | **%s** |"
      % (fmt(rd.get("plan_sendfile"), 0), fmt(rd.get("raw_sendfile"), 0), fr(rd.get("plan_sendfile_over_raw"))))
    for p in s["produce"]:
        if p["step"] == "produce:acksall":
            w("| broker produce, acks=all, librdkafka, 1 KiB messages | %s MB/s (%s msg/s) | storage engine alone, "
              "same batches: %s records/s; loopback TCP: %s MB/s | **%s** of storage; %s of loopback |"
              % (fmt(p["mbps"], 1), fmt(p["msgs_per_s"]), fmt(s["storage_ref"] and s["storage_ref"]["records_per_s"]),
                 fmt(s["loopback_mbps"]), fr(p["over_storage"]), fr(p["over_loopback"])))
    c = s["consume"]
    if c:
        w("| broker consume from the beginning | %s MB/s | raw sendfile over loopback: %s MB/s | **%s** |"
          % (fmt(c["mbps"], 1), fmt(rd.get("raw_sendfile")), fr(c["over_raw_sendfile"])))
    kt = s.get("ktls")
    tls_how = ("OpenSSL with kernel TLS offered" if kt and kt.get("available")
               else "OpenSSL, no kernel TLS: Fetch reads and SSL_writes" if kt else "OpenSSL")
    for sec, label in (("tls", "TLS"), ("sasl_ssl", "SASL_SSL, SCRAM-SHA-256")):
        for what, key in (("produce, acks=1", "produce"), ("consume from the beginning", "consume")):
            t = (s.get(sec) or {}).get(key)
            if t:
                w("| broker %s over %s (%s) | %s msg/s (broker %s cores) | PLAINTEXT, same run: "
                  "%s msg/s (broker %s cores) | **%s** of plaintext |"
                  % (what, label, tls_how, fmt(t["msgs_per_s"]), fmt(t["broker_cores"], 2),
                     fmt(t["plain_msgs_per_s"]), fmt(t["plain_broker_cores"], 2), fr(t["over_plaintext"])))
    for l in s["latency"]:
        w("| produce latency at %s msg/s, acks=%s | p50 %s, p99 %s | %s: p50 %s, p99 %s | **%s** × at p50, "
          "%s × at p99 |" % (fmt(l["rate"]), l["acks"], fus(l["p50_us"]), fus(l["p99_us"]), l["floor"],
                              fus(l["floor_us"]), fus(l["floor_p99_us"]), fr(l["p50_over_floor"]),
                              fr(l["p99_over_floor"])))
    cg = next((c for c in s["callgrind"] if c["codec"] == "none" and c["records"] == 100), None)
    if cg:
        w("| instructions per append of %s × %s B records (callgrind) | %s per batch, %s per record | — | — |"
          % (cg["records"], cg["record_size"], fmt(cg["ir_per_batch"]), fmt(cg["ir_per_record"])))
    w("")
    if kt:
        w("Kernel TLS (kTLS) on this machine: %s (%s); the TLS and SASL_SSL rows measured %s."
          % ("available" if kt.get("available") else "**not available**", kt.get("why"),
             "SSL_sendfile where OpenSSL turned it on" if kt.get("available")
             else "Fetch reading the segment ranges and writing them through SSL_write (no zero-copy)"))
        w("")
    # Storage.
    w("## Storage engine: append + flush (acks=all)")
    w("")
    w("`kaas-bench compare`: three modes take turns in %s-second slices, %s cycles per configuration, each cycle "
      "in a rotated order — *device*: raw pwrite + fsync per write with the same write size, threads and files; "
      "*naive*: the engine with a per-partition lock over append+flush (one fsync per request); *gc*: the "
      "engine's group commit.  *bandwidth* (the same threads and files writing 4 MiB + fsync: the device when "
      "fsyncs are few) brackets the cycles, two slices before and two after.  Each ratio is formed within a "
      "cycle (against bandwidth: against its median slice) and given as the median (interquartile range) over "
      "cycles; MB/s and latencies are over all slices of a mode.  Rows marked *fsync + 2 ms* model a volume "
      "whose fsync is a round trip away (an NFS COMMIT): every fsync, the device loop's and the engine's, first "
      "waits that long, and such waits overlap like requests in flight."
      % (rows[0]["slice_secs"] if rows else "?", rows[0]["cycles"] if rows else "?"))
    w("")
    w("| appenders × partitions, batch | device MB/s | naive MB/s | gc MB/s | bandwidth MB/s | gc / device | "
      "naive / device | gc / naive | gc / bandwidth | batches per fsync | gc p50 / p99 | device p50 |")
    w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        w("| %s (%s B) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |"
          % (cfg_label(r), fmt(r["batch_bytes"]), fmt(r["device_mbps"], 1), fmt(r["naive_mbps"], 1),
             fmt(r["gc_mbps"], 1), fmt(r["bandwidth_mbps"], 1), fsp(r["gc_over_device"]),
             fsp(r["naive_over_device"]).replace("**", ""), fsp(r["gc_over_naive"]).replace("**", ""),
             fsp(r["gc_over_bandwidth"]).replace("**", ""), fmt(r["gc_batches_per_fsync"], 1), fus(r["gc_p50_us"]),
             fus(r["gc_p99_us"]), fus(r["device_p50_us"])))
    w("")
    w("Engine without waiting for the device (append only, `nosync`, 100 × 1 KiB batches): %s MB/s, p50 %s per "
      "append." % (fmt(s["nosync_mbps"], 0), fus(s["nosync_p50_us"])))
    w("")
    if s.get("recompress"):
        w("Topic-level `compression.type` (lz4 batches of 100 × 1 KiB text, `nosync`; the ratio is throughput with "
          "recompression over the same batches stored as sent, `producer`, %s MB/s, within each round):"
          % fmt(s.get("recompress_producer_mbps"), 0))
        w("")
        w("| compression.type | MB/s | p50 per append | over producer |")
        w("| --- | --- | --- | --- |")
        for tc in sorted(s["recompress"]):
            r = s["recompress"][tc]
            w("| %s | %s | %s | %s |" % (tc, fmt(r["mbps"], 0), fus(r["p50_us"]), fmt(r["over_producer"], 3)))
        w("")
    if plot:
        w("![group commit and one-fsync-per-request against the device loop, per configuration](%s)" % plot)
        w("")
    # Reads.
    w("## Storage engine: read plans")
    w("")
    w("A consumer catching up from offset 0 over a %s MiB segment, %s bytes per request (Fetch's "
      "max.partition.fetch.bytes), medians over rounds." % (fmt((rd.get("log_bytes") or 0) / 1048576.0),
                                                           fmt(rd.get("max_bytes"))))
    w("")
    w("| path | through read plans | raw, same file | ratio |")
    w("| --- | --- | --- | --- |")
    w("| plan only (no I/O) | %s plans/s | — | — |" % fmt(rd.get("plans_per_s")))
    w("| pread, page cache | %s MB/s | %s MB/s | **%s** |" % (fmt(rd.get("plan_pread")), fmt(rd.get("raw_pread")),
                                                            fr(rd.get("plan_pread_over_raw"))))
    w("| sendfile to loopback TCP, page cache | %s MB/s | %s MB/s | **%s** |"
      % (fmt(rd.get("plan_sendfile")), fmt(rd.get("raw_sendfile")), fr(rd.get("plan_sendfile_over_raw"))))
    w("| pread after dropping the file's cache | %s MB/s | %s MB/s | **%s** |"
      % (fmt(rd.get("cold_plan_pread")), fmt(rd.get("cold_raw_pread")), fr(rd.get("cold_plan_over_raw"))))
    w("")
    w("Raw sendfile over loopback is %s of the loopback TCP stream (%s MB/s)."
      % (fr(rd.get("raw_sendfile_over_loopback")), fmt(s["loopback_mbps"])))
    w("")
    # Broker.
    w("## Broker end to end (librdkafka over loopback)")
    w("")
    ref = s["storage_ref"]
    w("One broker, one partition, 1 KiB messages with text-like payloads, linger.ms=5, `kaas-bench-rdk`.  "
      "*storage* is the engine alone appending the same batches (%s records of 1 KiB, 4 appenders, group commit) "
      "right after the acks=all run: %s records/s.  Loopback: %s MB/s, round trip p50 %s."
      % (ref and ref["records"], fmt(ref and ref["records_per_s"]), fmt(s["loopback_mbps"]),
         fus(s["loopback_rtt_p50_us"])))
    w("")
    w("| run | payload MB/s | msg/s | messages per batch | / storage (msg/s) | / loopback (MB/s) | "
      "CPU cores: client / broker |")
    w("| --- | --- | --- | --- | --- | --- | --- |")
    for p in s["produce"]:
        w("| produce acks=%s, %s | %s | %s | %s | **%s** | %s | %s / %s |"
          % (p["acks"], p["compression"], fmt(p["mbps"], 1), fmt(p["msgs_per_s"]), fmt(p["avg_batch_msgs"]),
             fr(p["over_storage"]), fr(p["over_loopback"]), fr(p["client_cores"]), fr(p["broker_cores"])))
    if c:
        w("| consume all %s messages from offset 0 | %s | %s | — | %s of raw sendfile | %s | %s / %s |"
          % (fmt(c["msgs"]), fmt(c["mbps"], 1), fmt(c["msgs_per_s"]), fr(c["over_raw_sendfile"]),
             fr(c["over_loopback"]), fr(c["client_cores"]), fr(c["broker_cores"])))
    w("")
    if s["latency"]:
        w("| latency, fixed rate, linger.ms=0 | messages | p50 | p90 | p99 | max | floor: p50 / p99 | "
          "p50 / floor p50 | p99 / floor p99 | CPU cores: client / broker |")
        w("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for l in s["latency"]:
            w("| acks=%s at %s msg/s | %s | %s | %s | %s | %s | %s: %s / %s | **%s** | %s | %s / %s |"
              % (l["acks"], fmt(l["rate"]), fmt(l["msgs"]), fus(l["p50_us"]), fus(l["p90_us"]), fus(l["p99_us"]),
                 fus(l["max_us"]), l["floor"], fus(l["floor_us"]), fus(l["floor_p99_us"]), fr(l["p50_over_floor"]),
                 fr(l["p99_over_floor"]), fr(l["client_cores"]), fr(l["broker_cores"])))
        w("")
        w("The acks=all floor is the raw device loop writing 1,200 bytes + fsync, measured right before and right "
          "after the acks=all run; the acks=1 floor is the loopback round trip of 100 bytes.")
        w("")
    # Callgrind.
    w("## Instructions on the append hot path (callgrind)")
    w("")
    if s["callgrind"]:
        w("User-space instructions inside `ks_partition_append` (validation, CRC-32C, offsets, index, the "
          "pwrite call; not the kernel's copy), per batch of text-like records.  Independent of load: "
          "compare across commits.")
        w("")
        w("| batch | compression | batch bytes | instructions per batch | per record | decompression | "
          "top self cost |")
        w("| --- | --- | --- | --- | --- | --- | --- |")
        for cgr in s["callgrind"]:
            top = ", ".join("%s %.0f%%" % (t["fn"], t["pct"]) for t in cgr["top"][:4])
            dec = "%.0f%%" % cgr["decompress_pct"] if "decompress_pct" in cgr and cgr["codec"] != "none" else "—"
            w("| %s × %s B | %s | %s | %s | %s | %s | %s |"
              % (cgr["records"], cgr["record_size"], cgr["codec"], fmt(cgr["batch_bytes"]), fmt(cgr["ir_per_batch"]),
                 fmt(cgr["ir_per_record"]), dec, top))
    else:
        w("Skipped: %s." % (s["callgrind_skipped"] or "no data"))
    w("")
    # Metrics scrape.
    sc = s["scrape"]
    w("## One metrics scrape (informational)")
    w("")
    if sc:
        lim = " (%d asked; %s)" % (sc["partitions_asked"], sc["limited_by"]) if sc.get("limited_by") else ""
        w("GET /metrics of a broker leading %d partitions%s, one record and one committed offset on each "
          "(one lag series per partition): %d series, %s bytes; median %.1f ms, p90 %.1f ms over 30 scrapes "
          "(ci/bench/scrape.py)." % (sc["partitions"], lim, sc["series"], fmt(sc["bytes"]), sc["ms_median"],
                                     sc["ms_p90"]))
    else:
        w("Not measured.")
    w("")
    # Conformance.
    cf = s["conform"]
    w("## Conformance tool (informational)")
    w("")
    if cf and "error" not in cf:
        w("`kaas-conform check` with its defaults on a local directory: **%.1f s** wall clock, verdict %s.  "
          % (cf["secs"], cf.get("verdict")) + "Per check: " +
          ", ".join("%s %.1f s" % (c["name"], c["secs"] or 0) for c in cf.get("checks", [])) + ".")
    else:
        w("No result: %s." % ((cf or {}).get("error") or "not run"))
    w("")
    return "\n".join(L)


def plot_storage(s, outdir, stamp):
    """Bars of gc / device and naive / device per configuration, with the
    interquartile range over cycles: the ratios are the measurement."""
    if not shutil.which("gnuplot") or not s["storage"]:
        return None
    name = "%s-storage.svg" % stamp
    with tempfile.TemporaryDirectory() as td:
        data = os.path.join(td, "d.dat")
        with open(data, "w") as f:
            for r in s["storage"]:
                nv, gv = spread(r["naive_over_device"]), spread(r["gc_over_device"])
                f.write('"%s×%s, %s B%s\\n%.1f batches/fsync" %s %s %s %s %s %s\n'
                        % (r["appenders"], r["partitions"], fmt(r["batch_bytes"]),
                           " +%gms" % (r["fsync_delay_us"] / 1000.0) if r.get("fsync_delay_us") else "",
                           r["gc_batches_per_fsync"] or 0,
                           nv.get("median", 0), nv.get("p25", 0), nv.get("p75", 0),
                           gv.get("median", 0), gv.get("p25", 0), gv.get("p75", 0)))
        script = """
set terminal svg size 1100,480 font "sans,11" background rgb "white"
set output '%s'
set title "append + flush (acks=all): engine throughput / device pwrite+fsync throughput, same write size and concurrency\\n(appenders × partitions, batch size; median and interquartile range over alternating cycles)"
set ylabel "ratio to the device loop"
set style data histograms
set style histogram errorbars gap 1 lw 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top left
set grid ytics
set xtics font ",9"
set bmargin 4
set yrange [0:*]
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb "#444444"
plot '%s' using 2:3:4:xtic(1) title "one fsync per request (naive)" lc rgb "#e6a03c", \\
     '' using 5:6:7 title "group commit (gc)" lc rgb "#2f7ed8"
""" % (os.path.join(outdir, name), data)
        try:
            subprocess.run(["gnuplot"], input=script, text=True, check=True, capture_output=True)
        except (OSError, subprocess.CalledProcessError) as e:
            print("report.py: gnuplot failed: %s" % e, file=sys.stderr)
            return None
    return name


def main():
    jl, outdir, stamp = sys.argv[1:4]
    lines = [json.loads(l) for l in open(jl) if l.strip()]
    run = Run(lines)
    s = summarize(run)
    plot = plot_storage(s, outdir, stamp)
    md = markdown(run, s, stamp, plot)
    with open(os.path.join(outdir, stamp + ".md"), "w") as f:
        f.write(md + "\n")
    with open(os.path.join(outdir, stamp + ".json"), "w") as f:
        json.dump({"stamp": stamp, "env": run.env, "summary": s, "measurements": lines}, f, indent=1)
        f.write("\n")
    runs = sorted((n[:-3] for n in os.listdir(outdir) if n.endswith(".md") and n != "README.md"), reverse=True)
    readme = ["# Benchmark results", "",
              "Written by `make bench` (ci/bench/run.sh); what each number means and how the limits are "
              "measured: docs/performance.md.  Numbers are only comparable as ratios: the absolute values "
              "depend on the machine and on whatever else it was doing.", "",
              "Runs: " + ", ".join("[%s](%s.md)" % (r, r) for r in runs), "",
              "The latest run follows.", ""]
    body = md.split("\n", 1)[1] if "\n" in md else ""
    with open(os.path.join(outdir, "README.md"), "w") as f:
        f.write("\n".join(readme) + "\n## Run %s\n" % stamp + body.replace("\n## ", "\n### ") + "\n")


if __name__ == "__main__":
    main()
