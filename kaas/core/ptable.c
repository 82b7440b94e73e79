/*
 * ptable.c — the partition table itself: topics and their entries, counted
 * references, taking partitions over (many at a time) and relinquishing
 * them, shutdown.  Epochs are chosen in epoch.c (alone) or by the cluster
 * (driven.c), durability is tracked in durable.c, re-driving, retention
 * and the scrub are in upkeep.c and scrub.c; ptable_int.h has the lock
 * order.
 */
#include "kaas/core/ptable.h"

#include <errno.h>
#include <fcntl.h>
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

uint32_t kb__hash_name(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h % NBUCKETS;
}

ptopic *kb__find_topic(kb_ptable *t, const char *name, size_t n)
{
	for (ptopic *tp = t->buckets[kb__hash_name(name, n)]; tp; tp = tp->next)
		if (strlen(tp->name) == n && memcmp(tp->name, name, n) == 0)
			return tp;
	return NULL;
}

static void unlink_topic(kb_ptable *t, ptopic *tp)
{
	ptopic **pp = &t->buckets[kb__hash_name(tp->name, strlen(tp->name))];
	while (*pp && *pp != tp)
		pp = &(*pp)->next;
	if (*pp)
		*pp = tp->next;
}

/* ---- allocation (with fault injection for the tests) ---------------------- */

int kb__alloc_fail_at;
#ifdef KAAS_ASSERTS
__thread unsigned kb__held;
#endif

void *kb__calloc(size_t n, size_t size)
{
	if (__atomic_load_n(&kb__alloc_fail_at, __ATOMIC_RELAXED) > 0 &&
	    __atomic_sub_fetch(&kb__alloc_fail_at, 1, __ATOMIC_RELAXED) == 0)
		return NULL;
	return calloc(n, size);
}

/* ---- opening and taking over ------------------------------------------------------------ */

static kb_pentry *entry_new(kb_ptable *t, ptopic *tp, int32_t index)
{
	kb_pentry *e = kb__calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->t = t;
	e->topic = tp;
	e->index = index;
	e->epoch = -1;
	e->durable = -1;
	return e;
}

/* Opens (if needed) and takes over at `epoch`.  Called with ctl held. */
int kb__entry_take_over_io(kb_ptable *t, kb_pentry *e, int32_t epoch)
{
	ptopic *tp = e->topic;
	char dir[512];
	kb__part_dir(dir, sizeof(dir), tp->name, e->index);
	int rc = 0;
	if (!e->p) {
		rc = sub_mkdirs(t->b->data, dir, 0755);
		if (!rc)
			rc = ks_partition_open(t->b->data, dir, tp->has_id ? tp->topic_id : NULL, 1, &tp->cfg,
						 &e->p);
		if (rc)
			e->p = NULL;
		else
			ks_partition_set_listener(e->p, kb__on_durable, e);
	}
	if (!rc)
		rc = kb__storage_take_over(t, e, epoch);
	int64_t hw = rc ? -1 : ks_partition_high_watermark(e->p);
	kb__lock(&t->mu, KB_MU);
	if (rc) {
		e->state = PE_FAILED;
		e->err = rc;
		e->retry_delay_ms = e->retry_delay_ms ? e->retry_delay_ms * 2 : RETRY_MIN_MS;
		if (e->retry_delay_ms > RETRY_MAX_MS)
			e->retry_delay_ms = RETRY_MAX_MS;
		e->retry_at_ms = ku_mono_ms() + e->retry_delay_ms;
	} else {
		e->state = PE_LEADER;
		e->err = 0;
		e->epoch = epoch;
		e->retry_delay_ms = 0;
		if (hw > e->durable) /* the listener may have been faster */
			e->durable = hw;
	}
	kb__unlock(&t->mu, KB_MU);
	if (rc)
		KLOG_ERR("ptable", "%s: taking over at epoch %d failed: %s%s; will retry", dir, epoch,
			 sub_strerror(rc),
			 rc == -ESTALE ? " (a newer leader or an older topic incarnation owns the directory)" : "");
	else
		KLOG_DEBUG("ptable", "%s: leader at epoch %d", dir, epoch);
	return rc;
}

/* Take-overs and relinquishes are a few round trips to the volume each:
 * with many partitions they run on up to PAR_MAX threads at once
 * (ptable_int.h). */

