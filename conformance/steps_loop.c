/*
 * steps_loop.c — the looping steps of the rename check.  They run inside the
 * actor until their iteration count or a "stop", so the driver exchanges a
 * handful of messages per variant, not per operation.
 *
 *   rename_writer  write record N to a temp name, fsync, (optionally hold the
 *                  current target open), rename over the target; with
 *                  until_stop it does at least "iterations" renames and
 *                  then goes on until "stop", so that its readers observe
 *                  renames in flight for as long as they read
 *   rename_reader  open + read + verify the target, over and over until
 *                  "stop"; with "observations" N the stop waits until it
 *                  has made N classified reads (the check's detection
 *                  power is sized in them) or N * KC_READER_ATTEMPTS_PER_OBS
 *                  attempts (ESTALE on every open); without, after "stop"
 *                  it goes on until it has verified
 *                  min_ok reads or made min_reads attempts (or grace_ms
 *                  passed), so that a reader the scheduler started late
 *                  still verifies something instead of ending with nothing
 *   dir_renamer    rename a directory of K files back and forth (with
 *                  until_stop: at least "iterations" times, then until stop)
 *   dir_lister     list both names of that directory, over and over, at
 *                  least "iterations" times and then until "stop" (with
 *                  until_stop false: exactly "iterations" rounds)
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/actor.h"
#include "conformance/kc.h"
#include "conformance/payload.h"
#include "util/clock.h"

#define MAX_RECORD (64 * 1024)

/* errnos[op][ERRNAME] += 1: every failed operation, classified by errno, so
 * the report tells ESTALE from EPERM from EBUSY from ENOENT-in-read. */
static void errno_add(json_t *errnos, const char *op, int rc)
{
	json_t *o = json_object_get(errnos, op);
	if (!o) {
		o = json_object();
		json_object_set_new(errnos, op, o);
	}
	kc_count_add(o, kc_errname(rc), 1);
}

typedef struct loop_args {
	const char *dir, *target;
	int64_t iterations, tag, min, max, seed;
	char path[600];
} loop_args;

static int get_loop_args(kc_step *st, loop_args *a)
{
	int rc = kc_arg_path(st, "dir", &a->dir);
	if (!rc)
		rc = kc_arg_path(st, "target", &a->target);
	if (!rc)
		rc = kc_arg_int(st, "iterations", 100, 0, 100000000, &a->iterations);
	if (!rc)
		rc = kc_arg_int(st, "tag", 0, 0, INT64_MAX, &a->tag);
	if (!rc)
		rc = kc_arg_int(st, "min", 64, KC_PAYLOAD_HDR, MAX_RECORD, &a->min);
	if (!rc)
		rc = kc_arg_int(st, "max", 8192, KC_PAYLOAD_HDR, MAX_RECORD, &a->max);
	if (!rc)
		rc = kc_arg_int(st, "seed", 1, 0, INT64_MAX, &a->seed);
	if (rc)
		return rc;
	if (a->max < a->min)
		a->max = a->min;
	if (sub_join(a->path, sizeof(a->path), a->dir, a->target))
		return kc_step_fail(st, -ENAMETOOLONG, "path too long");
	return 0;
}

/* Writes record seq to tmp (created exclusively), fsyncs and closes it. */
static int write_record(sub_vfs *v, const char *tmp, char *buf, size_t len, uint64_t tag,
			uint64_t seq, const char **what)
{
	sub_file *f = NULL;
	kc_payload_fill(buf, len, tag, seq);
	*what = "create temp";
	int rc = sub_open(v, tmp, O_WRONLY | O_CREAT | O_EXCL, 0644, &f);
	if (rc)
		return rc;
	*what = "write temp";
	rc = sub_pwrite_full(f, buf, len, 0);
	if (!rc) {
		*what = "fsync temp";
		rc = sub_fsync(f);
	}
	int cr = sub_close(f);
	if (!rc && cr) {
		*what = "close temp";
		rc = cr;
	}
	if (rc)
		sub_unlink(v, tmp);
	return rc;
}

