/*
 * commit.c — the group commit that turns written into durable.
 *
 * Pipelined: fsyncs run without the partition lock, so appends continue
 * meanwhile.  A caller whose data the fsyncs in flight do not cover starts
 * another one (up to the partition's depth in flight, cfg.flush_depth, 2 by
 * default: the kernel or the server overlaps them, a network volume's round
 * trips too) once as many requests were appended since the newest one
 * started as it covers: the appenders one fsync released come back as a
 * group, which an fsync started by the first of them would split.  Until
 * then, and with every slot busy, callers wait, and the end of an fsync
 * lets one of them run the next for everybody written by then.  Depth 1
 * runs one fsync at a time.  Each fsync is a ticket covering
 * the log end at its start; the high watermark (the durable offset)
 * advances ticket by ticket in start order, never past a ticket still
 * running, and a failed fsync poisons the partition so that no ticket
 * completing after it is acknowledged.
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "util/assert.h"

/* Makes sure descriptor `slot` of s's log is open (0: the log's own, k:
 * sync[k], one per fsync in flight).  Under the partition lock, so a
 * segment that retention deletes is either not in the flush's list or
 * already open. */
static int slot_open(ks_partition *p, kseg *s, int slot)
{
	if (slot == 0)
		return ks__p_seg_open_log(p, s, s->active); /* closed while idle */
	if (s->sync[slot])
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
	int64_t notify = -1, prev = INT64_MIN;
	KS__P_LOCKED(p);
	while (p->fl_retired < p->fl_next && p->fl[p->fl_retired % (uint64_t)p->depth].done) {
		const struct kflight *f = &p->fl[p->fl_retired % (uint64_t)p->depth];
		int64_t end = f->end;
		/* The slot holds the oldest ticket, whose end is not below the
		 * one retired before it nor past the log end. */
		KAAS_ASSERT(f->ticket == p->fl_retired);
		KAAS_ASSERT(end >= prev && end <= p->leo);
		prev = end;
		p->fl_retired++;
		p->flushing--;
		KAAS_ASSERT(p->flushing == (int)(p->fl_next - p->fl_retired));
		if (p->state == KAAS_PART_LEADER && end > p->hw) {
			p->hw = end;
			p->hw_seg = f->seg;
			p->hw_pos = f->pos;
			notify = end;
		}
	}
	return notify;
}

/* Why a flush stops, waits or runs a ticket, decided under the lock.
 * FL_DONE sets *rc; *dur is the durable offset to answer. */
enum { FL_DONE, FL_WAIT, FL_GO };

static int flush_verdict(ks_partition *p, int64_t target, uint64_t gen, int led, int *rc,
			 int64_t *dur)
{
	KS__P_LOCKED(p);
	KAAS_ASSERT(p->flushing >= 0 && p->flushing <= p->depth);
	KAAS_ASSERT(p->flushing == (int)(p->fl_next - p->fl_retired));
	KAAS_ASSERT(p->hw <= p->leo);
	*dur = p->hw;
	if (p->lead_gen != gen || (p->state == KAAS_PART_FOLLOWER && (led || gen))) {
		/* The leadership the caller appended under is over: answer for
		 * it, never with a later one's (or a newer leader's manifest's)
		 * offsets.  After a clean relinquish that is success: it made
		 * everything appended durable. */
		if (gen && p->ended_gen == gen) {
			*dur = p->ended_durable;
			*rc = p->ended_rc;
			if (*rc == 0 && led && *dur < target)
				*rc = -EPERM;
		} else {
			*dur = -1;
			*rc = -EPERM;
		}
		return FL_DONE;
	}
	if (ks__p_failed(p)) {
		*rc = ks__p_unfit(p);
		return FL_DONE;
	}
	if (p->hw >= target)
		return FL_DONE; /* nothing ours is pending (also: never led here) */
	if (p->state != KAAS_PART_LEADER) {
		*rc = -EPERM;
		return FL_DONE;
	}
	if (p->flushing && (p->fl_end >= target || p->flushing == p->depth ||
			    p->appends - p->fl_appends < p->fl_covers)) {
		/* An fsync started after our append covers it; or every slot is
		 * busy; or the next group is still smaller than the one in
		 * flight (starting at once would split it: more fsyncs for the
		 * same requests).  The appender that completes the group, or
		 * the end of an fsync, starts the next one for everybody
		 * written by then. */
		if (p->fl_end < target && p->flushing == p->depth)
			p->fl_stalls++;
		return FL_WAIT;
	}
	return FL_GO;
}

