/*
 * check_rename.c — guarantee 1: a same-directory rename is atomic, and a
 * name renamed over is seen anew by every other client's next open.
 *
 * Actor 0 writes record after record (sequence, length, CRC) to a temp name,
 * fsyncs and renames it over the target; every other actor opens, reads and
 * verifies the target as fast as it can.  A reader must always find the
 * target, always read one complete record, and never a lower sequence than
 * it read before.  ESTALE (NFSv3 after a replace) is retried and counted
 * apart: it is the client telling the truth, not a violation.
 *
 * Sizing (detection power): the writer makes --iterations renames (at most
 * KC_RENAME_WRITES_MAX); every
 * reader reads all the while and, when the writer is done, on until it has
 * made --iterations observations (classified reads) of its own.  On every
 * substrate seen so far a reader is much faster than the writer (which
 * fsyncs every record), so its observations are made with renames in
 * flight.
 *
 * Convergence: when the phase is over (the writer's last rename and close
 * are done, the driver knows its final record) every reader opens the
 * target once more and must read exactly that record.  A reader that does
 * not is a violation on its own, whatever the others saw; it is watched for
 * KC_CONVERGE_WATCH_MS more to tell "late" from "never", and the version it
 * is stuck on is the evidence.  The figures and the verdict are per reader
 * (profile.readers); the counts only say how many readers failed.
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
 *          counted.  Each lister makes --iterations rounds while the renamer
 *          renames (it goes on until the last lister is done); then every
 *          lister must find the directory complete under the renamer's
 *          final name and nothing under the other.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "conformance/actor.h"
#include "conformance/judge.h"
#include "conformance/payload.h"
#include "conformance/run.h"
#include "util/clock.h"

/* After a reader failed to converge: how long it is watched to tell a late
 * convergence from none. */
#define KC_CONVERGE_WATCH_MS 2000
#define RECORD_MAX 8192
/* The writer's renames per file variant: --iterations, at most this many.
 * Each is a write, an fsync and a rename (tens of ms on a network
 * filesystem); the readers' observations, not the renames, give the check
 * its detection power, and 200 renames keep them in flight for longer than
 * any reader needs for its own --iterations reads. */
#define KC_RENAME_WRITES_MAX 200

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

/* One open-after-close read of a versioned record by actor a: *status
 * ("ok", "stale", "missing", ...), *seen (-1 when no version was read). */
static int read_version(kc_run *r, int a, const char *path, int64_t version, uint64_t tag,
			int64_t size, char *status, size_t slen, int64_t *seen)
{
	json_t *out = NULL;
	int rc = kc_drv_call(&r->drv, a, "cto_read",
			     json_pack("{s:s,s:I,s:I,s:I}", "path", path, "version", (json_int_t)version,
				       "size", (json_int_t)size, "tag", (json_int_t)tag),
			     &out);
	if (rc)
		return rc;
	const char *st = json_string_value(json_object_get(out, "status"));
	json_t *sv = json_object_get(out, "seen_version");
	snprintf(status, slen, "%s", st ? st : "errors");
	*seen = sv ? (int64_t)json_integer_value(sv) : -1;
	json_decref(out);
	return 0;
}

/* Reader a's convergence to the writer's final record: its next open after
 * the writer is done, then (when that was not the final record) a watch to
 * tell late from never.  Fills the reader's figures and, when it did not
 * converge, an anomaly. */
