/*
 * rdk.c — kaas-bench-rdk, the end-to-end benchmark client on librdkafka
 * (docs/performance.md):
 *
 *   kaas-bench-rdk create  --brokers B --topic T --partitions P
 *   kaas-bench-rdk produce --brokers B --topic T [--secs S | --count N]
 *                          [--size B] [--acks 1|all] [--compression none|lz4|zstd|...]
 *                          [--linger-ms L] [--rate R] [--payload random|text]
 *   kaas-bench-rdk consume --brokers B --topic T --partitions P --count N
 *
 * produce without --rate sends as fast as librdkafka's queue takes messages
 * and reports throughput; with --rate it sends R messages per second on a
 * fixed schedule and reports the delivery latency of each message (produce()
 * call to delivery report).  Every message must be delivered: a delivery
 * error makes the program fail.  consume reads the partitions from the
 * beginning without a group (assign, no commits) and checks that every
 * partition's offsets arrive without gaps.  One JSON object per run on
 * stdout.  With KAAS_BENCH_TLS_CA set it speaks TLS (an SSL listener), with
 * KAAS_BENCH_SASL_MECH SASL (SASL_SSL with both).
 */
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ci/bench/bench.h"

/* CPU seconds (user + system) this process has used. */
static double cpu_secs(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       (double)ru.ru_stime.tv_usec / 1e6;
}

typedef struct prod {
	uint64_t delivered, failed, bytes;
	rd_kafka_resp_err_t first_err;
	bn_lat lat;
	int64_t last_dr_ns;
	/* librdkafka statistics, summed over the emitted windows */
	double batch_bytes_sum, batch_msgs_sum;
	int64_t batch_cnt, batch_msgs_cnt;
	double rtt_p50_us, rtt_p99_us;
	int64_t produce_requests;
} prod;

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	prod *p = opaque;
	int64_t now = bn_now_ns();
	if (m->err) {
		if (!p->failed)
			p->first_err = m->err;
		p->failed++;
		return;
	}
	p->delivered++;
	p->bytes += m->len;
	bn_lat_add(&p->lat, now - (int64_t)(intptr_t)m->_private);
	p->last_dr_ns = now;
}

static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
	(void)rk;
	prod *p = opaque;
	json_error_t je;
	json_t *doc = json_loadb(json, len, 0, &je);
	if (!doc)
		return 0;
	const char *name;
	json_t *t;
	json_object_foreach(json_object_get(doc, "topics"), name, t) {
		json_t *bs = json_object_get(t, "batchsize"), *bc = json_object_get(t, "batchcnt");
		p->batch_bytes_sum += (double)json_integer_value(json_object_get(bs, "sum"));
		p->batch_cnt += json_integer_value(json_object_get(bs, "cnt"));
		p->batch_msgs_sum += (double)json_integer_value(json_object_get(bc, "sum"));
		p->batch_msgs_cnt += json_integer_value(json_object_get(bc, "cnt"));
	}
	json_t *b;
	json_object_foreach(json_object_get(doc, "brokers"), name, b) {
		if (json_integer_value(json_object_get(b, "nodeid")) < 0)
			continue; /* the bootstrap entry */
		json_t *rtt = json_object_get(b, "rtt");
		if (json_integer_value(json_object_get(rtt, "cnt")) > 0) {
			p->rtt_p50_us = (double)json_integer_value(json_object_get(rtt, "p50"));
			p->rtt_p99_us = (double)json_integer_value(json_object_get(rtt, "p99"));
		}
		json_t *req = json_object_get(b, "req");
		if (json_is_integer(json_object_get(req, "Produce")))
			p->produce_requests = json_integer_value(json_object_get(req, "Produce"));
	}
	json_decref(doc);
	return 0;
}

static int conf_set(rd_kafka_conf_t *c, const char *k, const char *v)
{
	char err[256];
	if (rd_kafka_conf_set(c, k, v, err, sizeof(err)) != RD_KAFKA_CONF_OK) {
		fprintf(stderr, "kaas-bench-rdk: %s=%s: %s\n", k, v, err);
		return -1;
	}
	return 0;
}

