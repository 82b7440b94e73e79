/* test_leader_epoch.c — KIP-320 against the real handlers, partition table
 * and storage engine: OffsetForLeaderEpoch's golden bytes at v0-v4, its
 * answers for epochs before and after a restart of the partition table
 * (which takes every partition over at a higher epoch, as a broker start
 * or a move to another broker does), and the FENCED_LEADER_EPOCH /
 * UNKNOWN_LEADER_EPOCH decisions of OffsetForLeaderEpoch, ListOffsets v4+
 * and Fetch v9+ for a client epoch older or newer than the leader's.
 * Expected bytes are laid out from Kafka's message schemas with the gb_*
 * writer, which shares no code with the broker's. */
#include "kaas/net/test/harness.h"

#include "kaas/proto/kerr.h"
#include "util/test/ktest.h"

#define TS0 1700000000000LL

static int32_t leader_epoch(const char *topic)
{
	kb_pref ref;
	ck_assert_int_eq(kb_ptable_get(H.b.parts, (kw_str){topic, (int32_t)strlen(topic)}, 0, &ref), KERR_NONE);
	int32_t e = ref.epoch;
	kb_pref_put(&ref);
	return e;
}

/* n single-record batches, acks=all, timestamps ts, ts+1, ... */
static void produce(const char *topic, int n, int64_t ts)
{
	for (int i = 0; i < n; i++) {
		uint8_t b[256];
		size_t len = hh_batch(b, sizeof(b), 1, 8, 'e', ts + i);
		gb *g = calloc(1, sizeof(gb));
		gb_str(g, NULL);
		gb16(g, -1);
		gb32(g, 30000);
		gb_arr(g, 1);
		gb_str(g, topic);
		gb_arr(g, 1);
		gb32(g, 0);
		gb_bytes(g, b, (int32_t)len);
		hreq *r = hh_send(KAAS_API_PRODUCE, 7, g);
		hh_wait(r);
		/* [topic [index, error ...]]: the error sits after name and index */
		size_t at = 4 + 2 + strlen(topic) + 4 + 4;
		ck_assert_uint_gt(r->len, at + 2);
		ck_assert_int_eq(kw_get_i16(r->body + at), 0);
		hh_free(r);
		free(g);
	}
}

/* What a broker restart does to the partitions: every one relinquished,
 * then taken over again by a new partition table at a higher epoch. */
static void restart_partitions(void)
{
	kb_broker *b = &H.b;
	hh_barrier();
	ck_assert_int_eq(kb_ptable_shutdown(b->parts), 0);
	kb_ptable_destroy(b->parts);
	ck_assert_int_eq(kb_ptable_create(b, &b->parts), 0);
	kt_topic_info *list = NULL;
	size_t n = 0;
	ck_assert_int_eq(kt_topics_list(b->topics, &list, &n), 0);
	kb_topic_desc *d = calloc(n ? n : 1, sizeof(*d));
	for (size_t i = 0; i < n; i++)
		d[i] = (kb_topic_desc){list[i].name, list[i].id, list[i].partitions, list[i].cfg};
	ck_assert_int_eq(kb_ptable_start(b->parts, d, n), 0);
	free(d);
	free(list);
}

/* ---- OffsetForLeaderEpoch ------------------------------------------------------------ */

typedef struct oq {
	int32_t partition, current, epoch;  /* asked */
	int16_t err;                         /* answered */
	int32_t got_epoch;
	int64_t end;
} oq;

static gb *ofle_req(int16_t v, const char *topic, const oq *q, int n)
{
	int flex = v >= 4;
	gb *g = calloc(1, sizeof(gb));
	if (v >= 3)
		gb32(g, -1); /* replica_id: a consumer */
	flex ? gb_carr(g, 1) : gb_arr(g, 1);
	flex ? gb_cstr(g, topic) : gb_str(g, topic);
	flex ? gb_carr(g, n) : gb_arr(g, n);
	for (int i = 0; i < n; i++) {
		gb32(g, q[i].partition);
		if (v >= 2)
			gb32(g, q[i].current);
		gb32(g, q[i].epoch);
		if (flex)
			gb_uvar(g, 0);
	}
	if (flex) {
		gb_uvar(g, 0); /* topic tags */
		gb_uvar(g, 0); /* request tags */
	}
	return g;
}

