/*
 * test_sub_fault.c — the fault backend: error injection, the crash model
 * (reverts, torn writes, crash_after replay), fsync=lie, rename=copy,
 * rename=hide, excl=broken, excl=eperm, cto=stale, cto=size, leak, option
 * parsing.  What a crash left behind is always checked through a plain posix
 * vfs on the same directory.
 * Length: one test per fault-backend option, sharing the wrapped posix
 * volume and its helpers.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "substrates/sub.h"
#include "substrates/sub_fault.h"
#include "substrates/test/scratch.h"
#include "util/test/ktest.h"

static scratch vol;
static sub_vfs *plain; /* vol.vfs */

static void setup(void)
{
	scratch_open(&vol, "fault");
	plain = vol.vfs;
}

static void teardown(void)
{
	scratch_close(&vol);
	plain = NULL;
}

static sub_vfs *fault_open(const char *opts)
{
	char url[512], err[256] = "";
	sub_vfs *v = NULL;
	snprintf(url, sizeof(url), "fault:%s?%s", vol.dir, opts);
	int rc = sub_open_url(url, &v, err, sizeof(err));
	ck_assert_msg(rc == 0, "open %s: %d %s", url, rc, err);
	ck_assert_str_eq(v->m->name, "fault");
	return v;
}

/* The file's contents through the posix vfs; NULL when it does not exist. */
static char *slurp(const char *path, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	int rc = sub_read_file(plain, path, 1 << 22, &buf, &n);
	if (rc == -ENOENT)
		return NULL;
	ck_assert_int_eq(rc, 0);
	if (len)
		*len = n;
	return buf;
}

static void assert_content(const char *path, const char *want)
{
	size_t len;
	char *got = slurp(path, &len);
	ck_assert_msg(got != NULL, "%s missing", path);
	ck_assert_uint_eq(len, strlen(want));
	ck_assert_int_eq(memcmp(got, want, len), 0);
	free(got);
}

static void put(const char *path, const char *content)
{
	ck_assert_int_eq(sub_write_atomic(plain, path, content, strlen(content)), 0);
}

static sub_file *create(sub_vfs *v, const char *path)
{
	sub_file *f = NULL;
	ck_assert_int_eq(sub_open(v, path, O_CREAT | O_RDWR | O_TRUNC, 0644, &f), 0);
	return f;
}

static void write_str(sub_file *f, const char *s, uint64_t off)
{
	ck_assert_int_eq(sub_pwrite_full(f, s, strlen(s), off), 0);
}

/* ---- error injection ------------------------------------------------------ */

START_TEST(fail_nth_and_from_nth)
{
	sub_vfs *v = fault_open("fail=pwrite:2:ENOSPC&fail=fsync:2+:EIO");
	sub_file *f = create(v, "f");
	ck_assert_int_eq(sub_pwrite(f, "a", 1, 0), 1);
	ck_assert_int_eq(sub_pwrite(f, "b", 1, 1), -ENOSPC);
	ck_assert_int_eq(sub_pwrite(f, "c", 1, 1), 1);
	ck_assert_int_eq(sub_fsync(f), 0);
	ck_assert_int_eq(sub_fsync(f), -EIO);
	ck_assert_int_eq(sub_fsync(f), -EIO);
	ck_assert_int_eq(sub_close(f), 0);
	assert_content("f", "ac"); /* the failed write did not happen */

	/* Counting is per vfs: a second client starts from call 1. */
	sub_vfs *v2 = fault_open("fail=pwrite:2:EDQUOT");
	f = create(v2, "g");
	ck_assert_int_eq(sub_pwrite(f, "x", 1, 0), 1);
	ck_assert_int_eq(sub_pwrite(f, "y", 1, 1), -EDQUOT);
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_pwrite(f = create(v, "h"), "z", 1, 0), 1); /* v is past call 2 */
	ck_assert_int_eq(sub_close(f), 0);
	sub_destroy(v2);
	sub_destroy(v);
}
END_TEST

START_TEST(fail_by_path)
{
	sub_vfs *v = fault_open("failpath=topics/*/manifest.json:rename:EROFS&"
				"failpath=*.log:open:EACCES&failpath=*.idx:pwrite:ESTALE");
	ck_assert_int_eq(sub_mkdirs(v, "topics/p0", 0755), 0);
	ck_assert_int_eq(sub_write_atomic(v, "topics/p0/manifest.json", "{}", 2), -EROFS);
	char **names;
	size_t n;
	ck_assert_int_eq(sub_list(plain, "topics/p0", &names, &n), 0);
	ck_assert_uint_eq(n, 0); /* write_atomic removed its temp file */
	sub_names_free(names, n);
	ck_assert_int_eq(sub_write_atomic(v, "topics/p0/other.json", "{}", 2), 0);
	assert_content("topics/p0/other.json", "{}");

	sub_file *f = NULL;
	sub_stat st;
	ck_assert_int_eq(sub_open(v, "topics/p0/00.log", O_CREAT | O_RDWR, 0644, &f), -EACCES);
	ck_assert_int_eq(sub_stat_path(plain, "topics/p0/00.log", &st), -ENOENT);
	f = create(v, "topics/p0/00.idx");
	ck_assert_int_eq(sub_pwrite(f, "x", 1, 0), -ESTALE);
	ck_assert_int_eq(sub_close(f), 0);
	sub_destroy(v);
}
END_TEST

/* ---- the crash model ------------------------------------------------------ */

START_TEST(crash_reverts_unsynced_keeps_synced)
{
	put("c", "c-old");
	put("d", "dd");
	sub_vfs *v = fault_open("crash_mode=drop");
	sub_file *a = create(v, "a");
	write_str(a, "durable-A", 0);
	ck_assert_int_eq(sub_fsync(a), 0);
	write_str(a, "XXXX", 0);  /* overwrite */
	write_str(a, "-more", 9); /* extend */

	sub_file *f = create(v, "b"); /* written, closed, never synced */
	write_str(f, "never synced", 0);
	ck_assert_int_eq(sub_close(f), 0);

	ck_assert_int_eq(sub_open(v, "c", O_RDWR, 0, &f), 0);
	write_str(f, "c-new!!", 0);
	ck_assert_int_eq(sub_close(f), 0);

	/* Written, then renamed: the undo follows the inode. */
	ck_assert_int_eq(sub_open(v, "d", O_WRONLY, 0, &f), 0);
	write_str(f, "EEEE", 0);
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_rename(v, "d", "e"), 0);

	/* Written, then truncated by open(O_TRUNC), which is synchronous: the
	 * older write has nothing left to revert to. */
	put("t", "AAAA");
	ck_assert_int_eq(sub_open(v, "t", O_RDWR, 0, &f), 0);
	write_str(f, "BBBB", 0);
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_open(v, "t", O_WRONLY | O_TRUNC, 0, &f), 0);
	write_str(f, "C", 0);
	ck_assert_int_eq(sub_close(f), 0);

	/* Written, then unlinked: nothing to revert. */
	f = create(v, "gone");
	write_str(f, "bytes", 0);
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_unlink(v, "gone"), 0);

	ck_assert_int_eq(sub_fault_is_crashed(v), 0);
	ck_assert_int_eq(sub_fault_crash(v), 0);
	ck_assert_int_eq(sub_fault_is_crashed(v), 1);
	ck_assert_int_eq(sub_fault_crash(v), 0); /* idempotent */

	/* A crashed client answers EIO to everything. */
	char buf[8];
	sub_stat st;
	ck_assert_int_eq(sub_pread(a, buf, sizeof(buf), 0), -EIO);
	ck_assert_int_eq(sub_pwrite(a, "q", 1, 0), -EIO);
	ck_assert_int_eq(sub_fstat(a, &st), -EIO);
	ck_assert_int_eq(sub_stat_path(v, "a", &st), -EIO);
	ck_assert_int_eq(sub_open(v, "a", O_RDONLY, 0, &f), -EIO);
	ck_assert_int_eq(sub_mkdir(v, "dir", 0755), -EIO);
	ck_assert_int_eq(sub_close(a), -EIO); /* and still frees the file */

	assert_content("a", "durable-A");
	assert_content("b", ""); /* the create was synchronous, the data was not */
	assert_content("c", "c-old");
	assert_content("e", "dd");
	assert_content("t", "");
	ck_assert_int_eq(sub_stat_path(plain, "gone", &st), -ENOENT);
	sub_destroy(v);
}
END_TEST

