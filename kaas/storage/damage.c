/*
 * damage.c — what the engine does with data it did not damage and numbers
 * it did not write: it records damaged ranges of segments, reports them
 * (ERROR naming file and byte range, counters), moves damaged and foreign
 * files into the partition's quarantine area (never deletes them), and
 * scrubs sealed segments in the background at a bounded rate.
 *
 * The rule (docs/storage.md, "Damage"): the broker never deletes data it
 * cannot prove is garbage.  Only the tail written since the last durable
 * point can legitimately be torn; damage anywhere else is corruption, and
 * a fetch that meets it is answered CORRUPT_MESSAGE, never by skipping.
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"

static ks_storage_stats g_stats; /* atomics: every partition's counters */

void ks__stats_add(ks_partition *p, size_t field_offset, uint64_t n)
{
	uint64_t *mine = (uint64_t *)((char *)&p->st + field_offset);
	uint64_t *all = (uint64_t *)((char *)&g_stats + field_offset);
	*mine += n; /* under p->mu */
	__atomic_add_fetch(all, n, __ATOMIC_RELAXED);
}

void ks_storage_stats_get(ks_storage_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->corrupt_ranges = __atomic_load_n(&g_stats.corrupt_ranges, __ATOMIC_RELAXED);
	out->corrupt_bytes = __atomic_load_n(&g_stats.corrupt_bytes, __ATOMIC_RELAXED);
	out->corrupt_reads = __atomic_load_n(&g_stats.corrupt_reads, __ATOMIC_RELAXED);
	out->quarantined_files = __atomic_load_n(&g_stats.quarantined_files, __ATOMIC_RELAXED);
	out->foreign_numbers = __atomic_load_n(&g_stats.foreign_numbers, __ATOMIC_RELAXED);
	out->scrubbed_bytes = __atomic_load_n(&g_stats.scrubbed_bytes, __ATOMIC_RELAXED);
	out->scrub_passes = __atomic_load_n(&g_stats.scrub_passes, __ATOMIC_RELAXED);
	out->takeovers_abandoned = __atomic_load_n(&g_stats.takeovers_abandoned, __ATOMIC_RELAXED);
	out->scans_skipped = __atomic_load_n(&g_stats.scans_skipped, __ATOMIC_RELAXED);
}

void ks_partition_stats_get(ks_partition *p, ks_partition_stats *out)
{
	ks__p_lock(p);
	*out = p->st;
	out->damaged_segments = 0;
	out->open_files = 0;
	for (size_t i = 0; i < p->nsegs; i++) {
		const kseg *s = p->segs[i];
		out->damaged_segments += s->dmg_hi > s->dmg_lo;
		out->open_files += s->log != NULL;
		for (int k = 1; k < FLUSH_DEPTH_MAX; k++)
			out->open_files += s->sync[k] != NULL;
	}
	ks__p_unlock(p);
}

void ks__p_foreign(ks_partition *p, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	KLOG_ERR("storage", "%s (a number no leader of this partition could have written)", msg);
	KS_COUNT(p, foreign_numbers, 1);
}

/* ---- damaged ranges ----------------------------------------------------------- */

int ks__seg_add_damage(kseg *s, int64_t lo, int64_t hi, uint64_t plo, uint64_t phi)
{
	if (hi <= lo)
		return 0;
	if (s->dmg_hi <= s->dmg_lo) {
		s->dmg_lo = lo;
		s->dmg_hi = hi;
		s->dpos_lo = plo;
		s->dpos_hi = phi;
		return 1;
	}
	if (lo >= s->dmg_lo && hi <= s->dmg_hi)
		return 0;
	/* One range per segment: the union (coarse, never less than the damage). */
	if (lo < s->dmg_lo) {
		s->dmg_lo = lo;
		s->dpos_lo = plo;
	}
	if (hi > s->dmg_hi) {
		s->dmg_hi = hi;
		s->dpos_hi = phi;
	}
	return 1;
}

