/* test_balancer.c — placement: even spread, minimal movement on join and
 * leave, epochs bumped exactly on moves, racks, draining brokers, topic
 * incarnations, determinism, and 10,000 partitions on 3 brokers. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kaas/cluster/balancer.h"
#include "util/test/ktest.h"

static kcl_bbroker B(int32_t id, const char *rack)
{
	return (kcl_bbroker){.id = id, .inc = {100 + (uint64_t)id, 0xab00 + (uint64_t)id}, .rack = rack};
}

/* Slots led by broker id, over partitions and (separately) shards. */
static size_t parts_of(const kcl_assign *a, int32_t id)
{
	size_t n = 0;
	for (size_t t = 0; t < a->ntopics; t++)
		for (int32_t p = 0; p < a->topics[t].n; p++)
			n += a->topics[t].parts[p].leader == id;
	return n;
}

static size_t shards_of(const kcl_assign *a, int32_t id)
{
	size_t n = 0;
	for (int32_t s = 0; s < a->nshards; s++)
		n += a->shards[s].leader == id;
	return n;
}

/* Every slot: moved <=> epoch bumped by exactly one; counts the moves. */
static size_t check_moves(const kcl_assign *prev, const kcl_assign *next)
{
	size_t moved = 0;
	for (size_t t = 0; t < next->ntopics; t++) {
		const kcl_atopic *nt = &next->topics[t], *pt = kcl_assign_topic(prev, nt->name);
		ck_assert_ptr_nonnull(pt);
		for (int32_t p = 0; p < nt->n; p++) {
			kcl_slot a = pt->parts[p], b = nt->parts[p];
			if (a.leader == b.leader) {
				ck_assert_int_eq(b.epoch, a.epoch);
			} else {
				ck_assert_int_eq(b.epoch, a.epoch + 1);
				moved++;
			}
		}
	}
	for (int32_t s = 0; s < next->nshards; s++) {
		kcl_slot a = prev->shards[s], b = next->shards[s];
		ck_assert_int_eq(b.epoch, a.leader == b.leader ? a.epoch : a.epoch + 1);
	}
	return moved;
}

static kcl_binput input(const kcl_bbroker *b, size_t nb, const kcl_btopic *t, size_t nt,
			int32_t shards, const kcl_assign *prev, int64_t gen)
{
	return (kcl_binput){.brokers = b, .nbrokers = nb, .topics = t, .ntopics = nt,
			    .nshards = shards, .prev = prev, .gen = {1, gen}, .controller = 1};
}

START_TEST(even_spread)
{
	kcl_bbroker b[] = {B(3, NULL), B(1, NULL), B(2, NULL)};
	kcl_btopic t[] = {{.name = "orders", .partitions = 10}, {.name = "audit", .partitions = 2}};
	kcl_assign a;
	kcl_bstats st;
	kcl_binput in = input(b, 3, t, 2, 16, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, &st), 0);
	ck_assert_int_eq(kcl_assign_check(&a, NULL, 0), 0);
	for (int32_t id = 1; id <= 3; id++) {
		ck_assert_uint_eq(parts_of(&a, id), 4);
		ck_assert_uint_ge(shards_of(&a, id), 5);
		ck_assert_uint_le(shards_of(&a, id), 6);
	}
	/* Within a topic too: no broker leads more than its share of orders. */
	const kcl_atopic *o = kcl_assign_topic(&a, "orders");
	size_t per[4] = {0};
	for (int32_t p = 0; p < o->n; p++) {
		ck_assert_int_eq(o->parts[p].epoch, 1);
		per[o->parts[p].leader]++;
	}
	for (int id = 1; id <= 3; id++)
		ck_assert_uint_le(per[id], 4);
	ck_assert_uint_eq(st.moved_parts, 12);
	ck_assert_uint_eq(st.kept_parts, 0);
	kcl_assign_free(&a);
}
END_TEST

