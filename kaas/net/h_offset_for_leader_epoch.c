/*
 * h_offset_for_leader_epoch.c — OffsetForLeaderEpoch v0-v4 (KIP-101,
 * KIP-320): where a leader epoch ends in this partition's log.
 *
 * A consumer whose partition changed leader (here: another broker took it
 * over, or this one restarted, each at a higher epoch) asks for the end of
 * the epoch of the last record it read; an end below its position means
 * the log it read from was truncated (a zombie's records it was served
 * were never the log), and it goes back to that end.  librdkafka sends v2,
 * Java-style consumers v3 and up (they skip validation below v3).
 *
 * Per partition: CurrentLeaderEpoch (v2+) is checked as Fetch checks it
 * (older: FENCED_LEADER_EPOCH, newer: UNKNOWN_LEADER_EPOCH, -1: no
 * check); then the storage engine answers from the segment names
 * (kaas/storage/epochs.h), with (-1, -1) for an epoch it cannot place.
 *
 * Versions: v1 adds leader_epoch to the answer; v2 current_leader_epoch to
 * the request and throttle_time_ms to the answer; v3 replica_id (-1 or -2
 * from consumers; kaas has no followers and ignores it); v4 is flexible.
 */
#include <errno.h>

#include "kaas/core/acl.h"
#include "kaas/core/broker.h"
#include "kaas/core/ptable.h"
#include "kaas/net/handlers.h"
#include "kaas/proto/kerr.h"
#include "kaas/storage/epochs.h"

/* The end of `leader_epoch` in one partition, or the error answering it. */
static int16_t answer(kb_broker *b, kw_str topic, int32_t partition, int32_t current,
		      int32_t leader_epoch, int32_t *epoch, int64_t *end)
{
	kb_pref ref = KAAS_PREF_INIT;
	*epoch = KS_UNDEFINED_EPOCH;
	*end = KS_UNDEFINED_EPOCH_OFFSET;
	int16_t err = kb_ptable_get(b->parts, topic, partition, &ref);
	if (err != KERR_NONE)
		return err;
	err = kn_epoch_check(current, ref.epoch);
	if (err == KERR_NONE) {
		int rc = ks_partition_epoch_end(ref.p, leader_epoch, epoch, end, NULL);
		if (rc) {
			err = rc == -EPERM || rc == -ESTALE ? KERR_NOT_LEADER_OR_FOLLOWER
							    : KERR_KAFKA_STORAGE_ERROR;
			*epoch = KS_UNDEFINED_EPOCH;
			*end = KS_UNDEFINED_EPOCH_OFFSET;
		}
	}
	/* The lease after the end was read, as for Fetch. */
	if (err == KERR_NONE && !kb_ptable_ack_ok(b->parts)) {
		err = KERR_NOT_LEADER_OR_FOLLOWER;
		*epoch = KS_UNDEFINED_EPOCH;
		*end = KS_UNDEFINED_EPOCH_OFFSET;
	}
	kb_pref_put(&ref);
	return err;
}

/* One walk over the request body; writes the answer as it goes when w is
 * not NULL (the first walk only checks that the whole request parses, so
 * that a malformed one is refused before any partition is looked at). */
static int walk(kb_req *req, kw_rd *rd, kw_wr *w)
{
	int16_t v = req->api_version;
	int flex = req->flex;
	int32_t replica_id = -2, nt;

	if (v >= 3)
		KRD_I32(rd, &replica_id);
	(void)replica_id;
	KRD_ARRAY(rd, flex, flex ? 3 : 6, &nt);
	if (w) {
		if (v >= 2)
			kw_wr_i32(w, 0); /* throttle_time_ms */
		kw_wr_array(w, flex, nt < 0 ? 0 : nt);
	}
	for (int32_t i = 0; i < nt; i++) {
		kw_str name;
		int32_t np;
		KRD_STR(rd, flex, &name);
		KRD_ARRAY(rd, flex, flex ? 13 : v >= 2 ? 12 : 8, &np);
		int described = 1;
		if (w) {
			kw_wr_kstr(w, flex, name);
			kw_wr_array(w, flex, np < 0 ? 0 : np);
			described = kb_authorize(req, KB_OP_DESCRIBE, KB_RES_TOPIC, name.s, name.len);
		}
		for (int32_t k = 0; k < np; k++) {
			int32_t part, current = -1, leader_epoch;
			KRD_I32(rd, &part);
			if (v >= 2)
				KRD_I32(rd, &current);
			KRD_I32(rd, &leader_epoch);
			KRD_TAGS(rd, flex);
			if (!w)
				continue;
			int32_t epoch;
			int64_t end;
			int16_t err = KERR_TOPIC_AUTHORIZATION_FAILED;
			epoch = KS_UNDEFINED_EPOCH;
			end = KS_UNDEFINED_EPOCH_OFFSET;
			if (described)
				err = answer(req->broker, name, part, current, leader_epoch, &epoch, &end);
			kw_wr_i16(w, err);
			kw_wr_i32(w, part);
			if (v >= 1)
				kw_wr_i32(w, epoch);
			kw_wr_i64(w, end);
			kw_wr_tags(w, flex);
		}
		KRD_TAGS(rd, flex);
		if (w)
			kw_wr_tags(w, flex);
	}
	KRD_TAGS(rd, flex);
	if (w)
		kw_wr_tags(w, flex);
	return 0;
err_parse:
	return -1;
}

int kn_h_offset_for_leader_epoch(kb_req *req, kw_rd *body, kw_wr *resp)
{
	kw_rd again = *body;
	if (walk(req, body, NULL) || walk(req, &again, resp))
		return -EBADMSG;
	return KAAS_HANDLED;
}
