/*
 * shards.c — the coordinator in a cluster: which broker coordinates a group
 * (the owner of its shard in the applied leader map), at which epoch, and
 * what happens when a shard comes and goes.
 *
 * A shard gained at epoch E is served once the map says the successor rule
 * holds (kb_leaders.clear: the old owner gave it up, or its lease ran out):
 * its groups are read from the newest file of each and written again at E
 * (the claim) before anything is answered for them, then the older epochs'
 * files are removed.  A shard lost (or the ack gate closed) is let go at
 * once: parked requests are answered NOT_COORDINATOR, commits waiting for a
 * write are refused, the groups are forgotten.  docs/groups.md has the rules
 * and the argument.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/coord/group_int.h"
#include "kaas/core/leaders.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* ---- shards ---------------------------------------------------------------------------- */

int32_t kg_shard_of(const char *id, size_t len, int32_t nshards)
{
	if (nshards <= 0)
		return 0;
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)id[i]) * 16777619u;
	return (int32_t)(h % (uint32_t)nshards);
}

static int gate_holds(kg_coord *c)
{
	return !c->cfg.ack_gate || c->cfg.ack_gate(c->cfg.ack_gate_arg);
}

int16_t kg__serve_epoch(kg_coord *c, kw_str gid, int loader, int64_t *epoch)
{
	/* A broker whose lease is gone coordinates nothing (its successor may
	 * already be loading what it would answer from). */
	if (!gate_holds(c))
		return KERR_NOT_COORDINATOR;
	if (!c->cfg.leaders) {
		*epoch = c->cfg.coordinator_epoch;
		return KERR_NONE;
	}
	if (gid.len < 0)
		return KERR_NOT_COORDINATOR;
	kb_leaders *m = c->cfg.leaders(c->cfg.leaders_arg);
	int16_t err = KERR_NOT_COORDINATOR;
	if (m && m->nshards > 0) {
		int32_t s = kg_shard_of(gid.s, (size_t)gid.len, m->nshards);
		if (m->shard_leader[s] == c->cfg.broker_id) {
			int64_t e = m->shard_epoch[s];
			const kg_shard *sh = c->nshards == m->nshards ? &c->shards[s] : NULL;
			if (sh && sh->epoch == e &&
			    (sh->state == KG_SH_READY || (loader && sh->state == KG_SH_LOADING))) {
				*epoch = e;
				err = KERR_NONE;
			} else {
				err = KERR_COORDINATOR_LOAD_IN_PROGRESS;
				kg__wake_timer(c);
			}
		}
	}
	kb_leaders_put(m);
	return err;
}

/* Writes g's file at its epoch before anything is answered for it there:
 * from now on an older owner's late write goes to a name no reader takes.
 * Then the older epochs' files go (c->mu held on entry and exit). */
int kg__group_claim(kg_coord *c, kg_group *g)
{
	char path[SUB_PATH_MAX];
	size_t len = 0, count = 0;
	char *buf = NULL;
	int rc = kg__group_path(kg_k(&g->id), g->epoch, path, sizeof(path));
	if (!rc && !(buf = kg__group_serialize(c, g, 0, &len, &count)))
		rc = -ENOMEM;
	if (rc)
		return rc;
	pthread_mutex_unlock(&c->mu);
	rc = sub_write_atomic(c->vfs, path, buf, len);
	if (rc == -ENOENT && sub_mkdirs(c->vfs, "groups", 0755) == 0)
		rc = sub_write_atomic(c->vfs, path, buf, len);
	free(buf);
	if (!rc) {
		int n = kg__group_files_prune(c, kg_k(&g->id), g->epoch);
		KLOG_DEBUG("coord", "group '%s': claimed at coordinator epoch %lld (from epoch %lld; "
				   "%d older file(s) removed)", g->id.s, (long long)g->epoch,
			  (long long)g->file_epoch, n > 0 ? n : 0);
	}
	pthread_mutex_lock(&c->mu);
	return rc;
}

/* Loads (and claims) every group on the volume of the shards marked
 * KG_SH_LOADING in `want`, then serves them (c->mu held; released while
 * listing and reading). */
