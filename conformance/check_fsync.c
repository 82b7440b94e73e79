/*
 * check_fsync.c — is fsync honest?
 *
 * Three signals, strongest last:
 *   1. interposition: in every actor, dladdr() of fsync/fdatasync/... must
 *      name the C library; an LD_PRELOADed no-op (eatmydata) is a FAIL, since
 *      nothing run in that environment gets durable data;
 *   2. timing (a warning only; tmpfs and NVMe with power-loss protection are
 *      legitimately fast): the median fsync after a 4 KiB write is compared
 *      with the fastest of one round trip to the substrate (kc_fsync_too_fast
 *      says which operation that is for the client at hand), and libc fsync
 *      with the raw system call;
 *   3. crash: actor 0 writes 1 MiB, fsyncs the file and every directory up
 *      to the root, and reports back; the driver kills it with SIGKILL (no
 *      close, no flush), runs --crash-cmd if given (kill a server, restart a
 *      FUSE daemon, copy a loop image; it must succeed), opens the URL again
 *      in the driver and in every actor (the command may have put another
 *      filesystem where the URL points: a FUSE daemon mounted again, an
 *      image copy mounted in place), starts a fresh actor in place of the
 *      killed one, and another actor reads the file back: every byte must be
 *      there.
 *
 * Only a hook that models a power cut of the storage (--power-loss-cmd:
 * whatever was not on stable storage is gone afterwards) can prove that
 * fsync made the data durable.  A hook that restarts a server process
 * (--crash-cmd) cannot: an NFS server whose export sits on RAM keeps the
 * data across its own restart.  Without a power-loss hook a clean read-back
 * is the verdict UNPROVEN ("fsync not disproven"), not PASS.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance/judge.h"
#include "conformance/run.h"
#include "qualify/stamp.h"
#include "util/clock.h"

#define CRASH_BYTES (1LL << 20)

/* Runs cmd with /bin/sh in its own process group.  0 on exit status 0;
 * -EINTR when interrupted; otherwise -ECHILD with why set. */
static int run_crash_cmd(kc_run *r, const char *cmd, const char *file, char *why, size_t whylen)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, whylen, "--crash-cmd: fork: %s", strerror(errno));
		return -errno;
	}
	if (pid == 0) {
		setpgid(0, 0);
		signal(SIGINT, SIG_DFL);
		signal(SIGPIPE, SIG_DFL);
		setenv("KAAS_CONFORM_URL", r->o->url, 1);
		setenv("KAAS_CONFORM_FILE", file, 1);
		char abs[8192];
		if (strcmp(r->ident.backend, "posix") == 0) {
			snprintf(abs, sizeof(abs), "%s/%s", r->ident.root, file);
			setenv("KAAS_CONFORM_PATH", abs, 1);
		}
		/* The command's output must not land in our stdout report. */
		dup2(2, 1);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	int status = 0;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		if (r->interrupted && *r->interrupted) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -EINTR;
		}
		usleep(20 * 1000);
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		snprintf(why, whylen, "--crash-cmd '%s' failed with exit status %d", cmd,
			 WEXITSTATUS(status));
	else
		snprintf(why, whylen, "--crash-cmd '%s' was killed by signal %d", cmd,
			 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	return -ECHILD;
}

/* After the crash command: the driver's handle and every live actor's
 * (but skip, which is started afresh) open the URL again, so that nothing
 * goes on working on a filesystem the command took away.  The scratch
 * directory is made again if the crash took it (the checks after this one
 * need it; the lost file itself is what the verify step reports). */
static int reopen_all(kc_run *r, kc_result *res, int skip)
{
	char err[700] = "";
	sub_vfs *nv = NULL;
	int rc = sub_open_url(r->o->url, &nv, err, sizeof(err));
	if (rc) {
		snprintf(r->drv.err, sizeof(r->drv.err), "after --crash-cmd: %s", err);
		return rc;
	}
	sub_destroy(r->vfs);
	r->vfs = nv;
	sub_identity id;
	if (sub_identity_of(r->vfs, &id) == 0)
		json_object_set_new(res->profile, "identity_after_crash", kq_identity_json(&id));
	int n = 1;
	for (int i = 0; i < r->drv.n; i++) {
		if (i == skip || !r->drv.a[i].alive)
			continue;
		json_t *out = NULL;
		if ((rc = kc_drv_call(&r->drv, i, "reopen", NULL, &out)))
			return rc;
		json_decref(out);
		n++;
	}
	json_object_set_new(res->profile, "reopened_after_crash", json_integer(n));
	if ((rc = sub_mkdirs(r->vfs, r->scratch, 0755))) {
		snprintf(r->drv.err, sizeof(r->drv.err), "after --crash-cmd: the scratch directory %s: %s",
			 r->scratch, sub_strerror(rc));
		return rc;
	}
	return 0;
}

