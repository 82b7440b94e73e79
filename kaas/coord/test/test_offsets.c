/* test_offsets.c — committed offsets: durable before acknowledged, coalesced
 * writes, reload after a coordinator restart, generation checks, delete,
 * the group file on the volume, hostile group ids, failing writes. */
#include <pthread.h>
#include <sys/stat.h>

#include "kaas/coord/test/harness.h"
#include "util/test/ktest.h"

START_TEST(commit_is_acknowledged_only_when_durable)
{
	th t;
	th_open(&t);
	th_resp r = {0};
	ck_assert_int_eq(th_commit(&t, 2, "g1", -1, "", "orders", 3, 42, "m1", &r), KAAS_DEFERRED);
	ck_assert_int_eq(r.got, 0);
	/* Not yet written: nobody may see it, and there is no file. */
	int16_t perr;
	ck_assert_int_eq(th_fetch(&t, 1, "g1", "orders", 3, &perr, NULL, 0), -1);
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(t.vol.vfs, "groups/g1.json", &st), -ENOENT);
	kg_coord_flush(t.c);
	ck_assert_int_eq(r.got, 1);
	ck_assert_int_eq(commit_err(&r, 2, "orders", 3), KERR_NONE);
	ck_assert_int_eq(sub_stat_path(t.vol.vfs, "groups/g1.json", &st), 0);
	char meta[64];
	ck_assert_int_eq(th_fetch(&t, 1, "g1", "orders", 3, &perr, meta, sizeof(meta)), 42);
	ck_assert_int_eq(perr, 0);
	ck_assert_str_eq(meta, "m1");
	th_resp_free(&r);
	th_close(&t);
}
END_TEST

/* The ack gate (the broker's lease): a commit whose write returned while
 * the gate is closed is answered NOT_COORDINATOR, never success. */
static int gate_state = 1;
static int gate(void *arg)
{
	(void)arg;
	return gate_state;
}

START_TEST(commit_is_refused_when_the_lease_is_gone)
{
	th t;
	th_open(&t);
	kg_coord_close(t.c);
	t.cfg.ack_gate = gate;
	th_start(&t);
	th_resp r = {0};
	gate_state = 1;
	ck_assert_int_eq(th_commit(&t, 2, "g1", -1, "", "orders", 3, 42, "m1", &r), KAAS_DEFERRED);
	kg_coord_flush(t.c);
	ck_assert_int_eq(r.got, 1);
	ck_assert_int_eq(commit_err(&r, 2, "orders", 3), KERR_NONE);
	th_resp_free(&r);
	memset(&r, 0, sizeof(r));
	/* The gate closes while the commit waits for its write: asked after
	 * the write, it turns the answer into NOT_COORDINATOR. */
	ck_assert_int_eq(th_commit(&t, 2, "g1", -1, "", "orders", 3, 43, "m2", &r), KAAS_DEFERRED);
	gate_state = 0;
	kg_coord_flush(t.c);
	ck_assert_int_eq(r.got, 1);
	ck_assert_int_eq(commit_err(&r, 2, "orders", 3), KERR_NOT_COORDINATOR);
	th_resp_free(&r);
	/* With the gate closed nothing is served at all. */
	memset(&r, 0, sizeof(r));
	ck_assert_int_eq(th_commit(&t, 2, "g1", -1, "", "orders", 3, 44, "m3", &r), KAAS_HANDLED);
	ck_assert_int_eq(commit_err(&r, 2, "orders", 3), KERR_NOT_COORDINATOR);
	th_resp_free(&r);
	gate_state = 1;
	th_close(&t);
}
END_TEST

/* Every OffsetCommit version writes, every OffsetFetch version reads,
 * and everything survives a coordinator restart. */
