/* test_shards.c — coordinators in a cluster: the shard hash, the owner of a
 * group's shard as the only coordinator (NOT_COORDINATOR elsewhere,
 * COORDINATOR_LOAD_IN_PROGRESS while it takes the shard over), files named
 * by epoch with the newest winning, and a zombie coordinator whose late
 * write is neither acknowledged nor ever read.  Two coordinators on one
 * volume, each with the leader map its own cluster layer would have applied. */
#include "kaas/coord/test/harness.h"
#include "kaas/core/leaders.h"
#include "util/test/ktest.h"

#define NSH 16
#define B1 7 /* th_open's broker */
#define B2 8

/* ---- leader maps ------------------------------------------------------------- */

typedef struct view {
	kb_leaders *m;
	int gate;       /* the broker's lease */
	int close_after; /* > 0: the gate closes after this many more questions */
} view;

static kb_leaders *view_leaders(void *arg)
{
	view *v = arg;
	if (v->m)
		kb_leaders_get(v->m);
	return v->m;
}

static int view_gate(void *arg)
{
	view *v = arg;
	int g = v->gate;
	if (v->close_after > 0 && --v->close_after == 0)
		v->gate = 0;
	return g;
}

/* Every shard led by `owner` at `epoch`, except shard `s` (led by
 * s_owner at s_epoch); brokers B1 and B2, both live. */
static void view_set(view *v, int32_t owner, int32_t epoch, int32_t s, int32_t s_owner,
		     int32_t s_epoch, int clear)
{
	kb_leaders *m = kb_leaders_new(2, 0, NSH);
	ck_assert_ptr_nonnull(m);
	m->brokers[0].id = B1;
	snprintf(m->brokers[0].host, sizeof(m->brokers[0].host), "host-%d", B1);
	m->brokers[0].port = 19092;
	m->brokers[0].live = 1;
	m->brokers[1].id = B2;
	snprintf(m->brokers[1].host, sizeof(m->brokers[1].host), "host-%d", B2);
	m->brokers[1].port = 29092;
	m->brokers[1].live = 1;
	for (int32_t i = 0; i < NSH; i++) {
		m->shard_leader[i] = i == s ? s_owner : owner;
		m->shard_epoch[i] = i == s ? s_epoch : epoch;
	}
	m->clear = clear;
	kb_leaders_put(v->m);
	v->m = m;
}

static int32_t shard(const char *g) { return kg_shard_of(g, strlen(g), NSH); }

/* A driven coordinator for broker id on t's volume and clock. */
static kg_coord *driven(th *t, int32_t id, view *v)
{
	kg_coord_config cfg = t->cfg;
	cfg.broker_id = id;
	cfg.leaders = view_leaders;
	cfg.leaders_arg = v;
	cfg.ack_gate = view_gate;
	cfg.ack_gate_arg = v;
	kg_coord *c = NULL;
	ck_assert_int_eq(kg_coord_create(t->vol.vfs, &cfg, &c), 0);
	return c;
}

/* th's helpers call t->c: run one against coordinator c. */
#define ON(t_, c_, expr_)                          \
	({                                         \
		kg_coord *saved_ = (t_)->c;        \
		(t_)->c = (c_);                    \
		__typeof__(expr_) r_ = (expr_);    \
		(t_)->c = saved_;                  \
		r_;                                \
	})

static int exists(th *t, const char *path)
{
	sub_stat st;
	return sub_stat_path(t->vol.vfs, path, &st) == 0;
}

static void put_file(th *t, const char *path, const char *gid, int64_t epoch, int64_t off)
{
	char buf[512];
	int n = snprintf(buf, sizeof(buf),
			 "{\"version\":1,\"group_id\":\"%s\",\"coordinator_epoch\":%lld,\"writer\":1,"
			 "\"written_ms\":1,\"generation\":0,\"protocol_type\":null,\"offsets\":[{\"topic\":"
			 "\"t\",\"partition\":0,\"offset\":%lld,\"leader_epoch\":-1,\"metadata\":\"\","
			 "\"commit_ms\":1}]}",
			 gid, (long long)epoch, (long long)off);
	ck_assert_int_eq(sub_write_atomic(t->vol.vfs, path, buf, (size_t)n), 0);
}

