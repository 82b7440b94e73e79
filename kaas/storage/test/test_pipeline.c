/*
 * test_pipeline.c — the group commit's depth (ks_log_config.flush_depth):
 * as many fsyncs of one partition in flight as the depth allows and no
 * more, each on its own descriptor of the segment; the high watermark in
 * ticket order, never past a running ticket; a failed fsync in any slot
 * acknowledges nothing that completes after it; depth 1 runs one fsync at
 * a time.
 *
 * The substrate holds every .log fsync until the test releases it by its
 * start number, so which tickets run at once is decided by the test, not by
 * the scheduler.
 */
#include <pthread.h>
#include <time.h>

#include "kaas/storage/storage_int.h"
#include "kaas/storage/test/harness.h"
#include "kaas/storage/test/shim.h"
#include "util/test/ktest.h"

enum { PG_MAX = 64 };

typedef struct pgate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int started;              /* .log fsyncs started; fsync n is the n-th (from 1) */
	int finished;
	int running, max_running;
	int released[PG_MAX + 1]; /* fsync n may go on */
	int release_all;
	int fail_nth;             /* this fsync answers EIO (0: none) */
	sub_file *file[PG_MAX + 1]; /* the descriptor fsync n ran on */
	int64_t notified[PG_MAX];  /* high watermarks the listener was told, as told */
	int nnotified;
	int64_t hw_max;            /* the largest: what a listener keeps */
} pgate;

static sub_methods pg_methods;

static int pg_fsync(sub_file *f)
{
	pgate *g = SHIM_V(f->vfs)->arg;
	if (!shim_ends(SHIM_F(f)->path, ".log"))
		return shim_fsync(f);
	pthread_mutex_lock(&g->mu);
	int n = ++g->started;
	if (n <= PG_MAX)
		g->file[n] = f;
	if (++g->running > g->max_running)
		g->max_running = g->running;
	pthread_cond_broadcast(&g->cv);
	while (!g->release_all && !(n <= PG_MAX && g->released[n]))
		pthread_cond_wait(&g->cv, &g->mu);
	pthread_mutex_unlock(&g->mu);
	int rc = shim_fsync(f);
	pthread_mutex_lock(&g->mu);
	if (n == g->fail_nth)
		rc = -EIO;
	g->running--;
	g->finished++;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return rc;
}

static void pg_on_hw(void *arg, ks_partition *p, int64_t hw)
{
	pgate *g = arg;
	(void)p;
	pthread_mutex_lock(&g->mu);
	if (g->nnotified < PG_MAX)
		g->notified[g->nnotified++] = hw;
	if (hw > g->hw_max)
		g->hw_max = hw;
	pthread_mutex_unlock(&g->mu);
}

static void pg_init(pgate *g)
{
	memset(g, 0, sizeof(*g));
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
}

