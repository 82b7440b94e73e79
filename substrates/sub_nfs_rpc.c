/*
 * sub_nfs_rpc.c — the nfs backend's libnfs layer: issuing async calls and
 * waiting for them, turning libnfs results into errnos, NFS sessions.
 *
 * Why not libnfs's synchronous wrappers: their wait loop stops when
 * nfs_service() fails (a reconnect refused while the server restarts) and
 * returns, leaving the request queued with a pointer into the caller's stack
 * that a later reply writes through; their error callbacks also print the
 * callback's data as a string when it is a decoded reply.  Here each call
 * has a heap record owned by whoever finishes last, and the wait has a hard
 * deadline on top of libnfs's per-request RPC timeout.
 */
#include "substrates/sub_nfs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- process-wide state --------------------------------------------------- */

/* Held while libnfs draws an EXCLUSIVE4 verifier (see sub_nfs.c). */
static pthread_mutex_t verifier_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int v4_creates;        /* NFSv4 creates made by this process */
static atomic_int verifier_inherited; /* forked after the parent made creates */
static atomic_uint_fast64_t conn_seq;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
/* KAAS_NFS_DEBUG=1: log every failed NFS call to stderr; =errors: only the
 * failures a caller does not expect in normal operation (not a missing or
 * already existing name), small enough to keep on in tests. */
static int nfs_debug;

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
	nfs_debug = !d || !*d || strcmp(d, "0") == 0 ? 0 : strcmp(d, "errors") == 0 ? 2 : 1;
	pthread_atfork(NULL, NULL, atfork_child);
}

int64_t sub_nfs_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sub_nfs_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void sub_nfs_init_process(void)
{
	pthread_once(&atfork_once, install_atfork);
}

int sub_nfs_verifier_inherited(void)
{
	return atomic_load(&verifier_inherited);
}

/* ---- waiting for libnfs ----------------------------------------------------- */

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

void sub_nfs_call_free(nfs_call *c)
{
	if (c) {
		free(c->rbuf);
		free(c);
	}
}