/* FindCoordinator v1 as a client of listener `lst` (NULL: the first) asks:
 * the error, node and port. */
static int16_t find_on(th *t, const char *lst, const char *key, int32_t *node, char *host,
		       size_t hostlen, int32_t *port)
{
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	kw_wr_str(&w, 0, key);
	kw_wr_i8(&w, 0);
	kg_coord_call call = {KAAS_API_FIND_COORDINATOR, 1, 0, {"cli", 3}, "/127.0.0.1", th_done, &r,
			      NULL, 0, lst};
	kw_rd rd;
	kw_wr resp = KAAS_WR_INIT;
	kw_rd_init(&rd, w.buf, w.len);
	ck_assert_int_eq(kg_coord_handle(t->c, &call, &rd, &resp), KAAS_HANDLED);
	th_done(&r, &resp);
	kw_wr_free(&resp);
	kw_wr_free(&w);
	tr rr;
	tr_init(&rr, &r, 0);
	ck_assert_int_eq(tr_i32(&rr), 0);
	int16_t err = tr_i16(&rr);
	tr_str(&rr);
	*node = tr_i32(&rr);
	kw_str h = tr_str(&rr);
	snprintf(host, hostlen, "%.*s", h.len < 0 ? 0 : h.len, h.len > 0 ? h.s : "");
	*port = tr_i32(&rr);
	tr_end(&rr);
	th_resp_free(&r);
	return err;
}

static int16_t find(th *t, const char *key, int32_t *node, char *host, size_t hostlen, int32_t *port)
{
	return find_on(t, NULL, key, node, host, hostlen, port);
}

/* JoinGroup v0 of a new member: the top-level error (KAAS_DEFERRED when parked). */
static int16_t join(th *t, const char *group, th_resp *r)
{
	kw_wr w = KAAS_WR_INIT;
	jg_req(&w, 0, group, 10000, 0, "", NULL, "consumer", "range=x");
	int rc = th_call(t, KAAS_API_JOIN_GROUP, 0, &w, r);
	if (rc == KAAS_DEFERRED)
		return KAAS_DEFERRED;
	jg_resp jr;
	jg_parse(r, 0, &jr);
	return jr.err;
}

/* Which group names are in ListGroups v0's answer (only its error when not 0). */
static int listed(th *t, const char *group)
{
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	kw_wr_i32(&w, 0); /* dummy so the buffer exists */
	w.len = 0;
	ck_assert_int_eq(th_call(t, KAAS_API_LIST_GROUPS, 0, &w, &r), KAAS_HANDLED);
	tr rr;
	tr_init(&rr, &r, 0);
	ck_assert_int_eq(tr_i16(&rr), 0);
	int32_t n = tr_arr(&rr), found = 0;
	for (int32_t i = 0; i < n; i++) {
		kw_str g = tr_str(&rr);
		tr_str(&rr);
		found |= tr_streq(g, group);
	}
	th_resp_free(&r);
	return found;
}

/* One group API's top-level error with a body that names `group`. */
static int16_t describe_err(th *t, const char *group)
{
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	kw_wr_array(&w, 0, 1);
	kw_wr_str(&w, 0, group);
	ck_assert_int_eq(th_call(t, KAAS_API_DESCRIBE_GROUPS, 0, &w, &r), KAAS_HANDLED);
	tr rr;
	tr_init(&rr, &r, 0);
	ck_assert_int_eq(tr_arr(&rr), 1);
	int16_t err = tr_i16(&rr);
	th_resp_free(&r);
	return err;
}

static int16_t delete_err(th *t, const char *group)
{
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	kw_wr_array(&w, 0, 1);
	kw_wr_str(&w, 0, group);
	ck_assert_int_eq(th_call(t, KAAS_API_DELETE_GROUPS, 0, &w, &r), KAAS_HANDLED);
	tr rr;
	tr_init(&rr, &r, 0);
	tr_i32(&rr);
	ck_assert_int_eq(tr_arr(&rr), 1);
	tr_str(&rr);
	int16_t err = tr_i16(&rr);
	th_resp_free(&r);
	return err;
}