/* A partition of the given depth on the holding substrate. */
static ks_partition *pg_open(pgate *g, shim_vfs **sv, const char *dir, int depth)
{
	*sv = shim_wrap(h_vfs, NULL, g);
	pg_methods = shim_methods;
	pg_methods.fsync = pg_fsync;
	(*sv)->base.m = &pg_methods;
	ks_log_config cfg = h_cfg();
	cfg.flush_depth = depth;
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(&(*sv)->base, dir, NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(p->depth, depth);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	ks_partition_set_listener(p, pg_on_hw, g);
	return p;
}

static void pg_close(pgate *g, ks_partition *p, shim_vfs *sv)
{
	pthread_mutex_lock(&g->mu);
	g->release_all = 1;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	ks_partition_close(p);
	sub_destroy(&sv->base);
}

static void deadline(struct timespec *dl)
{
	clock_gettime(CLOCK_REALTIME, dl);
	dl->tv_sec += 60;
}

/* Waits (generously) until *v >= want, under g->mu. */
static void pg_wait(pgate *g, const int *v, int want)
{
	struct timespec dl;
	deadline(&dl);
	pthread_mutex_lock(&g->mu);
	while (*v < want)
		ck_assert_int_eq(pthread_cond_timedwait(&g->cv, &g->mu, &dl), 0);
	pthread_mutex_unlock(&g->mu);
}

static void pg_release(pgate *g, int n)
{
	pthread_mutex_lock(&g->mu);
	g->released[n] = 1;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

/* Waits until the engine has taken in the end of ticket t (white box). */
static void wait_ticket_done(ks_partition *p, uint64_t t)
{
	struct timespec dl;
	deadline(&dl);
	pthread_mutex_lock(&p->mu);
	while (!(p->fl_retired > t || (p->fl_next > t && p->fl[t % (uint64_t)p->depth].done)))
		ck_assert_int_eq(pthread_cond_timedwait(&p->cv, &p->mu, &dl), 0);
	pthread_mutex_unlock(&p->mu);
}

/* Until a flush waits because every slot is busy, or one more fsync
 * started than `started` (the engine did not wait: the test then fails on
 * the count).  Polled: the engine signals neither. */
static void wait_stalled_or_started(ks_partition *p, pgate *g, int started)
{
	for (int i = 0; i < 60000; i++) {
		pthread_mutex_lock(&p->mu);
		uint64_t stalls = p->fl_stalls;
		pthread_mutex_unlock(&p->mu);
		pthread_mutex_lock(&g->mu);
		int s = g->started;
		pthread_mutex_unlock(&g->mu);
		if (stalls > 0 || s > started)
			return;
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
	ck_abort_msg("no flush waited and no fsync started");
}

/* One appender: appends a batch, then flushes. */
typedef struct pflush {
	pthread_t th;
	ks_partition *p;
	pgate *g;
	int appended, done;
	int rc;
	int64_t last, durable;
} pflush;

static void *pflush_main(void *x)
{
	pflush *a = x;
	kbuild b = KBUILD_INIT;
	ks_append_result res;
	kbuild_simple(&b, -1, -1, -1, 1, 1700000000000LL, "pipe", 30, KBUILD_NONE);
	a->rc = ks_partition_append(a->p, b.buf, b.len, &res);
	if (a->rc == 0 && res.error)
		a->rc = -EINVAL;
	a->last = res.last_offset;
	kbuild_free(&b);
	pthread_mutex_lock(&a->g->mu);
	a->appended = 1;
	pthread_cond_broadcast(&a->g->cv);
	pthread_mutex_unlock(&a->g->mu);
	if (a->rc == 0)
		a->rc = ks_partition_flush(a->p, &a->durable);
	pthread_mutex_lock(&a->g->mu);
	a->done = 1;
	pthread_cond_broadcast(&a->g->cv);
	pthread_mutex_unlock(&a->g->mu);
	return NULL;
}

static void pf_start(pflush *f, ks_partition *p, pgate *g)
{
	*f = (pflush){.p = p, .g = g, .last = -1, .durable = -1};
	ck_assert_int_eq(pthread_create(&f->th, NULL, pflush_main, f), 0);
}

static int pf_done(pgate *g, pflush *f)
{
	pthread_mutex_lock(&g->mu);
	int d = f->done;
	pthread_mutex_unlock(&g->mu);
	return d;
}

/* Starts n appenders one after another, each once the previous one's fsync
 * is held: appender k runs ticket k (offset k, log end k + 1).  The count
 * to wait for is read before the appender exists: read after, it may
 * already include the appender's own fsync, and the wait would be for one
 * more that never comes. */
static void start_held(pgate *g, ks_partition *p, pflush *f, int n)
{
	for (int k = 0; k < n; k++) {
		pthread_mutex_lock(&g->mu);
		int want = g->started + 1;
		pthread_mutex_unlock(&g->mu);
		pf_start(&f[k], p, g);
		pg_wait(g, &g->started, want);
	}
}

START_TEST(depth4_runs_four_fsyncs_at_once_and_retires_in_order)
{
	pgate g;
	pg_init(&g);
	shim_vfs *sv;
	ks_partition *p = pg_open(&g, &sv, "t/d4", 4);
	pflush f[5];
	start_held(&g, p, f, 4);
	/* Four fsyncs of one partition in flight, on four descriptors. */
	ck_assert_int_eq(g.running, 4);
	ck_assert_int_eq(g.max_running, 4);
	for (int i = 1; i <= 4; i++)
		for (int j = i + 1; j <= 4; j++)
			ck_assert_ptr_ne(g.file[i], g.file[j]);
	ck_assert_int_eq(ks_partition_high_watermark(p), 0);
	/* A fifth flush waits: every slot is busy. */
	pf_start(&f[4], p, &g);
	pg_wait(&g, &f[4].appended, 1);
	wait_stalled_or_started(p, &g, 4);
	ck_assert_int_eq(g.started, 4);

	/* Completions out of order: the newest first, then the second; the
	 * oldest still runs, so nothing is durable and nobody is answered. */
	pg_release(&g, 4);
	wait_ticket_done(p, 3);
	pg_release(&g, 2);
	wait_ticket_done(p, 1);
	ck_assert_int_eq(ks_partition_high_watermark(p), 0);
	for (int k = 0; k < 4; k++)
		ck_assert_int_eq(pf_done(&g, &f[k]), 0);
	ck_assert_int_eq(g.started, 4);
	/* The oldest completes: tickets 0 and 1 retire, ticket 2 still runs,
	 * so the watermark stops at ticket 1's end although 3 is done. */
	pg_release(&g, 1);
	wait_ticket_done(p, 0);
	ck_assert_int_eq(ks_partition_high_watermark(p), 2);
	pthread_join(f[0].th, NULL);
	pthread_join(f[1].th, NULL);
	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(f[k].rc, 0);
		ck_assert_int_eq(f[k].durable, 2);
	}
	ck_assert_int_eq(pf_done(&g, &f[2]), 0);
	ck_assert_int_eq(pf_done(&g, &f[3]), 0);
	/* Two slots are free again: the waiting flush runs its ticket (4) in
	 * slot 0, on the descriptor ticket 0 used. */
	pg_wait(&g, &g.started, 5);
	ck_assert_ptr_eq(g.file[5], g.file[1]);
	pg_release(&g, 3);
	wait_ticket_done(p, 2);
	ck_assert_int_eq(ks_partition_high_watermark(p), 4);
	pg_release(&g, 5);
	for (int k = 2; k < 5; k++) {
		pthread_join(f[k].th, NULL);
		ck_assert_int_eq(f[k].rc, 0);
		ck_assert_int_gt(f[k].durable, f[k].last);
	}
	ck_assert_int_eq(ks_partition_high_watermark(p), 5);
	ck_assert_int_le(g.max_running, 4);
	/* Each advance was to a ticket's end, told once each.  Two flushing
	 * threads call the listener without the lock, so the calls may come
	 * in any order (storage.h): what a listener keeps is the maximum. */
	ck_assert_int_eq(g.nnotified, 3);
	int seen[6] = {0};
	for (int i = 0; i < 3; i++) {
		ck_assert(g.notified[i] >= 0 && g.notified[i] <= 5);
		seen[g.notified[i]]++;
	}
	ck_assert(seen[2] == 1 && seen[4] == 1 && seen[5] == 1);
	ck_assert_int_eq(g.hw_max, 5);
	pg_close(&g, p, sv);
}
END_TEST

/* Four fsyncs in flight, the one of ticket `fail` fails.  The later
 * tickets complete first, then the earlier ones, then the failing one:
 * what completed before it in ticket order is acknowledged, nothing else,
 * whether its fsync ended before or after the failure. */
START_TEST(depth4_failed_fsync_in_any_slot_acknowledges_nothing_after_it)
{
	for (int fail = 0; fail < 4; fail++) {
		pgate g;
		pg_init(&g);
		g.fail_nth = fail + 1;
		shim_vfs *sv;
		char dir[16];
		snprintf(dir, sizeof(dir), "t/f%d", fail);
		ks_partition *p = pg_open(&g, &sv, dir, 4);
		pflush f[4];
		start_held(&g, p, f, 4);
		ck_assert_int_eq(g.max_running, 4);
		for (int t = 3; t > fail; t--) {
			pg_release(&g, t + 1);
			wait_ticket_done(p, (uint64_t)t);
		}
		ck_assert_int_eq(ks_partition_high_watermark(p), 0);
		for (int t = 0; t < fail; t++) {
			pg_release(&g, t + 1);
			wait_ticket_done(p, (uint64_t)t);
			ck_assert_int_eq(ks_partition_high_watermark(p), t + 1);
		}
		ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_LEADER);
		pg_release(&g, fail + 1);
		for (int k = 0; k < 4; k++)
			pthread_join(f[k].th, NULL);
		ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_POISONED);
		for (int k = 0; k < fail; k++) {
			ck_assert_int_eq(f[k].rc, 0);
			ck_assert_int_gt(f[k].durable, f[k].last);
			ck_assert_int_le(f[k].durable, fail);
		}
		for (int k = fail; k < 4; k++)
			ck_assert_msg(f[k].rc == -EIO, "fail %d: flush of ticket %d answered %d", fail, k, f[k].rc);
		ck_assert_int_eq(ks_partition_high_watermark(p), fail);
		int64_t d;
		ck_assert_int_eq(ks_partition_flush(p, &d), -EIO);
		ck_assert_int_eq(g.hw_max, fail);
		/* Re-taken by this engine, the log ends where the failed
		 * leadership's durable offset was: what it wrote later was
		 * answered with an error (recover.c, cut_own_failed_tail). */
		g.fail_nth = 0;
		pthread_mutex_lock(&g.mu);
		g.release_all = 1;
		pthread_mutex_unlock(&g.mu);
		ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
		ck_assert_int_eq(ks_partition_high_watermark(p), fail);
		ck_assert_int_eq(ks_partition_log_end(p), fail);
		pg_close(&g, p, sv);
	}
}
END_TEST

