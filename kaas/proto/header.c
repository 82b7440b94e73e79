/*
 * header.c — request/response headers and the ApiVersions body.
 */
#include "kaas/proto/header.h"

#include "kaas/proto/kerr.h"

int kaas_req_header_prefix(kaas_rd *rd, kaas_req_header *h)
{
	if (kaas_rd_i16(rd, &h->api_key) || kaas_rd_i16(rd, &h->api_version) ||
	    kaas_rd_i32(rd, &h->correlation_id)) {
		rd->err = "request header";
		return -1;
	}
	h->client_id.s = NULL;
	h->client_id.len = -1;
	return 0;
}

int kaas_req_header_rest(kaas_rd *rd, int flex, kaas_req_header *h)
{
	/* client_id keeps the int16 length even in header v2. */
	if (kaas_rd_str(rd, 0, &h->client_id)) {
		rd->err = "request header client_id";
		return -1;
	}
	if (kaas_rd_tags(rd, flex)) {
		rd->err = "request header tagged fields";
		return -1;
	}
	return 0;
}

const kaas_api *kaas_api_find(const kaas_api *table, size_t n, int16_t key)
{
	for (size_t i = 0; i < n; i++)
		if (table[i].key == key)
			return &table[i];
	return NULL;
}

void kaas_resp_header_write(kaas_wr *w, int32_t correlation_id, int flex)
{
	kaas_wr_i32(w, correlation_id);
	kaas_wr_tags(w, flex);
}

void kaas_api_versions_write(kaas_wr *w, int16_t version, int16_t error, const kaas_api *table,
			     size_t n)
{
	if (version < 0 || version > 3)
		version = 0;
	int flex = version >= 3;
	int32_t cnt = 0;
	for (size_t i = 0; i < n; i++)
		if (table[i].handler)
			cnt++;
	kaas_wr_i16(w, error);
	kaas_wr_array(w, flex, cnt);
	for (size_t i = 0; i < n; i++) {
		if (!table[i].handler)
			continue;
		kaas_wr_i16(w, table[i].key);
		kaas_wr_i16(w, table[i].min);
		kaas_wr_i16(w, table[i].max);
		kaas_wr_tags(w, flex);
	}
	if (version >= 1)
		kaas_wr_i32(w, 0); /* throttle_time_ms */
	kaas_wr_tags(w, flex);
}
