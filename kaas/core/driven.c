/*
 * driven.c — the partition table as the cluster drives it: no self-
 * assignment (kb_ptable_set_driven), take-over and relinquish of single
 * partitions at the epochs the assignment names, the list of what is led,
 * the ack gate and the I/O hooks of the lease and the stall watchdog, and
 * the applied leader map that Metadata and the not-leader answers read.
 * The table itself (topics, entries, references) is ptable.c.
 */
#include "kaas/core/ptable.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kaas/core/leaders.h"
#include "kaas/core/ptable_int.h"
#include "kaas/proto/kerr.h"
#include "util/clock.h"
#include "util/grow.h"
#include "util/log.h"

void kb_ptable_set_driven(kb_ptable *t)
{
	kb__lock(&t->ctl, KB_CTL);
	t->driven = 1;
	kb__unlock(&t->ctl, KB_CTL);
}

int32_t kb_ptable_disk_epoch(kb_ptable *t, const char *topic, int32_t partition)
{
	return kb__disk_epoch(t, topic, partition);
}

/* Waits (mu held) until nobody but the flusher queue references e. */
static void wait_refs(kb_ptable *t, kb_pentry *e)
{
	while (e->refs > 0)
		pthread_cond_wait(&t->refs_cv, &t->mu);
}

/* Relinquishes an entry that leads (ctl held). */
static int entry_relinquish(kb_ptable *t, kb_pentry *e)
{
	kb__lock(&t->mu, KB_MU);
	if (e->state == PE_IDLE && !e->p) {
		kb__unlock(&t->mu, KB_MU);
		return 0;
	}
	int was = e->state;
	e->state = PE_IDLE; /* no new references from here on */
	kb__fire_watches(e, 1);
	kb__unlock(&t->mu, KB_MU);
	/* A queued flush holds a reference: let the flushers drain it. */
	kb__lock(&t->mu, KB_MU);
	wait_refs(t, e);
	kb__unlock(&t->mu, KB_MU);
	int r = 0;
	if (e->p && was == PE_LEADER) {
		ks_partition_flush(e->p, NULL); /* acks=0/1 data becomes durable first */
		r = ks_partition_relinquish(e->p);
	} else if (e->p) {
		ks_partition_relinquish(e->p); /* a failed one: persists nothing */
	}
	if (r)
		KLOG_ERR("ptable", "%s/%d: relinquish: %s", e->topic->name, e->index, sub_strerror(r));
	if (e->p) /* where a failed leadership ended, for our next take-over */
		ks_partition_failed_end(e->p, &e->failed_end);
	ks_partition_close(e->p);
	kb__lock(&t->mu, KB_MU);
	e->p = NULL;
	e->err = 0;
	kb__fail_waiters(e, KERR_REQUEST_TIMED_OUT); /* written, not known durable */
	kb__unlock(&t->mu, KB_MU);
	return r;
}

static kb_pentry *find_entry(kb_ptable *t, const char *topic, const char *topic_id, int32_t partition)
{
	/* mu held */
	ptopic *tp = kb__find_topic(t, topic, strlen(topic));
	if (!tp || tp->dropping || partition < 0 || partition >= tp->n)
		return NULL;
	if (topic_id && *topic_id && tp->has_id && strcmp(tp->topic_id, topic_id) != 0)
		return NULL; /* another incarnation of the name */
	return tp->parts[partition];
}

/* The checks of one take-over (ctl held): 0 with *run set when the entry
 * is to be taken over at v->epoch, or the answer (0 when already there). */
