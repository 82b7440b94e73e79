/* test_fetch.c — Fetch semantics against the real handler, partition table
 * and storage engine: a long poll with min_bytes waits until that much is
 * there (or max_wait passes), partition_max_bytes and max_bytes with KIP-74's
 * one exception (the first batch of the first non-empty partition), a
 * parked fetch answered when the broker stops, and the lease checked after
 * the high watermark is read (a lapse between the two serves nothing). */
#include "kaas/net/test/harness.h"
#include "kaas/proto/kerr.h"
#include "util/test/ktest.h"

/* acks=all; returns the base offset. */
static int64_t produce(const char *topic, int32_t part, const uint8_t *batch, size_t n)
{
	gb *g = calloc(1, sizeof(gb));
	gb_str(g, NULL);
	gb16(g, -1);
	gb32(g, 30000);
	gb_arr(g, 1);
	gb_str(g, topic);
	gb_arr(g, 1);
	gb32(g, part);
	gb_bytes(g, batch, (int32_t)n);
	hreq *r = hh_send(KAAS_API_PRODUCE, 7, g);
	hh_wait(r);
	/* [topic [index, error, base_offset, log_append_time, log_start]] throttle */
	kw_rd rd;
	kw_rd_init(&rd, r->body, r->len);
	int32_t cnt, idx;
	int16_t err;
	int64_t base;
	kw_str name;
	ck_assert_int_eq(kw_rd_array(&rd, 0, 1, &cnt), 0);
	ck_assert_int_eq(kw_rd_str(&rd, 0, &name), 0);
	ck_assert_int_eq(kw_rd_array(&rd, 0, 1, &cnt), 0);
	ck_assert_int_eq(kw_rd_i32(&rd, &idx), 0);
	ck_assert_int_eq(kw_rd_i16(&rd, &err), 0);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(kw_rd_i64(&rd, &base), 0);
	hh_free(r);
	free(g);
	return base;
}

typedef struct fpart_want {
	int32_t index;
	int32_t max_bytes;
} fpart_want;

static hreq *fetch(const char *topic, const fpart_want *parts, int n, int32_t max_wait, int32_t min_bytes,
		   int32_t max_bytes)
{
	gb *g = calloc(1, sizeof(gb));
	gb32(g, -1);
	gb32(g, max_wait);
	gb32(g, min_bytes);
	gb32(g, max_bytes);
	gb8(g, 0);
	gb32(g, 0);
	gb32(g, -1);
	gb_arr(g, 1);
	gb_str(g, topic);
	gb_arr(g, n);
	for (int i = 0; i < n; i++) {
		gb32(g, parts[i].index);
		gb32(g, -1);
		gb64(g, 0);
		gb64(g, -1);
		gb32(g, parts[i].max_bytes);
	}
	gb_arr(g, 0);
	gb_str(g, "");
	hreq *r = hh_send(KAAS_API_FETCH, 11, g);
	free(g);
	return r;
}

/* Record bytes returned per partition (in request order) of a v11 answer. */
static int fetch_sizes(const hreq *r, int32_t *sizes, int max)
{
	kw_rd rd;
	kw_rd_init(&rd, r->body, r->len);
	int32_t thr, sess, nt, np, idx, n = 0;
	int16_t top, err;
	int64_t hw, lso, ls;
	kw_str name;
	kw_bytes recs;
	KRD_I32(&rd, &thr);
	KRD_I16(&rd, &top);
	ck_assert_int_eq(top, 0);
	KRD_I32(&rd, &sess);
	KRD_ARRAY(&rd, 0, 1, &nt);
	for (int32_t t = 0; t < nt; t++) {
		KRD_STR(&rd, 0, &name);
		KRD_ARRAY(&rd, 0, 1, &np);
		for (int32_t p = 0; p < np; p++) {
			int32_t na, pref;
			KRD_I32(&rd, &idx);
			KRD_I16(&rd, &err);
			ck_assert_int_eq(err, 0);
			KRD_I64(&rd, &hw);
			KRD_I64(&rd, &lso);
			KRD_I64(&rd, &ls);
			KRD_ARRAY(&rd, 0, 16, &na);
			ck_assert_int_eq(na, -1);
			KRD_I32(&rd, &pref);
			KRD_BYTES(&rd, 0, &recs);
			ck_assert_int_lt(n, max);
			sizes[n++] = recs.len < 0 ? 0 : recs.len;
		}
	}
	ck_assert_int_eq(kw_rd_remain(&rd), 0);
	return n;
err_parse:
	ck_abort_msg("Fetch v11 answer does not parse: %s", rd.err);
	return -1;
}

