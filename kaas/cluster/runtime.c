/*
 * runtime.c — joining, the heartbeat writer, the watchdog and the life cycle
 * of the cluster runtime (runtime.h).  The cluster loop (membership,
 * controller, assignment, ownership driver) is in loop.c.
 */
#include "kaas/cluster/runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kaas/cluster/runtime_int.h"
#include "kaas/cluster/supervise.h"
#include "kaas/core/ptable.h"
#include "util/clock.h"
#include "util/log.h"

static uint64_t random64(void)
{
	uint64_t v = 0;
	FILE *f = fopen("/dev/urandom", "r");
	if (!f || fread(&v, sizeof(v), 1, f) != 1)
		v = (uint64_t)ku_mono_ns() ^ ((uint64_t)getpid() << 32);
	if (f)
		fclose(f);
	v &= (1ULL << 53) - 1;
	return v ? v : 1;
}

void kcl__rt_hb_now(kcl_rt *rt)
{
	pthread_mutex_lock(&rt->mu);
	rt->hb_now = 1;
	pthread_cond_broadcast(&rt->cv);
	pthread_mutex_unlock(&rt->mu);
}

/* Ends this incarnation: the gate is closed first (nothing is acknowledged
 * again), then the process leaves without writing to any partition; the
 * kernel closes the descriptors.  A certificate by "self" lets peers take
 * over at once; if the volume is what hangs, the lease runs out instead. */
void kcl__rt_abandon(kcl_rt *rt, int code, const char *why, int certify)
{
	kcl_lease_give_up(&rt->lease, why);
	KLOG_ERR("cluster", "broker %d incarnation %llu gives up leadership: %s; exiting (%d) to start again "
			    "as a new incarnation", rt->id, (unsigned long long)rt->inc.incarnation, why, code);
	if (certify)
		kcl_gone_write(rt->b->cluster, rt->id, rt->inc, "self");
	_exit(code);
}

/* ---- the ack gate and the watchdog hooks ---------------------------------------------- */

static int gate_holds(void *arg)
{
	kcl_rt *rt = arg;
	return kcl_lease_holds(&rt->lease, ku_mono_ns());
}

static int io_begin(void *arg)
{
	kcl_rt *rt = arg;
	return kcl_wd_begin(&rt->wd, KCL_WD_FSYNC, ku_mono_ns());
}

static void io_end(void *arg, int slot)
{
	kcl_rt *rt = arg;
	kcl_wd_end(&rt->wd, slot, ku_mono_ns());
}

/* ---- heartbeat -------------------------------------------------------------------------- */

static void fill_hb(kcl_rt *rt, kcl_hb *hb)
{
	memset(hb, 0, sizeof(*hb));
	hb->id = rt->id;
	hb->inc = rt->inc;
	hb->seq = ++rt->seq;
	pthread_mutex_lock(&rt->mu);
	hb->state = rt->state;
	hb->released = rt->released;
	pthread_mutex_unlock(&rt->mu);
	snprintf(hb->endpoint, sizeof(hb->endpoint), "%s:%d", rt->b->host ? rt->b->host : "localhost",
		 rt->b->port);
	hb->nlst = rt->b->nadv;
	memcpy(hb->lst, rt->b->adv, sizeof(hb->lst));
	snprintf(hb->host_id, sizeof(hb->host_id), "%s", rt->host_id);
	hb->wall_ms = ku_wall_ms();
	hb->pred_how = rt->pred_how;
	hb->pred = rt->pred;
	hb->pred_seq = rt->pred_seq;
}

