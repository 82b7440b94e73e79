/*
 * acl_store.c — the set of ACL bindings every broker keeps in memory, read
 * from CLUSTER/acls/ (acl.h, docs/security.md), and Kafka's authorization
 * rules over it.
 *
 * The set is an immutable snapshot swapped under a read-write lock; a
 * request's check takes the read lock and scans it (bindings are few; the
 * scan is linear).  The re-read is done by whichever request thread finds
 * the snapshot older than kaas.acl.poll.ms first (one at a time, the others
 * go on with the old snapshot): one small read of the version file, and a
 * listing of acls/ only when it changed, with every file not yet known read
 * and checked.  A known file is never read again: its name is the digest of
 * its contents, so the contents cannot have changed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "kaas/core/acl.h"
#include "kaas/core/acl_int.h"
#include "kaas/core/broker.h"
#include "util/clock.h"
#include "util/hex.h"
#include "util/log.h"

/* A name kaas writes in acls/: 64 lower-case hex digits and ".json". */
static int binding_file_name(const char *f)
{
	if (strlen(f) != 69 || strcmp(f + 64, ".json") != 0)
		return 0;
	for (int i = 0; i < 64; i++)
		if (!((f[i] >= '0' && f[i] <= '9') || (f[i] >= 'a' && f[i] <= 'f')))
			return 0;
	return 1;
}

/* ---- the set ----------------------------------------------------------------------- */

typedef struct entry {
	char file[70];
	kb_acl_binding b;
} entry;

typedef struct aset {
	entry *e; /* sorted by file */
	size_t n;
	char **refused; /* names of files refused at the last listing */
	size_t nrefused;
	char **ignored; /* names that are no binding file (logged once) */
	size_t nignored;
	int loaded;     /* a listing has succeeded */
} aset;

struct kb_acl {
	sub_vfs *cluster;
	char **supers;
	size_t nsupers;
	int allow_if_no_acl;
	int64_t poll_ms, backstop_ms;

	pthread_rwlock_t lock; /* guards set */
	aset set;

	pthread_mutex_t refresh_mu; /* one re-read at a time; guards what follows */
	char version[256];
	size_t version_len;
	int version_known;
	int64_t last_list_ms;
	int64_t next_poll_ms; /* atomic */
};

static void aset_free(aset *s)
{
	free(s->e);
	for (size_t i = 0; i < s->nrefused; i++)
		free(s->refused[i]);
	free(s->refused);
	for (size_t i = 0; i < s->nignored; i++)
		free(s->ignored[i]);
	free(s->ignored);
	memset(s, 0, sizeof(*s));
}

static const entry *find_entry(const aset *s, const char *file)
{
	size_t lo = 0, hi = s->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(s->e[mid].file, file);
		if (c == 0)
			return &s->e[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int in_list(char *const *v, size_t n, const char *file)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], file) == 0)
			return 1;
	return 0;
}
#define was_refused(s, f) in_list((s)->refused, (s)->nrefused, f)

