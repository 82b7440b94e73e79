/*
 * ptable.c — the partition table, leadership epochs (assignment.json) and
 * the group-commit flusher.
 *
 * Locks, always taken in this order:
 *   ctl  serialises the control operations (start, ensure, drop, re-drive,
 *        shutdown) and owns the assignment document; held across volume I/O
 *   mu   the topic map, entry states, reference counts, durability waiters
 *        and long-poll watches; never held across volume I/O
 *   fmu  the flusher's dirty queue
 * A partition is used through references (kb_pref); dropping a topic waits
 * for them under mu/refs_cv, after which nobody can reach its partitions.
 */
#include "kaas/core/ptable.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/grow.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

#define ASSIGNMENT_FILE "assignment.json"
#define ASSIGNMENT_MAX (64u << 20)
#define RETRY_MIN_MS 1000
#define RETRY_MAX_MS 60000

enum { PE_LEADER = 1, PE_FAILED = 2 };

typedef struct dwaiter {
	struct dwaiter *next;
	int64_t offset;
	kb_durable_fn fn;
	void *arg;
} dwaiter;

struct kb_watch {
	kb_pentry *e; /* NULL once fired or detached */
	struct kb_watch *prev, *next;
	int64_t offset;
	kb_watch_fn fn;
	void *arg;
};

typedef struct ptopic ptopic;

struct kb_pentry {
	kb_ptable *t;
	ptopic *topic;
	int32_t index;
	ks_partition *p;
	int32_t epoch;
	int state;
	int err;               /* -errno of the last failed open/take-over */
	int64_t retry_at_ms;   /* monotonic */
	int64_t retry_delay_ms;
	int refs;
	int64_t durable;       /* last durable offset the flusher saw */
	dwaiter *waiters;
	struct kb_watch *watches;
	int queued;            /* in the dirty queue (fmu) */
	kb_pentry *dnext;
};

struct ptopic {
	ptopic *next;          /* hash chain */
	char *name;
	char topic_id[40];
	int has_id;
	ks_log_config cfg;
	int32_t n;
	kb_pentry **parts;
	int dropping;
};

#define NBUCKETS 1024

struct kb_ptable {
	kb_broker *b;
	pthread_mutex_t ctl;
	pthread_mutex_t mu;
	pthread_cond_t refs_cv;
	ptopic *buckets[NBUCKETS];
	json_t *assign;        /* {"version","controller_epoch","partitions":{}} (ctl) */
	int64_t last_retention_ms;
	int stopped;

	pthread_mutex_t fmu;
	pthread_cond_t fcv;
	kb_pentry *dhead, *dtail;
	int fstop;
	int nflushers;
	pthread_t *flushers;
};

/* ---- small helpers ------------------------------------------------------------- */

static uint32_t hash_name(const char *s, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h % NBUCKETS;
}

static ptopic *find_topic(kb_ptable *t, const char *name, size_t n)
{
	for (ptopic *tp = t->buckets[hash_name(name, n)]; tp; tp = tp->next)
		if (strlen(tp->name) == n && memcmp(tp->name, name, n) == 0)
			return tp;
	return NULL;
}

static void unlink_topic(kb_ptable *t, ptopic *tp)
{
	ptopic **pp = &t->buckets[hash_name(tp->name, strlen(tp->name))];
	while (*pp && *pp != tp)
		pp = &(*pp)->next;
	if (*pp)
		*pp = tp->next;
}

int kb_partition_key_parse(const char *key, char *topic, size_t topiclen, int32_t *partition)
{
	const char *dash = strrchr(key, '-');
	if (!dash || dash == key || !dash[1])
		return -EINVAL;
	int64_t v = 0;
	for (const char *p = dash + 1; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (*p - '0');
		if (v > INT32_MAX)
			return -EINVAL;
	}
	size_t n = (size_t)(dash - key);
	if (n >= topiclen)
		return -ENAMETOOLONG;
	memcpy(topic, key, n);
	topic[n] = 0;
	*partition = (int32_t)v;
	return 0;
}

static void part_key(char *dst, size_t len, const char *topic, int32_t partition)
{
	snprintf(dst, len, "%s-%d", topic, partition);
}

static void part_dir(char *dst, size_t len, const char *topic, int32_t partition)
{
	snprintf(dst, len, "%s/%d", topic, partition);
}

/* ---- assignment.json and epochs --------------------------------------------------------- */

static json_t *assign_partitions(kb_ptable *t)
{
	return json_object_get(t->assign, "partitions");
}

static void assign_reset(kb_ptable *t)
{
	json_decref(t->assign);
	t->assign = json_pack("{s:I,s:I,s:o}", "version", (json_int_t)0, "controller_epoch", (json_int_t)0,
			      "partitions", json_object());
}

