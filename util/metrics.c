/*
 * metrics.c — the registry behind metrics.h and its Prometheus text output.
 *
 * Families live in an array kept sorted by name (so the output is stable
 * and a scrape needs no sort); each family's series are a list in creation
 * order.  Values are updated with relaxed atomics: a scrape may see one
 * series a moment later than another, never a torn value.  A histogram's
 * buckets are cumulative only on output; each observation bumps one bucket.
 */
#include "util/metrics.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/assert.h"
#include "util/grow.h"

struct ku_metric {
	ku_family *fam;
	ku_metric *prev, *next;
	char *values[KU_METRIC_MAX_LABELS];
	uint64_t u;                               /* counter; histogram count */
	int64_t i;                                /* gauge */
	uint64_t sum_bits;                        /* histogram sum, a double's bits */
	uint64_t buckets[KU_METRIC_MAX_BUCKETS + 1]; /* per bucket, +Inf last */
};

struct ku_family {
	ku_metrics *reg;
	char *name, *help;
	enum ku_metric_type type;
	char *labels[KU_METRIC_MAX_LABELS];
	int nlabels;
	double bounds[KU_METRIC_MAX_BUCKETS];
	int nbounds;
	ku_metric *head, *tail;
	ku_collect_fn collect;
	void *collect_arg;
};

struct ku_metrics {
	pthread_mutex_t mu;
	ku_family **fams;
	size_t nfams, cap;
};

/* ---- names ----------------------------------------------------------------- */

static int name_ok(const char *s, int metric)
{
	if (!s || !*s)
		return 0;
	for (const char *p = s; *p; p++) {
		char c = *p;
		int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (metric && c == ':');
		if (!alpha && !(p > s && c >= '0' && c <= '9'))
			return 0;
	}
	return metric || strncmp(s, "__", 2) != 0;
}

/* ---- registry ------------------------------------------------------------------ */

int ku_metrics_create(ku_metrics **out)
{
	ku_metrics *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->mu, NULL);
	*out = m;
	return 0;
}

static void series_free(ku_metric *s)
{
	for (int i = 0; i < KU_METRIC_MAX_LABELS; i++)
		free(s->values[i]);
	free(s);
}

static void family_free(ku_family *f)
{
	for (ku_metric *s = f->head, *n; s; s = n) {
		n = s->next;
		series_free(s);
	}
	for (int i = 0; i < f->nlabels; i++)
		free(f->labels[i]);
	free(f->name);
	free(f->help);
	free(f);
}

void ku_metrics_destroy(ku_metrics *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nfams; i++)
		family_free(m->fams[i]);
	free(m->fams);
	pthread_mutex_destroy(&m->mu);
	free(m);
}

/* Index of `name` in the sorted array, or where it would go (*found = 0). */
static size_t family_slot(ku_metrics *m, const char *name, int *found)
{
	size_t lo = 0, hi = m->nfams;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(m->fams[mid]->name, name);
		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = 0;
	return lo;
}

static int family_same(const ku_family *f, enum ku_metric_type type, const char *const *labels,
		       const double *buckets, int nbuckets, ku_collect_fn collect)
{
	int n = 0;
	while (labels && labels[n])
		n++;
	if (f->type != type || f->nlabels != n || (f->collect != NULL) != (collect != NULL))
		return 0;
	for (int i = 0; i < n; i++)
		if (strcmp(f->labels[i], labels[i]) != 0)
			return 0;
	if (type == KU_HISTOGRAM && (f->nbounds != nbuckets ||
				     memcmp(f->bounds, buckets, sizeof(double) * (size_t)nbuckets) != 0))
		return 0;
	return 1;
}

