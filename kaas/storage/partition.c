/*
 * partition.c — a partition's life cycle: open (stat only), take_over
 * (recover the tail, restore producer state, roll a segment of the new
 * epoch), relinquish (persist manifest + snapshot, close every handle), and
 * the helpers the other files share (fencing check, manifest, poisoning,
 * lazy segment loading).
 *
 * Epoch fencing (docs/storage.md): segments are sorted by base offset; one
 * whose epoch is lower than that of a segment at or before its base is a
 * zombie's and ignored; a live segment's valid batches end where the next
 * live segment begins.  Nothing here ever rewrites or truncates a file of
 * another epoch: the name of the segment the new leader rolls is what
 * records where the old one's valid data ends.
 */
#include "kaas/storage/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util/clock.h"
#include "util/grow.h"
#include "util/log.h"

#define INDEX_FILE_MAX (256u << 20)

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
}

void ks_partition_set_config(ks_partition *p, const ks_log_config *cfg)
{
	pthread_mutex_lock(&p->mu);
	p->cfg = *cfg;
	sanitize_cfg(&p->cfg);
	pthread_mutex_unlock(&p->mu);
}

void ks_partition_set_listener(ks_partition *p, ks_hw_listener fn, void *arg)
{
	pthread_mutex_lock(&p->mu);
	p->listener = fn;
	p->listener_arg = arg;
	pthread_mutex_unlock(&p->mu);
}

/* ---- listing ------------------------------------------------------------------ */

typedef struct seglist {
	kseg **v;
	size_t n, cap;
} seglist;

