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
 */
#include "substrates/sub_fault.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "util/grow.h"

#define FAULT_CHUNK 4096             /* rename=copy transfer size */
#define FAULT_SECTOR 512             /* torn writes break at these boundaries */
#define FAULT_CTO_MAX (1u << 20)     /* cto=stale caches files up to this size */
enum { CTO_STRICT = 0, CTO_STALE, CTO_SIZE };
#define FAULT_UNDO_MAX_DEFAULT (256ull << 20)

/* ---- operations and options ---------------------------------------------- */

enum fault_op {
	OP_OPEN, OP_CLOSE, OP_PREAD, OP_PWRITE, OP_FSYNC, OP_FTRUNCATE, OP_FSTAT,
	OP_STAT, OP_RENAME, OP_UNLINK, OP_MKDIR, OP_RMDIR, OP_READDIR, OP_FSYNC_DIR,
	OP_STATVFS, OP_COUNT
};

static const char *const op_names[OP_COUNT] = {
	"open", "close", "pread", "pwrite", "fsync", "ftruncate", "fstat", "stat",
	"rename", "unlink", "mkdir", "rmdir", "readdir", "fsync_dir", "statvfs",
};

#define ERRNO_ENTRY(e) { #e, e }
static const struct {
	const char *name;
	int value;
} errno_names[] = {
	ERRNO_ENTRY(EIO), ERRNO_ENTRY(ENOSPC), ERRNO_ENTRY(EDQUOT), ERRNO_ENTRY(ESTALE),
	ERRNO_ENTRY(EROFS), ERRNO_ENTRY(EACCES), ERRNO_ENTRY(EPERM), ERRNO_ENTRY(ENOENT),
	ERRNO_ENTRY(EEXIST), ERRNO_ENTRY(EBUSY), ERRNO_ENTRY(EAGAIN), ERRNO_ENTRY(EINTR),
	ERRNO_ENTRY(ETIMEDOUT), ERRNO_ENTRY(ENOTEMPTY), ERRNO_ENTRY(EISDIR),
	ERRNO_ENTRY(ENOTDIR), ERRNO_ENTRY(EFBIG), ERRNO_ENTRY(ENAMETOOLONG),
	ERRNO_ENTRY(EINVAL), ERRNO_ENTRY(ENOMEM), ERRNO_ENTRY(EBADF), ERRNO_ENTRY(EXDEV),
	ERRNO_ENTRY(EMFILE), ERRNO_ENTRY(ENFILE), ERRNO_ENTRY(EMLINK),
	ERRNO_ENTRY(ECONNRESET), ERRNO_ENTRY(ECONNREFUSED), ERRNO_ENTRY(ENOTCONN),
	ERRNO_ENTRY(EHOSTUNREACH), ERRNO_ENTRY(ENETUNREACH), ERRNO_ENTRY(EFAULT),
	ERRNO_ENTRY(ERANGE), ERRNO_ENTRY(EOPNOTSUPP), ERRNO_ENTRY(ENOTSUP),
	ERRNO_ENTRY(ENOLCK), ERRNO_ENTRY(EOVERFLOW), ERRNO_ENTRY(ENXIO),
	ERRNO_ENTRY(ENODEV), ERRNO_ENTRY(EREMOTEIO), ERRNO_ENTRY(ECANCELED),
};

enum rule_kind { RULE_NTH, RULE_FROM, RULE_PATH };

typedef struct fault_rule {
	struct fault_rule *next;
	enum rule_kind kind;
	int op;
	int err; /* positive errno */
	uint64_t n;
	char *glob;
} fault_rule;

enum crash_mode { CRASH_RANDOM, CRASH_DROP, CRASH_KEEP };

/* ---- state --------------------------------------------------------------- */

enum outcome { OUT_KEEP, OUT_DROP, OUT_TORN };

/* One change not yet covered by fsync.  A write touched bytes [off, off+len);
 * a truncate every byte from off = min(old size, new size) on.  old holds
 * what bytes [off, off+old_len) were before (beyond that the file ended, so
 * the old content is "nothing", read back as zeros). */
typedef struct undo_rec {
	struct undo_rec *next;
	uint64_t seq;
	uint64_t off, len;
	uint64_t old_size, new_size;
	size_t old_len;
	size_t charged; /* bytes counted against undo_max */
	unsigned char *old;
	int is_trunc;
	/* decided at crash time */
	enum outcome out;
	uint64_t cut;
} undo_rec;

/* fsync=lie: a write or truncate held in memory until close. */
typedef struct held_op {
	struct held_op *next;
	int is_trunc;
	uint64_t off, len; /* truncate: off = new size */
	unsigned char *data;
} held_op;

struct fault_file;

/* One inode as this client knows it (keyed by the inner dev + ino). */
typedef struct fnode {
	struct fnode *next;
	uint64_t dev, ino;
	int dead;                 /* unlinked through this vfs: changes are moot */
	int refs;                 /* open fault files */
	struct fault_file *files; /* those files */
	sub_file *keep;           /* a writable inner handle kept past close for undo */
	undo_rec *undo, *undo_tail;
	held_op *held, *held_tail;
	char *hidden;             /* rename=hide: its .fuse_hidden name until the last close */
} fnode;

/* cto=stale: the contents this client saw at its first open of a path;
 * cto=size: only their size (data is NULL). */
typedef struct cto_entry {
	struct cto_entry *next;
	char *path;
	unsigned char *data;
	size_t len;
	int refs;   /* open files served from it */
	int linked; /* still in the cache (not invalidated) */
} cto_entry;

