/*
 * test_scratch.c — when a leftover scratch directory is provably garbage
 * (kc_scratch_owner_dead), durations for `clean --older-than`, the sweep on
 * a real directory, the rename-copy probe sized to the free space, and the
 * enospc check's judge and size option.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance/agent.h"
#include "conformance/judge.h"
#include "conformance/opts.h"
#include "conformance/scratch.h"
#include "substrates/sub.h"
#include "substrates/test/scratch.h"
#include "util/test/ktest.h"

static uint64_t fake_start(long pid)
{
	/* pid 100 runs since tick 500; pid 200 is gone */
	return pid == 100 ? 500 : 0;
}

static json_t *owner(const char *host, long pid, long start)
{
	return json_pack("{s:s,s:s,s:I,s:I,s:I}", "kind", KC_SCRATCH_KIND, "host_id", host, "pid",
			 (json_int_t)pid, "pid_start", (json_int_t)start, "started_at_ms", (json_int_t)1);
}

START_TEST(owner_dead_only_when_provable)
{
	json_t *o;
	/* Same host: the process is gone -> dead. */
	o = owner("h/b/netns:1", 200, 77);
	ck_assert_int_eq(kc_scratch_owner_dead(o, "h/b/netns:1", fake_start), 1);
	json_decref(o);
	/* Same host, the pid now belongs to another process (reused) -> dead. */
	o = owner("h/b/netns:1", 100, 499);
	ck_assert_int_eq(kc_scratch_owner_dead(o, "h/b/netns:1", fake_start), 1);
	json_decref(o);
	/* Same host, that very process -> live. */
	o = owner("h/b/netns:1", 100, 500);
	ck_assert_int_eq(kc_scratch_owner_dead(o, "h/b/netns:1", fake_start), 0);
	json_decref(o);
	/* Same host, start unknown when written, pid alive -> not provable. */
	o = owner("h/b/netns:1", 100, 0);
	ck_assert_int_eq(kc_scratch_owner_dead(o, "h/b/netns:1", fake_start), 0);
	json_decref(o);
	/* Another host (or another network namespace): never provable here,
	 * even when the pid is free on this host. */
	o = owner("h/b/netns:2", 200, 77);
	ck_assert_int_eq(kc_scratch_owner_dead(o, "h/b/netns:1", fake_start), 0);
	json_decref(o);
	/* Not an owner record. */
	o = json_pack("{s:s,s:i}", "host_id", "h/b/netns:1", "pid", 200);
	ck_assert_int_eq(kc_scratch_owner_dead(o, "h/b/netns:1", fake_start), -EINVAL);
	json_decref(o);
	o = owner("h/b/netns:1", -5, 1);
	ck_assert_int_eq(kc_scratch_owner_dead(o, "h/b/netns:1", fake_start), -EINVAL);
	json_decref(o);
	ck_assert_int_eq(kc_scratch_owner_dead(NULL, "h", fake_start), -EINVAL);
	/* This process's own record: alive, with its real start time. */
	o = kc_scratch_owner_self();
	char me[400];
	kc_host_id(me, sizeof(me));
	ck_assert_int_eq(kc_scratch_owner_dead(o, me, kc_pid_start), 0);
	ck_assert_uint_gt(kc_pid_start((long)getpid()), 0);
	json_decref(o);
}
END_TEST