static int take_over_prepare(kb_ptable *t, const kb_takeover *v, kb_pentry **run)
{
	*run = NULL;
	if (v->epoch <= 0)
		return -EINVAL;
	if (t->stopped)
		return -ESHUTDOWN;
	kb__lock(&t->mu, KB_MU);
	kb_pentry *e = find_entry(t, v->topic, v->topic_id, v->partition);
	int state = e ? e->state : 0;
	int32_t cur = e ? e->epoch : -1, tried = e ? e->tried_epoch : 0;
	int64_t retry_at = e ? e->retry_at_ms : 0;
	kb__unlock(&t->mu, KB_MU);
	if (!e)
		return -ENOENT;
	if (state == PE_LEADER && cur == v->epoch)
		return 0; /* already there */
	if (state == PE_LEADER && cur > v->epoch)
		return -ESTALE;
	if (state == PE_FAILED && tried == v->epoch) {
		/* Failed or poisoned: re-driven at the assigned epoch (recovery
		 * keeps what is durable), backing off as entry_take_over says. */
		if (ku_mono_ms() < retry_at)
			return -EAGAIN;
		KLOG_INFO("ptable", "%s/%d: re-driving take-over at epoch %d", v->topic, v->partition, v->epoch);
	}
	/* From here produces for it wait for the take-over (hold.c). */
	kb__lock(&t->mu, KB_MU);
	e->taking = 1;
	kb__unlock(&t->mu, KB_MU);
	if (state != PE_IDLE) /* a lower epoch, or a failed attempt: let go of it first */
		entry_relinquish(t, e);
	int32_t disk = kb__disk_epoch(t, v->topic, v->partition);
	if (v->epoch < disk || (v->epoch == disk && tried != v->epoch)) {
		KLOG_ERR("ptable", "%s/%d: refusing to take over at epoch %d: the volume already holds epoch %d",
			 v->topic, v->partition, v->epoch, disk);
		kb__lock(&t->mu, KB_MU);
		e->taking = 0;
		kb__unlock(&t->mu, KB_MU);
		kb__hold_sweep(t);
		return -ESTALE;
	}
	int64_t keep_delay = e->retry_delay_ms;
	e->tried_epoch = v->epoch;
	e->retry_delay_ms = state == PE_FAILED ? keep_delay : 0;
	if (v->planned)
		KLOG_DEBUG("ptable", "%s/%d: planned hand-off from epoch %d", v->topic, v->partition, v->prev_epoch);
	*run = e;
	return 0;
}

int kb_ptable_take_over_many(kb_ptable *t, kb_takeover *v, size_t n)
{
	kb_pentry **run = calloc(n ? n : 1, sizeof(*run));
	int32_t *eps = calloc(n ? n : 1, sizeof(*eps));
	size_t *idx = calloc(n ? n : 1, sizeof(*idx));
	size_t k = 0;
	if (!run || !eps || !idx) {
		free(run);
		free(eps);
		free(idx);
		return -ENOMEM;
	}
	kb__lock(&t->ctl, KB_CTL);
	for (size_t i = 0; i < n; i++) {
		kb_pentry *e;
		v[i].rc = take_over_prepare(t, &v[i], &e);
		if (e) {
			run[k] = e;
			eps[k] = v[i].epoch;
			idx[k++] = i;
		}
	}
	/* The volume round trips of the take-overs themselves (open, recovery,
	 * manifest) overlap on up to PAR_MAX threads, as at start-up. */
	kb__par_run(t, run, eps, k);
	kb__lock(&t->mu, KB_MU);
	for (size_t j = 0; j < k; j++)
		v[idx[j]].rc = run[j]->state == PE_LEADER ? 0 : (run[j]->err ? run[j]->err : -EIO);
	kb__unlock(&t->mu, KB_MU);
	kb__unlock(&t->ctl, KB_CTL);
	free(run);
	free(eps);
	free(idx);
	return 0;
}

int kb_ptable_take_over(kb_ptable *t, const char *topic, const char *topic_id, int32_t partition,
			int32_t epoch, int32_t prev_epoch, int planned)
{
	kb_takeover v = {topic, topic_id, partition, epoch, prev_epoch, planned, 0};
	int rc = kb_ptable_take_over_many(t, &v, 1);
	return rc ? rc : v.rc;
}

int kb_ptable_relinquish(kb_ptable *t, const char *topic, int32_t partition)
{
	kb__lock(&t->ctl, KB_CTL);
	kb__lock(&t->mu, KB_MU);
	ptopic *tp = kb__find_topic(t, topic, strlen(topic));
	kb_pentry *e = tp && partition >= 0 && partition < tp->n ? tp->parts[partition] : NULL;
	kb__unlock(&t->mu, KB_MU);
	int rc = e ? entry_relinquish(t, e) : 0;
	kb__unlock(&t->ctl, KB_CTL);
	return rc;
}

