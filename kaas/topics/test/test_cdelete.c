/*
 * test_cdelete.c — deletes in a cluster (controller_deletes): the broker
 * that deletes removes the registry entry and closes its own partitions but
 * leaves the directory and the tombstone; neither its tick nor another
 * broker's start-up sweep touch them; a re-create of the name waits for the
 * controller's kt_topics_delete_finish, which moves only a directory whose
 * stamp names the deleted ID and is idempotent.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kaas/proto/kerr.h"
#include "kaas/topics/test/harness.h"
#include "kaas/topics/topics.h"
#include "substrates/sub.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/test/ktest.h"

static int dropped;
static char dropped_id[64];

static int on_changed(void *arg, const kt_topic_info *t)
{
	(void)arg;
	(void)t;
	return 0;
}

static int on_dropped(void *arg, const char *name, const char *id)
{
	(void)arg;
	(void)name;
	dropped++;
	snprintf(dropped_id, sizeof(dropped_id), "%s", id);
	return 0;
}

static void setup(void)
{
	volumes_open("cdelete");
	dropped = 0;
}

static void teardown(void)
{
	volumes_close();
}

static kt_topics *open_reg(int64_t wait_ms)
{
	kt_topics_options o;
	kt_topics_options_init(&o);
	o.refresh_ms = 0;
	o.cluster = cluster;
	o.data = data;
	o.miss_ttl_ms = 0;
	o.trash_retention_ms = 0;
	o.controller_deletes = 1;
	o.delete_wait_ms = wait_ms;
	o.hooks.topic_changed = on_changed;
	o.hooks.topic_dropped = on_dropped;
	kt_topics *reg;
	ck_assert_int_eq(kt_topics_open(&o, &reg), 0);
	return reg;
}

static kw_str S(const char *s)
{
	kw_str x = {s, (int32_t)strlen(s)};
	return x;
}

static int16_t create(kt_topics *reg, const char *name, kt_topic_info *out, char *msg, size_t msglen)
{
	kt_topic_spec spec = {S(name), 2, 1, NULL, 0};
	return kt_topics_create(reg, &spec, 0, out, msg, msglen);
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

static void stamp_of(const char *topic, char id[64])
{
	char path[512], *buf;
	size_t len;
	snprintf(path, sizeof(path), "%s/.topic-id.json", topic);
	ck_assert_int_eq(sub_read_file(data, path, 4096, &buf, &len), 0);
	const char *p = strstr(buf, "\"topic_id\":\"");
	ck_assert_ptr_nonnull(p);
	snprintf(id, 64, "%.36s", p + 12);
	free(buf);
}

START_TEST(delete_leaves_directory_and_tombstone_to_the_controller)
{
	char msg[256], tomb[128], ided[128];
	kt_topic_info t;
	kt_topics *reg = open_reg(0);
	ck_assert_int_eq(create(reg, "events", &t, msg, sizeof(msg)), KERR_NONE);
	put_file(data, "events/0/0000000001-00000000000000000000.log", "old records");
	snprintf(tomb, sizeof(tomb), "deleted-topics/%s.json", t.id);
	snprintf(ided, sizeof(ided), "deleted-ids/%s.json", t.id);

	ck_assert_int_eq(kt_topics_delete(reg, S("events"), msg, sizeof(msg)), KERR_NONE);
	ck_assert(!exists(cluster, "topics/events.json"));
	kt_topic_info l;
	ck_assert_int_eq(kt_topics_lookup(reg, "events", -1, &l), -ENOENT);
	ck_assert_int_eq(dropped, 1); /* this broker's partitions are closed */
	ck_assert_str_eq(dropped_id, t.id);
	ck_assert(exists(cluster, ided));
	/* ...but the directory may still be open on other brokers. */
	ck_assert(exists(cluster, tomb));
	ck_assert(exists(data, "events/0/0000000001-00000000000000000000.log"));
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 0);

	/* Neither this broker's upkeep nor another broker starting touch it. */
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(kt_topics_tick(reg), 0);
	kt_topics *other = open_reg(0);
	ck_assert_int_eq(kt_topics_tick(other), 0);
	ck_assert(exists(cluster, tomb));
	ck_assert(exists(data, "events/0/0000000001-00000000000000000000.log"));

	/* The controller's view of it. */
	kt_tombstone *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(kt_topics_tombstones(other, &v, &n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(v[0].name, "events");
	ck_assert_str_eq(v[0].id, t.id);
	free(v);

	/* The name is not free while the old incarnation is being deleted. */
	kt_topic_info t2;
	ck_assert_int_eq(create(other, "events", &t2, msg, sizeof(msg)), KERR_TOPIC_ALREADY_EXISTS);
	ck_assert_ptr_nonnull(strstr(msg, "marked for deletion"));
	ck_assert(!exists(cluster, "topics/events.json"));
	/* Metadata's auto-create does not wait and is told to come back. */
	ck_assert_int_eq(kt_topics_auto_create(other, S("events"), &t2), KERR_LEADER_NOT_AVAILABLE);

	/* The controller finishes it: directory to the trash, tombstone, trash. */
	ck_assert_int_eq(kt_topics_delete_finish(other, "events", t.id), 0);
	ck_assert(!exists(cluster, tomb));
	ck_assert(!exists(data, "events"));
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 0);
	ck_assert(exists(cluster, ided));
	ck_assert_int_eq(kt_topics_delete_finish(other, "events", t.id), 0); /* idempotent */
	ck_assert_int_eq(kt_topics_delete_finish(other, "events", "not-an-id"), -EINVAL);

	/* The new incarnation starts empty. */
	ck_assert_int_eq(create(reg, "events", &t2, msg, sizeof(msg)), KERR_NONE);
	ck_assert_str_ne(t2.id, t.id);
	char sid[64];
	stamp_of("events", sid);
	ck_assert_str_eq(sid, t2.id);
	ck_assert(!exists(data, "events/0/0000000001-00000000000000000000.log"));
	kt_topics_close(other);
	kt_topics_close(reg);
}
END_TEST