START_TEST(crash_handles_overlap_extend_truncate)
{
	const char *base = "0123456789";
	for (int mode = 0; mode < 2; mode++) {
		sub_vfs *v = fault_open(mode == 0 ? "crash_mode=drop" : "crash_mode=keep");
		sub_file *f = create(v, "f");
		write_str(f, base, 0);
		ck_assert_int_eq(sub_fsync(f), 0);
		write_str(f, "abcdef", 3); /* in place */
		write_str(f, "XYZ", 8);    /* overlaps and extends */
		ck_assert_int_eq(sub_ftruncate(f, 4), 0);
		write_str(f, "Q", 20); /* leaves a hole */
		write_str(f, "zz", 2);
		ck_assert_int_eq(sub_ftruncate(f, 22), 0);
		char cur[22];
		ck_assert_int_eq(sub_pread_full(f, cur, sizeof(cur), 0), 0);
		ck_assert_int_eq(sub_close(f), 0);
		ck_assert_int_eq(sub_fault_crash(v), 0);
		sub_destroy(v);
		size_t len;
		char *got = slurp("f", &len);
		if (mode == 0) { /* every change reverted, in the right order */
			ck_assert_uint_eq(len, 10);
			ck_assert_int_eq(memcmp(got, base, 10), 0);
		} else { /* every change kept */
			ck_assert_uint_eq(len, 22);
			ck_assert_int_eq(memcmp(got, cur, 22), 0);
			ck_assert_int_eq(memcmp(got, "01zz", 4), 0);
			ck_assert_int_eq(got[20], 'Q');
		}
		free(got);
	}
}
END_TEST

/* 32 unsynced 4 KiB appends, block i filled with byte i+1, then a crash. */
static char *torn_run(const char *seed, size_t *len)
{
	char opts[64];
	snprintf(opts, sizeof(opts), "seed=%s", seed);
	sub_vfs *v = fault_open(opts);
	sub_file *f = create(v, "log");
	ck_assert_int_eq(sub_fsync(f), 0);
	char block[4096];
	for (int i = 0; i < 32; i++) {
		memset(block, i + 1, sizeof(block));
		ck_assert_int_eq(sub_pwrite_full(f, block, sizeof(block), (uint64_t)i * 4096), 0);
	}
	ck_assert_int_eq(sub_fault_crash(v), 0);
	ck_assert_int_eq(sub_close(f), -EIO);
	sub_destroy(v);
	char *got = slurp("log", len);
	ck_assert_ptr_nonnull(got);
	return got;
}

START_TEST(torn_writes_depend_on_seed_only)
{
	size_t l1, l2, l3;
	char *r1 = torn_run("7", &l1);
	char *r2 = torn_run("7", &l2);
	char *r3 = torn_run("8", &l3);
	ck_assert_uint_eq(l1, l2);
	ck_assert_int_eq(memcmp(r1, r2, l1), 0);
	ck_assert(l1 != l3 || memcmp(r1, r3, l1) != 0);

	/* Every sector is whole: the block's data or zeros, and within a block
	 * the data, when present, is a prefix (a tear keeps the front). */
	ck_assert_uint_eq(l1 % 512, 0);
	ck_assert_uint_le(l1, 32 * 4096);
	int kept = 0, dropped = 0, torn = 0;
	for (size_t b = 0; b * 4096 < l1; b++) {
		int data = 0, zero = 0, seen_zero = 0;
		for (size_t s = b * 4096; s < (b + 1) * 4096 && s < l1; s += 512) {
			char v = r1[s];
			for (size_t k = 0; k < 512; k++)
				ck_assert_int_eq(r1[s + k], v);
			if (v == (char)(b + 1)) {
				ck_assert_msg(!seen_zero, "data after a reverted sector in block %zu", b);
				data++;
			} else {
				ck_assert_int_eq(v, 0);
				zero++;
				seen_zero = 1;
			}
		}
		if (data == 8)
			kept++;
		else if (data == 0)
			dropped++;
		else
			torn++;
		(void)zero;
	}
	ck_assert_int_gt(kept, 0);
	ck_assert_int_gt(dropped, 0);
	ck_assert_int_gt(torn, 0);
	free(r1);
	free(r2);
	free(r3);
}
END_TEST

/* The crash reports its decision for every change; replaying the persisted
 * changes forwards onto the durable contents must give exactly the file the
 * backward undo left on disk. */
typedef struct decisions {
	char out[64][24];
	int n;
} decisions;

static void record_decision(void *arg, const char *point, const char *what)
{
	decisions *d = arg;
	if (strcmp(point, "crash-change") == 0 && d->n < 64)
		snprintf(d->out[d->n++], sizeof(d->out[0]), "%s", what);
}

typedef struct change {
	int trunc;
	uint64_t off, len, old_size, new_size;
	unsigned char byte;
} change;

