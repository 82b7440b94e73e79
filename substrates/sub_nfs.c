/*
 * sub_nfs.c — the nfs backend: an NFS server spoken to directly with libnfs,
 * with no mount, no FUSE and no privileges.
 *
 *   nfs://server[:port]/export[/subdir]?version=3|4[&nfsport=N&mountport=N
 *         &uid=N&gid=N&timeout_ms=N]
 *
 * Each sub_vfs owns its own libnfs context, i.e. it is its own NFS client:
 * N vfs opened in one process are N hosts to the server, which is what lets
 * the conformance tool test cross-client guarantees from one machine.
 *
 * libnfs 4.0 needs care (docs/substrates.md has the list):
 *   - its synchronous wrappers leave a request queued with a pointer into the
 *     caller's stack when their wait loop stops on an nfs_service() failure
 *     (a reconnect refused while the server restarts), and decode error
 *     payloads as strings.  So every call here is made with the async API and
 *     waited for by call_wait() below: the completion record is on the heap,
 *     owned by whoever finishes last, and the wait has a hard deadline on top
 *     of libnfs's per-request RPC timeout;
 *   - it has no RPC timeout unless nfs_set_timeout() is called (whole
 *     seconds), and a hung server would hang the caller;
 *   - NFSv4 client identity defaults to pid + time: two contexts made in the
 *     same second collide.  Every context gets a unique name and verifier;
 *   - NFSv4 OPEN with O_CREAT is always EXCLUSIVE4, and the EXCLUSIVE4
 *     verifier comes from a process-global, unlocked generator seeded from
 *     the pid.  Two threads, or a parent and the children it forked after its
 *     first create, can send the same verifier — and a server treats an
 *     EXCLUSIVE4 create whose verifier matches as a retransmission and says
 *     OK: both racers would "win" an O_EXCL race.  Creates are serialised
 *     process-wide while the verifier is drawn, and a child forked after its
 *     parent made NFSv4 creates refuses to make any;
 *   - O_CREAT without O_EXCL is emulated: open, and on ENOENT create
 *     exclusively, and on EEXIST (someone else created it meanwhile) open
 *     again.  O_TRUNC applies only to a file that already existed;
 *   - NFSv4 OPENs and CLOSEs carry an open-owner sequence id that libnfs
 *     miscounts when the server refuses an OPEN; the server then refuses
 *     the next CLOSE (BAD_SEQID) and answers the next OPEN in the same
 *     directory with the refused one's cached reply.  Every NFSv4 open
 *     first looks the path up, so that no OPEN is sent that can be seen to
 *     fail, and a session whose count may be off is retired (sub_nfs_rpc.c
 *     explains);
 *   - NFSv4 WRITEs above ~3.9 KiB fail to encode: writes go in 3 KiB pieces;
 *   - NFSv3 READ/WRITE failures come back as -EFAULT and NFSv4-only status
 *     codes as -ERANGE: the real status is recovered from the error string
 *     (and for v3 I/O from a GETATTR of the handle, as a last resort);
 *   - its directory cache would hide other clients' changes: disabled;
 *   - it never renews an NFSv4 lease (RENEW is not implemented): a thread
 *     reads 0 bytes through an open file's stateid while the client is idle
 *     and holds files open, which renews the lease implicitly.
 *
 * Sessions: a "conn" is one libnfs context.  When it breaks (timeout, lost
 * connection, the server forgot our NFSv4 client ID after a restart) path
 * operations move to a fresh conn; files stay on the conn they were opened
 * on, as a kernel client's open files stay with their state.
 * Length: the libnfs backend's vtable, one method after another; the RPC
 * plumbing, URL parsing and open state are already in files of their own.
 */
#include "substrates/sub_nfs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* ---- paths ------------------------------------------------------------------ */

