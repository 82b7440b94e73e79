/*
 * test_clean_crash.c — power loss at every mutating call of a workload
 * that appends keyed records, cleans the log (twice, the second pass
 * rewriting the first one's segments), appends again and relinquishes.
 *
 * After each crash a fresh engine takes over on a fresh client and must
 * find a valid log — every batch intact, offsets growing — that is either
 * the cleaned or the not-yet-cleaned view of a prefix of what was appended:
 * for every key, the last value that prefix wrote is the one a reader from
 * the start ends with, and everything acknowledged is in the prefix.
 * Nothing may be left that no view references: no temporary file, no
 * cleaned file clean.json does not name, no plain segment it replaced.
 * The cleaner must then run on the recovered partition and change nothing
 * a reader sees.
 */
#include <dirent.h>

#include "kaas/storage/storage_int.h"
#include "kaas/storage/test/cleanlog.h"
#include "substrates/sub_fault.h"
#include "util/test/ktest.h"

#define T0 1700000000000LL
#define NREC 90

typedef struct wl {
	int64_t durable;      /* acknowledged: offsets below it */
	int64_t appended;     /* offsets handed out */
	uint64_t clean_muts;  /* mutations inside the cleaning calls */
	int cleaned;          /* passes swapped in */
} wl;

static ks_log_config wcfg(void)
{
	ks_log_config c = h_cfg();
	c.segment_bytes = 1024;
	c.segment_ms = -1;
	c.retention_ms = -1;
	c.index_interval_bytes = 200;
	c.cleanup_compact = KS_CLEANUP_COMPACT;
	c.min_cleanable_dirty_ratio = 0;
	c.delete_retention_ms = 0;
	return c;
}

/* Record i of the workload: key i % 7, value i (every 11th a tombstone). */
static int w_key(int i) { return i % 7; }
static int w_val(int i) { return i % 11 == 10 ? -1 : i; }

static int w_append(ks_partition *p, int i, wl *w)
{
	kbuild b = KBUILD_INIT;
	kbuild_begin(&b, -1, -1, -1, T0 + i);
	char ks[8], vs[48];
	int kl = snprintf(ks, sizeof(ks), "k%d", w_key(i));
	int vl = w_val(i) < 0 ? -1 : snprintf(vs, sizeof(vs), "v%d-%s", i, "padding-padding-padding");
	kbuild_record(&b, ks, kl, vs, vl, T0 + i);
	kbuild_end(&b, KBUILD_NONE);
	ks_append_result res;
	int rc = ks_partition_append(p, b.buf, b.len, &res);
	kbuild_free(&b);
	if (rc || res.error)
		return -1;
	ck_assert_int_eq(res.base_offset, i); /* one record a batch: offset i is record i */
	w->appended = i + 1;
	return 0;
}

static int w_flush(ks_partition *p, wl *w)
{
	int64_t d;
	if (ks_partition_flush(p, &d))
		return -1;
	if (d > w->durable)
		w->durable = d;
	return 0;
}

static int w_clean(ks_partition *p, ks_cleaner *c, sub_vfs *fv, wl *w)
{
	uint64_t m0 = sub_fault_mutations(fv);
	int rc;
	while ((rc = ks_partition_clean(p, c, T0 + 100000)) == 1)
		w->cleaned++;
	w->clean_muts += sub_fault_mutations(fv) - m0;
	return rc;
}

static void workload(sub_vfs *v, const char *dir, wl *w)
{
	ks_log_config cfg = wcfg();
	ks_partition *p = NULL;
	ks_cleaner *c = NULL;
	ck_assert_int_eq(ks_cleaner_new(1 << 16, 0, &c), 0);
	if (ks_partition_open(v, dir, NULL, 1, &cfg, &p) || ks_partition_take_over(p, 1))
		goto out;
	for (int i = 0; i < NREC; i++) {
		if (w_append(p, i, w))
			goto out;
		if (i % 3 == 2 && w_flush(p, w))
			goto out;
		if ((i == 40 || i == 75) && (w_flush(p, w) || w_clean(p, c, v, w)))
			goto out;
	}
	if (w_flush(p, w))
		goto out;
	if (ks_partition_relinquish(p) == 0)
		w->durable = ks_partition_high_watermark(p);
out:
	ks_partition_close(p);
	ks_cleaner_free(c);
}

static uint64_t run_once(const char *dir, const char *opts, wl *w)
{
	char url[600], err[256];
	sub_vfs *fv;
	memset(w, 0, sizeof(*w));
	snprintf(url, sizeof(url), "fault:%s?%s", h_dir, opts);
	ck_assert_msg(sub_open_url(url, &fv, err, sizeof(err)) == 0, "%s", err);
	workload(fv, dir, w);
	uint64_t m = sub_fault_mutations(fv);
	sub_fault_crash(fv);
	sub_destroy(fv);
	return m;
}

