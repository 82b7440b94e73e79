/* test_ptable.c — the partition table over the real storage engine on a
 * scratch directory: leadership epochs recorded in assignment.json before
 * take-over and growing at every start (also when assignment.json is lost),
 * lookups and their errors, group commit waking acks=all waiters and long-poll
 * watches (through storage's listener, whoever flushes, keeping the
 * maximum), growing a topic, and dropping one closing every descriptor.
 * Driven by a cluster: nothing led until told, take-over and relinquish
 * idempotent, epochs below the disk's refused, the ack gate turning
 * durable answers into REQUEST_TIMED_OUT ("outcome unknown"), the applied
 * leader map, take-overs and relinquishes in batches, a failed group commit
 * answering REQUEST_TIMED_OUT for what it wrote and KAFKA_STORAGE_ERROR for
 * what it never wrote, and a take-over pending while the map names this
 * broker before it leads.
 *
 * Length: one test per behaviour of the table, all on the same fixture (a
 * scratch volume and the storage listener hooks); split, each file would
 * repeat it. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kaas/core/broker.h"
#include "kaas/core/leaders.h"
#include "kaas/core/ptable.h"
#include "kaas/core/ptable_int.h"
#include "kaas/proto/kerr.h"
#include "util/metrics.h"
#include "util/test/ktest.h"
#include "substrates/test/scratch.h"

static scratch vol;
static kb_broker B;

static void setup(void)
{
	scratch_make(&vol, "ptable");
	memset(&B, 0, sizeof(B));
	kb_config_defaults(&B.cfg);
	B.id = 7;
	B.cfg.broker_id = 7;
	B.data = scratch_subvol(&vol, "data");
	B.cluster = scratch_subvol(&vol, "cluster");
}

static void teardown(void)
{
	sub_destroy(B.data);
	sub_destroy(B.cluster);
	scratch_close(&vol);
}

static kb_topic_desc desc(const char *name, int32_t n)
{
	kb_topic_desc d = {name, NULL, n, {0}};
	ks_log_config_defaults(&d.cfg);
	return d;
}

static kw_str S(const char *s) { return (kw_str){s, (int32_t)strlen(s)}; }

static int assigned_epoch(const char *key)
{
	char *buf = NULL;
	size_t len = 0;
	if (sub_read_file(B.cluster, "assignment.json", 1 << 20, &buf, &len))
		return -1;
	json_t *j = json_loadb(buf, len, 0, NULL);
	free(buf);
	json_t *e = json_object_get(json_object_get(j, "partitions"), key);
	int ep = e ? (int)json_integer_value(json_object_get(e, "epoch")) : -1;
	int leader = e ? (int)json_integer_value(json_object_get(e, "leader")) : -1;
	json_decref(j);
	ck_assert(ep < 0 || leader == 7);
	return ep;
}

/* One v2 record batch holding one record. */
static void batch(kw_wr *w, const char *value)
{
	kw_wr_i64(w, 0);
	size_t len_off = kw_wr_reserve_i32(w);
	kw_wr_i32(w, -1);
	kw_wr_i8(w, 2);
	size_t crc_off = kw_wr_reserve_i32(w);
	size_t from = w->len;
	int64_t ts = (int64_t)time(NULL) * 1000;
	kw_wr_i16(w, 0);
	kw_wr_i32(w, 0);
	kw_wr_i64(w, ts);
	kw_wr_i64(w, ts);
	kw_wr_i64(w, -1);
	kw_wr_i16(w, -1);
	kw_wr_i32(w, -1);
	kw_wr_i32(w, 1);
	kw_wr rec = KAAS_WR_INIT;
	kw_wr_i8(&rec, 0);
	kw_wr_varint(&rec, 0);
	kw_wr_varint(&rec, 0);
	kw_wr_varint(&rec, -1);
	kw_wr_varint(&rec, (int64_t)strlen(value));
	kw_wr_raw(&rec, value, strlen(value));
	kw_wr_varint(&rec, 0);
	kw_wr_varint(w, (int64_t)rec.len);
	kw_wr_raw(w, rec.buf, rec.len);
	kw_wr_free(&rec);
	kw_wr_patch_len(w, len_off);
	kw_wr_patch_crc32c(w, crc_off, from);
}

/* ---- waiting for callbacks from the flusher threads ------------------------------ */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int durable_calls, watch_calls;
static int16_t durable_err;
static int64_t durable_hw;

static void on_durable(void *arg, int16_t err, int64_t hw)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	durable_calls++;
	durable_err = err;
	durable_hw = hw;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void on_watch(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	watch_calls++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void wait_for(int *counter, int want)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 60; /* a generous deadline, not a timing assertion */
	pthread_mutex_lock(&mu);
	while (*counter < want)
		if (pthread_cond_timedwait(&cv, &mu, &ts) == ETIMEDOUT)
			break;
	int got = *counter;
	pthread_mutex_unlock(&mu);
	ck_assert_int_ge(got, want);
}

static int open_fds_under(const char *dir)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;
	char p[300], target[1024];
	while ((de = readdir(d))) {
		snprintf(p, sizeof(p), "/proc/self/fd/%s", de->d_name);
		ssize_t l = readlink(p, target, sizeof(target) - 1);
		if (l <= 0)
			continue;
		target[l] = 0;
		if (strncmp(target, dir, strlen(dir)) == 0)
			n++;
	}
	closedir(d);
	return n;
}