/* "/" subdir "/" path, without a trailing slash. */
static int full_path(nfs_vfs *v, const char *path, char *dst, size_t n)
{
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	if (strcmp(path, ".") == 0)
		path = "";
	int w;
	if (v->subdir[0] && path[0])
		w = snprintf(dst, n, "/%s/%s", v->subdir, path);
	else if (v->subdir[0])
		w = snprintf(dst, n, "/%s", v->subdir);
	else
		w = snprintf(dst, n, "/%s", path);
	if (w < 0 || (size_t)w >= n)
		return -ENAMETOOLONG;
	while (w > 1 && dst[w - 1] == '/')
		dst[--w] = '\0';
	return 0;
}

static void file_link(nfs_vfs *v, nfs_file *f)
{
	f->prev = NULL;
	f->next = v->files;
	if (v->files)
		v->files->prev = f;
	v->files = f;
}

static void file_unlink(nfs_vfs *v, nfs_file *f)
{
	if (f->prev)
		f->prev->next = f->next;
	else
		v->files = f->next;
	if (f->next)
		f->next->prev = f->prev;
}

/* ---- starters: one per libnfs async call -------------------------------- */

/* A starter whose only argument is the path (PATH_STARTER) or the file
 * handle (FH_STARTER). */
#define PATH_STARTER(name, call)                                                \
	static int name(struct nfs_context *ctx, void *arg, nfs_call *c)        \
	{                                                                       \
		return call(ctx, ((path_args *)arg)->a, sub_nfs_call_cb, c);    \
	}
#define FH_STARTER(name, call)                                                  \
	static int name(struct nfs_context *ctx, void *arg, nfs_call *c)        \
	{                                                                       \
		return call(ctx, ((io_args *)arg)->fh, sub_nfs_call_cb, c);     \
	}

PATH_STARTER(st_lstat, nfs_lstat64_async)
PATH_STARTER(st_unlink, nfs_unlink_async)
PATH_STARTER(st_rmdir, nfs_rmdir_async)
PATH_STARTER(st_opendir, nfs_opendir_async)
PATH_STARTER(st_statvfs, nfs_statvfs64_async)
FH_STARTER(st_fsync, nfs_fsync_async)
FH_STARTER(st_fstat, nfs_fstat64_async)
FH_STARTER(st_close, nfs_close_async)

static int st_open(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	path_args *p = arg;
	return nfs_open2_async(ctx, p->a, p->flags, p->mode, sub_nfs_call_cb, c);
}

static int st_rename(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	path_args *p = arg;
	return nfs_rename_async(ctx, p->a, p->b, sub_nfs_call_cb, c);
}

static int st_mkdir(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	path_args *p = arg;
	return nfs_mkdir2_async(ctx, p->a, p->mode, sub_nfs_call_cb, c);
}

static int st_pread(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	io_args *a = arg;
	return nfs_pread_async(ctx, a->fh, a->off, a->n, sub_nfs_call_cb, c);
}

static int st_pwrite(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	io_args *a = arg;
	return nfs_pwrite_async(ctx, a->fh, a->off, a->n, a->buf, sub_nfs_call_cb, c);
}

static int st_ftruncate(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	io_args *a = arg;
	return nfs_ftruncate_async(ctx, a->fh, a->off, sub_nfs_call_cb, c);
}

/* The handle to use for a file: its own (v3) or its open state's (v4). */
static struct nfsfh *ffh(const nfs_file *f)
{
	return f->os ? f->os->fh : f->fh;
}

/* NFSv3 reports every READ/WRITE failure as -EFAULT; when the error string
 * did not name the status, a GETATTR of the handle usually does (ESTALE). */
static int recover_io_errno(nfs_vfs *v, nfs_file *f, int rc)
{
	if (rc != -EIO || v->version != 3)
		return rc;
	io_args a = {.fh = ffh(f)};
	nfs_call *c;
	int src = sub_nfs_run_call(v, f->conn, CALL_STAT, 0, st_fstat, &a, &c);
	sub_nfs_call_free(c);
	return src < 0 && src != -ETIMEDOUT && src > ERR_RETRY_DELAY ? src : rc;
}

/* ---- the vtable ------------------------------------------------------------- */

