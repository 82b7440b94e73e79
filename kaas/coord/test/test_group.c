/* test_group.c — the group state machine through its APIs: join, sync,
 * heartbeat, leave, session expiry, rebalance timeouts and delays, with one
 * to three members, generations, fencing and the errors Kafka clients
 * depend on. */
#include "kaas/coord/test/harness.h"
#include "util/test/ktest.h"

#define G "grp"
#define SESSION 10000
#define REBAL 30000
#define PROTOS "range=mA,roundrobin=mB"

/* A parked or answered JoinGroup of one member. */
typedef struct mjoin {
	th_resp r;
	int rc;
	int16_t v;
	char id[256];
} mjoin;

static int join_as(th *t, mjoin *m, int16_t v, const char *member, const char *inst,
		   const char *protos)
{
	kw_wr w = KAAS_WR_INIT;
	th_resp_free(&m->r);
	m->v = v;
	jg_req(&w, v, G, SESSION, REBAL, member, inst, "consumer", protos);
	m->rc = th_call(t, KAAS_API_JOIN_GROUP, v, &w, &m->r);
	return m->rc;
}

/* v4+: the first join hands out the id; the second one parks. */
static void join_new(th *t, mjoin *m, const char *protos)
{
	memset(m, 0, sizeof(*m));
	ck_assert_int_eq(join_as(t, m, 5, "", NULL, protos), KAAS_HANDLED);
	jg_resp jr;
	jg_parse(&m->r, 5, &jr);
	ck_assert_int_eq(jr.err, KERR_MEMBER_ID_REQUIRED);
	ck_assert_int_eq(jr.gen, -1);
	ck_assert(strncmp(jr.member, "cli-", 4) == 0); /* client id + "-" + uuid */
	ck_assert_uint_eq(strlen(jr.member), 4 + 36);
	snprintf(m->id, sizeof(m->id), "%s", jr.member);
	join_as(t, m, 5, m->id, NULL, protos);
}

static void joined(mjoin *m, jg_resp *jr)
{
	ck_assert_int_eq(m->r.got, 1);
	jg_parse(&m->r, m->v, jr);
	ck_assert_int_eq(jr->err, KERR_NONE);
	ck_assert_str_eq(jr->member, m->id);
}

static int16_t sync_as(th *t, int16_t v, const char *member, int32_t gen, int n, const char *const *ids,
		       const char *const *asg, th_resp *r)
{
	kw_wr w = KAAS_WR_INIT;
	sg_req(&w, v, G, gen, member, NULL, n, ids, asg);
	return (int16_t)th_call(t, KAAS_API_SYNC_GROUP, v, &w, r);
}

/* The leader's SyncGroup completing a generation: it waits for the write
 * of the group file, then it (and every parked SyncGroup) is answered. */
static void sync_leader(th *t, int16_t v, const char *member, int32_t gen, int n,
			const char *const *ids, const char *const *asg, th_resp *r)
{
	ck_assert_int_eq(sync_as(t, v, member, gen, n, ids, asg, r), KAAS_DEFERRED);
	ck_assert_int_eq(r->got, 0);
	kg_coord_flush(t->c);
	ck_assert_int_eq(r->got, 1);
}

static void describe(th *t, int16_t v, const char *group, char *state, int32_t *nmembers,
		     char *assignment0)
{
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	kw_wr_array(&w, 0, 1);
	kw_wr_str(&w, 0, group);
	if (v >= 3)
		kw_wr_i8(&w, 1);
	ck_assert_int_eq(th_call(t, KAAS_API_DESCRIBE_GROUPS, v, &w, &r), KAAS_HANDLED);
	tr rr;
	tr_init(&rr, &r, 0);
	if (v >= 1)
		ck_assert_int_eq(tr_i32(&rr), 0);
	ck_assert_int_eq(tr_arr(&rr), 1);
	ck_assert_int_eq(tr_i16(&rr), 0);
	kw_str id = tr_str(&rr);
	ck_assert_kstr(id, group);
	kw_str st = tr_str(&rr);
	snprintf(state, 32, "%.*s", st.len, st.s);
	tr_str(&rr); /* protocol type */
	tr_str(&rr); /* protocol */
	*nmembers = tr_arr(&rr);
	for (int32_t i = 0; i < *nmembers; i++) {
		tr_str(&rr);
		if (v >= 4)
			tr_str(&rr);
		kw_str cid = tr_str(&rr);
		ck_assert_kstr(cid, "cli");
		kw_str host = tr_str(&rr);
		ck_assert_kstr(host, "/127.0.0.1");
		tr_bytes(&rr);
		kw_bytes a = tr_bytes(&rr);
		if (i == 0 && assignment0)
			snprintf(assignment0, 64, "%.*s", a.len < 0 ? 0 : a.len, a.len > 0 ? (const char *)a.p : "");
	}
	if (v >= 3)
		ck_assert_int_eq(tr_i32(&rr), (1 << 3) | (1 << 6) | (1 << 8));
	tr_end(&rr);
	th_resp_free(&r);
}

