/*
 * shim.h — a pass-through substrate for the storage tests: every call goes
 * to an inner vfs, and the mutating ones (and fsync) are first reported to a
 * hook.  The hook may record the call (which write path a crash point lands
 * in), block it (hold an fsync in flight), or act on the volume through
 * another client (a new leader taking over between a stale leader's fencing
 * check and its segment create).
 *
 *   shim_vfs *s = shim_wrap(inner, hook, arg);   // s->base is the sub_vfs
 *   s->fsync_rc = fn;                            // optional, see below
 *   ...
 *   sub_destroy(&s->base);                       // frees the shim, not inner
 *
 * Ops reported: "create" (open with O_CREAT or O_TRUNC), "pwrite",
 * "ftruncate", "fsync", "fsync_dir", "rename" (path = from, to = target),
 * "unlink", "mkdir", "rmdir": exactly the calls the fault backend counts
 * as mutations.  Paths are the substrate-relative ones the engine used.
 *
 * fsync_rc, when set, is called after each file fsync with the inner
 * backend's answer and returns the answer the engine gets: a test learns
 * when an fsync completed, and can make one fail.
 */
#ifndef KAAS_STORAGE_TEST_SHIM_H
#define KAAS_STORAGE_TEST_SHIM_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "substrates/sub.h"

typedef void (*shim_hook_fn)(void *arg, const char *op, const char *path, const char *to);

typedef struct shim_vfs {
	sub_vfs base; /* first: the engine sees a sub_vfs */
	sub_vfs *inner;
	shim_hook_fn hook;
	void *arg;
	int (*fsync_rc)(void *arg, const char *path, int rc);
} shim_vfs;

typedef struct shim_file {
	sub_file base;
	sub_file *inner;
	char path[SUB_PATH_MAX];
} shim_file;

#define SHIM_V(v) ((shim_vfs *)(v))
#define SHIM_F(f) ((shim_file *)(f))

static inline void shim__report(shim_vfs *s, const char *op, const char *path, const char *to)
{
	if (s->hook)
		s->hook(s->arg, op, path, to);
}

static int shim_open(sub_vfs *v, const char *path, int flags, unsigned mode, sub_file **out)
{
	shim_vfs *s = SHIM_V(v);
	*out = NULL;
	if (flags & (O_CREAT | O_TRUNC)) /* the opens the fault backend counts as mutations */
		shim__report(s, "create", path, NULL);
	shim_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	int rc = sub_open(s->inner, path, flags, mode, &f->inner);
	if (rc) {
		free(f);
		return rc;
	}
	f->base.vfs = v;
	snprintf(f->path, sizeof(f->path), "%s", path);
	*out = &f->base;
	return 0;
}

static int shim_close(sub_file *f)
{
	int rc = sub_close(SHIM_F(f)->inner);
	free(f);
	return rc;
}

static ssize_t shim_pread(sub_file *f, void *buf, size_t n, uint64_t off)
{
	return sub_pread(SHIM_F(f)->inner, buf, n, off);
}

static ssize_t shim_pwrite(sub_file *f, const void *buf, size_t n, uint64_t off)
{
	shim__report(SHIM_V(f->vfs), "pwrite", SHIM_F(f)->path, NULL);
	return sub_pwrite(SHIM_F(f)->inner, buf, n, off);
}

static int shim_fsync(sub_file *f)
{
	shim_vfs *s = SHIM_V(f->vfs);
	shim__report(s, "fsync", SHIM_F(f)->path, NULL);
	int rc = sub_fsync(SHIM_F(f)->inner);
	return s->fsync_rc ? s->fsync_rc(s->arg, SHIM_F(f)->path, rc) : rc;
}

static int shim_ftruncate(sub_file *f, uint64_t size)
{
	shim__report(SHIM_V(f->vfs), "ftruncate", SHIM_F(f)->path, NULL);
	return sub_ftruncate(SHIM_F(f)->inner, size);
}

static int shim_fstat(sub_file *f, sub_stat *st) { return sub_fstat(SHIM_F(f)->inner, st); }

static int shim_stat(sub_vfs *v, const char *p, sub_stat *st)
{
	return sub_stat_path(SHIM_V(v)->inner, p, st);
}

static int shim_rename(sub_vfs *v, const char *a, const char *b)
{
	shim__report(SHIM_V(v), "rename", a, b);
	return sub_rename(SHIM_V(v)->inner, a, b);
}

static int shim_unlink(sub_vfs *v, const char *p)
{
	shim__report(SHIM_V(v), "unlink", p, NULL);
	return sub_unlink(SHIM_V(v)->inner, p);
}

static int shim_mkdir(sub_vfs *v, const char *p, unsigned mode)
{
	shim__report(SHIM_V(v), "mkdir", p, NULL);
	return sub_mkdir(SHIM_V(v)->inner, p, mode);
}

static int shim_rmdir(sub_vfs *v, const char *p)
{
	shim__report(SHIM_V(v), "rmdir", p, NULL);
	return sub_rmdir(SHIM_V(v)->inner, p);
}

static int shim_readdir(sub_vfs *v, const char *p, sub_readdir_cb cb, void *arg)
{
	return sub_readdir(SHIM_V(v)->inner, p, cb, arg);
}

static int shim_fsync_dir(sub_vfs *v, const char *p)
{
	shim__report(SHIM_V(v), "fsync_dir", p, NULL);
	return sub_fsync_dir(SHIM_V(v)->inner, p);
}

static int shim_statvfs(sub_vfs *v, const char *p, sub_fsinfo *fi)
{
	return sub_statvfs(SHIM_V(v)->inner, p, fi);
}

static int shim_identity(sub_vfs *v, sub_identity *id) { return sub_identity_of(SHIM_V(v)->inner, id); }

static int shim_native_fd(sub_file *f) { return sub_native_fd(SHIM_F(f)->inner); }

static void shim_destroy(sub_vfs *v) { free(v); }

static const sub_methods shim_methods = {
	.name = "shim",
	.open = shim_open,
	.close = shim_close,
	.pread = shim_pread,
	.pwrite = shim_pwrite,
	.fsync = shim_fsync,
	.ftruncate = shim_ftruncate,
	.fstat = shim_fstat,
	.stat = shim_stat,
	.rename = shim_rename,
	.unlink = shim_unlink,
	.mkdir = shim_mkdir,
	.rmdir = shim_rmdir,
	.readdir = shim_readdir,
	.fsync_dir = shim_fsync_dir,
	.statvfs = shim_statvfs,
	.identity = shim_identity,
	.native_fd = shim_native_fd,
	.destroy = shim_destroy,
};

static inline shim_vfs *shim_wrap(sub_vfs *inner, shim_hook_fn hook, void *arg)
{
	shim_vfs *s = calloc(1, sizeof(*s));
	if (!s)
		abort();
	s->base.m = &shim_methods;
	s->base.url = NULL;
	s->inner = inner;
	s->hook = hook;
	s->arg = arg;
	return s;
}

/* Does path's last component end with suffix? */
static inline int shim_ends(const char *path, const char *suffix)
{
	size_t l = strlen(path), s = strlen(suffix);
	return l >= s && strcmp(path + l - s, suffix) == 0;
}

#endif
