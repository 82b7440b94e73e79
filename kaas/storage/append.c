/*
 * append.c — the write path: validate, recompress for the topic's
 * compression.type, check producer sequences, assign offsets, one pwrite
 * per request, sparse index entries; segment roll.
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
	KS__P_LOCKED(p);
	kseg *old = p->nsegs ? p->segs[p->nsegs - 1] : NULL;
	int rc = ks__p_fence_check(p);
	if (rc)
		return rc;
	/* The sealed segment's index goes to its files now: they are not held
	 * open, and nothing adds to them later. */
	if (old && (rc = ks__p_write_index(p, old, 1)))
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
	char path[SUB_PATH_MAX];
	if ((rc = ks__seg_path(path, sizeof(path), p->dir, s->epoch, s->base, SEG_LOG)) == 0)
		rc = sub_open(p->vfs, path, O_RDWR | O_CREAT | O_EXCL, 0644, &s->log);
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
	if (old) {
		old->active = 0; /* flushed later: its synced_pos is behind */
		old->vlo = 0;    /* every batch in it was checked on append */
		old->vhi = old->end_pos;
	}
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

/* One append request on its way through the write path. */
typedef struct areq {
	uint8_t *records;
	size_t len;
	uint8_t *owned;     /* records re-encoded for compression.type (else NULL) */
	ks_append_result *res;
	ks_log_config cfg;  /* copied at the start: the lock is not held throughout */
	int64_t now;
	kb_info *info;
	overlay *ov;
	int nb, n, nov;     /* batches counted, validated; producers touched */
	int64_t next;       /* the log end after this request */
	kb_info stack_info[STACK_BATCHES];
	overlay stack_ov[STACK_BATCHES];
} areq;

static int req_init(areq *r, ks_partition *p, uint8_t *records, size_t len, ks_append_result *res)
{
	r->records = records;
	r->len = len;
	r->owned = NULL;
	r->res = res;
	r->info = r->stack_info;
	r->ov = r->stack_ov;
	r->n = r->nov = 0;
	r->next = -1;
	r->nb = ks__kb_count(records, len);
	if (r->nb > STACK_BATCHES) {
		r->info = calloc((size_t)r->nb, sizeof(*r->info));
		r->ov = calloc((size_t)r->nb, sizeof(*r->ov));
		if (!r->info || !r->ov)
			return -ENOMEM;
	}
	ks__p_lock(p);
	r->cfg = p->cfg;
	ks__p_unlock(p);
	r->now = ku_wall_ms();
	return 0;
}

static void req_free(areq *r)
{
	free(r->owned);
	if (r->info != r->stack_info)
		free(r->info);
	if (r->ov != r->stack_ov)
		free(r->ov);
}

/* Every batch checked before any is written; a Kafka error or 0. */
static int req_validate(areq *r)
{
	const ks_log_config *c = &r->cfg;
	kb_limits lim = {
		.max_batch_bytes = c->max_message_bytes,
		.ts_diff_max_ms = c->timestamp_difference_max_ms,
		.now_ms = r->now,
		.create_time = c->timestamp_type == 0,
		.validate_compressed = c->validate_compressed,
		.require_key = c->cleanup_compact != KS_CLEANUP_DELETE,
		.max_decompressed = (uint64_t)c->max_message_bytes * 64 > (256u << 20)
					    ? (uint64_t)c->max_message_bytes * 64
					    : (256u << 20),
	};
	int bad, err = ks__kb_validate(r->records, r->len, &lim, r->info, r->nb > 0 ? r->nb : 1,
				       &r->n, &bad, &r->res->message);
	if (err)
		r->res->batch_index = bad;
	return err;
}

/* compression.type other than producer: every batch in another codec is
 * re-encoded in the topic's (Kafka's LogValidator), before the lock is
 * taken, on the caller's thread (a request worker, never the event loop).
 * The records are kept byte for byte (recompress.c), so what validation
 * learned (counts, sequences, timestamps) still holds; only positions and
 * sizes change.  Like Kafka, a re-encoded batch above max.message.bytes
 * is refused.  A Kafka error or 0. */
