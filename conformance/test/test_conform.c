/*
 * test_conform.c — the pure parts of kaas-conform: verdict ordering and exit
 * codes, the per-check judges and the overall aggregation, option parsing,
 * payload and pattern classification, preflight classification, the result
 * store, and the shape of the JSON report and JUnit file.
 * Length: one program for the checks' judges and reports: the tests share
 * the synthetic observation builders above them.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance/actor.h"
#include "conformance/judge.h"
#include "conformance/kc.h"
#include "conformance/opts.h"
#include "conformance/payload.h"
#include "conformance/preflight.h"
#include "conformance/result.h"
#include "conformance/run.h"
#include "util/test/ktest.h"

START_TEST(verdicts_order_and_exit_codes)
{
	kc_verdict v;
	ck_assert_int_eq(kc_verdict_worst(KC_PASS, KC_WARN), KC_WARN);
	/* Unproven durability outranks PASS, a warning outranks it. */
	ck_assert_int_eq(kc_verdict_worst(KC_PASS, KC_UNPROVEN), KC_UNPROVEN);
	ck_assert_int_eq(kc_verdict_worst(KC_UNPROVEN, KC_WARN), KC_WARN);
	ck_assert_int_eq(kc_verdict_exit_code(KC_UNPROVEN), 0);
	ck_assert_str_eq(kc_verdict_name(KC_UNPROVEN), "UNPROVEN");
	ck_assert_int_eq(kc_verdict_worst(KC_REFUSED, KC_WARN), KC_REFUSED);
	ck_assert_int_eq(kc_verdict_worst(KC_REFUSED, KC_FAIL), KC_FAIL);
	ck_assert_int_eq(kc_verdict_worst(KC_ERROR, KC_FAIL), KC_ERROR);
	ck_assert_int_eq(kc_verdict_exit_code(KC_PASS), 0);
	ck_assert_int_eq(kc_verdict_exit_code(KC_WARN), 0);
	ck_assert_int_eq(kc_verdict_exit_code(KC_FAIL), 1);
	ck_assert_int_eq(kc_verdict_exit_code(KC_ERROR), 2);
	ck_assert_int_eq(kc_verdict_exit_code(KC_REFUSED), 3);
	for (int i = KC_PASS; i <= KC_ERROR; i++) {
		ck_assert_int_eq(kc_verdict_parse(kc_verdict_name((kc_verdict)i), &v), 0);
		ck_assert_int_eq(v, i);
	}
	ck_assert_int_eq(kc_verdict_parse("pass", &v), -EINVAL);
	ck_assert_int_eq(kc_check_lookup("unlink-open"), KC_CHK_UNLINK);
	ck_assert_int_eq(kc_check_lookup("unlink"), -1);
	ck_assert_str_eq(kc_errname(-ENOENT), "ENOENT");
	ck_assert_str_eq(kc_errname(0), "OK");
}
END_TEST

static json_t *counts(const char *spec)
{
	/* "key=n key=n ..." */
	json_t *c = json_object();
	char buf[1024];
	snprintf(buf, sizeof(buf), "%s", spec);
	char *save = NULL;
	for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(t, '=');
		*eq = '\0';
		json_object_set_new(c, t, json_integer(atoll(eq + 1)));
	}
	return c;
}

#define JUDGE(fn, spec, want, needle)                                                     \
	do {                                                                              \
		char s_[768];                                                             \
		json_t *c_ = counts(spec);                                                \
		ck_assert_int_eq(fn(c_, s_, sizeof(s_)), want);                           \
		ck_assert_msg(strstr(s_, needle) != NULL, "summary '%s' lacks '%s'", s_, needle); \
		json_decref(c_);                                                          \
	} while (0)

/* What every variant needs to be conclusive, so that a single counter added
 * to it decides the verdict. */
#define RENAME_OK "plain.ok=50 held.ok=40 dir.complete=30 dir.listings=30 "
#define CTO_OK "same.reads=10 same.ok=10 grow.reads=10 grow.ok=10 renamed.reads=10 renamed.ok=10 "

/* Every counter documented as a violation fails its check on its own, in
 * every variant: a key dropped from a judge's list would pass silently. */
START_TEST(judges_fail_on_every_violation_counter)
{
	static const char *const file_keys[] = {"not_converged", "missing", "read_enoent",
						"empty", "short", "long", "torn", "backwards",
						"errors", "write_errors", "rename_errors",
						"hold_errors"};
	static const char *const dir_keys[] = {"not_converged", "partial", "errors",
					       "rename_errors"};
	static const char *const excl_keys[] = {"multi_winner", "no_winner", "loser_eperm",
						"loser_other", "content_mismatch",
						"winner_write_errors", "loser_own_content"};
	static const char *const cto_keys[] = {"stale", "short", "long", "torn", "empty",
					       "missing", "future", "errors", "write_errors",
					       "not_converged"};
	static const char *const rcopy_keys[] = {"inode_changed", "time_grows", "old_fd_broken",
						 "content_mismatch", "rename_errors"};
	static const char *const unlink_keys[] = {"rmdir_after_close_failed", "space_not_freed",
						  "hidden_after_close"};
	static const char *const fsync_keys[] = {"interposed_actors", "crash_lost"};
	char spec[512], key[128];
	for (int v = 0; v < 2; v++) {
		const char *var = v ? "held" : "plain";
		for (size_t i = 0; i < sizeof(file_keys) / sizeof(file_keys[0]); i++) {
			snprintf(spec, sizeof(spec), RENAME_OK "%s.%s=1", var, file_keys[i]);
			snprintf(key, sizeof(key), "%s %s 1", var, file_keys[i]);
			JUDGE(kc_judge_rename, spec, KC_FAIL, key);
		}
	}
	for (size_t i = 0; i < sizeof(dir_keys) / sizeof(dir_keys[0]); i++) {
		snprintf(spec, sizeof(spec), RENAME_OK "dir.%s=2", dir_keys[i]);
		snprintf(key, sizeof(key), "dir %s 2", dir_keys[i]);
		JUDGE(kc_judge_rename, spec, KC_FAIL, key);
	}
	for (size_t i = 0; i < sizeof(excl_keys) / sizeof(excl_keys[0]); i++) {
		snprintf(spec, sizeof(spec), "rounds=10 racers=3 one_winner=10 loser_eexist=19 %s=1",
			 excl_keys[i]);
		snprintf(key, sizeof(key), "%s 1", excl_keys[i]);
		JUDGE(kc_judge_excl, spec, KC_FAIL, key);
	}
	for (int v = 0; v < 3; v++) {
		const char *var = v == 2 ? "renamed" : v ? "grow" : "same";
		for (size_t i = 0; i < sizeof(cto_keys) / sizeof(cto_keys[0]); i++) {
			snprintf(spec, sizeof(spec), CTO_OK "%s.%s=1", var, cto_keys[i]);
			snprintf(key, sizeof(key), "%s %s 1", var, cto_keys[i]);
			JUDGE(kc_judge_cto, spec, KC_FAIL, key);
		}
	}
	for (size_t i = 0; i < sizeof(rcopy_keys) / sizeof(rcopy_keys[0]); i++) {
		snprintf(spec, sizeof(spec), "ratio_x100=100 %s=1", rcopy_keys[i]);
		JUDGE(kc_judge_rcopy, spec, KC_FAIL, "");
	}
	for (size_t i = 0; i < sizeof(unlink_keys) / sizeof(unlink_keys[0]); i++) {
		snprintf(spec, sizeof(spec), "hidden_while_open=1 %s=1", unlink_keys[i]);
		JUDGE(kc_judge_unlink, spec, KC_FAIL, "after the holder closed");
	}
	for (size_t i = 0; i < sizeof(fsync_keys) / sizeof(fsync_keys[0]); i++) {
		snprintf(spec, sizeof(spec), "raw_fsync_ns=200000 open_ns=3000 crash_bytes=100 %s=1",
			 fsync_keys[i]);
		JUDGE(kc_judge_fsync, spec, KC_FAIL, "");
	}
}
END_TEST

