/* test_http.c — the metrics listener (http.c, obs.c): the request-head
 * reader on partial, oversized and malformed heads; the endpoints' answers;
 * a live listener that keeps answering while hostile clients hold their
 * slots, refuses past its cap and drops a client that stalls; and the
 * request and partition series obs.c keeps, counted against a known
 * number of updates. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kaas/net/http.h"
#include "kaas/net/obs.h"
#include "kaas/net/server_int.h"
#include "kaas/proto/header.h"
#include "kaas/proto/kerr.h"
#include "util/metrics.h"
#include "util/test/ktest.h"

static int parse(const char *s, kn_http_req *rq) { return kn_http_parse(s, strlen(s), rq); }

START_TEST(partial_heads_need_more)
{
	const char *full = "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n";
	kn_http_req rq;
	for (size_t n = 0; n < strlen(full); n++)
		ck_assert_int_eq(kn_http_parse(full, n, &rq), 0);
	ck_assert_int_eq(parse(full, &rq), (int)strlen(full));
	ck_assert_str_eq(rq.method, "GET");
	ck_assert_str_eq(rq.path, "/metrics"); /* the query is not part of the path */
	ck_assert_int_eq(rq.minor, 1);
	/* Bytes after the head (a body, a pipelined request) are not consumed. */
	char two[256];
	snprintf(two, sizeof(two), "%sGET /x HTTP/1.1\r\n\r\n", full);
	ck_assert_int_eq(parse(two, &rq), (int)strlen(full));
	ck_assert_int_eq(parse("GET / HTTP/1.0\r\n\r\n", &rq), 18);
	ck_assert_int_eq(rq.minor, 0);
}
END_TEST

START_TEST(oversized_heads_refused)
{
	size_t n = KN_HTTP_MAX_HEAD + 100;
	char *b = malloc(n);
	ck_assert_ptr_nonnull(b);
	memcpy(b, "GET / HTTP/1.1\r\nX: ", 19);
	memset(b + 19, 'a', n - 19);
	kn_http_req rq;
	ck_assert_int_eq(kn_http_parse(b, KN_HTTP_MAX_HEAD - 1, &rq), 0);
	ck_assert_int_eq(kn_http_parse(b, KN_HTTP_MAX_HEAD, &rq), -E2BIG);
	ck_assert_int_eq(kn_http_parse(b, n, &rq), -E2BIG);
	/* A terminator past the bound does not make it acceptable. */
	memcpy(b + n - 4, "\r\n\r\n", 4);
	ck_assert_int_eq(kn_http_parse(b, n, &rq), -E2BIG);
	free(b);
	/* A path longer than the reader keeps. */
	char p[600] = "GET /";
	memset(p + 5, 'p', 400);
	strcpy(p + 405, " HTTP/1.1\r\n\r\n");
	ck_assert_int_eq(parse(p, &rq), -EBADMSG);
}
END_TEST

