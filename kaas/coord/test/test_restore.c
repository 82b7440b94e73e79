/* test_restore.c — a group's membership survives a coordinator restart, as
 * in Kafka when a coordinator takes a group over: members keep heartbeating
 * and committing with their generation, members that do not come back
 * expire one session after the load and the rest rebalance, the leader's
 * SyncGroup is answered only once the generation is on the volume, version
 * 1 files still load, and membership sections that are not right are
 * refused (never a crash, never an overwrite).
 *
 * Length: every way a group file written by another host can be damaged,
 * against one restore path and its shared fixtures.
 */
#include <jansson.h>

#include "kaas/coord/coord_int.h"
#include "kaas/coord/test/harness.h"
#include "util/test/ktest.h"

#define G "rg"
#define SESSION 10000
#define REBAL 20000
#define PROTOS "range=mA,roundrobin=mB"

typedef struct mem {
	th_resp r;
	char id[256];
} mem;

static int join(th *t, mem *m, int16_t v, const char *member, const char *inst, const char *client)
{
	kw_wr w = KAAS_WR_INIT;
	th_resp_free(&m->r);
	jg_req(&w, v, G, SESSION, REBAL, member, inst, "consumer", PROTOS);
	return th_call_as(t, KAAS_API_JOIN_GROUP, v, &w, &m->r, client);
}

/* A new member: the v5 id handshake, then the join that parks. */
static void join_new(th *t, mem *m, const char *client)
{
	memset(m, 0, sizeof(*m));
	ck_assert_int_eq(join(t, m, 5, "", NULL, client), KAAS_HANDLED);
	jg_resp jr;
	jg_parse(&m->r, 5, &jr);
	ck_assert_int_eq(jr.err, KERR_MEMBER_ID_REQUIRED);
	snprintf(m->id, sizeof(m->id), "%s", jr.member);
	join(t, m, 5, m->id, NULL, client);
}

static int sync_req(th *t, int16_t v, const char *member, int32_t gen, int n, const char *const *ids,
		    const char *const *asg, th_resp *r)
{
	kw_wr w = KAAS_WR_INIT;
	sg_req(&w, v, G, gen, member, NULL, n, ids, asg);
	return th_call(t, KAAS_API_SYNC_GROUP, v, &w, r);
}

/* A and B in generation 1, Stable, A the leader: A gets "asg-a", B "asg-b". */
static void stable_pair(th *t, mem *a, mem *b)
{
	join_new(t, a, "cli");
	join_new(t, b, "cli");
	kg_coord_tick(t->c);
	jg_resp ja, jb;
	jg_parse(&a->r, 5, &ja);
	jg_parse(&b->r, 5, &jb);
	ck_assert_int_eq(ja.err, 0);
	ck_assert_int_eq(jb.err, 0);
	ck_assert_int_eq(ja.gen, 1);
	ck_assert_str_eq(ja.leader, a->id);
	th_resp sb = {0}, sa = {0};
	ck_assert_int_eq(sync_req(t, 3, b->id, 1, 0, NULL, NULL, &sb), KAAS_DEFERRED);
	const char *ids[] = {a->id, b->id}, *as[] = {"asg-a", "asg-b"};
	ck_assert_int_eq(sync_req(t, 3, a->id, 1, 2, ids, as, &sa), KAAS_DEFERRED);
	ck_assert_int_eq(sa.got + sb.got, 0);
	kg_coord_flush(t->c);
	char asg[64];
	ck_assert_int_eq(sg_parse(&sa, 3, asg, sizeof(asg)), KERR_NONE);
	ck_assert_str_eq(asg, "asg-a");
	ck_assert_int_eq(sg_parse(&sb, 3, asg, sizeof(asg)), KERR_NONE);
	ck_assert_str_eq(asg, "asg-b");
	th_resp_free(&sa);
	th_resp_free(&sb);
}

static json_t *read_group_file(th *t, const char *name)
{
	char path[256], *buf = NULL;
	size_t len;
	snprintf(path, sizeof(path), "groups/%s.json", name);
	ck_assert_int_eq(sub_read_file(t->vol.vfs, path, 1 << 20, &buf, &len), 0);
	json_error_t e;
	json_t *doc = json_loadb(buf, len, 0, &e);
	ck_assert_ptr_nonnull(doc);
	free(buf);
	return doc;
}

static const char *jstr_of(json_t *o, const char *key)
{
	json_t *j = json_object_get(o, key);
	return j && json_is_string(j) ? json_string_value(j) : NULL;
}

static json_int_t jint_of(json_t *o, const char *key)
{
	json_t *j = json_object_get(o, key);
	ck_assert_msg(j && json_is_integer(j), "%s is not an integer", key);
	return json_integer_value(j);
}

typedef struct desc {
	char state[32];
	char proto[32];
	int32_t n;
	char ids[4][256];
	char clients[4][64];
	char asg[4][64];
} desc;

