/*
 * test_identity.c — a topic directory is reclaimed only on proof, lost
 * registry entries are rebuilt from the volume, and what is deleted or
 * reclaimed stays in the trash until its retention is over or it is
 * emptied by hand.  Partition manifests are the storage engine's own
 * (ks_partition_open writes them), segment logs are files with bytes.
 *
 * Length: one case per identity rule of docs/topics.md, all on the
 * fixtures at the top (volumes, stamps, manifests with records); split,
 * each half would carry its own copy of them.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kaas/proto/kerr.h"
#include "kaas/storage/storage.h"
#include "kaas/topics/registry_int.h"
#include "kaas/topics/topics.h"
#include "kaas/topics/trash.h"
#include "kaas/topics/test/harness.h"
#include "substrates/sub.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/test/ktest.h"

#define OTHER_ID "11111111-2222-4333-8444-555555555555"
#define THIRD_ID "99999999-8888-4777-8666-555555555555"
#define DAY_MS (24LL * 3600 * 1000)

/* ---- the broker's log, captured ----------------------------------------------------------- */

static char logpath[300];
static int saved_stderr = -1;

static void log_capture(void)
{
	snprintf(logpath, sizeof(logpath), "%s/log", tmpdir);
	fflush(stderr);
	saved_stderr = dup(2);
	int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);
	ck_assert_int_ge(fd, 0);
	dup2(fd, 2);
	close(fd);
}

/* 1 when the captured log has a line with both strings at `level`. */
static int logged(const char *level, const char *what)
{
	fflush(stderr);
	FILE *f = fopen(logpath, "r");
	if (!f)
		return 0;
	char line[4096];
	int found = 0;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, level) && strstr(line, what);
	fclose(f);
	return found;
}

static void setup(void)
{
	volumes_open("identity");
	log_capture();
}

static void teardown(void)
{
	if (saved_stderr >= 0) {
		fflush(stderr);
		dup2(saved_stderr, 2);
		close(saved_stderr);
		saved_stderr = -1;
	}
	volumes_close();
}

/* ---- helpers -------------------------------------------------------------------------------- */

static kt_topics *open_reg_ret(int64_t retention)
{
	kt_topics_options o;
	kt_topics_options_init(&o);
	o.refresh_ms = 0;
	o.cluster = cluster;
	o.data = data;
	o.num_partitions = 1;
	o.claim_grace_ms = 0;
	o.miss_ttl_ms = 0;
	o.trash_retention_ms = retention;
	kt_topics *reg;
	ck_assert_int_eq(kt_topics_open(&o, &reg), 0);
	return reg;
}

static kt_topics *open_reg(void) { return open_reg_ret(DAY_MS); }

static kw_str S(const char *s)
{
	kw_str x = {s, (int32_t)strlen(s)};
	return x;
}

static int exists(sub_vfs *v, const char *path)
{
	sub_stat st;
	return sub_stat_path(v, path, &st) == 0;
}

static int count_prefix(sub_vfs *v, const char *dir, const char *prefix)
{
	char **names;
	size_t n;
	int c = 0;
	if (sub_list(v, dir, &names, &n))
		return -1;
	for (size_t i = 0; i < n; i++)
		c += strncmp(names[i], prefix, strlen(prefix)) == 0;
	sub_names_free(names, n);
	return c;
}

/* The first name in dir starting with prefix (static buffer), or NULL. */
static const char *find_prefix(sub_vfs *v, const char *dir, const char *prefix)
{
	static char found[512];
	char **names;
	size_t n;
	found[0] = '\0';
	if (sub_list(v, dir, &names, &n))
		return NULL;
	for (size_t i = 0; i < n && !found[0]; i++)
		if (strncmp(names[i], prefix, strlen(prefix)) == 0)
			snprintf(found, sizeof(found), "%s", names[i]);
	sub_names_free(names, n);
	return found[0] ? found : NULL;
}

static void put_file(sub_vfs *v, const char *path, const void *content, size_t len)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		ck_assert_int_eq(sub_mkdirs(v, dir, 0755), 0);
	}
	ck_assert_int_eq(sub_write_atomic(v, path, content, len), 0);
}

static void put_str(sub_vfs *v, const char *path, const char *s) { put_file(v, path, s, strlen(s)); }

