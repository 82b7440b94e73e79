/*
 * obs.c — the network server's metrics (obs.h; the list with what to alert
 * on is docs/operations.md).
 *
 * Hot paths keep pointers: the request series are created for every API
 * and version the dispatch table serves when the server starts; the error
 * series per code and the byte series per topic are created the first time
 * they are needed and published in a table read without a lock, so every
 * later update is one lookup in memory and one atomic add.  The collectors
 * (partitions led, consumer lag, connections, the request-byte budget) run
 * at scrape time and read only memory: the partition table's high
 * watermarks and the coordinator's committed offsets.
 */
#include "kaas/net/obs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/coord/coord.h"
#include "kaas/core/ptable.h"
#include "kaas/net/http.h"
#include "kaas/net/server_int.h"
#include "kaas/proto/header.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"
#include "util/metrics.h"

#define OBS_APIS 80
#define OBS_VERS 20
#define OBS_CODES 128
#define OBS_TOPICS 4096 /* topics with byte series; past it, the totals only */

typedef struct tslot {
	char *name; /* published last (release); NULL: free */
	size_t len;
	ku_metric *in, *out;
} tslot;

struct kn_obs {
	kn_server *s;
	ku_metrics *m;
	kn_http *http;
	int ready;
	ku_metric *req[OBS_APIS][OBS_VERS];
	ku_metric *lat[OBS_APIS][OBS_VERS];
	ku_family *f_err, *f_in, *f_out;
	ku_metric *err[2][OBS_CODES]; /* Produce, Fetch */
	pthread_mutex_t mu;           /* creating series of the tables below */
	tslot topics[OBS_TOPICS];
	int ntopics;
	ku_metric *in_other, *out_other;
};

static const double lat_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
				     0.1,    0.25,  0.5,    1,     2.5,  5,     10, 30};

/* ---- hot-path updates ------------------------------------------------------------------- */

void kn_obs_request(kn_obs *o, int16_t api_key, int16_t version, int64_t ns)
{
	if (!o || api_key < 0 || api_key >= OBS_APIS || version < 0 || version >= OBS_VERS)
		return;
	ku_counter_add(o->req[api_key][version], 1);
	ku_histo_observe(o->lat[api_key][version], ns > 0 ? (double)ns / 1e9 : 0);
}

static uint64_t fnv(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	return h;
}

/* Open addressing, never deleted from: a reader that sees a name sees its
 * length and series too (they are written before the name is published). */
static tslot *find(kn_obs *o, const char *s, size_t n, uint64_t h, tslot **free_slot)
{
	for (size_t i = 0; i < OBS_TOPICS; i++) {
		tslot *t = &o->topics[(h + i) % OBS_TOPICS];
		char *name = __atomic_load_n(&t->name, __ATOMIC_ACQUIRE);
		if (!name) {
			*free_slot = t;
			return NULL;
		}
		if (t->len == n && !memcmp(name, s, n))
			return t;
	}
	return NULL;
}

/* The slot of `topic`, created when missing; NULL when the table is full. */
static tslot *topic_slot(kn_obs *o, kw_str topic)
{
	if (topic.len <= 0 || topic.len > 249)
		return NULL;
	size_t n = (size_t)topic.len;
	uint64_t h = fnv(topic.s, n);
	tslot *fr = NULL;
	tslot *t = find(o, topic.s, n, h, &fr);
	if (t)
		return t;
	pthread_mutex_lock(&o->mu);
	fr = NULL;
	t = find(o, topic.s, n, h, &fr);
	if (!t && fr && o->ntopics < OBS_TOPICS * 3 / 4) {
		char *copy = malloc(n + 1);
		if (copy) {
			memcpy(copy, topic.s, n);
			copy[n] = 0;
			const char *const v[] = {copy, NULL};
			fr->in = ku_metrics_series(o->f_in, v);
			fr->out = ku_metrics_series(o->f_out, v);
			fr->len = n;
			o->ntopics++;
			__atomic_store_n(&fr->name, copy, __ATOMIC_RELEASE);
			t = fr;
		}
	}
	pthread_mutex_unlock(&o->mu);
	return t;
}

