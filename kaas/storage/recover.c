/*
 * recover.c — take-over: a new leader lists the directory, recovers the
 * tail from the manifest's checkpoint on (CRC walk, holes cut off) unless
 * the old leader's relinquish record vouches for it, restores producer
 * state (snapshot, then the log after it), rolls a segment of its own epoch
 * and removes strays no live reader needs.
 *
 * Nothing here ever rewrites or truncates a file of another epoch: the
 * name of the segment the new leader rolls is what records where the old
 * one's valid data ends.  Nothing here touches a file of a higher epoch
 * either: one found means a newer leader owns the partition, and the
 * take-over is abandoned.  Every step that changes the volume is preceded
 * by ks__p_guard (the caller's lease and assignment, the directory listed
 * again), because the checks at the start may be long stale by then (a
 * paused process, a volume that hung).
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

/* ---- the guard ------------------------------------------------------------------ */

int ks__p_abandon(ks_partition *p, int rc, const char *fmt, ...)
{
	KS__P_LOCKED(p);
	if (p->tk_abandoned)
		return p->tk_abandoned;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	KLOG_WARN("storage", "%s: abandoning the take-over at epoch %d: %s; stepping down, nothing moved",
		  p->dir, (int)p->tk_epoch, msg);
	KS_COUNT(p, takeovers_abandoned, 1);
	p->tk_abandoned = rc;
	return rc;
}

/* The highest epoch a segment file in the directory is named with, among
 * those that can have been issued (-1: none). */
static int newest_named(ks_partition *p, int32_t *newest)
{
	char **names = NULL;
	size_t n = 0;
	*newest = -1;
	int rc = sub_list(p->vfs, p->dir, &names, &n);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		int32_t e;
		int64_t b, g;
		if (ks__seg_parse_name_g(names[i], &e, &b, &g) >= 0 && e > *newest && e <= p->tk_limit)
			*newest = e;
	}
	sub_names_free(names, n);
	return 0;
}

int ks__p_guard(ks_partition *p, const char *step)
{
	KS__P_LOCKED(p);
	if (!p->recovering)
		return 0;
	if (p->tk_abandoned)
		return p->tk_abandoned;
	int32_t e = p->tk_epoch, newest;
	if (p->guard) {
		int32_t ceiling = -1;
		int rc = p->guard(p->guard_arg, e, step, &ceiling);
		if (rc)
			return ks__p_abandon(p, rc, "before the %s the leadership check failed (%s)", step,
					     sub_strerror(rc));
		if (ceiling > e)
			return ks__p_abandon(p, -ESTALE, "before the %s: epoch %d has been issued since", step,
					     (int)ceiling);
	}
	int rc = newest_named(p, &newest);
	if (rc)
		return rc;
	if (newest > e)
		return ks__p_abandon(p, -ESTALE, "before the %s: a segment of epoch %d appeared (a newer leader)",
				     step, (int)newest);
	return 0;
}

/* Replays producer batches of [from, p->leo) into p->prod. */
static int replay_producers(ks_partition *p, int64_t from)
{
	if (from >= p->leo || p->nsegs == 0)
		return 0;
	size_t i = ks__p_seg_find(p, from);
	int rc = 0;
	for (; i < p->nsegs && rc == 0; i++) {
		kseg *s = p->segs[i];
		if ((rc = ks__p_seg_load(p, i, INT64_MAX)))
			break;
		if (s->end_off <= from)
			continue;
		uint64_t pos;
		int64_t eoff;
		ks__seg_ix_lookup(s, from, &pos, &eoff);
		seg_iter it;
		kb_hdr h;
		uint64_t bpos;
		ks__seg_iter_init(&it, s->log, pos, s->end_pos, 0, 64 * 1024);
		while ((rc = ks__seg_iter_next(&it, &h, &bpos)) == 1) {
			if (h.base_offset >= s->end_off)
				break;
			if (kb_last_offset(&h) < from || h.pid < 0)
				continue;
			if (h.base_offset >= s->dmg_lo && h.base_offset < s->dmg_hi)
				continue; /* damaged: its producer fields are not to be trusted */
			kp_batch b = {h.base_seq, kb_seq_add(h.base_seq, h.last_delta), h.base_offset,
				      kb_last_offset(&h), h.max_ts};
			if ((rc = ks__kp_apply(&p->prod, h.pid, h.pepoch, &b)))
				break;
		}
		ks__seg_iter_free(&it);
		if (rc > 0)
			rc = 0;
	}
	return rc;
}

