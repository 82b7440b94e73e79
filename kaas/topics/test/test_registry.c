/*
 * test_registry.c — the topic registry on a posix volume: create, delete,
 * recreate, reclaim and adoption of directories, racing creators, incomplete
 * claims, interrupted deletes, configs and partition growth, and what one
 * registry sees of another's changes.
 * Length: the registry's life cycle (create, delete, reclaim, re-drive)
 * shares the hooks and volumes set up here.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "substrates/sub.h"
#include "kaas/topics/registry_int.h"
#include "kaas/topics/tconfig.h"
#include "kaas/topics/topics.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"
#include "kaas/topics/test/harness.h"
#include "util/test/ktest.h"

/* What the hooks saw. */
static struct {
	int changed, dropped;
	kt_topic_info last;
	char dropped_name[256], dropped_id[64];
	int dir_existed_at_drop;
	int fail_changed;
} hk;

static int on_changed(void *arg, const kt_topic_info *t)
{
	(void)arg;
	hk.changed++;
	hk.last = *t;
	return hk.fail_changed ? -EIO : 0;
}

static int on_dropped(void *arg, const char *name, const char *id)
{
	(void)arg;
	sub_stat st;
	hk.dropped++;
	snprintf(hk.dropped_name, sizeof(hk.dropped_name), "%s", name);
	snprintf(hk.dropped_id, sizeof(hk.dropped_id), "%s", id);
	hk.dir_existed_at_drop = sub_stat_path(data, name, &st) == 0;
	return 0;
}

static void setup(void)
{
	volumes_open("topics");
	memset(&hk, 0, sizeof(hk));
}

static void teardown(void)
{
	volumes_close();
}

static kt_topics *open_reg_on(sub_vfs *c, sub_vfs *d, int64_t grace)
{
	kt_topics_options o;
	kt_topics_options_init(&o);
	o.refresh_ms = 0;
	o.cluster = c;
	o.data = d;
	o.num_partitions = 3;
	o.claim_grace_ms = grace;
	o.miss_ttl_ms = 0;
	o.trash_retention_ms = 0; /* these tests check the removal itself; test_identity.c the retention */
	o.hooks.topic_changed = on_changed;
	o.hooks.topic_dropped = on_dropped;
	kt_topics *reg;
	ck_assert_int_eq(kt_topics_open(&o, &reg), 0);
	return reg;
}

static kt_topics *open_reg(void) { return open_reg_on(cluster, data, 30000); }

static kw_str S(const char *s)
{
	kw_str x = {s, s ? (int32_t)strlen(s) : -1};
	return x;
}

static kt_config_kv KV(const char *n, const char *v)
{
	kt_config_kv x = {S(n), S(v)};
	return x;
}

static int16_t create(kt_topics *reg, const char *name, int32_t parts, kt_topic_info *out)
{
	char msg[256];
	kt_topic_spec spec = {S(name), parts, 1, NULL, 0};
	return kt_topics_create(reg, &spec, 0, out, msg, sizeof(msg));
}

static int16_t del(kt_topics *reg, const char *name)
{
	char msg[256];
	return kt_topics_delete(reg, S(name), msg, sizeof(msg));
}

static int exists(sub_vfs *v, const char *path)
{
	sub_stat st;
	return sub_stat_path(v, path, &st) == 0;
}

static int count(sub_vfs *v, const char *dir)
{
	char **names;
	size_t n;
	if (sub_list(v, dir, &names, &n))
		return -1;
	sub_names_free(names, n);
	return (int)n;
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

static void read_stamp(const char *topic, char id[64])
{
	char path[512], *buf;
	size_t len;
	snprintf(path, sizeof(path), "%s/.topic-id.json", topic);
	ck_assert_int_eq(sub_read_file(data, path, 4096, &buf, &len), 0);
	json_t *j = json_loads(buf, 0, NULL);
	ck_assert_ptr_nonnull(j);
	ck_assert(json_is_integer(json_object_get(j, "created_ms")));
	snprintf(id, 64, "%s", json_string_value(json_object_get(j, "topic_id")));
	json_decref(j);
	free(buf);
}

static void write_stamp(const char *topic, const char *id)
{
	char path[512], buf[200];
	snprintf(path, sizeof(path), "%s/.topic-id.json", topic);
	int n = snprintf(buf, sizeof(buf), "{\"topic_id\":\"%s\",\"created_ms\":1}", id);
	ck_assert_int_eq(sub_write_atomic(data, path, buf, (size_t)n), 0);
}

static void put_file(sub_vfs *v, const char *path, const char *content)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash) {
		*slash = '\0';
		ck_assert_int_eq(sub_mkdirs(v, dir, 0755), 0);
	}
	ck_assert_int_eq(sub_write_atomic(v, path, content, strlen(content)), 0);
}