/* Reads assignment.json; a missing file is an empty assignment.  A file that
 * does not parse is reported and replaced: epochs stay safe because every new
 * epoch is also above the highest epoch found in the partition's files. */
static int assign_load(kb_ptable *t)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = sub_read_file(t->b->cluster, ASSIGNMENT_FILE, ASSIGNMENT_MAX, &buf, &len);
	assign_reset(t);
	if (rc == -ENOENT)
		return 0;
	if (rc) {
		KLOG_ERR("ptable", "reading %s: %s", ASSIGNMENT_FILE, sub_strerror(rc));
		return rc;
	}
	json_error_t je;
	json_t *doc = json_loadb(buf, len, 0, &je);
	free(buf);
	if (!doc || !json_is_object(doc) || !json_is_object(json_object_get(doc, "partitions"))) {
		KLOG_WARN("ptable", "%s is not a valid assignment (%s); starting a new one",
			  ASSIGNMENT_FILE, doc ? "wrong shape" : je.text);
		json_decref(doc);
		return 0;
	}
	json_t *v = json_object_get(doc, "version");
	if (!json_is_integer(v))
		json_object_set_new(doc, "version", json_integer(0));
	if (!json_is_integer(json_object_get(doc, "controller_epoch")))
		json_object_set_new(doc, "controller_epoch", json_integer(0));
	json_decref(t->assign);
	t->assign = doc;
	return 0;
}

static int assign_write(kb_ptable *t)
{
	json_t *v = json_object_get(t->assign, "version");
	json_object_set_new(t->assign, "version", json_integer(json_integer_value(v) + 1));
	char *s = json_dumps(t->assign, JSON_SORT_KEYS | JSON_INDENT(1));
	if (!s)
		return -ENOMEM;
	int rc = sub_write_atomic(t->b->cluster, ASSIGNMENT_FILE, s, strlen(s));
	free(s);
	if (rc)
		KLOG_ERR("ptable", "writing %s: %s", ASSIGNMENT_FILE, sub_strerror(rc));
	return rc;
}

static int32_t assign_epoch(kb_ptable *t, const char *topic, int32_t partition)
{
	char key[512];
	part_key(key, sizeof(key), topic, partition);
	json_t *e = json_object_get(assign_partitions(t), key);
	json_t *ep = e ? json_object_get(e, "epoch") : NULL;
	if (!json_is_integer(ep))
		return 0;
	json_int_t v = json_integer_value(ep);
	return v < 0 ? 0 : v > INT32_MAX - 1 ? INT32_MAX - 1 : (int32_t)v;
}

static void assign_set(kb_ptable *t, const char *topic, int32_t partition, int32_t epoch)
{
	char key[512];
	part_key(key, sizeof(key), topic, partition);
	json_object_set_new(assign_partitions(t), key,
			    json_pack("{s:i,s:i}", "leader", (int)t->b->id, "epoch", (int)epoch));
}

static void assign_del_topic(kb_ptable *t, const char *topic, int32_t n)
{
	char key[512];
	for (int32_t i = 0; i < n; i++) {
		part_key(key, sizeof(key), topic, i);
		json_object_del(assign_partitions(t), key);
	}
}

/* The highest epoch named by the partition's segment files or its manifest. */
static int32_t disk_epoch(kb_ptable *t, const char *topic, int32_t partition)
{
	char dir[512];
	part_dir(dir, sizeof(dir), topic, partition);
	char **names = NULL;
	size_t n = 0;
	int32_t best = 0;
	if (sub_list(t->b->data, dir, &names, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			const char *s = names[i];
			int ok = 1;
			int64_t ep = 0;
			for (int k = 0; k < 10; k++) {
				if (s[k] < '0' || s[k] > '9') {
					ok = 0;
					break;
				}
				ep = ep * 10 + (s[k] - '0');
			}
			if (ok && s[10] == '-' && ep > best && ep < INT32_MAX)
				best = (int32_t)ep;
		}
		sub_names_free(names, n);
	}
	char path[600];
	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	char *buf = NULL;
	size_t len = 0;
	if (sub_read_file(t->b->data, path, 1 << 20, &buf, &len) == 0) {
		json_t *doc = json_loadb(buf, len, 0, NULL);
		json_t *ep = doc ? json_object_get(doc, "epoch") : NULL;
		if (json_is_integer(ep) && json_integer_value(ep) > best && json_integer_value(ep) < INT32_MAX)
			best = (int32_t)json_integer_value(ep);
		json_decref(doc);
	}
	free(buf);
	return best;
}