/* One ticket: what it syncs, gathered under the lock, synced without it. */
typedef struct fseg {
	kseg *s;        /* pinned (a reference and a flush pin) */
	uint64_t upto;  /* its end_pos when the ticket started */
} fseg;

typedef struct ticket {
	uint64_t t;
	int slot;
	int fd;             /* the descriptor it fsyncs through: 0 the log's, k sync[k] */
	fseg *v, stack[8];
	size_t n;
	int dir;            /* the directory needs an fsync */
	uint8_t *snap;      /* the producer snapshot this ticket writes */
	size_t slen;
	int rc;             /* a failure before the fsyncs (segment open) */
	const char *what;   /* what failed */
} ticket;

/* Takes the next ticket for everything written so far and pins what it
 * syncs.  -ENOMEM takes no ticket. */
static int ticket_start(ks_partition *p, ticket *tk)
{
	/* Segments with unsynced bytes, oldest first.  Flushes sync in log
	 * order, so the first clean sealed segment met walking back ends the
	 * search.  Index files are not the flush's: a roll writes and syncs the
	 * sealed segment's, a checkpoint the active one's (recovery trusts
	 * index entries below the manifest's checkpoint alone). */
	size_t first = p->nsegs;
	while (first > 0) {
		kseg *s = p->segs[first - 1];
		if (!s->active && s->synced_pos >= s->end_pos)
			break;
		first--;
	}
	memset(tk, 0, sizeof(*tk));
	tk->n = p->nsegs - first;
	tk->v = tk->stack;
	if (tk->n > sizeof(tk->stack) / sizeof(tk->stack[0]) &&
	    !(tk->v = malloc(tk->n * sizeof(*tk->v))))
		return -ENOMEM;
	/* Possibly while the previous ticket's fsync is still running.  The
	 * slot is free: its last ticket (DEPTH before ours) has retired. */
	KS__P_LOCKED(p);
	KAAS_ASSERT(p->state == KAAS_PART_LEADER && p->nsegs > 0);
	KAAS_ASSERT(p->flushing < p->depth);
	KAAS_ASSERT(p->fl_next - p->fl_retired < (uint64_t)p->depth);
	KAAS_ASSERT(p->leo >= p->fl_end || p->fl_retired == p->fl_next);
	tk->t = p->fl_next++;
	tk->slot = (int)(tk->t % (uint64_t)p->depth);
	/* The descriptor: the log's own unless a ticket in flight uses it
	 * (only overlapping fsyncs need descriptors of their own, so an
	 * unpipelined partition holds one). */
	for (int used = 1; used;) {
		used = 0;
		for (uint64_t u = p->fl_retired; u < tk->t; u++) {
			const struct kflight *o = &p->fl[u % (uint64_t)p->depth];
			if (!o->done && o->fd == tk->fd) {
				tk->fd++;
				used = 1;
			}
		}
	}
	KAAS_ASSERT(tk->fd < p->depth);
	struct kflight *f = &p->fl[tk->slot];
	f->fd = tk->fd;
	kseg *act = p->segs[p->nsegs - 1];
	KAAS_ASSERT(act->active);
	f->ticket = tk->t;
	f->end = p->leo;
	f->seg = act->base;
	f->pos = act->end_pos;
	f->done = 0;
	p->fl_end = f->end;
	p->fl_covers = p->appends - p->fl_appends ? p->appends - p->fl_appends : 1;
	p->fl_appends = p->appends;
	p->flushing++;
	tk->what = "fsync";
	for (size_t k = 0; k < tk->n; k++) {
		kseg *s = p->segs[first + k];
		ks__seg_ref(s);
		s->flush_pins++;
		tk->v[k].s = s;
		tk->v[k].upto = s->end_pos;
		if (tk->rc == 0 && (tk->rc = slot_open(p, s, tk->fd)))
			tk->what = "segment open for fsync";
	}
	tk->dir = p->dir_dirty;
	p->dir_dirty = 0;
	if (p->snap_buf && p->snap_off <= f->end) {
		tk->snap = p->snap_buf;
		tk->slen = p->snap_len;
		p->snap_buf = NULL;
	}
	return 0;
}

