/*
 * harness.h — shared helpers of the storage tests: a scratch directory on
 * the posix backend, batch appends, reading the whole log back through
 * read plans, and a record of what was appended to compare against.
 */
#ifndef KAAS_STORAGE_TEST_HARNESS_H
#define KAAS_STORAGE_TEST_HARNESS_H

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kaas/storage/batch.h"
#include "kaas/storage/storage.h"
#include "kaas/storage/test/kbuild.h"
#include "substrates/sub.h"
#include "substrates/test/scratch.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* The test's scratch volume (substrates/test/scratch.h). */
static scratch h_scratch;
#define h_dir (h_scratch.dir)
#define h_vfs (h_scratch.vfs)

static inline void h_quiet(void)
{
	/* Quiet unless asked: the failure paths under test log loudly by design. */
	ku_log_level = getenv("KAAS_LOG_LEVEL") ? KAAS_LOG_DEBUG : -1;
}

static inline void h_setup(void)
{
	h_quiet();
	scratch_open(&h_scratch, "storage");
}

/* Scratch space in memory where there is some: for tests whose crashes the
 * fault backend simulates, real fsyncs only cost time. */
static inline void h_setup_mem(void)
{
	h_quiet();
	scratch_open_mem(&h_scratch, "storage");
}

static inline void h_teardown(void)
{
	scratch_close(&h_scratch);
}

static inline ks_log_config h_cfg(void)
{
	ks_log_config c;
	ks_log_config_defaults(&c);
	c.index_interval_bytes = 256;
	c.checkpoint_ms = -1; /* every housekeeping */
	return c;
}

/* Files in the partition directory whose name ends with suffix. */
static inline int h_count_files(const char *dir, const char *suffix)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", h_dir, dir);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name), s = strlen(suffix);
		if (l >= s && strcmp(e->d_name + l - s, suffix) == 0)
			n++;
	}
	closedir(d);
	return n;
}

static inline int h_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the one opendir holds */
}

/* Appends everything in b; returns the result's error and fills res. */
static inline int h_append(ks_partition *p, kbuild *b, ks_append_result *res)
{
	int rc = ks_partition_append(p, b->buf, b->len, res);
	(void)rc;
	return res->error;
}

/* Appends one simple batch and checks it succeeded; returns its base offset. */
static inline int64_t h_put(ks_partition *p, int n, const char *tag, int vsize)
{
	kbuild b = KBUILD_INIT;
	ks_append_result res;
	kbuild_simple(&b, -1, -1, -1, n, 1700000000000LL, tag, vsize, KBUILD_NONE);
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_msg(res.error == 0, "append failed: %s (%s)", kw_kerr_name(res.error),
		      res.message ? res.message : "");
	kbuild_free(&b);
	return res.base_offset;
}

/* Reads [from, hw) through read plans into *out, as a client does: a
 * batch the plan cut short at its end is dropped and fetched again. */
static inline size_t h_read_all(ks_partition *p, int64_t from, int32_t max_bytes, uint8_t **out)
{
	size_t len = 0, cap = 0;
	uint8_t *buf = NULL;
	int64_t cur = from;
	size_t scanned = 0;
	for (;;) {
		ks_read_plan plan = KAAS_READ_PLAN_INIT;
		ck_assert_int_eq(ks_partition_read(p, cur, max_bytes, &plan), 0);
		ck_assert_msg(plan.error == 0, "read at %lld: %s", (long long)cur,
			      kw_kerr_name(plan.error));
		if (plan.n == 0) {
			ck_assert_int_ge(cur, plan.high_watermark);
			ks_read_plan_release(&plan);
			break;
		}
		for (int i = 0; i < plan.n; i++) {
			kbuild__grow(&buf, &cap, len + plan.r[i].len);
			ck_assert_int_eq(sub_pread_full(plan.r[i].file, buf + len, plan.r[i].len, plan.r[i].pos), 0);
			len += plan.r[i].len;
		}
		ks_read_plan_release(&plan);
		/* Next offset: after the last whole batch read. */
		int64_t last = -1;
		while (len - scanned >= KB_HDR) {
			kb_hdr h;
			ks__kb_decode(buf + scanned, &h);
			if (kb_size(&h) > len - scanned)
				break;
			last = kb_last_offset(&h);
			scanned += kb_size(&h);
		}
		len = scanned; /* a cut batch comes again with the next plan */
		ck_assert_int_gt(last + 1, cur);
		cur = last + 1;
	}
	*out = buf;
	return len;
}

/* Checks that `log` is a sequence of valid batches with consecutive offsets
 * starting at `first`; returns the offset after the last one. */
static inline int64_t h_check_log(const uint8_t *log, size_t len, int64_t first)
{
	size_t pos = 0;
	int64_t next = first;
	while (pos < len) {
		kb_hdr h;
		ck_assert_uint_ge(len - pos, KB_HDR);
		ks__kb_decode(log + pos, &h);
		ck_assert_int_eq(h.magic, 2);
		ck_assert_uint_le(kb_size(&h), len - pos);
		ck_assert_uint_eq(ks__kb_crc(log + pos, kb_size(&h)), h.crc);
		if (next >= 0)
			ck_assert_int_eq(h.base_offset, next);
		next = kb_last_offset(&h) + 1;
		pos += kb_size(&h);
	}
	return next;
}

#endif