/* A file may be moved only by whoever may change the directory: the
 * leader that is not fenced, or a take-over that its guard and a fresh
 * listing still let act (a newer leader's arrival abandons it). */
static int may_move(ks_partition *p)
{
	if (p->recovering)
		return ks__p_guard(p, "quarantine of a damaged segment") == 0;
	return p->state == KAAS_PART_LEADER && ks__p_fence_check(p) == 0;
}

int ks__p_quarantine_file(ks_partition *p, const char *leaf, const char *prefix)
{
	char qdir[SUB_PATH_MAX], from[SUB_PATH_MAX], to[SUB_PATH_MAX], name[512];
	int rc = sub_join(qdir, sizeof(qdir), p->dir, QUARANTINE_DIR);
	if (rc == 0)
		rc = sub_join(from, sizeof(from), p->dir, leaf);
	if (rc)
		return rc;
	sub_stat st;
	if ((rc = sub_stat_path(p->vfs, from, &st)))
		return rc;
	rc = sub_mkdir(p->vfs, qdir, 0755);
	if (rc && rc != -EEXIST)
		return rc;
	/* A set-aside name carries the time, so nothing set aside earlier is
	 * ever replaced; a damaged segment keeps its own name (it stays part of
	 * the log), unless a copy is already there. */
	if (prefix[0])
		snprintf(name, sizeof(name), "%s%lld.%s", prefix, (long long)ku_wall_ms(), leaf);
	else
		snprintf(name, sizeof(name), "%s", leaf);
	if ((rc = sub_join(to, sizeof(to), qdir, name)))
		return rc;
	if (!prefix[0] && sub_stat_path(p->vfs, to, &st) == 0) {
		snprintf(name, sizeof(name), "copy.%lld.%s", (long long)ku_wall_ms(), leaf);
		if ((rc = sub_join(to, sizeof(to), qdir, name)))
			return rc;
	}
	if ((rc = sub_rename(p->vfs, from, to)))
		return rc;
	if ((rc = sub_fsync_dir(p->vfs, qdir)) == 0)
		rc = sub_fsync_dir(p->vfs, p->dir);
	KS_COUNT(p, quarantined_files, 1);
	KLOG_ERR("storage", "%s/%s moved to %s/%s/%s (kept for inspection)", p->dir, leaf, p->dir,
		 QUARANTINE_DIR, name);
	return rc;
}

int ks__p_quarantine_foreign(ks_partition *p, int32_t limit)
{
	char **names = NULL;
	size_t n = 0;
	int rc = sub_list(p->vfs, p->dir, &names, &n);
	if (rc)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		int32_t e;
		int64_t b;
		if (ks__seg_parse_name(names[i], &e, &b) < 0 || e <= limit)
			continue;
		ks__p_foreign(p, "%s/%s: epoch %d is above any issued (%d): not obeyed", p->dir, names[i],
			      (int)e, (int)limit);
		if ((rc = ks__p_guard(p, "set-aside of a foreign segment")))
			break;
		rc = ks__p_quarantine_file(p, names[i], "foreign.");
		if (rc == -ENOENT)
			rc = 0;
	}
	sub_names_free(names, n);
	return rc;
}

