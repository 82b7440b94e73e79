/*
 * check_unlink.c — deleting a file that another client holds open.
 *
 * Mostly a profile, because the contract does not promise a clean delete of
 * an open file: actor 0 (the holder) creates a 32 MiB file and keeps it open;
 * actor 1 deletes it and records what its listing shows (.nfsXXXX from a
 * silly-renaming NFS client, .fuse_hiddenXXXX from libfuse), what the holder
 * can still do (read, write, fstat), and what rmdir of the parent says while
 * the file is held.  Then the holder closes, and the pass/fail part: within a
 * few seconds the directory must be removable and the space must come back
 * (statvfs), because kaas relies on "the leader closes, then deletes, and the
 * disk is freed".  When creating the file did not show in statvfs at all the
 * space part is reported as unknown instead of judged.
 *
 * Free space is shared with everything else on the volume, so it moves by
 * itself while we measure (tens of MB a second on a busy disk).  The rule
 * (kc_space_freed) looks for a rise of half the file's size over the level
 * sampled just before the event that frees it — the unlink for a server
 * without open state, the close for everyone else — with the samples on
 * either side of the event taken back to back, then every 50 ms for 5 s;
 * a free that other writers hid is looked for once more with a fresh file
 * before the check says the space was not freed.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance/judge.h"
#include "conformance/run.h"
#include "util/clock.h"

#define FILE_BYTES (32LL << 20)
#define AFTER_CLOSE_MS 5000
#define SPACE_ATTEMPTS 3 /* at most; two that did not see it make a FAIL */
#define DENSE_MS 200      /* after the close: back-to-back samples this long */
#define DENSE_MAX 100
#define MAX_SAMPLES 512

/* statvfs samples of one attempt, in order: v[0, nlinked) while the file
 * was held and linked, v[nlinked, nheld) held but deleted, then closed. */
enum { SP_LINKED, SP_DELETED, SP_CLOSED };
typedef struct samples {
	int64_t v[MAX_SAMPLES];
	int n, nlinked, nheld;
	int freed;
	int64_t rise;
} samples;

static void sample_add(samples *sm, int64_t x, int phase)
{
	if (sm->n >= MAX_SAMPLES)
		return;
	sm->v[sm->n++] = x;
	if (phase == SP_LINKED)
		sm->nlinked = sm->n;
	if (phase != SP_CLOSED)
		sm->nheld = sm->n;
	sm->freed = kc_space_freed(sm->v, sm->n, sm->nlinked, sm->nheld, FILE_BYTES, &sm->rise);
}

static int call(kc_run *r, int a, const char *op, json_t *args, json_t **out)
{
	return kc_drv_call(&r->drv, a, op, args, out);
}

/* Did statvfs show the file arrive?  A drop between half and twice its
 * size over the write: less, and the volume's accounting does not see it
 * (or others freed space meanwhile); more, and others' writes dominate. */
static int arrived(int64_t before, int64_t held)
{
	return before >= 0 && held >= 0 && before - held >= FILE_BYTES / 2 &&
	       before - held <= 2 * FILE_BYTES;
}

/* Between samples after the close: none for the first DENSE_MS (the free
 * shows as a jump between neighbouring samples, not yet blurred by other
 * writers), then 50 ms. */
static void pause_after_close(int64_t t_close, int *dense)
{
	if (ku_mono_ms() - t_close < DENSE_MS && *dense < DENSE_MAX) {
		(*dense)++;
		return;
	}
	usleep(50 * 1000);
}

/* statvfs avail bytes, or -1 when unavailable (kc_free_bytes: no space
 * accounting, or beyond 2^63: a FUSE filesystem that reports "unlimited"). */
static int avail(kc_run *r, int a, const char *dir, int64_t *bytes)
{
	json_t *out = NULL;
	int rc = call(r, a, "statvfs", json_pack("{s:s}", "path", dir), &out);
	if (rc)
		return rc;
	const char *err = json_string_value(json_object_get(out, "err"));
	json_int_t blocks = json_integer_value(json_object_get(out, "blocks"));
	json_int_t bavail = json_integer_value(json_object_get(out, "bavail"));
	json_int_t bsize = json_integer_value(json_object_get(out, "bsize"));
	*bytes = -1;
	if (err && strcmp(err, "OK") == 0 && blocks >= 0 && bavail >= 0 && bsize >= 0)
		*bytes = kc_free_bytes((uint64_t)blocks, (uint64_t)bavail, (uint64_t)bsize);
	json_decref(out);
	return 0;
}