START_TEST(create_lookup_and_stamp)
{
	kt_topics *reg = open_reg();
	kt_topic_info t, l;
	ck_assert_int_eq(create(reg, "orders", 4, &t), KERR_NONE);
	ck_assert_str_eq(t.name, "orders");
	ck_assert_int_eq(t.partitions, 4);
	ck_assert_int_eq(t.replication_factor, 1);
	ck_assert_uint_eq(strlen(t.id), 36);

	ck_assert(exists(cluster, "topics/orders.json"));
	char sid[64];
	read_stamp("orders", sid);
	ck_assert_str_eq(sid, t.id);

	ck_assert_int_eq(kt_topics_lookup(reg, "orders", 6, &l), 0);
	ck_assert_str_eq(l.id, t.id);
	ck_assert_int_eq(l.partitions, 4);
	ck_assert_int_eq(l.cfg.segment_bytes, 1073741824);

	/* The hook heard about it, with the stamp already in place. */
	ck_assert_int_eq(hk.changed, 1);
	ck_assert_str_eq(hk.last.id, t.id);

	/* Default partitions (-1), and a second create of the same name. */
	ck_assert_int_eq(create(reg, "dflt", -1, &t), KERR_NONE);
	ck_assert_int_eq(t.partitions, 3);
	ck_assert_int_eq(create(reg, "orders", 1, NULL), KERR_TOPIC_ALREADY_EXISTS);

	kt_topic_info *all;
	size_t n;
	ck_assert_int_eq(kt_topics_list(reg, &all, &n), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(all[0].name, "dflt");
	ck_assert_str_eq(all[1].name, "orders");
	free(all);

	/* A new registry instance (a restart) reads the same state. */
	kt_topics_close(reg);
	reg = open_reg();
	ck_assert_int_eq(kt_topics_lookup(reg, "orders", -1, &l), 0);
	ck_assert_int_eq(l.partitions, 4);
	kt_topics_close(reg);
}
END_TEST

START_TEST(invalid_requests_touch_nothing)
{
	kt_topics *reg = open_reg();
	int c0 = count(cluster, "topics"), d0 = count(data, "");
	const char *bad[] = {"../x", "", ".", "..", "a/b", "caf\xc3\xa9", "x y"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(create(reg, bad[i], 1, NULL), KERR_INVALID_TOPIC_EXCEPTION);
		ck_assert_int_eq(del(reg, bad[i]), KERR_INVALID_TOPIC_EXCEPTION);
	}
	char longname[251];
	memset(longname, 'a', 250);
	longname[250] = '\0';
	ck_assert_int_eq(create(reg, longname, 1, NULL), KERR_INVALID_TOPIC_EXCEPTION);
	longname[249] = '\0';
	ck_assert_int_eq(create(reg, longname, 1, NULL), KERR_NONE); /* 249 is fine */
	ck_assert_int_eq(del(reg, longname), KERR_NONE);
	kt_topics_tick(reg);

	ck_assert_int_eq(create(reg, "__cluster", 1, NULL), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_int_eq(create(reg, "p0", 0, NULL), KERR_INVALID_PARTITIONS);
	ck_assert_int_eq(create(reg, "p0", -2, NULL), KERR_INVALID_PARTITIONS);
	ck_assert_int_eq(create(reg, "p0", KAAS_TOPIC_PARTITIONS_MAX + 1, NULL), KERR_INVALID_PARTITIONS);
	char msg[256];
	kt_topic_spec rf0 = {S("rf"), 1, 0, NULL, 0};
	ck_assert_int_eq(kt_topics_create(reg, &rf0, 0, NULL, msg, sizeof(msg)), KERR_INVALID_REPLICATION_FACTOR);
	kt_config_kv cfg = KV("cleanup.policy", "purge");
	kt_topic_spec comp = {S("comp"), 1, 3, &cfg, 1};
	ck_assert_int_eq(kt_topics_create(reg, &comp, 0, NULL, msg, sizeof(msg)), KERR_INVALID_CONFIG);
	ck_assert_ptr_nonnull(strstr(msg, "compact, delete"));
	/* validate_only: everything checked, nothing written. */
	kt_topic_spec vo = {S("vo"), 2, 3, NULL, 0};
	ck_assert_int_eq(kt_topics_create(reg, &vo, 1, NULL, msg, sizeof(msg)), KERR_NONE);

	ck_assert_int_eq(count(cluster, "topics"), c0);
	ck_assert_int_eq(count(data, ""), d0);
	ck_assert_int_eq(hk.changed, 1); /* only the 249-character topic */

	/* Replication factor 3 is accepted and reported as 1. */
	kt_topic_info t;
	kt_topic_spec rf3 = {S("rf3"), 1, 3, NULL, 0};
	ck_assert_int_eq(kt_topics_create(reg, &rf3, 0, &t, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(t.replication_factor, 1);
	/* Names that differ only in '.' and '_' collide, as in Kafka. */
	ck_assert_int_eq(create(reg, "a.b", 1, NULL), KERR_NONE);
	ck_assert_int_eq(create(reg, "a_b", 1, NULL), KERR_INVALID_TOPIC_EXCEPTION);
	kt_topics_close(reg);
}
END_TEST

START_TEST(delete_and_recreate_gives_new_id_and_empty_dir)
{
	kt_topics *reg = open_reg();
	kt_topic_info t1, t2;
	for (int round = 0; round < 3; round++) {
		ck_assert_int_eq(create(reg, "events", 2, &t1), KERR_NONE);
		/* What a broker would leave behind: partition data. */
		ck_assert_int_eq(sub_mkdirs(data, "events/0", 0755), 0);
		put_file(data, "events/0/manifest.json", "{\"topic_id\":\"old\"}");
		put_file(data, "events/0/0000000001-00000000000000000000.log", "data");

		hk.dropped = 0;
		ck_assert_int_eq(del(reg, "events"), KERR_NONE);
		ck_assert_int_eq(hk.dropped, 1);
		ck_assert_str_eq(hk.dropped_name, "events");
		ck_assert_str_eq(hk.dropped_id, t1.id);
		ck_assert(hk.dir_existed_at_drop); /* partitions closed before the directory goes */
		ck_assert(!exists(cluster, "topics/events.json"));
		ck_assert(!exists(data, "events"));
		ck_assert_int_eq(count_prefix(data, "", "~trash-"), 0);
		ck_assert_int_eq(count(cluster, "deleted-topics"), 0);
		kt_topic_info l;
		ck_assert_int_eq(kt_topics_lookup(reg, "events", -1, &l), -ENOENT);
		ck_assert_int_eq(del(reg, "events"), KERR_UNKNOWN_TOPIC_OR_PARTITION);

		ck_assert_int_eq(create(reg, "events", 1, &t2), KERR_NONE);
		ck_assert_str_ne(t1.id, t2.id);
		ck_assert_int_eq(count(data, "events"), 1); /* only the new stamp */
		char sid[64];
		read_stamp("events", sid);
		ck_assert_str_eq(sid, t2.id);
		ck_assert_int_eq(del(reg, "events"), KERR_NONE);
	}
	kt_topics_close(reg);
}
END_TEST

START_TEST(old_incarnation_is_reclaimed_unstamped_is_adopted)
{
	/* DATA/old: stamped by an earlier topic of that name, with data, and
	 * that topic's delete is on record (its tick never got to the move). */
	ck_assert_int_eq(sub_mkdirs(data, "old/0", 0755), 0);
	write_stamp("old", "11111111-2222-4333-8444-555555555555");
	put_file(data, "old/0/0000000001-00000000000000000000.log", "stale records");
	put_file(cluster, "deleted-ids/11111111-2222-4333-8444-555555555555.json",
		 "{\"version\":1,\"name\":\"old\",\"topic_id\":\"11111111-2222-4333-8444-555555555555\"}");
	/* DATA/loose: no stamp at all (copied in by hand, or pre-dating stamps). */
	ck_assert_int_eq(sub_mkdirs(data, "loose/0", 0755), 0);
	put_file(data, "loose/0/keep.log", "precious");
	/* DATA/bad: a stamp nobody can read. */
	ck_assert_int_eq(sub_mkdirs(data, "bad", 0755), 0);
	put_file(data, "bad/.topic-id.json", "garbage");
	put_file(data, "bad/keep", "x");

	kt_topics *reg = open_reg();
	/* Opening the registry deletes none of them: none is registered. */
	ck_assert(exists(data, "old/0/0000000001-00000000000000000000.log"));
	ck_assert(exists(data, "loose/0/keep.log"));
	kt_topics_tick(reg);
	ck_assert(exists(data, "old/0/0000000001-00000000000000000000.log"));

	kt_topic_info t;
	char sid[64];
	ck_assert_int_eq(create(reg, "old", 1, &t), KERR_NONE);
	ck_assert_int_eq(count(data, "old"), 1);
	read_stamp("old", sid);
	ck_assert_str_eq(sid, t.id);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 0);

	ck_assert_int_eq(create(reg, "loose", 1, &t), KERR_NONE);
	ck_assert(exists(data, "loose/0/keep.log"));
	read_stamp("loose", sid);
	ck_assert_str_eq(sid, t.id);

	ck_assert_int_eq(create(reg, "bad", 1, &t), KERR_NONE);
	ck_assert(exists(data, "bad/keep"));
	read_stamp("bad", sid);
	ck_assert_str_eq(sid, t.id);

	/* A file where the directory should be: left alone, create still
	 * registers the topic (the directory is re-driven). */
	put_file(data, "afile", "x");
	ck_assert_int_eq(create(reg, "afile", 1, &t), KERR_NONE);
	ck_assert(exists(data, "afile"));
	kt_topics_close(reg);
}
END_TEST

START_TEST(delete_leaves_other_identities_alone)
{
	kt_topics *reg = open_reg();
	kt_topic_info t;
	/* Deleted while its directory carries no stamp: the directory stays. */
	ck_assert_int_eq(create(reg, "u", 1, &t), KERR_NONE);
	ck_assert_int_eq(sub_unlink(data, "u/.topic-id.json"), 0);
	put_file(data, "u/keep", "x");
	ck_assert_int_eq(del(reg, "u"), KERR_NONE);
	ck_assert(exists(data, "u/keep"));
	/* Deleted while a newer incarnation's stamp is on the directory. */
	ck_assert_int_eq(create(reg, "v", 1, &t), KERR_NONE);
	write_stamp("v", "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee");
	ck_assert_int_eq(del(reg, "v"), KERR_NONE);
	ck_assert(exists(data, "v/.topic-id.json"));
	ck_assert_int_eq(count(cluster, "deleted-topics"), 0);
	kt_topics_close(reg);
}
END_TEST

/* Two registries on two vfs handles race to create the same names. */
typedef struct racer {
	kt_topics *reg;
	pthread_barrier_t *bar;
	int rounds;
	int wins, exists;
	char ids[64][40];
} racer;

static void *race_main(void *arg)
{
	racer *r = arg;
	for (int i = 0; i < r->rounds; i++) {
		char name[32], msg[256];
		snprintf(name, sizeof(name), "race-%d", i);
		kt_topic_spec spec = {S(name), 2, 1, NULL, 0};
		kt_topic_info t;
		pthread_barrier_wait(r->bar);
		int16_t err = kt_topics_create(r->reg, &spec, 0, &t, msg, sizeof(msg));
		if (err == KERR_NONE) {
			r->wins++;
			snprintf(r->ids[i], sizeof(r->ids[i]), "%s", t.id);
		} else if (err == KERR_TOPIC_ALREADY_EXISTS) {
			r->exists++;
			r->ids[i][0] = '\0';
		}
	}
	return NULL;
}

START_TEST(racing_creators_exactly_one_wins)
{
	sub_vfs *c2, *d2;
	open_vfs("cluster", &c2);
	open_vfs("data", &d2);
	pthread_barrier_t bar;
	pthread_barrier_init(&bar, NULL, 2);
	racer a = {open_reg_on(cluster, data, 30000), &bar, 40, 0, 0, {{0}}};
	racer b = {open_reg_on(c2, d2, 30000), &bar, 40, 0, 0, {{0}}};
	pthread_t ta, tb;
	pthread_create(&ta, NULL, race_main, &a);
	pthread_create(&tb, NULL, race_main, &b);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	ck_assert_int_eq(a.wins + b.wins, 40);
	ck_assert_int_eq(a.exists + b.exists, 40);
	for (int i = 0; i < 40; i++) {
		const char *id = a.ids[i][0] ? a.ids[i] : b.ids[i];
		ck_assert(!(a.ids[i][0] && b.ids[i][0]));
		char name[32], sid[64];
		snprintf(name, sizeof(name), "race-%d", i);
		read_stamp(name, sid);
		ck_assert_str_eq(sid, id); /* the directory carries the winner's ID */
		kt_topic_info la, lb;
		ck_assert_int_eq(kt_topics_lookup(a.reg, name, -1, &la), 0);
		ck_assert_int_eq(kt_topics_lookup(b.reg, name, -1, &lb), 0);
		ck_assert_str_eq(la.id, id);
		ck_assert_str_eq(lb.id, id);
	}
	kt_topics_close(a.reg);
	kt_topics_close(b.reg);
	pthread_barrier_destroy(&bar);
	sub_destroy(c2);
	sub_destroy(d2);
}
END_TEST

START_TEST(incomplete_claim_blocks_until_abandoned)
{
	/* A creator that died between the exclusive create and its write. */
	put_file(cluster, "topics/half.json", "");
	put_file(cluster, "topics/short.json", "{\"version\":1,\"na");
	kt_topics *reg = open_reg();
	kt_topic_info t;
	ck_assert_int_eq(kt_topics_lookup(reg, "half", -1, &t), -ENOENT);
	char msg[256];
	kt_topic_spec spec = {S("half"), 1, 1, NULL, 0};
	ck_assert_int_eq(kt_topics_create(reg, &spec, 0, NULL, msg, sizeof(msg)), KERR_TOPIC_ALREADY_EXISTS);
	ck_assert_ptr_nonnull(strstr(msg, "being created"));
	ck_assert_int_eq(kt_topics_auto_create(reg, S("half"), &t), KERR_LEADER_NOT_AVAILABLE);
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert(exists(cluster, "topics/half.json")); /* within the grace period: untouched */
	kt_topics_close(reg);

	/* Once abandoned (grace 0 here), the next creator reclaims the name. */
	reg = open_reg_on(cluster, data, 0);
	ck_assert_int_eq(create(reg, "half", 1, &t), KERR_NONE);
	kt_topic_info l;
	ck_assert_int_eq(kt_topics_lookup(reg, "half", -1, &l), 0);
	ck_assert_str_eq(l.id, t.id);
	/* ... and the tick reclaims the other one. */
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert(!exists(cluster, "topics/short.json"));
	ck_assert_int_eq(count_prefix(cluster, "topics", "~"), 0);
	ck_assert_int_eq(create(reg, "short", 1, &t), KERR_NONE);
	kt_topics_close(reg);
}
END_TEST

START_TEST(corrupt_entry_is_never_reclaimed)
{
	put_file(cluster, "topics/weird.json", "{\"version\":1,\"name\":\"weird\",\"topic_id\":\"x\"}");
	kt_topics *reg = open_reg_on(cluster, data, 0);
	kt_topic_info t;
	ck_assert_int_eq(kt_topics_lookup(reg, "weird", -1, &t), -ENOENT);
	ck_assert_int_eq(create(reg, "weird", 1, NULL), KERR_TOPIC_ALREADY_EXISTS);
	kt_topics_tick(reg);
	ck_assert(exists(cluster, "topics/weird.json"));
	kt_topics_close(reg);
}
END_TEST

START_TEST(abandoned_aside_file_is_settled)
{
	/* A reclaimer crashed after moving a claim aside that turned out to be
	 * complete: the tick puts it back under its name. */
	kt_topics *reg = open_reg();
	kt_topic_info t;
	ck_assert_int_eq(create(reg, "back", 2, &t), KERR_NONE);
	kt_topics_close(reg);
	ck_assert_int_eq(sub_rename(cluster, "topics/back.json", "topics/~abandoned-0123456789abcdef"), 0);
	put_file(cluster, "topics/~abandoned-fedcba9876543210", "");
	reg = open_reg_on(cluster, data, 0);
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert_int_eq(count_prefix(cluster, "topics", "~"), 0);
	kt_topic_info l;
	ck_assert_int_eq(kt_topics_lookup(reg, "back", -1, &l), 0);
	ck_assert_str_eq(l.id, t.id);
	ck_assert_int_eq(l.partitions, 2);
	kt_topics_close(reg);
}
END_TEST

START_TEST(interrupted_delete_is_redriven)
{
	kt_topics *reg = open_reg();
	kt_topic_info t;
	ck_assert_int_eq(create(reg, "gone", 1, &t), KERR_NONE);
	put_file(data, "gone/seg", "x");
	kt_topics_close(reg);
	/* A broker wrote the tombstone and died before anything else. */
	char path[256], buf[256];
	snprintf(path, sizeof(path), "deleted-topics/%s.json", t.id);
	snprintf(buf, sizeof(buf), "{\"version\":1,\"name\":\"gone\",\"topic_id\":\"%s\",\"deleted_ms\":1}", t.id);
	put_file(cluster, path, buf);

	reg = open_reg();
	ck_assert(!exists(cluster, "topics/gone.json"));
	ck_assert(!exists(data, "gone"));
	ck_assert(!exists(cluster, path));
	kt_topic_info l;
	ck_assert_int_eq(kt_topics_lookup(reg, "gone", -1, &l), -ENOENT);
	/* The renamed directory is removed by the first tick. */
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 1);
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 0);

	/* A tombstone of an older incarnation must not touch the new one. */
	kt_topic_info t2;
	ck_assert_int_eq(create(reg, "gone", 1, &t2), KERR_NONE);
	put_file(cluster, path, buf); /* tombstone of t, not t2 */
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert(exists(cluster, "topics/gone.json"));
	char sid[64];
	read_stamp("gone", sid);
	ck_assert_str_eq(sid, t2.id);
	ck_assert(!exists(cluster, path));
	kt_topics_close(reg);
}
END_TEST

START_TEST(orphaned_stamped_dir_is_kept)
{
	/* Stamped, no registry entry, but recorded as deleted: not re-adopted,
	 * not deleted either (the delete's own move did not happen). */
	ck_assert_int_eq(sub_mkdirs(data, "orphan/0", 0755), 0);
	write_stamp("orphan", "99999999-2222-4333-8444-555555555555");
	put_file(data, "orphan/0/x.log", "x");
	put_file(cluster, "deleted-ids/99999999-2222-4333-8444-555555555555.json", "{}");
	/* Stamped and empty (no records): nothing to re-adopt, kept. */
	ck_assert_int_eq(sub_mkdirs(data, "empty/0", 0755), 0);
	write_stamp("empty", "88888888-2222-4333-8444-555555555555");
	ck_assert_int_eq(sub_mkdirs(data, "__cluster", 0755), 0);
	kt_topics *reg = open_reg();
	kt_topics_tick(reg);
	ck_assert(exists(data, "orphan/0/x.log"));
	ck_assert(exists(data, "empty/0"));
	ck_assert(exists(data, "__cluster"));
	kt_topic_info t;
	ck_assert_int_eq(kt_topics_lookup(reg, "orphan", -1, &t), -ENOENT);
	ck_assert_int_eq(kt_topics_lookup(reg, "empty", -1, &t), -ENOENT);
	ck_assert_int_eq(kt_topics_lookup(reg, "__cluster", -1, &t), -ENOENT);
	kt_topics_close(reg);
}
END_TEST

START_TEST(partitions_only_grow)
{
	kt_topics *reg = open_reg();
	kt_topic_info t, l;
	char msg[256];
	ck_assert_int_eq(create(reg, "g", 2, &t), KERR_NONE);
	ck_assert_int_eq(kt_topics_add_partitions(reg, S("g"), 2, 0, msg, sizeof(msg)), KERR_INVALID_PARTITIONS);
	ck_assert_int_eq(kt_topics_add_partitions(reg, S("g"), 1, 0, msg, sizeof(msg)), KERR_INVALID_PARTITIONS);
	ck_assert_int_eq(kt_topics_add_partitions(reg, S("g"), 5, 1, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(kt_topics_lookup(reg, "g", -1, &l), 0);
	ck_assert_int_eq(l.partitions, 2); /* validate_only */
	hk.changed = 0;
	ck_assert_int_eq(kt_topics_add_partitions(reg, S("g"), 5, 0, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(hk.changed, 1);
	ck_assert_int_eq(hk.last.partitions, 5);
	ck_assert_int_eq(kt_topics_lookup(reg, "g", -1, &l), 0);
	ck_assert_int_eq(l.partitions, 5);
	ck_assert_str_eq(l.id, t.id);
	ck_assert_int_eq(kt_topics_add_partitions(reg, S("nope"), 5, 0, msg, sizeof(msg)),
			 KERR_UNKNOWN_TOPIC_OR_PARTITION);

	/* A stale rewrite elsewhere shows fewer partitions: never shrink. */
	char buf[512];
	snprintf(buf, sizeof(buf), "{\"version\":1,\"name\":\"g\",\"topic_id\":\"%s\",\"partitions\":2,"
		 "\"created_ms\":1,\"generation\":9,\"configs\":{}}", t.id);
	put_file(cluster, "topics/g.json", buf);
	kt_topics_tick(reg);
	ck_assert_int_eq(kt_topics_lookup(reg, "g", -1, &l), 0);
	ck_assert_int_eq(l.partitions, 5);
	/* ... and the next rewrite from here restores the count on the volume. */
	kt_config_kv c = KV("retention.ms", "5");
	ck_assert_int_eq(kt_topics_alter_configs(reg, S("g"), &c, 1, 0, msg, sizeof(msg)), KERR_NONE);
	kt_topics_close(reg);
	reg = open_reg();
	ck_assert_int_eq(kt_topics_lookup(reg, "g", -1, &l), 0);
	ck_assert_int_eq(l.partitions, 5);
	kt_topics_close(reg);
}
END_TEST

START_TEST(alter_configs_replaces_the_whole_set)
{
	kt_topics *reg = open_reg();
	kt_topic_info t, l;
	char msg[256];
	kt_config_kv cfg[2] = {KV("retention.ms", "1000"), KV("segment.bytes", "100000")};
	kt_topic_spec spec = {S("c"), 1, 1, cfg, 2};
	ck_assert_int_eq(kt_topics_create(reg, &spec, 0, &t, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(t.cfg.retention_ms, 1000);
	ck_assert_int_eq(t.cfg.segment_bytes, 100000);
	ck_assert_uint_eq(t.overrides, (1u << KAAS_TC_RETENTION_MS) | (1u << KAAS_TC_SEGMENT_BYTES));

	kt_config_kv alt = KV("segment.ms", "60000");
	hk.changed = 0;
	ck_assert_int_eq(kt_topics_alter_configs(reg, S("c"), &alt, 1, 0, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(hk.changed, 1);
	ck_assert_int_eq(hk.last.cfg.segment_ms, 60000);
	ck_assert_int_eq(kt_topics_lookup(reg, "c", -1, &l), 0);
	ck_assert_int_eq(l.cfg.segment_ms, 60000);
	ck_assert_int_eq(l.cfg.retention_ms, 604800000); /* reverted to the default */
	ck_assert_int_eq(l.cfg.segment_bytes, 1073741824);
	ck_assert_str_eq(l.id, t.id);

	/* Refused and validate-only changes leave the file as it was. */
	char *before, *after;
	size_t blen, alen;
	ck_assert_int_eq(sub_read_file(cluster, "topics/c.json", 65536, &before, &blen), 0);
	kt_config_kv bad = KV("cleanup.policy", "purge");
	ck_assert_int_eq(kt_topics_alter_configs(reg, S("c"), &bad, 1, 0, msg, sizeof(msg)), KERR_INVALID_CONFIG);
	kt_config_kv vo = KV("retention.ms", "1");
	ck_assert_int_eq(kt_topics_alter_configs(reg, S("c"), &vo, 1, 1, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(sub_read_file(cluster, "topics/c.json", 65536, &after, &alen), 0);
	ck_assert_str_eq(before, after);
	free(before);
	free(after);
	ck_assert_int_eq(kt_topics_alter_configs(reg, S("none"), &vo, 1, 0, msg, sizeof(msg)),
			 KERR_UNKNOWN_TOPIC_OR_PARTITION);

	/* Describe shows the override with its synonyms. */
	kt_config_list list = KAAS_CONFIG_LIST_INIT;
	ck_assert_int_eq(kt_topics_describe_configs(reg, S("c"), &list, msg, sizeof(msg)), KERR_NONE);
	int found = 0;
	for (size_t i = 0; i < list.n; i++) {
		if (strcmp(list.v[i].name, "segment.ms") == 0) {
			found = 1;
			ck_assert_str_eq(list.v[i].value, "60000");
			ck_assert_int_eq(list.v[i].source, KAAS_CFG_SRC_TOPIC);
		}
		if (strcmp(list.v[i].name, "retention.ms") == 0)
			ck_assert_int_eq(list.v[i].source, KAAS_CFG_SRC_DEFAULT);
	}
	ck_assert(found);
	kt_config_list_free(&list);
	ck_assert_int_eq(kt_topics_describe_configs(reg, S("none"), &list, msg, sizeof(msg)),
			 KERR_UNKNOWN_TOPIC_OR_PARTITION);
	kt_topics_close(reg);
}
END_TEST

START_TEST(other_registries_changes_are_seen)
{
	sub_vfs *c2, *d2;
	open_vfs("cluster", &c2);
	open_vfs("data", &d2);
	kt_topics *a = open_reg();
	kt_topics *b = open_reg_on(c2, d2, 30000);
	kt_topic_info t, l;
	char msg[256];
	ck_assert_int_eq(kt_topics_lookup(b, "shared", -1, &l), -ENOENT);
	ck_assert_int_eq(create(a, "shared", 2, &t), KERR_NONE);
	/* b finds it on a miss (miss_ttl 0 here), and its tick syncs it. */
	ck_assert_int_eq(kt_topics_lookup(b, "shared", -1, &l), 0);
	ck_assert_str_eq(l.id, t.id);
	hk.changed = 0;
	ck_assert_int_eq(kt_topics_tick(b), 0);
	ck_assert_int_eq(hk.changed, 1);

	kt_config_kv c = KV("retention.ms", "42");
	ck_assert_int_eq(kt_topics_alter_configs(a, S("shared"), &c, 1, 0, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(kt_topics_add_partitions(a, S("shared"), 4, 0, msg, sizeof(msg)), KERR_NONE);
	hk.changed = 0;
	ck_assert_int_eq(kt_topics_tick(b), 0);
	ck_assert_int_eq(hk.changed, 1);
	ck_assert_int_eq(kt_topics_lookup(b, "shared", -1, &l), 0);
	ck_assert_int_eq(l.cfg.retention_ms, 42);
	ck_assert_int_eq(l.partitions, 4);

	/* Deleted by a: b's tick drops it. */
	ck_assert_int_eq(del(a, "shared"), KERR_NONE);
	hk.dropped = 0;
	ck_assert_int_eq(kt_topics_tick(b), 0);
	ck_assert_int_eq(hk.dropped, 1);
	ck_assert_str_eq(hk.dropped_id, t.id);
	ck_assert_int_eq(kt_topics_lookup(b, "shared", -1, &l), -ENOENT);
	kt_topics_close(a);
	kt_topics_close(b);
	sub_destroy(c2);
	sub_destroy(d2);
}
END_TEST

START_TEST(failed_hook_is_retried_by_tick)
{
	kt_topics *reg = open_reg();
	hk.fail_changed = 1;
	kt_topic_info t, l;
	/* The partitions could not be led: CreateTopics says so, by name,
	 * instead of answering success; the topic exists and is re-driven. */
	char msg[256];
	kt_topic_spec spec = {S("h"), 1, 1, NULL, 0};
	ck_assert_int_eq(kt_topics_create(reg, &spec, 0, &t, msg, sizeof(msg)), KERR_KAFKA_STORAGE_ERROR);
	ck_assert_ptr_nonnull(strstr(msg, "could not lead"));
	ck_assert_ptr_nonnull(strstr(msg, "Topic h"));
	ck_assert_int_eq(kt_topics_lookup(reg, "h", -1, &l), 0);
	ck_assert_int_eq(hk.changed, 1);
	/* CreatePartitions the same way. */
	ck_assert_int_eq(kt_topics_add_partitions(reg, S("h"), 2, 0, msg, sizeof(msg)), KERR_KAFKA_STORAGE_ERROR);
	ck_assert_ptr_nonnull(strstr(msg, "could not lead"));
	ck_assert_int_eq(hk.changed, 2);
	ck_assert_int_ne(kt_topics_tick(reg), 0);
	ck_assert_int_eq(hk.changed, 3);
	hk.fail_changed = 0;
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert_int_eq(hk.changed, 4);
	ck_assert_int_eq(hk.last.partitions, 2);
	ck_assert_int_eq(kt_topics_tick(reg), 0);
	ck_assert_int_eq(hk.changed, 4); /* settled: not called again */
	kt_topics_close(reg);
}
END_TEST

START_TEST(auto_create_uses_defaults)
{
	kt_topics *reg = open_reg();
	kt_topic_info t, l;
	ck_assert_int_eq(kt_topics_auto_create(reg, S("auto"), &t), KERR_NONE);
	ck_assert_int_eq(t.partitions, 3);
	ck_assert_int_eq(kt_topics_auto_create(reg, S("auto"), &l), KERR_NONE);
	ck_assert_str_eq(l.id, t.id);
	ck_assert_int_eq(kt_topics_auto_create(reg, S("../x"), &l), KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert(!exists(data, "x"));
	kt_topics_close(reg);
}
END_TEST


START_TEST(tick_works_at_most_every_refresh_ms)
{
	kt_topics_options o;
	kt_topics_options_init(&o);
	o.cluster = cluster;
	o.data = data;
	o.refresh_ms = 3600 * 1000;
	o.trash_retention_ms = 0;
	kt_topics *reg;
	ck_assert_int_eq(kt_topics_open(&o, &reg), 0);
#define TX "~trash-1-11111111-2222-4333-8444-555555555555-0123abcd-x"
#define TY "~trash-1-11111111-2222-4333-8444-555555555555-0123abcd-y"
	ck_assert_int_eq(sub_mkdirs(data, TX "/0", 0755), 0);
	ck_assert_int_eq(kt_topics_tick(reg), 0); /* the first tick works */
	ck_assert(!exists(data, TX));
	ck_assert_int_eq(sub_mkdirs(data, TY "/0", 0755), 0);
	ck_assert_int_eq(kt_topics_tick(reg), 0); /* too soon: nothing done */
	ck_assert(exists(data, TY));
	kt_topics_close(reg);
}
END_TEST

START_TEST(move_aside_puts_back_a_directory_that_changed_identity)
{
	/* The stamp was read as one ID, but by the time of the rename the
	 * directory is another topic's (a broker replaced it in between): the
	 * move is undone, nothing is removed. */
	kt_topics *reg = open_reg();
	ck_assert_int_eq(sub_mkdirs(data, "x/0", 0755), 0);
	write_stamp("x", "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee");
	put_file(data, "x/0/keep.log", "new topic's data");
	trash_list tl = {0};
	ck_assert_int_eq(kt__move_to_trash(reg, "x", "11111111-2222-4333-8444-555555555555", "test", &tl), -EAGAIN);
	ck_assert(exists(data, "x/0/keep.log"));
	ck_assert_int_eq(count_prefix(data, "", "~"), 0);
	ck_assert_uint_eq(tl.n, 0);
	/* With the right ID it moves. */
	ck_assert_int_eq(kt__move_to_trash(reg, "x", "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee", "test", &tl), 0);
	ck_assert(!exists(data, "x"));
	ck_assert_uint_eq(tl.n, 1);
	kt_topics_close(reg);
}
END_TEST

int main(void)
{
	ku_log_init_from_env();
	return ktest_main((struct ktest){ .suite = "topics-registry", .tcase = "core", .timeout = 60, .setup = setup, .teardown = teardown },
			  KTEST_LIST(create_lookup_and_stamp,
				     invalid_requests_touch_nothing,
				     delete_and_recreate_gives_new_id_and_empty_dir,
				     old_incarnation_is_reclaimed_unstamped_is_adopted,
				     delete_leaves_other_identities_alone,
				     racing_creators_exactly_one_wins,
				     incomplete_claim_blocks_until_abandoned,
				     corrupt_entry_is_never_reclaimed,
				     abandoned_aside_file_is_settled,
				     interrupted_delete_is_redriven,
				     orphaned_stamped_dir_is_kept,
				     partitions_only_grow,
				     alter_configs_replaces_the_whole_set,
				     other_registries_changes_are_seen,
				     failed_hook_is_retried_by_tick,
				     auto_create_uses_defaults,
				     tick_works_at_most_every_refresh_ms,
				     move_aside_puts_back_a_directory_that_changed_identity));
}
