/*
 * controller.c — controller claims, election with read-back, step-down and
 * cleanup (see controller.h).
 */
#include "kaas/cluster/controller.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/cluster/json.h"

#define CTL_DIR "controller"
#define SCAN_READS 4 /* claims read at most per scan, newest first */

int kcl_ctl_path(int64_t epoch, char *dst, size_t dstlen)
{
	if (epoch < 1 || epoch > KCL_EPOCH_MAX)
		return -ERANGE;
	int n = snprintf(dst, dstlen, CTL_DIR "/%010" PRId64 ".json", epoch);
	return n < 0 || (size_t)n >= dstlen ? -ENAMETOOLONG : 0;
}

/* "0000000042.json" -> 42; -1 for any other name. */
static int64_t parse_name(const char *name)
{
	if (strlen(name) != 15 || strcmp(name + 10, ".json") != 0)
		return -1;
	int64_t e = 0;
	for (int i = 0; i < 10; i++) {
		if (!isdigit((unsigned char)name[i]))
			return -1;
		e = e * 10 + (name[i] - '0');
	}
	return e >= 1 ? e : -1;
}

int kcl_claim_encode(const kcl_claim *c, char **out, size_t *len)
{
	if (c->epoch < 1 || c->epoch > KCL_EPOCH_MAX || c->owner < 0 || c->nonce == 0 ||
	    c->inc.incarnation < 1 || c->inc.nonce == 0 || !memchr(c->endpoint, '\0', sizeof(c->endpoint)))
		return -EINVAL;
	char inonce[17], nonce[17];
	kcl__hex64_fmt(c->inc.nonce, inonce);
	kcl__hex64_fmt(c->nonce, nonce);
	json_t *doc = json_pack("{s:i,s:I,s:i,s:I,s:s,s:s,s:s,s:I}", "version", KCL_CLAIM_VERSION,
				"epoch", (json_int_t)c->epoch, "owner", (int)c->owner,
				"incarnation", (json_int_t)c->inc.incarnation, "incarnation_nonce", inonce,
				"nonce", nonce, "endpoint", c->endpoint, "wall_ms", (json_int_t)c->wall_ms);
	if (!doc)
		return -ENOMEM;
	int rc = kcl__dump(doc, out, len);
	json_decref(doc);
	return rc;
}

int kcl_claim_decode(const char *buf, size_t len, int64_t expect_epoch, kcl_claim *out, char *err,
		     size_t errlen)
{
	json_t *doc = NULL;
	kcl_claim c;
	memset(&c, 0, sizeof(c));
	int64_t ver, x;
	int rc = kcl__parse(buf, len, "controller claim", &doc, err, errlen);
	if (rc)
		return rc;
	if ((rc = kcl__version(doc, "controller claim", KCL_CLAIM_VERSION, &ver, err, errlen)) ||
	    (rc = kcl__int(doc, "epoch", 1, KCL_EPOCH_MAX, &c.epoch, err, errlen)) ||
	    (rc = kcl__int(doc, "owner", 0, KCL_ID_MAX, &x, err, errlen)))
		goto out;
	c.owner = (int32_t)x;
	if ((rc = kcl__int(doc, "incarnation", 1, KCL_SEQ_MAX, &x, err, errlen)))
		goto out;
	c.inc.incarnation = (uint64_t)x;
	if ((rc = kcl__hex64(doc, "incarnation_nonce", &c.inc.nonce, err, errlen)) ||
	    (rc = kcl__hex64(doc, "nonce", &c.nonce, err, errlen)) ||
	    (rc = kcl__str(doc, "endpoint", sizeof(c.endpoint) - 1, 1, c.endpoint, sizeof(c.endpoint),
			   err, errlen)) ||
	    (rc = kcl__int(doc, "wall_ms", INT64_MIN, INT64_MAX, &c.wall_ms, err, errlen)))
		goto out;
	if (c.nonce == 0 || c.inc.nonce == 0) {
		rc = kcl__fail(err, errlen, -ERANGE, "a nonce is zero");
		goto out;
	}
	if (expect_epoch > 0 && c.epoch != expect_epoch) {
		rc = kcl__fail(err, errlen, -ERANGE, "claims epoch %" PRId64 " in the file of epoch %" PRId64,
			       c.epoch, expect_epoch);
		goto out;
	}
	*out = c;
out:
	json_decref(doc);
	return rc;
}