/* Picks and records (in memory) the next epoch of a partition. */
static int32_t next_epoch(kb_ptable *t, const char *topic, int32_t partition, int32_t at_least)
{
	int32_t e = assign_epoch(t, topic, partition);
	int32_t d = disk_epoch(t, topic, partition);
	if (d > e)
		e = d;
	if (at_least > e)
		e = at_least;
	if (e >= INT32_MAX - 1)
		e = INT32_MAX - 2;
	assign_set(t, topic, partition, e + 1);
	return e + 1;
}

/* ---- opening and taking over ------------------------------------------------------------ */

static kb_pentry *entry_new(kb_ptable *t, ptopic *tp, int32_t index)
{
	kb_pentry *e = calloc(1, sizeof(*e));
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
static void entry_take_over(kb_ptable *t, kb_pentry *e, int32_t epoch)
{
	ptopic *tp = e->topic;
	char dir[512];
	part_dir(dir, sizeof(dir), tp->name, e->index);
	int rc = 0;
	if (!e->p) {
		rc = sub_mkdirs(t->b->data, dir, 0755);
		if (!rc)
			rc = ks_partition_open(t->b->data, dir, tp->has_id ? tp->topic_id : NULL, 1, &tp->cfg,
						 &e->p);
		if (rc)
			e->p = NULL;
	}
	if (!rc)
		rc = ks_partition_take_over(e->p, epoch);
	pthread_mutex_lock(&t->mu);
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
		e->durable = ks_partition_high_watermark(e->p);
	}
	pthread_mutex_unlock(&t->mu);
	if (rc)
		KLOG_ERR("ptable", "%s: taking over at epoch %d failed: %s%s; will retry", dir, epoch,
			 sub_strerror(rc),
			 rc == -ESTALE ? " (a newer leader or an older topic incarnation owns the directory)" : "");
	else
		KLOG_DEBUG("ptable", "%s: leader at epoch %d", dir, epoch);
}

/* Take-overs and relinquishes are a few round trips to the volume each:
 * with many partitions they run on up to PAR_MAX threads at once. */
#define PAR_MAX 8

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
			entry_take_over(j->t, e, j->epoch[i]);
			continue;
		}
		int r = 0;
		if (e->state == PE_LEADER) {
			/* acks=0/1 data becomes durable before the manifest is written. */
			int64_t d;
			if (ks_partition_flush(e->p, &d) == 0) {
				pthread_mutex_lock(&j->t->mu);
				if (d > e->durable)
					e->durable = d;
				pthread_mutex_unlock(&j->t->mu);
			}
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
static int par_run(kb_ptable *t, kb_pentry **e, const int32_t *epoch, size_t n)
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
	ptopic *tp = calloc(1, sizeof(*tp));
	if (!tp)
		return NULL;
	tp->name = strdup(d->name);
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
	for (int32_t i = 0; i < tp->n; i++)
		free(tp->parts[i]);
	free(tp->parts);
	free(tp->name);
	free(tp);
}

/* Adds partitions [tp->n, want) to a topic (ctl held): epochs are recorded
 * first, then each is taken over. */
static int grow_topic(kb_ptable *t, ptopic *tp, int32_t want, int linked)
{
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
		epochs[i] = next_epoch(t, tp->name, i, 0);
	}
	int rc = assign_write(t);
	if (rc) {
		for (int32_t k = tp->n; k < want; k++)
			free(np[k]);
		free(np);
		free(epochs);
		return rc;
	}
	par_run(t, np + tp->n, epochs + tp->n, (size_t)(want - tp->n));
	free(epochs);
	pthread_mutex_lock(&t->mu);
	for (int32_t i = 0; i < tp->n; i++)
		np[i] = tp->parts[i];
	free(tp->parts);
	tp->parts = np;
	tp->n = want;
	if (!linked) {
		uint32_t h = hash_name(tp->name, strlen(tp->name));
		tp->next = t->buckets[h];
		t->buckets[h] = tp;
	}
	pthread_mutex_unlock(&t->mu);
	return 0;
}

/* ---- flusher ---------------------------------------------------------------------------------- */

static void fire_watches(kb_pentry *e, int all)
{
	/* mu held */
	struct kb_watch *w = e->watches;
	while (w) {
		struct kb_watch *nx = w->next;
		if (all || e->durable > w->offset) {
			if (w->prev)
				w->prev->next = w->next;
			else
				e->watches = w->next;
			if (w->next)
				w->next->prev = w->prev;
			w->e = NULL;
			w->prev = w->next = NULL;
			w->fn(w->arg);
		}
		w = nx;
	}
}