/* Restores producer state: the snapshot if it is intact and consistent with
 * the live log, then the log after it. */
static int restore_producers(ks_partition *p, int *rebuilt)
{
	char path[SUB_PATH_MAX], *buf = NULL;
	size_t len;
	int32_t sepoch = -1;
	int64_t soff = -1;
	const char *why = NULL;
	ks__kp_free(&p->prod);
	*rebuilt = 0;
	int rc = sub_join(path, sizeof(path), p->dir, SNAPSHOT_NAME);
	if (rc)
		return rc;
	rc = sub_read_file(p->vfs, path, 1u << 30, &buf, &len);
	if (rc == -ENOENT) {
		why = "missing";
	} else if (rc) {
		return rc;
	} else if (ks__kp_decode((uint8_t *)buf, len, &p->prod, &sepoch, &soff)) {
		why = "corrupt";
	} else if (sepoch > p->epoch && sepoch <= p->tk_limit) {
		/* A newer leader's: it owns the partition, and its snapshot. */
		free(buf);
		ks__kp_free(&p->prod);
		return ks__p_abandon(p, -ESTALE, "%s/%s is of epoch %d (a newer leader)", p->dir, SNAPSHOT_NAME,
				     (int)sepoch);
	} else if (sepoch > p->epoch) {
		/* No leader that could have written it was ever issued. */
		why = "from a foreign epoch";
		ks__p_foreign(p, "%s/%s: producer snapshot of epoch %d, above %d: not obeyed", p->dir,
			      SNAPSHOT_NAME, (int)sepoch, (int)p->tk_limit);
		if ((rc = ks__p_guard(p, "set-aside of a foreign producer snapshot"))) {
			free(buf);
			ks__kp_free(&p->prod);
			return rc;
		}
		ks__p_quarantine_file(p, SNAPSHOT_NAME, "foreign.");
	} else if (soff > p->leo) {
		why = "ahead of the log";
	} else {
		/* Written by a leader whose log was later superseded past its offset
		 * (a zombie, or a leader whose tail was cut): not this log's state. */
		for (size_t i = 0; i < p->nsegs; i++)
			if (p->segs[i]->epoch > sepoch && p->segs[i]->base < soff)
				why = "from a fenced epoch";
	}
	free(buf);
	int64_t from = soff;
	if (why) {
		if (rc != -ENOENT)
			KLOG_WARN("storage", "%s: producer snapshot %s; rebuilding from the log", p->dir, why);
		ks__kp_free(&p->prod);
		from = p->log_start;
		*rebuilt = 1;
	}
	if (from < p->log_start)
		from = p->log_start;
	if ((rc = replay_producers(p, from)))
		return rc;
	ks__kp_evict(&p->prod, p->log_start, INT64_MIN);
	return 0;
}

/* Creates (or, for a leftover of our own epoch, reuses) the segment
 * <epoch>-<leo> and makes it the active one. */