static int req_recompress(areq *r)
{
	const ks_log_config *c = &r->cfg;
	if (c->compression_type == KS_COMPRESS_PRODUCER)
		return 0;
	int to = KS_COMPRESS_CODEC(c->compression_type), i = 0;
	while (i < r->n && (kb_get16(r->records + r->info[i].pos + KB_OFF_ATTRS) & KB_ATTR_CODEC_MASK) == to)
		i++;
	if (i == r->n)
		return 0;
	kb_limits lim = {
		.max_batch_bytes = c->max_message_bytes,
		.max_decompressed = (uint64_t)c->max_message_bytes * 64 > (256u << 20)
					    ? (uint64_t)c->max_message_bytes * 64
					    : (256u << 20),
	};
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	int err = KERR_NONE;
	for (i = 0; i < r->n && err == KERR_NONE; i++) {
		kb_info *in = &r->info[i];
		const uint8_t *b = r->records + in->pos;
		uint8_t *nb = NULL;
		size_t nlen = in->size;
		int rc = 0;
		if ((kb_get16(b + KB_OFF_ATTRS) & KB_ATTR_CODEC_MASK) != to &&
		    (rc = ks__kb_recompress(b, in->size, to, ks__cfg_level(c, to), in->inflated, &lim,
					    (size_t)c->max_message_bytes, &nb, &nlen))) {
			r->res->batch_index = i;
			if (rc == -EMSGSIZE) {
				r->res->message = "batch recompressed for compression.type is larger than "
						  "max.message.bytes";
				err = KERR_MESSAGE_TOO_LARGE;
			} else {
				err = ks__kb_inflate_kerr(rc, &r->res->message);
			}
			break;
		}
		if (len + nlen > cap) {
			size_t ncap = cap ? cap * 2 : (r->len > 4096 ? r->len : 4096);
			while (ncap < len + nlen)
				ncap *= 2;
			uint8_t *g = ncap <= INT32_MAX ? realloc(buf, ncap) : NULL;
			if (!g) {
				free(nb);
				r->res->message = ncap > INT32_MAX ? "records larger than 2 GiB after recompression"
								   : "out of memory recompressing a batch";
				err = ncap > INT32_MAX ? KERR_MESSAGE_TOO_LARGE : KERR_UNKNOWN_SERVER_ERROR;
				r->res->batch_index = i;
				break;
			}
			buf = g;
			cap = ncap;
		}
		memcpy(buf + len, nb ? nb : b, nlen);
		free(nb);
		in->pos = (uint32_t)len;
		in->size = (uint32_t)nlen;
		len += nlen;
	}
	if (err) {
		free(buf);
		return err;
	}
	r->owned = r->records = buf;
	r->len = len;
	return KERR_NONE;
}

/* Producer checks, against the state as this request would leave it (the
 * overlay); sets r->next.  1 when the request is answered already (an
 * error, or a duplicate answered with the original's offsets). */
static int req_check_producers(ks_partition *p, areq *r)
{
	ks_append_result *res = r->res;
	int64_t next = p->leo;
	for (int i = 0; i < r->n; i++) {
		kb_info *b = &r->info[i];
		if (b->pid >= 0) {
			overlay *o = ov_get(p, r->ov, &r->nov, b->pid);
			int dup;
			kp_batch orig;
			int err = ks__kp_check(o->known || o->e.epoch != -1 ? &o->e : NULL, b->pepoch,
					       b->base_seq, b->last_seq, &dup, &orig, &res->message);
			if (err) {
				res->error = (int16_t)err;
				res->batch_index = i;
				return 1;
			}
			if (dup) {
				/* Kafka answers the whole request with the original. */
				res->duplicate = 1;
				res->base_offset = orig.first_off;
				res->last_offset = orig.last_off;
				return 1;
			}
			kp_batch kb = {b->base_seq, b->last_seq, next, next + b->count - 1, b->max_ts};
			ks__kp_entry_apply(&o->e, b->pepoch, &kb);
		}
		next += b->count;
	}
	r->next = next;
	return 0;
}

/* Rolls before writing when this request would overflow the active
 * segment (size, age, or 32-bit relative offsets). */
static int req_roll_if_full(ks_partition *p, areq *r)
{
	const kseg *s = p->segs[p->nsegs - 1];
	const ks_log_config *c = &r->cfg;
	int64_t count = r->next - p->leo;
	if (s->end_pos == 0 ||
	    !((int64_t)(s->end_pos + r->len) > c->segment_bytes ||
	      (c->segment_ms >= 0 && s->first_append_ms && r->now - s->first_append_ms >= c->segment_ms) ||
	      p->leo + count - s->base > INT32_MAX))
		return 0;
	int rc = ks__p_roll(p, r->now);
	if (rc) {
		r->res->error = ks__p_fail(p, "segment roll", rc);
		if (rc == -ESTALE)
			rc = 0; /* fenced: not the leader any more */
	}
	return rc;
}