static void enqueue_dirty(kb_ptable *t, kb_pentry *e)
{
	pthread_mutex_lock(&t->fmu);
	if (!e->queued && !t->fstop) {
		e->queued = 1;
		pthread_mutex_lock(&t->mu);
		e->refs++; /* the queue holds a reference */
		pthread_mutex_unlock(&t->mu);
		e->dnext = NULL;
		if (t->dtail)
			t->dtail->dnext = e;
		else
			t->dhead = e;
		t->dtail = e;
		pthread_cond_signal(&t->fcv);
	}
	pthread_mutex_unlock(&t->fmu);
}

static void put_entry(kb_ptable *t, kb_pentry *e)
{
	pthread_mutex_lock(&t->mu);
	if (--e->refs == 0)
		pthread_cond_broadcast(&t->refs_cv);
	pthread_mutex_unlock(&t->mu);
}

static void flush_entry(kb_ptable *t, kb_pentry *e)
{
	int64_t durable = -1;
	int rc = ks_partition_flush(e->p, &durable);
	dwaiter *done = NULL, **tail = &done;
	pthread_mutex_lock(&t->mu);
	if (!rc && durable > e->durable)
		e->durable = durable;
	dwaiter **pp = &e->waiters;
	while (*pp) {
		dwaiter *w = *pp;
		if (rc || w->offset <= e->durable) {
			*pp = w->next;
			w->next = NULL;
			*tail = w;
			tail = &w->next;
		} else {
			pp = &w->next;
		}
	}
	fire_watches(e, rc != 0);
	int64_t hw = e->durable;
	pthread_mutex_unlock(&t->mu);
	if (rc)
		KLOG_ERR("ptable", "%s/%d: flush failed: %s (partition poisoned)", e->topic->name, e->index,
			 sub_strerror(rc));
	while (done) {
		dwaiter *w = done;
		done = w->next;
		w->fn(w->arg, rc ? KERR_KAFKA_STORAGE_ERROR : KERR_NONE, rc ? -1 : hw);
		free(w);
	}
}

static void *flusher_main(void *arg)
{
	kb_ptable *t = arg;
	pthread_mutex_lock(&t->fmu);
	for (;;) {
		while (!t->dhead && !t->fstop)
			pthread_cond_wait(&t->fcv, &t->fmu);
		kb_pentry *e = t->dhead;
		if (!e)
			break;
		t->dhead = e->dnext;
		if (!t->dhead)
			t->dtail = NULL;
		e->queued = 0; /* appends from now on queue it again */
		pthread_mutex_unlock(&t->fmu);
		flush_entry(t, e);
		put_entry(t, e);
		pthread_mutex_lock(&t->fmu);
	}
	pthread_mutex_unlock(&t->fmu);
	return NULL;
}

/* ---- public: life cycle ---------------------------------------------------------------------------- */

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
	assign_reset(t);
	int n = b->cfg.num_flush_threads > 0 ? b->cfg.num_flush_threads : 1;
	t->flushers = calloc((size_t)n, sizeof(pthread_t));
	if (!t->flushers) {
		kb_ptable_destroy(t);
		return -ENOMEM;
	}
	for (int i = 0; i < n; i++) {
		int rc = pthread_create(&t->flushers[i], NULL, flusher_main, t);
		if (rc) {
			kb_ptable_destroy(t);
			return -rc;
		}
		t->nflushers++;
	}
	*out = t;
	return 0;
}