START_TEST(random_crash_matches_forward_model)
{
	enum { BASE = 8192, SPAN = 20000, NCH = 40 };
	static unsigned char model[SPAN + 8192], buf[8192];
	int outcomes[3] = {0};
	for (int seed = 1; seed <= 25; seed++) {
		char opts[32];
		snprintf(opts, sizeof(opts), "seed=%d", seed);
		sub_vfs *v = fault_open(opts);
		sub_file *f = create(v, "m");
		memset(buf, 'o', BASE);
		ck_assert_int_eq(sub_pwrite_full(f, buf, BASE, 0), 0);
		ck_assert_int_eq(sub_fsync(f), 0);
		change ch[NCH];
		uint64_t size = BASE;
		uint32_t x = (uint32_t)seed * 2654435761u;
		for (int i = 0; i < NCH; i++) {
			x = x * 1103515245u + 12345u;
			uint32_t y = x * 1103515245u + 12345u;
			ch[i].old_size = size;
			if ((x >> 16) % 8 == 0) {
				ch[i].trunc = 1;
				ch[i].new_size = (y >> 8) % SPAN;
				ck_assert_int_eq(sub_ftruncate(f, ch[i].new_size), 0);
			} else {
				ch[i].trunc = 0;
				ch[i].off = (x >> 8) % 16000;
				ch[i].len = 1 + (y >> 8) % 4000;
				ch[i].byte = (unsigned char)('A' + i);
				memset(buf, ch[i].byte, ch[i].len);
				ck_assert_int_eq(sub_pwrite_full(f, buf, ch[i].len, ch[i].off), 0);
				ch[i].new_size = ch[i].off + ch[i].len > size ? ch[i].off + ch[i].len : size;
			}
			size = ch[i].new_size;
		}
		decisions d = {0};
		ck_assert_int_eq(sub_fault_set_hook(v, record_decision, &d), 0);
		ck_assert_int_eq(sub_fault_crash(v), 0);
		ck_assert_int_eq(sub_close(f), -EIO);
		sub_destroy(v);
		ck_assert_int_eq(d.n, NCH);

		memset(model, 0, sizeof(model));
		memset(model, 'o', BASE);
		uint64_t msize = BASE;
		for (int i = 0; i < NCH; i++) {
			const char *o = d.out[i];
			if (strcmp(o, "drop") == 0) {
				outcomes[1]++;
				continue;
			}
			if (ch[i].trunc) {
				/* What the file held from the lower size on is gone. */
				uint64_t lo = ch[i].new_size < ch[i].old_size ? ch[i].new_size : ch[i].old_size;
				ck_assert_str_eq(o, "keep");
				memset(model + lo, 0, sizeof(model) - lo);
				msize = ch[i].new_size;
			} else if (strcmp(o, "keep") == 0) {
				outcomes[0]++;
				memset(model + ch[i].off, ch[i].byte, ch[i].len);
				msize = ch[i].new_size;
			} else {
				ck_assert_int_eq(strncmp(o, "torn:", 5), 0);
				outcomes[2]++;
				uint64_t cut = strtoull(o + 5, NULL, 10);
				ck_assert_uint_eq(cut % 512, 0);
				ck_assert(cut > ch[i].off && cut < ch[i].off + ch[i].len);
				memset(model + ch[i].off, ch[i].byte, cut - ch[i].off);
				msize = ch[i].old_size > cut ? ch[i].old_size : cut;
			}
		}
		size_t len;
		char *got = slurp("m", &len);
		ck_assert_msg(len == msize, "seed %d: size %zu, model %llu", seed, len,
			      (unsigned long long)msize);
		for (size_t i = 0; i < len; i++)
			ck_assert_msg((unsigned char)got[i] == model[i], "seed %d: byte %zu is %d, model %d",
				      seed, i, got[i], model[i]);
		free(got);
	}
	for (int i = 0; i < 3; i++)
		ck_assert_int_gt(outcomes[i], 0);
}
END_TEST

static void remove_temps(const char *dir)
{
	char **names;
	size_t n;
	ck_assert_int_eq(sub_list(plain, dir, &names, &n), 0);
	for (size_t i = 0; i < n; i++) {
		if (strstr(names[i], ".tmp.")) {
			char p[SUB_PATH_MAX];
			ck_assert_int_eq(sub_join(p, sizeof(p), dir, names[i]), 0);
			ck_assert_int_eq(sub_unlink(plain, p), 0);
		}
	}
	sub_names_free(names, n);
}

START_TEST(crash_after_every_point_of_write_atomic)
{
	const char *old = "old contents, version 1", *new = "NEW contents -- version 2, longer";
	ck_assert_int_eq(sub_mkdir(plain, "m", 0755), 0);
	put("m/meta", old);
	sub_vfs *v = fault_open("");
	ck_assert_int_eq(sub_write_atomic(v, "m/meta", new, strlen(new)), 0);
	uint64_t m = sub_fault_mutations(v);
	sub_destroy(v);
	ck_assert_uint_eq(m, 5); /* create, write, fsync, rename, fsync_dir */

	for (uint64_t k = 0; k <= m; k++) {
		put("m/meta", old);
		remove_temps("m");
		char opts[64];
		snprintf(opts, sizeof(opts), "crash_after=%llu&seed=%llu", (unsigned long long)k,
			 (unsigned long long)k + 100);
		v = fault_open(opts);
		int rc = sub_write_atomic(v, "m/meta", new, strlen(new));
		if (k < m) {
			ck_assert_int_eq(rc, -EIO);
			ck_assert_int_eq(sub_fault_is_crashed(v), 1);
		} else {
			ck_assert_int_eq(rc, 0);
			ck_assert_int_eq(sub_fault_crash(v), 0);
		}
		ck_assert_uint_eq(sub_fault_mutations(v), k);
		sub_destroy(v);
		/* Old before the rename happened, new from then on, never a mix. */
		assert_content("m/meta", k < 4 ? old : new);
	}

	/* The same model catches an in-place rewrite: some crash point leaves
	 * neither the old nor the new contents. */
	int bad = 0;
	for (uint64_t k = 0; k <= 2; k++) {
		put("m/meta", old);
		char opts[64];
		snprintf(opts, sizeof(opts), "crash_after=%llu&crash_mode=drop", (unsigned long long)k);
		v = fault_open(opts);
		sub_file *f = NULL;
		int rc = sub_open(v, "m/meta", O_WRONLY | O_TRUNC, 0, &f);
		if (rc == 0)
			rc = sub_pwrite_full(f, new, strlen(new), 0);
		sub_close(f);
		sub_fault_crash(v);
		sub_destroy(v);
		size_t len;
		char *got = slurp("m/meta", &len);
		if (!((len == strlen(old) && memcmp(got, old, len) == 0) ||
		      (len == strlen(new) && memcmp(got, new, len) == 0)))
			bad++;
		free(got);
	}
	ck_assert_int_gt(bad, 0);
}
END_TEST

/* A log appended with an fsync per record, and a manifest written atomically
 * after each: at every crash point, the log holds at least the records the
 * manifest counts, intact. */
static void log_workload(sub_vfs *v)
{
	sub_file *f = NULL;
	if (sub_open(v, "log", O_CREAT | O_WRONLY, 0644, &f))
		return;
	char rec[1000], man[32];
	for (int i = 0; i < 4; i++) {
		memset(rec, 'a' + i, sizeof(rec));
		if (sub_pwrite_full(f, rec, sizeof(rec), (uint64_t)i * sizeof(rec)) || sub_fsync(f))
			break;
		int n = snprintf(man, sizeof(man), "%d", i + 1);
		if (sub_write_atomic(v, "manifest", man, (size_t)n))
			break;
	}
	sub_close(f);
}

