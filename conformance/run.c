/*
 * run.c — `kaas-conform check`: validate the input, make the scratch
 * directory, start the actors, run the checks, clean up (also on SIGINT),
 * write the reports and, on PASS, the stamp.  And `stamp-verify`.
 *
 * Nothing is created on the volume before every input has been validated,
 * and the only thing a run leaves behind is the stamp it was asked for: the
 * scratch directory is removed on every path out except SIGKILL.  When the
 * volume refuses to remove it, the report says so (verdict ERROR).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "conformance/agent.h"
#include "conformance/judge.h"
#include "conformance/preflight.h"
#include "conformance/run.h"
#include "conformance/scratch.h"
#include "qualify/stamp.h"
#include "util/clock.h"

volatile sig_atomic_t kc__interrupted; /* set by SIGINT/SIGTERM (marker.c reads it) */
static int scratch_intact(kc_run *r);

static void on_signal(int sig)
{
	(void)sig;
	kc__interrupted = 1;
}

static void install_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a blocking poll/wait returns EINTR and sees the flag. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static int fail_usage(const char *msg)
{
	fprintf(stderr, "kaas-conform: %s\n", msg);
	return KC_EXIT_ERROR;
}

typedef int (*check_fn)(kc_run *, kc_result *, const char *);
static const check_fn check_fns[KC_NCHECKS] = {
	[KC_CHK_PREFLIGHT] = kc_check_preflight, [KC_CHK_RENAME] = kc_check_rename,
	[KC_CHK_EXCL] = kc_check_excl,		 [KC_CHK_CTO] = kc_check_cto,
	[KC_CHK_UNLINK] = kc_check_unlink,	 [KC_CHK_FSYNC] = kc_check_fsync,
	[KC_CHK_RCOPY] = kc_check_rcopy, [KC_CHK_PERF] = kc_check_perf,
	[KC_CHK_ENOSPC] = kc_check_enospc,
};

static void progress_line(void *arg)
{
	kc_run *r = arg;
	if (!r->live || r->cur < 0)
		return;
	int64_t done, anom;
	if (r->manual) {
		done = r->manual_done;
		anom = r->manual_anomalies;
	} else {
		kc_drv_progress(&r->drv, &done, &anom);
	}
	double secs = (double)(ku_mono_ms() - r->variant_t0_ms) / 1000.0;
	fprintf(r->out, "\r\033[K  %-12s %-8s %9lld ops %8.0f/s  anomalies %lld",
		kc_check_name(r->cur), r->variant, (long long)done, secs > 0 ? (double)done / secs : 0.0,
		(long long)anom);
	fflush(r->out);
}

/* Removes the scratch tree.  A silly-renamed file of a just-killed actor can
 * keep it busy for a moment, so this retries for a few seconds. */
static int remove_scratch(kc_run *r)
{
	if (!r->scratch[0] || !r->vfs)
		return 0;
	int rc = 0;
	for (int i = 0; i < 100; i++) {
		rc = sub_remove_tree(r->vfs, r->scratch);
		if (rc == 0 || rc == -ENOENT)
			return 0;
		usleep(50 * 1000);
	}
	return rc;
}

static void count_clients(kc_run *r)
{
	r->clients = r->hosts = 0;
	for (int i = 0; i < r->drv.n; i++) {
		const char *c = json_string_value(json_object_get(r->drv.a[i].hello, "client"));
		const char *h = json_string_value(json_object_get(r->drv.a[i].hello, "host_id"));
		if (!h)
			h = json_string_value(json_object_get(r->drv.a[i].hello, "host"));
		int newc = 1, newh = 1;
		for (int k = 0; k < i; k++) {
			const char *c2 = json_string_value(json_object_get(r->drv.a[k].hello, "client"));
			const char *h2 = json_string_value(json_object_get(r->drv.a[k].hello, "host_id"));
			if (!h2)
				h2 = json_string_value(json_object_get(r->drv.a[k].hello, "host"));
			if (c && c2 && strcmp(c, c2) == 0)
				newc = 0;
			if (h && h2 && strcmp(h, h2) == 0)
				newh = 0;
		}
		r->clients += newc;
		r->hosts += newh;
	}
}

static void now_rfc3339(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	char base[32];
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%.20s.%03dZ", base, (int)(ts.tv_nsec / 1000000));
}