static void describe(th *t, const char *group, desc *d)
{
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	memset(d, 0, sizeof(*d));
	kw_wr_array(&w, 0, 1);
	kw_wr_str(&w, 0, group);
	kw_wr_i8(&w, 0);
	ck_assert_int_eq(th_call(t, KAAS_API_DESCRIBE_GROUPS, 4, &w, &r), KAAS_HANDLED);
	tr rr;
	tr_init(&rr, &r, 0);
	tr_i32(&rr);
	ck_assert_int_eq(tr_arr(&rr), 1);
	ck_assert_int_eq(tr_i16(&rr), 0);
	tr_str(&rr);
	kw_str s = tr_str(&rr);
	snprintf(d->state, sizeof(d->state), "%.*s", s.len, s.s);
	tr_str(&rr);
	s = tr_str(&rr);
	snprintf(d->proto, sizeof(d->proto), "%.*s", s.len, s.s);
	d->n = tr_arr(&rr);
	for (int32_t i = 0; i < d->n; i++) {
		s = tr_str(&rr);
		if (i < 4)
			snprintf(d->ids[i], sizeof(d->ids[i]), "%.*s", s.len, s.s);
		tr_str(&rr);
		s = tr_str(&rr);
		if (i < 4)
			snprintf(d->clients[i], sizeof(d->clients[i]), "%.*s", s.len, s.s);
		s = tr_str(&rr);
		ck_assert_kstr(s, "/127.0.0.1");
		tr_bytes(&rr);
		kw_bytes b = tr_bytes(&rr);
		if (i < 4)
			snprintf(d->asg[i], sizeof(d->asg[i]), "%.*s", b.len < 0 ? 0 : b.len,
				 b.len > 0 ? (const char *)b.p : "");
	}
	tr_i32(&rr);
	tr_end(&rr);
	th_resp_free(&r);
}

/* The members keep their ids, generation and assignments across a restart:
 * heartbeats, commits with the old generation, SyncGroup and a follower's
 * JoinGroup all work without a rebalance. */
START_TEST(members_keep_their_generation)
{
	th t;
	th_open(&t);
	mem a, b;
	stable_pair(&t, &a, &b);
	ck_assert_int_eq(th_commit_sync(&t, 7, G, 1, a.id, "t", 0, 100, "m"), KERR_NONE);

	json_t *doc = read_group_file(&t, G);
	ck_assert_int_eq(jint_of(doc, "version"), 2);
	ck_assert_int_eq(jint_of(doc, "generation"), 1);
	ck_assert_str_eq(jstr_of(doc, "state"), "Stable");
	ck_assert_str_eq(jstr_of(doc, "protocol"), "range");
	ck_assert_str_eq(jstr_of(doc, "leader"), a.id);
	json_t *ms = json_object_get(doc, "members");
	ck_assert_uint_eq(json_array_size(ms), 2);
	json_t *m0 = json_array_get(ms, 0);
	ck_assert_str_eq(jstr_of(m0, "member_id"), a.id);
	ck_assert_str_eq(jstr_of(m0, "assignment"), "6173672d61"); /* "asg-a" */
	ck_assert_int_eq(jint_of(m0, "session_timeout_ms"), SESSION);
	ck_assert_int_eq(jint_of(m0, "rebalance_timeout_ms"), REBAL);
	ck_assert_str_eq(jstr_of(m0, "client_host"), "/127.0.0.1");
	json_t *p1 = json_array_get(json_object_get(m0, "protocols"), 1);
	ck_assert_str_eq(jstr_of(p1, "name"), "roundrobin");
	ck_assert_str_eq(jstr_of(p1, "metadata"), "6d42"); /* "mB" */
	json_decref(doc);

	t.now += 3600 * 1000; /* the broker was down for an hour */
	th_restart(&t);
	for (int v = 0; v <= 3; v++) {
		ck_assert_int_eq(th_heartbeat(&t, (int16_t)v, G, 1, a.id, NULL), KERR_NONE);
		ck_assert_int_eq(th_heartbeat(&t, (int16_t)v, G, 1, b.id, NULL), KERR_NONE);
	}
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 2, a.id, NULL), KERR_ILLEGAL_GENERATION);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, "stranger", NULL), KERR_UNKNOWN_MEMBER_ID);
	/* Commits of the generation before the restart are accepted. */
	ck_assert_int_eq(th_commit_sync(&t, 7, G, 1, b.id, "t", 1, 200, NULL), KERR_NONE);
	ck_assert_int_eq(th_commit_sync(&t, 2, G, 1, a.id, "t", 0, 101, NULL), KERR_NONE);
	ck_assert_int_eq(th_commit_sync(&t, 7, G, 0, a.id, "t", 0, 5, NULL), KERR_ILLEGAL_GENERATION);
	ck_assert_int_eq(th_commit_sync(&t, 2, G, -1, "", "t", 0, 5, NULL), KERR_UNKNOWN_MEMBER_ID);
	int16_t perr;
	ck_assert_int_eq(th_fetch(&t, 7, G, "t", 0, &perr, NULL, 0), 101);
	ck_assert_int_eq(th_fetch(&t, 1, G, "t", 1, &perr, NULL, 0), 200);

	desc d;
	describe(&t, G, &d);
	ck_assert_str_eq(d.state, "Stable");
	ck_assert_str_eq(d.proto, "range");
	ck_assert_int_eq(d.n, 2);
	ck_assert_str_eq(d.ids[0], a.id);
	ck_assert_str_eq(d.clients[1], "cli");
	ck_assert_str_eq(d.asg[1], "asg-b");
	/* A SyncGroup of the generation gets the assignment it had. */
	th_resp sr = {0};
	ck_assert_int_eq(sync_req(&t, 1, b.id, 1, 0, NULL, NULL, &sr), KAAS_HANDLED);
	char asg[64];
	ck_assert_int_eq(sg_parse(&sr, 1, asg, sizeof(asg)), KERR_NONE);
	ck_assert_str_eq(asg, "asg-b");
	th_resp_free(&sr);
	/* A follower that rejoins with the same protocols is told the current
	 * generation, no rebalance (as before the restart). */
	ck_assert_int_eq(join(&t, &b, 5, b.id, NULL, "cli"), KAAS_HANDLED);
	jg_resp jr;
	jg_parse(&b.r, 5, &jr);
	ck_assert_int_eq(jr.err, 0);
	ck_assert_int_eq(jr.gen, 1);
	ck_assert_str_eq(jr.leader, a.id);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, NULL), KERR_NONE);
	/* ListGroups shows it. */
	kw_wr w = KAAS_WR_INIT;
	th_resp lr = {0};
	ck_assert_int_eq(th_call(&t, KAAS_API_LIST_GROUPS, 0, &w, &lr), KAAS_HANDLED);
	tr rr;
	tr_init(&rr, &lr, 0);
	ck_assert_int_eq(tr_i16(&rr), 0);
	ck_assert_int_eq(tr_arr(&rr), 1);
	kw_str lid = tr_str(&rr);
	ck_assert_kstr(lid, G);
	kw_str lpt = tr_str(&rr);
	ck_assert_kstr(lpt, "consumer");
	th_resp_free(&lr);
	/* B's subscription changes and A leaves: the file written for the
	 * departure has B's new metadata. */
	w = (kw_wr)KAAS_WR_INIT;
	jg_req(&w, 5, G, SESSION, REBAL, b.id, NULL, "consumer", "range=mC");
	ck_assert_int_eq(th_call(&t, KAAS_API_JOIN_GROUP, 5, &w, &b.r), KAAS_DEFERRED);
	int16_t merr;
	ck_assert_int_eq(th_leave(&t, 3, G, a.id, NULL, &merr), KERR_NONE);
	kg_coord_flush(t.c);
	doc = read_group_file(&t, G);
	ms = json_object_get(doc, "members");
	ck_assert_uint_eq(json_array_size(ms), 1);
	json_t *ps = json_object_get(json_array_get(ms, 0), "protocols");
	ck_assert_uint_eq(json_array_size(ps), 1);
	ck_assert_str_eq(jstr_of(json_array_get(ps, 0), "metadata"), "6d43");
	json_decref(doc);
	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_close(&t);
}
END_TEST