static uint8_t small[256], big[16384];
static size_t small_len, big_len;

static void batches(void)
{
	small_len = hh_batch(small, sizeof(small), 1, 10, 's', 1700000000000);
	big_len = hh_batch(big, sizeof(big), 1, 12000, 'b', 1700000000001);
}

/* Kafka's DelayedFetch: a parked fetch answers once min_bytes are there, not
 * at the first new byte. */
START_TEST(min_bytes_waits_for_enough)
{
	batches();
	hh_topic("mb", 1);
	fpart_want p0 = {0, 1 << 20};
	hreq *f = fetch("mb", &p0, 1, 60000, 10000, 50 << 20);
	ck_assert_int_eq(f->rc, KAAS_DEFERRED);
	ck_assert(!f->done);

	produce("mb", 0, small, small_len); /* durable: the watch fired before this answer */
	hh_barrier();                       /* ... and the re-check it queued has run */
	ck_assert_msg(!hh_done(f), "the fetch answered with %zu bytes although min_bytes is 10000", f->len);

	produce("mb", 0, big, big_len);
	hh_wait(f);
	int32_t sz[1];
	ck_assert_int_eq(fetch_sizes(f, sz, 1), 1);
	ck_assert_int_eq(sz[0], (int32_t)(small_len + big_len));
	hh_free(f);
}
END_TEST

/* Less than min_bytes by the end of max_wait: what is there is returned. */
START_TEST(max_wait_answers_with_what_is_there)
{
	batches();
	hh_topic("mw", 1);
	produce("mw", 0, small, small_len);
	fpart_want p0 = {0, 1 << 20};
	hreq *f = fetch("mw", &p0, 1, 200, 1 << 20, 50 << 20);
	ck_assert_int_eq(f->rc, KAAS_DEFERRED);
	hh_wait(f);
	int32_t sz[1];
	ck_assert_int_eq(fetch_sizes(f, sz, 1), 1);
	ck_assert_int_eq(sz[0], (int32_t)small_len);
	hh_free(f);
}
END_TEST

/* Enough already there: answered at once, without parking. */
START_TEST(enough_answers_at_once)
{
	batches();
	hh_topic("now", 1);
	produce("now", 0, big, big_len);
	fpart_want p0 = {0, 1 << 20};
	hreq *f = fetch("now", &p0, 1, 60000, 10000, 50 << 20);
	ck_assert_int_eq(f->rc, KAAS_HANDLED);
	int32_t sz[1];
	ck_assert_int_eq(fetch_sizes(f, sz, 1), 1);
	ck_assert_int_eq(sz[0], (int32_t)big_len);
	hh_free(f);
}
END_TEST

/* A stopping broker answers parked fetches with what it has. */
START_TEST(stopping_answers_parked_fetch)
{
	batches();
	hh_topic("stop", 1);
	produce("stop", 0, small, small_len);
	fpart_want p0 = {0, 1 << 20};
	hreq *f = fetch("stop", &p0, 1, 600000, 1 << 20, 50 << 20);
	ck_assert_int_eq(f->rc, KAAS_DEFERRED);
	__atomic_store_n(&H.b.stopping, 1, __ATOMIC_RELEASE);
	kb_ptable_wake_all(H.b.parts);
	hh_wait(f);
	int32_t sz[1];
	ck_assert_int_eq(fetch_sizes(f, sz, 1), 1);
	ck_assert_int_eq(sz[0], (int32_t)small_len);
	hh_free(f);
}
END_TEST

/* partition_max_bytes and max_bytes, as Kafka: a partition's records are
 * cut at its limit, possibly inside a batch (clients skip a cut last
 * batch); the first non-empty partition returns its first batch even when
 * it is larger than both (KIP-74); a later partition never exceeds its own
 * limit or the rest of the response budget. */