START_TEST(all_versions_round_trip_and_reload)
{
	th t;
	th_open(&t);
	for (int16_t v = 0; v <= 7; v++) {
		char topic[16];
		snprintf(topic, sizeof(topic), "t%d", v);
		ck_assert_int_eq(th_commit_sync(&t, v, "g", -1, "", topic, v, 1000 + v, v % 2 ? NULL : "x"),
				 KERR_NONE);
	}
	for (int round = 0; round < 2; round++) {
		for (int16_t fv = 0; fv <= 7; fv++) {
			for (int16_t v = 0; v <= 7; v++) {
				char topic[16], meta[16];
				int16_t perr = -1;
				snprintf(topic, sizeof(topic), "t%d", v);
				ck_assert_int_eq(th_fetch(&t, fv, "g", topic, v, &perr, meta, sizeof(meta)), 1000 + v);
				ck_assert_int_eq(perr, 0);
				ck_assert_str_eq(meta, v % 2 ? "" : "x");
			}
			/* A partition without a commit. */
			int16_t perr = -1;
			ck_assert_int_eq(th_fetch(&t, fv, "g", "t1", 99, &perr, NULL, 0), -1);
			ck_assert_int_eq(perr, 0);
		}
		th_restart(&t);
	}
	th_close(&t);
}
END_TEST

/* OffsetFetch with topics = null (v2+) lists everything the group has. */
START_TEST(fetch_all_topics)
{
	th t;
	th_open(&t);
	const char *topics[] = {"b", "a", "c"};
	for (int i = 0; i < 3; i++)
		for (int p = 0; p < 2; p++)
			ck_assert_int_eq(th_commit_sync(&t, 7, "g", -1, "", topics[i], p, i * 10 + p, NULL), 0);
	th_restart(&t);
	for (int16_t v = 2; v <= 7; v++) {
		int flex = v >= 6;
		kw_wr w = KAAS_WR_INIT;
		th_resp r = {0};
		kw_wr_str(&w, flex, "g");
		kw_wr_array(&w, flex, -1);
		if (v >= 7)
			kw_wr_i8(&w, 0);
		kw_wr_tags(&w, flex);
		ck_assert_int_eq(th_call(&t, KAAS_API_OFFSET_FETCH, v, &w, &r), KAAS_HANDLED);
		tr rr;
		tr_init(&rr, &r, flex);
		if (v >= 3)
			tr_i32(&rr);
		ck_assert_int_eq(tr_arr(&rr), 3);
		int64_t sum = 0;
		for (int i = 0; i < 3; i++) {
			kw_str name = tr_str(&rr);
			ck_assert_int_eq(name.len, 1);
			ck_assert_int_eq(tr_arr(&rr), 2);
			for (int p = 0; p < 2; p++) {
				ck_assert_int_eq(tr_i32(&rr), p);
				int64_t off = tr_i64(&rr);
				ck_assert_int_eq(off % 10, p);
				sum += off;
				if (v >= 5)
					ck_assert_int_eq(tr_i32(&rr), 5); /* the leader epoch committed (v6+ sends 5) */
				tr_str(&rr);
				ck_assert_int_eq(tr_i16(&rr), 0);
				tr_tags(&rr);
			}
			tr_tags(&rr);
		}
		ck_assert_int_eq(sum, 0 + 1 + 10 + 11 + 20 + 21);
		ck_assert_int_eq(tr_i16(&rr), 0);
		tr_tags(&rr);
		tr_end(&rr);
		th_resp_free(&r);
	}
	th_close(&t);
}
END_TEST

/* A consumer committing far more often than the volume can fsync: the
 * commits that arrive during one write share the next one. */
START_TEST(commits_coalesce_into_one_write)
{
	th t;
	th_open(&t);
	enum { N = 200 };
	th_resp r[N];
	memset(r, 0, sizeof(r));
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(th_commit(&t, 7, "busy", -1, "", "t", i % 4, i, NULL, &r[i]), KAAS_DEFERRED);
	kg_coord_stats st;
	kg_coord_get_stats(t.c, &st);
	ck_assert_uint_eq(st.group_writes, 0);
	kg_coord_flush(t.c);
	kg_coord_get_stats(t.c, &st);
	ck_assert_uint_eq(st.group_writes, 1);
	ck_assert_uint_eq(st.commits, N);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(r[i].got, 1);
		ck_assert_int_eq(commit_err(&r[i], 7, "t", i % 4), 0);
		th_resp_free(&r[i]);
	}
	for (int p = 0; p < 4; p++)
		ck_assert_int_eq(th_fetch(&t, 7, "busy", "t", p, NULL, NULL, 0), N - 4 + p);
	th_close(&t);
}
END_TEST