void sub_nfs_call_cb(int status, struct nfs_context *nfs, void *data, void *priv)
{
	nfs_call *c = priv;
	if (c->abandoned) {
		/* Nobody waits for it any more: release what it produced. */
		if (status >= 0 && c->kind == CALL_DIR && data)
			nfs_closedir(nfs, data);
		/* An nfsfh that arrives here is leaked rather than closed: closing
		 * would need another round trip on a session we gave up on. */
		sub_nfs_call_free(c);
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
static int call_wait(nfs_conn *cn, nfs_call *c, int timeout_ms)
{
	int64_t deadline = sub_nfs_now_ms() + 2 * (int64_t)timeout_ms + 2000;
	while (!c->done) {
		if (sub_nfs_now_ms() >= deadline) {
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
			sub_nfs_sleep_ms(20);
		}
		if (nfs_service(cn->ctx, revents) < 0) {
			/* A failed (re)connect: the request is still queued and
			 * either times out or is sent after a reconnect.  Do not
			 * spin on a refusing server. */
			cn->broken = 1;
			if (!c->done)
				sub_nfs_sleep_ms(20);
		}
	}
	return 0;
}

/* ---- errors ----------------------------------------------------------------- */

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
	{"BAD_SEQID", ERR_RETRY_SEQID},
	{"LEASE_MOVED", ERR_RETRY_NEWCONN},
	{"ADMIN_REVOKED", ERR_RETRY_NEWCONN},
	/* The server no longer has the open state this I/O names (it dropped
	 * it, or never had it): like a stale handle, the file must be opened
	 * again, which is what a caller does with ESTALE (a kernel client
	 * re-opens the same way, by state recovery). */
	{"STALE_STATEID", -ESTALE},
	{"BAD_STATEID", -ESTALE},
	/* We named an older version of a state we hold: our bug, not the
	 * server's. */
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

int sub_nfs_status_errno(const char *msg)
{
	int st;
	return status_from_string(msg, &st) ? st : 0;
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
			if (st == ERR_RETRY_SEQID) {
				/* The session itself still works. */
				cn->retired = 1;
				st = ERR_RETRY_NEWCONN;
			}
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

void sub_nfs_conn_put(nfs_conn *cn)
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
int sub_nfs_conn_new(nfs_vfs *v, const char *export, nfs_conn **out, char *err, size_t errlen)
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
	if (nfs_mount_async(cn->ctx, v->server, export, sub_nfs_call_cb, c) != 0) {
		snprintf(err, errlen, "mount %s:%s: %s", v->server, export, nfs_get_error(cn->ctx));
		sub_nfs_call_free(c);
		rc = -EIO;
		goto fail;
	}
	if (call_wait(cn, c, v->timeout_ms) != 0) {
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
		sub_nfs_call_free(c);
		goto fail;
	}
	sub_nfs_call_free(c);
	*out = cn;
	return 0;
fail:
	nfs_destroy_context(cn->ctx);
	free(cn);
	return rc;
}

/* The current session, replacing a broken or retired one.  Called with
 * v->mu held. */
static int conn_get(nfs_vfs *v, nfs_conn **out)
{
	if (v->conn && !v->conn->broken && !v->conn->retired) {
		*out = v->conn;
		return 0;
	}
	char err[512];
	nfs_conn *cn;
	int rc = sub_nfs_conn_new(v, v->export, &cn, err, sizeof(err));
	if (rc)
		return rc;
	sub_nfs_conn_put(v->conn);
	v->conn = cn;
	*out = cn;
	return 0;
}

/* ---- running an operation ------------------------------------------------- */

/*
 * NFSv4.0 open-owner sequence ids.  Every OPEN, OPEN_CONFIRM and CLOSE of
 * an open-owner carries a sequence id one higher than the last; the server
 * counts every such operation it executes, also a failed one (RFC 7530
 * §9.1.7), keeps the owner while it has open files (and a while after), and
 * answers an id it has already seen with that operation's cached reply.
 * libnfs 4.0 keeps one open-owner and one counter per context, and does not
 * count an OPEN that the server refused at the OPEN operation itself (the
 * error leaves libnfs before its counting code): after an OPEN of ours
 * failed with EXIST, NOENT, ACCES and the like while we held a file open,
 * the next CLOSE came back NFS4ERR_BAD_SEQID, and the next OPEN in the same
 * directory got the failed OPEN's cached reply (an exclusive create answered
 * EEXIST for a name nobody had).  It also counts CLOSEs the server did not
 * (a compound that failed before its CLOSE; ganesha's OK to a CLOSE of a
 * state that is already gone).  The public API can neither read nor set the
 * counter, so:
 *   - OPENs that can be seen to fail are not sent (sub_nfs_state_share);
 *   - a failed OPEN or CLOSE (CALL_SEQID) retires the session: no new OPENs
 *     there, path operations move to a new one (a new client ID, a fresh
 *     open-owner).  Its files stay usable and their CLOSE answers are
 *     ignored; the server drops their states when that session's lease
 *     ends after its last file is closed.
 */

/* Issues one async call built by `start` and waits for it.  Returns the
 * call's status after error mapping (possibly a retry code); *cp receives
 * the record on completion (caller frees), NULL otherwise. */
int sub_nfs_run_call(nfs_vfs *v, nfs_conn *cn, int kind, size_t rcap, start_fn start, void *arg,
		    nfs_call **cp)
{
	int seqid = (kind & CALL_SEQID) && v->version == 4;
	*cp = NULL;
	nfs_call *c = call_new(CALL_KIND(kind), rcap);
	if (!c)
		return -ENOMEM;
	int timeout = (kind & CALL_RETRANSMIT) && v->version == 3 && v->timeout_ms > RETRANSMIT_MS
			      ? RETRANSMIT_MS
			      : v->timeout_ms;
	nfs_set_timeout(cn->ctx, timeout);
	if (start(cn->ctx, arg, c) != 0) {
		/* Not queued (encoding failure, out of memory). */
		sub_nfs_call_free(c);
		return -EIO;
	}
	if (call_wait(cn, c, timeout) != 0) {
		cn->retired |= seqid;
		return -ETIMEDOUT;
	}
	if (seqid && c->status < 0)
		cn->retired = 1;
	int rc = fix_err(cn, c->status, c->err);
	if (c->status < 0 && nfs_debug && !(nfs_debug == 2 && (rc == -ENOENT || rc == -EEXIST)))
		fprintf(stderr, "sub_nfs: %s -> %s\n", c->err[0] ? c->err : "(no message)",
			rc == ERR_RETRY_DELAY ? "retry later" : rc == ERR_RETRY_NEWCONN ? "new session" : strerror(-rc));
	*cp = c;
	return rc;
}

/* Runs a path operation on the current session, with the retries the
 * protocol asks for: DELAY/GRACE/JUKEBOX are waited out (up to the timeout),
 * a session the server no longer knows is replaced once.  v->mu held. */
int sub_nfs_run_path_op(nfs_vfs *v, int kind, start_fn start, void *arg, nfs_call **cp, nfs_conn **cnp)
{
	int64_t deadline = sub_nfs_now_ms() + v->timeout_ms;
	int renewed = 0;
	*cp = NULL; /* also when no session can be had: callers free it */
	for (;;) {
		nfs_conn *cn;
		int rc = conn_get(v, &cn);
		if (rc)
			return rc;
		if (cnp)
			*cnp = cn;
		rc = sub_nfs_run_call(v, cn, kind, 0, start, arg, cp);
		if (rc == -ETIMEDOUT && (kind & CALL_RETRANSMIT) && v->version == 3 &&
		    sub_nfs_now_ms() < deadline) {
			/* Sent again, on a new session (this one is marked broken). */
			sub_nfs_call_free(*cp);
			*cp = NULL;
			continue;
		}
		if (rc == ERR_RETRY_DELAY) {
			sub_nfs_call_free(*cp);
			*cp = NULL;
			if (sub_nfs_now_ms() >= deadline)
				return -ETIMEDOUT;
			sub_nfs_sleep_ms(RETRY_SLEEP_MS);
			continue;
		}
		if (rc == ERR_RETRY_NEWCONN) {
			sub_nfs_call_free(*cp);
			*cp = NULL;
			if (renewed++)
				return -EIO;
			continue;
		}
		return rc;
	}
}

/* A file operation: runs on the file's own session, DELAY retried. */
int sub_nfs_run_file_op(nfs_vfs *v, nfs_file *f, int kind, size_t rcap, start_fn start, io_args *a,
		       nfs_call **cp)
{
	int64_t deadline = sub_nfs_now_ms() + v->timeout_ms;
	for (;;) {
		int rc = sub_nfs_run_call(v, f->conn, kind, rcap, start, a, cp);
		if (rc == -ETIMEDOUT && (kind & CALL_RETRANSMIT) && v->version == 3 &&
		    sub_nfs_now_ms() < deadline) {
			sub_nfs_call_free(*cp);
			*cp = NULL;
			continue;
		}
		if (rc != ERR_RETRY_DELAY && rc != ERR_RETRY_NEWCONN)
			return rc;
		sub_nfs_call_free(*cp);
		*cp = NULL;
		if (rc == ERR_RETRY_NEWCONN || sub_nfs_now_ms() >= deadline)
			return rc == ERR_RETRY_NEWCONN ? -EIO : -ETIMEDOUT;
		sub_nfs_sleep_ms(RETRY_SLEEP_MS);
	}
}

int sub_nfs_start_create_v4(struct nfs_context *ctx, void *arg, nfs_call *c)
{
	path_args *p = arg;
	/* libnfs draws the EXCLUSIVE4 verifier while building the request,
	 * inside this call: nobody else in the process may draw one now. */
	pthread_mutex_lock(&verifier_lock);
	int rc = nfs_open2_async(ctx, p->a, p->flags, p->mode, sub_nfs_call_cb, c);
	pthread_mutex_unlock(&verifier_lock);
	if (rc == 0)
		atomic_fetch_add(&v4_creates, 1);
	return rc;
}