START_TEST(deterministic_whatever_the_input_order)
{
	kcl_bbroker b1[] = {B(1, "a"), B(2, "b"), B(3, "a"), B(4, "b")};
	kcl_bbroker b2[] = {B(4, "b"), B(3, "a"), B(1, "a"), B(2, "b")};
	kcl_btopic t1[] = {{.name = "x", .partitions = 7}, {.name = "y", .partitions = 5}};
	kcl_btopic t2[] = {{.name = "y", .partitions = 5}, {.name = "x", .partitions = 7}};
	kcl_assign a, b;
	kcl_binput i1 = input(b1, 4, t1, 2, 9, NULL, 1), i2 = input(b2, 4, t2, 2, 9, NULL, 1);
	ck_assert_int_eq(kcl_balance(&i1, &a, NULL), 0);
	ck_assert_int_eq(kcl_balance(&i2, &b, NULL), 0);
	char *ja, *jb;
	size_t la, lb;
	ck_assert_int_eq(kcl_assign_encode(&a, &ja, &la), 0);
	ck_assert_int_eq(kcl_assign_encode(&b, &jb, &lb), 0);
	ck_assert_str_eq(ja, jb);
	free(ja);
	free(jb);
	kcl_assign_free(&a);
	kcl_assign_free(&b);
}
END_TEST

START_TEST(nothing_changes_nothing_moves)
{
	kcl_bbroker b[] = {B(1, NULL), B(2, NULL), B(3, NULL)};
	kcl_btopic t[] = {{.name = "orders", .partitions = 31}};
	kcl_assign a, c;
	kcl_bstats st;
	kcl_binput in = input(b, 3, t, 1, 8, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), 0);
	in = input(b, 3, t, 1, 8, &a, 2);
	ck_assert_int_eq(kcl_balance(&in, &c, &st), 0);
	ck_assert_uint_eq(check_moves(&a, &c), 0);
	ck_assert_uint_eq(st.moved_parts + st.moved_shards, 0);
	ck_assert_uint_eq(st.kept_parts, 31);
	kcl_assign_free(&a);
	kcl_assign_free(&c);
}
END_TEST

START_TEST(a_leave_moves_exactly_the_leavers_slots)
{
	kcl_bbroker b[] = {B(1, NULL), B(2, NULL), B(3, NULL)};
	kcl_btopic t[] = {{.name = "orders", .partitions = 30}, {.name = "logs", .partitions = 7}};
	kcl_assign a, c;
	kcl_bstats st;
	kcl_binput in = input(b, 3, t, 2, 12, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), 0);
	size_t had = parts_of(&a, 2);
	kcl_bbroker left[] = {B(1, NULL), B(3, NULL)};
	in = input(left, 2, t, 2, 12, &a, 2);
	ck_assert_int_eq(kcl_balance(&in, &c, &st), 0);
	ck_assert_uint_eq(check_moves(&a, &c), had);
	ck_assert_uint_eq(st.moved_parts, had);
	ck_assert_uint_eq(st.moved_shards, 4);
	ck_assert_uint_eq(parts_of(&c, 2), 0);
	ck_assert_uint_ge(parts_of(&c, 1), 18);
	ck_assert_uint_le(parts_of(&c, 1), 19);
	/* The survivors kept everything they had. */
	for (size_t tt = 0; tt < c.ntopics; tt++)
		for (int32_t p = 0; p < c.topics[tt].n; p++)
			if (a.topics[tt].parts[p].leader != 2)
				ck_assert_int_eq(c.topics[tt].parts[p].leader, a.topics[tt].parts[p].leader);
	kcl_assign_free(&a);
	kcl_assign_free(&c);
}
END_TEST

START_TEST(a_join_moves_only_onto_the_joiner)
{
	kcl_bbroker b[] = {B(1, NULL), B(2, NULL), B(3, NULL)};
	kcl_btopic t[] = {{.name = "orders", .partitions = 40}};
	kcl_assign a, c;
	kcl_binput in = input(b, 3, t, 1, 16, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), 0);
	kcl_bbroker more[] = {B(1, NULL), B(2, NULL), B(3, NULL), B(4, NULL)};
	in = input(more, 4, t, 1, 16, &a, 2);
	ck_assert_int_eq(kcl_balance(&in, &c, NULL), 0);
	ck_assert_uint_eq(check_moves(&a, &c), 10); /* 40 / 4: the joiner's share, no more */
	ck_assert_uint_eq(parts_of(&c, 4), 10);
	ck_assert_uint_eq(shards_of(&c, 4), 4);
	for (int32_t p = 0; p < 40; p++)
		if (c.topics[0].parts[p].leader != a.topics[0].parts[p].leader)
			ck_assert_int_eq(c.topics[0].parts[p].leader, 4);
	for (int32_t id = 1; id <= 4; id++)
		ck_assert_uint_eq(parts_of(&c, id), 10);
	kcl_assign_free(&a);
	kcl_assign_free(&c);
}
END_TEST

