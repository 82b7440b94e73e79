/*
 * group_api.c — the four membership APIs of the classic consumer-group
 * protocol: JoinGroup v0-5, SyncGroup v0-3, Heartbeat v0-3, LeaveGroup v0-3.
 * Each reads its request, checks it under c->mu against the group's state
 * machine (group.c) and answers at once or parks (KAAS_DEFERRED) on the
 * member until the rebalance moves on.
 *
 * As in Kafka 2.x, member ids are assigned by the coordinator (v4+ first
 * answers MEMBER_ID_REQUIRED, KIP-394) and a static member's new
 * incarnation takes over its place and fences the old one (KIP-345).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/coord/group_int.h"
#include "kaas/core/leaders.h"
#include "kaas/proto/kerr.h"
#include "util/assert.h"
#include "util/log.h"

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
	if (!c->cfg.leaders)
		return KERR_NONE;
	/* Owner or not, from the map alone (no c->mu: callers may hold it);
	 * kg__group_get then checks the epoch and whether the shard is loaded. */
	kb_leaders *m = c->cfg.leaders(c->cfg.leaders_arg);
	int mine = m && m->nshards > 0 &&
		   m->shard_leader[kg_shard_of(gid.s, (size_t)gid.len, m->nshards)] == c->cfg.broker_id;
	kb_leaders_put(m);
	return mine ? KERR_NONE : KERR_NOT_COORDINATOR;
}

/* ---- JoinGroup ------------------------------------------------------------------------- */

/* One JoinGroup under c->mu: the request, the group it names and how it was
 * answered (rc: KAAS_HANDLED, or KAAS_DEFERRED when parked). */
typedef struct join_ctx {
	kg_coord *c;
	const kg_coord_call *call;
	const kg_join_req *r;
	kw_wr *resp;
	kg_outbox *ob;
	int64_t now;
	kg_group *g;
	int rc;
} join_ctx;

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
	    kg__str_set(&m->client_host, host, (int32_t)strlen(host)) || kg__member_set_protocols(m, r)) {
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
	if (kg__member_set_protocols(m, r))
		return -ENOMEM;
	m->session_timeout_ms = r->session_timeout;
	m->rebalance_timeout_ms = r->rebalance_timeout;
	if (call->client_id.len >= 0)
		kg_str_setk(&m->client_id, call->client_id);
	kg_member_touch(m);
	return 0;
}

/* The member (re)joins and waits for the rebalance; the answer may already
 * be in j->resp when the rebalance completed at once. */
static void join_and_wait(join_ctx *j, kg_member *m)
{
	if (kg_waiting(&m->join)) {
		/* A retry while the first attempt is parked: answer the old one
		 * so its connection is not held up. */
		kg__answer_join_error(m, KERR_REBALANCE_IN_PROGRESS, j->ob);
	}
	int done = 0;
	park(&m->join, j->call, j->resp, &done);
	m->join_seq = 0;
	kg__str_free(&m->join_leader);
	kg__group_maybe_rebalance(j->c, j->g, j->now, j->ob);
	j->rc = unpark_inline(&m->join, done);
}

/* A known member changed its request or must rejoin: update it and wait. */
static int16_t join_rejoin(join_ctx *j, kg_member *m)
{
	if (update_member(m, j->call, j->r))
		return KERR_COORDINATOR_NOT_AVAILABLE;
	join_and_wait(j, m);
	return KERR_NONE;
}

/* The answer for the current generation, without a rebalance. */
static int16_t join_answer_current(join_ctx *j, kg_member *m)
{
	kg__enc_join_current(j->resp, j->call->version, j->g, m);
	j->rc = KAAS_HANDLED;
	return KERR_NONE;
}

static int group_full(const join_ctx *j)
{
	return j->g->nmembers + j->g->npending >= j->c->cfg.max_group_size;
}

/* A new member with the id it was given (taken over): add it and wait. */
static int16_t join_new(join_ctx *j, kg_str *id)
{
	kg_member *m = NULL;
	int16_t err = add_member(j->c, j->g, j->call, j->r, id, j->now, &m);
	kg__str_free(id);
	if (err)
		return err;
	join_and_wait(j, m);
	return KERR_NONE;
}

/* The topics of a ConsumerProtocolSubscription (version, topics, ...):
 * *n of them into t (up to max); -1 when it is not one. */
static int sub_topics(const uint8_t *meta, int32_t len, kw_str *t, int32_t max, int32_t *n)
{
	kw_rd rd;
	int16_t ver;
	kw_rd_init(&rd, meta, (size_t)(len > 0 ? len : 0));
	KRD_I16(&rd, &ver);
	KRD_ARRAY(&rd, 0, 2, n);
	if (*n < 0 || *n > max)
		return -1;
	for (int32_t i = 0; i < *n; i++)
		KRD_STR(&rd, 0, &t[i]);
	return 0;
err_parse:
	return -1;
}

