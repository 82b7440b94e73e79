/*
 * run.h — one `kaas-conform check` run: the options, the actors, the
 * scratch directory, and the results of the checks.  The checks
 * (check_*.c) receive it and drive actors through it.
 */
#ifndef KC_RUN_H
#define KC_RUN_H

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>

#include "conformance/driver.h"
#include "conformance/kc.h"
#include "conformance/opts.h"
#include "conformance/result.h"
#include "substrates/sub.h"

typedef struct kc_run {
	const kc_opts *o;
	kc_driver drv;
	sub_vfs *vfs; /* the driver's own handle: scratch set-up and clean-up */
	sub_identity ident;
	char scratch[64]; /* "~kaas-conform-<hex>" under the URL's root */
	uint64_t seed;
	kc_result res[KC_NCHECKS];
	int order[KC_NCHECKS]; /* checks in the order they ran */
	int nran;
	int cur; /* the check in progress, -1 between checks */
	char variant[32];
	int64_t variant_t0_ms;
	int64_t manual_done, manual_anomalies; /* progress of per-round checks */
	int manual;
	int live; /* print live progress */
	int64_t t0_ms;
	char started_at[40];
	int64_t duration_ms;
	volatile sig_atomic_t *interrupted;
	kc_verdict verdict;
	char error[1024];
	int clients, hosts;
	int nactors;
	json_t *actors; /* kc_report_actors(), taken before the actors end */
	char report_path[4096];
	FILE *out; /* the human output: stdout, or stderr when the JSON goes to stdout */
	/* Set when the scratch directory could not be removed at the end: where
	 * it is and why.  The results are still reported, the verdict is ERROR. */
	char scratch_left[SUB_PATH_MAX + 64];
	char cleanup_error[256];
	char *owner_text;  /* the owner record's name in scratch: the directory is still ours */
	json_t *leftovers; /* other runs' scratch directories found at the start */
	/* The cluster directory when it is not on the URL's volume: its identity,
	 * preflighted like the data volume (check_preflight.c). */
	int cluster_separate;
	sub_identity cluster_ident;
	json_t *cluster_preflight; /* {identity..., verdict, decided_by} */
} kc_run;

/* A stream tag for (check, actor, variant), below 2^62 (a JSON integer). */
uint64_t kc_run_tag(const kc_run *r, int check, int actor, const char *variant);

/* Progress: the variant being run and, for checks that run one round per
 * message, the counters. */
void kc_run_variant(kc_run *r, const char *variant);

/* One concurrent phase: every part starts at the same instant (barrier);
 * the parts with loop=0 run to completion, then the loop=1 parts are
 * stopped.  results[i] receives each part's result.  On failure every part
 * is stopped and the error is in r->drv.err. */
typedef struct kc_part {
	int actor;
	const char *op;
	json_t *args; /* consumed */
	int loop;
} kc_part;
int kc_run_phase(kc_run *r, kc_part *parts, int np, json_t **results);

/* Each check: 0 with res filled (the runner judges it), -EINTR when
 * interrupted, another -errno with res->error set when it could not run. */
int kc_check_preflight(kc_run *r, kc_result *res, const char *dir);
int kc_check_rename(kc_run *r, kc_result *res, const char *dir);
int kc_check_excl(kc_run *r, kc_result *res, const char *dir);
int kc_check_cto(kc_run *r, kc_result *res, const char *dir);
int kc_check_unlink(kc_run *r, kc_result *res, const char *dir);
int kc_check_fsync(kc_run *r, kc_result *res, const char *dir);
int kc_check_rcopy(kc_run *r, kc_result *res, const char *dir);
int kc_check_perf(kc_run *r, kc_result *res, const char *dir);
int kc_check_enospc(kc_run *r, kc_result *res, const char *dir);

/* The `check` and `stamp-verify` subcommands (exit status). */
int kc_cmd_check(int argc, char **argv);
int kc_cmd_stamp_verify(int argc, char **argv);

/* Reports (report_*.c). */
json_t *kc_report_json(const kc_run *r);
int kc_report_write_json(const kc_run *r, const char *path, char *err, size_t errlen);
int kc_report_write_junit(const kc_run *r, const char *path, char *err, size_t errlen);
/* Before the run: can a report be written at path (the option opt names it)?
 * Creates and removes the temp file the write will use; "-" always can.
 * 0, or -errno with a one-line err naming opt and path. */
int kc_report_probe(const char *opt, const char *path, char *err, size_t errlen);
/* "99.90%": a check's detection power as the table and JUnit show it,
 * truncated, never rounded up; "-" for a check that looks once. */
int kc_report_power_text(const kc_run *r, const kc_result *res, char *buf, size_t len);
/* The table of checks and what each non-passing one showed. */
void kc_report_table(const kc_run *r, FILE *out);
/* The last line: the verdict and the process's exit status, with why the
 * status differs from the verdict's (a report or the stamp not written). */
void kc_report_final(const kc_run *r, int status, const char *why, FILE *out);
json_t *kc_report_actors(const kc_run *r);
/* The shell command that repeats one check of this run (URL, mounts or
 * agents, actors, iterations, seed, the check, its crash command), every
 * argument quoted for a POSIX shell; malloc'd, NULL when the check has no
 * reproduce hint (or out of memory). */
char *kc_reproduce_command(const kc_run *r, const kc_result *res);
json_t *kc_stamp_build(const kc_run *r);
/* The exit status the run's verdict stands for: kc_verdict_exit_code, and
 * KC_EXIT_UNPROVEN for UNPROVEN under --require-power-loss. */
int kc_run_exit_code(const kc_run *r);
/* The run's durability in words (the fsync check's, or "not checked"):
 * {"proven", "by", "statement", "required"}. */
json_t *kc_run_durability(const kc_run *r);

/* marker.c: the marker file that proves every client sees the run's
 * volume.  0 or -errno with err filled. */
#define KC_MARKER_FILE "volume-marker"
extern volatile sig_atomic_t kc__interrupted; /* run.c: a signal asked the run to stop */
int kc_marker_write(kc_run *r, char *marker, size_t mlen, size_t *n, char *err, size_t errlen);
int kc_marker_verify_mounts(kc_run *r, const char *marker, size_t n, char *err, size_t errlen);
int kc_marker_verify_agents(kc_run *r, const char *marker, size_t n, char *err, size_t errlen);

#endif
