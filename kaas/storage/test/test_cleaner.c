/*
 * test_cleaner.c — log compaction: the latest record per key survives,
 * tombstones go after delete.retention.ms, the lag and dirty-ratio rules,
 * several passes when the key map is small, offsets, fetches in gaps,
 * producer state, a new leader's view, the files left on the volume, and
 * the I/O bound on a simulated clock.
 */
#include "kaas/storage/storage_int.h"
#include "kaas/storage/test/cleanlog.h"
#include "util/clock.h"
#include "util/test/ktest.h"

#define T0 1700000000000LL

/* A plain segment's log file (not a cleaned one). */
static int shim_like_plain(const char *name)
{
	size_t n = strlen(name);
	return n == 35 && strcmp(name + 31, ".log") == 0;
}

static ks_log_config ccfg(void)
{
	ks_log_config c = h_cfg();
	c.segment_bytes = 1024;
	c.segment_ms = -1;
	c.retention_ms = -1;
	c.cleanup_compact = KS_CLEANUP_COMPACT;
	c.min_cleanable_dirty_ratio = 0.0;
	c.delete_retention_ms = 1000;
	c.min_compaction_lag_ms = 0;
	c.max_compaction_lag_ms = INT64_MAX;
	return c;
}

static ks_partition *copen(const char *dir, const ks_log_config *c, int32_t epoch)
{
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, dir, NULL, 1, c, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, epoch), 0);
	return p;
}

static void durable(ks_partition *p)
{
	int64_t d;
	ck_assert_int_eq(ks_partition_flush(p, &d), 0);
}

/* Cleans until nothing is due; returns the passes. */
static int clean_all(ks_partition *p, ks_cleaner *c, int64_t now)
{
	int n = 0, rc;
	while ((rc = ks_partition_clean(p, c, now)) == 1)
		n++;
	ck_assert_msg(rc == 0, "clean: %s", sub_strerror(rc));
	return n;
}

/* Writes `updates` records round-robin over `keys` keys, one per batch;
 * latest[] gets what a reader must end with. */
static void write_updates(ks_partition *p, int keys, int updates, int v0, int latest[CL_KEYS])
{
	for (int i = 0; i < updates; i++) {
		int k = i % keys;
		cl_put(p, -1, 0, k, v0 + i, 1, T0 + i, KBUILD_NONE);
		latest[k] = v0 + i;
	}
	durable(p);
}

static void check_latest(ks_partition *p, const int want[CL_KEYS], cl_log *l)
{
	cl_read(p, l);
	int got[CL_KEYS];
	cl_latest(l, got);
	for (int k = 0; k < CL_KEYS; k++)
		ck_assert_msg(got[k] == want[k], "key %d: read %d, latest written %d", k, got[k], want[k]);
}

/* Records below the cleaned end hold each key at most once. */
static void check_unique(ks_partition *p, const cl_log *l)
{
	int64_t dirty, end;
	ks_partition_clean_point(p, &dirty, &end);
	static int seen[CL_KEYS];
	memset(seen, 0, sizeof(seen));
	for (size_t i = 0; i < l->n; i++) {
		if (l->r[i].off >= dirty || l->r[i].key < 0)
			continue;
		ck_assert_msg(!seen[l->r[i].key], "key %d twice below the dirty point %lld", l->r[i].key,
			      (long long)dirty);
		seen[l->r[i].key] = 1;
	}
}