START_TEST(judges_decide_from_counts)
{
	JUDGE(kc_judge_rename, "plain.renames=10 plain.reads=50 " RENAME_OK, KC_PASS, "none missing");
	JUDGE(kc_judge_rename, RENAME_OK "held.missing=3", KC_FAIL, "held missing 3");
	JUDGE(kc_judge_rename, RENAME_OK "dir.partial=2", KC_FAIL, "dir partial 2");
	JUDGE(kc_judge_rename, RENAME_OK "plain.backwards=1", KC_FAIL, "plain backwards 1");
	/* ESTALE is retried and reported, never a violation. */
	JUDGE(kc_judge_rename, RENAME_OK "plain.estale_open=7", KC_PASS, "ESTALE retried 7");
	/* A variant that verified nothing leaves the check inconclusive, even
	 * when the others verified plenty. */
	JUDGE(kc_judge_rename, "held.ok=40 dir.complete=30 plain.reads=9 plain.estale_open=9",
	      KC_WARN, "inconclusive");
	JUDGE(kc_judge_rename, "held.ok=40 dir.complete=30 plain.reads=9 plain.estale_open=9",
	      KC_WARN, "ESTALE retried 9");
	JUDGE(kc_judge_rename, "plain.ok=50 dir.complete=30", KC_WARN, "held");
	JUDGE(kc_judge_rename, "plain.ok=50 held.ok=40 dir.absent=60 dir.neither_present=30", KC_WARN,
	      "dir");
	/* Sampling artefacts of the directory variant do not count. */
	JUDGE(kc_judge_rename, RENAME_OK "dir.both_present=4 dir.neither_present=3", KC_PASS, "none");

	JUDGE(kc_judge_excl, "rounds=10 racers=3 one_winner=10 loser_eexist=20", KC_PASS,
	      "exactly one winner");
	JUDGE(kc_judge_excl, "rounds=10 racers=3 one_winner=9 multi_winner=1", KC_FAIL,
	      "multi_winner 1");
	JUDGE(kc_judge_excl, "rounds=10 racers=3 one_winner=10 loser_eperm=20", KC_FAIL,
	      "loser_eperm 20");
	JUDGE(kc_judge_excl, "rounds=0", KC_WARN, "inconclusive");

	JUDGE(kc_judge_cto, CTO_OK, KC_PASS, "every open saw the new version");
	/* Both kinds of rewrite must have been read back. */
	JUDGE(kc_judge_cto, "same.reads=10 same.ok=10 renamed.reads=10", KC_WARN, "grow");
	JUDGE(kc_judge_cto, "grow.reads=10 grow.ok=10 renamed.reads=10", KC_WARN, "same");
	JUDGE(kc_judge_cto, "same.reads=10 grow.reads=10", KC_WARN, "renamed-over");
	JUDGE(kc_judge_cto, "same.reads=10 same.ok=10 grow.reads=10 grow.ok=7 grow.short=3",
	      KC_FAIL, "grow short 3");
	JUDGE(kc_judge_cto, "same.reads=10 same.stale=10", KC_FAIL, "same stale 10");

	JUDGE(kc_judge_unlink, "hidden_while_open=1", KC_PASS, "silly-renamed");
	JUDGE(kc_judge_unlink, "space_unknown=1", KC_PASS, "space accounting unavailable");
	JUDGE(kc_judge_unlink, "space_not_freed=1", KC_FAIL, "space was not freed");
	JUDGE(kc_judge_unlink, "rmdir_after_close_failed=1 hidden_after_close=1", KC_FAIL,
	      "could not be removed");

	/* Without a power-loss hook a clean read-back is not a proof. */
	JUDGE(kc_judge_fsync, "raw_fsync_ns=200000 open_ns=3000 crash_bytes=100", KC_UNPROVEN,
	      "fsync not disproven: no power-loss hook; 100 bytes survived the writer's kill");
	JUDGE(kc_judge_fsync, "raw_fsync_ns=200000 crash_bytes=100 crash_cmd=1", KC_UNPROVEN,
	      "a crash of the server side (--crash-cmd)");
	JUDGE(kc_judge_fsync, "raw_fsync_ns=200000 crash_bytes=100 crash_cmd=1 power_loss_cmd=1",
	      KC_PASS, "survived a power loss");
	JUDGE(kc_judge_fsync, "crash_lost=1 crash_bytes=100 crash_bytes_lost=7 crash_cmd=1 power_loss_cmd=1",
	      KC_FAIL, "7 of 100 bytes lost");
	JUDGE(kc_judge_fsync, "fast_fsync=1 raw_fsync_ns=1000 round_trip_ns=5000", KC_WARN,
	      "fsync not disproven: no power-loss hook");
	JUDGE(kc_judge_fsync, "interposed_actors=2", KC_FAIL, "interposed");
	JUDGE(kc_judge_fsync, "crash_lost=1 crash_bytes=100 crash_bytes_lost=100", KC_FAIL,
	      "100 of 100 bytes lost");
	JUDGE(kc_judge_fsync, "fast_fsync=1 raw_fsync_ns=1000 open_ns=5000", KC_WARN, "suspicious");
	JUDGE(kc_judge_fsync, "libc_faster=1 raw_fsync_ns=300000 libc_fsync_ns=700", KC_WARN,
	      "libc fsync");

	JUDGE(kc_judge_perf, "fsync_p99_us=4000 target_fsync_p99_us=10000 mibps_1m_x100=5000", KC_PASS,
	      "fsync p99 4.00 ms (target 10.00 ms)");
	JUDGE(kc_judge_perf, "fsync_p99_us=12000 target_fsync_p99_us=10000", KC_WARN,
	      "fsync misses its target");
	JUDGE(kc_judge_perf, "fsync_p99_us=12000 target_fsync_p99_us=10000 strict=1", KC_FAIL,
	      "fsync misses");
	JUDGE(kc_judge_perf, "fsync_p99_us=1 target_fsync_p99_us=10000 mibps_1m_x100=100 target_mibps_x100=200",
	      KC_WARN, "throughput misses its target");

	JUDGE(kc_judge_rcopy, "ratio_x100=104", KC_PASS, "ratio 1.04");
	JUDGE(kc_judge_rcopy, "ratio_x100=8000 time_grows=1", KC_FAIL, "80.00x");
	JUDGE(kc_judge_rcopy, "inode_changed=1", KC_FAIL, "inode changed");
	JUDGE(kc_judge_rcopy, "old_fd_broken=1", KC_FAIL, "descriptor");
}
END_TEST

