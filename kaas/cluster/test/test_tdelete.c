/* test_tdelete.c — when the controller may finish a topic delete: only
 * after an assignment of its own epoch leaves the deleted incarnation out
 * and every incarnation it sees released that assignment (or is expired or
 * gone); a re-created topic of the same name does not hold the old one up. */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "kaas/cluster/tdelete.h"
#include "kaas/cluster/test/harness.h"
#include "util/test/ktest.h"

#define MS 1000000LL
#define OLD_ID "8ff59561-6ae4-4256-a104-3e084a3bf123"
#define NEW_ID "1e2d3c4b-5a69-4788-9a0b-1c2d3e4f5a6b"

static kcl_hb hb(int32_t id, uint64_t inc, int64_t seq, kcl_gen released)
{
	kcl_hb h;
	memset(&h, 0, sizeof(h));
	h.id = id;
	h.inc = (kcl_incarn){inc, 0x77 + inc};
	h.seq = seq;
	h.state = KCL_ST_RUNNING;
	snprintf(h.endpoint, sizeof(h.endpoint), "127.0.0.1:%d", 9090 + (int)id);
	h.released = released;
	return h;
}

/* An assignment at gen with topics "other" and, when with != NULL, "doomed"
 * under that id. */
static void assign(kcl_assign *a, kcl_gen gen, const char *with)
{
	memset(a, 0, sizeof(*a));
	ck_assert_int_eq(kcl_assign_alloc(a, 3, with ? 2 : 1, 0), 0);
	a->gen = gen;
	a->controller = 1;
	for (int i = 0; i < 3; i++)
		a->brokers[i] = (kcl_abroker){i + 1, {100 + (uint64_t)i + 1, 0x77 + 100 + (uint64_t)i + 1}};
	size_t k = 0;
	if (with) {
		ck_assert_int_eq(kcl_atopic_alloc(&a->topics[k], "doomed", with, 3), 0);
		for (int32_t p = 0; p < 3; p++)
			a->topics[k].parts[p] = (kcl_slot){p + 1, 2};
		k++;
	}
	ck_assert_int_eq(kcl_atopic_alloc(&a->topics[k], "other", "0a0b0c0d-1111-4222-8333-444455556666", 1), 0);
	a->topics[k].parts[0] = (kcl_slot){2, 1};
	a->ntopics = k + 1;
}

START_TEST(waits_for_an_assignment_without_the_topic)
{
	kcl_view v;
	kcl_view_init(&v, 1000, 0);
	kcl_incarn me = {101, 0x77 + 101};
	kcl_hb self = hb(1, 101, 1, (kcl_gen){5, 9});
	ck_assert_int_eq(kcl_view_observe(&v, &self, 0, 1), 0);
	int64_t now = 2000 * MS;
	kcl_assign a;
	/* None yet, or one of an older controller epoch. */
	ck_assert_int_eq(kcl_tdel_verdict(NULL, 5, &v, me, 1, (kcl_gen){5, 9}, "doomed", OLD_ID, now, NULL),
			 KCL_TDEL_WAIT_ASSIGN);
	assign(&a, (kcl_gen){4, 30}, NULL);
	ck_assert_int_eq(kcl_tdel_verdict(&a, 5, &v, me, 1, (kcl_gen){5, 9}, "doomed", OLD_ID, now, NULL),
			 KCL_TDEL_WAIT_ASSIGN);
	kcl_assign_free(&a);
	/* Still assigned, or assigned under an unnamed id. */
	assign(&a, (kcl_gen){5, 9}, OLD_ID);
	ck_assert_int_eq(kcl_tdel_verdict(&a, 5, &v, me, 1, (kcl_gen){5, 9}, "doomed", OLD_ID, now, NULL),
			 KCL_TDEL_WAIT_ASSIGN);
	kcl_assign_free(&a);
	assign(&a, (kcl_gen){5, 9}, "");
	ck_assert_int_eq(kcl_tdel_verdict(&a, 5, &v, me, 1, (kcl_gen){5, 9}, "doomed", OLD_ID, now, NULL),
			 KCL_TDEL_WAIT_ASSIGN);
	kcl_assign_free(&a);
	/* Left out; or re-created under a new id, which is another topic. */
	assign(&a, (kcl_gen){5, 9}, NULL);
	ck_assert_int_eq(kcl_tdel_verdict(&a, 5, &v, me, 1, (kcl_gen){5, 9}, "doomed", OLD_ID, now, NULL),
			 KCL_TDEL_READY);
	kcl_assign_free(&a);
	assign(&a, (kcl_gen){5, 9}, NEW_ID);
	ck_assert_int_eq(kcl_tdel_verdict(&a, 5, &v, me, 1, (kcl_gen){5, 9}, "doomed", OLD_ID, now, NULL),
			 KCL_TDEL_READY);
	kcl_assign_free(&a);
	kcl_view_free(&v);
}
END_TEST

