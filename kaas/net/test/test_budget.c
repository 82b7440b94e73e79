/* test_budget.c — queued.max.request.bytes admission (budget.c): frames fit
 * or wait, waiters are granted strictly in arrival order and never
 * overtaken, a frame larger than the budget is served alone, bytes kept for
 * a waiter do not block its own grant, cancelling gives everything back;
 * while others wait, a connection over its fair share is passed over. */
#include <check.h>
#include <stddef.h>

#include "kaas/net/budget.h"
#include "util/test/ktest.h"

START_TEST(fits_or_waits)
{
	kn_budget b;
	kn_budget_waiter a = {0}, c = {0};
	kn_budget_init(&b, 100);
	ck_assert(kn_budget_loose(&b, 100));
	ck_assert_int_eq(kn_budget_acquire(&b, &a, 60), 1);
	ck_assert_int_eq(b.held, 60);
	ck_assert(!kn_budget_loose(&b, 41));
	ck_assert(kn_budget_loose(&b, 40));
	/* 60 + 50 > 100: waits, nothing is taken for it. */
	ck_assert_int_eq(kn_budget_acquire(&b, &c, 50), 0);
	ck_assert_int_eq(c.state, KAAS_BW_QUEUED);
	ck_assert_int_eq(b.held, 60);
	ck_assert_int_eq(b.nqueued, 1);
	ck_assert(!kn_budget_loose(&b, 1)); /* somebody waits */
	ck_assert_ptr_null(kn_budget_collect(&b));
	/* Not enough freed yet. */
	ck_assert_int_eq(kn_budget_release(&b, 5), 0);
	ck_assert_ptr_null(kn_budget_collect(&b));
	/* Now 55 - 5 = 50 held, 50 more fit. */
	ck_assert_int_eq(kn_budget_release(&b, 5), 1);
	ck_assert_int_eq(b.held, 100);
	ck_assert_ptr_eq(kn_budget_collect(&b), &c);
	ck_assert_int_eq(c.state, KAAS_BW_IDLE);
	ck_assert_ptr_null(kn_budget_collect(&b));
	kn_budget_release(&b, 50);
	kn_budget_release(&b, 50);
	ck_assert_int_eq(b.held, 0);
}
END_TEST

START_TEST(fifo_and_no_overtaking)
{
	kn_budget b;
	kn_budget_waiter big = {0}, w[3] = {{0}}, late = {0};
	kn_budget_init(&b, 100);
	ck_assert_int_eq(kn_budget_acquire(&b, &big, 90), 1);
	ck_assert_int_eq(kn_budget_acquire(&b, &w[0], 80), 0);
	ck_assert_int_eq(kn_budget_acquire(&b, &w[1], 10), 0);
	ck_assert_int_eq(kn_budget_acquire(&b, &w[2], 10), 0);
	/* 10 would fit (90 + 10) but three are waiting: it queues behind them. */
	ck_assert_int_eq(kn_budget_acquire(&b, &late, 10), 0);
	ck_assert_int_eq(b.nqueued, 4);
	ck_assert_int_eq(b.held, 90);
	/* The head (80) does not fit next to 30, though the 10s behind it
	 * would: nobody goes before it. */
	ck_assert_int_eq(kn_budget_release(&b, 60), 0);
	ck_assert_ptr_null(kn_budget_collect(&b));
	/* Everything freed: 80, then 10 and 10 (100), and late waits on. */
	ck_assert_int_eq(kn_budget_release(&b, 30), 3);
	ck_assert_ptr_eq(kn_budget_collect(&b), &w[0]);
	ck_assert_ptr_eq(kn_budget_collect(&b), &w[1]);
	ck_assert_ptr_eq(kn_budget_collect(&b), &w[2]);
	ck_assert_ptr_null(kn_budget_collect(&b));
	ck_assert_int_eq(late.state, KAAS_BW_QUEUED);
	ck_assert_int_eq(b.held, 100);
	ck_assert_int_eq(kn_budget_release(&b, 10), 1);
	ck_assert_ptr_eq(kn_budget_collect(&b), &late);
	ck_assert_int_eq(b.held, 100);
	ck_assert_int_eq(b.nqueued, 0);
}
END_TEST

