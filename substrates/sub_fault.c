/*
 * sub_fault.c — the fault backend: another substrate seen through a layer
 * that injects the failures real substrates have.
 *
 * What it models, and why (docs/substrates.md has the user's view):
 *   - errors: the n-th call of an operation, every call from the n-th on, or
 *     every call on a path matching a glob, returns a chosen errno;
 *   - power loss: writes reach the inner backend at once (other clients see
 *     them, as they would see a page cache) but every write and ftruncate not
 *     yet covered by a successful fsync keeps an undo record; a crash replays
 *     the records backwards and decides per change, from the seed, whether it
 *     reached the disk, did not, or reached it up to a 512-byte boundary.
 *     Metadata operations are synchronous, as an NFS server commits them
 *     before it replies;
 *   - a lying fsync (writes held in memory until close), rename done as copy +
 *     unlink (object-store mounts), an open file renamed over or unlinked
 *     by first moving it aside to .fuse_hidden* (libfuse), O_EXCL ignored or
 *     its loser told EPERM (SFTP), client caches that break close-to-open
 *     (whole contents, or only the size), and a client that never lets go
 *     of a file the application closed (leak=GLOB).
 *
 * One recursive mutex per vfs serialises everything, inner calls included:
 * this backend is for tests, where determinism matters more than overlap.
 * Every random choice comes from one generator seeded by seed=N and drawn in
 * the order the changes were made, so a workload replays identically.
 *
 * This file holds the vfs: the methods table, the path operations,
 * sub_fault_open and the sub_fault.h controls.  sub_fault_int.h maps the
 * other files of the backend (file operations, error injection, the crash
 * model, the quirks, option parsing).
 */
#include "substrates/sub_fault.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "substrates/sub_fault_int.h"

static const sub_methods fault_methods;

/* ---- path operations ------------------------------------------------------ */

static int fw_stat(sub_vfs *v, const char *path, sub_stat *st)
{
	fault_vfs *fv = FV(v);
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	lock(fv);
	rc = sub__fault_enter(fv, OP_STAT, path, NULL);
	if (rc == 0)
		rc = sub_stat_path(fv->inner, path, st);
	if (rc == 0 && S_ISREG(st->mode)) {
		cto_entry *e = fv->cto_stale ? sub__fault_cto_find(fv, path) : NULL;
		fnode *nd = sub__fault_node_find(fv, st->dev, st->ino);
		if (e)
			st->size = e->len;
		else if (nd && nd->held)
			st->size = sub__fault_held_size(nd, st->size);
	}
	unlock(fv);
	return rc;
}

/* Before path loses its name: remember its inode if that was its last name. */
static void last_link(fault_vfs *fv, const char *path, int *is_last, sub_stat *st)
{
	*is_last = sub_stat_path(fv->inner, path, st) == 0 && S_ISREG(st->mode) && st->nlink == 1;
}

static int fw_rename(sub_vfs *v, const char *from, const char *to)
{
	fault_vfs *fv = FV(v);
	int rc = sub_path_check(from);
	if (rc || (rc = sub_path_check(to)))
		return rc;
	lock(fv);
	if ((rc = sub__fault_enter(fv, OP_RENAME, from, to)) || (rc = sub__fault_crash_point(fv)))
		goto out;
	fv->mutations++;
	sub__fault_cto_invalidate(fv, from);
	sub__fault_cto_invalidate(fv, to);
	if (fv->rename_copy) {
		rc = sub__fault_rename_copy(fv, from, to);
	} else {
		sub_stat tst, fst;
		int last;
		if (fv->rename_hide && strcmp(from, to) != 0 && (rc = sub__fault_hide_if_open(fv, to)) < 0)
			goto out;
		last_link(fv, to, &last, &tst);
		rc = sub_rename(fv->inner, from, to);
		if (rc == 0 && last && !(sub_stat_path(fv->inner, to, &fst) == 0 &&
					 fst.dev == tst.dev && fst.ino == tst.ino))
			sub__fault_node_kill(fv, tst.dev, tst.ino);
	}
out:
	unlock(fv);
	return rc;
}

static int fw_unlink(sub_vfs *v, const char *path)
{
	fault_vfs *fv = FV(v);
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	lock(fv);
	if ((rc = sub__fault_enter(fv, OP_UNLINK, path, NULL)) || (rc = sub__fault_crash_point(fv)))
		goto out;
	fv->mutations++;
	sub__fault_cto_invalidate(fv, path);
	sub_stat st;
	int last;
	if (fv->rename_hide && (rc = sub__fault_hide_if_open(fv, path)) != 0) {
		if (rc > 0)
			rc = 0; /* hidden, removed at the last close */
		goto out;
	}
	last_link(fv, path, &last, &st);
	rc = sub_unlink(fv->inner, path);
	if (rc == 0 && last)
		sub__fault_node_kill(fv, st.dev, st.ino);
out:
	unlock(fv);
	return rc;
}

