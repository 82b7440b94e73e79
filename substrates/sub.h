/*
 * sub.h — the filesystem substrate interface.
 *
 * One table of filesystem operations, in the spirit of SQLite's sqlite3_vfs /
 * sqlite3_io_methods.  Everything in kaas that touches the shared volume (the
 * conformance checks, the storage engine, the cluster files) goes through it,
 * so that the same code runs on a mounted path (posix), on an NFS server spoken
 * to directly (nfs, libnfs) and on the fault-injecting wrapper used by tests.
 *
 * Conventions:
 *   - every call returns 0 (or a byte count) on success and a negative errno on
 *     failure; nothing sets errno for the caller;
 *   - paths are relative to the substrate's root, '/'-separated, no leading
 *     '/'; "" and "." name the root itself;
 *   - one sub_vfs is one client of the filesystem.  Two sub_vfs opened on the
 *     same URL are two independent clients where the backend can make them so
 *     (nfs: two NFS clients; posix: one kernel client, so not independent);
 *   - a sub_vfs may be used from several threads; backends that are not
 *     thread-safe underneath (libnfs) serialise internally.
 */
#ifndef KAAS_SUB_H
#define KAAS_SUB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SUB_PATH_MAX 4096

typedef struct sub_vfs sub_vfs;
typedef struct sub_file sub_file;

typedef struct sub_stat {
	uint64_t size;
	uint64_t ino;
	uint64_t dev;
	uint64_t nlink;
	int64_t mtime_ns;
	uint32_t mode; /* S_IFMT type bits and permission bits */
} sub_stat;

typedef struct sub_fsinfo {
	uint64_t bsize;
	uint64_t blocks;
	uint64_t bfree;
	uint64_t bavail;
	uint64_t files;
	uint64_t ffree;
} sub_fsinfo;

/* What the volume is, as far as the backend can tell.  Used by preflight to
 * explain a verdict and by the qualification stamp to bind a verdict to one
 * volume.  Strings are always NUL-terminated, empty when unknown. */
typedef struct sub_identity {
	char backend[16];    /* "posix", "nfs", "fault" */
	char fstype[64];     /* "ext4", "nfs4", "fuse.s3fs", "tmpfs", "nfs3-server" ... */
	uint64_t fs_magic;   /* statfs f_type; 0 when the backend has none */
	char fsid[64];       /* statfs f_fsid in hex, or "server:/export" for nfs */
	char source[512];    /* mount source ("server:/export", "/dev/vda", ...) */
	char options[1024];  /* mount options, per-mount then superblock */
	char mountpoint[SUB_PATH_MAX];
	char root[SUB_PATH_MAX]; /* canonical root: absolute path or URL */
} sub_identity;

/* d_type values passed to readdir callbacks (same numbers as <dirent.h>). */
enum { SUB_DT_UNKNOWN = 0, SUB_DT_DIR = 4, SUB_DT_REG = 8, SUB_DT_LNK = 10 };

/* Return non-zero to stop the listing; that value is returned by readdir. */
typedef int (*sub_readdir_cb)(void *arg, const char *name, int d_type);

typedef struct sub_methods {
	const char *name;
	int (*open)(sub_vfs *, const char *path, int flags, unsigned mode, sub_file **out);
	int (*close)(sub_file *);
	ssize_t (*pread)(sub_file *, void *buf, size_t n, uint64_t off);
	ssize_t (*pwrite)(sub_file *, const void *buf, size_t n, uint64_t off);
	int (*fsync)(sub_file *);
	int (*ftruncate)(sub_file *, uint64_t size);
	int (*fstat)(sub_file *, sub_stat *);
	int (*stat)(sub_vfs *, const char *path, sub_stat *);
	int (*rename)(sub_vfs *, const char *from, const char *to);
	int (*unlink)(sub_vfs *, const char *path);
	int (*mkdir)(sub_vfs *, const char *path, unsigned mode);
	int (*rmdir)(sub_vfs *, const char *path);
	/* Lists names other than "." and "..", in no particular order. */
	int (*readdir)(sub_vfs *, const char *path, sub_readdir_cb cb, void *arg);
	int (*fsync_dir)(sub_vfs *, const char *path);
	int (*statvfs)(sub_vfs *, const char *path, sub_fsinfo *);
	int (*identity)(sub_vfs *, sub_identity *);
	/* A kernel descriptor for sendfile(2) and friends, or -1 (nfs, fault). */
	int (*native_fd)(sub_file *);
	void (*destroy)(sub_vfs *);
} sub_methods;

/* Every backend's vfs and file structs start with these. */
struct sub_vfs {
	const sub_methods *m;
	char *url; /* the URL it was opened with (owned) */
};

struct sub_file {
	sub_vfs *vfs;
};

/* ---- opening a substrate by URL ------------------------------------------
 *   /abs/path, rel/path, posix:/path   a mounted directory (posix backend)
 *   nfs://server[:port]/export?version=3|4[&...]   libnfs, no mount
 *   fault:<inner-url>?<options>        fault injection around another backend
 * On failure returns -errno and writes a one-line reason into err. */
