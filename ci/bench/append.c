/*
 * append.c — `kaas-bench append`: the storage engine's produce path,
 * kaas_partition_append followed by kaas_partition_flush (acks=all), from
 * `appenders` threads onto `partitions` partitions (thread i appends to
 * partition i % partitions).
 *
 * Modes:
 *   gc      append, then flush: concurrent flushes share fsyncs (group commit)
 *   naive   append+flush under a per-partition lock: one fsync per request,
 *           the baseline group commit is measured against
 *   nosync  append only (one flush at the end, untimed): the engine's CPU
 *           and page-cache cost without waiting for the device
 *
 * fsync calls are counted by wrapping the substrate's method table, so the
 * output says how many requests each fsync covered.  After the run every
 * partition must hold exactly the records appended, all of them durable.
 */
#include "bench.h"
#include "main.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/storage.h"
#include "storage/test/kbuild.h"
#include "util/clock.h"
#include "util/log.h"

enum { MODE_GC, MODE_NAIVE, MODE_NOSYNC };

static _Atomic uint64_t g_fsyncs, g_dir_fsyncs;
static const sub_methods *g_inner;
static sub_methods g_counting;

static int counting_fsync(sub_file *f)
{
	atomic_fetch_add(&g_fsyncs, 1);
	return g_inner->fsync(f);
}

static int counting_fsync_dir(sub_vfs *v, const char *path)
{
	atomic_fetch_add(&g_dir_fsyncs, 1);
	return g_inner->fsync_dir(v, path);
}

static void count_fsyncs(sub_vfs *vfs)
{
	g_inner = vfs->m;
	g_counting = *vfs->m;
	g_counting.fsync = counting_fsync;
	g_counting.fsync_dir = counting_fsync_dir;
	vfs->m = &g_counting;
}

typedef struct apart {
	kaas_partition *p;
	pthread_mutex_t mu; /* naive mode: one request (and its fsync) at a time */
	_Atomic int64_t records;
} apart;

typedef struct athread {
	pthread_t th;
	apart *part;
	int mode;
	uint8_t *req;      /* this thread's copy: append rewrites it in place */
	size_t len;
	int64_t count;     /* batches per thread, or 0: until the deadline */
	int64_t deadline_ns;
	int32_t records;   /* per batch */
	uint64_t batches;
	int err;
	const char *what;
	bn_lat lat;
} athread;

static void *append_main(void *arg)
{
	athread *t = arg;
	for (int64_t i = 0; t->count ? i < t->count : bn_now_ns() < t->deadline_ns; i++) {
		int64_t t0 = bn_now_ns();
		if (t->mode == MODE_NAIVE)
			pthread_mutex_lock(&t->part->mu);
		kaas_append_result res;
		int rc = kaas_partition_append(t->part->p, t->req, t->len, &res);
		if (rc == 0 && res.error == 0 && t->mode != MODE_NOSYNC) {
			int64_t durable = -1;
			rc = kaas_partition_flush(t->part->p, &durable);
			if (rc == 0 && durable <= res.last_offset) {
				t->err = EIO;
				t->what = "flush returned before the batch was durable";
			}
		}
		if (t->mode == MODE_NAIVE)
			pthread_mutex_unlock(&t->part->mu);
		if (rc || res.error) {
			t->err = rc ? -rc : EINVAL;
			t->what = res.message ? res.message : rc ? "append/flush failed" : "append refused";
			fprintf(stderr, "kaas-bench append: %s (error %d, rc %d)\n", t->what, res.error, rc);
			return NULL;
		}
		if (t->err)
			return NULL;
		bn_lat_add(&t->lat, bn_now_ns() - t0);
		atomic_fetch_add(&t->part->records, t->records);
		t->batches++;
	}
	return NULL;
}

static int parse_mode(const char *s)
{
	if (strcmp(s, "gc") == 0)
		return MODE_GC;
	if (strcmp(s, "naive") == 0)
		return MODE_NAIVE;
	if (strcmp(s, "nosync") == 0)
		return MODE_NOSYNC;
	return -1;
}

