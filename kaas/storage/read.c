/*
 * read.c — Fetch read plans and ListOffsets by timestamp.
 *
 * A plan is a list of (file, position, length) ranges, as Kafka serves a
 * fetch: it starts at the batch holding the fetch offset and runs for
 * max_bytes, cut at the high watermark's byte position (known in memory) and
 * at each segment's valid end (the next live segment's base: zombie bytes
 * are never served).  Only the start needs the log: tail reads of the active
 * segment find it in an in-memory ring of recent batches, other reads at the
 * sparse index entry below it plus a short forward walk over batch headers
 * (without the partition lock).  The first batch is whole even when larger
 * than max_bytes (KIP-74); the last one may be cut short, which every client
 * skips (Kafka sends such plans too).
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/proto/kerr.h"
#include "util/clock.h"

/* The header walk from an index entry to the batch holding `cur` reads this
 * much at a time: an index interval's worth of small batches, or the one
 * header of a large batch (large batches have an index entry each). */
#define START_WALK_BUF 8192

/* Where the batch holding `cur` starts, and its size; 0 with *size 0 when
 * none is below `bend`.  The walk starts at an index position (validated:
 * the first batch must be the one the index names, else the walk restarts
 * at the segment start; an entry pointing into a batch, which shows no sane
 * header at all, counts as wrong too, never as the end of the segment). */
static int find_start(sub_file *f, uint64_t pos, int64_t eoff, uint64_t bend, int64_t cur,
		      int skip_empty, uint64_t *start, uint32_t *size, int64_t *start_off, int *only_empty)
{
	*size = 0;
	*only_empty = 0;
	for (int attempt = 0; attempt < 2; attempt++) {
		seg_iter it;
		kb_hdr h;
		uint64_t bpos;
		int rc, first = 1, retry = 0;
		ks__seg_iter_init(&it, f, pos, bend, 0, START_WALK_BUF);
		while ((rc = ks__seg_iter_next(&it, &h, &bpos)) == 1) {
			if (first && h.base_offset != eoff && pos != 0) {
				retry = 1;
				break;
			}
			first = 0;
			if (kb_last_offset(&h) >= cur && skip_empty && h.count == 0) {
				*only_empty = 1; /* compaction's: a later batch with records is served */
				continue;
			}
			if (kb_last_offset(&h) >= cur) {
				*start = bpos;
				*size = kb_size(&h);
				*start_off = h.base_offset;
				*only_empty = 0;
				break;
			}
		}
		if (rc == 0 && first && pos != 0)
			retry = 1;
		ks__seg_iter_free(&it);
		if (rc < 0)
			return rc;
		if (!retry)
			return 0;
		pos = 0;
		eoff = -1; /* from the segment start: any first batch */
	}
	return 0;
}

/* The same from the ring of the active segment's recent batches. */
static void ring_start(const ks_partition *p, int64_t cur, uint64_t *start, uint32_t *size,
		       int64_t *start_off)
{
	*size = 0;
	for (uint32_t k = 0; k < p->ring_n; k++) {
		const kring *r = &p->ring[(p->ring_head + k) % RING];
		if (r->last >= cur) {
			*start = r->pos;
			*size = r->size;
			*start_off = r->base;
			return;
		}
	}
}

static int ring_covers(const ks_partition *p, const kseg *s, int64_t cur)
{
	return s->active && p->ring_n && cur >= p->ring[p->ring_head].base;
}

/* Records damage d of s (found by a walk) and reports it when it is new.
 * Called with the lock held. */
static void note_damage(ks_partition *p, kseg *s, const kdamage *d)
{
	if (ks__seg_add_damage(s, d->lo, d->hi, d->plo, d->phi))
		ks__p_report_damage(p, s, d->why);
}

/* find_start found no batch holding an offset the sealed segment s must
 * hold: a damaged header.  Walks s to find where (unlocked: the caller
 * unlocked and holds a reference), records it, and returns 1 with the lock
 * held again (the caller plans the segment anew), or <0. */