/* Depth 1: a flush whose data the fsync in flight does not cover waits for
 * it, then runs its own on the same descriptor. */
START_TEST(depth1_serialises_fsyncs)
{
	pgate g;
	pg_init(&g);
	shim_vfs *sv;
	ks_partition *p = pg_open(&g, &sv, "t/d1", 1);
	pflush f[2];
	start_held(&g, p, f, 1);
	pf_start(&f[1], p, &g);
	pg_wait(&g, &f[1].appended, 1);
	wait_stalled_or_started(p, &g, 1);
	ck_assert_int_eq(g.started, 1);
	pg_release(&g, 1);
	pthread_join(f[0].th, NULL);
	ck_assert_int_eq(f[0].rc, 0);
	ck_assert_int_eq(f[0].durable, 1);
	pg_wait(&g, &g.started, 2);
	ck_assert_ptr_eq(g.file[2], g.file[1]);
	ck_assert_int_eq(g.max_running, 1);
	pg_release(&g, 2);
	pthread_join(f[1].th, NULL);
	ck_assert_int_eq(f[1].rc, 0);
	ck_assert_int_eq(f[1].durable, 2);
	ck_assert_int_eq(ks_partition_high_watermark(p), 2);
	pg_close(&g, p, sv);
}
END_TEST