static void seglist_free(seglist *l)
{
	for (size_t i = 0; i < l->n; i++)
		ks__seg_unref(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int seglist_push(seglist *l, kseg *s)
{
	if (KAAS_GROW(l->v, l->n, l->cap, 16))
		return -ENOMEM;
	l->v[l->n++] = s;
	return 0;
}

static int cmp_seg(const void *a, const void *b)
{
	const kseg *x = *(kseg *const *)a, *y = *(kseg *const *)b;
	if (x->base != y->base)
		return x->base < y->base ? -1 : 1;
	return x->epoch > y->epoch ? -1 : x->epoch < y->epoch; /* higher epoch first */
}

/* Every .log segment in the directory, sorted by (base, epoch desc);
 * *max_epoch the highest epoch of any segment file. */
static int list_segments(ks_partition *p, int stat_sizes, seglist *out, int32_t *max_epoch)
{
	char **names = NULL;
	size_t n = 0;
	*max_epoch = -1;
	int rc = sub_list(p->vfs, p->dir, &names, &n);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		int32_t e;
		int64_t b;
		int kind = ks__seg_parse_name(names[i], &e, &b);
		if (kind < 0)
			continue;
		if (e > *max_epoch)
			*max_epoch = e;
		if (kind != SEG_LOG)
			continue;
		kseg *s = ks__seg_new(e, b);
		if (!s || (rc = seglist_push(out, s))) {
			ks__seg_unref(s);
			rc = rc ? rc : -ENOMEM;
			break;
		}
		if (stat_sizes) {
			char path[SUB_PATH_MAX];
			sub_stat st;
			if (ks__seg_path(path, sizeof(path), p->dir, e, b, SEG_LOG) == 0 &&
			    sub_stat_path(p->vfs, path, &st) == 0)
				s->disk_size = st.size;
		}
	}
	sub_names_free(names, n);
	if (rc) {
		seglist_free(out);
		return rc;
	}
	if (out->n > 1)
		qsort(out->v, out->n, sizeof(out->v[0]), cmp_seg);
	return 0;
}

/* Splits `all` (sorted) into live segments and zombies. */
static int split_live(seglist *all, seglist *live, seglist *zombies)
{
	int32_t maxe = -1;
	int rc = 0;
	for (size_t i = 0; i < all->n && !rc; i++) {
		kseg *s = all->v[i];
		if (s->epoch < maxe) {
			rc = seglist_push(zombies, s);
		} else {
			maxe = s->epoch;
			rc = seglist_push(live, s);
		}
		if (rc == 0)
			all->v[i] = NULL;
	}
	for (size_t i = 0; i < all->n; i++)
		ks__seg_unref(all->v[i]);
	free(all->v);
	memset(all, 0, sizeof(*all));
	return rc;
}

/* Read plans may hold a segment after the partition let go of it; they only
 * need the log, so the index handles close now (a flusher still syncing
 * them closes them when it is done). */
void ks__seg_detach(kseg *s)
{
	s->detached = 1;
	if (!s->flush_pins) {
		ks__seg_close_sync(s);
		sub_close(s->idx);
		sub_close(s->tidx);
		s->idx = s->tidx = NULL;
	}
	ks__seg_unref(s);
}

static void drop_segs(ks_partition *p)
{
	for (size_t i = 0; i < p->nsegs; i++)
		ks__seg_detach(p->segs[i]);
	free(p->segs);
	p->segs = NULL;
	p->nsegs = p->capsegs = 0;
}

static void adopt_list(ks_partition *p, seglist *l)
{
	drop_segs(p);
	p->segs = l->v;
	p->nsegs = l->n;
	p->capsegs = l->cap;
	memset(l, 0, sizeof(*l));
}

/* The live segments of `all` (sorted) become p's list; the zombies go.
 * Takes over `all` whatever the outcome. */
static int adopt_live(ks_partition *p, seglist *all)
{
	seglist live = {0}, zombies = {0};
	int rc = split_live(all, &live, &zombies);
	seglist_free(&zombies);
	if (rc) {
		seglist_free(&live);
		return rc;
	}
	adopt_list(p, &live);
	return 0;
}

size_t ks__p_seg_find(const ks_partition *p, int64_t off)
{
	size_t lo = 0, hi = p->nsegs; /* first with base > off */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (p->segs[mid]->base <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : 0;
}

/* The follower's view: names, sizes, manifest; no descriptors. */
static int load_view(ks_partition *p)
{
	seglist all = {0};
	int32_t maxe;
	int rc = ks__manifest_read(p->vfs, p->dir, &p->man);
	if (rc)
		return rc;
	if ((rc = list_segments(p, 1, &all, &maxe)))
		return rc;
	if ((rc = adopt_live(p, &all)))
		return rc;
	p->log_start = p->man.valid ? p->man.log_start : 0;
	if (p->nsegs && p->segs[0]->base > p->log_start)
		p->log_start = p->segs[0]->base;
	p->hw = p->man.valid ? p->man.hw : p->log_start;
	if (p->hw < p->log_start)
		p->hw = p->log_start;
	p->leo = p->hw;
	return 0;
}

/* ---- shared helpers ---------------------------------------------------------------- */

void ks__p_poison(ks_partition *p, const char *what, int rc)
{
	if (p->state != KAAS_PART_POISONED)
		KLOG_ERR("storage", "%s: %s failed: %s; partition poisoned until taken over again",
			 p->dir, what, sub_strerror(rc));
	p->state = KAAS_PART_POISONED;
	if (rc == -ESTALE)
		p->fenced = 1;
	pthread_cond_broadcast(&p->cv);
}

int ks__p_fence_check(ks_partition *p)
{
	seglist all = {0};
	int32_t maxe;
	int rc = list_segments(p, 0, &all, &maxe);
	seglist_free(&all);
	if (rc)
		return rc;
	if (maxe > p->epoch) {
		KLOG_WARN("storage", "%s: a segment of epoch %d exists, we lead at %d: fenced", p->dir,
			  (int)maxe, (int)p->epoch);
		p->fenced = 1;
		p->state = KAAS_PART_POISONED;
		return -ESTALE;
	}
	return 0;
}

int ks__p_write_manifest(ks_partition *p, int64_t hw, int64_t log_start)
{
	kmanifest m = p->man;
	char path[SUB_PATH_MAX], *buf;
	size_t len;
	m.valid = 1;
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

int ks__p_seg_open_log(ks_partition *p, kseg *s, int writable)
{
	if (s->log)
		return 0;
	char path[SUB_PATH_MAX];
	int rc = ks__seg_path(path, sizeof(path), p->dir, s->epoch, s->base, SEG_LOG);
	return rc ? rc : sub_open(p->vfs, path, writable ? O_RDWR : O_RDONLY, 0, &s->log);
}

int ks__p_unlink_seg(ks_partition *p, int32_t epoch, int64_t base)
{
	int first = 0;
	for (int k = 0; k < SEG_NKINDS; k++) {
		char path[SUB_PATH_MAX];
		int rc = ks__seg_path(path, sizeof(path), p->dir, epoch, base, k);
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
	int rc = ks__p_unlink_seg(p, s->epoch, s->base);
	if (rc)
		KLOG_WARN("storage", "%s: removing segment %d-%lld: %s (retried by housekeeping)",
			  p->dir, (int)s->epoch, (long long)s->base, sub_strerror(rc));
	ks__seg_detach(s); /* read plans may keep the log open a little longer */
	return rc;
}

/* Reads a whole index file of segment s; entries beyond `max` are dropped. */
static int read_index(ks_partition *p, kseg *s, int kind, uint8_t **buf, size_t *len)
{
	char path[SUB_PATH_MAX];
	char *b = NULL;
	*buf = NULL;
	*len = 0;
	int rc = ks__seg_path(path, sizeof(path), p->dir, s->epoch, s->base, kind);
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
		if (write) {
			uint8_t e[IDX_ENTRY + TIDX_ENTRY];
			kb_put32(e, rel);
			kb_put32(e + 4, (uint32_t)pos);
			kb_put64(e + 8, (uint64_t)s->max_ts);
			kb_put32(e + 16, rel);
			if ((rc = sub_pwrite_full(s->idx, e, IDX_ENTRY, (uint64_t)s->nix * IDX_ENTRY)) ||
			    (rc = sub_pwrite_full(s->tidx, e + 8, TIDX_ENTRY,
						  (uint64_t)s->ntx * TIDX_ENTRY)))
				return rc;
			s->idx_dirty = 1;
		}
		if ((rc = ks__seg_ix_push(s, rel, (uint32_t)pos)) || (rc = ks__seg_tx_push(s, s->max_ts, rel)))
			return rc;
		s->since_ix = 0;
	}
	s->since_ix += size;
	return 0;
}

/* Walks s from (pos, off) with CRC checks, stopping before `limit`;
 * rebuilds in-memory index entries as it goes.  *ok = 0 when the very first
 * batch was not the expected one. */
static int walk_rebuild(ks_partition *p, kseg *s, uint64_t pos, int64_t off, uint64_t size,
			int64_t limit, int *first_ok)
{
	seg_iter it;
	kb_hdr h;
	uint64_t bpos;
	int rc, first = 1;
	ks__seg_iter_init(&it, s->log, pos, size, 1, 256 * 1024);
	s->since_ix = 0;
	s->end_pos = pos;
	s->end_off = off;
	*first_ok = 1;
	while ((rc = ks__seg_iter_next(&it, &h, &bpos)) == 1) {
		if (h.base_offset != off || h.base_offset >= limit || kb_last_offset(&h) >= limit) {
			it.why = h.base_offset >= limit ? "next live segment begins" : "offset gap";
			if (first && h.base_offset < limit)
				*first_ok = 0;
			break;
		}
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
		return 0;
	int64_t limit = p_seg_limit(p, i);
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
		if ((rc = walk_rebuild(p, s, pos, off, st.size, limit, &ok)))
			return rc;
		if (ok || k < 0)
			break;
		KLOG_WARN("storage", "%s: index of segment %d-%lld does not match the log; rebuilding",
			  p->dir, (int)s->epoch, (long long)s->base);
		k = -1;
	}
	s->meta = 1;
	s->synced_pos = s->end_pos;
	return 0;
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
	p->state = KAAS_PART_FOLLOWER;
	p->epoch = -1;
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
	if ((rc = load_view(p)))
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
static void drop_leadership(ks_partition *p, int why)
{
	while (p->flushing)
		pthread_cond_wait(&p->cv, &p->mu);
	if (p->state != KAAS_PART_FOLLOWER) {
		if (p->state == KAAS_PART_POISONED)
			why = p->fenced ? -ESTALE : -EIO;
		p->ended_gen = p->lead_gen;
		p->ended_rc = why;
		p->ended_durable = p->hw;
	}
	drop_segs(p);
	ks__kp_free(&p->prod);
	free(p->snap_buf);
	p->snap_buf = NULL;
	p->snap_len = 0;
	p->ring_n = p->ring_head = 0;
	p->dir_dirty = 0;
	p->fenced = 0;
	p->state = KAAS_PART_FOLLOWER;
}

void ks_partition_close(ks_partition *p)
{
	if (!p)
		return;
	ks_partition_relinquish(p);
	pthread_mutex_lock(&p->mu);
	drop_leadership(p, -EPERM);
	pthread_mutex_unlock(&p->mu);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

/* ---- take over ------------------------------------------------------------------ */

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
		if ((rc = seglist_push(&l, s))) {
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
	if ((rc = list_segments(p, 1, &all, &maxe)))
		return rc;
	if (maxe > epoch) {
		seglist_free(&all);
		KLOG_WARN("storage", "%s: a segment of epoch %d exists; cannot lead at %d", p->dir,
			  (int)maxe, (int)epoch);
		return -ESTALE;
	}
	if ((rc = adopt_live(p, &all)))
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
	pthread_mutex_lock(&p->mu);
	if (p->state == KAAS_PART_LEADER && p->epoch == epoch) {
		pthread_mutex_unlock(&p->mu);
		return 0;
	}
	if (p->state != KAAS_PART_FOLLOWER && epoch < p->epoch) {
		pthread_mutex_unlock(&p->mu);
		return -ESTALE;
	}
	/* A leadership replaced without relinquish: its flushes fail (the
	 * producers retry and are deduplicated). */
	drop_leadership(p, -EPERM);
	int rc = do_take_over(p, epoch);
	if (rc) {
		KLOG_WARN("storage", "%s: take over at epoch %d: %s", p->dir, (int)epoch, sub_strerror(rc));
		drop_leadership(p, -EPERM);
		int32_t keep = p->epoch;
		load_view(p);
		p->epoch = rc == -ESTALE ? keep : -1;
	} else {
		p->state = KAAS_PART_LEADER;
		p->lead_gen++;
		KLOG_INFO("storage", "%s: leader at epoch %d, log [%lld, %lld)", p->dir, (int)epoch,
			  (long long)p->log_start, (long long)p->leo);
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/* ---- relinquish ------------------------------------------------------------------ */

int ks_partition_relinquish(ks_partition *p)
{
	pthread_mutex_lock(&p->mu);
	while (p->flushing)
		pthread_cond_wait(&p->cv, &p->mu);
	if (p->state == KAAS_PART_FOLLOWER) {
		pthread_mutex_unlock(&p->mu);
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
			if ((rc = sub_fsync(s->log)) == 0 && s->idx && (rc = sub_fsync(s->idx)) == 0)
				rc = sub_fsync(s->tidx);
			if (rc == 0) {
				s->synced_pos = s->end_pos;
				s->idx_dirty = 0;
			}
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
		if (rc == 0)
			rc = ks__p_write_manifest(p, p->hw, p->log_start);
		if (rc)
			KLOG_ERR("storage", "%s: relinquish could not persist its state: %s", p->dir,
				 sub_strerror(rc));
	} else {
		KLOG_WARN("storage", "%s: relinquishing a %s partition: nothing persisted", p->dir,
			  p->fenced ? "fenced" : "poisoned");
		if (p->fenced)
			rc = -ESTALE;
	}
	drop_leadership(p, rc);
	int32_t keep = p->epoch;
	load_view(p);
	p->epoch = keep;
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/* ---- simple accessors ------------------------------------------------------------ */

/* One of p's offsets, read under its lock. */
static int64_t offset_of(ks_partition *p, const int64_t *field)
{
	pthread_mutex_lock(&p->mu);
	int64_t v = *field;
	pthread_mutex_unlock(&p->mu);
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

int ks_partition_state_of(ks_partition *p, int32_t *epoch)
{
	pthread_mutex_lock(&p->mu);
	int st = p->state;
	if (epoch)
		*epoch = p->epoch;
	pthread_mutex_unlock(&p->mu);
	return st;
}