static void stat_from(const struct nfs_stat_64 *s, sub_stat *st)
{
	st->size = s->nfs_size;
	st->ino = s->nfs_ino;
	st->dev = s->nfs_dev;
	st->nlink = s->nfs_nlink;
	st->mtime_ns = (int64_t)s->nfs_mtime * 1000000000LL + (int64_t)s->nfs_mtime_nsec;
	st->mode = (uint32_t)s->nfs_mode;
}

/* Opens an existing file, or creates it exclusively; the emulation of
 * O_CREAT without O_EXCL described in the header comment.  `exists` is what
 * the NFSv4 pre-check saw (1 a file, 0 nothing, -1 unknown): it decides
 * which of the two is tried first. */
static int open_locked(nfs_vfs *v, const char *p, int flags, unsigned mode, int exists,
		       nfs_conn **cnp, struct nfsfh **fhp)
{
	int acc = flags & (O_ACCMODE | O_SYNC | O_DSYNC);
	int create = flags & O_CREAT, excl = flags & O_EXCL;
	int make = excl || (create && exists == 0);
	nfs_call *c = NULL;
	int rc = -ENOENT;
	for (int attempt = 0; attempt < 8; attempt++, make = !make) {
		if (!make) {
			path_args a = {.a = p, .flags = acc | (flags & O_TRUNC)};
			rc = sub_nfs_run_path_op(v, CALL_FH | CALL_RETRANSMIT | CALL_SEQID, st_open, &a, &c, cnp);
			if (rc != -ENOENT || !create)
				break;
			/* Removed since we looked: create it. */
		} else {
			if (v->version == 4 && sub_nfs_verifier_inherited())
				return -ENOTRECOVERABLE;
			/* A new file is empty: O_TRUNC has nothing to do.
			 * O_EXCL makes libnfs send GUARDED (v3) or EXCLUSIVE4
			 * followed by a SETATTR of the mode (v4). */
			path_args a = {.a = p, .flags = acc | O_CREAT | O_EXCL, .mode = (int)(mode & 07777)};
			rc = sub_nfs_run_path_op(v, CALL_FH | CALL_SEQID,
						 v->version == 4 ? sub_nfs_start_create_v4 : st_open, &a, &c, cnp);
			if (rc != -EEXIST || excl)
				break;
			/* Someone created it between our lookup and our
			 * create: open theirs. */
		}
		sub_nfs_call_free(c);
		c = NULL;
	}
	if (rc >= 0)
		*fhp = c->fh;
	sub_nfs_call_free(c);
	return rc < 0 ? rc : 0;
}

static int nv_open(sub_vfs *vv, const char *path, int flags, unsigned mode, sub_file **out)
{
	nfs_vfs *v = NV(vv);
	char p[SUB_PATH_MAX + 8];
	int rc = full_path(v, path, p, sizeof(p));
	if (rc)
		return rc;
	if (flags & (O_DIRECTORY | O_PATH))
		return -EOPNOTSUPP;
	nfs_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	int acc = flags & O_ACCMODE;
	pthread_mutex_lock(&v->mu);
	nfs_conn *cn = NULL;
	struct nfsfh *fh = NULL;
	nfs_ostate *os = NULL, *upgrade = NULL;
	int exists = -1;
	rc = 0;
	if (v->version == 4)
		rc = sub_nfs_state_share(v, p, acc, flags, &os, &upgrade, &cn, &exists);
	if (rc == 1) {
		/* Already open in this session: share its state; O_TRUNC still
		 * truncates. */
		rc = 0;
		if ((flags & O_TRUNC) && acc != O_RDONLY) {
			io_args a = {.fh = os->fh, .off = 0};
			nfs_call *c;
			rc = sub_nfs_run_call(v, cn, CALL_PLAIN, 0, st_ftruncate, &a, &c);
			sub_nfs_call_free(c);
			if (rc < 0) {
				sub_nfs_state_release(v, cn, os);
				rc = rc == ERR_RETRY_DELAY || rc == ERR_RETRY_NEWCONN ? -EIO : rc;
			}
		}
	} else if (rc == 0) {
		nfs_conn *before = v->conn;
		rc = open_locked(v, p, flags, mode, exists, &cn, &fh);
		if (rc == 0 && v->version == 4) {
			os = sub_nfs_state_add(cn, fh, acc, cn == before ? upgrade : NULL);
			if (!os)
				rc = -ENOMEM; /* fh stays with libnfs until the session ends */
		}
	}
	if (rc == 0) {
		f->base.vfs = vv;
		f->conn = cn;
		f->fh = os ? NULL : fh;
		f->os = os;
		f->acc = acc;
		cn->refs++;
		file_link(v, f);
		v->last_stateful_ms = sub_nfs_now_ms();
		*out = &f->base;
		if (v->version == 4)
			pthread_cond_signal(&v->cv);
	}
	pthread_mutex_unlock(&v->mu);
	if (rc)
		free(f);
	return rc;
}