/* A group with members takes commits only from its current generation. */
START_TEST(commit_generation_rules)
{
	th t;
	th_open(&t);
	/* A generation for a group nobody knows: stale. */
	ck_assert_int_eq(th_commit_sync(&t, 2, "cg", 3, "m", "t", 0, 1, NULL), KERR_ILLEGAL_GENERATION);
	/* One member, generation 1, CompletingRebalance until it syncs. */
	kw_wr w = KAAS_WR_INIT;
	th_resp jr = {0};
	jg_req(&w, 3, "cg", 10000, 10000, "", NULL, "consumer", "range=x");
	ck_assert_int_eq(th_call(&t, KAAS_API_JOIN_GROUP, 3, &w, &jr), KAAS_DEFERRED);
	kg_coord_tick(t.c);
	jg_resp j;
	jg_parse(&jr, 3, &j);
	ck_assert_int_eq(j.err, 0);
	ck_assert_int_eq(th_commit_sync(&t, 5, "cg", 1, j.member, "t", 0, 1, NULL), KERR_REBALANCE_IN_PROGRESS);
	th_resp sr = {0};
	sg_req(&w, 0, "cg", 1, j.member, NULL, 0, NULL, NULL);
	th_sync_durable(&t, 0, &w, &sr);
	ck_assert_int_eq(th_commit_sync(&t, 5, "cg", 1, j.member, "t", 0, 7, NULL), KERR_NONE);
	ck_assert_int_eq(th_commit_sync(&t, 5, "cg", 2, j.member, "t", 0, 8, NULL), KERR_ILLEGAL_GENERATION);
	ck_assert_int_eq(th_commit_sync(&t, 5, "cg", 1, "other", "t", 0, 8, NULL), KERR_UNKNOWN_MEMBER_ID);
	/* assign()-style commits (no generation) are for empty groups only. */
	ck_assert_int_eq(th_commit_sync(&t, 5, "cg", -1, "", "t", 0, 8, NULL), KERR_UNKNOWN_MEMBER_ID);
	ck_assert_int_eq(th_commit_sync(&t, 0, "cg", -1, "", "t", 0, 8, NULL), KERR_UNKNOWN_MEMBER_ID);
	ck_assert_int_eq(th_fetch(&t, 5, "cg", "t", 0, NULL, NULL, 0), 7);
	/* Null group id. */
	ck_assert_int_eq(th_commit_sync(&t, 2, NULL, -1, "", "t", 0, 8, NULL), KERR_INVALID_GROUP_ID);
	th_resp_free(&jr);
	th_resp_free(&sr);
	th_close(&t);
}
END_TEST

static int16_t only_partition_one(void *arg, kw_str topic, int32_t partition)
{
	(void)arg;
	(void)topic;
	return partition == 1 ? KERR_NONE : KERR_UNKNOWN_TOPIC_OR_PARTITION;
}