static rd_kafka_t *client(rd_kafka_type_t type, rd_kafka_conf_t *c, const char *brokers)
{
	char err[256];
	/* KAAS_BENCH_TLS_CA: TLS to an SSL listener, trusting that CA bundle.
	 * KAAS_BENCH_SASL_MECH (with _USER and _PASS): SASL, over TLS when the
	 * CA is set too (SASL_SSL). */
	const char *ca = getenv("KAAS_BENCH_TLS_CA"), *mech = getenv("KAAS_BENCH_SASL_MECH");
	int tls = ca && *ca, sasl = mech && *mech;
	const char *proto = tls && sasl ? "sasl_ssl" : tls ? "ssl" : sasl ? "sasl_plaintext" : "plaintext";
	if (conf_set(c, "bootstrap.servers", brokers) || conf_set(c, "client.id", "kaas-bench") ||
	    conf_set(c, "security.protocol", proto) || (tls && conf_set(c, "ssl.ca.location", ca)) ||
	    (sasl && (conf_set(c, "sasl.mechanisms", mech) ||
		      conf_set(c, "sasl.username", getenv("KAAS_BENCH_SASL_USER") ? getenv("KAAS_BENCH_SASL_USER") : "") ||
		      conf_set(c, "sasl.password", getenv("KAAS_BENCH_SASL_PASS") ? getenv("KAAS_BENCH_SASL_PASS") : "")))) {
		rd_kafka_conf_destroy(c);
		return NULL;
	}
	rd_kafka_t *rk = rd_kafka_new(type, c, err, sizeof(err));
	if (!rk)
		fprintf(stderr, "kaas-bench-rdk: %s\n", err);
	return rk;
}

/* ---- create ------------------------------------------------------------------- */

static int cmd_create(bn_opts *o)
{
	const char *brokers = bn_opt_str(o, "brokers", NULL), *topic = bn_opt_str(o, "topic", NULL);
	int parts = (int)bn_opt_int(o, "partitions", 1);
	if (bn_opts_check(o, "kaas-bench-rdk create") || !brokers || !topic || parts < 1)
		return 2;
	rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, rd_kafka_conf_new(), brokers);
	if (!rk)
		return 1;
	char err[256];
	int rc = 1;
	rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, parts, 1, err, sizeof(err));
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
	const rd_kafka_CreateTopics_result_t *res = ev ? rd_kafka_event_CreateTopics_result(ev) : NULL;
	if (!res) {
		fprintf(stderr, "kaas-bench-rdk create: no result (%s)\n", ev ? rd_kafka_event_error_string(ev) : "timeout");
	} else {
		size_t n;
		const rd_kafka_topic_result_t **tr = rd_kafka_CreateTopics_result_topics(res, &n);
		if (n == 1 && rd_kafka_topic_result_error(tr[0]) == RD_KAFKA_RESP_ERR_NO_ERROR)
			rc = 0;
		else
			fprintf(stderr, "kaas-bench-rdk create: %s\n",
				n ? rd_kafka_err2str(rd_kafka_topic_result_error(tr[0])) : "empty result");
	}
	if (ev)
		rd_kafka_event_destroy(ev);
	rd_kafka_queue_destroy(q);
	rd_kafka_NewTopic_destroy(nt);
	rd_kafka_destroy(rk);
	return rc;
}

/* ---- produce --------------------------------------------------------------------- */

/* Waits for the next send time inside rd_kafka_poll, which returns as soon
 * as a delivery report is served: reports are timestamped when they arrive,
 * not when the next message is due. */
static void poll_until(rd_kafka_t *rk, int64_t t_ns)
{
	int64_t d;
	while ((d = t_ns - bn_now_ns()) > 0)
		rd_kafka_poll(rk, d >= 2000000 ? (int)(d / 1000000) - 1 : 1);
}