void kn_obs_partition(kb_req *req, int16_t api_key, kw_str topic, int16_t err, int64_t bytes)
{
	kn_server *s = req && req->broker ? req->broker->server : NULL;
	kn_obs *o = s ? s->obs : NULL;
	if (!o || !o->m)
		return;
	int which = api_key == KAAS_API_PRODUCE ? 0 : 1;
	if (err != 0 && err > 0 && err < OBS_CODES) {
		ku_metric *e = __atomic_load_n(&o->err[which][err], __ATOMIC_ACQUIRE);
		if (!e) {
			const char *name = kw_kerr_name(err);
			const char *const v[] = {which ? "Fetch" : "Produce", name ? name : "UNKNOWN", NULL};
			e = ku_metrics_series(o->f_err, v); /* the same series if two threads race */
			__atomic_store_n(&o->err[which][err], e, __ATOMIC_RELEASE);
		}
		ku_counter_add(e, 1);
	}
	if (bytes <= 0)
		return;
	tslot *t = topic_slot(o, topic);
	if (t)
		ku_counter_add(which ? t->out : t->in, (uint64_t)bytes);
	else
		ku_counter_add(which ? o->out_other : o->in_other, (uint64_t)bytes);
}

/* ---- collectors (scrape time; memory only) ------------------------------------------------------ */

static void collect_connections(void *arg, ku_emit_fn emit, void *ctx)
{
	kn_obs *o = arg;
	emit(ctx, (const char *const[]){NULL}, (double)__atomic_load_n(&o->s->nopen, __ATOMIC_RELAXED));
}

static void collect_budget(void *arg, ku_emit_fn emit, void *ctx)
{
	kn_obs *o = arg;
	kn_budget *b = &o->s->budget;
	emit(ctx, (const char *const[]){"held", NULL}, (double)__atomic_load_n(&b->held, __ATOMIC_RELAXED));
	emit(ctx, (const char *const[]){"limit", NULL}, (double)__atomic_load_n(&b->limit, __ATOMIC_RELAXED));
}

static void collect_waiting(void *arg, ku_emit_fn emit, void *ctx)
{
	kn_obs *o = arg;
	emit(ctx, (const char *const[]){NULL}, (double)__atomic_load_n(&o->s->budget.nqueued, __ATOMIC_RELAXED));
}

typedef struct pcount {
	int64_t led, failed, known;
} pcount;

static void count_part(void *arg, const char *topic, int32_t partition, int led, int failed, int64_t hwm)
{
	(void)topic, (void)partition, (void)hwm;
	pcount *c = arg;
	c->known++;
	c->led += led;
	c->failed += failed;
}

static void collect_partitions(void *arg, ku_emit_fn emit, void *ctx)
{
	kn_obs *o = arg;
	pcount c = {0, 0, 0};
	if (o->s->b->parts)
		kb_ptable_each(o->s->b->parts, count_part, &c);
	emit(ctx, (const char *const[]){"led", NULL}, (double)c.led);
	emit(ctx, (const char *const[]){"failed", NULL}, (double)c.failed);
	emit(ctx, (const char *const[]){"known", NULL}, (double)c.known);
}

/* Consumer lag: the high watermarks of the partitions led here, in a hash
 * keyed by (topic, partition), then one pass over the committed offsets. */
typedef struct hwm_ent {
	const char *topic; /* valid during the scrape: copied */
	int32_t partition;
	int64_t hwm;
} hwm_ent;

typedef struct lagctx {
	hwm_ent *v;
	size_t cap, n;
	char *names; /* the topic names, back to back */
	size_t names_len, names_cap;
	int oom;
	ku_emit_fn emit;
	void *ectx;
} lagctx;

static uint64_t part_hash(const char *t, size_t n, int32_t p) { return fnv(t, n) ^ ((uint64_t)(uint32_t)p * 0x9e3779b97f4a7c15ull); }

static void gather_hwm(void *arg, const char *topic, int32_t partition, int led, int failed, int64_t hwm)
{
	(void)failed;
	lagctx *l = arg;
	if (!led || hwm < 0 || l->oom)
		return;
	if (l->n * 2 >= l->cap) {
		l->oom = 1; /* sized before the walk: a table that grew meanwhile waits for the next scrape */
		return;
	}
	size_t tl = strlen(topic);
	hwm_ent *e = &l->v[part_hash(topic, tl, partition) & (l->cap - 1)];
	while (e->topic)
		e = e == &l->v[l->cap - 1] ? l->v : e + 1;
	e->topic = strdup(topic);
	if (!e->topic) {
		l->oom = 1;
		return;
	}
	e->partition = partition;
	e->hwm = hwm;
	l->n++;
}