START_TEST(finish_never_moves_a_directory_of_another_id)
{
	char msg[256], tomb[128];
	kt_topic_info t;
	kt_topics *reg = open_reg(0);
	ck_assert_int_eq(create(reg, "keep", &t, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(kt_topics_delete(reg, S("keep"), msg, sizeof(msg)), KERR_NONE);
	/* Someone put a directory of another identity there meanwhile. */
	const char *other = "0f0f0f0f-1111-4222-8333-444444444444";
	char stamp[200];
	snprintf(stamp, sizeof(stamp), "{\"topic_id\":\"%s\",\"created_ms\":1}", other);
	put_file(data, "keep/.topic-id.json", stamp);
	put_file(data, "keep/0/0000000001-00000000000000000000.log", "someone's records");
	ck_assert_int_eq(kt_topics_delete_finish(reg, "keep", t.id), 0);
	snprintf(tomb, sizeof(tomb), "deleted-topics/%s.json", t.id);
	ck_assert(!exists(cluster, tomb)); /* the deleted incarnation is finished with */
	ck_assert(exists(data, "keep/0/0000000001-00000000000000000000.log"));
	char sid[64];
	stamp_of("keep", sid);
	ck_assert_str_eq(sid, other);
	ck_assert_int_eq(count_prefix(data, "", "~"), 0);

	/* An unstamped directory is left too. */
	ck_assert_int_eq(create(reg, "bare", &t, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(kt_topics_delete(reg, S("bare"), msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(sub_unlink(data, "bare/.topic-id.json"), 0);
	ck_assert_int_eq(kt_topics_delete_finish(reg, "bare", t.id), 0);
	ck_assert(exists(data, "bare"));
	kt_topics_close(reg);
}
END_TEST

START_TEST(finish_removes_an_entry_the_deleter_left)
{
	/* The deleter wrote the tombstone and died before removing the entry. */
	char msg[256], path[128], buf[256];
	kt_topic_info t;
	kt_topics *reg = open_reg(0);
	ck_assert_int_eq(create(reg, "half", &t, msg, sizeof(msg)), KERR_NONE);
	snprintf(path, sizeof(path), "deleted-topics/%s.json", t.id);
	snprintf(buf, sizeof(buf), "{\"version\":1,\"name\":\"half\",\"topic_id\":\"%s\",\"deleted_ms\":1}", t.id);
	put_file(cluster, path, buf);
	/* A tombstone whose file name is not the ID it names is not trusted. */
	put_file(cluster, "deleted-topics/0f0f0f0f-1111-4222-8333-444444444444.json", buf);
	kt_tombstone *v = NULL;
	size_t n = 0;
	ck_assert_int_eq(kt_topics_tombstones(reg, &v, &n), 0);
	ck_assert_uint_eq(n, 1);
	free(v);
	ck_assert_int_eq(kt_topics_delete_finish(reg, "half", t.id), 0);
	ck_assert(!exists(cluster, "topics/half.json"));
	ck_assert(!exists(cluster, path));
	ck_assert(!exists(data, "half"));
	kt_topic_info l;
	ck_assert_int_eq(kt_topics_lookup(reg, "half", -1, &l), -ENOENT);
	kt_topics_close(reg);
}
END_TEST

static struct {
	kt_topics *reg;
	int16_t err;
	kt_topic_info t;
	int64_t took_ms;
} waiter;

static void *create_thread(void *arg)
{
	(void)arg;
	char msg[256];
	int64_t t0 = ku_mono_ms();
	waiter.err = create(waiter.reg, "again", &waiter.t, msg, sizeof(msg));
	waiter.took_ms = ku_mono_ms() - t0;
	return NULL;
}

START_TEST(recreate_waits_for_the_old_delete)
{
	char msg[256];
	kt_topic_info t;
	kt_topics *reg = open_reg(10000);
	ck_assert_int_eq(create(reg, "again", &t, msg, sizeof(msg)), KERR_NONE);
	put_file(data, "again/0/0000000001-00000000000000000000.log", "old");
	kt_topics *quick = open_reg(0); /* a deleter that does not wait for the controller */
	ck_assert_int_eq(kt_topics_delete(quick, S("again"), msg, sizeof(msg)), KERR_NONE);
	kt_topics_close(quick);
	waiter.reg = reg;
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, create_thread, NULL), 0);
	usleep(300000);
	/* Still waiting, and holding no lock the controller needs. */
	ck_assert(!exists(cluster, "topics/again.json"));
	ck_assert_int_eq(kt_topics_delete_finish(reg, "again", t.id), 0);
	pthread_join(th, NULL);
	ck_assert_int_eq(waiter.err, KERR_NONE);
	ck_assert_int_ge(waiter.took_ms, 300);
	ck_assert_str_ne(waiter.t.id, t.id);
	ck_assert(!exists(data, "again/0/0000000001-00000000000000000000.log"));
	kt_topics_close(reg);
}
END_TEST

static void *finish_later(void *arg)
{
	const kt_topic_info *t = arg;
	usleep(200000);
	while (kt_topics_delete_finish(waiter.reg, t->name, t->id) == -EBUSY)
		usleep(10000);
	return NULL;
}

START_TEST(delete_answers_once_the_controller_finished)
{
	char msg[256];
	kt_topic_info t;
	kt_topics *reg = open_reg(10000);
	ck_assert_int_eq(create(reg, "wait", &t, msg, sizeof(msg)), KERR_NONE);
	waiter.reg = reg;
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, finish_later, &t), 0);
	int64_t t0 = ku_mono_ms();
	ck_assert_int_eq(kt_topics_delete(reg, S("wait"), msg, sizeof(msg)), KERR_NONE);
	int64_t took = ku_mono_ms() - t0;
	pthread_join(th, NULL);
	ck_assert_int_ge(took, 200);
	ck_assert_int_lt(took, 10000);
	ck_assert(!exists(data, "wait"));
	kt_topics_close(reg);
}
END_TEST

START_TEST(a_controller_that_died_after_the_rename_is_finished_by_the_next)
{
	char msg[256], tomb[128], aside[256];
	kt_topic_info t;
	kt_topics *reg = open_reg(0);
	ck_assert_int_eq(create(reg, "mid", &t, msg, sizeof(msg)), KERR_NONE);
	put_file(data, "mid/0/0000000001-00000000000000000000.log", "old");
	ck_assert_int_eq(kt_topics_delete(reg, S("mid"), msg, sizeof(msg)), KERR_NONE);
	/* The controller renamed the directory aside and died before the
	 * tombstone and the trash went. */
	snprintf(aside, sizeof(aside), "~trash-1-%s-0badc0de-mid", t.id);
	ck_assert_int_eq(sub_rename(data, "mid", aside), 0);
	kt_topics_close(reg);
	reg = open_reg(0); /* the next controller's broker starts */
	snprintf(tomb, sizeof(tomb), "deleted-topics/%s.json", t.id);
	ck_assert(exists(cluster, tomb));
	ck_assert(exists(data, aside)); /* a broker starting never empties the trash */
	ck_assert_int_eq(kt_topics_delete_finish(reg, "mid", t.id), 0);
	ck_assert(!exists(cluster, tomb));
	ck_assert_int_eq(kt_topics_tick(reg), 0); /* retention 0: emptied by the upkeep */
	ck_assert_int_eq(count_prefix(data, "", "~trash-"), 0);
	kt_topics_close(reg);
}
END_TEST

START_TEST(delete_wait_is_bounded)
{
	char msg[256];
	kt_topic_info a, b;
	kt_topics *reg = open_reg(300);
	ck_assert_int_eq(create(reg, "one", &a, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(create(reg, "two", &b, msg, sizeof(msg)), KERR_NONE);
	char ids[3][KAAS_TOPIC_ID_LEN + 1];
	ck_assert_int_eq(kt_topics_delete_start(reg, S("one"), ids[0], msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(kt_topics_delete_start(reg, S("missing"), ids[1], msg, sizeof(msg)),
			 KERR_UNKNOWN_TOPIC_OR_PARTITION);
	ck_assert_str_eq(ids[1], "");
	ck_assert_int_eq(kt_topics_delete_start(reg, S("two"), ids[2], msg, sizeof(msg)), KERR_NONE);
	ck_assert_str_eq(ids[0], a.id);
	ck_assert_str_eq(ids[2], b.id);
	/* One finished, one not: the wait ends at the bound, once for both. */
	ck_assert_int_eq(kt_topics_delete_finish(reg, "one", a.id), 0);
	int64_t t0 = ku_mono_ms();
	kt_topics_delete_wait(reg, (const char(*)[KAAS_TOPIC_ID_LEN + 1])ids, 3);
	int64_t took = ku_mono_ms() - t0;
	ck_assert_int_ge(took, 300);
	ck_assert_int_lt(took, 3000);
	ck_assert(exists(data, "two"));
	ck_assert_int_eq(kt_topics_delete_finish(reg, "two", b.id), 0);
	t0 = ku_mono_ms();
	kt_topics_delete_wait(reg, (const char(*)[KAAS_TOPIC_ID_LEN + 1])ids, 3);
	ck_assert_int_lt(ku_mono_ms() - t0, 300);
	kt_topics_close(reg);
}
END_TEST

int main(void)
{
	ku_log_init_from_env();
	return ktest_main((struct ktest){ .suite = "topics-cdelete", .tcase = "core", .timeout = 60, .setup = setup,
					  .teardown = teardown },
			  KTEST_LIST(delete_leaves_directory_and_tombstone_to_the_controller,
				     finish_never_moves_a_directory_of_another_id,
				     finish_removes_an_entry_the_deleter_left,
				     recreate_waits_for_the_old_delete,
				     delete_answers_once_the_controller_finished, delete_wait_is_bounded,
				     a_controller_that_died_after_the_rename_is_finished_by_the_next));
}
