/*
 * test_crash.c — power loss at every mutating step of the topic life cycle.
 *
 * A workload (create, write partition data, delete, recreate, alter, grow,
 * delete again) runs on the fault backend with crash_after=N for every N up
 * to the number of mutations the whole workload makes; unsynced changes are
 * reverted as the seed decides.  A new registry is then opened on the same
 * directory (a restarted broker) and ticked once.  Whatever N was, the state
 * must be one the rules allow:
 *   - no half-done leftovers: no reclaimed directory, abandoned claim or
 *     tombstone survives the restart and one tick;
 *   - every registry file is complete, and each registered topic's directory
 *     carries its ID;
 *   - a directory of a topic that is registered under a NEW ID holds none of
 *     the old incarnation's files (delete + recreate starts empty);
 *   - every name is usable again: created (or deleted, then created).
 * A second workload (a damaged registry entry, re-adoption, delete) checks
 * that records made durable are never gone before the trash is emptied.
 */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "substrates/sub.h"
#include "substrates/sub_fault.h"
#include "kaas/topics/topics.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"
#include "util/test/ktest.h"
#include "substrates/test/scratch.h"

static kw_str S(const char *s)
{
	kw_str x = {s, (int32_t)strlen(s)};
	return x;
}

static kt_topics *open_reg(sub_vfs *v)
{
	kt_topics_options o;
	kt_topics_options_init(&o);
	o.refresh_ms = 0;
	/* One volume for both roles, as with the default DATA/__cluster layout
	 * (here the registry sits at the volume's top: topics/, deleted-topics/). */
	o.cluster = v;
	o.data = v;
	o.claim_grace_ms = 0;
	o.miss_ttl_ms = 0;
	o.trash_retention_ms = 0; /* removal is part of what must complete */
	kt_topics *reg = NULL;
	if (kt_topics_open(&o, &reg))
		return NULL;
	return reg;
}

typedef struct ids {
	char first[40], second[40];
} ids;

/* The workload.  Errors after the crash are expected and ignored: the
 * point is where the volume is left. */
static void workload(sub_vfs *v, ids *out)
{
	char msg[256];
	kt_topic_info t;
	kt_topics *reg = open_reg(v);
	if (!reg)
		return;
	kt_topic_spec spec = {S("t"), 2, 1, NULL, 0};
	if (kt_topics_create(reg, &spec, 0, &t, msg, sizeof(msg)) == KERR_NONE)
		snprintf(out->first, sizeof(out->first), "%s", t.id);
	sub_mkdirs(v, "t/0", 0755);
	sub_write_atomic(v, "t/0/old-incarnation.log", "records", 7);
	kt_topics_delete(reg, S("t"), msg, sizeof(msg));
	if (kt_topics_create(reg, &spec, 0, &t, msg, sizeof(msg)) == KERR_NONE)
		snprintf(out->second, sizeof(out->second), "%s", t.id);
	kt_config_kv kv = {S("retention.ms"), S("1000")};
	kt_topics_alter_configs(reg, S("t"), &kv, 1, 0, msg, sizeof(msg));
	kt_topics_add_partitions(reg, S("t"), 3, 0, msg, sizeof(msg));
	kt_topic_spec spec2 = {S("u"), 1, 1, NULL, 0};
	kt_topics_create(reg, &spec2, 0, &t, msg, sizeof(msg));
	kt_topics_delete(reg, S("u"), msg, sizeof(msg));
	kt_topics_tick(reg);
	kt_topics_close(reg);
}

static int count_prefix(sub_vfs *v, const char *dir, const char *prefix)
{
	char **names;
	size_t n;
	int c = 0;
	if (sub_list(v, dir, &names, &n))
		return 0;
	for (size_t i = 0; i < n; i++)
		c += strncmp(names[i], prefix, strlen(prefix)) == 0;
	sub_names_free(names, n);
	return c;
}

static void stamp_of(sub_vfs *v, const char *topic, char id[64])
{
	char path[256], *buf;
	size_t len;
	id[0] = '\0';
	snprintf(path, sizeof(path), "%s/.topic-id.json", topic);
	if (sub_read_file(v, path, 4096, &buf, &len))
		return;
	json_t *j = json_loads(buf, 0, NULL);
	free(buf);
	if (json_is_string(json_object_get(j, "topic_id")))
		snprintf(id, 64, "%s", json_string_value(json_object_get(j, "topic_id")));
	json_decref(j);
}

