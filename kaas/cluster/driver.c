/*
 * driver.c — the ownership driver, the cluster loop's step that converges
 * this broker's partition table to the assignment it last read (Rule 2):
 *   1. relinquish what it lost (flush, final manifest with its relinquish
 *      record, close), all at once;
 *   2. report `released` for the generation once it holds nothing the
 *      generation does not give it;
 *   3. take over what it gained once no other incarnation may still hold
 *      it (kcl_view_clear_for) and the lease holds, in batches the table
 *      overlaps, each step asked again by the take-over guard (tkguard.c);
 * then say "ready" once it leads its share.  A converged driver skips most
 * passes (DRIVER_FULL_EVERY).  Every step is idempotent and re-driven by
 * the next pass.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/cluster/runtime_int.h"
#include "kaas/core/ptable.h"
#include "kaas/topics/topics.h"
#include "util/clock.h"
#include "util/log.h"

typedef struct led_ent {
	char *topic;
	char topic_id[40];
	int32_t partition, epoch;
	int state;
} led_ent;

typedef struct led_list {
	led_ent *v;
	size_t n, cap;
} led_list;

static void led_cb(void *arg, const char *topic, const char *topic_id, int32_t partition, int32_t epoch,
		   int state)
{
	led_list *l = arg;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 64;
		led_ent *nv = realloc(l->v, nc * sizeof(*nv));
		if (!nv)
			return;
		l->v = nv;
		l->cap = nc;
	}
	led_ent *e = &l->v[l->n];
	if (!(e->topic = strdup(topic)))
		return;
	snprintf(e->topic_id, sizeof(e->topic_id), "%s", topic_id ? topic_id : "");
	e->partition = partition;
	e->epoch = epoch;
	e->state = state;
	l->n++;
}

static int led_cmp(const void *a, const void *b)
{
	const led_ent *x = a, *y = b;
	int c = strcmp(x->topic, y->topic);
	return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

static const led_ent *led_find(const led_list *l, const char *topic, int32_t partition)
{
	led_ent key = {(char *)topic, "", partition, 0, 0};
	return bsearch(&key, l->v, l->n, sizeof(*l->v), led_cmp);
}

static void led_free(led_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].topic);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

/* The slot of topic/partition in the current assignment, if it is mine. */
static const kcl_slot *my_slot(const kcl_rt *rt, const char *topic, const char *topic_id, int32_t partition)
{
	if (!rt->have_cur)
		return NULL;
	const kcl_abroker *me = kcl_assign_broker(&rt->cur, rt->id);
	if (!me || kcl_incarn_cmp(me->inc, rt->inc) != 0)
		return NULL;
	const kcl_atopic *t = kcl_assign_topic(&rt->cur, topic);
	if (!t || partition < 0 || partition >= t->n)
		return NULL;
	if (topic_id && *topic_id && t->topic_id[0] && strcmp(t->topic_id, topic_id) != 0)
		return NULL;
	return t->parts[partition].leader == rt->id ? &t->parts[partition] : NULL;
}

static int learn_topic(kcl_rt *rt, const char *name, const char *topic_id)
{
	kt_topic_info info;
	int rc = kt_topics_lookup(rt->b->topics, name, (int32_t)strlen(name), &info);
	if (rc)
		return rc;
	/* Only the incarnation the assignment names: a registry that has not
	 * yet seen a delete and re-create still holds the old one. */
	if (topic_id && *topic_id && strcmp(info.id, topic_id) != 0)
		return -EAGAIN;
	kt_topics_prepare_dir(rt->b->topics, &info);
	kb_topic_desc d = {info.name, info.id, info.partitions, info.cfg};
	return kb_ptable_ensure_topic(rt->b->parts, &d);
}

#define TAKEOVER_BATCH 256
#define LOG_EACH_MAX 8 /* larger batches are logged as one line */