static int create_active(ks_partition *p)
{
	kseg *s = NULL;
	int reuse = 0, rc = 0;
	if (p->nsegs) {
		kseg *last = p->segs[p->nsegs - 1];
		if (last->base == p->leo) {
			/* The newest segment has no valid batch.  Ours from an earlier
			 * attempt: reuse; an older epoch's: it becomes a zombie. */
			if (last->epoch == p->epoch) {
				s = last;
				reuse = 1;
			} else {
				p->nsegs--;
				ks__seg_unref(last);
			}
		}
	}
	if (!s) {
		s = ks__seg_new(p->epoch, p->leo);
		if (!s)
			return -ENOMEM;
	}
	ks__seg_close_files(s);
	/* The index files are written later, when they have entries (roll,
	 * checkpoint, relinquish); a leftover of an earlier attempt is cut. */
	for (int k = SEG_LOG; k <= SEG_TIMEINDEX && rc == 0; k++) {
		char path[SUB_PATH_MAX];
		sub_file *f = NULL;
		if ((rc = ks__seg_path(path, sizeof(path), p->dir, s->epoch, s->base, k)))
			break;
		if (k == SEG_LOG)
			rc = sub_open(p->vfs, path, O_RDWR | O_CREAT | O_EXCL, 0644, &f);
		if (k != SEG_LOG || rc == -EEXIST) {
			/* Only ever our own epoch's leftover without valid data;
			 * still a change to the volume, so asked first.  (The
			 * exclusive create above is not: an empty segment of our
			 * epoch is a zombie beside any newer leader's.) */
			rc = sub_open(p->vfs, path, O_RDWR, 0, &f);
			if (rc == 0)
				rc = ks__p_guard(p, "truncation of a leftover of our own epoch");
			if (rc == 0)
				rc = sub_ftruncate(f, 0);
			if (rc == -ENOENT && k != SEG_LOG)
				rc = 0;
		}
		if (k == SEG_LOG)
			s->log = f;
		else
			sub_close(f);
	}
	if (rc) {
		if (!reuse)
			ks__seg_unref(s);
		return rc;
	}
	s->active = 1;
	s->meta = 1;
	s->end_pos = 0;
	s->synced_pos = 0;
	s->idx_dirty = 0;
	s->ix_written = s->tx_written = 0;
	s->dmg_lo = s->dmg_hi = 0;
	s->end_off = s->base;
	s->max_ts = -1;
	s->nix = s->ntx = 0;
	s->since_ix = 0;
	s->first_append_ms = 0;
	if (!reuse) {
		seglist l = {p->segs, p->nsegs, p->capsegs};
		if ((rc = ks__seglist_push(&l, s))) {
			ks__seg_unref(s);
			return rc;
		}
		p->segs = l.v;
		p->nsegs = l.n;
		p->capsegs = l.cap;
	}
	p->dir_dirty = 1;
	return 0;
}

/* Removes what no live reader needs: zombie segments, index files without
 * a log, temp files of interrupted metadata writes.  Best effort, but the
 * guard is asked first: a temp file may be a newer leader's write in
 * progress.  Returns only the guard's refusal. */
static int remove_strays(ks_partition *p, int temps)
{
	char **names = NULL;
	size_t n = 0;
	int guarded = 0, grc = 0;
	if (sub_list(p->vfs, p->dir, &names, &n))
		return 0;
	for (size_t i = 0; i < n; i++) {
		int32_t e;
		int64_t b, g;
		int kind = ks__seg_parse_name_g(names[i], &e, &b, &g);
		int drop = 0;
		if (kind >= 0 && g > 0) {
			drop = ks__p_clean_garbage(p, e, b, g); /* superseded or never swapped in */
		} else if (kind >= 0) {
			if (e > p->epoch)
				continue; /* a newer leader's: never ours to touch */
			size_t j = ks__p_seg_find(p, b);
			drop = !(p->nsegs && p->segs[j]->base == b && p->segs[j]->epoch == e && p->segs[j]->gen == 0);
			if (drop && p->clean.state < 0 && p->nsegs && b < p->segs[0]->base)
				drop = 0; /* clean.json unreadable: keep what it may have replaced */
			/* Keep anything at or past our log end we do not know: only
			 * possible for zombies (lower epoch), which go. */
		} else if (temps && names[i][0] == '.' && strstr(names[i], ".tmp.")) {
			drop = 1;
		}
		if (drop && !guarded) {
			guarded = 1;
			grc = ks__p_guard(p, "removal of zombie and temporary files");
		}
		if (grc)
			break;
		if (drop) {
			char path[SUB_PATH_MAX];
			if (sub_join(path, sizeof(path), p->dir, names[i]) == 0) {
				int rc = sub_unlink(p->vfs, path);
				if (rc && rc != -ENOENT)
					KLOG_WARN("storage", "%s: removing %s: %s", p->dir, names[i],
						  sub_strerror(rc));
			}
		}
	}
	sub_names_free(names, n);
	return grc;
}