/* The record survives its trip through a directory name. */
START_TEST(owner_name_round_trip)
{
	json_t *o = owner("node-1/3f2a9c1e/netns:4026531840", 4242, 81234567);
	char nm[300];
	ck_assert_int_eq(kc_scratch_owner_name(o, nm, sizeof(nm)), 0);
	/* only [A-Za-z0-9._-] stays as is: SMB refuses ':' and '|', smbnetfs
	 * decodes %XX */
	ck_assert_str_eq(nm, "owner,4242,81234567,1,node-1=2F3f2a9c1e=2Fnetns=3A4026531840");
	json_t *back = kc_scratch_owner_parse(nm);
	ck_assert_ptr_nonnull(back);
	ck_assert_int_eq(json_equal(o, back), 1);
	json_decref(back);
	ck_assert_int_eq(kc_scratch_owner_name(o, nm, 10), -ENAMETOOLONG);
	/* a record written before the =XX form ('/' as '|') still reads */
	back = kc_scratch_owner_parse("owner,4242,81234567,1,node-1|3f2a9c1e|netns:4026531840");
	ck_assert_ptr_nonnull(back);
	ck_assert_int_eq(json_equal(o, back), 1);
	json_decref(back);
	json_decref(o);
	const char *bad[] = {"owner.json", "owner,", "owner,1,2,3", "owner,1,2,3,", "owner,x,2,3,h",
			     "owner,1,2,,h", "rename", "owner,1,2,3,h=", "owner,1,2,3,h=4",
			     "owner,1,2,3,h=zz", "owner,1,2,3,h=00", NULL};
	for (int i = 0; bad[i]; i++)
		ck_assert_msg(kc_scratch_owner_parse(bad[i]) == NULL, "parsed '%s'", bad[i]);
	/* whatever the host id holds comes back, and the name has only
	 * characters every volume stores */
	o = owner("a,b|c%d=e e:f\\g*?\"<>", 1, 1);
	ck_assert_int_eq(kc_scratch_owner_name(o, nm, sizeof(nm)), 0);
	for (const char *c = nm; *c; c++)
		ck_assert_msg(strchr(":|\\*?\"<> /%", *c) == NULL, "'%c' in %s", *c, nm);
	back = kc_scratch_owner_parse(nm);
	ck_assert_ptr_nonnull(back);
	ck_assert_int_eq(json_equal(o, back), 1);
	json_decref(back);
	json_decref(o);
	o = owner("", 1, 1);
	ck_assert_int_eq(kc_scratch_owner_name(o, nm, sizeof(nm)), -EINVAL);
	json_decref(o);
}
END_TEST

START_TEST(durations_parse_and_reject)
{
	int64_t ms = -1;
	ck_assert_int_eq(kc_parse_duration_ms("90", &ms), 0);
	ck_assert_int_eq(ms, 90000);
	ck_assert_int_eq(kc_parse_duration_ms("15m", &ms), 0);
	ck_assert_int_eq(ms, 15 * 60000);
	ck_assert_int_eq(kc_parse_duration_ms("2h", &ms), 0);
	ck_assert_int_eq(ms, 2 * 3600000);
	ck_assert_int_eq(kc_parse_duration_ms("3d", &ms), 0);
	ck_assert_int_eq(ms, 3LL * 86400000);
	ck_assert_int_eq(kc_parse_duration_ms("0", &ms), 0);
	ck_assert_int_eq(ms, 0);
	const char *bad[] = {"", "-1", "1x", "1hh", "h", "99999999999999999999d", " 5", NULL};
	for (int i = 0; bad[i]; i++)
		ck_assert_msg(kc_parse_duration_ms(bad[i], &ms) == -EINVAL, "accepted '%s'", bad[i]);
	ck_assert_int_eq(kc_parse_duration_ms(NULL, &ms), -EINVAL);
}
END_TEST