static int fw_mkdir(sub_vfs *v, const char *path, unsigned mode)
{
	fault_vfs *fv = FV(v);
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	lock(fv);
	if ((rc = sub__fault_enter(fv, OP_MKDIR, path, NULL)) == 0 && (rc = sub__fault_crash_point(fv)) == 0) {
		fv->mutations++;
		rc = sub_mkdir(fv->inner, path, mode);
	}
	unlock(fv);
	return rc;
}

static int fw_rmdir(sub_vfs *v, const char *path)
{
	fault_vfs *fv = FV(v);
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	lock(fv);
	if ((rc = sub__fault_enter(fv, OP_RMDIR, path, NULL)) == 0 && (rc = sub__fault_crash_point(fv)) == 0) {
		fv->mutations++;
		sub__fault_cto_invalidate(fv, path);
		rc = sub_rmdir(fv->inner, path);
	}
	unlock(fv);
	return rc;
}

typedef struct dirent_acc {
	char **names;
	int *types;
	size_t n, cap;
	int err;
} dirent_acc;

static int collect_dirent(void *arg, const char *name, int d_type)
{
	dirent_acc *a = arg;
	if (a->n == a->cap) {
		size_t ncap = a->cap ? a->cap * 2 : 32;
		char **nn = realloc(a->names, ncap * sizeof(*nn));
		if (nn)
			a->names = nn;
		int *nt = nn ? realloc(a->types, ncap * sizeof(*nt)) : NULL;
		if (!nt) {
			a->err = -ENOMEM;
			return 1;
		}
		a->types = nt;
		a->cap = ncap;
	}
	if (!(a->names[a->n] = strdup(name))) {
		a->err = -ENOMEM;
		return 1;
	}
	a->types[a->n++] = d_type;
	return 0;
}

/* The names are collected under the lock and handed to the callback without
 * it, so the callback may use the vfs from any thread. */
static int fw_readdir(sub_vfs *v, const char *path, sub_readdir_cb cb, void *arg)
{
	fault_vfs *fv = FV(v);
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	dirent_acc a = {0};
	lock(fv);
	rc = sub__fault_enter(fv, OP_READDIR, path, NULL);
	if (rc == 0) {
		rc = sub_readdir(fv->inner, path, collect_dirent, &a);
		if (a.err)
			rc = a.err;
	}
	unlock(fv);
	for (size_t i = 0; i < a.n && rc == 0; i++)
		rc = cb(arg, a.names[i], a.types[i]);
	for (size_t i = 0; i < a.n; i++)
		free(a.names[i]);
	free(a.names);
	free(a.types);
	return rc;
}

static int fw_fsync_dir(sub_vfs *v, const char *path)
{
	fault_vfs *fv = FV(v);
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	lock(fv);
	if ((rc = sub__fault_enter(fv, OP_FSYNC_DIR, path, NULL)) == 0 && (rc = sub__fault_crash_point(fv)) == 0) {
		fv->mutations++;
		if (!fv->fsync_lie)
			rc = sub_fsync_dir(fv->inner, path);
	}
	unlock(fv);
	return rc;
}

static int fw_statvfs(sub_vfs *v, const char *path, sub_fsinfo *out)
{
	fault_vfs *fv = FV(v);
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	lock(fv);
	rc = sub__fault_enter(fv, OP_STATVFS, path, NULL);
	if (rc == 0)
		rc = sub_statvfs(fv->inner, path, out);
	/* What ceph-fuse answers without a Ceph manager, and a FUSE
	 * filesystem without statfs: a block size and nothing else. */
	if (rc == 0 && fv->statvfs_none) {
		uint64_t bsize = out->bsize;
		memset(out, 0, sizeof(*out));
		out->bsize = bsize;
	}
	unlock(fv);
	return rc;
}

static int fw_identity(sub_vfs *v, sub_identity *id)
{
	fault_vfs *fv = FV(v);
	lock(fv);
	int rc = fv->crashed ? -EIO : sub_identity_of(fv->inner, id);
	if (rc == 0) {
		char root[sizeof(id->root)];
		snprintf(id->backend, sizeof(id->backend), "fault");
		snprintf(root, sizeof(root), "%s", id->root);
		snprintf(id->root, sizeof(id->root), "fault:%.*s", (int)sizeof(id->root) - 7, root);
		/* Each fault option becomes one "fault.<option>" mount option. */
		size_t used = strlen(id->options);
		for (const char *p = fv->opts; *p;) {
			size_t k = strcspn(p, "&");
			if (k) {
				int w = snprintf(id->options + used, sizeof(id->options) - used, "%sfault.%.*s",
						 used ? "," : "", (int)k, p);
				if (w < 0 || (size_t)w >= sizeof(id->options) - used) {
					id->options[used] = '\0';
					break;
				}
				used += (size_t)w;
			}
			p += k;
			if (*p == '&')
				p++;
		}
	}
	unlock(fv);
	return rc;
}