static int parse_codec(const char *s)
{
	static const char *names[] = {"none", "gzip", "snappy", "lz4", "zstd"};
	for (int i = 0; i < 5; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

/* One batch of `records` records of `size`-byte values, as a producer would
 * send it (no producer id: no sequence checks). */
static uint8_t *build_batch(int32_t records, int32_t size, int codec, int text, size_t *len)
{
	kbuild b = KBUILD_INIT;
	uint8_t *val = malloc((size_t)size);
	if (!val)
		return NULL;
	int64_t ts = kaas_wall_ms();
	kbuild_begin(&b, -1, -1, -1, ts);
	for (int32_t i = 0; i < records; i++) {
		if (text)
			bn_fill_text(val, (size_t)size, (uint64_t)i + 1);
		else
			bn_fill_random(val, (size_t)size, (uint64_t)i + 1);
		char key[16];
		int kl = snprintf(key, sizeof(key), "k%d", i % 64);
		kbuild_record(&b, key, kl, val, size, ts + i / 10);
	}
	kbuild_end(&b, codec);
	free(val);
	uint8_t *out = malloc(b.len);
	if (out)
		memcpy(out, b.buf, b.len);
	*len = b.len;
	kbuild_free(&b);
	return out;
}

int bench_append(bn_opts *o)
{
	const char *dir = bn_opt_str(o, "dir", NULL);
	int nthreads = (int)bn_opt_int(o, "appenders", 1);
	int nparts = (int)bn_opt_int(o, "partitions", 1);
	int32_t records = (int32_t)bn_opt_int(o, "records", 100);
	int32_t rsize = (int32_t)bn_opt_int(o, "record-size", 1024);
	double secs = bn_opt_double(o, "secs", 2.0);
	int64_t count = bn_opt_int(o, "count", 0);
	const char *mode_s = bn_opt_str(o, "mode", "gc");
	const char *codec_s = bn_opt_str(o, "codec", "none");
	const char *payload = bn_opt_str(o, "payload", "random");
	const char *label = bn_opt_str(o, "label", "append");
	if (bn_opts_check(o, "kaas-bench append"))
		return 2;
	int mode = parse_mode(mode_s), codec = parse_codec(codec_s);
	if (!dir || nthreads < 1 || nparts < 1 || records < 1 || rsize < 0 || mode < 0 || codec < 0 ||
	    count < 0 || (count == 0 && secs <= 0)) {
		fprintf(stderr, "kaas-bench append: --dir DIR [--appenders N] [--partitions M] [--records R] "
				"[--record-size B] [--secs S | --count C] [--mode gc|naive|nosync] "
				"[--codec none|gzip|snappy|lz4|zstd] [--payload random|text]\n");
		return 2;
	}
	kaas_log_level = KAAS_LOG_WARN;
	int rc = 1, opened = 0;
	char err[256];
	sub_vfs *vfs = NULL;
	apart *parts = calloc((size_t)nparts, sizeof(*parts));
	athread *th = calloc((size_t)nthreads, sizeof(*th));
	size_t len = 0;
	uint8_t *tmpl = build_batch(records, rsize, codec, strcmp(payload, "text") == 0, &len);
	if (!parts || !th || !tmpl)
		goto out;
	if (sub_open_url(dir, &vfs, err, sizeof(err))) {
		fprintf(stderr, "kaas-bench append: %s: %s\n", dir, err);
		goto out;
	}
	count_fsyncs(vfs);
	kaas_log_config cfg;
	kaas_log_config_defaults(&cfg);
	for (int i = 0; i < nparts; i++) {
		char pdir[64];
		snprintf(pdir, sizeof(pdir), "bench/%d", i);
		pthread_mutex_init(&parts[i].mu, NULL);
		int e = kaas_partition_open(vfs, pdir, NULL, 1, &cfg, &parts[i].p);
		if (e == 0)
			e = kaas_partition_take_over(parts[i].p, 1);
		if (e) {
			fprintf(stderr, "kaas-bench append: partition %s: %s\n", pdir, sub_strerror(e));
			goto out;
		}
		opened++;
	}
	uint64_t f0 = atomic_load(&g_fsyncs);
	int64_t t0 = bn_now_ns();
	int started = 0;
	for (int i = 0; i < nthreads; i++) {
		athread *t = &th[i];
		t->part = &parts[i % nparts];
		t->mode = mode;
		t->len = len;
		t->count = count;
		t->deadline_ns = t0 + (int64_t)(secs * 1e9);
		t->records = records;
		/* Append rewrites baseOffset and the leader epoch in place (both
		 * outside the CRC), so a thread can send its copy again and again. */
		if (!(t->req = malloc(len)))
			break;
		memcpy(t->req, tmpl, len);
		if (pthread_create(&t->th, NULL, append_main, t))
			break;
		started++;
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i].th, NULL);
	int64_t elapsed = bn_now_ns() - t0;
	uint64_t fsyncs = atomic_load(&g_fsyncs) - f0;
	int bad = started != nthreads;
	uint64_t batches = 0;
	bn_lat all = BN_LAT_INIT;
	for (int i = 0; i < started; i++) {
		batches += th[i].batches;
		bn_lat_merge(&all, &th[i].lat);
		if (th[i].err) {
			fprintf(stderr, "kaas-bench append: %s\n", th[i].what ? th[i].what : strerror(th[i].err));
			bad = 1;
		}
	}
	/* Everything appended must be there, and durable. */
	for (int i = 0; i < nparts && !bad; i++) {
		int64_t hw = -1;
		if (kaas_partition_flush(parts[i].p, &hw) ||
		    kaas_partition_log_end(parts[i].p) != atomic_load(&parts[i].records) ||
		    hw != atomic_load(&parts[i].records)) {
			fprintf(stderr, "kaas-bench append: partition %d: log end %lld, high watermark %lld, "
					"appended %lld records\n", i, (long long)kaas_partition_log_end(parts[i].p),
				(long long)hw, (long long)atomic_load(&parts[i].records));
			bad = 1;
		}
	}
	if (!bad) {
		double s = (double)elapsed / 1e9;
		json_t *j = json_pack(
			"{s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:I,s:f,s:I,s:I,s:f,s:f,s:f,s:I,s:f,s:o}", "kind", "append",
			"label", label, "mode", mode_s, "codec", codec_s, "appenders", nthreads, "partitions", nparts,
			"records", records, "record_size", rsize, "batch_bytes", (json_int_t)len, "secs", s,
			"batches", (json_int_t)batches, "bytes", (json_int_t)(batches * len), "mbps",
			bn_mbps(batches * len, elapsed), "batches_per_s", (double)batches / s, "records_per_s",
			(double)batches * records / s, "fsyncs", (json_int_t)fsyncs, "batches_per_fsync",
			fsyncs ? (double)batches / (double)fsyncs : 0.0, "lat", bn_lat_json(&all));
		rc = bn_emit(j) ? 1 : 0;
	}
	bn_lat_free(&all);
out:
	for (int i = 0; th && i < nthreads; i++) {
		free(th[i].req);
		bn_lat_free(&th[i].lat);
	}
	for (int i = 0; parts && i < opened; i++)
		kaas_partition_close(parts[i].p);
	if (vfs)
		sub_remove_tree(vfs, "bench");
	sub_destroy(vfs);
	free(parts);
	free(th);
	free(tmpl);
	return rc;
}
