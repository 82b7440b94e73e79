/*
 * check_cto.c — guarantee 3: close-to-open consistency between clients.
 *
 * Actor 0 rewrites one file in place (no rename) and closes it; only then,
 * told by the driver, another actor opens it and must read exactly the
 * version just closed.  Before each rewrite the reader reads the previous
 * version, so it has that version cached: a client that serves its cache
 * instead of revalidating at open is caught.  Readers rotate over the other
 * actors.
 *
 * Variants: same (every version has the same size, so only the change
 * attribute or mtime can reveal the change) and grow (each version is longer,
 * so a cached size shows up as a short read).  The growing rewrites start a
 * new file every GROW_CYCLE versions, so that the file stays small whatever
 * --iterations is; the first version of each new file is read by a client
 * that has nothing cached for it yet.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "conformance/run.h"

#define GROW_CYCLE 64

static int64_t size_of(const char *variant, int64_t v)
{
	return strcmp(variant, "same") == 0 ? 6000 : 1024 + (v % GROW_CYCLE) * 512;
}

/* The file that holds version v. */
static void path_of(char *buf, size_t len, const char *dir, const char *variant, int64_t v)
{
	if (strcmp(variant, "same") == 0)
		snprintf(buf, len, "%s/same", dir);
	else
		snprintf(buf, len, "%s/grow.%lld", dir, (long long)(v / GROW_CYCLE));
}

/* One open-after-close read: count it; anything but "ok" is a violation. */
static int read_once(kc_run *r, kc_result *res, const char *variant, int reader,
		     const char *path, int64_t version, uint64_t tag, const char *what)
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
		snprintf(t1, sizeof(t1), "actor 0: rewrite %s to version %lld (%lld bytes), close", path,
			 (long long)version, (long long)size);
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
			     json_pack("{s:s,s:I,s:I,s:I}", "path", path, "version", (json_int_t)version,
				       "size", (json_int_t)size_of(variant, version), "tag",
				       (json_int_t)tag),
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
		snprintf(t, sizeof(t), "actor 0: open %s for writing, write %lld bytes in place, close: %s failed: %s",
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

static int variant_run(kc_run *r, kc_result *res, const char *dir, const char *variant)
{
	char path[256], prev[256];
	path_of(path, sizeof(path), dir, variant, 0);
	uint64_t tag = kc_run_tag(r, KC_CHK_CTO, 0, variant);
	int n = r->drv.n;
	static const char *const zero[] = {"reads", "ok", "stale", "short", "long", "torn", "empty",
					   "missing", "future", "errors", "write_errors", "estale"};
	for (size_t k = 0; k < sizeof(zero) / sizeof(zero[0]); k++) {
		char key[64];
		snprintf(key, sizeof(key), "%s.%s", variant, zero[k]);
		kc_result_count(res, key, 0); /* every counter is in the report */
	}
	kc_run_variant(r, variant);
	r->manual = 1;
	int rc = write_once(r, res, variant, path, 0, tag);
	for (int64_t v = 1; rc == 0 && v <= r->o->iterations; v++) {
		int reader = 1 + (int)(v % (n - 1));
		path_of(prev, sizeof(prev), dir, variant, v - 1);
		path_of(path, sizeof(path), dir, variant, v);
		/* Prime the reader's cache with the current version ... */
		rc = read_once(r, res, variant, reader, prev, v - 1, tag, "priming");
		/* ... then rewrite, close, and signal it through the driver. */
		if (!rc)
			rc = write_once(r, res, variant, path, v, tag);
		if (!rc)
			rc = read_once(r, res, variant, reader, path, v, tag, "after-close");
		if (!rc && strcmp(prev, path) != 0) {
			json_t *out = NULL;
			rc = kc_drv_call(&r->drv, 0, "unlink", json_pack("{s:s}", "path", prev), &out);
			json_decref(out);
		}
		r->manual_done = v;
	}
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
	int rc = variant_run(r, res, dir, "same");
	if (!rc)
		rc = variant_run(r, res, dir, "grow");
	if (rc && rc != -EINTR)
		kc_result_error(res, "%s", r->drv.err);
	return rc;
}