static void take_over_batch(kcl_rt *rt, kb_takeover *x, size_t n)
{
	kb_ptable *t = rt->b->parts;
	int64_t t0 = ku_mono_ns();
	if (kb_ptable_take_over_many(t, x, n) != 0)
		return;
	/* Partitions of a topic the table does not know yet (created since
	 * it last heard from the registry): learn each such topic once, then
	 * those partitions again as one batch. */
	size_t again = 0;
	int lrc = 0;
	for (size_t i = 0; i < n; i++) {
		if (x[i].rc != -ENOENT)
			continue;
		/* Preparing a topic's directory may move an earlier incarnation's
		 * aside: like a take-over step, only while the lease holds. */
		if (i == 0 || strcmp(x[i].topic, x[i - 1].topic) != 0)
			lrc = kcl_lease_holds(&rt->lease, ku_mono_ns()) ? learn_topic(rt, x[i].topic, x[i].topic_id)
									 : -EAGAIN;
		if (lrc == -EAGAIN) {
			x[i].rc = -EAGAIN; /* the registry catches up at its next refresh */
		} else if (lrc == 0) {
			x[i].rc = 1; /* learnt: to be tried again below */
			again++;
		}
	}
	if (again) {
		kb_takeover *y = calloc(again, sizeof(*y));
		size_t k = 0;
		for (size_t i = 0; y && i < n; i++)
			if (x[i].rc == 1)
				y[k++] = x[i];
		if (!y || kb_ptable_take_over_many(t, y, k) != 0)
			k = 0;
		for (size_t i = 0, j = 0; i < n; i++)
			if (x[i].rc == 1)
				x[i].rc = j < k ? y[j++].rc : -ENOMEM;
		free(y);
	}
	long long ms = (long long)((ku_mono_ns() - t0) / 1000000);
	size_t ok = 0;
	for (size_t i = 0; i < n; i++) {
		if (x[i].rc == -EAGAIN)
			continue; /* failed before: the table backs off */
		if (x[i].rc) {
			char what[300];
			snprintf(what, sizeof(what), "take-over of %s/%d at epoch %d failed", x[i].topic, x[i].partition,
				 x[i].epoch);
			kcl__refuse_as(what, sub_strerror(x[i].rc), "retried; not led here until it succeeds");
		} else if (n <= LOG_EACH_MAX) {
			KLOG_INFO("cluster", "%s/%d: leader at epoch %d (take-over %lld ms)", x[i].topic, x[i].partition,
				  x[i].epoch, ms);
		}
		ok += x[i].rc == 0;
	}
	if (n > LOG_EACH_MAX && ok)
		KLOG_INFO("cluster", "took over %zu partition(s) in %lld ms (from %s/%d to %s/%d)", ok, ms, x[0].topic,
			  x[0].partition, x[n - 1].topic, x[n - 1].partition);
}

/* A converged driver (everything it wants led at the right epoch, nothing
 * to let go, ready) skips its pass while the assignment and the broker's
 * own state stay the same, but makes a full pass every DRIVER_FULL_EVERY
 * polls anyway: the table can change on its own (a partition poisoned,
 * failed or dropped by housekeeping), and a full pass is what notices.
 * Skipping is the idle broker's largest saving at 10,000 partitions (a
 * full pass walks the table and the assignment: a few ms). */
#define DRIVER_FULL_EVERY 10