static int cmd_produce(bn_opts *o)
{
	const char *brokers = bn_opt_str(o, "brokers", NULL), *topic = bn_opt_str(o, "topic", NULL);
	double secs = bn_opt_double(o, "secs", 5.0);
	int64_t count = bn_opt_int(o, "count", 0);
	int64_t size = bn_opt_int(o, "size", 1024);
	const char *acks = bn_opt_str(o, "acks", "all");
	const char *codec = bn_opt_str(o, "compression", "none");
	const char *linger = bn_opt_str(o, "linger-ms", "5");
	double rate = bn_opt_double(o, "rate", 0);
	const char *payload = bn_opt_str(o, "payload", "text");
	const char *label = bn_opt_str(o, "label", "produce");
	if (bn_opts_check(o, "kaas-bench-rdk produce") || !brokers || !topic || size < 1 || secs <= 0 ||
	    count < 0 || rate < 0)
		return 2;
	prod p = {0};
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_conf_set_dr_msg_cb(c, dr_cb);
	rd_kafka_conf_set_stats_cb(c, stats_cb);
	rd_kafka_conf_set_opaque(c, &p);
	if (conf_set(c, "acks", acks) || conf_set(c, "compression.codec", codec) ||
	    conf_set(c, "linger.ms", linger) || conf_set(c, "statistics.interval.ms", "500") ||
	    conf_set(c, "queue.buffering.max.messages", "200000") ||
	    conf_set(c, "message.timeout.ms", "60000")) {
		rd_kafka_conf_destroy(c);
		return 2;
	}
	rd_kafka_t *rk = client(RD_KAFKA_PRODUCER, c, brokers);
	if (!rk)
		return 1;
	/* Distinct payloads, so that compression sees realistic data. */
	enum { NPAY = 256 };
	char *pay = malloc((size_t)size * NPAY);
	if (!pay) {
		rd_kafka_destroy(rk);
		return 1;
	}
	for (int i = 0; i < NPAY; i++) {
		if (strcmp(payload, "random") == 0)
			bn_fill_random(pay + (size_t)i * size, (size_t)size, (uint64_t)i + 11);
		else
			bn_fill_text(pay + (size_t)i * size, (size_t)size, (uint64_t)i + 11);
	}
	/* Metadata first, so that topic discovery is not timed. */
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
	if (rd_kafka_metadata(rk, 0, rkt, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR)
		rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(rkt);

	double cpu0 = cpu_secs();
	int64_t t0 = bn_now_ns(), deadline = t0 + (int64_t)(secs * 1e9);
	int64_t sent = 0;
	char key[16];
	while (count ? sent < count : bn_now_ns() < deadline) {
		if (rate > 0)
			poll_until(rk, t0 + (int64_t)((double)sent * 1e9 / rate));
		int kl = snprintf(key, sizeof(key), "k%lld", (long long)(sent % 1000));
		int64_t now = bn_now_ns();
		rd_kafka_resp_err_t e = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_VALUE(pay + (size_t)(sent % NPAY) * size, (size_t)size),
			RD_KAFKA_V_KEY(key, (size_t)kl), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_OPAQUE((void *)(intptr_t)now), RD_KAFKA_V_END);
		if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			rd_kafka_poll(rk, 1);
			continue;
		}
		if (e) {
			fprintf(stderr, "kaas-bench-rdk produce: %s\n", rd_kafka_err2str(e));
			break;
		}
		sent++;
		rd_kafka_poll(rk, 0);
	}
	rd_kafka_resp_err_t fe = rd_kafka_flush(rk, 60000);
	double cpu = cpu_secs() - cpu0;
	/* One more statistics window, so the last batches are counted. */
	int64_t stop = bn_now_ns() + 600 * 1000000LL;
	while (bn_now_ns() < stop)
		rd_kafka_poll(rk, 100);
	int64_t el = (p.last_dr_ns ? p.last_dr_ns : bn_now_ns()) - t0;
	int rc = 1;
	if (fe || p.failed || (int64_t)p.delivered != sent) {
		fprintf(stderr, "kaas-bench-rdk produce: sent %lld, delivered %llu, failed %llu (%s)\n",
			(long long)sent, (unsigned long long)p.delivered, (unsigned long long)p.failed,
			rd_kafka_err2str(fe ? fe : p.first_err));
	} else {
		double s = (double)el / 1e9;
		json_t *j = json_pack(
			"{s:s,s:s,s:s,s:s,s:s,s:I,s:f,s:f,s:f,s:I,s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:I,s:o}", "kind", "produce",
			"label", label, "acks", acks, "compression", codec, "linger_ms", linger, "size",
			(json_int_t)size, "rate", rate, "secs", s, "cpu_secs", cpu, "msgs", (json_int_t)p.delivered, "bytes",
			(json_int_t)p.bytes, "mbps", bn_mbps(p.bytes, el), "msgs_per_s", (double)p.delivered / s,
			"avg_batch_bytes", p.batch_cnt ? p.batch_bytes_sum / (double)p.batch_cnt : 0.0,
			"avg_batch_msgs", p.batch_msgs_cnt ? p.batch_msgs_sum / (double)p.batch_msgs_cnt : 0.0,
			"rtt_p50_us", p.rtt_p50_us, "rtt_p99_us", p.rtt_p99_us, "produce_requests",
			(json_int_t)p.produce_requests, "lat", bn_lat_json(&p.lat));
		rc = bn_emit(j) ? 1 : 0;
	}
	bn_lat_free(&p.lat);
	free(pay);
	rd_kafka_destroy(rk);
	return rc;
}

