/*
 * check_unlink.c — deleting a file that another client holds open.
 *
 * Mostly a profile, because the contract does not promise a clean delete of
 * an open file: actor 0 (the holder) creates a 16 MiB file and keeps it open;
 * actor 1 deletes it and records what its listing shows (.nfsXXXX from a
 * silly-renaming NFS client, .fuse_hiddenXXXX from libfuse), what the holder
 * can still do (read, write, fstat), and what rmdir of the parent says while
 * the file is held.  Then the holder closes, and the pass/fail part: within a
 * few seconds the directory must be removable and the space must come back
 * (statvfs), because kaas relies on "the leader closes, then deletes, and the
 * disk is freed".  When creating the file did not show in statvfs at all the
 * space part is reported as unknown instead of judged.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "run.h"
#include "util/clock.h"

#define FILE_BYTES (16LL << 20)
#define AFTER_CLOSE_MS 5000

static int call(kc_run *r, int a, const char *op, json_t *args, json_t **out)
{
	return kc_drv_call(&r->drv, a, op, args, out);
}

/* statvfs avail bytes, or -1 when unavailable. */
static int avail(kc_run *r, int a, const char *dir, int64_t *bytes)
{
	json_t *out = NULL;
	int rc = call(r, a, "statvfs", json_pack("{s:s}", "path", dir), &out);
	if (rc)
		return rc;
	const char *err = json_string_value(json_object_get(out, "err"));
	if (err && strcmp(err, "OK") == 0)
		*bytes = json_integer_value(json_object_get(out, "bavail")) *
			 json_integer_value(json_object_get(out, "bsize"));
	else
		*bytes = -1;
	json_decref(out);
	return 0;
}

static int hidden_name(const char *n)
{
	return strncmp(n, ".nfs", 4) == 0 || strncmp(n, ".fuse_hidden", 12) == 0;
}

/* Lists d; returns the number of hidden (silly-renamed) entries and adds the
 * names to arr (may be NULL).  *exists = 0 when d is gone. */
static int list_hidden(kc_run *r, int a, const char *d, json_t *arr, int *hidden, int *total,
		       int *exists)
{
	json_t *out = NULL;
	int rc = call(r, a, "list", json_pack("{s:s}", "path", d), &out);
	if (rc)
		return rc;
	*hidden = *total = 0;
	const char *err = json_string_value(json_object_get(out, "err"));
	*exists = !(err && strcmp(err, "ENOENT") == 0);
	size_t i;
	json_t *nm;
	json_array_foreach(json_object_get(out, "names"), i, nm)
	{
		const char *s = json_string_value(nm);
		(*total)++;
		if (s && hidden_name(s))
			(*hidden)++;
		if (arr)
			json_array_append(arr, nm);
	}
	json_decref(out);
	return 0;
}

static const char *errof(json_t *out)
{
	const char *e = json_string_value(json_object_get(out, "err"));
	return e ? e : "?";
}