START_TEST(a_new_incarnation_takes_over_at_a_new_epoch)
{
	kcl_bbroker b[] = {B(1, NULL), B(2, NULL)};
	kcl_btopic t[] = {{.name = "orders", .partitions = 6}};
	kcl_assign a, c;
	kcl_binput in = input(b, 2, t, 1, 0, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), 0);
	/* Broker 2 restarted: same id, another process. */
	b[1].inc.incarnation++;
	in = input(b, 2, t, 1, 0, &a, 2);
	ck_assert_int_eq(kcl_balance(&in, &c, NULL), 0);
	for (int32_t p = 0; p < 6; p++) {
		kcl_slot x = a.topics[0].parts[p], y = c.topics[0].parts[p];
		if (x.leader == 2)
			ck_assert_int_eq(y.epoch, x.epoch + 1);
		else
			ck_assert_int_eq(y.epoch, x.epoch);
	}
	ck_assert_uint_eq(parts_of(&c, 2), 3);
	ck_assert(kcl_incarn_cmp(kcl_assign_broker(&c, 2)->inc, b[1].inc) == 0);
	kcl_assign_free(&a);
	kcl_assign_free(&c);
}
END_TEST

START_TEST(racks_spread_each_topic)
{
	kcl_bbroker b[] = {B(1, "az-a"), B(2, "az-a"), B(3, "az-b"), B(4, "az-b")};
	kcl_btopic t[] = {{.name = "big", .partitions = 8}, {.name = "pair", .partitions = 2}};
	kcl_assign a;
	kcl_binput in = input(b, 4, t, 2, 0, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), 0);
	for (size_t tt = 0; tt < 2; tt++) {
		size_t ra = 0, rb = 0;
		for (int32_t p = 0; p < a.topics[tt].n; p++)
			*(a.topics[tt].parts[p].leader <= 2 ? &ra : &rb) += 1;
		ck_assert_uint_eq(ra, rb);
	}
	kcl_assign_free(&a);
	/* Uneven racks: the rack with more brokers gets more, per broker even. */
	kcl_bbroker u[] = {B(1, "x"), B(2, "y"), B(3, "y")};
	kcl_btopic tu[] = {{.name = "t", .partitions = 3}};
	in = input(u, 3, tu, 1, 0, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), 0);
	for (int32_t id = 1; id <= 3; id++)
		ck_assert_uint_eq(parts_of(&a, id), 1);
	kcl_assign_free(&a);
}
END_TEST

START_TEST(draining_brokers_are_emptied_first)
{
	kcl_bbroker b[] = {B(1, NULL), B(2, NULL), B(3, NULL)};
	kcl_btopic t[] = {{.name = "orders", .partitions = 9}};
	kcl_assign a, c, d;
	kcl_binput in = input(b, 3, t, 1, 6, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), 0);
	b[2].draining = 1;
	in = input(b, 3, t, 1, 6, &a, 2);
	ck_assert_int_eq(kcl_balance(&in, &c, NULL), 0);
	ck_assert_uint_eq(parts_of(&c, 3), 0);
	ck_assert_uint_eq(shards_of(&c, 3), 0);
	ck_assert_uint_eq(check_moves(&a, &c), 3);
	/* Still listed: it leads until it has relinquished. */
	ck_assert_ptr_nonnull(kcl_assign_broker(&c, 3));
	/* Everyone draining: nobody to move to, keep what is. */
	b[0].draining = b[1].draining = 1;
	in = input(b, 3, t, 1, 6, &c, 3);
	ck_assert_int_eq(kcl_balance(&in, &d, NULL), 0);
	ck_assert_uint_eq(check_moves(&c, &d), 0);
	kcl_assign_free(&a);
	kcl_assign_free(&c);
	kcl_assign_free(&d);
}
END_TEST