#define KC_STATIC_TOPICS_MAX 1024

/* Would a static member rejoining with r leave the group's choice as it
 * is (KIP-345: then no rebalance)?  Kafka asks only whether the selected
 * protocol stays; kaas also asks whether a consumer's subscribed topics
 * stay, because its assignment was computed for them.  Same protocol
 * names in the same order keep every vote; for the subscription the
 * topic sets are compared (owned partitions and user data may differ
 * after a restart), or the bytes when either is not a subscription. */
static int static_rejoin_keeps(const kg_group *g, const kg_member *m, const kg_join_req *r)
{
	if (m->nprotos != r->nprotos)
		return 0;
	int32_t sel = -1;
	for (int32_t i = 0; i < r->nprotos; i++) {
		if (!kg__str_eqk(&m->protos[i].name, r->pnames[i]))
			return 0;
		if (kg__str_eq(&m->protos[i].name, &g->protocol))
			sel = i;
	}
	if (sel < 0)
		return 0;
	const kg_proto *old = &m->protos[sel];
	const uint8_t *nm = (const uint8_t *)r->pmetas[sel].p;
	int32_t nlen = r->pmetas[sel].len < 0 ? 0 : r->pmetas[sel].len;
	static const char consumer[] = "consumer";
	if (!kg__str_eqk(&g->protocol_type, (kw_str){consumer, (int32_t)sizeof(consumer) - 1}))
		return 1;
	kw_str *a = calloc(2 * KC_STATIC_TOPICS_MAX, sizeof(*a));
	if (!a)
		return 0;
	kw_str *b = a + KC_STATIC_TOPICS_MAX;
	int32_t na = 0, nb = 0, same;
	if (sub_topics(old->meta, old->meta_len, a, KC_STATIC_TOPICS_MAX, &na) ||
	    sub_topics(nm, nlen, b, KC_STATIC_TOPICS_MAX, &nb)) {
		same = old->meta_len == nlen && (!nlen || memcmp(old->meta, nm, (size_t)nlen) == 0);
	} else {
		same = na == nb;
		for (int32_t i = 0; same && i < na; i++) {
			int found = 0;
			for (int32_t j = 0; !found && j < nb; j++)
				found = a[i].len == b[j].len &&
					(a[i].len <= 0 || memcmp(a[i].s, b[j].s, (size_t)a[i].len) == 0);
			same = found;
		}
	}
	free(a);
	return same;
}

/* Static member (KIP-345) without a member id: a new incarnation of the
 * instance takes over its place and fences the old member id; an instance
 * not seen before joins as a new member. */
static int16_t join_static(join_ctx *j)
{
	kg_group *g = j->g;
	kg_str id = KC_STR_NULL;
	if (kg__new_member_id(j->r->instance_id, &id))
		return KERR_COORDINATOR_NOT_AVAILABLE;
	kg_member *m = kg__member_by_instance(g, j->r->instance_id);
	if (!m) {
		if (group_full(j)) {
			kg__str_free(&id);
			return KERR_GROUP_MAX_SIZE_REACHED;
		}
		return join_new(j, &id);
	}
	int keep = g->state == KC_STABLE && static_rejoin_keeps(g, m, j->r);
	kg_str old_leader = KC_STR_NULL;
	if (keep && kg__str_set(&old_leader, g->leader.s, g->leader.len)) {
		kg__str_free(&id);
		return KERR_COORDINATOR_NOT_AVAILABLE;
	}
	kg__answer_join_error(m, KERR_FENCED_INSTANCE_ID, j->ob);
	kg__answer_sync(m, KERR_FENCED_INSTANCE_ID, j->ob);
	if (kg__str_eq(&g->leader, &m->id))
		kg__str_set(&g->leader, id.s, id.len);
	kg__str_free(&m->id);
	m->id = id;
	kg_member_touch(m);
	kg__group_meta_changed(j->c, g); /* the old id stays fenced after a restart */
	if (update_member(m, j->call, j->r)) {
		kg__str_free(&old_leader);
		return KERR_COORDINATOR_NOT_AVAILABLE;
	}
	m->deadline = j->now + j->r->session_timeout;
	if (!keep) {
		join_and_wait(j, m);
		return KERR_NONE;
	}
	/* KIP-345: a restart within the session timeout keeps the assignment;
	 * the others see nothing.  Answered once the new id is on the volume
	 * (kg__group_meta_written), so a restarted coordinator fences the old
	 * id too. */
	int done = 0;
	park(&m->join, j->call, j->resp, &done);
	m->join_seq = g->meta_seq;
	kg__str_free(&m->join_leader);
	m->join_leader = old_leader;
	KLOG_INFO("coord", "group '%s': static member %.*s rejoined as %s; generation %d kept, no rebalance",
		  g->id.s, j->r->instance_id.len > 200 ? 200 : j->r->instance_id.len, j->r->instance_id.s,
		  m->id.s, g->generation);
	j->rc = unpark_inline(&m->join, done);
	return KERR_NONE;
}

