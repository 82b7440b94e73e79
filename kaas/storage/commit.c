/*
 * commit.c — the group commit that turns written into durable.
 *
 * Pipelined: fsyncs run without the partition lock, so
 * appends continue meanwhile.  A caller whose data the fsync in flight does
 * not cover starts a second one (FLUSH_DEPTH in flight: the kernel or the
 * server overlaps them, a network volume's round trips too) once as many
 * requests were appended since the first one started as it covers: the
 * appenders one fsync released come back as a group, which a second fsync
 * started by the first of them would split.  Until then, and with both
 * slots busy, callers wait, and the end of an fsync lets one of them run
 * the next for everybody written by then.  Each fsync is a ticket covering
 * the log end at its start; the high watermark (the durable offset)
 * advances ticket by ticket in start order, never past a ticket still
 * running, and a failed fsync poisons the partition so that no ticket
 * completing after it is acknowledged.
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

/* Makes sure pipeline slot `slot` has its own descriptor of s's log (slot 0
 * uses the log's own).  Under the partition lock, so a segment that
 * retention deletes is either not in the flush's list or already open. */
static int slot_open(ks_partition *p, kseg *s, int slot)
{
	if (slot == 0 || s->sync[slot])
		return 0;
	char path[SUB_PATH_MAX];
	int rc = ks__seg_path(path, sizeof(path), p->dir, s->epoch, s->base, SEG_LOG);
	return rc ? rc : sub_open(p->vfs, path, O_RDWR, 0, &s->sync[slot]);
}

/* Tickets retire in start order: a ticket's end becomes the high watermark
 * only once it and every ticket started before it have completed, and only
 * while the partition is healthy (a failed fsync poisons it, so nothing
 * completing after a failure is acknowledged, whenever it started). */
static int64_t retire(ks_partition *p)
{
	int64_t notify = -1;
	while (p->fl_retired < p->fl_next && p->fl[p->fl_retired % FLUSH_DEPTH].done) {
		const struct kflight *f = &p->fl[p->fl_retired % FLUSH_DEPTH];
		int64_t end = f->end;
		p->fl_retired++;
		p->flushing--;
		if (p->state == KAAS_PART_LEADER && end > p->hw) {
			p->hw = end;
			p->hw_seg = f->seg;
			p->hw_pos = f->pos;
			notify = end;
		}
	}
	return notify;
}

