/*
 * steps_perf.c — perf_probe: what the broker's own I/O costs on this
 * volume, measured by one client.
 *
 * Appends of each of Kafka's typical write sizes (1 KiB to 1 MiB), each
 * followed by an fsync, as a partition's group commit does, into one file
 * per size; for each size the latency of write+fsync and of the fsync
 * alone (percentiles over the samples) and the throughput.  Then the
 * metadata rates the broker's segment roll and its atomic writes depend on:
 * exclusive creates, renames and unlinks per second.  Every phase runs for
 * budget_ms and at least min_ops operations (at most max_ops): short on a
 * local disk, and never a verdict from three samples on a slow one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/actor.h"
#include "conformance/kc.h"
#include "conformance/payload.h"
#include "util/clock.h"

static const int64_t perf_sizes[] = {1024, 4096, 16384, 65536, 262144, 1048576};
#define NSIZES (sizeof(perf_sizes) / sizeof(perf_sizes[0]))

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* The p-th percentile (0..100) of v[0, n), sorted in place; -1 for none. */
static int64_t pct(int64_t *v, int n, int p)
{
	if (n <= 0)
		return -1;
	qsort(v, (size_t)n, sizeof(*v), cmp64);
	int k = (int)(((int64_t)n * p + 99) / 100) - 1;
	return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

typedef struct perf_args {
	int64_t budget_ms, min_ops, max_ops;
} perf_args;

static int enough(const perf_args *a, int64_t ops, int64_t t0)
{
	return ops >= a->max_ops || (ops >= a->min_ops && ku_mono_ms() - t0 >= a->budget_ms);
}

/* Appends of one size with an fsync after each; one JSON row. */
static int append_phase(kc_step *st, const perf_args *a, int64_t size, const char *dir, char *buf,
			int64_t *lat, int64_t *sync, json_t **row)
{
	char path[SUB_PATH_MAX];
	snprintf(path, sizeof(path), "%s/append.%lld", dir, (long long)size);
	sub_file *f = NULL;
	int rc = sub_open(st->as->vfs, path, O_WRONLY | O_CREAT | O_EXCL, 0644, &f);
	if (rc)
		return kc_step_fail(st, rc, "create %s: %s", path, sub_strerror(rc));
	int64_t ops = 0, off = 0, t0 = ku_mono_ms(), t_start = ku_mono_ns();
	while (!enough(a, ops, t0)) {
		int64_t t = ku_mono_ns();
		if ((rc = sub_pwrite_full(f, buf, (size_t)size, (uint64_t)off)))
			break;
		int64_t t_sync = ku_mono_ns();
		if ((rc = sub_fsync(f)))
			break;
		int64_t t_end = ku_mono_ns();
		lat[ops] = t_end - t;
		sync[ops] = t_end - t_sync;
		ops++;
		off += size;
		if (kc_step_should_stop(st))
			break;
	}
	int64_t elapsed_ns = ku_mono_ns() - t_start;
	sub_close(f);
	sub_unlink(st->as->vfs, path);
	if (rc)
		return kc_step_fail(st, rc, "append of %lld bytes to %s: %s", (long long)size, path,
				    sub_strerror(rc));
	double mbps = elapsed_ns > 0 ? (double)off / ((double)elapsed_ns / 1e9) / 1048576.0 : 0;
	*row = json_pack("{s:I,s:I,s:f,s:I,s:I,s:I,s:I,s:I}", "bytes", (json_int_t)size, "ops",
			 (json_int_t)ops, "mib_per_s", mbps, "p50_us", (json_int_t)(pct(lat, (int)ops, 50) / 1000),
			 "p99_us", (json_int_t)(pct(lat, (int)ops, 99) / 1000), "max_us",
			 (json_int_t)(pct(lat, (int)ops, 100) / 1000), "fsync_p50_us",
			 (json_int_t)(pct(sync, (int)ops, 50) / 1000), "fsync_p99_us",
			 (json_int_t)(pct(sync, (int)ops, 99) / 1000));
	return 0;
}

/* Metadata rates: exclusive create (and close), rename, unlink. */
static int meta_phase(kc_step *st, const perf_args *a, const char *dir, json_t *out)
{
	sub_vfs *v = st->as->vfs;
	const char *what[3] = {"create", "rename", "unlink"};
	int64_t ops = 0, t0 = ku_mono_ms(), t_ns[3] = {0, 0, 0};
	int rc = 0;
	while (!enough(a, ops, t0) && rc == 0) {
		char p[SUB_PATH_MAX], q[SUB_PATH_MAX];
		snprintf(p, sizeof(p), "%s/m%lld", dir, (long long)ops);
		snprintf(q, sizeof(q), "%s/m%lld.renamed", dir, (long long)ops);
		sub_file *f = NULL;
		int64_t t = ku_mono_ns();
		if ((rc = sub_open(v, p, O_WRONLY | O_CREAT | O_EXCL, 0644, &f)) || (rc = sub_close(f)))
			break;
		int64_t t1 = ku_mono_ns();
		if ((rc = sub_rename(v, p, q)))
			break;
		int64_t t2 = ku_mono_ns();
		if ((rc = sub_unlink(v, q)))
			break;
		int64_t t3 = ku_mono_ns();
		t_ns[0] += t1 - t;
		t_ns[1] += t2 - t1;
		t_ns[2] += t3 - t2;
		ops++;
		if (kc_step_should_stop(st))
			break;
	}
	if (rc)
		return kc_step_fail(st, rc, "metadata operations in %s: %s", dir, sub_strerror(rc));
	for (int i = 0; i < 3; i++) {
		char k[32];
		snprintf(k, sizeof(k), "%s_per_s", what[i]);
		json_object_set_new(out, k, json_real(t_ns[i] > 0 ? (double)ops * 1e9 / (double)t_ns[i] : 0));
	}
	json_object_set_new(out, "ops", json_integer(ops));
	return 0;
}

int kc_step_perf_probe(kc_step *st)
{
	perf_args a;
	const char *dir;
	int rc = kc_arg_path(st, "dir", &dir);
	if (!rc)
		rc = kc_arg_int(st, "budget_ms", 300, 1, 600000, &a.budget_ms);
	if (!rc)
		rc = kc_arg_int(st, "min_ops", 20, 1, 1000000, &a.min_ops);
	if (!rc)
		rc = kc_arg_int(st, "max_ops", 2000, 1, 1000000, &a.max_ops);
	if (rc)
		return rc;
	if (a.max_ops < a.min_ops)
		a.max_ops = a.min_ops;
	char *buf = malloc((size_t)perf_sizes[NSIZES - 1]);
	int64_t *lat = calloc((size_t)a.max_ops, sizeof(int64_t));
	int64_t *sync = calloc((size_t)a.max_ops, sizeof(int64_t));
	json_t *rows = json_array(), *meta = json_object();
	if (!buf || !lat || !sync) {
		rc = kc_step_fail(st, -ENOMEM, "out of memory");
		goto out;
	}
	kc_pattern_fill(buf, (size_t)perf_sizes[NSIZES - 1], 1, 0);
	for (size_t i = 0; i < NSIZES && rc == 0; i++) {
		json_t *row = NULL;
		if ((rc = append_phase(st, &a, perf_sizes[i], dir, buf, lat, sync, &row)) == 0)
			json_array_append_new(rows, row);
		kc_step_progress(st, (int64_t)i + 1, 0);
	}
	if (rc == 0)
		rc = meta_phase(st, &a, dir, meta);
	if (rc == 0) {
		json_object_set(st->result, "append", rows);
		json_object_set(st->result, "meta", meta);
	}
out:
	json_decref(rows);
	json_decref(meta);
	free(buf);
	free(lat);
	free(sync);
	return rc;
}