int kc_step_rename_writer(kc_step *st)
{
	loop_args a;
	int rc = get_loop_args(st, &a);
	if (rc)
		return rc;
	int hold = kc_arg_bool(st, "hold", 0);
	int until_stop = kc_arg_bool(st, "until_stop", 0);
	sub_vfs *v = st->as->vfs;
	kc_rng rng = {(uint64_t)a.seed};
	char *buf = malloc(MAX_RECORD);
	if (!buf)
		return kc_step_fail(st, -ENOMEM, "out of memory");
	char tmp[700];
	const char *what;
	/* Record 0 is in place before anyone reads. */
	snprintf(tmp, sizeof(tmp), "%s.tmp.0", a.path);
	rc = write_record(v, tmp, buf, (size_t)a.min, (uint64_t)a.tag, 0, &what);
	if (!rc)
		rc = sub_rename(v, tmp, a.path);
	if (rc) {
		free(buf);
		return kc_step_fail(st, rc, "set-up of %s: %s", a.path, sub_strerror(rc));
	}
	if ((rc = kc_step_barrier(st))) {
		free(buf);
		return rc;
	}
	json_t *counts = json_object(), *anomalies = json_array(), *errnos = json_object();
	kc_trace tr;
	kc_trace_init(&tr, st->t0_ns);
	int64_t i, bad = 0, final_seq = 0;
	for (i = 1;; i++) {
		/* With until_stop the stop waits in the channel until the
		 * minimum is done; without, it ends the loop at once. */
		if (until_stop ? i > a.iterations && kc_step_should_stop(st)
			       : i > a.iterations || kc_step_should_stop(st))
			break;
		size_t len = (size_t)kc_rng_range(&rng, (uint64_t)a.min, (uint64_t)a.max);
		snprintf(tmp, sizeof(tmp), "%s.tmp.%lld", a.path, (long long)i);
		rc = write_record(v, tmp, buf, len, (uint64_t)a.tag, (uint64_t)i, &what);
		kc_trace_add(&tr, "write seq %lld (%zu bytes) to %s: %s", (long long)i, len, tmp,
			     kc_errname(rc));
		if (rc) {
			errno_add(errnos, what, rc);
			kc_count_add(counts, "write_errors", 1);
			kc_anomaly_add(anomalies, st, "write_error", i, &tr, "%s %s: %s", what, tmp,
				       kc_errname(rc));
			bad++;
			continue;
		}
		sub_file *held = NULL;
		if (hold) {
			int hr = sub_open(v, a.path, O_RDONLY, 0, &held);
			kc_trace_add(&tr, "hold %s open: %s", a.path, kc_errname(hr));
			if (hr) {
				errno_add(errnos, "hold open", hr);
				kc_count_add(counts, "hold_errors", 1);
				kc_anomaly_add(anomalies, st, "hold_error", i, &tr,
					       "opening the current target to hold it: %s", kc_errname(hr));
				bad++;
			}
		}
		rc = sub_rename(v, tmp, a.path);
		kc_trace_add(&tr, "rename %s -> %s: %s", tmp, a.path, kc_errname(rc));
		if (rc) {
			errno_add(errnos, "rename", rc);
			kc_count_add(counts, "rename_errors", 1);
			kc_anomaly_add(anomalies, st, "rename_error", i, &tr,
				       "rename over the target failed: %s", kc_errname(rc));
			sub_unlink(v, tmp);
			bad++;
		} else {
			kc_count_add(counts, "renames", 1);
			final_seq = i;
		}
		if (held)
			sub_close(held);
		kc_step_progress(st, i, bad);
	}
	kc_count_add(counts, "renames", 0);
	kc_count_add(counts, "rename_errors", 0);
	kc_count_add(counts, "write_errors", 0);
	kc_count_add(counts, "hold_errors", 0);
	json_object_set_new(st->result, "errnos", errnos);
	json_object_set_new(st->result, "counts", counts);
	json_object_set_new(st->result, "bad", json_integer(bad));
	json_object_set_new(st->result, "anomalies", anomalies);
	json_object_set_new(st->result, "last_seq", json_integer(i - 1));
	/* What the target holds now: the record of the last rename that
	 * succeeded, which every reader must converge to. */
	json_object_set_new(st->result, "final_seq", json_integer(final_seq));
	free(buf);
	return 0;
}

