/*
 * check_rename.c — guarantee 1: a same-directory rename is atomic.
 *
 * Actor 0 writes record after record (sequence, length, CRC) to a temp name,
 * fsyncs and renames it over the target; every other actor opens, reads and
 * verifies the target as fast as it can.  A reader must always find the
 * target, always read one complete record, and never a lower sequence than
 * it read before.  ESTALE (NFSv3 after a replace) is retried and counted
 * apart: it is the client telling the truth, not a violation.  Readers are
 * stopped when the writer is done, but each first reads on until it has
 * verified KC_READER_MIN_OK records (or made KC_READER_MIN_READS attempts):
 * on a loaded machine the writer can finish before a reader ever ran, and
 * "verified nothing" must come from what the reader saw, not from when the
 * scheduler let it run.
 *
 * Variants:
 *   plain  as above;
 *   held   the renamer holds the old target open across the rename; a FUSE
 *          client that hides open files (.fuse_hidden*) shows readers a
 *          missing target here and only here;
 *   dir    actor 0 renames a directory of 8 files back and forth while the
 *          others list both names; a listing that is neither absent nor
 *          complete is a partially moved directory (object stores copy
 *          directory entries one by one).  Seeing both names or neither is
 *          an artefact of listing them one after the other and is only
 *          counted.  The listers keep listing until the renamer has done
 *          its --iterations renames, and at least --iterations rounds each:
 *          a local directory renames in microseconds, and listers that
 *          stopped with the renamer might have listed nothing at all.
 */
#include <errno.h>
#include <stdio.h>

#include "conformance/actor.h"
#include "conformance/payload.h"
#include "conformance/run.h"

/* profile.errnos.<variant>.<operation>.<ERRNO> += n over all actors. */
static void merge_errnos(kc_result *res, const char *variant, const json_t *errnos)
{
	json_t *all = json_object_get(res->profile, "errnos");
	if (!all) {
		all = json_object();
		json_object_set_new(res->profile, "errnos", all);
	}
	json_t *var = json_object_get(all, variant);
	if (!var) {
		var = json_object();
		json_object_set_new(all, variant, var);
	}
	const char *op, *err;
	json_t *byerr, *n;
	json_object_foreach((json_t *)errnos, op, byerr)
	{
		json_t *dst = json_object_get(var, op);
		if (!dst) {
			dst = json_object();
			json_object_set_new(var, op, dst);
		}
		json_object_foreach(byerr, err, n)
		{
			json_t *cur = json_object_get(dst, err);
			json_object_set_new(dst, err,
					    json_integer((cur ? json_integer_value(cur) : 0) + json_integer_value(n)));
		}
	}
}

static int merge(kc_result *res, const char *variant, json_t **results, int n)
{
	for (int i = 0; i < n; i++) {
		merge_errnos(res, variant, json_object_get(results[i], "errnos"));
		json_t *c = json_object_get(results[i], "counts");
		json_t *an = json_object_get(results[i], "anomalies");
		kc_result_add_counts(res, variant, c);
		kc_result_add_anomalies(res, variant, an,
					json_integer_value(json_object_get(results[i], "bad")));
	}
	return 0;
}

static int file_variant(kc_run *r, kc_result *res, const char *dir, const char *variant, int hold)
{
	int n = r->drv.n;
	kc_part parts[KC_MAX_ACTORS];
	json_t *results[KC_MAX_ACTORS];
	uint64_t tag = kc_run_tag(r, KC_CHK_RENAME, 0, variant);
	/* How long a reader may go on after the writer is done, to reach its
	 * minimum: well inside the driver's wait for one step. */
	int64_t grace = r->drv.timeout_ms / 2;
	if (grace <= 0 || grace > KC_READER_GRACE_MS)
		grace = KC_READER_GRACE_MS;
	kc_run_variant(r, variant);
	for (int i = 0; i < n; i++) {
		parts[i].actor = i;
		parts[i].loop = i != 0;
		parts[i].op = i == 0 ? "rename_writer" : "rename_reader";
		parts[i].args = json_pack("{s:s,s:s,s:I,s:I,s:i,s:i,s:I,s:b}", "dir", dir, "target",
					  variant, "iterations", (json_int_t)r->o->iterations, "tag",
					  (json_int_t)tag, "min", 64, "max", 8192, "seed",
					  (json_int_t)kc_run_tag(r, KC_CHK_RENAME, i, "sizes"), "hold",
					  hold);
		if (i != 0)
			json_object_set_new(parts[i].args, "grace_ms", json_integer(grace));
	}
	int rc = kc_run_phase(r, parts, n, results);
	if (rc)
		return rc;
	merge(res, variant, results, n);
	for (int i = 0; i < n; i++)
		json_decref(results[i]);
	return 0;
}

static int dir_variant(kc_run *r, kc_result *res, const char *dir)
{
	int n = r->drv.n;
	kc_part parts[KC_MAX_ACTORS];
	json_t *results[KC_MAX_ACTORS];
	kc_run_variant(r, "dir");
	for (int i = 0; i < n; i++) {
		parts[i].actor = i;
		parts[i].loop = i != 0;
		parts[i].op = i == 0 ? "dir_renamer" : "dir_lister";
		parts[i].args = json_pack("{s:s,s:s,s:s,s:i,s:I}", "dir", dir, "a", "d.a", "b", "d.b",
					  "files", 8, "iterations", (json_int_t)r->o->iterations);
	}
	int rc = kc_run_phase(r, parts, n, results);
	if (rc)
		return rc;
	merge(res, "dir", results, n);
	for (int i = 0; i < n; i++)
		json_decref(results[i]);
	return 0;
}

int kc_check_rename(kc_run *r, kc_result *res, const char *dir)
{
	int rc;
	res->iterations = r->o->iterations;
	json_object_set_new(res->profile, "renamer_actor", json_integer(0));
	json_object_set_new(res->profile, "readers", json_integer(r->drv.n - 1));
	json_object_set_new(res->profile, "record_bytes", json_pack("[i,i]", 64, 8192));
	if ((rc = file_variant(r, res, dir, "plain", 0)))
		goto fail;
	if ((rc = file_variant(r, res, dir, "held", 1)))
		goto fail;
	if ((rc = dir_variant(r, res, dir)))
		goto fail;
	return 0;
fail:
	if (rc != -EINTR)
		kc_result_error(res, "%s", r->drv.err);
	return rc;
}