int sub_open_url(const char *url, sub_vfs **out, char *err, size_t errlen);
void sub_destroy(sub_vfs *vfs); /* NULL-safe */

/* Backend constructors (one file each). */
int sub_posix_open(const char *root, sub_vfs **out, char *err, size_t errlen);
int sub_nfs_open(const char *url, sub_vfs **out, char *err, size_t errlen);
int sub_fault_open(const char *spec, sub_vfs **out, char *err, size_t errlen);

/* ---- thin dispatch wrappers ---------------------------------------------- */
static inline int sub_open(sub_vfs *v, const char *p, int fl, unsigned mode, sub_file **out)
{ return v->m->open(v, p, fl, mode, out); }
static inline ssize_t sub_pread(sub_file *f, void *b, size_t n, uint64_t off)
{ return f->vfs->m->pread(f, b, n, off); }
static inline ssize_t sub_pwrite(sub_file *f, const void *b, size_t n, uint64_t off)
{ return f->vfs->m->pwrite(f, b, n, off); }
static inline int sub_fsync(sub_file *f) { return f->vfs->m->fsync(f); }
static inline int sub_ftruncate(sub_file *f, uint64_t sz) { return f->vfs->m->ftruncate(f, sz); }
static inline int sub_fstat(sub_file *f, sub_stat *st) { return f->vfs->m->fstat(f, st); }
static inline int sub_native_fd(sub_file *f) { return f->vfs->m->native_fd(f); }
static inline int sub_stat_path(sub_vfs *v, const char *p, sub_stat *st) { return v->m->stat(v, p, st); }
static inline int sub_rename(sub_vfs *v, const char *a, const char *b) { return v->m->rename(v, a, b); }
static inline int sub_unlink(sub_vfs *v, const char *p) { return v->m->unlink(v, p); }
static inline int sub_mkdir(sub_vfs *v, const char *p, unsigned mode) { return v->m->mkdir(v, p, mode); }
static inline int sub_rmdir(sub_vfs *v, const char *p) { return v->m->rmdir(v, p); }
static inline int sub_readdir(sub_vfs *v, const char *p, sub_readdir_cb cb, void *arg)
{ return v->m->readdir(v, p, cb, arg); }
static inline int sub_fsync_dir(sub_vfs *v, const char *p) { return v->m->fsync_dir(v, p); }
static inline int sub_statvfs(sub_vfs *v, const char *p, sub_fsinfo *s) { return v->m->statvfs(v, p, s); }
static inline int sub_identity_of(sub_vfs *v, sub_identity *id) { return v->m->identity(v, id); }

/* close is NULL-safe so cleanup paths can call it unconditionally. */
int sub_close(sub_file *f);

/* ---- helpers built on the table (sub_util.c) ------------------------------ */

/* Loop over short transfers; return 0 or -errno (-EIO on EOF for read_full). */
int sub_pwrite_full(sub_file *f, const void *buf, size_t n, uint64_t off);
int sub_pread_full(sub_file *f, void *buf, size_t n, uint64_t off);

/* Whole-file read: at most max bytes (-EFBIG beyond). *out is malloc'd and
 * NUL-terminated (not counted in *len). */
int sub_read_file(sub_vfs *v, const char *path, size_t max, char **out, size_t *len);

/* Rule 1, in one place: write a temp file in the same directory, fsync it,
 * rename it over path, fsync the directory.  Readers see the old or the new
 * contents, never a mix.  The temp file is removed on failure. */
int sub_write_atomic(sub_vfs *v, const char *path, const void *buf, size_t len);

/* The exclusive-create primitive: O_CREAT|O_EXCL path, write buf, fsync the
 * file and the directory.  -EEXIST when someone else owns the name.  Readers
 * can observe the file before its contents are complete; see docs/formats.md
 * for how each caller treats an empty or short claim file. */
int sub_create_excl(sub_vfs *v, const char *path, const void *buf, size_t len);

/* mkdir -p, tolerant of concurrent creators. */
int sub_mkdirs(sub_vfs *v, const char *path, unsigned mode);

/* Recursive delete: idempotent (ENOENT anywhere is success), safe to re-drive
 * after an interruption.  Not atomic — nothing on a shared volume is. */
int sub_remove_tree(sub_vfs *v, const char *path);

/* Collects the names in a directory into a malloc'd, sorted array of malloc'd
 * strings.  sub_names_free() releases it. */
int sub_list(sub_vfs *v, const char *path, char ***names, size_t *n);
void sub_names_free(char **names, size_t n);

/* Joins a relative path: dst = a "/" b (either may be empty). -ENAMETOOLONG. */
int sub_join(char *dst, size_t dstlen, const char *a, const char *b);

/* Rejects absolute paths and ".." components: substrate paths never escape
 * the root.  Returns 0 or -EINVAL. */
int sub_path_check(const char *path);

const char *sub_strerror(int neg_errno);

#endif