int kc_step_rename_reader(kc_step *st)
{
	loop_args a;
	int64_t min_ok, min_reads, grace_ms, observations;
	int rc = get_loop_args(st, &a);
	if (!rc)
		rc = kc_arg_int(st, "min_ok", KC_READER_MIN_OK, 0, 1000000, &min_ok);
	if (!rc)
		rc = kc_arg_int(st, "min_reads", KC_READER_MIN_READS, 0, 100000000, &min_reads);
	if (!rc)
		rc = kc_arg_int(st, "grace_ms", KC_READER_GRACE_MS, 0, 3600 * 1000, &grace_ms);
	if (!rc)
		rc = kc_arg_int(st, "observations", 0, 0, 100000000, &observations);
	if (rc)
		return rc;
	if ((rc = kc_step_barrier(st)))
		return rc;
	sub_vfs *v = st->as->vfs;
	/* ESTALE answers are retried and not observations; a reader that gets
	 * nothing else still ends, with its attempts as the evidence. */
	int64_t max_attempts = observations * KC_READER_ATTEMPTS_PER_OBS;
	char *buf = malloc(MAX_RECORD + 1);
	if (!buf)
		return kc_step_fail(st, -ENOMEM, "out of memory");
	json_t *counts = json_object(), *anomalies = json_array(), *errnos = json_object();
	static const char *const keys[] = {"reads", "ok", "versions", "reads_after_stop",
					   "missing", "estale_open", "estale_read", "read_enoent",
					   "empty", "short", "long", "torn", "backwards", "errors"};
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		kc_count_add(counts, keys[k], 0);
	kc_trace tr;
	kc_trace_init(&tr, st->t0_ns);
	int64_t n = 0, bad = 0, ok = 0, stop_ms = -1;
	uint64_t last = 0;
	/* The writer may be done before this reader first ran (a loaded
	 * machine, a slow client): the stop then waits until this reader has
	 * evidence of its own, verified reads or, when every attempt fails
	 * (ESTALE on each open, say), enough attempts to say so. */
	for (;;) {
		if (observations > 0) {
			/* Sized in observations: a stop waits until this reader
			 * has made its own (or its attempts ran out: ESTALE on
			 * every open), so its figures never come from when the
			 * scheduler let it run. */
			if (kc_step_should_stop(st) &&
			    (n >= max_attempts ||
			     json_integer_value(json_object_get(counts, "reads")) >= observations))
				break;		} else if (kc_step_should_stop(st)) {
			if (stop_ms < 0)
				stop_ms = ku_mono_ms();
			if (ok >= min_ok || n >= min_reads || ku_mono_ms() - stop_ms >= grace_ms)
				break;
		}
		n++;
		sub_file *f = NULL;
		rc = sub_open(v, a.path, O_RDONLY, 0, &f);
		kc_trace_add(&tr, "open %s: %s", a.path, kc_errname(rc));
		if (rc)
			errno_add(errnos, "open", rc);
		if (rc == -ESTALE) {
			kc_count_add(counts, "estale_open", 1);
			continue;
		}
		kc_count_add(counts, "reads", 1);
		if (stop_ms >= 0)
			kc_count_add(counts, "reads_after_stop", 1);
		if (rc) {
			const char *kind = rc == -ENOENT ? "missing" : "errors";
			kc_count_add(counts, kind, 1);
			kc_anomaly_add(anomalies, st, rc == -ENOENT ? "missing" : "open_error", n, &tr,
				       "open of the target failed: %s", kc_errname(rc));
			bad++;
			kc_step_progress(st, n, bad);
			continue;
		}
		size_t got = 0;
		for (;;) {
			ssize_t r = sub_pread(f, buf + got, MAX_RECORD + 1 - got, got);
			if (r <= 0) {
				rc = (int)r;
				break;
			}
			got += (size_t)r;
			if (got > MAX_RECORD)
				break;
		}
		sub_close(f);
		kc_trace_add(&tr, "read %zu bytes: %s", got, kc_errname(rc));
		if (rc)
			errno_add(errnos, "read", rc);
		if (rc == -ESTALE) {
			kc_count_add(counts, "estale_read", 1);
			continue;
		}
		if (rc) {
			const char *kind = rc == -ENOENT ? "read_enoent" : "errors";
			kc_count_add(counts, kind, 1);
			kc_anomaly_add(anomalies, st, rc == -ENOENT ? "read_enoent" : "read_error", n,
				       &tr, "read after a successful open failed: %s", kc_errname(rc));
			bad++;
			continue;
		}
		uint64_t seq = 0;
		uint32_t len = 0;
		int pl = kc_payload_check(buf, got, (uint64_t)a.tag, &seq, &len);
		if (pl != KC_PL_OK) {
			kc_count_add(counts, kc_payload_status_name(pl), 1);
			kc_anomaly_add(anomalies, st, kc_payload_status_name(pl), n, &tr,
				       "read %zu bytes%s: not one complete version", got,
				       pl == KC_PL_SHORT || pl == KC_PL_LONG ? " of a record" : "");
			bad++;
		} else if (seq < last) {
			kc_count_add(counts, "backwards", 1);
			kc_anomaly_add(anomalies, st, "backwards", n, &tr,
				       "read version %llu after having read %llu",
				       (unsigned long long)seq, (unsigned long long)last);
			bad++;
		} else {
			kc_count_add(counts, "ok", 1);
			/* A version this reader had not seen yet (they only go up). */
			if (ok == 0 || seq != last)
				kc_count_add(counts, "versions", 1);
			ok++;
			last = seq;
		}
		kc_step_progress(st, n, bad);
	}
	json_object_set_new(st->result, "counts", counts);
	json_object_set_new(st->result, "bad", json_integer(bad));
	json_object_set_new(st->result, "anomalies", anomalies);
	json_object_set_new(st->result, "last_seq", json_integer((json_int_t)last));
	json_object_set_new(st->result, "errnos", errnos);
	free(buf);
	return 0;
}

