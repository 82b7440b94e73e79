/*
 * h_list_offsets.c — ListOffsets v0-v5: the earliest offset (-2), the latest
 * (-1: the high watermark, the durable end) or the first offset whose batch
 * carries a timestamp at or after the one given.
 *
 * Version differences: v0 asks for up to max_num_offsets offsets and gets an
 * array back (kaas returns the one offset asked for, as Kafka does for -1 and
 * -2); v1 returns (timestamp, offset); v2 adds isolation_level to the request
 * and throttle_time_ms to the response; v3 is v2.  v4 (KIP-320) adds the
 * client's current_leader_epoch, checked as Fetch checks it (older:
 * FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH, -1: no check), and
 * answers the leader epoch of the offset returned (that of the segment
 * holding it; for the latest offset the current epoch), which Java-style
 * consumers keep with their position for a later OffsetForLeaderEpoch
 * check.  v5 is v4 (its new error, OFFSET_NOT_AVAILABLE, belongs to
 * replication, which kaas does not have).
 */
#include <errno.h>
#include <stdlib.h>

#include "kaas/core/acl.h"
#include "kaas/core/broker.h"
#include "kaas/net/handlers.h"
#include "kaas/core/ptable.h"
#include "kaas/proto/kerr.h"
#include "kaas/storage/epochs.h"

int kn_h_list_offsets(kb_req *req, kw_rd *body, kw_wr *resp)
{
	kb_broker *b = req->broker;
	int16_t v = req->api_version;
	int32_t replica_id, nt;
	int8_t isolation = 0;
	kw_rd again;
	/* request partition: index, [current_leader_epoch v4+], timestamp, [max_num v0] */
	size_t part_len = v == 0 ? 16 : v >= 4 ? 16 : 12;

	KRD_I32(body, &replica_id);
	if (v >= 2)
		KRD_I8(body, &isolation);
	/* Decode everything once before answering anything. */
	again = *body;
	KRD_ARRAY(body, 0, 6, &nt);
	for (int32_t i = 0; i < nt; i++) {
		kw_str name;
		int32_t np;
		KRD_STR(body, 0, &name);
		KRD_ARRAY(body, 0, part_len, &np);
		KRD_SKIP(body, (size_t)(np > 0 ? np : 0) * part_len);
	}
	(void)replica_id;
	(void)isolation;

	if (v >= 2)
		kw_wr_i32(resp, 0); /* throttle_time_ms */
	KRD_ARRAY(&again, 0, 6, &nt);
	kw_wr_array(resp, 0, nt < 0 ? 0 : nt);
	for (int32_t i = 0; i < nt; i++) {
		kw_str name;
		int32_t np;
		KRD_STR(&again, 0, &name);
		KRD_ARRAY(&again, 0, part_len, &np);
		kw_wr_kstr(resp, 0, name);
		kw_wr_array(resp, 0, np < 0 ? 0 : np);
		int described = kb_authorize(req, KB_OP_DESCRIBE, KB_RES_TOPIC, name.s, name.len);
		for (int32_t k = 0; k < np; k++) {
			int32_t part, max_num = 1, current = -1, epoch = -1;
			int64_t ts;
			KRD_I32(&again, &part);
			if (v >= 4)
				KRD_I32(&again, &current);
			KRD_I64(&again, &ts);
			if (v == 0)
				KRD_I32(&again, &max_num);
			int64_t off = -1, found_ts = -1;
			kb_pref ref = KAAS_PREF_INIT;
			int16_t err = described ? kb_ptable_get(b->parts, name, part, &ref)
						: KERR_TOPIC_AUTHORIZATION_FAILED;
			if (err == KERR_NONE) /* ref is empty otherwise: the put below is a no-op */
				err = kn_epoch_check(current, ref.epoch);
			if (err == KERR_NONE) {
				if (ts == KAAS_TS_EARLIEST) {
					off = ks_partition_log_start(ref.p);
				} else if (ts == KAAS_TS_LATEST) {
					off = ks_partition_high_watermark(ref.p);
				} else if (ts < 0) {
					err = KERR_INVALID_REQUEST;
				} else {
					int rc = ks_partition_offset_for_time(ref.p, ts, &off, &found_ts);
					if (rc < 0)
						err = KERR_KAFKA_STORAGE_ERROR;
				}
				if (err == KERR_NONE && off < 0 && (ts == KAAS_TS_EARLIEST || ts == KAAS_TS_LATEST))
					err = KERR_KAFKA_STORAGE_ERROR;
				if (err == KERR_NONE && v >= 4 && off >= 0) {
					int rc = ks_partition_epoch_at(ref.p, off, &epoch);
					if (rc)
						err = rc == -EPERM || rc == -ESTALE ? KERR_NOT_LEADER_OR_FOLLOWER
										    : KERR_KAFKA_STORAGE_ERROR;
				}
				/* The lease after the offsets were read (the high
				 * watermark may have moved after it lapsed). */
				if (err == KERR_NONE && !kb_ptable_ack_ok(b->parts)) {
					err = KERR_NOT_LEADER_OR_FOLLOWER;
					off = found_ts = -1;
					epoch = -1;
				}
			}
			kb_pref_put(&ref);
			kw_wr_i32(resp, part);
			kw_wr_i16(resp, err);
			if (v == 0) {
				if (err == KERR_NONE && off >= 0 && max_num > 0) {
					kw_wr_array(resp, 0, 1);
					kw_wr_i64(resp, off);
				} else {
					kw_wr_array(resp, 0, 0);
				}
			} else {
				kw_wr_i64(resp, err == KERR_NONE ? found_ts : -1);
				kw_wr_i64(resp, err == KERR_NONE ? off : -1);
				if (v >= 4)
					kw_wr_i32(resp, err == KERR_NONE ? epoch : -1);
			}
		}
	}
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}
