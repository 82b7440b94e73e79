/* test_controller.c — controller claims: codec and refusals, the election
 * decided by reading the claim back (also when the exclusive create's reply
 * was lost), step-down on a higher epoch, idempotent cleanup, claims at
 * impossible epochs refused and never followed. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/cluster/controller.h"
#include "kaas/cluster/test/harness.h"
#include "util/test/ktest.h"

static kcl_claim claim(int64_t epoch, int32_t owner, uint64_t nonce)
{
	kcl_claim c;
	memset(&c, 0, sizeof(c));
	c.epoch = epoch;
	c.owner = owner;
	c.inc = (kcl_incarn){1000 + (uint64_t)owner, 0x77ull + (uint64_t)owner};
	c.nonce = nonce;
	snprintf(c.endpoint, sizeof(c.endpoint), "10.0.0.%d:9092", (int)owner);
	c.wall_ms = 1764472800000;
	return c;
}

START_TEST(claim_codec_and_refusals)
{
	kcl_claim c = claim(42, 3, 0xabcdef), back;
	char *buf, err[256];
	size_t len;
	ck_assert_int_eq(kcl_claim_encode(&c, &buf, &len), 0);
	ck_assert_int_eq(kcl_claim_decode(buf, len, 42, &back, err, sizeof(err)), 0);
	ck_assert_int_eq(back.owner, 3);
	ck_assert(kcl_incarn_cmp(back.inc, c.inc) == 0);
	ck_assert_uint_eq(back.nonce, 0xabcdef);
	/* In the file of another epoch. */
	ck_assert_int_eq(kcl_claim_decode(buf, len, 43, &back, err, sizeof(err)), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err, "epoch 43"));
	for (size_t cut = 0; cut < len; cut++)
		ck_assert_int_eq(kcl_claim_decode(buf, cut, 42, &back, err, sizeof(err)), -EBADMSG);
	free(buf);
	const char *newer = "{\"version\":9,\"epoch\":42}";
	ck_assert_int_eq(kcl_claim_decode(newer, strlen(newer), 42, &back, err, sizeof(err)),
			 -EPROTONOSUPPORT);
	const char *huge = "{\"version\":1,\"epoch\":99999999999}";
	ck_assert_int_eq(kcl_claim_decode(huge, strlen(huge), 0, &back, err, sizeof(err)), -ERANGE);
	char path[64];
	ck_assert_int_eq(kcl_ctl_path(7, path, sizeof(path)), 0);
	ck_assert_str_eq(path, "controller/0000000007.json");
	ck_assert_int_eq(kcl_ctl_path(0, path, sizeof(path)), -ERANGE);
}
END_TEST

START_TEST(exactly_one_winner)
{
	kcl_claim a = claim(1, 1, 0x11), b = claim(1, 2, 0x22), w;
	int out;
	char err[256];
	ck_assert_int_eq(kcl_ctl_elect(h_vfs, &a, 2, &out, &w, err, sizeof(err)), 0);
	ck_assert_int_eq(out, KCL_ELECT_WON);
	ck_assert_int_eq(kcl_ctl_elect(h_vfs, &b, 2, &out, &w, err, sizeof(err)), 0);
	ck_assert_int_eq(out, KCL_ELECT_LOST);
	ck_assert_int_eq(w.owner, 1);
	/* The same broker with a new incarnation (a restart) is not the winner. */
	kcl_claim a2 = a;
	a2.inc.incarnation++;
	ck_assert_int_eq(kcl_ctl_elect(h_vfs, &a2, 2, &out, &w, err, sizeof(err)), 0);
	ck_assert_int_eq(out, KCL_ELECT_LOST);
	kcl_ctl_view cv;
	ck_assert_int_eq(kcl_ctl_scan(h_vfs, 0, &cv), 0);
	ck_assert_int_eq(cv.highest_complete, 1);
	ck_assert_int_eq(cv.current.owner, 1);
	ck_assert_int_eq(kcl_ctl_next_epoch(&cv, 0), 2);
	ck_assert_int_eq(kcl_ctl_next_epoch(&cv, 9), 10);
}
END_TEST

/* The create reached the server and wrote the claim, the reply of its last
 * step was lost (EIO); the candidate retries and is told EEXIST for the file
 * it made.  Reading back, it finds its own claim: it won. */
