/*
 * group.c — the classic consumer-group protocol: the group state machine
 * (Empty -> PreparingRebalance -> CompletingRebalance -> Stable) and the four
 * membership APIs that drive it: JoinGroup v0-5, SyncGroup v0-3,
 * Heartbeat v0-3, LeaveGroup v0-3.
 *
 * It behaves as Kafka 2.x's GroupCoordinator does: member ids are assigned
 * by the coordinator (v4+ first answers MEMBER_ID_REQUIRED), a rebalance
 * waits for every known member to rejoin or for the rebalance timeout, the
 * first rebalance of an empty group waits group.initial.rebalance.delay.ms
 * (extended while members keep arriving), members that stop heartbeating
 * for their session timeout are removed.  JoinGroup and SyncGroup requests
 * that must wait are parked (KAAS_DEFERRED) on the member and answered when
 * the rebalance moves on.  As in Kafka, a generation is handed out (the
 * SyncGroup answers) only once its membership and assignments are in the
 * group file, and departures are written too, so a restarted coordinator
 * restores the group (kg__group_restore) and its members carry on.
 * docs/groups.md tells the story for users.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kaas/coord/coord_int.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* ---- members ------------------------------------------------------------------ */

kg_member *kg__member_find(kg_group *g, kw_str id)
{
	if (id.len <= 0)
		return NULL;
	for (kg_member *m = g->members; m; m = m->next)
		if (kg__str_eqk(&m->id, id))
			return m;
	return NULL;
}

static kg_member *member_by_instance(kg_group *g, kw_str inst)
{
	if (inst.len < 0)
		return NULL;
	for (kg_member *m = g->members; m; m = m->next)
		if (m->instance_id.len >= 0 && kg__str_eqk(&m->instance_id, inst))
			return m;
	return NULL;
}

int kg__member_fenced(kg_group *g, kw_str member_id, kw_str inst)
{
	kg_member *m = member_by_instance(g, inst);
	return m && !kg__str_eqk(&m->id, member_id);
}

/* The group and member a SyncGroup or Heartbeat names (under c->mu), or
 * the error to answer: the group's (loading it), UNKNOWN_MEMBER_ID for a
 * group or member that is not there, FENCED_INSTANCE_ID for a static
 * member's older incarnation. */
static int16_t named_member(kg_coord *c, kw_str gid, kw_str member_id, kw_str inst, kg_group **g,
			    kg_member **m)
{
	int16_t err = kg__group_get(c, gid, 0, g);
	if (!err && !*g)
		err = KERR_UNKNOWN_MEMBER_ID;
	if (!err && kg__member_fenced(*g, member_id, inst))
		err = KERR_FENCED_INSTANCE_ID;
	if (!err && !(*m = kg__member_find(*g, member_id)))
		err = KERR_UNKNOWN_MEMBER_ID;
	return err;
}

static kg_pending *pending_find(kg_group *g, kw_str id)
{
	if (id.len <= 0)
		return NULL;
	for (kg_pending *p = g->pending; p; p = p->next)
		if (kg__str_eqk(&p->id, id))
			return p;
	return NULL;
}

static void pending_remove(kg_group *g, kg_pending *p)
{
	kg_pending **pp = &g->pending;
	while (*pp && *pp != p)
		pp = &(*pp)->next;
	if (*pp) {
		*pp = p->next;
		g->npending--;
	}
	kg__str_free(&p->id);
	free(p);
}

void kg__member_free(kg_member *m)
{
	kg__str_free(&m->id);
	kg__str_free(&m->instance_id);
	kg__str_free(&m->client_id);
	kg__str_free(&m->client_host);
	for (int32_t i = 0; i < m->nprotos; i++) {
		kg__str_free(&m->protos[i].name);
		free(m->protos[i].meta);
	}
	free(m->protos);
	free(m->assignment);
	free(m->json);
	free(m);
}

/* "<prefix>-<uuid4>", as Kafka builds member ids. */
static int new_member_id(kw_str prefix, kg_str *out)
{
	uint8_t u[16];
	if (getrandom(u, sizeof(u), 0) != (ssize_t)sizeof(u))
		return -EIO;
	u[6] = (uint8_t)((u[6] & 0x0f) | 0x40);
	u[8] = (uint8_t)((u[8] & 0x3f) | 0x80);
	int32_t plen = prefix.len > 0 ? prefix.len : 0;
	if (plen > 1024)
		plen = 1024; /* a member id is echoed on every request: keep it sane */
	char *s = malloc((size_t)plen + 38);
	if (!s)
		return -ENOMEM;
	if (plen)
		memcpy(s, prefix.s, (size_t)plen);
	int n = snprintf(s + plen, 38,
			 "-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
			 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
			 u[13], u[14], u[15]);
	kg__str_free(out);
	out->s = s;
	out->len = plen + n;
	return 0;
}

typedef struct kg_join_req {
	kw_str group_id;
	int32_t session_timeout;
	int32_t rebalance_timeout;
	kw_str member_id;
	kw_str instance_id;
	kw_str protocol_type;
	int32_t nprotos;
	kw_str *pnames;
	kw_bytes *pmetas;
} kg_join_req;

static int set_protocols(kg_member *m, const kg_join_req *r)
{
	kg_proto *np = calloc((size_t)(r->nprotos ? r->nprotos : 1), sizeof(*np));
	if (!np)
		return -ENOMEM;
	for (int32_t i = 0; i < r->nprotos; i++) {
		np[i].name.len = -1;
		if (kg_str_setk(&np[i].name, r->pnames[i]))
			goto oom;
		np[i].meta_len = r->pmetas[i].len < 0 ? 0 : r->pmetas[i].len;
		np[i].meta = malloc((size_t)np[i].meta_len + 1);
		if (!np[i].meta)
			goto oom;
		if (np[i].meta_len)
			memcpy(np[i].meta, r->pmetas[i].p, (size_t)np[i].meta_len);
	}
	for (int32_t i = 0; i < m->nprotos; i++) {
		kg__str_free(&m->protos[i].name);
		free(m->protos[i].meta);
	}
	free(m->protos);
	kg_member_touch(m);
	m->protos = np;
	m->nprotos = r->nprotos;
	return 0;
oom:
	for (int32_t i = 0; i < r->nprotos; i++) {
		kg__str_free(&np[i].name);
		free(np[i].meta);
	}
	free(np);
	return -ENOMEM;
}