int kc_check_unlink(kc_run *r, kc_result *res, const char *dir)
{
	const int A = 0, B = 1;
	char d[256], victim[300];
	snprintf(d, sizeof(d), "%s/held", dir);
	snprintf(victim, sizeof(victim), "%s/victim", d);
	uint64_t tag = kc_run_tag(r, KC_CHK_UNLINK, 0, "victim");
	json_t *out = NULL, *prof = res->profile;
	int64_t s0, s1, s2, s3 = -1;
	int hidden, total, exists, rc;
	kc_run_variant(r, "hold");
	res->iterations = 1;
	json_object_set_new(prof, "holder_actor", json_integer(A));
	json_object_set_new(prof, "deleter_actor", json_integer(B));
	json_object_set_new(prof, "file_bytes", json_integer(FILE_BYTES));
	static const char *const zero[] = {"hidden_while_open", "hidden_after_close",
					   "rmdir_after_close_failed", "space_not_freed",
					   "space_unknown"};
	for (size_t k = 0; k < sizeof(zero) / sizeof(zero[0]); k++)
		kc_result_count(res, zero[k], 0); /* every counter is in the report */

	if ((rc = call(r, B, "mkdirs", json_pack("{s:s}", "path", d), &out)))
		goto fail;
	json_decref(out);
	if ((rc = avail(r, B, dir, &s0)))
		goto fail;
	if ((rc = call(r, A, "hold_open",
		       json_pack("{s:s,s:I,s:I,s:b}", "path", victim, "size", (json_int_t)FILE_BYTES,
				 "tag", (json_int_t)tag, "fsync", 1),
		       &out)))
		goto fail;
	json_int_t h = json_integer_value(json_object_get(out, "handle"));
	json_decref(out);
	if ((rc = avail(r, B, dir, &s1)))
		goto fail;

	/* The delete, as another client. */
	if ((rc = call(r, B, "unlink", json_pack("{s:s}", "path", victim), &out)))
		goto fail;
	const char *unlink_err = errof(out);
	json_object_set_new(prof, "unlink", json_string(unlink_err));
	int unlinked = strcmp(unlink_err, "OK") == 0;
	json_decref(out);
	json_t *names = json_array();
	if ((rc = list_hidden(r, B, d, names, &hidden, &total, &exists))) {
		json_decref(names);
		goto fail;
	}
	json_object_set_new(prof, "listing_while_open", names);
	kc_result_count(res, "hidden_while_open", hidden);
	const char *style = "none";
	for (size_t i = 0; i < json_array_size(names); i++) {
		const char *s = json_string_value(json_array_get(names, i));
		if (s && strncmp(s, ".nfs", 4) == 0)
			style = ".nfsXXXX (NFS client silly-rename)";
		else if (s && strncmp(s, ".fuse_hidden", 12) == 0)
			style = ".fuse_hiddenXXXX (libfuse hide)";
	}
	json_object_set_new(prof, "silly_rename", json_string(style));

	/* What the holder can still do. */
	if ((rc = call(r, A, "handle_probe",
		       json_pack("{s:I,s:I,s:I}", "handle", h, "size", (json_int_t)FILE_BYTES, "tag",
				 (json_int_t)tag),
		       &out)))
		goto fail;
	json_object_set_new(prof, "holder", json_incref(out));
	json_decref(out);

	if ((rc = call(r, B, "rmdir", json_pack("{s:s}", "path", d), &out)))
		goto fail;
	json_object_set_new(prof, "rmdir_while_open", json_string(errof(out)));
	int removed = strcmp(errof(out), "OK") == 0;
	json_decref(out);
	if ((rc = avail(r, B, dir, &s2)))
		goto fail;

	if ((rc = call(r, A, "close_handle", json_pack("{s:I}", "handle", h), &out)))
		goto fail;
	json_object_set_new(prof, "close", json_string(errof(out)));
	json_decref(out);
	int64_t t_close = kaas_mono_ms();

	/* After close: the directory must become removable (re-driving the
	 * delete where it had failed, as kaas would), and the space free.  The
	 * space is measured against the level while the file was held (s1): an
	 * NFSv3 server has no open state and may free it at the unlink. */
	int64_t deadline = t_close + AFTER_CLOSE_MS;
	const char *last_rmdir = removed ? "OK" : "?";
	for (;;) {
		if (!removed) {
			if ((rc = list_hidden(r, B, d, NULL, &hidden, &total, &exists)))
				goto fail;
			if (!exists) {
				removed = 1;
				last_rmdir = "ENOENT";
			} else {
				if (!unlinked && total > 0) {
					if ((rc = call(r, B, "unlink", json_pack("{s:s}", "path", victim), &out)))
						goto fail;
					unlinked = strcmp(errof(out), "OK") == 0 || strcmp(errof(out), "ENOENT") == 0;
					json_decref(out);
				}
				if ((rc = call(r, B, "rmdir", json_pack("{s:s}", "path", d), &out)))
					goto fail;
				last_rmdir = json_string_value(json_object_get(out, "err")) ? "" : "?";
				json_object_set_new(prof, "rmdir_after_close", json_string(errof(out)));
				removed = strcmp(errof(out), "OK") == 0 || strcmp(errof(out), "ENOENT") == 0;
				json_decref(out);
			}
		}
		if (s1 >= 0 && s0 >= 0 && s2 >= 0 && s3 < s1 + FILE_BYTES / 2) {
			if ((rc = avail(r, B, dir, &s3)))
				goto fail;
		}
		int space_done = !(s1 >= 0 && s0 >= 0 && s2 >= 0) || s3 >= s1 + FILE_BYTES / 2;
		if ((removed && space_done) || kaas_mono_ms() >= deadline)
			break;
		if (r->interrupted && *r->interrupted) {
			rc = -EINTR;
			goto fail;
		}
		usleep(50 * 1000);
	}
	(void)last_rmdir;
	json_object_set_new(prof, "settled_after_close_ms", json_integer(kaas_mono_ms() - t_close));
	if (!json_object_get(prof, "rmdir_after_close"))
		json_object_set_new(prof, "rmdir_after_close",
				    json_string(strcmp(json_string_value(json_object_get(prof, "rmdir_while_open")), "OK") == 0
							? "removed while open"
							: "OK"));
	if (!removed) {
		kc_result_count(res, "rmdir_after_close_failed", 1);
		/* What keeps it busy: a hidden name, or the deleted file itself
		 * come back (s3fs re-uploads it when its holder writes). */
		json_t *left = json_array();
		if ((rc = list_hidden(r, B, d, left, &hidden, &total, &exists))) {
			json_decref(left);
			goto fail;
		}
		if (hidden > 0)
			kc_result_count(res, "hidden_after_close", hidden);
		char names[300] = "";
		size_t used = 0;
		for (size_t i = 0; i < json_array_size(left) && used < sizeof(names) - 1; i++) {
			int w = snprintf(names + used, sizeof(names) - used, "%s%s", i ? " " : "",
					 json_string_value(json_array_get(left, i)));
			used = w < 0 ? used : used + (size_t)w;
		}
		if (unlinked && json_array_size(left) > 0) {
			for (size_t i = 0; i < json_array_size(left); i++)
				if (strcmp(json_string_value(json_array_get(left, i)), "victim") == 0)
					kc_result_note(res, "the deleted file is back under its name after its holder wrote to it and closed it");
		}
		json_object_set_new(prof, "listing_after_close", left);
		char detail[600];
		snprintf(detail, sizeof(detail),
			 "the directory still could not be removed 5 s after the holder closed the file (rmdir: %s; it holds: %s)",
			 json_string_value(json_object_get(prof, "rmdir_after_close")),
			 names[0] ? names : "nothing");
		json_t *one = json_pack("[{s:s,s:i,s:i,s:s,s:[s,s,s,s]}]", "kind", "not_released", "actor", B,
					"iteration", 1, "detail", detail, "trace",
					"actor 0: create, write 16 MiB, fsync, keep open",
					"actor 1: unlink, list, rmdir",
					"actor 0: read, write, fsync, fstat, close",
					"actor 1: unlink again if it had failed, rmdir, for 5 s");
		kc_result_add_anomalies(res, NULL, one, 1);
		json_decref(one);
	}
	json_t *space = json_pack("{s:I,s:I,s:I,s:I}", "avail_before", (json_int_t)s0, "avail_held",
				  (json_int_t)s1, "avail_before_close", (json_int_t)s2,
				  "avail_after_close", (json_int_t)s3);
	if (s0 < 0 || s1 < 0 || s2 < 0 || s0 - s1 < FILE_BYTES / 2) {
		/* statvfs is missing, or did not see the file arrive: it cannot
		 * tell whether the space went away again. */
		kc_result_count(res, "space_unknown", 1);
		kc_result_note(res, "space accounting is not conclusive here (statvfs %s)",
			       s0 < 0 ? "unavailable" : "did not show the 16 MiB file being written");
	} else if (s3 < s1 + FILE_BYTES / 2) {
		kc_result_count(res, "space_not_freed", 1);
		char t1[200], t2[200], t3[200];
		snprintf(t1, sizeof(t1), "actor 1: statvfs: %lld bytes available before the file", (long long)s0);
		snprintf(t2, sizeof(t2), "actor 1: statvfs: %lld with the 16 MiB file held open", (long long)s1);
		snprintf(t3, sizeof(t3), "actor 1: statvfs: %lld 5 s after it was deleted and closed", (long long)s3);
		json_t *one = json_pack("[{s:s,s:i,s:i,s:s,s:[s,s,s]}]", "kind", "space_not_freed", "actor", B,
					"iteration", 1, "detail",
					"free space did not grow back by the file's size within 5 s of the close",
					"trace", t1, t2, t3);
		kc_result_add_anomalies(res, NULL, one, 1);
		json_decref(one);
	}
	json_object_set_new(prof, "space", space);
	r->manual = 1;
	r->manual_done = 1;
	return 0;
fail:
	if (rc != -EINTR)
		kc_result_error(res, "%s", r->drv.err);
	return rc;
}
