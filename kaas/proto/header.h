/*
 * header.h — Kafka request and response headers, and the ApiVersions body
 * that is generated from the dispatch table.
 *
 * Request header v1: api_key, api_version, correlation_id, client_id
 * (nullable int16 string — never compact, not even in v2); v2 adds a tagged
 * field section (KIP-482).  v0 (no client_id) is only used by
 * ControlledShutdown v0, which kaas does not serve.  A request uses header v2
 * exactly when its API version is flexible.
 *
 * Response header v0: correlation_id; v1 adds tagged fields.  ApiVersions
 * always answers with v0, whatever its version, so that a client can read the
 * error of a version it guessed too high.
 */
#ifndef KAAS_PROTO_HEADER_H
#define KAAS_PROTO_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/proto/api.h"
#include "kaas/proto/buf.h"

typedef struct kw_req_header {
	int16_t api_key;
	int16_t api_version;
	int32_t correlation_id;
	kw_str client_id;
} kw_req_header;

/* The fixed 8-byte prefix (key, version, correlation id); the rest of the
 * header depends on whether the version is flexible.  0 or -1 (rd->err). */
int kw_req_header_prefix(kw_rd *rd, kw_req_header *h);

/* The rest of the header after the prefix: client_id, then tagged fields when
 * `flex`.  rd is left at the body.  0 or -1 (rd->err). */
int kw_req_header_rest(kw_rd *rd, int flex, kw_req_header *h);

/* Looks an API up in a table sorted or not (linear, tables are small). */
const kw_api *kw_api_find(const kw_api *table, size_t n, int16_t key);

/* Whether `version` of `api` uses flexible encodings (header v2 / v1). */
static inline int kw_api_flexible(const kw_api *api, int16_t version)
{
	return api->flexible_from >= 0 && version >= api->flexible_from;
}

/* Response header: correlation id, plus an empty tag section when flex. */
void kw_resp_header_write(kw_wr *w, int32_t correlation_id, int flex);

/* The ApiVersions response body for `version` (0..3) listing every row of
 * the table that has a handler, in table order.  Versions 0..2 are plain,
 * v3 is flexible; throttle_time_ms from v1.  An unsupported version is
 * answered with a v0 body (error UNSUPPORTED_VERSION plus the list), which
 * is what clients expect when they guessed too high. */
void kw_api_versions_write(kw_wr *w, int16_t version, int16_t error, const kw_api *table,
			     size_t n);

#endif