START_TEST(rcopy_probe_fits_the_volume)
{
	const int64_t M = 1 << 20;
	ck_assert_int_eq(kc_rcopy_big_bytes(100LL << 30), 64 * M);
	ck_assert_int_eq(kc_rcopy_big_bytes(256 * M), 64 * M);
	ck_assert_int_eq(kc_rcopy_big_bytes(256 * M - 1), 32 * M);
	ck_assert_int_eq(kc_rcopy_big_bytes(40 * M), 8 * M);
	ck_assert_int_eq(kc_rcopy_big_bytes(4 * M), 1 * M);
	ck_assert_int_eq(kc_rcopy_big_bytes(4 * M - 1), 0);
	ck_assert_int_eq(kc_rcopy_big_bytes(0), 0);
	/* Always a quarter of the free space or less. */
	for (int64_t a = 4 * M; a < 300 * M; a += 7 * M + 12345)
		ck_assert_int_le(kc_rcopy_big_bytes(a) * 4, a);
	/* What statvfs says about free space: nothing at 0 blocks (ceph-fuse
	 * without a manager reports 0 of 0) or beyond 2^63; a full volume
	 * with accounting is 0 free, not unknown. */
	ck_assert_int_eq(kc_free_bytes(0, 0, 4 << 20), -1);
	ck_assert_int_eq(kc_free_bytes(0, 5, 4096), -1);
	ck_assert_int_eq(kc_free_bytes(100, 0, 4096), 0);
	ck_assert_int_eq(kc_free_bytes(100, 7, 4096), 7 * 4096);
	ck_assert_int_eq(kc_free_bytes(100, 7, 0), -1);
	ck_assert_int_eq(kc_free_bytes(UINT64_MAX, UINT64_MAX, 4096), -1);
	ck_assert_int_eq(kc_free_bytes(1, (uint64_t)INT64_MAX / 4096, 4096), (int64_t)((uint64_t)INT64_MAX / 4096 * 4096));
}
END_TEST

/* The sweep on a real directory: a dead run of this host is removed, a live
 * one (this process) and another host's are kept; older-than 0 removes all
 * but the live one. */
START_TEST(sweep_removes_only_the_provably_dead)
{
	sub_vfs *v = scratch_vol.vfs;
	char me[400], doc[800];
	kc_host_id(me, sizeof(me));
	const char *names[] = {"~kaas-conform-dead", "~kaas-conform-live", "~kaas-conform-away",
			       "~kaas-conform-bare", "not-ours"};
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(sub_mkdir(v, names[i], 0755), 0);
	/* pid 0x7ffffff0 is beyond pid_max: gone. */
	char nm[300], path[400];
	json_t *o = owner(me, 2147483632, 3);
	ck_assert_int_eq(kc_scratch_owner_name(o, nm, sizeof(nm)), 0);
	json_decref(o);
	snprintf(path, sizeof(path), "~kaas-conform-dead/%s", nm);
	ck_assert_int_eq(sub_mkdir(v, path, 0755), 0);
	json_t *self = kc_scratch_owner_self();
	ck_assert_int_eq(kc_scratch_owner_name(self, nm, sizeof(nm)), 0);
	json_decref(self);
	snprintf(path, sizeof(path), "~kaas-conform-live/%s", nm);
	ck_assert_int_eq(sub_mkdir(v, path, 0755), 0);
	o = owner("elsewhere/12345678/netns:9", 2147483632, 3);
	ck_assert_int_eq(kc_scratch_owner_name(o, nm, sizeof(nm)), 0);
	json_decref(o);
	snprintf(path, sizeof(path), "~kaas-conform-away/%s", nm);
	ck_assert_int_eq(sub_mkdir(v, path, 0755), 0);
	(void)doc;
	json_t *list = json_array();
	ck_assert_int_eq(kc_scratch_sweep(v, NULL, 1, -1, list, NULL), 0);
	ck_assert_uint_eq(json_array_size(list), 4);
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(v, "~kaas-conform-dead", &st), -ENOENT);
	ck_assert_int_eq(sub_stat_path(v, "~kaas-conform-live", &st), 0);
	ck_assert_int_eq(sub_stat_path(v, "~kaas-conform-away", &st), 0);
	ck_assert_int_eq(sub_stat_path(v, "~kaas-conform-bare", &st), 0);
	json_decref(list);
	/* `clean` (older-than 0): everything but the live run. */
	ck_assert_int_eq(kc_scratch_sweep(v, NULL, 1, 0, NULL, NULL), 0);
	ck_assert_int_eq(sub_stat_path(v, "~kaas-conform-live", &st), 0);
	ck_assert_int_eq(sub_stat_path(v, "~kaas-conform-away", &st), -ENOENT);
	ck_assert_int_eq(sub_stat_path(v, "~kaas-conform-bare", &st), -ENOENT);
	ck_assert_int_eq(sub_stat_path(v, "not-ours", &st), 0);
}
END_TEST

