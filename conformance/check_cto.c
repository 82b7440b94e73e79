/*
 * check_cto.c — guarantee 3: close-to-open consistency between clients.
 *
 * Actor 0 writes a new version of one file and closes it; only then, told
 * by the driver, every other actor opens it and must read exactly the
 * version just closed.  Each reader read the previous version just before,
 * so it has that version cached: a client that serves its cache instead of
 * revalidating at open is caught.  Every reader reads every version, so each
 * client makes --iterations observations (the detection power is per
 * client, like the verdict).
 *
 * Variants: same (rewritten in place, every version the same size, so only
 * the change attribute or mtime can reveal the change), grow (in place, each
 * version longer, so a cached size shows up as a short read; a new file
 * every GROW_CYCLE versions, so that the file stays small whatever
 * --iterations is, and the first version of each new file is read by a
 * client that has nothing cached for it yet) and renamed (each version is
 * written to a temp name, closed and renamed over the name: a new file
 * behind an old name, which a client whose name lookups never revalidate
 * keeps missing although it sees every in-place rewrite).
 *
 * Convergence: the writer's last version is its final state; every reader
 * must have read it.  One that did not is watched for CONVERGE_WATCH_MS to
 * tell late from never, and counted apart (<v>.not_converged) with the
 * version it was stuck on.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "conformance/judge.h"
#include "conformance/run.h"
#include "util/clock.h"

#define GROW_CYCLE 64
#define CONVERGE_WATCH_MS 2000

/* What one reader saw over a variant. */
typedef struct reader_fig {
	int64_t reads, ok;
	char last[32];	  /* status of its last read */
	int64_t last_seen; /* version of its last read, -1 when none */
} reader_fig;

static int64_t size_of(const char *variant, int64_t v)
{
	if (strcmp(variant, "grow") == 0)
		return 1024 + (v % GROW_CYCLE) * 512;
	return 6000;
}

/* The file that holds version v. */
static void path_of(char *buf, size_t len, const char *dir, const char *variant, int64_t v)
{
	if (strcmp(variant, "grow") != 0)
		snprintf(buf, len, "%s/%s", dir, variant);
	else
		snprintf(buf, len, "%s/grow.%lld", dir, (long long)(v / GROW_CYCLE));
}

/* One open-after-close read: count it; anything but "ok" is a violation. */
static int read_once(kc_run *r, kc_result *res, const char *variant, int reader,
		     const char *path, int64_t version, uint64_t tag, const char *what,
		     reader_fig *fig)
{
	json_t *out = NULL;
	int64_t size = size_of(variant, version);
	int rc = kc_drv_call(&r->drv, reader, "cto_read",
			     json_pack("{s:s,s:I,s:I,s:I}", "path", path, "version", (json_int_t)version,
				       "size", (json_int_t)size, "tag", (json_int_t)tag),
			     &out);
	if (rc)
		return rc;
	char key[64];
	snprintf(key, sizeof(key), "%s.reads", variant);
	kc_result_count(res, key, 1);
	snprintf(key, sizeof(key), "%s.estale", variant);
	kc_result_count(res, key, json_integer_value(json_object_get(out, "estale")));
	const char *status = json_string_value(json_object_get(out, "status"));
	if (!status)
		status = "errors";
	const char *known[] = {"ok", "stale", "short", "long", "torn", "empty", "missing", "future"};
	const char *bucket = "errors";
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(status, known[i]) == 0)
			bucket = known[i];
	snprintf(key, sizeof(key), "%s.%s", variant, bucket);
	kc_result_count(res, key, 1);
	json_t *sv = json_object_get(out, "seen_version");
	fig->reads++;
	fig->ok += strcmp(bucket, "ok") == 0;
	snprintf(fig->last, sizeof(fig->last), "%s", bucket);
	fig->last_seen = sv ? (int64_t)json_integer_value(sv) : -1;
	if (strcmp(bucket, "ok") != 0) {
		char d[300], t1[200], t2[200];
		json_t *seen = json_object_get(out, "seen_version");
		snprintf(d, sizeof(d), "%s read: expected version %lld (%lld bytes), got %s%s%lld, %lld bytes",
			 what, (long long)version, (long long)size, status,
			 seen ? " version " : "", seen ? (long long)json_integer_value(seen) : 0LL,
			 (long long)json_integer_value(json_object_get(out, "bytes")));
		if (!seen) {
			snprintf(d, sizeof(d), "%s read: expected version %lld (%lld bytes), got %s, %lld bytes",
				 what, (long long)version, (long long)size, status,
				 (long long)json_integer_value(json_object_get(out, "bytes")));
		}
		snprintf(t1, sizeof(t1), "actor 0: %s %s to version %lld (%lld bytes), close",
			 strcmp(variant, "renamed") == 0 ? "write a temp file, rename it over" : "rewrite",
			 path, (long long)version, (long long)size);
		snprintf(t2, sizeof(t2), "actor %d: open %s, read to EOF: %s", reader, path, status);
		json_t *one = json_pack("[{s:s,s:i,s:I,s:s,s:[s,s]}]", "kind", bucket, "actor", reader,
					"iteration", (json_int_t)version, "detail", d, "trace", t1, t2);
		kc_result_add_anomalies(res, variant, one, 1);
		json_decref(one);
		r->manual_anomalies++;
	}
	json_decref(out);
	return 0;
}