static void load_shards(kg_coord *c, const uint8_t *want, int32_t ns)
{
	kg_str *ids = NULL;
	size_t n = 0, loaded = 0;
	pthread_mutex_unlock(&c->mu);
	int rc = kg__ids_on_volume(c, &ids, &n);
	pthread_mutex_lock(&c->mu);
	if (rc) {
		/* Not served until the listing works: a group not loaded now
		 * would be claimed later, after this broker answered for its
		 * shard as if it had no older file. */
		KLOG_WARN("coord", "cannot list groups/: %s; the shards wait", sub_strerror(rc));
		for (int32_t s = 0; s < ns && s < c->nshards; s++)
			if (want[s] && c->shards[s].state == KG_SH_LOADING)
				c->shards[s].state = KG_SH_NONE;
		return;
	}
	for (size_t i = 0; i < n && !c->stop; i++) {
		int32_t s = kg_shard_of(ids[i].s, (size_t)ids[i].len, ns);
		kg_group *g;
		if (ns != c->nshards || !want[s] || c->shards[s].state != KG_SH_LOADING)
			continue;
		if (kg__group_get_as(c, kg_k(&ids[i]), 0, 1, &g) == KERR_NONE && g)
			loaded++;
	}
	for (int32_t s = 0; s < ns && ns == c->nshards; s++) {
		if (!want[s] || c->shards[s].state != KG_SH_LOADING)
			continue;
		c->shards[s].state = KG_SH_READY;
		KLOG_INFO("coord", "coordinating shard %d at epoch %lld", s,
			  (long long)c->shards[s].epoch);
	}
	if (loaded)
		KLOG_INFO("coord", "%zu group(s) taken over from the volume", loaded);
	for (size_t i = 0; i < n; i++)
		kg__str_free(&ids[i]);
	free(ids);
}

void kg__shards_sync(kg_coord *c, kg_outbox *ob)
{
	if (!c->cfg.leaders)
		return;
	int gate = gate_holds(c);
	kb_leaders *m = c->cfg.leaders(c->cfg.leaders_arg);
	int32_t ns = m ? m->nshards : 0;
	int lost = 0;
	if (ns > KG_SHARDS_MAX)
		ns = 0; /* an assignment never has more (validated): nothing is served */
	if (ns != c->nshards) {
		kg_shard *nv = calloc(ns > 0 ? (size_t)ns : 1, sizeof(*nv));
		if (!nv) {
			kb_leaders_put(m);
			return;
		}
		free(c->shards);
		c->shards = nv;
		lost = c->nshards > 0;
		c->nshards = ns;
	}
	uint8_t want[KG_SHARDS_MAX];
	int gained = 0;
	memset(want, 0, sizeof(want));
	for (int32_t s = 0; s < ns; s++) {
		kg_shard *sh = &c->shards[s];
		int mine = gate && m->shard_leader[s] == c->cfg.broker_id;
		int64_t e = m->shard_epoch[s];
		if (sh->state != KG_SH_NONE && (!mine || sh->epoch != e)) {
			KLOG_INFO("coord", "shard %d at epoch %lld: no longer coordinated here%s", s,
				  (long long)sh->epoch, gate ? "" : " (the ack gate closed)");
			sh->state = KG_SH_NONE;
			lost = 1;
		}
		if (mine && sh->state == KG_SH_NONE && m->clear && s < KG_SHARDS_MAX) {
			sh->state = KG_SH_LOADING;
			sh->epoch = e;
			want[s] = 1;
			gained = 1;
		}
	}
	kb_leaders_put(m);
	if (lost || !gate) {
		/* Stop at once: whatever waits for these groups is told to look
		 * for the coordinator again, and nothing of them stays here. */
		for (size_t b = 0; b < c->tabsize; b++) {
			kg_group *g = c->tab[b];
			while (g) {
				kg_group *next = g->hnext;
				int64_t ep;
				if (!g->loading && !g->writing &&
				    (g->loaded || g->members || g->pc_head) &&
				    (kg__serve_epoch(c, kg_k(&g->id), 1, &ep) || ep != g->epoch)) {
					kg__group_disown(c, g, ob);
					kg__group_maybe_drop(c, g);
				}
				g = next;
			}
		}
	}
	if (gained)
		load_shards(c, want, ns);
}