/* fsync's timing warning, fed with what real substrates measured (a fake
 * timing source): the reference must be one round trip for the client at
 * hand, so honest substrates pass and a no-op fsync is still suspicious. */
START_TEST(fsync_timing_reference)
{
	int64_t ref;
	const char *kind;
	/* tmpfs: fsync does nothing (0.19 us median); the fstat of the open
	 * file (0.48 us) and a lookup of a new name (1.75 us) are system calls
	 * without I/O, still more than a no-op fsync (under load too: 2.1x). */
	ck_assert_int_eq(kc_fsync_too_fast(190, 1750, 480, &ref, &kind), 1);
	ck_assert_int_eq(ref, 480);
	ck_assert_str_eq(kind, "getattr");
	/* smbnetfs: fsync stays in the FUSE daemon (3 us), a lookup and an
	 * uncached getattr ask the SMB server. */
	ck_assert_int_eq(kc_fsync_too_fast(3000, 325000, 150000, &ref, &kind), 1);
	/* ext4 on a local disk. */
	ck_assert_int_eq(kc_fsync_too_fast(221528, 1693, 751, &ref, &kind), 0);
	/* GlusterFS, FUSE with caches off, as measured here: opening a file
	 * (1.2-1.3 ms, a lookup, an open and a getattr) and even the lookup of
	 * a new name (0.67-0.83 ms) are several requests to the brick; the
	 * getattr of the open file is one (86-107 us), and fsync (0.40-0.58 ms)
	 * one plus the brick's disk.  Against the open it warned every time. */
	ck_assert_int_eq(kc_fsync_too_fast(398802, 826897, 97375, &ref, &kind), 0);
	ck_assert_int_eq(ref, 97375);
	ck_assert_int_eq(kc_fsync_too_fast(398802, 1302183, -1, &ref, &kind), 1);
	/* A kernel client that answers from its caches: a small reference
	 * never makes fsync suspicious. */
	ck_assert_int_eq(kc_fsync_too_fast(500000, 2000, 1000, &ref, &kind), 0);
	/* libnfs: a path costs one LOOKUP per component (3 here), the GETATTR
	 * of the open file one round trip.  A server whose COMMIT is fast
	 * (stable storage with power-loss protection) is not suspicious ... */
	ck_assert_int_eq(kc_fsync_too_fast(250000, 700000, 120000, &ref, &kind), 0);
	ck_assert_int_eq(ref, 120000);
	ck_assert_str_eq(kind, "getattr");
	/* ... one that answers COMMIT in less than a round trip is. */
	ck_assert_int_eq(kc_fsync_too_fast(20000, 700000, 120000, &ref, &kind), 1);
	/* Only a lookup measured. */
	ck_assert_int_eq(kc_fsync_too_fast(100, 1750, -1, &ref, &kind), 1);
	ck_assert_str_eq(kind, "lookup");
	/* Nothing measured: no verdict from timing. */
	ck_assert_int_eq(kc_fsync_too_fast(100, -1, -1, &ref, &kind), 0);
	ck_assert_int_eq(ref, -1);
	ck_assert_str_eq(kind, "none");
	ck_assert_int_eq(kc_fsync_too_fast(-1, 5000, 4000, &ref, &kind), 0);

	JUDGE(kc_judge_fsync, "fast_fsync=1 raw_fsync_ns=190 round_trip_ns=480", KC_WARN,
	      "faster than one round trip to the filesystem (0.5 us)");
	JUDGE(kc_judge_fsync, "raw_fsync_ns=398802 round_trip_ns=97375 crash_bytes=100", KC_UNPROVEN,
	      "fsync 398.8 us vs one round trip 97.4 us");
}
END_TEST

/* unlink-open's space rule, fed with statvfs samples as a busy volume
 * shows them (a fake timing source): F = the file's size; samples while
 * held and linked, held and deleted, then after the close. */
START_TEST(space_freed_despite_other_writers)
{
	const int64_t G = 100LL << 30, M = 1LL << 20, F = 32 * M;
	int64_t rise;
	/* Another process writes 30 MiB while the file is held and 1 MiB more
	 * after the close: free space never gets back to the level it had with
	 * the file held and linked, but it rose by the file's size at the
	 * close.  (Judged against the linked level, this failed under load.) */
	int64_t busy[] = {G, G - 20 * M, G - 30 * M, G - 30 * M + F - M};
	ck_assert_int_eq(kc_space_freed(busy, 4, 1, 3, F, &rise), 1);
	ck_assert_int_eq(rise, F - M);
	/* A server without open state frees at the unlink (NFSv3). */
	int64_t v3[] = {G, G + F, G + F, G + F};
	ck_assert_int_eq(kc_space_freed(v3, 4, 1, 3, F, &rise), 1);
	ck_assert_int_eq(rise, F);
	/* A free that takes a while (a lazy server): seen in a later sample. */
	int64_t lazy[] = {G, G, G, G - M, G - 2 * M, G - 2 * M + F};
	ck_assert_int_eq(kc_space_freed(lazy, 6, 1, 3, F, &rise), 1);
	/* A free that came 100 ms after the close (FUSE releases after
	 * close(2) returns) while another process wrote 40 MiB: the level
	 * never gets 16 MiB above the one before the close, but neighbouring
	 * samples jump by the file's size. */
	int64_t late[] = {G, G, G, G - 10 * M, G - 20 * M, G - 20 * M + F, G - 40 * M + F};
	ck_assert_int_eq(kc_space_freed(late, 7, 1, 3, F, &rise), 1);
	ck_assert_int_eq(rise, F);
	/* A holder that never let go (fault leak=): nothing rises. */
	int64_t leak[] = {G, G, G - M, G - M, G - M, G - 2 * M};
	ck_assert_int_eq(kc_space_freed(leak, 6, 1, 3, F, &rise), 0);
	ck_assert_int_eq(rise, 0);
	/* Rises are measured from the level before the event, or between
	 * neighbours by at most twice the file: 100 MiB that others take and
	 * give back are not the file's. */
	int64_t dip[] = {G, G, G - 100 * M, G + 5 * M};
	ck_assert_int_eq(kc_space_freed(dip, 4, 1, 2, F, &rise), 0);
	ck_assert_int_eq(rise, 5 * M);
	/* A small rise (another writer deleting a temp file) is not enough. */
	int64_t small[] = {G, G, G + F / 2 - 1};
	ck_assert_int_eq(kc_space_freed(small, 3, 1, 2, F, &rise), 0);
	/* Failed samples are skipped; none at all measures nothing. */
	int64_t gaps[] = {G, -1, -1, G + F};
	ck_assert_int_eq(kc_space_freed(gaps, 4, 1, 3, F, &rise), 1);
	int64_t none[] = {-1, -1, -1};
	ck_assert_int_eq(kc_space_freed(none, 3, 1, 2, F, &rise), 0);
	ck_assert_int_eq(rise, -1);
}
END_TEST

