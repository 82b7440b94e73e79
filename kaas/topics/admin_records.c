/*
 * admin_records.c — DeleteRecords (v0-1): advance partitions' log start
 * offsets.  Each partition goes to the broker side through ctx->delete_records
 * (the partition table, then ks_partition_delete_records), which answers
 * NOT_LEADER_OR_FOLLOWER for partitions another broker leads.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/topics/admin_int.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

typedef struct dr_part {
	int32_t index;
	int64_t offset;
} dr_part;

typedef struct dr_topic {
	kw_str name;
	int32_t n;
	dr_part *p;
} dr_topic;

int kt_admin_delete_records(const kt_admin_ctx *c, int16_t version, kw_rd *rd, kw_wr *w)
{
	dr_topic *t = NULL;
	int32_t n = 0, timeout_ms;
	int rc = -EBADMSG;
	ADMIN_ARRAY(rd, 6, n, t);
	for (int32_t i = 0; i < n; i++) {
		KRD_STR(rd, 0, &t[i].name);
		ADMIN_ARRAY(rd, 12, t[i].n, t[i].p);
		for (int32_t k = 0; k < t[i].n; k++) {
			KRD_I32(rd, &t[i].p[k].index);
			KRD_I64(rd, &t[i].p[k].offset);
		}
	}
	KRD_I32(rd, &timeout_ms);
	(void)timeout_ms; /* the log start offset is persisted before we answer */

	kw_wr_i32(w, 0); /* throttle_time_ms */
	kw_wr_i32(w, n);
	for (int32_t i = 0; i < n; i++) {
		kw_wr_kstr(w, 0, t[i].name);
		kw_wr_i32(w, t[i].n);
		int allowed = kt__authorized(c, KB_OP_DELETE, KB_RES_TOPIC, t[i].name);
		for (int32_t k = 0; k < t[i].n; k++) {
			int64_t low = -1;
			int16_t err;
			if (!allowed)
				err = KERR_TOPIC_AUTHORIZATION_FAILED;
			else if (t[i].p[k].offset < -1)
				err = KERR_OFFSET_OUT_OF_RANGE; /* only -1 (high watermark) is special */
			else if (!c->delete_records)
				err = KERR_NOT_LEADER_OR_FOLLOWER;
			else
				err = c->delete_records(c->arg, t[i].name, t[i].p[k].index, t[i].p[k].offset, &low);
			if (err != KERR_NONE)
				low = -1;
			kw_wr_i32(w, t[i].p[k].index);
			kw_wr_i64(w, low);
			kw_wr_i16(w, err);
		}
	}
	rc = KAAS_HANDLED;
	goto out;
err_parse:
	KLOG_DEBUG("admin", "DeleteRecords v%d: malformed request (%s)", version, rd->err);
	rc = -EBADMSG;
out:
	for (int32_t i = 0; i < n; i++)
		free(t[i].p);
	free(t);
	return rc;
}
