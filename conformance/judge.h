/*
 * judge.h — turning a check's counts into its verdict and one-line summary.
 *
 * Pure functions of the counts (the keys are documented per check in
 * docs/formats.md), so that the rules are in one place, unit-tested, and
 * never re-derived by a report writer.
 */
#ifndef KC_JUDGE_H
#define KC_JUDGE_H

#include <jansson.h>
#include <stddef.h>

#include "kc.h"
#include "result.h"

kc_verdict kc_judge_rename(const json_t *counts, char *summary, size_t len);
kc_verdict kc_judge_excl(const json_t *counts, char *summary, size_t len);
kc_verdict kc_judge_cto(const json_t *counts, char *summary, size_t len);
kc_verdict kc_judge_unlink(const json_t *counts, char *summary, size_t len);
kc_verdict kc_judge_fsync(const json_t *counts, char *summary, size_t len);
kc_verdict kc_judge_rcopy(const json_t *counts, char *summary, size_t len);

/* The worst verdict of the checks that ran (PASS when none ran). */
kc_verdict kc_judge_overall(const kc_result *res, int n);

/* Decides a result from its counts with the judge of its check (not for
 * preflight, whose verdict comes from the identity) and fills the reproduce
 * hint for a FAIL. */
void kc_judge_result(kc_result *r, uint64_t seed);

/* rename-copy: a rename is "as slow as a copy" when the median rename of the
 * large file takes at least this many times the median of the small one. */
#define KC_RCOPY_RATIO_LIMIT 10

#endif