START_TEST(overall_verdict_and_reproduce_hint)
{
	kc_result r[KC_NCHECKS];
	for (int i = 0; i < KC_NCHECKS; i++) {
		kc_result_init(&r[i], i);
		r[i].ran = 1;
	}
	ck_assert_int_eq(kc_judge_overall(r, KC_NCHECKS), KC_PASS);
	r[KC_CHK_PREFLIGHT].verdict = KC_REFUSED;
	ck_assert_int_eq(kc_judge_overall(r, KC_NCHECKS), KC_REFUSED);
	/* Behaviour decides: a failing guarantee outranks a refused identity. */
	kc_result_count(&r[KC_CHK_EXCL], "rounds", 5);
	kc_result_count(&r[KC_CHK_EXCL], "multi_winner", 1);
	kc_judge_result(&r[KC_CHK_EXCL], 42);
	ck_assert_int_eq(r[KC_CHK_EXCL].verdict, KC_FAIL);
	ck_assert_str_eq(r[KC_CHK_EXCL].reproduce, "--seed 42 --checks excl");
	ck_assert_int_eq(kc_judge_overall(r, KC_NCHECKS), KC_FAIL);
	/* A check that did not run does not count. */
	r[KC_CHK_EXCL].ran = 0;
	ck_assert_int_eq(kc_judge_overall(r, KC_NCHECKS), KC_REFUSED);
	kc_result_error(&r[KC_CHK_CTO], "actor 2 died");
	kc_judge_result(&r[KC_CHK_CTO], 42);
	ck_assert_int_eq(r[KC_CHK_CTO].verdict, KC_ERROR);
	ck_assert_int_eq(kc_judge_overall(r, KC_NCHECKS), KC_ERROR);
	/* The preflight verdict is the identity's, never re-judged. */
	kc_judge_result(&r[KC_CHK_PREFLIGHT], 42);
	ck_assert_int_eq(r[KC_CHK_PREFLIGHT].verdict, KC_REFUSED);
	for (int i = 0; i < KC_NCHECKS; i++)
		kc_result_free(&r[i]);
}
END_TEST

START_TEST(result_store_prefixes_and_caps)
{
	kc_result r;
	kc_result_init(&r, KC_CHK_RENAME);
	json_t *c = counts("ok=3 missing=1");
	kc_result_add_counts(&r, "held", c);
	kc_result_add_counts(&r, "held", c);
	json_decref(c);
	ck_assert_int_eq(kc_result_get(&r, "held.ok"), 6);
	ck_assert_int_eq(kc_result_get(&r, "held.missing"), 2);
	ck_assert_int_eq(kc_result_get(&r, "ok"), 0);
	json_t *arr = json_array();
	for (int i = 0; i < 8; i++)
		json_array_append_new(arr, json_pack("{s:s,s:i}", "kind", "missing", "iteration", i));
	kc_result_add_anomalies(&r, "plain", arr, 100);
	kc_result_add_anomalies(&r, "held", arr, 8);
	json_decref(arr);
	ck_assert_uint_eq(json_array_size(r.anomalies), KC_REPORT_ANOMALIES);
	ck_assert_int_eq(r.anomalies_total, 108);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(r.anomalies, 9), "variant")),
			 "held");
	kc_result_free(&r);
}
END_TEST

static int parse(const char *line, kc_opts *o, char *err, size_t errlen)
{
	static char buf[2048];
	static char *argv[64];
	int argc = 0;
	snprintf(buf, sizeof(buf), "%s", line);
	char *save = NULL;
	for (char *t = strtok_r(buf, " ", &save); t && argc < 63; t = strtok_r(NULL, " ", &save))
		argv[argc++] = t;
	argv[argc] = NULL;
	return kc_opts_parse_check(argc, argv, o, err, errlen);
}

#define BAD(line, needle)                                                                \
	do {                                                                             \
		char e_[512] = "";                                                       \
		kc_opts o_;                                                              \
		ck_assert_int_eq(parse(line, &o_, e_, sizeof(e_)), -EINVAL);             \
		ck_assert_msg(strstr(e_, needle) != NULL, "error '%s' lacks '%s'", e_, needle); \
		ck_assert_ptr_null(strchr(e_, '\n'));                                    \
	} while (0)

/* Class 3: the verdict is per reader.  One reader stuck on the first
 * version among readers that are current fails the check, however many
 * versions the others saw in total. */
START_TEST(stuck_reader_among_current_ones_fails)
{
	json_t *readers = json_pack(
		"[{s:i,s:i,s:i,s:i,s:s,s:i},{s:i,s:i,s:i,s:i,s:s,s:i},{s:i,s:i,s:i,s:i,s:s,s:i}]",
		"actor", 1, "reads", 700, "ok", 700, "versions", 300, "final_status", "ok", "final_seen", 688,
		"actor", 2, "reads", 700, "ok", 700, "versions", 1, "final_status", "stale", "final_seen", 0,
		"actor", 3, "reads", 690, "ok", 690, "versions", 280, "final_status", "ok", "final_seen", 688);
	int64_t idle = -1, min_obs = -1;
	ck_assert_int_eq(kc_judge_readers(readers, &idle, &min_obs), 1);
	ck_assert_int_eq(idle, 0);
	ck_assert_int_eq(min_obs, 690);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(readers, 1), "verdict")),
			 "not_converged");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(readers, 0), "verdict")),
			 "converged");
	json_decref(readers);
	/* What the check then counts decides the verdict, whatever the totals. */
	JUDGE(kc_judge_rename, RENAME_OK "plain.versions=581 plain.not_converged=1", KC_FAIL,
	      "plain not_converged 1");
	JUDGE(kc_judge_cto, CTO_OK "renamed.not_converged=1", KC_FAIL, "renamed not_converged 1");

	/* A reader whose final read failed otherwise (missing) has not
	 * converged either; one that verified nothing and was not caught is
	 * idle: no evidence, so the check is inconclusive, not a pass. */
	readers = json_pack("[{s:i,s:i,s:s},{s:i,s:i,s:s},{s:i,s:i}]", "reads", 5, "ok", 5,
			    "final_status", "missing", "reads", 9, "ok", 0, "final_status", "ok",
			    "reads", 3, "ok", 3);
	ck_assert_int_eq(kc_judge_readers(readers, &idle, &min_obs), 1);
	ck_assert_int_eq(idle, 2);
	ck_assert_int_eq(min_obs, 3);
	json_decref(readers);
	JUDGE(kc_judge_rename, RENAME_OK "held.readers_idle=1", KC_WARN, "readers of the held variant");
	JUDGE(kc_judge_rename, RENAME_OK "plain.readers_idle=0", KC_PASS, "every reader converged");
}
END_TEST