static int probe(kc_run *r, kc_result *res, const char *dir)
{
	int n = r->drv.n;
	int64_t samples = r->o->iterations / 4;
	if (samples < 10)
		samples = 10;
	if (samples > 50)
		samples = 50;
	kc_run_variant(r, "probe");
	for (int i = 0; i < n; i++) {
		int rc = kc_drv_start(&r->drv, i, "fsync_probe",
				      json_pack("{s:s,s:I}", "dir", dir, "samples",
						(json_int_t)(i == 0 ? samples : 0)),
				      0);
		if (rc)
			return rc;
	}
	json_t *actors = json_array();
	for (int i = 0; i < n; i++) {
		json_t *out = NULL;
		int rc = kc_drv_wait(&r->drv, i, &out);
		if (rc) {
			json_decref(actors);
			kc_drv_abort(&r->drv);
			return rc;
		}
		json_t *ip = json_object_get(out, "interposed");
		if (json_array_size(ip) > 0) {
			kc_result_count(res, "interposed_actors", 1);
			char d[600];
			json_t *first = json_array_get(ip, 0);
			snprintf(d, sizeof(d), "%s() resolves to %s, not the C library (LD_PRELOAD=%s)",
				 json_string_value(json_object_get(first, "symbol")),
				 json_string_value(json_object_get(first, "object")),
				 json_string_value(json_object_get(out, "preload")));
			char t1[700], t2[700];
			snprintf(t1, sizeof(t1), "actor %d: dladdr(dlsym(RTLD_DEFAULT, \"%s\")) = %s", i,
				 json_string_value(json_object_get(first, "symbol")),
				 json_string_value(json_object_get(first, "object")));
			snprintf(t2, sizeof(t2), "actor %d: dladdr(gnu_get_libc_version) names the C library", i);
			json_t *one = json_pack("[{s:s,s:i,s:i,s:s,s:[s,s]}]", "kind", "interposed", "actor", i,
						"iteration", 0, "detail", d, "trace", t1, t2);
			kc_result_add_anomalies(res, NULL, one, 1);
			json_decref(one);
		}
		if (i == 0) {
			int64_t raw = json_integer_value(json_object_get(out, "raw_fsync_ns"));
			int64_t lib = json_integer_value(json_object_get(out, "libc_fsync_ns"));
			int64_t cre = json_integer_value(json_object_get(out, "create_ns"));
			int64_t opn = json_integer_value(json_object_get(out, "open_ns"));
			int64_t lku = json_integer_value(json_object_get(out, "lookup_ns"));
			int64_t gat = json_integer_value(json_object_get(out, "getattr_ns"));
			kc_result_count(res, "raw_fsync_ns", raw);
			kc_result_count(res, "libc_fsync_ns", lib);
			kc_result_count(res, "create_ns", cre);
			kc_result_count(res, "open_ns", opn);
			kc_result_count(res, "lookup_ns", lku);
			kc_result_count(res, "getattr_ns", gat);
			kc_result_count(res, "samples", samples);
			/* An fsync that returns before one round trip to the
			 * substrate cannot have waited for stable storage. */
			int64_t ref;
			const char *kind;
			if (kc_fsync_too_fast(raw, lku, gat, &ref, &kind))
				kc_result_count(res, "fast_fsync", 1);
			kc_result_count(res, "round_trip_ns", ref);
			json_object_set_new(res->profile, "round_trip",
					    json_pack("{s:s,s:I}", "kind", kind, "ns", (json_int_t)ref));
			if (lib >= 0 && raw >= 50000 && lib * 10 < raw)
				kc_result_count(res, "libc_faster", 1);
		}
		json_object_set_new(out, "actor", json_integer(i));
		json_array_append_new(actors, out);
	}
	json_object_set_new(res->profile, "probes", actors);
	kc_result_count(res, "interposed_actors", 0);
	return 0;
}

