/* test_metrics.c — the metrics registry: families and series, atomic
 * updates from several threads, histograms' cumulative buckets, collectors,
 * escaping, and names Prometheus would refuse. */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/metrics.h"
#include "util/test/ktest.h"

static char *render(ku_metrics *m)
{
	char *out = NULL;
	size_t len = 0;
	ck_assert_int_eq(ku_metrics_render(m, &out, &len), 0);
	ck_assert_uint_eq(strlen(out), len);
	return out;
}

START_TEST(counter_and_gauge_render)
{
	ku_metrics *m;
	ck_assert_int_eq(ku_metrics_create(&m), 0);
	ku_family *req, *conn;
	const char *lab[] = {"api", NULL};
	ck_assert_int_eq(ku_metrics_family(m, "kaas_requests_total", "Requests handled.", KU_COUNTER, lab, NULL, 0,
					   &req), 0);
	ck_assert_int_eq(ku_metrics_family(m, "kaas_connections", "Open connections.", KU_GAUGE, NULL, NULL, 0,
					   &conn), 0);
	ku_metric *p = ku_metrics_series(req, (const char *[]){"Produce", NULL});
	ku_metric *f = ku_metrics_series(req, (const char *[]){"Fetch", NULL});
	ck_assert_ptr_eq(ku_metrics_series(req, (const char *[]){"Produce", NULL}), p); /* same labels, same series */
	ck_assert_ptr_null(ku_metrics_series(req, (const char *[]){NULL}));            /* too few values */
	ku_counter_add(p, 3);
	ku_counter_add(f, 1);
	ku_metric *c = ku_metrics_series(conn, (const char *[]){NULL});
	ku_gauge_set(c, 7);
	ku_gauge_add(c, -2);
	char *out = render(m);
	/* families in name order, series in creation order */
	ck_assert_str_eq(out, "# HELP kaas_connections Open connections.\n"
			      "# TYPE kaas_connections gauge\n"
			      "kaas_connections 5\n"
			      "# HELP kaas_requests_total Requests handled.\n"
			      "# TYPE kaas_requests_total counter\n"
			      "kaas_requests_total{api=\"Produce\"} 3\n"
			      "kaas_requests_total{api=\"Fetch\"} 1\n");
	free(out);
	ku_metric_remove(f);
	out = render(m);
	ck_assert_ptr_null(strstr(out, "Fetch"));
	free(out);
	ku_metrics_destroy(m);
}
END_TEST

START_TEST(histogram_buckets_are_cumulative)
{
	ku_metrics *m;
	ck_assert_int_eq(ku_metrics_create(&m), 0);
	ku_family *h;
	const double b[] = {0.001, 0.01, 0.1};
	ck_assert_int_eq(ku_metrics_family(m, "kaas_fsync_seconds", "fsync latency.", KU_HISTOGRAM, NULL, b, 3, &h),
			 0);
	ku_metric *s = ku_metrics_series(h, (const char *[]){NULL});
	ku_histo_observe(s, 0.0005);
	ku_histo_observe(s, 0.001); /* on the bound: le is inclusive */
	ku_histo_observe(s, 0.05);
	ku_histo_observe(s, 5);
	ck_assert_uint_eq(ku_histo_count(s), 4);
	char *out = render(m);
	ck_assert_ptr_nonnull(strstr(out, "kaas_fsync_seconds_bucket{le=\"0.001\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(out, "kaas_fsync_seconds_bucket{le=\"0.01\"} 2\n"));
	ck_assert_ptr_nonnull(strstr(out, "kaas_fsync_seconds_bucket{le=\"0.1\"} 3\n"));
	ck_assert_ptr_nonnull(strstr(out, "kaas_fsync_seconds_bucket{le=\"+Inf\"} 4\n"));
	ck_assert_ptr_nonnull(strstr(out, "kaas_fsync_seconds_count 4\n"));
	ck_assert_ptr_nonnull(strstr(out, "kaas_fsync_seconds_sum 5.0515"));
	free(out);
	ku_metrics_destroy(m);
}
END_TEST

static void *hammer(void *arg)
{
	ku_metric **s = arg;
	for (int i = 0; i < 100000; i++) {
		ku_counter_add(s[0], 1);
		ku_histo_observe(s[1], 1.0);
	}
	return NULL;
}

START_TEST(updates_from_threads_add_up)
{
	ku_metrics *m;
	ck_assert_int_eq(ku_metrics_create(&m), 0);
	ku_family *c, *h;
	const double b[] = {0.5, 2};
	ck_assert_int_eq(ku_metrics_family(m, "x_total", "", KU_COUNTER, NULL, NULL, 0, &c), 0);
	ck_assert_int_eq(ku_metrics_family(m, "y", "", KU_HISTOGRAM, NULL, b, 2, &h), 0);
	ku_metric *s[2] = {ku_metrics_series(c, (const char *[]){NULL}), ku_metrics_series(h, (const char *[]){NULL})};
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, hammer, s);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	ck_assert_uint_eq(ku_counter_value(s[0]), 400000);
	ck_assert_uint_eq(ku_histo_count(s[1]), 400000);
	ck_assert(ku_histo_sum(s[1]) == 400000.0);
	ku_metrics_destroy(m);
}
END_TEST