int kc_run_exit_code(const kc_run *r)
{
	if (r->verdict == KC_UNPROVEN && r->o->require_power_loss)
		return KC_EXIT_UNPROVEN;
	return kc_verdict_exit_code(r->verdict);
}

json_t *kc_run_durability(const kc_run *r)
{
	const kc_result *f = &r->res[KC_CHK_FSYNC];
	json_t *d = NULL;
	if (f->ran && f->profile)
		d = json_deep_copy(json_object_get(f->profile, "durability"));
	if (!d)
		d = json_pack("{s:b,s:s,s:s}", "proven", 0, "by", "none", "statement",
			      f->ran ? "not established: the fsync check did not complete"
				     : "not checked: the fsync check did not run");
	json_object_set_new(d, "required", json_boolean(r->o->require_power_loss));
	return d;
}

json_t *kc_stamp_build(const kc_run *r)
{
	json_t *checks = json_array();
	for (int k = 0; k < r->nran; k++) {
		const kc_result *res = &r->res[r->order[k]];
		json_array_append_new(checks, json_pack("{s:s,s:s,s:s}", "name", kc_check_name(res->check),
							"verdict", kc_verdict_name(res->verdict),
							"summary", res->summary));
	}
	char host[256] = "";
	gethostname(host, sizeof(host));
	char at[40];
	now_rfc3339(at, sizeof(at));
	/* The actors as the report records them (kind, per-actor list), taken
	 * while they were alive. */
	json_t *actors = r->actors ? json_deep_copy(r->actors) : kc_report_actors(r);
	json_t *stamp = json_pack("{s:s,s:i,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:I,s:I,s:s,s:I,s:s,s:s}",
			 "kind", KC_STAMP_KIND, "schema_version", KC_STAMP_SCHEMA, "tool", "kaas-conform",
			 "tool_version", KC_VERSION, "verdict", kc_verdict_name(r->verdict), "volume",
			 kq_identity_json(&r->ident), "durability", kc_run_durability(r), "actors", actors,
			 "checks", checks, "seed",
			 (json_int_t)r->seed, "iterations", (json_int_t)r->o->iterations,
			 "qualified_at", at, "qualified_at_ms", (json_int_t)ku_wall_ms(), "host", host,
			 "url", r->o->url);
	/* A cluster directory on another volume: its identity and preflight
	 * verdict, which the broker's gate matches against the directory it is
	 * given (kq_stamp_check_cluster). */
	if (stamp && r->cluster_preflight)
		json_object_set_new(stamp, "cluster_dir", json_deep_copy(r->cluster_preflight));
	/* What the perf check measured, when it ran: the operator's record of
	 * the speed the volume was qualified at. */
	const kc_result *perf = &r->res[KC_CHK_PERF];
	if (stamp && perf->ran && perf->verdict != KC_ERROR)
		json_object_set_new(stamp, "perf",
				    json_pack("{s:s,s:O,s:O,s:O}", "verdict", kc_verdict_name(perf->verdict),
					      "counts", perf->counts, "append",
					      json_object_get(perf->profile, "append") ?: json_null(),
					      "meta", json_object_get(perf->profile, "meta") ?: json_null()));
	return stamp;
}

/* Writes the stamp into --cluster-dir (its own substrate URL) or into
 * <URL>/__cluster through the driver's handle. */
static int write_stamp(kc_run *r, char *where, size_t wlen, char *err, size_t errlen)
{
	json_t *stamp = kc_stamp_build(r);
	int rc;
	if (r->o->cluster_dir) {
		sub_vfs *cv = NULL;
		char e[512] = "";
		rc = sub_open_url(r->o->cluster_dir, &cv, e, sizeof(e));
		if (rc) {
			snprintf(err, errlen, "--cluster-dir: %s", e);
		} else {
			rc = kq_stamp_write(cv, "", stamp);
			if (rc)
				snprintf(err, errlen, "writing the stamp into %s: %s", r->o->cluster_dir,
					 sub_strerror(rc));
			snprintf(where, wlen, "%s/%s", r->o->cluster_dir, KC_STAMP_FILE);
		}
		sub_destroy(cv);
	} else {
		rc = kq_stamp_write(r->vfs, "__cluster", stamp);
		if (rc)
			snprintf(err, errlen, "writing the stamp into %s/__cluster: %s", r->o->url,
				 sub_strerror(rc));
		snprintf(where, wlen, "%s/__cluster/%s", r->o->url, KC_STAMP_FILE);
	}
	json_decref(stamp);
	return rc;
}