START_TEST(dedupe_keeps_latest_per_key)
{
	ks_log_config c = ccfg();
	ks_partition *p = copen("t/0", &c, 1);
	ks_cleaner *cl;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &cl), 0);
	int latest[CL_KEYS];
	for (int k = 0; k < CL_KEYS; k++)
		latest[k] = -1;
	write_updates(p, 10, 300, 0, latest);
	int64_t leo = ks_partition_log_end(p);
	int logs_before = h_count_files("t/0", ".log");
	ck_assert_int_gt(logs_before, 5);
	ck_assert_int_ge(clean_all(p, cl, T0 + 10000), 1);
	cl_log l;
	check_latest(p, latest, &l);
	check_unique(p, &l);
	ck_assert_int_lt(l.n, 300 / 2);
	ck_assert_int_eq(l.end, leo); /* offsets preserved: the log still ends where it did */
	ck_assert_int_eq(ks_partition_log_end(p), leo);
	/* Every record kept its offset: the value written at offset o is o's. */
	for (size_t i = 0; i < l.n; i++)
		ck_assert_int_eq(l.r[i].val, (int)l.r[i].off);
	cl_free(&l);
	/* The replaced files are gone; nothing temporary is left. */
	int plain = 0;
	DIR *dd;
	struct dirent *de;
	char dpath[600];
	snprintf(dpath, sizeof(dpath), "%s/t/0", h_dir);
	ck_assert_ptr_nonnull(dd = opendir(dpath));
	while ((de = readdir(dd)))
		plain += shim_like_plain(de->d_name);
	closedir(dd);
	ck_assert_int_eq(plain, 1); /* the active segment: every sealed one was replaced */
	ck_assert_int_eq(h_count_files("t/0", ".tmp.clean"), 0);
	ck_assert_int_eq(h_count_files("t/0", CLEAN_NAME), 1);
	ks_clean_stats st;
	ks_cleaner_stats(cl, &st);
	ck_assert_uint_gt(st.records_removed, 200);
	ck_assert_uint_gt(st.unlinked, 0);
	/* A new leader sees the same log. */
	ks_partition_close(p);
	p = copen("t/0", &c, 2);
	check_latest(p, latest, &l);
	ck_assert_int_eq(l.end, leo);
	cl_free(&l);
	/* Cleaning again after more updates still converges. */
	write_updates(p, 10, 100, 1000, latest);
	ck_assert_int_ge(clean_all(p, cl, T0 + 20000), 1);
	check_latest(p, latest, &l);
	check_unique(p, &l);
	cl_free(&l);
	ks_partition_close(p);
	ks_cleaner_free(cl);
}
END_TEST

START_TEST(fetch_and_list_offsets_across_gaps)
{
	ks_log_config c = ccfg();
	ks_partition *p = copen("g/0", &c, 1);
	ks_cleaner *cl;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &cl), 0);
	int latest[CL_KEYS];
	for (int k = 0; k < CL_KEYS; k++)
		latest[k] = -1;
	write_updates(p, 4, 200, 0, latest);
	clean_all(p, cl, T0 + 10000);
	cl_log l;
	cl_read(p, &l);
	/* Reads skip the empty batches standing for removed records. */
	ck_assert_uint_eq(l.empty_batches, 0);
	ck_assert_int_lt((int64_t)l.n * 4, l.end);
	/* A consumer positioned anywhere, also inside a gap, fetches on from
	 * there: the plan starts at the batch holding the offset or, in a
	 * gap, at the first batch with records after it. */
	for (int64_t off = 0; off < 200; off += 7) {
		ks_read_plan plan = KAAS_READ_PLAN_INIT;
		ck_assert_int_eq(ks_partition_read(p, off, 1 << 16, &plan), 0);
		ck_assert_int_eq(plan.error, 0);
		ck_assert_int_gt(plan.n, 0);
		uint8_t hdr[KB_HDR];
		ck_assert_int_eq(sub_pread_full(plan.r[0].file, hdr, KB_HDR, plan.r[0].pos), 0);
		kb_hdr h;
		ks__kb_decode(hdr, &h);
		ck_assert_int_ge(kb_last_offset(&h), off);
		ck_assert_int_gt(h.count, 0);
		if (h.base_offset > off)
			for (size_t i = 0; i < l.n; i++)
				ck_assert(!(l.r[i].off >= off && l.r[i].off < h.base_offset));
		ks_read_plan_release(&plan);
		/* Reading on from there reaches every later record. */
		uint8_t *buf;
		size_t len = h_read_all(p, off, 512, &buf);
		cl_log part = {0};
		cl_decode(buf, len, -1, &part);
		size_t later = 0;
		for (size_t i = 0; i < l.n; i++)
			later += l.r[i].off >= off;
		size_t seen = 0;
		for (size_t i = 0; i < part.n; i++)
			seen += part.r[i].off >= off;
		ck_assert_uint_eq(seen, later);
		cl_free(&part);
		free(buf);
	}
	/* ListOffsets by time finds the first kept record at or after it. */
	int64_t o, ts;
	ck_assert_int_eq(ks_partition_offset_for_time(p, T0 + 3, &o, &ts), 0);
	ck_assert_int_ge(o, 3);
	int found = 0;
	for (size_t i = 0; i < l.n; i++)
		if (l.r[i].off == o)
			found = 1;
	ck_assert_msg(found, "offset %lld for a timestamp is not a kept record", (long long)o);
	ck_assert_int_eq(ks_partition_offset_for_time(p, KAAS_TS_EARLIEST, &o, &ts), 0);
	ck_assert_int_eq(o, 0);
	cl_free(&l);
	ks_partition_close(p);
	ks_cleaner_free(cl);
}
END_TEST

