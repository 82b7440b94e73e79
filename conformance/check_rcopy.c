/*
 * check_rcopy.c — is rename a rename, or a copy and a delete?
 *
 * Object-store FUSE mounts implement rename by copying the data to the new
 * name and deleting the old one, which is neither atomic nor cheap.  Three
 * observations that do not depend on absolute speed:
 *   - the inode number survives the rename;
 *   - renaming 64 MiB takes about as long as renaming 1 KiB: the medians of
 *     interleaved renames are compared as a ratio within this run, and a
 *     ratio above the limit is measured a second time before it counts;
 *     on a volume with less than four times 64 MiB free the large file is
 *     the largest power-of-two MiB that fits a quarter of the free space
 *     (at least 1 MiB), and the report says the timing lost power: a copy
 *     of a few MiB can hide inside one round trip's overhead; a volume
 *     whose statvfs keeps no accounting (0 blocks) gets 64 MiB, and a
 *     write that does not fit ends the check in ERROR; with less than
 *     4 MiB free it waits a moment for space that the checks before it
 *     freed (a deferred purge) before saying what it needs;
 *   - a descriptor another client opened before the rename still reads the
 *     file's data afterwards.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance/judge.h"
#include "conformance/run.h"
#include "util/clock.h"

#define SMALL_BYTES 1024LL
#define BIG_BYTES (64LL << 20)
#define BIG_MIN_BYTES (1LL << 20)
#define ROUNDS 9
/* How long a volume too small for the 1 MiB probe is given to free what
 * the checks before deleted: CephFS purges deleted files in the
 * background, NFS removes a silly-renamed file only after its last close. */
#define SPACE_WAIT_MS 10000
#define SPACE_POLL_MS 250

/* The large file's size on a volume with `avail` bytes free: 64 MiB when a
 * quarter of the free space holds it, else the largest power-of-two MiB
 * that does; 0 when not even 1 MiB fits (the check cannot run). */
int64_t kc_rcopy_big_bytes(int64_t avail)
{
	int64_t b = BIG_BYTES;
	while (b > BIG_MIN_BYTES && b * 4 > avail)
		b /= 2;
	return b * 4 > avail ? 0 : b;
}

