/*
 * acl.c — ACL bindings: their checks, their files in CLUSTER/acls/, the
 * set every broker keeps in memory, and Kafka's authorization rules over it
 * (acl.h, docs/security.md).
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
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "kaas/core/acl.h"
#include "kaas/core/broker.h"
#include "util/clock.h"
#include "util/hex.h"
#include "util/log.h"

/* ---- names ------------------------------------------------------------------------- */

static const char *const rtype_names[] = {"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER",
					  "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"};
static const char *const pattern_names[] = {"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"};
static const char *const op_names[] = {"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER",
				       "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
				       "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"};
static const char *const perm_names[] = {"UNKNOWN", "ANY", "DENY", "ALLOW"};
#define NAMEOF(tab, v) ((v) >= 0 && (size_t)(v) < sizeof(tab) / sizeof(tab[0]) ? tab[v] : NULL)

const char *kb_acl_rtype_name(int v) { return NAMEOF(rtype_names, v); }
const char *kb_acl_pattern_name(int v) { return NAMEOF(pattern_names, v); }
const char *kb_acl_op_name(int v) { return NAMEOF(op_names, v); }
const char *kb_acl_perm_name(int v) { return NAMEOF(perm_names, v); }

static int code_of(const char *const *tab, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(tab[i], s) == 0)
			return (int)i;
	return -1;
}
#define CODEOF(tab, s) code_of(tab, sizeof(tab) / sizeof(tab[0]), s)

/* ---- checks ------------------------------------------------------------------------ */

static int fail(char *why, size_t whylen, const char *msg)
{
	snprintf(why, whylen, "%s", msg);
	return -EINVAL;
}

/* Well-formed UTF-8 without NUL (the names go into JSON, which wants it). */
static int utf8_ok(const char *s, size_t n)
{
	const uint8_t *p = (const uint8_t *)s;
	size_t i = 0;
	while (i < n) {
		uint8_t c = p[i];
		size_t k;
		uint8_t lo = 0x80, hi = 0xbf; /* the second byte's range */
		if (c == 0)
			return 0;
		if (c < 0x80)
			k = 0;
		else if (c >= 0xc2 && c <= 0xdf)
			k = 1;
		else if (c >= 0xe0 && c <= 0xef)
			k = 2, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 3, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
		else
			return 0;
		if (n - i - 1 < k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			uint8_t d = p[i + j];
			if (j == 1 ? (d < lo || d > hi) : (d & 0xc0) != 0x80)
				return 0;
		}
		i += k + 1;
	}
	return 1;
}

/* "*" or an IP address in its canonical text (IPv4-mapped IPv6 as IPv4). */
static int host_norm(const char *h, size_t n, char *out, size_t outlen)
{
	char buf[KB_ACL_HOST_MAX + 1];
	if (n == 1 && h[0] == '*') {
		snprintf(out, outlen, "*");
		return 0;
	}
	if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
		h++;
		n -= 2;
	}
	if (n == 0 || n >= sizeof(buf) || memchr(h, 0, n))
		return -EINVAL;
	memcpy(buf, h, n);
	buf[n] = 0;
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_pton(AF_INET, buf, &a4) == 1)
		return inet_ntop(AF_INET, &a4, out, (socklen_t)outlen) ? 0 : -EINVAL;
	if (inet_pton(AF_INET6, buf, &a6) == 1) {
		if (IN6_IS_ADDR_V4MAPPED(&a6)) {
			memcpy(&a4, a6.s6_addr + 12, 4);
			return inet_ntop(AF_INET, &a4, out, (socklen_t)outlen) ? 0 : -EINVAL;
		}
		return inet_ntop(AF_INET6, &a6, out, (socklen_t)outlen) ? 0 : -EINVAL;
	}
	return -EINVAL;
}

/* "Type:name", both parts non-empty. */
static int principal_ok(const char *p, size_t n)
{
	const char *c = memchr(p, ':', n);
	return n <= KB_ACL_PRINCIPAL_MAX && c && c > p && (size_t)(c - p) + 1 < n && utf8_ok(p, n);
}