START_TEST(tombstones_go_after_delete_retention)
{
	ks_log_config c = ccfg();
	c.delete_retention_ms = 5000;
	ks_partition *p = copen("d/0", &c, 1);
	ks_cleaner *cl;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &cl), 0);
	int latest[CL_KEYS];
	for (int k = 0; k < CL_KEYS; k++)
		latest[k] = -1;
	write_updates(p, 8, 64, 0, latest);
	/* Delete keys 1..3; key 0's updates then seal the tombstones' segment. */
	for (int k = 1; k <= 3; k++) {
		cl_put(p, -1, 0, k, -1, 1, T0 + 100 + k, KBUILD_NONE);
		latest[k] = -1;
	}
	write_updates(p, 1, 40, 500, latest);
	int64_t now = T0 + 10000;
	clean_all(p, cl, now);
	cl_log l;
	cl_read(p, &l);
	int tomb = 0;
	for (size_t i = 0; i < l.n; i++)
		tomb += l.r[i].val == -1 && l.r[i].key >= 1 && l.r[i].key <= 3;
	ck_assert_int_eq(tomb, 3); /* kept: delete.retention.ms has not passed since they became clean */
	int got[CL_KEYS];
	cl_latest(&l, got);
	for (int k = 1; k <= 3; k++)
		ck_assert_int_eq(got[k], -1);
	/* No older value of a deleted key is left. */
	for (size_t i = 0; i < l.n; i++)
		ck_assert(!(l.r[i].key >= 1 && l.r[i].key <= 3 && l.r[i].val >= 0));
	cl_free(&l);
	/* More data makes a dirty section; before the horizon the tombstones stay. */
	write_updates(p, 1, 40, 2000, latest);
	clean_all(p, cl, now + 4000);
	cl_read(p, &l);
	tomb = 0;
	for (size_t i = 0; i < l.n; i++)
		tomb += l.r[i].val == -1;
	ck_assert_int_eq(tomb, 3);
	cl_free(&l);
	write_updates(p, 1, 40, 3000, latest);
	clean_all(p, cl, now + 5001);
	cl_read(p, &l);
	tomb = 0;
	for (size_t i = 0; i < l.n; i++)
		tomb += l.r[i].val == -1;
	ck_assert_int_eq(tomb, 0);
	cl_latest(&l, got);
	for (int k = 0; k < 8; k++)
		ck_assert_int_eq(got[k], latest[k]);
	cl_free(&l);
	ks_clean_stats st;
	ks_cleaner_stats(cl, &st);
	ck_assert_uint_eq(st.tombstones_removed, 3);
	ks_partition_close(p);
	ks_cleaner_free(cl);
}
END_TEST