static int fsync_locked(nfs_vfs *v, nfs_file *f)
{
	io_args a = {.fh = ffh(f)};
	nfs_call *c;
	int rc = sub_nfs_run_file_op(v, f, CALL_PLAIN, 0, st_fsync, &a, &c);
	sub_nfs_call_free(c);
	if (rc == 0)
		f->dirty = 0;
	return rc;
}

static int nv_close(sub_file *ff)
{
	nfs_file *f = NF(ff);
	nfs_vfs *v = NV(ff->vfs);
	pthread_mutex_lock(&v->mu);
	/* Like a kernel client's close: write back (COMMIT) what this handle
	 * wrote, so close reports a failed write-back.  libnfs does this for
	 * NFSv3 itself but not for NFSv4. */
	int rc = 0;
	if (f->dirty && v->version == 4)
		rc = fsync_locked(v, f);
	int crc;
	if (f->os) {
		crc = sub_nfs_state_release(v, f->conn, f->os);
	} else {
		io_args a = {.fh = f->fh};
		nfs_call *c;
		/* libnfs frees the handle whatever the outcome. */
		crc = sub_nfs_run_call(v, f->conn, CALL_PLAIN, 0, st_close, &a, &c);
		sub_nfs_call_free(c);
		if (crc == ERR_RETRY_DELAY || crc == ERR_RETRY_NEWCONN)
			crc = -EIO;
	}
	if (rc == 0)
		rc = crc;
	file_unlink(v, f);
	sub_nfs_conn_put(f->conn);
	pthread_mutex_unlock(&v->mu);
	free(f);
	return rc;
}

static ssize_t nv_pread(sub_file *ff, void *buf, size_t n, uint64_t off)
{
	nfs_file *f = NF(ff);
	nfs_vfs *v = NV(ff->vfs);
	size_t chunk = v->version == 4 ? V4_READ_CHUNK : V3_IO_CHUNK;
	size_t done = 0;
	int rc = 0;
	pthread_mutex_lock(&v->mu);
	while (done < n) {
		size_t want = n - done < chunk ? n - done : chunk;
		io_args a = {.fh = ffh(f), .off = off + done, .n = want};
		nfs_call *c;
		rc = sub_nfs_run_file_op(v, f, CALL_READ | CALL_RETRANSMIT, want, st_pread, &a, &c);
		if (rc > 0)
			memcpy((char *)buf + done, c->rbuf, (size_t)rc);
		sub_nfs_call_free(c);
		if (rc < 0) {
			rc = recover_io_errno(v, f, rc);
			break;
		}
		done += (size_t)rc;
		if ((size_t)rc < want)
			break; /* end of file */
	}
	if (v->version == 4)
		v->last_stateful_ms = sub_nfs_now_ms();
	pthread_mutex_unlock(&v->mu);
	if (rc < 0 && done == 0)
		return rc;
	return (ssize_t)done;
}