static int same_protocols(const kg_member *m, const kg_join_req *r)
{
	if (m->nprotos != r->nprotos)
		return 0;
	for (int32_t i = 0; i < r->nprotos; i++) {
		int32_t ml = r->pmetas[i].len < 0 ? 0 : r->pmetas[i].len;
		if (!kg__str_eqk(&m->protos[i].name, r->pnames[i]) || m->protos[i].meta_len != ml ||
		    (ml && memcmp(m->protos[i].meta, r->pmetas[i].p, (size_t)ml)))
			return 0;
	}
	return 1;
}

static const kg_proto *member_proto(const kg_member *m, const kg_str *name)
{
	if (!name || name->len < 0)
		return NULL;
	for (int32_t i = 0; i < m->nprotos; i++)
		if (kg__str_eq(&m->protos[i].name, name))
			return &m->protos[i];
	return NULL;
}

static int member_supports(const kg_member *m, kw_str name)
{
	for (int32_t i = 0; i < m->nprotos; i++)
		if (kg__str_eqk(&m->protos[i].name, name))
			return 1;
	return 0;
}

/* Can a member with these protocols join?  An empty group takes any
 * non-empty protocol type; otherwise the type must match and one protocol
 * must be supported by everyone (the new member included). */
static int supports_protocols(const kg_group *g, const kg_join_req *r)
{
	if (g->nmembers == 0)
		return r->protocol_type.len > 0 && r->nprotos > 0;
	if (!kg__str_eqk(&g->protocol_type, r->protocol_type))
		return 0;
	for (int32_t i = 0; i < r->nprotos; i++) {
		int all = 1;
		for (kg_member *m = g->members; m && all; m = m->next)
			all = member_supports(m, r->pnames[i]);
		if (all)
			return 1;
	}
	return 0;
}

/* Every member votes for its most preferred protocol that all members
 * support; most votes wins, ties go to the first member's preference. */
static int select_protocol(kg_group *g)
{
	kg_member *first = g->members;
	if (!first)
		return 0;
	int32_t best = -1, best_votes = 0;
	for (int32_t i = 0; i < first->nprotos; i++) {
		kw_str cand = kg_k(&first->protos[i].name);
		int all = 1;
		for (kg_member *m = g->members; m && all; m = m->next)
			all = member_supports(m, cand);
		if (!all)
			continue;
		int32_t votes = 0;
		for (kg_member *m = g->members; m; m = m->next) {
			for (int32_t j = 0; j < m->nprotos; j++) {
				int everywhere = 1;
				for (kg_member *o = g->members; o && everywhere; o = o->next)
					everywhere = member_supports(o, kg_k(&m->protos[j].name));
				if (!everywhere)
					continue;
				if (kg__str_eq(&m->protos[j].name, &first->protos[i].name))
					votes++;
				break;
			}
		}
		if (votes > best_votes || best < 0) {
			best = i;
			best_votes = votes;
		}
	}
	if (best < 0)
		best = 0; /* cannot happen: joins check support; keep the group going */
	return kg__str_set(&g->protocol, first->protos[best].name.s, first->protos[best].name.len);
}

static int32_t max_rebalance_timeout(const kg_group *g)
{
	int32_t t = 0;
	for (kg_member *m = g->members; m; m = m->next)
		if (m->rebalance_timeout_ms > t)
			t = m->rebalance_timeout_ms;
	return t;
}

/* ---- responses ---------------------------------------------------------------- */

static void enc_join(kw_wr *w, int16_t v, int16_t err, int32_t gen, const kg_str *proto,
		     const kg_str *leader, kw_str member_id, const kg_group *members_of)
{
	if (v >= 2)
		kw_wr_i32(w, 0); /* throttle_time_ms */
	kw_wr_i16(w, err);
	kw_wr_i32(w, gen);
	kw_wr_strn(w, 0, proto && proto->len > 0 ? proto->s : "",
		     proto && proto->len > 0 ? proto->len : 0);
	kw_wr_strn(w, 0, leader && leader->len > 0 ? leader->s : "",
		     leader && leader->len > 0 ? leader->len : 0);
	kw_wr_strn(w, 0, member_id.len > 0 ? member_id.s : "", member_id.len > 0 ? member_id.len : 0);
	if (!members_of) {
		kw_wr_array(w, 0, 0);
		return;
	}
	kw_wr_array(w, 0, members_of->nmembers);
	for (kg_member *m = members_of->members; m; m = m->next) {
		const kg_proto *p = member_proto(m, &members_of->protocol);
		kw_wr_kstr(w, 0, kg_k(&m->id));
		if (v >= 5)
			kw_wr_kstr(w, 0, kg_k(&m->instance_id));
		kw_wr_bytes(w, 0, p ? p->meta : NULL, p ? p->meta_len : 0);
	}
}

static void enc_join_error(kw_wr *w, int16_t v, int16_t err, kw_str member_id)
{
	enc_join(w, v, err, -1, NULL, NULL, member_id, NULL);
}

/* The answer to a member's JoinGroup for the current generation. */
static void enc_join_current(kw_wr *w, int16_t v, const kg_group *g, const kg_member *m)
{
	int leader = kg__str_eq(&g->leader, &m->id);
	enc_join(w, v, KERR_NONE, g->generation, &g->protocol, &g->leader, kg_k(&m->id),
		 leader ? g : NULL);
}

static void enc_sync(kw_wr *w, int16_t v, int16_t err, const uint8_t *a, int32_t alen)
{
	if (v >= 1)
		kw_wr_i32(w, 0);
	kw_wr_i16(w, err);
	kw_wr_bytes(w, 0, a, a ? alen : 0);
}