START_TEST(lag_and_ratio_rules)
{
	ks_log_config c = ccfg();
	c.min_compaction_lag_ms = 60000;
	ks_partition *p = copen("lag/0", &c, 1);
	ks_cleaner *cl;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &cl), 0);
	int latest[CL_KEYS];
	for (int k = 0; k < CL_KEYS; k++)
		latest[k] = -1;
	write_updates(p, 50, 200, 0, latest);
	/* min.compaction.lag.ms: records younger than it are not cleaned. */
	ck_assert_int_eq(ks_partition_clean(p, cl, T0 + 1000), 0);
	ck_assert_int_eq(ks_partition_clean(p, cl, T0 + 60000 + 200), 1);
	/* min.cleanable.dirty.ratio: a little new data is not worth a pass. */
	c.min_compaction_lag_ms = 0;
	c.min_cleanable_dirty_ratio = 0.5;
	ks_partition_set_config(p, &c);
	clean_all(p, cl, T0 + 70000);
	write_updates(p, 50, 15, 500, latest);
	int64_t dirty, end;
	ks_partition_clean_point(p, &dirty, &end);
	ck_assert_int_eq(ks_partition_clean(p, cl, T0 + 70000), 0);
	/* ... unless its oldest record passed max.compaction.lag.ms. */
	c.max_compaction_lag_ms = 30000;
	ks_partition_set_config(p, &c);
	ck_assert_int_eq(ks_partition_clean(p, cl, T0 + 1000), 0);
	/* (the oldest dirty batch is record 198's, written at T0 + 198) */
	ck_assert_int_eq(ks_partition_clean(p, cl, T0 + 197 + 30000), 0);
	ck_assert_int_eq(ks_partition_clean(p, cl, T0 + 198 + 30000), 1);
	int64_t dirty2, end2;
	ks_partition_clean_point(p, &dirty2, &end2);
	ck_assert_int_gt(dirty2, dirty);
	/* cleanup.policy=delete: never cleaned. */
	write_updates(p, 5, 100, 900, latest);
	c.cleanup_compact = KS_CLEANUP_DELETE;
	c.min_cleanable_dirty_ratio = 0;
	ks_partition_set_config(p, &c);
	ck_assert_int_eq(ks_partition_clean(p, cl, T0 + 1000000), 0);
	cl_log l;
	check_latest(p, latest, &l);
	cl_free(&l);
	ks_partition_close(p);
	ks_cleaner_free(cl);
}
END_TEST

START_TEST(multi_pass_when_keys_do_not_fit)
{
	ks_log_config c = ccfg();
	ks_partition *p = copen("mp/0", &c, 1);
	ks_cleaner *cl;
	/* 40 slots: 36 keys a pass. */
	ck_assert_int_eq(ks_cleaner_new(40 * 24, 0, &cl), 0);
	int latest[CL_KEYS];
	for (int k = 0; k < CL_KEYS; k++)
		latest[k] = -1;
	for (int round = 0; round < 3; round++)
		for (int k = 0; k < 150; k++) {
			cl_put(p, -1, 0, k, round * 1000 + k, 1, T0 + k, KBUILD_NONE);
			latest[k] = round * 1000 + k;
		}
	durable(p);
	int passes = clean_all(p, cl, T0 + 10000);
	ck_assert_int_ge(passes, 3);
	cl_log l;
	check_latest(p, latest, &l);
	check_unique(p, &l);
	cl_free(&l);
	/* Too small for even one batch: refused by name. */
	ks_cleaner *tiny;
	ck_assert_int_eq(ks_cleaner_new(20 * 24, 0, &tiny), 0);
	kbuild b = KBUILD_INIT;
	kbuild_begin(&b, -1, -1, -1, T0);
	for (int i = 0; i < 40; i++) {
		char ks[8];
		int kl = snprintf(ks, sizeof(ks), "k%d", i);
		kbuild_record(&b, ks, kl, "v1", 2, T0);
	}
	kbuild_end(&b, KBUILD_NONE);
	for (int i = 0; i < 30; i++) {
		ks_append_result res;
		uint8_t *copy = malloc(b.len);
		memcpy(copy, b.buf, b.len);
		ck_assert_int_eq(ks_partition_append(p, copy, b.len, &res), 0);
		free(copy);
	}
	kbuild_free(&b);
	durable(p);
	int rc;
	while ((rc = ks_partition_clean(p, tiny, T0 + 10000)) == 1)
		;
	ck_assert_int_eq(rc, -ENOBUFS);
	ks_cleaner_free(tiny);
	ck_assert_int_eq(ks_cleaner_new(10, 0, &tiny), -EINVAL);
	ks_partition_close(p);
	ks_cleaner_free(cl);
}
END_TEST