START_TEST(crash_after_log_and_manifest)
{
	sub_vfs *v = fault_open("");
	log_workload(v);
	uint64_t m = sub_fault_mutations(v);
	sub_destroy(v);
	ck_assert_uint_eq(m, 1 + 4 * 7);
	for (uint64_t k = 0; k <= m; k++) {
		sub_unlink(plain, "log");
		sub_unlink(plain, "manifest");
		remove_temps("");
		char opts[64];
		snprintf(opts, sizeof(opts), "crash_after=%llu&seed=%llu", (unsigned long long)k,
			 (unsigned long long)k);
		v = fault_open(opts);
		log_workload(v);
		sub_fault_crash(v);
		sub_destroy(v);
		size_t llen = 0, mlen;
		char *log = slurp("log", &llen);
		char *man = slurp("manifest", &mlen);
		int count = man ? atoi(man) : 0;
		ck_assert_uint_ge(llen, (size_t)count * 1000);
		for (size_t i = 0; i < (size_t)count * 1000; i++)
			ck_assert_int_eq(log[i], 'a' + (int)(i / 1000));
		free(log);
		free(man);
	}
}
END_TEST

START_TEST(undo_memory_is_bounded)
{
	sub_vfs *v = fault_open("undo_max=16k&crash_mode=drop");
	sub_file *f = create(v, "f");
	static char big[65536], ones[8192];
	memset(big, 'b', sizeof(big));
	memset(ones, '1', sizeof(ones));
	ck_assert_int_eq(sub_pwrite_full(f, big, sizeof(big), 0), 0); /* appends cost no copy */
	ck_assert_int_eq(sub_fsync(f), 0);
	ck_assert_int_eq(sub_pwrite(f, ones, sizeof(ones), 0), (ssize_t)sizeof(ones));
	ck_assert_int_eq(sub_pwrite(f, ones, sizeof(ones), 8192), -ENOMEM);
	char c;
	ck_assert_int_eq(sub_pread_full(f, &c, 1, 8192), 0);
	ck_assert_int_eq(c, 'b'); /* the refused write did not happen */
	ck_assert_int_eq(sub_fsync(f), 0); /* frees the records */
	ck_assert_int_eq(sub_pwrite(f, ones, sizeof(ones), 8192), (ssize_t)sizeof(ones));
	ck_assert_int_eq(sub_fault_crash(v), 0);
	sub_close(f);
	sub_destroy(v);
	size_t len;
	char *got = slurp("f", &len);
	ck_assert_uint_eq(len, sizeof(big));
	ck_assert_int_eq(memcmp(got, ones, 8192), 0); /* synced */
	ck_assert_int_eq(memcmp(got + 8192, big, 8192), 0); /* reverted */
	free(got);
}
END_TEST

/* Changes to a file that lost its last name are moot: their undo memory is
 * released at once. */
START_TEST(unlinked_files_release_undo_memory)
{
	static char old12[12288], new12[12288];
	memset(old12, 'o', sizeof(old12));
	memset(new12, 'n', sizeof(new12));
	const char *names[] = {"x", "y", "z"};
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(sub_write_atomic(plain, names[i], old12, sizeof(old12)), 0);
	sub_vfs *v = fault_open("undo_max=20k");
	sub_file *f = NULL;
	ck_assert_int_eq(sub_open(v, "x", O_RDWR, 0, &f), 0);
	ck_assert_int_eq(sub_pwrite_full(f, new12, sizeof(new12), 0), 0);
	ck_assert_int_eq(sub_close(f), 0); /* unsynced: 12 KiB of undo */
	ck_assert_int_eq(sub_open(v, "y", O_RDWR, 0, &f), 0);
	ck_assert_int_eq(sub_pwrite(f, new12, sizeof(new12), 0), -ENOMEM);
	ck_assert_int_eq(sub_unlink(v, "x"), 0);
	ck_assert_int_eq(sub_pwrite_full(f, new12, sizeof(new12), 0), 0);
	ck_assert_int_eq(sub_close(f), 0);
	/* Replaced by a rename: the same. */
	ck_assert_int_eq(sub_write_atomic(v, "y", "short", 5), 0);
	ck_assert_int_eq(sub_open(v, "z", O_RDWR, 0, &f), 0);
	ck_assert_int_eq(sub_pwrite_full(f, new12, sizeof(new12), 0), 0);
	ck_assert_int_eq(sub_close(f), 0);
	sub_destroy(v);
}
END_TEST

START_TEST(append_mode_offsets)
{
	/* O_APPEND ignores the offset: the undo must record where the bytes went. */
	for (int mode = 0; mode < 2; mode++) {
		sub_vfs *v = fault_open(mode == 0 ? "crash_mode=drop" : "crash_mode=keep");
		sub_file *f = NULL;
		ck_assert_int_eq(sub_open(v, "a", O_CREAT | O_TRUNC | O_WRONLY | O_APPEND, 0644, &f), 0);
		write_str(f, "abc", 0);
		write_str(f, "def", 0);
		ck_assert_int_eq(sub_fsync(f), 0);
		write_str(f, "ghi", 0);
		assert_content("a", "abcdefghi");
		ck_assert_int_eq(sub_fault_crash(v), 0);
		sub_close(f);
		sub_destroy(v);
		assert_content("a", mode == 0 ? "abcdef" : "abcdefghi");
	}
}
END_TEST

typedef struct thr_arg {
	sub_vfs *v;
	int id;
} thr_arg;

static void *thr_writer(void *p)
{
	thr_arg *a = p;
	char name[16], rec[100];
	snprintf(name, sizeof(name), "t%d", a->id);
	sub_file *f = NULL;
	if (sub_open(a->v, name, O_CREAT | O_RDWR, 0644, &f))
		return (void *)1;
	memset(rec, '0' + a->id, sizeof(rec));
	for (int i = 0; i < 20; i++)
		if (sub_pwrite_full(f, rec, sizeof(rec), (uint64_t)i * sizeof(rec)) || sub_fsync(f))
			return (void *)1;
	memset(rec, 'x', sizeof(rec));
	if (sub_pwrite_full(f, rec, sizeof(rec), 2000)) /* never synced */
		return (void *)1;
	return f;
}

START_TEST(threads_share_one_vfs)
{
	sub_vfs *v = fault_open("crash_mode=drop");
	pthread_t t[4];
	thr_arg a[4];
	for (int i = 0; i < 4; i++) {
		a[i] = (thr_arg){v, i};
		ck_assert_int_eq(pthread_create(&t[i], NULL, thr_writer, &a[i]), 0);
	}
	sub_file *files[4];
	for (int i = 0; i < 4; i++) {
		void *r;
		ck_assert_int_eq(pthread_join(t[i], &r), 0);
		ck_assert_ptr_ne(r, (void *)1);
		files[i] = r;
	}
	ck_assert_int_eq(sub_fault_crash(v), 0);
	for (int i = 0; i < 4; i++)
		sub_close(files[i]);
	sub_destroy(v);
	for (int i = 0; i < 4; i++) {
		char name[16];
		size_t len;
		snprintf(name, sizeof(name), "t%d", i);
		char *got = slurp(name, &len);
		ck_assert_uint_eq(len, 2000);
		for (size_t k = 0; k < len; k++)
			ck_assert_int_eq(got[k], '0' + i);
		free(got);
	}
}
END_TEST