typedef struct par_job {
	kb_ptable *t;
	kb_pentry **e;
	const int32_t *epoch; /* NULL: relinquish and close instead */
	size_t n;
	atomic_size_t next;
	atomic_int first_err;
} par_job;

static void *par_worker(void *arg)
{
	par_job *j = arg;
	size_t i;
	while ((i = atomic_fetch_add(&j->next, 1)) < j->n) {
		kb_pentry *e = j->e[i];
		if (j->epoch) {
			kb__entry_take_over(j->t, e, j->epoch[i]);
			continue;
		}
		int r = 0;
		if (e->state == PE_LEADER) {
			/* acks=0/1 data becomes durable before the manifest is
			 * written (waiters hear of it through the listener). */
			ks_partition_flush(e->p, NULL);
			r = ks_partition_relinquish(e->p);
		}
		if (r) {
			KLOG_ERR("ptable", "%s/%d: relinquish: %s", e->topic->name, e->index, sub_strerror(r));
			int zero = 0;
			atomic_compare_exchange_strong(&j->first_err, &zero, r);
		}
		ks_partition_close(e->p);
		e->p = NULL;
	}
	return NULL;
}

/* Runs the job on the calling thread plus up to PAR_MAX-1 more. */
int kb__par_run(kb_ptable *t, kb_pentry **e, const int32_t *epoch, size_t n)
{
	par_job j = {t, e, epoch, n, 0, 0};
	pthread_t th[PAR_MAX];
	int started = 0;
	size_t want = n < PAR_MAX ? n : PAR_MAX;
	while (want > 1 && (size_t)started < want - 1 && pthread_create(&th[started], NULL, par_worker, &j) == 0)
		started++;
	par_worker(&j);
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	return atomic_load(&j.first_err);
}

static ptopic *topic_new(const kb_topic_desc *d)
{
	ptopic *tp = kb__calloc(1, sizeof(*tp));
	if (!tp)
		return NULL;
	size_t len = strlen(d->name);
	tp->name = kb__calloc(1, len + 1);
	if (tp->name)
		memcpy(tp->name, d->name, len);
	if (!tp->name) {
		free(tp);
		return NULL;
	}
	if (d->topic_id && strlen(d->topic_id) < sizeof(tp->topic_id)) {
		snprintf(tp->topic_id, sizeof(tp->topic_id), "%s", d->topic_id);
		tp->has_id = 1;
	}
	tp->cfg = d->cfg;
	return tp;
}

static void topic_free(ptopic *tp)
{
	if (!tp)
		return;
	for (int32_t i = 0; i < tp->n; i++) {
		kb_pentry *e = tp->parts[i];
		/* Nobody can reach it any more: no reference, flush, waiter or
		 * watch may be left (each would touch freed memory). */
		KAAS_ASSERT(!e || (e->refs == 0 && !e->queued && !e->waiters && !e->watches));
		kb__entry_free(e);
	}
	free(tp->parts);
	free(tp->name);
	free(tp);
}

/* The first take-over error among e[0..n), with how many failed. */
static int lead_failures(kb_ptable *t, kb_pentry **e, size_t n, size_t *failed)
{
	int first = 0;
	*failed = 0;
	kb__lock(&t->mu, KB_MU);
	for (size_t i = 0; i < n; i++)
		if (e[i]->state == PE_FAILED || (!t->driven && e[i]->state != PE_LEADER)) {
			(*failed)++;
			if (!first)
				first = e[i]->err ? e[i]->err : -EIO;
		}
	kb__unlock(&t->mu, KB_MU);
	return first;
}

/* Adds partitions [tp->n, want) to a topic (ctl held): epochs are recorded
 * first, then each is taken over.  Returns -errno when nothing was added
 * (out of memory, assignment.json not written); otherwise the partitions
 * are in the table (and tp linked) and *lead_err is the first take-over
 * error among them, 0 when every one is led. */