static void check_recovered(sub_vfs *v, const ids *run, uint64_t n)
{
	kt_topics *reg = open_reg(v);
	ck_assert_msg(reg != NULL, "crash_after=%llu: registry does not open", (unsigned long long)n);
	ck_assert_int_eq(kt_topics_tick(reg), 0);

	ck_assert_msg(count_prefix(v, "", "~trash-") == 0, "crash_after=%llu: trash left", (unsigned long long)n);
	ck_assert_msg(count_prefix(v, "topics", "~") == 0, "crash_after=%llu: claim left", (unsigned long long)n);
	ck_assert_msg(count_prefix(v, "topics", ".") == 0, "crash_after=%llu: temp left", (unsigned long long)n);
	char **names;
	size_t cnt;
	ck_assert_int_eq(sub_list(v, "deleted-topics", &names, &cnt), 0);
	sub_names_free(names, cnt);
	ck_assert_msg(cnt == 0, "crash_after=%llu: %zu tombstones left", (unsigned long long)n, cnt);

	const char *topics[] = {"t", "u"};
	for (int i = 0; i < 2; i++) {
		kt_topic_info info;
		char sid[64], msg[256];
		sub_stat st;
		int rc = kt_topics_lookup(reg, topics[i], -1, &info);
		if (rc == 0) {
			stamp_of(v, topics[i], sid);
			ck_assert_msg(strcmp(sid, info.id) == 0, "crash_after=%llu: %s registered as %s, stamp %s",
				      (unsigned long long)n, topics[i], info.id, sid);
			if (i == 0 && strcmp(info.id, run->first) != 0)
				ck_assert_msg(sub_stat_path(v, "t/0/old-incarnation.log", &st) == -ENOENT,
					      "crash_after=%llu: new incarnation %s inherited old data",
					      (unsigned long long)n, info.id);
			ck_assert_int_eq(kt_topics_delete(reg, S(topics[i]), msg, sizeof(msg)), KERR_NONE);
		}
		kt_topic_spec spec = {S(topics[i]), 1, 1, NULL, 0};
		ck_assert_msg(kt_topics_create(reg, &spec, 0, &info, msg, sizeof(msg)) == KERR_NONE,
			      "crash_after=%llu: %s not usable: %s", (unsigned long long)n, topics[i], msg);
		ck_assert_msg(sub_stat_path(v, "t/0/old-incarnation.log", &st) == -ENOENT || i != 0,
			      "crash_after=%llu: recreated t inherited old data", (unsigned long long)n);
	}
	kt_topics_close(reg);
}

START_TEST(crash_anywhere_in_the_life_cycle)
{
	char url[512], err[256];
	sub_vfs *v;
	ids run = {{0}, {0}};
	scratch root; /* a fresh one for every run */
	const char *dir = root.dir;

	/* Count the mutations of one clean run. */
	scratch_make(&root, "topics-crash");
	snprintf(url, sizeof(url), "fault:%s?seed=1", dir);
	ck_assert_int_eq(sub_open_url(url, &v, err, sizeof(err)), 0);
	workload(v, &run);
	uint64_t total = sub_fault_mutations(v);
	sub_destroy(v);
	ck_assert(run.first[0] && run.second[0]);
	ck_assert_str_ne(run.first, run.second);
	scratch_close(&root);
	ck_assert_uint_gt(total, 20);

	for (uint64_t n = 0; n <= total; n++) {
		memset(&run, 0, sizeof(run));
		scratch_make(&root, "topics-crash");
		snprintf(url, sizeof(url), "fault:%s?seed=%llu&crash_after=%llu", dir, (unsigned long long)n + 7,
			 (unsigned long long)n);
		ck_assert_int_eq(sub_open_url(url, &v, err, sizeof(err)), 0);
		workload(v, &run);
		ck_assert_msg(n == total || sub_fault_is_crashed(v) == 1, "crash_after=%llu did not crash",
			      (unsigned long long)n);
		sub_destroy(v);

		ck_assert_int_eq(sub_open_url(dir, &v, err, sizeof(err)), 0);
		check_recovered(v, &run, n);
		sub_destroy(v);
		scratch_close(&root);
	}
}
END_TEST

/* ---- records survive every crash until the trash is emptied --------------------------------
 * A topic with records; its registry entry is then damaged (garbage), a
 * restarted broker re-adopts it from the volume, a client deletes it.  A
 * crash anywhere in that, followed by a restart with the default trash
 * retention, must leave the records somewhere: in the topic's directory
 * (registered under its original ID, or an orphan that will be re-adopted)
 * or in a trash entry.  Nothing is gone before the retention is over. */

static kt_topics *open_reg_keep(sub_vfs *v)
{
	kt_topics_options o;
	kt_topics_options_init(&o);
	o.refresh_ms = 0;
	o.cluster = v;
	o.data = v;
	o.claim_grace_ms = 0;
	o.miss_ttl_ms = 0; /* trash_retention_ms: the default day */
	kt_topics *reg = NULL;
	if (kt_topics_open(&o, &reg))
		return NULL;
	return reg;
}

#define RECORDS "acknowledged records"

/* Returns 1 once the records are durable on the volume (the point after
 * which losing them is a failure), 0 if the crash came first. */