/* Session timers start again when the group is loaded: a member that does
 * not come back expires one session timeout after the load, the others
 * rebalance without it. */
START_TEST(absent_member_expires_and_the_rest_rebalance)
{
	th t;
	th_open(&t);
	mem a, b;
	stable_pair(&t, &a, &b);
	th_restart(&t);
	t.now += 5 * SESSION; /* long after anyone was heard of: the load is what counts */
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, NULL), KERR_NONE); /* loads the group */
	int64_t loaded = t.now;
	while (t.now + SESSION / 3 < loaded + SESSION) {
		t.now += SESSION / 3;
		kg_coord_tick(t.c);
		ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, NULL), KERR_NONE);
	}
	t.now = loaded + SESSION + 1;
	kg_coord_tick(t.c);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, NULL), KERR_REBALANCE_IN_PROGRESS);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, b.id, NULL), KERR_UNKNOWN_MEMBER_ID);
	/* B's departure reaches the volume at once, before the rebalance ends. */
	kg_coord_flush(t.c);
	json_t *doc = read_group_file(&t, G);
	ck_assert_str_eq(jstr_of(doc, "state"), "PreparingRebalance");
	ck_assert_uint_eq(json_array_size(json_object_get(doc, "members")), 1);
	json_decref(doc);
	/* A rejoins with its id; generation 2 has A alone. */
	ck_assert_int_eq(join(&t, &a, 5, a.id, NULL, "cli"), KAAS_HANDLED);
	jg_resp jr;
	jg_parse(&a.r, 5, &jr);
	ck_assert_int_eq(jr.err, 0);
	ck_assert_int_eq(jr.gen, 2);
	ck_assert_int_eq(jr.nmembers, 1);
	th_resp sr = {0};
	const char *ids[] = {a.id}, *as[] = {"all"};
	ck_assert_int_eq(sync_req(&t, 3, a.id, 2, 1, ids, as, &sr), KAAS_DEFERRED);
	kg_coord_flush(t.c);
	ck_assert_int_eq(sg_parse(&sr, 3, NULL, 0), KERR_NONE);
	th_resp_free(&sr);
	doc = read_group_file(&t, G);
	ck_assert_str_eq(jstr_of(doc, "state"), "Stable");
	ck_assert_int_eq(jint_of(doc, "generation"), 2);
	json_t *m0 = json_array_get(json_object_get(doc, "members"), 0);
	ck_assert_str_eq(jstr_of(m0, "assignment"), "616c6c"); /* the new one, "all" */
	json_decref(doc);

	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_close(&t);
}
END_TEST

/* kg_coord_load_groups (what the timer does at start) restores groups
 * nobody names; members that never return expire and the group empties,
 * keeping its offsets. */
