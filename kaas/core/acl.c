/*
 * acl.c — ACL bindings themselves (acl.h, docs/security.md): Kafka's codes
 * and names, the checks CreateAcls and every file read make, the filters of
 * DescribeAcls and DeleteAcls, and a binding's file: its digest name and
 * its JSON both ways.  The store and the rules are in acl_store.c.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "kaas/core/acl.h"
#include "kaas/core/acl_int.h"
#include "util/hex.h"

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
int kb__acl_host_norm(const char *h, size_t n, char *out, size_t outlen)
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
int kb__acl_principal_ok(const char *p, size_t n)
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
	if (!principal || !kb__acl_principal_ok(principal, plen))
		return fail(why, whylen, "Principal is not of the form Type:name");
	if (!host || kb__acl_host_norm(host, hlen, b->host, sizeof(b->host)))
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
		if (kb__acl_host_norm(f->host, f->host_len, h, sizeof(h)))
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