START_TEST(producer_state_and_compression_survive)
{
	ks_log_config c = ccfg();
	ks_partition *p = copen("ps/0", &c, 1);
	ks_cleaner *cl;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &cl), 0);
	int latest[CL_KEYS];
	for (int k = 0; k < CL_KEYS; k++)
		latest[k] = -1;
	/* An idempotent producer writing 3-record gzip batches over 6 keys. */
	int32_t seq = 0;
	int64_t last_base = -1;
	for (int i = 0; i < 60; i++) {
		int k = (i * 3) % 6;
		last_base = cl_put(p, 7, seq, k, i * 10, 3, T0 + i, KBUILD_GZIP);
		for (int j = 0; j < 3; j++)
			latest[k + j] = i * 10 + j;
		seq += 3;
	}
	/* Its last batch is superseded by a later plain write of its keys. */
	write_updates(p, 6, 60, 5000, latest);
	clean_all(p, cl, T0 + 10000);
	cl_log l;
	check_latest(p, latest, &l);
	cl_free(&l);
	/* A retry of the producer's last batch is still a duplicate, here ... */
	kbuild b = KBUILD_INIT;
	kbuild_begin(&b, 7, 0, seq - 3, T0);
	for (int j = 0; j < 3; j++) {
		char ks[8];
		int kl = snprintf(ks, sizeof(ks), "k%d", ((59 * 3) % 6) + j);
		kbuild_record(&b, ks, kl, "x", 1, T0);
	}
	kbuild_end(&b, KBUILD_GZIP);
	ks_append_result res;
	uint8_t *copy = malloc(b.len);
	memcpy(copy, b.buf, b.len);
	ck_assert_int_eq(ks_partition_append(p, copy, b.len, &res), 0);
	ck_assert(res.error == 0 && res.duplicate && res.base_offset == last_base);
	free(copy);
	ks_partition_close(p);
	/* ... and after producer state is rebuilt from the cleaned log alone. */
	char snap[600];
	snprintf(snap, sizeof(snap), "%s/ps/0/%s", h_dir, SNAPSHOT_NAME);
	ck_assert_int_eq(unlink(snap), 0);
	p = copen("ps/0", &c, 2);
	copy = malloc(b.len);
	memcpy(copy, b.buf, b.len);
	ck_assert_int_eq(ks_partition_append(p, copy, b.len, &res), 0);
	ck_assert_msg(res.error == 0 && res.duplicate && res.base_offset == last_base,
		      "retry after rebuild: %s dup %d base %lld want %lld", kw_kerr_name(res.error), res.duplicate,
		      (long long)res.base_offset, (long long)last_base);
	free(copy);
	kbuild_free(&b);
	check_latest(p, latest, &l);
	cl_free(&l);
	ks_partition_close(p);
	ks_cleaner_free(cl);
}
END_TEST

/* The codecs of the batches of p's log that hold records: fully kept
 * (count = offsets) in full[], partly kept in part[]; counts per codec. */
static void codecs_of(ks_partition *p, int full[5], int part[5])
{
	memset(full, 0, 5 * sizeof(int));
	memset(part, 0, 5 * sizeof(int));
	uint8_t *buf;
	size_t len = h_read_all(p, ks_partition_log_start(p), 4096, &buf);
	h_check_log(buf, len, -1); /* every CRC valid */
	for (size_t pos = 0; pos < len;) {
		kb_hdr h;
		ks__kb_decode(buf + pos, &h);
		if (h.count > 0)
			(h.count == h.last_delta + 1 ? full : part)[h.attrs & KB_ATTR_CODEC_MASK]++;
		pos += kb_size(&h);
	}
	free(buf);
}

/* A batch that keeps only some of its records is compressed again with
 * its own codec (Kafka's cleaner), or with the topic's compression.type
 * when that is not producer; batches kept whole keep their bytes; readers
 * see the latest value of every key either way. */
