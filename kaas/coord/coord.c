/*
 * coord.c — the coordinator's life cycle: the group table, loading a group's
 * file the first time a request names it, the timer thread (session expiry,
 * rebalance deadlines) and the flusher thread (group files), and the entry
 * point that routes a request to its API.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kaas/coord/coord_int.h"
#include "util/clock.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* ---- small helpers shared by every file ------------------------------------------ */

int kc_str_set(kc_str *d, const char *s, int32_t len)
{
	kc_str_free(d);
	if (len < 0 || (!s && len > 0))
		return 0;
	d->s = malloc((size_t)len + 1);
	if (!d->s)
		return -ENOMEM;
	if (len)
		memcpy(d->s, s, (size_t)len);
	d->s[len] = '\0';
	d->len = len;
	return 0;
}

void kc_str_free(kc_str *d)
{
	free(d->s);
	d->s = NULL;
	d->len = -1;
}

int kc_str_eqk(const kc_str *a, kaas_str b)
{
	if (a->len < 0 || b.len < 0)
		return a->len < 0 && b.len < 0;
	return a->len == b.len && (a->len == 0 || memcmp(a->s, b.s, (size_t)a->len) == 0);
}

int kc_str_eq(const kc_str *a, const kc_str *b) { return kc_str_eqk(a, kc_k(b)); }

void kc_outbox_init(kc_outbox *o)
{
	o->head = NULL;
	o->tail = &o->head;
}

void kc_outbox_add(kc_outbox *o, kc_waiter *w, kaas_wr *resp)
{
	if (w->inline_resp) {
		kaas_wr_free(w->inline_resp);
		*w->inline_resp = *resp;
		memset(resp, 0, sizeof(*resp));
		*w->inline_done = 1;
		memset(w, 0, sizeof(*w));
		return;
	}
	if (!w->done) {
		kaas_wr_free(resp);
		return;
	}
	kc_out *e = calloc(1, sizeof(*e));
	if (!e) {
		/* No memory for the queue entry: answer now rather than never. */
		w->done(w->ctx, resp);
		kaas_wr_free(resp);
		memset(w, 0, sizeof(*w));
		return;
	}
	e->w = *w;
	e->resp = *resp;
	memset(resp, 0, sizeof(*resp));
	memset(w, 0, sizeof(*w));
	*o->tail = e;
	o->tail = &e->next;
}

void kc_outbox_deliver(kc_outbox *o)
{
	kc_out *e = o->head;
	while (e) {
		kc_out *next = e->next;
		e->w.done(e->w.ctx, &e->resp);
		kaas_wr_free(&e->resp);
		free(e);
		e = next;
	}
	kc_outbox_init(o);
}

const char *kc_state_name(int st)
{
	switch (st) {
	case KC_EMPTY:
		return "Empty";
	case KC_PREPARING:
		return "PreparingRebalance";
	case KC_COMPLETING:
		return "CompletingRebalance";
	case KC_STABLE:
		return "Stable";
	default:
		return "Dead";
	}
}

int kc_group_id_ok(kaas_str id, int allow_empty)
{
	if (id.len < 0)
		return 0;
	return allow_empty || id.len > 0;
}

/* ---- clocks ------------------------------------------------------------------------ */

int64_t kc_now(kaas_coord *c)
{
	if (c->cfg.now_ms)
		return c->cfg.now_ms(c->cfg.now_arg);
	return kaas_mono_ms();
}

int64_t kc_wall(kaas_coord *c)
{
	if (c->cfg.wall_ms)
		return c->cfg.wall_ms(c->cfg.now_arg);
	return kaas_wall_ms();
}

void kc_wake_timer(kaas_coord *c)
{
	c->timer_kicked = 1;
	pthread_cond_signal(&c->timer_cv);
}

/* ---- the group table ------------------------------------------------------------------ */