static int grow_topic(kb_ptable *t, ptopic *tp, int32_t want, int linked, int *lead_err)
{
	*lead_err = 0;
	if (want <= tp->n)
		return 0;
	kb_pentry **np = calloc((size_t)want, sizeof(*np));
	if (!np)
		return -ENOMEM;
	int32_t *epochs = calloc((size_t)want, sizeof(int32_t));
	if (!epochs) {
		free(np);
		return -ENOMEM;
	}
	for (int32_t i = tp->n; i < want; i++) {
		np[i] = entry_new(t, tp, i);
		if (!np[i]) {
			for (int32_t k = tp->n; k < i; k++)
				free(np[k]);
			free(np);
			free(epochs);
			return -ENOMEM;
		}
		if (!t->driven)
			epochs[i] = kb__next_epoch(t, tp->name, i, 0);
	}
	int rc = t->driven ? 0 : kb__assign_write(t);
	if (rc) {
		for (int32_t k = tp->n; k < want; k++)
			free(np[k]);
		free(np);
		free(epochs);
		return rc;
	}
	if (!t->driven) /* driven: the cluster says what to lead */
		kb__par_run(t, np + tp->n, epochs + tp->n, (size_t)(want - tp->n));
	free(epochs);
	size_t failed;
	*lead_err = lead_failures(t, np + tp->n, (size_t)(want - tp->n), &failed);
	if (*lead_err)
		KLOG_ERR("ptable", "topic %s: %zu of %d new partition(s) could not be led: %s%s; they are retried, "
			 "and answer KAFKA_STORAGE_ERROR until then", tp->name, failed, want - tp->n,
			 sub_strerror(*lead_err),
			 *lead_err == -EMFILE || *lead_err == -ENFILE ? " (the descriptor limit: raise ulimit -n)" : "");
	kb__lock(&t->mu, KB_MU);
	for (int32_t i = 0; i < tp->n; i++)
		np[i] = tp->parts[i];
	free(tp->parts);
	tp->parts = np;
	tp->n = want;
	if (!linked) {
		uint32_t h = kb__hash_name(tp->name, strlen(tp->name));
		tp->next = t->buckets[h];
		t->buckets[h] = tp;
	}
	kb__unlock(&t->mu, KB_MU);
	return 0;
}

/* ---- public: life cycle ---------------------------------------------------------------------------- */

/* (Re)fills the descriptor reserve; what cannot be opened now is not. */
static void reserve_take(kb_ptable *t)
{
	while (t->nreserve < KB_FD_RESERVE) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			break;
		t->reserve[t->nreserve++] = fd;
	}
}

/* Gives the reserve back to the process, just before relinquishing. */
static void reserve_release(kb_ptable *t)
{
	while (t->nreserve > 0)
		close(t->reserve[--t->nreserve]);
}

int kb_ptable_create(kb_broker *b, kb_ptable **out)
{
	kb_ptable *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->b = b;
	pthread_mutex_init(&t->ctl, NULL);
	pthread_mutex_init(&t->mu, NULL);
	pthread_cond_init(&t->refs_cv, NULL);
	pthread_mutex_init(&t->fmu, NULL);
	pthread_cond_init(&t->fcv, NULL);
	kb__assign_reset(t);
	reserve_take(t);
	if (b->metrics && kb_storage_metrics(b->metrics))
		KLOG_WARN("ptable", "the storage counters are not in the metrics (out of memory)");
	int n = b->cfg.num_flush_threads > 0 ? b->cfg.num_flush_threads : 1;
	t->flushers = calloc((size_t)n, sizeof(pthread_t));
	if (!t->flushers) {
		kb_ptable_destroy(t);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		int rc = pthread_create(&t->flushers[i], NULL, kb__flusher_main, t);
		if (rc) {
			kb_ptable_destroy(t);
			return -rc;
		}
		t->nflushers++;
	}
	kb__cleaner_start(t);
	*out = t;
	return 0;
}

/* Forgets the assignment.json entries of topics that no longer exist. */
static void prune_assignment(kb_ptable *t, const kb_topic_desc *topics, size_t n)
{
	json_t *parts = kb__assign_partitions(t);
	const char *key;
	json_t *val;
	void *tmp;
	json_object_foreach_safe(parts, tmp, key, val)
	{
		char topic[512];
		int32_t p;
		int keep = 0;
		if (kb_partition_key_parse(key, topic, sizeof(topic), &p) == 0)
			for (size_t i = 0; i < n && !keep; i++)
				keep = strcmp(topics[i].name, topic) == 0 && p < topics[i].partitions;
		if (!keep)
			json_object_del(parts, key);
	}
}

/* What start-up takes over: the topics (chained in their own buckets until
 * published) and every entry with its new epoch. */
typedef struct start_plan {
	ptopic **buckets;  /* NBUCKETS chains */
	kb_pentry **all;
	int32_t *epoch;
	size_t nall;
} start_plan;