/* Class 4: the sample size the detection target needs, and the power of a
 * given sample: 1% caught with 99.9% takes ln(0.001)/ln(0.99) = 687.3, so
 * 688 observations, and 687 fall short. */
START_TEST(detection_power_arithmetic)
{
	ck_assert_int_eq(kc_power_needed(0.01, 0.999), 688);
	ck_assert(kc_power_of(688, 0.01) >= 0.999);
	ck_assert(kc_power_of(687, 0.01) < 0.999);
	ck_assert_int_eq(kc_power_needed(0.05, 0.99), 90);
	ck_assert(kc_power_of(90, 0.05) >= 0.99 && kc_power_of(89, 0.05) < 0.99);
	ck_assert_int_eq(kc_power_needed(0.5, 0.75), 2);
	ck_assert_int_eq(kc_power_needed(0.001, 0.999), 6905);
	ck_assert(kc_power_of(0, 0.01) == 0.0);
	ck_assert(kc_power_of(100, 0.01) > 0.633 && kc_power_of(100, 0.01) < 0.634);
	ck_assert_int_eq(kc_power_needed(0, 0.999), -1);
	ck_assert_int_eq(kc_power_needed(1, 0.999), -1);
	ck_assert_int_eq(kc_power_needed(0.01, 1), -1);
	/* The default --iterations is what the default target needs. */
	kc_opts o;
	char err[512];
	ck_assert_int_eq(parse("check /d", &o, err, sizeof(err)), 0);
	ck_assert_int_eq(o.iterations, kc_power_needed(KC_DETECT_RATE_PCT / 100, KC_DETECT_POWER_PCT / 100));
	ck_assert_int_eq(parse("check /d --detect-rate 5 --detect-power 99", &o, err, sizeof(err)), 0);
	ck_assert_int_eq(o.iterations, 90);
	ck_assert_int_eq(parse("check /d --detect-rate 5 --iterations 10", &o, err, sizeof(err)), 0);
	ck_assert_int_eq(o.iterations, 10);
	ck_assert_int_eq(parse("check /d --detect-rate 0", &o, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "--detect-rate"));
	ck_assert_int_eq(parse("check /d --detect-power 100", &o, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(parse("check /d --detect-power 9x", &o, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(parse("check /d --detect-rate 0.0001 --detect-power 99.99999", &o, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "observations"));
}
END_TEST

START_TEST(options_parse_and_reject)
{
	kc_opts o;
	char err[512];
	ck_assert_int_eq(parse("check /data", &o, err, sizeof(err)), 0);
	ck_assert_str_eq(o.url, "/data");
	ck_assert_int_eq(o.actors, KC_DEFAULT_ACTORS);
	ck_assert_int_eq(o.iterations, 688);
	ck_assert_uint_eq(o.checks, KC_DEFAULT_CHECKS);
	ck_assert_uint_eq(o.checks & (1u << KC_CHK_PERF), 0); /* perf is opt-in */
	{
		kc_opts p;
		ck_assert_int_eq(parse("check /data --perf --stamp", &p, err, sizeof(err)), 0);
		ck_assert_uint_eq(p.checks, KC_DEFAULT_CHECKS | (1u << KC_CHK_PERF));
		ck_assert_int_eq(p.perf_fsync_p99_us, 10000);
		ck_assert_int_eq(parse("check /data --checks all", &p, err, sizeof(err)), 0);
		ck_assert_uint_eq(p.checks, KC_DEFAULT_CHECKS);
	}
	ck_assert_int_eq(o.seed_set, 0);
	ck_assert_ptr_null(o.json);

	ck_assert_int_eq(parse("check nfs://h/e?version=3 --mount /m1 --mount=/m2 --actors 3 "
			       "--iterations=7 --seed 0x10 --checks rename,excl --json r.json "
			       "--junit j.xml --crash-cmd true --no-progress",
			       &o, err, sizeof(err)),
			 0);
	ck_assert_str_eq(o.url, "nfs://h/e?version=3");
	ck_assert_int_eq(o.nmounts, 2);
	ck_assert_str_eq(o.mounts[1], "/m2");
	ck_assert_int_eq(o.actors, 3);
	ck_assert_int_eq(o.iterations, 7);
	ck_assert_uint_eq(o.seed, 16);
	ck_assert_int_eq(o.seed_set, 1);
	ck_assert_uint_eq(o.checks, (1u << KC_CHK_RENAME) | (1u << KC_CHK_EXCL));
	ck_assert_str_eq(o.json, "r.json");
	ck_assert_str_eq(o.junit, "j.xml");
	ck_assert_str_eq(o.crash_cmd, "true");
	ck_assert_int_eq(o.progress, 0);

	ck_assert_int_eq(parse("check /d --stamp --cluster-dir /c --checks all", &o, err, sizeof(err)), 0);
	ck_assert_int_eq(o.stamp, 1);
	ck_assert_str_eq(o.cluster_dir, "/c");

	BAD("check /d --actors 0", "--actors");
	BAD("check /d --actors 100000", "out of range");
	BAD("check /d --actors 99999999999999999999999", "out of range");
	BAD("check /d --actors -3", "--actors");
	BAD("check /d --actors four", "not a number");
	BAD("check /d --actors", "needs a value");
	BAD("check /d --iterations 0", "--iterations");
	BAD("check /d --seed 9007199254740992", "--seed");
	BAD("check /d --checks rename,bogus", "unknown check 'bogus'");
	BAD("check /d --stamp --checks rename", "--stamp needs every check");
	BAD("check /d --cluster-dir /c", "--cluster-dir only");
	BAD("check", "missing URL");
	BAD("check /a /b", "unexpected argument '/b'");
	BAD("check /d --frobnicate", "unknown option '--frobnicate'");
	BAD("check /d --crash-cmd=", "--crash-cmd: empty command");
	BAD("check /d --json=", "--json: empty file name");
	BAD("check /d --junit=", "--junit: empty file name");
	BAD("check /d --stamp --cluster-dir=", "--cluster-dir: empty");
	BAD("check /d --mount=", "--mount: empty URL");

	kc_verify_opts v;
	char *va[] = {"stamp-verify", "/d", "--cluster-dir", "/c", NULL};
	ck_assert_int_eq(kc_opts_parse_verify(4, va, &v, err, sizeof(err)), 0);
	ck_assert_str_eq(v.url, "/d");
	ck_assert_str_eq(v.cluster_dir, "/c");
	char *vb[] = {"stamp-verify", NULL};
	ck_assert_int_eq(kc_opts_parse_verify(1, vb, &v, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(payload_classification)
{
	unsigned char buf[5000], big[6000];
	uint64_t seq = 0;
	uint32_t len = 0;
	kc_payload_fill(buf, sizeof(buf), 77, 12);
	ck_assert_int_eq(kc_payload_check(buf, sizeof(buf), 77, &seq, &len), KC_PL_OK);
	ck_assert_uint_eq(seq, 12);
	ck_assert_uint_eq(len, sizeof(buf));
	ck_assert_int_eq(kc_payload_check(buf, 0, 77, &seq, &len), KC_PL_EMPTY);
	ck_assert_int_eq(kc_payload_check(buf, 10, 77, &seq, &len), KC_PL_SHORT);
	ck_assert_int_eq(kc_payload_check(buf, 4999, 77, &seq, &len), KC_PL_SHORT);
	ck_assert_int_eq(kc_payload_check(buf, sizeof(buf), 78, &seq, &len), KC_PL_TORN);
	/* The tail of a longer, older version behind a shorter new one. */
	kc_payload_fill(big, sizeof(big), 77, 11);
	memcpy(big, buf, sizeof(buf));
	ck_assert_int_eq(kc_payload_check(big, sizeof(big), 77, &seq, &len), KC_PL_LONG);
	/* The head of one version with the body of another. */
	kc_payload_fill(big, sizeof(buf), 77, 13);
	memcpy(big + 2000, buf + 2000, 3000);
	ck_assert_int_eq(kc_payload_check(big, sizeof(buf), 77, &seq, &len), KC_PL_TORN);
	buf[4000] ^= 1;
	ck_assert_int_eq(kc_payload_check(buf, sizeof(buf), 77, &seq, &len), KC_PL_TORN);

	unsigned char whole[10000], part[3333];
	kc_pattern_fill(whole, sizeof(whole), 5, 0);
	kc_pattern_fill(part, sizeof(part), 5, 4321);
	ck_assert_int_eq(memcmp(whole + 4321, part, sizeof(part)), 0);
	ck_assert_int_eq(kc_pattern_check(whole, sizeof(whole), 5, 0), -1);
	whole[7777] ^= 0x40;
	ck_assert_int_eq(kc_pattern_check(whole, sizeof(whole), 5, 0), 7777);
	ck_assert_int_ne(kc_pattern_check(part, sizeof(part), 6, 4321), -1);
}
END_TEST

static kc_verdict classify(const char *fstype, uint64_t magic, const char *source, const char *opts,
			   json_t **findings, char *summary)
{
	sub_identity id;
	memset(&id, 0, sizeof(id));
	snprintf(id.backend, sizeof(id.backend), "posix");
	snprintf(id.fstype, sizeof(id.fstype), "%s", fstype);
	snprintf(id.source, sizeof(id.source), "%s", source);
	snprintf(id.options, sizeof(id.options), "%s", opts);
	snprintf(id.mountpoint, sizeof(id.mountpoint), "/mnt");
	id.fs_magic = magic;
	*findings = json_array();
	return kc_preflight_classify(&id, *findings, summary, 768);
}

static int has_code(json_t *f, const char *code, const char *level)
{
	size_t i;
	json_t *x;
	json_array_foreach(f, i, x)
	{
		if (strcmp(json_string_value(json_object_get(x, "code")), code) == 0 &&
		    strcmp(json_string_value(json_object_get(x, "level")), level) == 0)
			return 1;
	}
	return 0;
}

START_TEST(preflight_refuses_and_explains)
{
	json_t *f;
	char s[768];
	ck_assert_int_eq(classify("tmpfs", KC_MAGIC_TMPFS, "tmpfs", "rw", &f, s), KC_REFUSED);
	ck_assert(has_code(f, "not-durable", "REFUSED"));
	ck_assert_ptr_nonnull(strstr(s, "tmpfs"));
	json_decref(f);
	ck_assert_int_eq(classify("ramfs", KC_MAGIC_RAMFS, "none", "rw", &f, s), KC_REFUSED);
	json_decref(f);
	ck_assert_int_eq(classify("cifs", KC_MAGIC_CIFS, "//srv/share", "rw", &f, s), KC_REFUSED);
	ck_assert(has_code(f, "smb", "REFUSED"));
	json_decref(f);
	ck_assert_int_eq(classify("smb3", KC_MAGIC_SMB2, "//srv/share", "rw", &f, s), KC_REFUSED);
	json_decref(f);
	ck_assert_int_eq(classify("fuse.smbnetfs", KC_MAGIC_FUSE, "smbnetfs", "rw", &f, s), KC_REFUSED);
	json_decref(f);
	ck_assert_int_eq(classify("fuse.s3fs", KC_MAGIC_FUSE, "s3fs", "rw", &f, s), KC_REFUSED);
	ck_assert(has_code(f, "object-store-fuse", "REFUSED"));
	json_decref(f);
	ck_assert_int_eq(classify("fuse", KC_MAGIC_FUSE, "mountpoint-s3", "rw", &f, s), KC_REFUSED);
	json_decref(f);
	ck_assert_int_eq(classify("fuse.gcsfuse", KC_MAGIC_FUSE, "bucket", "rw", &f, s), KC_REFUSED);
	json_decref(f);
	/* Other FUSE filesystems are left to the behavioural checks. */
	ck_assert_int_eq(classify("fuse.sshfs", KC_MAGIC_FUSE, "u@h:/x", "rw", &f, s), KC_PASS);
	ck_assert(has_code(f, "fuse", "INFO"));
	json_decref(f);

	ck_assert_int_eq(classify("nfs4", KC_MAGIC_NFS, "srv:/e",
				  "rw,relatime,vers=4.1,nocto,soft,actimeo=30,lookupcache=pos,local_lock=all",
				  &f, s),
			 KC_WARN);
	ck_assert(has_code(f, "nfs-nocto", "WARN"));
	ck_assert(has_code(f, "nfs-soft", "WARN"));
	ck_assert(has_code(f, "nfs-actimeo", "INFO"));
	ck_assert(has_code(f, "nfs-lookupcache", "INFO"));
	ck_assert(has_code(f, "nfs-local-lock", "INFO"));
	ck_assert(has_code(f, "nfs-version", "INFO"));
	json_decref(f);
	ck_assert_int_eq(classify("nfs4", KC_MAGIC_NFS, "srv:/e", "rw,vers=4.2,hard,actimeo=3", &f, s),
			 KC_PASS);
	ck_assert(!has_code(f, "nfs-soft", "WARN"));
	/* "softreval" is not "soft". */
	json_decref(f);
	ck_assert_int_eq(classify("nfs", KC_MAGIC_NFS, "srv:/e", "rw,vers=3,hard,softreval", &f, s),
			 KC_PASS);
	json_decref(f);
	ck_assert_int_eq(classify("ceph", KC_MAGIC_CEPH, "1.2.3.4:6789:/", "rw,nowsync", &f, s), KC_WARN);
	ck_assert(has_code(f, "ceph-nowsync", "WARN"));
	json_decref(f);
	ck_assert_int_eq(classify("ext4", 0xEF53, "/dev/vda", "rw,relatime", &f, s), KC_PASS);
	ck_assert(has_code(f, "local", "INFO"));
	json_decref(f);
}
END_TEST

START_TEST(directory_listing_must_be_exact)
{
	char *full[] = {"f0", "f1", "f2", "f3"};
	char *shuffled[] = {"f2", "f0", "f3", "f1"};
	char *dup[] = {"f0", "f1", "f1", "f3"};
	char *extra[] = {"f0", "f1", "f2", "f3", ".fuse_hidden0001"};
	char *odd[] = {"f0", "f01", "f2", "f3"};
	char *signs[] = {"f0", "f+1", "f2", "f3"};
	ck_assert_int_eq(kc_listing_complete(full, 4, 4), 1);
	ck_assert_int_eq(kc_listing_complete(shuffled, 4, 4), 1);
	ck_assert_int_eq(kc_listing_complete(full, 3, 4), 0);
	ck_assert_int_eq(kc_listing_complete(dup, 4, 4), 0);
	ck_assert_int_eq(kc_listing_complete(extra, 5, 4), 0);
	ck_assert_int_eq(kc_listing_complete(odd, 4, 4), 0);
	ck_assert_int_eq(kc_listing_complete(signs, 4, 4), 0);
	ck_assert_int_eq(kc_listing_complete(full, 4, 5), 0);
}
END_TEST

#ifdef __SANITIZE_ADDRESS__
START_TEST(interposition_is_seen_by_dladdr)
{
	char obj[1024];
	/* Nothing preloads fsync here ... */
	ck_assert_int_eq(kc_symbol_interposed("fsync", obj, sizeof(obj)), 0);
	ck_assert_ptr_nonnull(strstr(obj, "libc"));
	/* ... but AddressSanitizer does replace malloc, and that is seen. */
	ck_assert_int_eq(kc_symbol_interposed("malloc", obj, sizeof(obj)), 1);
	ck_assert_ptr_nonnull(strstr(obj, "asan"));
}
END_TEST
#endif

/* A run with results but no actors, as the report writers see it. */
static void fake_run(kc_run *r, kc_opts *o)
{
	memset(r, 0, sizeof(*r));
	memset(o, 0, sizeof(*o));
	o->url = "/data";
	o->iterations = 5;
	o->detect_rate = 0.01;
	o->detect_power = 0.999;
	r->o = o;
	r->seed = 99;
	snprintf(r->started_at, sizeof(r->started_at), "2024-01-01T00:00:00.000Z");
	snprintf(r->ident.backend, sizeof(r->ident.backend), "posix");
	snprintf(r->ident.fstype, sizeof(r->ident.fstype), "ext4");
	snprintf(r->ident.source, sizeof(r->ident.source), "/dev/x<&>");
	int ids[3] = {KC_CHK_PREFLIGHT, KC_CHK_RENAME, KC_CHK_EXCL};
	for (int k = 0; k < 3; k++) {
		kc_result *res = &r->res[ids[k]];
		kc_result_init(res, ids[k]);
		res->ran = 1;
		r->order[r->nran++] = ids[k];
	}
	kc_result_count(&r->res[KC_CHK_RENAME], "plain.ok", 4);
	kc_result_count(&r->res[KC_CHK_RENAME], "plain.missing", 2);
	json_t *an = json_pack("[{s:s,s:i,s:i,s:s,s:[s]}]", "kind", "missing", "actor", 1, "iteration", 3,
			       "detail", "open failed: ENOENT \"quoted\" <tag>", "trace", "open x: ENOENT");
	kc_result_add_anomalies(&r->res[KC_CHK_RENAME], "held", an, 2);
	json_decref(an);
	kc_judge_result(&r->res[KC_CHK_RENAME], r->seed);
	r->res[KC_CHK_RENAME].observation = "a read";
	r->res[KC_CHK_RENAME].observations = 688;
	r->res[KC_CHK_EXCL].observation = "a round";
	r->res[KC_CHK_EXCL].observations = 100;
	kc_result_count(&r->res[KC_CHK_EXCL], "rounds", 0); /* inconclusive: WARN */
	kc_judge_result(&r->res[KC_CHK_EXCL], r->seed);
	snprintf(r->res[KC_CHK_PREFLIGHT].summary, 768, "ext4");
	r->verdict = kc_judge_overall(r->res, KC_NCHECKS);
}

static void free_run(kc_run *r)
{
	for (int i = 0; i < KC_NCHECKS; i++)
		if (r->res[i].ran)
			kc_result_free(&r->res[i]);
}

#define HAS(obj, key, type) ck_assert_msg(json_is_##type(json_object_get(obj, key)), "%s", key)

START_TEST(report_json_carries_the_schema)
{
	kc_run r;
	kc_opts o;
	fake_run(&r, &o);
	ck_assert_int_eq(r.verdict, KC_FAIL);
	json_t *j = kc_report_json(&r);
	HAS(j, "schema_version", integer);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "schema_version")), KC_REPORT_SCHEMA);
	HAS(j, "tool_version", string);
	ck_assert_str_eq(json_string_value(json_object_get(j, "verdict")), "FAIL");
	ck_assert_int_eq(json_integer_value(json_object_get(j, "exit_code")), 1);
	HAS(j, "substrate", object);
	HAS(json_object_get(j, "substrate"), "url", string);
	HAS(json_object_get(j, "substrate"), "identity", object);
	HAS(j, "actors", object);
	HAS(json_object_get(j, "actors"), "count", integer);
	HAS(json_object_get(j, "actors"), "distinct_clients", boolean);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "seed")), 99);
	HAS(j, "started_at", string);
	json_t *checks = json_object_get(j, "checks");
	ck_assert_uint_eq(json_array_size(checks), 3);
	json_t *rn = json_array_get(checks, 1);
	ck_assert_str_eq(json_string_value(json_object_get(rn, "name")), "rename");
	ck_assert_str_eq(json_string_value(json_object_get(rn, "verdict")), "FAIL");
	HAS(rn, "counts", object);
	HAS(rn, "anomalies", array);
	HAS(rn, "profile", object);
	HAS(rn, "notes", array);
	ck_assert_str_eq(json_string_value(json_object_get(rn, "reproduce")), "--seed 99 --checks rename");
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(rn, "counts"), "plain.missing")), 2);
	json_t *a0 = json_array_get(json_object_get(rn, "anomalies"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(a0, "variant")), "held");
	HAS(a0, "trace", array);
	/* Schema 2: the detection power of each check's sample. */
	json_t *det = json_object_get(rn, "detection");
	ck_assert_str_eq(json_string_value(json_object_get(det, "kind")), "sampled");
	ck_assert_int_eq(json_integer_value(json_object_get(det, "observations")), 688);
	ck_assert(json_is_true(json_object_get(det, "meets_target")));
	ck_assert_int_eq(json_integer_value(json_object_get(det, "needed")), 688);
	det = json_object_get(json_array_get(checks, 2), "detection");
	ck_assert(json_is_false(json_object_get(det, "meets_target")));
	ck_assert(json_real_value(json_object_get(det, "power")) < 0.64);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(json_array_get(checks, 0), "detection"), "kind")),
			 "single");
	/* The writers print the verdicts the checks decided. */
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(checks, 2), "verdict")),
			 "WARN");
	json_decref(j);
	free_run(&r);
}
END_TEST