/* ---- fsync=lie ------------------------------------------------------------ */

START_TEST(fsync_lie_holds_writes_until_close)
{
	sub_vfs *v = fault_open("fsync=lie&crash_mode=drop");
	sub_vfs *other = fault_open("");
	sub_file *f = create(v, "f");
	write_str(f, "abcdef", 0);
	ck_assert_int_eq(sub_ftruncate(f, 3), 0);
	write_str(f, "Z", 5);
	ck_assert_int_eq(sub_fsync(f), 0);
	ck_assert_int_eq(sub_fsync_dir(v, ""), 0);

	/* This client sees its writes; nobody else does. */
	char buf[16];
	sub_stat st;
	ck_assert_int_eq(sub_pread(f, buf, sizeof(buf), 0), 6);
	ck_assert_int_eq(memcmp(buf, "abc\0\0Z", 6), 0);
	ck_assert_int_eq(sub_fstat(f, &st), 0);
	ck_assert_uint_eq(st.size, 6);
	ck_assert_int_eq(sub_stat_path(v, "f", &st), 0);
	ck_assert_uint_eq(st.size, 6);
	char *got;
	size_t len;
	ck_assert_int_eq(sub_read_file(other, "f", 64, &got, &len), 0);
	ck_assert_uint_eq(len, 0);
	free(got);
	assert_content("f", "");

	/* Close passes them on, still unsynced: a crash takes them back. */
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_read_file(other, "f", 64, &got, &len), 0);
	ck_assert_uint_eq(len, 6);
	ck_assert_int_eq(memcmp(got, "abc\0\0Z", 6), 0);
	free(got);
	/* A later fsync lies too: it does not make the closed writes durable. */
	ck_assert_int_eq(sub_open(v, "f", O_RDWR, 0, &f), 0);
	ck_assert_int_eq(sub_fsync(f), 0);
	ck_assert_int_eq(sub_fault_crash(v), 0);
	ck_assert_int_eq(sub_close(f), -EIO);
	assert_content("f", "");
	sub_destroy(other);
	sub_destroy(v);
}
END_TEST

START_TEST(fsync_lie_loses_data_on_crash_and_kill)
{
	/* In this process: write, fsync, crash before close. */
	sub_vfs *v = fault_open("fsync=lie");
	sub_file *f = create(v, "f");
	write_str(f, "acknowledged", 0);
	ck_assert_int_eq(sub_fsync(f), 0);
	ck_assert_int_eq(sub_fault_crash(v), 0);
	ck_assert_int_eq(sub_close(f), -EIO);
	sub_destroy(v);
	assert_content("f", "");

	/* Another process: write, fsync, killed. */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char url[512], err[256];
		sub_vfs *cv = NULL;
		sub_file *cf = NULL;
		snprintf(url, sizeof(url), "fault:%s?fsync=lie", vol.dir);
		if (sub_open_url(url, &cv, err, sizeof(err)) ||
		    sub_open(cv, "g", O_CREAT | O_WRONLY, 0644, &cf) ||
		    sub_pwrite_full(cf, "acknowledged", 12, 0) || sub_fsync(cf))
			_exit(1);
		_exit(0);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_content("g", "");

	/* Control: the honest default keeps it. */
	v = fault_open("");
	f = create(v, "h");
	write_str(f, "acknowledged", 0);
	ck_assert_int_eq(sub_fsync(f), 0);
	ck_assert_int_eq(sub_fault_crash(v), 0);
	sub_close(f);
	sub_destroy(v);
	assert_content("h", "acknowledged");
}
END_TEST

/* ---- rename=copy ---------------------------------------------------------- */

typedef struct watch {
	int chunks;
	int64_t first_target_size;
	int source_present;
	int entries;
	int partial_dir; /* both source and target directories had entries */
} watch;

static void watch_hook(void *arg, const char *point, const char *path)
{
	watch *w = arg;
	sub_stat st;
	if (strcmp(point, "rename-copy-chunk") == 0 && strcmp(path, "dst") == 0) {
		if (w->chunks++ == 0) {
			ck_assert_int_eq(sub_stat_path(plain, "dst", &st), 0);
			w->first_target_size = (int64_t)st.size;
			w->source_present = sub_stat_path(plain, "src", &st) == 0;
		}
	} else if (strcmp(point, "rename-copy-entry") == 0) {
		char **a, **b;
		size_t na, nb;
		w->entries++;
		if (sub_list(plain, "d", &a, &na) == 0) {
			ck_assert_int_eq(sub_list(plain, "d2", &b, &nb), 0);
			if (na > 0 && nb > 0)
				w->partial_dir = 1;
			sub_names_free(b, nb);
			sub_names_free(a, na);
		}
	}
}

START_TEST(rename_copy_is_a_new_inode_and_not_atomic)
{
	static char pattern[10000];
	for (size_t i = 0; i < sizeof(pattern); i++)
		pattern[i] = (char)('A' + i % 26);
	ck_assert_int_eq(sub_write_atomic(plain, "src", pattern, sizeof(pattern)), 0);
	sub_stat before, after;
	ck_assert_int_eq(sub_stat_path(plain, "src", &before), 0);

	sub_vfs *v = fault_open("rename=copy");
	sub_file *held = NULL;
	ck_assert_int_eq(sub_open(v, "src", O_RDONLY, 0, &held), 0);
	watch w = {0};
	ck_assert_int_eq(sub_fault_set_hook(v, watch_hook, &w), 0);
	ck_assert_int_eq(sub_rename(v, "src", "dst"), 0);
	ck_assert_int_eq(w.chunks, 3);
	ck_assert_int_eq(w.first_target_size, 4096); /* a reader saw a short target */
	ck_assert_int_eq(w.source_present, 1);

	ck_assert_int_eq(sub_stat_path(plain, "src", &after), -ENOENT);
	ck_assert_int_eq(sub_stat_path(plain, "dst", &after), 0);
	ck_assert_uint_ne(after.ino, before.ino);
	size_t len;
	char *got = slurp("dst", &len);
	ck_assert_uint_eq(len, sizeof(pattern));
	ck_assert_int_eq(memcmp(got, pattern, len), 0);
	free(got);
	/* The descriptor opened before still reads the old, unlinked file. */
	char buf[26];
	ck_assert_int_eq(sub_pread_full(held, buf, sizeof(buf), 0), 0);
	ck_assert_int_eq(memcmp(buf, pattern, sizeof(buf)), 0);
	ck_assert_int_eq(sub_close(held), 0);

	/* A directory moves entry by entry. */
	ck_assert_int_eq(sub_mkdirs(plain, "d/s", 0755), 0);
	put("d/a", "1");
	put("d/b", "22");
	put("d/s/x", "333");
	ck_assert_int_eq(sub_rename(v, "d", "d2"), 0);
	ck_assert_int_eq(w.entries, 4); /* a, b, s/x, s */
	ck_assert_int_eq(w.partial_dir, 1);
	ck_assert_int_eq(sub_stat_path(plain, "d", &after), -ENOENT);
	assert_content("d2/a", "1");
	assert_content("d2/b", "22");
	assert_content("d2/s/x", "333");
	sub_destroy(v);

	/* Control: the default rename keeps the inode. */
	v = fault_open("");
	ck_assert_int_eq(sub_stat_path(plain, "dst", &before), 0);
	ck_assert_int_eq(sub_rename(v, "dst", "dst2"), 0);
	ck_assert_int_eq(sub_stat_path(plain, "dst2", &after), 0);
	ck_assert_uint_eq(after.ino, before.ino);
	sub_destroy(v);
}
END_TEST