typedef struct dir_args {
	const char *dir, *a, *b;
	int64_t files, iterations;
	char pa[600], pb[600];
} dir_args;

static int get_dir_args(kc_step *st, dir_args *d)
{
	int rc = kc_arg_path(st, "dir", &d->dir);
	if (!rc)
		rc = kc_arg_path(st, "a", &d->a);
	if (!rc)
		rc = kc_arg_path(st, "b", &d->b);
	if (!rc)
		rc = kc_arg_int(st, "files", 8, 1, 1000, &d->files);
	if (!rc)
		rc = kc_arg_int(st, "iterations", 100, 0, 100000000, &d->iterations);
	if (rc)
		return rc;
	if (sub_join(d->pa, sizeof(d->pa), d->dir, d->a) || sub_join(d->pb, sizeof(d->pb), d->dir, d->b))
		return kc_step_fail(st, -ENAMETOOLONG, "path too long");
	return 0;
}

int kc_step_dir_renamer(kc_step *st)
{
	dir_args d;
	int rc = get_dir_args(st, &d);
	if (rc)
		return rc;
	sub_vfs *v = st->as->vfs;
	/* Set-up: directory a holds files f0..f(K-1). */
	if ((rc = sub_mkdir(v, d.pa, 0755)))
		return kc_step_fail(st, rc, "mkdir %s: %s", d.pa, sub_strerror(rc));
	for (int64_t i = 0; i < d.files; i++) {
		char p[700], body[32];
		snprintf(p, sizeof(p), "%s/f%lld", d.pa, (long long)i);
		int n = snprintf(body, sizeof(body), "file %lld\n", (long long)i);
		if ((rc = sub_write_atomic(v, p, body, (size_t)n)))
			return kc_step_fail(st, rc, "create %s: %s", p, sub_strerror(rc));
	}
	if ((rc = sub_fsync_dir(v, d.dir)))
		return kc_step_fail(st, rc, "fsync %s: %s", d.dir, sub_strerror(rc));
	if ((rc = kc_step_barrier(st)))
		return rc;
	json_t *counts = json_object(), *anomalies = json_array(), *errnos = json_object();
	kc_count_add(counts, "renames", 0);
	kc_count_add(counts, "rename_errors", 0);
	kc_trace tr;
	kc_trace_init(&tr, st->t0_ns);
	int at_a = 1;
	int until_stop = kc_arg_bool(st, "until_stop", 0);
	int64_t i, bad = 0;
	for (i = 1;; i++) {
		if (until_stop ? i > d.iterations && kc_step_should_stop(st)
			       : i > d.iterations || kc_step_should_stop(st))
			break;
		const char *from = at_a ? d.pa : d.pb, *to = at_a ? d.pb : d.pa;
		rc = sub_rename(v, from, to);
		kc_trace_add(&tr, "rename %s -> %s: %s", from, to, kc_errname(rc));
		if (rc) {
			errno_add(errnos, "rename", rc);
			kc_count_add(counts, "rename_errors", 1);
			kc_anomaly_add(anomalies, st, "rename_error", i, &tr,
				       "directory rename failed: %s", kc_errname(rc));
			bad++;
		} else {
			kc_count_add(counts, "renames", 1);
			at_a = !at_a;
		}
		kc_step_progress(st, i, bad);
	}
	json_object_set_new(st->result, "counts", counts);
	json_object_set_new(st->result, "bad", json_integer(bad));
	json_object_set_new(st->result, "anomalies", anomalies);
	json_object_set_new(st->result, "final", json_string(at_a ? d.a : d.b));
	json_object_set_new(st->result, "errnos", errnos);
	return 0;
}

