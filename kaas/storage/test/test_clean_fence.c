/*
 * test_clean_fence.c — only the leader cleans: a leader that lost its
 * partition to a newer epoch while a pass ran (a paused or partitioned
 * broker that has not heard yet) never swaps its clean.json in, and never
 * removes a file of the newer leader's view; a broker whose lease is gone
 * (the guard) does not swap either.  The newer leader's cleaner then
 * carries on from the log as it found it.
 */
#include "kaas/storage/storage_int.h"
#include "kaas/storage/test/cleanlog.h"
#include "kaas/storage/test/shim.h"
#include "util/test/ktest.h"

#define T0 1700000000000LL
#define KEYS 20

static ks_log_config ccfg(void)
{
	ks_log_config c = h_cfg();
	c.segment_bytes = 1024;
	c.segment_ms = -1;
	c.retention_ms = -1;
	c.cleanup_compact = KS_CLEANUP_COMPACT;
	c.min_cleanable_dirty_ratio = 0.0;
	return c;
}

static ks_partition *copen_on(sub_vfs *v, const char *dir, int32_t epoch)
{
	ks_log_config c = ccfg();
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(v, dir, NULL, 1, &c, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, epoch), 0);
	return p;
}

/* 300 updates round-robin over KEYS keys, durable; latest[] what a reader
 * must end with. */
static void fill(ks_partition *p, int latest[CL_KEYS])
{
	for (int k = 0; k < CL_KEYS; k++)
		latest[k] = -1;
	for (int i = 0; i < 300; i++) {
		cl_put(p, -1, 0, i % KEYS, i, 1, T0 + i, i % 3 ? KBUILD_NONE : KBUILD_GZIP);
		latest[i % KEYS] = i;
	}
	int64_t d;
	ck_assert_int_eq(ks_partition_flush(p, &d), 0);
}

static void check_view(ks_partition *p, const int latest[CL_KEYS], size_t min_records)
{
	cl_log l;
	cl_read(p, &l); /* fails if a segment of p's view was removed */
	int got[CL_KEYS];
	cl_latest(&l, got);
	for (int k = 0; k < KEYS; k++)
		ck_assert_msg(got[k] == latest[k], "key %d: %d, want %d", k, got[k], latest[k]);
	ck_assert_uint_ge(l.n, min_records);
	cl_free(&l);
}

static int clean_json_epoch(const char *dir)
{
	kclean k = {0};
	ck_assert_int_eq(ks__clean_read(h_vfs, dir, &k), 0);
	int e = k.state == 1 ? k.epoch : -1;
	ks__clean_free(&k);
	return e;
}

/* Cleaned files (".c<gen>.") in dir. */
static int cleaned_files(const char *dir)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/%s", h_dir, dir);
	int n = 0;
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	while ((de = readdir(d)))
		n += strstr(de->d_name, ".c0") != NULL;
	closedir(d);
	return n;
}

/* ---- a newer leader takes over while the pass rewrites ------------------- */

static ks_partition *newer;
static int64_t sim_ms;
static int sleeps;
static int64_t sim_now(void *arg) { (void)arg; return sim_ms; }
static void take_over_in_sleep(void *arg, int64_t ms)
{
	sim_ms += ms;
	/* A few buckets into the pass: another broker takes the partition. */
	if (++sleeps == 3 && !newer)
		newer = copen_on(h_vfs, (const char *)arg, 2);
}