/* One member: id handshake, initial delay, sync, heartbeats, leave. */
START_TEST(single_member_lifecycle)
{
	th t;
	th_open(&t);
	mjoin a;
	join_new(&t, &a, PROTOS);
	/* The first rebalance of an empty group waits the initial delay. */
	ck_assert_int_eq(a.rc, KAAS_DEFERRED);
	ck_assert_int_eq(a.r.got, 0);
	kg_coord_tick(t.c);
	jg_resp jr;
	joined(&a, &jr);
	ck_assert_int_eq(jr.gen, 1);
	ck_assert_str_eq(jr.leader, a.id);
	ck_assert_str_eq(jr.proto, "range");
	ck_assert_int_eq(jr.nmembers, 1);
	ck_assert_str_eq(jr.members[0], a.id);
	ck_assert_str_eq(jr.metas[0], "mA");
	ck_assert_str_eq(jr.insts[0], "null");

	char state[32], asg[64];
	int32_t n;
	describe(&t, 4, G, state, &n, NULL);
	ck_assert_str_eq(state, "CompletingRebalance");
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, NULL), KERR_NONE);

	th_resp sr = {0};
	const char *ids[] = {a.id}, *as[] = {"P0P1"};
	sync_leader(&t, 3, a.id, 1, 1, ids, as, &sr);
	ck_assert_int_eq(sg_parse(&sr, 3, asg, sizeof(asg)), KERR_NONE);
	ck_assert_str_eq(asg, "P0P1");
	th_resp_free(&sr);
	describe(&t, 4, G, state, &n, asg);
	ck_assert_str_eq(state, "Stable");
	ck_assert_int_eq(n, 1);
	ck_assert_str_eq(asg, "P0P1");
	/* A repeated SyncGroup in Stable returns the same assignment. */
	ck_assert_int_eq(sync_as(&t, 0, a.id, 1, 0, NULL, NULL, &sr), KAAS_HANDLED);
	ck_assert_int_eq(sg_parse(&sr, 0, asg, sizeof(asg)), KERR_NONE);
	ck_assert_str_eq(asg, "P0P1");
	th_resp_free(&sr);

	for (int v = 0; v <= 3; v++) {
		ck_assert_int_eq(th_heartbeat(&t, (int16_t)v, G, 1, a.id, NULL), KERR_NONE);
		ck_assert_int_eq(th_heartbeat(&t, (int16_t)v, G, 0, a.id, NULL), KERR_ILLEGAL_GENERATION);
		ck_assert_int_eq(th_heartbeat(&t, (int16_t)v, G, 1, "nobody", NULL), KERR_UNKNOWN_MEMBER_ID);
		ck_assert_int_eq(th_heartbeat(&t, (int16_t)v, "no-such-group", 1, a.id, NULL),
				 KERR_UNKNOWN_MEMBER_ID);
	}
	ck_assert_int_eq(th_heartbeat(&t, 0, "", 1, a.id, NULL), KERR_INVALID_GROUP_ID);

	int16_t merr = -1;
	ck_assert_int_eq(th_leave(&t, 3, G, "nobody", NULL, &merr), KERR_NONE);
	ck_assert_int_eq(merr, KERR_UNKNOWN_MEMBER_ID);
	ck_assert_int_eq(th_leave(&t, 1, G, a.id, NULL, &merr), KERR_NONE);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, NULL), KERR_UNKNOWN_MEMBER_ID);
	ck_assert_int_eq(th_leave(&t, 0, G, a.id, NULL, &merr), KERR_UNKNOWN_MEMBER_ID);
	/* No members and no offsets: once that is written, the group and its
	 * file (written when the generation completed) are gone. */
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(t.vol.vfs, "groups/" G ".json", &st), 0);
	kg_coord_flush(t.c);
	ck_assert_int_eq(sub_stat_path(t.vol.vfs, "groups/" G ".json", &st), -ENOENT);
	describe(&t, 0, G, state, &n, NULL);
	ck_assert_str_eq(state, "Dead");
	th_resp_free(&a.r);
	th_close(&t);
}
END_TEST

