/* test_tkguard.c — the successor's guard (tkguard.h): the lease and the
 * assignment asked again right before a take-over changes the volume, on
 * their own and wired into a real storage take-over the way the partition
 * table wires them (the fault campaign's paused re-driver: a take-over at
 * epoch 77 whose broker stopped, lost its lease, and came back while
 * broker 2 led at 78). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kaas/cluster/assignment.h"
#include "kaas/cluster/lease.h"
#include "kaas/cluster/test/harness.h"
#include "kaas/cluster/tkguard.h"
#include "kaas/storage/batch.h"
#include "kaas/storage/storage.h"
#include "kaas/storage/test/kbuild.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/test/ktest.h"

#define MS 1000000LL

static const kcl_incarn INC[4] = {{0, 0}, {501, 0x91}, {502, 0x92}, {503, 0x93}};

/* Brokers 1..3; topic "chaos" of 12 partitions led round robin at epoch
 * 70, partition 10 by `leader10` at `epoch10`. */
static void publish(int64_t generation, int32_t leader10, int32_t epoch10, int with_topic)
{
	kcl_assign a;
	char err[256];
	ck_assert_int_eq(kcl_assign_alloc(&a, 3, with_topic ? 1 : 0, 4), 0);
	a.gen = (kcl_gen){1, generation};
	a.controller = 1;
	for (int b = 0; b < 3; b++) {
		a.brokers[b].id = b + 1;
		a.brokers[b].inc = INC[b + 1];
	}
	if (with_topic) {
		ck_assert_int_eq(kcl_atopic_alloc(&a.topics[0], "chaos", "", 12), 0);
		a.ntopics = 1;
		for (int p = 0; p < 12; p++)
			a.topics[0].parts[p] = (kcl_slot){p % 3 + 1, 70};
		a.topics[0].parts[10] = (kcl_slot){leader10, epoch10};
	}
	for (int s = 0; s < 4; s++)
		a.shards[s] = (kcl_slot){s % 3 + 1, 1};
	ck_assert_msg(kcl_assign_publish(h_vfs, &a, 0, err, sizeof(err)) == 0, "%s", err);
	kcl_assign_free(&a);
}

static void renew(kcl_lease *l)
{
	int64_t now = ku_mono_ns();
	ck_assert_int_eq(kcl_lease_renew_begin(l, now), 0);
	ck_assert_int_eq(kcl_lease_renew_end(l, 0, now), 0);
}

