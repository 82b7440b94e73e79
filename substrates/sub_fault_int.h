/*
 * sub_fault_int.h — internals shared by the fault backend's files.  Not for
 * callers: everything else uses substrates/sub_fault.h.
 *
 * The backend is one module in six files, one per concern:
 *   sub_fault.c         the vfs: the methods table, the path operations,
 *                       sub_fault_open and the sub_fault.h controls;
 *   sub_fault_file.c    the file operations (open, close, pread, pwrite, ...);
 *   sub_fault_inject.c  error injection: fail= and failpath= rules, and the
 *                       crash_after= crash point;
 *   sub_fault_crash.c   the crash model: undo records per inode and the
 *                       power loss that replays them;
 *   sub_fault_quirks.c  what real substrates get wrong: the lying fsync
 *                       (held writes), rename as copy + unlink, rename=hide,
 *                       and the close-to-open caches (cto=stale, cto=size);
 *   sub_fault_opts.c    parsing the options of the URL.
 * A new quirk adds its state to fault_vfs below, its behaviour to
 * sub_fault_quirks.c (or a file of its own) and one entry to the option
 * table in sub_fault_opts.c.
 *
 * Locking: every sub__fault_* function here expects the vfs lock held.
 */
#ifndef KAAS_SUB_FAULT_INT_H
#define KAAS_SUB_FAULT_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "substrates/sub.h"
#include "substrates/sub_fault.h"

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
	int statvfs_none; /* statvfs=none: 0 blocks, as a volume without space accounting */
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

static inline void lock(fault_vfs *fv)
{
	pthread_mutex_lock(&fv->mu);
}

static inline void unlock(fault_vfs *fv)
{
	pthread_mutex_unlock(&fv->mu);
}

/* splitmix64: small, good enough, and the same everywhere. */
static inline uint64_t rng_next(fault_vfs *fv)
{
	uint64_t z = (fv->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- inner helpers -------------------------------------------------------- */

/* Reads up to n bytes, looping over short reads; returns the count (short
 * only at EOF) or -errno. */
static inline ssize_t inner_read(sub_file *in, unsigned char *buf, size_t n, uint64_t off)
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

static inline int inner_size(sub_file *in, uint64_t *size)
{
	sub_stat st;
	int rc = sub_fstat(in, &st);
	if (rc == 0)
		*size = st.size;
	return rc;
}

static inline void fire_hook(fault_vfs *fv, const char *point, const char *what)
{
	if (fv->hook)
		fv->hook(fv->hook_arg, point, what);
}

static inline int mem_charge(fault_vfs *fv, uint64_t n)
{
	if (fv->mem + n > fv->undo_max || fv->mem + n < fv->mem)
		return -ENOMEM;
	fv->mem += n;
	return 0;
}

static inline void mem_release(fault_vfs *fv, uint64_t n)
{
	fv->mem = n > fv->mem ? 0 : fv->mem - n;
}

/* ---- sub_fault_inject.c --------------------------------------------------- */

/* Counts the call, then answers -EIO after a crash or the injected errno of
 * the first matching rule; 0 lets the call proceed. */
int sub__fault_enter(fault_vfs *fv, int op, const char *path, const char *path2);
/* Before a mutating call: with crash_after=N, the (N+1)-th does not happen
 * (the vfs crashes and the call answers -EIO). */
int sub__fault_crash_point(fault_vfs *fv);
void sub__fault_rules_free(fault_vfs *fv);

/* ---- sub_fault_crash.c ---------------------------------------------------- */

void sub__fault_undo_free(fault_vfs *fv, undo_rec *r);
int sub__fault_undo_prepare(fault_vfs *fv, sub_file *in, int can_read, uint64_t off, uint64_t len,
			    uint64_t old_size, undo_rec **out);
void sub__fault_undo_push(fault_vfs *fv, fnode *nd, undo_rec *r);
void sub__fault_undo_clear(fault_vfs *fv, fnode *nd);
fnode *sub__fault_node_find(fault_vfs *fv, uint64_t dev, uint64_t ino);
void sub__fault_node_unlist(fault_vfs *fv, fnode *nd);
void sub__fault_node_maybe_free(fault_vfs *fv, fnode *nd);
void sub__fault_node_kill(fault_vfs *fv, uint64_t dev, uint64_t ino);
void sub__fault_node_truncated(fault_vfs *fv, fnode *nd);
int sub__fault_crash_locked(fault_vfs *fv);

/* ---- sub_fault_quirks.c --------------------------------------------------- */

void sub__fault_held_clear(fault_vfs *fv, fnode *nd);
int sub__fault_held_add(fault_vfs *fv, fnode *nd, int is_trunc, uint64_t off, const void *buf,
			uint64_t len);
uint64_t sub__fault_held_size(const fnode *nd, uint64_t size);
int sub__fault_held_flush(fault_vfs *fv, fault_file *ff);
void sub__fault_cto_put(fault_vfs *fv, cto_entry *e);
cto_entry *sub__fault_cto_find(fault_vfs *fv, const char *path);
void sub__fault_cto_invalidate(fault_vfs *fv, const char *path);
void sub__fault_cto_drop_all(fault_vfs *fv);
cto_entry *sub__fault_cto_snapshot(fault_vfs *fv, fault_file *ff);
ssize_t sub__fault_overlay_read(fault_file *ff, void *buf, size_t n, uint64_t off);
int sub__fault_rename_copy(fault_vfs *fv, const char *from, const char *to);
int sub__fault_hide_if_open(fault_vfs *fv, const char *path);

/* ---- sub_fault_file.c ----------------------------------------------------- */

ssize_t sub__fault_write_through(fault_vfs *fv, fault_file *ff, const void *buf, size_t n,
				 uint64_t off, int append);
int sub__fault_file_open(sub_vfs *v, const char *path, int flags, unsigned mode, sub_file **out);
int sub__fault_file_close(sub_file *f);
ssize_t sub__fault_file_pread(sub_file *f, void *buf, size_t n, uint64_t off);
ssize_t sub__fault_file_pwrite(sub_file *f, const void *buf, size_t n, uint64_t off);
int sub__fault_file_fsync(sub_file *f);
int sub__fault_file_ftruncate(sub_file *f, uint64_t size);
int sub__fault_file_fstat(sub_file *f, sub_stat *st);
int sub__fault_file_native_fd(sub_file *f);

/* ---- sub_fault_opts.c ----------------------------------------------------- */

/* Parses "name=value&name=value..." into fv; on failure writes a message
 * naming the option to err and returns -EINVAL (or -ENOMEM). */
int sub__fault_parse_options(fault_vfs *fv, const char *opts, char *err, size_t errlen);

#endif