/* fn(arg, i) for i in [0, n) on the calling thread plus up to PAR_MAX-1 more. */
typedef struct par_each_job {
	void (*fn)(void *arg, size_t i);
	void *arg;
	size_t n;
	atomic_size_t next;
} par_each_job;

static void *par_each_worker(void *arg)
{
	par_each_job *j = arg;
	size_t i;
	while ((i = atomic_fetch_add(&j->next, 1)) < j->n)
		j->fn(j->arg, i);
	return NULL;
}

static void par_each(size_t n, void (*fn)(void *arg, size_t i), void *arg)
{
	par_each_job j = {fn, arg, n, 0};
	pthread_t th[PAR_MAX];
	int started = 0;
	size_t want = n < PAR_MAX ? n : PAR_MAX;
	while (want > 1 && (size_t)started < want - 1 &&
	       pthread_create(&th[started], NULL, par_each_worker, &j) == 0)
		started++;
	par_each_worker(&j);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
}

typedef struct relq_job {
	kb_pentry **e;
	int *was;
	int *rc;
} relq_job;

/* The volume part of a relinquish (flush, final manifest, close), for one
 * entry nobody can reach any more. */
static void relq_one(void *arg, size_t i)
{
	relq_job *j = arg;
	kb_pentry *e = j->e[i];
	int r = 0;
	if (e->p && j->was[i] == PE_LEADER) {
		ks_partition_flush(e->p, NULL); /* acks=0/1 data becomes durable first */
		r = ks_partition_relinquish(e->p);
	} else if (e->p) {
		ks_partition_relinquish(e->p); /* a failed one: persists nothing */
	}
	if (r)
		KLOG_ERR("ptable", "%s/%d: relinquish: %s", e->topic->name, e->index, sub_strerror(r));
	if (e->p) /* where a failed leadership ended, for our next take-over */
		ks_partition_failed_end(e->p, &e->failed_end);
	ks_partition_close(e->p);
	j->rc[i] = r;
}

int kb_ptable_relinquish_many(kb_ptable *t, const kb_takeover *v, size_t n, int *rc)
{
	kb_pentry **es = calloc(n ? n : 1, sizeof(*es));
	int *was = calloc(n ? n : 1, sizeof(*was)), *r = calloc(n ? n : 1, sizeof(*r));
	size_t *idx = calloc(n ? n : 1, sizeof(*idx));
	if (!es || !was || !r || !idx) {
		free(es);
		free(was);
		free(r);
		free(idx);
		return -ENOMEM;
	}
	size_t k = 0;
	kb__lock(&t->ctl, KB_CTL);
	kb__lock(&t->mu, KB_MU);
	for (size_t i = 0; i < n; i++) {
		rc[i] = 0;
		ptopic *tp = kb__find_topic(t, v[i].topic, strlen(v[i].topic));
		kb_pentry *e = tp && v[i].partition >= 0 && v[i].partition < tp->n ? tp->parts[v[i].partition] : NULL;
		if (!e || (e->state == PE_IDLE && !e->p))
			continue;
		was[k] = e->state;
		e->state = PE_IDLE; /* no new references from here on */
		kb__fire_watches(e, 1);
		es[k] = e;
		idx[k++] = i;
	}
	/* A queued flush holds a reference: let the flushers drain them. */
	for (size_t j = 0; j < k; j++)
		wait_refs(t, es[j]);
	kb__unlock(&t->mu, KB_MU);
	relq_job job = {es, was, r};
	par_each(k, relq_one, &job);
	kb__lock(&t->mu, KB_MU);
	for (size_t j = 0; j < k; j++) {
		es[j]->p = NULL;
		es[j]->err = 0;
		kb__fail_waiters(es[j], KERR_REQUEST_TIMED_OUT);
		rc[idx[j]] = r[j];
	}
	kb__unlock(&t->mu, KB_MU);
	kb__unlock(&t->ctl, KB_CTL);
	free(es);
	free(was);
	free(r);
	free(idx);
	return 0;
}