int kg_coord_settled(kg_coord *c)
{
	if (!c || !c->cfg.leaders)
		return 1;
	pthread_mutex_lock(&c->mu);
	int settled = 1;
	if (gate_holds(c)) {
		kb_leaders *m = c->cfg.leaders(c->cfg.leaders_arg);
		int32_t ns = m && m->nshards <= KG_SHARDS_MAX ? m->nshards : 0;
		for (int32_t s = 0; s < ns && settled; s++) {
			if (m->shard_leader[s] != c->cfg.broker_id)
				continue;
			/* A map whose shard count this coordinator has not synced
			 * to yet serves nothing of it. */
			settled = ns == c->nshards && c->shards[s].state == KG_SH_READY &&
				  c->shards[s].epoch == m->shard_epoch[s];
		}
		kb_leaders_put(m);
		if (!settled)
			kg__wake_timer(c); /* sync with the map now, not at the next tick */
	}
	pthread_mutex_unlock(&c->mu);
	return settled;
}

/* ---- losing a group ----------------------------------------------------------------- */

void kg__group_disown(kg_coord *c, kg_group *g, kg_outbox *ob)
{
	kg__group_fail_commits(c, g, KERR_NOT_COORDINATOR, ob);
	while (g->members) {
		kg_member *m = g->members;
		g->members = m->next;
		kg__answer_join_error(m, KERR_NOT_COORDINATOR, ob);
		kg__answer_sync(m, KERR_NOT_COORDINATOR, ob);
		kg__member_free(m);
	}
	g->nmembers = 0;
	while (g->pending) {
		kg_pending *p = g->pending;
		g->pending = p->next;
		kg__str_free(&p->id);
		free(p);
	}
	g->npending = 0;
	kg__offsets_clear(g);
	kg__str_free(&g->protocol_type);
	kg__str_free(&g->protocol);
	kg__str_free(&g->leader);
	g->state = KC_EMPTY;
	g->generation = 0;
	g->sync_pending = 0;
	g->meta_seq = g->meta_written = g->sync_seq = 0;
	g->meta_retry_at = g->meta_backoff = 0;
	g->rebalance_deadline = 0;
	g->initial_delay = g->new_member_added = 0;
	/* Read again (at the epoch it is then served at) if it comes back. */
	g->loaded = g->members_loaded = g->file_exists = 0;
	g->epoch = -1;
	g->file_epoch = 0;
	kg__group_check(g);
}

/* ---- FindCoordinator's answer --------------------------------------------------------- */

int16_t kg_coord_owner(kg_coord *c, int8_t key_type, kw_str key, const char *listener,
		       int32_t *node, char *host, size_t hostlen, int32_t *port)
{
	if (key_type != 0 && key_type != 1)
		return KERR_INVALID_REQUEST;
	if (!c->cfg.leaders) {
		*node = c->cfg.broker_id;
		snprintf(host, hostlen, "%s", c->host);
		*port = c->cfg.port;
		return KERR_NONE;
	}
	kb_leaders *m = c->cfg.leaders(c->cfg.leaders_arg);
	int16_t err = KERR_COORDINATOR_NOT_AVAILABLE;
	if (m && m->nshards > 0 && key.len >= 0) {
		int32_t id = m->shard_leader[kg_shard_of(key.s, (size_t)key.len, m->nshards)];
		const kb_lbroker *lb = id >= 0 ? kb_leaders_broker(m, id) : NULL;
		if (id == c->cfg.broker_id) {
			*node = id;
			snprintf(host, hostlen, "%s", c->host);
			*port = c->cfg.port;
			err = KERR_NONE;
		} else if (lb && lb->live) {
			/* A broker that is not live is not named: the client asks
			 * again and finds the shard's next owner.  Nor one without
			 * the client's listener (Kafka answers the same). */
			const char *h;
			int32_t p;
			if (kb_lbroker_endpoint(lb, listener, &h, &p) == 0 && p > 0) {
				*node = id;
				snprintf(host, hostlen, "%s", h);
				*port = p;
				err = KERR_NONE;
			}
		}
	}
	kb_leaders_put(m);
	return err;
}