static void write_stamp(const char *topic, const char *id)
{
	char path[512], buf[200];
	snprintf(path, sizeof(path), "%s/.topic-id.json", topic);
	int n = snprintf(buf, sizeof(buf), "{\"topic_id\":\"%s\",\"created_ms\":1}", id);
	ck_assert_int_eq(sub_write_atomic(data, path, buf, (size_t)n), 0);
}

static void stamp_of(const char *dir, char id[64])
{
	char path[512], *buf;
	size_t len;
	id[0] = '\0';
	snprintf(path, sizeof(path), "%s/.topic-id.json", dir);
	if (sub_read_file(data, path, 4096, &buf, &len))
		return;
	json_t *j = json_loadb(buf, len, 0, NULL);
	free(buf);
	if (json_is_string(json_object_get(j, "topic_id")))
		snprintf(id, 64, "%s", json_string_value(json_object_get(j, "topic_id")));
	json_decref(j);
}

/* Partition `p` of `topic` as the storage engine leaves it: its manifest
 * (topic_id = id) and a segment log holding `records`. */
static void partition_with_data(const char *topic, int p, const char *id, const char *records)
{
	char dir[300], path[400];
	snprintf(dir, sizeof(dir), "%s/%d", topic, p);
	ks_partition *part = NULL;
	ck_assert_int_eq(ks_partition_open(data, dir, id, 1, NULL, &part), 0);
	ks_partition_close(part);
	ck_assert(exists(data, dir));
	snprintf(path, sizeof(path), "%s/0000000001-00000000000000000000.log", dir);
	put_str(data, path, records);
}

/* The storage engine accepts the partition for topic id `id`. */
static int storage_accepts(const char *topic, int p, const char *id)
{
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/%d", topic, p);
	ks_partition *part = NULL;
	int rc = ks_partition_open(data, dir, id, 0, NULL, &part);
	ks_partition_close(part);
	return rc == 0;
}

static void read_records(const char *topic, int p, char *out, size_t len)
{
	char path[400], *buf;
	size_t n;
	snprintf(path, sizeof(path), "%s/%d/0000000001-00000000000000000000.log", topic, p);
	out[0] = '\0';
	if (sub_read_file(data, path, 4096, &buf, &n))
		return;
	snprintf(out, len, "%.*s", (int)n, buf);
	free(buf);
}

static kt_topic_info create_topic(kt_topics *reg, const char *name, int32_t parts)
{
	char msg[256];
	kt_topic_info t;
	kt_topic_spec spec = {S(name), parts, 1, NULL, 0};
	ck_assert_int_eq(kt_topics_create(reg, &spec, 0, &t, msg, sizeof(msg)), KERR_NONE);
	return t;
}

/* A topic with records in every partition, as a broker left it. */
static kt_topic_info topic_with_records(const char *name, int32_t parts)
{
	kt_topics *reg = open_reg();
	kt_topic_info t = create_topic(reg, name, parts);
	kt_config_kv kv = {S("retention.ms"), S("123456")};
	char msg[256];
	ck_assert_int_eq(kt_topics_alter_configs(reg, S(name), &kv, 1, 0, msg, sizeof(msg)), KERR_NONE);
	for (int p = 0; p < parts; p++) {
		char rec[64];
		snprintf(rec, sizeof(rec), "acknowledged records of %s/%d", name, p);
		partition_with_data(name, p, t.id, rec);
	}
	kt_topics_close(reg);
	return t;
}

static void assert_records_kept(const char *dir, int32_t parts, const char *name)
{
	for (int p = 0; p < parts; p++) {
		char want[64], got[64];
		snprintf(want, sizeof(want), "acknowledged records of %s/%d", name, p);
		read_records(dir, p, got, sizeof(got));
		ck_assert_str_eq(got, want);
	}
}

/* ---- rewritten stamps --------------------------------------------------------------------------- */