int kb_ptable_start(kb_ptable *t, const kb_topic_desc *topics, size_t n)
{
	pthread_mutex_lock(&t->ctl);
	int rc = assign_load(t);
	if (rc)
		goto out;
	/* Forget partitions of topics that no longer exist. */
	json_t *parts = assign_partitions(t);
	const char *key;
	json_t *val;
	void *tmp;
	json_object_foreach_safe(parts, tmp, key, val)
	{
		char topic[512];
		int32_t p;
		int keep = 0;
		if (kb_partition_key_parse(key, topic, sizeof(topic), &p) == 0)
			for (size_t i = 0; i < n; i++)
				if (strcmp(topics[i].name, topic) == 0 && p < topics[i].partitions)
					keep = 1;
		if (!keep)
			json_object_del(parts, key);
	}
	/* Fresh epochs for everything, recorded in one write before any take-over. */
	ptopic **tps = calloc(n ? n : 1, sizeof(*tps));
	int32_t **epochs = calloc(n ? n : 1, sizeof(*epochs));
	if (!tps || !epochs) {
		free(tps);
		free(epochs);
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		if (topics[i].partitions <= 0)
			continue;
		tps[i] = topic_new(&topics[i]);
		epochs[i] = calloc((size_t)topics[i].partitions, sizeof(int32_t));
		if (!tps[i] || !epochs[i]) {
			rc = -ENOMEM;
			break;
		}
		for (int32_t p = 0; p < topics[i].partitions; p++)
			epochs[i][p] = next_epoch(t, topics[i].name, p, 0);
	}
	if (!rc)
		rc = assign_write(t);
	/* Build every entry, take them all over (in parallel), then publish. */
	kb_pentry **all = NULL;
	int32_t *all_ep = NULL;
	size_t nall = 0;
	if (!rc) {
		size_t cap = 0;
		for (size_t i = 0; i < n; i++)
			cap += tps[i] ? (size_t)topics[i].partitions : 0;
		all = calloc(cap ? cap : 1, sizeof(*all));
		all_ep = calloc(cap ? cap : 1, sizeof(*all_ep));
		if (!all || !all_ep)
			rc = -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		ptopic *tp = tps[i];
		if (!tp)
			continue;
		int dup = 0;
		for (size_t k = 0; k < i; k++)
			dup |= tps[k] && strcmp(tps[k]->name, tp->name) == 0;
		if (rc || dup) {
			if (dup)
				KLOG_WARN("ptable", "topic %s listed twice at start-up", tp->name);
			topic_free(tp);
			tps[i] = NULL;
			continue;
		}
		tp->parts = calloc((size_t)topics[i].partitions, sizeof(*tp->parts));
		for (int32_t p = 0; tp->parts && p < topics[i].partitions; p++) {
			tp->parts[p] = entry_new(t, tp, p);
			if (!tp->parts[p])
				break;
			tp->n = p + 1;
			all[nall] = tp->parts[p];
			all_ep[nall++] = epochs[i][p];
		}
	}
	if (!rc)
		par_run(t, all, all_ep, nall);
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < n; i++) {
		ptopic *tp = tps[i];
		if (!tp)
			continue;
		uint32_t h = hash_name(tp->name, strlen(tp->name));
		tp->next = t->buckets[h];
		t->buckets[h] = tp;
	}
	pthread_mutex_unlock(&t->mu);
	for (size_t i = 0; i < n; i++)
		free(epochs[i]);
	free(all);
	free(all_ep);
	free(tps);
	free(epochs);
out:
	pthread_mutex_unlock(&t->ctl);
	return rc;
}

int kb_ptable_ensure_topic(kb_ptable *t, const kb_topic_desc *d)
{
	if (!d->name || !*d->name || d->partitions < 0)
		return -EINVAL;
	pthread_mutex_lock(&t->ctl);
	int rc = 0;
	if (t->stopped) {
		rc = -ESHUTDOWN;
		goto out;
	}
	pthread_mutex_lock(&t->mu);
	ptopic *tp = find_topic(t, d->name, strlen(d->name));
	int same_id = tp && (!d->topic_id || !tp->has_id || strcmp(tp->topic_id, d->topic_id) == 0);
	pthread_mutex_unlock(&t->mu);
	if (tp && !same_id) {
		/* A new incarnation under the same name: let go of the old one first. */
		pthread_mutex_unlock(&t->ctl);
		rc = kb_ptable_drop_topic(t, d->name);
		pthread_mutex_lock(&t->ctl);
		if (rc)
			goto out;
		pthread_mutex_lock(&t->mu);
		tp = find_topic(t, d->name, strlen(d->name));
		pthread_mutex_unlock(&t->mu);
	}
	if (!tp) {
		tp = topic_new(d);
		if (!tp) {
			rc = -ENOMEM;
			goto out;
		}
		rc = grow_topic(t, tp, d->partitions, 0);
		if (rc || tp->n == 0) {
			if (!rc) { /* zero partitions: keep it known anyway */
				pthread_mutex_lock(&t->mu);
				uint32_t h = hash_name(tp->name, strlen(tp->name));
				tp->next = t->buckets[h];
				t->buckets[h] = tp;
				pthread_mutex_unlock(&t->mu);
			} else {
				topic_free(tp);
			}
		}
		goto out;
	}
	/* Known topic: new config, maybe more partitions. */
	pthread_mutex_lock(&t->mu);
	tp->cfg = d->cfg;
	if (d->topic_id && !tp->has_id && strlen(d->topic_id) < sizeof(tp->topic_id)) {
		snprintf(tp->topic_id, sizeof(tp->topic_id), "%s", d->topic_id);
		tp->has_id = 1;
	}
	int32_t have = tp->n;
	pthread_mutex_unlock(&t->mu);
	for (int32_t i = 0; i < have; i++)
		if (tp->parts[i]->p)
			ks_partition_set_config(tp->parts[i]->p, &d->cfg);
	if (d->partitions < have)
		KLOG_WARN("ptable", "topic %s: cannot shrink from %d to %d partitions", d->name, have,
			  d->partitions);
	rc = grow_topic(t, tp, d->partitions, 1);
out:
	pthread_mutex_unlock(&t->ctl);
	return rc;
}