static void plan_free(start_plan *pl, int with_topics)
{
	for (size_t b = 0; with_topics && pl->buckets && b < NBUCKETS; b++)
		for (ptopic *tp = pl->buckets[b], *nx; tp; tp = nx) {
			nx = tp->next;
			topic_free(tp);
		}
	free(pl->buckets);
	free(pl->all);
	free(pl->epoch);
	*pl = (start_plan){0};
}

/* Builds every topic and entry and picks every epoch (in memory), or fails
 * whole: a topic is never published with part of its partitions. */
static int plan_build(kb_ptable *t, const kb_topic_desc *topics, size_t n, start_plan *pl)
{
	size_t cap = 0;
	for (size_t i = 0; i < n; i++)
		cap += topics[i].partitions > 0 ? (size_t)topics[i].partitions : 0;
	pl->buckets = kb__calloc(NBUCKETS, sizeof(*pl->buckets));
	pl->all = kb__calloc(cap ? cap : 1, sizeof(*pl->all));
	pl->epoch = kb__calloc(cap ? cap : 1, sizeof(*pl->epoch));
	if (!pl->buckets || !pl->all || !pl->epoch)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const kb_topic_desc *d = &topics[i];
		if (d->partitions <= 0)
			continue;
		uint32_t h = kb__hash_name(d->name, strlen(d->name));
		int dup = 0;
		for (ptopic *q = pl->buckets[h]; q && !dup; q = q->next)
			dup = strcmp(q->name, d->name) == 0;
		if (dup) {
			KLOG_WARN("ptable", "topic %s listed twice at start-up", d->name);
			continue;
		}
		ptopic *tp = topic_new(d);
		if (!tp)
			return -ENOMEM;
		tp->next = pl->buckets[h];
		pl->buckets[h] = tp;
		tp->parts = kb__calloc((size_t)d->partitions, sizeof(*tp->parts));
		if (!tp->parts)
			return -ENOMEM;
		for (int32_t p = 0; p < d->partitions; p++) {
			if (!(tp->parts[p] = entry_new(t, tp, p)))
				return -ENOMEM;
			tp->n = p + 1;
			pl->all[pl->nall] = tp->parts[p];
			pl->epoch[pl->nall++] = t->driven ? 0 : kb__next_epoch(t, d->name, p, 0);
		}
	}
	return 0;
}

int kb_ptable_start(kb_ptable *t, const kb_topic_desc *topics, size_t n)
{
	start_plan pl = {0};
	kb__lock(&t->ctl, KB_CTL);
	int rc = t->driven ? 0 : kb__assign_load(t);
	if (rc)
		goto out;
	if (!t->driven)
		prune_assignment(t, topics, n);
	rc = plan_build(t, topics, n, &pl);
	if (rc) {
		KLOG_ERR("ptable", "start-up: out of memory building the table of %zu topic(s); nothing taken over",
			 n);
		goto out;
	}
	/* Fresh epochs for everything, recorded in one write before any take-over. */
	rc = t->driven ? 0 : kb__assign_write(t);
	if (rc)
		goto out;
	if (!t->driven) { /* driven: the cluster says what to lead */
		kb__par_run(t, pl.all, pl.epoch, pl.nall);
		size_t failed;
		int lead_err = lead_failures(t, pl.all, pl.nall, &failed);
		if (lead_err)
			KLOG_ERR("ptable", "start-up: %zu of %zu partition(s) could not be led: %s%s; they are retried, and "
				 "answer KAFKA_STORAGE_ERROR until then", failed, pl.nall, sub_strerror(lead_err),
				 lead_err == -EMFILE || lead_err == -ENFILE ? " (the descriptor limit: raise ulimit -n)" : "");
	}
	kb__lock(&t->mu, KB_MU);
	for (size_t b = 0; b < NBUCKETS; b++)
		for (ptopic *tp = pl.buckets[b], *nx; tp; tp = nx) {
			nx = tp->next;
			uint32_t h = kb__hash_name(tp->name, strlen(tp->name));
			tp->next = t->buckets[h];
			t->buckets[h] = tp;
		}
	kb__unlock(&t->mu, KB_MU);
	plan_free(&pl, 0);
out:
	plan_free(&pl, rc != 0);
	kb__unlock(&t->ctl, KB_CTL);
	return rc;
}

