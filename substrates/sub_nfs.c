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
 */
#include "sub.h"

#include <sys/time.h> /* libnfs.h uses struct timeval without including it */

#include <nfsc/libnfs.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NFS_SUPER_MAGIC 0x6969
#define V4_WRITE_CHUNK 3072u            /* below the 4 KiB encode buffer */
#define V4_READ_CHUNK (256u * 1024u)    /* below the 1 MiB reply limit */
#define V3_IO_CHUNK (1024u * 1024u)     /* libnfs splits further by rtmax/wtmax */
#define DEFAULT_TIMEOUT_MS 10000
#define RETRY_SLEEP_MS 100

/* ---- one NFS client session ------------------------------------------------ */

typedef struct nfs_conn {
	struct nfs_context *ctx;
	int refs;   /* the vfs while current, plus each file opened on it */
	int broken; /* no new operations: replace it */
} nfs_conn;

typedef struct nfs_vfs {
	sub_vfs base;
	pthread_mutex_t mu;
	nfs_conn *conn; /* current session; NULL until the first connect */
	/* from the URL */
	char server[256];
	int version;
	int port;      /* :port in the URL, 0 when absent */
	int nfsport, mountport;
	int uid, gid;  /* -1: libnfs default (our own ids) */
	int timeout_ms;
	char path[SUB_PATH_MAX];   /* export[/subdir] as written */
	char export[SUB_PATH_MAX]; /* what MOUNT/PUTROOTFH+LOOKUP accepted */
	char subdir[SUB_PATH_MAX]; /* the rest, prepended to every path */
	char root_url[SUB_PATH_MAX];
	/* NFSv4 lease keeper */
	pthread_t renew_thread;
	int renew_started;
	int stopping;
	pthread_cond_t cv;
	int64_t last_stateful_ms; /* last operation that renewed the lease */
	struct nfs_file *files;   /* open files (for the lease keeper) */
	int renew_ms;
} nfs_vfs;

typedef struct nfs_file {
	sub_file base;
	nfs_conn *conn;
	struct nfsfh *fh;
	int dirty; /* written since the last COMMIT */
	struct nfs_file *next, *prev;
} nfs_file;

#define NV(v) ((nfs_vfs *)(v))
#define NF(f) ((nfs_file *)(f))

/* ---- process-wide state --------------------------------------------------- */

/* Held while libnfs draws an EXCLUSIVE4 verifier (see the header comment). */
static pthread_mutex_t verifier_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int v4_creates;        /* NFSv4 creates made by this process */
static atomic_int verifier_inherited; /* forked after the parent made creates */
static atomic_uint_fast64_t conn_seq;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static int nfs_debug; /* KAAS_NFS_DEBUG=1: log every failed NFS call to stderr */

static void atfork_child(void)
{
	if (atomic_load(&v4_creates) > 0)
		atomic_store(&verifier_inherited, 1);
	/* The child is a different client; its own creates start a new count
	 * but the verifier sequence is still the parent's. */
}