static uint64_t hash_id(const char *s, int32_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (int32_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
	return h;
}

kc_group *kc_group_find(kaas_coord *c, kaas_str id)
{
	if (id.len < 0)
		return NULL;
	kc_group *g = c->tab[hash_id(id.s, id.len) & (c->tabsize - 1)];
	for (; g; g = g->hnext)
		if (kc_str_eqk(&g->id, id))
			return g;
	return NULL;
}

static void table_grow(kaas_coord *c)
{
	size_t nsize = c->tabsize * 2;
	kc_group **nt = calloc(nsize, sizeof(*nt));
	if (!nt)
		return; /* chains just get longer */
	for (size_t i = 0; i < c->tabsize; i++) {
		kc_group *g = c->tab[i];
		while (g) {
			kc_group *next = g->hnext;
			size_t b = hash_id(g->id.s, g->id.len) & (nsize - 1);
			g->hnext = nt[b];
			nt[b] = g;
			g = next;
		}
	}
	free(c->tab);
	c->tab = nt;
	c->tabsize = nsize;
}

kc_group *kc_group_new(kaas_coord *c, kaas_str id)
{
	kc_group *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->id.len = g->protocol_type.len = g->protocol.len = g->leader.len = -1;
	if (kc_str_setk(&g->id, id)) {
		free(g);
		return NULL;
	}
	g->state = KC_EMPTY;
	g->empty_since = kc_wall(c); /* also right after a restart: retention restarts */
	g->pc_tail = &g->pc_head;
	g->next_seq = 1;
	if (c->ngroups >= c->tabsize)
		table_grow(c);
	size_t b = hash_id(id.s, id.len) & (c->tabsize - 1);
	g->hnext = c->tab[b];
	c->tab[b] = g;
	c->ngroups++;
	return g;
}

void kc_group_unlink_free(kaas_coord *c, kc_group *g)
{
	kc_group **pp = &c->tab[hash_id(g->id.s, g->id.len) & (c->tabsize - 1)];
	while (*pp && *pp != g)
		pp = &(*pp)->hnext;
	if (*pp) {
		*pp = g->hnext;
		c->ngroups--;
	}
	while (g->members) {
		kc_member *m = g->members;
		g->members = m->next;
		kc_member_free(m);
	}
	while (g->pending) {
		kc_pending *p = g->pending;
		g->pending = p->next;
		kc_str_free(&p->id);
		free(p);
	}
	while (g->pc_head) {
		kc_pcommit *pc = g->pc_head;
		g->pc_head = pc->next;
		kc_pcommit_free(pc);
	}
	kc_offsets_clear(g);
	kc_str_free(&g->id);
	kc_str_free(&g->protocol_type);
	kc_str_free(&g->protocol);
	kc_str_free(&g->leader);
	free(g);
}

int kc_group_is_idle(const kc_group *g)
{
	return g->nmembers == 0 && g->npending == 0 && g->noffs == 0 && !g->pc_head &&
	       !g->file_exists;
}

void kc_group_maybe_drop(kaas_coord *c, kc_group *g)
{
	if (g && kc_group_is_idle(g) && !g->refs && !g->loading && !g->writing && !g->queued &&
	    !g->deleting)
		kc_group_unlink_free(c, g);
}

int16_t kc_group_get(kaas_coord *c, kaas_str id, int create, kc_group **out)
{
	*out = NULL;
	for (;;) {
		kc_group *g = kc_group_find(c, id);
		if (g && g->loaded) {
			if (!create && kc_group_is_idle(g) && g->state == KC_EMPTY)
				return KERR_NONE; /* exists only in memory, as nothing */
			*out = g;
			return KERR_NONE;
		}
		if (g && (g->loading || g->writing)) {
			pthread_cond_wait(&c->state_cv, &c->mu);
			continue;
		}
		if (!g && !(g = kc_group_new(c, id)))
			return KERR_COORDINATOR_NOT_AVAILABLE;
		g->loading = 1;
		g->refs++;
		pthread_mutex_unlock(&c->mu);
		kc_loaded l = KC_LOADED_INIT;
		int rc = kc_group_file_read(c, id, &l);
		pthread_mutex_lock(&c->mu);
		g->loading = 0;
		g->refs--;
		pthread_cond_broadcast(&c->state_cv);
		int16_t err = KERR_NONE;
		if (rc == 0 && l.coordinator_epoch > c->cfg.coordinator_epoch) {
			KLOG_ERR("coord", "group file for '%s' was written at coordinator epoch %lld, "
					  "newer than ours (%lld): not serving it",
				 g->id.s, (long long)l.coordinator_epoch,
				 (long long)c->cfg.coordinator_epoch);
			err = KERR_NOT_COORDINATOR;
		} else if (rc == 0) {
			/* Nothing touches offsets before the group is loaded, so the
			 * loaded table simply becomes the group's. */
			kc_offsets_clear(g);
			g->offs = l.offs;
			g->noffs = g->capoffs = l.noffs;
			l.offs = NULL;
			l.noffs = 0;
			if (l.generation > g->generation)
				g->generation = l.generation;
			if (g->protocol_type.len < 0 && l.protocol_type.len >= 0) {
				g->protocol_type = l.protocol_type;
				l.protocol_type.s = NULL;
				l.protocol_type.len = -1;
			}
			g->file_epoch = l.coordinator_epoch;
			g->file_exists = 1;
			g->loaded = 1;
			/* The membership is taken from the file only the first time:
			 * after that memory is ahead of the volume (a failed write
			 * makes the group read its offsets again, not its members). */
			if (!g->members_loaded)
				kc_group_restore(c, g, &l, kc_now(c));
		} else if (rc == -ENOENT) {
			g->loaded = 1;
			g->members_loaded = 1;
		} else if (rc == -ENOTUNIQ) {
			KLOG_ERR("coord", "group '%s': its file name is taken by another group id "
					  "(hash collision of two long ids); refusing it", g->id.s);
			err = KERR_INVALID_GROUP_ID;
		} else {
			KLOG_WARN("coord", "group '%s': cannot read its file: %s", g->id.s,
				  sub_strerror(rc));
			err = KERR_COORDINATOR_LOAD_IN_PROGRESS;
		}
		kc_loaded_free(&l);
		if (err) {
			kc_group_maybe_drop(c, g);
			return err;
		}
		if (!create && kc_group_is_idle(g)) {
			kc_group_maybe_drop(c, g);
			return KERR_NONE;
		}
		*out = g;
		return KERR_NONE;
	}
}

void kc_flush_enqueue(kaas_coord *c, kc_group *g)
{
	if (g->queued)
		return;
	g->queued = 1;
	g->fnext = NULL;
	*c->fq_tail = g;
	c->fq_tail = &g->fnext;
	pthread_cond_signal(&c->flush_cv);
}

static kc_group *flush_pop(kaas_coord *c)
{
	kc_group *g = c->fq_head;
	if (!g)
		return NULL;
	c->fq_head = g->fnext;
	if (!c->fq_head)
		c->fq_tail = &c->fq_head;
	g->queued = 0;
	g->fnext = NULL;
	return g;
}

/* ---- the two threads ------------------------------------------------------------------- */

/* One pass over every group at `now` (c->mu held); returns the next deadline. */
static int64_t tick_locked(kaas_coord *c, int64_t now, kc_outbox *ob)
{
	int64_t next = now + 60000;
	for (size_t i = 0; i < c->tabsize; i++) {
		kc_group *g = c->tab[i];
		while (g) {
			kc_group *hn = g->hnext;
			kc_group_tick(c, g, now, &next, ob);
			kc_group_maybe_drop(c, g);
			g = hn;
		}
	}
	return next;
}

static void drain_locked(kaas_coord *c, kc_outbox *ob)
{
	c->draining = 1;
	for (size_t i = 0; i < c->tabsize; i++)
		for (kc_group *g = c->tab[i]; g; g = g->hnext)
			kc_group_shutdown(c, g, ob);
}

void kaas_coord_load_groups(kaas_coord *c)
{
	kc_str *ids = NULL;
	size_t n = 0;
	int rc = kc_ids_on_volume(c, &ids, &n);
	if (rc) {
		KLOG_WARN("coord", "cannot list groups/: %s; groups are loaded when clients name them",
			  sub_strerror(rc));
		return;
	}
	size_t loaded = 0;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < n && !c->stop; i++) {
		int32_t node, port;
		const char *host;
		kc_group *g;
		if (c->drain_requested ||
		    (c->cfg.stopping && __atomic_load_n(c->cfg.stopping, __ATOMIC_ACQUIRE)))
			break; /* stopping: the rest is loaded by whoever runs next */
		if (kaas_coord_owner(c, 0, kc_k(&ids[i]), &node, &host, &port) ||
		    node != c->cfg.broker_id || kc_group_find(c, kc_k(&ids[i])))
			continue;
		if (kc_group_get(c, kc_k(&ids[i]), 0, &g) == KERR_NONE && g)
			loaded += g->nmembers > 0;
	}
	pthread_mutex_unlock(&c->mu);
	if (loaded)
		KLOG_INFO("coord", "%zu group(s) with members restored from the volume", loaded);
	for (size_t i = 0; i < n; i++)
		kc_str_free(&ids[i]);
	free(ids);
}