static int locate_damage(ks_partition *p, kseg *s, uint64_t bend, int64_t limit)
{
	uint64_t clean;
	int64_t next;
	kdamage d;
	int v = ks__seg_verify(s->log, 0, s->base, bend, limit, 0, &clean, &next, &d);
	ks__p_lock(p);
	if (v < 0)
		return v;
	if (v == 0)
		d = (kdamage){next, limit, clean, s->end_pos + 1, "no batch holds the offset"};
	note_damage(p, s, &d);
	return 1;
}

/* Bytes [start, start+len) of a segment this leadership did not write are
 * CRC-checked the first time they are served (the pages come into the
 * cache the send reads them from anyway); s->vlo/vhi remember what was.
 * 0: clean; 1: damage found and recorded (plan again); <0: I/O error.
 * Called with the lock held and a reference on s; unlocks meanwhile. */
static int verify_served(ks_partition *p, kseg *s, int64_t limit, uint64_t start, int64_t start_off,
			 uint64_t len)
{
	if (start >= s->vlo && start + len <= s->vhi)
		return 0;
	uint64_t clean;
	int64_t next;
	kdamage d;
	ks__p_unlock(p);
	int v = ks__seg_verify(s->log, start, start_off, start + len, limit, 0, &clean, &next, &d);
	ks__p_lock(p);
	if (v < 0)
		return v;
	if (v == 1) {
		note_damage(p, s, &d);
		return 1;
	}
	if (start <= s->vhi && clean >= s->vlo && s->vhi > s->vlo) {
		if (start < s->vlo)
			s->vlo = start;
		if (clean > s->vhi)
			s->vhi = clean;
	} else {
		s->vlo = start;
		s->vhi = clean;
	}
	return 0;
}

static int plan_read(ks_partition *p, int64_t offset, int32_t max_bytes, ks_read_plan *plan, int skip_empty);

/* Compaction leaves empty batches where records went (docs/storage.md,
 * "Compaction").  A plan starts at the first batch with records at or
 * after the offset, as Kafka serves a fetch into a gap (and some clients
 * cannot take a response of empty batches alone); only when nothing but
 * empty batches lies below the high watermark are they served, so that
 * the consumer's position moves past them. */
int ks_partition_read(ks_partition *p, int64_t offset, int32_t max_bytes, ks_read_plan *plan)
{
	int rc = plan_read(p, offset, max_bytes, plan, 1);
	if (rc == 0 && plan->error == 0 && plan->n == 0 && offset < plan->high_watermark)
		rc = plan_read(p, offset, max_bytes, plan, 0);
	return rc;
}