static void install_atfork(void)
{
	const char *d = getenv("KAAS_NFS_DEBUG");
	nfs_debug = d && *d && strcmp(d, "0") != 0;
	pthread_atfork(NULL, NULL, atfork_child);
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- waiting for libnfs ----------------------------------------------------- */

enum call_kind { CALL_PLAIN, CALL_FH, CALL_STAT, CALL_STATVFS, CALL_DIR, CALL_READ };

/* A completion record.  Freed by the waiter once done, or by the callback
 * when the waiter gave up on it (abandoned). */
typedef struct nfs_call {
	int kind;
	int done, abandoned;
	int status;
	struct nfsfh *fh;
	struct nfsdir *dir;
	struct nfs_stat_64 st;
	struct nfs_statvfs_64 svfs;
	char *rbuf; /* CALL_READ: the data, owned by the record */
	size_t rcap;
	char err[320];
} nfs_call;

static nfs_call *call_new(int kind, size_t rcap)
{
	nfs_call *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->kind = kind;
	if (kind == CALL_READ && rcap) {
		c->rbuf = malloc(rcap);
		if (!c->rbuf) {
			free(c);
			return NULL;
		}
		c->rcap = rcap;
	}
	return c;
}

static void call_free(nfs_call *c)
{
	if (c) {
		free(c->rbuf);
		free(c);
	}
}

static void call_cb(int status, struct nfs_context *nfs, void *data, void *priv)
{
	nfs_call *c = priv;
	if (c->abandoned) {
		/* Nobody waits for it any more: release what it produced. */
		if (status >= 0 && c->kind == CALL_DIR && data)
			nfs_closedir(nfs, data);
		/* An nfsfh that arrives here is leaked rather than closed: closing
		 * would need another round trip on a session we gave up on. */
		call_free(c);
		return;
	}
	c->status = status;
	if (status < 0) {
		const char *e = nfs_get_error(nfs);
		snprintf(c->err, sizeof(c->err), "%s", e ? e : "");
	} else {
		switch (c->kind) {
		case CALL_FH:
			c->fh = data;
			break;
		case CALL_DIR:
			c->dir = data;
			break;
		case CALL_STAT:
			if (data)
				memcpy(&c->st, data, sizeof(c->st));
			break;
		case CALL_STATVFS:
			if (data)
				memcpy(&c->svfs, data, sizeof(c->svfs));
			break;
		case CALL_READ:
			if ((size_t)status > c->rcap)
				c->status = -EIO; /* more than asked for */
			else if (status > 0)
				memcpy(c->rbuf, data, (size_t)status);
			break;
		}
	}
	c->done = 1;
}

/* Drives the context until the call completes.  libnfs's RPC timeout ends a
 * call whose reply never comes; the hard deadline covers what it does not
 * (a connect that never completes, a chain of requests).  Returns 0 when the
 * call completed (its status is in c->status), -ETIMEDOUT when it was
 * abandoned (the record then belongs to the callback). */
static int call_wait(nfs_vfs *v, nfs_conn *cn, nfs_call *c)
{
	int64_t deadline = now_ms() + 2 * (int64_t)v->timeout_ms + 2000;
	while (!c->done) {
		if (now_ms() >= deadline) {
			c->abandoned = 1;
			cn->broken = 1;
			return -ETIMEDOUT;
		}
		struct pollfd pfd = {.fd = nfs_get_fd(cn->ctx), .events = 0, .revents = 0};
		int revents = 0;
		if (pfd.fd >= 0) {
			pfd.events = (short)nfs_which_events(cn->ctx);
			int n = poll(&pfd, 1, 100);
			if (n > 0)
				revents = pfd.revents;
		} else {
			sleep_ms(20);
		}
		if (nfs_service(cn->ctx, revents) < 0) {
			/* A failed (re)connect: the request is still queued and
			 * either times out or is sent after a reconnect.  Do not
			 * spin on a refusing server. */
			cn->broken = 1;
			if (!c->done)
				sleep_ms(20);
		}
	}
	return 0;
}

/* ---- errors ----------------------------------------------------------------- */

enum { ERR_RETRY_DELAY = -100000, ERR_RETRY_NEWCONN = -100001 };

/* NFS status names as libnfs prints them, for the statuses libnfs collapses
 * into -ERANGE (NFSv4-only codes, NFS3ERR_DQUOT) or -EFAULT (NFSv3 I/O). */
static const struct {
	const char *name;
	int err;
} status_names[] = {
	{"STALE", -ESTALE},
	{"FHEXPIRED", -ESTALE},
	{"BADHANDLE", -ESTALE},
	{"NOENT", -ENOENT},
	{"EXIST", -EEXIST},
	{"NOTEMPTY", -ENOTEMPTY},
	{"NOTDIR", -ENOTDIR},
	{"ISDIR", -EISDIR},
	{"ACCES", -EACCES},
	{"ACCESS", -EACCES},
	{"PERM", -EPERM},
	{"ROFS", -EROFS},
	{"NOSPC", -ENOSPC},
	{"DQUOT", -EDQUOT},
	{"FBIG", -EFBIG},
	{"NAMETOOLONG", -ENAMETOOLONG},
	{"XDEV", -EXDEV},
	{"MLINK", -EMLINK},
	{"INVAL", -EINVAL},
	{"IO", -EIO},
	{"NXIO", -ENXIO},
	{"NOTSUPP", -EOPNOTSUPP},
	{"SERVERFAULT", -EIO},
	{"FILE_OPEN", -EBUSY},
	{"SHARE_DENIED", -EACCES},
	{"OPENMODE", -EBADF},
	{"SYMLINK", -ELOOP},
	{"WRONGSEC", -EPERM},
	{"BADNAME", -EINVAL},
	{"BADCHAR", -EINVAL},
	{"LOCKED", -EAGAIN},
	{"DENIED", -EAGAIN},
	/* The server asks us to come back later. */
	{"DELAY", ERR_RETRY_DELAY},
	{"GRACE", ERR_RETRY_DELAY},
	{"JUKEBOX", ERR_RETRY_DELAY},
	/* The server no longer knows this client (restart, lease expiry) or
	 * our open-owner sequence is out of step: a new session is needed.  The
	 * request itself was rejected, so it may be sent again. */
	{"STALE_CLIENTID", ERR_RETRY_NEWCONN},
	{"EXPIRED", ERR_RETRY_NEWCONN},
	{"BAD_SEQID", ERR_RETRY_NEWCONN},
	{"LEASE_MOVED", ERR_RETRY_NEWCONN},
	{"ADMIN_REVOKED", ERR_RETRY_NEWCONN},
	/* Our open state for a file is gone. */
	{"STALE_STATEID", -EIO},
	{"BAD_STATEID", -EIO},
	{"OLD_STATEID", -EIO},
};

/* Finds "NFS3ERR_X" or "NFS4ERR_X" in a libnfs error string. */
static int status_from_string(const char *s, int *out)
{
	const char *p = s;
	while ((p = strstr(p, "ERR_")) != NULL) {
		if (p - s >= 4 && (strncmp(p - 4, "NFS3", 4) == 0 || strncmp(p - 4, "NFS4", 4) == 0)) {
			const char *name = p + 4;
			size_t n = 0;
			while ((name[n] >= 'A' && name[n] <= 'Z') || name[n] == '_' ||
			       (name[n] >= '0' && name[n] <= '9'))
				n++;
			for (size_t i = 0; i < sizeof(status_names) / sizeof(status_names[0]); i++) {
				if (strlen(status_names[i].name) == n &&
				    strncmp(status_names[i].name, name, n) == 0) {
					*out = status_names[i].err;
					return 1;
				}
			}
			return 0;
		}
		p += 4;
	}
	return 0;
}

/* Turns a libnfs result into an errno (or a retry code) and decides whether
 * the session is still usable. */
static int fix_err(nfs_conn *cn, int rc, const char *err)
{
	if (rc >= 0)
		return rc;
	int st;
	switch (rc) {
	case -ERANGE: /* an NFSv4-only status, or NFS3ERR_DQUOT */
	case -EFAULT: /* an RPC failure, or any NFSv3 READ/WRITE failure */
		if (status_from_string(err, &st)) {
			if (st == ERR_RETRY_NEWCONN)
				cn->broken = 1;
			return st;
		}
		cn->broken = 1;
		return -EIO;
	case -EINTR: /* "Command timed out" / "cancelled" */
		cn->broken = 1;
		return -ETIMEDOUT;
	case -EAGAIN: /* NFS3ERR_JUKEBOX */
		return ERR_RETRY_DELAY;
	default:
		return rc;
	}
}

/* ---- sessions ----------------------------------------------------------- */

static void conn_put(nfs_conn *cn)
{
	if (cn && --cn->refs == 0) {
		/* No UMNT: it would be one more round trip to a server that may
		 * be gone, and servers keep no state that matters for it. */
		nfs_destroy_context(cn->ctx);
		free(cn);
	}
}

static int settings_url(nfs_vfs *v, char *dst, size_t n)
{
	int w = snprintf(dst, n, "nfs://%s/?version=%d", v->server, v->version);
	if (w < 0 || (size_t)w >= n)
		return -ENAMETOOLONG;
	if (v->nfsport || v->port)
		w += snprintf(dst + w, n - (size_t)w, "&nfsport=%d", v->nfsport ? v->nfsport : v->port);
	if (v->mountport && (size_t)w < n)
		w += snprintf(dst + w, n - (size_t)w, "&mountport=%d", v->mountport);
	return (size_t)w < n ? 0 : -ENAMETOOLONG;
}

/* One fresh context: settings, identity, timeouts, then MOUNT (v3) or
 * SETCLIENTID + PUTROOTFH/LOOKUP (v4) of `export`. */
static int conn_new(nfs_vfs *v, const char *export, nfs_conn **out, char *err, size_t errlen)
{
	char surl[600];
	int rc = settings_url(v, surl, sizeof(surl));
	if (rc) {
		snprintf(err, errlen, "URL too long");
		return rc;
	}
	nfs_conn *cn = calloc(1, sizeof(*cn));
	if (!cn)
		return -ENOMEM;
	cn->refs = 1;
	cn->ctx = nfs_init_context();
	if (!cn->ctx) {
		free(cn);
		snprintf(err, errlen, "cannot create an NFS context");
		return -ENOMEM;
	}
	/* Applies version / nfsport / mountport to the context. */
	struct nfs_url *u = nfs_parse_url_dir(cn->ctx, surl);
	if (!u) {
		snprintf(err, errlen, "%s", nfs_get_error(cn->ctx));
		rc = -EINVAL;
		goto fail;
	}
	nfs_destroy_url(u);
	if (v->uid >= 0)
		nfs_set_uid(cn->ctx, v->uid);
	if (v->gid >= 0)
		nfs_set_gid(cn->ctx, v->gid);
	nfs_set_timeout(cn->ctx, v->timeout_ms);
	nfs_set_dircache(cn->ctx, 0);
	/* A dead server must fail the connect within about the timeout: SYNs
	 * are retried at 1, 3, 7, 15 s... */
	nfs_set_tcp_syncnt(cn->ctx, v->timeout_ms <= 3000 ? 1 : v->timeout_ms <= 7000 ? 2 : 3);

	if (v->version == 4) {
		uint64_t r[2];
		if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
			rc = -EIO;
			snprintf(err, errlen, "getrandom failed");
			goto fail;
		}
		char host[128] = "";
		gethostname(host, sizeof(host) - 1);
		char name[256];
		snprintf(name, sizeof(name), "kaas/%.64s/%d/%" PRIu64 "/%016" PRIx64, host, (int)getpid(),
			 (uint64_t)atomic_fetch_add(&conn_seq, 1), r[0]);
		nfs4_set_client_name(cn->ctx, name);
		char verf[8];
		memcpy(verf, &r[1], sizeof(verf));
		nfs4_set_verifier(cn->ctx, verf);
	}

	nfs_call *c = call_new(CALL_PLAIN, 0);
	if (!c) {
		rc = -ENOMEM;
		goto fail;
	}
	if (nfs_mount_async(cn->ctx, v->server, export, call_cb, c) != 0) {
		snprintf(err, errlen, "mount %s:%s: %s", v->server, export, nfs_get_error(cn->ctx));
		call_free(c);
		rc = -EIO;
		goto fail;
	}
	if (call_wait(v, cn, c) != 0) {
		snprintf(err, errlen, "mount %s:%s: no answer within %d ms", v->server, export,
			 2 * v->timeout_ms + 2000);
		rc = -ETIMEDOUT;
		goto fail;
	}
	rc = c->status;
	if (rc < 0) {
		int st;
		if (rc == -EINTR)
			rc = -ETIMEDOUT;
		else if ((rc == -EFAULT || rc == -ERANGE) && status_from_string(c->err, &st) && st < 0 &&
			 st > ERR_RETRY_DELAY)
			rc = st;
		else if (rc == -EFAULT || rc == -ERANGE)
			rc = strstr(c->err, "refused") ? -ECONNREFUSED : -EIO;
		snprintf(err, errlen, "mount %.64s:%.100s: %.300s", v->server, export,
			 c->err[0] ? c->err : strerror(-rc));
		call_free(c);
		goto fail;
	}
	call_free(c);
	*out = cn;
	return 0;
fail:
	nfs_destroy_context(cn->ctx);
	free(cn);
	return rc;
}