int kb_ptable_set_config(kb_ptable *t, const char *topic, const ks_log_config *cfg)
{
	pthread_mutex_lock(&t->ctl);
	pthread_mutex_lock(&t->mu);
	ptopic *tp = find_topic(t, topic, strlen(topic));
	if (tp)
		tp->cfg = *cfg;
	pthread_mutex_unlock(&t->mu);
	for (int32_t i = 0; tp && i < tp->n; i++)
		if (tp->parts[i]->p)
			ks_partition_set_config(tp->parts[i]->p, cfg);
	pthread_mutex_unlock(&t->ctl);
	return tp ? 0 : -ENOENT;
}

static void fail_waiters(kb_pentry *e, int16_t err)
{
	dwaiter *w;
	while ((w = e->waiters)) {
		e->waiters = w->next;
		w->fn(w->arg, err, -1);
		free(w);
	}
}

int kb_ptable_drop_topic(kb_ptable *t, const char *topic)
{
	pthread_mutex_lock(&t->ctl);
	pthread_mutex_lock(&t->mu);
	ptopic *tp = find_topic(t, topic, strlen(topic));
	if (!tp) {
		pthread_mutex_unlock(&t->mu);
		pthread_mutex_unlock(&t->ctl);
		return 0;
	}
	tp->dropping = 1;
	for (int32_t i = 0; i < tp->n; i++)
		fire_watches(tp->parts[i], 1);
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
	pthread_mutex_unlock(&t->mu);
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
	par_run(t, open_, NULL, nopen);
	free(open_);
	for (int32_t i = 0; i < tp->n; i++)
		fail_waiters(tp->parts[i], KERR_UNKNOWN_TOPIC_OR_PARTITION);
	assign_del_topic(t, tp->name, tp->n);
	int w = assign_write(t);
	if (w)
		KLOG_WARN("ptable", "topic %s dropped, but %s was not rewritten (pruned at the next start)",
			  topic, ASSIGNMENT_FILE);
	KLOG_INFO("ptable", "topic %s: %d partition(s) relinquished and closed", topic, tp->n);
	topic_free(tp);
	pthread_mutex_unlock(&t->ctl);
	return rc;
}

/* ---- public: the data path --------------------------------------------------------------------------- */

int16_t kb_ptable_get(kb_ptable *t, kw_str topic, int32_t partition, kb_pref *ref)
{
	*ref = (kb_pref)KAAS_PREF_INIT;
	if (topic.len <= 0)
		return KERR_UNKNOWN_TOPIC_OR_PARTITION;
	int16_t err = KERR_NONE;
	pthread_mutex_lock(&t->mu);
	ptopic *tp = find_topic(t, topic.s, (size_t)topic.len);
	if (!tp || tp->dropping || partition < 0 || partition >= tp->n) {
		err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
	} else {
		kb_pentry *e = tp->parts[partition];
		if (e->state != PE_LEADER) {
			err = e->err == -ESTALE ? KERR_NOT_LEADER_OR_FOLLOWER : KERR_KAFKA_STORAGE_ERROR;
		} else {
			e->refs++;
			ref->e = e;
			ref->p = e->p;
			ref->epoch = e->epoch;
		}
	}
	pthread_mutex_unlock(&t->mu);
	return err;
}

void kb_pref_put(kb_pref *ref)
{
	if (!ref || !ref->e)
		return;
	put_entry(ref->e->t, ref->e);
	*ref = (kb_pref)KAAS_PREF_INIT;
}

int16_t kb_ptable_leader(kb_ptable *t, const char *topic, int32_t partition, int32_t *leader,
			   int32_t *epoch)
{
	int16_t err = KERR_NONE;
	*leader = -1;
	*epoch = -1;
	pthread_mutex_lock(&t->mu);
	ptopic *tp = find_topic(t, topic, strlen(topic));
	if (!tp || tp->dropping || partition < 0 || partition >= tp->n) {
		err = tp ? KERR_LEADER_NOT_AVAILABLE : KERR_UNKNOWN_TOPIC_OR_PARTITION;
	} else if (tp->parts[partition]->state != PE_LEADER) {
		err = KERR_LEADER_NOT_AVAILABLE;
	} else {
		*leader = t->b->id;
		*epoch = tp->parts[partition]->epoch;
	}
	pthread_mutex_unlock(&t->mu);
	return err;
}

void kb_ptable_dirty(kb_pref *ref)
{
	if (ref && ref->e)
		enqueue_dirty(ref->e->t, ref->e);
}