START_TEST(oversized_frame_alone)
{
	kn_budget b;
	kn_budget_waiter a = {0}, huge = {0}, after = {0};
	kn_budget_init(&b, 100);
	/* Nothing held: a frame bigger than the whole budget is admitted. */
	ck_assert_int_eq(kn_budget_acquire(&b, &huge, 1000), 1);
	kn_budget_release_owned(&b, &huge, 1000);
	ck_assert_int_eq(kn_budget_acquire(&b, &a, 1), 1);
	/* With one byte held it waits... */
	ck_assert_int_eq(kn_budget_acquire(&b, &huge, 1000), 0);
	ck_assert_int_eq(kn_budget_acquire(&b, &after, 1), 0);
	/* ...and is served once it would be alone; the one behind it waits. */
	ck_assert_int_eq(kn_budget_release(&b, 1), 1);
	ck_assert_ptr_eq(kn_budget_collect(&b), &huge);
	ck_assert_int_eq(after.state, KAAS_BW_QUEUED);
	ck_assert_int_eq(b.held, 1000);
	ck_assert_int_eq(kn_budget_release(&b, 1000), 1);
	ck_assert_ptr_eq(kn_budget_collect(&b), &after);
}
END_TEST

/* One connection pipelining requests holds 60 of 100; with others waiting
 * its share is 100 / 4: its next frame is passed over (though it fits and
 * waited before y) until the others are served and it waits alone. */
START_TEST(fair_share_while_others_wait)
{
	kn_budget b;
	kn_budget_waiter hog = {0}, blocker = {0}, x = {0}, y = {0};
	kn_budget_init(&b, 100);
	ck_assert_int_eq(kn_budget_acquire(&b, &hog, 60), 1);
	ck_assert_int_eq(kn_budget_acquire(&b, &blocker, 35), 1);
	ck_assert_int_eq(hog.held, 60);
	ck_assert_int_eq(b.nholders, 2);
	ck_assert_int_eq(kn_budget_acquire(&b, &x, 10), 0);
	ck_assert_int_eq(kn_budget_acquire(&b, &hog, 20), 0);
	ck_assert_int_eq(kn_budget_acquire(&b, &y, 10), 0);
	ck_assert_int_eq(kn_budget_share(&b), 25);
	/* Room for all three: x and y are served, hog is passed over. */
	ck_assert_int_eq(kn_budget_release_owned(&b, &blocker, 35), 2);
	ck_assert_ptr_eq(kn_budget_collect(&b), &x);
	ck_assert_ptr_eq(kn_budget_collect(&b), &y);
	ck_assert_ptr_null(kn_budget_collect(&b));
	ck_assert_int_eq(hog.state, KAAS_BW_QUEUED);
	ck_assert_int_eq(b.passed, 1);
	/* Alone in the line now: granted as soon as anything is released. */
	ck_assert_int_eq(kn_budget_release_owned(&b, &x, 10), 1);
	ck_assert_ptr_eq(kn_budget_collect(&b), &hog);
	ck_assert_int_eq(hog.held, 80);
	kn_budget_release_owned(&b, &hog, 80);
	kn_budget_release_owned(&b, &y, 10);
	ck_assert_int_eq(b.held, 0);
	ck_assert_int_eq(b.nholders, 0);
}
END_TEST

START_TEST(own_bytes_do_not_block_the_waiter)
{
	kn_budget b;
	kn_budget_waiter a = {0}, w = {0};
	kn_budget_init(&b, 100);
	ck_assert_int_eq(kn_budget_acquire(&b, &a, 50), 1);
	ck_assert_int_eq(kn_budget_acquire(&b, &w, 300), 0);
	/* What was read of w's frame while it waits is charged to it. */
	kn_budget_keep(&b, &w, 20);
	ck_assert_int_eq(b.held, 70);
	/* Only w's own 20 remain: it is alone and gets its 300. */
	ck_assert_int_eq(kn_budget_release(&b, 50), 1);
	ck_assert_ptr_eq(kn_budget_collect(&b), &w);
	ck_assert_int_eq(b.held, 320);
	kn_budget_release(&b, 20); /* the kept bytes, once moved into the frame */
	kn_budget_release(&b, 300);
	ck_assert_int_eq(b.held, 0);
}
END_TEST

