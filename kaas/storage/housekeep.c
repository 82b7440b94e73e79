/*
 * housekeep.c — what the leader does besides appending: DeleteRecords,
 * retention by time and size, time-based rolls, the manifest checkpoint,
 * removal of zombie and stray files.  All unlinks happen here, on the
 * leader, the only holder of descriptors, so deletes free space on NFS
 * instead of leaving .nfsXXXX files behind.
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/clock.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

int ks_partition_delete_records(ks_partition *p, int64_t offset, int64_t *low_watermark,
				  int16_t *error)
{
	int rc = 0;
	*error = KERR_NONE;
	ks__p_lock(p);
	*low_watermark = p->log_start;
	if (p->state != KAAS_PART_LEADER) {
		*error = ks__p_kerr(ks__p_unfit(p));
		goto out;
	}
	if (offset == -1)
		offset = p->hw;
	if (offset < 0 || offset > p->hw) {
		*error = KERR_OFFSET_OUT_OF_RANGE;
		goto out;
	}
	if (offset <= p->log_start)
		goto out;
	/* Persisted before it is acknowledged; a newer leader's existence
	 * means this write must not happen. */
	if ((rc = ks__p_fence_check(p))) {
		*error = ks__p_fail(p, "directory listing", rc);
		goto out;
	}
	if ((rc = ks__p_write_manifest(p, p->hw, offset))) {
		ks__p_poison(p, "manifest write", rc);
		*error = KERR_KAFKA_STORAGE_ERROR;
		goto out;
	}
	p->log_start = offset;
	*low_watermark = offset;
	ks__kp_evict(&p->prod, p->log_start, INT64_MIN);
	/* Whole segments below the new start go now (retried by housekeeping). */
	while (p->nsegs > 1 && p->segs[1]->base <= p->log_start)
		ks__p_delete_seg(p, 0);
out:
	ks__p_unlock(p);
	return rc;
}

/* Removes segment files the live list does not name (zombies, leftovers of
 * interrupted deletes, index files without a log).  Sees a newer epoch's
 * files too: then we are fenced. */
static int sweep(ks_partition *p)
{
	char **names = NULL;
	size_t n = 0;
	int rc = sub_list(p->vfs, p->dir, &names, &n);
	if (rc)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		int32_t e;
		int64_t b, g;
		if (ks__seg_parse_name_g(names[i], &e, &b, &g) < 0)
			continue;
		if (e > p->epoch && g == 0) {
			KLOG_WARN("storage", "%s: %s belongs to a newer leader: fenced", p->dir, names[i]);
			ks__p_fence(p);
			rc = -ESTALE;
			break;
		}
		if (g > 0 && !ks__p_clean_garbage(p, e, b, g))
			continue;
		size_t j = ks__p_seg_find(p, b);
		if (g == 0 && p->nsegs && p->segs[j]->base == b && p->segs[j]->epoch == e && p->segs[j]->gen == 0)
			continue;
		if (g == 0 && p->clean.state < 0 && b < p->segs[0]->base)
			continue; /* clean.json unreadable: what it replaced may be the only copy */
		char path[SUB_PATH_MAX];
		if (sub_join(path, sizeof(path), p->dir, names[i]) == 0) {
			int u = sub_unlink(p->vfs, path);
			if (u && u != -ENOENT)
				KLOG_WARN("storage", "%s: removing %s: %s", p->dir, names[i], sub_strerror(u));
		}
	}
	sub_names_free(names, n);
	return rc;
}

static uint64_t seg_bytes(const kseg *s)
{
	return s->meta ? s->end_pos : s->disk_size;
}

/* Retention: only whole segments, oldest first, wholly durable.  How many
 * go (*ndel) and the log start after them. */
static int retention_cut(ks_partition *p, int64_t now_ms, int64_t *new_start, size_t *ndel)
{
	const ks_log_config *c = &p->cfg;
	uint64_t total = 0;
	*new_start = p->log_start;
	*ndel = 0;
	for (size_t i = 0; i < p->nsegs; i++)
		total += seg_bytes(p->segs[i]);
	for (size_t i = 0; i + 1 < p->nsegs; i++) {
		kseg *s = p->segs[i];
		int64_t next = p->segs[i + 1]->base;
		if (next > p->hw)
			break;
		int del = next <= p->log_start;
		if (!del && c->retention_ms >= 0) {
			int rc = ks__p_seg_load(p, i, INT64_MAX);
			if (rc)
				return rc;
			int64_t ts = s->max_ts;
			sub_stat st;
			/* No record timestamps: the file's age, as Kafka does. */
			if (ts < 0 && s->log && sub_fstat(s->log, &st) == 0)
				ts = st.mtime_ns / 1000000;
			del = ts >= 0 && now_ms - ts > c->retention_ms;
		}
		if (!del && c->retention_bytes >= 0 &&
		    total - seg_bytes(s) >= (uint64_t)c->retention_bytes &&
		    total > (uint64_t)c->retention_bytes)
			del = 1;
		if (!del)
			break;
		total -= seg_bytes(s);
		*new_start = next > *new_start ? next : *new_start;
		(*ndel)++;
	}
	return 0;
}