START_TEST(per_partition_errors)
{
	th t;
	th_open(&t);
	char big[5000];
	memset(big, 'm', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ck_assert_int_eq(th_commit_sync(&t, 3, "g", -1, "", "t", 0, 1, big), KERR_OFFSET_METADATA_TOO_LARGE);
	kg_coord_set_topic_check(t.c, only_partition_one, NULL);
	ck_assert_int_eq(th_commit_sync(&t, 3, "g", -1, "", "t", 0, 1, NULL), KERR_UNKNOWN_TOPIC_OR_PARTITION);
	ck_assert_int_eq(th_commit_sync(&t, 3, "g", -1, "", "t", 1, 1, NULL), KERR_NONE);
	/* A request with good and bad partitions: the good ones are committed. */
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	kw_wr_str(&w, 0, "g");
	kw_wr_i32(&w, -1);
	kw_wr_str(&w, 0, "");
	kw_wr_array(&w, 0, 2);
	for (int i = 0; i < 2; i++) {
		kw_wr_str(&w, 0, i ? "u" : "t");
		kw_wr_array(&w, 0, 2);
		for (int p = 0; p < 2; p++) {
			kw_wr_i32(&w, p);
			kw_wr_i64(&w, 500 + p);
			kw_wr_str(&w, 0, NULL);
		}
	}
	ck_assert_int_eq(th_call(&t, KAAS_API_OFFSET_COMMIT, 5, &w, &r), KAAS_DEFERRED);
	kg_coord_flush(t.c);
	tr rr;
	tr_init(&rr, &r, 0);
	ck_assert_int_eq(tr_i32(&rr), 0);
	ck_assert_int_eq(tr_arr(&rr), 2);
	for (int i = 0; i < 2; i++) {
		kw_str n = tr_str(&rr);
		ck_assert_kstr(n, i ? "u" : "t");
		ck_assert_int_eq(tr_arr(&rr), 2);
		for (int p = 0; p < 2; p++) {
			ck_assert_int_eq(tr_i32(&rr), p);
			ck_assert_int_eq(tr_i16(&rr), p == 1 ? 0 : KERR_UNKNOWN_TOPIC_OR_PARTITION);
		}
	}
	tr_end(&rr);
	ck_assert_int_eq(th_fetch(&t, 3, "g", "u", 1, NULL, NULL, 0), 501);
	ck_assert_int_eq(th_fetch(&t, 3, "g", "u", 0, NULL, NULL, 0), -1);
	th_resp_free(&r);
	th_close(&t);
}
END_TEST

/* Hostile group ids stay inside groups/, and come back from ListGroups. */
START_TEST(hostile_group_ids_on_the_volume)
{
	th t;
	th_open(&t);
	char longid[3000];
	memset(longid, 'L', sizeof(longid) - 1);
	longid[sizeof(longid) - 1] = '\0';
	const char *ids[] = {"../x", "/abs", "a/../../b", ".", "..", "", "%2F", "~", "g\xc3\xa9", "\xff\x01",
			     longid};
	size_t n = sizeof(ids) / sizeof(ids[0]);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(th_commit_sync(&t, 2, ids[i], -1, "", "t", 0, (int64_t)i + 1, NULL), 0);
	/* Nothing but groups/ and pid-blocks/ at the top, nothing but .json
	 * files in groups/. */
	char **names;
	size_t nn;
	ck_assert_int_eq(sub_list(t.vol.vfs, "", &names, &nn), 0);
	ck_assert_uint_eq(nn, 2);
	ck_assert_str_eq(names[0], "groups");
	ck_assert_str_eq(names[1], "pid-blocks");
	sub_names_free(names, nn);
	ck_assert_int_eq(sub_list(t.vol.vfs, "groups", &names, &nn), 0);
	ck_assert_uint_eq(nn, n);
	for (size_t i = 0; i < nn; i++) {
		ck_assert(names[i][0] != '.');
		ck_assert(strlen(names[i]) < 255);
		ck_assert(strstr(names[i], ".json"));
	}
	sub_names_free(names, nn);

	th_restart(&t);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(th_fetch(&t, 2, ids[i], "t", 0, NULL, NULL, 0), (int64_t)i + 1);
	th_restart(&t);
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	ck_assert_int_eq(th_call(&t, KAAS_API_LIST_GROUPS, 2, &w, &r), KAAS_HANDLED);
	tr rr;
	tr_init(&rr, &r, 0);
	tr_i32(&rr);
	ck_assert_int_eq(tr_i16(&rr), 0);
	ck_assert_int_eq(tr_arr(&rr), (int32_t)n);
	int seen[16] = {0};
	for (size_t i = 0; i < n; i++) {
		kw_str id = tr_str(&rr);
		for (size_t k = 0; k < n; k++)
			if (tr_streq(id, ids[k]))
				seen[k]++;
		kw_str pt = tr_str(&rr);
		ck_assert_int_eq(pt.len, 0);
	}
	tr_end(&rr);
	for (size_t k = 0; k < n; k++)
		ck_assert_msg(seen[k] == 1, "id %zu listed %d times", k, seen[k]);
	th_resp_free(&r);
	th_close(&t);
}
END_TEST

/* A failed write answers NOT_COORDINATOR, and the group is read again from
 * the volume before it is served. */
START_TEST(failed_write_is_not_acknowledged)
{
	th t;
	th_open(&t);
	ck_assert_int_eq(th_commit_sync(&t, 2, "g", -1, "", "t", 0, 10, NULL), 0);
	/* groups/ replaced by a file: every write and read fails. */
	char path[512];
	snprintf(path, sizeof(path), "%s/groups", t.vol.dir);
	char moved[600];
	snprintf(moved, sizeof(moved), "%s/groups.away", t.vol.dir);
	ck_assert_int_eq(rename(path, moved), 0);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fclose(f);
	ck_assert_int_eq(th_commit_sync(&t, 2, "g", -1, "", "t", 0, 11, NULL), KERR_NOT_COORDINATOR);
	kg_coord_stats st;
	kg_coord_get_stats(t.c, &st);
	ck_assert_uint_eq(st.write_failures, 1);
	int16_t perr = 0;
	ck_assert_int_eq(th_fetch(&t, 1, "g", "t", 0, &perr, NULL, 0), -1);
	ck_assert_int_eq(perr, KERR_COORDINATOR_LOAD_IN_PROGRESS);
	/* The volume comes back: the last durable commit is what is served. */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(rename(moved, path), 0);
	ck_assert_int_eq(th_fetch(&t, 1, "g", "t", 0, &perr, NULL, 0), 10);
	ck_assert_int_eq(th_commit_sync(&t, 2, "g", -1, "", "t", 0, 12, NULL), 0);
	ck_assert_int_eq(th_fetch(&t, 1, "g", "t", 0, &perr, NULL, 0), 12);
	th_close(&t);
}
END_TEST

/* A file this kaas cannot read is reported, never overwritten. */
START_TEST(corrupt_group_file_is_refused)
{
	th t;
	th_open(&t);
	const char *bad = "{\"version\": 1, \"group_id\": \"g\", \"offsets\": 12}";
	ck_assert_int_eq(sub_write_atomic(t.vol.vfs, "groups/g.json", bad, strlen(bad)), 0);
	ck_assert_int_eq(th_commit_sync(&t, 2, "g", -1, "", "t", 0, 12, NULL), KERR_COORDINATOR_LOAD_IN_PROGRESS);
	char *buf;
	size_t len;
	ck_assert_int_eq(sub_read_file(t.vol.vfs, "groups/g.json", 4096, &buf, &len), 0);
	ck_assert_str_eq(buf, bad);
	free(buf);
	/* Written by a newer coordinator epoch: this one is stale. */
	const char *newer = "{\"version\":1,\"group_id\":\"h\",\"coordinator_epoch\":5,\"generation\":0,"
			    "\"offsets\":[]}";
	ck_assert_int_eq(sub_write_atomic(t.vol.vfs, "groups/h.json", newer, strlen(newer)), 0);
	ck_assert_int_eq(th_commit_sync(&t, 2, "h", -1, "", "t", 0, 12, NULL), KERR_NOT_COORDINATOR);
	th_close(&t);
}
END_TEST

/* ConsumerProtocolSubscription v0 for the given topics. */
static void subscription(char *out, size_t *len, const char *t1, const char *t2)
{
	kw_wr w = KAAS_WR_INIT;
	kw_wr_i16(&w, 0);
	kw_wr_array(&w, 0, t2 ? 2 : 1);
	kw_wr_str(&w, 0, t1);
	if (t2)
		kw_wr_str(&w, 0, t2);
	kw_wr_bytes(&w, 0, NULL, -1);
	memcpy(out, w.buf, w.len);
	*len = w.len;
	kw_wr_free(&w);
}

static void offset_delete(th *t, const char *group, const char *topic, int16_t *top, int16_t *perr)
{
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	kw_wr_str(&w, 0, group);
	kw_wr_array(&w, 0, 1);
	kw_wr_str(&w, 0, topic);
	kw_wr_array(&w, 0, 1);
	kw_wr_i32(&w, 0);
	if (th_call(t, KAAS_API_OFFSET_DELETE, 0, &w, &r) == KAAS_DEFERRED)
		kg_coord_flush(t->c);
	tr rr;
	tr_init(&rr, &r, 0);
	*top = tr_i16(&rr);
	ck_assert_int_eq(tr_i32(&rr), 0);
	int32_t nt = tr_arr(&rr);
	*perr = -1;
	if (nt == 1) {
		kw_str n = tr_str(&rr);
		ck_assert_kstr(n, topic);
		ck_assert_int_eq(tr_arr(&rr), 1);
		ck_assert_int_eq(tr_i32(&rr), 0);
		*perr = tr_i16(&rr);
	}
	tr_end(&rr);
	th_resp_free(&r);
}

START_TEST(offset_delete_rules)
{
	th t;
	th_open(&t);
	int16_t top, perr;
	offset_delete(&t, "nope", "t", &top, &perr);
	ck_assert_int_eq(top, KERR_GROUP_ID_NOT_FOUND);
	ck_assert_int_eq(th_commit_sync(&t, 2, "g", -1, "", "a", 0, 5, NULL), 0);
	ck_assert_int_eq(th_commit_sync(&t, 2, "g", -1, "", "b", 0, 6, NULL), 0);
	/* A consuming member subscribed to "a". */
	char meta[128];
	size_t mlen;
	subscription(meta, &mlen, "a", NULL);
	kw_wr w = KAAS_WR_INIT;
	th_resp jr = {0};
	kw_wr_str(&w, 0, "g");
	kw_wr_i32(&w, 10000);
	kw_wr_str(&w, 0, "");
	kw_wr_str(&w, 0, "consumer");
	kw_wr_array(&w, 0, 1);
	kw_wr_str(&w, 0, "range");
	kw_wr_bytes(&w, 0, meta, (int32_t)mlen);
	ck_assert_int_eq(th_call(&t, KAAS_API_JOIN_GROUP, 0, &w, &jr), KAAS_DEFERRED);
	kg_coord_tick(t.c);
	jg_resp j;
	jg_parse(&jr, 0, &j);
	ck_assert_int_eq(j.err, 0);
	th_resp sr = {0};
	sg_req(&w, 0, "g", 1, j.member, NULL, 0, NULL, NULL);
	th_sync_durable(&t, 0, &w, &sr);
	offset_delete(&t, "g", "a", &top, &perr);
	ck_assert_int_eq(top, 0);
	ck_assert_int_eq(perr, KERR_GROUP_SUBSCRIBED_TO_TOPIC);
	offset_delete(&t, "g", "b", &top, &perr);
	ck_assert_int_eq(top, 0);
	ck_assert_int_eq(perr, 0);
	th_restart(&t);
	ck_assert_int_eq(th_fetch(&t, 2, "g", "a", 0, NULL, NULL, 0), 5);
	ck_assert_int_eq(th_fetch(&t, 2, "g", "b", 0, NULL, NULL, 0), -1);
	/* The member survives the restart (its subscription with it) ... */
	offset_delete(&t, "g", "a", &top, &perr);
	ck_assert_int_eq(top, 0);
	ck_assert_int_eq(perr, KERR_GROUP_SUBSCRIBED_TO_TOPIC);
	/* ... until its session runs out: then the group is empty. */
	t.now += 10001;
	kg_coord_tick(t.c);
	kg_coord_flush(t.c);
	offset_delete(&t, "g", "a", &top, &perr);
	ck_assert_int_eq(top, 0);
	ck_assert_int_eq(perr, 0);
	/* No offsets left: no file either. */
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(t.vol.vfs, "groups/g.json", &st), -ENOENT);
	th_resp_free(&jr);
	th_resp_free(&sr);
	th_close(&t);
}
END_TEST

