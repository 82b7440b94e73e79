/*
 * sub_fault_opts.c — the fault backend's options: "name=value&..." after the last
 * '?' of a fault: URL, each checked, with a message naming the option when
 * it is wrong.
 */
#include "substrates/sub_fault_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* One "name=value" option being parsed: where to report what is wrong. */
typedef struct opt_ctx {
	const char *opt; /* the whole option, for the message */
	size_t optlen;
	const char *val;
	size_t vlen;
	char *err;
	size_t errlen;
} opt_ctx;

/* Writes "fault option '<opt>': <why>" to the caller's buffer; -EINVAL. */
__attribute__((format(printf, 2, 3)))
static int opt_err(const opt_ctx *c, const char *fmt, ...)
{
	int n = snprintf(c->err, c->errlen, "fault option '%.*s': ", (int)c->optlen, c->opt);
	if (n >= 0 && (size_t)n < c->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int val_is(const opt_ctx *c, const char *s)
{
	return c->vlen == strlen(s) && strncmp(c->val, s, c->vlen) == 0;
}

/* ---- numbers -------------------------------------------------------------- */

static int opt_seed(fault_vfs *fv, const opt_ctx *c)
{
	if (parse_u64(c->val, c->vlen, 0, &fv->seed))
		return opt_err(c, "seed must be a non-negative decimal integer");
	return 0;
}

static int opt_crash_after(fault_vfs *fv, const opt_ctx *c)
{
	if (parse_u64(c->val, c->vlen, 0, &fv->crash_after))
		return opt_err(c, "crash_after must be a non-negative decimal integer");
	fv->has_crash_after = 1;
	return 0;
}

static int opt_undo_max(fault_vfs *fv, const opt_ctx *c)
{
	if (parse_u64(c->val, c->vlen, 1, &fv->undo_max))
		return opt_err(c, "undo_max must be a byte count (suffix k, m or g allowed)");
	return 0;
}

static int opt_copy_delay_us(fault_vfs *fv, const opt_ctx *c)
{
	if (parse_u64(c->val, c->vlen, 0, &fv->copy_delay_us) || fv->copy_delay_us > 10000000)
		return opt_err(c, "copy_delay_us must be a number of microseconds up to 10000000");
	return 0;
}

/* ---- modes ---------------------------------------------------------------- */

static int opt_crash_mode(fault_vfs *fv, const opt_ctx *c)
{
	if (val_is(c, "random"))
		fv->crash_mode = CRASH_RANDOM;
	else if (val_is(c, "drop"))
		fv->crash_mode = CRASH_DROP;
	else if (val_is(c, "keep"))
		fv->crash_mode = CRASH_KEEP;
	else
		return opt_err(c, "crash_mode must be random, drop or keep");
	return 0;
}

static int opt_fsync(fault_vfs *fv, const opt_ctx *c)
{
	if (val_is(c, "lie"))
		fv->fsync_lie = 1;
	else if (val_is(c, "honest"))
		fv->fsync_lie = 0;
	else
		return opt_err(c, "fsync must be lie or honest");
	return 0;
}

static int opt_rename(fault_vfs *fv, const opt_ctx *c)
{
	fv->rename_copy = fv->rename_hide = 0;
	if (val_is(c, "copy"))
		fv->rename_copy = 1;
	else if (val_is(c, "hide"))
		fv->rename_hide = 1;
	else if (!val_is(c, "atomic"))
		return opt_err(c, "rename must be copy, hide or atomic");
	return 0;
}

static int opt_excl(fault_vfs *fv, const opt_ctx *c)
{
	fv->excl_broken = fv->excl_eperm = 0;
	if (val_is(c, "broken"))
		fv->excl_broken = 1;
	else if (val_is(c, "eperm"))
		fv->excl_eperm = 1;
	else if (!val_is(c, "atomic"))
		return opt_err(c, "excl must be broken, eperm or atomic");
	return 0;
}

static int opt_cto(fault_vfs *fv, const opt_ctx *c)
{
	if (val_is(c, "stale"))
		fv->cto_stale = CTO_STALE;
	else if (val_is(c, "size"))
		fv->cto_stale = CTO_SIZE;
	else if (val_is(c, "strict"))
		fv->cto_stale = CTO_STRICT;
	else
		return opt_err(c, "cto must be stale, size or strict");
	return 0;
}

static int opt_statvfs(fault_vfs *fv, const opt_ctx *c)
{
	if (val_is(c, "none"))
		fv->statvfs_none = 1;
	else if (val_is(c, "honest"))
		fv->statvfs_none = 0;
	else
		return opt_err(c, "statvfs must be none or honest");
	return 0;
}

static int opt_leak(fault_vfs *fv, const opt_ctx *c)
{
	char *g = c->vlen ? strndup(c->val, c->vlen) : NULL;
	if (!g)
		return opt_err(c, "leak needs a path pattern");
	free(fv->leak_glob);
	fv->leak_glob = g;
	return 0;
}

/* ---- injection rules ------------------------------------------------------ */

/* The three ':'-separated fields of a rule, split at the last two ':' so a
 * glob may contain ':'.  -1 when there are fewer than two. */
typedef struct rule_fields {
	const char *f[3];
	size_t len[3];
} rule_fields;

static int split_rule(const opt_ctx *c, rule_fields *rf)
{
	const char *val = c->val, *c2 = NULL, *c1 = NULL;
	for (const char *p = val + c->vlen; p > val; p--) {
		if (p[-1] == ':') {
			if (!c2) {
				c2 = p - 1;
			} else {
				c1 = p - 1;
				break;
			}
		}
	}
	if (!c1)
		return -1;
	rf->f[0] = val;
	rf->len[0] = (size_t)(c1 - val);
	rf->f[1] = c1 + 1;
	rf->len[1] = (size_t)(c2 - rf->f[1]);
	rf->f[2] = c2 + 1;
	rf->len[2] = (size_t)(val + c->vlen - rf->f[2]);
	return 0;
}

/* Keeps the order they were given: the first match wins. */
static void rule_append(fault_vfs *fv, fault_rule *r)
{
	fault_rule **pp = &fv->rules;
	while (*pp)
		pp = &(*pp)->next;
	*pp = r;
}

/* fail=<op>:<n>[+]:<ERRNO> */
static int opt_fail(fault_vfs *fv, const opt_ctx *c)
{
	rule_fields rf;
	if (split_rule(c, &rf))
		return opt_err(c, "%s", "want fail=<op>:<n>[+]:<ERRNO>");
	const char *a = rf.f[0], *b = rf.f[1], *e = rf.f[2];
	size_t alen = rf.len[0], blen = rf.len[1], elen = rf.len[2];
	int op = parse_op(a, alen), errv = parse_errno(e, elen);
	enum rule_kind kind = RULE_NTH;
	uint64_t n = 0;
	if (blen && b[blen - 1] == '+') {
		kind = RULE_FROM;
		blen--;
	}
	if (op < 0)
		return opt_err(c, "unknown operation '%.*s'", (int)alen, a);
	if (parse_u64(b, blen, 0, &n) || n == 0 || !errv) {
		if (!errv)
			return opt_err(c, "unknown errno name '%.*s'", (int)elen, e);
		return opt_err(c, "call number must be 1 or more, optionally followed by '+'");
	}
	fault_rule *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->kind = kind;
	r->op = op;
	r->err = errv;
	r->n = n;
	rule_append(fv, r);
	return 0;
}

/* failpath=<glob>:<op>:<ERRNO> */
static int opt_failpath(fault_vfs *fv, const opt_ctx *c)
{
	rule_fields rf;
	if (split_rule(c, &rf))
		return opt_err(c, "%s", "want failpath=<glob>:<op>:<ERRNO>");
	const char *a = rf.f[0], *b = rf.f[1], *e = rf.f[2];
	size_t alen = rf.len[0], blen = rf.len[1], elen = rf.len[2];
	int op = parse_op(b, blen), errv = parse_errno(e, elen);
	if (alen == 0)
		return opt_err(c, "empty path pattern");
	if (op < 0)
		return opt_err(c, "unknown operation '%.*s'", (int)blen, b);
	if (!errv)
		return opt_err(c, "unknown errno name '%.*s'", (int)elen, e);
	fault_rule *r = calloc(1, sizeof(*r));
	if (!r || !(r->glob = strndup(a, alen))) {
		free(r);
		return -ENOMEM;
	}
	r->kind = RULE_PATH;
	r->op = op;
	r->err = errv;
	rule_append(fv, r);
	return 0;
}

/* ---- the table ------------------------------------------------------------ */

/* Every option, in the order the "unknown option" message lists them.  A new
 * option is one function above and one line here. */
static const struct fault_option {
	const char *name;
	int (*parse)(fault_vfs *fv, const opt_ctx *c);
} options[] = {
	{"seed", opt_seed},
	{"fail", opt_fail},
	{"failpath", opt_failpath},
	{"crash_after", opt_crash_after},
	{"crash_mode", opt_crash_mode},
	{"undo_max", opt_undo_max},
	{"fsync", opt_fsync},
	{"rename", opt_rename},
	{"copy_delay_us", opt_copy_delay_us},
	{"excl", opt_excl},
	{"cto", opt_cto},
	{"leak", opt_leak},
	{"statvfs", opt_statvfs},
};
#define NOPTIONS (sizeof(options) / sizeof(options[0]))

static int opt_unknown(const opt_ctx *c)
{
	char known[256];
	size_t used = 0;
	known[0] = '\0';
	for (size_t i = 0; i < NOPTIONS; i++) {
		int w = snprintf(known + used, sizeof(known) - used, "%s%s", i ? ", " : "",
				 options[i].name);
		if (w < 0 || (size_t)w >= sizeof(known) - used)
			break;
		used += (size_t)w;
	}
	return opt_err(c, "unknown option (known: %s)", known);
}

/* Parses one "name=value" option into fv. */
static int parse_option(fault_vfs *fv, const char *opt, size_t optlen, char *err, size_t errlen)
{
	opt_ctx c = {.opt = opt, .optlen = optlen, .err = err, .errlen = errlen};
	const char *eq = memchr(opt, '=', optlen);
	if (!eq)
		return opt_err(&c, "expected name=value (fault options follow the last '?' of the URL)");
	size_t nlen = (size_t)(eq - opt);
	c.val = eq + 1;
	c.vlen = optlen - nlen - 1;
	for (size_t i = 0; i < NOPTIONS; i++)
		if (nlen == strlen(options[i].name) && strncmp(opt, options[i].name, nlen) == 0)
			return options[i].parse(fv, &c);
	return opt_unknown(&c);
}

int sub__fault_parse_options(fault_vfs *fv, const char *opts, char *err, size_t errlen)
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
