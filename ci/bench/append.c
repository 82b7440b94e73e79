/*
 * append.c — `kaas-bench append`: the storage engine's produce path,
 * ks_partition_append followed by ks_partition_flush (acks=all), from
 * appender threads onto partitions (thread i appends to partition
 * i % partitions).
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
#include "ci/bench/bench.h"
#include "ci/bench/main.h"
#include "ci/bench/stor.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kaas/storage/storage.h"
#include "kaas/storage/test/kbuild.h"
#include "util/clock.h"
#include "util/log.h"

static _Atomic uint64_t g_fsyncs;
static const sub_methods *g_inner;
static sub_methods g_counting;
int st_fsync_delay_us;
int st_flush_depth;
static int st_topic_codec; /* compression.type of the bench's partitions (KS_COMPRESS_*) */

static int counting_fsync(sub_file *f)
{
	atomic_fetch_add(&g_fsyncs, 1);
	if (st_fsync_delay_us > 0)
		usleep((useconds_t)st_fsync_delay_us);
	return g_inner->fsync(f);
}

typedef struct apart {
	ks_partition *p;
	pthread_mutex_t mu; /* naive mode: one request (and its fsync) at a time */
	_Atomic int64_t records;
} apart;

struct app_set {
	sub_vfs *vfs;
	int nparts, opened;
	apart *parts;
	uint8_t *tmpl;
	size_t len;
	int32_t records;
};

typedef struct athread {
	pthread_t th;
	apart *part;
	int mode;
	uint8_t *req;      /* this thread's copy: append rewrites it in place */
	size_t len;
	int64_t count;     /* batches, or 0: until the deadline */
	int64_t deadline_ns;
	int32_t records;   /* per batch */
	uint64_t batches;
	int err;
	bn_lat lat;
} athread;

static void *append_main(void *arg)
{
	athread *t = arg;
	for (int64_t i = 0; t->count ? i < t->count : bn_now_ns() < t->deadline_ns; i++) {
		int64_t t0 = bn_now_ns();
		if (t->mode == APP_NAIVE)
			pthread_mutex_lock(&t->part->mu);
		ks_append_result res;
		int64_t durable = -1;
		int rc = ks_partition_append(t->part->p, t->req, t->len, &res);
		if (rc == 0 && res.error == 0 && t->mode != APP_NOSYNC)
			rc = ks_partition_flush(t->part->p, &durable);
		if (t->mode == APP_NAIVE)
			pthread_mutex_unlock(&t->part->mu);
		if (rc || res.error) {
			fprintf(stderr, "kaas-bench: append/flush failed: rc %d, error %d%s%s\n", rc, res.error,
				res.message ? ": " : "", res.message ? res.message : "");
			t->err = rc ? -rc : EINVAL;
			return NULL;
		}
		if (t->mode != APP_NOSYNC && durable <= res.last_offset) {
			fprintf(stderr, "kaas-bench: flush returned durable offset %lld, batch ends at %lld\n",
				(long long)durable, (long long)res.last_offset);
			t->err = EIO;
			return NULL;
		}
		bn_lat_add(&t->lat, bn_now_ns() - t0);
		atomic_fetch_add(&t->part->records, t->records);
		t->batches++;
	}
	return NULL;
}

int app_parse_mode(const char *s)
{
	if (strcmp(s, "gc") == 0)
		return APP_GC;
	if (strcmp(s, "naive") == 0)
		return APP_NAIVE;
	if (strcmp(s, "nosync") == 0)
		return APP_NOSYNC;
	return -1;
}

int app_parse_codec(const char *s)
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
	uint8_t *val = malloc(size > 0 ? (size_t)size : 1);
	if (!val)
		return NULL;
	int64_t ts = ku_wall_ms();
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

int app_open(const char *dir, int nparts, int32_t records, int32_t rsize, int codec, int text, app_set **out)
{
	char err[256];
	int rc = 0;
	app_set *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->nparts = nparts;
	s->records = records;
	s->parts = calloc((size_t)nparts, sizeof(*s->parts));
	s->tmpl = build_batch(records, rsize, codec, text, &s->len);
	if (!s->parts || !s->tmpl) {
		rc = -ENOMEM;
		goto fail;
	}
	if ((rc = sub_open_url(dir, &s->vfs, err, sizeof(err)))) {
		fprintf(stderr, "kaas-bench: %s: %s\n", dir, err);
		goto fail;
	}
	if (!g_inner) {
		g_inner = s->vfs->m;
		g_counting = *s->vfs->m;
		g_counting.fsync = counting_fsync;
	}
	if (s->vfs->m == g_inner)
		s->vfs->m = &g_counting;
	ks_log_config cfg;
	ks_log_config_defaults(&cfg);
	if (st_flush_depth > 0)
		cfg.flush_depth = st_flush_depth;
	cfg.compression_type = st_topic_codec;
	for (int i = 0; i < nparts; i++) {
		char pdir[64];
		snprintf(pdir, sizeof(pdir), "bench/%d", i);
		pthread_mutex_init(&s->parts[i].mu, NULL);
		rc = ks_partition_open(s->vfs, pdir, NULL, 1, &cfg, &s->parts[i].p);
		if (rc == 0)
			s->opened++;
		if (rc == 0)
			rc = ks_partition_take_over(s->parts[i].p, 1);
		if (rc) {
			fprintf(stderr, "kaas-bench: partition %s: %s\n", pdir, sub_strerror(rc));
			goto fail;
		}
	}
	*out = s;
	return 0;
fail:
	app_close(s);
	return rc;
}

size_t app_batch_bytes(const app_set *s) { return s->len; }