int kb_ptable_ensure_topic(kb_ptable *t, const kb_topic_desc *d)
{
	if (!d->name || !*d->name || d->partitions < 0)
		return -EINVAL;
	kb__lock(&t->ctl, KB_CTL);
	int rc = 0, lead_err = 0;
	if (t->stopped) {
		rc = -ESHUTDOWN;
		goto out;
	}
	kb__lock(&t->mu, KB_MU);
	ptopic *tp = kb__find_topic(t, d->name, strlen(d->name));
	int same_id = tp && (!d->topic_id || !tp->has_id || strcmp(tp->topic_id, d->topic_id) == 0);
	kb__unlock(&t->mu, KB_MU);
	if (tp && !same_id) {
		/* A new incarnation under the same name: let go of the old one first. */
		kb__unlock(&t->ctl, KB_CTL);
		rc = kb_ptable_drop_topic(t, d->name);
		kb__lock(&t->ctl, KB_CTL);
		if (rc)
			goto out;
		kb__lock(&t->mu, KB_MU);
		tp = kb__find_topic(t, d->name, strlen(d->name));
		kb__unlock(&t->mu, KB_MU);
	}
	if (!tp) {
		tp = topic_new(d);
		if (!tp) {
			rc = -ENOMEM;
			goto out;
		}
		rc = grow_topic(t, tp, d->partitions, 0, &lead_err);
		if (rc || tp->n == 0) {
			if (!rc) { /* zero partitions: keep it known anyway */
				kb__lock(&t->mu, KB_MU);
				uint32_t h = kb__hash_name(tp->name, strlen(tp->name));
				tp->next = t->buckets[h];
				t->buckets[h] = tp;
				kb__unlock(&t->mu, KB_MU);
			} else {
				topic_free(tp);
			}
		}
		goto out;
	}
	/* Known topic: new config, maybe more partitions. */
	kb__lock(&t->mu, KB_MU);
	tp->cfg = d->cfg;
	if (d->topic_id && !tp->has_id && strlen(d->topic_id) < sizeof(tp->topic_id)) {
		snprintf(tp->topic_id, sizeof(tp->topic_id), "%s", d->topic_id);
		tp->has_id = 1;
	}
	int32_t have = tp->n;
	kb__unlock(&t->mu, KB_MU);
	for (int32_t i = 0; i < have; i++)
		if (tp->parts[i]->p)
			ks_partition_set_config(tp->parts[i]->p, &d->cfg);
	if (d->partitions < have)
		KLOG_WARN("ptable", "topic %s: cannot shrink from %d to %d partitions", d->name, have,
			  d->partitions);
	rc = grow_topic(t, tp, d->partitions, 1, &lead_err);
out:
	if (!rc)
		rc = lead_err;
	kb__unlock(&t->ctl, KB_CTL);
	return rc;
}

int kb_ptable_set_config(kb_ptable *t, const char *topic, const ks_log_config *cfg)
{
	kb__lock(&t->ctl, KB_CTL);
	kb__lock(&t->mu, KB_MU);
	ptopic *tp = kb__find_topic(t, topic, strlen(topic));
	if (tp)
		tp->cfg = *cfg;
	kb__unlock(&t->mu, KB_MU);
	for (int32_t i = 0; tp && i < tp->n; i++)
		if (tp->parts[i]->p)
			ks_partition_set_config(tp->parts[i]->p, cfg);
	kb__unlock(&t->ctl, KB_CTL);
	return tp ? 0 : -ENOENT;
}