/* One heartbeat write, renewing the lease.  Returns the write's rc. */
static int heartbeat_once(kcl_rt *rt)
{
	kcl_hb own;
	char err[256];
	int64_t t_read = ku_mono_ns();
	/* One writer per file: a newer incarnation of this id wins it. */
	int r = kcl_hb_read(rt->hbv, rt->id, &own, err, sizeof(err));
	int64_t t_read_end = ku_mono_ns();
	if (r == 0 && kcl_incarn_cmp(own.inc, rt->inc) > 0) {
		char why[400];
		snprintf(why, sizeof(why), "brokers/%d.json shows a newer incarnation %llu (endpoint %s)", rt->id,
			 (unsigned long long)own.inc.incarnation, own.endpoint);
		kcl__rt_abandon(rt, KCL_EXIT_SUPERSEDED, why, 1);
	}
	kcl_hb hb;
	fill_hb(rt, &hb);
	int64_t now = ku_mono_ns();
	int b = kcl_lease_renew_begin(&rt->lease, now);
	if (b == -ECANCELED)
		return b;
	int slot = kcl_wd_begin(&rt->wd, KCL_WD_HEARTBEAT, now);
	int rc = kcl_hb_write(rt->hbv, &hb);
	int64_t end = ku_mono_ns();
	kcl_wd_end(&rt->wd, slot, end);
	int l = b ? b : kcl_lease_renew_end(&rt->lease, rc, end);
	/* A fifth of the stall bound: the operator sees the volume (or this
	 * host) slowing down well before the watchdog or the lease ends it. */
	if (end - t_read > rt->wd.bound_ns / 5)
		KLOG_WARN("cluster", "slow heartbeat: %lld ms (own file read %lld ms, write %lld ms)",
			  (long long)((end - t_read) / 1000000), (long long)((t_read_end - t_read) / 1000000),
			  (long long)((end - now) / 1000000));
	if (l == -ETIME)
		kcl__rt_abandon(rt, KCL_EXIT_LAPSED,
				"the lease lapsed: a heartbeat write came back after the renewal window "
				"(paused or cut off from the volume past broker.session.timeout.ms)",
				1);
	if (rc) {
		rt->hb_failures++;
		KLOG_WARN("cluster", "heartbeat write failed: %s (lease %lld ms left)", sub_strerror(rc),
			  (long long)(kcl_lease_remaining(&rt->lease, ku_mono_ns()) / 1000000));
	}
	return rc;
}

static void *hb_main(void *arg)
{
	kcl_rt *rt = arg;
	for (;;) {
		pthread_mutex_lock(&rt->mu);
		int64_t deadline = ku_mono_ns() + rt->hb_ns;
		while (!rt->hb_stop && !rt->hb_now && ku_mono_ns() < deadline) {
			struct timespec ts = {(time_t)(deadline / 1000000000LL), (long)(deadline % 1000000000LL)};
			pthread_cond_timedwait(&rt->cv, &rt->mu, &ts);
		}
		int stop = rt->hb_stop;
		rt->hb_now = 0;
		pthread_mutex_unlock(&rt->mu);
		if (stop)
			break;
		heartbeat_once(rt);
	}
	return NULL;
}

static void *wd_main(void *arg)
{
	kcl_rt *rt = arg;
	while (!__atomic_load_n(&rt->wd_stop, __ATOMIC_ACQUIRE)) {
		usleep(20000);
		int kind;
		int64_t age;
		if (kcl_wd_check(&rt->wd, ku_mono_ns(), &kind, &age)) {
			char why[128];
			snprintf(why, sizeof(why), "lease given up: %s outstanding for %lld ms", kcl_wd_kind_name(kind),
				 (long long)(age / 1000000));
			/* The volume is what hangs: do not wait on it for a certificate. */
			kcl__rt_abandon(rt, KCL_EXIT_STALLED, why, 0);
		}
	}
	return NULL;
}

/* The heartbeat's own session (runtime_int.h, hbv).  One libnfs session
 * carries one call at a time: the membership poll, the controller, the
 * coordinator's group files and the take-over guard all go through
 * b->cluster, and a take-over burst there held a heartbeat's own-file read
 * for over half a second. */
