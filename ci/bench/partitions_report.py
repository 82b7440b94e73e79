#!/usr/bin/env python3
"""partitions_report.py — the tables of ci/bench/partitions.sh.

usage: partitions_report.py RUNS.jsonl|RUNS.json OUT_PREFIX COMMIT CPUS
Writes OUT_PREFIX.json (unless the input is that file), OUT_PREFIX.md and
partitions.md next to it.  Ratios are per partition actually led, so a
count that did not fit does not look cheap.
"""
import json
import os
import sys


def load(path):
    if path.endswith(".json"):
        return json.load(open(path))["runs"]
    return [json.loads(l) for l in open(path)]


def row(r):
    n = r["partitions"]
    led = r.get("led_after_restart") or 0

    def g(k, f="%s"):
        return f % r[k] if k in r else "-"

    def mib(k):
        return "%.0f" % (r[k] / 1024) if k in r else "-"

    def per_led(k, scale=1.0):
        return "%.2f" % (r[k] * scale / led) if k in r and led else "-"
    if "failed" in r:
        outcome = r["failed"]
    elif led == n:
        outcome = "all led"
    else:
        outcome = ("%d of %d led: the descriptor limit (%d take-over failures logged, %d EMFILE); "
                   "CreateTopics still answered success" % (led, n, r.get("lead_failures_logged", 0),
                                                            r.get("emfile_logged", 0)))
    return "| %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
        n, r["nofile"], json.dumps(r.get("create_errors", {})), g("led_after_create"), g("fds_after_create"),
        mib("rss_kib_after_create"), g("shutdown_s"), g("startup_s"), g("led_after_restart"),
        g("fds_after_restart"), mib("rss_kib_after_restart"), per_led("fds_after_restart"),
        per_led("rss_kib_after_restart"), per_led("startup_s", 1000.0),
        "%s/%s" % (r.get("sample_ok", "-"), r.get("sample_n", "-")), outcome)


def main():
    src, out, commit, cpus = sys.argv[1:5]
    runs = load(src)
    if not src.endswith(".json"):
        json.dump({"commit": commit, "cpus": int(cpus), "runs": runs}, open(out + ".json", "w"), indent=1)
    lines = ["# One broker, many partitions (ci/bench/partitions.sh)", "",
             "commit %s, %s CPUs; data on the local disk; 100 partitions a topic, created through "
             "CreateTopics by a client; restart = SIGTERM, then a new broker on the same data; the "
             "sample is 100 acks=1 produces to random partitions.  Ratios are per partition led." % (commit, cpus),
             "",
             "| partitions | RLIMIT_NOFILE | CreateTopics errors | led after create | fds after create | "
             "RSS after create (MiB) | shutdown s | start-up s | led after restart | fds after restart | "
             "RSS after restart (MiB) | fds / led partition | RSS KiB / led partition | "
             "start-up ms / led partition | sample produces ok | outcome |",
             "|" + "---|" * 16]
    lines += [row(r) for r in runs]
    lines += ["", "CreateTopics errors: {Kafka error code: topics}; 0 is success.  Raw figures: %s.json." %
              os.path.basename(out)]
    text = "\n".join(lines) + "\n"
    open(out + ".md", "w").write(text)
    open(os.path.join(os.path.dirname(out), "partitions.md"), "w").write(text)
    print(text)


if __name__ == "__main__":
    main()