START_TEST(lost_reply_winner_still_wins)
{
	wrap_vfs *w = wrap_open(h_vfs);
	w->fail_after_dirsync = 1;
	kcl_claim a = claim(5, 1, 0x5151), b = claim(5, 2, 0x5252), got;
	int out;
	char err[256];
	ck_assert_int_eq(kcl_ctl_elect(&w->base, &a, 3, &out, &got, err, sizeof(err)), 0);
	ck_assert_int_eq(out, KCL_ELECT_WON);
	ck_assert_ptr_nonnull(strstr(err, "lost reply"));
	ck_assert_int_eq(got.owner, 1);
	ck_assert_uint_eq(got.nonce, 0x5151);
	/* And the other candidate, told EEXIST truthfully, lost. */
	ck_assert_int_eq(kcl_ctl_elect(h_vfs, &b, 3, &out, &got, err, sizeof(err)), 0);
	ck_assert_int_eq(out, KCL_ELECT_LOST);
	ck_assert_int_eq(got.owner, 1);
	sub_destroy(&w->base);
}
END_TEST

/* The create's own reply was lost: the server made the (empty) file and the
 * retransmission was answered EEXIST, so nothing was written.  Nobody can
 * prove the epoch theirs; it is undecided for everyone and the next epoch
 * is raced. */
START_TEST(lost_create_reply_leaves_the_epoch_undecided)
{
	wrap_vfs *w = wrap_open(h_vfs);
	w->lose_excl_reply = 1;
	kcl_claim a = claim(3, 1, 0x3131), b = claim(3, 2, 0x3232), got;
	int out;
	char err[256];
	ck_assert_int_eq(kcl_ctl_elect(&w->base, &a, 3, &out, &got, err, sizeof(err)), 0);
	ck_assert_int_eq(out, KCL_ELECT_UNDECIDED);
	ck_assert_ptr_nonnull(strstr(err, "undecided"));
	ck_assert_int_eq(kcl_ctl_elect(h_vfs, &b, 3, &out, &got, err, sizeof(err)), 0);
	ck_assert_int_eq(out, KCL_ELECT_UNDECIDED);
	kcl_ctl_view cv;
	ck_assert_int_eq(kcl_ctl_scan(h_vfs, 0, &cv), 0);
	ck_assert_int_eq(cv.highest_name, 3);
	ck_assert_int_eq(cv.highest_complete, 0);
	ck_assert_ptr_nonnull(strstr(cv.note, "empty"));
	/* The next epoch is above the undecided one. */
	ck_assert_int_eq(kcl_ctl_next_epoch(&cv, 0), 4);
	kcl_claim b4 = claim(4, 2, 0x4242);
	ck_assert_int_eq(kcl_ctl_elect(h_vfs, &b4, 3, &out, &got, err, sizeof(err)), 0);
	ck_assert_int_eq(out, KCL_ELECT_WON);
	ck_assert_int_eq(kcl_ctl_scan(h_vfs, 0, &cv), 0);
	ck_assert_int_eq(cv.highest_complete, 4);
	ck_assert_int_eq(cv.current.owner, 2);
	sub_destroy(&w->base);
}
END_TEST

START_TEST(unreadable_claims_are_never_won)
{
	kcl_claim a = claim(2, 1, 0x21), got;
	int out;
	char err[256];
	/* "Another host" wrote a claim of a newer format for epoch 2. */
	h_put("controller/0000000002.json", "{\"version\":7,\"epoch\":2}", 23);
	ck_assert_int_eq(kcl_ctl_elect(h_vfs, &a, 1, &out, &got, err, sizeof(err)), 0);
	ck_assert_int_eq(out, KCL_ELECT_LOST);
	ck_assert_int_eq(got.owner, -1);
	ck_assert_ptr_nonnull(strstr(err, "cannot read"));
	/* Junk names are ignored by the scan, counted. */
	h_put("controller/notes.txt", "x", 1);
	h_put("controller/12.json", "x", 1);
	kcl_ctl_view cv;
	ck_assert_int_eq(kcl_ctl_scan(h_vfs, 0, &cv), 0);
	ck_assert_int_eq(cv.nfiles, 1);
	ck_assert_int_eq(cv.ignored, 2);
	ck_assert_int_eq(cv.highest_name, 2);
	ck_assert_int_eq(cv.highest_complete, 0);
	ck_assert_ptr_nonnull(strstr(cv.note, "newer"));
	/* An empty volume is an empty view. */
	ck_assert_int_eq(sub_remove_tree(h_vfs, "controller"), 0);
	ck_assert_int_eq(kcl_ctl_scan(h_vfs, 0, &cv), 0);
	ck_assert_int_eq(cv.highest_name, 0);
}
END_TEST