void ks__p_report_damage(ks_partition *p, kseg *s, const char *why)
{
	char path[SUB_PATH_MAX];
	if (ks__p_seg_file(p, s, SEG_LOG, path, sizeof(path)))
		snprintf(path, sizeof(path), "%.3900s/%d-%lld", p->dir, (int)s->epoch, (long long)s->base);
	KLOG_ERR("storage", "%s: bytes [%llu, %llu) are damaged (%s): offsets [%lld, %lld) cannot be "
		 "read and are answered CORRUPT_MESSAGE; nothing is truncated or deleted", path,
		 (unsigned long long)s->dpos_lo, (unsigned long long)s->dpos_hi, why ? why : "damage",
		 (long long)s->dmg_lo, (long long)s->dmg_hi);
	KS_COUNT(p, corrupt_ranges, 1);
	KS_COUNT(p, corrupt_bytes, s->dpos_hi > s->dpos_lo ? s->dpos_hi - s->dpos_lo : 0);
	if (s->quarantined || !may_move(p))
		return;
	/* The log first: once it is aside, the segment is read from there. */
	for (int k = 0; k < SEG_NKINDS; k++) {
		char file[SUB_PATH_MAX];
		if (ks__seg_path_g(file, sizeof(file), "", s->epoch, s->base, s->gen, k))
			continue;
		const char *leaf = file[0] == '/' ? file + 1 : file;
		int rc = ks__p_quarantine_file(p, leaf, "");
		if (k == SEG_LOG) {
			if (rc) {
				KLOG_ERR("storage", "%s: could not move it into %s/: %s", path,
					 QUARANTINE_DIR, sub_strerror(rc));
				return;
			}
			s->quarantined = 1;
		}
	}
}

/* ---- verifying --------------------------------------------------------------------- */

int ks__seg_verify(sub_file *f, uint64_t pos, int64_t off, uint64_t end, int64_t limit,
		   int64_t budget, uint64_t *clean_end, int64_t *next_off, kdamage *d)
{
	seg_iter it;
	kb_hdr h;
	uint64_t bpos;
	size_t buf = 64 * 1024;
	if (budget > 0 && (uint64_t)budget < buf)
		buf = budget < 4096 ? 4096 : (size_t)budget;
	ks__seg_iter_init(&it, f, pos, end, 1, buf);
	*clean_end = pos;
	*next_off = off;
	int64_t done = 0, rc;
	for (;;) {
		if (budget > 0 && done >= budget) {
			rc = 0;
			break;
		}
		rc = ks__seg_iter_next(&it, &h, &bpos);
		if (rc < 0)
			break;
		if (rc == 1 && h.base_offset == off && kb_last_offset(&h) < limit) {
			off = kb_last_offset(&h) + 1;
			*clean_end = bpos + kb_size(&h);
			*next_off = off;
			done += kb_size(&h);
			continue;
		}
		if (rc == 1 && h.base_offset == off) {
			rc = 0; /* the next live segment begins: the end */
			break;
		}
		if (rc == 0 && !it.crc_bad && it.why &&
		    (it.pos >= end || strncmp(it.why, "truncated batch", 15) == 0)) {
			/* The end of the range asked for (a batch it cuts is
			 * verified when a walk covers it whole). */
			rc = 0;
			break;
		}
		if (rc == 0 && it.crc_bad && h.base_offset == off && kb_last_offset(&h) < limit) {
			*d = (kdamage){off, kb_last_offset(&h) + 1, bpos, bpos + kb_size(&h), it.why};
		} else {
			*d = (kdamage){off, limit, it.pos, end > it.pos ? end : it.pos + 1,
				       rc == 1 ? "offset gap" : it.why};
		}
		rc = 1;
		break;
	}
	ks__seg_iter_free(&it);
	return (int)rc;
}

/* ---- the background scrub ------------------------------------------------------------ */

void ks_scrub_rate_init(ks_scrub_rate *r, int64_t bytes_per_sec, int64_t now_ms)
{
	r->bytes_per_sec = bytes_per_sec > 0 ? bytes_per_sec : 1;
	r->tokens = 0;
	r->last_ms = now_ms;
}

static void refill(ks_scrub_rate *r, int64_t now_ms)
{
	int64_t dt = now_ms - r->last_ms;
	if (dt <= 0)
		return;
	if (dt > 2000)
		dt = 2000;
	int64_t add = r->bytes_per_sec * dt / 1000;
	if (add == 0)
		return; /* less than a byte's worth: wait for more time */
	r->tokens += add;
	r->last_ms = now_ms;
	if (r->tokens > r->bytes_per_sec)
		r->tokens = r->bytes_per_sec; /* at most a second banked */
}

