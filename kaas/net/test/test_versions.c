/* test_versions.c — golden bytes of the data-path APIs at every version kaas
 * advertises: ApiVersions v0-3, Metadata v0-12, Produce v0-7, Fetch v4-11,
 * ListOffsets v0-5.  Requests are encoded and answers expected field by
 * field as Kafka's message schemas (the JSON files under
 * clients/src/main/resources/common/message/) lay them out for each version,
 * with the gb_* writer that shares no code with the broker's.  A field added,
 * dropped, moved or encoded at the wrong width in any version fails here. */
#include "kaas/net/test/harness.h"

#include "kaas/proto/kerr.h"
#include "util/test/ktest.h"

/* ---- ApiVersions -------------------------------------------------------------------- */

/* What kaas serves (DESIGN §8; Produce from v0, docs/broker.md), in table order. */
static const int16_t served[][3] = {
	{0, 0, 7},   {1, 4, 11},  {2, 0, 5},   {3, 0, 12},  {8, 0, 7},  {9, 0, 7},   {10, 0, 2},  {11, 0, 5},
	{12, 0, 3},  {13, 0, 3},  {14, 0, 3},  {15, 0, 4},  {16, 0, 4}, {17, 0, 1},  {18, 0, 3},  {19, 0, 4},  {20, 0, 3},
	{21, 0, 1},  {22, 0, 4},  {23, 0, 4},  {29, 0, 3},  {30, 0, 3},  {31, 0, 3},  {32, 0, 4},  {33, 0, 1}, {35, 0, 4},  {36, 0, 2},  {37, 0, 1},  {42, 0, 1},
	{44, 0, 1},  {47, 0, 0},  {60, 0, 1},
};
#define NSERVED ((int32_t)(sizeof(served) / sizeof(served[0])))

START_TEST(api_versions_every_version)
{
	for (int16_t v = 0; v <= 3; v++) {
		gb *req = calloc(1, sizeof(gb)), *want = calloc(1, sizeof(gb));
		if (v >= 3) { /* client_software_name, client_software_version, tags */
			gb_cstr(req, "librdkafka");
			gb_cstr(req, "2.0.2");
			gb_uvar(req, 0);
		}
		gb16(want, 0);
		if (v >= 3)
			gb_carr(want, NSERVED);
		else
			gb_arr(want, NSERVED);
		for (int32_t i = 0; i < NSERVED; i++) {
			gb16(want, served[i][0]);
			gb16(want, served[i][1]);
			gb16(want, served[i][2]);
			if (v >= 3)
				gb_uvar(want, 0);
		}
		if (v >= 1)
			gb32(want, 0); /* throttle_time_ms */
		if (v >= 3)
			gb_uvar(want, 0);
		hreq *r = hh_send(KAAS_API_API_VERSIONS, v, req);
		ck_assert_int_eq(r->rc, KAAS_HANDLED);
		char what[64];
		snprintf(what, sizeof(what), "ApiVersions v%d", v);
		hh_expect(what, r->body, r->len, want);
		hh_free(r);
		free(req);
		free(want);
	}
}
END_TEST

/* An unsupported ApiVersions version is answered in the v0 layout. */
START_TEST(api_versions_unsupported_layout)
{
	gb *want = calloc(1, sizeof(gb));
	gb16(want, KERR_UNSUPPORTED_VERSION);
	gb_arr(want, NSERVED);
	for (int32_t i = 0; i < NSERVED; i++) {
		gb16(want, served[i][0]);
		gb16(want, served[i][1]);
		gb16(want, served[i][2]);
	}
	kw_wr w = KAAS_WR_INIT;
	kw_api_versions_write(&w, 4, KERR_UNSUPPORTED_VERSION, kn_dispatch_table, kn_dispatch_table_len);
	hh_expect("ApiVersions v4 (unsupported)", w.buf, w.len, want);
	kw_wr_free(&w);
	free(want);
}
END_TEST