START_TEST(epochs_grow_at_every_start)
{
	kb_ptable *t;
	kb_topic_desc d = desc("t.a-b", 2);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	ck_assert_int_eq(assigned_epoch("t.a-b-0"), 1);
	ck_assert_int_eq(assigned_epoch("t.a-b-1"), 1);
	kb_pref r;
	ck_assert_int_eq(kb_ptable_get(t, S("t.a-b"), 1, &r), KERR_NONE);
	ck_assert_int_eq(r.epoch, 1);
	kb_pref_put(&r);
	int32_t leader, epoch;
	ck_assert_int_eq(kb_ptable_leader(t, "t.a-b", 0, &leader, &epoch), KERR_NONE);
	ck_assert_int_eq(leader, 7);
	ck_assert_int_eq(epoch, 1);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);

	/* Second start: epoch 2, and a segment named with it. */
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	ck_assert_int_eq(assigned_epoch("t.a-b-0"), 2);
	ck_assert_int_eq(kb_ptable_get(t, S("t.a-b"), 0, &r), KERR_NONE);
	ck_assert_int_eq(r.epoch, 2);
	kb_pref_put(&r);
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(B.data, "t.a-b/0/0000000002-00000000000000000000.log", &st), 0);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);

	/* assignment.json lost: the epoch still grows, from the segment names. */
	ck_assert_int_eq(sub_unlink(B.cluster, "assignment.json"), 0);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	ck_assert_int_eq(assigned_epoch("t.a-b-1"), 3);
	ck_assert_int_eq(kb_ptable_get(t, S("t.a-b"), 1, &r), KERR_NONE);
	ck_assert_int_eq(r.epoch, 3);
	kb_pref_put(&r);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);

	/* A topic no longer in the registry is pruned from assignment.json. */
	kb_topic_desc other = desc("other", 1);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	ck_assert_int_eq(kb_ptable_start(t, &other, 1), 0);
	ck_assert_int_eq(assigned_epoch("t.a-b-0"), -1);
	ck_assert_int_eq(assigned_epoch("other-0"), 1);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
}
END_TEST

START_TEST(lookups_and_errors)
{
	kb_ptable *t;
	kb_topic_desc d = desc("orders", 2);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	kb_pref r;
	ck_assert_int_eq(kb_ptable_get(t, S("nope"), 0, &r), KERR_UNKNOWN_TOPIC_OR_PARTITION);
	ck_assert_ptr_null(r.p);
	ck_assert_int_eq(kb_ptable_get(t, S("orders"), 2, &r), KERR_UNKNOWN_TOPIC_OR_PARTITION);
	ck_assert_int_eq(kb_ptable_get(t, S("orders"), -1, &r), KERR_UNKNOWN_TOPIC_OR_PARTITION);
	ck_assert_int_eq(kb_ptable_get(t, (kw_str){"ordersX", 6}, 0, &r), KERR_NONE); /* a slice */
	kb_pref_put(&r);
	kb_pref_put(&r); /* repeatable */
	int32_t leader, epoch;
	ck_assert_int_eq(kb_ptable_leader(t, "orders", 5, &leader, &epoch), KERR_LEADER_NOT_AVAILABLE);
	ck_assert_int_eq(kb_ptable_leader(t, "nope", 0, &leader, &epoch), KERR_UNKNOWN_TOPIC_OR_PARTITION);
	ck_assert_int_eq(leader, -1);

	/* Growing: partition 2 appears with its own epoch. */
	d.partitions = 3;
	ck_assert_int_eq(kb_ptable_ensure_topic(t, &d), 0);
	ck_assert_int_eq(kb_ptable_get(t, S("orders"), 2, &r), KERR_NONE);
	kb_pref_put(&r);
	ck_assert_int_eq(assigned_epoch("orders-2"), 1);
	ck_assert_int_eq(kb_ptable_ensure_topic(t, &d), 0); /* idempotent */
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
}
END_TEST

