/*
 * sub_fault_quirks.c — what real substrates get wrong, as the fault backend plays
 * it: a lying fsync (fsync=lie: writes held in memory until close), rename
 * done as copy + unlink (rename=copy, object-store mounts), an open file
 * moved aside to .fuse_hidden* before a rename over it or its unlink
 * (rename=hide, libfuse), and client caches that break close-to-open
 * (cto=stale: whole contents; cto=size: only the size).
 */
#include "substrates/sub_fault_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- held writes (fsync=lie) ---------------------------------------------- */

void sub__fault_held_clear(fault_vfs *fv, fnode *nd)
{
	held_op *h = nd->held;
	while (h) {
		held_op *next = h->next;
		mem_release(fv, sizeof(*h) + (h->is_trunc ? 0 : h->len));
		free(h->data);
		free(h);
		h = next;
	}
	nd->held = nd->held_tail = NULL;
}

int sub__fault_held_add(fault_vfs *fv, fnode *nd, int is_trunc, uint64_t off, const void *buf,
		    uint64_t len)
{
	uint64_t cost = sizeof(held_op) + (is_trunc ? 0 : len);
	int rc = mem_charge(fv, cost);
	if (rc)
		return rc;
	held_op *h = calloc(1, sizeof(*h));
	if (!h || (!is_trunc && len && !(h->data = malloc((size_t)len)))) {
		free(h);
		mem_release(fv, cost);
		return -ENOMEM;
	}
	h->is_trunc = is_trunc;
	h->off = off;
	h->len = is_trunc ? 0 : len;
	if (!is_trunc && len)
		memcpy(h->data, buf, (size_t)len);
	if (nd->held_tail)
		nd->held_tail->next = h;
	else
		nd->held = h;
	nd->held_tail = h;
	return 0;
}

/* The size this client sees: the inner size with the held changes applied. */
uint64_t sub__fault_held_size(const fnode *nd, uint64_t size)
{
	for (const held_op *h = nd->held; h; h = h->next) {
		if (h->is_trunc)
			size = h->off;
		else if (h->off + h->len > size)
			size = h->off + h->len;
	}
	return size;
}

/* fsync=lie: the held changes finally reach the inner backend, unsynced. */
int sub__fault_held_flush(fault_vfs *fv, fault_file *ff)
{
	fnode *nd = ff->node;
	int rc = 0;
	for (held_op *h = nd->held; h && rc == 0; h = h->next) {
		if (h->is_trunc) {
			uint64_t size;
			undo_rec *r = NULL;
			rc = inner_size(ff->inner, &size);
			if (rc == 0) {
				uint64_t lo = h->off < size ? h->off : size;
				uint64_t hi = h->off < size ? size : h->off;
				rc = sub__fault_undo_prepare(fv, ff->inner, ff->can_read, lo, hi - lo, size, &r);
			}
			if (rc == 0 && (rc = sub_ftruncate(ff->inner, h->off)) == 0) {
				r->is_trunc = 1;
				r->new_size = h->off;
				sub__fault_undo_push(fv, nd, r);
			} else {
				sub__fault_undo_free(fv, r);
			}
		} else {
			size_t done = 0;
			while (rc == 0 && done < h->len) {
				ssize_t w = sub__fault_write_through(fv, ff, h->data + done, (size_t)(h->len - done),
							  h->off + done, 0);
				if (w < 0)
					rc = (int)w;
				else if (w == 0)
					rc = -EIO;
				else
					done += (size_t)w;
			}
		}
	}
	sub__fault_held_clear(fv, nd); /* what failed to reach the backend is lost */
	return rc;
}

/* ---- the cto=stale cache -------------------------------------------------- */

void sub__fault_cto_put(fault_vfs *fv, cto_entry *e)
{
	if (!e)
		return;
	if (e->refs > 0)
		e->refs--;
	if (e->refs == 0 && !e->linked) {
		if (e->data)
			mem_release(fv, e->len);
		free(e->data);
		free(e->path);
		free(e);
	}
}

cto_entry *sub__fault_cto_find(fault_vfs *fv, const char *path)
{
	for (cto_entry *e = fv->cache; e; e = e->next)
		if (strcmp(e->path, path) == 0)
			return e;
	return NULL;
}

/* This client changed path (or everything under it): forget what it cached. */
void sub__fault_cto_invalidate(fault_vfs *fv, const char *path)
{
	size_t n = strlen(path);
	cto_entry **pp = &fv->cache;
	while (*pp) {
		cto_entry *e = *pp;
		if (strcmp(e->path, path) == 0 || n == 0 ||
		    (strncmp(e->path, path, n) == 0 && e->path[n] == '/')) {
			*pp = e->next;
			e->linked = 0;
			e->refs++;
			sub__fault_cto_put(fv, e);
		} else {
			pp = &e->next;
		}
	}
}

void sub__fault_cto_drop_all(fault_vfs *fv)
{
	sub__fault_cto_invalidate(fv, "");
}

