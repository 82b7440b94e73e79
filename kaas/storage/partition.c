/*
 * partition.c — a partition's life cycle: open (stat only), close,
 * relinquish (persist manifest + snapshot, close every handle), the
 * configuration and listener, the accessors, and the helpers the other
 * files share (poisoning, manifest and snapshot writes, segment files).
 *
 * The rest of the engine: listing.c (which segments there are),
 * segload.c (lazy segment metadata), recover.c (take-over), append.c
 * (the write path), commit.c (the group commit), read.c, housekeep.c.
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/clock.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

void ks_log_config_defaults(ks_log_config *c)
{
	memset(c, 0, sizeof(*c));
	c->segment_bytes = 1LL << 30;
	c->segment_ms = 7LL * 24 * 3600 * 1000;
	c->retention_ms = 7LL * 24 * 3600 * 1000;
	c->retention_bytes = -1;
	c->max_message_bytes = 1048588;
	c->index_interval_bytes = 4096;
	c->timestamp_type = 0;
	c->timestamp_difference_max_ms = -1;
	c->validate_compressed = 1;
	c->producer_expiration_ms = 7LL * 24 * 3600 * 1000;
	c->checkpoint_ms = 60000;
	c->flush_depth = KAAS_FLUSH_DEPTH_DEFAULT;
	c->idle_close_ms = 60000;
	c->cleanup_compact = KS_CLEANUP_DELETE;
	c->delete_retention_ms = 86400000;
	c->min_compaction_lag_ms = 0;
	c->max_compaction_lag_ms = INT64_MAX;
	c->min_cleanable_dirty_ratio = 0.5;
}

static void sanitize_cfg(ks_log_config *c)
{
	if (c->segment_bytes < 1024)
		c->segment_bytes = 1024;
	if (c->segment_bytes > INT32_MAX)
		c->segment_bytes = INT32_MAX;
	if (c->max_message_bytes < KB_HDR)
		c->max_message_bytes = KB_HDR;
	if (c->index_interval_bytes < 0)
		c->index_interval_bytes = 0;
	if (c->timestamp_difference_max_ms <= 0)
		c->timestamp_difference_max_ms = -1;
	if (c->producer_expiration_ms <= 0)
		c->producer_expiration_ms = 7LL * 24 * 3600 * 1000;
	if (c->checkpoint_ms == 0)
		c->checkpoint_ms = 60000;
	if (c->flush_depth <= 0)
		c->flush_depth = KAAS_FLUSH_DEPTH_DEFAULT;
	if (c->flush_depth > KAAS_FLUSH_DEPTH_MAX)
		c->flush_depth = KAAS_FLUSH_DEPTH_MAX;
	if (c->idle_close_ms == 0)
		c->idle_close_ms = 60000;
	if (c->cleanup_compact < KS_CLEANUP_DELETE || c->cleanup_compact > KS_CLEANUP_COMPACT_DELETE)
		c->cleanup_compact = KS_CLEANUP_DELETE;
	if (c->delete_retention_ms < 0)
		c->delete_retention_ms = 0;
	if (c->min_compaction_lag_ms < 0)
		c->min_compaction_lag_ms = 0;
	if (c->max_compaction_lag_ms <= 0)
		c->max_compaction_lag_ms = INT64_MAX;
	if (!(c->min_cleanable_dirty_ratio >= 0))
		c->min_cleanable_dirty_ratio = 0;
	if (c->min_cleanable_dirty_ratio > 1)
		c->min_cleanable_dirty_ratio = 1;
	if (c->compression_type < KS_COMPRESS_PRODUCER || c->compression_type > KS_COMPRESS_ZSTD)
		c->compression_type = KS_COMPRESS_PRODUCER;
	if (c->compression_gzip_level < -1 || c->compression_gzip_level > 9)
		c->compression_gzip_level = 0;
	if (c->compression_lz4_level < 0 || c->compression_lz4_level > 17)
		c->compression_lz4_level = 0;
	if (c->compression_zstd_level < -131072 || c->compression_zstd_level > 22)
		c->compression_zstd_level = 0;
}

void ks_partition_set_config(ks_partition *p, const ks_log_config *cfg)
{
	ks__p_lock(p);
	p->cfg = *cfg;
	sanitize_cfg(&p->cfg);
	p->cfg.flush_depth = p->depth; /* the pipeline's slots are sized at open */
	ks__p_unlock(p);
}