static void answer_join(kg_waiter *jw, kg_outbox *ob, kw_wr *tmp)
{
	kg__outbox_add(ob, jw, tmp);
}

static void answer_join_error(kg_member *m, int16_t err, kg_outbox *ob)
{
	if (!kg_waiting(&m->join))
		return;
	kw_wr w = KAAS_WR_INIT;
	enc_join_error(&w, m->join.version, err, kg_k(&m->id));
	answer_join(&m->join, ob, &w);
}

static void answer_sync(kg_member *m, int16_t err, kg_outbox *ob)
{
	if (!kg_waiting(&m->sync))
		return;
	kw_wr w = KAAS_WR_INIT;
	if (err)
		enc_sync(&w, m->sync.version, err, NULL, 0);
	else
		enc_sync(&w, m->sync.version, KERR_NONE, m->assignment, m->assignment_len);
	kg__outbox_add(ob, &m->sync, &w);
}

/* ---- transitions ---------------------------------------------------------------- */

static void complete_join(kg_coord *c, kg_group *g, int64_t now, kg_outbox *ob);

static int all_joined(const kg_group *g)
{
	if (g->npending)
		return 0;
	for (kg_member *m = g->members; m; m = m->next)
		if (!kg_waiting(&m->join))
			return 0;
	return 1;
}

static void try_complete_join(kg_coord *c, kg_group *g, int64_t now, kg_outbox *ob)
{
	if (g->state == KC_PREPARING && !g->initial_delay && all_joined(g))
		complete_join(c, g, now, ob);
}

static void prepare_rebalance(kg_coord *c, kg_group *g, int64_t now, kg_outbox *ob)
{
	if (g->state == KC_COMPLETING) {
		if (g->sync_pending) {
			/* The write of this generation's assignment may already be on
			 * the volume: the next write must say a rebalance is due. */
			g->sync_pending = 0;
			kg__group_meta_changed(c, g);
		}
		/* The leader's assignment will never come for this generation. */
		for (kg_member *m = g->members; m; m = m->next) {
			free(m->assignment);
			m->assignment = NULL;
			m->assignment_len = 0;
			kg_member_touch(m);
			answer_sync(m, KERR_REBALANCE_IN_PROGRESS, ob);
		}
	}
	int64_t rt = max_rebalance_timeout(g);
	if (g->state == KC_EMPTY) {
		int64_t d = c->cfg.initial_rebalance_delay_ms;
		g->initial_delay = 1;
		g->new_member_added = 0;
		g->initial_remaining = rt - d > 0 ? rt - d : 0;
		g->rebalance_deadline = now + d;
	} else {
		g->initial_delay = 0;
		g->rebalance_deadline = now + rt;
	}
	g->state = KC_PREPARING;
	kg__wake_timer(c);
	try_complete_join(c, g, now, ob);
}

static void maybe_prepare_rebalance(kg_coord *c, kg_group *g, int64_t now, kg_outbox *ob)
{
	if (g->state == KC_STABLE || g->state == KC_COMPLETING || g->state == KC_EMPTY)
		prepare_rebalance(c, g, now, ob);
	else if (g->state == KC_PREPARING)
		try_complete_join(c, g, now, ob);
}

static void elect_leader(kg_group *g)
{
	kg_member *pick = NULL;
	for (kg_member *m = g->members; m; m = m->next) {
		if (kg__str_eq(&g->leader, &m->id) && kg_waiting(&m->join))
			return; /* the leader rejoined: keep it */
		if (!pick && kg_waiting(&m->join))
			pick = m;
	}
	if (!pick)
		pick = g->members;
	if (pick)
		kg__str_set(&g->leader, pick->id.s, pick->id.len);
	else
		kg__str_free(&g->leader);
}

static void unlink_member(kg_group *g, kg_member *m)
{
	kg_member **pp = &g->members;
	while (*pp && *pp != m)
		pp = &(*pp)->next;
	if (*pp) {
		*pp = m->next;
		g->nmembers--;
	}
}

static void complete_join(kg_coord *c, kg_group *g, int64_t now, kg_outbox *ob)
{
	/* Dynamic members that did not rejoin in time are gone; static ones
	 * keep their place until their session expires (KIP-345). */
	int dropped = 0;
	for (kg_member **pp = &g->members; *pp;) {
		kg_member *m = *pp;
		if (!kg_waiting(&m->join) && m->instance_id.len < 0) {
			*pp = m->next;
			g->nmembers--;
			answer_sync(m, KERR_UNKNOWN_MEMBER_ID, ob);
			kg__member_free(m);
			dropped = 1;
		} else {
			pp = &m->next;
		}
	}
	g->initial_delay = 0;
	g->generation++;
	if (!g->members) {
		g->state = KC_EMPTY;
		g->empty_since = kg__wall(c);
		kg__str_free(&g->protocol);
		kg__str_free(&g->leader);
		kg__group_meta_changed(c, g); /* Kafka writes the empty group too */
		return;
	}
	if (dropped)
		kg__group_meta_changed(c, g);
	elect_leader(g);
	if (select_protocol(g))
		KLOG_WARN("coord", "group '%s': out of memory selecting a protocol", g->id.s);
	g->state = KC_COMPLETING;
	for (kg_member *m = g->members; m; m = m->next) {
		if (!kg_waiting(&m->join))
			continue;
		kw_wr w = KAAS_WR_INIT;
		enc_join_current(&w, m->join.version, g, m);
		answer_join(&m->join, ob, &w);
		m->is_new = 0;
		m->deadline = now + m->session_timeout_ms;
	}
	KLOG_DEBUG("coord", "group '%s': generation %d with %d member(s), protocol %s", g->id.s,
		   g->generation, g->nmembers, g->protocol.s ? g->protocol.s : "-");
	kg__wake_timer(c);
}