START_TEST(junit_marks_failures)
{
	kc_run r;
	kc_opts o;
	fake_run(&r, &o);
	char path[] = "/tmp/kc-junit-XXXXXX", err[256];
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(kc_report_write_junit(&r, path, err, sizeof(err)), 0);
	char *text = NULL;
	size_t len = 0;
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_gt(getdelim(&text, &len, '\0', f), 0);
	fclose(f);
	unlink(path);
	ck_assert_ptr_nonnull(strstr(text, "tests=\"3\" failures=\"1\" errors=\"0\""));
	ck_assert_ptr_nonnull(strstr(text, "<testcase classname=\"kaas-conform\" name=\"preflight\""));
	ck_assert_ptr_nonnull(strstr(text, "<failure type=\"FAIL\""));
	ck_assert_ptr_nonnull(strstr(text, "&quot;quoted&quot; &lt;tag&gt;"));
	ck_assert_ptr_null(strstr(text, "<tag>"));
	ck_assert_ptr_nonnull(strstr(text, "<system-out>WARN"));
	ck_assert_ptr_nonnull(strstr(text, "<property name=\"detection_power\" value=\"99.90%\"/>"));
	ck_assert_ptr_nonnull(strstr(text, "<property name=\"detection_power\" value=\"63.39%\"/>"));
	ck_assert_ptr_nonnull(strstr(text, "<property name=\"guarantee\" value=\"atomic same-directory rename\"/>"));
	free(text);
	free_run(&r);
}
END_TEST

