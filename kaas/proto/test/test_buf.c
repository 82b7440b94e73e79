/* test_buf.c — the codec reader/writer: round trips, bounds, hostile counts. */
#include <check.h>
#include <stdlib.h>

#include "kaas/proto/buf.h"
#include "util/test/ktest.h"

static int decode_sample(const uint8_t *p, size_t n, int flex, int32_t *out_cnt, kw_str *s)
{
	kw_rd rd;
	int16_t a;
	int32_t cnt;
	kw_rd_init(&rd, p, n);
	KRD_I16(&rd, &a);
	KRD_STR(&rd, flex, s);
	KRD_ARRAY(&rd, flex, 4, &cnt);
	for (int32_t i = 0; i < cnt; i++) {
		int32_t v;
		KRD_I32(&rd, &v);
		KRD_EXPECT(&rd, v == i * 7, "element value");
	}
	KRD_TAGS(&rd, flex);
	*out_cnt = cnt;
	return 0;
err_parse:
	return -1;
}

START_TEST(roundtrip_plain_and_flexible)
{
	for (int flex = 0; flex <= 1; flex++) {
		kw_wr w = KAAS_WR_INIT;
		kw_wr_i16(&w, 42);
		kw_wr_str(&w, flex, "topic-a");
		kw_wr_array(&w, flex, 100);
		for (int i = 0; i < 100; i++)
			kw_wr_i32(&w, i * 7);
		kw_wr_tags(&w, flex);
		ck_assert_int_eq(w.oom, 0);
		int32_t cnt = 0;
		kw_str s;
		ck_assert_int_eq(decode_sample(w.buf, w.len, flex, &cnt, &s), 0);
		ck_assert_int_eq(cnt, 100);
		ck_assert_int_eq(s.len, 7);
		ck_assert_int_eq(memcmp(s.s, "topic-a", 7), 0);
		/* Every truncation fails cleanly. */
		for (size_t cut = 0; cut < w.len; cut++)
			ck_assert_int_eq(decode_sample(w.buf, cut, flex, &cnt, &s), -1);
		kw_wr_free(&w);
	}
}
END_TEST

START_TEST(hostile_counts_rejected_before_allocation)
{
	uint8_t req[] = {0, 1, 0, 1, 'x', 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0};
	kw_rd rd;
	int32_t n;
	kw_str s;
	kw_rd_init(&rd, req, sizeof(req));
	ck_assert_int_eq(kw_rd_skip(&rd, 2), 0);
	ck_assert_int_eq(kw_rd_str(&rd, 0, &s), 0);
	ck_assert_int_eq(kw_rd_array(&rd, 0, 4, &n), -1);
	ck_assert_str_eq(rd.err, "array count (exceeds request)");
	/* Negative lengths other than -1. */
	uint8_t neg[] = {0xff, 0xfe};
	kw_rd_init(&rd, neg, sizeof(neg));
	ck_assert_int_eq(kw_rd_str(&rd, 0, &s), -1);
	/* Null string. */
	uint8_t nul[] = {0xff, 0xff};
	kw_rd_init(&rd, nul, sizeof(nul));
	ck_assert_int_eq(kw_rd_str(&rd, 0, &s), 0);
	ck_assert_int_eq(s.len, -1);
	/* An over-long varint. */
	uint8_t vv[11];
	memset(vv, 0xff, sizeof(vv));
	uint64_t u;
	kw_rd_init(&rd, vv, sizeof(vv));
	ck_assert_int_eq(kw_rd_uvarint(&rd, &u), -1);
}
END_TEST

START_TEST(varints_zigzag_and_backfill)
{
	int64_t vals[] = {0, -1, 1, 63, -64, 64, 300, -300, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
	kw_wr w = KAAS_WR_INIT;
	size_t len_off = kw_wr_reserve_i32(&w);
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++)
		kw_wr_varint(&w, vals[i]);
	kw_wr_patch_len(&w, len_off);
	kw_rd rd;
	kw_rd_init(&rd, w.buf, w.len);
	int32_t len;
	ck_assert_int_eq(kw_rd_i32(&rd, &len), 0);
	ck_assert_int_eq((size_t)len, w.len - 4);
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		int64_t v;
		ck_assert_int_eq(kw_rd_varint(&rd, &v), 0);
		ck_assert(v == vals[i]);
	}
	ck_assert_uint_eq(kw_rd_remain(&rd), 0);
	kw_wr_free(&w);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "proto-buf", .tcase = "buf" },
			  KTEST_LIST(roundtrip_plain_and_flexible,
				     hostile_counts_rejected_before_allocation,
				     varints_zigzag_and_backfill));
}
