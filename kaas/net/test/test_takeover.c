/* test_takeover.c — what Produce answers around a take-over, against the
 * real handler, partition table and storage engine: a produce for a
 * partition whose take-over is pending here waits for it and is answered
 * after it, in order with the next one of its connection; a wait that
 * outlasts the request's timeout is answered NOT_LEADER_OR_FOLLOWER with
 * nothing written, and the batch the producer pipelined after it is then
 * not judged out of order but refused the same way, so the producer
 * re-sends both in order; a lease that lapses after the write answers
 * REQUEST_TIMED_OUT ("outcome unknown"), for acks=all and acks=1. */
#include "kaas/core/leaders.h"
#include "kaas/net/test/harness.h"
#include "kaas/proto/kerr.h"
#include "util/test/ktest.h"

/* A v2 batch of one record from an idempotent producer. */
static size_t idem_batch(uint8_t *out, size_t cap, int64_t pid, int16_t epoch, int32_t seq, char fill)
{
	size_t n = hh_batch(out, cap, 1, 8, fill, 1700000000000LL);
	/* producer id, epoch, base sequence, then the CRC over attributes on */
	for (int i = 0; i < 8; i++)
		out[43 + i] = (uint8_t)((uint64_t)pid >> (56 - 8 * i));
	out[51] = (uint8_t)((uint16_t)epoch >> 8);
	out[52] = (uint8_t)epoch;
	for (int i = 0; i < 4; i++)
		out[53 + i] = (uint8_t)((uint32_t)seq >> (24 - 8 * i));
	uint32_t crc = hh_crc32c(out + 21, n - 21);
	for (int i = 0; i < 4; i++)
		out[17 + i] = (uint8_t)(crc >> (24 - 8 * i));
	return n;
}

static hreq *produce_req(const char *topic, int32_t part, int16_t acks, int32_t timeout_ms, const uint8_t *b,
			 size_t n)
{
	gb *g = calloc(1, sizeof(gb));
	gb_str(g, NULL);
	gb16(g, acks);
	gb32(g, timeout_ms);
	gb_arr(g, 1);
	gb_str(g, topic);
	gb_arr(g, 1);
	gb32(g, part);
	gb_bytes(g, b, (int32_t)n);
	hreq *r = hh_send(KAAS_API_PRODUCE, 7, g);
	free(g);
	return r;
}

/* The one partition's error and base offset. */
static void answer_of(hreq *r, int16_t *err, int64_t *base)
{
	kw_rd rd;
	kw_rd_init(&rd, r->body, r->len);
	int32_t cnt, idx;
	kw_str name;
	ck_assert_int_eq(kw_rd_array(&rd, 0, 1, &cnt), 0);
	ck_assert_int_eq(kw_rd_str(&rd, 0, &name), 0);
	ck_assert_int_eq(kw_rd_array(&rd, 0, 1, &cnt), 0);
	ck_assert_int_eq(kw_rd_i32(&rd, &idx), 0);
	ck_assert_int_eq(kw_rd_i16(&rd, err), 0);
	ck_assert_int_eq(kw_rd_i64(&rd, base), 0);
}

/* The map names this broker (3) the leader of topic/0 at `epoch`. */
static void map_to_me(const char *topic, int32_t epoch)
{
	kb_leaders *lm = kb_leaders_new(1, 1, 0);
	ck_assert_ptr_nonnull(lm);
	lm->brokers[0].id = 3;
	ck_assert_int_eq(kb_ltopic_init(&lm->topics[0], topic, NULL, 1), 0);
	lm->topics[0].leader[0] = 3;
	lm->topics[0].epoch[0] = epoch;
	kb_ptable_apply_leaders(H.b.parts, lm);
}

static int64_t log_end(const char *topic)
{
	kb_pref ref;
	ck_assert_int_eq(kb_ptable_get(H.b.parts, (kw_str){topic, (int32_t)strlen(topic)}, 0, &ref), KERR_NONE);
	int64_t end = ks_partition_log_end(ref.p);
	kb_pref_put(&ref);
	return end;
}

START_TEST(a_take_over_in_progress_holds_a_produce_and_answers_it_after)
{
	hh_topic("held", 1); /* led here at epoch 1 */
	uint8_t b0[256], b1[256];
	size_t n0 = idem_batch(b0, sizeof(b0), 77, 0, 0, 'a');
	size_t n1 = idem_batch(b1, sizeof(b1), 77, 0, 1, 'b');
	/* The map moves the partition here at epoch 5: its take-over is
	 * pending, so both pipelined batches wait. */
	map_to_me("held", 5);
	hreq *r0 = produce_req("held", 0, -1, 30000, b0, n0);
	hreq *r1 = produce_req("held", 0, -1, 30000, b1, n1);
	ck_assert_int_eq(r0->rc, KAAS_DEFERRED);
	ck_assert_int_eq(r1->rc, KAAS_DEFERRED);
	hh_barrier();
	usleep(100 * 1000);
	hh_barrier();
	ck_assert_msg(!hh_done(r0) && !hh_done(r1), "answered while the take-over was pending");
	ck_assert_int_eq(log_end("held"), 0);
	/* The take-over ends: both are processed after it, in order. */
	ck_assert_int_eq(kb_ptable_take_over(H.b.parts, "held", NULL, 0, 5, 1, 0), 0);
	hh_wait(r0);
	hh_wait(r1);
	int16_t err;
	int64_t base;
	answer_of(r0, &err, &base);
	ck_assert_int_eq(err, KERR_NONE);
	ck_assert_int_eq(base, 0);
	answer_of(r1, &err, &base);
	ck_assert_int_eq(err, KERR_NONE);
	ck_assert_int_eq(base, 1);
	hh_free(r0);
	hh_free(r1);
	/* Nothing pending: answered at once. */
	size_t n2 = idem_batch(b0, sizeof(b0), 77, 0, 2, 'c');
	hreq *r2 = produce_req("held", 0, -1, 30000, b0, n2);
	hh_wait(r2);
	answer_of(r2, &err, &base);
	ck_assert_int_eq(err, KERR_NONE);
	ck_assert_int_eq(base, 2);
	hh_free(r2);
}
END_TEST