int64_t ks_partition_scrub(ks_partition *p, ks_scrub_rate *rate, int64_t now_ms, int *pass_done)
{
	*pass_done = 0;
	refill(rate, now_ms);
	ks__p_lock(p);
	int64_t verified = 0;
	int rc = 0;
	if (p->state != KAAS_PART_LEADER) {
		rc = -EPERM;
		goto out;
	}
	while (rate->tokens > 0 && !p->scrubbing) {
		/* The first sealed segment at or after the cursor. */
		int64_t from = p->scrub_base < 0 ? INT64_MIN : p->scrub_base;
		size_t i = 0;
		while (i + 1 < p->nsegs && p->segs[i]->base < from)
			i++;
		if (i + 1 >= p->nsegs) {
			/* Past the last sealed segment: a pass is complete. */
			if (p->scrub_base >= 0) {
				KS_COUNT(p, scrub_passes, 1);
				*pass_done = 1;
			}
			p->scrub_base = -1;
			break;
		}
		kseg *s = p->segs[i];
		if (s->base != p->scrub_base) {
			p->scrub_base = s->base;
			p->scrub_pos = 0;
			p->scrub_off = s->base;
		}
		if ((rc = ks__p_seg_load(p, i, INT64_MAX)) || (rc = ks__p_seg_open_log(p, s, 0)))
			break;
		int64_t limit = p_seg_limit(p, i);
		int damaged = s->dmg_hi > s->dmg_lo;
		if (damaged && p->scrub_pos >= s->dpos_lo && p->scrub_pos < s->dpos_hi) {
			/* Known damage: go on after it (past the end when the walk
			 * cannot resume there). */
			p->scrub_pos = s->dpos_hi;
			p->scrub_off = s->dmg_hi;
		}
		uint64_t end = s->end_pos;
		if (damaged && p->scrub_pos < s->dpos_lo && end > s->dpos_lo)
			end = s->dpos_lo;
		if (p->scrub_pos >= end || p->scrub_off >= limit) {
			/* On to the next segment.  Its base may be exactly s->base + 1
			 * (a segment of one record): start it at its beginning here,
			 * since the reset above only runs when the bases differ. */
			p->scrub_base = s->base + 1;
			p->scrub_pos = 0;
			p->scrub_off = s->base + 1;
			continue;
		}
		uint64_t pos = p->scrub_pos, clean;
		int64_t off = p->scrub_off, next;
		kdamage d;
		ks__seg_ref(s);
		p->scrubbing = 1;
		ks__p_unlock(p);
		int v = ks__seg_verify(s->log, pos, off, end, limit, rate->tokens, &clean, &next, &d);
		ks__p_lock(p);
		p->scrubbing = 0;
		int64_t n = (int64_t)(clean - pos);
		rate->tokens -= n;
		verified += n;
		KS_COUNT(p, scrubbed_bytes, (uint64_t)n);
		int mine = p->scrub_base == s->base; /* the cursor did not move meanwhile */
		if (v < 0) {
			ks__seg_unref(s);
			rc = v;
			break;
		}
		if (v == 1) {
			if (ks__seg_add_damage(s, d.lo, d.hi, d.plo, d.phi))
				ks__p_report_damage(p, s, d.why);
			if (mine) {
				p->scrub_pos = d.phi;
				p->scrub_off = d.hi;
			}
		} else if (mine) {
			p->scrub_pos = clean;
			p->scrub_off = next;
			if (rate->tokens > 0 && clean < end && !(damaged && clean == s->dpos_lo))
				p->scrub_base = s->base + 1; /* the valid batches end here */
		}
		ks__seg_unref(s);
	}
out:
	ks__p_unlock(p);
	return rc ? rc : verified;
}