static void delete_groups(th *t, int16_t v, const char *a, const char *b, int16_t *ea, int16_t *eb)
{
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	kw_wr_array(&w, 0, 2);
	kw_wr_str(&w, 0, a);
	kw_wr_str(&w, 0, b);
	ck_assert_int_eq(th_call(t, KAAS_API_DELETE_GROUPS, v, &w, &r), KAAS_HANDLED);
	tr rr;
	tr_init(&rr, &r, 0);
	ck_assert_int_eq(tr_i32(&rr), 0);
	ck_assert_int_eq(tr_arr(&rr), 2);
	kw_str n = tr_str(&rr);
	ck_assert_kstr(n, a);
	*ea = tr_i16(&rr);
	n = tr_str(&rr);
	ck_assert_kstr(n, b);
	*eb = tr_i16(&rr);
	tr_end(&rr);
	th_resp_free(&r);
}

START_TEST(delete_groups_rules)
{
	th t;
	th_open(&t);
	ck_assert_int_eq(th_commit_sync(&t, 2, "old", -1, "", "t", 0, 5, NULL), 0);
	kw_wr w = KAAS_WR_INIT;
	th_resp jr = {0};
	jg_req(&w, 0, "busy", 10000, 0, "", NULL, "consumer", "range=x");
	ck_assert_int_eq(th_call(&t, KAAS_API_JOIN_GROUP, 0, &w, &jr), KAAS_DEFERRED);
	kg_coord_tick(t.c);
	int16_t ea, eb;
	delete_groups(&t, 1, "old", "busy", &ea, &eb);
	ck_assert_int_eq(ea, 0);
	ck_assert_int_eq(eb, KERR_NON_EMPTY_GROUP);
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(t.vol.vfs, "groups/old.json", &st), -ENOENT);
	ck_assert_int_eq(th_fetch(&t, 2, "old", "t", 0, NULL, NULL, 0), -1);
	delete_groups(&t, 0, "old", "never", &ea, &eb);
	ck_assert_int_eq(ea, KERR_GROUP_ID_NOT_FOUND);
	ck_assert_int_eq(eb, KERR_GROUP_ID_NOT_FOUND);
	th_restart(&t);
	ck_assert_int_eq(th_fetch(&t, 2, "old", "t", 0, NULL, NULL, 0), -1);
	th_resp_free(&jr);
	th_close(&t);
}
END_TEST