/* ---- the tests ------------------------------------------------------------------ */

/* The hash is FNV-1a (32-bit) of the id's bytes mod the shard count: the
 * published test vectors, so a change of the function cannot go unseen. */
START_TEST(shard_hash_is_fnv1a_and_spreads)
{
	ck_assert_int_eq(kg_shard_of("", 0, 16), 0x811c9dc5u % 16);
	ck_assert_int_eq(kg_shard_of("a", 1, 16), 0xe40c292cu % 16);
	ck_assert_int_eq(kg_shard_of("foobar", 6, 16), 0xbf9cf968u % 16);
	ck_assert_int_eq(kg_shard_of("foobar", 6, 1000), 0xbf9cf968u % 1000);
	ck_assert_int_eq(kg_shard_of("x", 1, 0), 0);
	int hit[16] = {0};
	for (int i = 0; i < 1000; i++) {
		char g[32];
		snprintf(g, sizeof(g), "group-%d", i);
		int32_t s = kg_shard_of(g, strlen(g), 16);
		ck_assert(s >= 0 && s < 16);
		hit[s]++;
	}
	for (int s = 0; s < 16; s++)
		ck_assert_msg(hit[s] > 30 && hit[s] < 100, "shard %d got %d of 1000", s, hit[s]);
}
END_TEST

/* A broker that does not own the group's shard answers NOT_COORDINATOR to
 * every group API and names the owner in FindCoordinator; ListGroups lists
 * only what it owns. */
START_TEST(not_coordinator_on_a_shard_owned_elsewhere)
{
	th t;
	th_open(&t);
	view v1 = {NULL, 1, 0}, v2 = {NULL, 1, 0};
	const char *g = "orders-app";
	view_set(&v1, B1, 1, shard(g), B2, 4, 1);
	view_set(&v2, B1, 1, shard(g), B2, 4, 1);
	kg_coord *c1 = driven(&t, B1, &v1), *c2 = driven(&t, B2, &v2);
	kg_coord_tick(c1);
	kg_coord_tick(c2);

	int32_t node, port;
	char host[64];
	ck_assert_int_eq(ON(&t, c1, find(&t, g, &node, host, sizeof(host), &port)), 0);
	ck_assert_int_eq(node, B2);
	ck_assert_str_eq(host, "host-8");
	ck_assert_int_eq(port, 29092);
	ck_assert_int_eq(ON(&t, c2, find(&t, g, &node, host, sizeof(host), &port)), 0);
	ck_assert_int_eq(node, B2);
	/* By the endpoint of the client's listener; a coordinator without that
	 * listener is not named. */
	kb_lbroker *lb2 = &v1.m->brokers[1];
	lb2->nlst = 2;
	snprintf(lb2->lst[0].name, sizeof(lb2->lst[0].name), "PLAINTEXT");
	snprintf(lb2->lst[0].host, sizeof(lb2->lst[0].host), "host-8");
	lb2->lst[0].port = 29092;
	snprintf(lb2->lst[1].name, sizeof(lb2->lst[1].name), "OUTSIDE");
	snprintf(lb2->lst[1].host, sizeof(lb2->lst[1].host), "outside-8");
	lb2->lst[1].port = 39092;
	ck_assert_int_eq(ON(&t, c1, find_on(&t, "OUTSIDE", g, &node, host, sizeof(host), &port)), 0);
	ck_assert_str_eq(host, "outside-8");
	ck_assert_int_eq(port, 39092);
	ck_assert_int_eq(ON(&t, c1, find_on(&t, "INTERNAL", g, &node, host, sizeof(host), &port)),
			 KERR_COORDINATOR_NOT_AVAILABLE);

	/* The owner works; the other refuses every group API. */
	ck_assert_int_eq(ON(&t, c2, th_commit_sync(&t, 2, g, -1, "", "t", 0, 5, NULL)), 0);
	ck_assert(exists(&t, "groups/orders-app.0000000004.json"));
	ck_assert(!exists(&t, "groups/orders-app.json"));
	ck_assert_int_eq(ON(&t, c2, th_fetch(&t, 1, g, "t", 0, NULL, NULL, 0)), 5);
	ck_assert_int_eq(ON(&t, c1, th_commit_sync(&t, 2, g, -1, "", "t", 0, 6, NULL)), KERR_NOT_COORDINATOR);
	int16_t perr = 0;
	ck_assert_int_eq(ON(&t, c1, th_fetch(&t, 1, g, "t", 0, &perr, NULL, 0)), -1);
	ck_assert_int_eq(perr, KERR_NOT_COORDINATOR);
	th_resp r = {0};
	ck_assert_int_eq(ON(&t, c1, join(&t, g, &r)), KERR_NOT_COORDINATOR);
	th_resp_free(&r);
	ck_assert_int_eq(ON(&t, c1, th_heartbeat(&t, 0, g, 1, "m", NULL)), KERR_NOT_COORDINATOR);
	ck_assert_int_eq(ON(&t, c1, th_leave(&t, 0, g, "m", NULL, NULL)), KERR_NOT_COORDINATOR);
	ck_assert_int_eq(ON(&t, c1, describe_err(&t, g)), KERR_NOT_COORDINATOR);
	ck_assert_int_eq(ON(&t, c1, delete_err(&t, g)), KERR_NOT_COORDINATOR);
	ck_assert_int_eq(ON(&t, c2, listed(&t, g)), 1);
	ck_assert_int_eq(ON(&t, c1, listed(&t, g)), 0);

	/* An unled shard has no coordinator to name. */
	view_set(&v1, B1, 1, shard(g), -1, 5, 1);
	ck_assert_int_eq(ON(&t, c1, find(&t, g, &node, host, sizeof(host), &port)),
			 KERR_COORDINATOR_NOT_AVAILABLE);
	ck_assert_int_eq(node, -1);
	kg_coord_close(c1);
	kg_coord_close(c2);
	kb_leaders_put(v1.m);
	kb_leaders_put(v2.m);
	th_close(&t);
}
END_TEST