START_TEST(byte_limits_and_kip74)
{
	batches();
	hh_topic("lim", 3);
	produce("lim", 0, small, small_len);
	produce("lim", 0, small, small_len);
	produce("lim", 1, big, big_len);
	produce("lim", 2, small, small_len);
	int32_t sz[3];

	/* Everything fits. */
	fpart_want all[3] = {{0, 1 << 20}, {1, 1 << 20}, {2, 1 << 20}};
	hreq *f = fetch("lim", all, 3, 0, 1, 50 << 20);
	ck_assert_int_eq(fetch_sizes(f, sz, 3), 3);
	ck_assert_int_eq(sz[0], (int32_t)(2 * small_len));
	ck_assert_int_eq(sz[1], (int32_t)big_len);
	ck_assert_int_eq(sz[2], (int32_t)small_len);
	hh_free(f);

	/* partition_max_bytes below the big batch: partition 1 is not the first
	 * non-empty one, so it returns nothing; partition 0 is cut at its
	 * limit, one byte into its second batch. */
	fpart_want lim1[3] = {{0, (int32_t)small_len + 1}, {1, 1000}, {2, 1000}};
	f = fetch("lim", lim1, 3, 0, 1, 50 << 20);
	ck_assert_int_eq(fetch_sizes(f, sz, 3), 3);
	ck_assert_int_eq(sz[0], (int32_t)small_len + 1);
	ck_assert_int_eq(sz[1], 0);
	ck_assert_int_eq(sz[2], (int32_t)small_len);
	hh_free(f);

	/* The big batch first: returned whole although above partition_max_bytes
	 * and max_bytes; nothing else fits in the response budget then. */
	fpart_want first[2] = {{1, 1000}, {2, 1000}};
	f = fetch("lim", first, 2, 0, 1, 2000);
	ck_assert_int_eq(fetch_sizes(f, sz, 2), 2);
	ck_assert_int_eq(sz[0], (int32_t)big_len);
	ck_assert_int_eq(sz[1], 0);
	hh_free(f);

	/* max_bytes: a later partition only gets what is left of it. */
	fpart_want two[2] = {{0, 1 << 20}, {2, 1 << 20}};
	f = fetch("lim", two, 2, 0, 1, (int32_t)(2 * small_len + small_len / 2));
	ck_assert_int_eq(fetch_sizes(f, sz, 2), 2);
	ck_assert_int_eq(sz[0], (int32_t)(2 * small_len));
	ck_assert_int_eq(sz[1], 0);
	hh_free(f);
}
END_TEST

/* Delete + create the same name: an empty topic starting at offset 0, every
 * time, and a fetch of the new incarnation sees none of the old records. */
START_TEST(recreate_starts_empty_at_offset_0)
{
	batches();
	char msg[256];
	for (int round = 0; round < 3; round++) {
		hh_topic("again", 1);
		ck_assert_int_eq(produce("again", 0, small, small_len), 0);
		ck_assert_int_eq(produce("again", 0, small, small_len), 1);
		ck_assert_int_eq(produce("again", 0, big, big_len), 2);
		fpart_want p0 = {0, 1 << 20};
		hreq *f = fetch("again", &p0, 1, 0, 1, 50 << 20);
		int32_t sz[1];
		ck_assert_int_eq(fetch_sizes(f, sz, 1), 1);
		ck_assert_int_eq(sz[0], (int32_t)(2 * small_len + big_len));
		hh_free(f);
		ck_assert_int_eq(kt_topics_delete(H.b.topics, (kw_str){"again", 5}, msg, sizeof(msg)), 0);
		/* Gone: the directory too (its descriptors were closed first). */
		sub_stat st;
		ck_assert_int_eq(sub_stat_path(H.b.data, "again", &st), -ENOENT);
	}
}
END_TEST

/* The lease rule for reads: the lease must still hold after the high
 * watermark was read.  The gate below plays the race that a cut-off leader
 * runs into: its first call (kb_ptable_get's, before anything is read)
 * still finds the lease, and then, before the plan is made, the lease lapses
 * and an fsync that returned after it moves the high watermark over a record
 * (a successor that took over meanwhile never saw it). */
static ks_partition *race_p;
static int race_armed, race_closed;