static void fw_destroy(sub_vfs *v)
{
	fault_vfs *fv = FV(v);
	fnode *nd = fv->nodes;
	while (nd) {
		fnode *next = nd->next;
		sub__fault_undo_clear(fv, nd);
		sub__fault_held_clear(fv, nd);
		free(nd->hidden); /* left behind, as by a killed FUSE daemon */
		free(nd);
		nd = next;
	}
	sub__fault_cto_drop_all(fv);
	sub__fault_rules_free(fv);
	for (size_t i = 0; i < fv->nleaked; i++)
		sub_close(fv->leaked[i]);
	free(fv->leaked);
	free(fv->leak_glob);
	sub_destroy(fv->inner);
	pthread_mutex_destroy(&fv->mu);
	free(fv->opts);
	free(fv->base.url);
	free(fv);
}

static const sub_methods fault_methods = {
	.name = "fault",
	.open = sub__fault_file_open,
	.close = sub__fault_file_close,
	.pread = sub__fault_file_pread,
	.pwrite = sub__fault_file_pwrite,
	.fsync = sub__fault_file_fsync,
	.ftruncate = sub__fault_file_ftruncate,
	.fstat = sub__fault_file_fstat,
	.stat = fw_stat,
	.rename = fw_rename,
	.unlink = fw_unlink,
	.mkdir = fw_mkdir,
	.rmdir = fw_rmdir,
	.readdir = fw_readdir,
	.fsync_dir = fw_fsync_dir,
	.statvfs = fw_statvfs,
	.identity = fw_identity,
	.native_fd = sub__fault_file_native_fd,
	.destroy = fw_destroy,
};

int sub_fault_open(const char *spec, sub_vfs **out, char *err, size_t errlen)
{
	*out = NULL;
	fault_vfs *fv = calloc(1, sizeof(*fv));
	char *inner_url = NULL;
	int rc = -ENOMEM;
	if (!fv)
		return -ENOMEM;
	fv->seed = 1;
	fv->undo_max = FAULT_UNDO_MAX_DEFAULT;
	fv->copy_delay_us = 1000;
	fv->crash_mode = CRASH_RANDOM;
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&fv->mu, &attr);
	pthread_mutexattr_destroy(&attr);

	const char *q = strrchr(spec, '?');
	inner_url = q ? strndup(spec, (size_t)(q - spec)) : strdup(spec);
	fv->opts = strdup(q ? q + 1 : "");
	fv->base.url = malloc(strlen(spec) + 7);
	if (!inner_url || !fv->opts || !fv->base.url)
		goto out;
	sprintf(fv->base.url, "fault:%s", spec);
	if ((rc = sub__fault_parse_options(fv, fv->opts, err, errlen)))
		goto out;
	if (!*inner_url) {
		snprintf(err, errlen, "fault: missing inner URL (fault:<inner-url>?<options>)");
		rc = -EINVAL;
		goto out;
	}
	if ((rc = sub_open_url(inner_url, &fv->inner, err, errlen)))
		goto out;
	fv->rng = fv->seed;
	fv->base.m = &fault_methods;
	*out = &fv->base;
	fv = NULL;
out:
	if (fv) {
		sub__fault_rules_free(fv);
		free(fv->leak_glob);
		pthread_mutex_destroy(&fv->mu);
		free(fv->opts);
		free(fv->base.url);
		free(fv);
	}
	free(inner_url);
	return rc;
}

/* ---- sub_fault.h ---------------------------------------------------------- */

int sub_fault_check(sub_vfs *vfs)
{
	return (vfs && vfs->m == &fault_methods) ? 0 : -EINVAL;
}

int sub_fault_crash(sub_vfs *vfs)
{
	if (sub_fault_check(vfs))
		return -EINVAL;
	fault_vfs *fv = FV(vfs);
	lock(fv);
	int rc = sub__fault_crash_locked(fv);
	unlock(fv);
	return rc;
}

int sub_fault_is_crashed(sub_vfs *vfs)
{
	if (sub_fault_check(vfs))
		return -EINVAL;
	fault_vfs *fv = FV(vfs);
	lock(fv);
	int c = fv->crashed;
	unlock(fv);
	return c;
}

uint64_t sub_fault_mutations(sub_vfs *vfs)
{
	if (sub_fault_check(vfs))
		return 0;
	fault_vfs *fv = FV(vfs);
	lock(fv);
	uint64_t n = fv->mutations;
	unlock(fv);
	return n;
}

int sub_fault_set_hook(sub_vfs *vfs, sub_fault_hook_fn fn, void *arg)
{
	if (sub_fault_check(vfs))
		return -EINVAL;
	fault_vfs *fv = FV(vfs);
	lock(fv);
	fv->hook = fn;
	fv->hook_arg = arg;
	unlock(fv);
	return 0;
}
