/*
 * handlers.h — the request handlers of the data path (this directory):
 * ApiVersions, Metadata, Produce, Fetch, ListOffsets.  Each follows the
 * contract of proto/api.h.  Also a decoding step two of them share.
 */
#ifndef KAAS_SERVER_HANDLERS_H
#define KAAS_SERVER_HANDLERS_H

#include <stdlib.h>

#include "kaas/proto/api.h"

/* Reads an array's count (elements of at least min_elem bytes; not flexible)
 * and allocates that many zeroed elements into arr, their count into n; an
 * empty or null array leaves both alone.  Jumps to err_parse or to oom. */
#define KRD_ARRAY_CALLOC(rd, min_elem, arr, n)                      \
	do {                                                        \
		int32_t n_;                                         \
		KRD_ARRAY((rd), 0, (min_elem), &n_);                \
		if (n_ > 0) {                                       \
			(arr) = calloc((size_t)n_, sizeof(*(arr))); \
			if (!(arr))                                 \
				goto oom;                           \
			(n) = n_;                                   \
		}                                                   \
	} while (0)

int kn_h_api_versions(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_metadata(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_produce(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_fetch(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_list_offsets(kb_req *req, kw_rd *body, kw_wr *resp);

#endif