static int open_hb_volume(kcl_rt *rt, char *err, size_t errlen)
{
	sub_vfs *c = rt->b->cluster;
	rt->hbv = c;
	if (!c->url || strncmp(c->url, "nfs://", 6) != 0)
		return 0;
	char why[256];
	int rc = sub_open_url(c->url, &rt->hbv, why, sizeof(why));
	if (rc) {
		rt->hbv = c;
		snprintf(err, errlen, "opening the heartbeat's session to %s: %s", c->url, why);
		return rc;
	}
	rt->hb_own = 1;
	return 0;
}

/* ---- joining -------------------------------------------------------------------------- */

/* A predecessor of this id may still hold a lease: wait until this process
 * has seen it expire or proven it gone; refuse when it is plainly alive. */
static int wait_out_predecessor(kcl_rt *rt, char *err, size_t errlen)
{
	char why[256];
	kcl_hb prev;
	int rc = kcl_hb_read(rt->b->cluster, rt->id, &prev, why, sizeof(why));
	if (rc == -ENOENT)
		return 0;
	if (rc) {
		snprintf(err, errlen,
			 "refusing to join: brokers/%d.json cannot be read (%s); a newer kaas or another "
			 "cluster may own broker.id %d here",
			 rt->id, why, rt->id);
		return rc == -EPROTONOSUPPORT ? rc : -EBADMSG;
	}
	rt->pred = prev.inc;
	rt->pred_seq = prev.seq;
	char by[KCL_GONE_BY_MAX + 1], how[KCL_GONE_HOW_MAX + 1];
	if (prev.state == KCL_ST_STOPPED || prev.state == KCL_ST_FENCED) {
		rt->pred_how = KCL_PRED_GONE;
		return 0;
	}
	if (kcl_gone_read(rt->b->cluster, rt->id, prev.inc, by, sizeof(by), how, sizeof(how)) == 1) {
		rt->pred_how = KCL_PRED_GONE;
		KLOG_INFO("cluster", "broker %d: the previous incarnation %llu is gone (exit certificate by %s%s%s)",
			  rt->id, (unsigned long long)prev.inc.incarnation, by, how[0] ? ": " : "", how);
		return 0;
	}
	kcl_view v;
	int64_t t0 = ku_mono_ns();
	kcl_view_init(&v, rt->session_ns / 1000000, t0);
	int64_t give_up = t0 + 2 * rt->session_ns + 1000000000LL;
	int logged = 0;
	for (;;) {
		if (prev.host_id[0] && strcmp(prev.host_id, rt->host_id) == 0 &&
		    kcl_token_probe(rt->b->cluster_id, rt->id, prev.inc) == 0) {
			kcl_gone_write(rt->b->cluster, rt->id, prev.inc, "same-host");
			rt->pred_how = KCL_PRED_GONE;
			KLOG_INFO("cluster", "broker %d: the previous incarnation %llu is gone (same-host proof)",
				  rt->id, (unsigned long long)prev.inc.incarnation);
			break;
		}
		if (kcl_gone_exists(rt->b->cluster, rt->id, prev.inc) == 1) {
			rt->pred_how = KCL_PRED_GONE;
			break;
		}
		int64_t s = ku_mono_ns();
		kcl_hb cur;
		rc = kcl_hb_read(rt->b->cluster, rt->id, &cur, why, sizeof(why));
		int64_t e = ku_mono_ns();
		if (rc == 0) {
			kcl_view_observe(&v, &cur, s, e);
			if (kcl_incarn_cmp(cur.inc, prev.inc) != 0) {
				snprintf(err, errlen,
					 "refusing to join: another process started as broker.id %d meanwhile "
					 "(incarnation %llu, endpoint %s)",
					 rt->id, (unsigned long long)cur.inc.incarnation, cur.endpoint);
				kcl_view_free(&v);
				return -EADDRINUSE;
			}
			if (cur.state == KCL_ST_STOPPED || cur.state == KCL_ST_FENCED) {
				rt->pred_how = KCL_PRED_GONE;
				rt->pred_seq = cur.seq;
				break;
			}
			rt->pred_seq = cur.seq;
		} else {
			kcl_view_unreadable(&v, rt->id, e);
		}
		const kcl_peer *p = kcl_view_get(&v, rt->id, prev.inc);
		if (p && p->live == KCL_LIVE_EXPIRED) {
			rt->pred_how = KCL_PRED_EXPIRED;
			rt->pred_seq = p->seq;
			KLOG_INFO("cluster", "broker %d: the previous incarnation %llu expired (seq %lld unchanged "
					     "for the session timeout)",
				  rt->id, (unsigned long long)prev.inc.incarnation, (long long)p->seq);
			break;
		}
		if (e > give_up) {
			snprintf(err, errlen,
				 "refusing to join: broker.id %d is in use by a running broker (incarnation %llu, "
				 "endpoint %s, host %s): its heartbeat is still moving. Stop it first, or give "
				 "this broker another broker.id; two processes never lead under one id",
				 rt->id, (unsigned long long)prev.inc.incarnation, prev.endpoint,
				 prev.host_id[0] ? prev.host_id : "?");
			kcl_view_free(&v);
			return -EADDRINUSE;
		}
		if (!logged++)
			KLOG_INFO("cluster", "broker %d: waiting out incarnation %llu (endpoint %s) before joining",
				  rt->id, (unsigned long long)prev.inc.incarnation, prev.endpoint);
		usleep((useconds_t)(rt->poll_ns / 1000));
	}
	kcl_view_free(&v);
	return 0;
}