/* "64 MiB", "4 MiB" */
static const char *size_text(int64_t b, char *buf, size_t len)
{
	snprintf(buf, len, "%lld MiB", (long long)(b >> 20));
	return buf;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static void anomaly(kc_result *res, const char *dir, const char *kind, int actor, int iteration,
		    const char *detail, const char *seen);
static int64_t big_bytes = BIG_BYTES; /* this run's large file (kc_rcopy_big_bytes) */

/* Renames small and big back and forth ROUNDS times each, interleaved;
 * returns the ratio of the medians x100.  *cur says which names hold the
 * files now (0: original, 1: moved). */
static int measure(kc_run *r, kc_result *res, const char *dir, const char *small, const char *big,
		   int *cur, int64_t *ratio_x100, int64_t *med_small, int64_t *med_big)
{
	char sm[320], bm[320];
	snprintf(sm, sizeof(sm), "%s.moved", small);
	snprintf(bm, sizeof(bm), "%s.moved", big);
	json_t *pairs = json_array();
	int c = *cur;
	for (int k = 0; k < ROUNDS; k++) {
		json_array_append_new(pairs, json_pack("[s,s]", c ? sm : small, c ? small : sm));
		json_array_append_new(pairs, json_pack("[s,s]", c ? bm : big, c ? big : bm));
		c = !c;
	}
	json_t *out = NULL;
	int rc = kc_drv_call(&r->drv, 0, "rename_timed", json_pack("{s:o}", "pairs", pairs), &out);
	if (rc)
		return rc;
	int64_t ts[ROUNDS], tb[ROUNDS];
	json_t *ns = json_object_get(out, "ns"), *errs = json_object_get(out, "err");
	for (int k = 0; k < ROUNDS; k++) {
		ts[k] = json_integer_value(json_array_get(ns, (size_t)(2 * k)));
		tb[k] = json_integer_value(json_array_get(ns, (size_t)(2 * k + 1)));
		for (int j = 0; j < 2; j++) {
			const char *e = json_string_value(json_array_get(errs, (size_t)(2 * k + j)));
			if (e && strcmp(e, "OK") != 0) {
				kc_result_count(res, "rename_errors", 1);
				char d[200], sz[32];
				snprintf(d, sizeof(d), "rename of the %s file failed: %s",
					 j ? size_text(big_bytes, sz, sizeof(sz)) : "1 KiB", e);
				char seen[700];
				snprintf(seen, sizeof(seen), "actor 0: rename %s (round %d): %s",
					 j ? big : small, k + 1, e);
				anomaly(res, dir, "rename_error", 0, k, d, seen);
			}
		}
	}
	json_decref(out);
	*cur = c;
	qsort(ts, ROUNDS, sizeof(ts[0]), cmp64);
	qsort(tb, ROUNDS, sizeof(tb[0]), cmp64);
	*med_small = ts[ROUNDS / 2] > 0 ? ts[ROUNDS / 2] : 1;
	*med_big = tb[ROUNDS / 2];
	*ratio_x100 = *med_big * 100 / *med_small;
	return 0;
}

static int call(kc_run *r, int a, const char *op, json_t *args, json_t **out)
{
	return kc_drv_call(&r->drv, a, op, args, out);
}

/* The operations behind every rename-copy anomaly, then what was seen. */
static json_t *trace(const char *dir, const char *seen)
{
	char l1[400], l3[400], sz[32];
	snprintf(l1, sizeof(l1), "actor 0: write %s/small (1 KiB) and %s/big (%s), fsync each", dir, dir,
		 size_text(big_bytes, sz, sizeof(sz)));
	snprintf(l3, sizeof(l3), "actor 0: rename each to <name>.moved and back, interleaved, %d times",
		 ROUNDS);
	return json_pack("[s,s,s,s]", l1, "actor 1: open both, keep the descriptors", l3, seen);
}

static void anomaly(kc_result *res, const char *dir, const char *kind, int actor, int iteration,
		    const char *detail, const char *seen)
{
	json_t *one = json_pack("[{s:s,s:i,s:i,s:s,s:o}]", "kind", kind, "actor", actor, "iteration",
				iteration, "detail", detail, "trace", trace(dir, seen));
	kc_result_add_anomalies(res, NULL, one, 1);
	json_decref(one);
}

/* The free bytes statvfs says, or -1 (*no_accounting = 1 when that is
 * because the volume reports 0 blocks, not an error or "unlimited"). */
static int64_t free_now(kc_run *r, const char *dir, int *no_accounting)
{
	sub_fsinfo fi;
	if (sub_statvfs(r->vfs, dir, &fi) != 0)
		return -1;
	if (no_accounting)
		*no_accounting = fi.blocks == 0;
	return kc_free_bytes(fi.blocks, fi.bavail, fi.bsize);
}

int kc_check_rcopy(kc_run *r, kc_result *res, const char *dir)
{
	const int A = 0, B = 1;
	char small[256], big[256], cs[320], cb[320];
	snprintf(small, sizeof(small), "%s/small", dir);
	snprintf(big, sizeof(big), "%s/big", dir);
	uint64_t ts = kc_run_tag(r, KC_CHK_RCOPY, 0, "small"), tb = kc_run_tag(r, KC_CHK_RCOPY, 0, "big");
	const char *files[2] = {small, big};
	uint64_t tags[2] = {ts, tb};
	json_t *out = NULL;
	json_int_t hh[2] = {0, 0}, inos[2];
	int rc, cur = 0;
	char sz[32];
	res->iterations = ROUNDS;
	static const char *const zero[] = {"inode_changed", "time_grows", "old_fd_broken",
					   "content_mismatch", "rename_errors"};
	for (size_t k = 0; k < sizeof(zero) / sizeof(zero[0]); k++)
		kc_result_count(res, zero[k], 0); /* every counter is in the report */
	/* Sized to the volume: a small volume is qualified with a smaller large
	 * file rather than ending in ENOSPC; what that costs is said. */
	int no_accounting = 0;
	int64_t avail = free_now(r, dir, &no_accounting), waited_ms = -1, first = avail;
	if (avail >= 0 && kc_rcopy_big_bytes(avail) == 0) {
		/* Only the space itself can end the wait: it never makes a
		 * small volume look bigger than statvfs says. */
		int64_t t0 = ku_mono_ms();
		while (kc_rcopy_big_bytes(avail) == 0 && ku_mono_ms() - t0 < SPACE_WAIT_MS &&
		       !kc__interrupted) {
			usleep(SPACE_POLL_MS * 1000);
			int64_t a = free_now(r, dir, NULL);
			if (a >= 0)
				avail = a;
		}
		waited_ms = ku_mono_ms() - t0;
		if (kc__interrupted)
			return -EINTR;
	}
	big_bytes = avail < 0 ? BIG_BYTES : kc_rcopy_big_bytes(avail);
	if (waited_ms >= 0) {
		json_object_set_new(res->profile, "space_wait_ms", json_integer(waited_ms));
		json_object_set_new(res->profile, "free_bytes_first", json_integer(first));
	}
	if (big_bytes == 0) {
		kc_result_error(res,
				"the volume has %lld KiB free (%lld KiB after waiting %lld ms for deleted files to be reclaimed); rename-copy needs at least %lld KiB (four times its 1 MiB probe file), or leave it out with --checks",
				(long long)(first >> 10), (long long)(avail >> 10), (long long)waited_ms,
				(long long)(4 * BIG_MIN_BYTES >> 10));
		return -ENOSPC;
	}
	int64_t sizes[2] = {SMALL_BYTES, big_bytes};
	json_object_set_new(res->profile, "big_bytes", json_integer(big_bytes));
	if (avail >= 0)
		json_object_set_new(res->profile, "free_bytes", json_integer(avail));
	else if (no_accounting)
		kc_result_note(res,
			       "the volume keeps no space accounting (statvfs reports 0 blocks), so the large file is 64 MiB whatever the free space; a write that does not fit ends the check in ERROR");
	if (big_bytes < BIG_BYTES)
		kc_result_note(res,
			       "the volume has %lld MiB free, so the large file is %s, not 64 MiB: the timing observation has less power (a copy of %s can hide inside one operation's overhead); the inode and open-descriptor observations do not depend on size",
			       (long long)(avail >> 20), size_text(big_bytes, sz, sizeof(sz)),
			       size_text(big_bytes, sz, sizeof(sz)));
	kc_run_variant(r, "setup");
	for (int i = 0; i < 2; i++) {
		if ((rc = call(r, A, "file_write",
			       json_pack("{s:s,s:I,s:I,s:b}", "path", files[i], "size", (json_int_t)sizes[i],
					 "tag", (json_int_t)tags[i], "fsync", 1),
			       &out)))
			goto fail;
		inos[i] = json_integer_value(json_object_get(out, "ino"));
		json_decref(out);
	}
	/* Another client opens both before anything is renamed. */
	for (int i = 0; i < 2; i++) {
		if ((rc = call(r, B, "open_handle", json_pack("{s:s}", "path", files[i]), &out)))
			goto fail;
		hh[i] = json_integer_value(json_object_get(out, "handle"));
		json_decref(out);
	}

	kc_run_variant(r, "timing");
	int64_t ratio, ms, mb, ratio2 = 0, ms2 = 0, mb2 = 0;
	if ((rc = measure(r, res, dir, small, big, &cur, &ratio, &ms, &mb)))
		goto fail;
	int grows = 0;
	if (ratio >= KC_RCOPY_RATIO_LIMIT * 100) {
		if ((rc = measure(r, res, dir, small, big, &cur, &ratio2, &ms2, &mb2)))
			goto fail;
		grows = ratio2 >= KC_RCOPY_RATIO_LIMIT * 100;
		if (ratio2 < ratio)
			ratio = ratio2;
	}
	kc_result_count(res, "ratio_x100", ratio);
	kc_result_count(res, "time_grows", grows);
	json_object_set_new(res->profile, "rename_small_ns", json_integer(ms));
	json_object_set_new(res->profile, "rename_big_ns", json_integer(mb));
	if (ms2)
		json_object_set_new(res->profile, "confirm", json_pack("{s:I,s:I}", "rename_small_ns",
								      (json_int_t)ms2, "rename_big_ns",
								      (json_int_t)mb2));
	json_object_set_new(res->profile, "ratio_limit", json_integer(KC_RCOPY_RATIO_LIMIT));
	if (grows) {
		char d[200];
		snprintf(d, sizeof(d), "median rename: 1 KiB %lld us, %s %lld us", (long long)(ms / 1000),
			 size_text(big_bytes, sz, sizeof(sz)), (long long)(mb / 1000));
		char seen[300];
		snprintf(seen, sizeof(seen), "actor 0: renamed again to confirm: 1 KiB %lld us, %s %lld us",
			 (long long)(ms2 / 1000), sz, (long long)(mb2 / 1000));
		anomaly(res, dir, "rename_time_grows", A, 0, d, seen);
	}

	kc_run_variant(r, "verify");
	snprintf(cs, sizeof(cs), "%s%s", small, cur ? ".moved" : "");
	snprintf(cb, sizeof(cb), "%s%s", big, cur ? ".moved" : "");
	const char *names[2] = {cs, cb};
	for (int i = 0; i < 2; i++) {
		if ((rc = call(r, A, "stat", json_pack("{s:s}", "path", names[i]), &out)))
			goto fail;
		json_int_t ino = json_integer_value(json_object_get(out, "ino"));
		const char *err = json_string_value(json_object_get(out, "err"));
		if (!err || strcmp(err, "OK") != 0 || ino != inos[i]) {
			kc_result_count(res, "inode_changed", 1);
			char d[300];
			snprintf(d, sizeof(d), "%s: inode %lld before the renames, %lld (%s) after", names[i],
				 (long long)inos[i], (long long)ino, err ? err : "?");
			char seen[400];
			snprintf(seen, sizeof(seen), "actor 0: stat %s: %s, inode %lld", names[i],
				 err ? err : "?", (long long)ino);
			anomaly(res, dir, "inode_changed", A, 0, d, seen);
		}
		json_decref(out);
	}
	for (int i = 0; i < 2; i++) {
		if ((rc = call(r, B, "handle_verify",
			       json_pack("{s:I,s:I,s:I}", "handle", hh[i], "size", (json_int_t)sizes[i],
					 "tag", (json_int_t)tags[i]),
			       &out)))
			goto fail;
		const char *st = json_string_value(json_object_get(out, "status"));
		if (!st || strcmp(st, "ok") != 0) {
			kc_result_count(res, "old_fd_broken", 1);
			char d[300];
			snprintf(d, sizeof(d), "a descriptor opened on %s before the renames now reads: %s",
				 i ? "the large file" : "the 1 KiB file", st ? st : "?");
			char seen[300];
			snprintf(seen, sizeof(seen), "actor 1: read the whole file through the old descriptor: %s",
				 st ? st : "?");
			anomaly(res, dir, "old_fd_broken", B, 0, d, seen);
		}
		json_decref(out);
		if ((rc = call(r, B, "file_verify",
			       json_pack("{s:s,s:I,s:I}", "path", names[i], "size", (json_int_t)sizes[i],
					 "tag", (json_int_t)tags[i]),
			       &out)))
			goto fail;
		st = json_string_value(json_object_get(out, "status"));
		if (!st || strcmp(st, "ok") != 0) {
			kc_result_count(res, "content_mismatch", 1);
			char d[400];
			snprintf(d, sizeof(d), "%s after the renames reads: %s (%lld bytes, first difference at %lld)",
				 names[i], st ? st : "?",
				 (long long)json_integer_value(json_object_get(out, "bytes")),
				 (long long)json_integer_value(json_object_get(out, "first_bad")));
			char seen[600];
			snprintf(seen, sizeof(seen), "actor 1: open %s, read to EOF: %s", names[i], st ? st : "?");
			anomaly(res, dir, "content_mismatch", B, 0, d, seen);
		}
		json_decref(out);
	}
	for (int i = 0; i < 2; i++) {
		if ((rc = call(r, B, "close_handle", json_pack("{s:I}", "handle", hh[i]), &out)))
			goto fail;
		json_decref(out);
	}
	kc_result_count(res, "inode_changed", 0);
	r->manual = 1;
	r->manual_done = ROUNDS;
	return 0;
fail:
	if (rc != -EINTR)
		kc_result_error(res, "%s", r->drv.err);
	return rc;
}