START_TEST(waits_until_every_live_incarnation_released)
{
	kcl_view v;
	kcl_view_init(&v, 1000, 0);
	kcl_incarn me = {101, 0x77 + 101};
	kcl_gen g = {5, 9}, before = {5, 8};
	kcl_hb self = hb(1, 101, 1, g), b2 = hb(2, 102, 1, before), b3 = hb(3, 103, 1, g);
	ck_assert_int_eq(kcl_view_observe(&v, &self, 0, 1), 0);
	ck_assert_int_eq(kcl_view_observe(&v, &b2, 0, 1), 0);
	ck_assert_int_eq(kcl_view_observe(&v, &b3, 0, 1), 0);
	kcl_assign a;
	assign(&a, g, NULL);
	int32_t who = 0;
	/* Before the controller watched its peers for a session: anyone may
	 * hold it. */
	ck_assert_int_eq(kcl_tdel_verdict(&a, 5, &v, me, 1, g, "doomed", OLD_ID, 500 * MS, &who),
			 KCL_TDEL_WAIT_RELEASE);
	/* Its own driver has not released g yet. */
	ck_assert_int_eq(kcl_tdel_verdict(&a, 5, &v, me, 1, before, "doomed", OLD_ID, 1500 * MS, &who),
			 KCL_TDEL_WAIT_RELEASE);
	ck_assert_int_eq(who, 1);
	/* Broker 2 still heartbeats the generation before. */
	ck_assert_int_eq(kcl_tdel_verdict(&a, 5, &v, me, 1, g, "doomed", OLD_ID, 1500 * MS, &who),
			 KCL_TDEL_WAIT_RELEASE);
	ck_assert_int_eq(who, 2);
	/* It releases g (or a later generation): done. */
	b2.seq = 2;
	b2.released = (kcl_gen){5, 10};
	ck_assert_int_eq(kcl_view_observe(&v, &b2, 1500 * MS, 1501 * MS), 0);
	ck_assert_int_eq(kcl_tdel_verdict(&a, 5, &v, me, 1, g, "doomed", OLD_ID, 1501 * MS, &who), KCL_TDEL_READY);
	/* A new incarnation of broker 3 that has not read g yet holds it up;
	 * the old one, superseded but not expired, too. */
	kcl_hb b3n = hb(3, 203, 1, (kcl_gen){0, 0});
	ck_assert_int_eq(kcl_view_observe(&v, &b3n, 1600 * MS, 1601 * MS), 0);
	ck_assert_int_eq(kcl_tdel_verdict(&a, 5, &v, me, 1, g, "doomed", OLD_ID, 1601 * MS, &who),
			 KCL_TDEL_WAIT_RELEASE);
	ck_assert_int_eq(who, 3);
	b3n.seq = 2;
	b3n.released = g;
	ck_assert_int_eq(kcl_view_observe(&v, &b3n, 1700 * MS, 1701 * MS), 0);
	ck_assert_int_eq(kcl_tdel_verdict(&a, 5, &v, me, 1, g, "doomed", OLD_ID, 1701 * MS, &who), KCL_TDEL_READY);
	kcl_assign_free(&a);
	kcl_view_free(&v);
}
END_TEST

START_TEST(an_expired_or_stopped_incarnation_is_not_waited_for)
{
	kcl_view v;
	kcl_view_init(&v, 1000, 0);
	kcl_incarn me = {101, 0x77 + 101};
	kcl_gen g = {6, 1};
	kcl_hb self = hb(1, 101, 1, g), b2 = hb(2, 102, 7, (kcl_gen){5, 3}), b3 = hb(3, 103, 4, (kcl_gen){5, 3});
	ck_assert_int_eq(kcl_view_observe(&v, &self, 0, 1), 0);
	ck_assert_int_eq(kcl_view_observe(&v, &b2, 0, 1), 0);
	ck_assert_int_eq(kcl_view_observe(&v, &b3, 0, 1), 0);
	kcl_assign a;
	assign(&a, g, NULL);
	int32_t who;
	ck_assert_int_eq(kcl_tdel_verdict(&a, 6, &v, me, 1, g, "doomed", OLD_ID, 1000 * MS, &who),
			 KCL_TDEL_WAIT_RELEASE);
	/* Broker 3 said "stopped" (it relinquished everything and exited). */
	b3.seq = 5;
	b3.state = KCL_ST_STOPPED;
	ck_assert_int_eq(kcl_view_observe(&v, &b3, 1000 * MS, 1001 * MS), 0);
	/* Broker 2 (paused, say) keeps seq 7 for the whole session timeout:
	 * its lease is over. */
	ck_assert_int_eq(kcl_view_observe(&v, &b2, 999 * MS, 1000 * MS), 0);
	ck_assert_int_eq(kcl_tdel_verdict(&a, 6, &v, me, 1, g, "doomed", OLD_ID, 1000 * MS, &who),
			 KCL_TDEL_WAIT_RELEASE);
	ck_assert_int_eq(who, 2);
	ck_assert_int_eq(kcl_view_observe(&v, &b2, 1002 * MS, 1003 * MS), 0);
	ck_assert_int_eq(kcl_tdel_verdict(&a, 6, &v, me, 1, g, "doomed", OLD_ID, 1003 * MS, &who), KCL_TDEL_READY);
	kcl_assign_free(&a);
	kcl_view_free(&v);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "cluster-tdelete", .tcase = "tdelete", .timeout = 60,
					  .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(waits_for_an_assignment_without_the_topic,
				     waits_until_every_live_incarnation_released,
				     an_expired_or_stopped_incarnation_is_not_waited_for));
}
