/*
 * runtime_int.h — what runtime.c (joining, heartbeat, watchdog) and loop.c
 * (membership, controller, assignment, ownership driver) share.
 *
 * rt->mu guards state, released, hb_now/hb_stop and the drain figures;
 * everything else below "loop" belongs to the cluster loop thread alone.
 */
#ifndef KAAS_CLUSTER_RUNTIME_INT_H
#define KAAS_CLUSTER_RUNTIME_INT_H

#include <pthread.h>
#include <stdint.h>

#include "kaas/cluster/assignment.h"
#include "kaas/cluster/balancer.h"
#include "kaas/cluster/controller.h"
#include "kaas/cluster/lease.h"
#include "kaas/cluster/member.h"
#include "kaas/cluster/runtime.h"
#include "kaas/cluster/tkguard.h"
#include "kaas/cluster/token.h"

#define KCL_NSHARDS 16 /* group-coordinator shards */

typedef struct kcl_hostent {
	int32_t id;
	kcl_incarn inc;
	char host_id[128];
	int64_t first_seen_ns; /* by this observer: a joiner leads nothing for a session */
} kcl_hostent;

struct kcl_rt {
	kb_broker *b;
	int32_t id;
	kcl_incarn inc;
	char host_id[128];
	int64_t hb_ns, session_ns, poll_ns, started_ns;
	int64_t seq; /* heartbeat thread only */
	int pred_how;
	kcl_incarn pred;
	int64_t pred_seq;
	int token_fd;

	kcl_lease lease;
	kcl_wd wd;
	kcl_tkguard tk;     /* asked by the table's take-overs (tkguard.h) */
	int lease_ok, wd_ok, view_ok, gate_set, tk_ok;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	int state;          /* enum kcl_state */
	kcl_gen released;
	int hb_now, hb_stop;
	int nled;           /* partitions led or wanted, as of the last driver pass */
	int other_runners;  /* live running brokers besides this one */
	int drain_seen;     /* a driver pass ran after draining was announced */
	uint64_t hb_failures;

	pthread_t hb_thread, wd_thread, loop_thread;
	int hb_started, wd_started, loop_started;
	int wd_stop, loop_stop;

	/* loop */
	kcl_view view;
	kcl_hostent *hosts;
	size_t nhosts, caphosts;
	kcl_areader areader;
	kcl_assign cur;     /* the assignment last read (gen {0,0}: none) */
	int have_cur;
	int ready;          /* logged "ready" once: settled, assignment applied, all of it led */
	int64_t ctl_epoch;  /* >0 while this broker is the controller */
	int64_t undecided_epoch, undecided_since_ns;
	int64_t ctl_cleanup_ns;
	uint64_t in_sig;    /* the balancer's inputs when it last found nothing to change */
	int have_in_sig;
	uint64_t balances, balances_skipped;
	int64_t step_ns[5]; /* loop thread: time per step since the last report */
	int drv_converged;  /* the driver's last full pass found everything in place */
	kcl_gen drv_gen;    /* ... for this assignment */
	int drv_state;      /* ... and this broker state */
	unsigned drv_skipped;
	int64_t fast_until_ns; /* loop thread: poll every FAST_POLL_NS until then */
	int64_t last_leaders_sig;
	kcl_gen leaders_gen;
	int64_t log_quiet_until_ns;
	unsigned refusals;
	int gone_swept;     /* the id's older certificates were removed once */
	/* The heartbeat writer's volume: a session of its own on an nfs://
	 * cluster directory (hb_own), so that lease renewals never queue behind
	 * this broker's other cluster-directory calls, which one libnfs session
	 * serves one at a time; elsewhere b->cluster itself. */
	sub_vfs *hbv;
	int hb_own;
	/* controller (loop thread) */
	int64_t last_pub_gen;   /* this incarnation's last published generation */
	int64_t noctl_since_ns; /* when this observer last saw no controller (0: one is known) */
	int32_t ctl_owner;      /* the controller as this observer knows it (-1: none) */
	/* topic deletes (tdelete.c, loop thread) */
	int64_t tdel_next_list_ns, tdel_swept_epoch, tdel_wait_logged_ns;
};

void kcl__rt_hb_now(kcl_rt *rt);
void kcl__rt_abandon(kcl_rt *rt, int code, const char *why, int certify);
void *kcl__loop_main(void *arg);
void kcl__loop_free(kcl_rt *rt);
/* The loop's shared pieces (loop.c): a refusal logged by name at most every
 * 30 s per `what`; a live broker that may lead (the newest incarnation of
 * its id, alive, running or draining). */
void kcl__refuse_as(const char *what, const char *why, const char *consequence);
int kcl__eligible_peer(const kcl_rt *rt, const kcl_peer *p);
/* The ownership driver's pass (driver.c), once per loop pass. */
void kcl__driver_pass(kcl_rt *rt);
/* The controller's step of topic deletes (tdelete.c), once per pass. */
void kcl__tdel_step(kcl_rt *rt);

#endif
