/*
 * cleaner.c — the log cleaner's thread: compaction of the led partitions
 * of topics with cleanup.policy=compact (docs/storage.md, "Compaction").
 *
 * One thread, one key map (log.cleaner.dedupe.buffer.size) and one I/O
 * bucket (log.cleaner.io.max.bytes.per.second) for the whole broker, as
 * Kafka's single default cleaner thread.  Every round it visits the
 * leaders and lets the storage engine clean each that is due, pass after
 * pass while passes keep coming (a log with more dirty keys than the map
 * holds needs several); when no log was due it sleeps
 * log.cleaner.backoff.ms.  It never runs on the event loop nor on the
 * housekeeping worker: a pass at a bounded rate can take minutes.  Only
 * leaders are visited, and storage cleans only while the leadership that
 * began a pass still holds (and a fencing check finds no newer epoch),
 * so a partition that moves to another broker mid-pass is left as it was.
 * After every pass it publishes the cleaner's counters, and after every
 * round the dirtiest partitions, for the metrics (kb_ptable_cleaner_obs).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kaas/core/ptable_int.h"
#include "util/clock.h"
#include "util/log.h"

struct kb_cleaner_th {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;
	ks_cleaner *c;
	kb_cleaner_obs pub; /* under mu: what a metrics scrape reads */
};

/* Keeps the KB_CLEANER_DIRTY_TOP dirtiest partitions in o (ratio order). */
static void dirty_add(kb_cleaner_obs *o, const char *topic, int32_t partition, double ratio)
{
	o->compacted++;
	if (ratio > o->max_dirty)
		o->max_dirty = ratio;
	int n = o->ndirty, i = n < KB_CLEANER_DIRTY_TOP ? n : KB_CLEANER_DIRTY_TOP - 1;
	if (n == KB_CLEANER_DIRTY_TOP && ratio <= o->dirty[i].ratio)
		return;
	while (i > 0 && o->dirty[i - 1].ratio < ratio) {
		o->dirty[i] = o->dirty[i - 1];
		i--;
	}
	snprintf(o->dirty[i].topic, sizeof(o->dirty[i].topic), "%s", topic);
	o->dirty[i].partition = partition;
	o->dirty[i].ratio = ratio;
	if (n < KB_CLEANER_DIRTY_TOP)
		o->ndirty++;
}

/* After a pass or an error: the counters for the next scrape. */
static void publish(struct kb_cleaner_th *w, int rc, int64_t took_ms)
{
	pthread_mutex_lock(&w->mu);
	ks_cleaner_stats(w->c, &w->pub.st);
	if (rc == 1)
		w->pub.last_pass_s = (double)took_ms / 1000.0;
	if (rc < 0 && rc != -EPERM && rc != -ECANCELED && rc != -EBUSY)
		w->pub.errors++;
	pthread_mutex_unlock(&w->mu);
}

/* One round over the leaders; how many passes it swapped in. */
static int round_once(kb_ptable *t, struct kb_cleaner_th *w)
{
	size_t n;
	int passes = 0;
	kb_pentry **lead = kb__ref_leaders(t, &n);
	kb_cleaner_obs dirt; /* this round's dirty ratios, published at its end */
	dirt.ndirty = dirt.compacted = 0;
	dirt.max_dirty = 0;
	for (size_t i = 0; i < n; i++) {
		int rc = 0;
		do {
			pthread_mutex_lock(&w->mu);
			int stop = w->stop;
			pthread_mutex_unlock(&w->mu);
			if (stop)
				break;
			int64_t t0 = ku_mono_ms();
			rc = ks_partition_clean(lead[i]->p, w->c, ku_wall_ms());
			publish(w, rc, ku_mono_ms() - t0);
			if (rc == 1)
				passes++;
		} while (rc == 1);
		if (rc < 0 && rc != -EPERM && rc != -ECANCELED && rc != -EBUSY)
			KLOG_WARN("cleaner", "%s/%d: %s (tried again next round)", lead[i]->topic->name,
				  lead[i]->index, sub_strerror(rc));
		double ratio;
		if (ks_partition_dirty_ratio(lead[i]->p, &ratio) == 0)
			dirty_add(&dirt, lead[i]->topic->name, lead[i]->index, ratio);
	}
	pthread_mutex_lock(&w->mu);
	w->pub.ndirty = dirt.ndirty;
	w->pub.compacted = dirt.compacted;
	w->pub.max_dirty = dirt.max_dirty;
	memcpy(w->pub.dirty, dirt.dirty, (size_t)dirt.ndirty * sizeof(dirt.dirty[0]));
	w->pub.rounds++;
	pthread_mutex_unlock(&w->mu);
	for (size_t i = 0; i < n; i++)
		kb__put_entry(t, lead[i]);
	free(lead);
	return passes;
}

static void *cleaner_main(void *arg)
{
	kb_ptable *t = arg;
	struct kb_cleaner_th *w = t->cleaner;
	int64_t backoff = t->b->cfg.cleaner_backoff_ms > 0 ? t->b->cfg.cleaner_backoff_ms : 15000;
	int64_t wait_ms = 1000; /* the first round soon after start-up */
	for (;;) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += wait_ms / 1000;
		ts.tv_nsec += (wait_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&w->mu);
		while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0)
			;
		int stop = w->stop;
		pthread_mutex_unlock(&w->mu);
		if (stop)
			break;
		wait_ms = round_once(t, w) ? 1000 : backoff;
	}
	return NULL;
}

/* A swap is one more write a leader makes only while it holds its lease. */
static int lease_held(void *arg) { return kb_ptable_ack_ok(arg); }

static int start(kb_ptable *t)
{
	const kb_config *cfg = &t->b->cfg;
	if (!cfg->cleaner_enable)
		return 0;
	struct kb_cleaner_th *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	int64_t io = cfg->cleaner_io_bytes_per_sec >= ((int64_t)1 << 62) ? 0 : cfg->cleaner_io_bytes_per_sec;
	int rc = ks_cleaner_new((size_t)cfg->cleaner_dedupe_bytes, io, &w->c);
	if (rc) {
		free(w);
		return rc;
	}
	ks_cleaner_set_guard(w->c, lease_held, t);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	t->cleaner = w;
	if ((rc = pthread_create(&w->th, NULL, cleaner_main, t))) {
		t->cleaner = NULL;
		ks_cleaner_free(w->c);
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		free(w);
		return -rc;
	}
	return 0;
}

int kb__cleaner_start(kb_ptable *t)
{
	int rc = start(t);
	if (rc)
		KLOG_WARN("cleaner", "the log cleaner did not start (%s): compacted topics are not cleaned",
			  sub_strerror(rc));
	return rc;
}

int kb_ptable_cleaner_obs(kb_ptable *t, kb_cleaner_obs *out)
{
	struct kb_cleaner_th *w = t ? t->cleaner : NULL;
	if (!w)
		return -ENOENT;
	pthread_mutex_lock(&w->mu);
	*out = w->pub;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

void kb__cleaner_stop(kb_ptable *t)
{
	struct kb_cleaner_th *w = t->cleaner;
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	ks_cleaner_stop(w->c);
	pthread_join(w->th, NULL);
	ks_cleaner_free(w->c);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
	t->cleaner = NULL;
}