/* The current session, replacing a broken one.  Called with v->mu held. */
static int conn_get(nfs_vfs *v, nfs_conn **out)
{
	if (v->conn && !v->conn->broken) {
		*out = v->conn;
		return 0;
	}
	char err[512];
	nfs_conn *cn;
	int rc = conn_new(v, v->export, &cn, err, sizeof(err));
	if (rc)
		return rc;
	conn_put(v->conn);
	v->conn = cn;
	*out = cn;
	return 0;
}

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

/* ---- running an operation ------------------------------------------------- */

/* Issues one async call built by `start` and waits for it.  Returns the
 * call's status after error mapping (possibly a retry code); *cp receives
 * the record on completion (caller frees), NULL otherwise. */
typedef int (*start_fn)(struct nfs_context *ctx, void *arg, nfs_call *c);

static int run_call(nfs_vfs *v, nfs_conn *cn, int kind, size_t rcap, start_fn start, void *arg,
		    nfs_call **cp)
{
	*cp = NULL;
	nfs_call *c = call_new(kind, rcap);
	if (!c)
		return -ENOMEM;
	if (start(cn->ctx, arg, c) != 0) {
		/* Not queued (encoding failure, out of memory). */
		call_free(c);
		return -EIO;
	}
	if (call_wait(v, cn, c) != 0)
		return -ETIMEDOUT;
	int rc = fix_err(cn, c->status, c->err);
	if (c->status < 0 && nfs_debug)
		fprintf(stderr, "sub_nfs: %s -> %s\n", c->err[0] ? c->err : "(no message)",
			rc == ERR_RETRY_DELAY ? "retry later" : rc == ERR_RETRY_NEWCONN ? "new session" : strerror(-rc));
	*cp = c;
	return rc;
}