/* ---- excl=broken ---------------------------------------------------------- */

START_TEST(excl_broken_lets_two_creators_win)
{
	sub_vfs *v1 = fault_open("excl=broken"), *v2 = fault_open("excl=broken");
	sub_file *f1 = NULL, *f2 = NULL;
	ck_assert_int_eq(sub_open(v1, "claim", O_CREAT | O_EXCL | O_WRONLY, 0644, &f1), 0);
	ck_assert_int_eq(sub_open(v2, "claim", O_CREAT | O_EXCL | O_WRONLY, 0644, &f2), 0);
	sub_close(f1);
	sub_close(f2);
	ck_assert_int_eq(sub_create_excl(v1, "c2", "me", 2), 0);
	ck_assert_int_eq(sub_create_excl(v2, "c2", "you", 3), 0);
	assert_content("c2", "you");
	sub_destroy(v1);
	sub_destroy(v2);

	sub_vfs *v3 = fault_open("");
	ck_assert_int_eq(sub_create_excl(v3, "c2", "again", 5), -EEXIST);
	sub_destroy(v3);
}
END_TEST

/* ---- excl=eperm ----------------------------------------------------------- */

START_TEST(excl_eperm_tells_the_loser_eperm)
{
	sub_vfs *v1 = fault_open("excl=eperm"), *v2 = fault_open("excl=eperm");
	ck_assert_int_eq(sub_create_excl(v1, "claim", "me", 2), 0);
	ck_assert_int_eq(sub_create_excl(v2, "claim", "you", 3), -EPERM);
	ck_assert_int_eq(sub_create_excl(v1, "claim", "me again", 8), -EPERM);
	assert_content("claim", "me");
	/* Only the answer to a lost exclusive create changes. */
	sub_file *f = NULL;
	ck_assert_int_eq(sub_open(v2, "claim", O_CREAT | O_WRONLY, 0644, &f), 0);
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_open(v2, "nodir/x", O_CREAT | O_EXCL | O_WRONLY, 0644, &f), -ENOENT);
	ck_assert_int_eq(sub_mkdir(v2, "dir", 0755), 0);
	ck_assert_int_eq(sub_mkdir(v2, "dir", 0755), -EEXIST);
	sub_destroy(v1);
	sub_destroy(v2);
}
END_TEST

/* ---- rename=hide ---------------------------------------------------------- */

typedef struct hide_watch {
	int hides;
	int target_missing; /* the target's name was gone while hidden */
	char hidden[256];
} hide_watch;

static void hide_hook(void *arg, const char *point, const char *what)
{
	hide_watch *w = arg;
	if (strcmp(point, "rename-hide") != 0)
		return;
	w->hides++;
	snprintf(w->hidden, sizeof(w->hidden), "%s", what);
	sub_stat st;
	w->target_missing = sub_stat_path(plain, "d/t", &st) == -ENOENT &&
			    sub_stat_path(plain, what, &st) == 0;
}

/* Names in d other than "t" that start with ".fuse_hidden". */
static int hidden_in_d(void)
{
	char **names;
	size_t n;
	int k = 0;
	ck_assert_int_eq(sub_list(plain, "d", &names, &n), 0);
	for (size_t i = 0; i < n; i++)
		k += strncmp(names[i], ".fuse_hidden", 12) == 0;
	sub_names_free(names, n);
	return k;
}

START_TEST(rename_hide_moves_an_open_target_aside)
{
	ck_assert_int_eq(sub_mkdir(plain, "d", 0755), 0);
	put("d/t", "old");
	put("d/n", "new");
	sub_vfs *v = fault_open("rename=hide&copy_delay_us=0");
	hide_watch w = {0};
	ck_assert_int_eq(sub_fault_set_hook(v, hide_hook, &w), 0);
	sub_file *held = NULL;
	char buf[3];
	ck_assert_int_eq(sub_open(v, "d/t", O_RDONLY, 0, &held), 0);
	ck_assert_int_eq(sub_rename(v, "d/n", "d/t"), 0);
	/* Between hiding the old target and the rename, the name was gone. */
	ck_assert_int_eq(w.hides, 1);
	ck_assert_int_eq(w.target_missing, 1);
	ck_assert_int_eq(strncmp(w.hidden, "d/.fuse_hidden", 14), 0);
	assert_content("d/t", "new");
	ck_assert_int_eq(hidden_in_d(), 1);
	ck_assert_int_eq(sub_pread_full(held, buf, 3, 0), 0);
	ck_assert_int_eq(memcmp(buf, "old", 3), 0);
	/* The hidden file goes with the last close. */
	ck_assert_int_eq(sub_close(held), 0);
	ck_assert_int_eq(hidden_in_d(), 0);

	/* A target nobody here holds is replaced directly. */
	put("d/n", "newer");
	ck_assert_int_eq(sub_rename(v, "d/n", "d/t"), 0);
	ck_assert_int_eq(w.hides, 1);
	assert_content("d/t", "newer");

	/* Unlinking a file held open hides it until it is closed. */
	ck_assert_int_eq(sub_open(v, "d/t", O_RDONLY, 0, &held), 0);
	ck_assert_int_eq(sub_unlink(v, "d/t"), 0);
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(plain, "d/t", &st), -ENOENT);
	ck_assert_int_eq(hidden_in_d(), 1);
	ck_assert_int_eq(sub_close(held), 0);
	ck_assert_int_eq(hidden_in_d(), 0);
	ck_assert_int_eq(sub_rmdir(v, "d"), 0);
	sub_destroy(v);

	/* Control: the default rename never hides. */
	ck_assert_int_eq(sub_mkdir(plain, "d", 0755), 0);
	put("d/t", "old");
	put("d/n", "new");
	v = fault_open("");
	ck_assert_int_eq(sub_open(v, "d/t", O_RDONLY, 0, &held), 0);
	ck_assert_int_eq(sub_rename(v, "d/n", "d/t"), 0);
	ck_assert_int_eq(hidden_in_d(), 0);
	ck_assert_int_eq(sub_close(held), 0);
	sub_destroy(v);
}
END_TEST

/* ---- cto=stale ------------------------------------------------------------ */

static char *vread(sub_vfs *v, const char *path)
{
	char *buf;
	size_t len;
	ck_assert_int_eq(sub_read_file(v, path, 1 << 20, &buf, &len), 0);
	return buf;
}