void kb_ptable_led(kb_ptable *t, kb_led_fn cb, void *arg)
{
	kb__lock(&t->mu, KB_MU);
	for (int b = 0; b < NBUCKETS; b++)
		for (ptopic *tp = t->buckets[b]; tp; tp = tp->next)
			for (int32_t i = 0; i < tp->n; i++) {
				kb_pentry *e = tp->parts[i];
				if (e->state != PE_IDLE || e->p)
					cb(arg, tp->name, tp->has_id ? tp->topic_id : NULL, i,
					   e->state == PE_LEADER ? e->epoch : e->tried_epoch,
					   e->state == PE_LEADER ? 1 : 2);
			}
	kb__unlock(&t->mu, KB_MU);
}

void kb_ptable_set_ack_gate(kb_ptable *t, kb_gate_fn holds, void *arg)
{
	kb__lock(&t->mu, KB_MU);
	t->gate = holds;
	t->gate_arg = arg;
	kb__unlock(&t->mu, KB_MU);
}

int kb_ptable_ack_ok(kb_ptable *t)
{
	kb_gate_fn g = t->gate; /* set once before serving */
	return !g || g(t->gate_arg);
}

/* The table's take-over guard asked for entry e (storage's guard type). */
static int entry_guard(void *arg, int32_t epoch, const char *step, int32_t *ceiling)
{
	kb_pentry *e = arg;
	kb_ptable *t = e->t;
	return t->tk_guard(t->tk_guard_arg, e->topic->name, e->index, epoch, step, ceiling);
}

int kb__storage_take_over(kb_ptable *t, kb_pentry *e, int32_t epoch)
{
	ks_takeover_opts o = {.prev = &e->failed_end};
	if (t->tk_guard) {
		o.guard = entry_guard;
		o.guard_arg = e;
	}
	return ks_partition_take_over_opts(e->p, epoch, &o);
}

void kb_ptable_set_takeover_guard(kb_ptable *t, kb_tk_guard_fn fn, void *arg)
{
	kb__lock(&t->ctl, KB_CTL); /* no take-over runs while it changes */
	t->tk_guard = fn;
	t->tk_guard_arg = arg;
	kb__unlock(&t->ctl, KB_CTL);
}

void kb_ptable_set_io_hooks(kb_ptable *t, kb_io_begin_fn begin, kb_io_end_fn end, void *arg)
{
	t->io_begin = begin;
	t->io_end = end;
	t->io_arg = arg;
}

void kb_ptable_apply_leaders(kb_ptable *t, struct kb_leaders *m)
{
	kb__lock(&t->mu, KB_MU);
	kb_leaders *old = t->leaders;
	t->leaders = m;
	kb__unlock(&t->mu, KB_MU);
	kb_leaders_put(old);
	kb__hold_sweep(t); /* a partition given away (or back) is waited for no more */
}

struct kb_leaders *kb_ptable_leaders(kb_ptable *t)
{
	kb__lock(&t->mu, KB_MU);
	kb_leaders *m = t->leaders;
	if (m)
		kb_leaders_get(m);
	kb__unlock(&t->mu, KB_MU);
	return m;
}

static int topic_led(kb_ptable *t, const char *topic)
{
	/* mu held */
	kb_leaders *m = t->leaders;
	ptopic *tp = kb__find_topic(t, topic, strlen(topic));
	if (!m || !tp)
		return 0;
	for (int32_t i = 0; i < tp->n; i++) {
		int32_t leader, epoch;
		if (kb_leaders_find(m, topic, i, &leader, &epoch) || leader < 0)
			return 0;
		if (leader == t->b->id && tp->parts[i]->state == PE_FAILED && tp->parts[i]->tried_epoch == epoch)
			return tp->parts[i]->err ? tp->parts[i]->err : -EIO; /* ours, and it could not be led */
		if (leader == t->b->id && (tp->parts[i]->state != PE_LEADER || tp->parts[i]->epoch != epoch))
			return 0;
	}
	return 1;
}

int kb_ptable_wait_led(kb_ptable *t, const char *topic, int64_t timeout_ms)
{
	if (!t->driven)
		return 0;
	int64_t deadline = ku_mono_ms() + timeout_ms;
	for (;;) {
		kb__lock(&t->mu, KB_MU);
		int ok = topic_led(t, topic), stop = t->stopped;
		kb__unlock(&t->mu, KB_MU);
		if (ok)
			return ok;
		if (stop || ku_mono_ms() >= deadline)
			return 0;
		usleep(10000);
	}
}