START_TEST(malformed_heads_refused)
{
	kn_http_req rq;
	static const char *const bad[] = {
		"GET\r\n\r\n",
		" GET / HTTP/1.1\r\n\r\n",
		"GET  / HTTP/1.1\r\n\r\n",
		"GET metrics HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1 \r\n\r\n",
		"GET / HTTX/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nNoColon\r\n\r\n",
		"GET / HTTP/1.1\r\nSpace : x\r\n\r\n",
		"GET / HTTP/1.1\r\n folded\r\n\r\n",
		"GET / HTTP/1.1\r\nA: b\nC: d\r\n\r\n",
		"G\x01T / HTTP/1.1\r\n\r\n",
		"VERYLONGMETHODNAME / HTTP/1.1\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(parse(bad[i], &rq) == -EBADMSG, "accepted: %s", bad[i]);
	/* A control byte fails before the head is complete. */
	ck_assert_int_eq(kn_http_parse("GET /\x00", 6, &rq), -EBADMSG);
	ck_assert_int_eq(parse("GET / HTTP/2.0\r\n\r\n", &rq), -EPROTONOSUPPORT);
	ck_assert_int_eq(parse("GET / HTTP/1.7\r\n\r\n", &rq), -EPROTONOSUPPORT);
}
END_TEST

static int ready_answer;
static int ready(void *arg, char *why, size_t n)
{
	(void)arg;
	snprintf(why, n, "%s", ready_answer ? "fine" : "taking over");
	return ready_answer;
}

static int answer(const char *method, const char *path, ku_metrics *m, char **body)
{
	kn_http_req rq;
	snprintf(rq.method, sizeof(rq.method), "%s", method);
	snprintf(rq.path, sizeof(rq.path), "%s", path);
	rq.minor = 1;
	const char *ct;
	size_t len;
	int code = kn_http_answer(&rq, m, ready, NULL, &ct, body, &len);
	ck_assert_uint_eq(len, strlen(*body));
	if (!strcmp(path, "/metrics") && code == 200)
		ck_assert_str_eq(ct, "text/plain; version=0.0.4; charset=utf-8");
	return code;
}

START_TEST(endpoints)
{
	ku_metrics *m;
	ck_assert_int_eq(ku_metrics_create(&m), 0);
	ku_family *f;
	const char *const none[] = {NULL};
	ck_assert_int_eq(ku_metrics_family(m, "t_total", "a test counter", KU_COUNTER, none, NULL, 0, &f), 0);
	ku_counter_add(ku_metrics_series(f, none), 5);
	char *b;
	ck_assert_int_eq(answer("GET", "/healthz", m, &b), 200);
	free(b);
	ready_answer = 0;
	ck_assert_int_eq(answer("GET", "/readyz", m, &b), 503);
	ck_assert_ptr_nonnull(strstr(b, "taking over"));
	free(b);
	ready_answer = 1;
	ck_assert_int_eq(answer("GET", "/readyz", m, &b), 200);
	free(b);
	ck_assert_int_eq(answer("GET", "/metrics", m, &b), 200);
	ck_assert_ptr_nonnull(strstr(b, "t_total 5\n"));
	free(b);
	ck_assert_int_eq(answer("HEAD", "/metrics", m, &b), 200);
	free(b);
	ck_assert_int_eq(answer("POST", "/metrics", m, &b), 405);
	free(b);
	ck_assert_int_eq(answer("GET", "/metrics/", m, &b), 404);
	free(b);
	ck_assert_int_eq(answer("DELETE", "/nope", m, &b), 404);
	free(b);
	ku_metrics_destroy(m);
}
END_TEST

/* ---- a live listener ------------------------------------------------------------------ */

static int dial(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Everything until the server closes (at most 5 s). */
static char *slurp(int fd)
{
	static char buf[65536];
	size_t n = 0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ck_assert_int_eq(poll(&p, 1, 7000), 1);
		ssize_t k = recv(fd, buf + n, sizeof(buf) - 1 - n, 0);
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	buf[n] = 0;
	return buf;
}

static const char *get(int port, const char *req)
{
	int fd = dial(port);
	ck_assert_int_eq(send(fd, req, strlen(req), 0), (ssize_t)strlen(req));
	char *r = slurp(fd);
	close(fd);
	return r;
}

START_TEST(live_listener_survives_hostile_clients)
{
	ku_metrics *m;
	ck_assert_int_eq(ku_metrics_create(&m), 0);
	kn_http *h = NULL;
	char err[256];
	ready_answer = 1;
	ck_assert_int_eq(kn_http_start("127.0.0.1", 0, m, ready, NULL, &h, err, sizeof(err)), 0);
	int port = kn_http_port(h);
	ck_assert_int_gt(port, 0);
	const char *r = get(port, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 200 OK\r\n", 17), "%s", r);
	ck_assert_ptr_nonnull(strstr(r, "Connection: close\r\n"));
	r = get(port, "GARBAGE\r\n\r\n");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 400 ", 13), "%s", r);
	r = get(port, "GET / HTTP/3.0\r\n\r\n");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 505 ", 13), "%s", r);

	/* Slow clients: a partial head each, holding every slot but one. */
	int slow[KN_HTTP_MAX_CONNS];
	for (int i = 0; i < KN_HTTP_MAX_CONNS - 1; i++) {
		slow[i] = dial(port);
		ck_assert_int_eq(send(slow[i], "GET /met", 8, 0), 8);
	}
	usleep(100 * 1000);
	r = get(port, "GET /metrics HTTP/1.1\r\n\r\n");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 200 OK\r\n", 17), "%s", r);
	ck_assert_ptr_nonnull(strstr(r, "kaas_http_requests_total{class=\"2xx\"}"));
	/* Past the cap: refused at once, not queued behind them. */
	slow[KN_HTTP_MAX_CONNS - 1] = dial(port);
	usleep(100 * 1000);
	r = get(port, "GET /healthz HTTP/1.1\r\n\r\n");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 503 ", 13), "%s", r);
	/* The deadline closes the slow ones without an answer... */
	for (int i = 0; i < KN_HTTP_MAX_CONNS; i++) {
		ck_assert_str_eq(slurp(slow[i]), "");
		close(slow[i]);
	}
	/* ...and the listener serves again. */
	r = get(port, "GET /readyz HTTP/1.0\r\n\r\n");
	ck_assert_msg(!strncmp(r, "HTTP/1.1 200 OK\r\n", 17), "%s", r);
	/* An oversized head is answered 431, whatever else the client sends. */
	int fd = dial(port);
	char big[KN_HTTP_MAX_HEAD + 16];
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	ck_assert_int_eq(send(fd, big, sizeof(big), 0), (ssize_t)sizeof(big));
	r = slurp(fd);
	close(fd);
	ck_assert_msg(!strncmp(r, "HTTP/1.1 431 ", 13), "%s", r);
	kn_http_stop(h);
	ku_metrics_destroy(m);
}
END_TEST

/* ---- obs.c's series ------------------------------------------------------------------------ */

static long long value_of(const char *text, const char *series)
{
	const char *p = strstr(text, series);
	ck_assert_msg(p, "no %s in the scrape", series);
	return atoll(p + strlen(series));
}

START_TEST(request_and_partition_series_count)
{
	static kb_broker b;
	kn_server *s = calloc(1, sizeof(*s));
	ck_assert_ptr_nonnull(s);
	kb_config_defaults(&b.cfg);
	ck_assert_int_eq(ku_metrics_create(&b.metrics), 0);
	s->b = &b;
	b.server = s;
	kn_budget_init(&s->budget, 1000);
	char err[256];
	ck_assert_int_eq(kn_obs_create(s, &s->obs, err, sizeof(err)), 0);
	ck_assert_int_eq(kn_obs_http_port(s->obs), -1); /* metrics.listen is off by default */
	const int N = 37;
	for (int i = 0; i < N; i++)
		kn_obs_request(s->obs, KAAS_API_PRODUCE, 7, 2000000); /* 2 ms */
	kn_obs_request(s->obs, KAAS_API_PRODUCE, 99, 1);            /* out of range: ignored */
	kn_obs_request(s->obs, 999, 0, 1);
	kb_req req = {.broker = &b};
	kw_str t1 = {"orders", 6}, t2 = {"audit", 5};
	for (int i = 0; i < N; i++)
		kn_obs_partition(&req, KAAS_API_PRODUCE, t1, KERR_NONE, 100);
	kn_obs_partition(&req, KAAS_API_FETCH, t1, KERR_NONE, 5);
	kn_obs_partition(&req, KAAS_API_FETCH, t2, KERR_NONE, 9);
	kn_obs_partition(&req, KAAS_API_PRODUCE, t2, KERR_KAFKA_STORAGE_ERROR, 0);
	kn_obs_partition(&req, KAAS_API_PRODUCE, t2, KERR_KAFKA_STORAGE_ERROR, 0);
	kn_obs_partition(&req, KAAS_API_FETCH, t2, KERR_OFFSET_OUT_OF_RANGE, 0);
	kb_req orphan = {0};
	kn_obs_partition(&orphan, KAAS_API_PRODUCE, t1, KERR_NONE, 1); /* no broker: ignored */
	char *text;
	size_t len;
	ck_assert_int_eq(ku_metrics_render(b.metrics, &text, &len), 0);
	ck_assert_int_eq(value_of(text, "kaas_requests_total{api=\"Produce\",version=\"7\"} "), N);
	ck_assert_int_eq(value_of(text, "kaas_request_duration_seconds_count{api=\"Produce\",version=\"7\"} "), N);
	ck_assert_int_eq(value_of(text, "kaas_request_duration_seconds_bucket{api=\"Produce\",version=\"7\",le=\"0.001\"} "), 0);
	ck_assert_int_eq(value_of(text, "kaas_request_duration_seconds_bucket{api=\"Produce\",version=\"7\",le=\"0.0025\"} "), N);
	ck_assert_int_eq(value_of(text, "kaas_requests_total{api=\"Fetch\",version=\"4\"} "), 0);
	ck_assert_int_eq(value_of(text, "kaas_topic_bytes_in_total{topic=\"orders\"} "), 100 * N);
	ck_assert_int_eq(value_of(text, "kaas_topic_bytes_out_total{topic=\"orders\"} "), 5);
	ck_assert_int_eq(value_of(text, "kaas_topic_bytes_out_total{topic=\"audit\"} "), 9);
	ck_assert_int_eq(value_of(text, "kaas_partition_errors_total{api=\"Produce\",error=\"KAFKA_STORAGE_ERROR\"} "), 2);
	ck_assert_int_eq(value_of(text, "kaas_partition_errors_total{api=\"Fetch\",error=\"OFFSET_OUT_OF_RANGE\"} "), 1);
	ck_assert_int_eq(value_of(text, "kaas_request_budget_bytes{state=\"limit\"} "), 1000);
	ck_assert_int_eq(value_of(text, "kaas_connections "), 0);
	ck_assert_ptr_null(strstr(text, "kaas_consumer_group_lag{")); /* no coordinator, no lag */
	free(text);
	kn_obs_destroy(s->obs);
	ku_metrics_destroy(b.metrics);
	free(s);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){.suite = "net-http", .timeout = 60},
			  KTEST_LIST(partial_heads_need_more, oversized_heads_refused, malformed_heads_refused,
				     endpoints, live_listener_survives_hostile_clients,
				     request_and_partition_series_count));
}