static void emit_lag(void *arg, const char *group, size_t glen, const char *topic, size_t tlen, int32_t partition,
		     int64_t offset)
{
	lagctx *l = arg;
	if (offset < 0 || tlen > 255 || glen > 255)
		return;
	hwm_ent *e = &l->v[part_hash(topic, tlen, partition) & (l->cap - 1)];
	for (; e->topic; e = e == &l->v[l->cap - 1] ? l->v : e + 1)
		if (e->partition == partition && strlen(e->topic) == tlen && !memcmp(e->topic, topic, tlen))
			break;
	if (!e->topic)
		return; /* not led here: its leader reports it */
	char g[256], t[256], p[16];
	memcpy(g, group, glen);
	g[glen] = 0;
	memcpy(t, topic, tlen);
	t[tlen] = 0;
	snprintf(p, sizeof(p), "%d", partition);
	int64_t lag = e->hwm - offset;
	l->emit(l->ectx, (const char *const[]){g, t, p, NULL}, (double)(lag > 0 ? lag : 0));
}

static void count_only(void *arg, const char *topic, int32_t partition, int led, int failed, int64_t hwm)
{
	(void)topic, (void)partition, (void)failed, (void)hwm;
	*(size_t *)arg += (size_t)led;
}

static void collect_lag(void *arg, ku_emit_fn emit, void *ctx)
{
	kn_obs *o = arg;
	kb_broker *b = o->s->b;
	if (!b->parts || !b->coord)
		return;
	size_t led = 0;
	kb_ptable_each(b->parts, count_only, &led);
	lagctx l = {0};
	l.cap = 16;
	while (l.cap < 2 * (led + 64))
		l.cap <<= 1;
	l.v = calloc(l.cap, sizeof(*l.v));
	if (!l.v)
		return;
	l.emit = emit;
	l.ectx = ctx;
	kb_ptable_each(b->parts, gather_hwm, &l);
	kg_coord_each_offset(b->coord, emit_lag, &l);
	for (size_t i = 0; i < l.cap; i++)
		free((char *)l.v[i].topic);
	free(l.v);
}

/* The log cleaner (kb_ptable_cleaner_obs): nothing when it does not run. */
static int cleaner_obs(kn_obs *o, kb_cleaner_obs *c)
{
	return o->s->b->parts ? kb_ptable_cleaner_obs(o->s->b->parts, c) : -ENOENT;
}

static void collect_cleaner_passes(void *arg, ku_emit_fn emit, void *ctx)
{
	kb_cleaner_obs c;
	if (cleaner_obs(arg, &c) == 0)
		emit(ctx, (const char *const[]){NULL}, (double)c.st.passes);
}

static void collect_cleaner_errors(void *arg, ku_emit_fn emit, void *ctx)
{
	kb_cleaner_obs c;
	if (cleaner_obs(arg, &c) == 0)
		emit(ctx, (const char *const[]){NULL}, (double)c.errors);
}

static void collect_cleaner_bytes(void *arg, ku_emit_fn emit, void *ctx)
{
	kb_cleaner_obs c;
	if (cleaner_obs(arg, &c))
		return;
	emit(ctx, (const char *const[]){"read", NULL}, (double)c.st.bytes_read);
	emit(ctx, (const char *const[]){"written", NULL}, (double)c.st.bytes_written);
}

static void collect_cleaner_records(void *arg, ku_emit_fn emit, void *ctx)
{
	kb_cleaner_obs c;
	if (cleaner_obs(arg, &c) == 0)
		emit(ctx, (const char *const[]){NULL}, (double)c.st.records_removed);
}

static void collect_cleaner_last(void *arg, ku_emit_fn emit, void *ctx)
{
	kb_cleaner_obs c;
	if (cleaner_obs(arg, &c) == 0)
		emit(ctx, (const char *const[]){NULL}, c.last_pass_s);
}

