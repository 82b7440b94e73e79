/* test_pool.c — the worker pool and its timers: every job runs, timers fire
 * in due order, a cancelled timer never runs, cancel reports whether it
 * prevented the run, and stop drains the queue. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kaas/net/pool.h"
#include "util/clock.h"
#include "util/test/ktest.h"

static atomic_int ran;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int order[8], norder;

static void count_job(void *arg)
{
	(void)arg;
	atomic_fetch_add(&ran, 1);
}

static void record(void *arg)
{
	pthread_mutex_lock(&mu);
	order[norder++] = (int)(intptr_t)arg;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void wait_n(int n)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 60;
	pthread_mutex_lock(&mu);
	while (norder < n && pthread_cond_timedwait(&cv, &mu, &ts) == 0)
		;
	pthread_mutex_unlock(&mu);
	ck_assert_int_ge(norder, n);
}

START_TEST(jobs_all_run_and_stop_drains)
{
	kn_pool *p;
	ck_assert_int_eq(kn_pool_create(4, &p), 0);
	atomic_store(&ran, 0);
	for (int i = 0; i < 10000; i++)
		ck_assert_int_eq(kn_pool_run(p, count_job, NULL), 0);
	kn_pool_stop(p);
	ck_assert_int_eq(atomic_load(&ran), 10000);
	ck_assert_int_eq(kn_pool_run(p, count_job, NULL), -ESHUTDOWN);
	kn_pool_destroy(p);
}
END_TEST

/* A timer is due at its creation plus its delay, so a test thread held up
 * (a loaded machine) while creating them can change their due order.  A
 * round that took STALL_MS or more to create and cancel them says nothing
 * and is run again; below that the order is fixed: early < mid (due before
 * t0 + STALL_MS + 200) < late (due after t0 + 800), and `never` (due after
 * t0 + 400) is cancelled before it is due. */
#define STALL_MS 200

static int timer_round(void)
{
	kn_pool *p;
	ck_assert_int_eq(kn_pool_create(1, &p), 0); /* one worker: run order = fire order */
	pthread_mutex_lock(&mu);
	norder = 0;
	pthread_mutex_unlock(&mu);
	int64_t t0 = ku_mono_ns();
	kb_timer *late = kn_pool_timer(p, 800, record, (void *)3);
	kb_timer *never = kn_pool_timer(p, 400, record, (void *)99);
	kb_timer *early = kn_pool_timer(p, 0, record, (void *)1);
	kb_timer *mid = kn_pool_timer(p, 200, record, (void *)2);
	int prevented = kn_pool_timer_cancel(p, never);
	if (ku_mono_ns() - t0 >= STALL_MS * 1000000LL) {
		kn_pool_stop(p);
		kn_pool_timer_cancel(p, early);
		kn_pool_timer_cancel(p, mid);
		kn_pool_timer_cancel(p, late);
		kn_pool_destroy(p);
		return 0;
	}
	ck_assert_int_eq(prevented, 1);
	wait_n(3);
	ck_assert_int_eq(order[0], 1);
	ck_assert_int_eq(order[1], 2);
	ck_assert_int_eq(order[2], 3);
	/* Fired timers: cancel gives the handle back and says it was too late. */
	ck_assert_int_eq(kn_pool_timer_cancel(p, early), 0);
	ck_assert_int_eq(kn_pool_timer_cancel(p, mid), 0);
	ck_assert_int_eq(kn_pool_timer_cancel(p, late), 0);
	ck_assert_int_eq(kn_pool_timer_cancel(p, NULL), 0);
	/* A far-away timer is cancelled before stop. */
	kb_timer *far = kn_pool_timer(p, 3600000, record, (void *)7);
	ck_assert_int_eq(kn_pool_timer_cancel(p, far), 1);
	kn_pool_stop(p);
	ck_assert_int_eq(norder, 3);
	kn_pool_destroy(p);
	return 1;
}

START_TEST(timers_fire_in_due_order_and_cancel)
{
	int rounds = 0;
	while (!timer_round())
		ck_assert_msg(++rounds < 20, "held up for %d ms or more in each of %d rounds", STALL_MS, rounds);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "pool", .tcase = "pool", .timeout = 120 },
			  KTEST_LIST(jobs_all_run_and_stop_drains,
				     timers_fire_in_due_order_and_cancel));
}
