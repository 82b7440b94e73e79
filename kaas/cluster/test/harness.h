/*
 * harness.h — shared pieces of the cluster tests: a scratch directory on
 * the posix backend, and a wrapping substrate that counts what is read and
 * can lose the reply of an exclusive create (the server made the file, the
 * client is told EEXIST on its retransmission), which the fault backend
 * does not model.
 */
#ifndef KAAS_CLUSTER_TEST_HARNESS_H
#define KAAS_CLUSTER_TEST_HARNESS_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "substrates/sub.h"
#include "substrates/test/scratch.h"

/* The test's scratch volume (substrates/test/scratch.h), in memory where
 * there is some. */
static scratch h_scratch;
#define h_dir (h_scratch.dir)
#define h_vfs (h_scratch.vfs)

static inline void h_setup(void)
{
	scratch_open_mem(&h_scratch, "cluster");
}

static inline void h_teardown(void)
{
	scratch_close(&h_scratch);
}

/* ---- the wrapping substrate ------------------------------------------------ */

typedef struct wrap_vfs {
	sub_vfs base;
	sub_vfs *inner;
	int lose_excl_reply;     /* next N O_EXCL creates: made, then "EEXIST" */
	int fail_after_dirsync;  /* next N fsync_dir: done, then "EIO" */
	uint64_t bytes_read, reads, opens;
} wrap_vfs;

typedef struct wrap_file {
	sub_file base;
	sub_file *inner;
} wrap_file;

static const sub_methods wrap_methods;

static inline sub_file *wf_inner(sub_file *f) { return ((wrap_file *)f)->inner; }
static inline wrap_vfs *wv(sub_vfs *v) { return (wrap_vfs *)v; }

static int w_open(sub_vfs *v, const char *path, int flags, unsigned mode, sub_file **out)
{
	wrap_vfs *w = wv(v);
	sub_file *in = NULL;
	w->opens++;
	int rc = sub_open(w->inner, path, flags, mode, &in);
	if (rc)
		return rc;
	if ((flags & O_EXCL) && w->lose_excl_reply > 0) {
		/* The server created the file; the reply is lost and the client's
		 * retransmission is answered "exists". */
		w->lose_excl_reply--;
		sub_close(in);
		return -EEXIST;
	}
	wrap_file *f = calloc(1, sizeof(*f));
	if (!f) {
		sub_close(in);
		return -ENOMEM;
	}
	f->base.vfs = v;
	f->inner = in;
	*out = &f->base;
	return 0;
}

static int w_close(sub_file *f)
{
	int rc = sub_close(wf_inner(f));
	free(f);
	return rc;
}

static ssize_t w_pread(sub_file *f, void *b, size_t n, uint64_t off)
{
	ssize_t r = sub_pread(wf_inner(f), b, n, off);
	wrap_vfs *w = wv(f->vfs);
	w->reads++;
	if (r > 0)
		w->bytes_read += (uint64_t)r;
	return r;
}

static ssize_t w_pwrite(sub_file *f, const void *b, size_t n, uint64_t off)
{ return sub_pwrite(wf_inner(f), b, n, off); }
static int w_fsync(sub_file *f) { return sub_fsync(wf_inner(f)); }
static int w_ftruncate(sub_file *f, uint64_t s) { return sub_ftruncate(wf_inner(f), s); }
static int w_fstat(sub_file *f, sub_stat *st) { return sub_fstat(wf_inner(f), st); }
static int w_stat(sub_vfs *v, const char *p, sub_stat *st) { return sub_stat_path(wv(v)->inner, p, st); }
static int w_rename(sub_vfs *v, const char *a, const char *b) { return sub_rename(wv(v)->inner, a, b); }
static int w_unlink(sub_vfs *v, const char *p) { return sub_unlink(wv(v)->inner, p); }
static int w_mkdir(sub_vfs *v, const char *p, unsigned m) { return sub_mkdir(wv(v)->inner, p, m); }
static int w_rmdir(sub_vfs *v, const char *p) { return sub_rmdir(wv(v)->inner, p); }
static int w_readdir(sub_vfs *v, const char *p, sub_readdir_cb cb, void *arg)
{ return sub_readdir(wv(v)->inner, p, cb, arg); }
static int w_fsync_dir(sub_vfs *v, const char *p)
{
	wrap_vfs *w = wv(v);
	int rc = sub_fsync_dir(w->inner, p);
	if (rc == 0 && w->fail_after_dirsync > 0) {
		w->fail_after_dirsync--;
		return -EIO;
	}
	return rc;
}
static int w_statvfs(sub_vfs *v, const char *p, sub_fsinfo *s) { return sub_statvfs(wv(v)->inner, p, s); }
static int w_identity(sub_vfs *v, sub_identity *id) { return sub_identity_of(wv(v)->inner, id); }
static int w_native_fd(sub_file *f) { (void)f; return -1; }
static void w_destroy(sub_vfs *v) { free(v); }

static const sub_methods wrap_methods = {
	.name = "wrap", .open = w_open, .close = w_close, .pread = w_pread, .pwrite = w_pwrite,
	.fsync = w_fsync, .ftruncate = w_ftruncate, .fstat = w_fstat, .stat = w_stat,
	.rename = w_rename, .unlink = w_unlink, .mkdir = w_mkdir, .rmdir = w_rmdir,
	.readdir = w_readdir, .fsync_dir = w_fsync_dir, .statvfs = w_statvfs,
	.identity = w_identity, .native_fd = w_native_fd, .destroy = w_destroy,
};

/* A wrapper around inner (not owned: destroy the wrapper first). */
static inline wrap_vfs *wrap_open(sub_vfs *inner)
{
	wrap_vfs *w = calloc(1, sizeof(*w));
	ck_assert_ptr_nonnull(w);
	w->base.m = &wrap_methods;
	w->base.url = NULL;
	w->inner = inner;
	return w;
}

/* Writes raw bytes to a path of the scratch volume (as "another host"). */
static inline void h_put(const char *path, const char *text, size_t len)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		ck_assert_int_eq(sub_mkdirs(h_vfs, dir, 0755), 0);
	}
	ck_assert_int_eq(sub_write_atomic(h_vfs, path, text, len), 0);
}

#endif