/* The producer snapshot's offset when it can serve as a durable point:
 * every writer of a snapshot (the flush after a roll, relinquish, a
 * take-over) fsynced the log below its offset first.  -1 when unusable.
 * *newer: the snapshot is a newer leader's (epoch above ours, one that
 * can have been issued). */
static int64_t snapshot_point(ks_partition *p, int32_t epoch, int32_t *newer)
{
	*newer = -1;
	char path[SUB_PATH_MAX], *buf = NULL;
	size_t len;
	int32_t sepoch = -1;
	int64_t soff = -1;
	kp_table t;
	memset(&t, 0, sizeof(t));
	if (sub_join(path, sizeof(path), p->dir, SNAPSHOT_NAME) ||
	    sub_read_file(p->vfs, path, 1u << 30, &buf, &len))
		return -1;
	int bad = ks__kp_decode((uint8_t *)buf, len, &t, &sepoch, &soff);
	ks__kp_free(&t);
	free(buf);
	if (!bad && sepoch > epoch && sepoch <= p->tk_limit)
		*newer = sepoch;
	if (bad || sepoch > epoch)
		return -1;
	for (size_t i = 0; i < p->nsegs; i++)
		if (p->segs[i]->epoch > sepoch && p->segs[i]->base < soff)
			return -1; /* its writer was superseded below its offset */
	return soff;
}

/* Moves segments i.. (written after a torn point, never acknowledged: the
 * group commit syncs segments in log order) out of the log into the
 * quarantine area, so that no later leader mistakes them for live. */
static int set_aside_tail(ks_partition *p, size_t i)
{
	while (p->nsegs > i) {
		kseg *d = p->segs[p->nsegs - 1];
		int g = ks__p_guard(p, "set-aside of a torn tail");
		if (g)
			return g;
		for (int k = 0; k < SEG_NKINDS; k++) {
			char path[SUB_PATH_MAX];
			int rc = ks__p_seg_file(p, d, k, path, sizeof(path));
			if (rc)
				return rc;
			if (d->quarantined)
				continue; /* already aside, and known damaged */
			rc = ks__p_quarantine_file(p, strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
						   "tail.");
			if (rc && rc != -ENOENT)
				return rc;
		}
		p->nsegs--;
		ks__seg_unref(d);
	}
	return 0;
}

/* A re-take of a leadership of ours that ended by an I/O failure (a failed
 * fsync, write or relinquish) recovers the log only up to that
 * leadership's durable offset.  Everything it wrote past it was answered
 * with an error — KAFKA_STORAGE_ERROR, which clients take for "not
 * written": librdkafka may then send it again under a bumped producer
 * epoch, which no producer state can recognise — and after a failed fsync
 * the bytes this engine reads back may be only in the client's cache
 * (fsyncgate).  So the segment that held the durable offset ends there,
 * the way every later segment's base ends its predecessor: a segment of
 * our epoch is created at the cut before the walk, and segments wholly
 * past it are set aside into quarantine/, not deleted.  Not when a newer
 * epoch has written since (its take-over decided where our log ends). */
static int cut_own_failed_tail(ks_partition *p, int32_t live_maxe, int64_t *ck)
{
	int64_t cut = p->retake_cut;
	if (cut < 0 || live_maxe > p->retake_cut_epoch || cut < p->log_start || p->nsegs == 0 ||
	    cut < p->segs[0]->base)
		return 0;
	size_t j = 0;
	while (j < p->nsegs && p->segs[j]->base < cut)
		j++;
	if (j + 1 == p->nsegs && p->segs[j]->base == cut && p->segs[j]->disk_size == 0)
		j++; /* an empty segment at the cut holds nothing: create_active takes it */
	KLOG_WARN("storage", "%s: re-taking after a failed leadership: the log ends at its durable "
		  "offset %lld (what it wrote later was answered with an error)%s", p->dir,
		  (long long)cut, j < p->nsegs ? "; later segments set aside" : "");
	int rc = set_aside_tail(p, j);
	if (rc)
		return rc;
	if (*ck > cut)
		*ck = cut; /* a snapshot a later fsync wrote describes the cut-off tail */
	p->leo = cut;
	return create_active(p);
}