/* Builds the new set from a listing of acls/, reusing what old knows. */
static int build(kb_acl *a, const aset *old, aset *out)
{
	char **names = NULL;
	size_t n = 0;
	memset(out, 0, sizeof(*out));
	int rc = sub_list(a->cluster, KB_ACL_DIR, &names, &n);
	if (rc == -ENOENT) {
		out->loaded = 1;
		return 0;
	}
	if (rc)
		return rc;
	out->e = calloc(n ? n : 1, sizeof(*out->e));
	out->refused = calloc(n ? n : 1, sizeof(char *));
	out->ignored = calloc(n ? n : 1, sizeof(char *));
	if (!out->e || !out->refused || !out->ignored) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const char *f = names[i];
		if (f[0] == '.')
			continue; /* a writer's temp file (sub_write_atomic) */
		if (!binding_file_name(f)) {
			if (!in_list(old->ignored, old->nignored, f))
				KLOG_WARN("acl", "%s/%s: not a name kaas writes there; ignored", KB_ACL_DIR, f);
			/* Remembered to log once; no reader ever took it for a
			 * binding, so it does not close the authorizer. */
			if ((out->ignored[out->nignored] = strdup(f)))
				out->nignored++;
			continue;
		}
		const entry *known = find_entry(old, f);
		if (known) {
			out->e[out->n++] = *known;
			continue;
		}
		if (out->n + out->nrefused >= KB_ACL_MAX_BINDINGS) {
			KLOG_ERR("acl", "%s: more than %d bindings; refusing the rest", KB_ACL_DIR, KB_ACL_MAX_BINDINGS);
			out->refused[out->nrefused++] = strdup(f);
			continue;
		}
		char path[128], why[256];
		char *buf = NULL;
		size_t len = 0;
		snprintf(path, sizeof(path), "%s/%s", KB_ACL_DIR, f);
		int r = sub_read_file(a->cluster, path, KB_ACL_FILE_MAX, &buf, &len);
		if (r == -ENOENT) {
			continue; /* deleted since the listing */
		} else if (r) {
			snprintf(why, sizeof(why), "cannot be read: %s", sub_strerror(r));
		} else if (kb_acl_parse(buf, len, f, &out->e[out->n].b, why, sizeof(why)) == 0) {
			snprintf(out->e[out->n].file, sizeof(out->e[out->n].file), "%s", f);
			out->n++;
			free(buf);
			continue;
		}
		free(buf);
		if (!was_refused(old, f))
			KLOG_ERR("acl", "%s: refused (%s); every principal but the super users is denied "
					"until it is removed", path, why);
		out->refused[out->nrefused] = strdup(f);
		if (!out->refused[out->nrefused]) {
			rc = -ENOMEM;
			goto out;
		}
		out->nrefused++;
	}
	out->loaded = 1;
	rc = 0;
out:
	sub_names_free(names, n);
	if (rc)
		aset_free(out);
	return rc;
}

static int read_version(kb_acl *a, char *buf, size_t cap, size_t *len)
{
	char *s = NULL;
	size_t n = 0;
	int rc = sub_read_file(a->cluster, KB_ACL_VERSION_FILE, cap - 1, &s, &n);
	if (rc == -ENOENT) {
		*len = 0;
		return 0;
	}
	if (rc)
		return rc;
	memcpy(buf, s, n);
	*len = n;
	free(s);
	return 0;
}

/* Under refresh_mu. */
static int refresh_locked(kb_acl *a, int force)
{
	int64_t now = ku_mono_ms();
	__atomic_store_n(&a->next_poll_ms, now + a->poll_ms, __ATOMIC_RELEASE);
	char v[256];
	size_t vlen = 0;
	/* The version is read before the listing: a change that finished
	 * after it was read rewrites it again, so it is seen next time. */
	int vrc = read_version(a, v, sizeof(v), &vlen);
	pthread_rwlock_rdlock(&a->lock);
	int closed = !a->set.loaded || a->set.nrefused > 0;
	pthread_rwlock_unlock(&a->lock);
	int changed = vrc || !a->version_known || vlen != a->version_len || memcmp(v, a->version, vlen) != 0;
	if (!force && !changed && !closed && now - a->last_list_ms < a->backstop_ms)
		return 0;
	aset fresh;
	pthread_rwlock_rdlock(&a->lock);
	int rc = build(a, &a->set, &fresh);
	pthread_rwlock_unlock(&a->lock);
	if (rc) {
		KLOG_WARN("acl", "listing %s: %s; the last set read stays in force", KB_ACL_DIR, sub_strerror(rc));
		return rc;
	}
	pthread_rwlock_wrlock(&a->lock);
	aset old = a->set;
	a->set = fresh;
	pthread_rwlock_unlock(&a->lock);
	aset_free(&old);
	a->last_list_ms = now;
	if (!vrc) {
		memcpy(a->version, v, vlen);
		a->version_len = vlen;
		a->version_known = 1;
	}
	return 0;
}