/* ---- SaslHandshake, SaslAuthenticate ------------------------------------------------------ */

/* On a listener without SASL both answer ILLEGAL_SASL_STATE in each
 * version's layout (SaslHandshake: error, mechanisms; SaslAuthenticate:
 * error, message, auth bytes, v1+ session lifetime, v2 compact + tags). */
START_TEST(sasl_every_version)
{
	for (int16_t v = 0; v <= 1; v++) {
		gb *req = calloc(1, sizeof(gb)), *want = calloc(1, sizeof(gb));
		gb_str(req, "PLAIN");
		gb16(want, KERR_ILLEGAL_SASL_STATE);
		gb_arr(want, 0);
		hreq *r = hh_send(KAAS_API_SASL_HANDSHAKE, v, req);
		ck_assert_int_eq(r->rc, KAAS_HANDLED);
		hh_expect("SaslHandshake", r->body, r->len, want);
		hh_free(r);
		free(req);
		free(want);
	}
	static const char msg[] = "SaslAuthenticate on a listener without SASL";
	for (int16_t v = 0; v <= 2; v++) {
		gb *req = calloc(1, sizeof(gb)), *want = calloc(1, sizeof(gb));
		if (v >= 2) {
			gb_uvar(req, 5); /* compact bytes: length + 1 */
			gb_raw(req, "\0a\0b", 4);
			gb_uvar(req, 0);
		} else {
			gb_bytes(req, "\0a\0b", 4);
		}
		gb16(want, KERR_ILLEGAL_SASL_STATE);
		if (v >= 2) {
			gb_cstr(want, msg);
			gb_uvar(want, 1); /* empty compact bytes */
		} else {
			gb_str(want, msg);
			gb32(want, 0);
		}
		if (v >= 1)
			gb64(want, 0);
		if (v >= 2)
			gb_uvar(want, 0);
		hreq *r = hh_send(KAAS_API_SASL_AUTHENTICATE, v, req);
		ck_assert_int_eq(r->rc, KAAS_HANDLED);
		char what[64];
		snprintf(what, sizeof(what), "SaslAuthenticate v%d", v);
		hh_expect(what, r->body, r->len, want);
		hh_free(r);
		free(req);
		free(want);
	}
}
END_TEST

/* ---- Metadata ------------------------------------------------------------------------ */

static int32_t epoch_of(const char *topic, int32_t p)
{
	int32_t leader, epoch;
	ck_assert_int_eq(kb_ptable_leader(H.b.parts, topic, p, &leader, &epoch), 0);
	ck_assert_int_eq(leader, 3);
	return epoch;
}

#define MD_MAX 12
#define F(v) ((v) >= 9) /* flexible from v9 */

static void g_str(gb *g, int16_t v, const char *s) { F(v) ? gb_cstr(g, s) : gb_str(g, s); }
static void g_arr(gb *g, int16_t v, int32_t n) { F(v) ? gb_carr(g, n) : gb_arr(g, n); }
static void g_tags(gb *g, int16_t v)
{
	if (F(v))
		gb_uvar(g, 0);
}

/* The broker list, cluster id and controller of every answer. */
static void md_head(gb *g, int16_t v)
{
	if (v >= 3)
		gb32(g, 0); /* throttle_time_ms */
	g_arr(g, v, 1);
	gb32(g, 3);
	g_str(g, v, "broker-a");
	gb32(g, 19092);
	if (v >= 1)
		g_str(g, v, NULL); /* rack */
	g_tags(g, v);
	if (v >= 2)
		g_str(g, v, "cl-1");
	if (v >= 1)
		gb32(g, 3); /* controller_id */
}

/* The end of every answer: cluster authorized operations (v8-10), tags. */
static void md_tail(gb *g, int16_t v, int32_t cluster_ops)
{
	if (v >= 8 && v <= 10)
		gb32(g, cluster_ops);
	g_tags(g, v);
}