/* ---- consume --------------------------------------------------------------------- */

static int cmd_consume(bn_opts *o)
{
	const char *brokers = bn_opt_str(o, "brokers", NULL), *topic = bn_opt_str(o, "topic", NULL);
	int parts = (int)bn_opt_int(o, "partitions", 1);
	int64_t count = bn_opt_int(o, "count", 0);
	double timeout = bn_opt_double(o, "timeout", 120);
	const char *label = bn_opt_str(o, "label", "consume");
	if (bn_opts_check(o, "kaas-bench-rdk consume") || !brokers || !topic || parts < 1 || count < 1)
		return 2;
	char group[64];
	snprintf(group, sizeof(group), "kaas-bench-%d", (int)getpid());
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	if (conf_set(c, "group.id", group) || conf_set(c, "enable.auto.commit", "false") ||
	    conf_set(c, "enable.partition.eof", "false")) {
		rd_kafka_conf_destroy(c);
		return 2;
	}
	rd_kafka_t *rk = client(RD_KAFKA_CONSUMER, c, brokers);
	if (!rk)
		return 1;
	rd_kafka_topic_partition_list_t *tl = rd_kafka_topic_partition_list_new(parts);
	for (int i = 0; i < parts; i++)
		rd_kafka_topic_partition_list_add(tl, topic, i)->offset = RD_KAFKA_OFFSET_BEGINNING;
	int64_t *next = calloc((size_t)parts, sizeof(*next));
	int rc = 1;
	uint64_t got = 0, bytes = 0;
	double cpu0 = cpu_secs();
	int64_t t0 = bn_now_ns(), deadline = t0 + (int64_t)(timeout * 1e9);
	if (!next || rd_kafka_assign(rk, tl)) {
		fprintf(stderr, "kaas-bench-rdk consume: assign failed\n");
		goto out;
	}
	while ((int64_t)got < count && bn_now_ns() < deadline) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
		if (!m)
			continue;
		if (m->err) {
			fprintf(stderr, "kaas-bench-rdk consume: %s\n", rd_kafka_message_errstr(m));
			rd_kafka_message_destroy(m);
			goto out;
		}
		if (m->partition < 0 || m->partition >= parts || m->offset != next[m->partition]) {
			fprintf(stderr, "kaas-bench-rdk consume: partition %d: offset %lld, expected %lld\n",
				(int)m->partition, (long long)m->offset,
				m->partition >= 0 && m->partition < parts ? (long long)next[m->partition] : -1LL);
			rd_kafka_message_destroy(m);
			goto out;
		}
		next[m->partition]++;
		got++;
		bytes += m->len;
		rd_kafka_message_destroy(m);
	}
	int64_t el = bn_now_ns() - t0;
	if ((int64_t)got != count) {
		fprintf(stderr, "kaas-bench-rdk consume: %llu of %lld messages within %.0f s\n", (unsigned long long)got,
			(long long)count, timeout);
		goto out;
	}
	double s = (double)el / 1e9;
	json_t *j = json_pack("{s:s,s:s,s:i,s:f,s:f,s:I,s:I,s:f,s:f}", "kind", "consume", "label", label, "partitions",
			      parts, "secs", s, "cpu_secs", cpu_secs() - cpu0, "msgs", (json_int_t)got, "bytes",
			      (json_int_t)bytes, "mbps", bn_mbps(bytes, el), "msgs_per_s", (double)got / s);
	rc = bn_emit(j) ? 1 : 0;
out:
	free(next);
	rd_kafka_topic_partition_list_destroy(tl);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: kaas-bench-rdk create|produce|consume --brokers HOST:PORT --topic T ...\n");
		return 2;
	}
	bn_opts o;
	if (bn_opts_init(&o, argc - 2, argv + 2))
		return 1;
	int rc = 2;
	if (strcmp(argv[1], "create") == 0)
		rc = cmd_create(&o);
	else if (strcmp(argv[1], "produce") == 0)
		rc = cmd_produce(&o);
	else if (strcmp(argv[1], "consume") == 0)
		rc = cmd_consume(&o);
	else
		fprintf(stderr, "kaas-bench-rdk: unknown command '%s'\n", argv[1]);
	bn_opts_free(&o);
	return rc;
}