static json_t *samples_json(const samples *sm)
{
	json_t *a = json_array();
	for (int i = 0; i < sm->n; i++)
		json_array_append_new(a, json_integer(sm->v[i]));
	return a;
}

/* One more try at seeing the space come back, with a fresh file in its own
 * directory: hold it, delete it, close it, sample until the rise shows or
 * the deadline.  *conclusive = 0 when statvfs did not even show the file
 * arriving this time. */
static int space_again(kc_run *r, const char *dir, int attempt, uint64_t tag, samples *sm,
		       int *conclusive, json_t *prof)
{
	const int A = 0, B = 1;
	char d[300], victim[340];
	snprintf(d, sizeof(d), "%s/space%d", dir, attempt);
	snprintf(victim, sizeof(victim), "%s/victim", d);
	json_t *out = NULL;
	int64_t before, x;
	int rc;
	memset(sm, 0, sizeof(*sm));
	*conclusive = 0;
	if ((rc = call(r, B, "mkdirs", json_pack("{s:s}", "path", d), &out)))
		return rc;
	json_decref(out);
	if ((rc = avail(r, B, dir, &before)))
		return rc;
	if ((rc = call(r, A, "hold_open",
		       json_pack("{s:s,s:I,s:I,s:b}", "path", victim, "size", (json_int_t)FILE_BYTES,
				 "tag", (json_int_t)tag, "fsync", 1),
		       &out)))
		return rc;
	json_int_t h = json_integer_value(json_object_get(out, "handle"));
	json_decref(out);
	if ((rc = avail(r, B, dir, &x)))
		return rc;
	sample_add(sm, x, SP_LINKED);
	*conclusive = arrived(before, x);
	if ((rc = call(r, B, "unlink", json_pack("{s:s}", "path", victim), &out)))
		return rc;
	json_decref(out);
	if ((rc = avail(r, B, dir, &x)))
		return rc;
	sample_add(sm, x, SP_DELETED);
	if ((rc = call(r, A, "close_handle", json_pack("{s:I}", "handle", h), &out)))
		return rc;
	json_decref(out);
	int64_t t_close = ku_mono_ms();
	int dense = 0;
	while (*conclusive && !sm->freed) {
		if ((rc = avail(r, B, dir, &x)))
			return rc;
		sample_add(sm, x, SP_CLOSED);
		if (sm->freed || ku_mono_ms() >= t_close + AFTER_CLOSE_MS)
			break;
		if (r->interrupted && *r->interrupted)
			return -EINTR;
		pause_after_close(t_close, &dense);
	}
	json_array_append_new(json_object_get(prof, "space_attempts"),
			      json_pack("{s:i,s:I,s:o,s:i,s:i,s:b,s:b,s:I,s:I}", "attempt", attempt,
					"avail_before", (json_int_t)before, "avail", samples_json(sm),
					"linked_samples", sm->nlinked, "held_samples", sm->nheld, "conclusive", *conclusive, "freed",
					sm->freed, "rise", (json_int_t)sm->rise, "settled_after_close_ms",
					(json_int_t)(ku_mono_ms() - t_close)));
	if ((rc = call(r, B, "remove_tree", json_pack("{s:s}", "path", d), &out)) == 0)
		json_decref(out);
	return rc == -EINTR ? rc : 0;
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

/* One run of the check: who does what, where, and what was seen so far. */
typedef struct unlink_ctx {
	kc_run *r;
	kc_result *res;
	const char *dir;
	char d[256], victim[300];
	uint64_t tag;
	json_int_t handle;  /* the holder's descriptor */
	int64_t s0, s1, s2, s3; /* statvfs: before, held, before close, after close */
	samples *sm;
	int conclusive; /* statvfs showed the file arrive */
	int unlinked, removed;
} unlink_ctx;

enum { HOLDER = 0, DELETER = 1 };

/* The holder creates the 32 MiB file and keeps it open. */
static int create_and_hold(unlink_ctx *c)
{
	json_t *out = NULL;
	int rc;
	if ((rc = call(c->r, DELETER, "mkdirs", json_pack("{s:s}", "path", c->d), &out)))
		return rc;
	json_decref(out);
	if ((rc = avail(c->r, DELETER, c->dir, &c->s0)))
		return rc;
	if ((rc = call(c->r, HOLDER, "hold_open",
		       json_pack("{s:s,s:I,s:I,s:b}", "path", c->victim, "size", (json_int_t)FILE_BYTES,
				 "tag", (json_int_t)c->tag, "fsync", 1),
		       &out)))
		return rc;
	c->handle = json_integer_value(json_object_get(out, "handle"));
	json_decref(out);
	if ((rc = avail(c->r, DELETER, c->dir, &c->s1)))
		return rc;
	sample_add(c->sm, c->s1, SP_LINKED);
	/* Conclusive only when statvfs showed the file arrive. */
	c->conclusive = arrived(c->s0, c->s1);
	return 0;
}

/* The delete, as another client, and what each side sees while the file is
 * deleted but held: the listing (a silly-rename?), the holder's descriptor,
 * rmdir of the parent. */
static int delete_while_held(unlink_ctx *c)
{
	json_t *out = NULL, *prof = c->res->profile;
	int64_t x;
	int hidden, total, exists, rc;
	if ((rc = call(c->r, DELETER, "unlink", json_pack("{s:s}", "path", c->victim), &out)))
		return rc;
	const char *unlink_err = errof(out);
	json_object_set_new(prof, "unlink", json_string(unlink_err));
	c->unlinked = strcmp(unlink_err, "OK") == 0;
	json_decref(out);
	/* Right after the unlink: a server without open state (NFSv3) frees
	 * the space here already. */
	if ((rc = avail(c->r, DELETER, c->dir, &x)))
		return rc;
	sample_add(c->sm, x, SP_DELETED);
	json_t *names = json_array();
	if ((rc = list_hidden(c->r, DELETER, c->d, names, &hidden, &total, &exists))) {
		json_decref(names);
		return rc;
	}
	json_object_set_new(prof, "listing_while_open", names);
	kc_result_count(c->res, "hidden_while_open", hidden);
	const char *style = "none";
	for (size_t i = 0; i < json_array_size(names); i++) {
		const char *n = json_string_value(json_array_get(names, i));
		if (n && strncmp(n, ".nfs", 4) == 0)
			style = ".nfsXXXX (NFS client silly-rename)";
		else if (n && strncmp(n, ".fuse_hidden", 12) == 0)
			style = ".fuse_hiddenXXXX (libfuse hide)";
	}
	json_object_set_new(prof, "silly_rename", json_string(style));
	if ((rc = call(c->r, HOLDER, "handle_probe",
		       json_pack("{s:I,s:I,s:I}", "handle", c->handle, "size", (json_int_t)FILE_BYTES,
				 "tag", (json_int_t)c->tag),
		       &out)))
		return rc;
	json_object_set_new(prof, "holder", json_incref(out));
	json_decref(out);
	if ((rc = call(c->r, DELETER, "rmdir", json_pack("{s:s}", "path", c->d), &out)))
		return rc;
	json_object_set_new(prof, "rmdir_while_open", json_string(errof(out)));
	c->removed = strcmp(errof(out), "OK") == 0;
	json_decref(out);
	if ((rc = avail(c->r, DELETER, c->dir, &c->s2)))
		return rc;
	sample_add(c->sm, c->s2, SP_DELETED);
	return 0;
}

/* One try at removing the directory after the close, re-driving the delete
 * where it had failed, as kaas would. */
static int try_remove(unlink_ctx *c)
{
	json_t *out = NULL;
	int hidden, total, exists, rc;
	if ((rc = list_hidden(c->r, DELETER, c->d, NULL, &hidden, &total, &exists)))
		return rc;
	if (!exists) {
		c->removed = 1;
		return 0;
	}
	if (!c->unlinked && total > 0) {
		if ((rc = call(c->r, DELETER, "unlink", json_pack("{s:s}", "path", c->victim), &out)))
			return rc;
		c->unlinked = strcmp(errof(out), "OK") == 0 || strcmp(errof(out), "ENOENT") == 0;
		json_decref(out);
	}
	if ((rc = call(c->r, DELETER, "rmdir", json_pack("{s:s}", "path", c->d), &out)))
		return rc;
	json_object_set_new(c->res->profile, "rmdir_after_close", json_string(errof(out)));
	c->removed = strcmp(errof(out), "OK") == 0 || strcmp(errof(out), "ENOENT") == 0;
	json_decref(out);
	return 0;
}

/* The holder closes; within AFTER_CLOSE_MS the directory must become
 * removable and the space free: a rise over the level just before the
 * close (or before the unlink: an NFSv3 server has no open state and may
 * have freed it already). */
static int close_and_settle(unlink_ctx *c)
{
	json_t *out = NULL, *prof = c->res->profile;
	int rc;
	if ((rc = call(c->r, HOLDER, "close_handle", json_pack("{s:I}", "handle", c->handle), &out)))
		return rc;
	json_object_set_new(prof, "close", json_string(errof(out)));
	json_decref(out);
	int64_t t_close = ku_mono_ms(), deadline = t_close + AFTER_CLOSE_MS;
	int dense = 0;
	for (;;) {
		/* First the space: the first sample follows the close at once. */
		if (c->conclusive && !c->sm->freed) {
			if ((rc = avail(c->r, DELETER, c->dir, &c->s3)))
				return rc;
			sample_add(c->sm, c->s3, SP_CLOSED);
		}
		if (!c->removed && (rc = try_remove(c)))
			return rc;
		int space_done = !c->conclusive || c->sm->freed;
		if ((c->removed && space_done) || ku_mono_ms() >= deadline)
			break;
		if (c->r->interrupted && *c->r->interrupted)
			return -EINTR;
		if (space_done)
			usleep(50 * 1000);
		else
			pause_after_close(t_close, &dense);
	}
	json_object_set_new(prof, "settled_after_close_ms", json_integer(ku_mono_ms() - t_close));
	if (!json_object_get(prof, "rmdir_after_close"))
		json_object_set_new(prof, "rmdir_after_close",
				    json_string(strcmp(json_string_value(json_object_get(prof, "rmdir_while_open")), "OK") == 0
							? "removed while open"
							: "OK"));
	return 0;
}

/* The directory could still not be removed: say what keeps it busy (a
 * hidden name, or the deleted file itself come back: s3fs re-uploads it
 * when its holder writes). */
static int report_not_released(unlink_ctx *c)
{
	json_t *prof = c->res->profile;
	int hidden, total, exists, rc;
	kc_result_count(c->res, "rmdir_after_close_failed", 1);
	json_t *left = json_array();
	if ((rc = list_hidden(c->r, DELETER, c->d, left, &hidden, &total, &exists))) {
		json_decref(left);
		return rc;
	}
	if (hidden > 0)
		kc_result_count(c->res, "hidden_after_close", hidden);
	char names[300] = "";
	size_t used = 0;
	for (size_t i = 0; i < json_array_size(left) && used < sizeof(names) - 1; i++) {
		int w = snprintf(names + used, sizeof(names) - used, "%s%s", i ? " " : "",
				 json_string_value(json_array_get(left, i)));
		used = w < 0 ? used : used + (size_t)w;
	}
	for (size_t i = 0; c->unlinked && i < json_array_size(left); i++)
		if (strcmp(json_string_value(json_array_get(left, i)), "victim") == 0)
			kc_result_note(c->res, "the deleted file is back under its name after its holder wrote to it and closed it");
	json_object_set_new(prof, "listing_after_close", left);
	char detail[600];
	snprintf(detail, sizeof(detail),
		 "the directory still could not be removed %d s after the holder closed the file (rmdir: %s; it holds: %s)",
		 AFTER_CLOSE_MS / 1000, json_string_value(json_object_get(prof, "rmdir_after_close")),
		 names[0] ? names : "nothing");
	json_t *one = json_pack("[{s:s,s:i,s:i,s:s,s:[s,s,s,s]}]", "kind", "not_released", "actor",
				DELETER, "iteration", 1, "detail", detail, "trace",
				"actor 0: create, write 32 MiB, fsync, keep open",
				"actor 1: unlink, list, rmdir", "actor 0: read, write, fsync, fstat, close",
				"actor 1: unlink again if it had failed, rmdir, for 10 s");
	kc_result_add_anomalies(c->res, NULL, one, 1);
	json_decref(one);
	return 0;
}

/* Was the space given back?  Other writers can hide a free, or fake the
 * file's arrival: an attempt that missed the free is repeated with a fresh
 * file, and it takes two that saw the file arrive and not leave to call the
 * space lost (one that sees it leave ends it). */
static int judge_space(unlink_ctx *c)
{
	samples *sm = c->sm;
	json_t *prof = c->res->profile;
	json_object_set_new(prof, "space",
			    json_pack("{s:I,s:I,s:I,s:I,s:o,s:i,s:i,s:I}", "avail_before", (json_int_t)c->s0,
				      "avail_held", (json_int_t)c->s1, "avail_before_close",
				      (json_int_t)c->s2, "avail_after_close", (json_int_t)c->s3, "avail",
				      samples_json(sm), "linked_samples", sm->nlinked, "held_samples",
				      sm->nheld, "rise", (json_int_t)sm->rise));
	json_object_set_new(prof, "space_attempts", json_array());
	int attempts = 1, missed = c->conclusive && !sm->freed, rc;
	int64_t rise = sm->rise;
	while (missed > 0 && missed < 2 && !sm->freed && attempts < SPACE_ATTEMPTS) {
		int again = 0;
		attempts++;
		if ((rc = space_again(c->r, c->dir, attempts, c->tag, sm, &again, prof)))
			return rc;
		if (again && !sm->freed)
			missed++;
		if (sm->rise > rise)
			rise = sm->rise;
	}
	int conclusive = sm->freed || missed >= 2;
	kc_result_count(c->res, "space_attempts", attempts);
	if (!conclusive) {
		/* statvfs is missing, or did not see the file arrive: it cannot
		 * tell whether the space went away again. */
		kc_result_count(c->res, "space_unknown", 1);
		if (attempts > 1)
			kc_result_note(c->res, "space accounting is not conclusive here (statvfs showed the 32 MiB file arrive and stay in %d of %d attempts; others write to the volume too)",
				       missed, attempts);
		else
			kc_result_note(c->res, "space accounting is not conclusive here (statvfs %s)",
				       c->s0 < 0 ? "unavailable" : "did not show the 32 MiB file being written");
		return 0;
	}
	if (sm->freed)
		return 0;
	kc_result_count(c->res, "space_not_freed", 1);
	char t1[200], t2[200], t3[200], d[300];
	snprintf(t1, sizeof(t1), "actor 1: statvfs: %lld bytes available before the file", (long long)c->s0);
	snprintf(t2, sizeof(t2), "actor 1: statvfs: %lld with the 32 MiB file held open", (long long)c->s1);
	snprintf(t3, sizeof(t3), "actor 1: statvfs: %lld %d s after it was deleted and closed",
		 (long long)c->s3, AFTER_CLOSE_MS / 1000);
	snprintf(d, sizeof(d),
		 "free space did not rise by half the file's size within %d s of the close, in %d of %d attempts (largest rise %lld bytes)",
		 AFTER_CLOSE_MS / 1000, missed, attempts, (long long)rise);
	json_t *one = json_pack("[{s:s,s:i,s:i,s:s,s:[s,s,s]}]", "kind", "space_not_freed", "actor",
				DELETER, "iteration", 1, "detail", d, "trace", t1, t2, t3);
	kc_result_add_anomalies(c->res, NULL, one, 1);
	json_decref(one);
	return 0;
}

int kc_check_unlink(kc_run *r, kc_result *res, const char *dir)
{
	unlink_ctx c = {.r = r, .res = res, .dir = dir, .s3 = -1};
	snprintf(c.d, sizeof(c.d), "%s/held", dir);
	snprintf(c.victim, sizeof(c.victim), "%s/victim", c.d);
	c.tag = kc_run_tag(r, KC_CHK_UNLINK, 0, "victim");
	if (!(c.sm = calloc(1, sizeof(*c.sm)))) {
		kc_result_error(res, "out of memory");
		return -ENOMEM;
	}
	int rc;
	kc_run_variant(r, "hold");
	res->iterations = 1;
	json_object_set_new(res->profile, "holder_actor", json_integer(HOLDER));
	json_object_set_new(res->profile, "deleter_actor", json_integer(DELETER));
	json_object_set_new(res->profile, "file_bytes", json_integer(FILE_BYTES));
	static const char *const zero[] = {"hidden_while_open", "hidden_after_close",
					   "rmdir_after_close_failed", "space_not_freed",
					   "space_unknown", "space_attempts"};
	for (size_t k = 0; k < sizeof(zero) / sizeof(zero[0]); k++)
		kc_result_count(res, zero[k], 0); /* every counter is in the report */
	if ((rc = create_and_hold(&c)) || (rc = delete_while_held(&c)) ||
	    (rc = close_and_settle(&c)))
		goto out;
	if (!c.removed && (rc = report_not_released(&c)))
		goto out;
	if ((rc = judge_space(&c)))
		goto out;
	r->manual = 1;
	r->manual_done = 1;
out:
	free(c.sm);
	if (rc && rc != -EINTR)
		kc_result_error(res, "%s", r->drv.err);
	return rc;
}