/* Several waiters each keeping a frame size: once the request they waited
 * behind is freed, the head is alone (kept bytes aside) and goes, then the
 * next once the head's request is freed, and so on in order. */
START_TEST(kept_bytes_never_stop_the_line)
{
	kn_budget b;
	kn_budget_waiter first = {0}, w[4] = {{0}};
	kn_budget_init(&b, 100);
	ck_assert_int_eq(kn_budget_acquire(&b, &first, 300), 1);
	for (int i = 0; i < 4; i++) {
		ck_assert_int_eq(kn_budget_acquire(&b, &w[i], 300), 0);
		kn_budget_keep(&b, &w[i], 4);
	}
	ck_assert_int_eq(b.held, 316);
	ck_assert_int_eq(b.kept, 16);
	for (int i = 0; i < 4; i++) {
		/* The request before it is answered and freed. */
		ck_assert_int_eq(kn_budget_release(&b, 300), 1);
		ck_assert_ptr_eq(kn_budget_collect(&b), &w[i]);
		ck_assert_ptr_null(kn_budget_collect(&b));
		kn_budget_release(&b, 4); /* its kept size, moved into its frame */
	}
	ck_assert_int_eq(b.kept, 0);
	ck_assert_int_eq(b.held, 300);
	ck_assert_int_eq(kn_budget_release(&b, 300), 0);
	ck_assert_int_eq(b.held, 0);
}
END_TEST

START_TEST(cancel_gives_back)
{
	kn_budget b;
	kn_budget_waiter a = {0}, w1 = {0}, w2 = {0}, w3 = {0};
	kn_budget_init(&b, 100);
	ck_assert_int_eq(kn_budget_acquire(&b, &a, 60), 1);
	ck_assert_int_eq(kn_budget_acquire(&b, &w1, 90), 0);
	ck_assert_int_eq(kn_budget_acquire(&b, &w2, 30), 0);
	ck_assert_int_eq(kn_budget_acquire(&b, &w3, 30), 0);
	/* The head leaves (its connection closed): w2 fits and goes. */
	ck_assert_int_eq(kn_budget_cancel(&b, &w1), 1);
	ck_assert_int_eq(w1.state, KAAS_BW_IDLE);
	ck_assert_int_eq(w2.state, KAAS_BW_GRANTED);
	ck_assert_int_eq(b.held, 90);
	/* w2 closes before it used its grant: the 30 come back, w3 goes. */
	ck_assert_int_eq(kn_budget_cancel(&b, &w2), 1);
	ck_assert_int_eq(b.held, 90);
	ck_assert_ptr_eq(kn_budget_collect(&b), &w3);
	ck_assert_ptr_null(kn_budget_collect(&b));
	/* Cancelling an idle waiter changes nothing. */
	ck_assert_int_eq(kn_budget_cancel(&b, &w1), 0);
	ck_assert_int_eq(b.held, 90);
	ck_assert_int_eq(b.nqueued, 0);
}
END_TEST

START_TEST(unbounded)
{
	kn_budget b;
	kn_budget_waiter w = {0};
	kn_budget_init(&b, -1);
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(kn_budget_acquire(&b, &w, 100 << 20), 1);
	ck_assert(kn_budget_loose(&b, 1 << 20));
	ck_assert_int_eq(b.held, 100LL * (100 << 20));
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){.suite = "server-budget", .timeout = 30},
			  KTEST_LIST(fits_or_waits, fifo_and_no_overtaking, oversized_frame_alone,
				     own_bytes_do_not_block_the_waiter, kept_bytes_never_stop_the_line,
				     cancel_gives_back, unbounded, fair_share_while_others_wait));
}