START_TEST(no_brokers_no_leaders_and_epochs_resume_above)
{
	kcl_bbroker b[] = {B(1, NULL)};
	kcl_btopic t[] = {{.name = "orders", .partitions = 3}};
	kcl_assign a, c, d;
	kcl_bstats st;
	kcl_binput in = input(b, 1, t, 1, 2, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), 0);
	in = input(NULL, 0, t, 1, 2, &a, 2);
	ck_assert_int_eq(kcl_balance(&in, &c, &st), 0);
	ck_assert_uint_eq(st.unled, 5);
	for (int32_t p = 0; p < 3; p++) {
		ck_assert_int_eq(c.topics[0].parts[p].leader, -1);
		ck_assert_int_eq(c.topics[0].parts[p].epoch, 1);
	}
	ck_assert_int_eq(kcl_assign_check(&c, NULL, 0), 0);
	in = input(b, 1, t, 1, 2, &c, 3);
	ck_assert_int_eq(kcl_balance(&in, &d, NULL), 0);
	for (int32_t p = 0; p < 3; p++)
		ck_assert_int_eq(d.topics[0].parts[p].epoch, 2);
	kcl_assign_free(&a);
	kcl_assign_free(&c);
	kcl_assign_free(&d);
}
END_TEST

START_TEST(epoch_floors_and_topic_incarnations)
{
	kcl_bbroker b[] = {B(1, NULL), B(2, NULL)};
	/* Partitions an earlier single-broker run led up to epoch 7 and 3. */
	int32_t floor[] = {7, 3};
	kcl_btopic t[] = {{.name = "orders", .topic_id = "11111111-1111-4111-8111-111111111111",
			   .partitions = 2, .epoch_floor = floor}};
	kcl_assign a, c;
	kcl_binput in = input(b, 2, t, 1, 0, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), 0);
	ck_assert_int_eq(a.topics[0].parts[0].epoch, 8);
	ck_assert_int_eq(a.topics[0].parts[1].epoch, 4);
	/* Deleted and created again under the same name: a new identity keeps
	 * nothing but moves every slot, at epochs above the old ones. */
	kcl_btopic t2[] = {{.name = "orders", .topic_id = "22222222-2222-4222-8222-222222222222",
			    .partitions = 2}};
	in = input(b, 2, t2, 1, 0, &a, 2);
	ck_assert_int_eq(kcl_balance(&in, &c, NULL), 0);
	ck_assert_int_eq(c.topics[0].parts[0].epoch, 9);
	ck_assert_int_eq(c.topics[0].parts[1].epoch, 5);
	ck_assert_str_eq(c.topics[0].topic_id, "22222222-2222-4222-8222-222222222222");
	kcl_assign_free(&a);
	kcl_assign_free(&c);
	/* Bad input is refused. */
	kcl_bbroker dup[] = {B(1, NULL), B(1, NULL)};
	in = input(dup, 2, t, 1, 0, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), -EINVAL);
	kcl_btopic zero[] = {{.name = "z", .partitions = 0}};
	in = input(b, 2, zero, 1, 0, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), -EINVAL);
}
END_TEST