/* KIP-394 (v4+): hand out the member id first; the member must come back
 * with it within its session timeout. */
static int16_t join_require_id(join_ctx *j, kg_str *id)
{
	kg_group *g = j->g;
	kg_pending *p = calloc(1, sizeof(*p));
	if (!p) {
		kg__str_free(id);
		return KERR_COORDINATOR_NOT_AVAILABLE;
	}
	p->id = *id;
	p->deadline = j->now + j->r->session_timeout;
	p->next = g->pending;
	g->pending = p;
	g->npending++;
	kg__wake_timer(j->c);
	kg__enc_join_error(j->resp, j->call->version, KERR_MEMBER_ID_REQUIRED, kg_k(&p->id));
	j->rc = KAAS_HANDLED;
	return KERR_NONE;
}

/* Dynamic member without a member id: v4+ gets one to come back with,
 * older clients join at once. */
static int16_t join_dynamic(join_ctx *j)
{
	if (group_full(j))
		return KERR_GROUP_MAX_SIZE_REACHED;
	kg_str id = KC_STR_NULL;
	if (kg__new_member_id(j->call->client_id, &id))
		return KERR_COORDINATOR_NOT_AVAILABLE;
	if (j->call->version >= 4)
		return join_require_id(j, &id);
	if (group_full(j)) {
		kg__str_free(&id);
		return KERR_GROUP_MAX_SIZE_REACHED;
	}
	return join_new(j, &id);
}

/* A member comes back with the id MEMBER_ID_REQUIRED gave it. */
static int16_t join_pending(join_ctx *j, kg_pending *p)
{
	kg_str id = p->id;
	p->id.s = NULL;
	p->id.len = -1;
	kg__pending_remove(j->g, p);
	return join_new(j, &id);
}

/* A member the group knows: rejoin when a rebalance is under way or the
 * member (or the leader) wants a new assignment, else the current answer. */
static int16_t join_known(join_ctx *j)
{
	kg_group *g = j->g;
	const kg_join_req *r = j->r;
	if (kg__member_fenced(g, r->member_id, r->instance_id))
		return KERR_FENCED_INSTANCE_ID;
	kg_member *m = kg__member_find(g, r->member_id);
	if (!m)
		return KERR_UNKNOWN_MEMBER_ID;
	switch (g->state) {
	case KC_PREPARING:
		return join_rejoin(j, m);
	case KC_COMPLETING:
		if (kg__member_same_protocols(m, r))
			return join_answer_current(j, m); /* a resend: it lost our answer */
		return join_rejoin(j, m);
	default: /* Stable (Empty has no members) */
		/* The leader rejoining means it wants a new assignment (e.g. its
		 * metadata changed); so does a changed member. */
		if (kg__str_eq(&g->leader, &m->id) || !kg__member_same_protocols(m, r))
			return join_rejoin(j, m);
		m->deadline = j->now + m->session_timeout_ms;
		return join_answer_current(j, m);
	}
}

/* The group a JoinGroup may join (created for a member without an id), or
 * the error to answer. */
static int16_t join_find_group(join_ctx *j, int unknown)
{
	if (j->c->draining)
		return KERR_NOT_COORDINATOR; /* shutting down: nothing parks any more */
	int16_t err = kg__group_get(j->c, j->r->group_id, unknown, &j->g);
	if (err)
		return err;
	if (!j->g)
		return KERR_UNKNOWN_MEMBER_ID;
	if (j->g->state == KC_DEAD)
		return KERR_COORDINATOR_NOT_AVAILABLE;
	return KERR_NONE;
}