static int family_add(ku_metrics *m, const char *name, const char *help, enum ku_metric_type type,
		      const char *const *labels, const double *buckets, int nbuckets, ku_collect_fn collect,
		      void *arg, ku_family **out)
{
	int nl = 0;
	while (labels && labels[nl])
		nl++;
	if (!name_ok(name, 1) || nl > KU_METRIC_MAX_LABELS || (type != KU_COUNTER && type != KU_GAUGE &&
								  type != KU_HISTOGRAM))
		return -EINVAL;
	for (int i = 0; i < nl; i++)
		if (!name_ok(labels[i], 0) || (type == KU_HISTOGRAM && strcmp(labels[i], "le") == 0))
			return -EINVAL;
	if (type == KU_HISTOGRAM) {
		if (collect || nbuckets < 1 || nbuckets > KU_METRIC_MAX_BUCKETS || !buckets)
			return -EINVAL;
		for (int i = 0; i < nbuckets; i++)
			if (!isfinite(buckets[i]) || (i && buckets[i] <= buckets[i - 1]))
				return -EINVAL;
	}
	int rc = 0, found;
	pthread_mutex_lock(&m->mu);
	size_t at = family_slot(m, name, &found);
	if (found) {
		ku_family *f = m->fams[at];
		if (family_same(f, type, labels, buckets, nbuckets, collect)) {
			if (out)
				*out = f;
		} else {
			rc = -EEXIST;
		}
		goto out;
	}
	ku_family *f = calloc(1, sizeof(*f));
	if (!f || KAAS_GROW(m->fams, m->nfams, m->cap, 16)) {
		free(f);
		rc = -ENOMEM;
		goto out;
	}
	f->reg = m;
	f->name = strdup(name);
	f->help = strdup(help ? help : "");
	f->type = type;
	f->nlabels = nl;
	int ok = f->name && f->help;
	for (int i = 0; i < nl; i++)
		ok = (f->labels[i] = strdup(labels[i])) != NULL && ok;
	if (type == KU_HISTOGRAM) {
		memcpy(f->bounds, buckets, sizeof(double) * (size_t)nbuckets);
		f->nbounds = nbuckets;
	}
	f->collect = collect;
	f->collect_arg = arg;
	if (!ok) {
		family_free(f);
		rc = -ENOMEM;
		goto out;
	}
	memmove(&m->fams[at + 1], &m->fams[at], (m->nfams - at) * sizeof(*m->fams));
	m->fams[at] = f;
	m->nfams++;
	if (out)
		*out = f;
out:
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int ku_metrics_family(ku_metrics *m, const char *name, const char *help, enum ku_metric_type type,
		      const char *const *labels, const double *buckets, int nbuckets, ku_family **out)
{
	return family_add(m, name, help, type, labels, buckets, nbuckets, NULL, NULL, out);
}

int ku_metrics_collector(ku_metrics *m, const char *name, const char *help, enum ku_metric_type type,
			 const char *const *labels, ku_collect_fn fn, void *arg)
{
	if (!fn || type == KU_HISTOGRAM)
		return -EINVAL;
	return family_add(m, name, help, type, labels, NULL, 0, fn, arg, NULL);
}

/* ---- series ------------------------------------------------------------------------ */

ku_metric *ku_metrics_series(ku_family *f, const char *const *values)
{
	if (!f || f->collect)
		return NULL;
	int n = 0;
	while (values && n <= KU_METRIC_MAX_LABELS && values[n])
		n++;
	if (n != f->nlabels)
		return NULL;
	ku_metrics *m = f->reg;
	ku_metric *s = NULL;
	pthread_mutex_lock(&m->mu);
	for (ku_metric *it = f->head; it; it = it->next) {
		int same = 1;
		for (int i = 0; i < n && same; i++)
			same = strcmp(it->values[i], values[i]) == 0;
		if (same) {
			s = it;
			goto out;
		}
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		goto out;
	for (int i = 0; i < n; i++) {
		if (!(s->values[i] = strdup(values[i]))) {
			series_free(s);
			s = NULL;
			goto out;
		}
	}
	s->fam = f;
	s->prev = f->tail;
	if (f->tail)
		f->tail->next = s;
	else
		f->head = s;
	f->tail = s;
out:
	pthread_mutex_unlock(&m->mu);
	return s;
}

void ku_metric_remove(ku_metric *s)
{
	if (!s)
		return;
	ku_family *f = s->fam;
	pthread_mutex_lock(&f->reg->mu);
	KAAS_ASSERT(s->prev ? s->prev->next == s : f->head == s);
	if (s->prev)
		s->prev->next = s->next;
	else
		f->head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		f->tail = s->prev;
	pthread_mutex_unlock(&f->reg->mu);
	series_free(s);
}

/* ---- updates ------------------------------------------------------------------------ */

void ku_counter_add(ku_metric *s, uint64_t n)
{
	if (s)
		__atomic_add_fetch(&s->u, n, __ATOMIC_RELAXED);
}

void ku_gauge_set(ku_metric *s, int64_t v)
{
	if (s)
		__atomic_store_n(&s->i, v, __ATOMIC_RELAXED);
}

void ku_gauge_add(ku_metric *s, int64_t d)
{
	if (s)
		__atomic_add_fetch(&s->i, d, __ATOMIC_RELAXED);
}

void ku_histo_observe(ku_metric *s, double v)
{
	if (!s || isnan(v))
		return;
	const ku_family *f = s->fam;
	int b = 0;
	while (b < f->nbounds && v > f->bounds[b])
		b++;
	__atomic_add_fetch(&s->buckets[b], 1, __ATOMIC_RELAXED);
	uint64_t old = __atomic_load_n(&s->sum_bits, __ATOMIC_RELAXED), new;
	do {
		double d;
		memcpy(&d, &old, sizeof(d));
		d += v;
		memcpy(&new, &d, sizeof(new));
	} while (!__atomic_compare_exchange_n(&s->sum_bits, &old, new, 1, __ATOMIC_RELAXED,
					      __ATOMIC_RELAXED));
	__atomic_add_fetch(&s->u, 1, __ATOMIC_RELAXED);
}

uint64_t ku_counter_value(const ku_metric *s)
{
	return s ? __atomic_load_n(&s->u, __ATOMIC_RELAXED) : 0;
}

int64_t ku_gauge_value(const ku_metric *s)
{
	return s ? __atomic_load_n(&s->i, __ATOMIC_RELAXED) : 0;
}

uint64_t ku_histo_count(const ku_metric *s)
{
	return ku_counter_value(s);
}

double ku_histo_sum(const ku_metric *s)
{
	double d = 0;
	if (s) {
		uint64_t bits = __atomic_load_n(&s->sum_bits, __ATOMIC_RELAXED);
		memcpy(&d, &bits, sizeof(d));
	}
	return d;
}

/* ---- the text format ------------------------------------------------------------------ */

typedef struct sbuf {
	char *p;
	size_t len, cap;
	int oom;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void sb_fmt(sbuf *b, const char *fmt, ...)
{
	char tmp[128];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		sb_add(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* HELP text escapes backslash and newline; label values also the quote. */
static void sb_escaped(sbuf *b, const char *s, int quote)
{
	for (; *s; s++) {
		if (*s == '\\')
			sb_str(b, "\\\\");
		else if (*s == '\n')
			sb_str(b, "\\n");
		else if (quote && *s == '"')
			sb_str(b, "\\\"");
		else
			sb_add(b, s, 1);
	}
}

static void sb_double(sbuf *b, double v)
{
	if (isnan(v))
		sb_str(b, "NaN");
	else if (isinf(v))
		sb_str(b, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 9007199254740992.0)
		sb_fmt(b, "%.0f", v);
	else {
		/* the shortest form that reads back as the same double */
		char tmp[40];
		for (int prec = 15; prec <= 17; prec++) {
			snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
			if (strtod(tmp, NULL) == v)
				break;
		}
		sb_str(b, tmp);
	}
}

/* name{l1="v1",l2="v2"[,le="x"]} */
static void sb_series(sbuf *b, const char *name, const char *suffix, const ku_family *f,
		      const char *const *values, const char *le)
{
	sb_str(b, name);
	sb_str(b, suffix);
	if (f->nlabels || le) {
		sb_str(b, "{");
		for (int i = 0; i < f->nlabels; i++) {
			sb_fmt(b, "%s%s=\"", i ? "," : "", f->labels[i]);
			sb_escaped(b, values[i], 1);
			sb_str(b, "\"");
		}
		if (le)
			sb_fmt(b, "%sle=\"%s\"", f->nlabels ? "," : "", le);
		sb_str(b, "}");
	}
	sb_str(b, " ");
}

static const char *type_name(enum ku_metric_type t)
{
	return t == KU_COUNTER ? "counter" : t == KU_GAUGE ? "gauge" : "histogram";
}

static void render_histogram(sbuf *b, const ku_family *f, const ku_metric *s)
{
	/* One snapshot of the buckets; _count is their sum, so that the +Inf
	 * bucket and _count always agree even while observations land. */
	uint64_t snap[KU_METRIC_MAX_BUCKETS + 1], cum = 0;
	for (int i = 0; i <= f->nbounds; i++)
		snap[i] = __atomic_load_n(&s->buckets[i], __ATOMIC_RELAXED);
	for (int i = 0; i <= f->nbounds; i++) {
		char le[40];
		if (i < f->nbounds)
			snprintf(le, sizeof(le), "%.15g", f->bounds[i]);
		else
			snprintf(le, sizeof(le), "+Inf");
		cum += snap[i];
		sb_series(b, f->name, "_bucket", f, (const char *const *)s->values, le);
		sb_fmt(b, "%llu\n", (unsigned long long)cum);
	}
	sb_series(b, f->name, "_sum", f, (const char *const *)s->values, NULL);
	sb_double(b, ku_histo_sum(s));
	sb_str(b, "\n");
	sb_series(b, f->name, "_count", f, (const char *const *)s->values, NULL);
	sb_fmt(b, "%llu\n", (unsigned long long)cum);
}

typedef struct emit_ctx {
	sbuf *b;
	const ku_family *f;
} emit_ctx;

static void emit_cb(void *ctx, const char *const *values, double value)
{
	emit_ctx *e = ctx;
	sb_series(e->b, e->f->name, "", e->f, values, NULL);
	sb_double(e->b, value);
	sb_str(e->b, "\n");
}

int ku_metrics_render(ku_metrics *m, char **out, size_t *len)
{
	sbuf b = {0};
	sb_add(&b, "", 0);
	pthread_mutex_lock(&m->mu);
	for (size_t k = 0; k < m->nfams; k++) {
		const ku_family *f = m->fams[k];
		sb_fmt(&b, "# HELP %s ", f->name);
		sb_escaped(&b, f->help, 0);
		sb_fmt(&b, "\n# TYPE %s %s\n", f->name, type_name(f->type));
		if (f->collect) {
			emit_ctx e = {&b, f};
			f->collect(f->collect_arg, emit_cb, &e);
			continue;
		}
		for (const ku_metric *s = f->head; s; s = s->next) {
			if (f->type == KU_HISTOGRAM) {
				render_histogram(&b, f, s);
				continue;
			}
			sb_series(&b, f->name, "", f, (const char *const *)s->values, NULL);
			if (f->type == KU_COUNTER)
				sb_fmt(&b, "%llu\n", (unsigned long long)ku_counter_value(s));
			else
				sb_fmt(&b, "%lld\n", (long long)ku_gauge_value(s));
		}
	}
	pthread_mutex_unlock(&m->mu);
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	*out = b.p;
	*len = b.len;
	return 0;
}