/* Leave, session expiry, fencing: the member goes; the group rebalances. */
static void remove_member(kg_coord *c, kg_group *g, kg_member *m, int64_t now, kg_outbox *ob)
{
	unlink_member(g, m);
	answer_join_error(m, KERR_UNKNOWN_MEMBER_ID, ob);
	answer_sync(m, KERR_UNKNOWN_MEMBER_ID, ob);
	if (kg__str_eq(&g->leader, &m->id)) {
		if (g->members)
			kg__str_set(&g->leader, g->members->id.s, g->members->id.len);
		else
			kg__str_free(&g->leader);
	}
	kg__member_free(m);
	kg__group_meta_changed(c, g); /* a restart must not bring it back */
	if (g->state == KC_STABLE || g->state == KC_COMPLETING)
		prepare_rebalance(c, g, now, ob);
	else if (g->state == KC_PREPARING)
		try_complete_join(c, g, now, ob);
}

void kg__group_tick(kg_coord *c, kg_group *g, int64_t now, int64_t *next, kg_outbox *ob)
{
	int changed = 0;
	if (g->meta_retry_at && !g->queued && !g->writing) {
		/* A membership write failed: write the group again (Rule 2). */
		if (g->meta_seq <= g->meta_written)
			g->meta_retry_at = 0;
		else if (now >= g->meta_retry_at) {
			g->meta_retry_at = 0;
			kg__flush_enqueue(c, g);
		} else if (g->meta_retry_at < *next) {
			*next = g->meta_retry_at;
		}
	}
	for (kg_pending *p = g->pending, *pn; p; p = pn) {
		pn = p->next;
		if (p->deadline <= now) {
			pending_remove(g, p);
			changed = 1;
		} else if (p->deadline < *next) {
			*next = p->deadline;
		}
	}
	if (changed)
		try_complete_join(c, g, now, ob);
restart:
	for (kg_member *m = g->members; m; m = m->next) {
		if (kg_waiting(&m->join) || kg_waiting(&m->sync))
			continue; /* a parked request keeps its member alive */
		if (m->deadline <= now) {
			KLOG_INFO("coord", "group '%s': member %s expired (no heartbeat for %d ms)",
				  g->id.s, m->id.s, m->session_timeout_ms);
			remove_member(c, g, m, now, ob);
			goto restart;
		}
		if (m->deadline < *next)
			*next = m->deadline;
	}
	if (g->state == KC_PREPARING) {
		if (now >= g->rebalance_deadline) {
			if (g->initial_delay && g->new_member_added && g->initial_remaining > 0 &&
			    c->cfg.initial_rebalance_delay_ms > 0) {
				/* Members keep arriving: wait one more delay, within the
				 * rebalance timeout. */
				int64_t d = c->cfg.initial_rebalance_delay_ms;
				if (d > g->initial_remaining)
					d = g->initial_remaining;
				g->initial_remaining -= d;
				g->new_member_added = 0;
				g->rebalance_deadline = now + d;
			} else {
				complete_join(c, g, now, ob);
			}
		}
		if (g->state == KC_PREPARING && g->rebalance_deadline < *next)
			*next = g->rebalance_deadline;
	}
}

void kg__group_shutdown(kg_coord *c, kg_group *g, kg_outbox *ob)
{
	/* SyncGroups that wait for the write of their assignment are answered
	 * by that write, which the flusher finishes before the coordinator
	 * closes; only at close is anything still waiting told to go. */
	int keep_syncs = g->sync_pending && !c->stop;
	for (kg_member *m = g->members; m; m = m->next) {
		answer_join_error(m, KERR_NOT_COORDINATOR, ob);
		if (!keep_syncs)
			answer_sync(m, KERR_NOT_COORDINATOR, ob);
	}
}

/* ---- membership on the volume ---------------------------------------------------------- */

void kg__group_meta_changed(kg_coord *c, kg_group *g)
{
	g->meta_seq++;
	kg__flush_enqueue(c, g);
}

void kg__group_meta_written(kg_coord *c, kg_group *g, int ok, uint64_t upto, kg_outbox *ob)
{
	int64_t now = kg__now(c);
	if (ok) {
		if (upto > g->meta_written)
			g->meta_written = upto;
		g->meta_backoff = 0;
		if (g->sync_pending && g->sync_seq <= upto && g->state == KC_COMPLETING) {
			/* The generation's assignment is on the volume: now it may be
			 * handed out (Kafka answers SyncGroup after its append). */
			g->sync_pending = 0;
			g->state = KC_STABLE;
			for (kg_member *m = g->members; m; m = m->next) {
				m->deadline = now + m->session_timeout_ms;
				answer_sync(m, KERR_NONE, ob);
			}
			kg__wake_timer(c);
			KLOG_DEBUG("coord", "group '%s': generation %d is stable", g->id.s, g->generation);
		}
		return;
	}
	/* Not written (or not known to be): try again later, and a generation
	 * whose assignment did not reach the volume is not handed out. */
	g->meta_backoff = g->meta_backoff ? g->meta_backoff * 2 : 1000;
	if (g->meta_backoff > 60000)
		g->meta_backoff = 60000;
	if (g->meta_seq > g->meta_written) {
		g->meta_retry_at = now + g->meta_backoff;
		kg__wake_timer(c);
	}
	if (g->sync_pending && g->state == KC_COMPLETING) {
		g->sync_pending = 0;
		for (kg_member *m = g->members; m; m = m->next)
			answer_sync(m, KERR_NOT_COORDINATOR, ob);
		prepare_rebalance(c, g, now, ob);
	}
}