static int workload_keep(sub_vfs *v, char id[40])
{
	char msg[256], buf[200];
	kt_topic_info t;
	int durable = 0;
	kt_topics *reg = open_reg_keep(v);
	if (!reg)
		return 0;
	kt_topic_spec spec = {S("k"), 1, 1, NULL, 0};
	if (kt_topics_create(reg, &spec, 0, &t, msg, sizeof(msg)) == KERR_NONE) {
		snprintf(id, 40, "%s", t.id);
		int n = snprintf(buf, sizeof(buf),
				 "{\"version\":1,\"topic_id\":\"%s\",\"epoch\":1,\"high_watermark\":2,"
				 "\"log_start_offset\":0}", t.id);
		if (sub_mkdirs(v, "k/0", 0755) == 0 && sub_write_atomic(v, "k/0/manifest.json", buf, (size_t)n) == 0 &&
		    sub_write_atomic(v, "k/0/00000000000000000001-0.log", RECORDS, strlen(RECORDS)) == 0)
			durable = 1;
	}
	kt_topics_close(reg);
	if (!durable)
		return 0;
	sub_write_atomic(v, "topics/k.json", "garbage", 7);
	reg = open_reg_keep(v); /* re-adopts k from the volume */
	if (reg) {
		kt_topics_delete(reg, S("k"), msg, sizeof(msg));
		kt_topics_tick(reg);
		kt_topics_close(reg);
	}
	return 1;
}

static int records_in(sub_vfs *v, const char *dir)
{
	char path[600], *buf = NULL;
	size_t len;
	snprintf(path, sizeof(path), "%s/0/00000000000000000001-0.log", dir);
	if (sub_read_file(v, path, 4096, &buf, &len))
		return 0;
	int ok = len == strlen(RECORDS) && memcmp(buf, RECORDS, len) == 0;
	free(buf);
	return ok;
}

static void check_kept(sub_vfs *v, int durable, const char *id, uint64_t n)
{
	kt_topics *reg = open_reg_keep(v);
	ck_assert_msg(reg != NULL, "crash_after=%llu: registry does not open", (unsigned long long)n);
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	int found = records_in(v, "k");
	kt_topic_info info;
	if (found && kt_topics_lookup(reg, "k", -1, &info) == 0)
		ck_assert_msg(strcmp(info.id, id) == 0, "crash_after=%llu: k re-registered as %s, not %s",
			      (unsigned long long)n, info.id, id);
	char **names;
	size_t cnt;
	ck_assert_int_eq(sub_list(v, "", &names, &cnt), 0);
	for (size_t i = 0; i < cnt; i++)
		if (strncmp(names[i], "~trash-", 7) == 0)
			found += records_in(v, names[i]);
	sub_names_free(names, cnt);
	if (durable)
		ck_assert_msg(found >= 1, "crash_after=%llu: the records are gone", (unsigned long long)n);
	kt_topics_close(reg);
}

START_TEST(crash_never_loses_records_before_the_trash_is_emptied)
{
	char url[512], err[256], id[40] = "";
	sub_vfs *v;
	scratch root; /* a fresh one for every run */
	const char *dir = root.dir;
	scratch_make(&root, "topics-crash");
	snprintf(url, sizeof(url), "fault:%s?seed=3", dir);
	ck_assert_int_eq(sub_open_url(url, &v, err, sizeof(err)), 0);
	ck_assert_int_eq(workload_keep(v, id), 1);
	uint64_t total = sub_fault_mutations(v);
	sub_destroy(v);
	/* Without a crash: deleted, and the records are in the trash. */
	ck_assert_int_eq(sub_open_url(dir, &v, err, sizeof(err)), 0);
	ck_assert_int_eq(count_prefix(v, "", "~trash-"), 1);
	check_kept(v, 1, id, total);
	sub_destroy(v);
	scratch_close(&root);
	ck_assert_uint_gt(total, 10);

	for (uint64_t n = 0; n <= total; n++) {
		scratch_make(&root, "topics-crash");
		snprintf(url, sizeof(url), "fault:%s?seed=%llu&crash_after=%llu", dir, (unsigned long long)n + 11,
			 (unsigned long long)n);
		ck_assert_int_eq(sub_open_url(url, &v, err, sizeof(err)), 0);
		id[0] = '\0';
		int durable = workload_keep(v, id);
		sub_destroy(v);
		ck_assert_int_eq(sub_open_url(dir, &v, err, sizeof(err)), 0);
		check_kept(v, durable, id, n);
		sub_destroy(v);
		scratch_close(&root);
	}
}
END_TEST

int main(void)
{
	/* Hundreds of simulated crashes log thousands of expected errors:
	 * quiet unless KAAS_LOG_LEVEL asks for them. */
	ku_log_level = -1;
	if (getenv("KAAS_LOG_LEVEL"))
		ku_log_init_from_env();
	return ktest_main((struct ktest){ .suite = "topics-crash", .tcase = "core", .timeout = 300 },
			  KTEST_LIST(crash_anywhere_in_the_life_cycle,
				     crash_never_loses_records_before_the_trash_is_emptied));
}
