/* test_dispatch.c — the real dispatch table: one row per key, sane ranges,
 * the version ranges kaas promises (DESIGN §8; Produce from v0, Metadata to v12, ListOffsets
 * to v5 and OffsetForLeaderEpoch for KIP-320, see docs/broker.md), and the ApiVersions body it generates for v0-v3. */
#include <check.h>

#include "kaas/proto/header.h"
#include "kaas/net/server.h"
#include "kaas/proto/kerr.h"
#include "util/test/ktest.h"

static const struct {
	int16_t key, min, max, flex;
} want[] = {
	{0, 0, 7, -1},   {1, 4, 11, -1}, {2, 0, 5, -1},  {3, 0, 12, 9},  {8, 0, 7, -1},  {9, 0, 7, 6},
	{10, 0, 2, -1},  {11, 0, 5, -1}, {12, 0, 3, -1}, {13, 0, 3, -1}, {14, 0, 3, -1}, {15, 0, 4, -1},
	{16, 0, 4, 3},   {17, 0, 1, -1}, {18, 0, 3, 3},  {19, 0, 4, -1}, {20, 0, 3, -1}, {21, 0, 1, -1}, {22, 0, 4, 2},
	{23, 0, 4, 4},   {29, 0, 3, 2},  {30, 0, 3, 2},  {31, 0, 3, 2},  {32, 0, 4, 4},  {33, 0, 1, -1}, {35, 0, 4, 2},  {36, 0, 2, 2},  {37, 0, 1, -1}, {42, 0, 1, -1},
	{44, 0, 1, 1},   {47, 0, 0, -1},  {60, 0, 1, 0},
};

START_TEST(table_rows)
{
	size_t served = 0;
	for (size_t i = 0; i < kn_dispatch_table_len; i++) {
		const kw_api *a = &kn_dispatch_table[i];
		ck_assert_int_le(a->min, a->max);
		ck_assert_ptr_nonnull(a->name);
		for (size_t k = i + 1; k < kn_dispatch_table_len; k++)
			ck_assert_int_ne(a->key, kn_dispatch_table[k].key);
		if (a->handler)
			served++;
	}
	ck_assert_int_eq(served, sizeof(want) / sizeof(want[0]));
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const kw_api *a = kw_api_find(kn_dispatch_table, kn_dispatch_table_len, want[i].key);
		ck_assert_ptr_nonnull(a);
		ck_assert_ptr_nonnull(a->handler);
		ck_assert_int_eq(a->min, want[i].min);
		ck_assert_int_eq(a->max, want[i].max);
		for (int16_t v = a->min; v <= a->max; v++)
			ck_assert_int_eq(kw_api_flexible(a, v), want[i].flex >= 0 && v >= want[i].flex);
	}
}
END_TEST

START_TEST(api_versions_from_the_table)
{
	for (int16_t v = 0; v <= 3; v++) {
		int flex = v >= 3;
		kw_wr w = KAAS_WR_INIT;
		kw_api_versions_write(&w, v, KERR_NONE, kn_dispatch_table, kn_dispatch_table_len);
		kw_rd rd;
		kw_rd_init(&rd, w.buf, w.len);
		int16_t err, key, lo, hi;
		int32_t n, thr;
		KRD_I16(&rd, &err);
		ck_assert_int_eq(err, 0);
		KRD_ARRAY(&rd, flex, 6, &n);
		ck_assert_int_eq(n, sizeof(want) / sizeof(want[0]));
		for (int32_t i = 0; i < n; i++) {
			KRD_I16(&rd, &key);
			KRD_I16(&rd, &lo);
			KRD_I16(&rd, &hi);
			KRD_TAGS(&rd, flex);
			const kw_api *a = kw_api_find(kn_dispatch_table, kn_dispatch_table_len, key);
			ck_assert_ptr_nonnull(a);
			ck_assert_int_eq(lo, a->min);
			ck_assert_int_eq(hi, a->max);
		}
		if (v >= 1) {
			KRD_I32(&rd, &thr);
			ck_assert_int_eq(thr, 0);
		}
		KRD_TAGS(&rd, flex);
		ck_assert_int_eq(kw_rd_remain(&rd), 0);
		kw_wr_free(&w);
		continue;
err_parse:
		ck_abort_msg("ApiVersions v%d body does not parse: %s", v, rd.err);
	}
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "dispatch", .tcase = "dispatch" },
			  KTEST_LIST(table_rows, api_versions_from_the_table));
}
