/*
 * coord.c — the coordinator's life cycle: the group table, loading a group's
 * file the first time a request names it, the timer thread (session expiry,
 * rebalance deadlines) and the flusher thread (group files), and the entry
 * point that routes a request to its API.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kaas/coord/coord_int.h"
#include "util/clock.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* ---- small helpers shared by every file ------------------------------------------ */

int kg__str_set(kg_str *d, const char *s, int32_t len)
{
	kg__str_free(d);
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

void kg__str_free(kg_str *d)
{
	free(d->s);
	d->s = NULL;
	d->len = -1;
}

int kg__str_eqk(const kg_str *a, kw_str b)
{
	if (a->len < 0 || b.len < 0)
		return a->len < 0 && b.len < 0;
	return a->len == b.len && (a->len == 0 || memcmp(a->s, b.s, (size_t)a->len) == 0);
}

int kg__str_eq(const kg_str *a, const kg_str *b) { return kg__str_eqk(a, kg_k(b)); }

void kg__outbox_init(kg_outbox *o)
{
	o->head = NULL;
	o->tail = &o->head;
}

void kg__outbox_add(kg_outbox *o, kg_waiter *w, kw_wr *resp)
{
	if (w->inline_resp) {
		kw_wr_free(w->inline_resp);
		*w->inline_resp = *resp;
		memset(resp, 0, sizeof(*resp));
		*w->inline_done = 1;
		memset(w, 0, sizeof(*w));
		return;
	}
	if (!w->done) {
		kw_wr_free(resp);
		return;
	}
	kg_out *e = calloc(1, sizeof(*e));
	if (!e) {
		/* No memory for the queue entry: answer now rather than never. */
		w->done(w->ctx, resp);
		kw_wr_free(resp);
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

void kg__outbox_deliver(kg_outbox *o)
{
	kg_out *e = o->head;
	while (e) {
		kg_out *next = e->next;
		e->w.done(e->w.ctx, &e->resp);
		kw_wr_free(&e->resp);
		free(e);
		e = next;
	}
	kg__outbox_init(o);
}

const char *kg__state_name(int st)
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

int kg__group_id_ok(kw_str id, int allow_empty)
{
	if (id.len < 0)
		return 0;
	return allow_empty || id.len > 0;
}

/* ---- clocks ------------------------------------------------------------------------ */

int64_t kg__now(kg_coord *c)
{
	if (c->cfg.now_ms)
		return c->cfg.now_ms(c->cfg.now_arg);
	return ku_mono_ms();
}

int64_t kg__wall(kg_coord *c)
{
	if (c->cfg.wall_ms)
		return c->cfg.wall_ms(c->cfg.now_arg);
	return ku_wall_ms();
}

void kg__wake_timer(kg_coord *c)
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

kg_group *kg__group_find(kg_coord *c, kw_str id)
{
	if (id.len < 0)
		return NULL;
	kg_group *g = c->tab[hash_id(id.s, id.len) & (c->tabsize - 1)];
	for (; g; g = g->hnext)
		if (kg__str_eqk(&g->id, id))
			return g;
	return NULL;
}

static void table_grow(kg_coord *c)
{
	size_t nsize = c->tabsize * 2;
	kg_group **nt = calloc(nsize, sizeof(*nt));
	if (!nt)
		return; /* chains just get longer */
	for (size_t i = 0; i < c->tabsize; i++) {
		kg_group *g = c->tab[i];
		while (g) {
			kg_group *next = g->hnext;
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

kg_group *kg__group_new(kg_coord *c, kw_str id)
{
	kg_group *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->id.len = g->protocol_type.len = g->protocol.len = g->leader.len = -1;
	if (kg_str_setk(&g->id, id)) {
		free(g);
		return NULL;
	}
	g->state = KC_EMPTY;
	g->empty_since = kg__wall(c); /* also right after a restart: retention restarts */
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

void kg__group_unlink_free(kg_coord *c, kg_group *g)
{
	kg_group **pp = &c->tab[hash_id(g->id.s, g->id.len) & (c->tabsize - 1)];
	while (*pp && *pp != g)
		pp = &(*pp)->hnext;
	if (*pp) {
		*pp = g->hnext;
		c->ngroups--;
	}
	while (g->members) {
		kg_member *m = g->members;
		g->members = m->next;
		kg__member_free(m);
	}
	while (g->pending) {
		kg_pending *p = g->pending;
		g->pending = p->next;
		kg__str_free(&p->id);
		free(p);
	}
	while (g->pc_head) {
		kg_pcommit *pc = g->pc_head;
		g->pc_head = pc->next;
		kg__pcommit_free(pc);
	}
	kg__offsets_clear(g);
	kg__str_free(&g->id);
	kg__str_free(&g->protocol_type);
	kg__str_free(&g->protocol);
	kg__str_free(&g->leader);
	free(g);
}

int kg__group_is_idle(const kg_group *g)
{
	return g->nmembers == 0 && g->npending == 0 && g->noffs == 0 && !g->pc_head &&
	       !g->file_exists;
}

void kg__group_maybe_drop(kg_coord *c, kg_group *g)
{
	if (g && kg__group_is_idle(g) && !g->refs && !g->loading && !g->writing && !g->queued &&
	    !g->deleting)
		kg__group_unlink_free(c, g);
}

int16_t kg__group_get_as(kg_coord *c, kw_str id, int create, int loader, kg_group **out)
{
	*out = NULL;
	for (;;) {
		int64_t epoch = 0;
		int16_t err = kg__serve_epoch(c, id, loader, &epoch);
		if (err)
			return err;
		kg_group *g = kg__group_find(c, id);
		if (g && (g->loading || g->writing)) {
			pthread_cond_wait(&c->state_cv, &c->mu);
			continue;
		}
		if (g && (g->loaded || g->members) && g->epoch != epoch) {
			/* Held from an earlier time this broker had the shard: what
			 * it remembers may be older than the volume. */
			kg__group_disown(c, g, &c->late);
			kg__wake_timer(c);
			continue;
		}
		if (g && g->loaded) {
			if (!create && kg__group_is_idle(g) && g->state == KC_EMPTY)
				return KERR_NONE; /* exists only in memory, as nothing */
			*out = g;
			return KERR_NONE;
		}
		if (!g && !(g = kg__group_new(c, id)))
			return KERR_COORDINATOR_NOT_AVAILABLE;
		g->loading = 1;
		g->refs++;
		pthread_mutex_unlock(&c->mu);
		kg_loaded l = KC_LOADED_INIT;
		int64_t fe = 0;
		int rc = kg__group_file_read(c, id, &l, &fe);
		pthread_mutex_lock(&c->mu);
		int64_t still = -1;
		int need_claim = 0;
		err = kg__serve_epoch(c, id, loader, &still);
		if (!err && still != epoch)
			err = KERR_COORDINATOR_LOAD_IN_PROGRESS; /* the shard moved meanwhile */
		if (err) {
		} else if (rc == 0 && fe > epoch) {
			KLOG_ERR("coord", "group file for '%s' was written at coordinator epoch %lld, "
					  "newer than ours (%lld): not serving it",
				 g->id.s, (long long)fe, (long long)epoch);
			err = KERR_NOT_COORDINATOR;
		} else if (rc == 0) {
			/* Nothing touches offsets before the group is loaded, so the
			 * loaded table simply becomes the group's. */
			kg__offsets_clear(g);
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
			g->file_epoch = fe;
			g->file_exists = 1;
			g->epoch = epoch;
			/* The membership is taken from the file only the first time:
			 * after that memory is ahead of the volume (a failed write
			 * makes the group read its offsets again, not its members). */
			if (!g->members_loaded)
				kg__group_restore(c, g, &l, kg__now(c));
			need_claim = fe < epoch;
		} else if (rc == -ENOENT) {
			g->members_loaded = 1;
			g->epoch = epoch;
		} else if (rc == -ENOTUNIQ) {
			KLOG_ERR("coord", "group '%s': its file name is taken by another group id "
					  "(hash collision of two long ids); refusing it", g->id.s);
			err = KERR_INVALID_GROUP_ID;
		} else {
			KLOG_WARN("coord", "group '%s': cannot read its file: %s", g->id.s,
				  sub_strerror(rc));
			err = KERR_COORDINATOR_LOAD_IN_PROGRESS;
		}
		kg__loaded_free(&l);
		if (!err && need_claim) {
			int crc = kg__group_claim(c, g);
			if (crc) {
				KLOG_WARN("coord", "group '%s': cannot write its file at coordinator epoch "
						   "%lld: %s; not served until it can", g->id.s,
					  (long long)epoch, sub_strerror(crc));
				err = KERR_COORDINATOR_LOAD_IN_PROGRESS;
			} else if (kg__serve_epoch(c, id, loader, &still) || still != epoch) {
				err = KERR_NOT_COORDINATOR;
			} else {
				g->file_epoch = epoch;
			}
		}
		g->loading = 0;
		g->refs--;
		pthread_cond_broadcast(&c->state_cv);
		if (err) {
			kg__group_disown(c, g, &c->late);
			kg__group_maybe_drop(c, g);
			kg__wake_timer(c);
			return err;
		}
		g->loaded = 1;
		if (!create && kg__group_is_idle(g)) {
			kg__group_maybe_drop(c, g);
			return KERR_NONE;
		}
		*out = g;
		return KERR_NONE;
	}
}

int16_t kg__group_get(kg_coord *c, kw_str id, int create, kg_group **out)
{
	return kg__group_get_as(c, id, create, 0, out);
}

void kg__flush_enqueue(kg_coord *c, kg_group *g)
{
	if (g->queued)
		return;
	g->queued = 1;
	g->fnext = NULL;
	*c->fq_tail = g;
	c->fq_tail = &g->fnext;
	pthread_cond_signal(&c->flush_cv);
}

static kg_group *flush_pop(kg_coord *c)
{
	kg_group *g = c->fq_head;
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
static int64_t tick_locked(kg_coord *c, int64_t now, kg_outbox *ob)
{
	int64_t next = now + 60000;
	for (size_t i = 0; i < c->tabsize; i++) {
		kg_group *g = c->tab[i];
		while (g) {
			kg_group *hn = g->hnext;
			if (g->loading) { /* restored members wait for the claim */
				g = hn;
				continue;
			}
			kg__group_tick(c, g, now, &next, ob);
			kg__group_maybe_drop(c, g);
			g = hn;
		}
	}
	return next;
}

static void drain_locked(kg_coord *c, kg_outbox *ob)
{
	c->draining = 1;
	for (size_t i = 0; i < c->tabsize; i++)
		for (kg_group *g = c->tab[i]; g; g = g->hnext)
			kg__group_shutdown(c, g, ob);
}

void kg_coord_load_groups(kg_coord *c)
{
	if (c->cfg.leaders) {
		/* Driven: a shard's groups are loaded when it is taken over. */
		kg_outbox ob;
		kg__outbox_init(&ob);
		pthread_mutex_lock(&c->mu);
		kg__shards_sync(c, &ob);
		pthread_mutex_unlock(&c->mu);
		kg__outbox_deliver(&ob);
		return;
	}
	kg_str *ids = NULL;
	size_t n = 0;
	int rc = kg__ids_on_volume(c, &ids, &n);
	if (rc) {
		KLOG_WARN("coord", "cannot list groups/: %s; groups are loaded when clients name them",
			  sub_strerror(rc));
		return;
	}
	size_t loaded = 0;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < n && !c->stop; i++) {
		int32_t node, port;
		char host[256];
		kg_group *g;
		if (c->drain_requested ||
		    (c->cfg.stopping && __atomic_load_n(c->cfg.stopping, __ATOMIC_ACQUIRE)))
			break; /* stopping: the rest is loaded by whoever runs next */
		if (kg_coord_owner(c, 0, kg_k(&ids[i]), NULL, &node, host, sizeof(host), &port) ||
		    node != c->cfg.broker_id || kg__group_find(c, kg_k(&ids[i])))
			continue;
		if (kg__group_get(c, kg_k(&ids[i]), 0, &g) == KERR_NONE && g)
			loaded += g->nmembers > 0;
	}
	pthread_mutex_unlock(&c->mu);
	if (loaded)
		KLOG_INFO("coord", "%zu group(s) with members restored from the volume", loaded);
	for (size_t i = 0; i < n; i++)
		kg__str_free(&ids[i]);
	free(ids);
}

/* The broker's stop flag is polled this often while it is not set. */
#define KC_STOP_POLL_MS 200
/* The applied leader map, likewise: a shard lost is let go (and one gained
 * loaded) within this, besides the checks every request and write make. */
#define KC_SHARD_POLL_MS 100

/* Answers queued where no outbox was at hand (c->mu held): into ob. */
static void late_take(kg_coord *c, kg_outbox *ob)
{
	if (!c->late.head)
		return;
	*ob->tail = c->late.head;
	ob->tail = c->late.tail;
	kg__outbox_init(&c->late);
}

static void *timer_main(void *arg)
{
	kg_coord *c = arg;
	/* Members of groups that were coordinated here before a restart get
	 * their session from now; those that do not come back expire. */
	kg_coord_load_groups(c);
	pthread_mutex_lock(&c->mu);
	int64_t next = 0;
	int64_t next_expiry = kg__now(c) + c->cfg.offsets_retention_check_ms;
	while (!c->stop) {
		if (c->cfg.offsets_retention_ms > 0 && kg__now(c) >= next_expiry) {
			pthread_mutex_unlock(&c->mu);
			kg_coord_expire_offsets(c);
			pthread_mutex_lock(&c->mu);
			next_expiry = kg__now(c) + c->cfg.offsets_retention_check_ms;
			continue;
		}
		kg_outbox ob;
		kg__outbox_init(&ob);
		int stopping = c->cfg.stopping && __atomic_load_n(c->cfg.stopping, __ATOMIC_ACQUIRE);
		if (!c->draining && (c->drain_requested || stopping))
			drain_locked(c, &ob);
		kg__shards_sync(c, &ob);
		int64_t now = kg__now(c);
		if (c->timer_kicked || now >= next) {
			c->timer_kicked = 0;
			next = tick_locked(c, now, &ob);
		}
		late_take(c, &ob);
		if (ob.head) {
			pthread_mutex_unlock(&c->mu);
			kg__outbox_deliver(&ob);
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
		if (c->cfg.leaders && until > now + KC_SHARD_POLL_MS)
			until = now + KC_SHARD_POLL_MS;
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

void kg_coord_drain(kg_coord *c)
{
	if (!c)
		return;
	/* Only a flag and a wake-up here: the timer thread answers the parked
	 * requests (this may run on the event loop). */
	pthread_mutex_lock(&c->mu);
	c->drain_requested = 1;
	kg__wake_timer(c);
	pthread_mutex_unlock(&c->mu);
	if (!c->threads) {
		kg_outbox ob;
		kg__outbox_init(&ob);
		pthread_mutex_lock(&c->mu);
		drain_locked(c, &ob);
		pthread_mutex_unlock(&c->mu);
		kg__outbox_deliver(&ob);
	}
}

static void flush_one(kg_coord *c, kg_group *g)
{
	kg_outbox ob;
	kg__outbox_init(&ob);
	kg__group_write(c, g, &ob);
	kg__group_maybe_drop(c, g);
	if (ob.head) {
		pthread_mutex_unlock(&c->mu);
		kg__outbox_deliver(&ob);
		pthread_mutex_lock(&c->mu);
	}
}

/* Writes are serialised through one thread: however many consumers commit,
 * at most one group file is being fsynced at a time, and commits that
 * arrive meanwhile ride along in their group's next write. */
static void *flush_main(void *arg)
{
	kg_coord *c = arg;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		kg_group *g = flush_pop(c);
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

void kg_coord_tick(kg_coord *c)
{
	kg_outbox ob;
	kg__outbox_init(&ob);
	pthread_mutex_lock(&c->mu);
	kg__shards_sync(c, &ob);
	tick_locked(c, kg__now(c), &ob);
	late_take(c, &ob);
	pthread_mutex_unlock(&c->mu);
	kg__outbox_deliver(&ob);
}

void kg_coord_flush(kg_coord *c)
{
	pthread_mutex_lock(&c->mu);
	kg_group *g;
	while ((g = flush_pop(c)))
		flush_one(c, g);
	pthread_mutex_unlock(&c->mu);
}

/* ---- life cycle ---------------------------------------------------------------------------- */

void kg_coord_config_defaults(kg_coord_config *cfg)
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

/* What kg_coord_create set up, once the threads are gone and the groups
 * freed (a failed create, or the end of close). */
static void coord_free(kg_coord *c)
{
	kg__pids_destroy(&c->pids);
	pthread_cond_destroy(&c->timer_cv);
	pthread_cond_destroy(&c->flush_cv);
	pthread_cond_destroy(&c->state_cv);
	pthread_mutex_destroy(&c->mu);
	free(c->tab);
	free(c->host);
	free(c->shards);
	free(c);
}

int kg_coord_create(sub_vfs *cluster, const kg_coord_config *cfg, kg_coord **out)
{
	*out = NULL;
	kg_coord *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->cfg = *cfg;
	c->vfs = cluster;
	c->host = strdup(cfg->host ? cfg->host : "");
	c->tabsize = 64;
	c->tab = calloc(c->tabsize, sizeof(*c->tab));
	c->fq_tail = &c->fq_head;
	kg__outbox_init(&c->late);
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
	kg__pids_init(&c->pids);
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

void kg_coord_set_authorizer(kg_coord *c, const kg_authorizer *a) { c->authz = a; }

void kg_coord_set_topic_check(kg_coord *c, kg_coord_topic_fn fn, void *arg)
{
	pthread_mutex_lock(&c->mu);
	c->topic_fn = fn;
	c->topic_arg = arg;
	pthread_mutex_unlock(&c->mu);
}

void kg_coord_close(kg_coord *c)
{
	if (!c)
		return;
	kg_outbox ob;
	kg__outbox_init(&ob);
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
	kg_coord_flush(c);
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->tabsize; i++)
		for (kg_group *g = c->tab[i]; g; g = g->hnext)
			kg__group_shutdown(c, g, &ob);
	late_take(c, &ob);
	pthread_mutex_unlock(&c->mu);
	kg__outbox_deliver(&ob);
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < c->tabsize; i++)
		while (c->tab[i])
			kg__group_unlink_free(c, c->tab[i]);
	pthread_mutex_unlock(&c->mu);
	coord_free(c);
}

void kg_coord_get_stats(kg_coord *c, kg_coord_stats *st)
{
	pthread_mutex_lock(&c->mu);
	*st = c->stats;
	pthread_mutex_unlock(&c->mu);
}

int kg_coord_handle(kg_coord *c, const kg_coord_call *call, kw_rd *body, kw_wr *resp)
{
	switch (call->api_key) {
	case KAAS_API_FIND_COORDINATOR:
		return kg__api_find_coordinator(c, call, body, resp);
	case KAAS_API_JOIN_GROUP:
		return kg__api_join_group(c, call, body, resp);
	case KAAS_API_SYNC_GROUP:
		return kg__api_sync_group(c, call, body, resp);
	case KAAS_API_HEARTBEAT:
		return kg__api_heartbeat(c, call, body, resp);
	case KAAS_API_LEAVE_GROUP:
		return kg__api_leave_group(c, call, body, resp);
	case KAAS_API_DESCRIBE_GROUPS:
		return kg__api_describe_groups(c, call, body, resp);
	case KAAS_API_LIST_GROUPS:
		return kg__api_list_groups(c, call, body, resp);
	case KAAS_API_DELETE_GROUPS:
		return kg__api_delete_groups(c, call, body, resp);
	case KAAS_API_OFFSET_COMMIT:
		return kg__api_offset_commit(c, call, body, resp);
	case KAAS_API_OFFSET_FETCH:
		return kg__api_offset_fetch(c, call, body, resp);
	case KAAS_API_OFFSET_DELETE:
		return kg__api_offset_delete(c, call, body, resp);
	case KAAS_API_INIT_PRODUCER_ID:
		return kg__api_init_producer_id(c, call, body, resp);
	default:
		return -ENOTSUP;
	}
}