int kcl_rt_start(kb_broker *b, kcl_rt **out, char *err, size_t errlen)
{
	kcl_rt *rt = calloc(1, sizeof(*rt));
	if (!rt) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	const kb_config *c = &b->cfg;
	rt->b = b;
	rt->id = b->id;
	rt->ctl_owner = -1;
	__atomic_store_n(&b->joining, 1, __ATOMIC_RELEASE); /* not ready until it leads its share */
	rt->hb_ns = c->broker_heartbeat_interval_ms * 1000000LL;
	rt->session_ns = c->broker_session_timeout_ms * 1000000LL;
	rt->poll_ns = c->cluster_poll_ms * 1000000LL;
	rt->state = KCL_ST_RUNNING;
	rt->token_fd = -1;
	pthread_mutex_init(&rt->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&rt->cv, &ca);
	pthread_condattr_destroy(&ca);
	int rc;
	int64_t stall_ms = kcl_stall_bound_ms(c->cluster_stall_timeout_ms, c->broker_session_timeout_ms,
					      c->broker_heartbeat_interval_ms);
	if (c->cluster_stall_timeout_ms > 0 && c->cluster_stall_timeout_ms < 10) {
		snprintf(err, errlen, "kaas.cluster.stall.timeout.ms (%lld) must be 0 (from the session) or at least 10",
			 (long long)c->cluster_stall_timeout_ms);
		rc = -EINVAL;
		goto fail;
	}
	if (stall_ms >= c->broker_session_timeout_ms) {
		snprintf(err, errlen, "kaas.cluster.stall.timeout.ms (%lld) must be below broker.session.timeout.ms (%lld)",
			 (long long)stall_ms, (long long)c->broker_session_timeout_ms);
		rc = -EINVAL;
		goto fail;
	}
	if (c->broker_heartbeat_interval_ms * 3 > c->broker_session_timeout_ms) {
		snprintf(err, errlen, "broker.heartbeat.interval.ms (%lld) must be at most a third of "
				      "broker.session.timeout.ms (%lld)",
			 (long long)c->broker_heartbeat_interval_ms, (long long)c->broker_session_timeout_ms);
		rc = -EINVAL;
		goto fail;
	}
	if ((rc = kcl_lease_init(&rt->lease, c->broker_session_timeout_ms,
				 kcl_drift_margin_ms(c->broker_session_timeout_ms)))) {
		snprintf(err, errlen, "lease: %s", strerror(-rc));
		goto fail;
	}
	rt->lease_ok = 1;
	if ((rc = kcl_wd_init(&rt->wd, stall_ms))) {
		snprintf(err, errlen, "watchdog: %s", strerror(-rc));
		goto fail;
	}
	rt->wd_ok = 1;
	if (kcl_host_id(rt->host_id, sizeof(rt->host_id)))
		rt->host_id[0] = 0;
	if ((rc = sub_mkdirs(b->cluster, "brokers", 0755))) {
		snprintf(err, errlen, "creating brokers/: %s", sub_strerror(rc));
		goto fail;
	}
	kcl_hb prev;
	char why[256];
	uint64_t last = kcl_hb_read(b->cluster, rt->id, &prev, why, sizeof(why)) == 0 ? prev.inc.incarnation : 0;
	rt->inc.incarnation = kcl_incarnation_next(last, ku_wall_ms());
	rt->inc.nonce = random64();
	/* Before anything can act as this incarnation: a supervisor that knows
	 * it can certify its end from the first heartbeat on. */
	rc = kcl_sup_tell(rt->id, rt->inc, b->cluster->url ? b->cluster->url : c->cluster_url, why,
			    sizeof(why));
	if (rc < 0)
		KLOG_WARN("cluster", "not reporting to a supervisor (%s): a kill -9 of this broker costs its "
				     "peers a session timeout",
			  why);
	else if (rc == 1)
		KLOG_INFO("cluster", "broker %d incarnation %llu reported to its supervisor (pid %ld)", rt->id,
			  (unsigned long long)rt->inc.incarnation, (long)getppid());
	rt->started_ns = ku_mono_ns();
	kcl_view_init(&rt->view, c->broker_session_timeout_ms, rt->started_ns);
	rt->view_ok = 1;
	/* The token first: peers on this host can prove this process gone the
	 * moment it dies, from its first heartbeat on. */
	if ((rc = kcl_token_hold(b->cluster_id, rt->id, rt->inc, &rt->token_fd))) {
		snprintf(err, errlen, "same-host token: %s", strerror(-rc));
		goto fail;
	}
	if ((rc = wait_out_predecessor(rt, err, errlen)))
		goto fail;
	kb_ptable_set_ack_gate(b->parts, gate_holds, rt);
	rt->gate_set = 1;
	if ((rc = kcl_tkguard_init(&rt->tk, b->cluster, &rt->lease, rt->id, rt->inc))) {
		snprintf(err, errlen, "take-over guard: %s", strerror(-rc));
		goto fail;
	}
	rt->tk_ok = 1;
	kb_ptable_set_takeover_guard(b->parts, kcl_tkguard_fn, &rt->tk);
	kb_ptable_set_io_hooks(b->parts, io_begin, io_end, rt);
	if ((rc = open_hb_volume(rt, err, errlen)))
		goto fail;
	if ((rc = heartbeat_once(rt))) {
		snprintf(err, errlen, "writing the first heartbeat brokers/%d.json: %s", rt->id, sub_strerror(rc));
		goto fail;
	}
	KLOG_INFO("cluster", "broker %d joined as incarnation %llu (session %lld ms, heartbeat %lld ms, stall bound %lld ms%s)",
		  rt->id, (unsigned long long)rt->inc.incarnation, (long long)c->broker_session_timeout_ms,
		  (long long)c->broker_heartbeat_interval_ms, (long long)(rt->wd.bound_ns / 1000000),
		  rt->pred_how == KCL_PRED_GONE      ? ", predecessor gone"
		  : rt->pred_how == KCL_PRED_EXPIRED ? ", predecessor expired"
						     : "");
	if ((rc = -pthread_create(&rt->hb_thread, NULL, hb_main, rt)))
		goto threads;
	rt->hb_started = 1;
	if ((rc = -pthread_create(&rt->wd_thread, NULL, wd_main, rt)))
		goto threads;
	rt->wd_started = 1;
	if ((rc = -pthread_create(&rt->loop_thread, NULL, kcl__loop_main, rt)))
		goto threads;
	rt->loop_started = 1;
	*out = rt;
	return 0;
threads:
	snprintf(err, errlen, "starting the cluster threads: %s", strerror(-rc));
fail:
	kcl_rt_finish(rt);
	return rc;
}

