/*
 * handlers.h — the request handlers of the data path (this directory):
 * ApiVersions, Metadata, Produce, Fetch, ListOffsets.  Each follows the
 * contract of proto/api.h.
 */
#ifndef KAAS_SERVER_HANDLERS_H
#define KAAS_SERVER_HANDLERS_H

#include "proto/api.h"

int kaas_h_api_versions(kaas_req *req, kaas_rd *body, kaas_wr *resp);
int kaas_h_metadata(kaas_req *req, kaas_rd *body, kaas_wr *resp);
int kaas_h_produce(kaas_req *req, kaas_rd *body, kaas_wr *resp);
int kaas_h_fetch(kaas_req *req, kaas_rd *body, kaas_wr *resp);
int kaas_h_list_offsets(kaas_req *req, kaas_rd *body, kaas_wr *resp);

#endif