int ks_partition_flush(ks_partition *p, int64_t *durable)
{
	int rc = 0;
	int64_t notify = -1;
	ks_hw_listener fn = NULL;
	void *arg = NULL;
	pthread_mutex_lock(&p->mu);
	int64_t target = p->leo, dur = -1;
	uint64_t gen = p->lead_gen;
	int led = p->state != KAAS_PART_FOLLOWER;
	for (;;) {
		dur = p->hw;
		if (p->lead_gen != gen || (p->state == KAAS_PART_FOLLOWER && (led || gen))) {
			/* The leadership the caller appended under is over: answer
			 * for it, never with a later one's (or a newer leader's
			 * manifest's) offsets.  After a clean relinquish that is
			 * success: it made everything appended durable. */
			if (gen && p->ended_gen == gen) {
				dur = p->ended_durable;
				rc = p->ended_rc;
				if (rc == 0 && led && dur < target)
					rc = -EPERM;
			} else {
				dur = -1;
				rc = -EPERM;
			}
			break;
		}
		if (ks__p_failed(p)) {
			rc = ks__p_unfit(p);
			break;
		}
		if (p->hw >= target)
			break; /* nothing ours is pending (also: never led here) */
		if (p->state != KAAS_PART_LEADER) {
			rc = -EPERM;
			break;
		}
		if (p->flushing && (p->fl_end >= target || p->flushing == FLUSH_DEPTH ||
				    p->appends - p->fl_appends < p->fl_covers)) {
			/* An fsync started after our append covers it; or every
			 * slot is busy; or the next group is still smaller than
			 * the one in flight (starting at once would split it:
			 * more fsyncs for the same requests).  The appender that
			 * completes the group, or the end of an fsync, starts the
			 * next one for everybody written by then. */
			pthread_cond_wait(&p->cv, &p->mu);
			continue;
		}
		/* Segments with unsynced bytes or index entries, oldest first.
		 * Flushes sync in log order, so the first clean sealed segment
		 * met walking back ends the search.  The active segment's index
		 * files are synced only before a checkpoint (recovery trusts
		 * index entries below the manifest's checkpoint alone). */
		size_t first = p->nsegs, nsync;
		while (first > 0) {
			kseg *s = p->segs[first - 1];
			if (!s->active && s->synced_pos >= s->end_pos && !s->idx_dirty)
				break;
			first--;
		}
		nsync = p->nsegs - first;
		kseg *stack_segs[8], **segs = stack_segs;
		if (nsync > 8 && !(segs = malloc(nsync * sizeof(*segs)))) {
			rc = -ENOMEM;
			break;
		}
		/* Our ticket: sync everything written so far, possibly while the
		 * previous ticket's fsync is still running. */
		uint64_t t = p->fl_next++;
		int slot = (int)(t % FLUSH_DEPTH);
		int64_t end = p->leo;
		kseg *act = p->segs[p->nsegs - 1];
		p->fl[slot].end = end;
		p->fl[slot].seg = act->base;
		p->fl[slot].pos = act->end_pos;
		p->fl[slot].done = 0;
		p->fl_end = end;
		p->fl_covers = p->appends - p->fl_appends ? p->appends - p->fl_appends : 1;
		p->fl_appends = p->appends;
		p->flushing++;
		int idx_dirty[nsync ? nsync : 1];
		uint64_t upto[nsync ? nsync : 1];
		const char *what = "fsync";
		for (size_t k = 0; k < nsync; k++) {
			kseg *s = p->segs[first + k];
			ks__seg_ref(s);
			s->flush_pins++;
			idx_dirty[k] = s->idx_dirty && s->idx && !s->active;
			if (idx_dirty[k])
				s->idx_dirty = 0;
			upto[k] = s->end_pos;
			segs[k] = s;
			if (rc == 0 && (rc = slot_open(p, s, slot)))
				what = "segment open for fsync";
		}
		int dir = p->dir_dirty;
		p->dir_dirty = 0;
		uint8_t *snap = NULL;
		size_t slen = 0;
		if (p->snap_buf && p->snap_off <= end) {
			snap = p->snap_buf;
			slen = p->snap_len;
			p->snap_buf = NULL;
		}
		pthread_mutex_unlock(&p->mu);

		for (size_t i = 0; i < nsync && rc == 0; i++) {
			rc = sub_fsync(slot ? segs[i]->sync[slot] : segs[i]->log);
			if (rc == 0 && idx_dirty[i] && (rc = sub_fsync(segs[i]->idx)) == 0)
				rc = sub_fsync(segs[i]->tidx);
		}
		if (rc == 0 && dir) {
			what = "directory fsync";
			rc = sub_fsync_dir(p->vfs, p->dir);
		}
		if (rc == 0 && snap) {
			what = "producer snapshot write";
			rc = ks__p_write_snapshot(p, snap, slen);
		}
		free(snap);

		pthread_mutex_lock(&p->mu);
		for (size_t i = 0; i < nsync; i++) {
			kseg *s = segs[i];
			if (rc == 0 && upto[i] > s->synced_pos)
				s->synced_pos = upto[i];
			if (--s->flush_pins == 0) {
				/* A sealed segment, once synced, needs no more fsyncs:
				 * the slots' extra descriptors go. */
				if (s->detached || (!s->active && s->synced_pos >= s->end_pos))
					ks__seg_close_sync(s);
				if (s->detached) {
					sub_close(s->idx);
					sub_close(s->tidx);
					s->idx = s->tidx = NULL;
				}
			}
			ks__seg_unref(s);
		}
		if (segs != stack_segs)
			free(segs);
		p->fl[slot].done = 1;
		if (rc && p->state == KAAS_PART_LEADER)
			ks__p_poison(p, what, rc);
		int64_t n = retire(p);
		if (n >= 0)
			notify = n;
		pthread_cond_broadcast(&p->cv);
		if (rc) {
			rc = -EIO;
			break;
		}
	}
	if (durable)
		*durable = dur;
	if (notify >= 0) {
		fn = p->listener;
		arg = p->listener_arg;
	}
	pthread_mutex_unlock(&p->mu);
	if (fn)
		fn(arg, p, notify);
	return rc;
}