START_TEST(cto_stale_serves_first_contents)
{
	put("f", "version-1");
	sub_vfs *v = fault_open("cto=stale"), *fresh = fault_open("");
	char *s = vread(v, "f");
	ck_assert_str_eq(s, "version-1");
	free(s);

	put("f", "version-two, longer"); /* another client rewrites and closes */
	s = vread(v, "f");
	ck_assert_str_eq(s, "version-1");
	free(s);
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(v, "f", &st), 0);
	ck_assert_uint_eq(st.size, 9);
	s = vread(fresh, "f");
	ck_assert_str_eq(s, "version-two, longer");
	free(s);

	/* Same-size rewrite in place: still stale. */
	sub_file *f = NULL;
	ck_assert_int_eq(sub_open(plain, "f", O_WRONLY | O_TRUNC, 0, &f), 0);
	write_str(f, "VERSION-3", 0);
	ck_assert_int_eq(sub_close(f), 0);
	s = vread(v, "f");
	ck_assert_str_eq(s, "version-1");
	free(s);

	/* Its own writes it does see. */
	ck_assert_int_eq(sub_write_atomic(v, "f", "mine", 4), 0);
	s = vread(v, "f");
	ck_assert_str_eq(s, "mine");
	free(s);
	ck_assert_int_eq(sub_open(v, "f", O_WRONLY | O_TRUNC, 0, &f), 0);
	write_str(f, "mine, in place", 0);
	ck_assert_int_eq(sub_close(f), 0);
	s = vread(v, "f");
	ck_assert_str_eq(s, "mine, in place");
	free(s);
	sub_destroy(fresh);
	sub_destroy(v);
}
END_TEST

START_TEST(cto_size_keeps_the_first_size)
{
	put("f", "version-1");
	sub_vfs *v = fault_open("cto=size"), *fresh = fault_open("");
	char *s = vread(v, "f");
	ck_assert_str_eq(s, "version-1");
	free(s);

	/* Another client grows the file: new bytes, but only as many as the
	 * size this client cached (a FUSE attribute cache). */
	put("f", "VERSION-2, longer");
	s = vread(v, "f");
	ck_assert_str_eq(s, "VERSION-2");
	free(s);
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(v, "f", &st), 0);
	ck_assert_uint_eq(st.size, 9);
	sub_file *f = NULL;
	ck_assert_int_eq(sub_open(v, "f", O_RDONLY, 0, &f), 0);
	ck_assert_int_eq(sub_fstat(f, &st), 0);
	ck_assert_uint_eq(st.size, 9);
	ck_assert_int_eq(sub_close(f), 0);
	s = vread(fresh, "f");
	ck_assert_str_eq(s, "VERSION-2, longer");
	free(s);

	/* A same-size rewrite in place is seen whole. */
	ck_assert_int_eq(sub_open(plain, "f", O_WRONLY | O_TRUNC, 0, &f), 0);
	write_str(f, "version-3", 0);
	ck_assert_int_eq(sub_close(f), 0);
	s = vread(v, "f");
	ck_assert_str_eq(s, "version-3");
	free(s);

	/* Its own writes drop the cached size. */
	ck_assert_int_eq(sub_write_atomic(v, "f", "mine, and longer", 16), 0);
	s = vread(v, "f");
	ck_assert_str_eq(s, "mine, and longer");
	free(s);
	sub_destroy(fresh);
	sub_destroy(v);
}
END_TEST

/* ---- options, identity, API ---------------------------------------------- */

/* How many of this process's descriptors are open on vol.dir/name (deleted
 * or not). */
static int open_on(const char *name)
{
	char want[400], link[600], p[300];
	snprintf(want, sizeof(want), "%s/%s", vol.dir, name);
	DIR *d = opendir("/proc/self/fd");
	ck_assert_ptr_nonnull(d);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		ssize_t l = readlink(p, link, sizeof(link) - 1);
		if (l <= 0)
			continue;
		link[l] = '\0';
		if (strncmp(link, want, strlen(want)) == 0 &&
		    (link[strlen(want)] == '\0' || strcmp(link + strlen(want), " (deleted)") == 0))
			n++;
	}
	closedir(d);
	return n;
}

/* leak=GLOB: the application's close of a matching file succeeds, but the
 * client keeps it open underneath until the vfs is destroyed, so a deleted
 * file keeps its space (a negative control for unlink-open); other files
 * close for real. */
START_TEST(leak_keeps_matching_files_open_until_destroy)
{
	sub_vfs *v = fault_open("leak=*/victim*");
	ck_assert_int_eq(sub_mkdir(v, "d", 0755), 0);
	sub_file *a = create(v, "d/victim1");
	sub_file *b = create(v, "d/other");
	write_str(a, "held", 0);
	write_str(b, "free", 0);
	/* Synced: no undo record keeps a handle for the crash model. */
	ck_assert_int_eq(sub_fsync(a), 0);
	ck_assert_int_eq(sub_fsync(b), 0);
	ck_assert_int_eq(sub_close(a), 0);
	ck_assert_int_eq(sub_close(b), 0);
	ck_assert_int_eq(open_on("d/victim1"), 1);
	ck_assert_int_eq(open_on("d/other"), 0);
	/* Deleted by another client: still open, as a deleted file. */
	ck_assert_int_eq(sub_unlink(plain, "d/victim1"), 0);
	ck_assert_int_eq(open_on("d/victim1"), 1);
	/* Reopened and closed again: another descriptor kept. */
	a = create(v, "d/victim2");
	ck_assert_int_eq(sub_close(a), 0);
	ck_assert_int_eq(open_on("d/victim2"), 1);
	sub_destroy(v);
	ck_assert_int_eq(open_on("d/victim1"), 0);
	ck_assert_int_eq(open_on("d/victim2"), 0);
}
END_TEST

/* statvfs=none: a volume without space accounting, 0 blocks and 0 free
 * whatever the inner volume has; honest is the default. */
START_TEST(statvfs_none_reports_no_accounting)
{
	sub_fsinfo fi;
	sub_vfs *v = fault_open("statvfs=none");
	ck_assert_int_eq(sub_statvfs(v, "", &fi), 0);
	ck_assert_uint_eq(fi.blocks, 0);
	ck_assert_uint_eq(fi.bfree, 0);
	ck_assert_uint_eq(fi.bavail, 0);
	ck_assert_uint_gt(fi.bsize, 0);
	sub_destroy(v);
	v = fault_open("statvfs=honest");
	ck_assert_int_eq(sub_statvfs(v, "", &fi), 0);
	ck_assert_uint_gt(fi.blocks, 0);
	sub_destroy(v);
}
END_TEST