/* Rewrites the manifest's checkpoint; any failure poisons. */
/* Descriptors only where they pay: the logs of a partition nobody appended
 * to or read for idle_close_ms are closed, and reopened on demand (by the
 * leader only, like every open).  A log with unsynced bytes, or one a read
 * plan, a flush or the scrub holds, stays open. */
static void close_idle(ks_partition *p)
{
	if (p->flushing || p->scrubbing)
		return;
	for (size_t i = 0; i < p->nsegs; i++) {
		kseg *s = p->segs[i];
		if (!s->log || s->flush_pins || s->synced_pos < s->end_pos ||
		    __atomic_load_n(&s->refs, __ATOMIC_ACQUIRE) != 1)
			continue;
		ks__seg_close_sync(s);
		sub_close(s->log);
		s->log = NULL;
	}
}

static int checkpoint(ks_partition *p)
{
	int rc;
	/* Index entries below the checkpoint must be durable with it: the
	 * active segment's are written and synced now (index files are not
	 * held open; a roll wrote and synced the sealed ones'). */
	for (size_t i = p->nsegs; i > 0; i--) {
		kseg *a = p->segs[i - 1];
		if (!a->idx_dirty) {
			if (!a->active)
				break;
			continue;
		}
		if ((rc = ks__p_write_index(p, a, 1))) {
			ks__p_poison(p, "index write", rc);
			return rc;
		}
	}
	if ((rc = ks__p_write_manifest(p, p->hw, p->log_start)))
		ks__p_poison(p, "manifest write", rc);
	return rc;
}

int ks_partition_housekeep(ks_partition *p, int64_t now_ms)
{
	int64_t durable;
	ks__p_lock(p);
	int st = p->state;
	ks__p_unlock(p);
	if (st == KAAS_PART_FOLLOWER)
		return 0; /* nothing to do, whatever the last leadership left */
	int rc = ks_partition_flush(p, &durable);
	if (rc == -EPERM)
		return 0;
	if (rc)
		return rc;
	int deleted = 0;
	ks__p_lock(p);
	if (p->state != KAAS_PART_LEADER)
		goto out;
	ks_log_config *c = &p->cfg;
	kseg *act = p->segs[p->nsegs - 1];

	/* First the listing: a newer leader's files fence us before we
	 * unlink anything (a zombie's retention must not touch the log). */
	if ((rc = sweep(p)))
		goto out;

	/* segment.ms: roll an old, non-empty active segment (a compacted
	 * topic's by max.compaction.lag.ms too: the active segment is never
	 * cleaned, so a record must leave it to meet that bound, KIP-354). */
	int64_t roll_ms = c->segment_ms;
	if (c->cleanup_compact != KS_CLEANUP_DELETE && c->max_compaction_lag_ms > 0 &&
	    (roll_ms < 0 || c->max_compaction_lag_ms < roll_ms))
		roll_ms = c->max_compaction_lag_ms;
	if (roll_ms >= 0 && act->end_pos > 0 && act->first_append_ms &&
	    now_ms - act->first_append_ms >= roll_ms) {
		if ((rc = ks__p_roll(p, now_ms))) {
			ks__p_fail(p, "segment roll", rc);
			goto out;
		}
	}

	int64_t new_start = p->log_start;
	size_t ndel = 0;
	/* cleanup.policy=compact alone: retention deletes nothing. */
	if (c->cleanup_compact != KS_CLEANUP_COMPACT && (rc = retention_cut(p, now_ms, &new_start, &ndel)))
		goto out;
	if (ndel) {
		p->log_start = new_start;
		for (size_t k = 0; k < ndel; k++) {
			ks__p_delete_seg(p, 0);
			deleted++;
		}
	}
	int64_t expire = c->producer_expiration_ms >= 0 ? now_ms - c->producer_expiration_ms : INT64_MIN;
	ks__kp_evict(&p->prod, p->log_start, expire);

	/* Checkpoint: the manifest's high watermark bounds recovery work. */
	if ((p->man.hw != p->hw || p->man.log_start != p->log_start) &&
	    ku_mono_ms() - p->manifest_ms >= c->checkpoint_ms)
		rc = checkpoint(p);
	if (rc == 0 && c->idle_close_ms >= 0 && now_ms - p->last_use_ms >= c->idle_close_ms)
		close_idle(p);
out:
	ks__p_unlock(p);
	if (rc == -ESTALE)
		return rc;
	return rc ? rc : deleted;
}