int kb_acl_binding_make(kb_acl_binding *b, int8_t rtype, int8_t pattern, const char *name, size_t nlen,
			const char *principal, size_t plen, const char *host, size_t hlen, int8_t op, int8_t perm,
			char *why, size_t whylen)
{
	memset(b, 0, sizeof(*b));
	if (rtype == KB_RES_DELEGATION_TOKEN || rtype == KB_RES_USER)
		return fail(why, whylen, "ACLs on DELEGATION_TOKEN and USER resources are not supported");
	if (rtype != KB_RES_TOPIC && rtype != KB_RES_GROUP && rtype != KB_RES_CLUSTER && rtype != KB_RES_TXN)
		return fail(why, whylen, "Invalid resource type");
	if (pattern != KB_PAT_LITERAL && pattern != KB_PAT_PREFIXED)
		return fail(why, whylen, "Invalid patternType");
	if (op < KB_OP_ALL || op >= KB_OP_N)
		return fail(why, whylen, "Invalid operation");
	if (perm != KB_PERM_DENY && perm != KB_PERM_ALLOW)
		return fail(why, whylen, "Invalid permission type");
	if (!name || nlen == 0)
		return fail(why, whylen, "Resource name should not be empty");
	if (nlen > KB_ACL_NAME_MAX || !utf8_ok(name, nlen))
		return fail(why, whylen, "Resource name is not 1 to 1024 bytes of UTF-8");
	if (rtype == KB_RES_CLUSTER &&
	    (nlen != strlen(KB_ACL_CLUSTER_NAME) || memcmp(name, KB_ACL_CLUSTER_NAME, nlen) != 0))
		return fail(why, whylen, "The only valid name for the CLUSTER resource is kafka-cluster");
	if (!principal || !principal_ok(principal, plen))
		return fail(why, whylen, "Principal is not of the form Type:name");
	if (!host || host_norm(host, hlen, b->host, sizeof(b->host)))
		return fail(why, whylen, "Host is neither * nor an IP address");
	b->rtype = rtype;
	b->pattern = pattern;
	b->op = op;
	b->perm = perm;
	memcpy(b->name, name, nlen);
	memcpy(b->principal, principal, plen);
	return 0;
}

int kb_acl_filter_check(const kb_acl_filter *f, char *why, size_t whylen)
{
	if (f->rtype <= KB_RES_UNKNOWN || f->rtype > KB_RES_USER)
		return fail(why, whylen, "The filter's resource type is unknown");
	if (f->pattern <= KB_PAT_UNKNOWN || f->pattern > KB_PAT_PREFIXED)
		return fail(why, whylen, "The filter's pattern type is unknown");
	if (f->op <= KB_OP_UNKNOWN || f->op >= KB_OP_N)
		return fail(why, whylen, "The filter's operation is unknown");
	if (f->perm <= KB_PERM_UNKNOWN || f->perm > KB_PERM_ALLOW)
		return fail(why, whylen, "The filter's permission type is unknown");
	return 0;
}

static int str_eq(const char *a, size_t alen, const char *b)
{
	return strlen(b) == alen && memcmp(a, b, alen) == 0;
}

int kb_acl_filter_matches(const kb_acl_filter *f, const kb_acl_binding *b)
{
	if (f->rtype != KB_RES_ANY && f->rtype != b->rtype)
		return 0;
	if (f->pattern != KB_PAT_ANY && f->pattern != KB_PAT_MATCH && f->pattern != b->pattern)
		return 0;
	if (f->name) {
		if (f->pattern != KB_PAT_MATCH) {
			if (!str_eq(f->name, f->name_len, b->name))
				return 0;
		} else if (b->pattern == KB_PAT_LITERAL) {
			if (!str_eq(f->name, f->name_len, b->name) && strcmp(b->name, "*") != 0)
				return 0;
		} else {
			size_t l = strlen(b->name);
			if (l > f->name_len || memcmp(f->name, b->name, l) != 0)
				return 0;
		}
	}
	if (f->principal && !str_eq(f->principal, f->principal_len, b->principal))
		return 0;
	if (f->host) {
		char h[KB_ACL_HOST_MAX + 1];
		if (host_norm(f->host, f->host_len, h, sizeof(h)))
			return str_eq(f->host, f->host_len, b->host);
		if (strcmp(h, b->host) != 0)
			return 0;
	}
	if (f->op != KB_OP_ANY && f->op != b->op)
		return 0;
	if (f->perm != KB_PERM_ANY && f->perm != b->perm)
		return 0;
	return 1;
}

/* ---- files ------------------------------------------------------------------------- */

