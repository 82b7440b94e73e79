/*
 * group.c — the classic consumer-group protocol's state machine (Empty ->
 * PreparingRebalance -> CompletingRebalance -> Stable): the members of a
 * group, the answers it sends to parked requests, the transitions, the
 * timers (session expiry, rebalance deadlines) and the group's membership
 * on the volume.  The four membership APIs that drive it (JoinGroup v0-5,
 * SyncGroup v0-3, Heartbeat v0-3, LeaveGroup v0-3) are in group_api.c;
 * group_int.h is what the two share.
 *
 * It behaves as Kafka 2.x's GroupCoordinator does: a rebalance waits for
 * every known member to rejoin or for the rebalance timeout, the first
 * rebalance of an empty group waits group.initial.rebalance.delay.ms
 * (extended while members keep arriving), members that stop heartbeating
 * for their session timeout are removed.  As in Kafka, a generation is
 * handed out (the SyncGroup answers) only once its membership and
 * assignments are in the group file, and departures are written too, so a
 * restarted coordinator restores the group (kg__group_restore) and its
 * members carry on.  docs/groups.md tells the story for users.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kaas/coord/group_int.h"
#include "kaas/proto/kerr.h"
#include "util/assert.h"
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

kg_member *kg__member_by_instance(kg_group *g, kw_str inst)
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
	kg_member *m = kg__member_by_instance(g, inst);
	return m && !kg__str_eqk(&m->id, member_id);
}

/* The group and member a SyncGroup or Heartbeat names (under c->mu), or
 * the error to answer: the group's (loading it), UNKNOWN_MEMBER_ID for a
 * group or member that is not there, FENCED_INSTANCE_ID for a static
 * member's older incarnation. */
int16_t kg__named_member(kg_coord *c, kw_str gid, kw_str member_id, kw_str inst, kg_group **g,
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

kg_pending *kg__pending_find(kg_group *g, kw_str id)
{
	if (id.len <= 0)
		return NULL;
	for (kg_pending *p = g->pending; p; p = p->next)
		if (kg__str_eqk(&p->id, id))
			return p;
	return NULL;
}

void kg__pending_remove(kg_group *g, kg_pending *p)
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
	kg__str_free(&m->join_leader);
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
int kg__new_member_id(kw_str prefix, kg_str *out)
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

int kg__member_set_protocols(kg_member *m, const kg_join_req *r)
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

int kg__member_same_protocols(const kg_member *m, const kg_join_req *r)
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
int kg__group_supports_protocols(const kg_group *g, const kg_join_req *r)
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

void kg__enc_join_error(kw_wr *w, int16_t v, int16_t err, kw_str member_id)
{
	enc_join(w, v, err, -1, NULL, NULL, member_id, NULL);
}

/* The answer to a member's JoinGroup for the current generation. */
void kg__enc_join_current(kw_wr *w, int16_t v, const kg_group *g, const kg_member *m)
{
	int leader = kg__str_eq(&g->leader, &m->id);
	enc_join(w, v, KERR_NONE, g->generation, &g->protocol, &g->leader, kg_k(&m->id),
		 leader ? g : NULL);
}

void kg__enc_sync(kw_wr *w, int16_t v, int16_t err, const uint8_t *a, int32_t alen)
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

void kg__answer_join_error(kg_member *m, int16_t err, kg_outbox *ob)
{
	if (!kg_waiting(&m->join))
		return;
	kw_wr w = KAAS_WR_INIT;
	kg__enc_join_error(&w, m->join.version, err, kg_k(&m->id));
	answer_join(&m->join, ob, &w);
}

void kg__answer_sync(kg_member *m, int16_t err, kg_outbox *ob)
{
	if (!kg_waiting(&m->sync))
		return;
	kw_wr w = KAAS_WR_INIT;
	if (err)
		kg__enc_sync(&w, m->sync.version, err, NULL, 0);
	else
		kg__enc_sync(&w, m->sync.version, KERR_NONE, m->assignment, m->assignment_len);
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

void kg__group_try_complete_join(kg_coord *c, kg_group *g, int64_t now, kg_outbox *ob)
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
			kg__answer_sync(m, KERR_REBALANCE_IN_PROGRESS, ob);
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
	kg__group_try_complete_join(c, g, now, ob);
}

void kg__group_maybe_rebalance(kg_coord *c, kg_group *g, int64_t now, kg_outbox *ob)
{
	if (g->state == KC_STABLE || g->state == KC_COMPLETING || g->state == KC_EMPTY)
		prepare_rebalance(c, g, now, ob);
	else if (g->state == KC_PREPARING)
		kg__group_try_complete_join(c, g, now, ob);
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
			kg__answer_sync(m, KERR_UNKNOWN_MEMBER_ID, ob);
			kg__member_free(m);
			dropped = 1;
		} else {
			pp = &m->next;
		}
	}
	g->initial_delay = 0;
	/* Generations only move forward: SyncGroup, Heartbeat and OffsetCommit
	 * fence a member's older generation by comparing them. */
	KAAS_ASSERT(g->generation >= 0);
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
		kg__enc_join_current(&w, m->join.version, g, m);
		answer_join(&m->join, ob, &w);
		m->join_seq = 0;
		kg__str_free(&m->join_leader);
		m->is_new = 0;
		m->deadline = now + m->session_timeout_ms;
	}
	KLOG_DEBUG("coord", "group '%s': generation %d with %d member(s), protocol %s", g->id.s,
		   g->generation, g->nmembers, g->protocol.s ? g->protocol.s : "-");
	kg__wake_timer(c);
}