int kb_ptable_drop_topic(kb_ptable *t, const char *topic)
{
	kb__lock(&t->ctl, KB_CTL);
	kb__lock(&t->mu, KB_MU);
	ptopic *tp = kb__find_topic(t, topic, strlen(topic));
	if (!tp) {
		kb__unlock(&t->mu, KB_MU);
		kb__unlock(&t->ctl, KB_CTL);
		return 0;
	}
	tp->dropping = 1;
	for (int32_t i = 0; i < tp->n; i++)
		kb__fire_watches(tp->parts[i], 1);
	/* Queued flushes hold references too, so acks=all waiters complete. */
	for (;;) {
		int busy = 0;
		for (int32_t i = 0; i < tp->n; i++)
			busy |= tp->parts[i]->refs > 0;
		if (!busy)
			break;
		pthread_cond_wait(&t->refs_cv, &t->mu);
	}
	unlink_topic(t, tp);
	kb__unlock(&t->mu, KB_MU);
	/* Relinquish (manifest + snapshot) and close, partitions in parallel.
	 * A failed relinquish is logged; the handles are closed regardless,
	 * which is what the caller needs before removing the directory. */
	int rc = 0;
	kb_pentry **open_ = calloc((size_t)(tp->n ? tp->n : 1), sizeof(*open_));
	size_t nopen = 0;
	for (int32_t i = 0; i < tp->n; i++) {
		if (tp->parts[i]->p && open_)
			open_[nopen++] = tp->parts[i];
		else if (tp->parts[i]->p) {
			ks_partition_close(tp->parts[i]->p); /* out of memory: one by one */
			tp->parts[i]->p = NULL;
		}
	}
	reserve_release(t);
	kb__par_run(t, open_, NULL, nopen);
	reserve_take(t); /* the closed partitions gave back more than that */
	free(open_);
	for (int32_t i = 0; i < tp->n; i++)
		kb__fail_waiters(tp->parts[i], KERR_UNKNOWN_TOPIC_OR_PARTITION);
	kb__assign_del_topic(t, tp->name, tp->n);
	int w = t->driven ? 0 : kb__assign_write(t);
	if (w)
		KLOG_WARN("ptable", "topic %s dropped, but %s was not rewritten (pruned at the next start)",
			  topic, ASSIGNMENT_FILE);
	KLOG_INFO("ptable", "topic %s: %d partition(s) relinquished and closed", topic, tp->n);
	topic_free(tp);
	kb__unlock(&t->ctl, KB_CTL);
	return rc;
}

/* ---- public: the data path --------------------------------------------------------------------------- */

int16_t kb_ptable_get(kb_ptable *t, kw_str topic, int32_t partition, kb_pref *ref)
{
	*ref = (kb_pref)KAAS_PREF_INIT;
	if (topic.len <= 0)
		return KERR_UNKNOWN_TOPIC_OR_PARTITION;
	/* Without its lease a leader may have been replaced: it must neither
	 * append nor serve reads (its high watermark may pass data its
	 * successor never saw). */
	if (!kb_ptable_ack_ok(t))
		return KERR_NOT_LEADER_OR_FOLLOWER;
	int16_t err = KERR_NONE;
	kb__lock(&t->mu, KB_MU);
	ptopic *tp = kb__find_topic(t, topic.s, (size_t)topic.len);
	if (!tp || tp->dropping || partition < 0 || partition >= tp->n) {
		err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
	} else {
		kb_pentry *e = tp->parts[partition];
		if (e->state == PE_IDLE) {
			err = KERR_NOT_LEADER_OR_FOLLOWER; /* another broker leads it (or nobody yet) */
		} else if (e->state != PE_LEADER) {
			err = e->err == -ESTALE ? KERR_NOT_LEADER_OR_FOLLOWER : KERR_KAFKA_STORAGE_ERROR;
		} else {
			KAAS_ASSERT(e->p && e->epoch > 0 && e->refs >= 0); /* a leader has its partition */
			e->refs++;
			ref->e = e;
			ref->p = e->p;
			ref->epoch = e->epoch;
		}
	}
	kb__unlock(&t->mu, KB_MU);
	return err;
}

void kb_pref_put(kb_pref *ref)
{
	if (!ref || !ref->e)
		return;
	kb__put_entry(ref->e->t, ref->e);
	*ref = (kb_pref)KAAS_PREF_INIT;
}

int16_t kb_ptable_leader(kb_ptable *t, const char *topic, int32_t partition, int32_t *leader,
			   int32_t *epoch)
{
	int16_t err = KERR_NONE;
	*leader = -1;
	*epoch = -1;
	kb__lock(&t->mu, KB_MU);
	if (t->leaders) {
		/* Driven: the applied assignment says, whatever is open here. */
		ptopic *kt = kb__find_topic(t, topic, strlen(topic));
		if (!kt || kt->dropping) { /* gone from the registry; the assignment lags */
			err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		} else if (kb_leaders_find(t->leaders, topic, partition, leader, epoch) != 0 || *leader < 0) {
			err = KERR_LEADER_NOT_AVAILABLE; /* not found leaves both at -1 */
		} else if (*leader == t->b->id) {
			/* Ours, but not serving (take-over failed, poisoned, or still
			 * in progress): say so rather than send clients here. */
			if (partition < kt->n && kt->parts[partition]->state == PE_FAILED) {
				err = KERR_LEADER_NOT_AVAILABLE;
				*leader = -1;
			}
		}
		kb__unlock(&t->mu, KB_MU);
		return err;
	}
	ptopic *tp = kb__find_topic(t, topic, strlen(topic));
	if (!tp || tp->dropping || partition < 0 || partition >= tp->n) {
		err = tp ? KERR_LEADER_NOT_AVAILABLE : KERR_UNKNOWN_TOPIC_OR_PARTITION;
	} else if (tp->parts[partition]->state != PE_LEADER) {
		err = KERR_LEADER_NOT_AVAILABLE;
	} else {
		*leader = t->b->id;
		*epoch = tp->parts[partition]->epoch;
	}
	kb__unlock(&t->mu, KB_MU);
	return err;
}