static int plan_read(ks_partition *p, int64_t offset, int32_t max_bytes, ks_read_plan *plan, int skip_empty)
{
	/* A plan still holding segments would leak them here: release first. */
	for (int i = 0; i < KAAS_READ_MAX_RANGES; i++)
		KAAS_ASSERT(plan->refs[i] == NULL);
	memset(plan, 0, sizeof(*plan));
	plan->high_watermark = plan->log_start_offset = plan->last_stable_offset = -1;
	ks__p_lock(p);
	if (p->state != KAAS_PART_LEADER) {
		plan->error = ks__p_kerr(ks__p_unfit(p));
		ks__p_unlock(p);
		return 0;
	}
	int64_t hw = p->hw;
	plan->high_watermark = hw;
	plan->log_start_offset = p->log_start;
	plan->last_stable_offset = hw;
	/* As Kafka: beyond the log end is out of range; between the high
	 * watermark and the log end (written, not yet durable) is just empty. */
	if (offset < p->log_start || offset > p->leo) {
		plan->error = KERR_OFFSET_OUT_OF_RANGE;
		ks__p_unlock(p);
		return 0;
	}
	uint32_t budget = max_bytes > 0 ? (uint32_t)max_bytes : 0;
	int64_t cur = offset;
	int rc = 0, replans = 0;
	p->last_use_ms = ku_wall_ms();
	while (cur < hw && plan->n < KAAS_READ_MAX_RANGES && p->state == KAAS_PART_LEADER) {
		if (replans > 8) {
			/* Damage that planning around did not settle: say so. */
			if (plan->total == 0)
				plan->error = KERR_CORRUPT_MESSAGE;
			break;
		}
		size_t i = ks__p_seg_find(p, cur);
		if (i >= p->nsegs)
			break;
		if ((rc = ks__p_seg_load(p, i, INT64_MAX)) || (rc = ks__p_seg_open_log(p, p->segs[i],
											 p->segs[i]->active)))
			break;
		kseg *s = p->segs[i];
		if (s->base > p->hw_seg)
			break; /* wholly above the high watermark */
		if (cur < s->base) {
			/* A plan holds consecutive batches: going on into the next
			 * segment it must start where the last range ended.  When
			 * retention removed that segment while the lock was
			 * released for a walk, the plan ends here. */
			if (plan->total > 0)
				break;
			cur = s->base;
		}
		int damaged = s->dmg_hi > s->dmg_lo;
		if (damaged && cur >= s->dmg_lo && cur < s->dmg_hi) {
			/* Never skipped as if the records did not exist: the fetch
			 * that reaches them is answered as Kafka answers corruption
			 * (a plan that already holds data ends before them). */
			if (plan->total == 0) {
				plan->error = KERR_CORRUPT_MESSAGE;
				KS_COUNT(p, corrupt_reads, 1);
			}
			break;
		}
		/* Valid bytes below the high watermark, and before the damage. */
		uint64_t bend = s->base == p->hw_seg ? p->hw_pos : s->end_pos;
		if (bend > s->end_pos)
			bend = s->end_pos;
		int clipped = 0;
		if (damaged && cur < s->dmg_lo && bend >= s->dpos_lo) {
			bend = s->dpos_lo;
			clipped = 1;
		}
		int64_t seg_next = i + 1 < p->nsegs ? p->segs[i + 1]->base : hw;
		uint64_t start = 0;
		uint32_t first = 0;
		int64_t start_off = s->base;
		ks__seg_ref(s); /* held across the unlocked walk, then by the plan */
		if (cur == s->base && plan->total > 0) {
			start = 0; /* a plan going on into the next segment: its start */
			first = 1;
		} else if (ring_covers(p, s, cur)) {
			ring_start(p, cur, &start, &first, &start_off);
		} else {
			uint64_t pos;
			int64_t eoff;
			ks__seg_ix_lookup(s, cur, &pos, &eoff);
			if (damaged && cur >= s->dmg_hi && pos < s->dpos_hi) {
				pos = s->dpos_hi; /* the first batch after the damage */
				eoff = s->dmg_hi;
			}
			if (pos >= bend) {
				pos = 0; /* an entry at or past the end cannot be the start */
				eoff = s->base;
			}
			/* What the damage check below needs, read under the lock. */
			int sealed = !s->active;
			int64_t seg_end = s->end_off, limit = p_seg_limit(p, i);
			ks__p_unlock(p);
			int empty_only;
			rc = find_start(s->log, pos, eoff, bend, cur, skip_empty && plan->total == 0, &start, &first,
					&start_off, &empty_only);
			if (rc == 0 && !first && sealed && cur < seg_end && !empty_only)
				rc = locate_damage(p, s, bend, limit); /* relocks */
			else
				ks__p_lock(p);
			if (rc == 1) {
				ks__seg_unref(s);
				replans++;
				continue; /* plan this segment again, around the damage */
			}
			if (rc) {
				ks__seg_unref(s);
				break;
			}
		}
		uint64_t len = 0;
		if (first && start < bend) {
			uint32_t room = budget > plan->total ? budget - plan->total : 0;
			len = bend - start;
			if (len > room)
				len = room;
			if (plan->total == 0 && len < first)
				len = first; /* KIP-74: the first batch whole */
		}
		if (len && !s->active && (rc = verify_served(p, s, p_seg_limit(p, i), start, start_off, len))) {
			ks__seg_unref(s);
			if (rc < 0)
				break;
			rc = 0;
			replans++;
			continue; /* plan this segment again, around the damage */
		}
		if (len) {
			KAAS_ASSERT(plan->n < KAAS_READ_MAX_RANGES && s->log);
			plan->r[plan->n].file = s->log;
			plan->r[plan->n].pos = start;
			plan->r[plan->n].len = (uint32_t)len;
			plan->refs[plan->n] = s;
			plan->n++;
			plan->total += (uint32_t)len;
		} else {
			ks__seg_unref(s);
		}
		if (first && (start + len < bend || plan->total >= budget))
			break; /* cut by max_bytes */
		if (clipped) {
			cur = s->dmg_lo; /* the damage comes next: the plan ends there */
			continue;
		}
		/* This segment has nothing more below the high watermark: go on. */
		if (seg_next <= cur)
			break;
		cur = seg_next;
	}
	if (rc && plan->n == 0)
		plan->error = KERR_KAFKA_STORAGE_ERROR;
	ks__p_unlock(p);
	return 0;
}