/* With its threads running: commits from several threads, answered by the
 * flusher; close() writes what was accepted. */
typedef struct committer {
	th *t;
	int id;
	th_resp r[50];
} committer;

static void *commit_thread(void *arg)
{
	committer *cm = arg;
	for (int i = 0; i < 50; i++) {
		char group[16];
		snprintf(group, sizeof(group), "g%d", cm->id);
		th_commit(cm->t, 7, group, -1, "", "t", 0, i, NULL, &cm->r[i]);
	}
	return NULL;
}

START_TEST(threaded_commits)
{
	th t;
	th_open(&t);
	kg_coord_close(t.c);
	t.cfg.manual = 0;
	t.cfg.now_ms = NULL;
	th_start(&t);
	committer cm[4];
	pthread_t thr[4];
	memset(cm, 0, sizeof(cm));
	for (int i = 0; i < 4; i++) {
		cm[i].t = &t;
		cm[i].id = i;
		ck_assert_int_eq(pthread_create(&thr[i], NULL, commit_thread, &cm[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(thr[i], NULL);
	kg_coord_close(t.c); /* waits for the flusher */
	t.cfg.manual = 1;
	t.cfg.now_ms = th_clock;
	th_start(&t);
	for (int i = 0; i < 4; i++) {
		for (int k = 0; k < 50; k++) {
			ck_assert_int_eq(cm[i].r[k].got, 1);
			ck_assert_int_eq(commit_err(&cm[i].r[k], 7, "t", 0), 0);
			th_resp_free(&cm[i].r[k]);
		}
		char group[16];
		snprintf(group, sizeof(group), "g%d", i);
		ck_assert_int_eq(th_fetch(&t, 7, group, "t", 0, NULL, NULL, 0), 49);
	}
	th_close(&t);
}
END_TEST

/* KIP-211: offsets expire once their group has had no members, and they
 * have not been committed, for offsets.retention.minutes. */
START_TEST(retention_expires_offsets_of_empty_groups)
{
	th t;
	th_open(&t);
	const int64_t R = 7LL * 24 * 3600 * 1000;
	ck_assert_int_eq(th_commit_sync(&t, 2, "old", -1, "", "t", 0, 5, NULL), 0);
	ck_assert_int_eq(th_commit_sync(&t, 2, "old", -1, "", "t", 1, 6, NULL), 0);
	/* "busy" has a member the whole time. */
	kw_wr w = KAAS_WR_INIT;
	th_resp jr = {0}, sr = {0};
	jg_req(&w, 0, "busy", 30000, 0, "", NULL, "consumer", "range=x");
	ck_assert_int_eq(th_call(&t, KAAS_API_JOIN_GROUP, 0, &w, &jr), KAAS_DEFERRED);
	kg_coord_tick(t.c);
	jg_resp j;
	jg_parse(&jr, 0, &j);
	sg_req(&w, 0, "busy", 1, j.member, NULL, 0, NULL, NULL);
	th_sync_durable(&t, 0, &w, &sr);
	ck_assert_int_eq(th_commit_sync(&t, 2, "busy", 1, j.member, "t", 0, 7, NULL), 0);

	t.wall += R / 2;
	ck_assert_int_eq(th_commit_sync(&t, 2, "old", -1, "", "t", 1, 8, NULL), 0); /* fresh again */
	t.wall += R / 2 + 1;
	kg_coord_expire_offsets(t.c);
	kg_coord_flush(t.c);
	/* t/0 of "old" is R+1 old; t/1 was committed R/2 ago. */
	ck_assert_int_eq(th_fetch(&t, 2, "old", "t", 0, NULL, NULL, 0), -1);
	ck_assert_int_eq(th_fetch(&t, 2, "old", "t", 1, NULL, NULL, 0), 8);
	/* A group with a member keeps everything. */
	ck_assert_int_eq(th_heartbeat(&t, 0, "busy", 1, j.member, NULL), 0);
	ck_assert_int_eq(th_fetch(&t, 2, "busy", "t", 0, NULL, NULL, 0), 7);
	/* Its member leaves: the clock starts now, not at the old commit. */
	ck_assert_int_eq(th_leave(&t, 0, "busy", j.member, NULL, NULL), 0);
	t.wall += R / 2;
	kg_coord_expire_offsets(t.c);
	kg_coord_flush(t.c);
	ck_assert_int_eq(th_fetch(&t, 2, "busy", "t", 0, NULL, NULL, 0), 7);
	t.wall += R / 2 + 1;
	kg_coord_expire_offsets(t.c);
	kg_coord_flush(t.c);
	ck_assert_int_eq(th_fetch(&t, 2, "busy", "t", 0, NULL, NULL, 0), -1);
	ck_assert_int_eq(th_fetch(&t, 2, "old", "t", 1, NULL, NULL, 0), -1);
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(t.vol.vfs, "groups/old.json", &st), -ENOENT);
	kg_coord_stats cs;
	kg_coord_get_stats(t.c, &cs);
	ck_assert_uint_eq(cs.expired, 3);
	th_resp_free(&jr);
	th_resp_free(&sr);
	th_close(&t);
}
END_TEST

/* After a restart, groups only on the volume get a fresh retention clock. */
START_TEST(retention_after_restart_is_conservative)
{
	th t;
	th_open(&t);
	ck_assert_int_eq(th_commit_sync(&t, 2, "g", -1, "", "t", 0, 5, NULL), 0);
	t.wall += 30LL * 24 * 3600 * 1000; /* the broker was down for a month */
	th_restart(&t);
	kg_coord_expire_offsets(t.c);
	kg_coord_flush(t.c);
	ck_assert_int_eq(th_fetch(&t, 2, "g", "t", 0, NULL, NULL, 0), 5);
	t.wall += 7LL * 24 * 3600 * 1000;
	kg_coord_expire_offsets(t.c);
	kg_coord_flush(t.c);
	ck_assert_int_eq(th_fetch(&t, 2, "g", "t", 0, NULL, NULL, 0), -1);
	th_close(&t);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "coord-offsets", .tcase = "offsets", .timeout = 60 },
			  KTEST_LIST(commit_is_acknowledged_only_when_durable, commit_is_refused_when_the_lease_is_gone,
				     all_versions_round_trip_and_reload,
				     fetch_all_topics,
				     commits_coalesce_into_one_write,
				     commit_generation_rules,
				     per_partition_errors,
				     hostile_group_ids_on_the_volume,
				     failed_write_is_not_acknowledged,
				     corrupt_group_file_is_refused,
				     offset_delete_rules,
				     delete_groups_rules,
				     threaded_commits,
				     retention_expires_offsets_of_empty_groups,
				     retention_after_restart_is_conservative));
}