static int write_once(kc_run *r, kc_result *res, const char *variant, const char *path,
		      int64_t version, uint64_t tag)
{
	json_t *out = NULL;
	int rc = kc_drv_call(&r->drv, 0, "cto_write",
			     json_pack("{s:s,s:I,s:I,s:I,s:b}", "path", path, "version", (json_int_t)version,
				       "size", (json_int_t)size_of(variant, version), "tag",
				       (json_int_t)tag, "via_rename", strcmp(variant, "renamed") == 0),
			     &out);
	if (rc)
		return rc;
	const char *err = json_string_value(json_object_get(out, "err"));
	if (err && strcmp(err, "OK") != 0) {
		char key[64], d[200];
		snprintf(key, sizeof(key), "%s.write_errors", variant);
		kc_result_count(res, key, 1);
		snprintf(d, sizeof(d), "%s of version %lld failed: %s",
			 json_string_value(json_object_get(out, "op")), (long long)version, err);
		char t[400];
		if (strcmp(variant, "renamed") == 0)
			snprintf(t, sizeof(t),
				 "actor 0: write %lld bytes to %s.new, close, rename it over %s: %s failed: %s",
				 (long long)size_of(variant, version), path, path,
				 json_string_value(json_object_get(out, "op")), err);
		else
			snprintf(t, sizeof(t),
				 "actor 0: open %s for writing, write %lld bytes in place, close: %s failed: %s",
				 path, (long long)size_of(variant, version),
				 json_string_value(json_object_get(out, "op")), err);
		json_t *one = json_pack("[{s:s,s:i,s:I,s:s,s:[s]}]", "kind", "write_error", "actor", 0,
					"iteration", (json_int_t)version, "detail", d, "trace", t);
		kc_result_add_anomalies(res, variant, one, 1);
		json_decref(one);
		r->manual_anomalies++;
	}
	json_decref(out);
	return 0;
}

/* After the last version: every reader must have read it.  A reader that
 * did not is watched for CONVERGE_WATCH_MS (late or never) and becomes a
 * not_converged anomaly; the figures go to profile.readers.<variant>. */
static int converge(kc_run *r, kc_result *res, const char *variant, const char *path,
		    int64_t final, uint64_t tag, reader_fig *figs)
{
	json_t *arr = json_array();
	int rc = 0;
	for (int a = 1; a < r->drv.n && rc == 0; a++) {
		reader_fig *f = &figs[a];
		const char *status = f->reads ? (strcmp(f->last, "ok") == 0 ? "ok" : f->last) : NULL;
		json_t *one = json_pack("{s:i,s:I,s:I,s:I}", "actor", a, "reads", (json_int_t)f->reads,
					"ok", (json_int_t)f->ok, "final_seen", (json_int_t)f->last_seen);
		if (status)
			json_object_set_new(one, "final_status", json_string(status));
		json_array_append_new(arr, one);
		if (!status || strcmp(status, "ok") == 0)
			continue;
		int64_t t0 = ku_mono_ms(), late = -1;
		reader_fig watch = {0};
		while (ku_mono_ms() - t0 < CONVERGE_WATCH_MS) {
			if (r->interrupted && *r->interrupted) {
				rc = -EINTR;
				break;
			}
			usleep(50 * 1000);
			json_t *out = NULL;
			rc = kc_drv_call(&r->drv, a, "cto_read",
					 json_pack("{s:s,s:I,s:I,s:I}", "path", path, "version",
						   (json_int_t)final, "size", (json_int_t)size_of(variant, final),
						   "tag", (json_int_t)tag),
					 &out);
			if (rc)
				break;
			const char *st = json_string_value(json_object_get(out, "status"));
			json_t *sv = json_object_get(out, "seen_version");
			snprintf(watch.last, sizeof(watch.last), "%s", st ? st : "errors");
			watch.last_seen = sv ? (int64_t)json_integer_value(sv) : -1;
			json_decref(out);
			if (strcmp(watch.last, "ok") == 0) {
				late = ku_mono_ms() - t0;
				break;
			}
		}
		if (rc)
			break;
		json_object_set_new(one, "converged_after_ms", json_integer(late));
		char d[600], t1[400], t2[300];
		snprintf(d, sizeof(d),
			 "the writer's final version is %lld; this reader's open after its close read %s (version %lld)%s",
			 (long long)final, status, (long long)f->last_seen,
			 late >= 0 ? "; it converged late" : "; it never converged");
		snprintf(t1, sizeof(t1), "actor 0: version %lld of %s written and closed; done",
			 (long long)final, path);
		if (late >= 0)
			snprintf(t2, sizeof(t2), "actor %d: read the final version only %lld ms later", a,
				 (long long)late);
		else
			snprintf(t2, sizeof(t2), "actor %d: still %s (version %lld) %d ms later", a,
				 watch.last, (long long)watch.last_seen, CONVERGE_WATCH_MS);
		json_t *an = json_pack("[{s:s,s:i,s:I,s:s,s:[s,s]}]", "kind", "not_converged", "actor", a,
				       "iteration", (json_int_t)final, "detail", d, "trace", t1, t2);
		kc_result_add_anomalies(res, variant, an, 1);
		json_decref(an);
	}
	int64_t idle = 0, min_obs = -1;
	int64_t stuck = kc_judge_readers(arr, &idle, &min_obs);
	char key[64];
	snprintf(key, sizeof(key), "%s.not_converged", variant);
	kc_result_count(res, key, stuck);
	json_t *all = json_object_get(res->profile, "per_reader");
	if (!all) {
		all = json_object();
		json_object_set_new(res->profile, "per_reader", all);
	}
	json_object_set_new(all, variant, arr);
	/* The first read of each reader is of version 0, before any rewrite:
	 * not an observation of close-to-open. */
	int64_t obs = min_obs > 0 ? min_obs - 1 : 0;
	if (res->observations == 0 || obs < res->observations)
		res->observations = obs;
	return rc;
}

