/*
 * tdelete.c — the controller finishes topic deletes once every broker let
 * go of the partitions (tdelete.h; docs/cluster.md "Topic delete across
 * brokers").  Called by the cluster loop on the controller after the driver
 * (so the controller's own `released` is that of this pass).
 *
 * The tombstones are listed at once when this broker becomes controller
 * (the start-up sweep), then every pass while some are pending and every
 * second otherwise: a delete reaches the controller's registry at its next
 * refresh anyway, and an idle cluster pays one listing a second for it.
 */
#include "kaas/cluster/tdelete.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/cluster/runtime_int.h"
#include "kaas/topics/topics.h"
#include "util/clock.h"
#include "util/log.h"

#define IDLE_LIST_NS 1000000000LL
#define WAIT_LOG_NS (10 * 1000000000LL)

int kcl_tdel_verdict(const kcl_assign *cur, int64_t ctl_epoch, const kcl_view *view, kcl_incarn self,
		     int32_t self_id, kcl_gen self_released, const char *name, const char *id, int64_t now_ns,
		     int32_t *blocker)
{
	if (blocker)
		*blocker = -1;
	/* Only an assignment this controller published reflects its registry,
	 * which no longer holds the topic. */
	if (!cur || ctl_epoch <= 0 || cur->gen.controller_epoch != ctl_epoch)
		return KCL_TDEL_WAIT_ASSIGN;
	const kcl_atopic *t = kcl_assign_topic(cur, name);
	if (t && (!t->topic_id[0] || strcmp(t->topic_id, id) == 0))
		return KCL_TDEL_WAIT_ASSIGN; /* still assigned (an unnamed id may be it) */
	if (kcl_gen_cmp(self_released, cur->gen) < 0) {
		if (blocker)
			*blocker = self_id;
		return KCL_TDEL_WAIT_RELEASE;
	}
	if (!kcl_view_clear_for(view, self, self_id, cur->gen, now_ns)) {
		for (size_t i = 0; blocker && i < view->n; i++) {
			const kcl_peer *p = &view->peers[i];
			if ((p->id != self_id || kcl_incarn_cmp(p->inc, self) != 0) &&
			    (p->live == KCL_LIVE_ALIVE || p->live == KCL_LIVE_UNKNOWN) &&
			    kcl_gen_cmp(p->released, cur->gen) < 0) {
				*blocker = p->id;
				break;
			}
		}
		return KCL_TDEL_WAIT_RELEASE;
	}
	return KCL_TDEL_READY;
}

void kcl__tdel_step(kcl_rt *rt)
{
	if (rt->ctl_epoch <= 0 || !rt->b->topics)
		return;
	int64_t now = ku_mono_ns();
	int sweep = rt->tdel_swept_epoch != rt->ctl_epoch;
	if (!sweep && now < rt->tdel_next_list_ns)
		return;
	kt_tombstone *v = NULL;
	size_t n = 0;
	int rc = kt_topics_tombstones(rt->b->topics, &v, &n);
	if (rc) {
		KLOG_WARN("cluster", "controller: listing deleted-topics/: %s (retried)", sub_strerror(rc));
		rt->tdel_next_list_ns = now + IDLE_LIST_NS;
		return;
	}
	if (sweep) {
		rt->tdel_swept_epoch = rt->ctl_epoch;
		if (n)
			KLOG_INFO("cluster", "controller epoch %" PRId64 ": %zu unfinished topic delete(s) to re-drive",
				  rt->ctl_epoch, n);
	}
	pthread_mutex_lock(&rt->mu);
	kcl_gen released = rt->released;
	pthread_mutex_unlock(&rt->mu);
	size_t left = 0;
	for (size_t i = 0; i < n; i++) {
		int32_t blocker = -1;
		int vd = kcl_tdel_verdict(rt->have_cur ? &rt->cur : NULL, rt->ctl_epoch, &rt->view, rt->inc, rt->id,
					  released, v[i].name, v[i].id, now, &blocker);
		if (vd != KCL_TDEL_READY) {
			left++;
			if (now >= rt->tdel_wait_logged_ns) {
				char who[48] = "";
				if (blocker >= 0)
					snprintf(who, sizeof(who), " (broker %d has not)", blocker);
				rt->tdel_wait_logged_ns = now + WAIT_LOG_NS;
				KLOG_INFO("cluster", "controller: the delete of topic %s (id %s) waits for %s%s", v[i].name,
					  v[i].id,
					  vd == KCL_TDEL_WAIT_ASSIGN ? "an assignment without its partitions"
								     : "every broker to release them",
					  who);
			}
			continue;
		}
		/* A controller that lost its lease or its epoch leaves it to the
		 * next one (which waits for every broker again). */
		if (!kcl_lease_holds(&rt->lease, ku_mono_ns()) || kcl_ctl_superseded(rt->b->cluster, rt->ctl_epoch) != 0) {
			left++;
			break;
		}
		rc = kt_topics_delete_finish(rt->b->topics, v[i].name, v[i].id);
		if (rc) {
			left++;
			if (rc != -EBUSY)
				KLOG_WARN("cluster", "controller: finishing the delete of topic %s (id %s): %s (retried)",
					  v[i].name, v[i].id, sub_strerror(rc));
			continue;
		}
		KLOG_INFO("cluster", "controller epoch %" PRId64 ": topic %s (id %s) released by every broker at "
				     "generation %" PRId64 "; delete finished",
			  rt->ctl_epoch, v[i].name, v[i].id, rt->cur.gen.generation);
	}
	free(v);
	rt->tdel_next_list_ns = left ? now : now + IDLE_LIST_NS;
}