/* The ticket's fsyncs and snapshot write, without the partition lock. */
static int ticket_sync(ks_partition *p, ticket *tk)
{
	int rc = tk->rc;
	KS__P_UNLOCKED(p);
	for (size_t i = 0; i < tk->n && rc == 0; i++) {
		const fseg *g = &tk->v[i];
		/* Pinned, and descriptor k > 0 is one of its own. */
		KAAS_ASSERT(g->s->flush_pins > 0);
		KAAS_ASSERT(tk->fd == 0 || (g->s->sync[tk->fd] && g->s->sync[tk->fd] != g->s->log));
		rc = sub_fsync(tk->fd ? g->s->sync[tk->fd] : g->s->log);
	}
	if (rc == 0 && tk->dir) {
		tk->what = "directory fsync";
		rc = sub_fsync_dir(p->vfs, p->dir);
	}
	if (rc == 0 && tk->snap) {
		tk->what = "producer snapshot write";
		rc = ks__p_write_snapshot(p, tk->snap, tk->slen);
	}
	free(tk->snap);
	tk->snap = NULL;
	return rc;
}

/* Back under the lock: unpins the ticket's segments, marks it done and
 * retires what can retire.  The new high watermark to announce, or -1. */
static int64_t ticket_finish(ks_partition *p, ticket *tk, int rc)
{
	KS__P_LOCKED(p);
	/* The slot is still ours and not yet marked: no other ticket took it
	 * while our fsyncs ran, and ours retires only after this. */
	KAAS_ASSERT(p->fl[tk->slot].ticket == tk->t && !p->fl[tk->slot].done);
	KAAS_ASSERT(tk->t >= p->fl_retired && tk->t < p->fl_next);
	for (size_t i = 0; i < tk->n; i++) {
		kseg *s = tk->v[i].s;
		KAAS_ASSERT(s->flush_pins > 0);
		if (rc == 0 && tk->v[i].upto > s->synced_pos)
			s->synced_pos = tk->v[i].upto;
		if (--s->flush_pins == 0) {
			/* A sealed segment, once synced, needs no more fsyncs: the
			 * slots' extra descriptors go. */
			if (s->detached || (!s->active && s->synced_pos >= s->end_pos))
				ks__seg_close_sync(s);
		}
		ks__seg_unref(s);
	}
	if (tk->v != tk->stack)
		free(tk->v);
	p->fl[tk->slot].done = 1;
	if (rc && p->state == KAAS_PART_LEADER)
		ks__p_poison(p, tk->what, rc);
	int64_t n = retire(p);
	pthread_cond_broadcast(&p->cv);
	return n;
}

int ks_partition_flush(ks_partition *p, int64_t *durable)
{
	int rc = 0, v;
	int64_t notify = -1, dur = -1;
	ks_hw_listener fn = NULL;
	void *arg = NULL;
	ks__p_lock(p);
	int64_t target = p->leo;
	uint64_t gen = p->lead_gen;
	int led = p->state != KAAS_PART_FOLLOWER;
	while ((v = flush_verdict(p, target, gen, led, &rc, &dur)) != FL_DONE) {
		if (v == FL_WAIT) {
			ks__p_wait(p);
			continue;
		}
		ticket tk;
		if ((rc = ticket_start(p, &tk)))
			break;
		ks__p_unlock(p);
		rc = ticket_sync(p, &tk);
		ks__p_lock(p);
		int64_t n = ticket_finish(p, &tk, rc);
		if (n >= 0)
			notify = n;
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
	KAAS_ASSERT(notify <= p->leo);
	ks__p_unlock(p);
	/* Without the lock (the order: the listener may take the broker's). */
	KS__P_UNLOCKED(p);
	if (fn)
		fn(arg, p, notify);
	return rc;
}
