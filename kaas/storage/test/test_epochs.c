/*
 * test_epochs.c — where each leader epoch ends (OffsetForLeaderEpoch's
 * answer): the rules of epochs.h on hand-made segment lists (rolls,
 * zombies, epochs that wrote no segment, the log start cutting old
 * epochs) and which epoch wrote an offset, then on a real partition led at epochs 1, 2 and 4 with a
 * zombie's segment planted among its files.
 */
#include "kaas/storage/epochs.h"
#include "kaas/storage/test/harness.h"
#include "util/test/ktest.h"

#define NSEG(a) (sizeof(a) / sizeof((a)[0]))

/* Expects (epoch, end) for `req` on segs. */
static void want(const ks_epoch_seg *segs, size_t n, int32_t cur, int64_t start, int64_t end,
		 int32_t req, int32_t want_epoch, int64_t want_end)
{
	int32_t e = 99;
	int64_t o = 99;
	ks_epoch_end_offset(segs, n, cur, start, end, req, &e, &o);
	ck_assert_msg(e == want_epoch && o == want_end, "epoch %d: got (%d, %lld), want (%d, %lld)",
		      (int)req, (int)e, (long long)o, (int)want_epoch, (long long)want_end);
}

START_TEST(history_with_rolls_and_gaps)
{
	/* epoch 1 rolled once, epochs 2 and 4 never wrote a segment */
	const ks_epoch_seg s[] = {{1, 0}, {1, 50}, {3, 100}, {5, 200}};
	want(s, NSEG(s), 5, 0, 300, 5, 5, 300);   /* current: the log end */
	want(s, NSEG(s), 5, 0, 300, 1, 1, 100);   /* the roll at 50 is no boundary */
	want(s, NSEG(s), 5, 0, 300, 2, 1, 100);   /* no segment: the epoch before it */
	want(s, NSEG(s), 5, 0, 300, 3, 3, 200);
	want(s, NSEG(s), 5, 0, 300, 4, 3, 200);
	want(s, NSEG(s), 5, 0, 300, 6, -1, -1);   /* newer than the log */
	want(s, NSEG(s), 5, 0, 300, -1, -1, -1);  /* UNDEFINED_EPOCH asked */
	want(s, NSEG(s), 5, 0, 300, 0, 0, 0);     /* older than everything: first start */
}
END_TEST

START_TEST(zombie_segments_are_ignored)
{
	/* 2@150 was written by a leader of epoch 2 after epoch 3 took over at
	 * 100; 1@100 lost the same race at the same base (sorted after 3@100). */
	const ks_epoch_seg s[] = {{1, 0}, {3, 100}, {1, 100}, {2, 150}, {4, 200}};
	want(s, NSEG(s), 4, 0, 260, 3, 3, 200);   /* not (2, 200) */
	want(s, NSEG(s), 4, 0, 260, 2, 1, 100);   /* epoch 2 has no live segment */
	want(s, NSEG(s), 4, 0, 260, 1, 1, 100);
	want(s, NSEG(s), 4, 0, 260, 4, 4, 260);
	/* A zombie of a higher epoch than the current one cannot exist (it
	 * would be live and fence us); a lower one never sets the latest. */
	const ks_epoch_seg z[] = {{2, 0}, {1, 40}};
	want(z, NSEG(z), 2, 0, 80, 1, 1, 0);
	want(z, NSEG(z), 2, 0, 80, 2, 2, 80);
}
END_TEST

START_TEST(log_start_cuts_old_epochs)
{
	const ks_epoch_seg s[] = {{1, 0}, {2, 100}, {3, 200}};
	/* retention or DeleteRecords moved the log start to 150, inside epoch 2 */
	want(s, NSEG(s), 3, 150, 300, 1, 1, 150);
	want(s, NSEG(s), 3, 150, 300, 0, 0, 150);
	want(s, NSEG(s), 3, 150, 300, 2, 2, 200);
	want(s, NSEG(s), 3, 150, 300, 3, 3, 300);
	/* ... and to exactly where epoch 2 starts */
	want(s, NSEG(s), 3, 100, 300, 1, 1, 100);
	want(s, NSEG(s), 3, 100, 300, 2, 2, 200);
	/* whole segments removed: the first left is epoch 3's */
	const ks_epoch_seg t[] = {{3, 200}};
	want(t, NSEG(t), 3, 200, 300, 2, 2, 200);
	want(t, NSEG(t), 3, 200, 300, 3, 3, 300);
}
END_TEST

START_TEST(current_epoch_without_a_segment)
{
	want(NULL, 0, 4, 0, 0, 4, 4, 0);
	want(NULL, 0, 4, 0, 0, 2, 2, 0);
	want(NULL, 0, 4, 0, 0, 5, -1, -1);
	const ks_epoch_seg s[] = {{1, 0}};
	want(s, NSEG(s), 2, 0, 50, 1, 1, 50);
	want(s, NSEG(s), 2, 0, 50, 2, 2, 50);
}
END_TEST