static void print_header(const kc_run *r)
{
	char kind[128];
	kc_fs_kind(&r->ident, kind, sizeof(kind));
	FILE *o = r->out;
	fprintf(o, "kaas-conform %s: %s\n", KC_VERSION, r->o->url);
	fprintf(o, "  volume  %s%s%s%s%s\n", kind, r->ident.source[0] ? " from " : "", r->ident.source,
	       r->ident.mountpoint[0] ? " on " : "", r->ident.mountpoint);
	fprintf(o, "  actors  %d %s, %d distinct client%s, %d host%s%s\n", r->drv.n,
	       r->o->nagents ? "agents" : "processes", r->clients, r->clients == 1 ? "" : "s",
	       r->hosts, r->hosts == 1 ? "" : "s",
	       r->clients < r->drv.n ? " (actors share a client: cross-client behaviour is not exercised)"
				     : "");
	fprintf(o, "  seed    %" PRIu64 ", %lld iterations\n", r->seed, (long long)r->o->iterations);
	fflush(o);
}

/* A sample smaller than the detection target needs (--iterations below
 * it, or observers that could not make theirs) is said in words. */
static void note_power(const kc_run *r, kc_result *res)
{
	if (!res->observation || res->verdict == KC_ERROR)
		return;
	double p = kc_power_of(res->observations, r->o->detect_rate);
	if (p >= r->o->detect_power)
		return;
	kc_result_note(res,
		       "detection power %.2f%% is below the %g%% target: %lld observations by the observer with the fewest, %lld needed to catch an anomaly in %g%% of them",
		       p * 100, r->o->detect_power * 100, (long long)res->observations,
		       (long long)kc_power_needed(r->o->detect_rate, r->o->detect_power),
		       r->o->detect_rate * 100);
}

/* A fsync check that already failed with a loss after its crash command
 * may find the whole scratch directory gone (a server whose storage is
 * RAM loses the export): that is the same loss, and the FAIL stands. */
static int crash_took_scratch(int id, const kc_result *res)
{
	return id == KC_CHK_FSYNC && res->verdict == KC_FAIL && kc_result_get(res, "crash_cmd") > 0 &&
	       kc_result_get(res, "crash_lost") > 0;
}

static void run_checks(kc_run *r)
{
	int scratch_gone = 0;
	for (int id = 0; id < KC_NCHECKS; id++) {
		if (!(r->o->checks & (1u << id)))
			continue;
		if (kc__interrupted || scratch_gone)
			return;
		kc_result *res = &r->res[id];
		kc_result_init(res, id);
		res->ran = 1;
		r->order[r->nran++] = id;
		r->cur = id;
		kc_run_variant(r, "");
		char dir[128];
		snprintf(dir, sizeof(dir), "%s/%s", r->scratch, kc_check_name(id));
		int64_t t0 = ku_mono_ms();
		int rc = sub_mkdir(r->vfs, dir, 0755);
		if (rc)
			kc_result_error(res, "mkdir %s: %s", dir, sub_strerror(rc));
		else
			rc = check_fns[id](r, res, dir);
		res->duration_ms = ku_mono_ms() - t0;
		if (rc == -EINTR || kc__interrupted) {
			r->cur = -1;
			return;
		}
		kc_judge_result(res, r->seed);
		/* What the check saw means nothing about the filesystem when its
		 * directory was taken away under it: the run's error, not a verdict. */
		int src = scratch_intact(r);
		if (src == -ENOENT && crash_took_scratch(id, res)) {
			/* The directories were fsynced up to the root before the
			 * crash command: losing them is the loss already counted,
			 * not an outside interference.  Nothing later can run. */
			kc_result_note(res,
				       "the crash command took the scratch directory %s/%s with it: the directory entries fsynced before the crash were lost too; later checks were not run",
				       r->ident.root, r->scratch);
			scratch_gone = 1;
		} else if (src) {
			kc_result_error(res,
					"the scratch directory %s/%s %s during the check (removed or replaced by something other than this run); no verdict on the volume",
					r->ident.root, r->scratch,
					src == -ENOENT ? "vanished" : "became unreadable");
			if (src != -ENOENT)
				kc_result_note(res, "reading its owner record: %s", sub_strerror(src));
		}
		note_power(r, res);
		/* Between checks, so that one check's leftovers (a silly-renamed
		 * file) cannot disturb the next. */
		int crc = sub_remove_tree(r->vfs, dir);
		if (crc && crc != -ENOENT)
			kc_result_note(res, "could not remove its directory at once: %s", sub_strerror(crc));
		if (r->live) {
			fprintf(r->out, "\r\033[K  %-12s %-8s %6.1fs  %s\n", kc_check_name(id),
				kc_verdict_name(res->verdict), (double)res->duration_ms / 1000.0,
				res->summary);
			fflush(r->out);
		}
		r->cur = -1;
		if (res->verdict == KC_ERROR) {
			snprintf(r->error, sizeof(r->error), "%s: %s", kc_check_name(id), res->error);
			return;
		}
	}
}