START_TEST(load_at_start_expires_members_that_never_return)
{
	th t;
	th_open(&t);
	mem a, b;
	stable_pair(&t, &a, &b);
	ck_assert_int_eq(th_commit_sync(&t, 7, G, 1, b.id, "t", 0, 9, NULL), KERR_NONE);
	th_restart(&t);
	kg_coord_load_groups(t.c);
	desc d;
	describe(&t, G, &d);
	ck_assert_str_eq(d.state, "Stable");
	ck_assert_int_eq(d.n, 2);
	t.now += SESSION + 1;
	kg_coord_tick(t.c);
	describe(&t, G, &d);
	ck_assert_str_eq(d.state, "Empty");
	kg_coord_flush(t.c);
	json_t *doc = read_group_file(&t, G);
	ck_assert_str_eq(jstr_of(doc, "state"), "Empty");
	ck_assert_uint_eq(json_array_size(json_object_get(doc, "members")), 0);
	ck_assert_uint_eq(json_array_size(json_object_get(doc, "offsets")), 1);
	json_decref(doc);
	th_restart(&t);
	kg_coord_load_groups(t.c);
	describe(&t, G, &d);
	ck_assert_str_eq(d.state, "Empty");
	ck_assert_int_eq(th_fetch(&t, 2, G, "t", 0, NULL, NULL, 0), 9);
	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_close(&t);
}
END_TEST

/* A member that left before the restart stays gone; the others find the
 * group rebalancing and rejoin with their ids. */
START_TEST(leave_is_written_and_restart_rebalances)
{
	th t;
	th_open(&t);
	mem a, b;
	stable_pair(&t, &a, &b);
	int16_t merr;
	ck_assert_int_eq(th_leave(&t, 3, G, b.id, NULL, &merr), KERR_NONE);
	ck_assert_int_eq(merr, KERR_NONE);
	th_restart(&t); /* close writes what was queued */
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, b.id, NULL), KERR_UNKNOWN_MEMBER_ID);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, NULL), KERR_REBALANCE_IN_PROGRESS);
	/* Commits are still taken during PreparingRebalance, as in Kafka. */
	ck_assert_int_eq(th_commit_sync(&t, 7, G, 1, a.id, "t", 0, 3, NULL), KERR_NONE);
	ck_assert_int_eq(join(&t, &a, 4, a.id, NULL, "cli"), KAAS_HANDLED);
	jg_resp jr;
	jg_parse(&a.r, 4, &jr);
	ck_assert_int_eq(jr.err, 0);
	ck_assert_int_eq(jr.gen, 2);
	ck_assert_int_eq(jr.nmembers, 1);
	/* The last member leaves: the file says the group is empty. */
	ck_assert_int_eq(th_leave(&t, 0, G, a.id, NULL, &merr), KERR_NONE);
	th_restart(&t);
	desc d;
	describe(&t, G, &d);
	ck_assert_str_eq(d.state, "Empty");
	ck_assert_int_eq(d.n, 0);
	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_close(&t);
}
END_TEST

/* The leader's SyncGroup and the parked ones are answered only after the
 * write; a failed write answers NOT_COORDINATOR, the group rebalances and
 * the write is re-driven once the volume is back. */
START_TEST(sync_waits_for_the_write)
{
	th t;
	th_open(&t);
	mem a, b;
	join_new(&t, &a, "cli");
	join_new(&t, &b, "cli");
	kg_coord_tick(t.c);
	th_resp sa = {0}, sb = {0};
	ck_assert_int_eq(sync_req(&t, 3, b.id, 1, 0, NULL, NULL, &sb), KAAS_DEFERRED);
	const char *ids[] = {a.id, b.id}, *as[] = {"x", "y"};
	ck_assert_int_eq(sync_req(&t, 3, a.id, 1, 2, ids, as, &sa), KAAS_DEFERRED);
	/* Not on the volume yet: nobody has an assignment, no file. */
	ck_assert_int_eq(sa.got + sb.got, 0);
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(t.vol.vfs, "groups/" G ".json", &st), -ENOENT);
	desc d;
	describe(&t, G, &d);
	ck_assert_str_eq(d.state, "CompletingRebalance");
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, b.id, NULL), KERR_NONE);
	/* A SIGTERM drain leaves them to the write. */
	kg_coord_drain(t.c);
	ck_assert_int_eq(sa.got + sb.got, 0);
	kg_coord_flush(t.c);
	ck_assert_int_eq(sg_parse(&sa, 3, NULL, 0), KERR_NONE);
	ck_assert_int_eq(sg_parse(&sb, 3, NULL, 0), KERR_NONE);
	th_resp_free(&sa);
	th_resp_free(&sb);
	th_restart(&t);

	/* The next generation's write fails (groups/ replaced by a file). */
	ck_assert_int_eq(join(&t, &a, 5, a.id, NULL, "cli"), KAAS_DEFERRED); /* the leader rejoins */
	ck_assert_int_eq(join(&t, &b, 5, b.id, NULL, "cli"), KAAS_HANDLED);
	jg_resp jr;
	jg_parse(&a.r, 5, &jr);
	ck_assert_int_eq(jr.gen, 2);
	char path[512], moved[600];
	snprintf(path, sizeof(path), "%s/groups", t.vol.dir);
	snprintf(moved, sizeof(moved), "%s/groups.away", t.vol.dir);
	ck_assert_int_eq(rename(path, moved), 0);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(sync_req(&t, 3, b.id, 2, 0, NULL, NULL, &sb), KAAS_DEFERRED);
	ck_assert_int_eq(sync_req(&t, 3, a.id, 2, 2, ids, as, &sa), KAAS_DEFERRED);
	kg_coord_flush(t.c);
	ck_assert_int_eq(sg_parse(&sa, 3, NULL, 0), KERR_NOT_COORDINATOR);
	ck_assert_int_eq(sg_parse(&sb, 3, NULL, 0), KERR_NOT_COORDINATOR);
	th_resp_free(&sa);
	th_resp_free(&sb);
	/* The volume comes back; the retry writes that a rebalance is due. */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(rename(moved, path), 0);
	t.now += 1000;
	kg_coord_tick(t.c);
	kg_coord_flush(t.c);
	json_t *doc = read_group_file(&t, G);
	ck_assert_str_eq(jstr_of(doc, "state"), "PreparingRebalance");
	ck_assert_int_eq(jint_of(doc, "generation"), 2);
	json_decref(doc);
	/* The members rejoin with their ids and the generation completes. */
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 2, b.id, NULL), KERR_REBALANCE_IN_PROGRESS);
	ck_assert_int_eq(join(&t, &a, 5, a.id, NULL, "cli"), KAAS_DEFERRED);
	ck_assert_int_eq(join(&t, &b, 5, b.id, NULL, "cli"), KAAS_HANDLED);
	jg_parse(&a.r, 5, &jr);
	ck_assert_int_eq(jr.err, 0);
	ck_assert_int_eq(jr.gen, 3);
	ck_assert_int_eq(sync_req(&t, 3, a.id, 3, 2, ids, as, &sa), KAAS_DEFERRED);
	kg_coord_flush(t.c);
	ck_assert_int_eq(sg_parse(&sa, 3, NULL, 0), KERR_NONE);
	th_restart(&t);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 3, b.id, NULL), KERR_NONE);
	th_resp_free(&sa);
	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_close(&t);
}
END_TEST