/* A shard given to this broker is served only once the map says the
 * successor rule holds (clear) and the coordinator has loaded it:
 * COORDINATOR_LOAD_IN_PROGRESS until then. */
START_TEST(load_in_progress_until_the_shard_is_taken_over)
{
	th t;
	th_open(&t);
	view v = {NULL, 1, 0};
	const char *g = "g";
	view_set(&v, B1, 3, -1, 0, 0, 0);
	kg_coord *c = driven(&t, B1, &v);
	kg_coord_tick(c);
	int32_t node, port;
	char host[64];
	ck_assert_int_eq(ON(&t, c, find(&t, g, &node, host, sizeof(host), &port)), 0);
	ck_assert_int_eq(node, B1);
	ck_assert_int_eq(ON(&t, c, th_commit_sync(&t, 2, g, -1, "", "t", 0, 1, NULL)),
			 KERR_COORDINATOR_LOAD_IN_PROGRESS);
	th_resp r = {0};
	ck_assert_int_eq(ON(&t, c, join(&t, g, &r)), KERR_COORDINATOR_LOAD_IN_PROGRESS);
	th_resp_free(&r);
	/* Clear, but not loaded yet (the timer has not run). */
	view_set(&v, B1, 3, -1, 0, 0, 1);
	ck_assert_int_eq(ON(&t, c, th_commit_sync(&t, 2, g, -1, "", "t", 0, 1, NULL)),
			 KERR_COORDINATOR_LOAD_IN_PROGRESS);
	kg_coord_tick(c);
	ck_assert_int_eq(ON(&t, c, th_commit_sync(&t, 2, g, -1, "", "t", 0, 1, NULL)), 0);
	/* A later generation that is not clear yet does not take away what
	 * is held at the same epoch. */
	view_set(&v, B1, 3, -1, 0, 0, 0);
	kg_coord_tick(c);
	ck_assert_int_eq(ON(&t, c, th_commit_sync(&t, 2, g, -1, "", "t", 0, 2, NULL)), 0);
	/* No map at all (not published yet): nothing is coordinated. */
	kb_leaders_put(v.m);
	v.m = NULL;
	kg_coord_tick(c);
	ck_assert_int_eq(ON(&t, c, th_commit_sync(&t, 2, g, -1, "", "t", 0, 3, NULL)), KERR_NOT_COORDINATOR);
	kg_coord_close(c);
	th_close(&t);
}
END_TEST