int kb_ptable_when_durable(kb_pref *ref, int64_t offset, kb_durable_fn fn, void *arg)
{
	kb_pentry *e = ref->e;
	kb_ptable *t = e->t;
	pthread_mutex_lock(&t->mu);
	if (e->durable >= offset) {
		int64_t hw = e->durable;
		pthread_mutex_unlock(&t->mu);
		fn(arg, KERR_NONE, hw);
		return 0;
	}
	dwaiter *w = malloc(sizeof(*w));
	if (!w) {
		pthread_mutex_unlock(&t->mu);
		return -ENOMEM;
	}
	w->offset = offset;
	w->fn = fn;
	w->arg = arg;
	w->next = e->waiters;
	e->waiters = w;
	pthread_mutex_unlock(&t->mu);
	enqueue_dirty(t, e);
	return 0;
}

kb_watch *kb_ptable_watch(kb_pref *ref, int64_t offset, kb_watch_fn fn, void *arg)
{
	kb_pentry *e = ref->e;
	kb_ptable *t = e->t;
	kb_watch *w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->offset = offset;
	w->fn = fn;
	w->arg = arg;
	pthread_mutex_lock(&t->mu);
	if (e->durable > offset || e->topic->dropping || t->stopped) {
		fn(arg);
	} else {
		w->e = e;
		w->next = e->watches;
		if (e->watches)
			e->watches->prev = w;
		e->watches = w;
	}
	pthread_mutex_unlock(&t->mu);
	return w;
}

void kb_ptable_unwatch(kb_ptable *t, kb_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&t->mu);
	kb_pentry *e = w->e;
	if (e) {
		if (w->prev)
			w->prev->next = w->next;
		else
			e->watches = w->next;
		if (w->next)
			w->next->prev = w->prev;
	}
	pthread_mutex_unlock(&t->mu);
	free(w);
}

void kb_ptable_wake_all(kb_ptable *t)
{
	pthread_mutex_lock(&t->mu);
	t->stopped = 1;
	for (int b = 0; b < NBUCKETS; b++)
		for (ptopic *tp = t->buckets[b]; tp; tp = tp->next)
			for (int32_t i = 0; i < tp->n; i++)
				fire_watches(tp->parts[i], 1);
	pthread_mutex_unlock(&t->mu);
}

/* ---- housekeeping ---------------------------------------------------------------------------------- */

/* The leaders of the topics not being dropped, each with a reference (put_entry
 * each one), so their partitions can be visited without holding mu across the
 * partition locks (an append may hold one through a slow write).  Out of
 * memory, the list stops short: the rest wait for the next round. */
static kb_pentry **ref_leaders(kb_ptable *t, size_t *n)
{
	kb_pentry **v = NULL;
	size_t nv = 0, cap = 0;
	pthread_mutex_lock(&t->mu);
	for (int b = 0; b < NBUCKETS && !t->stopped; b++)
		for (ptopic *tp = t->buckets[b]; tp; tp = tp->next) {
			if (tp->dropping)
				continue;
			for (int32_t i = 0; i < tp->n; i++) {
				kb_pentry *e = tp->parts[i];
				if (e->state != PE_LEADER || !e->p)
					continue;
				if (KAAS_GROW(v, nv, cap, 64))
					goto out;
				e->refs++;
				v[nv++] = e;
			}
		}
out:
	pthread_mutex_unlock(&t->mu);
	*n = nv;
	return v;
}

