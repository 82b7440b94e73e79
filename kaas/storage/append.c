/*
 * append.c — the write path: validate, check producer sequences, assign
 * offsets, one pwrite per request, sparse index entries; segment roll.
 * What was written becomes durable in the group commit (commit.c).
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/grow.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

#define STACK_BATCHES 16

int ks__p_roll(ks_partition *p, int64_t now_ms)
{
	(void)now_ms;
	kseg *old = p->nsegs ? p->segs[p->nsegs - 1] : NULL;
	int rc = ks__p_fence_check(p);
	if (rc)
		return rc;
	/* The producer state as of the new segment's base, written by the
	 * flush that makes the old segment durable. */
	uint8_t *snap;
	size_t slen;
	if ((rc = ks__kp_encode(&p->prod, p->epoch, p->leo, &snap, &slen)))
		return rc;
	kseg *s = ks__seg_new(p->epoch, p->leo);
	if (!s) {
		free(snap);
		return -ENOMEM;
	}
	for (int k = SEG_LOG; k <= SEG_TIMEINDEX && rc == 0; k++) {
		char path[SUB_PATH_MAX];
		sub_file **f = k == SEG_LOG ? &s->log : k == SEG_INDEX ? &s->idx : &s->tidx;
		if ((rc = ks__seg_path(path, sizeof(path), p->dir, s->epoch, s->base, k)) == 0)
			rc = sub_open(p->vfs, path, O_RDWR | O_CREAT | O_EXCL, 0644, f);
	}
	if (rc == 0)
		rc = KAAS_GROW(p->segs, p->nsegs, p->capsegs, 16);
	if (rc) {
		ks__seg_unref(s);
		free(snap);
		return rc;
	}
	s->active = 1;
	s->meta = 1;
	p->segs[p->nsegs++] = s;
	if (old)
		old->active = 0; /* flushed later: its synced_pos is behind */
	p->dir_dirty = 1;
	p->ring_n = p->ring_head = 0;
	free(p->snap_buf);
	p->snap_buf = snap;
	p->snap_len = slen;
	p->snap_off = p->leo;
	return 0;
}

static void ring_push(ks_partition *p, int64_t base, int64_t last, uint64_t pos, uint32_t size)
{
	uint32_t slot = (p->ring_head + p->ring_n) % RING;
	if (p->ring_n == RING) {
		p->ring_head = (p->ring_head + 1) % RING;
		slot = (p->ring_head + RING - 1) % RING;
	} else {
		p->ring_n++;
	}
	p->ring[slot] = (kring){base, last, pos, size};
}

/* Producer entries touched by one request, checked and updated before the
 * table itself is. */
typedef struct overlay {
	kp_entry e;
	int known;  /* e holds a copy of a table entry */
} overlay;

static overlay *ov_get(ks_partition *p, overlay *ov, int *nov, int64_t pid)
{
	for (int i = 0; i < *nov; i++)
		if (ov[i].e.pid == pid)
			return &ov[i];
	overlay *o = &ov[(*nov)++];
	kp_entry *e = ks__kp_find(&p->prod, pid);
	memset(o, 0, sizeof(*o));
	if (e) {
		o->e = *e;
		o->known = 1;
	} else {
		o->e.pid = pid;
		o->e.epoch = -1;
		o->e.last_ts = INT64_MIN;
	}
	return o;
}