START_TEST(step_down_on_a_higher_epoch)
{
	kcl_claim a = claim(6, 1, 0x61), got;
	int out;
	char err[256];
	ck_assert_int_eq(kcl_ctl_elect(h_vfs, &a, 1, &out, &got, err, sizeof(err)), 0);
	ck_assert_int_eq(out, KCL_ELECT_WON);
	ck_assert_int_eq(kcl_ctl_superseded(h_vfs, 6), 0);
	/* Even an undecided claim above us supersedes us. */
	h_put("controller/0000000007.json", "", 0);
	ck_assert_int_eq(kcl_ctl_superseded(h_vfs, 6), 1);
	ck_assert_int_eq(kcl_ctl_superseded(h_vfs, 7), 0);
}
END_TEST

static int count_claims(void)
{
	char **names;
	size_t n;
	ck_assert_int_eq(sub_list(h_vfs, "controller", &names, &n), 0);
	sub_names_free(names, n);
	return (int)n;
}

START_TEST(cleanup_is_idempotent_and_keeps_the_newest)
{
	char err[256];
	for (int64_t e = 1; e <= 10; e++) {
		kcl_claim c = claim(e, (int32_t)(e % 3), 0x100 + (uint64_t)e), got;
		int out;
		ck_assert_int_eq(kcl_ctl_elect(h_vfs, &c, 1, &out, &got, err, sizeof(err)), 0);
		ck_assert_int_eq(out, KCL_ELECT_WON);
	}
	unsigned removed;
	/* A controller of epoch 5 (not knowing it is superseded) never removes
	 * claims at or above its own. */
	ck_assert_int_eq(kcl_ctl_cleanup(h_vfs, 5, 1, &removed), 0);
	ck_assert_uint_eq(removed, 4);
	ck_assert_int_eq(count_claims(), 6);
	ck_assert_int_eq(kcl_ctl_cleanup(h_vfs, 10, 3, &removed), 0);
	ck_assert_uint_eq(removed, 3);
	ck_assert_int_eq(kcl_ctl_cleanup(h_vfs, 10, 3, &removed), 0);
	ck_assert_uint_eq(removed, 0);
	ck_assert_int_eq(count_claims(), 3);
	kcl_ctl_view cv;
	ck_assert_int_eq(kcl_ctl_scan(h_vfs, 0, &cv), 0);
	ck_assert_int_eq(cv.highest_complete, 10);
	ck_assert_int_eq(kcl_ctl_next_epoch(&cv, 0), 11);
}
END_TEST

START_TEST(possible_top_walks_in_bounded_steps)
{
	int64_t none[1] = {0};
	ck_assert_int_eq(kcl_ctl_possible_top(none, 0, 0), 0);
	ck_assert_int_eq(kcl_ctl_possible_top(none, 0, 7), 7);
	int64_t fresh[] = {3, 1, 2};
	ck_assert_int_eq(kcl_ctl_possible_top(fresh, 3, 0), 3);
	int64_t hostile[] = {2, KCL_EPOCH_MAX, 1, 3};
	ck_assert_int_eq(kcl_ctl_possible_top(hostile, 4, 0), 3);
	ck_assert_int_eq(kcl_ctl_possible_top(hostile, 4, 3), 3);
	ck_assert_int_eq(kcl_ctl_possible_top(hostile, 4, KCL_CTL_BASE_LOWEST), 3);
	/* Cleaned down to the newest few: the assignment's epoch anchors them;
	 * names below it do not matter. */
	int64_t mature[] = {4996, 4997, 4998, 4999, 5000, 5001, KCL_EPOCH_MAX - 1};
	ck_assert_int_eq(kcl_ctl_possible_top(mature, 7, 4999), 5001);
	ck_assert_int_eq(kcl_ctl_possible_top(mature, 7, KCL_CTL_BASE_LOWEST), 5001);
	/* Nothing known and no assignment.json: a fresh cluster's epochs start
	 * at 1, so these are not followed (the caller passes LOWEST when a
	 * pointer exists). */
	ck_assert_int_eq(kcl_ctl_possible_top(mature, 7, 0), 0);
	/* Steps of up to the window are followed, a wider one is not. */
	int64_t steps[] = {3, 3 + KCL_EPOCH_WINDOW, 3 + 2 * KCL_EPOCH_WINDOW, 4 + 3 * KCL_EPOCH_WINDOW};
	ck_assert_int_eq(kcl_ctl_possible_top(steps, 4, 3), 3 + 2 * KCL_EPOCH_WINDOW);
}
END_TEST