START_TEST(group_commit_wakes_waiters_and_watches)
{
	kb_ptable *t;
	kb_topic_desc d = desc("gc", 1);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	kb_pref r;
	ck_assert_int_eq(kb_ptable_get(t, S("gc"), 0, &r), KERR_NONE);
	durable_calls = watch_calls = 0;

	/* Nothing appended: offset 0 is durable already, answered at once. */
	ck_assert_int_eq(kb_ptable_when_durable(&r, 0, on_durable, NULL), 0);
	ck_assert_int_eq(durable_calls, 1);

	/* A long poll at offset 0 waits for data. */
	kb_watch *w = kb_ptable_watch(&r, 0, on_watch, NULL);
	ck_assert_ptr_nonnull(w);
	ck_assert_int_eq(watch_calls, 0);

	kw_wr b = KAAS_WR_INIT;
	batch(&b, "hello");
	ks_append_result res;
	ck_assert_int_eq(ks_partition_append(r.p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, KERR_NONE);
	ck_assert_int_eq(res.base_offset, 0);
	ck_assert_int_eq(kb_ptable_when_durable(&r, res.last_offset + 1, on_durable, NULL), 0);
	wait_for(&durable_calls, 2);
	ck_assert_int_eq(durable_err, KERR_NONE);
	ck_assert_int_eq(durable_hw, 1);
	wait_for(&watch_calls, 1);
	ck_assert_int_eq(ks_partition_high_watermark(r.p), 1);
	kb_ptable_unwatch(t, w);

	/* acks=1 path: dirty data becomes durable without a waiter. */
	kw_wr_free(&b);
	batch(&b, "again");
	ck_assert_int_eq(ks_partition_append(r.p, b.buf, b.len, &res), 0);
	w = kb_ptable_watch(&r, 1, on_watch, NULL);
	kb_ptable_dirty(&r);
	wait_for(&watch_calls, 2);
	ck_assert_int_eq(ks_partition_high_watermark(r.p), 2);
	kb_ptable_unwatch(t, w);

	/* An unwatched watch never fires. */
	w = kb_ptable_watch(&r, 2, on_watch, NULL);
	kb_ptable_unwatch(t, w);
	kw_wr_free(&b);
	batch(&b, "third");
	ck_assert_int_eq(ks_partition_append(r.p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(kb_ptable_when_durable(&r, 3, on_durable, NULL), 0);
	wait_for(&durable_calls, 3);
	ck_assert_int_eq(watch_calls, 2);
	kw_wr_free(&b);
	kb_pref_put(&r);

	/* The manifest is persisted by the shutdown relinquish. */
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
	char *buf = NULL;
	size_t len = 0;
	ck_assert_int_eq(sub_read_file(B.data, "gc/0/manifest.json", 1 << 20, &buf, &len), 0);
	json_t *m = json_loadb(buf, len, 0, NULL);
	free(buf);
	ck_assert_int_eq(json_integer_value(json_object_get(m, "high_watermark")), 3);
	ck_assert_int_eq(json_integer_value(json_object_get(m, "epoch")), 1);
	json_decref(m);
}
END_TEST

static int gate_open = 1;
static int gate(void *arg)
{
	(void)arg;
	return __atomic_load_n(&gate_open, __ATOMIC_ACQUIRE);
}

static int led_count;
static void count_led(void *arg, const char *topic, const char *id, int32_t p, int32_t epoch, int state)
{
	(void)arg, (void)topic, (void)id, (void)p, (void)epoch;
	led_count += state == 1;
}

START_TEST(driven_by_the_cluster)
{
	kb_ptable *t;
	kb_topic_desc d = desc("dr", 2);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	kb_ptable_set_driven(t);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	/* Known, not led; no single-broker assignment.json written. */
	kb_pref r;
	ck_assert_int_eq(kb_ptable_get(t, S("dr"), 0, &r), KERR_NOT_LEADER_OR_FOLLOWER);
	ck_assert_int_eq(assigned_epoch("dr-0"), -1);
	ck_assert_int_eq(kb_ptable_take_over(t, "nope", NULL, 0, 1, 0, 0), -ENOENT);
	ck_assert_int_eq(kb_ptable_take_over(t, "dr", NULL, 0, 3, 0, 0), 0);
	ck_assert_int_eq(kb_ptable_take_over(t, "dr", NULL, 0, 3, 0, 0), 0); /* idempotent */
	ck_assert_int_eq(kb_ptable_disk_epoch(t, "dr", 0), 3);
	led_count = 0;
	kb_ptable_led(t, count_led, NULL);
	ck_assert_int_eq(led_count, 1);

	/* The ack gate: durable, but the lease is gone -> REQUEST_TIMED_OUT.
	 * Not NOT_LEADER: that says "not written", and a successor serves it. */
	kb_ptable_set_ack_gate(t, gate, NULL);
	ck_assert_int_eq(kb_ptable_get(t, S("dr"), 0, &r), KERR_NONE);
	kw_wr b = KAAS_WR_INIT;
	batch(&b, "one");
	ks_append_result res;
	ck_assert_int_eq(ks_partition_append(r.p, b.buf, b.len, &res), 0);
	durable_calls = 0;
	ck_assert_int_eq(kb_ptable_when_durable(&r, 1, on_durable, NULL), 0);
	wait_for(&durable_calls, 1);
	ck_assert_int_eq(durable_err, KERR_NONE);
	__atomic_store_n(&gate_open, 0, __ATOMIC_RELEASE);
	ck_assert_int_eq(kb_ptable_ack_ok(t), 0);
	kw_wr_free(&b);
	batch(&b, "two");
	ck_assert_int_eq(ks_partition_append(r.p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(kb_ptable_when_durable(&r, 2, on_durable, NULL), 0);
	wait_for(&durable_calls, 2);
	ck_assert_int_eq(durable_err, KERR_REQUEST_TIMED_OUT);
	/* Already durable when asked, gate closed: the same. */
	ck_assert_int_eq(kb_ptable_when_durable(&r, 1, on_durable, NULL), 0);
	wait_for(&durable_calls, 3);
	ck_assert_int_eq(durable_err, KERR_REQUEST_TIMED_OUT);
	kb_pref_put(&r);
	/* Closed gate: nothing is served at all. */
	ck_assert_int_eq(kb_ptable_get(t, S("dr"), 0, &r), KERR_NOT_LEADER_OR_FOLLOWER);
	__atomic_store_n(&gate_open, 1, __ATOMIC_RELEASE);
	kw_wr_free(&b);

	/* Relinquish: idempotent, writes the final manifest, no longer led. */
	ck_assert_int_eq(kb_ptable_relinquish(t, "dr", 0), 0);
	ck_assert_int_eq(kb_ptable_relinquish(t, "dr", 0), 0);
	ck_assert_int_eq(kb_ptable_get(t, S("dr"), 0, &r), KERR_NOT_LEADER_OR_FOLLOWER);
	char *buf = NULL;
	size_t len = 0;
	ck_assert_int_eq(sub_read_file(B.data, "dr/0/manifest.json", 1 << 20, &buf, &len), 0);
	json_t *m = json_loadb(buf, len, 0, NULL);
	free(buf);
	ck_assert_int_eq(json_integer_value(json_object_get(m, "high_watermark")), 2);
	json_decref(m);
	/* An epoch below the disk's is refused, the disk's own only for the
	 * table that led it (a re-drive); above it is taken. */
	ck_assert_int_eq(kb_ptable_take_over(t, "dr", NULL, 0, 2, 0, 0), -ESTALE);
	ck_assert_int_eq(kb_ptable_take_over(t, "dr", NULL, 1, 3, 0, 0), 0);
	ck_assert_int_eq(kb_ptable_relinquish(t, "dr", 1), 0);
	ck_assert_int_eq(kb_ptable_take_over(t, "dr", NULL, 0, 4, 3, 1), 0);
	ck_assert_int_eq(kb_ptable_get(t, S("dr"), 0, &r), KERR_NONE);
	ck_assert_int_eq(r.epoch, 4);
	ck_assert_int_eq(ks_partition_high_watermark(r.p), 2);
	kb_pref_put(&r);

	/* The leader map answers Metadata's question. */
	int32_t leader, epoch;
	kb_leaders *lm = kb_leaders_new(1, 1, 0);
	ck_assert_ptr_nonnull(lm);
	lm->brokers[0].id = 9;
	ck_assert_int_eq(kb_ltopic_init(&lm->topics[0], "dr", NULL, 2), 0);
	lm->topics[0].leader[0] = 7, lm->topics[0].epoch[0] = 4;
	lm->topics[0].leader[1] = 9, lm->topics[0].epoch[1] = 6;
	kb_ptable_apply_leaders(t, lm);
	ck_assert_int_eq(kb_ptable_leader(t, "dr", 1, &leader, &epoch), KERR_NONE);
	ck_assert_int_eq(leader, 9);
	ck_assert_int_eq(epoch, 6);
	ck_assert_int_eq(kb_ptable_leader(t, "dr", 5, &leader, &epoch), KERR_LEADER_NOT_AVAILABLE);
	ck_assert_int_eq(kb_ptable_wait_led(t, "dr", 10), 1); /* 0 is led here at 4, 1 by broker 9 */
	kb_leaders *got = kb_ptable_leaders(t);
	ck_assert_ptr_eq(got, lm);
	kb_leaders_put(got);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
}
END_TEST

/* The take-over guard: asked with the partition's name before the steps
 * that change the volume; a refusal fails the take-over (re-driven). */
static int guard_calls, guard_rc;
static char guard_seen[256];

static int tk_guard(void *arg, const char *topic, int32_t partition, int32_t epoch, const char *step,
		    int32_t *ceiling)
{
	(void)arg;
	(void)step;
	guard_calls++;
	snprintf(guard_seen, sizeof(guard_seen), "%s/%d@%d", topic, (int)partition, (int)epoch);
	*ceiling = epoch;
	return guard_rc;
}

START_TEST(take_overs_ask_the_guard)
{
	kb_ptable *t;
	kb_topic_desc d = desc("gd", 1);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	kb_ptable_set_driven(t);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	kb_ptable_set_takeover_guard(t, tk_guard, NULL);
	guard_rc = -ETIME;
	ck_assert_int_eq(kb_ptable_take_over(t, "gd", NULL, 0, 5, 0, 0), -ETIME);
	ck_assert_int_ge(guard_calls, 1);
	ck_assert_str_eq(guard_seen, "gd/0@5");
	kb_pref r;
	ck_assert_int_eq(kb_ptable_get(t, S("gd"), 0, &r), KERR_KAFKA_STORAGE_ERROR);
	guard_rc = 0;
	guard_calls = 0;
	ck_assert_int_eq(kb_ptable_take_over(t, "gd", NULL, 0, 6, 0, 0), 0);
	ck_assert_int_ge(guard_calls, 1); /* the manifest write at least */
	ck_assert_int_eq(kb_ptable_get(t, S("gd"), 0, &r), KERR_NONE);
	kb_pref_put(&r);
	kb_ptable_set_takeover_guard(t, NULL, NULL);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
}
END_TEST

START_TEST(batched_take_overs_and_relinquishes)
{
	enum { N = 40 };
	kb_ptable *t;
	kb_topic_desc d = desc("many", N);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	kb_ptable_set_driven(t);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	kb_takeover v[N + 1];
	for (int i = 0; i < N; i++)
		v[i] = (kb_takeover){"many", NULL, i, 2 + i % 3, 0, 0, 99};
	v[N] = (kb_takeover){"nope", NULL, 0, 1, 0, 0, 99};
	ck_assert_int_eq(kb_ptable_take_over_many(t, v, N + 1), 0);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(v[i].rc, 0);
	ck_assert_int_eq(v[N].rc, -ENOENT); /* one bad item spoils nothing else */
	led_count = 0;
	kb_ptable_led(t, count_led, NULL);
	ck_assert_int_eq(led_count, N);
	for (int i = 0; i < N; i++) {
		kb_pref r;
		ck_assert_int_eq(kb_ptable_get(t, S("many"), i, &r), KERR_NONE);
		ck_assert_int_eq(r.epoch, 2 + i % 3);
		kb_pref_put(&r);
		ck_assert_int_eq(kb_ptable_disk_epoch(t, "many", i), 2 + i % 3);
	}
	/* Again: already there, every answer 0; a lower epoch is refused. */
	v[0].epoch = 1;
	ck_assert_int_eq(kb_ptable_take_over_many(t, v, N), 0);
	ck_assert_int_eq(v[0].rc, -ESTALE);
	for (int i = 1; i < N; i++)
		ck_assert_int_eq(v[i].rc, 0);
	/* Half of them let go at once: final manifests, no longer led. */
	int rc[N / 2 + 1];
	ck_assert_int_eq(kb_ptable_relinquish_many(t, v, N / 2, rc), 0);
	for (int i = 0; i < N / 2; i++) {
		ck_assert_int_eq(rc[i], 0);
		kb_pref r;
		ck_assert_int_eq(kb_ptable_get(t, S("many"), i, &r), KERR_NOT_LEADER_OR_FOLLOWER);
		char path[64], *buf = NULL;
		size_t len = 0;
		snprintf(path, sizeof(path), "many/%d/manifest.json", i);
		ck_assert_int_eq(sub_read_file(B.data, path, 1 << 20, &buf, &len), 0);
		free(buf);
	}
	led_count = 0;
	kb_ptable_led(t, count_led, NULL);
	ck_assert_int_eq(led_count, N / 2);
	/* Idempotent, and an unknown partition is nothing to do. */
	v[N / 2] = (kb_takeover){"nope", NULL, 3, 0, 0, 0, 0};
	ck_assert_int_eq(kb_ptable_relinquish_many(t, v, N / 2 + 1, rc), 0);
	for (int i = 0; i <= N / 2; i++)
		ck_assert_int_eq(rc[i], 0);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
}
END_TEST

START_TEST(drop_closes_every_descriptor)
{
	kb_ptable *t;
	kb_topic_desc d[2] = {desc("gone", 3), desc("kept", 1)};
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	ck_assert_int_eq(kb_ptable_start(t, d, 2), 0);
	char dir[300];
	snprintf(dir, sizeof(dir), "%s/data/gone/", vol.dir);
	ck_assert_int_gt(open_fds_under(dir), 0); /* leaders hold descriptors */
	kb_pref r;
	ck_assert_int_eq(kb_ptable_get(t, S("gone"), 1, &r), KERR_NONE);
	watch_calls = 0;
	kb_watch *w = kb_ptable_watch(&r, 0, on_watch, NULL);
	kb_pref_put(&r);

	ck_assert_int_eq(kb_ptable_drop_topic(t, "gone"), 0);
	ck_assert_int_eq(open_fds_under(dir), 0);
	ck_assert_int_eq(watch_calls, 1); /* the parked long poll was woken */
	kb_ptable_unwatch(t, w);
	ck_assert_int_eq(kb_ptable_get(t, S("gone"), 0, &r), KERR_UNKNOWN_TOPIC_OR_PARTITION);
	ck_assert_int_eq(assigned_epoch("gone-0"), -1);
	ck_assert_int_eq(assigned_epoch("kept-0"), 1);
	ck_assert_int_eq(kb_ptable_drop_topic(t, "gone"), 0); /* idempotent */
	/* The directory can go now; recreating starts over cleanly. */
	ck_assert_int_eq(sub_remove_tree(B.data, "gone"), 0);
	kb_topic_desc again = desc("gone", 1);
	ck_assert_int_eq(kb_ptable_ensure_topic(t, &again), 0);
	ck_assert_int_eq(kb_ptable_get(t, S("gone"), 0, &r), KERR_NONE);
	ck_assert_int_eq(ks_partition_log_end(r.p), 0);
	kb_pref_put(&r);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
	snprintf(dir, sizeof(dir), "%s/data/", vol.dir);
	ck_assert_int_eq(open_fds_under(dir), 0); /* shutdown closed the rest */
}
END_TEST

/* The durable offset has one owner, storage, and one way into the table:
 * its listener.  A flush run by somebody else than the table's flushers
 * (housekeeping does that) wakes a long poll at once, on the flushing
 * thread; announcements arriving out of order never move it back. */
START_TEST(durability_comes_from_the_storage_listener)
{
	kb_ptable *t;
	kb_topic_desc d = desc("lis", 1);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	kb_pref r;
	ck_assert_int_eq(kb_ptable_get(t, S("lis"), 0, &r), KERR_NONE);
	durable_calls = watch_calls = 0;

	kb_watch *w = kb_ptable_watch(&r, 0, on_watch, NULL);
	kw_wr b = KAAS_WR_INIT;
	batch(&b, "one");
	ks_append_result res;
	ck_assert_int_eq(ks_partition_append(r.p, b.buf, b.len, &res), 0);
	kw_wr_free(&b);
	ck_assert_int_eq(watch_calls, 0);
	int64_t dur = -1;
	ck_assert_int_eq(ks_partition_flush(r.p, &dur), 0); /* not the table's flusher */
	ck_assert_int_eq(dur, 1);
	ck_assert_int_eq(watch_calls, 1); /* called synchronously by the listener */
	kb_ptable_unwatch(t, w);

	/* Out of order: 12 then 11; the table keeps 12. */
	ck_assert_int_eq(kb_ptable_when_durable(&r, 10, on_durable, NULL), 0);
	kb__on_durable(r.e, r.p, 12);
	wait_for(&durable_calls, 1);
	ck_assert_int_eq(durable_hw, 12);
	kb__on_durable(r.e, r.p, 11);
	ck_assert_int_eq(kb_ptable_when_durable(&r, 12, on_durable, NULL), 0);
	ck_assert_int_eq(durable_calls, 2); /* answered at once: 12 is durable */
	ck_assert_int_eq(durable_hw, 12);
	kb_pref_put(&r);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
}
END_TEST

/* An allocation failing anywhere in start-up fails the start whole: no topic
 * is published with part of its partitions (or none), nothing is taken
 * over, nothing leaks; once allocations succeed the same start leads all. */
START_TEST(start_fails_whole_when_an_allocation_fails)
{
	kb_topic_desc d[2] = {desc("alpha", 3), desc("beta", 2)};
	int failures = 0;
	for (int k = 1; k < 200; k++) {
		kb_ptable *t;
		ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
		kb__alloc_fail_at = k;
		int rc = kb_ptable_start(t, d, 2);
		int missed = kb__alloc_fail_at != 0; /* fewer than k allocations: all succeeded */
		kb__alloc_fail_at = 0;
		kb_pref r;
		int32_t leader, epoch;
		if (rc) {
			ck_assert_int_eq(rc, -ENOMEM);
			failures++;
			for (int i = 0; i < 2; i++) {
				ck_assert_int_eq(kb_ptable_get(t, S(d[i].name), 0, &r), KERR_UNKNOWN_TOPIC_OR_PARTITION);
				ck_assert_int_eq(kb_ptable_leader(t, d[i].name, 0, &leader, &epoch),
						 KERR_UNKNOWN_TOPIC_OR_PARTITION);
			}
			char dir[300];
			snprintf(dir, sizeof(dir), "%s/data/", vol.dir);
			ck_assert_int_eq(open_fds_under(dir), 0); /* nothing was opened */
		} else {
			ck_assert(missed);
			for (int i = 0; i < 2; i++)
				for (int32_t p = 0; p < d[i].partitions; p++) {
					ck_assert_int_eq(kb_ptable_get(t, S(d[i].name), p, &r), KERR_NONE);
					kb_pref_put(&r);
				}
		}
		ck_assert_int_eq(kb_ptable_shutdown(t), 0);
		kb_ptable_destroy(t);
		if (!rc)
			break;
	}
	/* buckets, two arrays, per topic: topic, name, parts, per partition: entry */
	ck_assert_int_ge(failures, 3 + 2 * 3 + 5);
}
END_TEST

/* At the descriptor limit a new topic's partitions cannot all be led: the
 * table says so (-EMFILE), instead of success, keeps them answering
 * KAFKA_STORAGE_ERROR and leads them once descriptors are back. */
START_TEST(ensure_reports_partitions_that_cannot_be_led)
{
	kb_ptable *t;
	kb_topic_desc d = desc("wide", 40);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	ck_assert_int_eq(kb_ptable_start(t, NULL, 0), 0);
	struct rlimit old, low;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)open_fds_under("/") + 24; /* room for a few partitions only */
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	int rc = kb_ptable_ensure_topic(t, &d);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	ck_assert_int_eq(rc, -EMFILE);
	kb_pref r;
	int32_t leader, epoch, failed = -1;
	for (int32_t p = 0; p < 40 && failed < 0; p++) {
		int16_t e = kb_ptable_get(t, S("wide"), p, &r);
		if (e == KERR_NONE)
			kb_pref_put(&r);
		else if (e == KERR_KAFKA_STORAGE_ERROR)
			failed = p;
	}
	ck_assert_int_ge(failed, 0); /* which ones failed depends on the take-overs' order */
	ck_assert_int_eq(kb_ptable_leader(t, "wide", failed, &leader, &epoch), KERR_LEADER_NOT_AVAILABLE);
	/* Descriptors are back: housekeeping re-drives them (after the retry
	 * delay, a second); a deadline, not a timing assertion. */
	int16_t err = KERR_KAFKA_STORAGE_ERROR;
	for (int i = 0; i < 600 && err != KERR_NONE; i++) {
		usleep(100 * 1000);
		kb_ptable_housekeep(t);
		err = kb_ptable_get(t, S("wide"), failed, &r);
	}
	ck_assert_int_eq(err, KERR_NONE);
	kb_pref_put(&r);
	ck_assert_int_eq(kb_ptable_ensure_topic(t, &d), 0); /* all led now */
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
}
END_TEST

/* Leading up to the descriptor limit, a SIGTERM still relinquishes every
 * led partition (manifest and snapshot need descriptors): the table holds
 * a reserve back for it.  Without it, shutdown failed and the state of the
 * partitions was lost. */
START_TEST(shutdown_at_the_descriptor_limit_relinquishes)
{
	kb_ptable *t;
	kb_topic_desc d = desc("full", 40);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	ck_assert_int_eq(kb_ptable_start(t, NULL, 0), 0);
	struct rlimit old, low;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)open_fds_under("/") + 24;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	ck_assert_int_eq(kb_ptable_ensure_topic(t, &d), -EMFILE);
	/* Whatever the failed take-overs gave back, connections would take:
	 * the process is out of descriptors when SIGTERM comes. */
	int fill[64], nfill = 0, fd;
	while (nfill < 64 && (fd = open("/dev/null", O_RDONLY)) >= 0)
		fill[nfill++] = fd;
	ck_assert_int_lt(nfill, 64);
	int rc = kb_ptable_shutdown(t);
	while (nfill > 0)
		close(fill[--nfill]);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	ck_assert_int_eq(rc, 0);
	kb_ptable_destroy(t);
}
END_TEST

/* The first (lowest) segment file of DATA/<topic>/0/, by name. */
static void first_segment(const char *topic, char *out, size_t len)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/data/%s/0", vol.dir, topic);
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	char best[256] = "";
	for (struct dirent *de; (de = readdir(d));) {
		size_t n = strlen(de->d_name);
		if (n > 4 && strcmp(de->d_name + n - 4, ".log") == 0 && (!best[0] || strcmp(de->d_name, best) < 0))
			snprintf(best, sizeof(best), "%s", de->d_name);
	}
	closedir(d);
	ck_assert(best[0]);
	snprintf(out, len, "%s/%s", dir, best);
}

START_TEST(scrub_finds_damage_in_sealed_segments)
{
	ck_assert_int_eq(ku_metrics_create(&B.metrics), 0);
	B.cfg.scrub_bytes_per_sec = 0; /* off first */
	kb_ptable *t;
	kb_topic_desc d = desc("scrub", 1);
	d.cfg.segment_bytes = 1024; /* every batch below fills a segment */
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	kb_pref r;
	ck_assert_int_eq(kb_ptable_get(t, S("scrub"), 0, &r), KERR_NONE);
	char value[1100];
	memset(value, 'v', sizeof(value) - 1);
	value[sizeof(value) - 1] = '\0';
	ks_append_result res;
	for (int i = 0; i < 5; i++) {
		kw_wr b = KAAS_WR_INIT;
		batch(&b, value);
		ck_assert_int_eq(ks_partition_append(r.p, b.buf, b.len, &res), 0);
		ck_assert_int_eq(res.error, KERR_NONE);
		kw_wr_free(&b);
	}
	durable_calls = 0;
	ck_assert_int_eq(kb_ptable_when_durable(&r, res.last_offset + 1, on_durable, NULL), 0);
	wait_for(&durable_calls, 1);
	kb_pref_put(&r);
	/* A restart: the new leadership has verified nothing it did not write. */
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);

	/* Bit rot in the first, sealed segment: inside a record's value. */
	char seg[800];
	first_segment("scrub", seg, sizeof(seg));
	int fd = open(seg, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "X", 1, 200), 1);
	close(fd);

	ks_storage_stats before, after;
	ks_storage_stats_get(&before);
	kb_ptable_housekeep(t); /* scrub off: nothing verified by it */
	ks_storage_stats_get(&after);
	ck_assert_uint_eq(after.scrubbed_bytes, before.scrubbed_bytes);

	B.cfg.scrub_bytes_per_sec = 1 << 20;
	/* The bucket fills with time: rounds a fifth of a second apart, as the
	 * broker's housekeeping runs them a second apart. */
	for (int i = 0; i < 50 && (after.corrupt_ranges == before.corrupt_ranges ||
				   after.scrubbed_bytes == before.scrubbed_bytes); i++) {
		usleep(200 * 1000);
		kb_ptable_housekeep(t);
		ks_storage_stats_get(&after);
	}
	ck_assert_uint_gt(after.scrubbed_bytes, before.scrubbed_bytes);
	ck_assert_uint_eq(after.corrupt_ranges, before.corrupt_ranges + 1); /* found once, whoever found it */
	ck_assert_uint_ge(after.quarantined_files, before.quarantined_files + 1);

	/* The counters are in the broker's metrics. */
	char *text = NULL;
	size_t len = 0;
	ck_assert_int_eq(ku_metrics_render(B.metrics, &text, &len), 0);
	char want[128];
	snprintf(want, sizeof(want), "kaas_storage_corrupt_ranges_total %llu\n",
		 (unsigned long long)after.corrupt_ranges);
	ck_assert_ptr_nonnull(strstr(text, want));
	ck_assert_ptr_nonnull(strstr(text, "# TYPE kaas_storage_damaged_segments gauge\n"));
	free(text);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
	ku_metrics_destroy(B.metrics);
	B.metrics = NULL;
}
END_TEST