START_TEST(rewritten_stamp_keeps_the_topic_and_logs_a_conflict)
{
	kt_topic_info t = topic_with_records("orders", 3);
	/* Another valid UUID in the stamp; the registry and every manifest still
	 * name the real topic.  This used to reclaim the whole topic at start. */
	write_stamp("orders", OTHER_ID);

	kt_topics *reg = open_reg_ret(0); /* even a zero retention must not matter */
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	kt_topic_info l;
	ck_assert_int_eq(kt_topics_lookup(reg, "orders", -1, &l), 0);
	ck_assert_str_eq(l.id, t.id);
	ck_assert_int_eq(l.partitions, 3);
	assert_records_kept("orders", 3, "orders");
	ck_assert_int_eq(count_prefix(data, "", "~"), 0); /* nothing moved aside */
	char sid[64];
	stamp_of("orders", sid);
	ck_assert_str_eq(sid, t.id);
	for (int p = 0; p < 3; p++)
		ck_assert(storage_accepts("orders", p, t.id));
	/* The contradicting stamp is kept for the operator, and said so. */
	const char *kept = find_prefix(data, "orders", ".topic-id.conflict-");
	ck_assert_ptr_nonnull(kept);
	char path[600], *buf;
	size_t len;
	snprintf(path, sizeof(path), "orders/%s", kept);
	ck_assert_int_eq(sub_read_file(data, path, 4096, &buf, &len), 0);
	ck_assert_ptr_nonnull(strstr(buf, OTHER_ID));
	free(buf);
	ck_assert(logged("WARN", "conflicting identity"));
	ck_assert(!logged("INFO", "reclaiming"));
	kt_topics_close(reg);
}
END_TEST

START_TEST(consistent_foreign_id_not_recorded_deleted_is_quarantined)
{
	/* Stamp and manifests agree on an ID the registry does not name, and
	 * nothing says that ID was deleted: unknown identity.  Kept aside whole,
	 * never in the trash; the registered topic gets a fresh directory. */
	kt_topic_info t = topic_with_records("pay", 2);
	ck_assert_int_eq(sub_remove_tree(data, "pay"), 0);
	partition_with_data("pay", 0, OTHER_ID, "acknowledged records of pay/0");
	partition_with_data("pay", 1, OTHER_ID, "acknowledged records of pay/1");
	write_stamp("pay", OTHER_ID);

	kt_topics *reg = open_reg_ret(0);
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 0);
	const char *q = find_prefix(data, "", "~quarantine-");
	ck_assert_ptr_nonnull(q);
	char qdir[300];
	snprintf(qdir, sizeof(qdir), "%s", q);
	ck_assert_ptr_nonnull(strstr(qdir, OTHER_ID));
	assert_records_kept(qdir, 2, "pay");
	char sid[64];
	stamp_of("pay", sid);
	ck_assert_str_eq(sid, t.id);
	ck_assert(logged("ERROR", "quarantin"));
	/* Emptying the trash, whatever the age, never touches quarantine. */
	size_t removed = 99;
	ck_assert_int_eq(kt_trash_empty(data, -1, ku_wall_ms(), &removed), 0);
	ck_assert_uint_eq(removed, 0);
	ck_assert(exists(data, qdir));
	kt_topics_close(reg);
}
END_TEST

START_TEST(a_stale_view_never_moves_the_registered_incarnation_aside)
{
	/* Broker A read the registry when "pay" was id X.  Meanwhile another
	 * broker deleted X and created the name again as OTHER_ID, whose
	 * directory holds acknowledged records.  A, resuming with its old view
	 * and X's directory not yet prepared, must not judge OTHER_ID's
	 * directory foreign (its stamp and manifests agree on an ID not
	 * recorded as deleted: quarantine) — the volume registers OTHER_ID. */
	kt_topic_info t = topic_with_records("pay", 2);
	kt_topics *reg = open_reg_ret(0);

	ck_assert_int_eq(sub_remove_tree(data, "pay"), 0);
	partition_with_data("pay", 0, OTHER_ID, "acknowledged records of pay/0");
	partition_with_data("pay", 1, OTHER_ID, "acknowledged records of pay/1");
	write_stamp("pay", OTHER_ID);
	char path[SUB_PATH_MAX], *buf;
	size_t len;
	kt__reg_path(path, sizeof(path), "pay");
	ck_assert_int_eq(sub_read_file(cluster, path, 1 << 20, &buf, &len), 0);
	for (char *at = buf; (at = strstr(at, t.id)); at += strlen(OTHER_ID))
		memcpy(at, OTHER_ID, strlen(OTHER_ID));
	ck_assert_int_eq(sub_write_atomic(cluster, path, buf, len), 0);
	free(buf);
	char dpath[300];
	snprintf(dpath, sizeof(dpath), "deleted-ids/%s.json", t.id);
	put_str(cluster, dpath, "{}");

	/* A's view: X registered, its directory not yet made ready. */
	topic_ent *e = kt__mem_find(reg, "pay");
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(e->info.id, t.id);
	e->dir_ready = 0;
	ck_assert_int_eq(kt_topics_prepare_dir(reg, &t), -ESTALE);
	ck_assert_int_eq(count_prefix(data, "", "~quarantine-"), 0);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 0);
	char sid[64];
	stamp_of("pay", sid);
	ck_assert_str_eq(sid, OTHER_ID);
	assert_records_kept("pay", 2, "pay");
	ck_assert(logged("WARN", "is no longer the registered incarnation (the registry names " OTHER_ID ")"));

	/* Once A reads the registry again it follows OTHER_ID, and the
	 * directory is still where its leader left it. */
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	kt_topic_info now;
	ck_assert_int_eq(kt_topics_lookup(reg, "pay", 3, &now), 0);
	ck_assert_str_eq(now.id, OTHER_ID);
	ck_assert_int_eq(count_prefix(data, "", "~quarantine-"), 0);
	stamp_of("pay", sid);
	ck_assert_str_eq(sid, OTHER_ID);
	assert_records_kept("pay", 2, "pay");
	kt_topics_close(reg);
}
END_TEST

