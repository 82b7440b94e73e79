/*
 * check_perf.c — speed qualification (opt-in: --perf or --checks perf).
 *
 * Not a guarantee of the contract but what an operator needs to know before
 * deploying: can this volume carry the broker's load?  Actor 0 runs
 * perf_probe (steps_perf.c): appends of 1 KiB to 1 MiB each followed by an
 * fsync, then exclusive creates, renames and unlinks.  The verdict compares
 * the fsync p99 over all appends with --perf-fsync-p99-ms (default 10 ms,
 * etcd's rule of thumb for a log's disk) and, when given, the throughput of
 * 1 MiB appends with --perf-min-mibps: a miss is a WARN (the volume works,
 * slowly), a FAIL with --perf-strict.  The figures go to the report and,
 * on PASS, to the stamp.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/judge.h"
#include "conformance/run.h"

static json_int_t num(const json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_integer(v) ? json_integer_value(v) : json_is_real(v) ? (json_int_t)llround(json_real_value(v)) : 0;
}

int kc_check_perf(kc_run *r, kc_result *res, const char *dir)
{
	json_t *out = NULL;
	kc_run_variant(r, "perf");
	res->iterations = 1;
	int rc = kc_drv_call(&r->drv, 0, "perf_probe", json_pack("{s:s}", "dir", dir), &out);
	if (rc) {
		if (rc != -EINTR)
			kc_result_error(res, "%s", r->drv.err);
		return rc;
	}
	json_t *rows = json_object_get(out, "append"), *meta = json_object_get(out, "meta"), *row;
	size_t i;
	json_int_t worst_sync = 0;
	json_array_foreach(rows, i, row)
	{
		char k[64];
		json_int_t bytes = num(row, "bytes");
		if (num(row, "fsync_p99_us") > worst_sync)
			worst_sync = num(row, "fsync_p99_us");
		if (bytes == 4096)
			kc_result_count(res, "append_4k_p99_us", num(row, "p99_us"));
		if (bytes == 1048576)
			kc_result_count(res, "mibps_1m_x100",
					(json_int_t)llround(json_real_value(json_object_get(row, "mib_per_s")) * 100));
		snprintf(k, sizeof(k), "append_%lld_p99_us", (long long)bytes);
		kc_result_count(res, k, num(row, "p99_us"));
	}
	/* The fsync p99 of the size whose fsyncs were slowest: a log flushes
	 * whatever size a batch happens to have. */
	kc_result_count(res, "fsync_p99_us", worst_sync);
	kc_result_count(res, "target_fsync_p99_us", r->o->perf_fsync_p99_us);
	kc_result_count(res, "target_mibps_x100", (json_int_t)llround(r->o->perf_min_mibps * 100));
	kc_result_count(res, "strict", r->o->perf_strict);
	kc_result_count(res, "creates_per_s", num(meta, "create_per_s"));
	kc_result_count(res, "renames_per_s", num(meta, "rename_per_s"));
	kc_result_count(res, "unlinks_per_s", num(meta, "unlink_per_s"));
	json_object_set(res->profile, "append", rows);
	json_object_set(res->profile, "meta", meta);
	json_object_set_new(res->profile, "actor", json_integer(0));
	json_decref(out);
	return 0;
}