static int crash(kc_run *r, kc_result *res, const char *dir)
{
	const int A = 0, B = 1;
	char file[300];
	snprintf(file, sizeof(file), "%s/crash", dir);
	uint64_t tag = kc_run_tag(r, KC_CHK_FSYNC, A, "crash");
	json_t *out = NULL;
	kc_run_variant(r, "crash");
	int rc = kc_drv_call(&r->drv, A, "hold_open",
			     json_pack("{s:s,s:I,s:I,s:b,s:b}", "path", file, "size", (json_int_t)CRASH_BYTES,
				       "tag", (json_int_t)tag, "fsync", 1, "fsync_parents", 1),
			     &out);
	if (rc)
		return rc;
	json_object_set_new(res->profile, "crash_fsync_ns", json_incref(json_object_get(out, "fsync_ns")));
	json_decref(out);
	out = NULL;
	/* fsync returned: the data is promised.  Crash the writer. */
	kc_drv_crash(&r->drv, A);
	json_object_set_new(res->profile, "crash_writer", json_string(r->drv.a[A].why));
	kc_result_count(res, "crash_bytes", CRASH_BYTES);
	const char *hook = r->o->power_loss_cmd ? r->o->power_loss_cmd : r->o->crash_cmd;
	if (hook) {
		char why[700] = "";
		int64_t t = ku_mono_ms();
		rc = run_crash_cmd(r, hook, file, why, sizeof(why));
		if (rc) {
			snprintf(r->drv.err, sizeof(r->drv.err), "%s", why);
			return rc;
		}
		kc_result_count(res, "crash_cmd", 1);
		if (r->o->power_loss_cmd)
			kc_result_count(res, "power_loss_cmd", 1);
		json_object_set_new(res->profile, "crash_cmd_ms", json_integer(ku_mono_ms() - t));
		if ((rc = reopen_all(r, res, A)))
			return rc;
	} else {
		kc_result_note(res, "crash variant killed the writing client only; give --power-loss-cmd (a power cut of the storage) to prove durability, or --crash-cmd to at least crash the server or daemon");
	}
	if ((rc = kc_drv_respawn(&r->drv, A)))
		return rc;
	/* A server that was just restarted may need a moment; transient
	 * errors are retried, a definite answer (missing/short/mismatch) is not. */
	const char *status = NULL;
	int64_t deadline = ku_mono_ms() + 15000;
	for (;;) {
		json_decref(out);
		out = NULL;
		rc = kc_drv_call(&r->drv, B, "file_verify",
				 json_pack("{s:s,s:I,s:I}", "path", file, "size", (json_int_t)CRASH_BYTES,
					   "tag", (json_int_t)tag),
				 &out);
		if (rc)
			return rc;
		status = json_string_value(json_object_get(out, "status"));
		int definite = status && (!strcmp(status, "ok") || !strcmp(status, "missing") ||
					  !strcmp(status, "short") || !strcmp(status, "mismatch") ||
					  !strcmp(status, "long"));
		if (definite || ku_mono_ms() >= deadline)
			break;
		usleep(200 * 1000);
	}
	json_object_set_new(res->profile, "crash_verify", json_incref(out));
	if (!status || (strcmp(status, "ok") != 0 && strcmp(status, "long") != 0)) {
		int64_t good = json_integer_value(json_object_get(out, "bytes"));
		int64_t bad = json_integer_value(json_object_get(out, "first_bad"));
		if (bad >= 0 && bad < good)
			good = bad;
		if (status && strcmp(status, "missing") == 0)
			good = 0;
		kc_result_count(res, "crash_lost", 1);
		kc_result_count(res, "crash_bytes_lost", CRASH_BYTES - (good < CRASH_BYTES ? good : CRASH_BYTES));
		char d[300];
		snprintf(d, sizeof(d), "after fsync returned and the writer was killed%s, actor %d read: %s (%lld bytes)",
			 r->o->power_loss_cmd ? " and the power-loss command ran"
			 : r->o->crash_cmd   ? " and the crash command ran"
					     : "",
			 B, status ? status : "?",
			 (long long)json_integer_value(json_object_get(out, "bytes")));
		json_t *one = json_pack("[{s:s,s:i,s:i,s:s,s:[s,s,s]}]", "kind", "lost_after_fsync",
					"actor", B, "iteration", 1, "detail", d, "trace",
					"actor 0: create, write 1 MiB, fsync file, fsync directories up to the root: OK",
					r->o->power_loss_cmd ? "driver: SIGKILL actor 0, run --power-loss-cmd, every actor opens the URL again"
					: r->o->crash_cmd    ? "driver: SIGKILL actor 0, run --crash-cmd, every actor opens the URL again"
							     : "driver: SIGKILL actor 0",
					"actor 1: open, read to EOF, compare");
		kc_result_add_anomalies(res, NULL, one, 1);
		json_decref(one);
	}
	json_decref(out);
	return 0;
}

int kc_check_fsync(kc_run *r, kc_result *res, const char *dir)
{
	static const char *const zero[] = {"interposed_actors", "fast_fsync", "libc_faster",
					   "crash_lost", "crash_bytes_lost", "crash_cmd",
					   "power_loss_cmd", "unproven"};
	for (size_t k = 0; k < sizeof(zero) / sizeof(zero[0]); k++)
		kc_result_count(res, zero[k], 0); /* every counter is in the report */
	res->iterations = 1;
	int rc = probe(r, res, dir);
	if (!rc)
		rc = crash(r, res, dir);
	if (!rc) {
		/* What the read-back proves, in words (the judge decides the
		 * verdict from the counts; this is for the report and stamp). */
		int lost = kc_result_get(res, "crash_lost") > 0;
		int proven = kc_result_get(res, "power_loss_cmd") > 0;
		if (!proven && !lost)
			kc_result_count(res, "unproven", 1);
		json_object_set_new(res->profile, "durability",
				    kc_durability_json(lost, proven, kc_result_get(res, "crash_cmd") > 0));
	}
	if (rc && rc != -EINTR)
		kc_result_error(res, "%s", r->drv.err);
	return rc;
}
