/*
 * compare.c — `kaas-bench compare`: the storage engine's append+flush
 * against the device, measured in alternation.
 *
 * On a machine whose load changes from one second to the next (shared CI
 * runners, a laptop, a VM whose disk is shared with its neighbours) two
 * measurements taken a few seconds apart do not compare.  So three modes
 * take turns in short slices, `cycles` times, each cycle in a rotated order:
 *
 *   device     raw pwrite+fsync per write: same write size (one batch), same
 *              threads and files as the engine's appenders and partitions
 *   naive      the engine, one fsync per request (per-partition lock)
 *   gc         the engine, group commit
 *
 * and a fourth brackets them, `bw-slices` slices before the cycles and as
 * many after (large synced writes disturb the small ones that follow, so
 * they stay out of the alternation):
 *
 *   bandwidth  the same threads and files with 4 MiB writes + fsync: what
 *              the device takes when fsyncs are few (the bandwidth ceiling)
 *
 * A ratio is formed within each cycle (against bandwidth: each cycle's gc
 * against the median bandwidth slice); the output gives the median over
 * cycles and its spread, and per mode the median slice throughput and the
 * latency percentiles over all slices.
 */
#include "ci/bench/bench.h"
#include "ci/bench/main.h"
#include "ci/bench/stor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/storage/storage.h"
#include "util/log.h"

enum { M_DEVICE, M_BANDWIDTH, M_NAIVE, M_GC, NMODES };
static const char *mname[NMODES] = {"device", "bandwidth", "naive", "gc"};

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* {"median","p25","p75","min","max"} of v[0..n) (sorted in place). */
static json_t *spread(double *v, int n)
{
	if (n == 0)
		return json_null();
	qsort(v, (size_t)n, sizeof(*v), cmp_dbl);
	double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	int q3 = (3 * n) / 4 < n ? (3 * n) / 4 : n - 1;
	return json_pack("{s:f,s:f,s:f,s:f,s:f}", "median", med, "p25", v[n / 4], "p75", v[q3], "min", v[0], "max",
			 v[n - 1]);
}