int ks_partition_append(ks_partition *p, uint8_t *records, size_t len, ks_append_result *res)
{
	memset(res, 0, sizeof(*res));
	res->base_offset = res->last_offset = -1;
	res->log_append_time = -1;
	res->log_start_offset = -1;
	res->batch_index = -1;
	if (len > INT32_MAX) {
		/* Batch positions in a request and in a segment are 32-bit. */
		res->error = KERR_MESSAGE_TOO_LARGE;
		res->batch_index = 0;
		res->message = "records larger than 2 GiB in one request";
		return 0;
	}
	kb_info stack_info[STACK_BATCHES], *info = stack_info;
	overlay stack_ov[STACK_BATCHES], *ov = stack_ov;
	int nb = ks__kb_count(records, len), n, bad, rc = 0;
	if (nb > STACK_BATCHES) {
		info = calloc((size_t)nb, sizeof(*info));
		ov = calloc((size_t)nb, sizeof(*ov));
		if (!info || !ov) {
			free(info == stack_info ? NULL : info);
			free(ov == stack_ov ? NULL : ov);
			res->error = KERR_UNKNOWN_SERVER_ERROR;
			return -ENOMEM;
		}
	}
	pthread_mutex_lock(&p->mu);
	ks_log_config cfg = p->cfg;
	pthread_mutex_unlock(&p->mu);

	int64_t now = ku_wall_ms();
	kb_limits lim = {
		.max_batch_bytes = cfg.max_message_bytes,
		.ts_diff_max_ms = cfg.timestamp_difference_max_ms,
		.now_ms = now,
		.create_time = cfg.timestamp_type == 0,
		.validate_compressed = cfg.validate_compressed,
		.max_decompressed = (uint64_t)cfg.max_message_bytes * 64 > (256u << 20)
					    ? (uint64_t)cfg.max_message_bytes * 64
					    : (256u << 20),
	};
	int err = ks__kb_validate(records, len, &lim, info, nb > 0 ? nb : 1, &n, &bad, &res->message);
	if (err) {
		res->error = (int16_t)err;
		res->batch_index = bad;
		goto out;
	}

	pthread_mutex_lock(&p->mu);
	res->log_start_offset = p->log_start;
	if ((rc = ks__p_unfit(p))) {
		res->error = ks__p_kerr(rc);
		if (rc == -EIO)
			res->message = "partition poisoned by an earlier I/O failure";
		else
			rc = 0; /* not the leader: the client's to retry elsewhere */
		goto unlock;
	}

	/* Producer checks, against the state as this request would leave it. */
	int nov = 0;
	int64_t next = p->leo;
	for (int i = 0; i < n; i++) {
		kb_info *b = &info[i];
		if (b->pid >= 0) {
			overlay *o = ov_get(p, ov, &nov, b->pid);
			int dup;
			kp_batch orig;
			err = ks__kp_check(o->known || o->e.epoch != -1 ? &o->e : NULL, b->pepoch, b->base_seq,
				       b->last_seq, &dup, &orig, &res->message);
			if (err) {
				res->error = (int16_t)err;
				res->batch_index = i;
				goto unlock;
			}
			if (dup) {
				/* Kafka answers the whole request with the original. */
				res->duplicate = 1;
				res->base_offset = orig.first_off;
				res->last_offset = orig.last_off;
				goto unlock;
			}
			kp_batch kb = {b->base_seq, b->last_seq, next, next + b->count - 1, b->max_ts};
			ks__kp_entry_apply(&o->e, b->pepoch, &kb);
		}
		next += b->count;
	}

	/* Roll before writing when this request would overflow the segment. */
	kseg *s = p->segs[p->nsegs - 1];
	int64_t count = next - p->leo;
	if (s->end_pos > 0 &&
	    ((int64_t)(s->end_pos + len) > cfg.segment_bytes ||
	     (cfg.segment_ms >= 0 && s->first_append_ms && now - s->first_append_ms >= cfg.segment_ms) ||
	     p->leo + count - s->base > INT32_MAX)) {
		if ((rc = ks__p_roll(p, now))) {
			res->error = ks__p_fail(p, "segment roll", rc);
			if (rc == -ESTALE)
				rc = 0; /* fenced: not the leader any more */
			goto unlock;
		}
		s = p->segs[p->nsegs - 1];
	}

	/* Assign offsets in place; baseOffset and partitionLeaderEpoch are
	 * outside the CRC, the timestamp fix-ups are not. */
	int64_t off = p->leo;
	int lat = cfg.timestamp_type == 1;
	for (int i = 0; i < n; i++) {
		uint8_t *b = records + info[i].pos;
		kb_put64(b + KB_OFF_BASE_OFFSET, (uint64_t)off);
		kb_put32(b + KB_OFF_LEADER_EPOCH, (uint32_t)p->epoch);
		if (lat || info[i].fix_max_ts) {
			if (lat) {
				kb_put16(b + KB_OFF_ATTRS, kb_get16(b + KB_OFF_ATTRS) | KB_ATTR_LOG_APPEND_TIME);
				info[i].max_ts = now;
			}
			kb_put64(b + KB_OFF_MAX_TS, (uint64_t)info[i].max_ts);
			kb_put32(b + KB_OFF_CRC, ks__kb_crc(b, info[i].size));
		}
		off += info[i].count;
	}
	uint64_t pos0 = s->end_pos;
	if ((rc = sub_pwrite_full(s->log, records, len, pos0))) {
		ks__p_poison(p, "segment write", rc);
		res->error = KERR_KAFKA_STORAGE_ERROR;
		goto unlock;
	}
	off = p->leo;
	for (int i = 0; i < n; i++) {
		uint64_t bpos = pos0 + info[i].pos;
		if ((rc = ks__p_index_batch(p, s, off, bpos, info[i].size, info[i].max_ts, 1))) {
			ks__p_poison(p, "index write", rc);
			res->error = KERR_KAFKA_STORAGE_ERROR;
			goto unlock;
		}
		ring_push(p, off, off + info[i].count - 1, bpos, info[i].size);
		off += info[i].count;
	}
	for (int i = 0; i < nov; i++) {
		if ((rc = ks__kp_put(&p->prod, &ov[i].e))) {
			ks__p_poison(p, "producer state update", rc);
			res->error = KERR_KAFKA_STORAGE_ERROR;
			goto unlock;
		}
	}
	if (!s->first_append_ms)
		s->first_append_ms = now;
	s->end_pos += len;
	s->end_off = next;
	res->base_offset = p->leo;
	res->last_offset = next - 1;
	res->log_append_time = lat ? now : -1;
	p->leo = next;
	p->appends++;
unlock:
	pthread_mutex_unlock(&p->mu);
out:
	if (info != stack_info)
		free(info);
	if (ov != stack_ov)
		free(ov);
	return rc;
}
