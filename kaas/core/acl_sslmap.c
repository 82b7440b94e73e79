/*
 * acl_sslmap.c — ssl.principal.mapping.rules (sslmap.h): Kafka's rule list
 * split and parsed as its SslPrincipalMapper does, the patterns compiled by
 * PCRE2, the replacement applied with the semantics of Java's
 * String.replaceAll.
 *
 * Kafka splits the list with a regular expression; the scanner below
 * follows that expression's choices step by step, so that a list splits
 * where Kafka splits it (a comma inside a pattern belongs to the pattern,
 * an escaped '/' does not end it, empty entries are skipped), and refuses
 * what Kafka refuses.  Where Kafka would fail only when a client connects
 * (a '$' that names no group, a trailing '\' in the replacement), the
 * broker refuses to start instead.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/sslmap.h"

#define MAX_RULES 64

typedef struct piece {
	int group;        /* -1: the literal text */
	size_t off, len;  /* of the literal, in the rule's lit buffer */
} piece;

typedef struct rule {
	int is_default;
	char *pattern, *repl; /* as written (Rule.toString) */
	int lower, upper;
	pcre2_code *code;
	piece *pieces;
	int npieces;
	char *lit;            /* the literal bytes of the replacement */
	size_t litlen;
} rule;

struct kb_sslmap {
	int n;
	rule r[MAX_RULES];
};

/* Java's \s: space, \t, \n, \x0B, \f, \r. */
static int jspace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* The first k >= from where s[k..] is \s* followed by ',' or the end: where
 * the splitter's lazy part stops. */
static size_t lazy_stop(const char *s, size_t len, size_t from)
{
	for (size_t k = from; k <= len; k++) {
		size_t j = k;
		while (j < len && jspace(s[j]))
			j++;
		if (j == len || s[j] == ',')
			return k;
	}
	return len;
}

/* (\\.|[^\\/])* from i: the end of a pattern or replacement, or len when
 * no '/' ends it. */
static size_t slash_part(const char *s, size_t len, size_t i)
{
	while (i < len) {
		if (s[i] == '\\') {
			if (i + 1 >= len || s[i + 1] == '\n')
				return len;
			i += 2;
		} else if (s[i] == '/') {
			return i;
		} else {
			i++;
		}
	}
	return len;
}

/* Where "RULE:pattern/replacement/[LU]" of s[p..len) ends, or 0 when s[p..]
 * is not one; the parts through the out-arguments. */
static size_t rule_syntax(const char *s, size_t len, size_t p, size_t *pat, size_t *patlen, size_t *rep,
			  size_t *replen, char *flag)
{
	if (len - p < 5 || memcmp(s + p, "RULE:", 5) != 0)
		return 0;
	size_t a = p + 5, ae = slash_part(s, len, a);
	if (ae >= len)
		return 0;
	size_t b = ae + 1, be = slash_part(s, len, b);
	if (be >= len)
		return 0;
	size_t e = be + 1;
	*flag = 0;
	if (e < len && (s[e] == 'L' || s[e] == 'U'))
		*flag = s[e++];
	*pat = a;
	*patlen = ae - a;
	*rep = b;
	*replen = be - b;
	return e;
}