static int read_claim(sub_vfs *v, int64_t epoch, kcl_claim *out, char *err, size_t errlen)
{
	char path[64], *buf = NULL, why[200];
	size_t len = 0;
	int rc = kcl_ctl_path(epoch, path, sizeof(path));
	if (rc)
		return rc;
	rc = sub_read_file(v, path, KCL_CLAIM_MAX_BYTES, &buf, &len);
	if (rc == -EFBIG)
		return kcl__fail(err, errlen, -ERANGE, "%s: longer than %d bytes", path,
				 KCL_CLAIM_MAX_BYTES);
	if (rc)
		return kcl__fail(err, errlen, rc, "%s: %s", path, sub_strerror(rc));
	rc = kcl_claim_decode(buf, len, epoch, out, why, sizeof(why));
	free(buf);
	return rc ? kcl__fail(err, errlen, rc, "%s: %s", path, why) : 0;
}

static int cmp_i64_desc(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* The epochs named in controller/, newest first (*out malloc'd). */
static int list_epochs(sub_vfs *v, int64_t **out, size_t *n, size_t *ignored)
{
	char **names = NULL;
	size_t nn = 0;
	*out = NULL;
	*n = 0;
	if (ignored)
		*ignored = 0;
	int rc = sub_list(v, CTL_DIR, &names, &nn);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	int64_t *e = calloc(nn ? nn : 1, sizeof(*e));
	if (!e) {
		sub_names_free(names, nn);
		return -ENOMEM;
	}
	size_t k = 0;
	for (size_t i = 0; i < nn; i++) {
		int64_t x = parse_name(names[i]);
		if (x > 0)
			e[k++] = x;
		else if (ignored)
			(*ignored)++;
	}
	sub_names_free(names, nn);
	qsort(e, k, sizeof(*e), cmp_i64_desc);
	*out = e;
	*n = k;
	return 0;
}

static int cmp_i64_asc(const void *a, const void *b)
{
	return -cmp_i64_desc(a, b);
}

int64_t kcl_ctl_possible_top(const int64_t *epochs, size_t n, int64_t base)
{
	int64_t *e = malloc((n ? n : 1) * sizeof(*e));
	if (!e)
		return base > 0 ? base : 0; /* nothing above the base is followed */
	if (n)
		memcpy(e, epochs, n * sizeof(*e));
	qsort(e, n, sizeof(*e), cmp_i64_asc);
	int64_t top = base;
	if (base < 0)
		top = n ? e[0] - 1 : 0;
	for (size_t i = 0; i < n; i++) {
		if (e[i] <= top)
			continue;
		if (e[i] - top > KCL_EPOCH_WINDOW)
			break;
		top = e[i];
	}
	free(e);
	return top;
}

int kcl_ctl_scan(sub_vfs *v, int64_t base, kcl_ctl_view *out)
{
	memset(out, 0, sizeof(*out));
	int64_t *e = NULL;
	size_t n = 0;
	int rc = list_epochs(v, &e, &n, &out->ignored);
	if (rc)
		return rc;
	int64_t top = kcl_ctl_possible_top(e, n, base);
	out->base = base < 0 ? 0 : base;
	/* e[] is newest first: what lies above the top is impossible. */
	size_t skip = 0;
	while (skip < n && e[skip] > top)
		skip++;
	out->impossible = skip;
	out->impossible_lowest = skip ? e[skip - 1] : 0;
	if (skip)
		snprintf(out->impossible_note, sizeof(out->impossible_note),
			 "epoch %" PRId64 " is impossible: more than %d above epoch %" PRId64
			 ", the highest this broker can reach from the assignment it follows (%" PRId64 ")",
			 e[skip - 1], KCL_EPOCH_WINDOW, top, out->base);
	if (skip)
		memmove(e, e + skip, (n - skip) * sizeof(*e));
	n -= skip;
	out->nfiles = n;
	out->highest_name = n ? e[0] : 0;
	for (size_t i = 0; i < n && i < SCAN_READS; i++) {
		char why[256];
		rc = read_claim(v, e[i], &out->current, why, sizeof(why));
		if (rc == 0) {
			out->highest_complete = e[i];
			break;
		}
		if (rc == -ENOENT) /* cleaned up under us: not a claim */
			continue;
		if (rc != -EBADMSG && rc != -EINVAL && rc != -ERANGE && rc != -EPROTONOSUPPORT)
			goto out; /* the volume failed: no verdict from a partial view */
		if (!out->note[0])
			snprintf(out->note, sizeof(out->note), "%s", why);
	}
	rc = 0;
out:
	free(e);
	return rc;
}

int64_t kcl_ctl_next_epoch(const kcl_ctl_view *cv, int64_t highest_assignment_epoch)
{
	int64_t e = cv->highest_name > highest_assignment_epoch ? cv->highest_name
								: highest_assignment_epoch;
	return e + 1;
}

/* Errors after which the create may or may not have happened. */
static int outcome_unknown(int rc)
{
	return rc == -EIO || rc == -ETIMEDOUT || rc == -EAGAIN || rc == -EINTR || rc == -ENOLCK ||
	       rc == -ECONNRESET || rc == -ENOTCONN;
}

int kcl_ctl_elect(sub_vfs *v, const kcl_claim *mine, int retries, int *outcome, kcl_claim *winner,
		  char *err, size_t errlen)
{
	char path[64], *buf = NULL;
	size_t len = 0;
	*outcome = KCL_ELECT_UNDECIDED;
	memset(winner, 0, sizeof(*winner));
	winner->owner = -1;
	int rc = kcl_ctl_path(mine->epoch, path, sizeof(path));
	if (rc || (rc = kcl_claim_encode(mine, &buf, &len)))
		return kcl__fail(err, errlen, rc, "invalid claim for epoch %" PRId64, mine->epoch);
	int crc = sub_create_excl(v, path, buf, len);
	if (crc == -ENOENT && sub_mkdirs(v, CTL_DIR, 0755) == 0)
		crc = sub_create_excl(v, path, buf, len);
	for (int i = 0; i < retries && outcome_unknown(crc); i++)
		crc = sub_create_excl(v, path, buf, len);
	free(buf);
	/* Whatever the create said, the file decides. */
	char why[256];
	kcl_claim got;
	rc = read_claim(v, mine->epoch, &got, why, sizeof(why));
	if (rc == -ENOENT) {
		if (crc == 0)
			return kcl__fail(err, errlen, -EIO,
					 "%s: created, then not found (the volume breaks close-to-open)", path);
		return kcl__fail(err, errlen, crc ? crc : -ENOENT, "%s: not created: %s", path,
				 sub_strerror(crc ? crc : -ENOENT));
	}
	if (rc == -EBADMSG) {
		/* Empty or cut short: nobody can prove it theirs, not even us. */
		kcl__fail(err, errlen, 0, "%s: undecided claim (%s; create said %s)", path, why,
			  crc ? sub_strerror(crc) : "ok");
		return 0;
	}
	if (rc == -EINVAL || rc == -ERANGE || rc == -EPROTONOSUPPORT) {
		/* A claim we cannot read is somebody's, never ours. */
		*outcome = KCL_ELECT_LOST;
		kcl__fail(err, errlen, 0, "%s: held by a claim this broker cannot read: %s", path, why);
		return 0;
	}
	if (rc)
		return kcl__fail(err, errlen, rc, "reading back %s: %s", path, why);
	*winner = got;
	if (got.owner == mine->owner && kcl_incarn_cmp(got.inc, mine->inc) == 0 && got.nonce == mine->nonce) {
		*outcome = KCL_ELECT_WON;
		if (crc)
			kcl__fail(err, errlen, 0, "%s: won although the create said %s (a lost reply)", path,
				  sub_strerror(crc));
		else if (err && errlen)
			err[0] = '\0';
	} else {
		*outcome = KCL_ELECT_LOST;
		if (crc == 0)
			kcl__fail(err, errlen, 0,
				  "%s: created here but holds broker %" PRId32 "'s claim (the volume breaks O_EXCL)",
				  path, got.owner);
		else if (err && errlen)
			err[0] = '\0';
	}
	return 0;
}

int kcl_ctl_superseded(sub_vfs *v, int64_t epoch)
{
	/* Candidates race highest name + 1, so a higher claim always has a
	 * file at epoch + 1 (cleanup never removes names at or above the
	 * current epoch).  One stat per poll; a controller epoch above ours in
	 * the assignment pointer is the second, independent trigger. */
	char path[64];
	sub_stat st;
	int rc = kcl_ctl_path(epoch + 1, path, sizeof(path));
	if (rc)
		return rc == -ERANGE ? 0 : rc;
	rc = sub_stat_path(v, path, &st);
	if (rc == 0)
		return 1;
	if (rc != -ENOENT)
		return rc;
	return 0;
}

int kcl_ctl_cleanup(sub_vfs *v, int64_t current, unsigned keep, unsigned *removed)
{
	int64_t *e = NULL;
	size_t n = 0;
	unsigned gone = 0;
	int rc = list_epochs(v, &e, &n, NULL);
	if (rc)
		goto out;
	for (size_t i = keep; i < n; i++) {
		if (e[i] >= current)
			continue;
		char path[64];
		if ((rc = kcl_ctl_path(e[i], path, sizeof(path))))
			goto out;
		int u = sub_unlink(v, path);
		if (u == 0)
			gone++;
		else if (u != -ENOENT) {
			rc = u;
			goto out;
		}
	}
	rc = 0;
out:
	if (removed)
		*removed = gone;
	free(e);
	return rc;
}
