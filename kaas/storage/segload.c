/*
 * segload.c — making a segment's metadata known lazily: its index files
 * read back (a torn or foreign tail cut off), the CRC-checked walk from the
 * last trusted entry to the end of its valid batches, and the sparse index
 * entries appends and walks add.
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#define INDEX_FILE_MAX (256u << 20)

/* Reads a whole index file of segment s; entries beyond `max` are dropped. */
static int read_index(ks_partition *p, kseg *s, int kind, uint8_t **buf, size_t *len)
{
	char path[SUB_PATH_MAX];
	char *b = NULL;
	*buf = NULL;
	*len = 0;
	int rc = ks__p_seg_file(p, s, kind, path, sizeof(path));
	if (rc)
		return rc;
	rc = sub_read_file(p->vfs, path, INDEX_FILE_MAX, &b, len);
	if (rc == -ENOENT || rc == -EFBIG) {
		/* A missing index is rebuilt by the walk. */
		*len = 0;
		return 0;
	}
	if (rc)
		return rc;
	*buf = (uint8_t *)b;
	return 0;
}

/* Loads the index files of s: strictly increasing entries inside the file
 * and below `limit` only; a torn or foreign tail is cut off. */
static int load_index_files(ks_partition *p, kseg *s, uint64_t size, int64_t limit)
{
	uint8_t *b;
	size_t len;
	s->nix = s->ntx = 0;
	int rc = read_index(p, s, SEG_INDEX, &b, &len);
	if (rc)
		return rc;
	for (size_t o = 0; o + IDX_ENTRY <= len; o += IDX_ENTRY) {
		uint32_t rel = kb_get32(b + o), pos = kb_get32(b + o + 4);
		if (s->nix && (rel <= s->ix[s->nix - 1].rel || pos <= s->ix[s->nix - 1].pos))
			break;
		if (pos >= size || (limit != INT64_MAX && s->base + rel >= limit))
			break;
		if ((rc = ks__seg_ix_push(s, rel, pos)))
			break;
	}
	free(b);
	if (rc)
		return rc;
	if ((rc = read_index(p, s, SEG_TIMEINDEX, &b, &len)))
		return rc;
	for (size_t o = 0; o + TIDX_ENTRY <= len; o += TIDX_ENTRY) {
		int64_t ts = (int64_t)kb_get64(b + o);
		uint32_t rel = kb_get32(b + o + 8);
		if (s->ntx && (rel <= s->tx[s->ntx - 1].rel || ts < s->tx[s->ntx - 1].ts))
			break;
		if (limit != INT64_MAX && s->base + rel >= limit)
			break;
		if ((rc = ks__seg_tx_push(s, ts, rel)))
			break;
	}
	free(b);
	return rc;
}

/* Index of the time entry paired with offset entry ix[k], or -1. */
static int64_t paired_tx(const kseg *s, uint32_t rel)
{
	uint32_t k = ks__seg_tx_lower(s, 0, rel);
	return (k < s->ntx && s->tx[k].rel == rel) ? (int64_t)k : -1;
}

/* Adds index entries for a batch at pos when an index interval has passed;
 * with write, also to the segment's index files (our active segment). */
int ks__p_index_batch(ks_partition *p, kseg *s, int64_t base, uint64_t pos, uint32_t size,
		  int64_t max_ts, int write)
{
	int rc = 0;
	if (max_ts > s->max_ts) {
		s->max_ts = max_ts;
		s->max_ts_off = base;
	}
	if (pos > 0 && s->since_ix >= (uint64_t)p->cfg.index_interval_bytes) {
		uint32_t rel = (uint32_t)(base - s->base);
		if (write)
			s->idx_dirty = 1; /* to the files at roll, checkpoint, relinquish */
		if ((rc = ks__seg_ix_push(s, rel, (uint32_t)pos)) || (rc = ks__seg_tx_push(s, s->max_ts, rel)))
			return rc;
		s->since_ix = 0;
	}
	s->since_ix += size;
	return 0;
}

/* Walks s from (pos, off) with CRC checks, stopping before `limit`;
 * rebuilds in-memory index entries as it goes.  *ok = 0 when the very first
 * batch was not the expected one.  Below `durable` (offsets that were
 * durable before this take-over) a bad batch is damage, not a torn tail:
 * it is recorded and the walk goes on after it when its header can be
 * trusted, else the rest of the segment up to its limit (or, for the
 * newest segment, up to `durable`) is damaged. */