START_TEST(partly_kept_batches_are_recompressed)
{
	static const int codecs[] = {KBUILD_GZIP, KBUILD_SNAPPY, KBUILD_LZ4, KBUILD_ZSTD};
	for (int topic = 0; topic < 2; topic++)
		for (int i = 0; i < 4; i++) {
			ks_log_config c = ccfg();
			char dir[32];
			snprintf(dir, sizeof(dir), "rc%d-%d/0", topic, i);
			ks_partition *p = copen(dir, &c, 1);
			ks_cleaner *cl;
			ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &cl), 0);
			int latest[CL_KEYS];
			for (int k = 0; k < CL_KEYS; k++)
				latest[k] = -1;
			/* Batches of keys 0..2 and 3..5; then key 1 and key 4 again,
			 * uncompressed: each compressed batch loses one record. */
			for (int r = 0; r < 20; r++) {
				int k = (r % 2) * 3;
				cl_put(p, -1, 0, k, r * 10, 3, T0 + r, codecs[i]);
				for (int j = 0; j < 3; j++)
					latest[k + j] = r * 10 + j;
			}
			/* One compressed batch no later record supersedes: kept whole. */
			cl_put(p, -1, 0, 6, 500, 3, T0 + 50, codecs[i]);
			for (int j = 0; j < 3; j++)
				latest[6 + j] = 500 + j;
			for (int r = 0; r < 18; r++) {
				int k = 1 + (r % 2) * 3;
				cl_put(p, -1, 0, k, 1000 + r, 1, T0 + 100 + r, KBUILD_NONE);
				latest[k] = 1000 + r;
			}
			durable(p);
			if (topic) {
				/* compression.type=zstd from now on: a new batch is stored
				 * zstd, and the cleaner's rewrites follow the topic. */
				c.compression_type = KS_COMPRESS_ZSTD;
				ks_partition_set_config(p, &c);
			}
			for (int r = 18; r < 40; r++) {
				int k = 1 + (r % 2) * 3;
				cl_put(p, -1, 0, k, 1000 + r, 1, T0 + 100 + r, KBUILD_NONE);
				latest[k] = 1000 + r;
			}
			durable(p);
			ck_assert_int_ge(clean_all(p, cl, T0 + 10000), 1);
			cl_log l;
			check_latest(p, latest, &l);
			cl_free(&l);
			int full[5], part[5];
			codecs_of(p, full, part);
			int want = topic ? KBUILD_ZSTD : codecs[i];
			ck_assert_int_ge(full[codecs[i]], 1); /* whole batches keep their bytes */
			ck_assert_msg(part[want] >= 2, "codec %d, topic %d: %d partly kept batches in codec %d", codecs[i],
				      topic, part[want], want);
			for (int k = 0; k < 5; k++)
				if (k != want)
					ck_assert_msg(part[k] == 0, "codec %d: %d partly kept batches in codec %d", codecs[i],
						      part[k], k);
			ks_clean_stats st;
			ks_cleaner_stats(cl, &st);
			ck_assert_uint_ge(st.recompressed, 2);
			ks_partition_close(p);
			ks_cleaner_free(cl);
		}
}
END_TEST

/* A simulated clock for the I/O bucket. */
static int64_t sim_ms;
static int64_t sim_now(void *arg) { (void)arg; return sim_ms; }
static void sim_sleep(void *arg, int64_t ms) { (void)arg; sim_ms += ms; }