/* The broker's stop flag is polled this often while it is not set. */
#define KC_STOP_POLL_MS 200

static void *timer_main(void *arg)
{
	kaas_coord *c = arg;
	/* Members of groups that were coordinated here before a restart get
	 * their session from now; those that do not come back expire. */
	kaas_coord_load_groups(c);
	pthread_mutex_lock(&c->mu);
	int64_t next = 0;
	int64_t next_expiry = kc_now(c) + c->cfg.offsets_retention_check_ms;
	while (!c->stop) {
		if (c->cfg.offsets_retention_ms > 0 && kc_now(c) >= next_expiry) {
			pthread_mutex_unlock(&c->mu);
			kaas_coord_expire_offsets(c);
			pthread_mutex_lock(&c->mu);
			next_expiry = kc_now(c) + c->cfg.offsets_retention_check_ms;
			continue;
		}
		kc_outbox ob;
		kc_outbox_init(&ob);
		int stopping = c->cfg.stopping && __atomic_load_n(c->cfg.stopping, __ATOMIC_ACQUIRE);
		if (!c->draining && (c->drain_requested || stopping))
			drain_locked(c, &ob);
		int64_t now = kc_now(c);
		if (c->timer_kicked || now >= next) {
			c->timer_kicked = 0;
			next = tick_locked(c, now, &ob);
		}
		if (ob.head) {
			pthread_mutex_unlock(&c->mu);
			kc_outbox_deliver(&ob);
			pthread_mutex_lock(&c->mu);
			c->timer_kicked = 1; /* state may have moved on meanwhile */
			continue;
		}
		if (c->stop)
			break;
		int64_t until = next;
		if (c->cfg.offsets_retention_ms > 0 && until > next_expiry)
			until = next_expiry;
		if (c->cfg.stopping && !c->draining && until > now + KC_STOP_POLL_MS)
			until = now + KC_STOP_POLL_MS;
		int64_t wait = until - now;
		if (wait <= 0 || c->timer_kicked)
			continue;
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += wait / 1000;
		ts.tv_nsec += (wait % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&c->timer_cv, &c->mu, &ts);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

void kaas_coord_drain(kaas_coord *c)
{
	if (!c)
		return;
	/* Only a flag and a wake-up here: the timer thread answers the parked
	 * requests (this may run on the event loop). */
	pthread_mutex_lock(&c->mu);
	c->drain_requested = 1;
	kc_wake_timer(c);
	pthread_mutex_unlock(&c->mu);
	if (!c->threads) {
		kc_outbox ob;
		kc_outbox_init(&ob);
		pthread_mutex_lock(&c->mu);
		drain_locked(c, &ob);
		pthread_mutex_unlock(&c->mu);
		kc_outbox_deliver(&ob);
	}
}

static void flush_one(kaas_coord *c, kc_group *g)
{
	kc_outbox ob;
	kc_outbox_init(&ob);
	kc_group_write(c, g, &ob);
	kc_group_maybe_drop(c, g);
	if (ob.head) {
		pthread_mutex_unlock(&c->mu);
		kc_outbox_deliver(&ob);
		pthread_mutex_lock(&c->mu);
	}
}

/* Writes are serialised through one thread: however many consumers commit,
 * at most one group file is being fsynced at a time, and commits that
 * arrive meanwhile ride along in their group's next write. */
static void *flush_main(void *arg)
{
	kaas_coord *c = arg;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		kc_group *g = flush_pop(c);
		if (!g) {
			if (c->stop)
				break;
			pthread_cond_wait(&c->flush_cv, &c->mu);
			continue;
		}
		flush_one(c, g);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

void kaas_coord_tick(kaas_coord *c)
{
	kc_outbox ob;
	kc_outbox_init(&ob);
	pthread_mutex_lock(&c->mu);
	tick_locked(c, kc_now(c), &ob);
	pthread_mutex_unlock(&c->mu);
	kc_outbox_deliver(&ob);
}

void kaas_coord_flush(kaas_coord *c)
{
	pthread_mutex_lock(&c->mu);
	kc_group *g;
	while ((g = flush_pop(c)))
		flush_one(c, g);
	pthread_mutex_unlock(&c->mu);
}

/* ---- life cycle ---------------------------------------------------------------------------- */

void kaas_coord_config_defaults(kaas_coord_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->broker_id = 1;
	cfg->host = "localhost";
	cfg->port = 9092;
	cfg->initial_rebalance_delay_ms = 3000;
	cfg->min_session_timeout_ms = 6000;
	cfg->max_session_timeout_ms = 1800000;
	cfg->max_group_size = INT32_MAX;
	cfg->offsets_retention_ms = 7LL * 24 * 3600 * 1000;
	cfg->offsets_retention_check_ms = 600000;
	cfg->offset_metadata_max_bytes = 4096;
	cfg->new_member_join_timeout_ms = 300000;
	cfg->coordinator_epoch = 0;
}

/* What kaas_coord_create set up, once the threads are gone and the groups
 * freed (a failed create, or the end of close). */
static void coord_free(kaas_coord *c)
{
	kc_pids_destroy(&c->pids);
	pthread_cond_destroy(&c->timer_cv);
	pthread_cond_destroy(&c->flush_cv);
	pthread_cond_destroy(&c->state_cv);
	pthread_mutex_destroy(&c->mu);
	free(c->tab);
	free(c->host);
	free(c);
}

int kaas_coord_create(sub_vfs *cluster, const kaas_coord_config *cfg, kaas_coord **out)
{
	*out = NULL;
	kaas_coord *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	c->vfs = cluster;
	c->host = strdup(cfg->host ? cfg->host : "");
	c->tabsize = 64;
	c->tab = calloc(c->tabsize, sizeof(*c->tab));
	c->fq_tail = &c->fq_head;
	if (!c->host || !c->tab) {
		free(c->host);
		free(c->tab);
		free(c);
		return -ENOMEM;
	}
	c->cfg.host = c->host;
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->timer_cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&c->flush_cv, NULL);
	pthread_cond_init(&c->state_cv, NULL);
	kc_pids_init(&c->pids);
	int rc = sub_mkdirs(cluster, "groups", 0755);
	if (!rc)
		rc = sub_mkdirs(cluster, "pid-blocks", 0755);
	if (rc) {
		KLOG_ERR("coord", "cannot create groups/ and pid-blocks/ on the cluster volume: %s",
			 sub_strerror(rc));
		goto fail;
	}
	if (!cfg->manual) {
		if ((rc = -pthread_create(&c->timer_thr, NULL, timer_main, c)))
			goto fail;
		if ((rc = -pthread_create(&c->flush_thr, NULL, flush_main, c))) {
			pthread_mutex_lock(&c->mu);
			c->stop = 1;
			pthread_cond_broadcast(&c->timer_cv);
			pthread_mutex_unlock(&c->mu);
			pthread_join(c->timer_thr, NULL);
			goto fail;
		}
		c->threads = 1;
	}
	*out = c;
	return 0;
fail:
	coord_free(c);
	return rc;
}

void kaas_coord_set_topic_check(kaas_coord *c, kaas_coord_topic_fn fn, void *arg)
{
	pthread_mutex_lock(&c->mu);
	c->topic_fn = fn;
	c->topic_arg = arg;
	pthread_mutex_unlock(&c->mu);
}

void kaas_coord_close(kaas_coord *c)
{
	if (!c)
		return;
	kc_outbox ob;
	kc_outbox_init(&ob);
	pthread_mutex_lock(&c->mu);
	c->stop = 1;
	pthread_cond_broadcast(&c->flush_cv);
	pthread_cond_broadcast(&c->timer_cv);
	pthread_mutex_unlock(&c->mu);
	if (c->threads) {
		/* The flusher drains its queue before it exits, so every commit
		 * that was accepted is written (or answered with an error). */
		pthread_join(c->flush_thr, NULL);
		pthread_join(c->timer_thr, NULL);
	}
	/* Whatever was queued after the flusher left (a retention pass of the
	 * timer, a late handler) is written here. */
	kaas_coord_flush(c);
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->tabsize; i++)
		for (kc_group *g = c->tab[i]; g; g = g->hnext)
			kc_group_shutdown(c, g, &ob);
	pthread_mutex_unlock(&c->mu);
	kc_outbox_deliver(&ob);
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->tabsize; i++)
		while (c->tab[i])
			kc_group_unlink_free(c, c->tab[i]);
	pthread_mutex_unlock(&c->mu);
	coord_free(c);
}