int kc_listing_complete(char *const *names, size_t n, int64_t files)
{
	if ((int64_t)n != files)
		return 0;
	char *seen = calloc((size_t)files + 1, 1);
	if (!seen)
		return 0;
	int ok = 1;
	for (size_t i = 0; i < n && ok; i++) {
		char *end;
		const char *d = names[i] + 1;
		/* f0..f(K-1) exactly as written: no sign, no leading zero. */
		if (names[i][0] != 'f' || *d < '0' || *d > '9' || (d[0] == '0' && d[1])) {
			ok = 0;
			break;
		}
		long long k = strtoll(d, &end, 10);
		/* A name listed twice hides a missing one (readdir during a
		 * copy can repeat entries). */
		if (*end || k < 0 || k >= files || seen[k])
			ok = 0;
		else
			seen[k] = 1;
	}
	free(seen);
	return ok;
}

int kc_step_dir_lister(kc_step *st)
{
	dir_args d;
	int rc = get_dir_args(st, &d);
	if (rc)
		return rc;
	if ((rc = kc_step_barrier(st)))
		return rc;
	sub_vfs *v = st->as->vfs;
	json_t *counts = json_object(), *anomalies = json_array(), *errnos = json_object();
	static const char *const keys[] = {"rounds", "listings", "complete", "partial", "absent",
					   "both_present", "neither_present", "estale", "errors"};
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		kc_count_add(counts, keys[k], 0);
	kc_trace tr;
	kc_trace_init(&tr, st->t0_ns);
	int64_t n = 0, bad = 0;
	int until_stop = kc_arg_bool(st, "until_stop", 1);
	/* The stop waits in the channel until the minimum is done. */
	while (n < d.iterations || (until_stop && !kc_step_should_stop(st))) {
		if (!until_stop && kc_step_should_stop(st))
			break;
		n++;
		kc_count_add(counts, "rounds", 1);
		int present = 0;
		for (int side = 0; side < 2; side++) {
			const char *p = side ? d.pb : d.pa;
			char **names = NULL;
			size_t cnt = 0;
			rc = sub_list(v, p, &names, &cnt);
			kc_trace_add(&tr, "list %s: %s, %zu entries", p, kc_errname(rc), rc ? 0 : cnt);
			if (rc && rc != -ENOENT)
				errno_add(errnos, "list", rc);
			if (rc == -ENOENT) {
				kc_count_add(counts, "absent", 1);
				continue;
			}
			if (rc == -ESTALE) {
				kc_count_add(counts, "estale", 1);
				continue;
			}
			if (rc) {
				kc_count_add(counts, "errors", 1);
				kc_anomaly_add(anomalies, st, "list_error", n, &tr, "listing %s: %s", p,
					       kc_errname(rc));
				bad++;
				continue;
			}
			present++;
			kc_count_add(counts, "listings", 1);
			if (kc_listing_complete(names, cnt, d.files)) {
				kc_count_add(counts, "complete", 1);
			} else {
				kc_count_add(counts, "partial", 1);
				kc_anomaly_add(anomalies, st, "partial", n, &tr,
					       "%s listed %zu entries, expected exactly f0..f%lld", p, cnt,
					       (long long)(d.files - 1));
				bad++;
			}
			sub_names_free(names, cnt);
		}
		/* Both or neither name present are artefacts of listing the two
		 * names one after the other; counted, never a violation. */
		if (present == 2)
			kc_count_add(counts, "both_present", 1);
		else if (present == 0)
			kc_count_add(counts, "neither_present", 1);
		kc_step_progress(st, n, bad);
	}
	json_object_set_new(st->result, "counts", counts);
	json_object_set_new(st->result, "bad", json_integer(bad));
	json_object_set_new(st->result, "anomalies", anomalies);
	json_object_set_new(st->result, "errnos", errnos);
	return 0;
}