static int converge_reader(kc_run *r, kc_result *res, const char *variant, const char *path,
			   uint64_t tag, int64_t final, int a, json_t *fig)
{
	char status[32], later[32] = "";
	int64_t seen = -1, seen_later = -1, t0 = ku_mono_ms(), late_ms = -1;
	int rc = read_version(r, a, path, final, tag, RECORD_MAX, status, sizeof(status), &seen);
	if (rc)
		return rc;
	/* ESTALE on every retry is the client saying it cannot tell, not a
	 * wrong answer: no final read, and the reader has no evidence. */
	if (strcmp(status, "ESTALE") == 0) {
		json_object_set_new(fig, "final_error", json_string(status));
		return 0;
	}
	json_object_set_new(fig, "final_status", json_string(status));
	json_object_set_new(fig, "final_seen", json_integer(seen));
	if (strcmp(status, "ok") == 0)
		return 0;
	while (ku_mono_ms() - t0 < KC_CONVERGE_WATCH_MS) {
		if (r->interrupted && *r->interrupted)
			return -EINTR;
		usleep(50 * 1000);
		if ((rc = read_version(r, a, path, final, tag, RECORD_MAX, later, sizeof(later),
				       &seen_later)))
			return rc;
		if (strcmp(later, "ok") == 0) {
			late_ms = ku_mono_ms() - t0;
			break;
		}
	}
	json_object_set_new(fig, "converged_after_ms", json_integer(late_ms));
	char d[800], t1[500], t2[500], t3[300], what[64], lastv[64];
	json_int_t last = json_integer_value(json_object_get(fig, "last_seen"));
	if (json_integer_value(json_object_get(fig, "ok")) > 0)
		snprintf(lastv, sizeof(lastv), "%lld", (long long)last);
	else
		snprintf(lastv, sizeof(lastv), "none");
	if (seen >= 0)
		snprintf(what, sizeof(what), "%s version %lld", status, (long long)seen);
	else
		snprintf(what, sizeof(what), "%s", status);
	if (late_ms >= 0)
		snprintf(t3, sizeof(t3), "actor %d: read the final version only %lld ms later", a,
			 (long long)late_ms);
	else if (seen_later >= 0)
		snprintf(t3, sizeof(t3), "actor %d: still %s version %lld %d ms later (never converged)",
			 a, later, (long long)seen_later, KC_CONVERGE_WATCH_MS);
	else
		snprintf(t3, sizeof(t3), "actor %d: still %s %d ms later (never converged)", a, later,
			 KC_CONVERGE_WATCH_MS);
	snprintf(d, sizeof(d),
		 "after the writer's last rename (version %lld) and close, this reader's next open read %s (the last version it had verified: %s)%s",
		 (long long)final, what, lastv,
		 late_ms >= 0 ? "; it converged late" : "; it never converged");
	snprintf(t1, sizeof(t1), "actor 0: rename the record of version %lld over %s, close; done",
		 (long long)final, path);
	snprintf(t2, sizeof(t2), "actor %d: open %s, read to EOF: %s", a, path, what);
	json_t *one = json_pack("[{s:s,s:i,s:I,s:s,s:[s,s,s]}]", "kind", "not_converged", "actor", a,
				"iteration", (json_int_t)final, "detail", d, "trace", t1, t2, t3);
	kc_result_add_anomalies(res, variant, one, 1);
	json_decref(one);
	return 0;
}

/* The per-reader figures out of a reader's result. */
static json_t *reader_figures(int actor, const json_t *result)
{
	const json_t *c = json_object_get(result, "counts");
	return json_pack("{s:i,s:I,s:I,s:I,s:I,s:I}", "actor", actor, "reads",
			 kc_count_get(c, "reads"), "ok", kc_count_get(c, "ok"), "versions",
			 kc_count_get(c, "versions"), "last_seen",
			 json_integer_value(json_object_get(result, "last_seq")), "bad",
			 json_integer_value(json_object_get(result, "bad")));
}

/* Judges the readers one by one and records them: profile.readers.<v>,
 * <v>.not_converged, <v>.readers_idle, and the check's observations. */
static void record_readers(kc_result *res, const char *variant, json_t *figs)
{
	int64_t idle = 0, min_obs = -1;
	int64_t stuck = kc_judge_readers(figs, &idle, &min_obs);
	char key[64];
	snprintf(key, sizeof(key), "%s.not_converged", variant);
	kc_result_count(res, key, stuck);
	snprintf(key, sizeof(key), "%s.readers_idle", variant);
	kc_result_count(res, key, idle);
	json_t *all = json_object_get(res->profile, "per_reader");
	if (!all) {
		all = json_object();
		json_object_set_new(res->profile, "per_reader", all);
	}
	json_object_set_new(all, variant, figs);
	if (min_obs >= 0 && (res->observations == 0 || min_obs < res->observations))
		res->observations = min_obs;
}

static int file_variant(kc_run *r, kc_result *res, const char *dir, const char *variant, int hold)
{
	int n = r->drv.n;
	kc_part parts[KC_MAX_ACTORS];
	json_t *results[KC_MAX_ACTORS];
	uint64_t tag = kc_run_tag(r, KC_CHK_RENAME, 0, variant);
	kc_run_variant(r, variant);
	for (int i = 0; i < n; i++) {
		parts[i].actor = i;
		/* The readers read while the writer renames, and on until each
		 * has its observations. */
		parts[i].loop = i != 0;
		parts[i].op = i == 0 ? "rename_writer" : "rename_reader";
		int64_t writes = r->o->iterations < KC_RENAME_WRITES_MAX ? r->o->iterations
									: KC_RENAME_WRITES_MAX;
		parts[i].args = json_pack("{s:s,s:s,s:I,s:I,s:i,s:i,s:I,s:b}", "dir", dir, "target",
					  variant, "iterations", (json_int_t)(i == 0 ? writes : r->o->iterations), "tag",
					  (json_int_t)tag, "min", 64, "max", RECORD_MAX, "seed",
					  (json_int_t)kc_run_tag(r, KC_CHK_RENAME, i, "sizes"), "hold",
					  hold);
		if (i != 0)
			json_object_set_new(parts[i].args, "observations",
					    json_integer((json_int_t)r->o->iterations));
	}
	int rc = kc_run_phase(r, parts, n, results);
	if (rc)
		return rc;
	merge(res, variant, results, n);
	int64_t final = json_integer_value(json_object_get(results[0], "final_seq"));
	char key[64], path[300];
	snprintf(key, sizeof(key), "%s.final_version", variant);
	kc_result_count(res, key, final);
	snprintf(path, sizeof(path), "%s/%s", dir, variant);
	json_t *figs = json_array();
	for (int i = 1; i < n && rc == 0; i++) {
		json_t *fig = reader_figures(i, results[i]);
		json_array_append_new(figs, fig);
		rc = converge_reader(r, res, variant, path, tag, final, i, fig);
	}
	record_readers(res, variant, figs);
	for (int i = 0; i < n; i++)
		json_decref(results[i]);
	return rc;
}