typedef struct fault_vfs {
	sub_vfs base;
	sub_vfs *inner;
	pthread_mutex_t mu;
	/* options */
	char *opts;
	uint64_t seed;
	int has_crash_after;
	uint64_t crash_after;
	enum crash_mode crash_mode;
	uint64_t undo_max;
	uint64_t copy_delay_us;
	int fsync_lie, rename_copy, rename_hide, excl_broken, excl_eperm;
	int cto_stale; /* CTO_STRICT, CTO_STALE or CTO_SIZE */
	char *leak_glob; /* leak=: closes of matching files keep them open */
	fault_rule *rules;
	/* state */
	uint64_t calls[OP_COUNT];
	uint64_t mutations;
	int crashed;
	uint64_t rng;
	uint64_t seq;
	uint64_t mem; /* undo + held + cache bytes */
	uint64_t hides; /* rename=hide: names handed out */
	fnode *nodes;
	cto_entry *cache;
	sub_fault_hook_fn hook;
	void *hook_arg;
	sub_file **leaked; /* leak=: inner files closed only at destroy */
	size_t nleaked, capleaked;
} fault_vfs;

typedef struct fault_file {
	sub_file base;
	sub_file *inner;
	fnode *node; /* NULL for anything but a regular file */
	struct fault_file *node_next;
	char *path;
	int flags;
	int can_read, can_write;
	cto_entry *cache; /* cto=stale: reads come from here */
} fault_file;

#define FV(v) ((fault_vfs *)(v))
#define FF(f) ((fault_file *)(f))

static const sub_methods fault_methods;

static void lock(fault_vfs *fv)
{
	pthread_mutex_lock(&fv->mu);
}

static void unlock(fault_vfs *fv)
{
	pthread_mutex_unlock(&fv->mu);
}