/* A static member's new incarnation is written at once, so the old member
 * id stays fenced after a restart. */
START_TEST(static_member_stays_fenced)
{
	th t;
	th_open(&t);
	mem a, a2;
	memset(&a, 0, sizeof(a));
	memset(&a2, 0, sizeof(a2));
	ck_assert_int_eq(join(&t, &a, 5, "", "inst-1", "cli"), KAAS_DEFERRED);
	kg_coord_tick(t.c);
	jg_resp jr;
	jg_parse(&a.r, 5, &jr);
	ck_assert_int_eq(jr.err, 0);
	snprintf(a.id, sizeof(a.id), "%s", jr.member);
	th_resp sr = {0};
	const char *ids[] = {a.id}, *as[] = {"p"};
	ck_assert_int_eq(sync_req(&t, 3, a.id, 1, 1, ids, as, &sr), KAAS_DEFERRED);
	kg_coord_flush(t.c);
	th_resp_free(&sr);
	/* KIP-345: the new incarnation of a Stable group's static member keeps
	 * generation 1, and is answered only once its id is on the volume. */
	ck_assert_int_eq(join(&t, &a2, 5, "", "inst-1", "cli"), KAAS_DEFERRED);
	ck_assert_int_eq(a2.r.got, 0);
	kg_coord_flush(t.c);
	jg_parse(&a2.r, 5, &jr);
	ck_assert_int_eq(jr.err, 0);
	ck_assert_int_eq(jr.gen, 1);
	ck_assert_str_ne(jr.member, a.id);
	snprintf(a2.id, sizeof(a2.id), "%s", jr.member);
	th_restart(&t);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, "inst-1"), KERR_FENCED_INSTANCE_ID);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a2.id, "inst-1"), KERR_NONE);
	th_resp_free(&a.r);
	th_resp_free(&a2.r);
	th_close(&t);
}
END_TEST

/* Ids and client ids that are not UTF-8 round-trip through the file. */
START_TEST(odd_bytes_round_trip)
{
	th t;
	th_open(&t);
	const char *client = "c\xff\x01";
	mem a;
	join_new(&t, &a, client);
	kg_coord_tick(t.c);
	th_resp sr = {0};
	const char *ids[] = {a.id}, *as[] = {"\x01\x02"};
	ck_assert_int_eq(sync_req(&t, 3, a.id, 1, 1, ids, as, &sr), KAAS_DEFERRED);
	kg_coord_flush(t.c);
	th_resp_free(&sr);
	th_restart(&t);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 1, a.id, NULL), KERR_NONE);
	ck_assert_int_eq(sync_req(&t, 3, a.id, 1, 0, NULL, NULL, &sr), KAAS_HANDLED);
	char asg[16];
	ck_assert_int_eq(sg_parse(&sr, 3, asg, sizeof(asg)), KERR_NONE);
	ck_assert_str_eq(asg, "\x01\x02");
	th_resp_free(&sr);
	/* DescribeGroups shows the client id byte for byte. */
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	kw_wr_array(&w, 0, 1);
	kw_wr_str(&w, 0, G);
	ck_assert_int_eq(th_call(&t, KAAS_API_DESCRIBE_GROUPS, 0, &w, &r), KAAS_HANDLED);
	tr rr;
	tr_init(&rr, &r, 0);
	tr_arr(&rr);
	tr_i16(&rr);
	tr_str(&rr);
	tr_str(&rr);
	tr_str(&rr);
	tr_str(&rr);
	ck_assert_int_eq(tr_arr(&rr), 1);
	kw_str id = tr_str(&rr);
	ck_assert_kstr(id, a.id);
	kw_str cid = tr_str(&rr);
	ck_assert_kstr(cid, client);
	th_resp_free(&r);
	th_resp_free(&a.r);
	th_close(&t);
}
END_TEST