/* Members come and go; generations count up; parked requests are answered
 * exactly once. */
START_TEST(three_members_rebalance)
{
	th t;
	th_open(&t);
	mjoin a, b, c;
	jg_resp jr;
	join_new(&t, &a, PROTOS);
	kg_coord_tick(t.c);
	joined(&a, &jr);
	ck_assert_int_eq(jr.gen, 1);
	th_resp sr = {0};
	const char *ids1[] = {a.id}, *as1[] = {"all"};
	sync_leader(&t, 3, a.id, 1, 1, ids1, as1, &sr);
	th_resp_free(&sr);

	/* B arrives: the group rebalances; A learns it from its heartbeat. */
	join_new(&t, &b, PROTOS);
	ck_assert_int_eq(b.rc, KAAS_DEFERRED);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, NULL), KERR_REBALANCE_IN_PROGRESS);
	char state[32];
	int32_t n;
	describe(&t, 1, G, state, &n, NULL);
	ck_assert_str_eq(state, "PreparingRebalance");
	/* A SyncGroup of the old generation is told to rejoin. */
	ck_assert_int_eq(sync_as(&t, 3, a.id, 1, 0, NULL, NULL, &sr), KAAS_HANDLED);
	ck_assert_int_eq(sg_parse(&sr, 3, NULL, 0), KERR_REBALANCE_IN_PROGRESS);
	th_resp_free(&sr);
	/* A rejoins: everyone is in, the rebalance completes at once and A's
	 * own request is answered inline. */
	a.r.got = 0;
	ck_assert_int_eq(join_as(&t, &a, 5, a.id, NULL, PROTOS), KAAS_HANDLED);
	joined(&a, &jr);
	ck_assert_int_eq(jr.gen, 2);
	ck_assert_str_eq(jr.leader, a.id); /* the leader stays */
	ck_assert_int_eq(jr.nmembers, 2);
	joined(&b, &jr);
	ck_assert_int_eq(jr.gen, 2);
	ck_assert_str_eq(jr.leader, a.id);
	ck_assert_int_eq(jr.nmembers, 0); /* only the leader sees the members */

	/* B syncs first and waits for the leader's assignment. */
	th_resp bs = {0};
	ck_assert_int_eq(sync_as(&t, 2, b.id, 2, 0, NULL, NULL, &bs), KAAS_DEFERRED);
	ck_assert_int_eq(bs.got, 0);
	const char *ids2[] = {a.id, b.id}, *as2[] = {"a-part", "b-part"};
	sync_leader(&t, 3, a.id, 2, 2, ids2, as2, &sr);
	char asg[64];
	ck_assert_int_eq(sg_parse(&sr, 3, asg, sizeof(asg)), KERR_NONE);
	ck_assert_str_eq(asg, "a-part");
	ck_assert_int_eq(bs.got, 1);
	ck_assert_int_eq(sg_parse(&bs, 2, asg, sizeof(asg)), KERR_NONE);
	ck_assert_str_eq(asg, "b-part");
	th_resp_free(&sr);
	th_resp_free(&bs);

	/* C joins with v3 (no id handshake); everybody rejoins. */
	memset(&c, 0, sizeof(c));
	ck_assert_int_eq(join_as(&t, &c, 3, "", NULL, PROTOS), KAAS_DEFERRED);
	ck_assert_int_eq(join_as(&t, &b, 4, b.id, NULL, PROTOS), KAAS_DEFERRED);
	ck_assert_int_eq(join_as(&t, &a, 5, a.id, NULL, PROTOS), KAAS_HANDLED);
	joined(&a, &jr);
	ck_assert_int_eq(jr.gen, 3);
	ck_assert_int_eq(jr.nmembers, 3);
	jg_resp jc;
	jg_parse(&c.r, 3, &jc);
	ck_assert_int_eq(jc.err, 0);
	ck_assert_int_eq(jc.gen, 3);
	snprintf(c.id, sizeof(c.id), "%s", jc.member);
	ck_assert(strncmp(c.id, "cli-", 4) == 0);
	ck_assert_int_eq(b.r.got, 1);

	/* The leader leaves during CompletingRebalance: parked syncs of the
	 * others are told to rejoin; the next generation elects a new leader. */
	ck_assert_int_eq(sync_as(&t, 3, c.id, 3, 0, NULL, NULL, &bs), KAAS_DEFERRED);
	int16_t merr;
	ck_assert_int_eq(th_leave(&t, 3, G, a.id, NULL, &merr), KERR_NONE);
	ck_assert_int_eq(merr, KERR_NONE);
	ck_assert_int_eq(bs.got, 1);
	ck_assert_int_eq(sg_parse(&bs, 3, NULL, 0), KERR_REBALANCE_IN_PROGRESS);
	th_resp_free(&bs);
	ck_assert_int_eq(join_as(&t, &b, 5, b.id, NULL, PROTOS), KAAS_DEFERRED);
	ck_assert_int_eq(join_as(&t, &c, 3, c.id, NULL, PROTOS), KAAS_HANDLED);
	joined(&b, &jr);
	ck_assert_int_eq(jr.gen, 4);
	ck_assert_str_eq(jr.leader, b.id);
	ck_assert_int_eq(jr.nmembers, 2);
	joined(&c, &jc);
	ck_assert_int_eq(jc.gen, 4);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 3, b.id, NULL), KERR_ILLEGAL_GENERATION);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 4, a.id, NULL), KERR_UNKNOWN_MEMBER_ID);

	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_resp_free(&c.r);
	th_close(&t);
}
END_TEST