/* The reproduce command pastes into a shell as one word per argument. */
START_TEST(reproduce_command_is_shell_quoted)
{
	kc_run r;
	kc_opts o;
	fake_run(&r, &o);
	o.url = "fault:/v o'l?excl=broken&seed=3";
	o.mounts[0] = "/m";
	o.nmounts = 1;
	o.actors = 3;
	o.crash_cmd = "kill $(cat pid)";
	char *cmd = kc_reproduce_command(&r, &r.res[KC_CHK_RENAME]);
	ck_assert_ptr_nonnull(cmd);
	ck_assert_str_eq(cmd, "kaas-conform check 'fault:/v o'\\''l?excl=broken&seed=3' --mount /m "
			      "--actors 3 --iterations 5 --seed 99 --checks rename");
	free(cmd);
	/* The crash command belongs to the fsync check only; agents replace
	 * --actors; an empty argument stays an argument. */
	o.nmounts = 0;
	o.agents[0] = "h1:7070";
	o.agents[1] = "";
	o.nagents = 2;
	snprintf(r.res[KC_CHK_RENAME].reproduce, sizeof(r.res[0].reproduce), "x");
	r.res[KC_CHK_RENAME].check = KC_CHK_FSYNC;
	cmd = kc_reproduce_command(&r, &r.res[KC_CHK_RENAME]);
	ck_assert_str_eq(cmd, "kaas-conform check 'fault:/v o'\\''l?excl=broken&seed=3' --agent h1:7070 "
			      "--agent '' --iterations 5 --seed 99 --checks fsync --crash-cmd 'kill $(cat pid)'");
	free(cmd);
	r.res[KC_CHK_RENAME].check = KC_CHK_RENAME;
	/* The report carries it next to the options; a check without a hint has none. */
	json_t *j = kc_report_json(&r);
	json_t *checks = json_object_get(j, "checks");
	ck_assert_ptr_nonnull(json_object_get(json_array_get(checks, 1), "reproduce_command"));
	ck_assert_ptr_null(json_object_get(json_array_get(checks, 0), "reproduce_command"));
	ck_assert_ptr_null(kc_reproduce_command(&r, &r.res[KC_CHK_PREFLIGHT]));
	json_decref(j);
	free_run(&r);
}
END_TEST

