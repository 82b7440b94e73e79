/*
 * result.h — what one check observed and decided.
 *
 * A check fills counts, anomalies, notes and a profile, then calls its judge
 * (judge.h) once; the verdict and summary it gets are final.  The report
 * writers only print what is here, they never decide anything themselves.
 */
#ifndef KC_RESULT_H
#define KC_RESULT_H

#include <jansson.h>
#include <stdint.h>

#include "conformance/kc.h"

#define KC_REPORT_ANOMALIES 10 /* anomalies kept per check in the report */

typedef struct kc_result {
	int check; /* kc_check_id */
	int ran;
	kc_verdict verdict;
	char summary[768];
	char error[768]; /* set with KC_ERROR */
	json_t *counts;  /* {"name": integer}; variant counts are "variant.name" */
	json_t *profile; /* check-specific observations (docs/formats.md) */
	json_t *anomalies;
	json_t *notes;  /* array of strings */
	int64_t anomalies_total;
	int64_t duration_ms;
	int64_t iterations;
	/* Detection power (class 4): a sampled check sets what one observation
	 * is and the fewest any one observer made (docs/conformance.md); a
	 * check that looks once (preflight, unlink-open, fsync, rename-copy)
	 * leaves observation NULL. */
	const char *observation;
	int64_t observations;
	char reproduce[256];
} kc_result;

void kc_result_init(kc_result *r, int check);
void kc_result_free(kc_result *r);
void kc_result_note(kc_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kc_result_error(kc_result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Adds src's counts to r under "prefix.key" ("key" when prefix is NULL). */
void kc_result_add_counts(kc_result *r, const char *prefix, const json_t *src);
void kc_result_count(kc_result *r, const char *key, json_int_t n);
json_int_t kc_result_get(const kc_result *r, const char *key);
/* Keeps up to KC_REPORT_ANOMALIES of arr, tagging each with its variant;
 * anomalies_total counts all of them. */
void kc_result_add_anomalies(kc_result *r, const char *variant, const json_t *arr, int64_t total);

/* Reads an integer counter out of a counts object (0 when absent). */
json_int_t kc_count_get(const json_t *counts, const char *key);

#endif