static kc_verdict judge(const char *counts_json, char *sum, size_t len)
{
	json_t *c = json_loads(counts_json, 0, NULL);
	ck_assert_ptr_nonnull(c);
	kc_verdict v = kc_judge_enospc(c, sum, len);
	json_decref(c);
	return v;
}

START_TEST(enospc_judge_and_size)
{
	char sum[512];
	ck_assert_int_eq(judge("{\"surfaced_at_write\":1,\"filled_bytes\":16777216,\"acked_bytes\":15728640}",
			       sum, sizeof(sum)), KC_PASS);
	ck_assert_ptr_nonnull(strstr(sum, "reported at write"));
	ck_assert_int_eq(judge("{\"surfaced_at_fsync\":1,\"acked_bytes\":1}", sum, sizeof(sum)), KC_PASS);
	ck_assert_ptr_nonnull(strstr(sum, "reported at fsync"));
	ck_assert_int_eq(judge("{\"deferred_to_close\":1}", sum, sizeof(sum)), KC_FAIL);
	ck_assert_ptr_nonnull(strstr(sum, "close only"));
	ck_assert_int_eq(judge("{\"surfaced_at_write\":1,\"acked_lost\":4096}", sum, sizeof(sum)), KC_FAIL);
	ck_assert_ptr_nonnull(strstr(sum, "4096 bytes reported written and fsynced do not read back"));
	ck_assert_int_eq(judge("{\"surfaced_at_fsync\":1,\"small_lost\":1}", sum, sizeof(sum)), KC_FAIL);
	int64_t b = 0;
	char err[256];
	ck_assert_int_eq(kc_parse_size("--enospc", "64m", &b, err, sizeof(err)), 0);
	ck_assert_int_eq(b, 64LL << 20);
	ck_assert_int_eq(kc_parse_size("--enospc", "512K", &b, err, sizeof(err)), 0);
	ck_assert_int_eq(b, 512LL << 10);
	ck_assert_int_eq(kc_parse_size("--enospc", "2g", &b, err, sizeof(err)), 0);
	ck_assert_int_eq(b, 2LL << 30);
	ck_assert_int_eq(kc_parse_size("--enospc", "4096", &b, err, sizeof(err)), 0);
	ck_assert_int_eq(b, 4096);
	const char *bad[] = {"", "m", "0", "-1m", "1.5m", "1mb", " 1m", "0x10", "99999999999g", NULL};
	for (int i = 0; bad[i]; i++)
		ck_assert_msg(kc_parse_size("--enospc", bad[i], &b, err, sizeof(err)) == -EINVAL,
			      "accepted '%s'", bad[i]);
	ck_assert_ptr_nonnull(strstr(err, "--enospc"));
	/* The option turns the check on; the check alone needs the limit. */
	kc_opts o;
	char *a1[] = {"check", "/x", "--enospc", "16m", NULL};
	ck_assert_int_eq(kc_opts_parse_check(4, a1, &o, err, sizeof(err)), 0);
	ck_assert_uint_ne(o.checks & (1u << KC_CHK_ENOSPC), 0);
	ck_assert_int_eq(o.enospc_limit, 16LL << 20);
	char *a2[] = {"check", "/x", "--checks", "enospc", NULL};
	ck_assert_int_eq(kc_opts_parse_check(4, a2, &o, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "give --enospc SIZE"));
	char *a3[] = {"check", "/x", NULL};
	ck_assert_int_eq(kc_opts_parse_check(2, a3, &o, err, sizeof(err)), 0);
	ck_assert_uint_eq(o.checks & (1u << KC_CHK_ENOSPC), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("scratch");
	const struct ktest pure = { .tcase = "pure" };
	ktest_add(s, pure, KTEST_LIST(owner_dead_only_when_provable, owner_name_round_trip, durations_parse_and_reject,
				      rcopy_probe_fits_the_volume, enospc_judge_and_size));
	const struct ktest files = { .tcase = "files", .setup = scratch_setup, .teardown = scratch_teardown };
	ktest_add(s, files, KTEST_LIST(sweep_removes_only_the_provably_dead));
	return ktest_run(s);
}