static ssize_t nv_pwrite(sub_file *ff, const void *buf, size_t n, uint64_t off)
{
	nfs_file *f = NF(ff);
	nfs_vfs *v = NV(ff->vfs);
	size_t chunk = v->version == 4 ? V4_WRITE_CHUNK : V3_IO_CHUNK;
	size_t done = 0;
	int rc = 0;
	pthread_mutex_lock(&v->mu);
	while (done < n) {
		size_t want = n - done < chunk ? n - done : chunk;
		io_args a = {.fh = ffh(f), .off = off + done, .n = want, .buf = (const char *)buf + done};
		nfs_call *c;
		rc = sub_nfs_run_file_op(v, f, CALL_PLAIN, 0, st_pwrite, &a, &c);
		sub_nfs_call_free(c);
		if (rc < 0) {
			rc = recover_io_errno(v, f, rc);
			break;
		}
		if (rc == 0) {
			rc = -EIO;
			break;
		}
		f->dirty = 1;
		done += (size_t)rc;
	}
	if (v->version == 4)
		v->last_stateful_ms = sub_nfs_now_ms();
	pthread_mutex_unlock(&v->mu);
	if (rc < 0 && done == 0)
		return rc;
	return (ssize_t)done;
}

static int nv_fsync(sub_file *ff)
{
	nfs_vfs *v = NV(ff->vfs);
	pthread_mutex_lock(&v->mu);
	int rc = fsync_locked(v, NF(ff));
	pthread_mutex_unlock(&v->mu);
	return rc;
}

/* Runs an operation on an open file (at offset off) under the lock.  *cp is
 * its record, NULL when there is none; the caller frees it. */
static int file_call(sub_file *ff, int kind, start_fn start, uint64_t off, nfs_call **cp)
{
	nfs_vfs *v = NV(ff->vfs);
	pthread_mutex_lock(&v->mu);
	io_args a = {.fh = ffh(NF(ff)), .off = off};
	int rc = sub_nfs_run_file_op(v, NF(ff), kind, 0, start, &a, cp);
	pthread_mutex_unlock(&v->mu);
	return rc;
}

static int nv_ftruncate(sub_file *ff, uint64_t size)
{
	nfs_call *c;
	int rc = file_call(ff, CALL_PLAIN, st_ftruncate, size, &c);
	sub_nfs_call_free(c);
	return rc;
}

static int nv_fstat(sub_file *ff, sub_stat *st)
{
	nfs_call *c;
	int rc = file_call(ff, CALL_STAT | CALL_RETRANSMIT, st_fstat, 0, &c);
	if (rc == 0)
		stat_from(&c->st, st);
	sub_nfs_call_free(c);
	return rc;
}

/* Runs an operation on one path (and mode) under the lock.  *cp is its
 * record, NULL when there is none; the caller frees it. */
static int path_call(sub_vfs *vv, const char *path, int kind, start_fn start, int mode, nfs_call **cp)
{
	nfs_vfs *v = NV(vv);
	char p[SUB_PATH_MAX + 8];
	*cp = NULL;
	int rc = full_path(v, path, p, sizeof(p));
	if (rc)
		return rc;
	path_args a = {.a = p, .mode = mode};
	pthread_mutex_lock(&v->mu);
	rc = sub_nfs_run_path_op(v, kind, start, &a, cp, NULL);
	pthread_mutex_unlock(&v->mu);
	return rc;
}

static int simple_path_op(sub_vfs *vv, const char *path, start_fn start, int mode)
{
	nfs_call *c;
	int rc = path_call(vv, path, CALL_PLAIN, start, mode, &c);
	sub_nfs_call_free(c);
	return rc;
}

static int nv_stat(sub_vfs *vv, const char *path, sub_stat *st)
{
	nfs_call *c;
	int rc = path_call(vv, path, CALL_STAT | CALL_RETRANSMIT, st_lstat, 0, &c);
	if (rc == 0)
		stat_from(&c->st, st);
	sub_nfs_call_free(c);
	return rc;
}

static int nv_rename(sub_vfs *vv, const char *from, const char *to)
{
	nfs_vfs *v = NV(vv);
	char a1[SUB_PATH_MAX + 8], a2[SUB_PATH_MAX + 8];
	int rc = full_path(v, from, a1, sizeof(a1));
	if (rc || (rc = full_path(v, to, a2, sizeof(a2))))
		return rc;
	path_args a = {.a = a1, .b = a2};
	nfs_call *c = NULL;
	pthread_mutex_lock(&v->mu);
	rc = sub_nfs_run_path_op(v, CALL_PLAIN, st_rename, &a, &c, NULL);
	pthread_mutex_unlock(&v->mu);
	sub_nfs_call_free(c);
	return rc;
}