/* splitmix64: small, good enough, and the same everywhere. */
static uint64_t rng_next(fault_vfs *fv)
{
	uint64_t z = (fv->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- inner helpers -------------------------------------------------------- */

/* Reads up to n bytes, looping over short reads; returns the count (short
 * only at EOF) or -errno. */
static ssize_t inner_read(sub_file *in, unsigned char *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = sub_pread(in, buf + got, n - got, off + got);
		if (r < 0)
			return r;
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

static int inner_size(sub_file *in, uint64_t *size)
{
	sub_stat st;
	int rc = sub_fstat(in, &st);
	if (rc == 0)
		*size = st.size;
	return rc;
}

static int write_zeros(sub_file *in, uint64_t off, uint64_t len)
{
	static const unsigned char zeros[FAULT_CHUNK];
	while (len > 0) {
		size_t n = len < sizeof(zeros) ? (size_t)len : sizeof(zeros);
		int rc = sub_pwrite_full(in, zeros, n, off);
		if (rc)
			return rc;
		off += n;
		len -= n;
	}
	return 0;
}

/* ---- error injection and the crash point --------------------------------- */

static int crash_locked(fault_vfs *fv);

/* Counts the call, then answers -EIO after a crash or the injected errno of
 * the first matching rule; 0 lets the call proceed.  Lock held. */
static int enter(fault_vfs *fv, int op, const char *path, const char *path2)
{
	fv->calls[op]++;
	if (fv->crashed)
		return -EIO;
	uint64_t c = fv->calls[op];
	for (fault_rule *r = fv->rules; r; r = r->next) {
		if (r->op != op)
			continue;
		switch (r->kind) {
		case RULE_NTH:
			if (c == r->n)
				return -r->err;
			break;
		case RULE_FROM:
			if (c >= r->n)
				return -r->err;
			break;
		case RULE_PATH:
			if ((path && fnmatch(r->glob, path, 0) == 0) ||
			    (path2 && fnmatch(r->glob, path2, 0) == 0))
				return -r->err;
			break;
		}
	}
	return 0;
}

/* Before a mutating call: with crash_after=N, the (N+1)-th does not happen. */
static int crash_point(fault_vfs *fv)
{
	if (fv->has_crash_after && fv->mutations >= fv->crash_after) {
		crash_locked(fv);
		return -EIO;
	}
	return 0;
}

static void fire_hook(fault_vfs *fv, const char *point, const char *what)
{
	if (fv->hook)
		fv->hook(fv->hook_arg, point, what);
}

/* ---- memory accounting ---------------------------------------------------- */

static int mem_charge(fault_vfs *fv, uint64_t n)
{
	if (fv->mem + n > fv->undo_max || fv->mem + n < fv->mem)
		return -ENOMEM;
	fv->mem += n;
	return 0;
}

static void mem_release(fault_vfs *fv, uint64_t n)
{
	fv->mem = n > fv->mem ? 0 : fv->mem - n;
}

/* ---- undo records --------------------------------------------------------- */

static void undo_free(fault_vfs *fv, undo_rec *r)
{
	if (!r)
		return;
	mem_release(fv, r->charged);
	free(r->old);
	free(r);
}

/* Prepares the record of a change to [off, off+len) of a file currently
 * old_size long, reading the bytes it will overwrite. */
static int undo_prepare(fault_vfs *fv, sub_file *in, int can_read, uint64_t off, uint64_t len,
			uint64_t old_size, undo_rec **out)
{
	*out = NULL;
	uint64_t old_len = off < old_size ? old_size - off : 0;
	if (old_len > len)
		old_len = len;
	if (old_len && !can_read)
		return -EACCES; /* cannot save what the write destroys */
	if (old_len > SIZE_MAX / 2)
		return -ENOMEM;
	int rc = mem_charge(fv, sizeof(undo_rec) + old_len);
	if (rc)
		return rc;
	undo_rec *r = calloc(1, sizeof(*r));
	if (!r || (old_len && !(r->old = malloc((size_t)old_len)))) {
		free(r);
		mem_release(fv, sizeof(undo_rec) + old_len);
		return -ENOMEM;
	}
	r->off = off;
	r->len = len;
	r->old_size = old_size;
	r->old_len = (size_t)old_len;
	r->charged = sizeof(undo_rec) + (size_t)old_len;
	if (old_len) {
		ssize_t got = inner_read(in, r->old, r->old_len, off);
		if (got < 0) {
			undo_free(fv, r);
			return (int)got;
		}
		/* Shrunk by someone else since we asked for the size. */
		memset(r->old + got, 0, r->old_len - (size_t)got);
	}
	*out = r;
	return 0;
}

static void undo_push(fault_vfs *fv, fnode *nd, undo_rec *r)
{
	r->seq = ++fv->seq;
	if (nd->undo_tail)
		nd->undo_tail->next = r;
	else
		nd->undo = r;
	nd->undo_tail = r;
}

/* Everything this node had pending is durable or moot now. */
static void undo_clear(fault_vfs *fv, fnode *nd)
{
	undo_rec *r = nd->undo;
	while (r) {
		undo_rec *next = r->next;
		undo_free(fv, r);
		r = next;
	}
	nd->undo = nd->undo_tail = NULL;
	if (nd->keep) {
		sub_close(nd->keep);
		nd->keep = NULL;
	}
}

/* ---- held writes (fsync=lie) ---------------------------------------------- */

static void held_clear(fault_vfs *fv, fnode *nd)
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

static int held_add(fault_vfs *fv, fnode *nd, int is_trunc, uint64_t off, const void *buf,
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
static uint64_t held_size(const fnode *nd, uint64_t size)
{
	for (const held_op *h = nd->held; h; h = h->next) {
		if (h->is_trunc)
			size = h->off;
		else if (h->off + h->len > size)
			size = h->off + h->len;
	}
	return size;
}

/* ---- nodes ---------------------------------------------------------------- */

static fnode *node_find(fault_vfs *fv, uint64_t dev, uint64_t ino)
{
	for (fnode *nd = fv->nodes; nd; nd = nd->next)
		if (nd->dev == dev && nd->ino == ino)
			return nd;
	return NULL;
}

static void node_unlist(fault_vfs *fv, fnode *nd)
{
	for (fnode **pp = &fv->nodes; *pp; pp = &(*pp)->next) {
		if (*pp == nd) {
			*pp = nd->next;
			nd->next = NULL;
			return;
		}
	}
}

/* Frees a node nobody needs: no open file, nothing pending. */
static void node_maybe_free(fault_vfs *fv, fnode *nd)
{
	if (nd->refs > 0 || nd->undo)
		return;
	held_clear(fv, nd);
	if (!nd->dead)
		node_unlist(fv, nd);
	if (nd->keep)
		sub_close(nd->keep);
	free(nd->hidden);
	free(nd);
}

/* The inode lost its last name through this vfs: its pending changes can no
 * longer matter, and its number may be reused by the next file. */
static void node_kill(fault_vfs *fv, uint64_t dev, uint64_t ino)
{
	fnode *nd = node_find(fv, dev, ino);
	if (!nd)
		return;
	undo_clear(fv, nd);
	node_unlist(fv, nd);
	nd->dead = 1;
	node_maybe_free(fv, nd);
}

/* A synchronous truncation to zero (open with O_TRUNC, rename=copy's target)
 * made everything before it irrelevant. */
static void node_truncated(fault_vfs *fv, fnode *nd)
{
	undo_clear(fv, nd);
	held_clear(fv, nd);
}

/* ---- the cto=stale cache -------------------------------------------------- */

static void cto_put(fault_vfs *fv, cto_entry *e)
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

static cto_entry *cto_find(fault_vfs *fv, const char *path)
{
	for (cto_entry *e = fv->cache; e; e = e->next)
		if (strcmp(e->path, path) == 0)
			return e;
	return NULL;
}

/* This client changed path (or everything under it): forget what it cached. */
static void cto_invalidate(fault_vfs *fv, const char *path)
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
			cto_put(fv, e);
		} else {
			pp = &e->next;
		}
	}
}

static void cto_drop_all(fault_vfs *fv)
{
	cto_invalidate(fv, "");
}

/* ---- reads through the layer ---------------------------------------------- */

/* Reads what this client sees: the inner file with held changes on top. */
static ssize_t overlay_read(fault_file *ff, void *buf, size_t n, uint64_t off)
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

/* ---- the crash ------------------------------------------------------------ */

typedef struct span {
	uint64_t a, b;
} span;

typedef struct span_set {
	span *v;
	size_t n, cap;
} span_set;

/* Adds [a, b) keeping the set sorted and merged. */
static int span_add(span_set *s, uint64_t a, uint64_t b)
{
	if (a >= b)
		return 0;
	size_t i = 0;
	while (i < s->n && s->v[i].b < a)
		i++;
	size_t j = i;
	while (j < s->n && s->v[j].a <= b) {
		if (s->v[j].a < a)
			a = s->v[j].a;
		if (s->v[j].b > b)
			b = s->v[j].b;
		j++;
	}
	if (j == i) {
		if (KAAS_GROW(s->v, s->n, s->cap, 16))
			return -ENOMEM;
		memmove(s->v + i + 1, s->v + i, (s->n - i) * sizeof(*s->v));
		s->n++;
	} else if (j > i + 1) {
		memmove(s->v + i + 1, s->v + j, (s->n - j) * sizeof(*s->v));
		s->n -= j - i - 1;
	}
	s->v[i].a = a;
	s->v[i].b = b;
	return 0;
}

/* Puts bytes [a, b) of the file back as they were before record r. */
static int revert_range(sub_file *in, const undo_rec *r, uint64_t a, uint64_t b)
{
	uint64_t old_end = r->off + r->old_len;
	int rc = 0;
	if (a < old_end) {
		uint64_t z = b < old_end ? b : old_end;
		rc = sub_pwrite_full(in, r->old + (a - r->off), (size_t)(z - a), a);
		a = z;
	}
	if (rc == 0 && a < b)
		rc = write_zeros(in, a, b - a);
	return rc;
}

/* Reverts [a, b) of record r except the bytes already settled by a later
 * change that reached the disk; nothing at or past `limit` matters. */
static int revert_unsettled(sub_file *in, const undo_rec *r, const span_set *settled,
			    uint64_t a, uint64_t b, uint64_t limit)
{
	if (b > limit)
		b = limit;
	for (size_t i = 0; i < settled->n && a < b; i++) {
		const span *s = &settled->v[i];
		if (s->b <= a)
			continue;
		if (s->a >= b)
			break;
		if (s->a > a) {
			int rc = revert_range(in, r, a, s->a);
			if (rc)
				return rc;
		}
		a = s->b;
	}
	return a < b ? revert_range(in, r, a, b) : 0;
}

/* Applies the crash outcome to one file.  Walking the changes newest first, a
 * byte keeps its current value once a change that reached the disk covers it
 * (settled); otherwise each change that did not reach the disk puts back the
 * value it overwrote.  The result is, byte by byte, the value of the newest
 * change that reached the disk, or the durable value. */
static int crash_node(fnode *nd, undo_rec **recs, size_t n)
{
	sub_file *in = nd->keep;
	for (fault_file *f = nd->files; !in && f; f = f->node_next)
		if (f->can_write)
			in = f->inner;
	if (!in)
		return -EBADF; /* cannot happen: a change implies a writable handle */

	uint64_t final = recs[0]->old_size;
	for (size_t i = n; i-- > 0;) {
		const undo_rec *r = recs[i];
		if (r->out == OUT_KEEP) {
			final = r->new_size;
			break;
		}
		if (r->out == OUT_TORN) {
			final = r->old_size > r->cut ? r->old_size : r->cut;
			break;
		}
	}

	span_set settled = {0};
	int rc = 0;
	for (size_t i = n; i-- > 0 && rc == 0;) {
		const undo_rec *r = recs[i];
		/* A truncate decides every byte from its lower size on: the ones
		 * it cut and any that an undone earlier change would bring back. */
		uint64_t a = r->off, b = r->is_trunc ? UINT64_MAX : r->off + r->len;
		switch (r->out) {
		case OUT_KEEP:
			rc = span_add(&settled, a, b);
			break;
		case OUT_DROP:
			rc = revert_unsettled(in, r, &settled, a, b, final);
			break;
		case OUT_TORN:
			rc = revert_unsettled(in, r, &settled, r->cut, b, final);
			if (rc == 0)
				rc = span_add(&settled, a, r->cut);
			break;
		}
	}
	free(settled.v);
	if (rc == 0)
		rc = sub_ftruncate(in, final);
	return rc;
}

static int cmp_rec_seq(const void *a, const void *b)
{
	const undo_rec *x = *(undo_rec *const *)a, *y = *(undo_rec *const *)b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Decides, in the order the changes were made, what became of each. */
static void crash_decide(fault_vfs *fv, undo_rec *r)
{
	if (fv->crash_mode == CRASH_DROP) {
		r->out = OUT_DROP;
		return;
	}
	if (fv->crash_mode == CRASH_KEEP) {
		r->out = OUT_KEEP;
		return;
	}
	/* Sector boundaries strictly inside the write: where it can tear. */
	uint64_t first = (r->off / FAULT_SECTOR + 1) * FAULT_SECTOR;
	uint64_t last = r->len ? ((r->off + r->len - 1) / FAULT_SECTOR) * FAULT_SECTOR : 0;
	int tearable = !r->is_trunc && r->len > 0 && first <= last;
	uint64_t x = rng_next(fv) % 3;
	if (x == 2 && !tearable)
		x = rng_next(fv) % 2;
	r->out = x == 0 ? OUT_KEEP : x == 1 ? OUT_DROP : OUT_TORN;
	if (r->out == OUT_TORN)
		r->cut = first + FAULT_SECTOR * (rng_next(fv) % ((last - first) / FAULT_SECTOR + 1));
}

static void report_decision(fault_vfs *fv, const undo_rec *r)
{
	if (!fv->hook)
		return;
	char what[48];
	if (r->out == OUT_TORN)
		snprintf(what, sizeof(what), "torn:%" PRIu64, r->cut);
	else
		snprintf(what, sizeof(what), "%s", r->out == OUT_KEEP ? "keep" : "drop");
	fire_hook(fv, "crash-change", what);
}

static int crash_locked(fault_vfs *fv)
{
	if (fv->crashed)
		return 0;
	fv->crashed = 1;
	int rc = 0;

	size_t total = 0;
	for (fnode *nd = fv->nodes; nd; nd = nd->next) {
		held_clear(fv, nd);
		for (undo_rec *r = nd->undo; r; r = r->next)
			total++;
	}
	undo_rec **all = total ? calloc(total, sizeof(*all)) : NULL;
	if (total && !all) {
		rc = -ENOMEM; /* cannot decide: treat every change as kept */
	} else if (total) {
		size_t k = 0;
		for (fnode *nd = fv->nodes; nd; nd = nd->next)
			for (undo_rec *r = nd->undo; r; r = r->next)
				all[k++] = r;
		qsort(all, total, sizeof(*all), cmp_rec_seq);
		for (size_t i = 0; i < total; i++) {
			crash_decide(fv, all[i]);
			report_decision(fv, all[i]);
		}
		/* Per node, its records in order (they are already in seq order). */
		for (fnode *nd = fv->nodes; nd; nd = nd->next) {
			size_t n = 0;
			for (undo_rec *r = nd->undo; r; r = r->next)
				all[n++] = r;
			if (n) {
				int nrc = crash_node(nd, all, n);
				if (nrc && !rc)
					rc = nrc;
			}
		}
	}
	free(all);

	fnode *nd = fv->nodes;
	while (nd) {
		fnode *next = nd->next;
		undo_clear(fv, nd);
		node_maybe_free(fv, nd);
		nd = next;
	}
	cto_drop_all(fv);
	return rc;
}

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

/* cto=stale: the contents at first open, if the file is small enough. */
static cto_entry *cto_snapshot(fault_vfs *fv, fault_file *ff)
{
	cto_entry *e = cto_find(fv, ff->path);
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
		e->len = (size_t)held_size(ff->node, st.size);
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
		ssize_t r = overlay_read(ff, data + got, FAULT_CTO_MAX + 1 - (size_t)got, (uint64_t)got);
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

static int fw_open(sub_vfs *v, const char *path, int flags, unsigned mode, sub_file **out)
{
	fault_vfs *fv = FV(v);
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	lock(fv);
	fault_file *ff = NULL;
	int mutating = (flags & (O_CREAT | O_TRUNC)) != 0;
	if ((rc = enter(fv, OP_OPEN, path, NULL)))
		goto out;
	if (mutating && (rc = crash_point(fv)))
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
		fnode *nd = node_find(fv, st.dev, st.ino);
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
			node_truncated(fv, nd);
		file_attach(ff, nd);
		if (fv->cto_stale) {
			if (acc == O_RDONLY && !(flags & O_TRUNC))
				ff->cache = cto_snapshot(fv, ff);
			else
				cto_invalidate(fv, path);
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

static ssize_t write_through(fault_vfs *fv, fault_file *ff, const void *buf, size_t n,
			     uint64_t off, int append);

/* fsync=lie: the held changes finally reach the inner backend, unsynced. */
static int held_flush(fault_vfs *fv, fault_file *ff)
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
				rc = undo_prepare(fv, ff->inner, ff->can_read, lo, hi - lo, size, &r);
			}
			if (rc == 0 && (rc = sub_ftruncate(ff->inner, h->off)) == 0) {
				r->is_trunc = 1;
				r->new_size = h->off;
				undo_push(fv, nd, r);
			} else {
				undo_free(fv, r);
			}
		} else {
			size_t done = 0;
			while (rc == 0 && done < h->len) {
				ssize_t w = write_through(fv, ff, h->data + done, (size_t)(h->len - done),
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
	held_clear(fv, nd); /* what failed to reach the backend is lost */
	return rc;
}

static int fw_close(sub_file *f)
{
	fault_file *ff = FF(f);
	fault_vfs *fv = FV(f->vfs);
	lock(fv);
	/* Like close(2): the file is released whatever the answer. */
	int rc = enter(fv, OP_CLOSE, ff->path, NULL);
	sub_file *in = ff->inner;
	fnode *nd = ff->node;
	char *hidden = NULL;
	if (nd) {
		if (!fv->crashed && nd->held && ff->can_write) {
			int frc = held_flush(fv, ff);
			if (!rc)
				rc = frc;
		}
		file_detach(ff);
		if (nd->refs == 0 && nd->hidden) {
			/* rename=hide: the last close removes the hidden name, and
			 * with it the file's last name. */
			hidden = nd->hidden;
			nd->hidden = NULL;
			undo_clear(fv, nd);
			node_unlist(fv, nd);
			nd->dead = 1;
		}
		if (!fv->crashed && nd->undo && !nd->keep && ff->can_write) {
			nd->keep = in; /* the undo records need a writable handle */
			in = NULL;
		}
		node_maybe_free(fv, nd);
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
	cto_put(fv, ff->cache);
	free(ff->path);
	free(ff);
	unlock(fv);
	return rc;
}

static ssize_t fw_pread(sub_file *f, void *buf, size_t n, uint64_t off)
{
	fault_file *ff = FF(f);
	fault_vfs *fv = FV(f->vfs);
	lock(fv);
	ssize_t rc = enter(fv, OP_PREAD, ff->path, NULL);
	if (rc == 0) {
		if (ff->cache) {
			const cto_entry *e = ff->cache;
			size_t k = off < e->len ? e->len - (size_t)off : 0;
			if (k > n)
				k = n;
			if (!e->data)
				rc = k ? overlay_read(ff, buf, k, off) : 0; /* fresh bytes, cached size */
			else {
				if (k)
					memcpy(buf, e->data + off, k);
				rc = (ssize_t)k;
			}
		} else if (!ff->can_read) {
			rc = -EBADF;
		} else {
			rc = overlay_read(ff, buf, n, off);
		}
	}
	unlock(fv);
	return rc;
}

/* A write that goes to the inner backend now, leaving an undo record. */
static ssize_t write_through(fault_vfs *fv, fault_file *ff, const void *buf, size_t n,
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
		if ((rc = undo_prepare(fv, ff->inner, ff->can_read, off, n, size, &r)))
			return rc;
	}
	ssize_t w = sub_pwrite(ff->inner, buf, n, off);
	if (w > 0 && r) {
		r->len = (uint64_t)w;
		if (r->old_len > (size_t)w)
			r->old_len = (size_t)w; /* the tail of old stays unused */
		r->new_size = off + (uint64_t)w > size ? off + (uint64_t)w : size;
		undo_push(fv, nd, r);
	} else {
		undo_free(fv, r);
	}
	return w;
}

static ssize_t fw_pwrite(sub_file *f, const void *buf, size_t n, uint64_t off)
{
	fault_file *ff = FF(f);
	fault_vfs *fv = FV(f->vfs);
	lock(fv);
	ssize_t rc = enter(fv, OP_PWRITE, ff->path, NULL);
	if (rc == 0)
		rc = crash_point(fv);
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
			off = held_size(ff->node, size);
		}
		rc = held_add(fv, ff->node, 0, off, buf, n);
		if (rc == 0)
			rc = (ssize_t)n;
	} else {
		rc = write_through(fv, ff, buf, n, off, (ff->flags & O_APPEND) != 0);
	}
out:
	unlock(fv);
	return rc;
}

static int fw_fsync(sub_file *f)
{
	fault_file *ff = FF(f);
	fault_vfs *fv = FV(f->vfs);
	lock(fv);
	int rc = enter(fv, OP_FSYNC, ff->path, NULL);
	if (rc == 0)
		rc = crash_point(fv);
	if (rc == 0) {
		fv->mutations++;
		if (!fv->fsync_lie) {
			rc = sub_fsync(ff->inner);
			/* fsync of any descriptor makes the whole inode durable. */
			if (rc == 0 && ff->node && ff->node->undo)
				undo_clear(fv, ff->node);
		}
	}
	unlock(fv);
	return rc;
}

static int fw_ftruncate(sub_file *f, uint64_t size)
{
	fault_file *ff = FF(f);
	fault_vfs *fv = FV(f->vfs);
	lock(fv);
	int rc = enter(fv, OP_FTRUNCATE, ff->path, NULL);
	if (rc == 0)
		rc = crash_point(fv);
	if (rc)
		goto out;
	fv->mutations++;
	fnode *nd = ff->node;
	if (!ff->can_write || !nd || nd->dead) {
		rc = sub_ftruncate(ff->inner, size);
	} else if (fv->fsync_lie) {
		rc = held_add(fv, nd, 1, size, NULL, 0);
	} else {
		uint64_t cur;
		undo_rec *r = NULL;
		if ((rc = inner_size(ff->inner, &cur)))
			goto out;
		uint64_t lo = size < cur ? size : cur, hi = size < cur ? cur : size;
		if ((rc = undo_prepare(fv, ff->inner, ff->can_read, lo, hi - lo, cur, &r)))
			goto out;
		rc = sub_ftruncate(ff->inner, size);
		if (rc == 0) {
			r->is_trunc = 1;
			r->new_size = size;
			undo_push(fv, nd, r);
		} else {
			undo_free(fv, r);
		}
	}
out:
	unlock(fv);
	return rc;
}

static int fw_fstat(sub_file *f, sub_stat *st)
{
	fault_file *ff = FF(f);
	fault_vfs *fv = FV(f->vfs);
	lock(fv);
	int rc = enter(fv, OP_FSTAT, ff->path, NULL);
	if (rc == 0)
		rc = sub_fstat(ff->inner, st);
	if (rc == 0) {
		if (ff->cache)
			st->size = ff->cache->len;
		else if (ff->node && ff->node->held)
			st->size = held_size(ff->node, st->size);
	}
	unlock(fv);
	return rc;
}

static int fw_native_fd(sub_file *f)
{
	(void)f;
	return -1;
}

/* ---- path operations ------------------------------------------------------ */

static int fw_stat(sub_vfs *v, const char *path, sub_stat *st)
{
	fault_vfs *fv = FV(v);
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	lock(fv);
	rc = enter(fv, OP_STAT, path, NULL);
	if (rc == 0)
		rc = sub_stat_path(fv->inner, path, st);
	if (rc == 0 && S_ISREG(st->mode)) {
		cto_entry *e = fv->cto_stale ? cto_find(fv, path) : NULL;
		fnode *nd = node_find(fv, st->dev, st->ino);
		if (e)
			st->size = e->len;
		else if (nd && nd->held)
			st->size = held_size(nd, st->size);
	}
	unlock(fv);
	return rc;
}

/* Before path loses its name: remember its inode if that was its last name. */
static void last_link(fault_vfs *fv, const char *path, int *is_last, sub_stat *st)
{
	*is_last = sub_stat_path(fv->inner, path, st) == 0 && S_ISREG(st->mode) && st->nlink == 1;
}

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
	fnode *tn = node_find(fv, dst_st.dev, dst_st.ino);
	if (tn)
		node_truncated(fv, tn); /* the copy's fsync below covers it all */
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
		node_kill(fv, st.dev, st.ino);
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
static int rename_copy(fault_vfs *fv, const char *from, const char *to)
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
static int hide_if_open(fault_vfs *fv, const char *path)
{
	sub_stat st;
	if (sub_stat_path(fv->inner, path, &st) != 0 || !S_ISREG(st.mode))
		return 0;
	fnode *nd = node_find(fv, st.dev, st.ino);
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

static int fw_rename(sub_vfs *v, const char *from, const char *to)
{
	fault_vfs *fv = FV(v);
	int rc = sub_path_check(from);
	if (rc || (rc = sub_path_check(to)))
		return rc;
	lock(fv);
	if ((rc = enter(fv, OP_RENAME, from, to)) || (rc = crash_point(fv)))
		goto out;
	fv->mutations++;
	cto_invalidate(fv, from);
	cto_invalidate(fv, to);
	if (fv->rename_copy) {
		rc = rename_copy(fv, from, to);
	} else {
		sub_stat tst, fst;
		int last;
		if (fv->rename_hide && strcmp(from, to) != 0 && (rc = hide_if_open(fv, to)) < 0)
			goto out;
		last_link(fv, to, &last, &tst);
		rc = sub_rename(fv->inner, from, to);
		if (rc == 0 && last && !(sub_stat_path(fv->inner, to, &fst) == 0 &&
					 fst.dev == tst.dev && fst.ino == tst.ino))
			node_kill(fv, tst.dev, tst.ino);
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
	if ((rc = enter(fv, OP_UNLINK, path, NULL)) || (rc = crash_point(fv)))
		goto out;
	fv->mutations++;
	cto_invalidate(fv, path);
	sub_stat st;
	int last;
	if (fv->rename_hide && (rc = hide_if_open(fv, path)) != 0) {
		if (rc > 0)
			rc = 0; /* hidden, removed at the last close */
		goto out;
	}
	last_link(fv, path, &last, &st);
	rc = sub_unlink(fv->inner, path);
	if (rc == 0 && last)
		node_kill(fv, st.dev, st.ino);
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
	if ((rc = enter(fv, OP_MKDIR, path, NULL)) == 0 && (rc = crash_point(fv)) == 0) {
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
	if ((rc = enter(fv, OP_RMDIR, path, NULL)) == 0 && (rc = crash_point(fv)) == 0) {
		fv->mutations++;
		cto_invalidate(fv, path);
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
	rc = enter(fv, OP_READDIR, path, NULL);
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
	if ((rc = enter(fv, OP_FSYNC_DIR, path, NULL)) == 0 && (rc = crash_point(fv)) == 0) {
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
	rc = enter(fv, OP_STATVFS, path, NULL);
	if (rc == 0)
		rc = sub_statvfs(fv->inner, path, out);
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
		undo_clear(fv, nd);
		held_clear(fv, nd);
		free(nd->hidden); /* left behind, as by a killed FUSE daemon */
		free(nd);
		nd = next;
	}
	cto_drop_all(fv);
	while (fv->rules) {
		fault_rule *r = fv->rules;
		fv->rules = r->next;
		free(r->glob);
		free(r);
	}
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
	.open = fw_open,
	.close = fw_close,
	.pread = fw_pread,
	.pwrite = fw_pwrite,
	.fsync = fw_fsync,
	.ftruncate = fw_ftruncate,
	.fstat = fw_fstat,
	.stat = fw_stat,
	.rename = fw_rename,
	.unlink = fw_unlink,
	.mkdir = fw_mkdir,
	.rmdir = fw_rmdir,
	.readdir = fw_readdir,
	.fsync_dir = fw_fsync_dir,
	.statvfs = fw_statvfs,
	.identity = fw_identity,
	.native_fd = fw_native_fd,
	.destroy = fw_destroy,
};

/* ---- option parsing ------------------------------------------------------- */

/* Decimal digits only (no sign, no spaces), optionally with a binary size
 * suffix k/m/g when sizes is set. */
static int parse_u64(const char *s, size_t len, int sizes, uint64_t *out)
{
	uint64_t v = 0, mult = 1;
	if (len && sizes) {
		switch (s[len - 1]) {
		case 'k': case 'K': mult = 1ull << 10; len--; break;
		case 'm': case 'M': mult = 1ull << 20; len--; break;
		case 'g': case 'G': mult = 1ull << 30; len--; break;
		}
	}
	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		uint64_t d = (uint64_t)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	if (v > UINT64_MAX / mult)
		return -EINVAL;
	*out = v * mult;
	return 0;
}

static int parse_op(const char *s, size_t len)
{
	for (int i = 0; i < OP_COUNT; i++)
		if (strlen(op_names[i]) == len && strncmp(op_names[i], s, len) == 0)
			return i;
	return -1;
}

static int parse_errno(const char *s, size_t len)
{
	for (size_t i = 0; i < sizeof(errno_names) / sizeof(errno_names[0]); i++)
		if (strlen(errno_names[i].name) == len && strncmp(errno_names[i].name, s, len) == 0)
			return errno_names[i].value;
	return 0;
}

#define OPT_ERR(...)                                                     \
	do {                                                             \
		int n_ = snprintf(err, errlen, "fault option '%.*s': ", (int)optlen, opt); \
		if (n_ >= 0 && (size_t)n_ < errlen)                      \
			snprintf(err + n_, errlen - (size_t)n_, __VA_ARGS__); \
		return -EINVAL;                                          \
	} while (0)

/* Parses one "name=value" option into fv. */
static int parse_option(fault_vfs *fv, const char *opt, size_t optlen, char *err, size_t errlen)
{
	const char *eq = memchr(opt, '=', optlen);
	if (!eq)
		OPT_ERR("expected name=value (fault options follow the last '?' of the URL)");
	size_t nlen = (size_t)(eq - opt);
	const char *val = eq + 1;
	size_t vlen = optlen - nlen - 1;
#define IS(name) (nlen == strlen(name) && strncmp(opt, name, nlen) == 0)
#define VAL(s) (vlen == strlen(s) && strncmp(val, s, vlen) == 0)
	if (IS("seed")) {
		if (parse_u64(val, vlen, 0, &fv->seed))
			OPT_ERR("seed must be a non-negative decimal integer");
	} else if (IS("crash_after")) {
		if (parse_u64(val, vlen, 0, &fv->crash_after))
			OPT_ERR("crash_after must be a non-negative decimal integer");
		fv->has_crash_after = 1;
	} else if (IS("undo_max")) {
		if (parse_u64(val, vlen, 1, &fv->undo_max))
			OPT_ERR("undo_max must be a byte count (suffix k, m or g allowed)");
	} else if (IS("copy_delay_us")) {
		if (parse_u64(val, vlen, 0, &fv->copy_delay_us) || fv->copy_delay_us > 10000000)
			OPT_ERR("copy_delay_us must be a number of microseconds up to 10000000");
	} else if (IS("crash_mode")) {
		if (VAL("random"))
			fv->crash_mode = CRASH_RANDOM;
		else if (VAL("drop"))
			fv->crash_mode = CRASH_DROP;
		else if (VAL("keep"))
			fv->crash_mode = CRASH_KEEP;
		else
			OPT_ERR("crash_mode must be random, drop or keep");
	} else if (IS("fsync")) {
		if (VAL("lie"))
			fv->fsync_lie = 1;
		else if (VAL("honest"))
			fv->fsync_lie = 0;
		else
			OPT_ERR("fsync must be lie or honest");
	} else if (IS("rename")) {
		fv->rename_copy = fv->rename_hide = 0;
		if (VAL("copy"))
			fv->rename_copy = 1;
		else if (VAL("hide"))
			fv->rename_hide = 1;
		else if (!VAL("atomic"))
			OPT_ERR("rename must be copy, hide or atomic");
	} else if (IS("excl")) {
		fv->excl_broken = fv->excl_eperm = 0;
		if (VAL("broken"))
			fv->excl_broken = 1;
		else if (VAL("eperm"))
			fv->excl_eperm = 1;
		else if (!VAL("atomic"))
			OPT_ERR("excl must be broken, eperm or atomic");
	} else if (IS("cto")) {
		if (VAL("stale"))
			fv->cto_stale = CTO_STALE;
		else if (VAL("size"))
			fv->cto_stale = CTO_SIZE;
		else if (VAL("strict"))
			fv->cto_stale = CTO_STRICT;
		else
			OPT_ERR("cto must be stale, size or strict");
	} else if (IS("leak")) {
		char *g = vlen ? strndup(val, vlen) : NULL;
		if (!g)
			OPT_ERR("leak needs a path pattern");
		free(fv->leak_glob);
		fv->leak_glob = g;
	} else if (IS("fail") || IS("failpath")) {
		/* fail=<op>:<n>[+]:<ERRNO>   failpath=<glob>:<op>:<ERRNO>
		 * Split at the last two ':' so a glob may contain ':'. */
		const char *c2 = NULL, *c1 = NULL;
		for (const char *p = val + vlen; p > val; p--) {
			if (p[-1] == ':') {
				if (!c2)
					c2 = p - 1;
				else {
					c1 = p - 1;
					break;
				}
			}
		}
		if (!c1)
			OPT_ERR("%s", IS("fail") ? "want fail=<op>:<n>[+]:<ERRNO>"
						 : "want failpath=<glob>:<op>:<ERRNO>");
		const char *a = val, *b = c1 + 1, *e = c2 + 1;
		size_t alen = (size_t)(c1 - val), blen = (size_t)(c2 - b), elen = (size_t)(val + vlen - e);
		fault_rule *r = calloc(1, sizeof(*r));
		if (!r)
			return -ENOMEM;
		r->err = parse_errno(e, elen);
		if (IS("fail")) {
			r->op = parse_op(a, alen);
			r->kind = RULE_NTH;
			if (blen && b[blen - 1] == '+') {
				r->kind = RULE_FROM;
				blen--;
			}
			if (r->op < 0 || parse_u64(b, blen, 0, &r->n) || r->n == 0 || !r->err) {
				int op = r->op, errv = r->err;
				free(r);
				if (op < 0)
					OPT_ERR("unknown operation '%.*s'", (int)alen, a);
				if (!errv)
					OPT_ERR("unknown errno name '%.*s'", (int)elen, e);
				OPT_ERR("call number must be 1 or more, optionally followed by '+'");
			}
		} else {
			r->op = parse_op(b, blen);
			r->kind = RULE_PATH;
			r->glob = alen ? strndup(a, alen) : NULL;
			if (r->op < 0 || !r->err || !r->glob) {
				int op = r->op, errv = r->err, hadglob = alen > 0;
				free(r->glob);
				free(r);
				if (!hadglob)
					OPT_ERR("empty path pattern");
				if (op < 0)
					OPT_ERR("unknown operation '%.*s'", (int)blen, b);
				if (!errv)
					OPT_ERR("unknown errno name '%.*s'", (int)elen, e);
				return -ENOMEM;
			}
		}
		/* Keep the order they were given: the first match wins. */
		fault_rule **pp = &fv->rules;
		while (*pp)
			pp = &(*pp)->next;
		*pp = r;
	} else {
		OPT_ERR("unknown option (known: seed, fail, failpath, crash_after, crash_mode, "
			"undo_max, fsync, rename, copy_delay_us, excl, cto, leak)");
	}
#undef IS
#undef VAL
	return 0;
}

static int parse_options(fault_vfs *fv, const char *opts, char *err, size_t errlen)
{
	for (const char *p = opts; *p;) {
		size_t k = strcspn(p, "&");
		if (k) {
			int rc = parse_option(fv, p, k, err, errlen);
			if (rc)
				return rc;
		}
		p += k;
		if (*p == '&')
			p++;
	}
	return 0;
}

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
	if ((rc = parse_options(fv, fv->opts, err, errlen)))
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
		while (fv->rules) {
			fault_rule *r = fv->rules;
			fv->rules = r->next;
			free(r->glob);
			free(r);
		}
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
	int rc = crash_locked(fv);
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