void kg__group_restore(kg_coord *c, kg_group *g, kg_loaded *l, int64_t now)
{
	g->members_loaded = 1;
	if (!l->members || g->members)
		return;
	g->members = l->members;
	g->nmembers = l->nmembers;
	l->members = NULL;
	l->nmembers = 0;
	g->generation = l->generation;
	kg__str_free(&g->protocol);
	kg__str_free(&g->leader);
	g->protocol = l->protocol;
	g->leader = l->leader;
	l->protocol = (kg_str)KC_STR_NULL;
	l->leader = (kg_str)KC_STR_NULL;
	/* Nobody has heard from the members since the file was written: each
	 * gets a whole session from now to show up (as when Kafka loads a
	 * group on a coordinator fail-over). */
	for (kg_member *m = g->members; m; m = m->next)
		m->deadline = now + m->session_timeout_ms;
	g->state = KC_STABLE;
	if (l->state == KC_PREPARING) {
		/* Members had left or joined since the last complete generation:
		 * the members that are back rejoin, the others time out. */
		kg_outbox none;
		kg__outbox_init(&none);
		prepare_rebalance(c, g, now, &none); /* nobody waits yet: nothing to answer */
	}
	kg__wake_timer(c);
	KLOG_INFO("coord", "group '%s': restored generation %d with %d member(s)%s", g->id.s,
		  g->generation, g->nmembers, g->state == KC_PREPARING ? ", rebalancing" : "");
}

/* ---- shared request plumbing ------------------------------------------------------- */

static void park(kg_waiter *w, const kg_coord_call *call, kw_wr *resp, int *done)
{
	w->done = call->done;
	w->ctx = call->ctx;
	w->version = call->version;
	w->flex = call->flex;
	w->inline_resp = resp;
	w->inline_done = done;
}

/* After the locked part: either the answer already went into resp, or the
 * request stays parked on `parked` for a later completion. */
static int unpark_inline(kg_waiter *parked, int done)
{
	if (done)
		return KAAS_HANDLED;
	parked->inline_resp = NULL;
	parked->inline_done = NULL;
	return KAAS_DEFERRED;
}

int16_t kg__group_status(kg_coord *c, kw_str gid, int allow_empty)
{
	if (!kg__group_id_ok(gid, allow_empty))
		return KERR_INVALID_GROUP_ID;
	int32_t node;
	const char *host;
	int32_t port;
	int16_t err = kg_coord_owner(c, 0, gid, &node, &host, &port);
	if (err)
		return err;
	if (node != c->cfg.broker_id)
		return KERR_NOT_COORDINATOR;
	return KERR_NONE;
}

/* ---- JoinGroup ------------------------------------------------------------------------- */

static int16_t add_member(kg_coord *c, kg_group *g, const kg_coord_call *call,
			  const kg_join_req *r, kg_str *id, int64_t now, kg_member **out)
{
	kg_member *m = calloc(1, sizeof(*m));
	if (!m)
		return KERR_COORDINATOR_NOT_AVAILABLE;
	m->instance_id.len = m->client_id.len = m->client_host.len = -1;
	m->id = *id;
	id->s = NULL;
	id->len = -1;
	const char *host = call->client_host ? call->client_host : "";
	if (kg_str_setk(&m->instance_id, r->instance_id) || kg_str_setk(&m->client_id, call->client_id) ||
	    kg__str_set(&m->client_host, host, (int32_t)strlen(host)) || set_protocols(m, r)) {
		kg__member_free(m);
		return KERR_COORDINATOR_NOT_AVAILABLE;
	}
	if (m->client_id.len < 0)
		kg__str_set(&m->client_id, "", 0);
	m->session_timeout_ms = r->session_timeout;
	m->rebalance_timeout_ms = r->rebalance_timeout;
	m->is_new = 1;
	m->deadline = now + c->cfg.new_member_join_timeout_ms;
	if (g->nmembers == 0 && kg_str_setk(&g->protocol_type, r->protocol_type)) {
		kg__member_free(m);
		return KERR_COORDINATOR_NOT_AVAILABLE;
	}
	kg_member **pp = &g->members;
	while (*pp)
		pp = &(*pp)->next;
	*pp = m;
	g->nmembers++;
	if (g->leader.len < 0)
		kg__str_set(&g->leader, m->id.s, m->id.len);
	if (g->state == KC_PREPARING && g->generation == 0)
		g->new_member_added = 1;
	*out = m;
	return KERR_NONE;
}

static int update_member(kg_member *m, const kg_coord_call *call, const kg_join_req *r)
{
	if (set_protocols(m, r))
		return -ENOMEM;
	m->session_timeout_ms = r->session_timeout;
	m->rebalance_timeout_ms = r->rebalance_timeout;
	if (call->client_id.len >= 0)
		kg_str_setk(&m->client_id, call->client_id);
	kg_member_touch(m);
	return 0;
}

/* A member (re)joins and waits for the rebalance (c->mu held). */
static void join_and_wait(kg_coord *c, kg_group *g, kg_member *m, const kg_coord_call *call,
			  kw_wr *resp, int *done, int64_t now, kg_outbox *ob, kg_waiter **parked)
{
	if (kg_waiting(&m->join)) {
		/* A retry while the first attempt is parked: answer the old one
		 * so its connection is not held up. */
		answer_join_error(m, KERR_REBALANCE_IN_PROGRESS, ob);
	}
	park(&m->join, call, resp, done);
	*parked = &m->join;
	maybe_prepare_rebalance(c, g, now, ob);
}

