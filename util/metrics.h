/*
 * metrics.h — counters, gauges and histograms, and the Prometheus text
 * format (version 0.0.4) that a scrape reads.
 *
 * A registry holds families (a name, a help line, a type, label names, and
 * for histograms the bucket bounds); a family holds series, one per set of
 * label values.  Code on the hot path keeps the ku_metric pointer of its
 * series and updates it with one atomic operation — no lookup, no lock.
 * Values that only exist when asked (consumer lag: committed offset against
 * the high watermark) come from a collector called at scrape time.
 *
 * A scrape (ku_metrics_render) costs O(series): it walks what is registered
 * and never looks at the volume.
 *
 * Thread safety: every function may be called from any thread.  Updates are
 * lock-free; registering, removing and rendering take the registry's lock.
 * A series stays valid until ku_metric_remove() or ku_metrics_destroy().
 *
 * Names follow Prometheus' rules (checked at registration: a bad name is a
 * programming error and fails with -EINVAL): metric names
 * [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* and not
 * starting with "__".  Label values are any bytes, escaped on output.
 */
#ifndef KAAS_METRICS_H
#define KAAS_METRICS_H

#include <stddef.h>
#include <stdint.h>

enum ku_metric_type { KU_COUNTER, KU_GAUGE, KU_HISTOGRAM };

#define KU_METRIC_MAX_LABELS 4
#define KU_METRIC_MAX_BUCKETS 24

typedef struct ku_metrics ku_metrics;
typedef struct ku_family ku_family;
typedef struct ku_metric ku_metric;

int ku_metrics_create(ku_metrics **out);
void ku_metrics_destroy(ku_metrics *m); /* NULL-safe */

/* Registers a family, or returns the one already registered under `name`
 * when type, labels and buckets agree (-EEXIST when they do not).
 * `labels`: NULL-terminated, at most KU_METRIC_MAX_LABELS.  `buckets`:
 * histograms only, strictly increasing upper bounds (the +Inf bucket is
 * implicit), at most KU_METRIC_MAX_BUCKETS.  0 or -errno. */
int ku_metrics_family(ku_metrics *m, const char *name, const char *help, enum ku_metric_type type,
		      const char *const *labels, const double *buckets, int nbuckets, ku_family **out);

/* The series of a family for these label values (as many as the family has
 * labels), created at zero the first time.  NULL on allocation failure or a
 * wrong number of values: the caller may go on with a NULL series, every
 * update below ignores it. */
ku_metric *ku_metrics_series(ku_family *f, const char *const *values);

/* Forgets a series (a partition that went away).  NULL-safe.  The pointer
 * must not be used afterwards. */
void ku_metric_remove(ku_metric *s);

/* Updates: NULL-safe, lock-free. */
void ku_counter_add(ku_metric *s, uint64_t n);
void ku_gauge_set(ku_metric *s, int64_t v);
void ku_gauge_add(ku_metric *s, int64_t d);
void ku_histo_observe(ku_metric *s, double v);

/* Reads (tests, health checks). */
uint64_t ku_counter_value(const ku_metric *s);
int64_t ku_gauge_value(const ku_metric *s);
uint64_t ku_histo_count(const ku_metric *s);
double ku_histo_sum(const ku_metric *s);

/* A collector emits series at scrape time through `emit`, e.g. one gauge
 * per group and partition.  It runs under the registry's lock: it must not
 * call back into this registry, and it must be quick (no I/O). */
typedef void (*ku_emit_fn)(void *ctx, const char *const *values, double value);
typedef void (*ku_collect_fn)(void *arg, ku_emit_fn emit, void *ctx);
int ku_metrics_collector(ku_metrics *m, const char *name, const char *help, enum ku_metric_type type,
			 const char *const *labels, ku_collect_fn fn, void *arg);

/* The whole registry in the Prometheus text format, families in name order.
 * *out is malloc'd (free it), *len its length.  0 or -ENOMEM. */
int ku_metrics_render(ku_metrics *m, char **out, size_t *len);

#endif