/* The relinquish record of the manifest, checked against the files: may
 * this take-over trust it instead of scanning the tail?  It must name the
 * epoch taken over from (the caller's, when it knows one; else the newest
 * on the volume), no file of a higher epoch may exist, and the newest
 * live segment must be the record's, exactly as long as the record says.
 * NULL when it matches, else why not (for the log). */
static const char *record_mismatch(const ks_partition *p, int32_t epoch, int32_t from, int32_t maxe)
{
	const kmanifest *m = &p->man;
	if (!m->valid || !m->rel)
		return "no relinquish record";
	if (m->rel_epoch >= epoch)
		return "the record is not from an older epoch";
	if (from > 0 && m->rel_epoch != from)
		return "the record names another epoch than the one taken over from";
	if (maxe != m->rel_epoch)
		return "a segment of another epoch is the newest";
	if (p->clean.state < 0 || (p->clean.state == 1 && p->clean.epoch > m->rel_epoch))
		return "clean.json is unreadable or newer than the record";
	if (p->retake_cut >= 0 && p->retake_cut_epoch >= m->rel_epoch)
		return "a failed leadership of this engine ends the log";
	if (p->nsegs == 0)
		return "no segment";
	const kseg *a = p->segs[p->nsegs - 1];
	if (a->epoch != m->rel_epoch || a->base != m->rel_seg_base || a->gen != 0 || a->quarantined)
		return "the newest segment is not the record's";
	if (a->disk_size != (uint64_t)m->rel_seg_bytes)
		return "the active segment's size differs from the record";
	if (m->rel_end - a->base > m->rel_seg_bytes)
		return "the end offset is beyond what the segment can hold";
	return NULL;
}

/* The scan: the last durable point, the tail walked from there (holes set
 * aside), everything recovered fsynced.  Sets p->log_start and p->leo. */