START_TEST(epoch_of_an_offset)
{
	const ks_epoch_seg s[] = {{1, 0}, {3, 100}, {2, 150}, {3, 180}, {4, 200}};
	ck_assert_int_eq(ks_epoch_at(s, NSEG(s), 4, 260, 0), 1);
	ck_assert_int_eq(ks_epoch_at(s, NSEG(s), 4, 260, 99), 1);
	ck_assert_int_eq(ks_epoch_at(s, NSEG(s), 4, 260, 100), 3);
	ck_assert_int_eq(ks_epoch_at(s, NSEG(s), 4, 260, 160), 3); /* 2@150 is a zombie's */
	ck_assert_int_eq(ks_epoch_at(s, NSEG(s), 4, 260, 199), 3);
	ck_assert_int_eq(ks_epoch_at(s, NSEG(s), 4, 260, 259), 4);
	ck_assert_int_eq(ks_epoch_at(s, NSEG(s), 4, 260, 260), 4); /* the next record's */
	ck_assert_int_eq(ks_epoch_at(s, NSEG(s), 5, 260, 260), 5);
	ck_assert_int_eq(ks_epoch_at(s, NSEG(s), 4, 260, -1), -1);
	const ks_epoch_seg t[] = {{3, 200}};
	ck_assert_int_eq(ks_epoch_at(t, NSEG(t), 3, 300, 100), -1); /* below every segment */
}
END_TEST

static void append(ks_partition *p, int batches)
{
	for (int i = 0; i < batches; i++) {
		kbuild b = KBUILD_INIT;
		ks_append_result res;
		kbuild_simple(&b, -1, -1, -1, 2, 1700000000000, "ep", 40, KBUILD_NONE);
		ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
		ck_assert_int_eq(res.error, 0);
		kbuild_free(&b);
	}
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
}

static void want_p(ks_partition *p, int32_t req, int32_t want_epoch, int64_t want_end)
{
	int32_t e = 99, cur = 99;
	int64_t o = 99;
	ck_assert_int_eq(ks_partition_epoch_end(p, req, &e, &o, &cur), 0);
	ck_assert_msg(e == want_epoch && o == want_end, "epoch %d: got (%d, %lld), want (%d, %lld)",
		      (int)req, (int)e, (long long)o, (int)want_epoch, (long long)want_end);
	int32_t st_epoch;
	ks_partition_state_of(p, &st_epoch);
	ck_assert_int_eq(cur, st_epoch);
}

START_TEST(partition_led_at_three_epochs)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/0", NULL, 1, &cfg, &p), 0);
	int32_t e;
	int64_t o;
	ck_assert_int_eq(ks_partition_epoch_end(p, 1, &e, &o, NULL), -EPERM); /* not led yet */
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	append(p, 3); /* offsets 0-5 */
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	append(p, 2); /* 6-9 */
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 4), 0); /* epoch 3 never led */
	append(p, 1); /* 10-11 */
	want_p(p, 1, 1, 6);
	want_p(p, 2, 2, 10);
	want_p(p, 3, 2, 10);
	want_p(p, 4, 4, 12);
	want_p(p, 5, -1, -1);
	want_p(p, 0, 0, 0);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ck_assert_int_eq(ks_partition_epoch_end(p, 4, &e, &o, NULL), -EPERM);
	ks_partition_close(p);

	/* A leader of epoch 1 that never learnt it was replaced wrote a
	 * segment at offset 8, inside epoch 2's range: it must not count. */
	char path[512];
	snprintf(path, sizeof(path), "%s/t/0/%010d-%020lld.log", h_dir, 1, 8LL);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/0", NULL, 0, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 5), 0);
	want_p(p, 1, 1, 6);
	want_p(p, 2, 2, 10);
	want_p(p, 4, 4, 12);
	want_p(p, 5, 5, 12);
	append(p, 1);
	want_p(p, 4, 4, 12);
	want_p(p, 5, 5, 14);
	int32_t at;
	ck_assert_int_eq(ks_partition_epoch_at(p, 7, &at), 0);
	ck_assert_int_eq(at, 2);
	ck_assert_int_eq(ks_partition_epoch_at(p, 9, &at), 0); /* the zombie's 1@8 does not count */
	ck_assert_int_eq(at, 2);
	ck_assert_int_eq(ks_partition_epoch_at(p, 13, &at), 0);
	ck_assert_int_eq(at, 5);
	ks_partition_close(p);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "storage-epochs", .tcase = "epochs", .timeout = 60,
					  .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(history_with_rolls_and_gaps, zombie_segments_are_ignored,
				     log_start_cuts_old_epochs, current_epoch_without_a_segment,
				     epoch_of_an_offset, partition_led_at_three_epochs));
}