void ks_partition_set_listener(ks_partition *p, ks_hw_listener fn, void *arg)
{
	ks__p_lock(p);
	p->listener = fn;
	p->listener_arg = arg;
	ks__p_unlock(p);
}
/* ---- shared helpers ---------------------------------------------------------------- */

/* Distinct per thread: the address of a thread-local. */
static __thread char self_tag;

const void *ks__p_self(void)
{
	return &self_tag;
}

int ks__p_unfit(const ks_partition *p)
{
	switch (p->state) {
	case KAAS_PART_LEADER:
		return 0;
	case KAAS_PART_POISONED:
		return -EIO;
	case KS__PART_FENCED:
		return -ESTALE;
	default:
		return -EPERM;
	}
}

int16_t ks__p_kerr(int rc)
{
	if (rc == 0)
		return KERR_NONE;
	return rc == -ESTALE || rc == -EPERM ? KERR_NOT_LEADER_OR_FOLLOWER : KERR_KAFKA_STORAGE_ERROR;
}

void ks__p_poison(ks_partition *p, const char *what, int rc)
{
	KS__P_LOCKED(p);
	if (!ks__p_failed(p))
		KLOG_ERR("storage", "%s: %s failed: %s; partition poisoned until taken over again",
			 p->dir, what, sub_strerror(rc));
	if (rc == -ESTALE)
		p->state = KS__PART_FENCED;
	else if (p->state != KS__PART_FENCED)
		p->state = KAAS_PART_POISONED;
	pthread_cond_broadcast(&p->cv);
}

void ks__p_fence(ks_partition *p)
{
	KS__P_LOCKED(p);
	p->state = KS__PART_FENCED;
	pthread_cond_broadcast(&p->cv);
}

int16_t ks__p_fail(ks_partition *p, const char *what, int rc)
{
	if (rc != -ESTALE)
		ks__p_poison(p, what, rc);
	return ks__p_kerr(rc);
}
int ks__p_write_manifest(ks_partition *p, int64_t hw, int64_t log_start)
{
	return ks__p_write_final_manifest(p, hw, log_start, NULL);
}

int ks__p_write_final_manifest(ks_partition *p, int64_t hw, int64_t log_start, const kmanifest *rel)
{
	KS__P_LOCKED(p);
	kmanifest m = p->man;
	char path[SUB_PATH_MAX], *buf;
	size_t len;
	m.valid = 1;
	/* A record stands only in the manifest its relinquish wrote: any later
	 * write (a take-over, a checkpoint) is by a leader that goes on. */
	m.rel = 0;
	if (rel && rel->rel) {
		m.rel = 1;
		m.rel_epoch = rel->rel_epoch;
		m.rel_end = rel->rel_end;
		m.rel_seg_base = rel->rel_seg_base;
		m.rel_seg_bytes = rel->rel_seg_bytes;
	}
	if (p->topic_id[0])
		snprintf(m.topic_id, sizeof(m.topic_id), "%s", p->topic_id);
	m.epoch = p->epoch;
	m.hw = hw;
	m.log_start = log_start;
	int rc = ks__manifest_encode(&m, &buf, &len);
	if (rc)
		return rc;
	rc = sub_join(path, sizeof(path), p->dir, MANIFEST_NAME);
	if (rc == 0)
		rc = sub_write_atomic(p->vfs, path, buf, len);
	free(buf);
	if (rc == 0) {
		p->man = m;
		p->manifest_ms = ku_mono_ms();
	}
	return rc;
}

int ks__p_write_snapshot(ks_partition *p, const uint8_t *buf, size_t len)
{
	char path[SUB_PATH_MAX];
	int rc = sub_join(path, sizeof(path), p->dir, SNAPSHOT_NAME);
	return rc ? rc : sub_write_atomic(p->vfs, path, buf, len);
}

int ks__p_seg_file(const ks_partition *p, const kseg *s, int kind, char *dst, size_t len)
{
	char dir[SUB_PATH_MAX];
	if (!s->quarantined)
		return ks__seg_path_g(dst, len, p->dir, s->epoch, s->base, s->gen, kind);
	int rc = sub_join(dir, sizeof(dir), p->dir, QUARANTINE_DIR);
	return rc ? rc : ks__seg_path_g(dst, len, dir, s->epoch, s->base, s->gen, kind);
}

