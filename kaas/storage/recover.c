/*
 * recover.c — take-over: a new leader lists the directory, recovers the
 * tail from the manifest's checkpoint on (CRC walk, holes cut off),
 * restores producer state (snapshot, then the log after it), rolls a
 * segment of its own epoch and removes strays no live reader needs.
 *
 * Nothing here ever rewrites or truncates a file of another epoch: the
 * name of the segment the new leader rolls is what records where the old
 * one's valid data ends.
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

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
	int reuse = 0;
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
	int rc = 0;
	for (int k = SEG_LOG; k <= SEG_TIMEINDEX && rc == 0; k++) {
		char path[SUB_PATH_MAX];
		sub_file **f = k == SEG_LOG ? &s->log : k == SEG_INDEX ? &s->idx : &s->tidx;
		if ((rc = ks__seg_path(path, sizeof(path), p->dir, s->epoch, s->base, k)))
			break;
		rc = sub_open(p->vfs, path, O_RDWR | O_CREAT | O_EXCL, 0644, f);
		if (rc == -EEXIST) {
			/* Only ever our own epoch's leftover without valid data. */
			rc = sub_open(p->vfs, path, O_RDWR, 0, f);
			if (rc == 0)
				rc = sub_ftruncate(*f, 0);
		}
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
 * a log, temp files of interrupted metadata writes.  Best effort. */