/* ---- reads through the layer ---------------------------------------------- */

/* Reads what this client sees: the inner file with held changes on top. */
ssize_t sub__fault_overlay_read(fault_file *ff, void *buf, size_t n, uint64_t off)
{
	fnode *nd = ff->node;
	if (!nd || !nd->held)
		return sub_pread(ff->inner, buf, n, off);
	uint64_t size;
	int rc = inner_size(ff->inner, &size);
	if (rc)
		return rc;
	unsigned char *b = buf;
	ssize_t got = inner_read(ff->inner, b, n, off);
	if (got < 0)
		return got;
	memset(b + got, 0, n - (size_t)got);
	uint64_t end = off + n;
	for (const held_op *h = nd->held; h; h = h->next) {
		if (h->is_trunc) {
			size = h->off;
			if (size < end)
				memset(b + (size > off ? size - off : 0), 0,
				       (size_t)(end - (size > off ? size : off)));
			continue;
		}
		uint64_t a = h->off > off ? h->off : off;
		uint64_t z = h->off + h->len < end ? h->off + h->len : end;
		if (a < z)
			memcpy(b + (a - off), h->data + (a - h->off), (size_t)(z - a));
		if (h->off + h->len > size)
			size = h->off + h->len;
	}
	if (size <= off)
		return 0;
	return (ssize_t)(size - off < n ? size - off : n);
}

/* ---- the cto=stale snapshot ------------------------------------------------ */

/* cto=stale: the contents at first open, if the file is small enough. */
cto_entry *sub__fault_cto_snapshot(fault_vfs *fv, fault_file *ff)
{
	cto_entry *e = sub__fault_cto_find(fv, ff->path);
	if (e) {
		e->refs++;
		return e;
	}
	if (fv->cto_stale == CTO_SIZE) {
		sub_stat st;
		if (sub_fstat(ff->inner, &st) != 0 || !(e = calloc(1, sizeof(*e))))
			return NULL;
		if (!(e->path = strdup(ff->path))) {
			free(e);
			return NULL;
		}
		e->len = (size_t)sub__fault_held_size(ff->node, st.size);
		e->linked = 1;
		e->refs = 1;
		e->next = fv->cache;
		fv->cache = e;
		return e;
	}
	unsigned char *data = malloc(FAULT_CTO_MAX + 1);
	if (!data)
		return NULL;
	ssize_t got = 0;
	for (;;) {
		ssize_t r = sub__fault_overlay_read(ff, data + got, FAULT_CTO_MAX + 1 - (size_t)got, (uint64_t)got);
		if (r <= 0) {
			if (r < 0)
				got = -1;
			break;
		}
		got += r;
		if ((size_t)got > FAULT_CTO_MAX)
			break;
	}
	if (got < 0 || (size_t)got > FAULT_CTO_MAX || mem_charge(fv, (uint64_t)got)) {
		free(data);
		return NULL;
	}
	e = calloc(1, sizeof(*e));
	if (!e || !(e->path = strdup(ff->path))) {
		free(e);
		free(data);
		mem_release(fv, (uint64_t)got);
		return NULL;
	}
	e->data = data;
	e->len = (size_t)got;
	e->linked = 1;
	e->refs = 1;
	e->next = fv->cache;
	fv->cache = e;
	return e;
}

/* ---- rename=copy and rename=hide ----------------------------------------- */