/* Logs are opened on demand and closed when idle (ks_partition_housekeep):
 * the active segment read-write, any other read-only. */
int ks__p_seg_open_log(ks_partition *p, kseg *s, int writable)
{
	if (s->log)
		return 0;
	char path[SUB_PATH_MAX];
	int rc = ks__p_seg_file(p, s, SEG_LOG, path, sizeof(path));
	if (s->quarantined)
		writable = 0;
	return rc ? rc : sub_open(p->vfs, path, writable ? O_RDWR : O_RDONLY, 0, &s->log);
}

int ks__p_write_index(ks_partition *p, kseg *s, int sync)
{
	if (!s->idx_dirty || s->epoch != p->epoch || s->quarantined)
		return 0;
	int rc = 0;
	for (int k = SEG_INDEX; k <= SEG_TIMEINDEX && rc == 0; k++) {
		uint32_t from = k == SEG_INDEX ? s->ix_written : s->tx_written;
		uint32_t to = k == SEG_INDEX ? s->nix : s->ntx;
		size_t esz = k == SEG_INDEX ? IDX_ENTRY : TIDX_ENTRY;
		if (from >= to && !sync)
			continue;
		uint8_t *buf = malloc((to - from) * esz + 1);
		if (!buf)
			return -ENOMEM;
		for (uint32_t j = from; j < to; j++) {
			uint8_t *e = buf + (j - from) * esz;
			if (k == SEG_INDEX) {
				kb_put32(e, s->ix[j].rel);
				kb_put32(e + 4, s->ix[j].pos);
			} else {
				kb_put64(e, (uint64_t)s->tx[j].ts);
				kb_put32(e + 8, s->tx[j].rel);
			}
		}
		char path[SUB_PATH_MAX];
		sub_file *f = NULL;
		if ((rc = ks__p_seg_file(p, s, k, path, sizeof(path))) == 0 &&
		    (rc = sub_open(p->vfs, path, O_RDWR | O_CREAT, 0644, &f)) == 0) {
			rc = sub_pwrite_full(f, buf, (to - from) * esz, (uint64_t)from * esz);
			if (rc == 0 && sync)
				rc = sub_fsync(f);
			int c = sub_close(f);
			if (rc == 0)
				rc = c;
		}
		free(buf);
		if (rc == 0) {
			if (k == SEG_INDEX)
				s->ix_written = to;
			else
				s->tx_written = to;
		}
	}
	if (rc == 0 && sync)
		s->idx_dirty = 0;
	return rc;
}

int ks__p_unlink_seg(ks_partition *p, int32_t epoch, int64_t base, int64_t gen)
{
	int first = 0;
	for (int k = 0; k < SEG_NKINDS; k++) {
		char path[SUB_PATH_MAX];
		int rc = ks__seg_path_g(path, sizeof(path), p->dir, epoch, base, gen, k);
		if (rc == 0)
			rc = sub_unlink(p->vfs, path);
		if (rc && rc != -ENOENT && !first)
			first = rc;
	}
	return first;
}

int ks__p_delete_seg(ks_partition *p, size_t i)
{
	kseg *s = p->segs[i];
	memmove(&p->segs[i], &p->segs[i + 1], (p->nsegs - i - 1) * sizeof(p->segs[0]));
	p->nsegs--;
	/* Retention past a quarantined segment: it leaves the log, its files
	 * stay where the operator finds them. */
	int rc = s->quarantined ? 0 : ks__p_unlink_seg(p, s->epoch, s->base, s->gen);
	if (rc)
		KLOG_WARN("storage", "%s: removing segment %d-%lld: %s (retried by housekeeping)",
			  p->dir, (int)s->epoch, (long long)s->base, sub_strerror(rc));
	ks__seg_detach(s); /* read plans may keep the log open a little longer */
	return rc;
}

/* ---- open / close ---------------------------------------------------------------- */