/* Every input validated before anything is created on the volume: the
 * URL and its identity, each --mount, --cluster-dir, and that the report
 * files can be written.  0, or -errno with err set. */
static int validate_inputs(kc_run *r, char *err, size_t errlen)
{
	const kc_opts *o = r->o;
	int rc = sub_open_url(o->url, &r->vfs, err, errlen);
	if (rc)
		return rc;
	if ((rc = sub_identity_of(r->vfs, &r->ident))) {
		snprintf(err, errlen, "%s: cannot identify the volume: %s", o->url, sub_strerror(rc));
		return rc;
	}
	for (int i = 0; i < o->nmounts + (o->cluster_dir != NULL); i++) {
		const char *url = i < o->nmounts ? o->mounts[i] : o->cluster_dir;
		sub_vfs *v = NULL;
		char e[900] = "";
		rc = sub_open_url(url, &v, e, sizeof(e));
		sub_destroy(v);
		if (rc) {
			snprintf(err, errlen, "%s: %s", i < o->nmounts ? "--mount" : "--cluster-dir", e);
			return rc;
		}
	}
	if ((o->json && (rc = kc_report_probe("--json", o->json, err, errlen))) ||
	    (o->junit && (rc = kc_report_probe("--junit", o->junit, err, errlen))))
		return rc;
	return 0;
}

/* The seed, where the human output and the report go. */
static void choose_outputs(kc_run *r)
{
	const kc_opts *o = r->o;
	if (o->seed_set) {
		r->seed = o->seed;
	} else {
		uint64_t s = 0;
		if (getrandom(&s, sizeof(s), 0) != (ssize_t)sizeof(s))
			s = (uint64_t)ku_mono_ns();
		r->seed = s & KC_SEED_MAX;
	}
	r->out = (o->json && strcmp(o->json, "-") == 0) ? stderr : stdout;
	r->live = o->progress < 0 ? isatty(fileno(r->out)) : o->progress;
	if (o->json)
		snprintf(r->report_path, sizeof(r->report_path), "%s", strcmp(o->json, "-") ? o->json : "");
	else
		snprintf(r->report_path, sizeof(r->report_path), "%s", KC_DEFAULT_REPORT);
}

/* The scratch directory still is this run's: its owner record is there.
 * 0, or -ENOENT when something else removed it (or replaced it), or
 * another -errno when it cannot be looked at. */
static int scratch_intact(kc_run *r)
{
	if (!r->owner_text)
		return 0;
	char path[SUB_PATH_MAX];
	sub_stat st;
	snprintf(path, sizeof(path), "%s/%s", r->scratch, r->owner_text);
	int rc = sub_stat_path(r->vfs, path, &st);
	if (rc == -ESTALE || rc == -ENOTDIR)
		rc = -ENOENT;
	return rc;
}

/* Who owns the scratch directory, so that a later run can tell a killed
 * run's leftover from a live one (scratch.h); then the leftovers of others.
 * A directory, not a file: see scratch.h. */