/* The actors' kind is what they were, in the report and in the stamp. */
START_TEST(actor_kind_is_recorded)
{
	kc_run r;
	kc_opts o;
	fake_run(&r, &o);
	kc_actor a[2];
	memset(a, 0, sizeof(a));
	r.drv.a = a;
	r.drv.n = 2;
	for (int i = 0; i < 2; i++) {
		snprintf(a[i].agent, sizeof(a[i].agent), "h%d:7070", i);
		a[i].hello = json_pack("{s:i,s:s,s:s,s:s}", "pid", 10 + i, "host", "h", "client", "c",
				       "host_id", i ? "h/b/netns:2" : "h/b/netns:1");
	}
	r.nactors = 2;
	for (int pass = 0; pass < 2; pass++) {
		json_t *j = pass ? kc_stamp_build(&r) : kc_report_json(&r);
		json_t *act = json_object_get(j, "actors");
		ck_assert_str_eq(json_string_value(json_object_get(act, "kind")), "agent");
		json_t *l = json_object_get(act, "list");
		ck_assert_uint_eq(json_array_size(l), 2);
		for (int i = 0; i < 2; i++) {
			json_t *one = json_array_get(l, i);
			ck_assert_str_eq(json_string_value(json_object_get(one, "kind")), "agent");
			ck_assert_str_eq(json_string_value(json_object_get(one, "agent")), a[i].agent);
		}
		json_decref(j);
	}
	/* Forked actors are processes. */
	a[0].agent[0] = a[1].agent[0] = '\0';
	json_t *st = kc_stamp_build(&r);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(st, "actors"), "kind")), "process");
	ck_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(json_object_get(json_object_get(st, "actors"), "list"), 1), "kind")),
			 "process");
	json_decref(st);
	for (int i = 0; i < 2; i++)
		json_decref(a[i].hello);
	free_run(&r);
}
END_TEST

/* The interposition test needs the sanitizer build's dladdr. */
#ifdef __SANITIZE_ADDRESS__
#define ASAN_ONLY(t) t,
#else
#define ASAN_ONLY(t)
#endif

int main(void)
{
	return ktest_main((struct ktest){ .suite = "conform", .tcase = "logic" },
			  KTEST_LIST(verdicts_order_and_exit_codes, judges_decide_from_counts,
				     judges_fail_on_every_violation_counter, fsync_timing_reference,
				     space_freed_despite_other_writers, overall_verdict_and_reproduce_hint,
				     result_store_prefixes_and_caps, options_parse_and_reject,
				     stuck_reader_among_current_ones_fails, detection_power_arithmetic,
				     payload_classification, preflight_refuses_and_explains,
				     directory_listing_must_be_exact,
				     ASAN_ONLY(interposition_is_seen_by_dladdr)
				     report_json_carries_the_schema, junit_marks_failures,
				     reproduce_command_is_shell_quoted, actor_kind_is_recorded));
}