static int nv_unlink(sub_vfs *vv, const char *path)
{
	return simple_path_op(vv, path, st_unlink, 0);
}

static int nv_mkdir(sub_vfs *vv, const char *path, unsigned mode)
{
	return simple_path_op(vv, path, st_mkdir, (int)(mode & 07777));
}

static int nv_rmdir(sub_vfs *vv, const char *path)
{
	return simple_path_op(vv, path, st_rmdir, 0);
}

/* ftype3 values (RFC 1813); libnfs fills them in for v3 and v4 listings. */
enum { FTYPE3_REG = 1, FTYPE3_DIR = 2, FTYPE3_LNK = 5 };

static int dtype_of(const struct nfsdirent *e)
{
	switch (e->type) {
	case FTYPE3_REG:
		return SUB_DT_REG;
	case FTYPE3_DIR:
		return SUB_DT_DIR;
	case FTYPE3_LNK:
		return SUB_DT_LNK;
	default:
		break;
	}
	switch (e->mode & S_IFMT) {
	case S_IFREG:
		return SUB_DT_REG;
	case S_IFDIR:
		return SUB_DT_DIR;
	case S_IFLNK:
		return SUB_DT_LNK;
	default:
		return SUB_DT_UNKNOWN;
	}
}

static int nv_readdir(sub_vfs *vv, const char *path, sub_readdir_cb cb, void *arg)
{
	nfs_vfs *v = NV(vv);
	char p[SUB_PATH_MAX + 8];
	int rc = full_path(v, path, p, sizeof(p));
	if (rc)
		return rc;
	path_args a = {.a = p};
	nfs_call *c;
	nfs_conn *cn = NULL;
	pthread_mutex_lock(&v->mu);
	rc = sub_nfs_run_path_op(v, CALL_DIR | CALL_RETRANSMIT, st_opendir, &a, &c, &cn);
	if (rc < 0) {
		pthread_mutex_unlock(&v->mu);
		sub_nfs_call_free(c);
		return rc;
	}
	/* The whole listing was fetched by opendir; iterating is local.  The
	 * callback runs without the lock so it may call back into this vfs. */
	struct nfsdir *dir = c->dir;
	cn->refs++;
	pthread_mutex_unlock(&v->mu);
	sub_nfs_call_free(c);
	rc = 0;
	struct nfsdirent *e;
	while ((e = nfs_readdir(cn->ctx, dir)) != NULL) {
		if (strcmp(e->name, ".") == 0 || strcmp(e->name, "..") == 0)
			continue;
		rc = cb(arg, e->name, dtype_of(e));
		if (rc)
			break;
	}
	pthread_mutex_lock(&v->mu);
	nfs_closedir(cn->ctx, dir);
	sub_nfs_conn_put(cn);
	pthread_mutex_unlock(&v->mu);
	return rc;
}

/* NFS servers must make CREATE, REMOVE, RENAME, MKDIR and RMDIR durable
 * before they reply (RFC 1813 and RFC 7530), so there is nothing to flush for
 * a directory.  What remains meaningful is to fail as fsync of a directory
 * would when the directory is gone or is not one. */
static int nv_fsync_dir(sub_vfs *vv, const char *path)
{
	sub_stat st;
	int rc = nv_stat(vv, path, &st);
	if (rc)
		return rc;
	return S_ISDIR(st.mode) ? 0 : -ENOTDIR;
}

static int nv_statvfs(sub_vfs *vv, const char *path, sub_fsinfo *out)
{
	nfs_call *c;
	int rc = path_call(vv, path, CALL_STATVFS | CALL_RETRANSMIT, st_statvfs, 0, &c);
	if (rc == 0) {
		out->bsize = c->svfs.f_frsize ? c->svfs.f_frsize : c->svfs.f_bsize;
		out->blocks = c->svfs.f_blocks;
		out->bfree = c->svfs.f_bfree;
		out->bavail = c->svfs.f_bavail;
		out->files = c->svfs.f_files;
		out->ffree = c->svfs.f_ffree;
	}
	sub_nfs_call_free(c);
	return rc;
}