static void md_topic_ops(gb *g, int16_t v, int16_t err, const char *name, const uint8_t *id,
			 int32_t nparts, int32_t ops)
{
	static const uint8_t zero[16];
	gb16(g, err);
	g_str(g, v, name);
	if (v >= 10)
		gb_raw(g, id ? id : zero, 16);
	if (v >= 1)
		gb8(g, 0); /* is_internal */
	g_arr(g, v, nparts);
	for (int32_t p = 0; p < nparts; p++) {
		gb16(g, 0);
		gb32(g, p);
		gb32(g, 3); /* leader */
		if (v >= 7)
			gb32(g, epoch_of(name, p));
		g_arr(g, v, 1); /* replicas */
		gb32(g, 3);
		g_arr(g, v, 1); /* isr */
		gb32(g, 3);
		if (v >= 5)
			g_arr(g, v, 0); /* offline_replicas */
		g_tags(g, v);
	}
	if (v >= 8)
		gb32(g, ops);
	g_tags(g, v);
}

/* A topic's wire UUID, or NULL for one that does not exist. */
static const uint8_t *id_of(const char *name)
{
	static kt_topic_info info;
	if (kt_topics_lookup(H.b.topics, name, (int32_t)strlen(name), &info))
		return NULL;
	return info.id_bytes;
}

static void md_topic(gb *g, int16_t v, int16_t err, const char *name, int32_t nparts)
{
	md_topic_ops(g, v, err, name, err ? NULL : id_of(name), nparts, INT32_MIN);
}

/* The request: topics (NULL names with count -1: all), flags, tags. */
static void md_req(gb *g, int16_t v, int32_t n, const char *const *names, int8_t allow_auto)
{
	static const uint8_t zero[16];
	g_arr(g, v, n);
	for (int32_t i = 0; i < n; i++) {
		if (v >= 10)
			gb_raw(g, zero, 16);
		g_str(g, v, names[i]);
		g_tags(g, v);
	}
	if (v >= 4)
		gb8(g, allow_auto);
	if (v >= 8 && v <= 10)
		gb8(g, 0); /* include_cluster_authorized_operations */
	if (v >= 8)
		gb8(g, 0); /* include_topic_authorized_operations */
	g_tags(g, v);
}

static void md_check(int16_t v, const gb *req, const gb *want, const char *what)
{
	hreq *r = hh_send(KAAS_API_METADATA, v, req);
	ck_assert_int_eq(r->rc, KAAS_HANDLED);
	char w[96];
	snprintf(w, sizeof(w), "Metadata v%d %s", v, what);
	hh_expect(w, r->body, r->len, want);
	hh_free(r);
}