static int scan_tail(ks_partition *p, int32_t epoch)
{
	/* The last durable point: every offset below it was fsynced before
	 * something recorded it.  Candidates: the first offset of the newest
	 * epoch (its take-over synced all below), the manifest's checkpoint
	 * when the manifest is at least that new, and the producer snapshot's
	 * offset.  Each is a number from the volume: one beyond what the
	 * segments can physically hold (one offset per byte) is refused. */
	int rc;
	int32_t live_maxe = -1;
	for (size_t i = 0; i < p->nsegs; i++)
		if (p->segs[i]->epoch > live_maxe)
			live_maxe = p->segs[i]->epoch;
	int64_t phys = INT64_MAX;
	if (p->nsegs) {
		const kseg *last = p->segs[p->nsegs - 1];
		phys = last->base + (int64_t)(last->disk_size < (uint64_t)KB_OFFSET_MAX ? last->disk_size
											: (uint64_t)KB_OFFSET_MAX);
	}
	int stale_manifest = p->man.valid && p->man.epoch < live_maxe;
	if (p->man.valid && p->man.hw > phys) {
		ks__p_foreign(p, "%s/%s: high_watermark %lld is beyond what the segments can hold "
			      "(%lld): the manifest is ignored", p->dir, MANIFEST_NAME,
			      (long long)p->man.hw, (long long)phys);
		memset(&p->man, 0, sizeof(p->man));
		stale_manifest = 0;
	}
	int64_t ck = 0;
	for (size_t i = 0; i < p->nsegs; i++)
		if (p->segs[i]->epoch == live_maxe) {
			ck = p->segs[i]->base;
			break;
		}
	if (p->man.valid && !stale_manifest && p->man.hw > ck)
		ck = p->man.hw;
	int32_t newer;
	int64_t soff = snapshot_point(p, epoch, &newer);
	if (newer > epoch)
		return ks__p_abandon(p, -ESTALE, "%s/%s is of epoch %d (a newer leader)", p->dir, SNAPSHOT_NAME,
				     (int)newer);
	if (soff > phys) {
		ks__p_foreign(p, "%s/%s: offset %lld is beyond what the segments can hold (%lld)", p->dir,
			      SNAPSHOT_NAME, (long long)soff, (long long)phys);
		soff = -1;
	}
	if (soff > ck)
		ck = soff;
	/* The cleaner cleans only below the high watermark: everything below
	 * its clean_end was durable when clean.json was written. */
	if (p->clean.state == 1 && p->clean.clean_end <= phys && p->clean.clean_end > ck)
		ck = p->clean.clean_end;
	p->log_start = p->man.valid ? p->man.log_start : 0;
	/* A stale manifest's writer was superseded where the newest epoch
	 * begins: above that its offsets named other records, so its log
	 * start counts only up to there. */
	if (stale_manifest) {
		int64_t newest = 0;
		for (size_t i = 0; i < p->nsegs; i++)
			if (p->segs[i]->epoch == live_maxe) {
				newest = p->segs[i]->base;
				break;
			}
		if (p->log_start > newest)
			p->log_start = newest;
	}
	if (p->nsegs && p->segs[0]->base > p->log_start)
		p->log_start = p->segs[0]->base;
	if ((rc = cut_own_failed_tail(p, live_maxe, &ck)))
		return rc;
	int64_t from = ck > p->log_start ? ck : p->log_start;

	/* Recover the tail only: from the segment holding the durable point
	 * onwards.  Sealed segments below it are not read here; damage in
	 * them (or below the point in this one) is corruption, found where
	 * the log is read, never a reason to cut the log. */
	p->durable_floor = ck;
	p->leo = p->nsegs ? p->segs[0]->base : 0;
	size_t i0 = p->nsegs ? ks__p_seg_find(p, from) : 0;
	for (size_t i = i0; i < p->nsegs; i++) {
		kseg *s = p->segs[i];
		if ((rc = ks__p_seg_load(p, i, i == i0 ? from : s->base)))
			return rc;
		int64_t limit = p_seg_limit(p, i);
		p->leo = s->end_off;
		if (limit != INT64_MAX && s->end_off < limit) {
			/* A hole at or above the durable point: the torn tail.
			 * Nothing after it was ever acknowledged (flushes sync
			 * segments in order); it is set aside, not deleted. */
			KLOG_WARN("storage", "%s: segment %d-%lld ends at offset %lld before the next "
				  "segment's base %lld; %zu later segment(s) set aside in %s/", p->dir,
				  (int)s->epoch, (long long)s->base, (long long)s->end_off,
				  (long long)limit, p->nsegs - i - 1, QUARANTINE_DIR);
			if ((rc = set_aside_tail(p, i + 1)))
				return rc;
			break;
		}
	}
	if (p->tk_abandoned)
		return p->tk_abandoned; /* the guard refused a quarantine during the walk */
	if (p->nsegs == 0)
		p->leo = p->man.valid ? (p->man.hw > p->log_start ? p->man.hw : p->log_start) : 0;
	if (p->leo < p->log_start) {
		/* Everything left is below the log start: the log goes on from
		 * there; the files stay (retention removes what is below). */
		p->leo = p->log_start;
	}
	if (ck > p->leo)
		KLOG_ERR("storage", "%s: the %s records offset %lld as durable but the log ends "
			 "at %lld: the volume lost acknowledged writes (is fsync honest?)", p->dir,
			 ck == soff ? "producer snapshot" : "manifest", (long long)ck, (long long)p->leo);

	/* What we recovered becomes durable before we claim it as the HW. */
	for (size_t i = i0; i < p->nsegs; i++)
		if (p->segs[i]->log && (rc = sub_fsync(p->segs[i]->log)))
			return rc;
	return 0;
}

/* Over 100 lines by exception: the take-over sequence (newer and foreign
 * epochs, the relinquish record or the scan, producers, new segment,
 * manifest, strays) reads best as one list of steps. */