static int nv_identity(sub_vfs *vv, sub_identity *id)
{
	nfs_vfs *v = NV(vv);
	memset(id, 0, sizeof(*id));
	snprintf(id->backend, sizeof(id->backend), "nfs");
	snprintf(id->fstype, sizeof(id->fstype), "nfs%d", v->version);
	id->fs_magic = NFS_SUPER_MAGIC;
	snprintf(id->fsid, sizeof(id->fsid), "%.30s:%.32s", v->server, v->export);
	snprintf(id->source, sizeof(id->source), "%.64s:%.200s%s%.200s", v->server, v->export,
		 v->subdir[0] ? "/" : "", v->subdir);
	int port = v->nfsport ? v->nfsport : v->port ? v->port : 2049;
	snprintf(id->options, sizeof(id->options), "vers=%s,proto=tcp,port=%d%s%.0d,timeo_ms=%d,client=libnfs",
		 v->version == 4 ? "4.0" : "3", port, v->mountport ? ",mountport=" : "", v->mountport,
		 v->timeout_ms);
	snprintf(id->root, sizeof(id->root), "%s", v->root_url);
	return 0;
}

static int nv_native_fd(sub_file *f)
{
	(void)f;
	return -1;
}

/* ---- NFSv4 lease keeper --------------------------------------------------- */

static int st_pread0(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	return nfs_pread_async(ctx, ((io_args *)arg)->fh, 0, 0, sub_nfs_call_cb, c);
}

/* libnfs never sends RENEW.  A READ carries the open stateid, which renews
 * the client's lease (RFC 7530 §9.6), so while files are open and nothing
 * else talks to the server we read 0 bytes every renew interval. */
static void *renew_main(void *arg)
{
	nfs_vfs *v = arg;
	pthread_mutex_lock(&v->mu);
	while (!v->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		int64_t ns = ts.tv_nsec + (int64_t)(v->renew_ms % 1000) * 1000000;
		ts.tv_sec += v->renew_ms / 1000 + ns / 1000000000;
		ts.tv_nsec = ns % 1000000000;
		pthread_cond_timedwait(&v->cv, &v->mu, &ts);
		if (v->stopping)
			break;
		if (!v->files || sub_nfs_now_ms() - v->last_stateful_ms < v->renew_ms)
			continue;
		/* One read per session that has files open. */
		for (nfs_file *f = v->files; f; f = f->next) {
			int seen = 0;
			for (nfs_file *g = v->files; g != f; g = g->next)
				seen |= g->conn == f->conn;
			if (seen || f->conn->broken)
				continue;
			io_args a = {.fh = ffh(f)};
			nfs_call *c;
			sub_nfs_run_call(v, f->conn, CALL_READ, 0, st_pread0, &a, &c);
			sub_nfs_call_free(c);
		}
		v->last_stateful_ms = sub_nfs_now_ms();
	}
	pthread_mutex_unlock(&v->mu);
	return NULL;
}

static void nv_destroy(sub_vfs *vv)
{
	nfs_vfs *v = NV(vv);
	if (v->renew_started) {
		pthread_mutex_lock(&v->mu);
		v->stopping = 1;
		pthread_cond_signal(&v->cv);
		pthread_mutex_unlock(&v->mu);
		pthread_join(v->renew_thread, NULL);
	}
	sub_nfs_conn_put(v->conn);
	pthread_cond_destroy(&v->cv);
	pthread_mutex_destroy(&v->mu);
	free(vv->url);
	free(v);
}