static int copy_file(fault_vfs *fv, const char *from, const char *to)
{
	sub_vfs *in = fv->inner;
	sub_file *src = NULL, *dst = NULL;
	sub_stat st, dst_st;
	unsigned char buf[FAULT_CHUNK];
	int rc = sub_open(in, from, O_RDONLY, 0, &src);
	if (rc)
		return rc;
	if ((rc = sub_fstat(src, &st)))
		goto out;
	if ((rc = sub_open(in, to, O_WRONLY | O_CREAT | O_TRUNC, st.mode & 07777, &dst)))
		goto out;
	if ((rc = sub_fstat(dst, &dst_st)))
		goto out;
	fnode *tn = sub__fault_node_find(fv, dst_st.dev, dst_st.ino);
	if (tn)
		sub__fault_node_truncated(fv, tn); /* the copy's fsync below covers it all */
	/* An object store's copy takes time; readers meanwhile find the target
	 * empty.  The pause makes that window wide enough to be seen. */
	if (fv->copy_delay_us) {
		struct timespec ts = {(time_t)(fv->copy_delay_us / 1000000),
				      (long)(fv->copy_delay_us % 1000000) * 1000};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	for (uint64_t off = 0;;) {
		ssize_t r = sub_pread(src, buf, sizeof(buf), off);
		if (r < 0) {
			rc = (int)r;
			goto out;
		}
		if (r == 0)
			break;
		if ((rc = sub_pwrite_full(dst, buf, (size_t)r, off)))
			goto out;
		off += (uint64_t)r;
		fire_hook(fv, "rename-copy-chunk", to);
	}
	/* An object store's PUT is durable when it returns. */
	if ((rc = sub_fsync(dst)))
		goto out;
	rc = sub_close(dst);
	dst = NULL;
	if (rc)
		goto out;
	if ((rc = sub_unlink(in, from)))
		goto out;
	if (st.nlink == 1)
		sub__fault_node_kill(fv, st.dev, st.ino);
out:
	sub_close(src);
	sub_close(dst);
	return rc;
}

static int copy_tree(fault_vfs *fv, const char *from, const char *to, int top);

static int copy_dir(fault_vfs *fv, const char *from, const char *to, const sub_stat *st, int top)
{
	sub_vfs *in = fv->inner;
	char **names = NULL;
	size_t n = 0;
	int rc = sub_mkdir(in, to, st->mode & 07777);
	if (rc == -EEXIST) {
		sub_stat tst;
		if ((rc = sub_stat_path(in, to, &tst)))
			return rc;
		if (!S_ISDIR(tst.mode))
			return -ENOTDIR;
		if (top) { /* rename over a directory: only an empty one */
			if ((rc = sub_list(in, to, &names, &n)))
				return rc;
			sub_names_free(names, n);
			if (n)
				return -ENOTEMPTY;
		}
	} else if (rc) {
		return rc;
	}
	if ((rc = sub_list(in, from, &names, &n)))
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		char cf[SUB_PATH_MAX], ct[SUB_PATH_MAX];
		if ((rc = sub_join(cf, sizeof(cf), from, names[i])) ||
		    (rc = sub_join(ct, sizeof(ct), to, names[i])))
			break;
		rc = copy_tree(fv, cf, ct, 0);
		if (rc == 0)
			fire_hook(fv, "rename-copy-entry", ct);
	}
	sub_names_free(names, n);
	if (rc == 0)
		rc = sub_rmdir(in, from);
	return rc;
}

static int copy_tree(fault_vfs *fv, const char *from, const char *to, int top)
{
	sub_stat st;
	int rc = sub_stat_path(fv->inner, from, &st);
	if (rc)
		return rc;
	if (S_ISDIR(st.mode))
		return copy_dir(fv, from, to, &st, top);
	if (!S_ISREG(st.mode))
		return -EOPNOTSUPP;
	return copy_file(fv, from, to);
}

/* rename=copy, as an object-store mount does it: copy, then delete. */
int sub__fault_rename_copy(fault_vfs *fv, const char *from, const char *to)
{
	sub_stat fst, tst;
	int rc = sub_stat_path(fv->inner, from, &fst);
	if (rc)
		return rc;
	int trc = sub_stat_path(fv->inner, to, &tst);
	if (trc && trc != -ENOENT)
		return trc;
	if (trc == 0) {
		if (tst.dev == fst.dev && tst.ino == fst.ino)
			return 0; /* the same file: rename(2) does nothing */
		if (S_ISDIR(tst.mode) && !S_ISDIR(fst.mode))
			return -EISDIR;
		if (!S_ISDIR(tst.mode) && S_ISDIR(fst.mode))
			return -ENOTDIR;
	}
	size_t n = strlen(from);
	if (S_ISDIR(fst.mode) && strncmp(to, from, n) == 0 && to[n] == '/')
		return -EINVAL; /* into itself */
	return copy_tree(fv, from, to, 1);
}

/* rename=hide, as libfuse does for a file its client still has open: move
 * path aside to .fuse_hidden<ino><n> in the same directory, so the open
 * descriptors keep a name to work on, and pause before going on.  1 when
 * path was hidden, 0 when nobody here holds it open, or -errno. */
int sub__fault_hide_if_open(fault_vfs *fv, const char *path)
{
	sub_stat st;
	if (sub_stat_path(fv->inner, path, &st) != 0 || !S_ISREG(st.mode))
		return 0;
	fnode *nd = sub__fault_node_find(fv, st.dev, st.ino);
	if (!nd || nd->refs == 0 || nd->hidden)
		return 0;
	const char *slash = strrchr(path, '/');
	int dlen = slash ? (int)(slash - path) + 1 : 0;
	char hidden[SUB_PATH_MAX];
	int n = snprintf(hidden, sizeof(hidden), "%.*s.fuse_hidden%016" PRIx64 "%08" PRIx64, dlen, path,
			 st.ino, ++fv->hides);
	if (n < 0 || (size_t)n >= sizeof(hidden))
		return -ENAMETOOLONG;
	int rc = sub_rename(fv->inner, path, hidden);
	if (rc)
		return rc;
	if (!(nd->hidden = strdup(hidden)))
		return -ENOMEM;
	fire_hook(fv, "rename-hide", hidden);
	if (fv->copy_delay_us) {
		struct timespec ts = {(time_t)(fv->copy_delay_us / 1000000),
				      (long)(fv->copy_delay_us % 1000000) * 1000};
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
	}
	return 1;
}