static int join_locked(kg_coord *c, const kg_coord_call *call, kg_join_req *r, kw_wr *resp,
		       kg_outbox *ob)
{
	join_ctx j = {.c = c, .call = call, .r = r, .resp = resp, .ob = ob, .now = kg__now(c)};
	int unknown = r->member_id.len <= 0;
	int16_t err = join_find_group(&j, unknown);
	if (err)
		goto error;
	int32_t gen0 = j.g->generation;
	/* A request that fails before the member is in the group may leave the
	 * group idle (created for it, or its last id given up): drop it then. */
	int may_drop = 1;
	if (!kg__group_supports_protocols(j.g, r)) {
		err = KERR_INCONSISTENT_GROUP_PROTOCOL;
	} else if (unknown) {
		err = r->instance_id.len >= 0 ? join_static(&j) : join_dynamic(&j);
	} else {
		kg_pending *p = kg__pending_find(j.g, r->member_id);
		if (p) {
			err = join_pending(&j, p);
		} else {
			may_drop = 0;
			err = join_known(&j);
		}
	}
	kg__group_check(j.g);
	KAAS_ASSERT(j.g->generation >= gen0);
	if (!err)
		return j.rc;
	if (may_drop)
		kg__group_maybe_drop(c, j.g);
error:
	kg__enc_join_error(resp, call->version, err, r->member_id);
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

	int16_t err = kg__group_authz(c, call, r.group_id, 0, KB_OP_READ);
	if (!err && (r.session_timeout < c->cfg.min_session_timeout_ms ||
		     r.session_timeout > c->cfg.max_session_timeout_ms))
		err = KERR_INVALID_SESSION_TIMEOUT;
	if (err) {
		kg__enc_join_error(w, v, err, r.member_id);
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

/* A SyncGroup request as read off the wire (its strings point into it). */
typedef struct sync_req {
	kw_str gid, member_id, inst;
	int32_t gen, n;
	kw_str *ids;      /* the leader's assignment: member ids ... */
	kw_bytes *asg;    /* ... and what each gets */
} sync_req;

/* The leader's assignment completes the generation; members it left out get
 * an empty assignment. */
static void take_assignments(kg_group *g, const sync_req *q)
{
	for (kg_member *x = g->members; x; x = x->next) {
		free(x->assignment);
		x->assignment = NULL;
		x->assignment_len = 0;
		kg_member_touch(x);
		for (int32_t i = 0; i < q->n; i++) {
			if (!kg__str_eqk(&x->id, q->ids[i]) || q->asg[i].len <= 0)
				continue;
			x->assignment = malloc((size_t)q->asg[i].len);
			if (x->assignment) {
				memcpy(x->assignment, q->asg[i].p, (size_t)q->asg[i].len);
				x->assignment_len = q->asg[i].len;
			}
			break;
		}
	}
}

static int sync_locked(kg_coord *c, const kg_coord_call *call, const sync_req *q, kw_wr *w,
		       kg_outbox *ob)
{
	int16_t v = call->version;
	int64_t now = kg__now(c);
	kg_group *g = NULL;
	kg_member *m = NULL;
	int16_t err = kg__named_member(c, q->gid, q->member_id, q->inst, &g, &m);
	if (!err && q->gen != g->generation)
		err = KERR_ILLEGAL_GENERATION;
	if (!err && g->state == KC_PREPARING)
		err = KERR_REBALANCE_IN_PROGRESS;
	if (!err && g->state == KC_EMPTY)
		err = KERR_UNKNOWN_MEMBER_ID;
	if (!err && g->state == KC_COMPLETING && c->draining)
		err = KERR_NOT_COORDINATOR;
	int rc = KAAS_HANDLED;
	if (err) {
		kg__enc_sync(w, v, err, NULL, 0);
	} else if (g->state == KC_STABLE) {
		m->deadline = now + m->session_timeout_ms;
		kg__enc_sync(w, v, KERR_NONE, m->assignment, m->assignment_len);
	} else { /* CompletingRebalance */
		int done = 0;
		if (kg_waiting(&m->sync))
			kg__answer_sync(m, KERR_REBALANCE_IN_PROGRESS, ob);
		park(&m->sync, call, w, &done);
		m->deadline = now + m->session_timeout_ms;
		if (kg__str_eq(&g->leader, &m->id)) {
			take_assignments(g, q);
			/* Everyone's SyncGroup is answered once the generation is on
			 * the volume (kg__group_meta_written), so a coordinator that
			 * restarts knows every assignment a member may hold. */
			g->sync_pending = 1;
			g->sync_seq = ++g->meta_seq;
			kg__flush_enqueue(c, g);
		}
		rc = unpark_inline(&m->sync, done);
	}
	if (g)
		kg__group_check(g);
	return rc;
}

int kg__api_sync_group(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	int16_t v = call->version;
	sync_req q = {.inst = {NULL, -1}};
	int rc;
	KRD_STR(rd, 0, &q.gid);
	KRD_I32(rd, &q.gen);
	KRD_STR(rd, 0, &q.member_id);
	if (v >= 3)
		KRD_STR(rd, 0, &q.inst);
	KRD_ARRAY(rd, 0, 6, &q.n);
	if (q.n < 0)
		q.n = 0;
	q.ids = calloc((size_t)q.n + 1, sizeof(*q.ids));
	q.asg = calloc((size_t)q.n + 1, sizeof(*q.asg));
	if (!q.ids || !q.asg) {
		rc = -ENOMEM;
		goto out;
	}
	for (int32_t i = 0; i < q.n; i++) {
		KRD_STR(rd, 0, &q.ids[i]);
		KRD_BYTES(rd, 0, &q.asg[i]);
	}

	int16_t err = kg__group_authz(c, call, q.gid, 0, KB_OP_READ);
	if (err) {
		kg__enc_sync(w, v, err, NULL, 0);
		rc = KAAS_HANDLED;
		goto out;
	}
	kg_outbox ob;
	kg__outbox_init(&ob);
	pthread_mutex_lock(&c->mu);
	rc = sync_locked(c, call, &q, w, &ob);
	pthread_mutex_unlock(&c->mu);
	kg__outbox_deliver(&ob);
	goto out;
err_parse:
	rc = -EBADMSG;
out:
	free(q.ids);
	free(q.asg);
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

	int16_t err = kg__group_authz(c, call, gid, 0, KB_OP_READ);
	if (!err) {
		pthread_mutex_lock(&c->mu);
		kg_group *g = NULL;
		kg_member *m = NULL;
		err = kg__named_member(c, gid, member_id, inst, &g, &m);
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

/* One leaving member (v3+: several per request, each by member id or by
 * group.instance.id): 0 or the error to answer for it. */
static int16_t leave_one(kg_coord *c, kg_group *g, kw_str id, kw_str inst, int64_t now,
			 kg_outbox *ob)
{
	kg_member *m = NULL;
	if (!g)
		return KERR_UNKNOWN_MEMBER_ID;
	if (inst.len >= 0) {
		m = kg__member_by_instance(g, inst);
		if (!m)
			return KERR_UNKNOWN_MEMBER_ID;
		if (id.len > 0 && !kg__str_eqk(&m->id, id))
			return KERR_FENCED_INSTANCE_ID;
	} else {
		kg_pending *p = kg__pending_find(g, id);
		if (p) {
			kg__pending_remove(g, p);
			kg__group_try_complete_join(c, g, now, ob);
			return KERR_NONE;
		}
		m = kg__member_find(g, id);
		if (!m)
			return KERR_UNKNOWN_MEMBER_ID;
	}
	KLOG_DEBUG("coord", "group '%s': member %s leaves", g->id.s, m->id.s);
	kg__group_remove_member(c, g, m, now, ob);
	return KERR_NONE;
}

/* The group-level error, or 0 with every member's in errs. */
static int16_t leave_locked(kg_coord *c, kw_str gid, const kw_str *ids, const kw_str *insts,
			    int16_t *errs, int32_t n, kg_outbox *ob)
{
	int64_t now = kg__now(c);
	kg_group *g = NULL;
	int16_t top = kg__group_get(c, gid, 0, &g);
	for (int32_t i = 0; !top && i < n; i++)
		errs[i] = leave_one(c, g, ids[i], insts[i], now, ob);
	if (g) {
		kg__group_check(g);
		kg__group_maybe_drop(c, g);
	}
	return top;
}

static void enc_leave(kw_wr *w, int16_t v, int16_t top, const kw_str *ids, const kw_str *insts,
		      const int16_t *errs, int32_t n)
{
	if (v >= 1)
		kw_wr_i32(w, 0);
	if (v <= 2) {
		/* One member: its error is the answer. */
		kw_wr_i16(w, top ? top : errs[0]);
		return;
	}
	kw_wr_i16(w, top);
	if (top) {
		kw_wr_array(w, 0, 0);
		return;
	}
	kw_wr_array(w, 0, n);
	for (int32_t i = 0; i < n; i++) {
		kw_wr_kstr(w, 0, ids[i]);
		kw_wr_kstr(w, 0, insts[i]);
		kw_wr_i16(w, errs[i]);
	}
}

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

	int16_t top = kg__group_authz(c, call, gid, 0, KB_OP_READ);
	if (!top) {
		kg_outbox ob;
		kg__outbox_init(&ob);
		pthread_mutex_lock(&c->mu);
		top = leave_locked(c, gid, ids, insts, errs, n, &ob);
		pthread_mutex_unlock(&c->mu);
		kg__outbox_deliver(&ob);
	}
	enc_leave(w, v, top, ids, insts, errs, n);
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

