/* test_header.c — request header v1/v2 parsing, response headers, and the
 * ApiVersions body generated from a dispatch table (v0-v3). */
#include <check.h>
#include <stdlib.h>

#include "kaas/proto/header.h"
#include "kaas/proto/kerr.h"
#include "util/test/ktest.h"

static int dummy_handler(kb_req *req, kw_rd *body, kw_wr *resp)
{
	(void)req;
	(void)body;
	(void)resp;
	return KAAS_HANDLED;
}

static const kw_api table[] = {
	{0, 3, 7, 9, "Produce", dummy_handler},
	{8, 0, 7, 8, "OffsetCommit", NULL}, /* no handler: never advertised */
	{18, 0, 3, 3, "ApiVersions", dummy_handler},
	{22, 0, 4, 2, "InitProducerId", dummy_handler},
};

static void put_header(kw_wr *w, int16_t key, int16_t ver, int32_t corr, const char *client, int flex,
		       int ntags)
{
	kw_wr_i16(w, key);
	kw_wr_i16(w, ver);
	kw_wr_i32(w, corr);
	kw_wr_str(w, 0, client); /* client_id is never compact */
	if (flex) {
		kw_wr_uvarint(w, (uint64_t)ntags);
		for (int i = 0; i < ntags; i++) {
			kw_wr_uvarint(w, (uint64_t)i);
			kw_wr_uvarint(w, 3);
			kw_wr_raw(w, "abc", 3);
		}
	}
}

START_TEST(request_header_v1_and_v2)
{
	for (int flex = 0; flex <= 1; flex++) {
		kw_wr w = KAAS_WR_INIT;
		put_header(&w, 18, 3, 0x01020304, "rdkafka", flex, 2);
		kw_wr_i32(&w, 0x7a7a7a7a); /* first body bytes */
		kw_rd rd;
		kw_rd_init(&rd, w.buf, w.len);
		kw_req_header h;
		ck_assert_int_eq(kw_req_header_prefix(&rd, &h), 0);
		ck_assert_int_eq(h.api_key, 18);
		ck_assert_int_eq(h.api_version, 3);
		ck_assert_int_eq(h.correlation_id, 0x01020304);
		ck_assert_int_eq(kw_req_header_rest(&rd, flex, &h), 0);
		ck_assert_int_eq(h.client_id.len, 7);
		ck_assert_int_eq(memcmp(h.client_id.s, "rdkafka", 7), 0);
		int32_t first;
		ck_assert_int_eq(kw_rd_i32(&rd, &first), 0);
		ck_assert_int_eq(first, 0x7a7a7a7a); /* the tags were skipped exactly */
		/* Every truncation inside the header fails cleanly. */
		size_t hlen = w.len - 4;
		for (size_t cut = 0; cut < hlen; cut++) {
			kw_rd_init(&rd, w.buf, cut);
			int r = kw_req_header_prefix(&rd, &h);
			if (!r)
				r = kw_req_header_rest(&rd, flex, &h);
			ck_assert_int_eq(r, -1);
			ck_assert_ptr_nonnull(rd.err);
		}
		kw_wr_free(&w);
	}
}
END_TEST

START_TEST(request_header_null_client_and_bad_lengths)
{
	kw_wr w = KAAS_WR_INIT;
	put_header(&w, 3, 0, 7, NULL, 0, 0);
	kw_rd rd;
	kw_rd_init(&rd, w.buf, w.len);
	kw_req_header h;
	ck_assert_int_eq(kw_req_header_prefix(&rd, &h), 0);
	ck_assert_int_eq(kw_req_header_rest(&rd, 0, &h), 0);
	ck_assert_int_eq(h.client_id.len, -1);
	ck_assert_int_eq(kw_rd_remain(&rd), 0);
	kw_wr_free(&w);

	/* client_id length -2 and a length beyond the frame. */
	uint8_t bad1[] = {0, 3, 0, 1, 0, 0, 0, 9, 0xff, 0xfe};
	kw_rd_init(&rd, bad1, sizeof(bad1));
	ck_assert_int_eq(kw_req_header_prefix(&rd, &h), 0);
	ck_assert_int_eq(kw_req_header_rest(&rd, 0, &h), -1);
	uint8_t bad2[] = {0, 3, 0, 1, 0, 0, 0, 9, 0x10, 0x00, 'a'};
	kw_rd_init(&rd, bad2, sizeof(bad2));
	ck_assert_int_eq(kw_req_header_prefix(&rd, &h), 0);
	ck_assert_int_eq(kw_req_header_rest(&rd, 0, &h), -1);
	/* A tag section that claims more fields than bytes. */
	uint8_t bad3[] = {0, 18, 0, 3, 0, 0, 0, 9, 0x00, 0x00, 0x7f};
	kw_rd_init(&rd, bad3, sizeof(bad3));
	ck_assert_int_eq(kw_req_header_prefix(&rd, &h), 0);
	ck_assert_int_eq(kw_req_header_rest(&rd, 1, &h), -1);
	ck_assert_str_eq(rd.err, "request header tagged fields");
}
END_TEST