void kcl_rt_drain(kcl_rt *rt)
{
	if (!rt)
		return;
	pthread_mutex_lock(&rt->mu);
	rt->state = KCL_ST_DRAINING;
	pthread_mutex_unlock(&rt->mu);
	kcl__rt_hb_now(rt);
	int64_t t0 = ku_mono_ns();
	int64_t deadline = t0 + rt->b->cfg.drain_timeout_ms * 1000000LL;
	KLOG_INFO("cluster", "draining: asking the controller to move this broker's partitions away");
	const char *how = "timed out";
	for (;;) {
		pthread_mutex_lock(&rt->mu);
		int led = rt->nled, others = rt->other_runners, seen = rt->drain_seen;
		pthread_mutex_unlock(&rt->mu);
		if (seen && led == 0) {
			how = "nothing led here any more";
			break;
		}
		if (seen && others == 0) {
			how = "no other broker can take the partitions";
			break;
		}
		if (ku_mono_ns() >= deadline)
			break;
		usleep(20000);
	}
	KLOG_INFO("cluster", "drain done after %lld ms: %s", (long long)((ku_mono_ns() - t0) / 1000000), how);
}

void kcl_rt_stop(kcl_rt *rt)
{
	if (!rt || !rt->loop_started)
		return;
	__atomic_store_n(&rt->loop_stop, 1, __ATOMIC_RELEASE);
	pthread_join(rt->loop_thread, NULL);
	rt->loop_started = 0;
}