/* Stable group of A and B (generation 2), both synced. */
static void two_stable(th *t, mjoin *a, mjoin *b)
{
	jg_resp jr;
	th_resp sr = {0};
	join_new(t, a, PROTOS);
	join_new(t, b, PROTOS);
	kg_coord_tick(t->c);
	joined(a, &jr);
	ck_assert_int_eq(jr.gen, 1);
	joined(b, &jr);
	ck_assert_int_eq(jr.gen, 1);
	const char *leader = strcmp(jr.leader, a->id) == 0 ? a->id : b->id;
	const char *ids[] = {a->id, b->id}, *as[] = {"x", "y"};
	th_resp other = {0};
	ck_assert_int_eq(sync_as(t, 3, leader == a->id ? b->id : a->id, 1, 0, NULL, NULL, &other),
			 KAAS_DEFERRED);
	sync_leader(t, 3, leader, 1, 2, ids, as, &sr);
	ck_assert_int_eq(other.got, 1);
	th_resp_free(&sr);
	th_resp_free(&other);
}

START_TEST(session_timeout_expires_member)
{
	th t;
	th_open(&t);
	mjoin a, b;
	two_stable(&t, &a, &b);
	/* A keeps heartbeating, B goes silent. */
	for (int i = 0; i < 3; i++) {
		t.now += SESSION / 3;
		ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, NULL), KERR_NONE);
		kg_coord_tick(t.c);
	}
	t.now += SESSION / 5;
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, NULL), KERR_NONE);
	kg_coord_tick(t.c);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, NULL), KERR_REBALANCE_IN_PROGRESS);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, b.id, NULL), KERR_UNKNOWN_MEMBER_ID);
	ck_assert_int_eq(join_as(&t, &a, 5, a.id, NULL, PROTOS), KAAS_HANDLED);
	jg_resp jr;
	joined(&a, &jr);
	ck_assert_int_eq(jr.gen, 2);
	ck_assert_int_eq(jr.nmembers, 1);
	/* The expired member coming back is a stranger. */
	ck_assert_int_eq(join_as(&t, &b, 5, b.id, NULL, PROTOS), KAAS_HANDLED);
	jg_parse(&b.r, 5, &jr);
	ck_assert_int_eq(jr.err, KERR_UNKNOWN_MEMBER_ID);
	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_close(&t);
}
END_TEST

/* A member that heartbeats but does not rejoin is dropped when the
 * rebalance timeout passes; the others get their answer then. */
