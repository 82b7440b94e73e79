/*
 * kc.h — names shared by every part of kaas-conform: verdicts, the list of
 * checks, version numbers of the tool, of the actor protocol and of the
 * report schema.
 */
#ifndef KC_KC_H
#define KC_KC_H

#include <stddef.h>
#include <stdint.h>

#define KC_VERSION "0.1.0"
#define KC_PROTOCOL_VERSION 3 /* driver <-> actor messages (conformance/chan.h); 2: reopen;
                               3: observations, until_stop, final_seq, via_rename */
#define KC_REPORT_SCHEMA 2    /* JSON report, docs/formats.md; 2: UNPROVEN, layers, durability,
                               convergence per reader, detection power, perf */

/* Ordered by severity: the overall verdict is the worst of the checks'. */
typedef enum kc_verdict {
	KC_PASS = 0,
	/* fsync only: nothing was lost, but no power-loss hook ran, so
	 * durability is not disproven rather than proven (docs/conformance.md) */
	KC_UNPROVEN,
	KC_WARN,
	KC_REFUSED,
	KC_FAIL,
	KC_ERROR, /* the check could not run to the end; no verdict on the volume */
} kc_verdict;

const char *kc_verdict_name(kc_verdict v);
int kc_verdict_parse(const char *s, kc_verdict *out); /* 0 or -EINVAL */
kc_verdict kc_verdict_worst(kc_verdict a, kc_verdict b);
/* 0 pass/unproven/warn, 1 fail, 2 error, 3 refused (docs/conformance.md);
 * 4, KC_EXIT_UNPROVEN, is the run's status for UNPROVEN when the proven
 * form was required (--require-power-loss), decided by the run. */
int kc_verdict_exit_code(kc_verdict v);

enum {
	KC_EXIT_OK = 0,
	KC_EXIT_FAIL = 1,
	KC_EXIT_ERROR = 2,
	KC_EXIT_REFUSED = 3,
	KC_EXIT_UNPROVEN = 4,
};

/* The checks, in the order they run and are reported. */
typedef enum kc_check_id {
	KC_CHK_PREFLIGHT = 0,
	KC_CHK_RENAME,
	KC_CHK_EXCL,
	KC_CHK_CTO,
	KC_CHK_UNLINK,
	KC_CHK_FSYNC,
	KC_CHK_RCOPY,
	KC_CHK_PERF, /* opt-in (--perf or --checks perf): speed, not correctness */
	KC_CHK_ENOSPC, /* opt-in (--enospc LIMIT): fills the volume, so never by default */
	KC_NCHECKS
} kc_check_id;

#define KC_ALL_CHECKS ((1u << KC_NCHECKS) - 1)
/* What runs without --checks, "all" in --checks, and what a stamp needs. */
#define KC_DEFAULT_CHECKS (KC_ALL_CHECKS & ~(1u << KC_CHK_PERF) & ~(1u << KC_CHK_ENOSPC))

const char *kc_check_name(int id);      /* "rename", "unlink-open", ... */
const char *kc_check_guarantee(int id); /* the guarantee a FAIL names */
int kc_check_lookup(const char *name);  /* id or -1 */

/* "ENOENT" for 2 or -2; "E123" for unknown numbers; "OK" for 0. */
const char *kc_errname(int err);

/* Seeds are kept below 2^53 so every JSON reader represents them exactly. */
#define KC_SEED_MAX ((1ULL << 53) - 1)

#endif