START_TEST(flexible_versions_and_lookup)
{
	const kw_api *p = kw_api_find(table, 4, 0);
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(kw_api_flexible(p, 7), 0);
	const kw_api *av = kw_api_find(table, 4, 18);
	ck_assert_int_eq(kw_api_flexible(av, 2), 0);
	ck_assert_int_eq(kw_api_flexible(av, 3), 1);
	const kw_api *ip = kw_api_find(table, 4, 22);
	ck_assert_int_eq(kw_api_flexible(ip, 1), 0);
	ck_assert_int_eq(kw_api_flexible(ip, 2), 1);
	ck_assert_ptr_null(kw_api_find(table, 4, 99));
	kw_api none = {47, 0, 0, -1, "OffsetDelete", NULL};
	ck_assert_int_eq(kw_api_flexible(&none, 0), 0);
}
END_TEST

START_TEST(response_headers)
{
	kw_wr w = KAAS_WR_INIT;
	kw_resp_header_write(&w, 42, 0);
	ck_assert_int_eq(w.len, 4);
	ck_assert_int_eq(kw_get_i32(w.buf), 42);
	kw_resp_header_write(&w, -5, 1);
	ck_assert_int_eq(w.len, 9);
	ck_assert_int_eq(kw_get_i32(w.buf + 4), -5);
	ck_assert_int_eq(w.buf[8], 0); /* empty tag section */
	kw_wr_free(&w);
}
END_TEST

/* Decodes an ApiVersions body of `version` back into (key,min,max) rows. */
static int decode_av(const uint8_t *p, size_t n, int version, int16_t *err, int32_t *cnt, int16_t rows[][3],
		     int32_t *throttle)
{
	kw_rd rd;
	int flex = version >= 3;
	kw_rd_init(&rd, p, n);
	KRD_I16(&rd, err);
	KRD_ARRAY(&rd, flex, 6, cnt);
	for (int32_t i = 0; i < *cnt; i++) {
		KRD_I16(&rd, &rows[i][0]);
		KRD_I16(&rd, &rows[i][1]);
		KRD_I16(&rd, &rows[i][2]);
		KRD_TAGS(&rd, flex);
	}
	*throttle = -1;
	if (version >= 1)
		KRD_I32(&rd, throttle);
	KRD_TAGS(&rd, flex);
	return kw_rd_remain(&rd) == 0 ? 0 : -1;
err_parse:
	return -1;
}

START_TEST(api_versions_all_versions)
{
	for (int v = 0; v <= 3; v++) {
		kw_wr w = KAAS_WR_INIT;
		kw_api_versions_write(&w, (int16_t)v, KERR_NONE, table, 4);
		int16_t err, rows[8][3];
		int32_t cnt, thr;
		ck_assert_int_eq(decode_av(w.buf, w.len, v, &err, &cnt, rows, &thr), 0);
		ck_assert_int_eq(err, 0);
		ck_assert_int_eq(cnt, 3); /* the row without a handler is not advertised */
		ck_assert_int_eq(rows[0][0], 0);
		ck_assert_int_eq(rows[0][1], 3);
		ck_assert_int_eq(rows[0][2], 7);
		ck_assert_int_eq(rows[1][0], 18);
		ck_assert_int_eq(rows[1][2], 3);
		ck_assert_int_eq(rows[2][0], 22);
		ck_assert_int_eq(rows[2][2], 4);
		if (v >= 1)
			ck_assert_int_eq(thr, 0);
		/* A v3 body is not readable as v0 and vice versa (the encodings differ). */
		if (v == 3)
			ck_assert_int_ne(decode_av(w.buf, w.len, 0, &err, &cnt, rows, &thr), 0);
		kw_wr_free(&w);
	}
}
END_TEST

START_TEST(api_versions_unsupported_is_v0)
{
	kw_wr w = KAAS_WR_INIT;
	kw_api_versions_write(&w, 9, KERR_UNSUPPORTED_VERSION, table, 4);
	int16_t err, rows[8][3];
	int32_t cnt, thr;
	ck_assert_int_eq(decode_av(w.buf, w.len, 0, &err, &cnt, rows, &thr), 0);
	ck_assert_int_eq(err, KERR_UNSUPPORTED_VERSION);
	ck_assert_int_eq(cnt, 3);
	kw_wr_free(&w);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "header" },
			  KTEST_LIST(request_header_v1_and_v2,
				     request_header_null_client_and_bad_lengths,
				     flexible_versions_and_lookup,
				     response_headers,
				     api_versions_all_versions,
				     api_versions_unsupported_is_v0));
}