/* Many appenders flushing at once, fsyncs let through as they come: never
 * more in flight than the depth, every batch durable and in the log. */
static void *storm_main(void *x)
{
	pflush *a = x;
	for (int i = 0; i < 25 && a->rc == 0; i++) {
		kbuild b = KBUILD_INIT;
		ks_append_result res;
		kbuild_simple(&b, -1, -1, -1, 1, 1700000000000LL, "storm", 30, KBUILD_NONE);
		a->rc = ks_partition_append(a->p, b.buf, b.len, &res);
		if (a->rc == 0 && res.error)
			a->rc = -EINVAL;
		kbuild_free(&b);
		if (a->rc == 0 && (a->rc = ks_partition_flush(a->p, &a->durable)) == 0 &&
		    a->durable <= res.last_offset)
			a->rc = -EPROTO;
	}
	return NULL;
}

START_TEST(concurrent_flushes_stay_within_the_depth)
{
	static const int depths[] = {1, 2, 4, 8};
	for (size_t d = 0; d < sizeof(depths) / sizeof(depths[0]); d++) {
		pgate g;
		pg_init(&g);
		g.release_all = 1;
		shim_vfs *sv;
		char dir[16];
		snprintf(dir, sizeof(dir), "t/s%d", depths[d]);
		ks_partition *p = pg_open(&g, &sv, dir, depths[d]);
		enum { T = 10 };
		pflush f[T];
		for (int i = 0; i < T; i++) {
			f[i] = (pflush){.p = p, .g = &g};
			ck_assert_int_eq(pthread_create(&f[i].th, NULL, storm_main, &f[i]), 0);
		}
		for (int i = 0; i < T; i++) {
			pthread_join(f[i].th, NULL);
			ck_assert_int_eq(f[i].rc, 0);
		}
		ck_assert_int_le(g.max_running, depths[d]);
		ck_assert_int_eq(ks_partition_high_watermark(p), T * 25);
		uint8_t *log;
		size_t len = h_read_all(p, 0, 1 << 16, &log);
		ck_assert_int_eq(h_check_log(log, len, 0), T * 25);
		free(log);
		pg_close(&g, p, sv);
	}
}
END_TEST

/* The depth is taken at open: 0 means the default, too large the maximum,
 * and a later configuration change leaves it (the slots are in use). */
START_TEST(depth_is_fixed_at_open)
{
	ks_log_config cfg = h_cfg();
	ck_assert_int_eq(cfg.flush_depth, KAAS_FLUSH_DEPTH_DEFAULT);
	static const struct {
		int32_t asked, got;
	} cases[] = {{0, KAAS_FLUSH_DEPTH_DEFAULT}, {-3, KAAS_FLUSH_DEPTH_DEFAULT}, {1, 1}, {8, 8}, {99, 8}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ks_partition *p;
		cfg.flush_depth = cases[i].asked;
		ck_assert_int_eq(ks_partition_open(h_vfs, "t/cfg", NULL, 1, &cfg, &p), 0);
		ck_assert_int_eq(p->depth, cases[i].got);
		ks_log_config other = h_cfg();
		other.flush_depth = cases[i].got == 1 ? 4 : 1;
		ks_partition_set_config(p, &other);
		ck_assert_int_eq(p->depth, cases[i].got);
		ck_assert_int_eq(p->cfg.flush_depth, cases[i].got);
		ks_partition_close(p);
	}
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){.suite = "storage-pipeline", .timeout = 120, .setup = h_setup,
					 .teardown = h_teardown},
			  KTEST_LIST(depth4_runs_four_fsyncs_at_once_and_retires_in_order,
				     depth4_failed_fsync_in_any_slot_acknowledges_nothing_after_it,
				     depth1_serialises_fsyncs, concurrent_flushes_stay_within_the_depth,
				     depth_is_fixed_at_open));
}