START_TEST(metadata_every_version)
{
	hh_topic("md", 2);
	for (int16_t v = 0; v <= MD_MAX; v++) {
		gb *req = calloc(1, sizeof(gb)), *want = calloc(1, sizeof(gb));
		const char *md[] = {"md"}, *bad[] = {"../x"}, *absent[] = {"absent"};
		/* One named topic. */
		md_req(req, v, 1, md, 1);
		md_head(want, v);
		g_arr(want, v, 1);
		md_topic(want, v, 0, "md", 2);
		md_tail(want, v, INT32_MIN);
		md_check(v, req, want, "one topic");

		/* All topics: v0 an empty array, v1+ a null one. */
		req->n = want->n = 0;
		md_req(req, v, v == 0 ? 0 : -1, NULL, 0);
		md_head(want, v);
		g_arr(want, v, 1);
		md_topic(want, v, 0, "md", 2);
		md_tail(want, v, INT32_MIN);
		md_check(v, req, want, "all topics");

		/* v1+: an empty array asks for no topic. */
		if (v >= 1) {
			req->n = want->n = 0;
			md_req(req, v, 0, NULL, 1);
			md_head(want, v);
			g_arr(want, v, 0);
			md_tail(want, v, INT32_MIN);
			md_check(v, req, want, "no topic");
		}

		/* An invalid name touches nothing: INVALID_TOPIC_EXCEPTION. */
		req->n = want->n = 0;
		md_req(req, v, 1, bad, 1);
		md_head(want, v);
		g_arr(want, v, 1);
		md_topic(want, v, KERR_INVALID_TOPIC_EXCEPTION, "../x", 0);
		md_tail(want, v, INT32_MIN);
		md_check(v, req, want, "invalid name");

		/* v4+: a missing topic without auto-creation. */
		if (v >= 4) {
			req->n = want->n = 0;
			md_req(req, v, 1, absent, 0);
			md_head(want, v);
			g_arr(want, v, 1);
			md_topic(want, v, KERR_UNKNOWN_TOPIC_OR_PARTITION, "absent", 0);
			md_tail(want, v, INT32_MIN);
			md_check(v, req, want, "no auto-creation");
		}
		free(req);
		free(want);
	}
	/* Every version may auto-create (v0-3 always, v4+ when allowed): one
	 * partition (num.partitions) each. */
	for (int16_t v = 0; v <= MD_MAX; v++) {
		char name[32];
		snprintf(name, sizeof(name), "auto-v%d", v);
		const char *nm[] = {name};
		gb *req = calloc(1, sizeof(gb)), *want = calloc(1, sizeof(gb));
		md_req(req, v, 1, nm, 1);
		hreq *r = hh_send(KAAS_API_METADATA, v, req);
		md_head(want, v);
		g_arr(want, v, 1);
		md_topic(want, v, 0, name, 1);
		md_tail(want, v, INT32_MIN);
		hh_expect(name, r->body, r->len, want);
		hh_free(r);
		free(req);
		free(want);
	}
	/* auto.create.topics.enable=false: no version creates anything. */
	H.b.cfg.auto_create_topics = 0;
	for (int16_t v = 0; v <= MD_MAX; v++) {
		const char *nm[] = {"never"};
		gb *req = calloc(1, sizeof(gb)), *want = calloc(1, sizeof(gb));
		md_req(req, v, 1, nm, 1);
		hreq *r = hh_send(KAAS_API_METADATA, v, req);
		md_head(want, v);
		g_arr(want, v, 1);
		md_topic(want, v, KERR_UNKNOWN_TOPIC_OR_PARTITION, "never", 0);
		md_tail(want, v, INT32_MIN);
		hh_expect("auto.create.topics.enable=false", r->body, r->len, want);
		hh_free(r);
		free(req);
		free(want);
	}
	kt_topic_info info;
	ck_assert_int_eq(kt_topics_lookup(H.b.topics, "never", 5, &info), -ENOENT);
}
END_TEST

/* v8+: authorized operations when asked for (every operation of the type:
 * kaas has no authorizer); v10+: a topic asked for by ID alone, found or
 * UNKNOWN_TOPIC_ID (v12: with a null name; v10-11: an empty one). */