START_TEST(guard_follows_the_lease_and_the_assignment)
{
	kcl_lease l;
	kcl_tkguard g;
	int32_t ceiling;
	char why[400];
	ck_assert_int_eq(kcl_lease_init(&l, 60000, 100), 0);
	renew(&l);
	publish(1, 3, 77, 1);
	ck_assert_int_eq(kcl_tkguard_init(&g, h_vfs, &l, 3, INC[3]), 0);
	/* Not armed: no take-over was started by the driver. */
	ck_assert_int_eq(kcl_tkguard_check(&g, "chaos", 10, 77, &ceiling, why, sizeof(why)), -EPERM);
	kcl_tkguard_arm(&g, (kcl_gen){1, 1});
	ck_assert_int_eq(kcl_tkguard_check(&g, "chaos", 10, 77, &ceiling, why, sizeof(why)), 0);
	ck_assert_int_eq(ceiling, 77);
	ck_assert_uint_eq(g.docs_read, 0); /* the generation acted for: the pointer only */
	/* The controller moved it to broker 2 at 78: the guard names the
	 * ceiling, storage abandons. */
	publish(2, 2, 78, 1);
	ck_assert_int_eq(kcl_tkguard_check(&g, "chaos", 10, 77, &ceiling, why, sizeof(why)), 0);
	ck_assert_int_eq(ceiling, 78);
	ck_assert_int_eq(kcl_tkguard_fn(&g, "chaos", 10, 77, "manifest write", &ceiling), 0);
	ck_assert_int_eq(ceiling, 78);
	ck_assert_uint_eq(g.refusals, 1);
	/* A newer generation that leaves this partition where it was. */
	publish(3, 3, 77, 1);
	ck_assert_int_eq(kcl_tkguard_check(&g, "chaos", 10, 77, &ceiling, why, sizeof(why)), 0);
	ck_assert_int_eq(ceiling, 77);
	ck_assert_uint_eq(g.docs_read, 2);
	ck_assert_int_eq(kcl_tkguard_check(&g, "chaos", 10, 77, &ceiling, why, sizeof(why)), 0);
	ck_assert_uint_eq(g.docs_read, 2); /* read once per generation */
	/* The partition at this epoch, but for another incarnation of this
	 * broker id (this process was superseded): not ours. */
	kcl_tkguard h;
	ck_assert_int_eq(kcl_tkguard_init(&h, h_vfs, &l, 3, (kcl_incarn){999, 1}), 0);
	kcl_tkguard_arm(&h, (kcl_gen){1, 2});
	ck_assert_int_eq(kcl_tkguard_check(&h, "chaos", 10, 77, &ceiling, why, sizeof(why)), -ESTALE);
	ck_assert_ptr_nonnull(strstr(why, "not to this incarnation"));
	kcl_tkguard_destroy(&h);
	/* The topic is gone from the newest assignment. */
	publish(4, 3, 77, 0);
	ck_assert_int_eq(kcl_tkguard_check(&g, "chaos", 10, 77, &ceiling, why, sizeof(why)), -ESTALE);
	/* A pointer that cannot be read: nothing is known, nothing is done. */
	char path[1024];
	snprintf(path, sizeof(path), "%s/assignment.json", h_dir);
	FILE *f = fopen(path, "w");
	fputs("{\"version\":1,\"contr", f);
	fclose(f);
	ck_assert_int_lt(kcl_tkguard_check(&g, "chaos", 10, 77, &ceiling, why, sizeof(why)), 0);
	publish(5, 3, 77, 1);
	ck_assert_int_eq(kcl_tkguard_check(&g, "chaos", 10, 77, &ceiling, why, sizeof(why)), 0);
	/* The lease given up (the watchdog, a step-down): -ETIME. */
	kcl_lease_give_up(&l, "test");
	ck_assert_int_eq(kcl_tkguard_check(&g, "chaos", 10, 77, &ceiling, why, sizeof(why)), -ETIME);
	kcl_tkguard_destroy(&g);
	kcl_lease_destroy(&l);
}
END_TEST

/* ---- wired into a storage take-over ------------------------------------------------ */

#define PDIR "data/chaos/10"

/* Segment <epoch>-<base>.log holding one batch of n records at base. */
static void write_segment(int32_t epoch, int64_t base, int n)
{
	kbuild b = KBUILD_INIT;
	char path[1024];
	kbuild_simple(&b, -1, -1, -1, n, 1700000000000LL, "seg", 30, KBUILD_NONE);
	kb_put64(b.buf, (uint64_t)base);
	snprintf(path, sizeof(path), "%s/%s/%010d-%020lld.log", h_dir, PDIR, (int)epoch, (long long)base);
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(b.buf, 1, b.len, f), b.len);
	fclose(f);
	kbuild_free(&b);
}

/* Epoch 76's segment holds [0, 10) and one of its later segments begins
 * at 20: a torn tail the take-over at 77 sets aside. */
static ks_partition *torn_partition(void)
{
	ks_partition *p;
	ck_assert_int_eq(sub_mkdirs(h_vfs, PDIR, 0755), 0);
	write_segment(76, 0, 10);
	write_segment(76, 20, 5);
	ck_assert_int_eq(ks_partition_open(h_vfs, PDIR, NULL, 0, NULL, &p), 0);
	return p;
}

static int in_place(const char *leaf)
{
	char path[1024];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s/%s", h_dir, PDIR, leaf);
	return stat(path, &st) == 0;
}

static int quarantined(void)
{
	char path[1024];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s/quarantine", h_dir, PDIR);
	return stat(path, &st) == 0;
}

/* What happens to the broker while its take-over is at `at`. */
typedef struct pause_ctx {
	kcl_tkguard *g;
	const char *at;
	void (*meanwhile)(struct pause_ctx *c);
	kcl_lease *lease;
	int fired;
} pause_ctx;