int kb_acl_refresh(kb_acl *a, int force)
{
	pthread_mutex_lock(&a->refresh_mu);
	int rc = refresh_locked(a, force);
	pthread_mutex_unlock(&a->refresh_mu);
	return rc;
}

/* From a request thread: re-read when the snapshot is older than poll_ms,
 * unless another thread is at it. */
static void maybe_refresh(kb_acl *a)
{
	if (ku_mono_ms() < __atomic_load_n(&a->next_poll_ms, __ATOMIC_ACQUIRE))
		return;
	if (pthread_mutex_trylock(&a->refresh_mu) != 0)
		return;
	refresh_locked(a, 0);
	pthread_mutex_unlock(&a->refresh_mu);
}

static int parse_supers(kb_acl *a, const char *s, char *err, size_t errlen)
{
	if (!s)
		return 0;
	const char *p = s;
	while (*p) {
		const char *e = strchr(p, ';');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		const char *q = p;
		size_t m = n;
		while (m && (*q == ' ' || *q == '\t'))
			q++, m--;
		while (m && (q[m - 1] == ' ' || q[m - 1] == '\t'))
			m--;
		if (m) {
			if (!kb__acl_principal_ok(q, m)) {
				snprintf(err, errlen, "super.users: \"%.*s\" is not a principal Type:name", (int)m, q);
				return -EINVAL;
			}
			char **nv = realloc(a->supers, (a->nsupers + 1) * sizeof(char *));
			if (!nv)
				return -ENOMEM;
			a->supers = nv;
			if (!(a->supers[a->nsupers] = strndup(q, m)))
				return -ENOMEM;
			a->nsupers++;
		}
		p += n + (e ? 1 : 0);
	}
	return 0;
}

int kb_acl_open(const kb_acl_options *o, kb_acl **out, char *err, size_t errlen)
{
	kb_acl *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->cluster = o->cluster;
	a->allow_if_no_acl = o->allow_if_no_acl;
	a->poll_ms = o->poll_ms > 0 ? o->poll_ms : 1000;
	a->backstop_ms = o->backstop_ms > 0 ? o->backstop_ms : 30 * a->poll_ms;
	pthread_rwlock_init(&a->lock, NULL);
	pthread_mutex_init(&a->refresh_mu, NULL);
	int rc = parse_supers(a, o->super_users, err, errlen);
	if (rc) {
		kb_acl_close(a);
		return rc;
	}
	if ((rc = kb_acl_refresh(a, 1)))
		KLOG_WARN("acl", "reading %s: %s; denying every principal but the super users until it can be read",
			  KB_ACL_DIR, sub_strerror(rc));
	pthread_rwlock_rdlock(&a->lock);
	KLOG_INFO("acl", "authorizer on: %zu binding(s), %zu refused file(s), %zu super user(s), "
			 "allow.everyone.if.no.acl.found=%s", a->set.n, a->set.nrefused, a->nsupers,
		  a->allow_if_no_acl ? "true" : "false");
	pthread_rwlock_unlock(&a->lock);
	*out = a;
	return 0;
}

void kb_acl_close(kb_acl *a)
{
	if (!a)
		return;
	aset_free(&a->set);
	for (size_t i = 0; i < a->nsupers; i++)
		free(a->supers[i]);
	free(a->supers);
	pthread_rwlock_destroy(&a->lock);
	pthread_mutex_destroy(&a->refresh_mu);
	free(a);
}

size_t kb_acl_refused(kb_acl *a)
{
	pthread_rwlock_rdlock(&a->lock);
	size_t n = a->set.nrefused;
	pthread_rwlock_unlock(&a->lock);
	return n;
}

/* Tells every broker the set changed: fresh random bytes. */
static int announce(kb_acl *a)
{
	uint8_t r[16];
	char buf[96];
	if (RAND_bytes(r, sizeof(r)) != 1)
		return -EIO;
	char hex[33];
	ku_hex_encode(r, sizeof(r), hex);
	int n = snprintf(buf, sizeof(buf), "{\"version\":1,\"nonce\":\"%s\"}\n", hex);
	return sub_write_atomic(a->cluster, KB_ACL_VERSION_FILE, buf, (size_t)n);
}