START_TEST(a_refused_batch_leaves_no_gap_the_next_is_judged_by)
{
	hh_topic("gap", 1);
	uint8_t b[256];
	int16_t err;
	int64_t base;
	size_t n = idem_batch(b, sizeof(b), 91, 0, 0, 'a');
	hreq *r = produce_req("gap", 0, -1, 30000, b, n);
	hh_wait(r);
	answer_of(r, &err, &base);
	ck_assert_int_eq(err, KERR_NONE);
	hh_free(r);
	/* Pending for longer than the request's timeout: refused, unwritten. */
	map_to_me("gap", 6);
	n = idem_batch(b, sizeof(b), 91, 0, 1, 'b');
	r = produce_req("gap", 0, -1, 200, b, n);
	hh_wait(r);
	answer_of(r, &err, &base);
	ck_assert_int_eq(err, KERR_NOT_LEADER_OR_FOLLOWER);
	hh_free(r);
	ck_assert_int_eq(kb_ptable_take_over(H.b.parts, "gap", NULL, 0, 6, 1, 0), 0);
	ck_assert_int_eq(log_end("gap"), 1);
	/* The batch pipelined after the refused one reaches the new
	 * leadership first.  Judged against the log it is out of order (a
	 * producer then bumps its epoch and re-numbers what it has not heard
	 * of); it is refused like the one before it instead. */
	n = idem_batch(b, sizeof(b), 91, 0, 2, 'c');
	r = produce_req("gap", 0, -1, 30000, b, n);
	hh_wait(r);
	answer_of(r, &err, &base);
	ck_assert_int_eq(err, KERR_NOT_LEADER_OR_FOLLOWER);
	hh_free(r);
	ck_assert_int_eq(log_end("gap"), 1);
	/* Re-sent in order, both are written once. */
	for (int32_t seq = 1; seq <= 2; seq++) {
		n = idem_batch(b, sizeof(b), 91, 0, seq, (char)('a' + seq));
		r = produce_req("gap", 0, -1, 30000, b, n);
		hh_wait(r);
		answer_of(r, &err, &base);
		ck_assert_int_eq(err, KERR_NONE);
		ck_assert_int_eq(base, seq);
		hh_free(r);
	}
	/* A real gap later is the producer's, and says so. */
	n = idem_batch(b, sizeof(b), 91, 0, 9, 'z');
	r = produce_req("gap", 0, -1, 30000, b, n);
	hh_wait(r);
	answer_of(r, &err, &base);
	ck_assert_int_eq(err, KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	hh_free(r);
}
END_TEST

/* The lease lapses once something is in the log: after the write. */
static ks_partition *lapse_p;
static int lapse_gate(void *arg)
{
	(void)arg;
	return ks_partition_log_end(__atomic_load_n(&lapse_p, __ATOMIC_ACQUIRE)) == 0;
}

START_TEST(lease_lapsing_after_the_write_answers_request_timed_out)
{
	for (int acks = -1; acks <= 1; acks += 2) {
		const char *topic = acks < 0 ? "lapse-all" : "lapse-one";
		hh_topic(topic, 1);
		kb_pref ref;
		ck_assert_int_eq(kb_ptable_get(H.b.parts, (kw_str){topic, (int32_t)strlen(topic)}, 0, &ref), KERR_NONE);
		__atomic_store_n(&lapse_p, ref.p, __ATOMIC_RELEASE);
		kb_ptable_set_ack_gate(H.b.parts, lapse_gate, NULL);
		uint8_t b[256];
		size_t n = idem_batch(b, sizeof(b), 5, 0, 0, 'x');
		hreq *r = produce_req(topic, 0, (int16_t)acks, 30000, b, n);
		hh_wait(r);
		int16_t err;
		int64_t base;
		answer_of(r, &err, &base);
		/* In the log (a successor serves it), not acknowledged, and not
		 * "not written" either. */
		ck_assert_int_eq(ks_partition_log_end(ref.p), 1);
		ck_assert_msg(err == KERR_REQUEST_TIMED_OUT, "acks=%d: error %d", acks, err);
		hh_free(r);
		kb_ptable_set_ack_gate(H.b.parts, NULL, NULL);
		kb_pref_put(&ref);
	}
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "takeover", .tcase = "takeover", .timeout = 120,
					  .setup = hh_setup, .teardown = hh_teardown },
			  KTEST_LIST(a_take_over_in_progress_holds_a_produce_and_answers_it_after,
				     a_refused_batch_leaves_no_gap_the_next_is_judged_by,
				     lease_lapsing_after_the_write_answers_request_timed_out));
}