static int do_take_over(ks_partition *p, int32_t epoch, int32_t from)
{
	seglist all = {0};
	int32_t maxe, limit = p->tk_limit;
	int rc = ks__manifest_read(p->vfs, p->dir, &p->man);
	if (rc)
		return rc;
	if (p->man.valid && p->man.epoch > epoch && p->man.epoch <= limit)
		return ks__p_abandon(p, -ESTALE, "%s/%s is of epoch %d (a newer leader)", p->dir, MANIFEST_NAME,
				     (int)p->man.epoch);
	if (p->man.valid && p->man.epoch > limit) {
		ks__p_foreign(p, "%s/%s: epoch %d is above any issued (%d): not obeyed", p->dir,
			      MANIFEST_NAME, (int)p->man.epoch, (int)limit);
		if ((rc = ks__p_guard(p, "set-aside of a foreign manifest")))
			return rc;
		if ((rc = ks__p_quarantine_file(p, MANIFEST_NAME, "foreign.")) && rc != -ENOENT)
			return rc;
		memset(&p->man, 0, sizeof(p->man));
	}
	if (p->man.valid && p->topic_id[0] && p->man.topic_id[0] &&
	    strcmp(p->man.topic_id, p->topic_id))
		return -ESTALE;
	if ((rc = ks__p_quarantine_foreign(p, limit)))
		return rc;
	if ((rc = ks__p_list_segments(p, 1, &all, &maxe)))
		return rc;
	if (maxe > epoch) {
		ks__seglist_free(&all);
		return ks__p_abandon(p, -ESTALE, "a segment of epoch %d exists (a newer leader)", (int)maxe);
	}
	if (p->clean.state == 1 && p->clean.epoch > epoch) {
		if (p->clean.epoch <= limit) {
			ks__seglist_free(&all);
			return ks__p_abandon(p, -ESTALE, "%s/%s is of epoch %d (a newer leader)", p->dir, CLEAN_NAME,
					     (int)p->clean.epoch);
		}
		/* Not obeyed as an epoch; its segment list is still what the
		 * log is (the segments it replaced may be gone). */
		ks__p_foreign(p, "%s/%s: epoch %d is above any issued (%d): used for its segment list only",
			      p->dir, CLEAN_NAME, (int)p->clean.epoch, (int)limit);
	}
	if ((rc = ks__p_adopt_live(p, &all)))
		return rc;
	p->epoch = epoch;

	/* A planned hand-off: the old leader fsynced everything, wrote its
	 * producer snapshot at its log end and then this record; if the files
	 * are still the ones it describes there is nothing to recover. */
	const char *why = record_mismatch(p, epoch, from, maxe);
	if (!why) {
		p->log_start = p->man.log_start;
		if (p->nsegs && p->segs[0]->base > p->log_start)
			p->log_start = p->segs[0]->base;
		p->leo = p->man.rel_end > p->log_start ? p->man.rel_end : p->log_start;
		KS_COUNT(p, scans_skipped, 1);
		p->tk_trusted = p->man.rel_epoch;
	} else {
		if (p->man.valid && p->man.rel)
			KLOG_INFO("storage", "%s: relinquish record of epoch %d not used (%s): scanning the tail",
				  p->dir, (int)p->man.rel_epoch, why);
		if ((rc = scan_tail(p, epoch)))
			return rc;
	}
	/* From here on every offset below the log end is durable: a segment
	 * loaded later that ends short is damaged. */
	p->durable_floor = INT64_MAX;

	int rebuilt;
	if ((rc = restore_producers(p, &rebuilt)))
		return rc;
	if ((rc = create_active(p)))
		return rc;
	if ((rc = sub_fsync_dir(p->vfs, p->dir)))
		return rc;
	p->dir_dirty = 0;
	if ((rc = ks__p_guard(p, "manifest write")) || (rc = ks__p_write_manifest(p, p->leo, p->log_start)))
		return rc;
	p->hw = p->leo;
	p->hw_seg = p->segs[p->nsegs - 1]->base; /* the new active segment, empty */
	p->hw_pos = 0;
	if (rebuilt && p->leo > p->log_start) {
		/* A failed write fails the take-over like any other (it is
		 * re-driven); the snapshot is what relinquish would have left. */
		uint8_t *b;
		size_t len;
		if ((rc = ks__p_guard(p, "producer snapshot write")))
			return rc;
		if ((rc = ks__kp_encode(&p->prod, p->epoch, p->leo, &b, &len)))
			return rc;
		rc = ks__p_write_snapshot(p, b, len);
		free(b);
		if (rc)
			return rc;
	}
	return remove_strays(p, 1);
}