int kb_acl_create(kb_acl *a, const kb_acl_binding *b)
{
	char path[128];
	kb_acl_path(b, path, sizeof(path));
	char *json = kb_acl_format(b);
	if (!json)
		return -ENOMEM;
	int rc = sub_mkdirs(a->cluster, KB_ACL_DIR, 0755);
	if (!rc)
		rc = sub_write_atomic(a->cluster, path, json, strlen(json));
	free(json);
	if (!rc)
		rc = announce(a);
	if (!rc)
		kb_acl_refresh(a, 1);
	return rc;
}

static int collect(kb_acl *a, const kb_acl_filter *f, kb_acl_binding **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	pthread_rwlock_rdlock(&a->lock);
	int rc = 0;
	kb_acl_binding *v = calloc(a->set.n ? a->set.n : 1, sizeof(*v));
	if (!v) {
		rc = -ENOMEM;
	} else {
		for (size_t i = 0; i < a->set.n; i++)
			if (kb_acl_filter_matches(f, &a->set.e[i].b))
				v[(*n)++] = a->set.e[i].b;
		*out = v;
	}
	pthread_rwlock_unlock(&a->lock);
	return rc;
}

int kb_acl_describe(kb_acl *a, const kb_acl_filter *f, kb_acl_binding **out, size_t *n)
{
	kb_acl_refresh(a, 0);
	return collect(a, f, out, n);
}

int kb_acl_delete(kb_acl *a, const kb_acl_filter *f, kb_acl_binding **out, size_t *n)
{
	kb_acl_refresh(a, 1); /* what another broker created is deleted too */
	kb_acl_binding *v = NULL;
	size_t m = 0, done = 0;
	int rc = collect(a, f, &v, &m);
	if (rc)
		return rc;
	for (size_t i = 0; i < m; i++) {
		char path[128];
		kb_acl_path(&v[i], path, sizeof(path));
		int r = sub_unlink(a->cluster, path);
		if (r && r != -ENOENT) {
			rc = r;
			break;
		}
		done++;
	}
	if (done) {
		int r = sub_fsync_dir(a->cluster, KB_ACL_DIR);
		if (!r)
			r = announce(a);
		if (!rc)
			rc = r;
		kb_acl_refresh(a, 1);
	}
	*out = v;
	*n = done;
	return rc;
}

/* ---- the rules --------------------------------------------------------------------- */

static int is_super(const kb_acl *a, const char *principal)
{
	for (size_t i = 0; i < a->nsupers; i++)
		if (strcmp(a->supers[i], principal) == 0)
			return 1;
	return 0;
}

static int principal_matches(const kb_acl_binding *b, const char *principal)
{
	return strcmp(b->principal, principal) == 0 ||
	       (strcmp(b->principal, "User:*") == 0 && strncmp(principal, "User:", 5) == 0);
}

static int host_matches(const kb_acl_binding *b, const char *host)
{
	return strcmp(b->host, "*") == 0 || (host && strcmp(b->host, host) == 0);
}

static int resource_matches(const kb_acl_binding *b, int rtype, const char *name, size_t nlen)
{
	if (b->rtype != rtype)
		return 0;
	size_t l = strlen(b->name);
	if (b->pattern == KB_PAT_PREFIXED)
		return l <= nlen && memcmp(b->name, name, l) == 0;
	return (l == nlen && memcmp(b->name, name, l) == 0) || (l == 1 && b->name[0] == '*');
}

/* Whether an ALLOW for `granted` also allows `want` (Kafka's implied ops). */
static int implies(int granted, int want)
{
	if (granted == want || granted == KB_OP_ALL)
		return 1;
	if (want == KB_OP_DESCRIBE)
		return granted == KB_OP_READ || granted == KB_OP_WRITE || granted == KB_OP_DELETE ||
		       granted == KB_OP_ALTER;
	if (want == KB_OP_DESCRIBE_CONFIGS)
		return granted == KB_OP_ALTER_CONFIGS;
	return 0;
}