static int join_locked(kg_coord *c, const kg_coord_call *call, kg_join_req *r, kw_wr *resp,
		       kg_outbox *ob)
{
	int16_t v = call->version;
	int64_t now = kg__now(c);
	int unknown = r->member_id.len <= 0;
	kg_group *g = NULL;
	int16_t err = KERR_NONE;
	if (c->draining) {
		err = KERR_NOT_COORDINATOR; /* shutting down: nothing parks any more */
		goto error;
	}
	err = kg__group_get(c, r->group_id, unknown, &g);
	if (err)
		goto error;
	if (!g) {
		err = KERR_UNKNOWN_MEMBER_ID;
		goto error;
	}
	if (g->state == KC_DEAD) {
		err = KERR_COORDINATOR_NOT_AVAILABLE;
		goto error;
	}
	if (!supports_protocols(g, r)) {
		err = KERR_INCONSISTENT_GROUP_PROTOCOL;
		goto error_drop;
	}
	int done = 0;
	kg_waiter *parked = NULL;
	kg_member *m = NULL;
	if (unknown) {
		kg_str id = KC_STR_NULL;
		if (r->instance_id.len >= 0) {
			/* Static member (KIP-345): a new incarnation of the instance
			 * takes over its place; the old member id is fenced. */
			if (new_member_id(r->instance_id, &id)) {
				err = KERR_COORDINATOR_NOT_AVAILABLE;
				goto error_drop;
			}
			m = member_by_instance(g, r->instance_id);
			if (m) {
				answer_join_error(m, KERR_FENCED_INSTANCE_ID, ob);
				answer_sync(m, KERR_FENCED_INSTANCE_ID, ob);
				if (kg__str_eq(&g->leader, &m->id))
					kg__str_set(&g->leader, id.s, id.len);
				kg__str_free(&m->id);
				m->id = id;
				kg_member_touch(m);
				kg__group_meta_changed(c, g); /* the old id stays fenced after a restart */
				if (update_member(m, call, r)) {
					err = KERR_COORDINATOR_NOT_AVAILABLE;
					goto error_drop;
				}
				m->deadline = now + r->session_timeout;
				join_and_wait(c, g, m, call, resp, &done, now, ob, &parked);
				return unpark_inline(parked, done);
			}
		} else {
			if (g->nmembers + g->npending >= c->cfg.max_group_size) {
				err = KERR_GROUP_MAX_SIZE_REACHED;
				goto error_drop;
			}
			if (new_member_id(call->client_id, &id)) {
				err = KERR_COORDINATOR_NOT_AVAILABLE;
				goto error_drop;
			}
			if (v >= 4) {
				/* KIP-394: hand out the id first; the member must come
				 * back with it within its session timeout. */
				kg_pending *p = calloc(1, sizeof(*p));
				if (!p) {
					kg__str_free(&id);
					err = KERR_COORDINATOR_NOT_AVAILABLE;
					goto error_drop;
				}
				p->id = id;
				p->deadline = now + r->session_timeout;
				p->next = g->pending;
				g->pending = p;
				g->npending++;
				kg__wake_timer(c);
				enc_join_error(resp, v, KERR_MEMBER_ID_REQUIRED, kg_k(&p->id));
				return KAAS_HANDLED;
			}
		}
		if (g->nmembers + g->npending >= c->cfg.max_group_size) {
			kg__str_free(&id);
			err = KERR_GROUP_MAX_SIZE_REACHED;
			goto error_drop;
		}
		err = add_member(c, g, call, r, &id, now, &m);
		kg__str_free(&id);
		if (err)
			goto error_drop;
		join_and_wait(c, g, m, call, resp, &done, now, ob, &parked);
		return unpark_inline(parked, done);
	}

	kg_pending *p = pending_find(g, r->member_id);
	if (p) {
		kg_str id = p->id;
		p->id.s = NULL;
		p->id.len = -1;
		pending_remove(g, p);
		err = add_member(c, g, call, r, &id, now, &m);
		kg__str_free(&id);
		if (err)
			goto error_drop;
		join_and_wait(c, g, m, call, resp, &done, now, ob, &parked);
		return unpark_inline(parked, done);
	}
	if (kg__member_fenced(g, r->member_id, r->instance_id)) {
		err = KERR_FENCED_INSTANCE_ID;
		goto error;
	}
	m = kg__member_find(g, r->member_id);
	if (!m) {
		err = KERR_UNKNOWN_MEMBER_ID;
		goto error;
	}
	switch (g->state) {
	case KC_PREPARING:
		if (update_member(m, call, r)) {
			err = KERR_COORDINATOR_NOT_AVAILABLE;
			goto error;
		}
		join_and_wait(c, g, m, call, resp, &done, now, ob, &parked);
		return unpark_inline(parked, done);
	case KC_COMPLETING:
		if (same_protocols(m, r)) {
			/* A resend: the member lost our answer. */
			enc_join_current(resp, v, g, m);
			return KAAS_HANDLED;
		}
		if (update_member(m, call, r)) {
			err = KERR_COORDINATOR_NOT_AVAILABLE;
			goto error;
		}
		join_and_wait(c, g, m, call, resp, &done, now, ob, &parked);
		return unpark_inline(parked, done);
	default: /* Stable (Empty has no members) */
		if (kg__str_eq(&g->leader, &m->id) || !same_protocols(m, r)) {
			/* The leader rejoining means it wants a new assignment
			 * (e.g. its metadata changed); so does a changed member. */
			if (update_member(m, call, r)) {
				err = KERR_COORDINATOR_NOT_AVAILABLE;
				goto error;
			}
			join_and_wait(c, g, m, call, resp, &done, now, ob, &parked);
			return unpark_inline(parked, done);
		}
		m->deadline = now + m->session_timeout_ms;
		enc_join_current(resp, v, g, m);
		return KAAS_HANDLED;
	}
error_drop:
	kg__group_maybe_drop(c, g);
error:
	enc_join_error(resp, v, err, r->member_id);
	return KAAS_HANDLED;
}