static void put_claim(int64_t epoch, int32_t owner)
{
	kcl_claim c = claim(epoch, owner, 0x5151);
	char *buf, path[64];
	size_t len;
	ck_assert_int_eq(kcl_claim_encode(&c, &buf, &len), 0);
	ck_assert_int_eq(kcl_ctl_path(epoch, path, sizeof(path)), 0);
	h_put(path, buf, len);
	free(buf);
}

START_TEST(impossible_claims_are_refused_and_never_followed)
{
	char err[256];
	for (int64_t e = 1; e <= 3; e++) {
		kcl_claim c = claim(e, 1, 0x200 + (uint64_t)e), got;
		int out;
		ck_assert_int_eq(kcl_ctl_elect(h_vfs, &c, 1, &out, &got, err, sizeof(err)), 0);
		ck_assert_int_eq(out, KCL_ELECT_WON);
	}
	/* Complete, well-formed claims from "another host" at the highest
	 * epoch a name can hold and just below it. */
	put_claim(KCL_EPOCH_MAX, 9);
	put_claim(KCL_EPOCH_MAX - 1, 9);
	kcl_ctl_view cv;
	for (int64_t base = KCL_CTL_BASE_LOWEST; base <= 3; base++) {
		ck_assert_int_eq(kcl_ctl_scan(h_vfs, base, &cv), 0);
		ck_assert_int_eq(cv.highest_name, 3);
		ck_assert_int_eq(cv.highest_complete, 3);
		ck_assert_int_eq(cv.current.owner, 1);
		ck_assert_uint_eq(cv.impossible, 2);
		ck_assert_int_eq(cv.impossible_lowest, KCL_EPOCH_MAX - 1);
		ck_assert_ptr_nonnull(strstr(cv.impossible_note, "9999999998 is impossible"));
		/* There is a next epoch, and it can be won. */
		ck_assert_int_eq(kcl_ctl_next_epoch(&cv, 3), 4);
	}
	kcl_claim c4 = claim(4, 2, 0x204), got;
	int out;
	ck_assert_int_eq(kcl_ctl_elect(h_vfs, &c4, 1, &out, &got, err, sizeof(err)), 0);
	ck_assert_int_eq(out, KCL_ELECT_WON);
	ck_assert_int_eq(kcl_ctl_scan(h_vfs, 4, &cv), 0);
	ck_assert_int_eq(cv.highest_complete, 4);
	ck_assert_int_eq(cv.current.owner, 2);
	/* It does not supersede the controller, and it is never removed:
	 * nothing proves it garbage. */
	ck_assert_int_eq(kcl_ctl_superseded(h_vfs, 4), 0);
	unsigned removed;
	ck_assert_int_eq(kcl_ctl_cleanup(h_vfs, 4, 1, &removed), 0);
	ck_assert_uint_eq(removed, 3);
	ck_assert_int_eq(count_claims(), 3);
	/* A claim within the window is a possible candidate's: followed. */
	put_claim(4 + KCL_EPOCH_WINDOW, 9);
	ck_assert_int_eq(kcl_ctl_scan(h_vfs, 4, &cv), 0);
	ck_assert_int_eq(cv.highest_complete, 4 + KCL_EPOCH_WINDOW);
	ck_assert_uint_eq(cv.impossible, 2);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "cluster-controller", .tcase = "controller",
					  .timeout = 60, .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(claim_codec_and_refusals, exactly_one_winner,
				     lost_reply_winner_still_wins,
				     lost_create_reply_leaves_the_epoch_undecided,
				     unreadable_claims_are_never_won, step_down_on_a_higher_epoch,
				     cleanup_is_idempotent_and_keeps_the_newest,
				     possible_top_walks_in_bounded_steps,
				     impossible_claims_are_refused_and_never_followed));
}