START_TEST(metadata_ops_and_ids)
{
	hh_topic("ids", 1);
	uint8_t id[16], nobody[16];
	memcpy(id, id_of("ids"), 16);
	memset(nobody, 0x5a, sizeof(nobody));
	const int32_t topic_ops = (1 << 3) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) |
				  (1 << 10) | (1 << 11);
	const int32_t cluster_ops = (1 << 5) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) |
				    (1 << 12);
	for (int16_t v = 8; v <= MD_MAX; v++) {
		gb *req = calloc(1, sizeof(gb)), *want = calloc(1, sizeof(gb));
		const char *nm[] = {"ids"};
		g_arr(req, v, 1);
		if (v >= 10)
			gb_raw(req, (uint8_t[16]){0}, 16);
		g_str(req, v, nm[0]);
		g_tags(req, v);
		gb8(req, 1);
		if (v <= 10)
			gb8(req, 1);
		gb8(req, 1);
		g_tags(req, v);
		md_head(want, v);
		g_arr(want, v, 1);
		md_topic_ops(want, v, 0, "ids", id, 1, topic_ops);
		md_tail(want, v, cluster_ops);
		md_check(v, req, want, "authorized operations");
		free(req);
		free(want);
	}
	for (int16_t v = 10; v <= MD_MAX; v++) {
		gb *req = calloc(1, sizeof(gb)), *want = calloc(1, sizeof(gb));
		g_arr(req, v, 2);
		gb_raw(req, id, 16);
		g_str(req, v, NULL);
		g_tags(req, v);
		gb_raw(req, nobody, 16);
		g_str(req, v, NULL);
		g_tags(req, v);
		gb8(req, 0);
		if (v <= 10)
			gb8(req, 0);
		gb8(req, 0);
		g_tags(req, v);
		md_head(want, v);
		g_arr(want, v, 2);
		md_topic_ops(want, v, 0, "ids", id, 1, INT32_MIN);
		gb16(want, KERR_UNKNOWN_TOPIC_ID);
		g_str(want, v, v >= 12 ? NULL : "");
		gb_raw(want, nobody, 16);
		gb8(want, 0);
		g_arr(want, v, 0);
		gb32(want, INT32_MIN);
		g_tags(want, v);
		md_tail(want, v, INT32_MIN);
		md_check(v, req, want, "topics by ID");
		free(req);
		free(want);
	}
	/* A null name with a zero ID stands for nothing: the request is bad. */
	gb *req = calloc(1, sizeof(gb));
	g_arr(req, 12, 1);
	gb_raw(req, (uint8_t[16]){0}, 16);
	g_str(req, 12, NULL);
	g_tags(req, 12);
	gb8(req, 0);
	gb8(req, 0);
	g_tags(req, 12);
	hreq *r = hh_send_rc(KAAS_API_METADATA, 12, req, 1);
	ck_assert_int_eq(r->rc, -EBADMSG);
	hh_free(r);
	free(req);
}
END_TEST

/* ---- Produce, Fetch, ListOffsets -------------------------------------------------------- */

#define TS0 1700000000000LL
#define NB 8 /* one batch per Produce version 0..7 */
static uint8_t batch[NB][256];
static size_t batch_len[NB];

static gb *produce_req(int16_t v, const char *topic, int16_t acks, const uint8_t *b, size_t n)
{
	gb *g = calloc(1, sizeof(gb));
	if (v >= 3)
		gb_str(g, NULL); /* transactional_id */
	gb16(g, acks);
	gb32(g, 30000);
	gb_arr(g, 1);
	gb_str(g, topic);
	gb_arr(g, 1);
	gb32(g, 0);
	gb_bytes(g, b, (int32_t)n);
	return g;
}

static void produce_want(gb *g, int16_t v, const char *topic, int16_t err, int64_t base)
{
	gb_arr(g, 1);
	gb_str(g, topic);
	gb_arr(g, 1);
	gb32(g, 0);
	gb16(g, err);
	gb64(g, err ? -1 : base);
	if (v >= 2)
		gb64(g, -1); /* log_append_time: -1 under CreateTime */
	if (v >= 5)
		gb64(g, err ? -1 : 0); /* log_start_offset */
	if (v >= 1)
		gb32(g, 0); /* throttle_time_ms */
}

static int64_t high_watermark(const char *topic)
{
	kb_pref ref;
	ck_assert_int_eq(kb_ptable_get(H.b.parts, (kw_str){topic, (int32_t)strlen(topic)}, 0, &ref), KERR_NONE);
	int64_t hw = ks_partition_high_watermark(ref.p);
	kb_pref_put(&ref);
	return hw;
}

/* Produces batch v with Produce v (acks=1, the last with acks=-1 so that all
 * are durable, i.e. below the high watermark, when it answers). */
