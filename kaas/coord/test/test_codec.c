/* test_codec.c — the wire encodings of every coordinator API and version:
 * exact bytes where the answer is deterministic, field-by-field layouts
 * elsewhere, and every truncation of every request rejected cleanly. */
#include "kaas/coord/test/harness.h"
#include "util/test/ktest.h"

static void expect_bytes(const th_resp *r, const uint8_t *want, size_t n)
{
	ck_assert_int_eq(r->got, 1);
	ck_assert_uint_eq(r->w.len, n);
	for (size_t i = 0; i < n; i++)
		ck_assert_msg(r->w.buf[i] == want[i], "byte %zu: 0x%02x, want 0x%02x", i, r->w.buf[i], want[i]);
}

START_TEST(find_coordinator_bytes)
{
	th t;
	th_open(&t);
	th_resp r = {0};
	kw_wr w = KAAS_WR_INIT;
	/* v0: key */
	kw_wr_str(&w, 0, "g");
	ck_assert_int_eq(th_call(&t, KAAS_API_FIND_COORDINATOR, 0, &w, &r), KAAS_HANDLED);
	static const uint8_t v0[] = {0, 0, 0, 0, 0, 7, 0, 8, 'b', 'r', 'o', 'k', 'e', 'r', '-', 'a', 0, 0, 0x4a, 0x94};
	expect_bytes(&r, v0, sizeof(v0));
	th_resp_free(&r);
	/* v1, v2: key, key_type; groups come here, transactions are refused
	 * with a fatal error and the reason */
	for (int16_t v = 1; v <= 2; v++) {
		kw_wr_str(&w, 0, "g");
		kw_wr_i8(&w, 0);
		ck_assert_int_eq(th_call(&t, KAAS_API_FIND_COORDINATOR, v, &w, &r), KAAS_HANDLED);
		static const uint8_t v1[] = {0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 7, 0, 8, 'b', 'r',
					     'o', 'k', 'e', 'r', '-', 'a', 0, 0, 0x4a, 0x94};
		expect_bytes(&r, v1, sizeof(v1));
		th_resp_free(&r);
		kw_wr_str(&w, 0, "tx");
		kw_wr_i8(&w, 1);
		ck_assert_int_eq(th_call(&t, KAAS_API_FIND_COORDINATOR, v, &w, &r), KAAS_HANDLED);
		tr tx;
		tr_init(&tx, &r, 0);
		ck_assert_int_eq(tr_i32(&tx), 0);
		ck_assert_int_eq(tr_i16(&tx), KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
		kw_str why = tr_str(&tx);
		ck_assert_msg(why.len > 0 && memmem(why.s, (size_t)why.len, "not supported", 13),
			      "the refusal says why");
		ck_assert_int_eq(tr_i32(&tx), -1);
		ck_assert_int_eq(tr_str(&tx).len, 0);
		ck_assert_int_eq(tr_i32(&tx), -1);
		tr_end(&tx);
		th_resp_free(&r);
		kw_wr_str(&w, 0, "g");
		kw_wr_i8(&w, 2);
		ck_assert_int_eq(th_call(&t, KAAS_API_FIND_COORDINATOR, v, &w, &r), KAAS_HANDLED);
		tr rr;
		tr_init(&rr, &r, 0);
		ck_assert_int_eq(tr_i32(&rr), 0);
		ck_assert_int_eq(tr_i16(&rr), KERR_INVALID_REQUEST);
		kw_str msg = tr_str(&rr);
		ck_assert_int_gt(msg.len, 0);
		ck_assert_int_eq(tr_i32(&rr), -1);
		kw_str host = tr_str(&rr);
		ck_assert_int_eq(host.len, 0);
		ck_assert_int_eq(tr_i32(&rr), -1);
		tr_end(&rr);
		th_resp_free(&r);
	}
	th_close(&t);
}
END_TEST

START_TEST(init_producer_id_bytes)
{
	th t;
	th_open(&t);
	th_resp r = {0};
	kw_wr w = KAAS_WR_INIT;
	/* v0: nullable string (int16 -1), timeout */
	static const uint8_t req0[] = {0xff, 0xff, 0, 0, 0xea, 0x60};
	kw_wr_raw(&w, req0, sizeof(req0));
	ck_assert_int_eq(th_call(&t, KAAS_API_INIT_PRODUCER_ID, 0, &w, &r), KAAS_HANDLED);
	static const uint8_t resp0[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
	expect_bytes(&r, resp0, sizeof(resp0));
	th_resp_free(&r);
	/* v2 (flexible): compact null (0), timeout, empty tags */
	static const uint8_t req2[] = {0x00, 0, 0, 0xea, 0x60, 0x00};
	kw_wr_raw(&w, req2, sizeof(req2));
	ck_assert_int_eq(th_call(&t, KAAS_API_INIT_PRODUCER_ID, 2, &w, &r), KAAS_HANDLED);
	static const uint8_t resp2[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0x00};
	expect_bytes(&r, resp2, sizeof(resp2));
	th_resp_free(&r);
	/* v4: + producer_id, producer_epoch (a bump of id 1, epoch 0) */
	static const uint8_t req4[] = {0x00, 0, 0, 0xea, 0x60, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0x00};
	kw_wr_raw(&w, req4, sizeof(req4));
	ck_assert_int_eq(th_call(&t, KAAS_API_INIT_PRODUCER_ID, 4, &w, &r), KAAS_HANDLED);
	static const uint8_t resp4[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0x00};
	expect_bytes(&r, resp4, sizeof(resp4));
	th_resp_free(&r);
	/* v3 with a transactional id: compact string "t" */
	static const uint8_t req3[] = {0x02, 't', 0, 0, 0xea, 0x60, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00};
	kw_wr_raw(&w, req3, sizeof(req3));
	ck_assert_int_eq(th_call(&t, KAAS_API_INIT_PRODUCER_ID, 3, &w, &r), KAAS_HANDLED);
	static const uint8_t resp3[] = {0, 0, 0, 0, 0, 53, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00};
	expect_bytes(&r, resp3, sizeof(resp3));
	th_resp_free(&r);
	th_close(&t);
}
END_TEST

/* A Stable one-member group "dg" with offsets. */
static char *stable_group(th *t)
{
	static char member[256];
	kw_wr w = KAAS_WR_INIT;
	th_resp jr = {0}, sr = {0};
	jg_req(&w, 5, "dg", 10000, 10000, "", "inst", "consumer", "range=META");
	ck_assert_int_eq(th_call(t, KAAS_API_JOIN_GROUP, 5, &w, &jr), KAAS_DEFERRED);
	kg_coord_tick(t->c);
	jg_resp j;
	jg_parse(&jr, 5, &j);
	ck_assert_int_eq(j.err, 0);
	snprintf(member, sizeof(member), "%s", j.member);
	const char *ids[] = {member}, *as[] = {"ASG"};
	sg_req(&w, 3, "dg", 1, member, "inst", 1, ids, as);
	th_sync_durable(t, 3, &w, &sr);
	ck_assert_int_eq(sg_parse(&sr, 3, NULL, 0), 0);
	ck_assert_int_eq(th_commit_sync(t, 7, "dg", 1, member, "t", 0, 9, NULL), 0);
	th_resp_free(&jr);
	th_resp_free(&sr);
	return member;
}

START_TEST(describe_groups_layouts)
{
	th t;
	th_open(&t);
	char *member = stable_group(&t);
	for (int16_t v = 0; v <= 4; v++) {
		kw_wr w = KAAS_WR_INIT;
		th_resp r = {0};
		kw_wr_array(&w, 0, 2);
		kw_wr_str(&w, 0, "dg");
		kw_wr_str(&w, 0, "missing");
		if (v >= 3)
			kw_wr_i8(&w, 0);
		ck_assert_int_eq(th_call(&t, KAAS_API_DESCRIBE_GROUPS, v, &w, &r), KAAS_HANDLED);
		tr rr;
		tr_init(&rr, &r, 0);
		if (v >= 1)
			ck_assert_int_eq(tr_i32(&rr), 0);
		ck_assert_int_eq(tr_arr(&rr), 2);
		ck_assert_int_eq(tr_i16(&rr), 0);
		kw_str s = tr_str(&rr);
		ck_assert_kstr(s, "dg");
		s = tr_str(&rr);
		ck_assert_kstr(s, "Stable");
		s = tr_str(&rr);
		ck_assert_kstr(s, "consumer");
		s = tr_str(&rr);
		ck_assert_kstr(s, "range");
		ck_assert_int_eq(tr_arr(&rr), 1);
		s = tr_str(&rr);
		ck_assert_kstr(s, member);
		if (v >= 4) {
			s = tr_str(&rr);
			ck_assert_kstr(s, "inst");
		}
		s = tr_str(&rr);
		ck_assert_kstr(s, "cli");
		s = tr_str(&rr);
		ck_assert_kstr(s, "/127.0.0.1");
		kw_bytes b = tr_bytes(&rr);
		ck_assert(b.len == 4 && memcmp(b.p, "META", 4) == 0);
		b = tr_bytes(&rr);
		ck_assert(b.len == 3 && memcmp(b.p, "ASG", 3) == 0);
		if (v >= 3)
			ck_assert_int_eq(tr_i32(&rr), INT32_MIN); /* operations not asked for */
		/* A group that does not exist: Dead, no error. */
		ck_assert_int_eq(tr_i16(&rr), 0);
		s = tr_str(&rr);
		ck_assert_kstr(s, "missing");
		s = tr_str(&rr);
		ck_assert_kstr(s, "Dead");
		tr_str(&rr);
		tr_str(&rr);
		ck_assert_int_eq(tr_arr(&rr), 0);
		if (v >= 3)
			tr_i32(&rr);
		tr_end(&rr);
		th_resp_free(&r);
	}
	th_close(&t);
}
END_TEST

static void no_answer(void *ctx, kw_wr *resp);

START_TEST(list_groups_layouts)
{
	th t;
	th_open(&t);
	stable_group(&t);
	ck_assert_int_eq(th_commit_sync(&t, 2, "offsets-only", -1, "", "t", 0, 1, NULL), 0);
	for (int16_t v = 0; v <= 2; v++) {
		kw_wr w = KAAS_WR_INIT;
		th_resp r = {0};
		ck_assert_int_eq(th_call(&t, KAAS_API_LIST_GROUPS, v, &w, &r), KAAS_HANDLED);
		tr rr;
		tr_init(&rr, &r, 0);
		if (v >= 1)
			ck_assert_int_eq(tr_i32(&rr), 0);
		ck_assert_int_eq(tr_i16(&rr), 0);
		ck_assert_int_eq(tr_arr(&rr), 2);
		int found = 0;
		for (int i = 0; i < 2; i++) {
			kw_str id = tr_str(&rr), pt = tr_str(&rr);
			if (tr_streq(id, "dg")) {
				ck_assert_kstr(pt, "consumer");
				found |= 1;
			} else if (tr_streq(id, "offsets-only")) {
				ck_assert_int_eq(pt.len, 0);
				found |= 2;
			}
		}
		ck_assert_int_eq(found, 3);
		tr_end(&rr);
		th_resp_free(&r);
	}
	/* v3 (flexible) and v4 with StatesFilter: each group with its state;
	 * a filter keeps the groups in those states (any case). */
	static const struct {
		int16_t v;
		int nstates;
		const char *states[2];
		int want; /* bit 1: dg (Stable), bit 2: offsets-only (Empty) */
	} lg[] = {
		{3, -1, {NULL}, 3},          {4, 0, {NULL}, 3},
		{4, 1, {"Stable"}, 1},       {4, 1, {"empty"}, 2},
		{4, 2, {"Dead", "PreparingRebalance"}, 0},
		{4, 2, {"CompletingRebalance", "Empty"}, 2},
	};
	for (size_t k = 0; k < sizeof(lg) / sizeof(lg[0]); k++) {
		kw_wr w = KAAS_WR_INIT;
		th_resp r = {0};
		if (lg[k].v >= 4) {
			kw_wr_array(&w, 1, lg[k].nstates);
			for (int i = 0; i < lg[k].nstates; i++)
				kw_wr_str(&w, 1, lg[k].states[i]);
		}
		kw_wr_tags(&w, 1);
		ck_assert_int_eq(th_call(&t, KAAS_API_LIST_GROUPS, lg[k].v, &w, &r), KAAS_HANDLED);
		tr rr;
		tr_init(&rr, &r, 1);
		ck_assert_int_eq(tr_i32(&rr), 0);
		ck_assert_int_eq(tr_i16(&rr), 0);
		int32_t n = tr_arr(&rr), found = 0;
		for (int32_t i = 0; i < n; i++) {
			kw_str id = tr_str(&rr), pt = tr_str(&rr);
			kw_str st = {NULL, -1};
			if (lg[k].v >= 4)
				st = tr_str(&rr);
			tr_tags(&rr);
			if (tr_streq(id, "dg")) {
				ck_assert_kstr(pt, "consumer");
				if (lg[k].v >= 4)
					ck_assert_kstr(st, "Stable");
				found |= 1;
			} else if (tr_streq(id, "offsets-only")) {
				if (lg[k].v >= 4)
					ck_assert_kstr(st, "Empty");
				found |= 2;
			}
		}
		ck_assert_msg(found == lg[k].want && n == __builtin_popcount((unsigned)lg[k].want),
			      "ListGroups v%d case %zu: found %d of %d", lg[k].v, k, found, n);
		tr_tags(&rr);
		tr_end(&rr);
		th_resp_free(&r);
	}
	/* A StatesFilter cut short is a malformed request. */
	kw_wr w = KAAS_WR_INIT;
	kw_wr_array(&w, 1, 3);
	kw_wr_str(&w, 1, "Stable");
	kg_coord_call call = {KAAS_API_LIST_GROUPS, 4, 1, {"cli", 3}, "/127.0.0.1", no_answer, NULL, NULL, 0, NULL};
	kw_rd rd;
	kw_wr resp = KAAS_WR_INIT;
	kw_rd_init(&rd, w.buf, w.len);
	ck_assert_int_eq(kg_coord_handle(t.c, &call, &rd, &resp), -EBADMSG);
	kw_wr_free(&resp);
	kw_wr_free(&w);
	th_close(&t);
}
END_TEST

/* ---- every request, every version, every truncation ---------------------------- */

static void build(int16_t api, int16_t v, kw_wr *w)
{
	int flex = th_flex(api, v);
	switch (api) {
	case KAAS_API_FIND_COORDINATOR:
		kw_wr_str(w, 0, "group");
		if (v >= 1)
			kw_wr_i8(w, 0);
		break;
	case KAAS_API_JOIN_GROUP:
		jg_req(w, v, "g", 10000, 10000, "", "i", "consumer", "range=abc,rr=de");
		break;
	case KAAS_API_SYNC_GROUP: {
		const char *ids[] = {"m1", "m2"}, *as[] = {"a", "b"};
		sg_req(w, v, "g", 1, "m1", "i", 2, ids, as);
		break;
	}
	case KAAS_API_HEARTBEAT:
		kw_wr_str(w, 0, "g");
		kw_wr_i32(w, 1);
		kw_wr_str(w, 0, "m1");
		if (v >= 3)
			kw_wr_str(w, 0, NULL);
		break;
	case KAAS_API_LEAVE_GROUP:
		kw_wr_str(w, 0, "g");
		if (v <= 2) {
			kw_wr_str(w, 0, "m1");
		} else {
			kw_wr_array(w, 0, 2);
			kw_wr_str(w, 0, "m1");
			kw_wr_str(w, 0, NULL);
			kw_wr_str(w, 0, "m2");
			kw_wr_str(w, 0, "i");
		}
		break;
	case KAAS_API_DESCRIBE_GROUPS:
		kw_wr_array(w, 0, 2);
		kw_wr_str(w, 0, "g");
		kw_wr_str(w, 0, "h");
		if (v >= 3)
			kw_wr_i8(w, 1);
		break;
	case KAAS_API_DELETE_GROUPS:
		kw_wr_array(w, 0, 2);
		kw_wr_str(w, 0, "g");
		kw_wr_str(w, 0, "h");
		break;
	case KAAS_API_OFFSET_COMMIT:
		kw_wr_str(w, 0, "g");
		if (v >= 1) {
			kw_wr_i32(w, -1);
			kw_wr_str(w, 0, "");
		}
		if (v >= 7)
			kw_wr_str(w, 0, NULL);
		if (v >= 2 && v <= 4)
			kw_wr_i64(w, -1);
		kw_wr_array(w, 0, 1);
		kw_wr_str(w, 0, "t");
		kw_wr_array(w, 0, 2);
		for (int p = 0; p < 2; p++) {
			kw_wr_i32(w, p);
			kw_wr_i64(w, 10);
			if (v >= 6)
				kw_wr_i32(w, 1);
			if (v == 1)
				kw_wr_i64(w, -1);
			kw_wr_str(w, 0, "md");
		}
		break;
	case KAAS_API_OFFSET_FETCH:
		kw_wr_str(w, flex, "g");
		kw_wr_array(w, flex, 1);
		kw_wr_str(w, flex, "t");
		kw_wr_array(w, flex, 2);
		kw_wr_i32(w, 0);
		kw_wr_i32(w, 1);
		kw_wr_tags(w, flex);
		if (v >= 7)
			kw_wr_i8(w, 0);
		kw_wr_tags(w, flex);
		break;
	case KAAS_API_OFFSET_DELETE:
		kw_wr_str(w, 0, "g");
		kw_wr_array(w, 0, 1);
		kw_wr_str(w, 0, "t");
		kw_wr_array(w, 0, 1);
		kw_wr_i32(w, 0);
		break;
	case KAAS_API_INIT_PRODUCER_ID:
		kw_wr_str(w, flex, NULL);
		kw_wr_i32(w, 1000);
		if (v >= 3) {
			kw_wr_i64(w, -1);
			kw_wr_i16(w, -1);
		}
		kw_wr_tags(w, flex);
		break;
	}
}

static const struct {
	int16_t api, max;
} apis[] = {
	{KAAS_API_FIND_COORDINATOR, 2}, {KAAS_API_JOIN_GROUP, 5},     {KAAS_API_SYNC_GROUP, 3},
	{KAAS_API_HEARTBEAT, 3},        {KAAS_API_LEAVE_GROUP, 3},    {KAAS_API_DESCRIBE_GROUPS, 4},
	{KAAS_API_DELETE_GROUPS, 1},    {KAAS_API_OFFSET_COMMIT, 7},  {KAAS_API_OFFSET_FETCH, 7},
	{KAAS_API_OFFSET_DELETE, 0},    {KAAS_API_INIT_PRODUCER_ID, 4},
};

static void no_answer(void *ctx, kw_wr *resp)
{
	(void)ctx;
	(void)resp;
	ck_abort_msg("a request that did not parse was answered later");
}

START_TEST(every_truncation_is_rejected)
{
	th t;
	th_open(&t);
	for (size_t a = 0; a < sizeof(apis) / sizeof(apis[0]); a++) {
		for (int16_t v = 0; v <= apis[a].max; v++) {
			kw_wr full = KAAS_WR_INIT;
			build(apis[a].api, v, &full);
			for (size_t cut = 0; cut < full.len; cut++) {
				kg_coord_call call = {apis[a].api, v, th_flex(apis[a].api, v), {"c", 1}, "/h",
							no_answer, NULL, NULL, 0, NULL};
				kw_rd rd;
				kw_wr resp = KAAS_WR_INIT;
				kw_rd_init(&rd, full.buf, cut);
				int rc = kg_coord_handle(t.c, &call, &rd, &resp);
				ck_assert_msg(rc == -EBADMSG, "api %d v%d cut at %zu/%zu: rc %d", apis[a].api, v,
					      cut, full.len, rc);
				ck_assert_ptr_nonnull(rd.err);
				kw_wr_free(&resp);
			}
			/* The whole request parses (and is answered one way or another). */
			th_resp r = {0};
			int rc = th_call(&t, apis[a].api, v, &full, &r);
			if (rc == KAAS_DEFERRED) {
				kg_coord_flush(t.c);
				t.now += 100000; /* past any rebalance timeout */
				kg_coord_tick(t.c);
			}
			ck_assert_int_eq(r.got, 1);
			th_resp_free(&r);
		}
	}
	kg_coord_tick(t.c);
	th_close(&t);
}
END_TEST

START_TEST(hostile_counts_are_rejected)
{
	th t;
	th_open(&t);
	/* JoinGroup v0 with 2^31-1 protocols in a 30-byte request. */
	kw_wr w = KAAS_WR_INIT;
	kw_wr_str(&w, 0, "g");
	kw_wr_i32(&w, 10000);
	kw_wr_str(&w, 0, "");
	kw_wr_str(&w, 0, "consumer");
	kw_wr_i32(&w, INT32_MAX);
	kw_wr_str(&w, 0, "range");
	kg_coord_call call = {KAAS_API_JOIN_GROUP, 0, 0, {"c", 1}, "/h", no_answer, NULL, NULL, 0, NULL};
	kw_rd rd;
	kw_wr resp = KAAS_WR_INIT;
	kw_rd_init(&rd, w.buf, w.len);
	ck_assert_int_eq(kg_coord_handle(t.c, &call, &rd, &resp), -EBADMSG);
	kw_wr_free(&w);
	/* A negative string length. */
	kw_wr_i16(&w, -7);
	call.api_key = KAAS_API_HEARTBEAT;
	kw_rd_init(&rd, w.buf, w.len);
	ck_assert_int_eq(kg_coord_handle(t.c, &call, &rd, &resp), -EBADMSG);
	kw_wr_free(&w);
	/* OffsetFetch v6 with a compact array count beyond the request. */
	kw_wr_str(&w, 1, "g");
	kw_wr_uvarint(&w, 1000000);
	call.api_key = KAAS_API_OFFSET_FETCH;
	call.version = 6;
	call.flex = 1;
	kw_rd_init(&rd, w.buf, w.len);
	ck_assert_int_eq(kg_coord_handle(t.c, &call, &rd, &resp), -EBADMSG);
	kw_wr_free(&w);
	kw_wr_free(&resp);
	th_close(&t);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "coord-codec", .tcase = "codec", .timeout = 60 },
			  KTEST_LIST(find_coordinator_bytes,
				     init_producer_id_bytes,
				     describe_groups_layouts,
				     list_groups_layouts,
				     every_truncation_is_rejected,
				     hostile_counts_are_rejected));
}