/* A version 1 file (offsets only) still loads; the next write is version 2
 * and keeps the offsets and the generation count. */
START_TEST(version_1_file_loads)
{
	th t;
	th_open(&t);
	const char *v1 = "{\"version\":1,\"group_id\":\"" G "\",\"coordinator_epoch\":0,\"writer\":1,"
			 "\"written_ms\":1,\"generation\":4,\"protocol_type\":\"consumer\","
			 "\"offsets\":[{\"topic\":\"t\",\"partition\":0,\"offset\":77,\"leader_epoch\":-1,"
			 "\"metadata\":\"\",\"commit_ms\":1700000000000}]}";
	ck_assert_int_eq(sub_write_atomic(t.vol.vfs, "groups/" G ".json", v1, strlen(v1)), 0);
	ck_assert_int_eq(th_fetch(&t, 3, G, "t", 0, NULL, NULL, 0), 77);
	desc d;
	describe(&t, G, &d);
	ck_assert_str_eq(d.state, "Empty");
	mem a;
	join_new(&t, &a, "cli");
	kg_coord_tick(t.c);
	jg_resp jr;
	jg_parse(&a.r, 5, &jr);
	ck_assert_int_eq(jr.gen, 5);
	th_resp sr = {0};
	const char *ids[] = {a.id}, *as[] = {"p"};
	ck_assert_int_eq(sync_req(&t, 3, a.id, 5, 1, ids, as, &sr), KAAS_DEFERRED);
	kg_coord_flush(t.c);
	th_resp_free(&sr);
	json_t *doc = read_group_file(&t, G);
	ck_assert_int_eq(jint_of(doc, "version"), 2);
	ck_assert_int_eq(jint_of(doc, "generation"), 5);
	ck_assert_uint_eq(json_array_size(json_object_get(doc, "members")), 1);
	json_t *o = json_array_get(json_object_get(doc, "offsets"), 0);
	ck_assert_int_eq(jint_of(o, "offset"), 77);
	json_decref(doc);
	th_resp_free(&a.r);
	th_close(&t);
}
END_TEST

/* A valid version 2 file with one member, for corrupting. */
#define GOOD_HEAD "{\"version\":2,\"group_id\":\"" G "\",\"coordinator_epoch\":0,\"writer\":1," \
		  "\"written_ms\":1,\"generation\":3,\"protocol_type\":\"consumer\","
#define GOOD_MEMBER "{\"member_id\":\"m-1\",\"group_instance_id\":null,\"client_id\":\"c\"," \
		    "\"client_host\":\"/h\",\"session_timeout_ms\":10000,\"rebalance_timeout_ms\":20000," \
		    "\"protocols\":[{\"name\":\"range\",\"metadata\":\"00\"}],\"assignment\":\"0102\"}"
#define GOOD_TAIL ",\"offsets\":[]}"

static const char *const good =
	GOOD_HEAD "\"state\":\"Stable\",\"protocol\":\"range\",\"leader\":\"m-1\",\"members\":[" GOOD_MEMBER
		  "]" GOOD_TAIL;

static const struct {
	const char *file;
	const char *why; /* a word the refusal names */
} corrupt[] = {
	{GOOD_HEAD "\"state\":\"Stable\",\"protocol\":\"range\",\"leader\":\"m-1\",\"members\":{}" GOOD_TAIL, "members"},
	{GOOD_HEAD "\"state\":\"Stable\",\"protocol\":\"range\",\"leader\":\"m-1\",\"members\":[7]" GOOD_TAIL, "members"},
	{GOOD_HEAD "\"state\":\"Stable\",\"protocol\":\"range\",\"leader\":\"m-1\"" GOOD_TAIL, "members"},
	{GOOD_HEAD "\"state\":\"Dead\",\"protocol\":\"range\",\"leader\":\"m-1\",\"members\":[" GOOD_MEMBER "]" GOOD_TAIL, "state"},
	{GOOD_HEAD "\"protocol\":\"range\",\"leader\":\"m-1\",\"members\":[" GOOD_MEMBER "]" GOOD_TAIL, "state"},
	{GOOD_HEAD "\"state\":\"Empty\",\"protocol\":null,\"leader\":null,\"members\":[" GOOD_MEMBER "]" GOOD_TAIL, "Empty"},
	{GOOD_HEAD "\"state\":\"Stable\",\"protocol\":null,\"leader\":\"m-1\",\"members\":[" GOOD_MEMBER "]" GOOD_TAIL, "protocol"},
	{GOOD_HEAD "\"state\":\"Stable\",\"protocol\":\"sticky\",\"leader\":\"m-1\",\"members\":[" GOOD_MEMBER "]" GOOD_TAIL, "protocol"},
	{GOOD_HEAD "\"state\":\"Stable\",\"protocol\":\"range\",\"leader\":\"m-2\",\"members\":[" GOOD_MEMBER "]" GOOD_TAIL, "leader"},
	{GOOD_HEAD "\"state\":\"Stable\",\"protocol\":\"range\",\"leader\":7,\"members\":[" GOOD_MEMBER "]" GOOD_TAIL, "leader"},
	{GOOD_HEAD "\"state\":\"Stable\",\"protocol\":\"range\",\"leader\":\"m-1\",\"members\":[]" GOOD_TAIL, "members"},
	{GOOD_HEAD "\"state\":\"Stable\",\"protocol\":\"range\",\"leader\":\"m-1\",\"members\":[" GOOD_MEMBER "," GOOD_MEMBER "]" GOOD_TAIL, "twice"},
	{"{\"version\":2,\"group_id\":\"" G "\",\"coordinator_epoch\":0,\"generation\":3,\"protocol_type\":null,"
	 "\"state\":\"Stable\",\"protocol\":\"range\",\"leader\":\"m-1\",\"members\":[" GOOD_MEMBER "]" GOOD_TAIL, "protocol_type"},
	{"{\"version\":3,\"group_id\":\"" G "\",\"coordinator_epoch\":0,\"generation\":3,\"offsets\":[]}", "version"},
};