/* Runs a path operation on the current session, with the retries the
 * protocol asks for: DELAY/GRACE/JUKEBOX are waited out (up to the timeout),
 * a session the server no longer knows is replaced once.  v->mu held. */
static int run_path_op(nfs_vfs *v, int kind, start_fn start, void *arg, nfs_call **cp, nfs_conn **cnp)
{
	int64_t deadline = now_ms() + v->timeout_ms;
	int renewed = 0;
	for (;;) {
		nfs_conn *cn;
		int rc = conn_get(v, &cn);
		if (rc)
			return rc;
		if (cnp)
			*cnp = cn;
		rc = run_call(v, cn, kind, 0, start, arg, cp);
		if (rc == ERR_RETRY_DELAY) {
			call_free(*cp);
			*cp = NULL;
			if (now_ms() >= deadline)
				return -ETIMEDOUT;
			sleep_ms(RETRY_SLEEP_MS);
			continue;
		}
		if (rc == ERR_RETRY_NEWCONN) {
			call_free(*cp);
			*cp = NULL;
			if (renewed++)
				return -EIO;
			continue;
		}
		return rc;
	}
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

typedef struct path_args {
	const char *a, *b;
	int flags, mode;
} path_args;

static int st_open(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	path_args *p = arg;
	return nfs_open2_async(ctx, p->a, p->flags, p->mode, call_cb, c);
}

static int st_create_v4(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	path_args *p = arg;
	/* libnfs draws the EXCLUSIVE4 verifier while building the request,
	 * inside this call: nobody else in the process may draw one now. */
	pthread_mutex_lock(&verifier_lock);
	int rc = nfs_open2_async(ctx, p->a, p->flags, p->mode, call_cb, c);
	pthread_mutex_unlock(&verifier_lock);
	if (rc == 0)
		atomic_fetch_add(&v4_creates, 1);
	return rc;
}

static int st_lstat(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	return nfs_lstat64_async(ctx, ((path_args *)arg)->a, call_cb, c);
}

static int st_rename(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	path_args *p = arg;
	return nfs_rename_async(ctx, p->a, p->b, call_cb, c);
}

static int st_unlink(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	return nfs_unlink_async(ctx, ((path_args *)arg)->a, call_cb, c);
}

static int st_mkdir(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	path_args *p = arg;
	return nfs_mkdir2_async(ctx, p->a, p->mode, call_cb, c);
}

static int st_rmdir(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	return nfs_rmdir_async(ctx, ((path_args *)arg)->a, call_cb, c);
}

static int st_opendir(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	return nfs_opendir_async(ctx, ((path_args *)arg)->a, call_cb, c);
}

static int st_statvfs(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	return nfs_statvfs64_async(ctx, ((path_args *)arg)->a, call_cb, c);
}

typedef struct io_args {
	struct nfsfh *fh;
	uint64_t off, n;
	const void *buf;
} io_args;

static int st_pread(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	io_args *a = arg;
	return nfs_pread_async(ctx, a->fh, a->off, a->n, call_cb, c);
}

static int st_pwrite(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	io_args *a = arg;
	return nfs_pwrite_async(ctx, a->fh, a->off, a->n, a->buf, call_cb, c);
}

static int st_fsync(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	return nfs_fsync_async(ctx, ((io_args *)arg)->fh, call_cb, c);
}

static int st_ftruncate(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	io_args *a = arg;
	return nfs_ftruncate_async(ctx, a->fh, a->off, call_cb, c);
}

static int st_fstat(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	return nfs_fstat64_async(ctx, ((io_args *)arg)->fh, call_cb, c);
}

static int st_close(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	return nfs_close_async(ctx, ((io_args *)arg)->fh, call_cb, c);
}

/* A file operation: runs on the file's own session, DELAY retried. */
static int run_file_op(nfs_vfs *v, nfs_file *f, int kind, size_t rcap, start_fn start, io_args *a,
		       nfs_call **cp)
{
	int64_t deadline = now_ms() + v->timeout_ms;
	for (;;) {
		int rc = run_call(v, f->conn, kind, rcap, start, a, cp);
		if (rc != ERR_RETRY_DELAY && rc != ERR_RETRY_NEWCONN)
			return rc;
		call_free(*cp);
		*cp = NULL;
		if (rc == ERR_RETRY_NEWCONN || now_ms() >= deadline)
			return rc == ERR_RETRY_NEWCONN ? -EIO : -ETIMEDOUT;
		sleep_ms(RETRY_SLEEP_MS);
	}
}

/* NFSv3 reports every READ/WRITE failure as -EFAULT; when the error string
 * did not name the status, a GETATTR of the handle usually does (ESTALE). */
static int recover_io_errno(nfs_vfs *v, nfs_file *f, int rc)
{
	if (rc != -EIO || v->version != 3)
		return rc;
	io_args a = {.fh = f->fh};
	nfs_call *c;
	int src = run_call(v, f->conn, CALL_STAT, 0, st_fstat, &a, &c);
	call_free(c);
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
 * O_CREAT without O_EXCL described in the header comment. */
static int open_locked(nfs_vfs *v, const char *p, int flags, unsigned mode, nfs_conn **cnp,
		       struct nfsfh **fhp)
{
	int acc = flags & (O_ACCMODE | O_SYNC | O_DSYNC);
	int create = flags & O_CREAT, excl = flags & O_EXCL;
	nfs_call *c = NULL;
	int rc = -ENOENT;
	for (int attempt = 0; attempt < 8; attempt++) {
		if (!excl) {
			path_args a = {.a = p, .flags = acc | (flags & O_TRUNC)};
			rc = run_path_op(v, CALL_FH, st_open, &a, &c, cnp);
			if (rc != -ENOENT || !create)
				break;
			call_free(c);
			c = NULL;
		}
		if (v->version == 4 && atomic_load(&verifier_inherited))
			return -ENOTRECOVERABLE;
		/* A new file is empty: O_TRUNC has nothing to do.  O_EXCL makes
		 * libnfs send GUARDED (v3) or EXCLUSIVE4 followed by a SETATTR
		 * of the mode (v4). */
		path_args a = {.a = p, .flags = acc | O_CREAT | O_EXCL, .mode = (int)(mode & 07777)};
		rc = run_path_op(v, CALL_FH, v->version == 4 ? st_create_v4 : st_open, &a, &c, cnp);
		if (rc != -EEXIST || excl)
			break;
		call_free(c);
		c = NULL;
		/* Someone created it between our lookup and our create: open
		 * theirs. */
	}
	if (rc >= 0)
		*fhp = c->fh;
	call_free(c);
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
	pthread_mutex_lock(&v->mu);
	nfs_conn *cn = NULL;
	struct nfsfh *fh = NULL;
	rc = open_locked(v, p, flags, mode, &cn, &fh);
	if (rc == 0) {
		f->base.vfs = vv;
		f->conn = cn;
		f->fh = fh;
		cn->refs++;
		file_link(v, f);
		v->last_stateful_ms = now_ms();
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
	io_args a = {.fh = f->fh};
	nfs_call *c;
	int rc = run_file_op(v, f, CALL_PLAIN, 0, st_fsync, &a, &c);
	call_free(c);
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
	io_args a = {.fh = f->fh};
	nfs_call *c;
	/* libnfs frees the handle whatever the outcome. */
	int crc = run_call(v, f->conn, CALL_PLAIN, 0, st_close, &a, &c);
	call_free(c);
	if (crc == ERR_RETRY_DELAY || crc == ERR_RETRY_NEWCONN)
		crc = -EIO;
	if (rc == 0)
		rc = crc;
	file_unlink(v, f);
	conn_put(f->conn);
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
		io_args a = {.fh = f->fh, .off = off + done, .n = want};
		nfs_call *c;
		rc = run_file_op(v, f, CALL_READ, want, st_pread, &a, &c);
		if (rc > 0)
			memcpy((char *)buf + done, c->rbuf, (size_t)rc);
		call_free(c);
		if (rc < 0) {
			rc = recover_io_errno(v, f, rc);
			break;
		}
		done += (size_t)rc;
		if ((size_t)rc < want)
			break; /* end of file */
	}
	if (v->version == 4)
		v->last_stateful_ms = now_ms();
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
		io_args a = {.fh = f->fh, .off = off + done, .n = want, .buf = (const char *)buf + done};
		nfs_call *c;
		rc = run_file_op(v, f, CALL_PLAIN, 0, st_pwrite, &a, &c);
		call_free(c);
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
		v->last_stateful_ms = now_ms();
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

static int nv_ftruncate(sub_file *ff, uint64_t size)
{
	nfs_vfs *v = NV(ff->vfs);
	io_args a = {.fh = NF(ff)->fh, .off = size};
	nfs_call *c;
	pthread_mutex_lock(&v->mu);
	int rc = run_file_op(v, NF(ff), CALL_PLAIN, 0, st_ftruncate, &a, &c);
	pthread_mutex_unlock(&v->mu);
	call_free(c);
	return rc;
}

static int nv_fstat(sub_file *ff, sub_stat *st)
{
	nfs_vfs *v = NV(ff->vfs);
	io_args a = {.fh = NF(ff)->fh};
	nfs_call *c;
	pthread_mutex_lock(&v->mu);
	int rc = run_file_op(v, NF(ff), CALL_STAT, 0, st_fstat, &a, &c);
	pthread_mutex_unlock(&v->mu);
	if (rc == 0)
		stat_from(&c->st, st);
	call_free(c);
	return rc;
}

/* Runs a path operation under the lock; the record, if any, is returned. */
static int path_op(nfs_vfs *v, int kind, start_fn start, path_args *a, nfs_call **cp)
{
	pthread_mutex_lock(&v->mu);
	int rc = run_path_op(v, kind, start, a, cp, NULL);
	pthread_mutex_unlock(&v->mu);
	return rc;
}

static int simple_path_op(sub_vfs *vv, const char *path, start_fn start, int mode)
{
	nfs_vfs *v = NV(vv);
	char p[SUB_PATH_MAX + 8];
	int rc = full_path(v, path, p, sizeof(p));
	if (rc)
		return rc;
	path_args a = {.a = p, .mode = mode};
	nfs_call *c;
	rc = path_op(v, CALL_PLAIN, start, &a, &c);
	call_free(c);
	return rc;
}

static int nv_stat(sub_vfs *vv, const char *path, sub_stat *st)
{
	nfs_vfs *v = NV(vv);
	char p[SUB_PATH_MAX + 8];
	int rc = full_path(v, path, p, sizeof(p));
	if (rc)
		return rc;
	path_args a = {.a = p};
	nfs_call *c;
	rc = path_op(v, CALL_STAT, st_lstat, &a, &c);
	if (rc == 0)
		stat_from(&c->st, st);
	call_free(c);
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
	nfs_call *c;
	rc = path_op(v, CALL_PLAIN, st_rename, &a, &c);
	call_free(c);
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
	rc = run_path_op(v, CALL_DIR, st_opendir, &a, &c, &cn);
	if (rc < 0) {
		pthread_mutex_unlock(&v->mu);
		call_free(c);
		return rc;
	}
	/* The whole listing was fetched by opendir; iterating is local.  The
	 * callback runs without the lock so it may call back into this vfs. */
	struct nfsdir *dir = c->dir;
	cn->refs++;
	pthread_mutex_unlock(&v->mu);
	call_free(c);
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
	conn_put(cn);
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
	nfs_vfs *v = NV(vv);
	char p[SUB_PATH_MAX + 8];
	int rc = full_path(v, path, p, sizeof(p));
	if (rc)
		return rc;
	path_args a = {.a = p};
	nfs_call *c;
	rc = path_op(v, CALL_STATVFS, st_statvfs, &a, &c);
	if (rc == 0) {
		out->bsize = c->svfs.f_frsize ? c->svfs.f_frsize : c->svfs.f_bsize;
		out->blocks = c->svfs.f_blocks;
		out->bfree = c->svfs.f_bfree;
		out->bavail = c->svfs.f_bavail;
		out->files = c->svfs.f_files;
		out->ffree = c->svfs.f_ffree;
	}
	call_free(c);
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
	return nfs_pread_async(ctx, ((io_args *)arg)->fh, 0, 0, call_cb, c);
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
		if (!v->files || now_ms() - v->last_stateful_ms < v->renew_ms)
			continue;
		/* One read per session that has files open. */
		for (nfs_file *f = v->files; f; f = f->next) {
			int seen = 0;
			for (nfs_file *g = v->files; g != f; g = g->next)
				seen |= g->conn == f->conn;
			if (seen || f->conn->broken)
				continue;
			io_args a = {.fh = f->fh};
			nfs_call *c;
			run_call(v, f->conn, CALL_READ, 0, st_pread0, &a, &c);
			call_free(c);
		}
		v->last_stateful_ms = now_ms();
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
	conn_put(v->conn);
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

/* ---- URL parsing ------------------------------------------------------------ */

static int parse_int(const char *s, size_t n, long lo, long hi, int *out)
{
	if (n == 0 || n > 10)
		return -EINVAL;
	long val = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		val = val * 10 + (s[i] - '0');
	}
	if (val < lo || val > hi)
		return -ERANGE;
	*out = (int)val;
	return 0;
}

static int parse_url(nfs_vfs *v, const char *url, char *err, size_t errlen)
{
	const char *p = url + 6; /* after nfs:// */
	const char *slash = strchr(p, '/');
	const char *q = strchr(p, '?');
	if (!slash || (q && q < slash)) {
		snprintf(err, errlen, "%s: expected nfs://server[:port]/export[/subdir]?version=3|4", url);
		return -EINVAL;
	}
	/* host[:port], or [v6addr][:port] */
	const char *host = p, *hend = slash, *colon = NULL;
	if (*host == '[') {
		const char *rb = memchr(host, ']', (size_t)(slash - host));
		if (!rb) {
			snprintf(err, errlen, "%s: unterminated [address]", url);
			return -EINVAL;
		}
		if (rb + 1 < slash && rb[1] == ':')
			colon = rb + 1;
		else if (rb + 1 != slash) {
			snprintf(err, errlen, "%s: junk after [address]", url);
			return -EINVAL;
		}
		host++;
		hend = rb;
	} else {
		colon = memchr(host, ':', (size_t)(slash - host));
		if (colon)
			hend = colon;
	}
	if (hend == host || (size_t)(hend - host) >= sizeof(v->server)) {
		snprintf(err, errlen, "%s: missing or too long server name", url);
		return -EINVAL;
	}
	memcpy(v->server, host, (size_t)(hend - host));
	v->server[hend - host] = '\0';
	if (colon && parse_int(colon + 1, (size_t)(slash - colon - 1), 1, 65535, &v->port)) {
		snprintf(err, errlen, "%s: bad port", url);
		return -EINVAL;
	}
	/* path */
	size_t plen = q ? (size_t)(q - slash) : strlen(slash);
	if (plen >= sizeof(v->path) - 1) {
		snprintf(err, errlen, "%s: path too long", url);
		return -ENAMETOOLONG;
	}
	/* Normalise: collapse '//' and drop a trailing '/'. */
	size_t w = 0;
	for (size_t i = 0; i < plen; i++) {
		if (slash[i] == '/' && w > 0 && v->path[w - 1] == '/')
			continue;
		v->path[w++] = slash[i];
	}
	while (w > 1 && v->path[w - 1] == '/')
		w--;
	v->path[w] = '\0';
	if (strcmp(v->path, "/") == 0 || sub_path_check(v->path + 1) != 0) {
		snprintf(err, errlen, "%s: the path must name an export (no '..')", url);
		return -EINVAL;
	}
	/* query */
	v->version = 3;
	v->uid = v->gid = -1;
	v->timeout_ms = DEFAULT_TIMEOUT_MS;
	const char *s = q ? q + 1 : NULL;
	while (s && *s) {
		const char *amp = strchr(s, '&');
		size_t n = amp ? (size_t)(amp - s) : strlen(s);
		const char *eq = memchr(s, '=', n);
		if (!eq) {
			snprintf(err, errlen, "%s: query item '%.*s' has no value", url, (int)n, s);
			return -EINVAL;
		}
		size_t kn = (size_t)(eq - s), vn = n - kn - 1;
		const char *val = eq + 1;
		int rc;
#define KEY(k) (kn == sizeof(k) - 1 && strncmp(s, k, kn) == 0)
		if (KEY("version")) {
			rc = parse_int(val, vn, 3, 4, &v->version);
		} else if (KEY("nfsport")) {
			rc = parse_int(val, vn, 1, 65535, &v->nfsport);
		} else if (KEY("mountport")) {
			rc = parse_int(val, vn, 1, 65535, &v->mountport);
		} else if (KEY("uid")) {
			rc = parse_int(val, vn, 0, INT_MAX, &v->uid);
		} else if (KEY("gid")) {
			rc = parse_int(val, vn, 0, INT_MAX, &v->gid);
		} else if (KEY("timeout_ms")) {
			rc = parse_int(val, vn, 1000, 3600000, &v->timeout_ms);
		} else {
			snprintf(err, errlen,
				 "%s: unknown option '%.*s' (version, nfsport, mountport, uid, gid, timeout_ms)",
				 url, (int)kn, s);
			return -EINVAL;
		}
#undef KEY
		if (rc) {
			snprintf(err, errlen, "%s: bad value for '%.*s'", url, (int)kn, s);
			return -EINVAL;
		}
		s = amp ? amp + 1 : NULL;
	}
	if (v->port && v->nfsport && v->port != v->nfsport) {
		snprintf(err, errlen, "%s: :%d and nfsport=%d disagree", url, v->port, v->nfsport);
		return -EINVAL;
	}
	/* libnfs timeouts are whole seconds. */
	v->timeout_ms = (v->timeout_ms + 999) / 1000 * 1000;
	v->renew_ms = 1000; /* well inside any lease (ganesha 60 s, Linux knfsd 90 s) */
	int ww;
	if (v->port)
		ww = snprintf(v->root_url, sizeof(v->root_url), "nfs://%s%s%s:%d%s?version=%d",
			      strchr(v->server, ':') ? "[" : "", v->server, strchr(v->server, ':') ? "]" : "",
			      v->port, v->path, v->version);
	else
		ww = snprintf(v->root_url, sizeof(v->root_url), "nfs://%s%s%s%s?version=%d",
			      strchr(v->server, ':') ? "[" : "", v->server, strchr(v->server, ':') ? "]" : "",
			      v->path, v->version);
	if (ww < 0 || (size_t)ww >= sizeof(v->root_url)) {
		snprintf(err, errlen, "%s: too long", url);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* Finds which prefix of the path the server exports: the whole path first
 * (NFSv4 always, NFSv3 servers that allow mounting subdirectories), then
 * shorter ones; the rest becomes a subdirectory. */
static int first_connect(nfs_vfs *v, char *err, size_t errlen)
{
	char tryp[SUB_PATH_MAX];
	snprintf(tryp, sizeof(tryp), "%s", v->path);
	char first_err[512] = "";
	int first_rc = 0;
	for (;;) {
		nfs_conn *cn;
		char e[512];
		int rc = conn_new(v, tryp, &cn, e, sizeof(e));
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
	pthread_once(&atfork_once, install_atfork);
	nfs_vfs *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	char e[600] = "";
	if ((rc = parse_url(v, url, err, errlen))) {
		free(v);
		return rc;
	}
	if (v->version == 4 && atomic_load(&verifier_inherited)) {
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
	v->last_stateful_ms = now_ms();
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
	conn_put(v->conn);
	pthread_cond_destroy(&v->cv);
	pthread_mutex_destroy(&v->mu);
	free(v);
	return rc;
}