/* ---- shutdown ----------------------------------------------------------------------------------------- */

int kb_ptable_shutdown(kb_ptable *t)
{
	kb__lock(&t->ctl, KB_CTL);
	kb__lock(&t->mu, KB_MU);
	t->stopped = 1;
	kb__unlock(&t->mu, KB_MU);
	/* Let the flushers finish the queue, then stop them. */
	kb__lock(&t->fmu, KB_FMU);
	t->fstop = 1;
	pthread_cond_broadcast(&t->fcv);
	kb__unlock(&t->fmu, KB_FMU);
	for (int i = 0; i < t->nflushers; i++)
		pthread_join(t->flushers[i], NULL);
	t->nflushers = 0;
	/* Wait for references, flush (acks=0/1 data becomes durable), then
	 * relinquish and close everything, many partitions at a time. */
	int rc = 0, n = 0;
	size_t cap = 0, nall = 0;
	kb_pentry **all = NULL;
	kb__lock(&t->mu, KB_MU);
	for (int b = 0; b < NBUCKETS; b++)
		for (ptopic *tp = t->buckets[b]; tp; tp = tp->next)
			for (int32_t i = 0; i < tp->n; i++) {
				kb_pentry *e = tp->parts[i];
				while (e->refs > 0)
					pthread_cond_wait(&t->refs_cv, &t->mu);
				kb__fire_watches(e, 1);
				if (!e->p)
					continue;
				if (KAAS_GROW(all, nall, cap, 64)) {
					rc = -ENOMEM;
					continue;
				}
				all[nall++] = e;
				n += e->state == PE_LEADER;
			}
	kb__unlock(&t->mu, KB_MU);
	reserve_release(t);
	int r = kb__par_run(t, all, NULL, nall);
	if (!rc)
		rc = r;
	kb__lock(&t->mu, KB_MU);
	for (size_t i = 0; i < nall; i++) {
		all[i]->state = PE_FAILED;
		kb__fail_waiters(all[i], KERR_REQUEST_TIMED_OUT); /* written, not known durable */
	}
	kb__unlock(&t->mu, KB_MU);
	free(all);
	KLOG_INFO("ptable", "relinquished %d partition(s)%s", n, rc ? " (with errors)" : "");
	kb__unlock(&t->ctl, KB_CTL);
	return rc;
}

void kb_ptable_destroy(kb_ptable *t)
{
	if (!t)
		return;
	kb__cleaner_stop(t);
	kb__lock(&t->fmu, KB_FMU);
	t->fstop = 1;
	pthread_cond_broadcast(&t->fcv);
	kb__unlock(&t->fmu, KB_FMU);
	for (int i = 0; i < t->nflushers; i++)
		pthread_join(t->flushers[i], NULL);
	for (int b = 0; b < NBUCKETS; b++) {
		ptopic *tp = t->buckets[b];
		while (tp) {
			ptopic *nx = tp->next;
			for (int32_t i = 0; i < tp->n; i++) {
				ks_partition_close(tp->parts[i]->p);
				struct kb_watch *w = tp->parts[i]->watches;
				for (; w; w = w->next)
					w->e = NULL;
				tp->parts[i]->watches = NULL;
				dwaiter *d = tp->parts[i]->waiters;
				while (d) {
					dwaiter *dn = d->next;
					free(d);
					d = dn;
				}
				tp->parts[i]->waiters = NULL;
			}
			topic_free(tp);
			tp = nx;
		}
	}
	reserve_release(t);
	json_decref(t->assign);
	kb_leaders_put(t->leaders);
	free(t->flushers);
	pthread_mutex_destroy(&t->ctl);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->refs_cv);
	pthread_mutex_destroy(&t->fmu);
	pthread_cond_destroy(&t->fcv);
	free(t);
}
