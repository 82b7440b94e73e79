/*
 * tdelete.h — the controller's part of a topic delete across brokers
 * (docs/cluster.md, "Topic delete across brokers").
 *
 * The broker that receives DeleteTopics writes the tombstone
 * CLUSTER/deleted-topics/<id>.json and removes the registry entry; it never
 * touches DATA/<name>/, which other brokers may still have open.  The
 * controller lists the tombstones and finishes a delete only once no live
 * incarnation can still hold a descriptor under the directory: its own
 * published assignment G leaves the topic's partitions out, and every
 * incarnation it sees has heartbeated released >= G (it relinquished what G
 * does not give it) or is expired or gone.  Then the registry renames the
 * directory into the trash if its stamp still names the deleted ID, removes
 * the tombstone, then the trash (kt_topics_delete_finish).  A new controller
 * re-drives every tombstone it finds; each step is idempotent.
 */
#ifndef KAAS_CLUSTER_TDELETE_H
#define KAAS_CLUSTER_TDELETE_H

#include <stdint.h>

#include "kaas/cluster/assignment.h"
#include "kaas/cluster/member.h"

enum kcl_tdel {
	KCL_TDEL_WAIT_ASSIGN = 1, /* no assignment of this controller leaves the topic out yet */
	KCL_TDEL_WAIT_RELEASE,    /* some live incarnation has not released that assignment */
	KCL_TDEL_READY,           /* nothing can reference the partitions: finish the delete */
};

/* Where the delete of incarnation `id` of topic `name` stands, as the
 * controller of epoch ctl_epoch sees it: `cur` is the assignment it last
 * applied (NULL: none), self/self_id/self_released the controller's own
 * incarnation and what its driver released, `view` its membership.  When
 * not READY and `blocker` is not NULL, *blocker is the id of a broker
 * being waited for (-1: none in particular).  Pure: no I/O. */
int kcl_tdel_verdict(const kcl_assign *cur, int64_t ctl_epoch, const kcl_view *view, kcl_incarn self,
		     int32_t self_id, kcl_gen self_released, const char *name, const char *id, int64_t now_ns,
		     int32_t *blocker);

#endif