int ks_partition_open(sub_vfs *vfs, const char *dir, const char *topic_id, int create,
			const ks_log_config *cfg, ks_partition **out)
{
	*out = NULL;
	if (sub_path_check(dir) || strlen(dir) >= SUB_PATH_MAX - 64 ||
	    (topic_id && strlen(topic_id) >= 40))
		return -EINVAL;
	ks_partition *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->vfs = vfs;
	snprintf(p->dir, sizeof(p->dir), "%s", dir);
	if (topic_id)
		snprintf(p->topic_id, sizeof(p->topic_id), "%s", topic_id);
	if (cfg)
		p->cfg = *cfg;
	else
		ks_log_config_defaults(&p->cfg);
	sanitize_cfg(&p->cfg);
	p->depth = p->cfg.flush_depth;
	p->state = KAAS_PART_FOLLOWER;
	p->epoch = -1;
	p->retake_cut = -1;
	p->retake_cut_epoch = -1;
	p->durable_floor = INT64_MAX;
	p->scrub_base = -1;
	int rc = 0;
	sub_stat st;
	if (create && (rc = sub_mkdirs(vfs, dir, 0755)))
		goto out;
	if ((rc = sub_stat_path(vfs, dir, &st)))
		goto out;
	if (!S_ISDIR(st.mode)) {
		rc = -ENOTDIR;
		goto out;
	}
	if ((rc = ks__p_load_view(p)))
		goto out;
	if (p->man.valid && topic_id && p->man.topic_id[0] && strcmp(p->man.topic_id, topic_id)) {
		KLOG_WARN("storage", "%s: belongs to topic id %s, not %s", dir, p->man.topic_id, topic_id);
		rc = -ESTALE;
		goto out;
	}
	if (create && !p->man.valid && p->nsegs == 0) {
		/* Stamp a fresh partition.  Exclusive create: if anyone (a leader)
		 * wrote a manifest meanwhile, theirs stands. */
		kmanifest m = {.valid = 1};
		char path[SUB_PATH_MAX], *buf;
		size_t len;
		snprintf(m.topic_id, sizeof(m.topic_id), "%s", p->topic_id);
		if ((rc = ks__manifest_encode(&m, &buf, &len)))
			goto out;
		rc = sub_join(path, sizeof(path), dir, MANIFEST_NAME);
		if (rc == 0)
			rc = sub_create_excl(vfs, path, buf, len);
		free(buf);
		if (rc == -EEXIST)
			rc = 0;
		if (rc)
			goto out;
		p->man = m;
	}
out:
	if (rc) {
		ks_partition_close(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* Closes every handle and forgets leader state (caller holds the lock).
 * `why` is what flushes of the leadership being dropped answer: 0 when its
 * relinquish made everything appended durable. */
void ks__p_drop_leadership(ks_partition *p, int why)
{
	KS__P_LOCKED(p);
	while (p->flushing)
		ks__p_wait(p);
	/* No ticket outlives its leadership: nothing may be pinned or in a slot. */
	KAAS_ASSERT(p->fl_retired == p->fl_next);
	KAAS_ASSERT(p->hw <= p->leo);
	if (p->state != KAAS_PART_FOLLOWER) {
		if (ks__p_failed(p))
			why = ks__p_unfit(p);
		p->ended_gen = p->lead_gen;
		p->ended_rc = why;
		p->ended_durable = p->hw;
		/* Ended by an I/O failure (poisoned, or a relinquish whose
		 * writes failed): not by a clean relinquish, a replacement or
		 * a newer leader (whose segments decide for themselves). */
		int io = why != 0 && why != -EPERM && why != -ESTALE;
		p->retake_cut = io ? p->hw : -1;
		p->retake_cut_epoch = io ? p->epoch : -1;
	}
	ks__p_drop_segs(p);
	ks__kp_free(&p->prod);
	free(p->snap_buf);
	p->snap_buf = NULL;
	p->snap_len = 0;
	p->ring_n = p->ring_head = 0;
	p->dir_dirty = 0;
	p->state = KAAS_PART_FOLLOWER;
}

void ks_partition_close(ks_partition *p)
{
	if (!p)
		return;
	ks_partition_relinquish(p);
	ks__p_lock(p);
	ks__p_drop_leadership(p, -EPERM);
	ks__clean_free(&p->clean);
	ks__p_unlock(p);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

/* ---- relinquish ------------------------------------------------------------------ */

int ks_partition_relinquish(ks_partition *p)
{
	ks__p_lock(p);
	while (p->flushing)
		ks__p_wait(p);
	if (p->state == KAAS_PART_FOLLOWER) {
		ks__p_unlock(p);
		return 0;
	}
	int rc = 0;
	if (p->state == KAAS_PART_LEADER) {
		/* Everything appended becomes durable, then the snapshot and the
		 * manifest record it. */
		for (size_t i = 0; i < p->nsegs && rc == 0; i++) {
			kseg *s = p->segs[i];
			if (!s->active && s->synced_pos >= s->end_pos && !s->idx_dirty)
				continue;
			/* A log closed while idle had nothing unsynced. */
			if (s->log)
				rc = sub_fsync(s->log);
			if (rc == 0)
				rc = ks__p_write_index(p, s, 1);
			if (rc == 0)
				s->synced_pos = s->end_pos;
		}
		if (rc == 0 && p->dir_dirty)
			rc = sub_fsync_dir(p->vfs, p->dir);
		/* A newer leader's log does not hold what we appended since it
		 * took over: then that is not durable, whatever our fsyncs did. */
		if (rc == 0)
			rc = ks__p_fence_check(p);
		if (rc == 0) {
			p->hw = p->leo;
			p->hw_seg = p->segs[p->nsegs - 1]->base;
			p->hw_pos = p->segs[p->nsegs - 1]->end_pos;
		}
		if (rc == 0) {
			uint8_t *b;
			size_t len;
			if ((rc = ks__kp_encode(&p->prod, p->epoch, p->leo, &b, &len)) == 0) {
				rc = ks__p_write_snapshot(p, b, len);
				free(b);
			}
		}
		if (rc == 0) {
			/* The relinquish record: everything is durable (the fsyncs
			 * above), the producer snapshot is at the log end, and this
			 * leadership writes nothing after this rename.  The active
			 * segment's byte length lets a successor check that the files
			 * it finds are the ones described. */
			const kseg *a = p->segs[p->nsegs - 1];
			kmanifest rel = {.rel = a->epoch == p->epoch && !a->quarantined && a->gen == 0,
					 .rel_epoch = p->epoch,
					 .rel_end = p->leo,
					 .rel_seg_base = a->base,
					 .rel_seg_bytes = (int64_t)a->end_pos};
			rc = ks__p_write_final_manifest(p, p->hw, p->log_start, &rel);
		}
		if (rc)
			KLOG_ERR("storage", "%s: relinquish could not persist its state: %s", p->dir,
				 sub_strerror(rc));
	} else {
		KLOG_WARN("storage", "%s: relinquishing a %s partition: nothing persisted", p->dir,
			  p->state == KS__PART_FENCED ? "fenced" : "poisoned");
		if (p->state == KS__PART_FENCED)
			rc = -ESTALE;
	}
	ks__p_drop_leadership(p, rc);
	int32_t keep = p->epoch;
	ks__p_load_view(p);
	p->epoch = keep;
	ks__p_unlock(p);
	return rc;
}

/* ---- simple accessors ------------------------------------------------------------ */

/* One of p's offsets, read under its lock. */
static int64_t offset_of(ks_partition *p, const int64_t *field)
{
	ks__p_lock(p);
	int64_t v = *field;
	ks__p_unlock(p);
	return v;
}

int64_t ks_partition_log_start(ks_partition *p)
{
	return offset_of(p, &p->log_start);
}

int64_t ks_partition_log_end(ks_partition *p)
{
	return offset_of(p, &p->leo);
}

int64_t ks_partition_high_watermark(ks_partition *p)
{
	return offset_of(p, &p->hw);
}

void ks_partition_failed_end(ks_partition *p, ks_failed_end *out)
{
	ks__p_lock(p);
	out->valid = p->retake_cut >= 0;
	out->offset = p->retake_cut;
	out->epoch = p->retake_cut_epoch;
	ks__p_unlock(p);
}

int ks_partition_state_of(ks_partition *p, int32_t *epoch)
{
	ks__p_lock(p);
	int st = ks__p_failed(p) ? KAAS_PART_POISONED : p->state;
	if (epoch)
		*epoch = p->epoch;
	ks__p_unlock(p);
	return st;
}