void kaas_coord_get_stats(kaas_coord *c, kaas_coord_stats *st)
{
	pthread_mutex_lock(&c->mu);
	*st = c->stats;
	pthread_mutex_unlock(&c->mu);
}

int16_t kaas_coord_owner(kaas_coord *c, int8_t key_type, kaas_str key, int32_t *node,
			 const char **host, int32_t *port)
{
	(void)key;
	if (key_type != 0 && key_type != 1)
		return KERR_INVALID_REQUEST;
	/* One broker coordinates everything.  The cluster work replaces this
	 * with "hash(key) -> shard -> the shard's broker in assignment.json". */
	*node = c->cfg.broker_id;
	*host = c->host;
	*port = c->cfg.port;
	return KERR_NONE;
}

int kaas_coord_handle(kaas_coord *c, const kaas_coord_call *call, kaas_rd *body, kaas_wr *resp)
{
	switch (call->api_key) {
	case KAAS_API_FIND_COORDINATOR:
		return kc_api_find_coordinator(c, call, body, resp);
	case KAAS_API_JOIN_GROUP:
		return kc_api_join_group(c, call, body, resp);
	case KAAS_API_SYNC_GROUP:
		return kc_api_sync_group(c, call, body, resp);
	case KAAS_API_HEARTBEAT:
		return kc_api_heartbeat(c, call, body, resp);
	case KAAS_API_LEAVE_GROUP:
		return kc_api_leave_group(c, call, body, resp);
	case KAAS_API_DESCRIBE_GROUPS:
		return kc_api_describe_groups(c, call, body, resp);
	case KAAS_API_LIST_GROUPS:
		return kc_api_list_groups(c, call, body, resp);
	case KAAS_API_DELETE_GROUPS:
		return kc_api_delete_groups(c, call, body, resp);
	case KAAS_API_OFFSET_COMMIT:
		return kc_api_offset_commit(c, call, body, resp);
	case KAAS_API_OFFSET_FETCH:
		return kc_api_offset_fetch(c, call, body, resp);
	case KAAS_API_OFFSET_DELETE:
		return kc_api_offset_delete(c, call, body, resp);
	case KAAS_API_INIT_PRODUCER_ID:
		return kc_api_init_producer_id(c, call, body, resp);
	default:
		return -ENOTSUP;
	}
}