int bench_compare(bn_opts *o)
{
	const char *dir = bn_opt_str(o, "dir", NULL);
	int nthreads = (int)bn_opt_int(o, "appenders", 1);
	int nparts = (int)bn_opt_int(o, "partitions", 1);
	int32_t records = (int32_t)bn_opt_int(o, "records", 100);
	int32_t rsize = (int32_t)bn_opt_int(o, "record-size", 1024);
	int cycles = (int)bn_opt_int(o, "cycles", 8);
	double slice = bn_opt_double(o, "slice", 0.15);
	size_t bw_size = (size_t)bn_opt_int(o, "bandwidth-size", 4 << 20);
	int bw_slices = (int)bn_opt_int(o, "bw-slices", 2);
	const char *label = bn_opt_str(o, "label", "compare");
	st_fsync_delay_us = (int)bn_opt_int(o, "fsync-delay-us", 0);
	st_flush_depth = (int)bn_opt_int(o, "flush-depth", 0);
	if (bn_opts_check(o, "kaas-bench compare"))
		return 2;
	if (!dir || nthreads < 1 || nparts < 1 || records < 1 || rsize < 0 || cycles < 1 || slice <= 0 ||
	    bw_size < 1 || bw_slices < 1 || st_flush_depth < 0 || st_flush_depth > KAAS_FLUSH_DEPTH_MAX) {
		fprintf(stderr, "kaas-bench compare: --dir DIR [--appenders N] [--partitions M] [--records R] "
				"[--record-size B] [--cycles K] [--slice SECS] [--bandwidth-size B] [--bw-slices N] "
				"[--fsync-delay-us U] [--flush-depth 1..8]\n");
		return 2;
	}
	ku_log_level = KAAS_LOG_WARN;
	int rc = 1;
	app_set *app = NULL;
	dev_set *dev = NULL;
	bn_lat lat[NMODES];
	memset(lat, 0, sizeof(lat));
	/* res[c * NMODES + m]; bandwidth slices fill the M_BANDWIDTH column of
	 * rows 0..2*bw_slices-1 (cycles >= that is not required: see nbw). */
	int rows = cycles > 2 * bw_slices ? cycles : 2 * bw_slices;
	st_res *res = calloc((size_t)rows * NMODES, sizeof(*res));
	double *tmp = calloc((size_t)rows, sizeof(*tmp));
	if (!res || !tmp)
		goto out;
	if (app_open(dir, nparts, records, rsize, 0, 0, &app) || dev_open(dir, nparts, &dev))
		goto out;
	size_t batch = app_batch_bytes(app);
	static const int cyc[3] = {M_DEVICE, M_NAIVE, M_GC};
	int nbw = 0;
	for (int c = -1; c <= cycles; c++) {
		if (c == -1 || c == cycles) {
			for (int k = 0; k < bw_slices; k++, nbw++)
				if (dev_run(dev, nthreads, bw_size, 1, slice, &lat[M_BANDWIDTH],
					    &res[nbw * NMODES + M_BANDWIDTH]))
					goto out;
			continue;
		}
		for (int k = 0; k < 3; k++) {
			int m = cyc[(k + c) % 3]; /* rotate: each mode goes first in turn */
			st_res *r = &res[c * NMODES + m];
			int e;
			if (m == M_DEVICE)
				e = dev_run(dev, nthreads, batch, 1, slice, &lat[m], r);
			else
				e = app_run(app, nthreads, m == M_GC ? APP_GC : APP_NAIVE, slice, 0, &lat[m], r);
			if (e)
				goto out;
		}
	}
	if (app_verify(app))
		goto out;

	json_t *modes = json_object();
	double bw_median = 0;
	for (int m = 0; m < NMODES; m++) {
		st_res tot = {0};
		int n = m == M_BANDWIDTH ? nbw : cycles;
		for (int c = 0; c < n; c++) {
			st_res *r = &res[c * NMODES + m];
			tmp[c] = st_mbps(r);
			tot.ns += r->ns;
			tot.ops += r->ops;
			tot.bytes += r->bytes;
			tot.fsyncs += r->fsyncs;
		}
		json_t *sp = spread(tmp, n);
		if (m == M_BANDWIDTH)
			bw_median = json_real_value(json_object_get(sp, "median"));
		json_t *jm = json_pack("{s:o,s:f,s:f,s:I,s:I,s:f,s:o}", "mbps", sp, "mbps_overall", st_mbps(&tot),
				       "ops_per_s", (double)tot.ops / ((double)tot.ns / 1e9), "ops", (json_int_t)tot.ops,
				       "fsyncs", (json_int_t)tot.fsyncs, "ops_per_fsync",
				       tot.fsyncs ? (double)tot.ops / (double)tot.fsyncs : 0.0, "lat", bn_lat_json(&lat[m]));
		json_object_set_new(modes, mname[m], jm);
	}
	static const struct {
		const char *name;
		int a, b;
	} rs[] = {
		{"gc_over_device", M_GC, M_DEVICE},
		{"naive_over_device", M_NAIVE, M_DEVICE},
		{"gc_over_naive", M_GC, M_NAIVE},
		{"gc_over_bandwidth", M_GC, M_BANDWIDTH},
		{"device_over_bandwidth", M_DEVICE, M_BANDWIDTH},
	};
	json_t *ratios = json_object();
	for (size_t i = 0; i < sizeof(rs) / sizeof(rs[0]); i++) {
		int n = 0;
		for (int c = 0; c < cycles; c++) {
			double b = rs[i].b == M_BANDWIDTH ? bw_median : st_mbps(&res[c * NMODES + rs[i].b]);
			if (b > 0)
				tmp[n++] = st_mbps(&res[c * NMODES + rs[i].a]) / b;
		}
		json_object_set_new(ratios, rs[i].name, spread(tmp, n));
	}
	json_t *j = json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:I,s:I,s:i,s:i,s:f,s:o,s:o}", "kind", "compare",
			      "label", label, "appenders", nthreads, "partitions", nparts, "records", records,
			      "fsync_delay_us", st_fsync_delay_us, "flush_depth",
			      st_flush_depth ? st_flush_depth : KAAS_FLUSH_DEPTH_DEFAULT, "record_size", rsize,
			      "batch_bytes", (json_int_t)batch, "bandwidth_size", (json_int_t)bw_size, "bandwidth_slices",
			      2 * bw_slices, "cycles", cycles, "slice_secs", slice, "modes", modes, "ratios", ratios);
	rc = bn_emit(j) ? 1 : 0;
out:
	for (int m = 0; m < NMODES; m++)
		bn_lat_free(&lat[m]);
	dev_close(dev);
	app_close(app);
	free(res);
	free(tmp);
	return rc;
}