static void produce_all(const char *topic)
{
	for (int16_t v = 0; v < NB; v++) {
		batch_len[v] = hh_batch(batch[v], sizeof(batch[v]), 1, 5 + (size_t)v, (char)('a' + v), TS0 + 10 * v);
		int16_t acks = v == NB - 1 ? -1 : 1;
		gb *req = produce_req(v, topic, acks, batch[v], batch_len[v]);
		gb *want = calloc(1, sizeof(gb));
		produce_want(want, v, topic, 0, v);
		hreq *r = hh_send(KAAS_API_PRODUCE, v, req);
		/* acks=1 answers at once.  acks=-1 answers once a flush covers the
		 * batch, which is usually after the handler returned, but the
		 * flusher may still be syncing the acks=1 batches before it and
		 * cover this one too before the handler looks: then the answer
		 * is immediate.  Either is right; what matters is that it comes
		 * only once the batch is durable. */
		if (acks == -1)
			ck_assert_msg(r->rc == KAAS_DEFERRED || r->rc == KAAS_HANDLED, "Produce acks=-1: %d", r->rc);
		else
			ck_assert_int_eq(r->rc, KAAS_HANDLED);
		hh_wait(r);
		if (acks == -1)
			ck_assert_int_eq(high_watermark(topic), v + 1);
		char what[64];
		snprintf(what, sizeof(what), "Produce v%d acks=%d", v, acks);
		hh_expect(what, r->body, r->len, want);
		hh_free(r);
		free(req);
		free(want);
	}
}

START_TEST(produce_every_version)
{
	hh_topic("pr", 1);
	produce_all("pr");
	for (int16_t v = 0; v < NB; v++) {
		/* An unknown topic: the error, base offset -1. */
		uint8_t b[256];
		size_t n = hh_batch(b, sizeof(b), 1, 3, 'x', TS0);
		gb *req = produce_req(v, "nope", 1, b, n);
		gb *want = calloc(1, sizeof(gb));
		produce_want(want, v, "nope", KERR_UNKNOWN_TOPIC_OR_PARTITION, -1);
		hreq *r = hh_send(KAAS_API_PRODUCE, v, req);
		char what[64];
		snprintf(what, sizeof(what), "Produce v%d unknown topic", v);
		hh_expect(what, r->body, r->len, want);
		hh_free(r);
		free(req);
		free(want);
		/* acks=0: no answer at all; a failed one closes the connection (as
		 * Kafka does: the producer then refreshes its metadata). */
		req = produce_req(v, "pr", 0, b, n);
		r = hh_send(KAAS_API_PRODUCE, v, req);
		ck_assert_int_eq(r->rc, KAAS_NO_RESPONSE);
		hh_free(r);
		free(req);
		req = produce_req(v, "nope", 0, b, n);
		r = hh_send_rc(KAAS_API_PRODUCE, v, req, 1);
		ck_assert_int_eq(r->rc, -ECONNABORTED);
		hh_free(r);
		free(req);
	}
}
END_TEST

/* The stored form of batch i: its base offset and the leader epoch set. */
static void stored(gb *g, int i, int32_t epoch)
{
	size_t at = g->n;
	gb_raw(g, batch[i], batch_len[i]);
	for (int k = 0; k < 8; k++)
		g->b[at + k] = (uint8_t)((uint64_t)i >> (56 - 8 * k));
	for (int k = 0; k < 4; k++)
		g->b[at + 12 + k] = (uint8_t)((uint32_t)epoch >> (24 - 8 * k));
}