static int variant_run(kc_run *r, kc_result *res, const char *dir, const char *variant)
{
	char path[256], prev[256];
	path_of(path, sizeof(path), dir, variant, 0);
	uint64_t tag = kc_run_tag(r, KC_CHK_CTO, 0, variant);
	int n = r->drv.n;
	reader_fig figs[KC_MAX_ACTORS];
	memset(figs, 0, sizeof(figs));
	static const char *const zero[] = {"reads", "ok", "stale", "short", "long", "torn", "empty",
					   "missing", "future", "errors", "write_errors", "estale",
					   "not_converged"};
	for (size_t k = 0; k < sizeof(zero) / sizeof(zero[0]); k++) {
		char key[64];
		snprintf(key, sizeof(key), "%s.%s", variant, zero[k]);
		kc_result_count(res, key, 0); /* every counter is in the report */
	}
	kc_run_variant(r, variant);
	r->manual = 1;
	int rc = write_once(r, res, variant, path, 0, tag);
	/* Every reader caches version 0 ... */
	for (int a = 1; rc == 0 && a < n; a++)
		rc = read_once(r, res, variant, a, path, 0, tag, "priming", &figs[a]);
	int64_t v;
	for (v = 1; rc == 0 && v <= r->o->iterations; v++) {
		path_of(prev, sizeof(prev), dir, variant, v - 1);
		path_of(path, sizeof(path), dir, variant, v);
		/* ... then the writer closes a new version, the driver tells
		 * every reader, and each read both checks it and caches it for
		 * the next round. */
		rc = write_once(r, res, variant, path, v, tag);
		for (int a = 1; rc == 0 && a < n; a++)
			rc = read_once(r, res, variant, a, path, v, tag, "after-close", &figs[a]);
		if (!rc && strcmp(prev, path) != 0) {
			json_t *out = NULL;
			rc = kc_drv_call(&r->drv, 0, "unlink", json_pack("{s:s}", "path", prev), &out);
			json_decref(out);
		}
		r->manual_done = v;
	}
	if (!rc)
		rc = converge(r, res, variant, path, v - 1, tag, figs);
	return rc;
}

int kc_check_cto(kc_run *r, kc_result *res, const char *dir)
{
	res->iterations = r->o->iterations;
	json_object_set_new(res->profile, "writer_actor", json_integer(0));
	json_object_set_new(res->profile, "same_size_bytes", json_integer(6000));
	int64_t top = r->o->iterations < GROW_CYCLE ? r->o->iterations : GROW_CYCLE - 1;
	json_object_set_new(res->profile, "grow_bytes",
			    json_pack("[I,I]", (json_int_t)size_of("grow", 0),
				      (json_int_t)size_of("grow", top)));
	json_object_set_new(res->profile, "grow_versions_per_file", json_integer(GROW_CYCLE));
	json_object_set_new(res->profile, "renamed_bytes", json_integer(6000));
	res->observation = "a reader's open and read after the writer's close of a new version";
	int rc = variant_run(r, res, dir, "same");
	if (!rc)
		rc = variant_run(r, res, dir, "grow");
	if (!rc)
		rc = variant_run(r, res, dir, "renamed");
	if (rc && rc != -EINTR)
		kc_result_error(res, "%s", r->drv.err);
	return rc;
}