START_TEST(io_rate_is_bounded)
{
	ks_log_config c = ccfg();
	ks_partition *p = copen("io/0", &c, 1);
	ks_cleaner *cl;
	int64_t rate = 20000;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, rate, &cl), 0);
	sim_ms = 1000;
	ks_cleaner_set_clock(cl, sim_now, sim_sleep, NULL);
	int latest[CL_KEYS];
	for (int k = 0; k < CL_KEYS; k++)
		latest[k] = -1;
	write_updates(p, 10, 800, 0, latest);
	int64_t t0 = sim_ms;
	clean_all(p, cl, T0 + 10000);
	ks_clean_stats st;
	ks_cleaner_stats(cl, &st);
	uint64_t io = st.bytes_read + st.bytes_written;
	ck_assert_uint_gt(io, 2 * (uint64_t)rate);
	/* At most a second banked: io <= rate x (elapsed + 1 s). */
	ck_assert_msg((int64_t)io <= rate * (sim_ms - t0 + 1000) / 1000 + 4096,
		      "%llu bytes in %lld ms at %lld B/s", (unsigned long long)io, (long long)(sim_ms - t0),
		      (long long)rate);
	cl_log l;
	check_latest(p, latest, &l);
	cl_free(&l);
	ks_partition_close(p);
	ks_cleaner_free(cl);
}
END_TEST

START_TEST(leftovers_are_removed_and_unreadable_record_keeps_everything)
{
	ks_log_config c = ccfg();
	ks_partition *p = copen("lo/0", &c, 1);
	ks_cleaner *cl;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &cl), 0);
	int latest[CL_KEYS];
	for (int k = 0; k < CL_KEYS; k++)
		latest[k] = -1;
	write_updates(p, 10, 200, 0, latest);
	clean_all(p, cl, T0 + 10000);
	ks_partition_relinquish(p);
	/* Files of a pass that never swapped in (a crash before clean.json),
	 * and a plain segment a swap replaced (a crash before the unlink). */
	char path[700];
	snprintf(path, sizeof(path), "%s/lo/0/0000000001-00000000000000000000.c%020lld.log", h_dir,
		 (long long)CLEAN_GEN(1, 99));
	FILE *f = fopen(path, "w");
	fputs("junk", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/lo/0/0000000001-00000000000000000003.log", h_dir);
	f = fopen(path, "w");
	fputs("junk", f);
	fclose(f);
	char junk1[700];
	snprintf(junk1, sizeof(junk1), "%s/lo/0/0000000001-00000000000000000000.c%020lld.log", h_dir,
		 (long long)CLEAN_GEN(1, 99));
	ks_partition_close(p);
	p = copen("lo/0", &c, 2);
	ck_assert_int_eq(access(junk1, F_OK), -1);
	ck_assert_int_eq(access(path, F_OK), -1);
	cl_log l;
	check_latest(p, latest, &l);
	cl_free(&l);
	ks_partition_close(p);
	/* An unreadable clean.json: nothing cleaned is used or removed, and
	 * the cleaner stays away. */
	int cleaned = 0;
	DIR *dd;
	struct dirent *de;
	char dpath[600];
	snprintf(dpath, sizeof(dpath), "%s/lo/0", h_dir);
	ck_assert_ptr_nonnull(dd = opendir(dpath));
	while ((de = readdir(dd)))
		cleaned += strstr(de->d_name, ".c0") != NULL;
	closedir(dd);
	ck_assert_int_gt(cleaned, 0);
	snprintf(path, sizeof(path), "%s/lo/0/%s", h_dir, CLEAN_NAME);
	f = fopen(path, "w");
	fputs("{\"version\":1,", f);
	fclose(f);
	p = copen("lo/0", &c, 3);
	ks_partition_housekeep(p, T0);
	int after = 0;
	ck_assert_ptr_nonnull(dd = opendir(dpath));
	while ((de = readdir(dd)))
		after += strstr(de->d_name, ".c0") != NULL;
	closedir(dd);
	ck_assert_int_eq(after, cleaned);
	ck_assert_int_eq(ks_partition_clean(p, cl, T0 + 10000), 0);
	ks_partition_close(p);
	ks_cleaner_free(cl);
}
END_TEST

/* As Kafka: a compacted topic refuses a keyless record (INVALID_RECORD),
 * compressed or not; a delete topic takes it. */