void kcl__driver_pass(kcl_rt *rt)
{
	kb_ptable *t = rt->b->parts;
	pthread_mutex_lock(&rt->mu);
	int st_now = rt->state;
	pthread_mutex_unlock(&rt->mu);
	int others = 0;
	for (size_t i = 0; i < rt->view.n; i++) {
		const kcl_peer *p = &rt->view.peers[i];
		if (kcl__eligible_peer(rt, p) && p->state == KCL_ST_RUNNING && p->id != rt->id)
			others++;
	}
	if (rt->drv_converged && rt->have_cur && kcl_gen_cmp(rt->drv_gen, rt->cur.gen) == 0 &&
	    rt->drv_state == st_now && ++rt->drv_skipped % DRIVER_FULL_EVERY != 0) {
		pthread_mutex_lock(&rt->mu);
		rt->other_runners = others;
		pthread_mutex_unlock(&rt->mu);
		return;
	}
	led_list l = {0};
	kb_ptable_led(t, led_cb, &l);
	qsort(l.v, l.n, sizeof(*l.v), led_cmp);
	int64_t now = ku_mono_ns();
	/* 1. What this broker lost: relinquish (flush, final manifest, close). */
	int changed = 0;
	kb_takeover *lost = calloc(l.n ? l.n : 1, sizeof(*lost));
	int *lrc = calloc(l.n ? l.n : 1, sizeof(*lrc));
	size_t *lidx = calloc(l.n ? l.n : 1, sizeof(*lidx));
	size_t nlost = 0;
	for (size_t i = 0; lost && lrc && lidx && i < l.n; i++) {
		led_ent *e = &l.v[i];
		const kcl_slot *s = my_slot(rt, e->topic, e->topic_id, e->partition);
		if (s && s->epoch == e->epoch)
			continue;
		lost[nlost] = (kb_takeover){e->topic, NULL, e->partition, 0, 0, 0, 0};
		lidx[nlost++] = i;
	}
	/* All at once: the table overlaps their volume work on a few threads. */
	if (nlost && kb_ptable_relinquish_many(t, lost, nlost, lrc) == 0) {
		size_t bad = 0;
		for (size_t j = 0; j < nlost; j++) {
			led_ent *e = &l.v[lidx[j]];
			if (nlost <= LOG_EACH_MAX || lrc[j])
				KLOG_INFO("cluster", "%s/%d: relinquished epoch %d%s%s", e->topic, e->partition, e->epoch,
					  lrc[j] ? ": " : "", lrc[j] ? sub_strerror(lrc[j]) : "");
			bad += lrc[j] != 0;
			e->state = 0;
			changed = 1;
		}
		if (nlost > LOG_EACH_MAX)
			KLOG_INFO("cluster", "relinquished %zu partition(s) (%zu with errors) in %lld ms", nlost, bad,
				  (long long)((ku_mono_ns() - now) / 1000000));
	}
	free(lost);
	free(lrc);
	free(lidx);
	/* 2. Holding nothing this generation does not give: say so. */
	if (rt->have_cur) {
		pthread_mutex_lock(&rt->mu);
		int news = kcl_gen_cmp(rt->released, rt->cur.gen) != 0;
		rt->released = rt->cur.gen;
		pthread_mutex_unlock(&rt->mu);
		if (news || changed)
			kcl__rt_hb_now(rt);
	}
	/* 3. What it gained, once no other incarnation may still hold it. */
	int wanted = 0, in_place = 0, waiting = 0;
	const kcl_abroker *me = rt->have_cur ? kcl_assign_broker(&rt->cur, rt->id) : NULL;
	int named = me && kcl_incarn_cmp(me->inc, rt->inc) == 0;
	if (named) {
		int clear = kcl_view_clear_for(&rt->view, rt->inc, rt->id, rt->cur.gen, now) &&
			    kcl_lease_holds(&rt->lease, now);
		kb_takeover *want = NULL;
		size_t nwant = 0, cap = 0;
		for (size_t ti = 0; ti < rt->cur.ntopics; ti++) {
			const kcl_atopic *at = &rt->cur.topics[ti];
			for (int32_t p = 0; p < at->n; p++) {
				if (at->parts[p].leader != rt->id)
					continue;
				wanted++;
				const led_ent *e = led_find(&l, at->name, p);
				if (e && e->state == 1 && e->epoch == at->parts[p].epoch) {
					in_place++;
					continue;
				}
				if (!clear) {
					waiting++;
					continue;
				}
				if (nwant == cap) {
					size_t nc = cap ? cap * 2 : 64;
					kb_takeover *nt = realloc(want, nc * sizeof(*nt));
					if (!nt)
						break;
					want = nt;
					cap = nc;
				}
				want[nwant++] = (kb_takeover){at->name, at->topic_id[0] ? at->topic_id : NULL, p,
							      at->parts[p].epoch, 0, 0, 0};
			}
		}
		/* The take-overs of this pass in batches: the table overlaps their
		 * volume round trips on a few threads; between batches the lease
		 * and the stop flag are looked at again, and within them the guard
		 * asks again before every step that changes the volume. */
		if (nwant)
			kcl_tkguard_arm(&rt->tk, rt->cur.gen);
		for (size_t b0 = 0; b0 < nwant; b0 += TAKEOVER_BATCH) {
			size_t nb = nwant - b0 < TAKEOVER_BATCH ? nwant - b0 : TAKEOVER_BATCH;
			if (__atomic_load_n(&rt->loop_stop, __ATOMIC_ACQUIRE) || !kcl_lease_holds(&rt->lease, ku_mono_ns()))
				break;
			take_over_batch(rt, want + b0, nb);
		}
		free(want);
	}
	/* Ready only once membership() saw the view settled and swept this id's
	 * older exit certificates (loop.c): settled alone can turn true between
	 * that sweep and this pass, and "ready" promises both.  And only under
	 * an assignment that names this incarnation: the controller counts a
	 * joiner a session after it first saw its heartbeat, later than the
	 * joiner's own watch ends, and an assignment made without it gives it
	 * nothing to lead, which "leads its share" would otherwise satisfy. */
	if (!rt->ready && rt->have_cur && rt->gone_swept && named) {
		led_list l2 = {0};
		kb_ptable_led(t, led_cb, &l2);
		size_t leading = 0;
		for (size_t i = 0; i < l2.n; i++)
			leading += l2.v[i].state == 1;
		led_free(&l2);
		/* And serves the groups the map gives it: a client that comes
		 * once this says ready finds its coordinator loaded. */
		kb_broker *b = rt->b;
		if (leading >= (size_t)wanted && (!b->coord_settled || b->coord_settled(b->coord_settled_arg))) {
			rt->ready = 1;
			KLOG_INFO("cluster", "ready: broker %d leads %zu partition(s) of assignment epoch %" PRId64
					     " generation %" PRId64 " (joined %lld ms ago)",
				  rt->id, leading, rt->cur.gen.controller_epoch, rt->cur.gen.generation,
				  (long long)((now - rt->started_ns) / 1000000));
			__atomic_store_n(&rt->b->joining, 0, __ATOMIC_RELEASE); /* after the log line */
		}
	}
	pthread_mutex_lock(&rt->mu);
	size_t still = 0;
	for (size_t i = 0; i < l.n; i++)
		still += l.v[i].state != 0;
	rt->nled = (int)(still > (size_t)wanted ? still : (size_t)wanted);
	rt->other_runners = others;
	/* Converged as of the table read at the start of this pass: nothing
	 * was let go or taken over in it, all of it in place. */
	rt->drv_converged = rt->ready && rt->have_cur && !changed && in_place == wanted && still == (size_t)wanted;
	/* Partitions given to this broker wait for the old owners' `released`
	 * (a planned hand-off): poll fast until they come, so that a hand-off
	 * costs a few fast polls rather than a few poll intervals. */
	if (waiting)
		rt->fast_until_ns = now + rt->session_ns;
	rt->drv_gen = rt->have_cur ? rt->cur.gen : (kcl_gen){0, 0};
	rt->drv_state = st_now;
	if (rt->state == KCL_ST_DRAINING)
		rt->drain_seen = 1;
	pthread_mutex_unlock(&rt->mu);
	led_free(&l);
}
