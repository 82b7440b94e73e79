/*
 * util.c — clocks, latency percentiles, option parsing and JSON output for
 * the benchmark programs (bench.h).
 */
#include "ci/bench/bench.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int64_t bn_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- latency samples ------------------------------------------------------ */

static int lat_grow(bn_lat *l, size_t need)
{
	if (need <= l->cap)
		return 0;
	size_t nc = l->cap ? l->cap * 2 : 4096;
	while (nc < need)
		nc *= 2;
	int64_t *nv = realloc(l->v, nc * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	l->v = nv;
	l->cap = nc;
	return 0;
}

void bn_lat_add(bn_lat *l, int64_t ns)
{
	/* Out of memory only loses a sample; the count of operations is kept
	 * by the caller. */
	if (lat_grow(l, l->n + 1) == 0) {
		l->v[l->n++] = ns;
		l->sorted = 0;
	}
}

int bn_lat_merge(bn_lat *dst, const bn_lat *src)
{
	if (src->n == 0)
		return 0;
	if (lat_grow(dst, dst->n + src->n))
		return -ENOMEM;
	memcpy(dst->v + dst->n, src->v, src->n * sizeof(*src->v));
	dst->n += src->n;
	dst->sorted = 0;
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

int64_t bn_lat_pct(bn_lat *l, double p)
{
	if (l->n == 0)
		return 0;
	if (!l->sorted) {
		qsort(l->v, l->n, sizeof(*l->v), cmp_i64);
		l->sorted = 1;
	}
	/* Nearest rank. */
	double r = p / 100.0 * (double)l->n;
	size_t k = r <= 1.0 ? 0 : (size_t)(r + 0.999999) - 1;
	if (k >= l->n)
		k = l->n - 1;
	return l->v[k];
}

json_t *bn_lat_json(bn_lat *l)
{
	double sum = 0;
	for (size_t i = 0; i < l->n; i++)
		sum += (double)l->v[i];
	return json_pack("{s:I,s:f,s:f,s:f,s:f,s:f}", "n", (json_int_t)l->n,
			 "p50_us", (double)bn_lat_pct(l, 50) / 1e3, "p90_us", (double)bn_lat_pct(l, 90) / 1e3,
			 "p99_us", (double)bn_lat_pct(l, 99) / 1e3, "max_us", (double)bn_lat_pct(l, 100) / 1e3,
			 "mean_us", l->n ? sum / (double)l->n / 1e3 : 0.0);
}

void bn_lat_free(bn_lat *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* ---- options ----------------------------------------------------------------- */

int bn_opts_init(bn_opts *o, int argc, char **argv)
{
	o->argc = argc;
	o->argv = argv;
	o->used = calloc((size_t)argc + 1, 1);
	return o->used ? 0 : -ENOMEM;
}

static const char *lookup(bn_opts *o, const char *name)
{
	const char *v = NULL;
	for (int i = 0; i + 1 < o->argc; i++) {
		const char *a = o->argv[i];
		if (a[0] == '-' && a[1] == '-' && strcmp(a + 2, name) == 0) {
			o->used[i] = o->used[i + 1] = 1;
			v = o->argv[++i];
		}
	}
	return v;
}

const char *bn_opt_str(bn_opts *o, const char *name, const char *dflt)
{
	const char *v = lookup(o, name);
	return v ? v : dflt;
}

int64_t bn_opt_int(bn_opts *o, const char *name, int64_t dflt)
{
	const char *v = lookup(o, name);
	if (!v)
		return dflt;
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 0);
	if (errno || *end || end == v) {
		fprintf(stderr, "bad integer for --%s: '%s'\n", name, v);
		exit(2);
	}
	return x;
}

double bn_opt_double(bn_opts *o, const char *name, double dflt)
{
	const char *v = lookup(o, name);
	if (!v)
		return dflt;
	char *end;
	double x = strtod(v, &end);
	if (*end || end == v) {
		fprintf(stderr, "bad number for --%s: '%s'\n", name, v);
		exit(2);
	}
	return x;
}

int bn_opts_check(bn_opts *o, const char *prog)
{
	for (int i = 0; i < o->argc; i++) {
		if (!o->used[i]) {
			fprintf(stderr, "%s: unknown or incomplete option '%s'\n", prog, o->argv[i]);
			return -1;
		}
	}
	return 0;
}

void bn_opts_free(bn_opts *o)
{
	free(o->used);
	o->used = NULL;
}

int bn_emit(json_t *obj)
{
	if (!obj)
		return -1;
	int rc = json_dumpf(obj, stdout, JSON_COMPACT | JSON_REAL_PRECISION(6));
	fputc('\n', stdout);
	fflush(stdout);
	json_decref(obj);
	return rc ? -1 : 0;
}

/* ---- payloads ------------------------------------------------------------------- */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void bn_fill_random(void *buf, size_t n, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t s = seed;
	while (n >= 8) {
		uint64_t v = splitmix(&s);
		memcpy(p, &v, 8);
		p += 8;
		n -= 8;
	}
	uint64_t v = splitmix(&s);
	memcpy(p, &v, n);
}

void bn_fill_text(void *buf, size_t n, uint64_t seed)
{
	static const char *words[] = {
		"user", "order", "id", "status", "ok", "error", "timestamp", "region", "eu-west",
		"us-east", "amount", "currency", "EUR", "USD", "item", "count", "session", "true",
		"false", "null", "request", "latency_ms", "host", "kaas", "partition", "offset",
		"{", "}", ":", ",", "\"", "=", "GET", "POST", "/api/v1/orders", "200", "404",
	};
	const size_t nw = sizeof(words) / sizeof(words[0]);
	uint8_t *p = buf;
	uint64_t s = seed;
	size_t i = 0;
	while (i < n) {
		uint64_t r = splitmix(&s);
		const char *w;
		char num[24];
		if (r % 5 == 0) {
			/* Numbers keep it from compressing too well. */
			snprintf(num, sizeof(num), "%llu", (unsigned long long)(r >> 20) % 1000000);
			w = num;
		} else {
			w = words[(r >> 8) % nw];
		}
		for (const char *c = w; *c && i < n; c++)
			p[i++] = (uint8_t)*c;
		if (i < n)
			p[i++] = ' ';
	}
}