START_TEST(rebalance_timeout_drops_laggard)
{
	th t;
	th_open(&t);
	mjoin a, b, c;
	two_stable(&t, &a, &b);
	join_new(&t, &c, PROTOS);
	ck_assert_int_eq(c.rc, KAAS_DEFERRED);
	ck_assert_int_eq(join_as(&t, &a, 5, a.id, NULL, PROTOS), KAAS_DEFERRED);
	for (int i = 0; i < 4; i++) {
		t.now += SESSION / 2;
		ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, b.id, NULL), KERR_REBALANCE_IN_PROGRESS);
		kg_coord_tick(t.c);
		ck_assert_int_eq(a.r.got, 0);
	}
	t.now += REBAL;
	/* B is alive (it just heartbeat), it only failed to rejoin. */
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, b.id, NULL), KERR_REBALANCE_IN_PROGRESS);
	kg_coord_tick(t.c);
	jg_resp jr;
	joined(&a, &jr);
	ck_assert_int_eq(jr.gen, 2);
	joined(&c, &jr);
	ck_assert_int_eq(jr.gen, 2);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, b.id, NULL), KERR_UNKNOWN_MEMBER_ID);
	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_resp_free(&c.r);
	th_close(&t);
}
END_TEST

START_TEST(pending_member_id_expires)
{
	th t;
	th_open(&t);
	mjoin a;
	memset(&a, 0, sizeof(a));
	ck_assert_int_eq(join_as(&t, &a, 4, "", NULL, PROTOS), KAAS_HANDLED);
	jg_resp jr;
	jg_parse(&a.r, 4, &jr);
	ck_assert_int_eq(jr.err, KERR_MEMBER_ID_REQUIRED);
	t.now += SESSION + 1;
	kg_coord_tick(t.c);
	ck_assert_int_eq(join_as(&t, &a, 4, jr.member, NULL, PROTOS), KAAS_HANDLED);
	jg_parse(&a.r, 4, &jr);
	ck_assert_int_eq(jr.err, KERR_UNKNOWN_MEMBER_ID);
	th_resp_free(&a.r);
	th_close(&t);
}
END_TEST

START_TEST(join_errors)
{
	th t;
	th_open(&t);
	mjoin a, x;
	jg_resp jr;
	memset(&x, 0, sizeof(x));
	kw_wr w = KAAS_WR_INIT;
	/* Session timeout outside the broker's bounds. */
	jg_req(&w, 5, G, 100, REBAL, "", NULL, "consumer", PROTOS);
	ck_assert_int_eq(th_call(&t, KAAS_API_JOIN_GROUP, 5, &w, &x.r), KAAS_HANDLED);
	jg_parse(&x.r, 5, &jr);
	ck_assert_int_eq(jr.err, KERR_INVALID_SESSION_TIMEOUT);
	th_resp_free(&x.r);
	/* Empty group id. */
	jg_req(&w, 2, "", SESSION, REBAL, "", NULL, "consumer", PROTOS);
	ck_assert_int_eq(th_call(&t, KAAS_API_JOIN_GROUP, 2, &w, &x.r), KAAS_HANDLED);
	jg_parse(&x.r, 2, &jr);
	ck_assert_int_eq(jr.err, KERR_INVALID_GROUP_ID);
	th_resp_free(&x.r);
	/* A member id for a group that does not exist. */
	ck_assert_int_eq(join_as(&t, &x, 1, "cli-made-up", NULL, PROTOS), KAAS_HANDLED);
	jg_parse(&x.r, 1, &jr);
	ck_assert_int_eq(jr.err, KERR_UNKNOWN_MEMBER_ID);
	ck_assert_str_eq(jr.member, "cli-made-up");
	/* An empty group needs a protocol type and a protocol. */
	ck_assert_int_eq(join_as(&t, &x, 0, "", NULL, ""), KAAS_HANDLED);
	jg_parse(&x.r, 0, &jr);
	ck_assert_int_eq(jr.err, KERR_INCONSISTENT_GROUP_PROTOCOL);

	join_new(&t, &a, PROTOS);
	kg_coord_tick(t.c);
	joined(&a, &jr);
	/* No protocol in common / another protocol type. */
	ck_assert_int_eq(join_as(&t, &x, 0, "", NULL, "sticky=m"), KAAS_HANDLED);
	jg_parse(&x.r, 0, &jr);
	ck_assert_int_eq(jr.err, KERR_INCONSISTENT_GROUP_PROTOCOL);
	th_resp_free(&x.r);
	jg_req(&w, 0, G, SESSION, REBAL, "", NULL, "connect", PROTOS);
	ck_assert_int_eq(th_call(&t, KAAS_API_JOIN_GROUP, 0, &w, &x.r), KAAS_HANDLED);
	jg_parse(&x.r, 0, &jr);
	ck_assert_int_eq(jr.err, KERR_INCONSISTENT_GROUP_PROTOCOL);
	/* SyncGroup in a wrong generation / by a stranger. */
	th_resp sr = {0};
	ck_assert_int_eq(sync_as(&t, 1, a.id, 9, 0, NULL, NULL, &sr), KAAS_HANDLED);
	ck_assert_int_eq(sg_parse(&sr, 1, NULL, 0), KERR_ILLEGAL_GENERATION);
	th_resp_free(&sr);
	ck_assert_int_eq(sync_as(&t, 1, "stranger", 1, 0, NULL, NULL, &sr), KAAS_HANDLED);
	ck_assert_int_eq(sg_parse(&sr, 1, NULL, 0), KERR_UNKNOWN_MEMBER_ID);
	th_resp_free(&sr);
	th_resp_free(&a.r);
	th_resp_free(&x.r);
	th_close(&t);
}
END_TEST

