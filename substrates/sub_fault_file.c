/*
 * sub_fault_file.c — the fault backend's file operations.  Each one enters the
 * injection rules, passes the crash point when it mutates, and hands the
 * change to the crash model (undo records) or to a quirk (held writes,
 * cached reads).
 */
#include "substrates/sub_fault_int.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/grow.h"

/* ---- file operations ------------------------------------------------------ */

static void file_attach(fault_file *ff, fnode *nd)
{
	ff->node = nd;
	nd->refs++;
	ff->node_next = nd->files;
	nd->files = ff;
}

static void file_detach(fault_file *ff)
{
	fnode *nd = ff->node;
	for (fault_file **pp = &nd->files; *pp; pp = &(*pp)->node_next) {
		if (*pp == ff) {
			*pp = ff->node_next;
			break;
		}
	}
	nd->refs--;
}

int sub__fault_file_open(sub_vfs *v, const char *path, int flags, unsigned mode, sub_file **out)
{
	fault_vfs *fv = FV(v);
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	lock(fv);
	fault_file *ff = NULL;
	int mutating = (flags & (O_CREAT | O_TRUNC)) != 0;
	if ((rc = sub__fault_enter(fv, OP_OPEN, path, NULL)))
		goto out;
	if (mutating && (rc = sub__fault_crash_point(fv)))
		goto out;
	if (mutating)
		fv->mutations++;

	ff = calloc(1, sizeof(*ff));
	if (!ff || !(ff->path = strdup(path))) {
		rc = -ENOMEM;
		goto out;
	}
	int acc = flags & O_ACCMODE;
	int iflags = flags;
	if (fv->excl_broken)
		iflags &= ~O_EXCL;
	int excl_create = (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
	ff->flags = flags;
	ff->can_read = acc != O_WRONLY;
	ff->can_write = acc != O_RDONLY;
	/* The layer reads what a write will overwrite, so it wants read access
	 * even when the caller asked for write only. */
	if (acc == O_WRONLY) {
		rc = sub_open(fv->inner, path, (iflags & ~O_ACCMODE) | O_RDWR, mode, &ff->inner);
		if (rc == 0)
			ff->can_read = 1;
		else if (rc == -EACCES || rc == -EPERM)
			rc = sub_open(fv->inner, path, iflags, mode, &ff->inner);
	} else {
		rc = sub_open(fv->inner, path, iflags, mode, &ff->inner);
	}
	/* An SFTP server answers a lost exclusive create with a generic
	 * failure, which sshfs turns into EPERM. */
	if (rc == -EEXIST && excl_create && fv->excl_eperm)
		rc = -EPERM;
	if (rc)
		goto out;

	sub_stat st;
	if ((rc = sub_fstat(ff->inner, &st)))
		goto out;
	if (S_ISREG(st.mode)) {
		fnode *nd = sub__fault_node_find(fv, st.dev, st.ino);
		if (!nd) {
			nd = calloc(1, sizeof(*nd));
			if (!nd) {
				rc = -ENOMEM;
				goto out;
			}
			nd->dev = st.dev;
			nd->ino = st.ino;
			nd->next = fv->nodes;
			fv->nodes = nd;
		}
		if (flags & O_TRUNC)
			sub__fault_node_truncated(fv, nd);
		file_attach(ff, nd);
		if (fv->cto_stale) {
			if (acc == O_RDONLY && !(flags & O_TRUNC))
				ff->cache = sub__fault_cto_snapshot(fv, ff);
			else
				sub__fault_cto_invalidate(fv, path);
		}
	}
	ff->base.vfs = v;
	*out = &ff->base;
	ff = NULL;
out:
	if (ff) {
		sub_close(ff->inner);
		free(ff->path);
		free(ff);
	}
	unlock(fv);
	return rc;
}

int sub__fault_file_close(sub_file *f)
{
	fault_file *ff = FF(f);
	fault_vfs *fv = FV(f->vfs);
	lock(fv);
	/* Like close(2): the file is released whatever the answer. */
	int rc = sub__fault_enter(fv, OP_CLOSE, ff->path, NULL);
	sub_file *in = ff->inner;
	fnode *nd = ff->node;
	char *hidden = NULL;
	if (nd) {
		if (!fv->crashed && nd->held && ff->can_write) {
			int frc = sub__fault_held_flush(fv, ff);
			if (!rc)
				rc = frc;
		}
		file_detach(ff);
		if (nd->refs == 0 && nd->hidden) {
			/* rename=hide: the last close removes the hidden name, and
			 * with it the file's last name. */
			hidden = nd->hidden;
			nd->hidden = NULL;
			sub__fault_undo_clear(fv, nd);
			sub__fault_node_unlist(fv, nd);
			nd->dead = 1;
		}
		if (!fv->crashed && nd->undo && !nd->keep && ff->can_write) {
			nd->keep = in; /* the undo records need a writable handle */
			in = NULL;
		}
		sub__fault_node_maybe_free(fv, nd);
	}
	if (in && fv->leak_glob && fnmatch(fv->leak_glob, ff->path, 0) == 0) {
		/* leak=: the application's close succeeds, the client keeps
		 * the file open underneath until the vfs goes away. */
		if (KAAS_GROW(fv->leaked, fv->nleaked, fv->capleaked, 8) == 0) {
			fv->leaked[fv->nleaked++] = in;
			in = NULL;
		}
	}
	if (in) {
		int crc = sub_close(in);
		if (!rc)
			rc = crc;
	}
	if (hidden) {
		if (!fv->crashed) {
			int urc = sub_unlink(fv->inner, hidden);
			if (!rc && urc != -ENOENT)
				rc = urc;
		}
		free(hidden);
	}
	sub__fault_cto_put(fv, ff->cache);
	free(ff->path);
	free(ff);
	unlock(fv);
	return rc;
}

ssize_t sub__fault_file_pread(sub_file *f, void *buf, size_t n, uint64_t off)
{
	fault_file *ff = FF(f);
	fault_vfs *fv = FV(f->vfs);
	lock(fv);
	ssize_t rc = sub__fault_enter(fv, OP_PREAD, ff->path, NULL);
	if (rc == 0) {
		if (ff->cache) {
			const cto_entry *e = ff->cache;
			size_t k = off < e->len ? e->len - (size_t)off : 0;
			if (k > n)
				k = n;
			if (!e->data)
				rc = k ? sub__fault_overlay_read(ff, buf, k, off) : 0; /* fresh bytes, cached size */
			else {
				if (k)
					memcpy(buf, e->data + off, k);
				rc = (ssize_t)k;
			}
		} else if (!ff->can_read) {
			rc = -EBADF;
		} else {
			rc = sub__fault_overlay_read(ff, buf, n, off);
		}
	}
	unlock(fv);
	return rc;
}

/* A write that goes to the inner backend now, leaving an undo record. */
ssize_t sub__fault_write_through(fault_vfs *fv, fault_file *ff, const void *buf, size_t n,
			     uint64_t off, int append)
{
	fnode *nd = ff->node;
	undo_rec *r = NULL;
	uint64_t size = 0;
	if (nd && !nd->dead && n > 0) {
		int rc = inner_size(ff->inner, &size);
		if (rc)
			return rc;
		if (append)
			off = size; /* O_APPEND: the backend ignores the offset */
		if ((rc = sub__fault_undo_prepare(fv, ff->inner, ff->can_read, off, n, size, &r)))
			return rc;
	}
	ssize_t w = sub_pwrite(ff->inner, buf, n, off);
	if (w > 0 && r) {
		r->len = (uint64_t)w;
		if (r->old_len > (size_t)w)
			r->old_len = (size_t)w; /* the tail of old stays unused */
		r->new_size = off + (uint64_t)w > size ? off + (uint64_t)w : size;
		sub__fault_undo_push(fv, nd, r);
	} else {
		sub__fault_undo_free(fv, r);
	}
	return w;
}

ssize_t sub__fault_file_pwrite(sub_file *f, const void *buf, size_t n, uint64_t off)
{
	fault_file *ff = FF(f);
	fault_vfs *fv = FV(f->vfs);
	lock(fv);
	ssize_t rc = sub__fault_enter(fv, OP_PWRITE, ff->path, NULL);
	if (rc == 0)
		rc = sub__fault_crash_point(fv);
	if (rc)
		goto out;
	fv->mutations++;
	if (!ff->can_write) {
		rc = -EBADF;
	} else if (fv->fsync_lie && ff->node) {
		uint64_t size = 0;
		if (ff->flags & O_APPEND) {
			if ((rc = inner_size(ff->inner, &size)))
				goto out;
			off = sub__fault_held_size(ff->node, size);
		}
		rc = sub__fault_held_add(fv, ff->node, 0, off, buf, n);
		if (rc == 0)
			rc = (ssize_t)n;
	} else {
		rc = sub__fault_write_through(fv, ff, buf, n, off, (ff->flags & O_APPEND) != 0);
	}
out:
	unlock(fv);
	return rc;
}

int sub__fault_file_fsync(sub_file *f)
{
	fault_file *ff = FF(f);
	fault_vfs *fv = FV(f->vfs);
	lock(fv);
	int rc = sub__fault_enter(fv, OP_FSYNC, ff->path, NULL);
	if (rc == 0)
		rc = sub__fault_crash_point(fv);
	if (rc == 0) {
		fv->mutations++;
		if (!fv->fsync_lie) {
			rc = sub_fsync(ff->inner);
			/* fsync of any descriptor makes the whole inode durable. */
			if (rc == 0 && ff->node && ff->node->undo)
				sub__fault_undo_clear(fv, ff->node);
		}
	}
	unlock(fv);
	return rc;
}

int sub__fault_file_ftruncate(sub_file *f, uint64_t size)
{
	fault_file *ff = FF(f);
	fault_vfs *fv = FV(f->vfs);
	lock(fv);
	int rc = sub__fault_enter(fv, OP_FTRUNCATE, ff->path, NULL);
	if (rc == 0)
		rc = sub__fault_crash_point(fv);
	if (rc)
		goto out;
	fv->mutations++;
	fnode *nd = ff->node;
	if (!ff->can_write || !nd || nd->dead) {
		rc = sub_ftruncate(ff->inner, size);
	} else if (fv->fsync_lie) {
		rc = sub__fault_held_add(fv, nd, 1, size, NULL, 0);
	} else {
		uint64_t cur;
		undo_rec *r = NULL;
		if ((rc = inner_size(ff->inner, &cur)))
			goto out;
		uint64_t lo = size < cur ? size : cur, hi = size < cur ? cur : size;
		if ((rc = sub__fault_undo_prepare(fv, ff->inner, ff->can_read, lo, hi - lo, cur, &r)))
			goto out;
		rc = sub_ftruncate(ff->inner, size);
		if (rc == 0) {
			r->is_trunc = 1;
			r->new_size = size;
			sub__fault_undo_push(fv, nd, r);
		} else {
			sub__fault_undo_free(fv, r);
		}
	}
out:
	unlock(fv);
	return rc;
}

int sub__fault_file_fstat(sub_file *f, sub_stat *st)
{
	fault_file *ff = FF(f);
	fault_vfs *fv = FV(f->vfs);
	lock(fv);
	int rc = sub__fault_enter(fv, OP_FSTAT, ff->path, NULL);
	if (rc == 0)
		rc = sub_fstat(ff->inner, st);
	if (rc == 0) {
		if (ff->cache)
			st->size = ff->cache->len;
		else if (ff->node && ff->node->held)
			st->size = sub__fault_held_size(ff->node, st->size);
	}
	unlock(fv);
	return rc;
}

int sub__fault_file_native_fd(sub_file *f)
{
	(void)f;
	return -1;
}