START_TEST(fetch_every_version)
{
	hh_topic("fe", 1);
	produce_all("fe");
	int32_t epoch = epoch_of("fe", 0);
	for (int16_t v = 4; v <= 11; v++) {
		for (int8_t iso = 0; iso <= 1; iso++) {
			gb *req = calloc(1, sizeof(gb)), *want = calloc(1, sizeof(gb));
			gb32(req, -1);     /* replica_id */
			gb32(req, 0);      /* max_wait_ms */
			gb32(req, 1);      /* min_bytes */
			gb32(req, 1 << 20); /* max_bytes */
			gb8(req, iso);
			if (v >= 7) {
				gb32(req, 0);  /* session_id */
				gb32(req, -1); /* session_epoch: full fetch, no session */
			}
			gb_arr(req, 1);
			gb_str(req, "fe");
			gb_arr(req, 1);
			gb32(req, 0);
			if (v >= 9)
				gb32(req, epoch); /* current_leader_epoch */
			gb64(req, 2);             /* fetch_offset */
			if (v >= 5)
				gb64(req, -1);    /* log_start_offset */
			gb32(req, 1 << 20);
			if (v >= 7)
				gb_arr(req, 0); /* forgotten_topics_data */
			if (v >= 11)
				gb_str(req, ""); /* rack_id */

			gb32(want, 0); /* throttle_time_ms */
			if (v >= 7) {
				gb16(want, 0);
				gb32(want, 0); /* session_id */
			}
			gb_arr(want, 1);
			gb_str(want, "fe");
			gb_arr(want, 1);
			gb32(want, 0);
			gb16(want, 0);
			gb64(want, NB); /* high_watermark */
			gb64(want, NB); /* last_stable_offset */
			if (v >= 5)
				gb64(want, 0); /* log_start_offset */
			gb_arr(want, iso ? 0 : -1); /* aborted_transactions: null unless read_committed */
			if (v >= 11)
				gb32(want, -1); /* preferred_read_replica */
			size_t len_at = want->n;
			gb32(want, 0);
			for (int i = 2; i < NB; i++)
				stored(want, i, epoch);
			uint32_t rl = (uint32_t)(want->n - len_at - 4);
			for (int k = 0; k < 4; k++)
				want->b[len_at + k] = (uint8_t)(rl >> (24 - 8 * k));

			hreq *r = hh_send(KAAS_API_FETCH, v, req);
			ck_assert_int_eq(r->rc, KAAS_HANDLED);
			char what[64];
			snprintf(what, sizeof(what), "Fetch v%d isolation %d", v, iso);
			hh_expect(what, r->body, r->len, want);
			hh_free(r);
			free(req);
			free(want);
		}
	}
}
END_TEST

/* From v9 a stale current_leader_epoch is FENCED_LEADER_EPOCH, a newer one
 * UNKNOWN_LEADER_EPOCH; before v9 there is no such field. */
START_TEST(fetch_leader_epoch_checks)
{
	hh_topic("fl", 1);
	int32_t epoch = epoch_of("fl", 0);
	for (int d = -1; d <= 1; d += 2) {
		gb *req = calloc(1, sizeof(gb)), *want = calloc(1, sizeof(gb));
		gb32(req, -1);
		gb32(req, 0);
		gb32(req, 1);
		gb32(req, 1 << 20);
		gb8(req, 0);
		gb32(req, 0);
		gb32(req, -1);
		gb_arr(req, 1);
		gb_str(req, "fl");
		gb_arr(req, 1);
		gb32(req, 0);
		gb32(req, epoch + d);
		gb64(req, 0);
		gb64(req, -1);
		gb32(req, 1 << 20);
		gb_arr(req, 0);
		gb32(want, 0);
		gb16(want, 0);
		gb32(want, 0);
		gb_arr(want, 1);
		gb_str(want, "fl");
		gb_arr(want, 1);
		gb32(want, 0);
		gb16(want, d < 0 ? KERR_FENCED_LEADER_EPOCH : KERR_UNKNOWN_LEADER_EPOCH);
		gb64(want, -1);
		gb64(want, -1);
		gb64(want, -1);
		gb_arr(want, -1);
		gb32(want, 0); /* records: empty */
		hreq *r = hh_send(KAAS_API_FETCH, 10, req);
		hh_expect(d < 0 ? "Fetch v10 stale epoch" : "Fetch v10 newer epoch", r->body, r->len, want);
		hh_free(r);
		free(req);
		free(want);
	}
}
END_TEST