/* Most votes among the protocols everyone supports. */
START_TEST(protocol_selection)
{
	th t;
	th_open(&t);
	mjoin a, b, c;
	jg_resp jr;
	join_new(&t, &a, "range=1,roundrobin=2,sticky=3");
	join_new(&t, &b, "roundrobin=4,range=5");
	join_new(&t, &c, "sticky=6,roundrobin=7,range=8");
	kg_coord_tick(t.c);
	joined(&a, &jr);
	/* sticky is not supported by b; votes: a range, b roundrobin, c roundrobin */
	ck_assert_str_eq(jr.proto, "roundrobin");
	ck_assert_int_eq(jr.nmembers, 3);
	ck_assert_str_eq(jr.metas[0], "2");
	ck_assert_str_eq(jr.metas[1], "4");
	ck_assert_str_eq(jr.metas[2], "7");
	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_resp_free(&c.r);
	th_close(&t);
}
END_TEST

START_TEST(initial_delay_waits_for_more_members)
{
	th t;
	th_open(&t);
	t.cfg.initial_rebalance_delay_ms = 3000;
	th_restart(&t);
	mjoin a, b;
	join_new(&t, &a, PROTOS);
	ck_assert_int_eq(a.rc, KAAS_DEFERRED);
	t.now += 1000;
	kg_coord_tick(t.c);
	join_new(&t, &b, PROTOS);
	t.now += 2000; /* the first delay is over, but a member arrived: one more */
	kg_coord_tick(t.c);
	ck_assert_int_eq(a.r.got, 0);
	ck_assert_int_eq(b.r.got, 0);
	t.now += 3000;
	kg_coord_tick(t.c);
	jg_resp jr;
	joined(&a, &jr);
	ck_assert_int_eq(jr.gen, 1);
	ck_assert_int_eq(jr.nmembers, 2);
	joined(&b, &jr);
	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_close(&t);
}
END_TEST

/* KIP-345: a restarted static member takes its place back; the old member
 * id is fenced. */
START_TEST(static_membership)
{
	th t;
	th_open(&t);
	mjoin a;
	jg_resp jr;
	memset(&a, 0, sizeof(a));
	/* Static members get their id at once, even on v5. */
	ck_assert_int_eq(join_as(&t, &a, 5, "", "inst-1", PROTOS), KAAS_DEFERRED);
	kg_coord_tick(t.c);
	jg_parse(&a.r, 5, &jr);
	ck_assert_int_eq(jr.err, 0);
	ck_assert_str_eq(jr.insts[0], "inst-1");
	ck_assert(strncmp(jr.member, "inst-1-", 7) == 0);
	char old[256];
	snprintf(old, sizeof(old), "%s", jr.member);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, old, "inst-1"), KERR_NONE);

	mjoin a2;
	memset(&a2, 0, sizeof(a2));
	/* It is the only member: its rejoin completes the rebalance at once. */
	ck_assert_int_eq(join_as(&t, &a2, 5, "", "inst-1", PROTOS), KAAS_HANDLED);
	jg_parse(&a2.r, 5, &jr);
	ck_assert_int_eq(jr.err, 0);
	ck_assert_str_ne(jr.member, old);
	ck_assert_int_eq(jr.nmembers, 1);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, jr.gen, old, "inst-1"), KERR_FENCED_INSTANCE_ID);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, jr.gen, jr.member, "inst-1"), KERR_NONE);
	int16_t merr;
	ck_assert_int_eq(th_leave(&t, 3, G, old, "inst-1", &merr), KERR_NONE);
	ck_assert_int_eq(merr, KERR_FENCED_INSTANCE_ID);
	ck_assert_int_eq(th_leave(&t, 3, G, jr.member, "inst-1", &merr), KERR_NONE);
	ck_assert_int_eq(merr, KERR_NONE);
	th_resp_free(&a.r);
	th_resp_free(&a2.r);
	th_close(&t);
}
END_TEST