static void put_field(EVP_MD_CTX *x, const char *s, size_t n)
{
	uint8_t len[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n};
	EVP_DigestUpdate(x, len, 4);
	EVP_DigestUpdate(x, s, n);
}

void kb_acl_path(const kb_acl_binding *b, char *path, size_t len)
{
	uint8_t d[32] = {0};
	unsigned dl = 0;
	char codes[4] = {(char)b->rtype, (char)b->pattern, (char)b->op, (char)b->perm};
	EVP_MD_CTX *x = EVP_MD_CTX_new();
	if (x && EVP_DigestInit_ex(x, EVP_sha256(), NULL) == 1) {
		put_field(x, "kaas-acl-1", 10);
		put_field(x, codes, 4);
		put_field(x, b->name, strlen(b->name));
		put_field(x, b->principal, strlen(b->principal));
		put_field(x, b->host, strlen(b->host));
		EVP_DigestFinal_ex(x, d, &dl);
	}
	EVP_MD_CTX_free(x);
	char hex[65];
	ku_hex_encode(d, 32, hex);
	snprintf(path, len, "%s/%s.json", KB_ACL_DIR, hex);
}

char *kb_acl_format(const kb_acl_binding *b)
{
	json_t *o = json_pack("{s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "version", 1, "resource_type",
			      kb_acl_rtype_name(b->rtype), "pattern_type", kb_acl_pattern_name(b->pattern),
			      "resource_name", b->name, "principal", b->principal, "host", b->host, "operation",
			      kb_acl_op_name(b->op), "permission", kb_acl_perm_name(b->perm));
	if (!o)
		return NULL;
	char *s = json_dumps(o, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(o);
	return s;
}

static const char *get_str(json_t *o, const char *key, size_t *len)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v))
		return NULL;
	*len = json_string_length(v);
	return json_string_value(v);
}

int kb_acl_parse(const char *json, size_t len, const char *file, kb_acl_binding *out, char *why, size_t whylen)
{
	int rc = -EBADMSG;
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root || !json_is_object(root)) {
		snprintf(why, whylen, "not a JSON object (%s)", root ? "another JSON value" : je.text);
		goto out;
	}
	json_t *ver = json_object_get(root, "version");
	if (!json_is_integer(ver) || json_integer_value(ver) != 1) {
		snprintf(why, whylen, "version is not 1");
		goto out;
	}
	if (json_object_size(root) != 8) {
		snprintf(why, whylen, "not exactly the 8 fields of version 1");
		goto out;
	}
	size_t l[7] = {0};
	const char *rt = get_str(root, "resource_type", &l[0]), *pt = get_str(root, "pattern_type", &l[1]);
	const char *nm = get_str(root, "resource_name", &l[2]), *pr = get_str(root, "principal", &l[3]);
	const char *ho = get_str(root, "host", &l[4]), *op = get_str(root, "operation", &l[5]);
	const char *pe = get_str(root, "permission", &l[6]);
	if (!rt || !pt || !nm || !pr || !ho || !op || !pe) {
		snprintf(why, whylen, "a field is missing or not a string");
		goto out;
	}
	int irt = CODEOF(rtype_names, rt), ipt = CODEOF(pattern_names, pt), iop = CODEOF(op_names, op),
	    ipe = CODEOF(perm_names, pe);
	if (irt < 0 || ipt < 0 || iop < 0 || ipe < 0) {
		snprintf(why, whylen, "an unknown resource type, pattern type, operation or permission");
		goto out;
	}
	char w[160];
	if (kb_acl_binding_make(out, (int8_t)irt, (int8_t)ipt, nm, l[2], pr, l[3], ho, l[4], (int8_t)iop,
				(int8_t)ipe, w, sizeof(w))) {
		snprintf(why, whylen, "%s", w);
		goto out;
	}
	if (strcmp(out->host, ho) != 0 || strlen(nm) != l[2] || strlen(pr) != l[3]) {
		snprintf(why, whylen, "a field is not in its canonical form");
		goto out;
	}
	if (file) {
		char path[128];
		kb_acl_path(out, path, sizeof(path));
		if (strcmp(path + strlen(KB_ACL_DIR) + 1, file) != 0) {
			snprintf(why, whylen, "its name is not the digest of its binding");
			goto out;
		}
	}
	rc = 0;
out:
	json_decref(root);
	return rc;
}

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
			if (!principal_ok(q, m)) {
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
	if (!host || host_norm(host, strlen(host), buf, len))
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