static int own_scratch(kc_run *r, char *err, size_t errlen)
{
	json_t *owner = kc_scratch_owner_self();
	char name[300], path[SUB_PATH_MAX];
	int rc = owner ? kc_scratch_owner_name(owner, name, sizeof(name)) : -ENOMEM;
	json_decref(owner);
	if (!rc) {
		snprintf(path, sizeof(path), "%s/%s", r->scratch, name);
		rc = sub_mkdir(r->vfs, path, 0755);
	}
	if (rc) {
		snprintf(err, errlen, "%s: cannot record the owner of the scratch directory: %s",
			 r->o->url, sub_strerror(rc));
		return rc;
	}
	r->owner_text = strdup(name);
	r->leftovers = json_array();
	kc_scratch_sweep(r->vfs, r->scratch, 1, -1, r->leftovers, r->out);
	return 0;
}

static int make_scratch(kc_run *r, char *err, size_t errlen)
{
	uint64_t rnd = 0;
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		rnd = (uint64_t)ku_mono_ns();
	/* '~' is not in Kafka's topic alphabet: the scratch directory can never
	 * be taken for a topic by a broker sharing the volume. */
	snprintf(r->scratch, sizeof(r->scratch), "~kaas-conform-%016" PRIx64, rnd);
	int rc = sub_mkdir(r->vfs, r->scratch, 0755);
	if (rc) {
		snprintf(err, errlen, "%s: cannot create the scratch directory: %s", r->o->url,
			 sub_strerror(rc));
		r->scratch[0] = '\0';
	}
	return rc;
}

/* The actors, forked on the URL and the mounts or connected as agents, each
 * shown to see the volume of the URL (the marker file).  -EINTR on an
 * interrupt; another -errno with err set. */
static int start_actors(kc_run *r, char *err, size_t errlen)
{
	const kc_opts *o = r->o;
	char marker[160];
	size_t marker_len = 0;
	int rc;
	if ((o->nmounts || o->nagents) &&
	    (rc = kc_marker_write(r, marker, sizeof(marker), &marker_len, err, errlen)))
		return rc;
	if ((rc = kc_marker_verify_mounts(r, marker, marker_len, err, errlen)))
		return rc;
	r->t0_ms = ku_mono_ms();
	now_rfc3339(r->started_at, sizeof(r->started_at));
	const char *urls[1 + KC_MAX_MOUNTS];
	urls[0] = o->url;
	for (int i = 0; i < o->nmounts; i++)
		urls[1 + i] = o->mounts[i];
	r->drv.timeout_ms = o->timeout_s * 1000;
	r->drv.interrupted = &kc__interrupted;
	r->drv.on_progress = progress_line;
	r->drv.progress_arg = r;
	if (o->nagents)
		rc = kc_drv_connect_agents(&r->drv, o->agents, o->nagents);
	else
		rc = kc_drv_spawn(&r->drv, o->actors, urls, 1 + o->nmounts);
	if (rc) {
		if (rc == -EINTR || kc__interrupted)
			return -EINTR;
		snprintf(err, errlen, "%s", r->drv.err);
		return rc;
	}
	if (o->nagents && (rc = kc_marker_verify_agents(r, marker, marker_len, err, errlen)))
		return kc__interrupted ? -EINTR : rc;
	if (o->nmounts || o->nagents) {
		char path[128];
		snprintf(path, sizeof(path), "%s/" KC_MARKER_FILE, r->scratch);
		sub_unlink(r->vfs, path);
	}
	return 0;
}

/* After the checks: end the actors, remove the scratch directory, and
 * decide the overall verdict (ERROR when the scratch directory stays). */
static void conclude(kc_run *r)
{
	r->nactors = r->drv.n;
	r->actors = kc_report_actors(r);
	kc_drv_shutdown(&r->drv);
	r->duration_ms = ku_mono_ms() - r->t0_ms;
	/* A scratch directory that cannot be removed (nfs-ganesha's FSAL_MEM
	 * refuses to remove an open file) does not take the results away: they
	 * are reported with the verdict ERROR, naming what was left, and no
	 * stamp is written. */
	int rc = remove_scratch(r);
	if (rc) {
		snprintf(r->scratch_left, sizeof(r->scratch_left), "%s/%s", r->ident.root, r->scratch);
		snprintf(r->cleanup_error, sizeof(r->cleanup_error), "%s", sub_strerror(rc));
	}
	r->scratch[0] = '\0';
	r->verdict = r->error[0] ? KC_ERROR : kc_judge_overall(r->res, KC_NCHECKS);
	/* Required proof: an unproven fsync is the run's verdict even where a
	 * warning would otherwise outrank it, so that the exit status says it. */
	if (r->o->require_power_loss && r->res[KC_CHK_FSYNC].ran &&
	    r->res[KC_CHK_FSYNC].verdict == KC_UNPROVEN && r->verdict <= KC_WARN)
		r->verdict = KC_UNPROVEN;
	if (r->verdict == KC_ERROR && !r->error[0])
		snprintf(r->error, sizeof(r->error), "a check could not complete");
	if (r->scratch_left[0]) {
		if (r->verdict != KC_ERROR)
			snprintf(r->error, sizeof(r->error), "cannot remove the scratch directory %.700s: %s",
				 r->scratch_left, r->cleanup_error);
		r->verdict = KC_ERROR;
	}
}