static char *dup_n(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

static void rule_free(rule *r)
{
	pcre2_code_free(r->code);
	free(r->pattern);
	free(r->repl);
	free(r->pieces);
	free(r->lit);
	memset(r, 0, sizeof(*r));
}

static int add_piece(rule *r, int group, const char *lit, size_t n)
{
	if (group < 0 && r->npieces && r->pieces[r->npieces - 1].group < 0) {
		memcpy(r->lit + r->litlen, lit, n); /* lit has room for the whole replacement */
		r->pieces[r->npieces - 1].len += n;
		r->litlen += n;
		return 0;
	}
	piece *np = realloc(r->pieces, sizeof(*np) * (size_t)(r->npieces + 1));
	if (!np)
		return -ENOMEM;
	r->pieces = np;
	np[r->npieces].group = group;
	np[r->npieces].off = r->litlen;
	np[r->npieces].len = group < 0 ? n : 0;
	if (group < 0) {
		memcpy(r->lit + r->litlen, lit, n);
		r->litlen += n;
	}
	r->npieces++;
	return 0;
}

/* The replacement as Java's Matcher.appendReplacement reads it, against
 * the groups of the compiled pattern. */
static int compile_repl(rule *r, char *why, size_t whylen)
{
	const char *s = r->repl;
	size_t n = strlen(s);
	uint32_t ngroups = 0;
	pcre2_pattern_info(r->code, PCRE2_INFO_CAPTURECOUNT, &ngroups);
	r->lit = malloc(n + 1);
	if (!r->lit)
		return -ENOMEM;
	for (size_t i = 0; i < n;) {
		int rc;
		if (s[i] == '\\') {
			if (i + 1 >= n) {
				snprintf(why, whylen, "the replacement ends in a '\\' that escapes nothing");
				return -EINVAL;
			}
			rc = add_piece(r, -1, s + i + 1, 1);
			i += 2;
		} else if (s[i] != '$') {
			rc = add_piece(r, -1, s + i, 1);
			i++;
		} else if (i + 1 < n && s[i + 1] == '{') {
			const char *close = strchr(s + i + 2, '}');
			size_t nl = close ? (size_t)(close - (s + i + 2)) : 0;
			int ok = close && nl > 0 && isalpha((unsigned char)s[i + 2]);
			for (size_t k = 0; ok && k < nl; k++)
				ok = isalnum((unsigned char)s[i + 2 + k]) != 0;
			if (!ok) {
				snprintf(why, whylen, "'${' in the replacement does not begin a group name: ${name}");
				return -EINVAL;
			}
			char name[64];
			snprintf(name, sizeof(name), "%.*s", (int)(nl < 63 ? nl : 63), s + i + 2);
			int g = nl < 63 ? pcre2_substring_number_from_name(r->code, (PCRE2_SPTR)name) : -1;
			if (g < 0) {
				snprintf(why, whylen, "the replacement names ${%s}, a group the pattern does not have", name);
				return -EINVAL;
			}
			rc = add_piece(r, g, NULL, 0);
			i += 3 + nl;
		} else if (i + 1 < n && isdigit((unsigned char)s[i + 1])) {
			uint32_t ref = (uint32_t)(s[i + 1] - '0');
			if (ngroups > 0 && ref > ngroups) {
				/* Kafka escapes a reference past the groups: the text $N */
				rc = add_piece(r, -1, "$", 1);
				i++;
			} else if (ngroups == 0 && ref > 0) {
				snprintf(why, whylen, "the replacement names group $%u, the pattern has no group", ref);
				return -EINVAL;
			} else {
				size_t j = i + 2;
				while (j < n && isdigit((unsigned char)s[j]) && ref * 10 + (uint32_t)(s[j] - '0') <= ngroups) {
					ref = ref * 10 + (uint32_t)(s[j] - '0');
					j++;
				}
				rc = add_piece(r, (int)ref, NULL, 0);
				i = j;
			}
		} else {
			snprintf(why, whylen, "a '$' in the replacement not followed by a group number or {name} (\\$ is a '$')");
			return -EINVAL;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* One entry of the list (RULE_PARSER of Kafka's mapper): 0 (rule added or
 * the entry empty) or -EINVAL. */
static int parse_one(kb_sslmap *m, const char *s, size_t len, char *err, size_t errlen)
{
	if (len == 0)
		return 0; /* Kafka skips empty entries */
	char why[256] = "";
	size_t end = 0, pat = 0, patlen = 0, rep = 0, replen = 0;
	char flag = 0;
	int is_def = 0;
	if (len >= 7 && memcmp(s, "DEFAULT", 7) == 0) {
		is_def = 1;
		end = 7;
	} else {
		end = rule_syntax(s, len, 0, &pat, &patlen, &rep, &replen, &flag);
	}
	if (end != len) {
		if (end)
			snprintf(why, sizeof(why), "unmatched '%.*s' after the rule", (int)(len - end > 40 ? 40 : len - end),
				 s + end);
		else
			snprintf(why, sizeof(why), "expected RULE:pattern/replacement/ (then L or U, or nothing) or DEFAULT");
		goto bad;
	}
	if (m->n == MAX_RULES) {
		snprintf(why, sizeof(why), "more than %d rules", MAX_RULES);
		goto bad;
	}
	rule *r = &m->r[m->n];
	memset(r, 0, sizeof(*r));
	if (is_def) {
		r->is_default = 1;
		m->n++;
		return 0;
	}
	r->pattern = dup_n(s + pat, patlen);
	r->repl = dup_n(s + rep, replen);
	r->lower = flag == 'L';
	r->upper = flag == 'U';
	if (!r->pattern || !r->repl) {
		rule_free(r);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int ec = 0;
	PCRE2_SIZE eo = 0;
	r->code = pcre2_compile((PCRE2_SPTR)r->pattern, patlen, PCRE2_UTF, &ec, &eo, NULL);
	if (!r->code) {
		PCRE2_UCHAR msg[160];
		pcre2_get_error_message(ec, msg, sizeof(msg));
		snprintf(why, sizeof(why), "the pattern does not compile: %s at offset %zu", (const char *)msg, (size_t)eo);
		rule_free(r);
		goto bad;
	}
	int rc = compile_repl(r, why, sizeof(why));
	if (rc) {
		rule_free(r);
		if (rc == -ENOMEM) {
			snprintf(err, errlen, "out of memory");
			return rc;
		}
		goto bad;
	}
	m->n++;
	return 0;
bad:
	snprintf(err, errlen, "invalid rule '%.*s' (%s)", (int)(len > 300 ? 300 : len), s, why);
	return -EINVAL;
}

int kb_sslmap_parse(const char *rules, kb_sslmap **out, char *err, size_t errlen)
{
	kb_sslmap *m = calloc(1, sizeof(*m));
	if (!m) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* String.trim(), then RULE_SPLITTER's find() loop. */
	const char *s = rules;
	size_t len = strlen(s);
	while (len && (unsigned char)*s <= ' ')
		s++, len--;
	while (len && (unsigned char)s[len - 1] <= ' ')
		len--;
	int rc = 0;
	for (size_t pos = 0; pos <= len;) {
		size_t p = pos;
		while (p < len && jspace(s[p]))
			p++;
		size_t k, a, b, c, d;
		char f;
		if (len - p >= 7 && memcmp(s + p, "DEFAULT", 7) == 0 && lazy_stop(s, len, p + 7) == p + 7)
			k = p + 7;
		else if ((k = rule_syntax(s, len, p, &a, &b, &c, &d, &f)) != 0)
			k = lazy_stop(s, len, k);
		else
			k = lazy_stop(s, len, p);
		rc = parse_one(m, s + p, k - p, err, errlen);
		if (rc)
			break;
		size_t e = k;
		while (e < len && jspace(s[e]))
			e++;
		if (e < len && s[e] == ',') {
			e++;
			while (e < len && jspace(s[e]))
				e++;
		}
		if (e == pos) /* an empty match: the next find starts one further */
			break;
		pos = e;
	}
	if (!rc && m->n == 0) {
		snprintf(err, errlen, "no rule: every client certificate would be refused (DEFAULT keeps the whole DN)");
		rc = -EINVAL;
	}
	if (rc || !out)
		kb_sslmap_free(m);
	else
		*out = m;
	return rc;
}

void kb_sslmap_free(kb_sslmap *m)
{
	if (!m)
		return;
	for (int i = 0; i < m->n; i++)
		rule_free(&m->r[i]);
	free(m);
}

typedef struct obuf {
	char *p;
	size_t len, cap;
	int over;
} obuf;

static void put(obuf *o, const char *s, size_t n)
{
	if (o->len + n >= o->cap) {
		o->over = 1;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = 0;
}

/* String.replaceAll: every match from the start, an empty match stepping
 * over one character. */
static int replace_all(const rule *r, const char *dn, size_t len, pcre2_match_data *md, obuf *o)
{
	size_t last = 0, start = 0;
	while (start <= len) {
		int rc = pcre2_match(r->code, (PCRE2_SPTR)dn, len, start, 0, md, NULL);
		if (rc == PCRE2_ERROR_NOMATCH)
			break;
		if (rc < 0)
			return -EIO;
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
		uint32_t npairs = pcre2_get_ovector_count(md);
		size_t ms = ov[0], me = ov[1];
		if (ms > me || ms < last)
			return -EIO; /* \K: not Java's, no meaning here */
		put(o, dn + last, ms - last);
		for (int i = 0; i < r->npieces; i++) {
			const piece *pc = &r->pieces[i];
			if (pc->group < 0) {
				put(o, r->lit + pc->off, pc->len);
				continue;
			}
			uint32_t g = (uint32_t)pc->group;
			if (g < npairs && (int)g < rc && ov[2 * g] != PCRE2_UNSET)
				put(o, dn + ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
		}
		last = me;
		if (me > ms) {
			start = me;
		} else {
			if (me >= len)
				break;
			start = me + 1;
			while (start < len && ((unsigned char)dn[start] & 0xC0) == 0x80)
				start++; /* one character, not one byte */
		}
	}
	put(o, dn + last, len - last);
	return 0;
}

int kb_sslmap_apply(const kb_sslmap *m, const char *dn, char *out, size_t outlen)
{
	size_t len = strlen(dn);
	for (int i = 0; i < m->n; i++) {
		const rule *r = &m->r[i];
		obuf o = {out, 0, outlen, 0};
		if (outlen)
			out[0] = 0;
		if (r->is_default) {
			put(&o, dn, len);
			return o.over ? -ENAMETOOLONG : 0;
		}
		pcre2_match_data *md = pcre2_match_data_create_from_pattern(r->code, NULL);
		if (!md)
			return -ENOMEM;
		int rc = pcre2_match(r->code, (PCRE2_SPTR)dn, len, 0, PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, NULL);
		if (rc == PCRE2_ERROR_NOMATCH) {
			pcre2_match_data_free(md);
			continue;
		}
		rc = rc < 0 ? -EIO : replace_all(r, dn, len, md, &o);
		pcre2_match_data_free(md);
		if (rc)
			return rc;
		if (o.over)
			return -ENAMETOOLONG;
		/* toLowerCase/toUpperCase(Locale.ENGLISH), ASCII letters */
		for (size_t k = 0; k < o.len; k++)
			if (r->lower)
				out[k] = (char)tolower((unsigned char)out[k]);
			else if (r->upper)
				out[k] = (char)toupper((unsigned char)out[k]);
		return 0;
	}
	return -ENOENT;
}

int kb_sslmap_describe(const kb_sslmap *m, char *out, size_t outlen)
{
	obuf o = {out, 0, outlen, 0};
	if (outlen)
		out[0] = 0;
	put(&o, "[", 1);
	for (int i = 0; i < m->n; i++) {
		const rule *r = &m->r[i];
		if (i)
			put(&o, ", ", 2);
		if (r->is_default) {
			put(&o, "DEFAULT", 7);
			continue;
		}
		put(&o, "RULE:", 5);
		put(&o, r->pattern, strlen(r->pattern));
		put(&o, "/", 1);
		put(&o, r->repl, strlen(r->repl));
		if (r->lower || r->upper)
			put(&o, r->lower ? "/L" : "/U", 2);
	}
	put(&o, "]", 1);
	return o.over ? -ENAMETOOLONG : 0;
}