void app_close(app_set *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->opened; i++)
		ks_partition_close(s->parts[i].p);
	if (s->vfs) {
		sub_remove_tree(s->vfs, "bench");
		sub_destroy(s->vfs);
	}
	free(s->parts);
	free(s->tmpl);
	free(s);
}

int app_run(app_set *s, int threads, int mode, double secs, int64_t count, bn_lat *lat, st_res *res)
{
	memset(res, 0, sizeof(*res));
	athread *th = calloc((size_t)threads, sizeof(*th));
	if (!th)
		return -ENOMEM;
	uint64_t f0 = atomic_load(&g_fsyncs);
	int64_t t0 = bn_now_ns();
	int started = 0, rc = 0;
	for (int i = 0; i < threads; i++) {
		athread *t = &th[i];
		t->part = &s->parts[i % s->nparts];
		t->mode = mode;
		t->len = s->len;
		t->count = count;
		t->deadline_ns = t0 + (int64_t)(secs * 1e9);
		t->records = s->records;
		/* Append rewrites baseOffset and the leader epoch in place (both
		 * outside the CRC), so a thread can send its copy again and again. */
		if (!(t->req = malloc(s->len))) {
			rc = -ENOMEM;
			break;
		}
		memcpy(t->req, s->tmpl, s->len);
		if (pthread_create(&t->th, NULL, append_main, t)) {
			rc = -EAGAIN;
			break;
		}
		started++;
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i].th, NULL);
	res->ns = bn_now_ns() - t0;
	res->fsyncs = atomic_load(&g_fsyncs) - f0;
	for (int i = 0; i < threads; i++) {
		res->ops += th[i].batches;
		if (lat)
			bn_lat_merge(lat, &th[i].lat);
		if (th[i].err && rc == 0)
			rc = -th[i].err;
		bn_lat_free(&th[i].lat);
		free(th[i].req);
	}
	res->bytes = res->ops * s->len;
	free(th);
	return rc;
}

int app_verify(app_set *s)
{
	for (int i = 0; i < s->nparts; i++) {
		int64_t hw = -1, want = atomic_load(&s->parts[i].records);
		int rc = ks_partition_flush(s->parts[i].p, &hw);
		int64_t leo = ks_partition_log_end(s->parts[i].p);
		if (rc || leo != want || hw != want) {
			fprintf(stderr, "kaas-bench: partition %d: flush %d, log end %lld, high watermark %lld, "
					"appended %lld records\n", i, rc, (long long)leo, (long long)hw, (long long)want);
			return -EIO;
		}
	}
	return 0;
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
	const char *topic_codec_s = bn_opt_str(o, "topic-codec", "producer");
	static const char *const tcodecs[] = {"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"};
	st_topic_codec = -1;
	for (int i = 0; i < 6; i++)
		if (strcmp(topic_codec_s, tcodecs[i]) == 0)
			st_topic_codec = i;
	st_fsync_delay_us = (int)bn_opt_int(o, "fsync-delay-us", 0);
	st_flush_depth = (int)bn_opt_int(o, "flush-depth", 0);
	if (bn_opts_check(o, "kaas-bench append"))
		return 2;
	int mode = app_parse_mode(mode_s), codec = app_parse_codec(codec_s);
	if (!dir || nthreads < 1 || nparts < 1 || records < 1 || rsize < 0 || mode < 0 || codec < 0 ||
	    count < 0 || (count == 0 && secs <= 0) || st_flush_depth < 0 ||
	    st_flush_depth > KAAS_FLUSH_DEPTH_MAX || st_topic_codec < 0) {
		fprintf(stderr, "kaas-bench append: --dir DIR [--appenders N] [--partitions M] [--records R] "
				"[--record-size B] [--secs S | --count C] [--mode gc|naive|nosync] "
				"[--codec none|gzip|snappy|lz4|zstd] [--payload random|text] [--fsync-delay-us U] "
				"[--flush-depth 1..8] "
				"[--topic-codec producer|uncompressed|gzip|snappy|lz4|zstd]\n");
		return 2;
	}
	ku_log_level = KAAS_LOG_WARN;
	app_set *s = NULL;
	bn_lat lat = BN_LAT_INIT;
	st_res r;
	int rc = 1;
	if (app_open(dir, nparts, records, rsize, codec, strcmp(payload, "text") == 0, &s) == 0 &&
	    app_run(s, nthreads, mode, secs, count, &lat, &r) == 0 && app_verify(s) == 0) {
		double el = (double)r.ns / 1e9;
		json_t *j = json_pack(
			"{s:s,s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:I,s:f,s:I,s:I,s:f,s:f,s:f,s:I,s:f,s:o}", "kind",
			"append", "label", label, "mode", mode_s, "codec", codec_s, "topic_codec", topic_codec_s, "appenders", nthreads, "partitions",
			nparts, "fsync_delay_us", st_fsync_delay_us, "flush_depth",
			st_flush_depth ? st_flush_depth : KAAS_FLUSH_DEPTH_DEFAULT, "records", records, "record_size", rsize, "batch_bytes", (json_int_t)s->len, "secs", el,
			"batches", (json_int_t)r.ops, "bytes", (json_int_t)r.bytes, "mbps", st_mbps(&r), "batches_per_s",
			(double)r.ops / el, "records_per_s", (double)r.ops * records / el, "fsyncs",
			(json_int_t)r.fsyncs, "batches_per_fsync", r.fsyncs ? (double)r.ops / (double)r.fsyncs : 0.0,
			"lat", bn_lat_json(&lat));
		rc = bn_emit(j) ? 1 : 0;
	}
	bn_lat_free(&lat);
	app_close(s);
	return rc;
}