int kg__api_join_group(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	int16_t v = call->version;
	kg_join_req r;
	memset(&r, 0, sizeof(r));
	r.instance_id.len = -1;
	int rc = -EBADMSG;
	KRD_STR(rd, 0, &r.group_id);
	KRD_I32(rd, &r.session_timeout);
	r.rebalance_timeout = r.session_timeout;
	if (v >= 1)
		KRD_I32(rd, &r.rebalance_timeout);
	KRD_STR(rd, 0, &r.member_id);
	if (v >= 5)
		KRD_STR(rd, 0, &r.instance_id);
	KRD_STR(rd, 0, &r.protocol_type);
	KRD_ARRAY(rd, 0, 6, &r.nprotos);
	if (r.nprotos < 0)
		r.nprotos = 0;
	r.pnames = calloc((size_t)r.nprotos + 1, sizeof(*r.pnames));
	r.pmetas = calloc((size_t)r.nprotos + 1, sizeof(*r.pmetas));
	if (!r.pnames || !r.pmetas) {
		rc = -ENOMEM;
		goto out;
	}
	for (int32_t i = 0; i < r.nprotos; i++) {
		KRD_STR(rd, 0, &r.pnames[i]);
		KRD_BYTES(rd, 0, &r.pmetas[i]);
		KRD_EXPECT(rd, r.pnames[i].len >= 0, "protocol name (null)");
	}
	KRD_EXPECT(rd, r.member_id.len >= 0, "member_id (null)");
	if (r.rebalance_timeout <= 0)
		r.rebalance_timeout = r.session_timeout;

	int16_t err = kg__group_status(c, r.group_id, 0);
	if (!err && (r.session_timeout < c->cfg.min_session_timeout_ms ||
		     r.session_timeout > c->cfg.max_session_timeout_ms))
		err = KERR_INVALID_SESSION_TIMEOUT;
	if (err) {
		enc_join_error(w, v, err, r.member_id);
		rc = KAAS_HANDLED;
		goto out;
	}
	kg_outbox ob;
	kg__outbox_init(&ob);
	pthread_mutex_lock(&c->mu);
	rc = join_locked(c, call, &r, w, &ob);
	pthread_mutex_unlock(&c->mu);
	kg__outbox_deliver(&ob);
	goto out;
err_parse:
	rc = -EBADMSG;
out:
	free(r.pnames);
	free(r.pmetas);
	return rc;
}

/* ---- SyncGroup ------------------------------------------------------------------------ */

int kg__api_sync_group(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	int16_t v = call->version;
	kw_str gid, member_id, inst = {NULL, -1};
	int32_t gen, n;
	kw_str *ids = NULL;
	kw_bytes *asg = NULL;
	int rc;
	KRD_STR(rd, 0, &gid);
	KRD_I32(rd, &gen);
	KRD_STR(rd, 0, &member_id);
	if (v >= 3)
		KRD_STR(rd, 0, &inst);
	KRD_ARRAY(rd, 0, 6, &n);
	if (n < 0)
		n = 0;
	ids = calloc((size_t)n + 1, sizeof(*ids));
	asg = calloc((size_t)n + 1, sizeof(*asg));
	if (!ids || !asg) {
		rc = -ENOMEM;
		goto out;
	}
	for (int32_t i = 0; i < n; i++) {
		KRD_STR(rd, 0, &ids[i]);
		KRD_BYTES(rd, 0, &asg[i]);
	}

	int16_t err = kg__group_status(c, gid, 0);
	if (err) {
		enc_sync(w, v, err, NULL, 0);
		rc = KAAS_HANDLED;
		goto out;
	}
	kg_outbox ob;
	kg__outbox_init(&ob);
	pthread_mutex_lock(&c->mu);
	int64_t now = kg__now(c);
	kg_group *g = NULL;
	kg_member *m = NULL;
	err = named_member(c, gid, member_id, inst, &g, &m);
	if (!err && gen != g->generation)
		err = KERR_ILLEGAL_GENERATION;
	if (!err && g->state == KC_PREPARING)
		err = KERR_REBALANCE_IN_PROGRESS;
	if (!err && g->state == KC_EMPTY)
		err = KERR_UNKNOWN_MEMBER_ID;
	if (!err && g->state == KC_COMPLETING && c->draining)
		err = KERR_NOT_COORDINATOR;
	rc = KAAS_HANDLED;
	if (err) {
		enc_sync(w, v, err, NULL, 0);
	} else if (g->state == KC_STABLE) {
		m->deadline = now + m->session_timeout_ms;
		enc_sync(w, v, KERR_NONE, m->assignment, m->assignment_len);
	} else { /* CompletingRebalance */
		int done = 0;
		if (kg_waiting(&m->sync))
			answer_sync(m, KERR_REBALANCE_IN_PROGRESS, &ob);
		park(&m->sync, call, w, &done);
		kg_waiter *parked = &m->sync;
		m->deadline = now + m->session_timeout_ms;
		if (kg__str_eq(&g->leader, &m->id)) {
			/* The leader's assignment completes the generation; members
			 * it left out get an empty assignment. */
			for (kg_member *x = g->members; x; x = x->next) {
				free(x->assignment);
				x->assignment = NULL;
				x->assignment_len = 0;
				kg_member_touch(x);
				for (int32_t i = 0; i < n; i++) {
					if (!kg__str_eqk(&x->id, ids[i]) || asg[i].len <= 0)
						continue;
					x->assignment = malloc((size_t)asg[i].len);
					if (x->assignment) {
						memcpy(x->assignment, asg[i].p, (size_t)asg[i].len);
						x->assignment_len = asg[i].len;
					}
					break;
				}
			}
			/* Everyone's SyncGroup is answered once the generation is on
			 * the volume (kg__group_meta_written), so a coordinator that
			 * restarts knows every assignment a member may hold. */
			g->sync_pending = 1;
			g->sync_seq = ++g->meta_seq;
			kg__flush_enqueue(c, g);
		}
		rc = unpark_inline(parked, done);
	}
	pthread_mutex_unlock(&c->mu);
	kg__outbox_deliver(&ob);
	goto out;
err_parse:
	rc = -EBADMSG;
out:
	free(ids);
	free(asg);
	return rc;
}

/* ---- Heartbeat -------------------------------------------------------------------------- */

int kg__api_heartbeat(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	int16_t v = call->version;
	kw_str gid, member_id, inst = {NULL, -1};
	int32_t gen;
	KRD_STR(rd, 0, &gid);
	KRD_I32(rd, &gen);
	KRD_STR(rd, 0, &member_id);
	if (v >= 3)
		KRD_STR(rd, 0, &inst);

	int16_t err = kg__group_status(c, gid, 0);
	if (!err) {
		pthread_mutex_lock(&c->mu);
		kg_group *g = NULL;
		kg_member *m = NULL;
		err = named_member(c, gid, member_id, inst, &g, &m);
		if (!err && g->state == KC_EMPTY)
			err = KERR_UNKNOWN_MEMBER_ID;
		if (!err && gen != g->generation)
			err = KERR_ILLEGAL_GENERATION;
		if (!err) {
			m->deadline = kg__now(c) + m->session_timeout_ms;
			if (g->state == KC_PREPARING)
				err = KERR_REBALANCE_IN_PROGRESS;
		}
		pthread_mutex_unlock(&c->mu);
	}
	if (v >= 1)
		kw_wr_i32(w, 0);
	kw_wr_i16(w, err);
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}