static int walk_rebuild(ks_partition *p, kseg *s, uint64_t pos, int64_t off, uint64_t size,
			int64_t limit, int64_t durable, int *first_ok)
{
	seg_iter it;
	kb_hdr h;
	uint64_t bpos;
	int rc, first = 1;
	ks__seg_iter_init(&it, s->log, pos, size, 1, 256 * 1024);
	s->since_ix = 0;
	s->end_pos = pos;
	s->end_off = off;
	s->vlo = s->vhi = pos;
	*first_ok = 1;
	for (;;) {
		rc = ks__seg_iter_next(&it, &h, &bpos);
		if (rc < 0)
			break;
		int gap = rc == 1 && (h.base_offset != off || h.base_offset >= limit ||
				      kb_last_offset(&h) >= limit);
		if (rc == 1 && !gap)
			goto take;
		if (first && pos != 0 && (rc == 0 || h.base_offset < limit)) {
			*first_ok = 0; /* the index is wrong: the caller walks from 0 */
			break;
		}
		if (rc == 1 && h.base_offset >= limit && h.base_offset == off)
			break; /* the next live segment begins */
		if (off >= durable || off >= limit)
			break; /* the torn tail, or the segment's end */
		if (limit == INT64_MAX && rc == 0 && !it.crc_bad && it.why &&
		    (strcmp(it.why, "end of segment") == 0 || strncmp(it.why, "truncated batch", 15) == 0))
			break; /* the newest file just ends: bytes lost, not damaged (logged
				* by the take-over), and nothing after them to protect */
		/* Damage in what was durable. */
		if (rc == 0 && it.crc_bad && h.base_offset == off && kb_last_offset(&h) < limit) {
			if (ks__seg_add_damage(s, off, kb_last_offset(&h) + 1, bpos, bpos + kb_size(&h)))
				ks__p_report_damage(p, s, it.why);
			it.pos = bpos + kb_size(&h);
			off = kb_last_offset(&h) + 1;
			s->end_pos = it.pos;
			s->end_off = off;
			s->since_ix += kb_size(&h);
			first = 0;
			continue;
		}
		int64_t hi = limit != INT64_MAX ? limit : durable;
		if (ks__seg_add_damage(s, off, hi, it.pos, size > it.pos ? size : it.pos + 1))
			ks__p_report_damage(p, s, gap ? "offset gap" : it.why);
		s->end_off = hi; /* nothing after the damage is readable */
		rc = 0;
		break;
take:
		if (!first || pos == 0) {
			if ((rc = ks__p_index_batch(p, s, h.base_offset, bpos, kb_size(&h), h.max_ts, 0)))
				break;
		} else {
			/* The starting entry is already in the index. */
			if (h.max_ts > s->max_ts) {
				s->max_ts = h.max_ts;
				s->max_ts_off = h.base_offset;
			}
			s->since_ix = kb_size(&h);
		}
		first = 0;
		off = kb_last_offset(&h) + 1;
		s->end_pos = bpos + kb_size(&h);
		s->end_off = off;
		s->vhi = s->end_pos;
	}
	if (rc == 0 && first && pos != 0)
		*first_ok = 0;
	if (rc == 0 && s->end_pos < size)
		KLOG_DEBUG("storage", "%s: segment %d-%lld valid up to byte %llu of %llu (%s)", p->dir,
			   (int)s->epoch, (long long)s->base, (unsigned long long)s->end_pos,
			   (unsigned long long)size, it.why ? it.why : "");
	ks__seg_iter_free(&it);
	return rc < 0 ? rc : 0;
}

int ks__p_seg_load(ks_partition *p, size_t i, int64_t trust_off)
{
	kseg *s = p->segs[i];
	if (s->meta)
		return s->log ? 0 : ks__p_seg_open_log(p, s, s->active); /* closed while idle */
	int64_t limit = p_seg_limit(p, i);
	/* Offsets that were durable before the take-over: all of a segment the
	 * take-over did not recover, up to the checkpoint while it runs. */
	int64_t durable = p->durable_floor < limit ? p->durable_floor : limit;
	sub_stat st;
	int rc = ks__p_seg_open_log(p, s, 0);
	if (rc || (rc = sub_fstat(s->log, &st)))
		return rc;
	if ((rc = load_index_files(p, s, st.size, limit)))
		return rc;
	/* Start from the last offset entry below the trusted point that has its
	 * time entry (so the max timestamp before it is known). */
	int64_t k = (int64_t)s->nix - 1, t = -1;
	for (; k >= 0; k--) {
		if (s->base + s->ix[k].rel >= trust_off)
			continue;
		if ((t = paired_tx(s, s->ix[k].rel)) >= 0)
			break;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		uint64_t pos = 0;
		int64_t off = s->base;
		s->max_ts = -1;
		s->max_ts_off = s->base;
		if (k >= 0) {
			pos = s->ix[k].pos;
			off = s->base + s->ix[k].rel;
			s->nix = (uint32_t)k + 1;
			s->ntx = (uint32_t)t + 1;
			s->max_ts = s->tx[t].ts;
		} else {
			s->nix = s->ntx = 0;
		}
		int ok;
		s->dmg_lo = s->dmg_hi = 0;
		if ((rc = walk_rebuild(p, s, pos, off, st.size, limit, durable, &ok)))
			return rc;
		if (ok || k < 0)
			break;
		KLOG_WARN("storage", "%s: index of segment %d-%lld does not match the log; rebuilding",
			  p->dir, (int)s->epoch, (long long)s->base);
		k = -1;
	}
	s->meta = 1;
	s->synced_pos = s->end_pos;
	/* A loaded segment is sealed: its index files are never written again
	 * (what the walk rebuilt stays in memory). */
	s->idx_dirty = 0;
	s->ix_written = s->nix;
	s->tx_written = s->ntx;
	return 0;
}