void kcl_rt_finish(kcl_rt *rt)
{
	if (!rt)
		return;
	kcl_rt_stop(rt);
	if (rt->hb_started) {
		pthread_mutex_lock(&rt->mu);
		rt->hb_stop = 1;
		pthread_cond_broadcast(&rt->cv);
		pthread_mutex_unlock(&rt->mu);
		pthread_join(rt->hb_thread, NULL);
		/* Everything was relinquished: the last word is "stopped", which
		 * lets peers take over at once. */
		pthread_mutex_lock(&rt->mu);
		rt->state = KCL_ST_STOPPED;
		pthread_mutex_unlock(&rt->mu);
		kcl_lease_give_up(&rt->lease, "stopped");
		kcl_hb hb;
		fill_hb(rt, &hb);
		int rc = kcl_hb_write(rt->hbv, &hb);
		if (rc)
			KLOG_WARN("cluster", "writing the final heartbeat (stopped): %s", sub_strerror(rc));
	}
	if (rt->wd_started) {
		__atomic_store_n(&rt->wd_stop, 1, __ATOMIC_RELEASE);
		pthread_join(rt->wd_thread, NULL);
	}
	if (rt->b->parts) {
		kb_ptable_set_io_hooks(rt->b->parts, NULL, NULL, NULL);
		kb_ptable_set_takeover_guard(rt->b->parts, NULL, NULL);
	}
	if (rt->tk_ok)
		kcl_tkguard_destroy(&rt->tk);
	rt->tk_ok = 0;
	if (rt->token_fd >= 0)
		close(rt->token_fd);
	if (rt->hb_own)
		sub_destroy(rt->hbv); /* every thread that used it is joined */
	rt->hbv = NULL;
	rt->hb_own = 0;
	kcl__loop_free(rt);
	if (rt->view_ok)
		kcl_view_free(&rt->view);
	if (rt->wd_ok)
		kcl_wd_destroy(&rt->wd);
	/* The lease stays: the ack gate may still be asked by a late flusher
	 * callback until the table is destroyed, and must answer "no". */
	pthread_cond_destroy(&rt->cv);
	pthread_mutex_destroy(&rt->mu);
	if (rt->gate_set)
		return; /* kept for the gate; the process exits right after */
	if (rt->lease_ok)
		kcl_lease_destroy(&rt->lease);
	free(rt);
}
