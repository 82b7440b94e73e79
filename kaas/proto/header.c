/*
 * header.c — request/response headers and the ApiVersions body.
 */
#include "kaas/proto/header.h"

#include "kaas/proto/kerr.h"

int kw_req_header_prefix(kw_rd *rd, kw_req_header *h)
{
	if (kw_rd_i16(rd, &h->api_key) || kw_rd_i16(rd, &h->api_version) ||
	    kw_rd_i32(rd, &h->correlation_id)) {
		rd->err = "request header";
		return -1;
	}
	h->client_id.s = NULL;
	h->client_id.len = -1;
	return 0;
}

int kw_req_header_rest(kw_rd *rd, int flex, kw_req_header *h)
{
	/* client_id keeps the int16 length even in header v2. */
	if (kw_rd_str(rd, 0, &h->client_id)) {
		rd->err = "request header client_id";
		return -1;
	}
	if (kw_rd_tags(rd, flex)) {
		rd->err = "request header tagged fields";
		return -1;
	}
	return 0;
}

const kw_api *kw_api_find(const kw_api *table, size_t n, int16_t key)
{
	for (size_t i = 0; i < n; i++)
		if (table[i].key == key)
			return &table[i];
	return NULL;
}

void kw_resp_header_write(kw_wr *w, int32_t correlation_id, int flex)
{
	kw_wr_i32(w, correlation_id);
	kw_wr_tags(w, flex);
}

void kw_api_versions_write(kw_wr *w, int16_t version, int16_t error, const kw_api *table,
			     size_t n)
{
	if (version < 0 || version > 3)
		version = 0;
	int flex = version >= 3;
	int32_t cnt = 0;
	for (size_t i = 0; i < n; i++)
		if (table[i].handler)
			cnt++;
	kw_wr_i16(w, error);
	kw_wr_array(w, flex, cnt);
	for (size_t i = 0; i < n; i++) {
		if (!table[i].handler)
			continue;
		kw_wr_i16(w, table[i].key);
		kw_wr_i16(w, table[i].min);
		kw_wr_i16(w, table[i].max);
		kw_wr_tags(w, flex);
	}
	if (version >= 1)
		kw_wr_i32(w, 0); /* throttle_time_ms */
	kw_wr_tags(w, flex);
}