START_TEST(stale_leader_mid_pass_never_swaps)
{
	ks_partition *p = copen_on(h_vfs, "z/0", 1);
	int latest[CL_KEYS];
	fill(p, latest);
	ks_cleaner *c;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 4096, &c), 0); /* slow: the pass sleeps */
	ks_cleaner_set_clock(c, sim_now, take_over_in_sleep, (void *)"z/0");
	ck_assert_int_eq(ks_partition_clean(p, c, T0 + 100000), -EPERM);
	ck_assert_ptr_nonnull(newer);
	ks_clean_stats st;
	ks_cleaner_stats(c, &st);
	ck_assert_uint_eq(st.passes, 0);
	ck_assert_uint_eq(st.fenced, 1);
	ck_assert_int_eq(clean_json_epoch("z/0"), -1); /* no clean.json */
	ck_assert_int_eq(cleaned_files("z/0"), 0);     /* what the stale pass wrote is gone */
	/* The stale leader is fenced: its appends are refused. */
	kbuild b = KBUILD_INIT;
	kbuild_simple(&b, -1, -1, -1, 1, T0, "late", 8, KBUILD_NONE);
	ks_append_result res;
	ks_partition_append(p, b.buf, b.len, &res);
	ck_assert_int_eq(res.error, KERR_NOT_LEADER_OR_FOLLOWER);
	kbuild_free(&b);
	ks_partition_close(p);
	/* The new leader's view is whole, and its cleaner carries on. */
	check_view(newer, latest, 300);
	ks_cleaner *c2;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &c2), 0);
	ck_assert_int_ge(ks_partition_clean(newer, c2, T0 + 100000), 1);
	ck_assert_int_eq(clean_json_epoch("z/0"), 2);
	check_view(newer, latest, KEYS);
	ks_partition_close(newer);
	newer = NULL;
	/* ... and a later leader reads the same. */
	p = copen_on(h_vfs, "z/0", 3);
	check_view(p, latest, KEYS);
	ks_partition_close(p);
	ks_cleaner_free(c);
	ks_cleaner_free(c2);
}
END_TEST

/* ---- the take-over lands during the swap itself ------------------------- */

static const char *race_dir;
static int race_at_fsync, renamed;
static void take_over_at_swap(void *arg, const char *op, const char *path, const char *to)
{
	(void)arg, (void)path;
	if (newer)
		return;
	int is_rename = strcmp(op, "rename") == 0 && to && strstr(to, CLEAN_NAME);
	/* Before the rename of clean.json: after the fencing check passed.
	 * After it (at the directory fsync that ends sub_write_atomic): before
	 * the stale leader removes what the swap replaced. */
	if ((!race_at_fsync && is_rename) || (race_at_fsync && renamed && strcmp(op, "fsync_dir") == 0))
		newer = copen_on(h_vfs, race_dir, 2);
	renamed |= is_rename;
}

static void swap_race(const char *dir, int at_fsync)
{
	race_dir = dir;
	race_at_fsync = at_fsync;
	renamed = 0;
	shim_vfs *sv = shim_wrap(h_vfs, take_over_at_swap, NULL);
	ks_partition *p = copen_on(&sv->base, race_dir, 1);
	int latest[CL_KEYS];
	fill(p, latest);
	ks_cleaner *c;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &c), 0);
	int rc = ks_partition_clean(p, c, T0 + 100000);
	ck_assert_ptr_nonnull(newer);
	ks_clean_stats st;
	ks_cleaner_stats(c, &st);
	ck_assert_uint_eq(st.passes, 0);
	ck_assert_uint_eq(st.unlinked, 0); /* nothing of the newer leader's view removed */
	if (!at_fsync) {
		/* The newer leader's take-over swept the temp file: the rename
		 * fails, the stale leadership is poisoned, nothing swapped. */
		ck_assert_int_eq(rc, -ENOENT);
		ck_assert_int_eq(clean_json_epoch(race_dir), -1);
	} else {
		/* Swapped, then fenced: the stale pass ends without touching
		 * what it replaced (the newer leader's sweep decides). */
		ck_assert_int_eq(rc, -EPERM);
		ck_assert_uint_eq(st.fenced, 1);
		ck_assert_int_eq(clean_json_epoch(race_dir), 1);
	}
	kbuild b = KBUILD_INIT;
	kbuild_simple(&b, -1, -1, -1, 1, T0, "late", 8, KBUILD_NONE);
	ks_append_result res;
	ks_partition_append(p, b.buf, b.len, &res);
	ck_assert_int_ne(res.error, 0); /* fenced or poisoned: no more appends */
	kbuild_free(&b);
	ks_partition_close(p);
	/* The newer leader reads every key's latest value, then cleans. */
	check_view(newer, latest, at_fsync ? KEYS : 300);
	ks_cleaner *c2;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &c2), 0);
	ck_assert_int_ge(ks_partition_clean(newer, c2, T0 + 100000), at_fsync ? 0 : 1);
	check_view(newer, latest, KEYS);
	ks_partition_close(newer);
	newer = NULL;
	p = copen_on(h_vfs, race_dir, 3);
	check_view(p, latest, KEYS);
	ks_partition_close(p);
	ks_cleaner_free(c);
	ks_cleaner_free(c2);
	sub_destroy(&sv->base);
}