/* Member fields with a wrong value each (replacing one in GOOD_MEMBER). */
static const struct {
	const char *from, *to, *why;
} member_faults[] = {
	{"\"member_id\":\"m-1\"", "\"member_id\":\"\"", "member_id"},
	{"\"member_id\":\"m-1\"", "\"member_id\":5", "member_id"},
	{"\"member_id\":\"m-1\",", "", "member_id"},
	{"\"group_instance_id\":null", "\"group_instance_id\":[]", "group_instance_id"},
	{"\"client_id\":\"c\"", "\"client_id\":null", "client_id"},
	{"\"client_host\":\"/h\",", "", "client_host"},
	{"\"session_timeout_ms\":10000", "\"session_timeout_ms\":0", "session_timeout_ms"},
	{"\"session_timeout_ms\":10000", "\"session_timeout_ms\":-5", "session_timeout_ms"},
	{"\"session_timeout_ms\":10000", "\"session_timeout_ms\":2147483648", "session_timeout_ms"},
	{"\"session_timeout_ms\":10000", "\"session_timeout_ms\":\"10000\"", "session_timeout_ms"},
	{"\"rebalance_timeout_ms\":20000,", "", "rebalance_timeout_ms"},
	{"\"protocols\":[{\"name\":\"range\",\"metadata\":\"00\"}]", "\"protocols\":[]", "protocols"},
	{"\"protocols\":[{\"name\":\"range\",\"metadata\":\"00\"}]", "\"protocols\":{}", "protocols"},
	{"{\"name\":\"range\",\"metadata\":\"00\"}", "{\"metadata\":\"00\"}", "name"},
	{"{\"name\":\"range\",\"metadata\":\"00\"}", "\"range\"", "protocols"},
	{"\"metadata\":\"00\"", "\"metadata\":\"0\"", "metadata"},
	{"\"metadata\":\"00\"", "\"metadata\":\"zz\"", "metadata"},
	{"\"metadata\":\"00\"", "\"metadata\":null", "metadata"},
	{"{\"name\":\"range\",\"metadata\":\"00\"}", "{\"name\":\"range\",\"metadata\":\"00\"},{\"name\":\"range\",\"metadata\":\"01\"}", "twice"},
	{"\"assignment\":\"0102\"", "\"assignment\":\"01g2\"", "assignment"},
	{"\"assignment\":\"0102\"", "\"assignment\":{\"hex\":\"01\"}", "assignment"},
};