START_TEST(mixed_manifests_are_quarantined)
{
	/* Manifests disagree among themselves and with the registry. */
	topic_with_records("mix", 1);
	ck_assert_int_eq(sub_remove_tree(data, "mix"), 0);
	partition_with_data("mix", 0, OTHER_ID, "acknowledged records of mix/0");
	partition_with_data("mix", 1, THIRD_ID, "acknowledged records of mix/1");
	write_stamp("mix", OTHER_ID);
	/* Even with OTHER_ID recorded as deleted, the evidence is not consistent. */
	put_str(cluster, "deleted-ids/" OTHER_ID ".json", "{}");
	kt_topics *reg = open_reg_ret(0);
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 0);
	const char *q = find_prefix(data, "", "~quarantine-");
	ck_assert_ptr_nonnull(q);
	char qdir[300];
	snprintf(qdir, sizeof(qdir), "%s", q);
	assert_records_kept(qdir, 2, "mix");
	kt_topics_close(reg);
}
END_TEST

START_TEST(proven_old_incarnation_goes_to_the_trash_and_stays)
{
	/* Stamp and manifests agree on OTHER_ID and OTHER_ID is recorded as
	 * deleted: an earlier incarnation, reclaimed — into the trash. */
	ck_assert_int_eq(sub_mkdirs(data, "old", 0755), 0);
	partition_with_data("old", 0, OTHER_ID, "acknowledged records of old/0");
	write_stamp("old", OTHER_ID);
	put_str(cluster, "deleted-ids/" OTHER_ID ".json", "{\"version\":1}");
	kt_topics *reg = open_reg();
	kt_topic_info t = create_topic(reg, "old", 1);
	ck_assert_str_ne(t.id, OTHER_ID);
	ck_assert(!exists(data, "old/0/0000000001-00000000000000000000.log")); /* new topic starts empty */
	ck_assert(logged("INFO", "earlier, deleted incarnation"));
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	const char *tr = find_prefix(data, "", "~trash-");
	ck_assert_ptr_nonnull(tr);
	char tdir[300];
	snprintf(tdir, sizeof(tdir), "%s", tr);
	assert_records_kept(tdir, 1, "old");
	kt_trash_entry *v;
	size_t n;
	ck_assert_int_eq(kt_trash_list(data, &v, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(v[0].kind, KT_TRASH);
	ck_assert_str_eq(v[0].topic, "old");
	ck_assert_str_eq(v[0].topic_id, OTHER_ID);
	ck_assert_str_eq(v[0].reason, "reclaimed");
	free(v);
	kt_topics_close(reg);
}
END_TEST

/* ---- lost or unreadable registry entries ----------------------------------------------------------- */

static void check_readopted(kt_topics *reg, const kt_topic_info *t, const char *name, int32_t parts)
{
	kt_topic_info l;
	ck_assert_int_eq(kt_topics_lookup(reg, name, -1, &l), 0);
	ck_assert_str_eq(l.id, t->id);
	ck_assert_int_eq(l.partitions, parts);
	assert_records_kept(name, parts, name);
	ck_assert_int_eq(count_prefix(data, "", "~"), 0);
	for (int p = 0; p < parts; p++)
		ck_assert(storage_accepts(name, p, t->id));
	/* The rebuilt entry is on the volume for every other broker. */
	topic_ent *e = NULL;
	sub_stat st;
	char why[128];
	ck_assert_int_eq(kt__reg_read(reg, name, &e, &st, why, sizeof(why)), RF_OK);
	ck_assert_str_eq(e->info.id, t->id);
	kt__ent_free(e);
}

START_TEST(garbage_registry_file_is_rebuilt_from_the_volume)
{
	kt_topic_info t = topic_with_records("g", 3);
	static const char garbage[] = "\x01\x02 not json at all \xff";
	put_file(cluster, "topics/g.json", garbage, sizeof(garbage) - 1);
	kt_topics *reg = open_reg();
	check_readopted(reg, &t, "g", 3);
	ck_assert(logged("WARN", "re-adopted it from the volume"));
	/* The unreadable file is kept, not deleted. */
	const char *lost = find_prefix(cluster, "topics", "~lost-");
	ck_assert_ptr_nonnull(lost);
	char path[300], *buf;
	size_t len;
	snprintf(path, sizeof(path), "topics/%s", lost);
	ck_assert_int_eq(sub_read_file(cluster, path, 4096, &buf, &len), 0);
	ck_assert_uint_eq(len, sizeof(garbage) - 1);
	free(buf);
	/* Auto-create finds it; it does not make a new incarnation. */
	kt_topic_info a;
	ck_assert_int_eq(kt_topics_auto_create(reg, S("g"), &a), KERR_NONE);
	ck_assert_str_eq(a.id, t.id);
	kt_topics_close(reg);
}
END_TEST

START_TEST(invalid_registry_entry_is_rebuilt_from_the_volume)
{
	/* A JSON object that is not a valid entry (a wrong ID field). */
	kt_topic_info t = topic_with_records("j", 2);
	put_str(cluster, "topics/j.json", "{\"version\":1,\"name\":\"j\",\"topic_id\":\"x\"}");
	kt_topics *reg = open_reg();
	check_readopted(reg, &t, "j", 2);
	kt_topics_close(reg);
}
END_TEST

START_TEST(lost_cluster_dir_then_auto_create_keeps_the_data)
{
	kt_topic_info t = topic_with_records("lost", 2);
	kt_topic_info u = topic_with_records("lost2", 1);
	/* The cluster directory vanishes (it was on tmpfs): registry, tombstones,
	 * deleted-id records, everything. */
	ck_assert_int_eq(sub_remove_tree(cluster, "topics"), 0);
	ck_assert_int_eq(sub_remove_tree(cluster, "deleted-topics"), 0);
	kt_topics *reg = open_reg();
	check_readopted(reg, &t, "lost", 2);
	kt_topic_info a;
	ck_assert_int_eq(kt_topics_auto_create(reg, S("lost"), &a), KERR_NONE);
	ck_assert_str_eq(a.id, t.id);
	ck_assert_int_eq(a.partitions, 2);
	kt_topics_close(reg);

	/* While a broker runs: the registry goes (no tombstone: not a delete).
	 * The upkeep rewrites the entries from what it knows — configs too —
	 * instead of dropping the topics. */
	reg = open_reg();
	char msg[256];
	kt_config_kv kv = {S("retention.ms"), S("777")};
	ck_assert_int_eq(kt_topics_alter_configs(reg, S("lost2"), &kv, 1, 0, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(sub_remove_tree(cluster, "topics"), 0);
	ck_assert_int_eq(sub_mkdirs(cluster, "topics", 0755), 0);
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	kt_topic_info l;
	ck_assert_int_eq(kt_topics_lookup(reg, "lost2", -1, &l), 0);
	ck_assert_str_eq(l.id, u.id);
	ck_assert_int_eq(l.cfg.retention_ms, 777);
	ck_assert(exists(cluster, "topics/lost2.json"));
	ck_assert(exists(cluster, "topics/lost.json"));
	assert_records_kept("lost2", 1, "lost2");
	kt_topics_close(reg);
	reg = open_reg();
	ck_assert_int_eq(kt_topics_lookup(reg, "lost2", -1, &l), 0);
	ck_assert_int_eq(l.cfg.retention_ms, 777);
	kt_topics_close(reg);
}
END_TEST

START_TEST(auto_create_readopts_a_topic_this_broker_never_knew)
{
	/* Another broker made the topic and wrote records; its registry entry
	 * is then lost.  This broker's first sight of the name is a client's
	 * Metadata with auto-create: the topic is re-adopted, not recreated. */
	kt_topics *here = open_reg();
	kt_topic_info t = topic_with_records("far", 2);
	ck_assert_int_eq(sub_unlink(cluster, "topics/far.json"), 0);
	kt_topic_info a;
	ck_assert_int_eq(kt_topics_auto_create(here, S("far"), &a), KERR_NONE);
	ck_assert_str_eq(a.id, t.id);
	ck_assert_int_eq(a.partitions, 2);
	assert_records_kept("far", 2, "far");
	ck_assert_int_eq(count_prefix(data, "", "~"), 0);
	ck_assert(logged("WARN", "re-adopted it from the volume"));
	/* And an explicit CreateTopics of such a name: the topic exists. */
	kt_topic_info u = topic_with_records("far2", 1);
	ck_assert_int_eq(sub_unlink(cluster, "topics/far2.json"), 0);
	char msg[256];
	kt_topic_spec spec = {S("far2"), 5, 1, NULL, 0};
	ck_assert_int_eq(kt_topics_create(here, &spec, 0, NULL, msg, sizeof(msg)), KERR_TOPIC_ALREADY_EXISTS);
	ck_assert_ptr_nonnull(strstr(msg, "rebuilt"));
	kt_topic_info l;
	ck_assert_int_eq(kt_topics_lookup(here, "far2", -1, &l), 0);
	ck_assert_str_eq(l.id, u.id);
	ck_assert_int_eq(l.partitions, 1);
	assert_records_kept("far2", 1, "far2");
	kt_topics_close(here);
}
END_TEST

START_TEST(garbage_entry_while_running_keeps_the_data)
{
	kt_topic_info t = topic_with_records("run", 2);
	kt_topics *reg = open_reg();
	put_str(cluster, "topics/run.json", "garbage");
	/* The upkeep sees the bad file (a claim grace of 0 would let it discard
	 * an incomplete claim at once): the entry is rewritten from what the
	 * broker knew, configs included, and auto-create finds the same topic. */
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(kt_topics_tick(reg), 0);
	kt_topic_info a;
	ck_assert_int_eq(kt_topics_auto_create(reg, S("run"), &a), KERR_NONE);
	ck_assert_str_eq(a.id, t.id);
	ck_assert_int_eq(a.partitions, 2);
	ck_assert_int_eq(a.cfg.retention_ms, 123456);
	assert_records_kept("run", 2, "run");
	ck_assert_int_eq(count_prefix(data, "", "~"), 0);
	ck_assert_int_eq(count_prefix(cluster, "topics", "~lost-"), 1);
	kt_topics_close(reg);
	/* And a restart reads the rewritten entry as it is. */
	reg = open_reg();
	kt_topic_info l;
	ck_assert_int_eq(kt_topics_lookup(reg, "run", -1, &l), 0);
	ck_assert_str_eq(l.id, t.id);
	ck_assert_int_eq(l.cfg.retention_ms, 123456);
	kt_topics_close(reg);
}
END_TEST

START_TEST(unstamped_directory_is_readopted_under_its_manifests_id)
{
	/* The stamp is gone too; the manifests still agree on the ID. */
	kt_topic_info t = topic_with_records("bare", 2);
	ck_assert_int_eq(sub_unlink(cluster, "topics/bare.json"), 0);
	ck_assert_int_eq(sub_unlink(data, "bare/.topic-id.json"), 0);
	kt_topics *reg = open_reg();
	check_readopted(reg, &t, "bare", 2);
	char sid[64];
	stamp_of("bare", sid);
	ck_assert_str_eq(sid, t.id); /* restamped with the manifests' ID */
	kt_topics_close(reg);
}
END_TEST

START_TEST(recorded_delete_is_not_readopted)
{
	/* A directory whose ID is recorded as deleted (its move failed) is not
	 * brought back by a restart; creating the name again gives a new topic
	 * and the old directory goes to the trash, not away. */
	kt_topic_info t = topic_with_records("d", 1);
	ck_assert_int_eq(sub_unlink(cluster, "topics/d.json"), 0);
	char path[200];
	snprintf(path, sizeof(path), "deleted-ids/%s.json", t.id);
	put_str(cluster, path, "{}");
	kt_topics *reg = open_reg();
	kt_topic_info l;
	ck_assert_int_eq(kt_topics_lookup(reg, "d", -1, &l), -ENOENT);
	assert_records_kept("d", 1, "d");
	kt_topic_info a;
	ck_assert_int_eq(kt_topics_auto_create(reg, S("d"), &a), KERR_NONE);
	ck_assert_str_ne(a.id, t.id);
	const char *tr = find_prefix(data, "", "~trash-");
	ck_assert_ptr_nonnull(tr);
	char tdir[300];
	snprintf(tdir, sizeof(tdir), "%s", tr);
	assert_records_kept(tdir, 1, "d");
	kt_topics_close(reg);
}
END_TEST

/* ---- delete and the trash ---------------------------------------------------------------------------- */

START_TEST(deleted_topic_stays_in_the_trash_until_its_retention)
{
	kt_topic_info t = topic_with_records("del", 2);
	kt_topics *reg = open_reg_ret(400);
	char msg[256];
	int64_t before = ku_wall_ms();
	ck_assert_int_eq(kt_topics_delete(reg, S("del"), msg, sizeof(msg)), KERR_NONE);
	ck_assert(!exists(data, "del"));
	char rec[200];
	snprintf(rec, sizeof(rec), "deleted-ids/%s.json", t.id);
	ck_assert(exists(cluster, rec)); /* the lasting proof of the delete */
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	const char *tr = find_prefix(data, "", "~trash-");
	ck_assert_ptr_nonnull(tr);
	char tdir[300];
	snprintf(tdir, sizeof(tdir), "%s", tr);
	assert_records_kept(tdir, 2, "del");
	kt_trash_entry *v;
	size_t n;
	ck_assert_int_eq(kt_trash_list(data, &v, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].topic, "del");
	ck_assert_str_eq(v[0].topic_id, t.id);
	ck_assert_str_eq(v[0].reason, "deleted");
	ck_assert_int_ge(v[0].moved_ms, before);
	ck_assert_int_le(v[0].moved_ms, ku_wall_ms());
	free(v);
	/* Recreating the name: a new, empty topic; the trash is untouched. */
	kt_topic_info t2 = create_topic(reg, "del", 1);
	ck_assert_str_ne(t2.id, t.id);
	ck_assert(exists(data, tdir));
	/* After the retention the upkeep empties it. */
	usleep(500 * 1000);
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert(!exists(data, tdir));
	ck_assert(exists(data, "del/.topic-id.json"));
	kt_topics_close(reg);
}
END_TEST

START_TEST(trash_is_kept_for_a_day_by_default)
{
	kt_topics_options o;
	kt_topics_options_init(&o);
	ck_assert_int_eq(o.trash_retention_ms, DAY_MS);
	topic_with_records("keep", 1);
	kt_topics *reg = open_reg(); /* the default retention */
	char msg[256];
	ck_assert_int_eq(kt_topics_delete(reg, S("keep"), msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 1);
	/* An entry of unknown age (an older kaas's name) is never swept. */
	ck_assert_int_eq(sub_mkdirs(data, "~trash-" OTHER_ID "-0123abcd/0", 0755), 0);
	kt_topics_close(reg);
	reg = open_reg_ret(0);
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 1);
	ck_assert(exists(data, "~trash-" OTHER_ID "-0123abcd"));
	kt_topics_close(reg);
	/* The clock decides with the retention: a day later it would go. */
	size_t removed;
	ck_assert_int_eq(kt_trash_empty(data, DAY_MS, ku_wall_ms(), &removed), 0);
	ck_assert_uint_eq(removed, 0);
	ck_assert_int_eq(kt_trash_empty(data, DAY_MS, ku_wall_ms() + DAY_MS + 1000, &removed), 0);
	ck_assert_uint_eq(removed, 0); /* only the old-form entry is left: unknown age */
	ck_assert_int_eq(kt_trash_empty(data, -1, ku_wall_ms(), &removed), 0);
	ck_assert_uint_eq(removed, 1);
	ck_assert_int_eq(count_prefix(data, "", "~"), 0);
}
END_TEST

START_TEST(negative_retention_keeps_trash_until_emptied_by_hand)
{
	topic_with_records("neg", 1);
	kt_topics *reg = open_reg_ret(-1);
	char msg[256];
	ck_assert_int_eq(kt_topics_delete(reg, S("neg"), msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 1);
	kt_topics_close(reg);
}
END_TEST

/* ---- kaas trash ---------------------------------------------------------------------------------------- */

static int trash_cmd(const char *a1, const char *a2, const char *a3, const char *a4)
{
	char dpath[400];
	snprintf(dpath, sizeof(dpath), "%s/data", tmpdir);
	char *argv[8];
	int argc = 0;
	argv[argc++] = "trash";
	const char *in[] = {a1, a2, a3, a4};
	for (int i = 0; i < 4; i++)
		if (in[i])
			argv[argc++] = strcmp(in[i], "DATA") == 0 ? dpath : (char *)in[i];
	argv[argc] = NULL;
	fflush(stdout);
	return kt_trash_main(argc, argv);
}

START_TEST(trash_command_lists_and_empties)
{
	topic_with_records("c1", 1);
	topic_with_records("c2", 1);
	kt_topics *reg = open_reg();
	char msg[256];
	ck_assert_int_eq(kt_topics_delete(reg, S("c1"), msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(kt_topics_delete(reg, S("c2"), msg, sizeof(msg)), KERR_NONE);
	kt_topics_close(reg);
	/* One quarantined directory too. */
	ck_assert_int_eq(sub_mkdirs(data, "~quarantine-1-" OTHER_ID "-0123abcd-q/0", 0755), 0);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 2);

	/* Usage errors are exit 2 and touch nothing. */
	ck_assert_int_eq(trash_cmd(NULL, NULL, NULL, NULL), 2);
	ck_assert_int_eq(trash_cmd("shred", "--data", "DATA", NULL), 2);
	ck_assert_int_eq(trash_cmd("empty", NULL, NULL, NULL), 2);
	ck_assert_int_eq(trash_cmd("empty", "--data", "DATA", "--older-than"), 2);
	ck_assert_int_eq(trash_cmd("empty", "--data", "DATA", "--older-than=soon"), 2);
	ck_assert_int_eq(trash_cmd("empty", "--data", "DATA", "--older-than=-5s"), 2);
	ck_assert_int_eq(trash_cmd("list", "--data", "DATA", "--older-than=1h"), 2);
	ck_assert_int_eq(trash_cmd("list", "--data", "/nonexistent/kaas-nowhere", NULL), 2);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 2);

	ck_assert_int_eq(trash_cmd("list", "--data", "DATA", NULL), 0);
	/* Younger than an hour: kept. */
	ck_assert_int_eq(trash_cmd("empty", "--data", "DATA", "--older-than=1h"), 0);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 2);
	ck_assert_int_eq(trash_cmd("empty", "--data", "DATA", "--older-than=0s"), 0);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 0);
	/* Quarantine is never emptied by kaas. */
	ck_assert_int_eq(trash_cmd("empty", "--data", "DATA", NULL), 0);
	ck_assert_int_eq(count_prefix(data, "", "~quarantine-"), 1);
}
END_TEST

START_TEST(long_topic_names_fit_the_trash_name)
{
	char name[KAAS_TOPIC_NAME_MAX + 1];
	memset(name, 'n', KAAS_TOPIC_NAME_MAX);
	name[KAAS_TOPIC_NAME_MAX] = '\0';
	kt_topics *reg = open_reg();
	create_topic(reg, name, 1);
	char msg[256];
	ck_assert_int_eq(kt_topics_delete(reg, S(name), msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 1);
	kt_trash_entry *v;
	size_t n;
	ck_assert_int_eq(kt_trash_list(data, &v, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].topic, name); /* the whole name, from .trash.json */
	ck_assert_uint_le(strlen(v[0].dir), 255);
	free(v);
	kt_topics_close(reg);
}
END_TEST

int main(void)
{
	ku_log_init_from_env();
	return ktest_main((struct ktest){.suite = "topics-identity", .tcase = "identity", .timeout = 60,
					 .setup = setup, .teardown = teardown},
			  KTEST_LIST(rewritten_stamp_keeps_the_topic_and_logs_a_conflict,
				     consistent_foreign_id_not_recorded_deleted_is_quarantined,
				     mixed_manifests_are_quarantined,
				     a_stale_view_never_moves_the_registered_incarnation_aside,
				     proven_old_incarnation_goes_to_the_trash_and_stays,
				     garbage_registry_file_is_rebuilt_from_the_volume,
				     invalid_registry_entry_is_rebuilt_from_the_volume,
				     lost_cluster_dir_then_auto_create_keeps_the_data,
				     auto_create_readopts_a_topic_this_broker_never_knew,
				     garbage_entry_while_running_keeps_the_data,
				     unstamped_directory_is_readopted_under_its_manifests_id,
				     recorded_delete_is_not_readopted,
				     deleted_topic_stays_in_the_trash_until_its_retention,
				     trash_is_kept_for_a_day_by_default,
				     negative_retention_keeps_trash_until_emptied_by_hand,
				     trash_command_lists_and_empties,
				     long_topic_names_fit_the_trash_name));
}