void ks_read_plan_release(ks_read_plan *plan)
{
	for (int i = 0; i < KAAS_READ_MAX_RANGES; i++) {
		ks__seg_unref(plan->refs[i]);
		plan->refs[i] = NULL;
	}
	plan->n = 0;
	plan->total = 0;
}

/* ---- ListOffsets by timestamp ------------------------------------------------------ */

static int search_segment(ks_partition *p, size_t i, int64_t ts, int64_t *offset, int64_t *found)
{
	kseg *s = p->segs[i];
	int64_t limit = p_seg_limit(p, i);
	if (limit > p->hw)
		limit = p->hw;
	/* Every batch up to a time entry with a smaller timestamp is too old. */
	int64_t from = s->base;
	uint32_t k = ks__seg_tx_lower(s, 1, ts);
	if (k > 0)
		from = s->base + s->tx[k - 1].rel;
	uint64_t pos;
	int64_t eoff;
	ks__seg_ix_lookup(s, from, &pos, &eoff);
	int rc = 0, res = 0;
	for (int attempt = 0; attempt < 2 && !res; attempt++) {
		seg_iter it;
		kb_hdr h;
		uint64_t bpos;
		int first = 1, retry = 0;
		ks__seg_iter_init(&it, s->log, pos, s->end_pos, 0, 16 * 1024);
		while ((rc = ks__seg_iter_next(&it, &h, &bpos)) == 1) {
			if (first && h.base_offset != eoff && pos != 0) {
				retry = 1; /* the index disagrees with the log */
				break;
			}
			first = 0;
			if (h.base_offset >= limit)
				break;
			if (kb_last_offset(&h) < p->log_start || h.max_ts < ts || h.count == 0)
				continue; /* an empty batch (compaction) holds no record to answer with */
			uint8_t *b;
			if ((rc = ks__seg_read_batch(s->log, bpos, kb_size(&h), &b)))
				break;
			if (ks__kb_find_ts(b, kb_size(&h), ts, p->log_start, offset, found)) {
				/* Records unreadable: answer with the batch, as Kafka's index would. */
				*offset = h.base_offset < p->log_start ? p->log_start : h.base_offset;
				*found = h.max_ts;
			}
			free(b);
			res = 1;
			break;
		}
		if (rc == 0 && first && pos != 0)
			retry = 1; /* no sane batch where the index points */
		ks__seg_iter_free(&it);
		if (rc < 0 || !retry)
			break;
		/* Search the whole segment. */
		pos = 0;
		eoff = s->base;
	}
	return rc < 0 ? rc : res;
}

int ks_partition_offset_for_time(ks_partition *p, int64_t ts, int64_t *offset, int64_t *found_ts)
{
	*offset = -1;
	*found_ts = -1;
	ks__p_lock(p);
	int rc = 0;
	if (p->state != KAAS_PART_LEADER) {
		/* Only a storage failure is this call's error; otherwise
		 * there is no leader here to answer. */
		rc = ks__p_unfit(p) == -EIO ? -EIO : -EPERM;
	} else if (ts == KAAS_TS_LATEST) {
		*offset = p->hw;
	} else if (ts == KAAS_TS_EARLIEST) {
		*offset = p->log_start;
	} else if (ts < 0) {
		rc = -EINVAL;
	} else {
		for (size_t i = ks__p_seg_find(p, p->log_start); i < p->nsegs; i++) {
			if (p->segs[i]->base >= p->hw)
				break;
			if ((rc = ks__p_seg_load(p, i, INT64_MAX)))
				break;
			if (p->segs[i]->max_ts < ts)
				continue;
			rc = search_segment(p, i, ts, offset, found_ts);
			if (rc)
				break;
		}
		if (rc > 0)
			rc = 0;
		if (*offset >= p->hw) {
			*offset = -1;
			*found_ts = -1;
		}
	}
	ks__p_unlock(p);
	return rc;
}