static void remove_strays(ks_partition *p, int temps)
{
	char **names = NULL;
	size_t n = 0;
	if (sub_list(p->vfs, p->dir, &names, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		int32_t e;
		int64_t b;
		int kind = ks__seg_parse_name(names[i], &e, &b);
		int drop = 0;
		if (kind >= 0) {
			if (e > p->epoch)
				continue; /* a newer leader's: never ours to touch */
			size_t j = ks__p_seg_find(p, b);
			drop = !(p->nsegs && p->segs[j]->base == b && p->segs[j]->epoch == e);
			/* Keep anything at or past our log end we do not know: only
			 * possible for zombies (lower epoch), which go. */
		} else if (temps && names[i][0] == '.' && strstr(names[i], ".tmp.")) {
			drop = 1;
		}
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
}

/* Over 100 lines by exception: the recovery sequence (checkpoint, tail walk,
 * hole cut, fsync, producers, new segment, manifest) reads best as one list
 * of steps, and it is being reworked as a whole (issue 9); splitting it
 * first would only move the same steps around twice. */
static int do_take_over(ks_partition *p, int32_t epoch)
{
	seglist all = {0};
	int32_t maxe;
	int rc = ks__manifest_read(p->vfs, p->dir, &p->man);
	if (rc)
		return rc;
	if (p->man.valid && p->man.epoch > epoch) {
		KLOG_WARN("storage", "%s: manifest is from epoch %d, newer than %d", p->dir,
			  (int)p->man.epoch, (int)epoch);
		return -ESTALE;
	}
	if (p->man.valid && p->topic_id[0] && p->man.topic_id[0] &&
	    strcmp(p->man.topic_id, p->topic_id))
		return -ESTALE;
	if ((rc = ks__p_list_segments(p, 1, &all, &maxe)))
		return rc;
	if (maxe > epoch) {
		ks__seglist_free(&all);
		KLOG_WARN("storage", "%s: a segment of epoch %d exists; cannot lead at %d", p->dir,
			  (int)maxe, (int)epoch);
		return -ESTALE;
	}
	if ((rc = ks__p_adopt_live(p, &all)))
		return rc;
	p->epoch = epoch;

	/* The checkpoint: offsets below it were durable when recorded. */
	int32_t live_maxe = -1;
	for (size_t i = 0; i < p->nsegs; i++)
		if (p->segs[i]->epoch > live_maxe)
			live_maxe = p->segs[i]->epoch;
	int stale_manifest = p->man.valid && p->man.epoch < live_maxe;
	int64_t ck = 0;
	if (p->man.valid && !stale_manifest) {
		ck = p->man.hw;
	} else {
		/* The latest leader fsynced everything below its first segment. */
		for (size_t i = 0; i < p->nsegs; i++)
			if (p->segs[i]->epoch == live_maxe) {
				ck = p->segs[i]->base;
				break;
			}
	}
	p->log_start = p->man.valid ? p->man.log_start : 0;
	/* A stale manifest's writer was superseded where the newest epoch
	 * begins (ck): above that its offsets named other records, so its log
	 * start counts only up to there. */
	if (stale_manifest && p->log_start > ck)
		p->log_start = ck;
	if (p->nsegs && p->segs[0]->base > p->log_start)
		p->log_start = p->segs[0]->base;
	int64_t from = ck > p->log_start ? ck : p->log_start;

	/* Recover every segment from the one holding the checkpoint onwards. */
	p->leo = p->nsegs ? p->segs[0]->base : 0;
	size_t i0 = p->nsegs ? ks__p_seg_find(p, from) : 0;
	for (size_t i = i0; i < p->nsegs; i++) {
		kseg *s = p->segs[i];
		if ((rc = ks__p_seg_load(p, i, i == i0 ? from : s->base)))
			return rc;
		int64_t limit = p_seg_limit(p, i);
		p->leo = s->end_off;
		if (limit != INT64_MAX && s->end_off < limit) {
			/* A hole: nothing after it was ever acknowledged as durable
			 * (flushes sync segments in order).  Remove what follows so a
			 * later leader of this same epoch cannot mistake it for live. */
			KLOG_WARN("storage", "%s: segment %d-%lld ends at offset %lld before the next "
				  "segment's base %lld; discarding %zu later segment(s)", p->dir,
				  (int)s->epoch, (long long)s->base, (long long)s->end_off,
				  (long long)limit, p->nsegs - i - 1);
			while (p->nsegs > i + 1) {
				kseg *d = p->segs[p->nsegs - 1];
				if ((rc = ks__p_unlink_seg(p, d->epoch, d->base)))
					return rc;
				p->nsegs--;
				ks__seg_unref(d);
			}
			break;
		}
	}
	if (p->nsegs == 0)
		p->leo = p->man.valid ? (p->man.hw > p->log_start ? p->man.hw : p->log_start) : 0;
	if (p->leo < p->log_start) {
		/* Everything left is below the log start: start empty there. */
		while (p->nsegs) {
			kseg *d = p->segs[p->nsegs - 1];
			if ((rc = ks__p_unlink_seg(p, d->epoch, d->base)))
				return rc;
			p->nsegs--;
			ks__seg_unref(d);
		}
		p->leo = p->log_start;
	}
	if (p->man.valid && !stale_manifest && p->man.hw > p->leo)
		KLOG_ERR("storage", "%s: the manifest records offset %lld as durable but the log ends "
			 "at %lld: the volume lost acknowledged writes (is fsync honest?)", p->dir,
			 (long long)p->man.hw, (long long)p->leo);

	/* What we recovered becomes durable before we claim it as the HW. */
	for (size_t i = i0; i < p->nsegs; i++)
		if (p->segs[i]->log && (rc = sub_fsync(p->segs[i]->log)))
			return rc;

	int rebuilt;
	if ((rc = restore_producers(p, &rebuilt)))
		return rc;
	if ((rc = create_active(p)))
		return rc;
	if ((rc = sub_fsync_dir(p->vfs, p->dir)))
		return rc;
	p->dir_dirty = 0;
	if ((rc = ks__p_write_manifest(p, p->leo, p->log_start)))
		return rc;
	p->hw = p->leo;
	p->hw_seg = p->segs[p->nsegs - 1]->base; /* the new active segment, empty */
	p->hw_pos = 0;
	if (rebuilt && p->leo > p->log_start) {
		/* A failed write fails the take-over like any other (it is
		 * re-driven); the snapshot is what relinquish would have left. */
		uint8_t *b;
		size_t len;
		if ((rc = ks__kp_encode(&p->prod, p->epoch, p->leo, &b, &len)))
			return rc;
		rc = ks__p_write_snapshot(p, b, len);
		free(b);
		if (rc)
			return rc;
	}
	remove_strays(p, 1);
	return 0;
}

int ks_partition_take_over(ks_partition *p, int32_t epoch)
{
	if (epoch < 0)
		return -EINVAL;
	ks__p_lock(p);
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
	int rc = do_take_over(p, epoch);
	if (rc) {
		KLOG_WARN("storage", "%s: take over at epoch %d: %s", p->dir, (int)epoch, sub_strerror(rc));
		ks__p_drop_leadership(p, -EPERM);
		int32_t keep = p->epoch;
		ks__p_load_view(p);
		p->epoch = rc == -ESTALE ? keep : -1;
	} else {
		p->state = KAAS_PART_LEADER;
		p->lead_gen++;
		KLOG_INFO("storage", "%s: leader at epoch %d, log [%lld, %lld)", p->dir, (int)epoch,
			  (long long)p->log_start, (long long)p->leo);
	}
	ks__p_unlock(p);
	return rc;
}