/* Under the read lock; host normalised or NULL. */
static int decide(const kb_acl *a, const char *principal, const char *host, int op, int rtype, const char *name,
		  size_t nlen)
{
	if (!a->set.loaded || a->set.nrefused)
		return 0; /* cannot know what the unread bindings say */
	int any = 0, allow = 0;
	for (size_t i = 0; i < a->set.n; i++) {
		const kb_acl_binding *b = &a->set.e[i].b;
		if (!resource_matches(b, rtype, name, nlen))
			continue;
		any = 1;
		if (!principal_matches(b, principal) || !host_matches(b, host))
			continue;
		if (b->perm == KB_PERM_DENY && (b->op == op || b->op == KB_OP_ALL))
			return 0;
		if (b->perm == KB_PERM_ALLOW && implies(b->op, op))
			allow = 1;
	}
	return any ? allow : a->allow_if_no_acl;
}

static const char *norm_host(const char *host, char *buf, size_t len)
{
	if (!host || kb__acl_host_norm(host, strlen(host), buf, len))
		return NULL;
	return buf;
}

int kb_acl_authorize(kb_acl *a, const char *principal, const char *host, int op, int rtype, const char *name,
		     size_t nlen)
{
	if (!a)
		return 1;
	if (is_super(a, principal))
		return 1;
	maybe_refresh(a);
	char hb[KB_ACL_HOST_MAX + 1];
	const char *h = norm_host(host, hb, sizeof(hb));
	pthread_rwlock_rdlock(&a->lock);
	int ok = decide(a, principal, h, op, rtype, name, nlen);
	pthread_rwlock_unlock(&a->lock);
	return ok;
}

int32_t kb_acl_authorized_ops(kb_acl *a, const char *principal, const char *host, int rtype, const char *name,
			      size_t nlen, uint32_t supported)
{
	if (!a || is_super(a, principal))
		return (int32_t)supported;
	maybe_refresh(a);
	char hb[KB_ACL_HOST_MAX + 1];
	const char *h = norm_host(host, hb, sizeof(hb));
	uint32_t ops = 0;
	pthread_rwlock_rdlock(&a->lock);
	for (int op = KB_OP_READ; op < KB_OP_N; op++)
		if ((supported & KB_OPS_BIT(op)) && decide(a, principal, h, op, rtype, name, nlen))
			ops |= KB_OPS_BIT(op);
	pthread_rwlock_unlock(&a->lock);
	return (int32_t)ops;
}

int kb_acl_authorize_any(kb_acl *a, const char *principal, const char *host, int op, int rtype)
{
	if (!a || is_super(a, principal))
		return 1;
	maybe_refresh(a);
	char hb[KB_ACL_HOST_MAX + 1];
	const char *h = norm_host(host, hb, sizeof(hb));
	int ok = 0, any = 0;
	pthread_rwlock_rdlock(&a->lock);
	if (!a->set.loaded || a->set.nrefused)
		goto out;
	const entry *e = a->set.e;
	size_t n = a->set.n;
	for (size_t i = 0; i < n; i++) {
		any |= e[i].b.rtype == rtype;
		const kb_acl_binding *b = &e[i].b;
		if (b->rtype != rtype || b->perm != KB_PERM_DENY || !principal_matches(b, principal) ||
		    !host_matches(b, h) || (b->op != op && b->op != KB_OP_ALL))
			continue;
		if (b->pattern == KB_PAT_LITERAL && strcmp(b->name, "*") == 0)
			goto out; /* denied on every resource of the type */
	}
	for (size_t i = 0; i < n && !ok; i++) {
		const kb_acl_binding *b = &e[i].b;
		if (b->rtype != rtype || b->perm != KB_PERM_ALLOW || !principal_matches(b, principal) ||
		    !host_matches(b, h) || !implies(b->op, op))
			continue;
		/* This allow counts unless a DENY covers every name it allows. */
		int covered = 0;
		size_t bl = strlen(b->name);
		for (size_t j = 0; j < n && !covered; j++) {
			const kb_acl_binding *d = &e[j].b;
			if (d->rtype != rtype || d->perm != KB_PERM_DENY || !principal_matches(d, principal) ||
			    !host_matches(d, h) || (d->op != op && d->op != KB_OP_ALL))
				continue;
			size_t dl = strlen(d->name);
			if (d->pattern == KB_PAT_PREFIXED)
				covered = dl <= bl && memcmp(d->name, b->name, dl) == 0;
			else
				covered = b->pattern == KB_PAT_LITERAL && strcmp(d->name, b->name) == 0;
		}
		ok = !covered;
	}
	if (!ok && !any)
		ok = a->allow_if_no_acl;
out:
	pthread_rwlock_unlock(&a->lock);
	return ok;
}