START_TEST(list_offsets_every_version)
{
	hh_topic("lo", 1);
	produce_all("lo");
	/* (timestamp asked, offset, timestamp answered) */
	static const int64_t q[][3] = {
		{-2, 0, -1},                      /* earliest */
		{-1, NB, -1},                     /* latest: the high watermark */
		{TS0 + 25, 3, TS0 + 30},          /* first batch at or after */
		{TS0, 0, TS0},
		{TS0 + 10 * NB, -1, -1},          /* after every batch: none */
	};
	kb_pref ref;
	ck_assert_int_eq(kb_ptable_get(H.b.parts, (kw_str){"lo", 2}, 0, &ref), KERR_NONE);
	int32_t epoch = ref.epoch; /* every batch was written at it */
	kb_pref_put(&ref);
	ck_assert_int_ge(epoch, 1);
	for (int16_t v = 0; v <= 5; v++) {
		for (size_t i = 0; i < sizeof(q) / sizeof(q[0]); i++) {
			if (v == 0 && q[i][0] >= 0)
				continue; /* v0's by-time lookup answers segment starts (below) */
			gb *req = calloc(1, sizeof(gb)), *want = calloc(1, sizeof(gb));
			gb32(req, -1); /* replica_id */
			if (v >= 2)
				gb8(req, 1); /* isolation_level */
			gb_arr(req, 1);
			gb_str(req, "lo");
			gb_arr(req, 1);
			gb32(req, 0);
			if (v >= 4)
				gb32(req, i % 2 ? epoch : -1); /* current_leader_epoch: right, or no check */
			gb64(req, q[i][0]);
			if (v == 0)
				gb32(req, 1); /* max_num_offsets */
			if (v >= 2)
				gb32(want, 0); /* throttle_time_ms */
			gb_arr(want, 1);
			gb_str(want, "lo");
			gb_arr(want, 1);
			gb32(want, 0);
			gb16(want, 0);
			if (v == 0) {
				gb_arr(want, 1); /* old_style_offsets */
				gb64(want, q[i][1]);
			} else {
				gb64(want, q[i][2]);
				gb64(want, q[i][1]);
				if (v >= 4)
					gb32(want, q[i][1] >= 0 ? epoch : -1); /* leader_epoch */
			}
			hreq *r = hh_send(KAAS_API_LIST_OFFSETS, v, req);
			ck_assert_int_eq(r->rc, KAAS_HANDLED);
			char what[64];
			snprintf(what, sizeof(what), "ListOffsets v%d timestamp %lld", v, (long long)q[i][0]);
			hh_expect(what, r->body, r->len, want);
			hh_free(r);
			free(req);
			free(want);
		}
		/* Unknown partition. */
		gb *req = calloc(1, sizeof(gb)), *want = calloc(1, sizeof(gb));
		gb32(req, -1);
		if (v >= 2)
			gb8(req, 0);
		gb_arr(req, 1);
		gb_str(req, "lo");
		gb_arr(req, 1);
		gb32(req, 9);
		if (v >= 4)
			gb32(req, -1);
		gb64(req, -1);
		if (v == 0)
			gb32(req, 1);
		if (v >= 2)
			gb32(want, 0);
		gb_arr(want, 1);
		gb_str(want, "lo");
		gb_arr(want, 1);
		gb32(want, 9);
		gb16(want, KERR_UNKNOWN_TOPIC_OR_PARTITION);
		if (v == 0) {
			gb_arr(want, 0);
		} else {
			gb64(want, -1);
			gb64(want, -1);
			if (v >= 4)
				gb32(want, -1);
		}
		hreq *r = hh_send(KAAS_API_LIST_OFFSETS, v, req);
		hh_expect("ListOffsets unknown partition", r->body, r->len, want);
		hh_free(r);
		free(req);
		free(want);
	}
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "versions", .tcase = "versions", .timeout = 120,
					  .setup = hh_setup, .teardown = hh_teardown },
			  KTEST_LIST(api_versions_every_version, api_versions_unsupported_layout, sasl_every_version,
				     metadata_every_version, metadata_ops_and_ids, produce_every_version,
				     fetch_every_version, fetch_leader_epoch_checks,
				     list_offsets_every_version));
}