static void lag(void *arg, ku_emit_fn emit, void *ctx)
{
	int *calls = arg;
	(*calls)++;
	emit(ctx, (const char *[]){"g1", "orders", "0", NULL}, 12);
	emit(ctx, (const char *[]){"g1", "orders", "1", NULL}, 0);
}

START_TEST(collectors_run_at_scrape_time)
{
	ku_metrics *m;
	ck_assert_int_eq(ku_metrics_create(&m), 0);
	int calls = 0;
	const char *lab[] = {"group", "topic", "partition", NULL};
	ck_assert_int_eq(ku_metrics_collector(m, "kaas_consumer_lag", "Records behind.", KU_GAUGE, lab, lag, &calls),
			 0);
	ck_assert_int_eq(calls, 0);
	char *out = render(m);
	ck_assert_int_eq(calls, 1);
	ck_assert_ptr_nonnull(strstr(out, "kaas_consumer_lag{group=\"g1\",topic=\"orders\",partition=\"0\"} 12\n"));
	free(out);
	ku_metrics_destroy(m);
}
END_TEST

START_TEST(label_values_and_help_are_escaped)
{
	ku_metrics *m;
	ck_assert_int_eq(ku_metrics_create(&m), 0);
	ku_family *f;
	ck_assert_int_eq(ku_metrics_family(m, "a", "back\\slash\nnew line", KU_COUNTER, (const char *[]){"v", NULL},
					   NULL, 0, &f), 0);
	ku_counter_add(ku_metrics_series(f, (const char *[]){"q\"b\\n\nx", NULL}), 1);
	char *out = render(m);
	ck_assert_ptr_nonnull(strstr(out, "# HELP a back\\\\slash\\nnew line\n"));
	ck_assert_ptr_nonnull(strstr(out, "a{v=\"q\\\"b\\\\n\\nx\"} 1\n"));
	free(out);
	ku_metrics_destroy(m);
}
END_TEST

START_TEST(bad_names_and_conflicts_are_refused)
{
	ku_metrics *m;
	ck_assert_int_eq(ku_metrics_create(&m), 0);
	ku_family *f;
	ck_assert_int_eq(ku_metrics_family(m, "9lives", "", KU_COUNTER, NULL, NULL, 0, &f), -EINVAL);
	ck_assert_int_eq(ku_metrics_family(m, "a-b", "", KU_COUNTER, NULL, NULL, 0, &f), -EINVAL);
	ck_assert_int_eq(ku_metrics_family(m, "ok", "", KU_COUNTER, (const char *[]){"__x", NULL}, NULL, 0, &f),
			 -EINVAL);
	ck_assert_int_eq(ku_metrics_family(m, "h", "", KU_HISTOGRAM, (const char *[]){"le", NULL},
					   (const double[]){1}, 1, &f), -EINVAL);
	ck_assert_int_eq(ku_metrics_family(m, "h", "", KU_HISTOGRAM, NULL, (const double[]){2, 1}, 2, &f), -EINVAL);
	ck_assert_int_eq(ku_metrics_family(m, "ns:ok_total", "", KU_COUNTER, NULL, NULL, 0, &f), 0);
	ku_family *again;
	ck_assert_int_eq(ku_metrics_family(m, "ns:ok_total", "", KU_COUNTER, NULL, NULL, 0, &again), 0);
	ck_assert_ptr_eq(again, f);
	ck_assert_int_eq(ku_metrics_family(m, "ns:ok_total", "", KU_GAUGE, NULL, NULL, 0, &again), -EEXIST);
	ku_metrics_destroy(m);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){.suite = "util-metrics", .tcase = "metrics", .timeout = 60},
			  KTEST_LIST(counter_and_gauge_render, histogram_buckets_are_cumulative,
				     updates_from_threads_add_up, collectors_run_at_scrape_time,
				     label_values_and_help_are_escaped, bad_names_and_conflicts_are_refused));
}