/* The table's adapter (kaas/core driven.c), with something done first. */
static int guard_at(void *arg, int32_t epoch, const char *step, int32_t *ceiling)
{
	pause_ctx *c = arg;
	if (!c->fired && strstr(step, c->at)) {
		c->fired = 1;
		c->meanwhile(c);
	}
	return kcl_tkguard_fn(c->g, "chaos", 10, epoch, step, ceiling);
}

static void paused_past_the_session(pause_ctx *c)
{
	(void)c;
	usleep(400 * 1000); /* SIGSTOP ... SIGCONT, longer than the 200 ms session */
}

static void controller_moves_it(pause_ctx *c)
{
	(void)c;
	publish(2, 2, 78, 1); /* broker 2 at 78, which has not written anything yet */
}

static void run_paused(void (*meanwhile)(pause_ctx *), int want_rc)
{
	kcl_lease l;
	kcl_tkguard g;
	ck_assert_int_eq(kcl_lease_init(&l, 200, 25), 0);
	renew(&l);
	publish(1, 3, 77, 1);
	ck_assert_int_eq(kcl_tkguard_init(&g, h_vfs, &l, 3, INC[3]), 0);
	kcl_tkguard_arm(&g, (kcl_gen){1, 1});
	ks_partition *p = torn_partition();
	pause_ctx c = {&g, "torn tail", meanwhile, &l, 0};
	ks_takeover_opts o = {.guard = guard_at, .guard_arg = &c};
	ck_assert_int_eq(ks_partition_take_over_opts(p, 77, &o), want_rc);
	ck_assert_int_eq(c.fired, 1);
	/* Nothing moved: the later segment is where it was. */
	ck_assert(in_place("0000000076-00000000000000000020.log"));
	ck_assert(!quarantined());
	ck_assert(!in_place("0000000077-00000000000000000010.log"));
	ks_partition_stats st;
	ks_partition_stats_get(p, &st);
	ck_assert_uint_eq(st.takeovers_abandoned, 1);
	ck_assert_uint_eq(st.quarantined_files, 0);
	ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_FOLLOWER);
	ks_partition_close(p);
	kcl_tkguard_destroy(&g);
	kcl_lease_destroy(&l);
}

START_TEST(lease_lapsed_mid_take_over_moves_nothing)
{
	run_paused(paused_past_the_session, -ETIME);
}
END_TEST

START_TEST(newer_assignment_mid_take_over_moves_nothing)
{
	run_paused(controller_moves_it, -ESTALE);
}
END_TEST

/* The same take-over, nothing happening meanwhile: it goes through, and
 * the torn tail is set aside (the guard is what held it above). */
START_TEST(undisturbed_take_over_sets_the_torn_tail_aside)
{
	kcl_lease l;
	kcl_tkguard g;
	ck_assert_int_eq(kcl_lease_init(&l, 60000, 100), 0);
	renew(&l);
	publish(1, 3, 77, 1);
	ck_assert_int_eq(kcl_tkguard_init(&g, h_vfs, &l, 3, INC[3]), 0);
	kcl_tkguard_arm(&g, (kcl_gen){1, 1});
	ks_partition *p = torn_partition();
	pause_ctx c = {&g, "no such step", NULL, &l, 0};
	ks_takeover_opts o = {.guard = guard_at, .guard_arg = &c};
	ck_assert_int_eq(ks_partition_take_over_opts(p, 77, &o), 0);
	ck_assert(!in_place("0000000076-00000000000000000020.log"));
	ck_assert(quarantined());
	ck_assert_int_eq(ks_partition_log_end(p), 10);
	ck_assert_uint_ge(g.checks, 2); /* the set-aside, the manifest (and strays) */
	ks_partition_close(p);
	kcl_tkguard_destroy(&g);
	kcl_lease_destroy(&l);
}
END_TEST

static void quiet(void)
{
	ku_log_level = getenv("KAAS_LOG_LEVEL") ? KAAS_LOG_DEBUG : -1;
	h_setup();
}

int main(void)
{
	return ktest_main((struct ktest){ .suite = "cluster-tkguard", .timeout = 60, .setup = quiet,
					  .teardown = h_teardown },
			  KTEST_LIST(guard_follows_the_lease_and_the_assignment, lease_lapsed_mid_take_over_moves_nothing,
				     newer_assignment_mid_take_over_moves_nothing,
				     undisturbed_take_over_sets_the_torn_tail_aside));
}