/* KIP-345: a static member that restarts (a JoinGroup with an empty member
 * id and its group.instance.id) into a Stable group gets the generation
 * and assignment it had, once its new id is on the volume, and the others
 * see no rebalance; its old id is fenced.  Changed protocols rebalance. */
START_TEST(static_rejoin_keeps_assignment)
{
	th t;
	th_open(&t);
	mjoin a, b, b2, a2, b3;
	jg_resp jr;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&b2, 0, sizeof(b2));
	memset(&a2, 0, sizeof(a2));
	memset(&b3, 0, sizeof(b3));
	ck_assert_int_eq(join_as(&t, &a, 5, "", "inst-a", PROTOS), KAAS_DEFERRED);
	ck_assert_int_eq(join_as(&t, &b, 5, "", "inst-b", PROTOS), KAAS_DEFERRED);
	kg_coord_tick(t.c);
	jg_parse(&a.r, 5, &jr);
	ck_assert_int_eq(jr.err, 0);
	snprintf(a.id, sizeof(a.id), "%s", jr.member);
	ck_assert_str_eq(jr.leader, a.id);
	jg_parse(&b.r, 5, &jr);
	snprintf(b.id, sizeof(b.id), "%s", jr.member);
	ck_assert_int_eq(jr.gen, 1);
	th_resp bs = {0}, as_ = {0};
	ck_assert_int_eq(sync_as(&t, 3, b.id, 1, 0, NULL, NULL, &bs), KAAS_DEFERRED);
	const char *ids[] = {a.id, b.id}, *asg[] = {"PA", "PB"};
	sync_leader(&t, 3, a.id, 1, 2, ids, asg, &as_);
	ck_assert_int_eq(sg_parse(&bs, 3, NULL, 0), 0);
	th_resp_free(&bs);
	th_resp_free(&as_);

	/* b restarts: its join waits for the write of its new id... */
	ck_assert_int_eq(join_as(&t, &b2, 5, "", "inst-b", PROTOS), KAAS_DEFERRED);
	ck_assert_int_eq(b2.r.got, 0);
	/* ... while a heartbeats on in generation 1, undisturbed. */
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, "inst-a"), KERR_NONE);
	kg_coord_flush(t.c);
	ck_assert_int_eq(b2.r.got, 1);
	jg_parse(&b2.r, 5, &jr);
	ck_assert_int_eq(jr.err, 0);
	ck_assert_int_eq(jr.gen, 1);
	ck_assert_str_ne(jr.member, b.id);
	ck_assert_str_eq(jr.leader, a.id);
	ck_assert_int_eq(jr.nmembers, 0);
	snprintf(b2.id, sizeof(b2.id), "%s", jr.member);
	char got[64];
	th_resp r = {0};
	ck_assert_int_eq(sync_as(&t, 3, b2.id, 1, 0, NULL, NULL, &r), KAAS_HANDLED);
	ck_assert_int_eq(sg_parse(&r, 3, got, sizeof(got)), 0);
	ck_assert_str_eq(got, "PB");
	th_resp_free(&r);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, b.id, "inst-b"), KERR_FENCED_INSTANCE_ID);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, b2.id, "inst-b"), KERR_NONE);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, "inst-a"), KERR_NONE);
	char state[32];
	int32_t n;
	describe(&t, 4, G, state, &n, NULL);
	ck_assert_str_eq(state, "Stable");
	ck_assert_int_eq(n, 2);

	/* The leader restarts: answered with the old leader id, so it does
	 * not compute an assignment nobody would get; it keeps "PA". */
	ck_assert_int_eq(join_as(&t, &a2, 5, "", "inst-a", PROTOS), KAAS_DEFERRED);
	kg_coord_flush(t.c);
	jg_parse(&a2.r, 5, &jr);
	ck_assert_int_eq(jr.err, 0);
	ck_assert_int_eq(jr.gen, 1);
	ck_assert_str_eq(jr.leader, a.id);
	ck_assert_str_ne(jr.member, a.id);
	ck_assert_int_eq(jr.nmembers, 0);
	snprintf(a2.id, sizeof(a2.id), "%s", jr.member);
	ck_assert_int_eq(sync_as(&t, 3, a2.id, 1, 0, NULL, NULL, &r), KAAS_HANDLED);
	ck_assert_int_eq(sg_parse(&r, 3, got, sizeof(got)), 0);
	ck_assert_str_eq(got, "PA");
	th_resp_free(&r);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, b2.id, "inst-b"), KERR_NONE);

	/* A restart with other protocols does rebalance. */
	ck_assert_int_eq(join_as(&t, &b3, 5, "", "inst-b", "range=OTHER"), KAAS_DEFERRED);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a2.id, "inst-a"), KERR_REBALANCE_IN_PROGRESS);
	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_resp_free(&a2.r);
	th_resp_free(&b2.r);
	th_close(&t); /* answers b3's parked join */
	th_resp_free(&b3.r);
}
END_TEST