static char *replace_once(const char *s, const char *from, const char *to)
{
	const char *at = strstr(s, from);
	ck_assert_ptr_nonnull(at);
	size_t n = strlen(s) - strlen(from) + strlen(to) + 1;
	char *out = malloc(n);
	ck_assert_ptr_nonnull(out);
	snprintf(out, n, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
	return out;
}

/* The file is refused through every API that loads the group, and is left
 * exactly as it was. */
static void expect_refused(th *t, const char *file, const char *why)
{
	kg_str id = KC_STR_NULL;
	kg_loaded l;
	const char *reason = NULL;
	ck_assert_int_eq(kg__group_file_parse(file, strlen(file), &id, &l, &reason), -EBADMSG);
	ck_assert_msg(reason && strstr(reason, why), "refusal '%s' does not name '%s' for %s",
		      reason ? reason : "(none)", why, file);
	th_restart(t);
	ck_assert_int_eq(sub_write_atomic(t->vol.vfs, "groups/" G ".json", file, strlen(file)), 0);
	ck_assert_int_eq(th_heartbeat(t, 3, G, 3, "m-1", NULL), KERR_COORDINATOR_LOAD_IN_PROGRESS);
	mem x;
	memset(&x, 0, sizeof(x));
	ck_assert_int_eq(join(t, &x, 5, "", NULL, "cli"), KAAS_HANDLED);
	jg_resp jr;
	jg_parse(&x.r, 5, &jr);
	ck_assert_int_eq(jr.err, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	th_resp_free(&x.r);
	ck_assert_int_eq(th_commit_sync(t, 7, G, 3, "m-1", "t", 0, 1, NULL), KERR_COORDINATOR_LOAD_IN_PROGRESS);
	kg_coord_load_groups(t->c);
	kg_coord_flush(t->c);
	char *buf;
	size_t len;
	ck_assert_int_eq(sub_read_file(t->vol.vfs, "groups/" G ".json", 1 << 20, &buf, &len), 0);
	ck_assert_str_eq(buf, file);
	free(buf);
}

START_TEST(corrupt_membership_is_refused)
{
	th t;
	th_open(&t);
	/* The good one loads (and is the base of all the bad ones). */
	ck_assert_int_eq(sub_write_atomic(t.vol.vfs, "groups/" G ".json", good, strlen(good)), 0);
	ck_assert_int_eq(th_heartbeat(&t, 3, G, 3, "m-1", NULL), KERR_NONE);
	for (size_t i = 0; i < sizeof(corrupt) / sizeof(corrupt[0]); i++)
		expect_refused(&t, corrupt[i].file, corrupt[i].why);
	for (size_t i = 0; i < sizeof(member_faults) / sizeof(member_faults[0]); i++) {
		char *bad = replace_once(good, member_faults[i].from, member_faults[i].to);
		expect_refused(&t, bad, member_faults[i].why);
		free(bad);
	}
	th_close(&t);
}
END_TEST

/* Every prefix and a few thousand byte flips of a real file: parsed or
 * refused, never a crash or a leak (ASan), and a file that parses always
 * describes a state the coordinator can be in. */
START_TEST(garbage_never_crashes)
{
	th t;
	th_open(&t);
	mem a, b;
	stable_pair(&t, &a, &b);
	ck_assert_int_eq(th_commit_sync(&t, 7, G, 1, a.id, "t", 0, 100, "m"), KERR_NONE);
	char *file;
	size_t len;
	ck_assert_int_eq(sub_read_file(t.vol.vfs, "groups/" G ".json", 1 << 20, &file, &len), 0);
	size_t parsed = 0;
	for (size_t n = 0; n <= len; n++) {
		kg_str id = KC_STR_NULL;
		kg_loaded l;
		int rc = kg__group_file_parse(file, n, &id, &l, NULL);
		ck_assert(rc == 0 || rc == -EBADMSG);
		if (rc == 0) {
			parsed++;
			kg__loaded_free(&l);
			kg__str_free(&id);
		}
	}
	ck_assert_uint_eq(parsed, 1); /* only the whole file */
	uint64_t x = 0x9e3779b97f4a7c15ULL;
	char *mut = malloc(len + 1);
	for (int round = 0; round < 3000; round++) {
		memcpy(mut, file, len + 1);
		for (int k = 0; k < 1 + round % 3; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			mut[x % len] = (char)(x >> 32);
		}
		kg_str id = KC_STR_NULL;
		kg_loaded l;
		int rc = kg__group_file_parse(mut, len, &id, &l, NULL);
		ck_assert(rc == 0 || rc == -EBADMSG);
		if (rc == 0) {
			if (l.state != KC_EMPTY) {
				ck_assert_int_gt(l.nmembers, 0);
				ck_assert_int_gt(l.protocol_type.len, 0);
			}
			for (kg_member *m = l.members; m; m = m->next) {
				ck_assert_int_gt(m->id.len, 0);
				ck_assert_int_gt(m->session_timeout_ms, 0);
				ck_assert_int_gt(m->nprotos, 0);
			}
			kg__loaded_free(&l);
			kg__str_free(&id);
		}
	}
	free(mut);
	free(file);
	th_resp_free(&a.r);
	th_resp_free(&b.r);
	th_close(&t);
}
END_TEST

/* With its threads, a coordinator loads the groups on the volume by itself
 * when it starts: members that never come back expire, and the emptied
 * group is written, without any request naming the group. */
START_TEST(threads_load_and_expire_on_their_own)
{
	th t;
	th_open(&t);
	char *f1 = replace_once(good, "\"session_timeout_ms\":10000", "\"session_timeout_ms\":200");
	char *file = replace_once(f1, "\"offsets\":[]",
				  "\"offsets\":[{\"topic\":\"t\",\"partition\":0,\"offset\":5,"
				  "\"leader_epoch\":-1,\"metadata\":\"\",\"commit_ms\":1}]");
	ck_assert_int_eq(sub_write_atomic(t.vol.vfs, "groups/" G ".json", file, strlen(file)), 0);
	free(f1);
	free(file);
	kg_coord_close(t.c);
	t.cfg.manual = 0;
	t.cfg.now_ms = NULL;
	t.cfg.wall_ms = NULL;
	th_start(&t);
	int empty = 0;
	for (int i = 0; i < 3000 && !empty; i++) { /* up to a minute */
		char *buf = NULL;
		size_t len;
		if (sub_read_file(t.vol.vfs, "groups/" G ".json", 1 << 20, &buf, &len) == 0) {
			empty = strstr(buf, "\"state\":\"Empty\"") != NULL;
			free(buf);
		}
		if (!empty)
			usleep(20000);
	}
	ck_assert_msg(empty, "the group file never said the group had emptied");
	desc d;
	describe(&t, G, &d);
	ck_assert_str_eq(d.state, "Empty");
	th_close(&t);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "coord-restore", .tcase = "restore", .timeout = 120 },
			  KTEST_LIST(members_keep_their_generation,
				     absent_member_expires_and_the_rest_rebalance,
				     load_at_start_expires_members_that_never_return,
				     leave_is_written_and_restart_rebalances,
				     sync_waits_for_the_write,
				     static_member_stays_fenced,
				     odd_bytes_round_trip,
				     version_1_file_loads,
				     corrupt_membership_is_refused,
				     garbage_never_crashes,
				     threads_load_and_expire_on_their_own));
}