/* The JSON and JUnit reports and the table.  Returns the exit status, which
 * a report that could not be written turns into ERROR; why keeps the first
 * such failure. */
static int write_reports(kc_run *r, int status, char *why, size_t wlen)
{
	const kc_opts *o = r->o;
	char rerr[1200] = "";
	if (o->json && strcmp(o->json, "-") == 0) {
		kc_report_write_json(r, "-", rerr, sizeof(rerr));
	} else if (kc_report_write_json(r, r->report_path, rerr, sizeof(rerr)) != 0) {
		fprintf(stderr, "kaas-conform: %s\n", rerr);
		r->report_path[0] = '\0';
		if (o->json) {
			status = KC_EXIT_ERROR;
			snprintf(why, wlen, "%s", rerr);
		}
	}
	if (o->junit && kc_report_write_junit(r, o->junit, rerr, sizeof(rerr)) != 0) {
		fprintf(stderr, "kaas-conform: %s\n", rerr);
		status = KC_EXIT_ERROR;
		if (!why[0])
			snprintf(why, wlen, "%s", rerr);
	}
	kc_report_table(r, r->out);
	if (r->verdict == KC_ERROR)
		fprintf(stderr, "kaas-conform: %s\n", r->error);
	return status;
}

/* --stamp: written on PASS only.  Returns the exit status. */
static int stamp_if_asked(kc_run *r, int status, char *why, size_t wlen)
{
	if (!r->o->stamp)
		return status;
	/* UNPROVEN qualifies (no production server can be powered off for a
	 * test); the stamp says in words what was proven. */
	if (!(r->verdict == KC_PASS || (r->verdict == KC_UNPROVEN && !r->o->require_power_loss))) {
		fprintf(r->out, "no stamp written: the verdict is %s, a stamp needs PASS or UNPROVEN%s\n",
			kc_verdict_name(r->verdict),
			r->o->require_power_loss ? " (PASS with --require-power-loss)" : "");
		return status;
	}
	char where[4200] = "", serr[1200] = "";
	if (write_stamp(r, where, sizeof(where), serr, sizeof(serr)) != 0) {
		fprintf(stderr, "kaas-conform: %s\n", serr);
		if (!why[0])
			snprintf(why, wlen, "no stamp: %s", serr);
		return KC_EXIT_ERROR;
	}
	fprintf(r->out, "stamp written: %s\n", where);
	return status;
}

/* The way out of a run that did not reach its verdict: kill the actors at
 * once and remove the scratch directory. */
static void abandon(kc_run *r, int was_interrupted)
{
	if (was_interrupted && r->live)
		fprintf(r->out, "\n");
	kc_drv_kill_all(&r->drv);
	int rc = remove_scratch(r);
	if (was_interrupted && rc)
		fprintf(stderr, "kaas-conform: interrupted; could not remove %s: %s\n", r->scratch,
			sub_strerror(rc));
	else if (was_interrupted)
		fprintf(stderr, "kaas-conform: interrupted; scratch directory removed, no verdict\n");
	r->scratch[0] = '\0';
}

/* Everything from the validated options to the exit status; the caller
 * frees what r holds. */