START_TEST(bad_options_are_rejected)
{
	static const struct {
		const char *opts, *mention;
	} bad[] = {
		{"bogus=1", "bogus"},
		{"novalue", "novalue"},
		{"fail=pwrite:x:EIO", "fail=pwrite:x:EIO"},
		{"fail=pwrite:0:EIO", "fail=pwrite:0:EIO"},
		{"fail=pwrite:1:EWHAT", "EWHAT"},
		{"fail=frob:1:EIO", "frob"},
		{"fail=pwrite:1", "fail=pwrite:1"},
		{"failpath=:open:EIO", "failpath"},
		{"failpath=*.log:open:NOPE", "NOPE"},
		{"failpath=*.log:scribble:EIO", "scribble"},
		{"seed=abc", "seed"},
		{"seed=-1", "seed"},
		{"seed=99999999999999999999999", "seed"},
		{"crash_after=1x", "crash_after"},
		{"fsync=maybe", "fsync"},
		{"rename=move", "rename"},
		{"excl=yes", "excl"},
		{"cto=old", "cto"},
		{"crash_mode=torn", "crash_mode"},
		{"undo_max=12Q", "undo_max"},
		{"copy_delay_us=soon", "copy_delay_us"},
		{"copy_delay_us=99999999", "copy_delay_us"},
		{"seed=1&rename=copy&bogus=2", "bogus=2"},
		{"leak=", "leak"},
		{"statvfs=zero", "statvfs"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char url[512], err[256] = "";
		sub_vfs *v = NULL;
		snprintf(url, sizeof(url), "fault:%s?%s", vol.dir, bad[i].opts);
		ck_assert_int_eq(sub_open_url(url, &v, err, sizeof(err)), -EINVAL);
		ck_assert_ptr_null(v);
		ck_assert_msg(strstr(err, bad[i].mention) != NULL, "'%s': %s", bad[i].opts, err);
		ck_assert_ptr_null(strchr(err, '\n'));
	}
	char err[256] = "";
	sub_vfs *v = NULL;
	ck_assert_int_eq(sub_open_url("fault:?seed=1", &v, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "inner"));
	ck_assert_int_lt(sub_open_url("fault:/nonexistent/kaas?seed=1", &v, err, sizeof(err)), 0);
}
END_TEST

START_TEST(options_follow_the_last_question_mark)
{
	char url[512], err[256] = "";
	sub_vfs *v = NULL;
	ck_assert_int_eq(sub_mkdir(plain, "d?x", 0755), 0);
	snprintf(url, sizeof(url), "fault:%s/d?x?rename=copy&seed=3", vol.dir);
	ck_assert_int_eq(sub_open_url(url, &v, err, sizeof(err)), 0);
	sub_identity id;
	ck_assert_int_eq(sub_identity_of(v, &id), 0);
	ck_assert_str_eq(id.backend, "fault");
	ck_assert_ptr_nonnull(strstr(id.options, "fault.rename=copy"));
	ck_assert_ptr_nonnull(strstr(id.options, "fault.seed=3"));
	ck_assert_ptr_nonnull(strstr(id.root, "/d?x"));
	ck_assert_int_eq(strncmp(id.root, "fault:", 6), 0);
	ck_assert_int_gt(strlen(id.fstype), 0);
	ck_assert_int_eq(sub_write_atomic(v, "inside", "1", 1), 0);
	sub_destroy(v);
	assert_content("d?x/inside", "1");

	/* A bare trailing '?' means no options; no '?' at all too. */
	snprintf(url, sizeof(url), "fault:%s?", vol.dir);
	ck_assert_int_eq(sub_open_url(url, &v, err, sizeof(err)), 0);
	sub_destroy(v);
	snprintf(url, sizeof(url), "fault:%s", vol.dir);
	ck_assert_int_eq(sub_open_url(url, &v, err, sizeof(err)), 0);
	sub_destroy(v);
}
END_TEST

START_TEST(mutation_counting_and_api_checks)
{
	sub_vfs *v = fault_open("");
	sub_file *f = NULL;
	sub_stat st;
	sub_fsinfo fi;
	char buf[4];
	ck_assert_int_eq(sub_mkdir(v, "d", 0755), 0);                             /* 1 */
	ck_assert_int_eq(sub_open(v, "d/f", O_CREAT | O_RDWR, 0644, &f), 0);      /* 2 */
	write_str(f, "abc", 0);                                                   /* 3 */
	ck_assert_int_eq(sub_fsync(f), 0);                                        /* 4 */
	ck_assert_int_eq(sub_ftruncate(f, 2), 0);                                 /* 5 */
	ck_assert_int_eq(sub_pread(f, buf, sizeof(buf), 0), 2);
	ck_assert_int_eq(sub_fstat(f, &st), 0);
	ck_assert_int_eq(sub_native_fd(f), -1);
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_open(v, "d/f", O_RDONLY, 0, &f), 0);
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_stat_path(v, "d/f", &st), 0);
	ck_assert_int_eq(sub_statvfs(v, "", &fi), 0);
	ck_assert_uint_gt(fi.blocks, 0);
	char **names;
	size_t n;
	ck_assert_int_eq(sub_list(v, "d", &names, &n), 0);
	ck_assert_uint_eq(n, 1);
	sub_names_free(names, n);
	ck_assert_uint_eq(sub_fault_mutations(v), 5);
	ck_assert_int_eq(sub_fsync_dir(v, "d"), 0);                               /* 6 */
	ck_assert_int_eq(sub_rename(v, "d/f", "d/g"), 0);                         /* 7 */
	ck_assert_int_eq(sub_unlink(v, "d/g"), 0);                                /* 8 */
	ck_assert_int_eq(sub_rmdir(v, "d"), 0);                                   /* 9 */
	ck_assert_uint_eq(sub_fault_mutations(v), 9);
	ck_assert_int_eq(sub_fault_check(v), 0);
	sub_destroy(v);

	ck_assert_int_eq(sub_fault_check(plain), -EINVAL);
	ck_assert_int_eq(sub_fault_check(NULL), -EINVAL);
	ck_assert_int_eq(sub_fault_crash(plain), -EINVAL);
	ck_assert_int_eq(sub_fault_is_crashed(plain), -EINVAL);
	ck_assert_uint_eq(sub_fault_mutations(plain), 0);
	ck_assert_int_eq(sub_fault_set_hook(plain, NULL, NULL), -EINVAL);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "substrates-fault", .tcase = "fault", .timeout = 60,
					  .setup = setup, .teardown = teardown },
			  KTEST_LIST(fail_nth_and_from_nth, fail_by_path,
				     crash_reverts_unsynced_keeps_synced,
				     crash_handles_overlap_extend_truncate,
				     torn_writes_depend_on_seed_only, random_crash_matches_forward_model,
				     crash_after_every_point_of_write_atomic, crash_after_log_and_manifest,
				     undo_memory_is_bounded, unlinked_files_release_undo_memory,
				     append_mode_offsets, threads_share_one_vfs,
				     fsync_lie_holds_writes_until_close,
				     fsync_lie_loses_data_on_crash_and_kill,
				     rename_copy_is_a_new_inode_and_not_atomic,
				     excl_broken_lets_two_creators_win, cto_stale_serves_first_contents,
				     excl_eperm_tells_the_loser_eperm,
				     rename_hide_moves_an_open_target_aside, cto_size_keeps_the_first_size,
				     leak_keeps_matching_files_open_until_destroy,
				     bad_options_are_rejected, statvfs_none_reports_no_accounting,
				     options_follow_the_last_question_mark,
				     mutation_counting_and_api_checks));
}