static int racing_gate(void *arg)
{
	(void)arg;
	if (!__atomic_exchange_n(&race_armed, 0, __ATOMIC_ACQ_REL))
		return !__atomic_load_n(&race_closed, __ATOMIC_ACQUIRE);
	__atomic_store_n(&race_closed, 1, __ATOMIC_RELEASE);
	uint8_t b[256];
	size_t n = hh_batch(b, sizeof(b), 1, 10, 'z', 1700000000002);
	ks_append_result res;
	ck_assert_int_eq(ks_partition_append(race_p, b, n, &res), 0);
	ck_assert_int_eq(res.error, 0);
	int64_t dur = -1;
	ck_assert_int_eq(ks_partition_flush(race_p, &dur), 0);
	ck_assert_int_ge(dur, res.last_offset + 1);
	return 1; /* as it was when asked */
}

/* The one partition of a v11 Fetch answer: its error and record bytes. */
static void fetch_one(const hreq *r, int16_t *err, int32_t *bytes)
{
	kw_rd rd;
	kw_rd_init(&rd, r->body, r->len);
	int32_t thr, sess, nt, np, idx, na, pref;
	int16_t top;
	int64_t hw, lso, ls;
	kw_str name;
	kw_bytes recs;
	KRD_I32(&rd, &thr);
	KRD_I16(&rd, &top);
	KRD_I32(&rd, &sess);
	KRD_ARRAY(&rd, 0, 1, &nt);
	ck_assert_int_eq(nt, 1);
	KRD_STR(&rd, 0, &name);
	KRD_ARRAY(&rd, 0, 1, &np);
	ck_assert_int_eq(np, 1);
	KRD_I32(&rd, &idx);
	KRD_I16(&rd, err);
	KRD_I64(&rd, &hw);
	KRD_I64(&rd, &lso);
	KRD_I64(&rd, &ls);
	KRD_ARRAY(&rd, 0, 16, &na);
	KRD_I32(&rd, &pref);
	KRD_BYTES(&rd, 0, &recs);
	*bytes = recs.len < 0 ? 0 : recs.len;
	if (*err)
		ck_assert_int_eq(hw, -1); /* no high watermark from a leader without a lease */
	return;
err_parse:
	ck_abort_msg("Fetch v11 answer does not parse: %s", rd.err);
}

START_TEST(lease_lapsing_before_the_read_serves_nothing)
{
	hh_topic("lapse", 1);
	kb_pref ref;
	ck_assert_int_eq(kb_ptable_get(H.b.parts, (kw_str){"lapse", 5}, 0, &ref), KERR_NONE);
	race_p = ref.p;
	race_closed = 0;
	kb_ptable_set_ack_gate(H.b.parts, racing_gate, NULL);
	__atomic_store_n(&race_armed, 1, __ATOMIC_RELEASE);
	fpart_want p0 = {0, 1 << 20};
	hreq *f = fetch("lapse", &p0, 1, 0, 1, 50 << 20);
	ck_assert_int_eq(f->rc, KAAS_HANDLED);
	ck_assert(race_closed); /* the race ran */
	ck_assert_int_eq(ks_partition_high_watermark(ref.p), 1);
	int16_t err;
	int32_t bytes;
	fetch_one(f, &err, &bytes);
	ck_assert_msg(bytes == 0, "%d record bytes served after the lease lapsed", bytes);
	ck_assert_int_eq(err, KERR_NOT_LEADER_OR_FOLLOWER);
	hh_free(f);
	/* The lease back: the record is served (it was never in doubt here). */
	__atomic_store_n(&race_closed, 0, __ATOMIC_RELEASE);
	f = fetch("lapse", &p0, 1, 0, 1, 50 << 20);
	fetch_one(f, &err, &bytes);
	ck_assert_int_eq(err, 0);
	ck_assert_int_gt(bytes, 0);
	hh_free(f);
	kb_ptable_set_ack_gate(H.b.parts, NULL, NULL);
	kb_pref_put(&ref);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "fetch", .tcase = "fetch", .timeout = 120,
					  .setup = hh_setup, .teardown = hh_teardown },
			  KTEST_LIST(min_bytes_waits_for_enough,
				     max_wait_answers_with_what_is_there, enough_answers_at_once,
				     stopping_answers_parked_fetch, byte_limits_and_kip74,
				     recreate_starts_empty_at_offset_0,
				     lease_lapsing_before_the_read_serves_nothing));
}