/* Assigns offsets in place; baseOffset and partitionLeaderEpoch are outside
 * the CRC, the timestamp fix-ups are not. */
static void req_assign_offsets(ks_partition *p, areq *r)
{
	int64_t off = p->leo;
	int lat = r->cfg.timestamp_type == 1;
	for (int i = 0; i < r->n; i++) {
		kb_info *in = &r->info[i];
		uint8_t *b = r->records + in->pos;
		kb_put64(b + KB_OFF_BASE_OFFSET, (uint64_t)off);
		kb_put32(b + KB_OFF_LEADER_EPOCH, (uint32_t)p->epoch);
		if (lat || in->fix_max_ts) {
			if (lat) {
				kb_put16(b + KB_OFF_ATTRS, kb_get16(b + KB_OFF_ATTRS) | KB_ATTR_LOG_APPEND_TIME);
				in->max_ts = r->now;
			}
			kb_put64(b + KB_OFF_MAX_TS, (uint64_t)in->max_ts);
			kb_put32(b + KB_OFF_CRC, ks__kb_crc(b, in->size));
		}
		off += in->count;
	}
}

/* One pwrite for the whole request, then its index entries, the tail ring
 * and the producer table.  Any failure poisons the partition. */
static int req_write(ks_partition *p, areq *r)
{
	kseg *s = p->segs[p->nsegs - 1];
	uint64_t pos0 = s->end_pos;
	const char *what = "segment reopen";
	p->last_use_ms = r->now;
	int rc = ks__p_seg_open_log(p, s, 1); /* closed while idle */
	if (rc == 0) {
		what = "segment write";
		rc = sub_pwrite_full(s->log, r->records, r->len, pos0);
	}
	int64_t off = p->leo;
	for (int i = 0; i < r->n && rc == 0; i++) {
		const kb_info *in = &r->info[i];
		uint64_t bpos = pos0 + in->pos;
		what = "index update";
		if ((rc = ks__p_index_batch(p, s, off, bpos, in->size, in->max_ts, 1)))
			break;
		ring_push(p, off, off + in->count - 1, bpos, in->size);
		off += in->count;
	}
	for (int i = 0; i < r->nov && rc == 0; i++) {
		what = "producer state update";
		rc = ks__kp_put(&p->prod, &r->ov[i].e);
	}
	if (rc) {
		ks__p_poison(p, what, rc);
		r->res->error = KERR_KAFKA_STORAGE_ERROR;
		/* A failed write leaves its last batch torn (recovery ends the log
		 * before it), but earlier batches of the same write may be whole;
		 * a failure after the write leaves every batch whole. */
		r->res->maybe_written = strcmp(what, "segment write") == 0 ? r->n > 1 : strcmp(what, "segment reopen") != 0;
		return rc;
	}
	if (!s->first_append_ms)
		s->first_append_ms = r->now;
	s->end_pos += r->len;
	s->end_off = r->next;
	return 0;
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
	areq r; /* not zeroed: the stack arrays are filled as used */
	int err, rc = req_init(&r, p, records, len, res);
	if (rc) {
		res->error = KERR_UNKNOWN_SERVER_ERROR;
		goto out;
	}
	if ((err = req_validate(&r)) || (err = req_recompress(&r))) {
		res->error = (int16_t)err;
		goto out;
	}
	ks__p_lock(p);
	res->log_start_offset = p->log_start;
	if ((rc = ks__p_unfit(p))) {
		res->error = ks__p_kerr(rc);
		if (rc == -EIO)
			res->message = "partition poisoned by an earlier I/O failure";
		else
			rc = 0; /* not the leader: the client's to retry elsewhere */
		goto unlock;
	}
	if (req_check_producers(p, &r) || (rc = req_roll_if_full(p, &r)) || res->error)
		goto unlock;
	req_assign_offsets(p, &r);
	if ((rc = req_write(p, &r)))
		goto unlock;
	KAAS_ASSERT(r.next >= p->leo && p->hw <= p->leo);
	res->base_offset = p->leo;
	res->last_offset = r.next - 1;
	res->log_append_time = r.cfg.timestamp_type == 1 ? r.now : -1;
	p->leo = r.next;
	p->appends++;
unlock:
	ks__p_unlock(p);
out:
	req_free(&r);
	return rc;
}