START_TEST(ten_thousand_partitions_on_three_brokers)
{
	enum { NT = 100, NP = 100 };
	kcl_btopic t[NT];
	char names[NT][24];
	for (int i = 0; i < NT; i++) {
		snprintf(names[i], sizeof(names[i]), "topic-%03d", i);
		t[i] = (kcl_btopic){.name = names[i], .partitions = NP};
	}
	kcl_bbroker b[] = {B(1, NULL), B(2, NULL), B(3, NULL)};
	kcl_assign a, c, d;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	kcl_binput in = input(b, 3, t, NT, 64, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	size_t n1 = parts_of(&a, 1), n2 = parts_of(&a, 2), n3 = parts_of(&a, 3);
	ck_assert_uint_eq(n1 + n2 + n3, 10000);
	ck_assert_uint_eq(n1, 3334);
	ck_assert_uint_eq(n2, 3333);
	ck_assert_uint_eq(n3, 3333);
	/* Broker 3 dies: its third moves, nothing else. */
	in = input(b, 2, t, NT, 64, &a, 2);
	ck_assert_int_eq(kcl_balance(&in, &c, NULL), 0);
	ck_assert_uint_eq(check_moves(&a, &c), 3333);
	/* And comes back (a new incarnation): it gets a third again. */
	b[2].inc.incarnation++;
	in = input(b, 3, t, NT, 64, &c, 3);
	ck_assert_int_eq(kcl_balance(&in, &d, NULL), 0);
	size_t back = check_moves(&c, &d);
	ck_assert_uint_eq(back, parts_of(&d, 3));
	ck_assert_uint_ge(back, 3333);
	ck_assert_uint_le(back, 3334);
	printf("balance 10000 partitions x 3 brokers: %.1f ms\n",
	       (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	kcl_assign_free(&a);
	kcl_assign_free(&c);
	kcl_assign_free(&d);
}
END_TEST

START_TEST(the_inputs_digest_sees_every_input_but_order)
{
	kcl_bbroker b1[] = {B(1, "a"), B(2, "b"), B(3, "a")};
	kcl_bbroker b2[] = {B(3, "a"), B(1, "a"), B(2, "b")};
	kcl_btopic t1[] = {{.name = "x", .topic_id = "", .partitions = 7}, {.name = "y", .partitions = 5}};
	kcl_btopic t2[] = {{.name = "y", .partitions = 5}, {.name = "x", .topic_id = "", .partitions = 7}};
	kcl_assign a;
	kcl_binput in = input(b1, 3, t1, 2, 9, NULL, 1);
	ck_assert_int_eq(kcl_balance(&in, &a, NULL), 0);
	in = input(b1, 3, t1, 2, 9, &a, 2);
	uint64_t sig = kcl_balance_sig(&in);
	kcl_binput o = input(b2, 3, t2, 2, 9, &a, 2);
	ck_assert_uint_eq(kcl_balance_sig(&o), sig);
	/* The generation of the result is not an input: it only counts. */
	o.gen.generation = 77;
	ck_assert_uint_eq(kcl_balance_sig(&o), sig);
	/* Each of these is. */
	kcl_bbroker bx[3];
	kcl_btopic tx[2];
	for (int what = 0; what < 11; what++) {
		memcpy(bx, b1, sizeof(bx));
		memcpy(tx, t1, sizeof(tx));
		o = input(bx, 3, tx, 2, 9, &a, 2);
		kcl_assign a2 = a;
		switch (what) {
		case 0: bx[1].draining = 1; break;
		case 1: bx[1].inc.incarnation++; break;
		case 2: bx[1].inc.nonce++; break;
		case 3: bx[1].rack = "c"; break;
		case 4: o.nbrokers = 2; break;
		case 5: tx[0].partitions = 8; break;
		case 6: tx[0].topic_id = "8c2d8f44-58a5-4bd4-9a4c-1d2b7e0a55aa"; break;
		case 7: tx[1].name = "z"; break;
		case 8: o.gen.controller_epoch++; break;
		case 9: a2.gen.generation++; o.prev = &a2; break;
		case 10: o.prev = NULL; break;
		}
		ck_assert_msg(kcl_balance_sig(&o) != sig, "change %d not seen", what);
	}
	kcl_assign_free(&a);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "cluster-balancer", .tcase = "balancer", .timeout = 120 },
			  KTEST_LIST(even_spread, deterministic_whatever_the_input_order,
				     the_inputs_digest_sees_every_input_but_order,
				     nothing_changes_nothing_moves, a_leave_moves_exactly_the_leavers_slots,
				     a_join_moves_only_onto_the_joiner,
				     a_new_incarnation_takes_over_at_a_new_epoch, racks_spread_each_topic,
				     draining_brokers_are_emptied_first,
				     no_brokers_no_leaders_and_epochs_resume_above,
				     epoch_floors_and_topic_incarnations,
				     ten_thousand_partitions_on_three_brokers));
}