static void collect_cleaner_dirty(void *arg, ku_emit_fn emit, void *ctx)
{
	kb_cleaner_obs c;
	if (cleaner_obs(arg, &c))
		return;
	for (int i = 0; i < c.ndirty; i++) {
		char p[16];
		snprintf(p, sizeof(p), "%d", c.dirty[i].partition);
		emit(ctx, (const char *const[]){c.dirty[i].topic, p, NULL}, c.dirty[i].ratio);
	}
}

static void collect_cleaner_max_dirty(void *arg, ku_emit_fn emit, void *ctx)
{
	kb_cleaner_obs c;
	if (cleaner_obs(arg, &c) == 0)
		emit(ctx, (const char *const[]){NULL}, c.max_dirty);
}

/* ---- set-up ------------------------------------------------------------------------------------- */

static int ready_fn(void *arg, char *why, size_t whylen)
{
	kn_obs *o = arg;
	kb_broker *b = o->s->b;
	if (__atomic_load_n(&b->stopping, __ATOMIC_ACQUIRE)) {
		snprintf(why, whylen, "shutting down");
		return 0;
	}
	if (!__atomic_load_n(&o->ready, __ATOMIC_ACQUIRE)) {
		snprintf(why, whylen, "starting: the partition table is being built, the Kafka listener is not serving yet");
		return 0;
	}
	if (__atomic_load_n(&b->joining, __ATOMIC_ACQUIRE)) {
		snprintf(why, whylen, "joining the cluster: waiting to lead the partitions and serve the group "
				      "shards it is given");
		return 0;
	}
	snprintf(why, whylen, "volume %s, partition table started, serving on port %d",
		 b->cfg.trust_unqualified ? "admitted by --trust-unqualified" : "qualified", o->s->lst[0].port);
	return 1;
}

static ku_family *family(ku_metrics *m, const char *name, const char *help, enum ku_metric_type type,
			 const char *const *labels, const double *buckets, int nb)
{
	ku_family *f = NULL;
	if (ku_metrics_family(m, name, help, type, labels, buckets, nb, &f))
		KLOG_ERR("metrics", "%s could not be registered", name);
	return f;
}