/* Shutting down answers every parked request (NOT_COORDINATOR: clients
 * look for the coordinator again). */
START_TEST(parked_requests_always_answered)
{
	th t;
	th_open(&t);
	mjoin a, b;
	join_new(&t, &a, PROTOS);
	ck_assert_int_eq(a.rc, KAAS_DEFERRED);
	kg_coord_tick(t.c);
	jg_resp jr;
	joined(&a, &jr);
	th_resp sr = {0};
	sync_leader(&t, 3, a.id, 1, 0, NULL, NULL, &sr);
	th_resp_free(&sr);
	join_new(&t, &b, PROTOS);
	ck_assert_int_eq(b.rc, KAAS_DEFERRED);
	kg_coord_close(t.c);
	jg_parse(&b.r, 5, &jr);
	ck_assert_int_eq(jr.err, KERR_NOT_COORDINATOR);
	th_start(&t);
	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_close(&t);
}
END_TEST

/* A SIGTERM drain: parked requests are answered now, nothing new parks,
 * commits still work. */
START_TEST(drain_answers_parked_and_parks_nothing)
{
	th t;
	th_open(&t);
	mjoin a, b;
	jg_resp jr;
	join_new(&t, &a, PROTOS);
	ck_assert_int_eq(a.rc, KAAS_DEFERRED);
	kg_coord_drain(t.c);
	ck_assert_int_eq(a.r.got, 1);
	jg_parse(&a.r, 5, &jr);
	ck_assert_int_eq(jr.err, KERR_NOT_COORDINATOR);
	memset(&b, 0, sizeof(b));
	ck_assert_int_eq(join_as(&t, &b, 3, "", NULL, PROTOS), KAAS_HANDLED);
	jg_parse(&b.r, 3, &jr);
	ck_assert_int_eq(jr.err, KERR_NOT_COORDINATOR);
	ck_assert_int_eq(th_commit_sync(&t, 2, "other", -1, "", "t", 0, 3, NULL), KERR_NONE);
	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_close(&t);
}
END_TEST

START_TEST(retried_join_answers_first)
{
	th t;
	th_open(&t);
	mjoin a;
	join_new(&t, &a, PROTOS);
	th_resp r2 = {0};
	kw_wr w = KAAS_WR_INIT;
	jg_req(&w, 5, G, SESSION, REBAL, a.id, NULL, "consumer", PROTOS);
	ck_assert_int_eq(th_call(&t, KAAS_API_JOIN_GROUP, 5, &w, &r2), KAAS_DEFERRED);
	jg_resp jr;
	ck_assert_int_eq(a.r.got, 1);
	jg_parse(&a.r, 5, &jr);
	ck_assert_int_eq(jr.err, KERR_REBALANCE_IN_PROGRESS);
	kg_coord_tick(t.c);
	ck_assert_int_eq(a.r.got, 1);
	ck_assert_int_eq(r2.got, 1);
	jg_parse(&r2, 5, &jr);
	ck_assert_int_eq(jr.err, 0);
	ck_assert_int_eq(jr.gen, 1);
	th_resp_free(&a.r);
	th_resp_free(&r2);
	th_close(&t);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "coord-group", .tcase = "group" },
			  KTEST_LIST(single_member_lifecycle,
				     three_members_rebalance,
				     session_timeout_expires_member,
				     rebalance_timeout_drops_laggard,
				     pending_member_id_expires,
				     join_errors,
				     protocol_selection,
				     initial_delay_waits_for_more_members,
				     static_membership,
				     static_rejoin_keeps_assignment,
				     parked_requests_always_answered,
				     retried_join_answers_first,
				     drain_answers_parked_and_parks_nothing));
}
