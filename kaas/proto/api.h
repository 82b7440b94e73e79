/*
 * api.h — the request dispatch table and the handler contract.
 *
 * One row per Kafka API: {key, min, max, flexible_from, name, handler}.  The
 * same table answers ApiVersions, so what kaas advertises is exactly what it
 * dispatches (never raise a minimum: librdkafka enables features by exact
 * versions, see docs/compat.md).
 *
 * Handler contract:
 *   - called on a worker thread (it may block on the volume), one request at
 *     a time per connection, in the order the requests arrived;
 *   - `body` is positioned after the request header; the handler decodes it
 *     with the KRD_* macros and writes only the response *body* into `resp`
 *     (the server writes size, correlation id and the response header);
 *   - returns KAAS_HANDLED when resp is complete, or KAAS_DEFERRED after
 *     arranging for kb_req_complete() to be called later (from any thread)
 *     with the response body; the request stays valid until then;
 *   - returns KAAS_NO_RESPONSE when the request gets no response at all
 *     (Produce with acks=0);
 *   - returns -ECONNABORTED to close the connection without an answer, a
 *     normal outcome logged quietly (Produce with acks=0 that failed: as in
 *     Kafka, the closed connection is how the client learns to refresh its
 *     metadata);
 *   - returns -EBADMSG when the request cannot be parsed: the server logs the
 *     field and closes the connection, as Kafka does; other negative values
 *     are internal errors and also close the connection.
 */
#ifndef KAAS_PROTO_API_H
#define KAAS_PROTO_API_H

#include <stdint.h>

#include "kaas/proto/buf.h"

enum kw_api_key {
	KAAS_API_PRODUCE = 0,
	KAAS_API_FETCH = 1,
	KAAS_API_LIST_OFFSETS = 2,
	KAAS_API_METADATA = 3,
	KAAS_API_OFFSET_COMMIT = 8,
	KAAS_API_OFFSET_FETCH = 9,
	KAAS_API_FIND_COORDINATOR = 10,
	KAAS_API_JOIN_GROUP = 11,
	KAAS_API_HEARTBEAT = 12,
	KAAS_API_LEAVE_GROUP = 13,
	KAAS_API_SYNC_GROUP = 14,
	KAAS_API_DESCRIBE_GROUPS = 15,
	KAAS_API_LIST_GROUPS = 16,
	KAAS_API_SASL_HANDSHAKE = 17,
	KAAS_API_API_VERSIONS = 18,
	KAAS_API_CREATE_TOPICS = 19,
	KAAS_API_DELETE_TOPICS = 20,
	KAAS_API_DELETE_RECORDS = 21,
	KAAS_API_INIT_PRODUCER_ID = 22,
	KAAS_API_OFFSET_FOR_LEADER_EPOCH = 23,
	KAAS_API_ADD_PARTITIONS_TO_TXN = 24,
	KAAS_API_ADD_OFFSETS_TO_TXN = 25,
	KAAS_API_END_TXN = 26,
	KAAS_API_TXN_OFFSET_COMMIT = 28,
	KAAS_API_DESCRIBE_ACLS = 29,
	KAAS_API_CREATE_ACLS = 30,
	KAAS_API_DELETE_ACLS = 31,
	KAAS_API_DESCRIBE_CONFIGS = 32,
	KAAS_API_ALTER_CONFIGS = 33,
	KAAS_API_DESCRIBE_LOG_DIRS = 35,
	KAAS_API_SASL_AUTHENTICATE = 36,
	KAAS_API_CREATE_PARTITIONS = 37,
	KAAS_API_DELETE_GROUPS = 42,
	KAAS_API_INCREMENTAL_ALTER_CONFIGS = 44,
	KAAS_API_OFFSET_DELETE = 47,
	KAAS_API_DESCRIBE_CLUSTER = 60,
};

enum { KAAS_HANDLED = 0, KAAS_DEFERRED = 1, KAAS_NO_RESPONSE = 2 };

/* The request as a handler sees it.  Defined by the server (kaas/net/). */
typedef struct kb_req kb_req;

typedef int (*kw_handler_fn)(kb_req *req, kw_rd *body, kw_wr *resp);

typedef struct kw_api {
	int16_t key;
	int16_t min;
	int16_t max;
	int16_t flexible_from; /* first flexible version; -1 when none */
	const char *name;
	kw_handler_fn handler;
} kw_api;

/* Completes a KAAS_DEFERRED request with its response body (taken over:
 * resp is reset).  Safe from any thread. */
void kb_req_complete(kb_req *req, kw_wr *resp);

#endif