void kb_ptable_housekeep(kb_ptable *t)
{
	int64_t now = ku_mono_ms();
	size_t nl;
	kb_pentry **lead = ref_leaders(t, &nl);
	for (size_t i = 0; i < nl; i++) {
		int32_t ep;
		if (ks_partition_state_of(lead[i]->p, &ep) == KAAS_PART_POISONED) {
			pthread_mutex_lock(&t->mu);
			if (lead[i]->state == PE_LEADER) {
				lead[i]->state = PE_FAILED;
				lead[i]->err = -EIO;
				lead[i]->retry_at_ms = now;
				KLOG_WARN("ptable", "%s/%d: poisoned by a failed write; taking it over again",
					  lead[i]->topic->name, lead[i]->index);
			}
			pthread_mutex_unlock(&t->mu);
		}
		put_entry(t, lead[i]);
	}
	free(lead);

	/* Re-drive failed and poisoned partitions with a new epoch (Rule 2). */
	if (pthread_mutex_trylock(&t->ctl) == 0) {
		if (!t->stopped) {
			int changed = 0;
			kb_pentry **todo = NULL;
			size_t nt = 0, cap = 0;
			pthread_mutex_lock(&t->mu);
			for (int b = 0; b < NBUCKETS; b++)
				for (ptopic *tp = t->buckets[b]; tp; tp = tp->next)
					for (int32_t i = 0; i < tp->n; i++) {
						kb_pentry *e = tp->parts[i];
						if (e->state == PE_FAILED && e->retry_at_ms <= now) {
							if (KAAS_GROW(todo, nt, cap, 16))
								break;
							todo[nt++] = e;
						}
					}
			pthread_mutex_unlock(&t->mu);
			int32_t *eps = nt ? calloc(nt, sizeof(int32_t)) : NULL;
			for (size_t i = 0; eps && i < nt; i++) {
				eps[i] = next_epoch(t, todo[i]->topic->name, todo[i]->index, todo[i]->epoch);
				changed = 1;
			}
			if (changed && assign_write(t) == 0) {
				for (size_t i = 0; i < nt; i++) {
					KLOG_INFO("ptable", "%s/%d: re-driving take-over at epoch %d",
						  todo[i]->topic->name, todo[i]->index, eps[i]);
					entry_take_over(t, todo[i], eps[i]);
				}
			}
			free(eps);
			free(todo);
		}
		pthread_mutex_unlock(&t->ctl);
	}
	/* Retention and age-based rolls, without holding ctl. */
	if (now - t->last_retention_ms < t->b->cfg.retention_check_interval_ms)
		return;
	t->last_retention_ms = now;
	size_t n;
	kb_pentry **refs = ref_leaders(t, &n);
	int64_t wall = ku_wall_ms();
	for (size_t i = 0; i < n; i++) {
		int r = ks_partition_housekeep(refs[i]->p, wall);
		if (r > 0)
			KLOG_INFO("ptable", "%s/%d: retention deleted %d segment(s)", refs[i]->topic->name,
				  refs[i]->index, r);
		else if (r < 0)
			KLOG_WARN("ptable", "%s/%d: housekeeping: %s", refs[i]->topic->name, refs[i]->index,
				  sub_strerror(r));
		put_entry(t, refs[i]);
	}
	free(refs);
}

/* ---- shutdown ----------------------------------------------------------------------------------------- */

int kb_ptable_shutdown(kb_ptable *t)
{
	pthread_mutex_lock(&t->ctl);
	pthread_mutex_lock(&t->mu);
	t->stopped = 1;
	pthread_mutex_unlock(&t->mu);
	/* Let the flushers finish the queue, then stop them. */
	pthread_mutex_lock(&t->fmu);
	t->fstop = 1;
	pthread_cond_broadcast(&t->fcv);
	pthread_mutex_unlock(&t->fmu);
	for (int i = 0; i < t->nflushers; i++)
		pthread_join(t->flushers[i], NULL);
	t->nflushers = 0;
	/* Wait for references, flush (acks=0/1 data becomes durable), then
	 * relinquish and close everything, many partitions at a time. */
	int rc = 0, n = 0;
	size_t cap = 0, nall = 0;
	kb_pentry **all = NULL;
	pthread_mutex_lock(&t->mu);
	for (int b = 0; b < NBUCKETS; b++)
		for (ptopic *tp = t->buckets[b]; tp; tp = tp->next)
			for (int32_t i = 0; i < tp->n; i++) {
				kb_pentry *e = tp->parts[i];
				while (e->refs > 0)
					pthread_cond_wait(&t->refs_cv, &t->mu);
				fire_watches(e, 1);
				if (!e->p)
					continue;
				if (KAAS_GROW(all, nall, cap, 64)) {
					rc = -ENOMEM;
					continue;
				}
				all[nall++] = e;
				n += e->state == PE_LEADER;
			}
	pthread_mutex_unlock(&t->mu);
	int r = par_run(t, all, NULL, nall);
	if (!rc)
		rc = r;
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < nall; i++) {
		all[i]->state = PE_FAILED;
		fail_waiters(all[i], KERR_NOT_LEADER_OR_FOLLOWER);
	}
	pthread_mutex_unlock(&t->mu);
	free(all);
	KLOG_INFO("ptable", "relinquished %d partition(s)%s", n, rc ? " (with errors)" : "");
	pthread_mutex_unlock(&t->ctl);
	return rc;
}

void kb_ptable_destroy(kb_ptable *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->fmu);
	t->fstop = 1;
	pthread_cond_broadcast(&t->fcv);
	pthread_mutex_unlock(&t->fmu);
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
				dwaiter *d = tp->parts[i]->waiters;
				while (d) {
					dwaiter *dn = d->next;
					free(d);
					d = dn;
				}
			}
			topic_free(tp);
			tp = nx;
		}
	}
	json_decref(t->assign);
	free(t->flushers);
	pthread_mutex_destroy(&t->ctl);
	pthread_mutex_destroy(&t->mu);
	pthread_cond_destroy(&t->refs_cv);
	pthread_mutex_destroy(&t->fmu);
	pthread_cond_destroy(&t->fcv);
	free(t);
}