static void register_all(kn_obs *o)
{
	ku_metrics *m = o->m;
	static const char *const av[] = {"api", "version", NULL};
	ku_family *fr = family(m, "kaas_requests_total", "Kafka requests answered, by API and version", KU_COUNTER, av,
			       NULL, 0);
	ku_family *fl = family(m, "kaas_request_duration_seconds",
			       "time from a request's last byte arriving to its answer being ready to send",
			       KU_HISTOGRAM, av, lat_buckets, (int)(sizeof(lat_buckets) / sizeof(double)));
	for (size_t i = 0; i < kn_dispatch_table_len; i++) {
		const kw_api *a = &kn_dispatch_table[i];
		if (!a->handler || a->key < 0 || a->key >= OBS_APIS)
			continue;
		for (int v = a->min; v <= a->max && v < OBS_VERS; v++) {
			char vs[16];
			snprintf(vs, sizeof(vs), "%d", v);
			const char *const lv[] = {a->name, vs, NULL};
			o->req[a->key][v] = fr ? ku_metrics_series(fr, lv) : NULL;
			o->lat[a->key][v] = fl ? ku_metrics_series(fl, lv) : NULL;
		}
	}
	static const char *const ae[] = {"api", "error", NULL};
	o->f_err = family(m, "kaas_partition_errors_total",
			  "Produce and Fetch partitions answered with an error, by API and Kafka error name "
			  "(KAFKA_STORAGE_ERROR: the volume failed)",
			  KU_COUNTER, ae, NULL, 0);
	static const char *const at[] = {"topic", NULL};
	o->f_in = family(m, "kaas_topic_bytes_in_total", "record bytes appended by Produce, by topic", KU_COUNTER, at,
			 NULL, 0);
	o->f_out = family(m, "kaas_topic_bytes_out_total", "record bytes sent by Fetch, by topic", KU_COUNTER, at,
			  NULL, 0);
	const char *const other[] = {"(other)", NULL}; /* topics past the table's size: not a legal topic name */
	o->in_other = o->f_in ? ku_metrics_series(o->f_in, other) : NULL;
	o->out_other = o->f_out ? ku_metrics_series(o->f_out, other) : NULL;
	static const char *const none[] = {NULL};
	static const char *const st[] = {"state", NULL};
	static const char *const lag[] = {"group", "topic", "partition", NULL};
	ku_metrics_collector(m, "kaas_connections", "client connections open", KU_GAUGE, none, collect_connections, o);
	ku_metrics_collector(m, "kaas_request_budget_bytes",
			     "queued.max.request.bytes: bytes of requests received and not answered (held), and the limit "
			     "(-1 unbounded)",
			     KU_GAUGE, st, collect_budget, o);
	ku_metrics_collector(m, "kaas_request_budget_waiting", "connections waiting for queued.max.request.bytes",
			     KU_GAUGE, none, collect_waiting, o);
	ku_metrics_collector(m, "kaas_partitions",
			     "partitions this broker knows, leads, and failed to take over (it retries them)", KU_GAUGE, st,
			     collect_partitions, o);
	static const char *const dir[] = {"direction", NULL};
	static const char *const tp[] = {"topic", "partition", NULL};
	ku_metrics_collector(m, "kaas_cleaner_passes_total", "log cleaner passes swapped in (compacted topics)",
			     KU_COUNTER, none, collect_cleaner_passes, o);
	ku_metrics_collector(m, "kaas_cleaner_errors_total",
			     "log cleaner passes that failed on I/O or memory (retried next round)", KU_COUNTER, none,
			     collect_cleaner_errors, o);
	ku_metrics_collector(m, "kaas_cleaner_bytes_total", "bytes the log cleaner read and wrote", KU_COUNTER, dir,
			     collect_cleaner_bytes, o);
	ku_metrics_collector(m, "kaas_cleaner_records_removed_total",
			     "records the log cleaner removed: superseded, tombstones past delete.retention.ms",
			     KU_COUNTER, none, collect_cleaner_records, o);
	ku_metrics_collector(m, "kaas_cleaner_last_pass_seconds", "duration of the last log cleaner pass that swapped",
			     KU_GAUGE, none, collect_cleaner_last, o);
	ku_metrics_collector(m, "kaas_cleaner_dirty_ratio",
			     "share of a compacted partition's cleanable bytes not yet de-duplicated, for the ten "
			     "dirtiest partitions led here (as of the cleaner's last round)",
			     KU_GAUGE, tp, collect_cleaner_dirty, o);
	ku_metrics_collector(m, "kaas_cleaner_max_dirty_ratio",
			     "the highest dirty ratio of the compacted partitions led here (last round)", KU_GAUGE, none,
			     collect_cleaner_max_dirty, o);
	ku_metrics_collector(m, "kaas_consumer_group_lag",
			     "high watermark minus the committed offset, per group and partition led by this broker",
			     KU_GAUGE, lag, collect_lag, o);
}

int kn_obs_create(kn_server *s, kn_obs **out, char *err, size_t errlen)
{
	kn_obs *o = calloc(1, sizeof(*o));
	if (!o) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	o->s = s;
	o->m = s->b->metrics;
	pthread_mutex_init(&o->mu, NULL);
	if (o->m)
		register_all(o);
	const kb_config *cfg = &s->b->cfg;
	if (cfg->metrics_port >= 0) {
		int rc = kn_http_start(cfg->metrics_host, cfg->metrics_port, o->m, ready_fn, o, &o->http, err, errlen);
		if (rc) {
			kn_obs_destroy(o);
			return rc;
		}
		KLOG_INFO("metrics", "serving http://%s:%d/metrics, /healthz and /readyz", cfg->metrics_host,
			  kn_http_port(o->http));
	}
	*out = o;
	return 0;
}

void kn_obs_ready(kn_obs *o)
{
	if (o)
		__atomic_store_n(&o->ready, 1, __ATOMIC_RELEASE);
}

int kn_obs_http_port(const kn_obs *o) { return o && o->http ? kn_http_port(o->http) : -1; }

void kn_obs_destroy(kn_obs *o)
{
	if (!o)
		return;
	kn_http_stop(o->http);
	for (int i = 0; i < OBS_TOPICS; i++)
		free(o->topics[i].name);
	pthread_mutex_destroy(&o->mu);
	free(o);
}