/* ---- the request's view ---------------------------------------------------------------- */

/* The IP of "ip:port" or "[ip]:port". */
static const char *peer_host(const kb_req *req, char *buf, size_t len)
{
	const char *p = req->peer;
	if (!p)
		return NULL;
	const char *end;
	if (p[0] == '[') {
		p++;
		end = strchr(p, ']');
	} else {
		end = strrchr(p, ':');
	}
	size_t n = end ? (size_t)(end - p) : strlen(p);
	if (n >= len)
		return NULL;
	memcpy(buf, p, n);
	buf[n] = 0;
	return buf;
}

static const char *principal_of(const kb_req *req)
{
	return req->principal ? req->principal : "User:ANONYMOUS";
}

static int check(const kb_req *req, int op, int rtype, const char *name, int32_t nlen, int log)
{
	kb_acl *a = req->broker ? req->broker->acl : NULL;
	if (!a)
		return 1;
	char hb[80];
	const char *host = peer_host(req, hb, sizeof(hb));
	size_t n = name ? (nlen < 0 ? strlen(name) : (size_t)nlen) : 0;
	int ok = kb_acl_authorize(a, principal_of(req), host, op, rtype, name ? name : "", n);
	if (!ok && log)
		KLOG_INFO("acl", "Principal = %s is Denied Operation = %s from host = %s on resource = %s:%.*s",
			  principal_of(req), kb_acl_op_name(op), host ? host : "?", kb_acl_rtype_name(rtype),
			  (int)(n > 256 ? 256 : n), name ? name : "");
	return ok;
}

int kb_authorize(const kb_req *req, int op, int rtype, const char *name, int32_t nlen)
{
	return check(req, op, rtype, name, nlen, 1);
}

int kb_authorize_filter(const kb_req *req, int op, int rtype, const char *name, int32_t nlen)
{
	return check(req, op, rtype, name, nlen, 0);
}

int kb_authorize_cluster(const kb_req *req, int op)
{
	return check(req, op, KB_RES_CLUSTER, KB_ACL_CLUSTER_NAME, -1, 1);
}

int32_t kb_authorized_ops(const kb_req *req, int rtype, const char *name, int32_t nlen, uint32_t supported)
{
	kb_acl *a = req->broker ? req->broker->acl : NULL;
	char hb[80];
	size_t n = name ? (nlen < 0 ? strlen(name) : (size_t)nlen) : 0;
	return kb_acl_authorized_ops(a, principal_of(req), peer_host(req, hb, sizeof(hb)), rtype, name ? name : "",
				     n, supported);
}

int kb_authorize_any(const kb_req *req, int op, int rtype)
{
	kb_acl *a = req->broker ? req->broker->acl : NULL;
	char hb[80];
	return kb_acl_authorize_any(a, principal_of(req), peer_host(req, hb, sizeof(hb)), op, rtype);
}

int kb_authorizer_on(const kb_req *req)
{
	return req->broker && req->broker->acl;
}