/* ---- LeaveGroup ----------------------------------------------------------------------------- */

int kg__api_leave_group(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	int16_t v = call->version;
	kw_str gid, one;
	int32_t n = 1;
	kw_str *ids = NULL, *insts = NULL;
	int16_t *errs = NULL;
	int rc;
	KRD_STR(rd, 0, &gid);
	if (v <= 2) {
		KRD_STR(rd, 0, &one);
	} else {
		KRD_ARRAY(rd, 0, 4, &n);
		if (n < 0)
			n = 0;
	}
	ids = calloc((size_t)n + 1, sizeof(*ids));
	insts = calloc((size_t)n + 1, sizeof(*insts));
	errs = calloc((size_t)n + 1, sizeof(*errs));
	if (!ids || !insts || !errs) {
		rc = -ENOMEM;
		goto out;
	}
	if (v <= 2) {
		ids[0] = one;
		insts[0].len = -1;
	} else {
		for (int32_t i = 0; i < n; i++) {
			KRD_STR(rd, 0, &ids[i]);
			KRD_STR(rd, 0, &insts[i]);
		}
	}

	int16_t top = kg__group_status(c, gid, 0);
	if (!top) {
		kg_outbox ob;
		kg__outbox_init(&ob);
		pthread_mutex_lock(&c->mu);
		int64_t now = kg__now(c);
		kg_group *g = NULL;
		top = kg__group_get(c, gid, 0, &g);
		for (int32_t i = 0; !top && i < n; i++) {
			kg_member *m = NULL;
			if (!g) {
				errs[i] = KERR_UNKNOWN_MEMBER_ID;
			} else if (insts[i].len >= 0) {
				m = member_by_instance(g, insts[i]);
				if (!m)
					errs[i] = KERR_UNKNOWN_MEMBER_ID;
				else if (ids[i].len > 0 && !kg__str_eqk(&m->id, ids[i]))
					errs[i] = KERR_FENCED_INSTANCE_ID;
			} else {
				kg_pending *p = pending_find(g, ids[i]);
				if (p) {
					pending_remove(g, p);
					try_complete_join(c, g, now, &ob);
					continue;
				}
				m = kg__member_find(g, ids[i]);
				if (!m)
					errs[i] = KERR_UNKNOWN_MEMBER_ID;
			}
			if (!errs[i] && m) {
				KLOG_DEBUG("coord", "group '%s': member %s leaves", g->id.s, m->id.s);
				remove_member(c, g, m, now, &ob);
			}
		}
		if (g)
			kg__group_maybe_drop(c, g);
		pthread_mutex_unlock(&c->mu);
		kg__outbox_deliver(&ob);
	}
	if (v >= 1)
		kw_wr_i32(w, 0);
	if (v <= 2) {
		/* One member: its error is the answer. */
		kw_wr_i16(w, top ? top : errs[0]);
	} else {
		kw_wr_i16(w, top);
		if (top) {
			kw_wr_array(w, 0, 0);
		} else {
			kw_wr_array(w, 0, n);
			for (int32_t i = 0; i < n; i++) {
				kw_wr_kstr(w, 0, ids[i]);
				kw_wr_kstr(w, 0, insts[i]);
				kw_wr_i16(w, errs[i]);
			}
		}
	}
	rc = KAAS_HANDLED;
	goto out;
err_parse:
	rc = -EBADMSG;
out:
	free(ids);
	free(insts);
	free(errs);
	return rc;
}

/* ---- for DescribeGroups and OffsetDelete ---------------------------------------------------- */

void kg__describe_members(const kg_group *g, int16_t v, kw_wr *w)
{
	int stable = g->state == KC_STABLE;
	kw_wr_array(w, 0, g->nmembers);
	for (kg_member *m = g->members; m; m = m->next) {
		kw_wr_kstr(w, 0, kg_k(&m->id));
		if (v >= 4)
			kw_wr_kstr(w, 0, kg_k(&m->instance_id));
		kw_wr_kstr(w, 0, kg_k(&m->client_id));
		kw_wr_kstr(w, 0, kg_k(&m->client_host));
		const kg_proto *p = stable ? member_proto(m, &g->protocol) : NULL;
		kw_wr_bytes(w, 0, p ? p->meta : NULL, p ? p->meta_len : 0);
		kw_wr_bytes(w, 0, stable ? m->assignment : NULL, stable ? m->assignment_len : 0);
	}
}

/* Is topic in any member's consumer-protocol subscription?  -1 when some
 * member's metadata cannot be read (then: assume it is). */
int kg__group_subscribed(const kg_group *g, kw_str topic)
{
	for (kg_member *m = g->members; m; m = m->next) {
		const kg_proto *p = member_proto(m, &g->protocol);
		if (!p)
			return -1;
		/* ConsumerProtocolSubscription: version int16, topics [string], ... */
		kw_rd rd;
		int16_t ver;
		int32_t n;
		kw_rd_init(&rd, p->meta, (size_t)p->meta_len);
		KRD_I16(&rd, &ver);
		KRD_ARRAY(&rd, 0, 2, &n);
		for (int32_t i = 0; i < n; i++) {
			kw_str t;
			KRD_STR(&rd, 0, &t);
			if (t.len == topic.len && t.len >= 0 && memcmp(t.s, topic.s, (size_t)t.len) == 0)
				return 1;
		}
		continue;
err_parse:
		return -1;
	}
	return 0;
}
