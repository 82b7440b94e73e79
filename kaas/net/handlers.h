/*
 * handlers.h — the request handlers of the data path (this directory):
 * ApiVersions, Metadata, Produce, Fetch, ListOffsets, OffsetForLeaderEpoch.
 * Each follows the contract of proto/api.h.  Also a decoding step two of
 * them share and the leader-epoch check of KIP-320.
 */
#ifndef KAAS_SERVER_HANDLERS_H
#define KAAS_SERVER_HANDLERS_H

#include <stdlib.h>

#include "kaas/proto/api.h"
#include "kaas/proto/kerr.h"

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

/* KIP-320: the leader epoch a client believes in against the one this
 * broker leads at; -1 (the client does not know) skips the check. */
static inline int16_t kn_epoch_check(int32_t client_epoch, int32_t leader_epoch)
{
	if (client_epoch < 0 || client_epoch == leader_epoch)
		return KERR_NONE;
	return client_epoch < leader_epoch ? KERR_FENCED_LEADER_EPOCH : KERR_UNKNOWN_LEADER_EPOCH;
}

/* ---- brokers.c: the brokers a client of req's listener is told about ---- */
typedef struct kn_bview {
	int32_t id;
	const char *host; /* points into the leader map or the request */
	int32_t port;
	const char *rack; /* NULL when none */
} kn_bview;
struct kb_leaders;
/* This broker and every live one with an endpoint of req's listener
 * (*out calloc'd, valid while m is held).  0 or -ENOMEM. */
int kn__brokers_visible(const kb_req *req, const struct kb_leaders *m, kn_bview **out, size_t *n);
/* 0 when broker id is left out for req's listener (LISTENER_NOT_FOUND). */
int kn__broker_reachable(const kb_req *req, const struct kb_leaders *m, int32_t id);

int kn_h_api_versions(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_metadata(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_produce(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_fetch(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_list_offsets(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_offset_for_leader_epoch(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_describe_log_dirs(kb_req *req, kw_rd *body, kw_wr *resp); /* h_admin.c */
int kn_h_describe_cluster(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_create_acls(kb_req *req, kw_rd *body, kw_wr *resp);      /* h_acls.c */
int kn_h_describe_acls(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_delete_acls(kb_req *req, kw_rd *body, kw_wr *resp);
int kn_h_sasl_handshake(kb_req *req, kw_rd *body, kw_wr *resp);    /* h_sasl.c */
int kn_h_sasl_authenticate(kb_req *req, kw_rd *body, kw_wr *resp);

#endif