START_TEST(take_over_during_the_swap_keeps_the_newer_view)
{
	swap_race("r/0", 0);
	swap_race("r/1", 1);
}
END_TEST

/* ---- the lease guard ------------------------------------------------------ */

static int lease_ok;
static int guard(void *arg) { (void)arg; return lease_ok; }

START_TEST(no_swap_without_the_lease)
{
	ks_partition *p = copen_on(h_vfs, "g/0", 1);
	int latest[CL_KEYS];
	fill(p, latest);
	ks_cleaner *c;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &c), 0);
	ks_cleaner_set_guard(c, guard, NULL);
	lease_ok = 0;
	ck_assert_int_eq(ks_partition_clean(p, c, T0 + 100000), -EPERM);
	ck_assert_int_eq(clean_json_epoch("g/0"), -1);
	ck_assert_int_eq(cleaned_files("g/0"), 0);
	check_view(p, latest, 300);
	lease_ok = 1;
	ck_assert_int_eq(ks_partition_clean(p, c, T0 + 100000), 1);
	ck_assert_int_eq(clean_json_epoch("g/0"), 1);
	check_view(p, latest, KEYS);
	ks_clean_stats st;
	ks_cleaner_stats(c, &st);
	ck_assert_uint_eq(st.fenced, 1);
	ck_assert_uint_eq(st.passes, 1);
	ks_partition_close(p);
	ks_cleaner_free(c);
}
END_TEST

/* The lease runs out while clean.json is renamed in and no newer leader's
 * file is on the volume yet (a successor that listed the directory before
 * the rename and has not created its segment): the stale leader removes
 * none of the files the swap replaced. */
static void lapse_at_rename(void *arg, const char *op, const char *path, const char *to)
{
	(void)arg, (void)path;
	if (strcmp(op, "rename") == 0 && to && strstr(to, CLEAN_NAME))
		lease_ok = 0;
}

START_TEST(a_lease_lost_during_the_swap_unlinks_nothing)
{
	shim_vfs *sv = shim_wrap(h_vfs, lapse_at_rename, NULL);
	ks_partition *p = copen_on(&sv->base, "l/0", 1);
	int latest[CL_KEYS];
	fill(p, latest);
	ks_cleaner *c;
	ck_assert_int_eq(ks_cleaner_new(1 << 20, 0, &c), 0);
	ks_cleaner_set_guard(c, guard, NULL);
	lease_ok = 1;
	int rc = ks_partition_clean(p, c, T0 + 100000);
	ck_assert_int_lt(rc, 0);
	ks_clean_stats st;
	ks_cleaner_stats(c, &st);
	ck_assert_uint_eq(st.fenced, 1);
	ck_assert_uint_eq(st.unlinked, 0); /* a successor's view may still hold them */
	ck_assert_int_eq(clean_json_epoch("l/0"), 1); /* the swap itself happened */
	ks_partition_close(p);
	/* The next leader reads every key's latest value. */
	p = copen_on(h_vfs, "l/0", 2);
	check_view(p, latest, KEYS);
	ks_partition_close(p);
	ks_cleaner_free(c);
	sub_destroy(&sv->base);
	lease_ok = 1;
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "storage-clean-fence", .tcase = "fence", .timeout = 240,
					  .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(stale_leader_mid_pass_never_swaps, take_over_during_the_swap_keeps_the_newer_view,
				     no_swap_without_the_lease, a_lease_lost_during_the_swap_unlinks_nothing));
}