static int check_run(kc_run *r)
{
	char err[1024] = "";
	int rc = validate_inputs(r, err, sizeof(err));
	if (rc)
		return fail_usage(err);
	choose_outputs(r);
	if ((rc = make_scratch(r, err, sizeof(err))))
		return fail_usage(err);
	/* The owner record is a file create, so it comes after the actors are
	 * forked: an NFSv4 child must not inherit its parent's EXCLUSIVE4
	 * verifier sequence (sub_nfs.c). */
	if ((rc = start_actors(r, err, sizeof(err))) || (rc = own_scratch(r, err, sizeof(err)))) {
		abandon(r, rc == -EINTR);
		return rc == -EINTR ? KC_EXIT_ERROR : fail_usage(err);
	}
	count_clients(r);
	print_header(r);
	run_checks(r);
	if (kc__interrupted) {
		abandon(r, 1);
		return KC_EXIT_ERROR;
	}
	conclude(r);
	/* Everything that can still change the exit status happens before the
	 * final line, so that the line tells the status the process ends with. */
	char why[1300] = "";
	int status = write_reports(r, kc_run_exit_code(r), why, sizeof(why));
	status = stamp_if_asked(r, status, why, sizeof(why));
	kc_report_final(r, status, why, r->out);
	fflush(stdout);
	return status;
}

int kc_cmd_check(int argc, char **argv)
{
	kc_opts o;
	char err[1024] = "";
	if (kc_opts_parse_check(argc, argv, &o, err, sizeof(err)) != 0)
		return fail_usage(err);
	if (o.help) {
		fputs(kc_usage, stdout);
		return 0;
	}
	install_signals();
	kc_run *r = calloc(1, sizeof(*r));
	if (!r)
		return fail_usage("out of memory");
	r->o = &o;
	r->cur = -1;
	r->interrupted = &kc__interrupted;
	int status = check_run(r);
	for (int i = 0; i < KC_NCHECKS; i++)
		if (r->res[i].ran)
			kc_result_free(&r->res[i]);
	if (r->drv.a)
		kc_drv_kill_all(&r->drv);
	if (r->scratch[0])
		remove_scratch(r);
	sub_destroy(r->vfs);
	json_decref(r->actors);
	json_decref(r->leftovers);
	json_decref(r->cluster_preflight);
	free(r->owner_text);
	free(r);
	return status;
}

int kc_cmd_stamp_verify(int argc, char **argv)
{
	kc_verify_opts o;
	char err[1024] = "";
	if (kc_opts_parse_verify(argc, argv, &o, err, sizeof(err)) != 0)
		return fail_usage(err);
	if (o.help) {
		fputs(kc_usage, stdout);
		return 0;
	}
	sub_vfs *v = NULL, *cv = NULL;
	sub_identity id;
	int status = KC_EXIT_ERROR;
	int rc = sub_open_url(o.url, &v, err, sizeof(err));
	if (rc) {
		fail_usage(err);
		goto out;
	}
	if ((rc = sub_identity_of(v, &id))) {
		snprintf(err, sizeof(err), "%s: cannot identify the volume: %s", o.url, sub_strerror(rc));
		fail_usage(err);
		goto out;
	}
	if (o.cluster_dir) {
		char e[900] = "";
		if ((rc = sub_open_url(o.cluster_dir, &cv, e, sizeof(e)))) {
			snprintf(err, sizeof(err), "--cluster-dir: %s", e);
			fail_usage(err);
			goto out;
		}
		rc = kq_stamp_verify(cv, &id, err, sizeof(err));
	} else {
		rc = kq_stamp_verify_at(v, "__cluster", &id, err, sizeof(err));
	}
	if (rc) {
		fprintf(stderr, "kaas-conform: not qualified: %s\n", err);
		status = KC_EXIT_FAIL;
	} else {
		char key[1200];
		kq_volume_key(&id, key, sizeof(key));
		json_t *stamp = NULL;
		char w2[256] = "";
		const char *st = NULL;
		if (o.cluster_dir ? kq_stamp_read(cv, "", &stamp, w2, sizeof(w2)) == 0
				  : kq_stamp_read(v, "__cluster", &stamp, w2, sizeof(w2)) == 0)
			st = json_string_value(json_object_get(json_object_get(stamp, "durability"), "statement"));
		printf("qualified: a passing stamp for volume %s\n", key);
		printf("durability: %s\n", st ? st : "not recorded (a stamp of schema 1)");
		json_decref(stamp);
		status = 0;
	}
out:
	sub_destroy(cv);
	sub_destroy(v);
	return status;
}