static gb *ofle_want(int16_t v, const char *topic, const oq *q, int n)
{
	int flex = v >= 4;
	gb *g = calloc(1, sizeof(gb));
	if (v >= 2)
		gb32(g, 0); /* throttle_time_ms */
	flex ? gb_carr(g, 1) : gb_arr(g, 1);
	flex ? gb_cstr(g, topic) : gb_str(g, topic);
	flex ? gb_carr(g, n) : gb_arr(g, n);
	for (int i = 0; i < n; i++) {
		gb16(g, q[i].err);
		gb32(g, q[i].partition);
		if (v >= 1)
			gb32(g, q[i].got_epoch);
		gb64(g, q[i].end);
		if (flex)
			gb_uvar(g, 0);
	}
	if (flex) {
		gb_uvar(g, 0);
		gb_uvar(g, 0);
	}
	return g;
}

static void ofle_expect(int16_t v, const char *topic, const oq *q, int n)
{
	gb *req = ofle_req(v, topic, q, n), *want = ofle_want(v, topic, q, n);
	hreq *r = hh_send(KAAS_API_OFFSET_FOR_LEADER_EPOCH, v, req);
	ck_assert_int_eq(r->rc, KAAS_HANDLED);
	char what[64];
	snprintf(what, sizeof(what), "OffsetForLeaderEpoch v%d", v);
	hh_expect(what, r->body, r->len, want);
	hh_free(r);
	free(req);
	free(want);
}

START_TEST(offset_for_leader_epoch_every_version)
{
	hh_topic("oe", 1);
	int32_t e1 = leader_epoch("oe");
	produce("oe", 3, TS0); /* offsets 0-2 at e1 */
	restart_partitions();
	int32_t e2 = leader_epoch("oe");
	ck_assert_int_gt(e2, e1);
	produce("oe", 2, TS0 + 3); /* 3-4 at e2 */
	restart_partitions();
	int32_t e3 = leader_epoch("oe"); /* leads, wrote nothing yet */
	ck_assert_int_gt(e3, e2);

	for (int16_t v = 0; v <= 4; v++) {
		const oq q[] = {
			{0, -1, e1, 0, e1, 3},                 /* ends where e2 began */
			{0, -1, e2, 0, e2, 5},                 /* ends where e3 began */
			{0, -1, e3, 0, e3, 5},                 /* current: the log end */
			{0, -1, e3 + 1, 0, -1, -1},            /* not reached: undefined */
			{0, -1, -1, 0, -1, -1},                /* UNDEFINED_EPOCH asked */
			{0, -1, e1 - 1, 0, e1 - 1, 0},         /* before the log: its start */
			{7, -1, e1, KERR_UNKNOWN_TOPIC_OR_PARTITION, -1, -1},
		};
		ofle_expect(v, "oe", q, (int)(sizeof(q) / sizeof(q[0])));
		ofle_expect(v, "nope", q + 6, 1);
		if (v < 2)
			continue;
		const oq c[] = {
			{0, e3, e1, 0, e1, 3},                          /* right epoch */
			{0, e2, e1, KERR_FENCED_LEADER_EPOCH, -1, -1},  /* the client is behind */
			{0, e1, e2, KERR_FENCED_LEADER_EPOCH, -1, -1},
			{0, e3 + 1, e1, KERR_UNKNOWN_LEADER_EPOCH, -1, -1}, /* the client is ahead */
		};
		ofle_expect(v, "oe", c, (int)(sizeof(c) / sizeof(c[0])));
	}
}
END_TEST