/* Does actor a's listing of the directory's two names show the renamer's
 * final state: complete under `final`, nothing under `other`? */
static int converge_lister(kc_run *r, kc_result *res, const char *dir, const char *final,
			   const char *other, int a, json_t *fig)
{
	char pf[300], po[300], seen[200] = "";
	snprintf(pf, sizeof(pf), "%s/%s", dir, final);
	snprintf(po, sizeof(po), "%s/%s", dir, other);
	json_t *out = NULL;
	int rc = kc_drv_call(&r->drv, a, "list", json_pack("{s:s}", "path", pf), &out);
	if (rc)
		return rc;
	json_t *names = json_object_get(out, "names");
	size_t nf = json_array_size(names);
	char *cn[16];
	int ok = nf <= 16;
	for (size_t i = 0; ok && i < nf; i++)
		cn[i] = (char *)json_string_value(json_array_get(names, i));
	const char *errf = json_string_value(json_object_get(out, "err"));
	ok = ok && errf && strcmp(errf, "OK") == 0 && kc_listing_complete(cn, nf, 8);
	snprintf(seen, sizeof(seen), "%s: %s, %zu entries", final, errf ? errf : "?", nf);
	json_decref(out);
	if ((rc = kc_drv_call(&r->drv, a, "list", json_pack("{s:s}", "path", po), &out)))
		return rc;
	const char *erro = json_string_value(json_object_get(out, "err"));
	size_t no = json_array_size(json_object_get(out, "names"));
	ok = ok && erro && strcmp(erro, "ENOENT") == 0;
	size_t u = strlen(seen);
	snprintf(seen + u, sizeof(seen) - u, "; %s: %s, %zu entries", other, erro ? erro : "?", no);
	json_decref(out);
	json_object_set_new(fig, "final_status", json_string(ok ? "ok" : "not_final"));
	json_object_set_new(fig, "final_listing", json_string(seen));
	if (ok)
		return 0;
	char d[800], t1[500], t2[800];
	snprintf(d, sizeof(d),
		 "after the renamer's last rename (the directory is at %s, complete) this lister saw %s",
		 final, seen);
	snprintf(t1, sizeof(t1), "actor 0: last rename leaves the directory at %s; done", final);
	snprintf(t2, sizeof(t2), "actor %d: list %s and %s: %s", a, final, other, seen);
	json_t *one = json_pack("[{s:s,s:i,s:i,s:s,s:[s,s]}]", "kind", "not_converged", "actor", a,
				"iteration", 0, "detail", d, "trace", t1, t2);
	kc_result_add_anomalies(res, "dir", one, 1);
	json_decref(one);
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
		parts[i].loop = i == 0;
		parts[i].op = i == 0 ? "dir_renamer" : "dir_lister";
		parts[i].args = json_pack("{s:s,s:s,s:s,s:i,s:I,s:b}", "dir", dir, "a", "d.a", "b", "d.b",
					  "files", 8, "iterations", (json_int_t)r->o->iterations,
					  "until_stop", i == 0);
	}
	int rc = kc_run_phase(r, parts, n, results);
	if (rc)
		return rc;
	merge(res, "dir", results, n);
	const char *final = json_string_value(json_object_get(results[0], "final"));
	const char *other = final && strcmp(final, "d.a") == 0 ? "d.b" : "d.a";
	json_t *figs = json_array();
	for (int i = 1; i < n && rc == 0; i++) {
		const json_t *c = json_object_get(results[i], "counts");
		json_t *fig = json_pack("{s:i,s:I,s:I,s:I,s:I}", "actor", i, "reads",
					kc_count_get(c, "rounds"), "ok", kc_count_get(c, "complete"),
					"partial", kc_count_get(c, "partial"), "listings",
					kc_count_get(c, "listings"));
		json_array_append_new(figs, fig);
		rc = converge_lister(r, res, dir, final ? final : "d.a", other, i, fig);
	}
	record_readers(res, "dir", figs);
	for (int i = 0; i < n; i++)
		json_decref(results[i]);
	return rc;
}

int kc_check_rename(kc_run *r, kc_result *res, const char *dir)
{
	int rc;
	res->iterations = r->o->iterations;
	json_object_set_new(res->profile, "renamer_actor", json_integer(0));
	json_object_set_new(res->profile, "readers", json_integer(r->drv.n - 1));
	json_object_set_new(res->profile, "record_bytes", json_pack("[i,i]", 64, RECORD_MAX));
	res->observation = "a reader's open and read of the target, or a lister's round, with renames in flight";
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