/* Leave, session expiry, fencing: the member goes; the group rebalances. */
void kg__group_remove_member(kg_coord *c, kg_group *g, kg_member *m, int64_t now, kg_outbox *ob)
{
	unlink_member(g, m);
	kg__answer_join_error(m, KERR_UNKNOWN_MEMBER_ID, ob);
	kg__answer_sync(m, KERR_UNKNOWN_MEMBER_ID, ob);
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
		kg__group_try_complete_join(c, g, now, ob);
}

void kg__group_tick(kg_coord *c, kg_group *g, int64_t now, int64_t *next, kg_outbox *ob)
{
	int changed = 0;
	int32_t gen0 = g->generation;
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
			kg__pending_remove(g, p);
			changed = 1;
		} else if (p->deadline < *next) {
			*next = p->deadline;
		}
	}
	if (changed)
		kg__group_try_complete_join(c, g, now, ob);
restart:
	for (kg_member *m = g->members; m; m = m->next) {
		if (kg_waiting(&m->join) || kg_waiting(&m->sync))
			continue; /* a parked request keeps its member alive */
		if (m->deadline <= now) {
			KLOG_INFO("coord", "group '%s': member %s expired (no heartbeat for %d ms)",
				  g->id.s, m->id.s, m->session_timeout_ms);
			kg__group_remove_member(c, g, m, now, ob);
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
	kg__group_check(g);
	KAAS_ASSERT(g->generation >= gen0);
}

void kg__group_shutdown(kg_coord *c, kg_group *g, kg_outbox *ob)
{
	/* SyncGroups that wait for the write of their assignment are answered
	 * by that write, which the flusher finishes before the coordinator
	 * closes; only at close is anything still waiting told to go. */
	int keep_syncs = g->sync_pending && !c->stop;
	for (kg_member *m = g->members; m; m = m->next) {
		kg__answer_join_error(m, KERR_NOT_COORDINATOR, ob);
		if (!keep_syncs)
			kg__answer_sync(m, KERR_NOT_COORDINATOR, ob);
	}
}

/* ---- invariants ------------------------------------------------------------------ */

void kg__group_check(const kg_group *g)
{
#ifdef KAAS_ASSERTS
	int32_t n = 0, np = 0;
	for (const kg_member *m = g->members; m; m = m->next) {
		n++;
		/* A static member's restart into a Stable group waits for its
		 * write (join_seq) without a rebalance. */
		KAAS_ASSERT(!kg_waiting(&m->join) || g->state == KC_PREPARING ||
			    (m->join_seq && g->state == KC_STABLE));
		KAAS_ASSERT(!kg_waiting(&m->sync) || g->state == KC_COMPLETING);
	}
	for (const kg_pending *p = g->pending; p; p = p->next)
		np++;
	KAAS_ASSERT(n == g->nmembers);
	KAAS_ASSERT(np == g->npending);
	KAAS_ASSERT(g->state != KC_EMPTY || g->nmembers == 0);
	KAAS_ASSERT(!g->sync_pending || g->state == KC_COMPLETING);
	KAAS_ASSERT(g->generation >= 0);
#else
	(void)g;
#endif
}

/* ---- membership on the volume ---------------------------------------------------------- */

void kg__group_meta_changed(kg_coord *c, kg_group *g)
{
	g->meta_seq++;
	kg__flush_enqueue(c, g);
}

/* A static member's new incarnation, taken in without a rebalance: the
 * current generation and its assignment, and as leader the id the group
 * had when it joined — never its own new id, so a member that led before
 * does not compute an assignment a Stable group would not hand out
 * (Kafka answers the same way). */
static void answer_static_rejoin(const kg_group *g, kg_member *m, kg_outbox *ob)
{
	kw_wr w = KAAS_WR_INIT;
	const kg_str *leader = m->join_leader.len >= 0 ? &m->join_leader : &g->leader;
	enc_join(&w, m->join.version, KERR_NONE, g->generation, &g->protocol, leader, kg_k(&m->id), NULL);
	m->join_seq = 0;
	kg__str_free(&m->join_leader);
	kg__outbox_add(ob, &m->join, &w);
}

void kg__group_meta_written(kg_coord *c, kg_group *g, int ok, uint64_t upto, kg_outbox *ob)
{
	int64_t now = kg__now(c);
	for (kg_member *m = g->members; m; m = m->next) {
		if (!m->join_seq || !kg_waiting(&m->join) || (ok && m->join_seq > upto))
			continue;
		if (ok && g->state == KC_STABLE) {
			answer_static_rejoin(g, m, ob);
		} else if (!ok) {
			/* Its new id is not on the volume: it looks the coordinator
			 * up and joins again (the write is re-driven meanwhile). */
			m->join_seq = 0;
			kg__str_free(&m->join_leader);
			kg__answer_join_error(m, KERR_NOT_COORDINATOR, ob);
		}
	}
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
				kg__answer_sync(m, KERR_NONE, ob);
			}
			kg__wake_timer(c);
			KLOG_DEBUG("coord", "group '%s': generation %d is stable", g->id.s, g->generation);
		}
		kg__group_check(g);
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
			kg__answer_sync(m, KERR_NOT_COORDINATOR, ob);
		prepare_rebalance(c, g, now, ob);
	}
	kg__group_check(g);
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
	kg__group_check(g);
	kg__wake_timer(c);
	KLOG_INFO("coord", "group '%s': restored generation %d with %d member(s)%s", g->id.s,
		  g->generation, g->nmembers, g->state == KC_PREPARING ? ", rebalancing" : "");
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