/* A null topic array is answered with an empty one. */
START_TEST(offset_for_leader_epoch_null_topics)
{
	gb req = {.n = 0}, want = {.n = 0};
	gb32(&req, -1);
	gb_arr(&req, -1);
	gb32(&want, 0);
	gb_arr(&want, 0);
	hreq *r = hh_send(KAAS_API_OFFSET_FOR_LEADER_EPOCH, 3, &req);
	hh_expect("OffsetForLeaderEpoch v3 null topics", r->body, r->len, &want);
	hh_free(r);
}
END_TEST

/* Every truncation of a valid request, and counts or tags that claim more
 * than is there, close the connection (-EBADMSG); nothing is answered. */
START_TEST(offset_for_leader_epoch_malformed)
{
	hh_topic("om", 1);
	const oq q[] = {{0, -1, 1, 0, 0, 0}, {0, -1, 2, 0, 0, 0}};
	for (int16_t v = 0; v <= 4; v++) {
		gb *req = ofle_req(v, "om", q, 2);
		for (size_t cut = 0; cut < req->n; cut++) {
			gb part = {.n = 0};
			gb_raw(&part, req->b, cut);
			hreq *r = hh_send_rc(KAAS_API_OFFSET_FOR_LEADER_EPOCH, v, &part, 1);
			ck_assert_msg(r->rc == -EBADMSG, "v%d cut at %zu: rc %d", v, cut, r->rc);
			hh_free(r);
		}
		free(req);
	}
	/* v4: a tag section claiming a tag longer than the request */
	gb *req = ofle_req(4, "om", q, 1);
	req->n -= 1;
	gb_uvar(req, 1);
	gb_uvar(req, 0);
	gb_uvar(req, 100);
	hreq *r = hh_send_rc(KAAS_API_OFFSET_FOR_LEADER_EPOCH, 4, req, 1);
	ck_assert_int_eq(r->rc, -EBADMSG);
	hh_free(r);
	free(req);
	/* v2: a partition count far beyond the bytes sent */
	gb bad = {.n = 0};
	gb_arr(&bad, 1);
	gb_str(&bad, "om");
	gb_arr(&bad, 1 << 20);
	r = hh_send_rc(KAAS_API_OFFSET_FOR_LEADER_EPOCH, 2, &bad, 1);
	ck_assert_int_eq(r->rc, -EBADMSG);
	hh_free(r);
}
END_TEST

/* ---- ListOffsets v4+ and Fetch v9+ across a restart ---------------------------------- */

typedef struct lo_ans {
	int16_t err;
	int64_t ts, offset;
	int32_t epoch;
} lo_ans;

static lo_ans list_offsets(int16_t v, const char *topic, int32_t current, int64_t ts)
{
	gb *g = calloc(1, sizeof(gb));
	gb32(g, -1);
	gb8(g, 0);
	gb_arr(g, 1);
	gb_str(g, topic);
	gb_arr(g, 1);
	gb32(g, 0);
	gb32(g, current);
	gb64(g, ts);
	hreq *r = hh_send(KAAS_API_LIST_OFFSETS, v, g);
	/* throttle, [name [index, error, timestamp, offset, leader_epoch]] */
	size_t at = 4 + 4 + 2 + strlen(topic) + 4 + 4;
	ck_assert_uint_eq(r->len, at + 2 + 8 + 8 + 4);
	lo_ans a = {kw_get_i16(r->body + at), kw_get_i64(r->body + at + 2), kw_get_i64(r->body + at + 10),
		    kw_get_i32(r->body + at + 18)};
	hh_free(r);
	free(g);
	return a;
}

/* Fetch v11 of partition 0 from offset 0: the partition's error code and
 * its record bytes. */