START_TEST(keyless_records_refused_on_compacted_topics)
{
	ks_log_config c = ccfg();
	ks_partition *p = copen("nk/0", &c, 1);
	int codecs[] = {KBUILD_NONE, KBUILD_GZIP, KBUILD_ZSTD};
	for (int i = 0; i < 3; i++) {
		kbuild b = KBUILD_INIT;
		kbuild_begin(&b, -1, -1, -1, T0);
		kbuild_record(&b, "k1", 2, "v", 1, T0);
		kbuild_record(&b, NULL, -1, "v", 1, T0);
		kbuild_end(&b, codecs[i]);
		ks_append_result res;
		ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
		ck_assert_int_eq(res.error, KERR_INVALID_RECORD);
		ck_assert_ptr_nonnull(strstr(res.message, "without key"));
		kbuild_free(&b);
	}
	ck_assert_int_eq(ks_partition_log_end(p), 0);
	c.cleanup_compact = KS_CLEANUP_DELETE;
	ks_partition_set_config(p, &c);
	kbuild b = KBUILD_INIT;
	kbuild_begin(&b, -1, -1, -1, T0);
	kbuild_record(&b, NULL, -1, "v", 1, T0);
	kbuild_end(&b, KBUILD_NONE);
	ks_append_result res;
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, 0);
	kbuild_free(&b);
	ks_partition_close(p);
}
END_TEST

/* Everything cleaned away (tombstones past delete.retention.ms, the
 * active segment empty after a roll): the log holds only empty batches
 * below the high watermark, and a consumer still reaches the end. */
START_TEST(log_cleaned_down_to_nothing_is_read_to_its_end)
{
	ks_log_config c = ccfg();
	c.delete_retention_ms = 5000;
	ks_partition *p = copen("nt/0", &c, 1);
	ks_cleaner *cl;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &cl), 0);
	for (int i = 0; i < 60; i++)
		cl_put(p, -1, 0, i % 6, i, 1, T0 + i, KBUILD_NONE);
	for (int k = 0; k < 6; k++)
		cl_put(p, -1, 0, k, -1, 1, T0 + 100, KBUILD_NONE);
	durable(p);
	c.segment_ms = 0;
	ks_partition_set_config(p, &c);
	ck_assert_int_ge(ks_partition_housekeep(p, ku_wall_ms() + 1000), 0); /* rolls the active segment */
	int64_t hw = ks_partition_high_watermark(p);
	ck_assert_int_eq(hw, 66);
	ck_assert_int_eq(clean_all(p, cl, T0 + 10000), 1); /* the tombstones become clean */
	ck_assert_int_eq(ks_partition_clean(p, cl, T0 + 14999), 0);
	/* No new data: the tombstones past delete.retention.ms make the pass due. */
	ck_assert_int_eq(ks_partition_clean(p, cl, T0 + 20000), 1);
	ck_assert_int_eq(ks_partition_clean(p, cl, T0 + 30000), 0); /* and then nothing is */
	cl_log l;
	cl_read(p, &l);
	ck_assert_uint_eq(l.n, 0);
	int got[CL_KEYS];
	cl_latest(&l, got);
	for (int k = 0; k < 6; k++)
		ck_assert_int_eq(got[k], -1);
	cl_free(&l);
	/* A fetch at any offset moves the consumer on to the high watermark. */
	for (int64_t off = 0; off < hw; off += 5) {
		uint8_t *buf;
		free((h_read_all(p, off, 4096, &buf), buf));
	}
	ck_assert_int_eq(ks_partition_high_watermark(p), hw);
	ks_partition_close(p);
	p = copen("nt/0", &c, 2);
	ck_assert_int_eq(ks_partition_log_end(p), hw);
	ks_partition_close(p);
	ks_cleaner_free(cl);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "storage-cleaner", .tcase = "cleaner", .timeout = 120,
					  .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(dedupe_keeps_latest_per_key, fetch_and_list_offsets_across_gaps,
				     tombstones_go_after_delete_retention, lag_and_ratio_rules,
				     multi_pass_when_keys_do_not_fit, producer_state_and_compression_survive, partly_kept_batches_are_recompressed,
				     io_rate_is_bounded, leftovers_are_removed_and_unreadable_record_keeps_everything,
				     keyless_records_refused_on_compacted_topics,
				     log_cleaned_down_to_nothing_is_read_to_its_end));
}