/* The cluster says "ready" only after kg_coord_settled(): every shard the
 * map gives this broker served at the map's epoch, whatever others own. */
START_TEST(settled_only_once_every_given_shard_is_served)
{
	th t;
	th_open(&t);
	view v = {NULL, 1, 0};
	/* B1 owns every shard but shard 5, which B2 owns; not clear yet. */
	view_set(&v, B1, 3, 5, B2, 4, 0);
	kg_coord *c = driven(&t, B1, &v);
	kg_coord_tick(c);
	ck_assert_int_eq(kg_coord_settled(c), 0);
	/* Clear, but the coordinator has not synced with the map yet. */
	view_set(&v, B1, 3, 5, B2, 4, 1);
	ck_assert_int_eq(kg_coord_settled(c), 0);
	kg_coord_tick(c);
	ck_assert_int_eq(kg_coord_settled(c), 1); /* shard 5 is not B1's to serve */
	/* A new epoch for B1's shards: not settled until they are taken again. */
	view_set(&v, B1, 6, 5, B2, 4, 1);
	ck_assert_int_eq(kg_coord_settled(c), 0);
	kg_coord_tick(c);
	ck_assert_int_eq(kg_coord_settled(c), 1);
	/* A broker without its lease serves nothing: nothing to wait for. */
	view_set(&v, B1, 7, 5, B2, 4, 1);
	v.gate = 0;
	ck_assert_int_eq(kg_coord_settled(c), 1);
	kg_coord_close(c);
	/* Without a leader map (one broker, the fuzz harness): always. */
	ck_assert_int_eq(kg_coord_settled(t.c), 1);
	kb_leaders_put(v.m);
	th_close(&t);
}
END_TEST

/* Readers take the highest epoch whose contents name the group (the legacy
 * name is epoch 0), claim it at their own epoch, and remove the older ones
 * — but never a file that names another group, nor one above their epoch. */