static int16_t fetch(const char *topic, int32_t current, int32_t *bytes)
{
	gb *g = calloc(1, sizeof(gb));
	gb32(g, -1);
	gb32(g, 0);  /* max_wait: answer at once */
	gb32(g, 1);
	gb32(g, 1 << 20);
	gb8(g, 0);
	gb32(g, 0);
	gb32(g, -1);
	gb_arr(g, 1);
	gb_str(g, topic);
	gb_arr(g, 1);
	gb32(g, 0);
	gb32(g, current);
	gb64(g, 0);
	gb64(g, -1);
	gb32(g, 1 << 20);
	gb_arr(g, 0);
	gb_str(g, "");
	hreq *r = hh_send(KAAS_API_FETCH, 11, g);
	hh_wait(r);
	/* throttle, error, session, [name [index, error, hw, lso, log_start,
	 * aborted(null), preferred_replica, records]] */
	size_t at = 4 + 2 + 4 + 4 + 2 + strlen(topic) + 4 + 4;
	ck_assert_uint_ge(r->len, at + 2 + 8 + 8 + 8 + 4 + 4 + 4);
	int16_t err = kw_get_i16(r->body + at);
	*bytes = kw_get_i32(r->body + at + 2 + 8 + 8 + 8 + 4 + 4);
	hh_free(r);
	free(g);
	return err;
}

START_TEST(list_offsets_and_fetch_across_a_restart)
{
	hh_topic("lf", 1);
	int32_t e1 = leader_epoch("lf");
	produce("lf", 2, TS0);
	int32_t bytes;
	ck_assert_int_eq(fetch("lf", e1, &bytes), KERR_NONE);
	ck_assert_int_gt(bytes, 0);
	restart_partitions();
	int32_t e2 = leader_epoch("lf");
	ck_assert_int_gt(e2, e1);
	produce("lf", 2, TS0 + 2);

	for (int16_t v = 4; v <= 5; v++) {
		lo_ans a = list_offsets(v, "lf", e1, -1);
		ck_assert_int_eq(a.err, KERR_FENCED_LEADER_EPOCH);
		ck_assert(a.offset == -1 && a.epoch == -1 && a.ts == -1);
		a = list_offsets(v, "lf", e2 + 1, -1);
		ck_assert_int_eq(a.err, KERR_UNKNOWN_LEADER_EPOCH);
		ck_assert(a.offset == -1 && a.epoch == -1);
		a = list_offsets(v, "lf", e2, -2); /* earliest: written at e1 */
		ck_assert(a.err == 0 && a.offset == 0 && a.epoch == e1);
		a = list_offsets(v, "lf", -1, -1); /* latest: the current epoch's */
		ck_assert(a.err == 0 && a.offset == 4 && a.epoch == e2);
		a = list_offsets(v, "lf", e2, TS0 + 1);
		ck_assert(a.err == 0 && a.offset == 1 && a.epoch == e1 && a.ts == TS0 + 1);
		a = list_offsets(v, "lf", e2, TS0 + 2);
		ck_assert(a.err == 0 && a.offset == 2 && a.epoch == e2 && a.ts == TS0 + 2);
	}

	/* Fetch v9+: the epoch the client had before the restart is fenced, a
	 * future one unknown, the current one and "no check" are served. */
	ck_assert_int_eq(fetch("lf", e1, &bytes), KERR_FENCED_LEADER_EPOCH);
	ck_assert_int_eq(bytes, 0);
	ck_assert_int_eq(fetch("lf", e2 + 1, &bytes), KERR_UNKNOWN_LEADER_EPOCH);
	ck_assert_int_eq(bytes, 0);
	ck_assert_int_eq(fetch("lf", e2, &bytes), KERR_NONE);
	ck_assert_int_gt(bytes, 0);
	ck_assert_int_eq(fetch("lf", -1, &bytes), KERR_NONE);
	ck_assert_int_gt(bytes, 0);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "leader-epoch", .tcase = "leader-epoch", .timeout = 120,
					  .setup = hh_setup, .teardown = hh_teardown },
			  KTEST_LIST(offset_for_leader_epoch_every_version,
				     offset_for_leader_epoch_null_topics, offset_for_leader_epoch_malformed,
				     list_offsets_and_fetch_across_a_restart));
}