int ks_partition_take_over_after(ks_partition *p, int32_t epoch, const ks_failed_end *prev)
{
	ks_takeover_opts o = {.prev = prev};
	return ks_partition_take_over_opts(p, epoch, &o);
}

int ks_partition_take_over(ks_partition *p, int32_t epoch)
{
	return ks_partition_take_over_opts(p, epoch, NULL);
}

int ks_partition_take_over_bounded(ks_partition *p, int32_t epoch, int32_t ceiling)
{
	if (ceiling < epoch)
		return -EINVAL;
	ks_takeover_opts o = {.ceiling = ceiling};
	return ks_partition_take_over_opts(p, epoch, &o);
}

int ks_partition_take_over_opts(ks_partition *p, int32_t epoch, const ks_takeover_opts *o)
{
	static const ks_takeover_opts none;
	if (!o)
		o = &none;
	if (epoch < 0)
		return -EINVAL;
	int32_t ceiling = o->ceiling > epoch ? o->ceiling : epoch;
	ks__p_lock(p);
	const ks_failed_end *prev = o->prev;
	if (prev && prev->valid && prev->offset >= 0 && prev->epoch >= 0 && p->lead_gen == 0 &&
	    p->retake_cut < 0 && p->state == KAAS_PART_FOLLOWER) {
		p->retake_cut = prev->offset;
		p->retake_cut_epoch = prev->epoch;
	}
	if (p->state == KAAS_PART_LEADER && p->epoch == epoch) {
		ks__p_unlock(p);
		return 0;
	}
	if (p->state != KAAS_PART_FOLLOWER && epoch < p->epoch) {
		ks__p_unlock(p);
		return -ESTALE;
	}
	/* A leadership replaced without relinquish: its flushes fail (the
	 * producers retry and are deduplicated). */
	ks__p_drop_leadership(p, -EPERM);
	p->recovering = 1;
	p->guard = o->guard;
	p->guard_arg = o->guard_arg;
	p->tk_epoch = epoch;
	p->tk_limit = ceiling > KS_EPOCH_PLAUSIBLE ? ceiling : KS_EPOCH_PLAUSIBLE;
	p->tk_abandoned = 0;
	p->tk_trusted = -1;
	int rc = do_take_over(p, epoch, o->from_epoch);
	p->recovering = 0;
	p->guard = NULL;
	p->guard_arg = NULL;
	p->durable_floor = INT64_MAX;
	if (rc) {
		KLOG_WARN("storage", "%s: take over at epoch %d: %s", p->dir, (int)epoch, sub_strerror(rc));
		ks__p_drop_leadership(p, -EPERM);
		int32_t keep = p->epoch;
		ks__p_load_view(p);
		p->epoch = rc == -ESTALE ? keep : -1;
	} else {
		p->state = KAAS_PART_LEADER;
		p->lead_gen++;
		p->retake_cut = -1;
		p->retake_cut_epoch = -1;
		char how[96] = "";
		if (p->tk_trusted >= 0)
			snprintf(how, sizeof(how), " (relinquished by epoch %d: no recovery scan)", (int)p->tk_trusted);
		KLOG_INFO("storage", "%s: leader at epoch %d, log [%lld, %lld)%s", p->dir, (int)epoch,
			  (long long)p->log_start, (long long)p->leo, how);
	}
	ks__p_unlock(p);
	return rc;
}
