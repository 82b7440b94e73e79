/*
 * result.c — the observation store of one check.
 */
#include "conformance/result.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void kc_result_init(kc_result *r, int check)
{
	memset(r, 0, sizeof(*r));
	r->check = check;
	r->verdict = KC_PASS;
	r->counts = json_object();
	r->profile = json_object();
	r->anomalies = json_array();
	r->notes = json_array();
}

void kc_result_free(kc_result *r)
{
	json_decref(r->counts);
	json_decref(r->profile);
	json_decref(r->anomalies);
	json_decref(r->notes);
	r->counts = r->profile = r->anomalies = r->notes = NULL;
}

void kc_result_note(kc_result *r, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_array_append_new(r->notes, json_string(buf));
}

void kc_result_error(kc_result *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->error, sizeof(r->error), fmt, ap);
	va_end(ap);
	r->verdict = KC_ERROR;
	snprintf(r->summary, sizeof(r->summary), "could not complete: %.700s", r->error);
}

json_int_t kc_count_get(const json_t *counts, const char *key)
{
	json_t *v = json_object_get(counts, key);
	return json_is_integer(v) ? json_integer_value(v) : 0;
}

void kc_result_count(kc_result *r, const char *key, json_int_t n)
{
	json_object_set_new(r->counts, key, json_integer(kc_count_get(r->counts, key) + n));
}

json_int_t kc_result_get(const kc_result *r, const char *key)
{
	return kc_count_get(r->counts, key);
}

void kc_result_add_counts(kc_result *r, const char *prefix, const json_t *src)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)src, k, v)
	{
		if (!json_is_integer(v))
			continue;
		char key[256];
		if (prefix)
			snprintf(key, sizeof(key), "%s.%s", prefix, k);
		else
			snprintf(key, sizeof(key), "%s", k);
		kc_result_count(r, key, json_integer_value(v));
	}
}

void kc_result_add_anomalies(kc_result *r, const char *variant, const json_t *arr, int64_t total)
{
	size_t i;
	json_t *a;
	json_array_foreach((json_t *)arr, i, a)
	{
		if (json_array_size(r->anomalies) >= KC_REPORT_ANOMALIES)
			break;
		json_t *c = json_deep_copy(a);
		if (variant)
			json_object_set_new(c, "variant", json_string(variant));
		json_array_append_new(r->anomalies, c);
	}
	r->anomalies_total += total > (int64_t)json_array_size(arr) ? total
								  : (int64_t)json_array_size(arr);
}