static const sub_methods nfs_methods = {
	.name = "nfs",
	.open = nv_open,
	.close = nv_close,
	.pread = nv_pread,
	.pwrite = nv_pwrite,
	.fsync = nv_fsync,
	.ftruncate = nv_ftruncate,
	.fstat = nv_fstat,
	.stat = nv_stat,
	.rename = nv_rename,
	.unlink = nv_unlink,
	.mkdir = nv_mkdir,
	.rmdir = nv_rmdir,
	.readdir = nv_readdir,
	.fsync_dir = nv_fsync_dir,
	.statvfs = nv_statvfs,
	.identity = nv_identity,
	.native_fd = nv_native_fd,
	.destroy = nv_destroy,
};

static int first_connect(nfs_vfs *v, char *err, size_t errlen)
{
	char tryp[SUB_PATH_MAX];
	snprintf(tryp, sizeof(tryp), "%s", v->path);
	char first_err[512] = "";
	int first_rc = 0;
	for (;;) {
		nfs_conn *cn;
		char e[512];
		int rc = sub_nfs_conn_new(v, tryp, &cn, e, sizeof(e));
		if (rc == 0) {
			snprintf(v->export, sizeof(v->export), "%s", tryp);
			const char *rest = v->path + strlen(tryp);
			snprintf(v->subdir, sizeof(v->subdir), "%s", *rest == '/' ? rest + 1 : rest);
			v->conn = cn;
			return 0;
		}
		if (!first_rc) {
			first_rc = rc;
			snprintf(first_err, sizeof(first_err), "%s", e);
		}
		/* Only "no such export" is worth a shorter try; a server that
		 * does not answer will not answer that either. */
		if (rc == -ETIMEDOUT || rc == -ECONNREFUSED || rc == -EHOSTUNREACH || rc == -ENETUNREACH)
			break;
		char *cut = strrchr(tryp, '/');
		if (!cut || cut == tryp)
			break;
		*cut = '\0';
	}
	snprintf(err, errlen, "%s", first_err);
	return first_rc;
}

int sub_nfs_open(const char *url, sub_vfs **out, char *err, size_t errlen)
{
	int rc;
	sub_nfs_init_process();
	nfs_vfs *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	char e[600] = "";
	if ((rc = sub_nfs_parse_url(v, url, err, errlen))) {
		free(v);
		return rc;
	}
	if (v->version == 4 && sub_nfs_verifier_inherited()) {
		snprintf(err, errlen,
			 "%s: this process was forked after its parent made NFSv4 creates; libnfs would "
			 "reuse the parent's EXCLUSIVE4 verifiers (open nfs:// substrates in the parent "
			 "only after forking, or exec a fresh process)",
			 v->root_url);
		free(v);
		return -ENOTRECOVERABLE;
	}
	pthread_mutex_init(&v->mu, NULL);
	pthread_cond_init(&v->cv, NULL);
	if ((rc = first_connect(v, e, sizeof(e)))) {
		snprintf(err, errlen, "%s: %s", v->root_url, e);
		goto fail;
	}
	/* The subdirectory must exist: a typo must not look like an empty
	 * volume. */
	if (v->subdir[0]) {
		sub_stat st;
		v->base.m = &nfs_methods;
		rc = nv_stat(&v->base, "", &st);
		if (rc == 0 && !S_ISDIR(st.mode))
			rc = -ENOTDIR;
		if (rc) {
			snprintf(err, errlen, "%s: /%s under export %s: %s", v->root_url, v->subdir, v->export,
				 strerror(-rc));
			goto fail;
		}
	}
	v->base.m = &nfs_methods;
	v->base.url = strdup(url);
	if (!v->base.url) {
		rc = -ENOMEM;
		goto fail;
	}
	v->last_stateful_ms = sub_nfs_now_ms();
	if (v->version == 4) {
		rc = -pthread_create(&v->renew_thread, NULL, renew_main, v);
		if (rc) {
			snprintf(err, errlen, "%s: cannot start the lease thread", v->root_url);
			free(v->base.url);
			goto fail;
		}
		v->renew_started = 1;
	}
	*out = &v->base;
	return 0;
fail:
	sub_nfs_conn_put(v->conn);
	pthread_cond_destroy(&v->cv);
	pthread_mutex_destroy(&v->mu);
	free(v);
	return rc;
}