/* Every file of the directory is referenced by the recovered view. */
static void check_no_garbage(ks_partition *p, const char *dir, uint64_t point)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", h_dir, dir);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		ck_assert_msg(!strstr(e->d_name, ".tmp."), "point %llu: %s left", (unsigned long long)point,
			      e->d_name);
		int32_t ep;
		int64_t b, g;
		int kind = ks__seg_parse_name_g(e->d_name, &ep, &b, &g);
		if (kind != SEG_LOG)
			continue;
		int live = 0;
		for (size_t i = 0; i < p->nsegs; i++)
			live |= p->segs[i]->base == b && p->segs[i]->epoch == ep && p->segs[i]->gen == g;
		ck_assert_msg(live, "point %llu: %s is in no view (clean.json gen %lld)", (unsigned long long)point,
			      e->d_name, (long long)p->clean.gen);
	}
	closedir(d);
}

static void verify(const char *dir, const wl *w, uint64_t point)
{
	ks_log_config cfg = wcfg();
	ks_partition *p;
	sub_vfs *v;
	char err[256];
	ck_assert_int_eq(sub_open_url(h_dir, &v, err, sizeof(err)), 0);
	int rc = ks_partition_open(v, dir, NULL, 0, &cfg, &p);
	if (rc == -ENOENT) {
		ck_assert(w->durable == 0);
		sub_destroy(v);
		return;
	}
	ck_assert_int_eq(rc, 0);
	ck_assert_msg(ks_partition_take_over(p, 10) == 0, "point %llu: take-over failed", (unsigned long long)point);
	int64_t leo = ks_partition_log_end(p);
	ck_assert_msg(leo >= w->durable, "point %llu: log ends at %lld, %lld acknowledged", (unsigned long long)point,
		      (long long)leo, (long long)w->durable);
	ck_assert_msg(leo <= w->appended, "point %llu: log end %lld beyond the %lld appended", (unsigned long long)point,
		      (long long)leo, (long long)w->appended);
	/* The latest value of every key among records [0, leo). */
	int want[CL_KEYS];
	for (int k = 0; k < CL_KEYS; k++)
		want[k] = -1;
	for (int i = 0; i < leo; i++)
		want[w_key(i)] = w_val(i);
	cl_log l;
	cl_read(p, &l);
	int got[CL_KEYS];
	cl_latest(&l, got);
	for (int k = 0; k < 7; k++)
		ck_assert_msg(got[k] == want[k], "point %llu: key %d reads %d, the log's latest is %d",
			      (unsigned long long)point, k, got[k], want[k]);
	/* Records are the workload's own, at their offsets. */
	for (size_t i = 0; i < l.n; i++) {
		ck_assert_int_lt(l.r[i].off, leo);
		ck_assert_int_eq(l.r[i].key, w_key((int)l.r[i].off));
		ck_assert_int_eq(l.r[i].val, w_val((int)l.r[i].off));
	}
	cl_free(&l);
	check_no_garbage(p, dir, point);
	/* The cleaner goes on from here without changing what a reader sees. */
	ks_cleaner *c;
	ck_assert_int_eq(ks_cleaner_new(1 << 16, 0, &c), 0);
	while ((rc = ks_partition_clean(p, c, T0 + 200000)) == 1)
		;
	ck_assert_int_eq(rc, 0);
	ks_cleaner_free(c);
	cl_read(p, &l);
	cl_latest(&l, got);
	for (int k = 0; k < 7; k++)
		ck_assert_int_eq(got[k], want[k]);
	cl_free(&l);
	ks_partition_close(p);
	sub_destroy(v);
}

static void sweep(const char *mode, uint64_t seed0)
{
	char opts[200], dir[64];
	wl w;
	snprintf(dir, sizeof(dir), "full-%s", mode);
	snprintf(opts, sizeof(opts), "seed=%llu&crash_mode=%s", (unsigned long long)seed0, mode);
	uint64_t m = run_once(dir, opts, &w);
	ck_assert_int_ge(w.cleaned, 2);
	ck_assert_uint_gt(w.clean_muts, 40); /* the crash points below fall into the cleans */
	verify(dir, &w, m);
	for (uint64_t n = 0; n <= m; n++) {
		snprintf(dir, sizeof(dir), "%s-%llu", mode, (unsigned long long)n);
		snprintf(opts, sizeof(opts), "crash_after=%llu&seed=%llu&crash_mode=%s", (unsigned long long)n,
			 (unsigned long long)(seed0 + n), mode);
		run_once(dir, opts, &w);
		verify(dir, &w, n);
	}
	if (getenv("KAAS_LOG_LEVEL"))
		fprintf(stderr, "clean crash sweep %s: %llu points, %llu in the cleans\n", mode,
			(unsigned long long)m, (unsigned long long)w.clean_muts);
}

START_TEST(clean_crash_random)
{
	sweep("random", 7000);
}
END_TEST

START_TEST(clean_crash_drop)
{
	sweep("drop", 11000);
}
END_TEST

START_TEST(clean_crash_keep)
{
	sweep("keep", 13000);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "storage-clean-crash", .tcase = "clean-crash", .timeout = 600,
					  .setup = h_setup_mem, .teardown = h_teardown },
			  KTEST_LIST(clean_crash_random, clean_crash_drop, clean_crash_keep));
}