START_TEST(newest_epoch_wins)
{
	th t;
	th_open(&t);
	put_file(&t, "groups/g.json", "g", 0, 10);
	put_file(&t, "groups/g.0000000002.json", "g", 2, 20);
	put_file(&t, "groups/g.0000000003.json", "g", 3, 30);
	/* Another group's legacy file that looks like g at epoch 4 by name. */
	put_file(&t, "groups/g.0000000004.json", "g.0000000004", 0, 99);
	view v = {NULL, 1, 0};
	view_set(&v, B1, 5, -1, 0, 0, 1);
	kg_coord *c = driven(&t, B1, &v);
	kg_coord_tick(c);
	ck_assert_int_eq(ON(&t, c, th_fetch(&t, 1, "g", "t", 0, NULL, NULL, 0)), 30);
	ck_assert(exists(&t, "groups/g.0000000005.json"));
	ck_assert(!exists(&t, "groups/g.json"));
	ck_assert(!exists(&t, "groups/g.0000000002.json"));
	ck_assert(!exists(&t, "groups/g.0000000003.json"));
	/* The other group was read as itself and moved to its own epoch name. */
	ck_assert_int_eq(ON(&t, c, th_fetch(&t, 1, "g.0000000004", "t", 0, NULL, NULL, 0)), 99);
	ck_assert(exists(&t, "groups/g.0000000004.0000000005.json"));
	/* A file above this broker's epoch: a newer owner exists, nothing is served. */
	put_file(&t, "groups/h.0000000009.json", "h", 9, 1);
	int16_t perr = 0;
	ck_assert_int_eq(ON(&t, c, th_fetch(&t, 1, "h", "t", 0, &perr, NULL, 0)), -1);
	ck_assert_int_eq(perr, KERR_NOT_COORDINATOR);
	ck_assert(exists(&t, "groups/h.0000000009.json"));
	/* An unreadable newest file is refused, never passed over for an older one. */
	ck_assert_int_eq(sub_write_atomic(t.vol.vfs, "groups/k.0000000004.json", "{", 1), 0);
	put_file(&t, "groups/k.0000000001.json", "k", 1, 7);
	ck_assert_int_eq(ON(&t, c, th_fetch(&t, 1, "k", "t", 0, &perr, NULL, 0)), -1);
	ck_assert_int_eq(perr, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	/* A name that says one epoch and contents that say another is refused. */
	put_file(&t, "groups/m.0000000003.json", "m", 2, 7);
	ck_assert_int_eq(ON(&t, c, th_fetch(&t, 1, "m", "t", 0, &perr, NULL, 0)), -1);
	ck_assert_int_eq(perr, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	kg_coord_close(c);
	kb_leaders_put(v.m);
	th_close(&t);
}
END_TEST

/* A zombie coordinator (its lease gone, its map still the old one) writes a
 * commit after its successor took the shard over: the commit is not
 * acknowledged, the successor does not show it, and no later reader ever
 * takes the zombie's file. */
START_TEST(zombie_write_is_never_acknowledged_nor_read)
{
	th t;
	th_open(&t);
	const char *g = "g";
	view va = {NULL, 1, 0}, vb = {NULL, 1, 0};
	view_set(&va, B1, 1, -1, 0, 0, 1);
	view_set(&vb, B1, 1, -1, 0, 0, 1);
	kg_coord *a = driven(&t, B1, &va), *b = driven(&t, B2, &vb);
	kg_coord_tick(a);
	kg_coord_tick(b);
	ck_assert_int_eq(ON(&t, a, th_commit_sync(&t, 2, g, -1, "", "t", 0, 10, NULL)), 0);
	ck_assert(exists(&t, "groups/g.0000000001.json"));
	/* A commit waits for its write; then A is paused past its lease. */
	th_resp r = {0};
	ck_assert_int_eq(ON(&t, a, th_commit(&t, 2, g, -1, "", "t", 0, 11, NULL, &r)), KAAS_DEFERRED);
	/* The cluster moves the shard to B at epoch 2 (A still sees epoch 1:
	 * its lease is running out and its cluster layer does not run). */
	view_set(&vb, B2, 2, -1, 0, 0, 1);
	kg_coord_tick(b);
	ck_assert(exists(&t, "groups/g.0000000002.json"));
	ck_assert(!exists(&t, "groups/g.0000000001.json"));
	ck_assert_int_eq(ON(&t, b, th_fetch(&t, 1, g, "t", 0, NULL, NULL, 0)), 10);
	/* A's flusher asked the gate before it was paused mid-write; the
	 * write lands now, and the gate asked after it is shut. */
	va.close_after = 1;
	kg_coord_flush(a);
	ck_assert_int_eq(r.got, 1);
	ck_assert_int_eq(commit_err(&r, 2, "t", 0), KERR_NOT_COORDINATOR);
	th_resp_free(&r);
	ck_assert(exists(&t, "groups/g.0000000001.json")); /* the zombie's late file */
	kg_coord_stats st;
	kg_coord_get_stats(a, &st);
	ck_assert_uint_eq(st.write_unacked, 1);
	ck_assert_int_eq(ON(&t, b, th_fetch(&t, 1, g, "t", 0, NULL, NULL, 0)), 10);
	/* B commits on; a new coordinator at a later epoch reads B's, not A's. */
	ck_assert_int_eq(ON(&t, b, th_commit_sync(&t, 2, g, -1, "", "t", 0, 12, NULL)), 0);
	kg_coord_close(b);
	view vc = {NULL, 1, 0};
	view_set(&vc, B1, 3, -1, 0, 0, 1);
	kg_coord *c3 = driven(&t, B1, &vc);
	kg_coord_tick(c3);
	ck_assert_int_eq(ON(&t, c3, th_fetch(&t, 1, g, "t", 0, NULL, NULL, 0)), 12);
	ck_assert(!exists(&t, "groups/g.0000000001.json")); /* pruned at the claim */
	/* And A, with its lease back but the map moved, acknowledges nothing. */
	va.gate = 1;
	view_set(&va, B2, 2, -1, 0, 0, 1);
	kg_coord_tick(a);
	ck_assert_int_eq(ON(&t, a, th_commit_sync(&t, 2, g, -1, "", "t", 0, 13, NULL)), KERR_NOT_COORDINATOR);
	ck_assert_int_eq(ON(&t, c3, th_fetch(&t, 1, g, "t", 0, NULL, NULL, 0)), 12);
	kg_coord_close(a);
	kg_coord_close(c3);
	kb_leaders_put(va.m);
	kb_leaders_put(vb.m);
	kb_leaders_put(vc.m);
	th_close(&t);
}
END_TEST

/* A planned move: the map changes on the old owner (its lease still good)
 * while a commit waits for its write — the write happens, the answer is
 * NOT_COORDINATOR; a parked JoinGroup is told NOT_COORDINATOR at once, and
 * the group is dropped from memory (read again if the shard comes back). */
START_TEST(losing_a_shard_answers_parked_requests_and_forgets)
{
	th t;
	th_open(&t);
	const char *g = "g";
	view v = {NULL, 1, 0};
	view_set(&v, B1, 1, -1, 0, 0, 1);
	kg_coord *c = driven(&t, B1, &v);
	kg_coord_tick(c);
	ck_assert_int_eq(ON(&t, c, th_commit_sync(&t, 2, g, -1, "", "t", 0, 10, NULL)), 0);
	th_resp r1 = {0}, r2 = {0}, rc = {0};
	/* Two members: the second one's JoinGroup parks until the first rejoins. */
	int16_t j = ON(&t, c, join(&t, "jg", &r1));
	if (j == KAAS_DEFERRED) {
		kg_coord_tick(c);
		ck_assert_int_eq(r1.got, 1);
	} else {
		ck_assert_int_eq(j, 0);
	}
	ck_assert_int_eq(ON(&t, c, join(&t, "jg", &r2)), KAAS_DEFERRED);
	kg_coord_tick(c);
	ck_assert_int_eq(r2.got, 0);
	ck_assert_int_eq(ON(&t, c, th_commit(&t, 2, g, -1, "", "t", 0, 11, NULL, &rc)), KAAS_DEFERRED);
	view_set(&v, B2, 2, -1, 0, 0, 1);
	kg_coord_flush(c);
	ck_assert_int_eq(rc.got, 1);
	ck_assert_int_eq(commit_err(&rc, 2, "t", 0), KERR_NOT_COORDINATOR);
	kg_coord_tick(c);
	ck_assert_int_eq(r2.got, 1);
	jg_resp jr;
	jg_parse(&r2, 0, &jr);
	ck_assert_int_eq(jr.err, KERR_NOT_COORDINATOR);
	th_resp_free(&r1);
	/* Back at epoch 3: the group is read from the volume again. */
	view_set(&v, B1, 3, -1, 0, 0, 1);
	kg_coord_tick(c);
	ck_assert_int_eq(ON(&t, c, th_fetch(&t, 1, g, "t", 0, NULL, NULL, 0)), 10);
	ck_assert(exists(&t, "groups/g.0000000003.json"));
	th_resp_free(&r2);
	th_resp_free(&rc);
	kg_coord_close(c);
	kb_leaders_put(v.m);
	th_close(&t);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "coord-shards", .tcase = "shards", .timeout = 60 },
			  KTEST_LIST(shard_hash_is_fnv1a_and_spreads,
				     not_coordinator_on_a_shard_owned_elsewhere,
				     load_in_progress_until_the_shard_is_taken_over,
				     settled_only_once_every_given_shard_is_served,
				     newest_epoch_wins,
				     zombie_write_is_never_acknowledged_nor_read,
				     losing_a_shard_answers_parked_requests_and_forgets));
}