START_TEST(implausible_epochs_on_the_volume_are_not_followed)
{
	kb_ptable *t;
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	char dir[600], path[700];
	snprintf(dir, sizeof(dir), "%s/data/hostile/0", vol.dir);
	char cmd[800];
	snprintf(cmd, sizeof(cmd), "mkdir -p %s", dir);
	ck_assert_int_eq(system(cmd), 0);
	const char *names[] = {"0000000003-00000000000000000000.log", "2147483646-00000000000000000010.log"};
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		int fd = open(path, O_CREAT | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		close(fd);
	}
	/* The real epoch (3) is the floor; the planted one is refused by name. */
	ck_assert_int_eq(kb_ptable_disk_epoch(t, "hostile", 0), 3);
	snprintf(path, sizeof(path), "%s/manifest.json", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("{\"version\":1,\"epoch\":2147483000,\"high_watermark\":0,\"log_start_offset\":0}\n", f);
	fclose(f);
	ck_assert_int_eq(kb_ptable_disk_epoch(t, "hostile", 0), 3);
	kb_ptable_destroy(t);
}
END_TEST

/* A leadership whose group commit failed, re-driven by the cluster at a new
 * epoch: the table closes the partition and opens it again in between, and
 * the new leadership's log still ends at the failed one's durable offset
 * (what was written past it was answered KAFKA_STORAGE_ERROR, and a
 * client that bumped its producer epoch would send it again as new data:
 * docs/storage.md, "Poisoning"). */
START_TEST(re_driven_after_a_failed_commit_ends_at_the_durable_offset)
{
	/* fsyncs 1 and 2 are the take-over's; 3 commits "one", 4 "two". */
	char url[600], e[256];
	snprintf(url, sizeof(url), "fault:%s/data?fail=fsync:4:ENOSPC", vol.dir);
	sub_vfs *fv;
	ck_assert_int_eq(sub_open_url(url, &fv, e, sizeof(e)), 0);
	sub_destroy(B.data);
	B.data = fv;
	kb_ptable *t;
	kb_topic_desc d = desc("cut", 1);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	kb_ptable_set_driven(t);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	ck_assert_int_eq(kb_ptable_take_over(t, "cut", NULL, 0, 1, 0, 0), 0);
	kb_pref r;
	ck_assert_int_eq(kb_ptable_get(t, S("cut"), 0, &r), KERR_NONE);
	kw_wr b = KAAS_WR_INIT;
	ks_append_result res;
	batch(&b, "one");
	ck_assert_int_eq(ks_partition_append(r.p, b.buf, b.len, &res), 0);
	durable_calls = 0;
	ck_assert_int_eq(kb_ptable_when_durable(&r, 1, on_durable, NULL), 0);
	wait_for(&durable_calls, 1);
	ck_assert_int_eq(durable_err, KERR_NONE);
	kw_wr_free(&b);
	batch(&b, "two");
	ck_assert_int_eq(ks_partition_append(r.p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(kb_ptable_when_durable(&r, 2, on_durable, NULL), 0);
	wait_for(&durable_calls, 2);
	ck_assert_int_eq(durable_err, KERR_REQUEST_TIMED_OUT); /* "two" is written, not durable */
	ck_assert_int_eq(ks_partition_log_end(r.p), 2);
	kb_pref_put(&r);
	ck_assert_int_eq(kb_ptable_take_over(t, "cut", NULL, 0, 2, 1, 0), 0);
	ck_assert_int_eq(kb_ptable_get(t, S("cut"), 0, &r), KERR_NONE);
	ck_assert_msg(ks_partition_log_end(r.p) == 1, "the refused record came back: log end %lld",
		      (long long)ks_partition_log_end(r.p));
	ck_assert_int_eq(ks_partition_high_watermark(r.p), 1);
	/* Sent again, it is written once, at the offset it was refused at. */
	kw_wr_free(&b);
	batch(&b, "two");
	ck_assert_int_eq(ks_partition_append(r.p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.base_offset, 1);
	kw_wr_free(&b);
	kb_pref_put(&r);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
}
END_TEST


/* Every waiter of a group commit that failed is answered "outcome unknown"
 * (the batches are whole in the log, and a successor's recovery keeps
 * them), while an append refused afterwards, which wrote nothing, says
 * KAFKA_STORAGE_ERROR and that nothing of it is in the log. */
static int16_t errs[4];
static void on_durable_i(void *arg, int16_t err, int64_t hw)
{
	(void)hw;
	pthread_mutex_lock(&mu);
	errs[(intptr_t)arg] = err;
	durable_calls++;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

START_TEST(a_failed_group_commit_answers_outcome_unknown)
{
	char url[600], e[256];
	/* fsyncs 1 and 2 are the take-over's; 3 is the commit of both. */
	snprintf(url, sizeof(url), "fault:%s/data?fail=fsync:3:ENOSPC", vol.dir);
	sub_vfs *fv;
	ck_assert_int_eq(sub_open_url(url, &fv, e, sizeof(e)), 0);
	sub_destroy(B.data);
	B.data = fv;
	kb_ptable *t;
	kb_topic_desc d = desc("full", 1);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	kb_ptable_set_driven(t);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	ck_assert_int_eq(kb_ptable_take_over(t, "full", NULL, 0, 1, 0, 0), 0);
	kb_pref r;
	ck_assert_int_eq(kb_ptable_get(t, S("full"), 0, &r), KERR_NONE);
	kw_wr b = KAAS_WR_INIT;
	ks_append_result res;
	batch(&b, "one");
	ck_assert_int_eq(ks_partition_append(r.p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(ks_partition_append(r.p, b.buf, b.len, &res), 0);
	durable_calls = 0;
	errs[0] = errs[1] = -1;
	ck_assert_int_eq(kb_ptable_when_durable(&r, 1, on_durable_i, (void *)(intptr_t)0), 0);
	ck_assert_int_eq(kb_ptable_when_durable(&r, 2, on_durable_i, (void *)(intptr_t)1), 0);
	wait_for(&durable_calls, 2);
	ck_assert_int_eq(errs[0], KERR_REQUEST_TIMED_OUT);
	ck_assert_int_eq(errs[1], KERR_REQUEST_TIMED_OUT);
	/* Poisoned: refused before anything is written. */
	int rc = ks_partition_append(r.p, b.buf, b.len, &res);
	ck_assert_int_lt(rc, 0);
	ck_assert_int_eq(res.error, KERR_KAFKA_STORAGE_ERROR);
	ck_assert_int_eq(res.maybe_written, 0);
	kw_wr_free(&b);
	kb_pref_put(&r);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
}
END_TEST

/* A failed log write leaves its last batch torn: "not written" is true of
 * a request of one batch; of several, the first may be whole in the log. */
START_TEST(an_append_that_failed_says_whether_it_may_be_in_the_log)
{
	char url[600], e[256];
	snprintf(url, sizeof(url), "fault:%s/data?failpath=*.log:pwrite:ENOSPC", vol.dir);
	sub_vfs *fv;
	ck_assert_int_eq(sub_open_url(url, &fv, e, sizeof(e)), 0);
	sub_destroy(B.data);
	B.data = fv;
	kb_ptable *t;
	kb_topic_desc d = desc("aw", 2);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	kb_ptable_set_driven(t);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	for (int32_t k = 0; k < 2; k++) {
		ck_assert_int_eq(kb_ptable_take_over(t, "aw", NULL, k, 1, 0, 0), 0);
		kb_pref r;
		ck_assert_int_eq(kb_ptable_get(t, S("aw"), k, &r), KERR_NONE);
		kw_wr b = KAAS_WR_INIT;
		ks_append_result res;
		batch(&b, "one");
		if (k == 1)
			batch(&b, "two"); /* two batches in one request */
		int rc = ks_partition_append(r.p, b.buf, b.len, &res);
		ck_assert_int_lt(rc, 0);
		ck_assert_int_eq(res.error, KERR_KAFKA_STORAGE_ERROR);
		ck_assert_int_eq(res.maybe_written, k == 1);
		kw_wr_free(&b);
		kb_pref_put(&r);
	}
	kb_ptable_shutdown(t);
	kb_ptable_destroy(t);
}
END_TEST

/* The applied map gives a partition to this broker before its take-over
 * here ends: pending (produces wait, hold.c) until it leads at that
 * epoch; not when another broker is named, nor once a take-over at that
 * epoch failed (that answers KAFKA_STORAGE_ERROR). */
START_TEST(a_take_over_is_pending_until_it_leads_at_the_mapped_epoch)
{
	kb_ptable *t;
	kb_topic_desc d = desc("pend", 2);
	ck_assert_int_eq(kb_ptable_create(&B, &t), 0);
	kb_ptable_set_driven(t);
	ck_assert_int_eq(kb_ptable_start(t, &d, 1), 0);
	ck_assert_int_eq(kb_ptable_take_over(t, "pend", NULL, 0, 2, 0, 0), 0);
	ck_assert_int_eq(kb_ptable_pending(t, S("pend"), 0), 0); /* no map yet */
	kb_leaders *lm = kb_leaders_new(1, 1, 0);
	ck_assert_ptr_nonnull(lm);
	lm->brokers[0].id = 7;
	ck_assert_int_eq(kb_ltopic_init(&lm->topics[0], "pend", NULL, 2), 0);
	lm->topics[0].leader[0] = 7, lm->topics[0].epoch[0] = 4;
	lm->topics[0].leader[1] = 9, lm->topics[0].epoch[1] = 6;
	kb_ptable_apply_leaders(t, lm);
	ck_assert_int_eq(kb_ptable_pending(t, S("pend"), 0), 1); /* led at 2, mapped at 4 */
	ck_assert_int_eq(kb_ptable_pending(t, S("pend"), 1), 0); /* another broker's */
	ck_assert_int_eq(kb_ptable_pending(t, S("nope"), 0), 0);
	ck_assert_int_eq(kb_ptable_take_over(t, "pend", NULL, 0, 4, 2, 0), 0);
	ck_assert_int_eq(kb_ptable_pending(t, S("pend"), 0), 0);
	ck_assert_int_eq(kb_ptable_shutdown(t), 0);
	kb_ptable_destroy(t);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "ptable", .tcase = "ptable", .timeout = 120,
					  .setup = setup, .teardown = teardown },
			  KTEST_LIST(epochs_grow_at_every_start, lookups_and_errors,
				     group_commit_wakes_waiters_and_watches,
				     drop_closes_every_descriptor, driven_by_the_cluster, take_overs_ask_the_guard,
				     batched_take_overs_and_relinquishes,
				     durability_comes_from_the_storage_listener,
				     re_driven_after_a_failed_commit_ends_at_the_durable_offset,
				     a_failed_group_commit_answers_outcome_unknown,
				     an_append_that_failed_says_whether_it_may_be_in_the_log,
				     a_take_over_is_pending_until_it_leads_at_the_mapped_epoch,
				     start_fails_whole_when_an_allocation_fails,
				     ensure_reports_partitions_that_cannot_be_led,
				     shutdown_at_the_descriptor_limit_relinquishes,
				     scrub_finds_damage_in_sealed_segments,
				     implausible_epochs_on_the_volume_are_not_followed));
}
