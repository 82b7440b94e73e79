/* test_dyncfg.c — the dynamic broker config store: values validated as the
 * static config validates them, precedence (broker > cluster default >
 * static), concurrent read-modify-writes from several brokers that never
 * lose an update, hostile version files refused with the last good state
 * kept, an abandoned incomplete version passed over, and the cleanup of
 * old versions. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kaas/core/config.h"
#include "kaas/core/dyncfg.h"
#include "kaas/proto/kerr.h"
#include "substrates/test/scratch.h"
#include "util/clock.h"
#include "util/test/ktest.h"

static kb_config stat_cfg;

static void up(void)
{
	scratch_open(&scratch_vol, "dyncfg");
	kb_config_defaults(&stat_cfg);
	stat_cfg.log.retention_ms = 1000; /* "set in the file" */
}

static void down(void)
{
	scratch_close(&scratch_vol);
}

#define VFS (scratch_vol.vfs)

/* An edit that sets (or deletes, value NULL) one key. */
typedef struct one {
	const char *key, *value;
} one;

static int16_t set_one(void *arg, kb_dyn_set *s, char *msg, size_t msglen)
{
	const one *o = arg;
	int k = kb_dyn_index(o->key, strlen(o->key));
	ck_assert_int_ge(k, 0);
	if (!o->value) {
		s->set &= ~(1u << k);
		return KERR_NONE;
	}
	char err[256];
	if (kb_dyn_check(k, o->value, strlen(o->value), s->val[k], err, sizeof(err))) {
		snprintf(msg, msglen, "%s", err);
		return KERR_INVALID_REQUEST;
	}
	s->set |= 1u << k;
	return KERR_NONE;
}

static int16_t alter(kb_dyncfg *d, int32_t entity, const char *key, const char *value)
{
	one o = {key, value};
	char msg[512];
	int16_t err = kb_dyncfg_alter(d, entity, set_one, &o, 0, msg, sizeof(msg));
	ck_assert_msg(err == KERR_NONE, "alter %s=%s: %s", key, value ? value : "(delete)", msg);
	return err;
}

static void put_file(const char *entity, int64_t seq, const char *text)
{
	char dir[128], path[256];
	snprintf(dir, sizeof(dir), "configs/brokers/%s", entity);
	ck_assert_int_eq(sub_mkdirs(VFS, dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/%020" PRId64 ".json", dir, seq);
	ck_assert_int_eq(sub_write_atomic(VFS, path, text, strlen(text)), 0);
}

static int count_versions(const char *entity)
{
	char dir[128], **names = NULL;
	size_t n = 0;
	snprintf(dir, sizeof(dir), "configs/brokers/%s", entity);
	ck_assert_int_eq(sub_list(VFS, dir, &names, &n), 0);
	sub_names_free(names, n);
	return (int)n;
}

START_TEST(every_dynamic_key_is_a_static_one)
{
	char canon[KB_DYN_VALUE_MAX], err[256];
	for (int k = 0; k < KB_DYN_COUNT; k++) {
		const kb_config_key *r;
		for (r = kb_config_keys; r->key; r++)
			if (strcmp(r->key, kb_dyn_name(k)) == 0)
				break;
		ck_assert_msg(r->key != NULL, "%s is not in the static table", kb_dyn_name(k));
		ck_assert_int_eq(kb_dyn_index(kb_dyn_name(k), strlen(kb_dyn_name(k))), k);
		/* The static value formats and validates back to itself. */
		kb_dyn_format(k, &stat_cfg, canon);
		char again[KB_DYN_VALUE_MAX];
		ck_assert_msg(kb_dyn_check(k, canon, strlen(canon), again, err, sizeof(err)) == 0, "%s", err);
		ck_assert_str_eq(canon, again);
	}
	ck_assert_int_eq(kb_dyn_index("listeners", 9), -1);
	ck_assert_int_eq(kb_dyn_index("broker.id", 9), -1);
	ck_assert_int_eq(kb_dyn_index("log.dirs", 8), -1);
}
END_TEST

START_TEST(values_are_checked_like_the_static_config)
{
	char canon[KB_DYN_VALUE_MAX], err[256];
	ck_assert_int_eq(kb_dyn_check(KB_DYN_LOG_RETENTION_MS, " 1500 ", 6, canon, err, sizeof(err)), 0);
	ck_assert_str_eq(canon, "1500");
	ck_assert_int_eq(kb_dyn_check(KB_DYN_LOG_RETENTION_MS, "abc", 3, canon, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "log.retention.ms"));
	ck_assert_ptr_nonnull(strstr(err, "not an integer"));
	ck_assert_int_eq(kb_dyn_check(KB_DYN_LOG_RETENTION_MS, "-2", 2, canon, err, sizeof(err)), -EINVAL);
	/* The static bound, not the topic one (segment.bytes allows 14). */
	ck_assert_int_eq(kb_dyn_check(KB_DYN_LOG_SEGMENT_BYTES, "100", 3, canon, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "between 1024"));
	ck_assert_int_eq(kb_dyn_check(KB_DYN_AUTO_CREATE_TOPICS_ENABLE, "yes", 3, canon, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_dyn_check(KB_DYN_AUTO_CREATE_TOPICS_ENABLE, "false", 5, canon, err, sizeof(err)), 0);
	ck_assert_str_eq(canon, "false");
	ck_assert_int_eq(kb_dyn_check(KB_DYN_LOG_MESSAGE_TIMESTAMP_TYPE, "LogAppendTime", 13, canon, err, sizeof(err)),
			 0);
	ck_assert_int_eq(kb_dyn_check(KB_DYN_LOG_MESSAGE_TIMESTAMP_TYPE, "Wall", 4, canon, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_dyn_check(KB_DYN_LOG_CLEANUP_POLICY, "delete, compact", 15, canon, err, sizeof(err)), 0);
	ck_assert_str_eq(canon, "compact,delete");
	ck_assert_int_eq(kb_dyn_check(KB_DYN_LOG_CLEANUP_POLICY, "compact", 7, canon, err, sizeof(err)), 0);
	ck_assert_int_eq(kb_dyn_check(KB_DYN_LOG_CLEANUP_POLICY, "shred", 5, canon, err, sizeof(err)), -EINVAL);
	/* compression.type: Kafka's six values exactly, each its own canonical text. */
	static const char *const codecs[] = {"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"};
	for (int i = 0; i < 6; i++) {
		ck_assert_msg(kb_dyn_check(KB_DYN_COMPRESSION_TYPE, codecs[i], strlen(codecs[i]), canon, err,
					   sizeof(err)) == 0, "%s: %s", codecs[i], err);
		ck_assert_str_eq(canon, codecs[i]);
	}
	ck_assert_int_eq(kb_dyn_check(KB_DYN_COMPRESSION_TYPE, " gzip ", 6, canon, err, sizeof(err)), 0);
	ck_assert_str_eq(canon, "gzip");
	static const char *const bad_codecs[] = {"brotli", "GZIP", "none", "", "gzip,lz4"};
	for (int i = 0; i < 5; i++) {
		ck_assert_int_eq(kb_dyn_check(KB_DYN_COMPRESSION_TYPE, bad_codecs[i], strlen(bad_codecs[i]), canon, err,
					      sizeof(err)), -EINVAL);
		ck_assert_msg(strstr(err, "compression.type") && strstr(err, "must be one of"), "%s", err);
	}
	ck_assert_int_eq(kb_dyn_check(KB_DYN_NUM_PARTITIONS, "0", 1, canon, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(kb_dyn_check(KB_DYN_MAX_CONNECTIONS, "0", 1, canon, err, sizeof(err)), -EINVAL);
	const char *longv = "1234567890123456789012345678901234567890";
	ck_assert_int_eq(kb_dyn_check(KB_DYN_LOG_RETENTION_MS, longv, strlen(longv), canon, err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(kb_dyn_check(KB_DYN_LOG_RETENTION_MS, "12\n3", 4, canon, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(precedence_broker_over_default_over_static)
{
	kb_dyncfg *b1, *b2;
	ck_assert_int_eq(kb_dyncfg_open(VFS, &stat_cfg, 1, NULL, &b1), 0);
	ck_assert_int_eq(kb_dyncfg_open(VFS, &stat_cfg, 2, NULL, &b2), 0);
	ck_assert_int_eq(kb_dyncfg_value(b1, KB_DYN_LOG_RETENTION_MS), 1000); /* static */
	ck_assert_int_eq(kb_dyncfg_value(b1, KB_DYN_NUM_PARTITIONS), 1);       /* Kafka's default */

	alter(b1, KB_DYN_DEFAULT, "log.retention.ms", "2000");
	ck_assert_int_eq(kb_dyncfg_value(b1, KB_DYN_LOG_RETENTION_MS), 2000);
	ck_assert_int_eq(kb_dyncfg_value(b2, KB_DYN_LOG_RETENTION_MS), 1000); /* not polled yet */
	ck_assert_int_eq(kb_dyncfg_poll(b2), 1);
	ck_assert_int_eq(kb_dyncfg_value(b2, KB_DYN_LOG_RETENTION_MS), 2000);
	ck_assert_int_eq(kb_dyncfg_poll(b2), 0); /* nothing new */

	alter(b1, 1, "log.retention.ms", "3000");
	ck_assert_int_eq(kb_dyncfg_poll(b2), 0); /* broker 1's own set is not broker 2's */
	ck_assert_int_eq(kb_dyncfg_value(b1, KB_DYN_LOG_RETENTION_MS), 3000);
	ck_assert_int_eq(kb_dyncfg_value(b2, KB_DYN_LOG_RETENTION_MS), 2000);

	kb_dynsnap s;
	kb_dyncfg_snapshot(b1, &s);
	ck_assert(s.level[KB_DYN_LEVEL_BROKER].set & (1u << KB_DYN_LOG_RETENTION_MS));
	ck_assert_str_eq(s.level[KB_DYN_LEVEL_BROKER].val[KB_DYN_LOG_RETENTION_MS], "3000");
	ck_assert_str_eq(s.level[KB_DYN_LEVEL_DEFAULT].val[KB_DYN_LOG_RETENTION_MS], "2000");
	ck_assert_str_eq(s.eff_text[KB_DYN_LOG_RETENTION_MS], "3000");

	/* A reopened store (a restart) reads the same. */
	kb_dyncfg *b1b;
	ck_assert_int_eq(kb_dyncfg_open(VFS, &stat_cfg, 1, NULL, &b1b), 0);
	ck_assert_int_eq(kb_dyncfg_value(b1b, KB_DYN_LOG_RETENTION_MS), 3000);
	kb_dyncfg_close(b1b);

	alter(b1, 1, "log.retention.ms", NULL);
	ck_assert_int_eq(kb_dyncfg_value(b1, KB_DYN_LOG_RETENTION_MS), 2000);
	alter(b2, KB_DYN_DEFAULT, "log.retention.ms", NULL);
	ck_assert_int_eq(kb_dyncfg_value(b2, KB_DYN_LOG_RETENTION_MS), 1000);
	ck_assert_int_eq(kb_dyncfg_poll(b1), 1);
	ck_assert_int_eq(kb_dyncfg_value(b1, KB_DYN_LOG_RETENTION_MS), 1000);

	/* kb_broker_dyn reads the store, or the static setting without one. */
	static kb_broker b;
	b.cfg = stat_cfg;
	ck_assert_int_eq(kb_broker_dyn(&b, KB_DYN_AUTO_CREATE_TOPICS_ENABLE), 1);
	alter(b1, KB_DYN_DEFAULT, "auto.create.topics.enable", "false");
	b.dyn = b1;
	ck_assert_int_eq(kb_broker_dyn(&b, KB_DYN_AUTO_CREATE_TOPICS_ENABLE), 0);
	kb_dyncfg_close(b1);
	kb_dyncfg_close(b2);
}
END_TEST

/* ---- concurrent writers ---------------------------------------------------------------------------- */

#define WRITERS 4
#define ROUNDS 25

static int16_t add_one(void *arg, kb_dyn_set *s, char *msg, size_t msglen)
{
	(void)arg;
	(void)msg;
	(void)msglen;
	int k = KB_DYN_LOG_RETENTION_MS;
	long long v = (s->set & (1u << k)) ? atoll(s->val[k]) : 0;
	snprintf(s->val[k], KB_DYN_VALUE_MAX, "%lld", v + 1);
	s->set |= 1u << k;
	return KERR_NONE;
}

typedef struct wctx {
	kb_dyncfg *d;
	sub_vfs *vfs;
	int failures;
	char last[512];
} wctx;

static void *writer(void *arg)
{
	wctx *w = arg;
	for (int i = 0; i < ROUNDS; i++) {
		int16_t err = kb_dyncfg_alter(w->d, KB_DYN_DEFAULT, add_one, NULL, 0, w->last, sizeof(w->last));
		if (err != KERR_NONE)
			w->failures++;
	}
	return NULL;
}

START_TEST(concurrent_writers_never_lose_an_update)
{
	wctx w[WRITERS];
	pthread_t th[WRITERS];
	char err[256];
	for (int i = 0; i < WRITERS; i++) {
		memset(&w[i], 0, sizeof(w[i]));
		/* A handle of its own on the directory per "broker". */
		ck_assert_int_eq(sub_open_url(scratch_vol.dir, &w[i].vfs, err, sizeof(err)), 0);
		ck_assert_int_eq(kb_dyncfg_open(w[i].vfs, &stat_cfg, i + 1, NULL, &w[i].d), 0);
	}
	for (int i = 0; i < WRITERS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, writer, &w[i]), 0);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < WRITERS; i++)
		ck_assert_msg(w[i].failures == 0, "writer %d: %d failures, last: %s", i, w[i].failures, w[i].last);
	/* Every increment is in the final state: none was lost. */
	kb_dyncfg *r;
	ck_assert_int_eq(kb_dyncfg_open(VFS, &stat_cfg, 9, NULL, &r), 0);
	ck_assert_int_eq(kb_dyncfg_value(r, KB_DYN_LOG_RETENTION_MS), WRITERS * ROUNDS);
	kb_dyncfg_close(r);
	for (int i = 0; i < WRITERS; i++) {
		kb_dyncfg_close(w[i].d);
		sub_destroy(w[i].vfs);
	}
}
END_TEST

/* ---- hostile files -------------------------------------------------------------------------------------- */

#define GOOD(seq, ent, cfgs)                                                                                     \
	"{\"version\":1,\"entity\":\"" ent "\",\"seq\":" #seq ",\"configs\":{" cfgs "},"                           \
	"\"writer\":{\"broker\":3,\"nonce\":\"0123456789abcdef\"},\"written_ms\":1}"

START_TEST(hostile_versions_are_refused_and_the_last_good_kept)
{
	kb_dyn_set s;
	char why[320];
	const char *good = GOOD(1, "default", "\"log.retention.ms\":\"5000\"");
	ck_assert_int_eq(kb__dyn_parse(good, strlen(good), KB_DYN_DEFAULT, 1, &s, why, sizeof(why)), 0);
	ck_assert_str_eq(s.val[KB_DYN_LOG_RETENTION_MS], "5000");
	struct {
		const char *text;
		int rc;
		const char *why;
	} bad[] = {
		{"", -EAGAIN, "incomplete"},
		{"{\"version\":1,\"entity\":\"defa", -EAGAIN, "incomplete"},
		{"[1,2]", -EAGAIN, "incomplete"},
		{"{\"version\":2,\"entity\":\"default\",\"seq\":2,\"configs\":{},\"writer\":{\"broker\":3,\"nonce\":"
		 "\"0123456789abcdef\"},\"written_ms\":1}", -EINVAL, "format version 2"},
		{GOOD(2, "7", ""), -EINVAL, "entity"},
		{GOOD(3, "default", ""), -EINVAL, "seq field"},
		{GOOD(2, "default", "\"listeners\":\"PLAINTEXT://x:1\""), -EINVAL, "listeners"},
		{GOOD(2, "default", "\"log.retention.ms\":\"abc\""), -EINVAL, "not an integer"},
		{GOOD(2, "default", "\"log.retention.ms\":5000"), -EINVAL, "not a string"},
		{GOOD(2, "default", "\"log.segment.bytes\":\"10\""), -EINVAL, "log.segment.bytes"},
		{"{\"version\":1,\"entity\":\"default\",\"seq\":2,\"configs\":{},\"writer\":{\"broker\":3,\"nonce\":"
		 "\"xyz\"},\"written_ms\":1}", -EINVAL, "writer"},
		{"{\"version\":1,\"entity\":\"default\",\"seq\":2,\"configs\":{},\"writer\":{\"broker\":3,\"nonce\":"
		 "\"0123456789abcdef\"},\"written_ms\":1,\"extra\":0}", -EINVAL, "unknown field"},
		{"{\"version\":1,\"entity\":\"default\",\"seq\":2,\"configs\":{},\"configs\":{},\"writer\":{\"broker\":3,"
		 "\"nonce\":\"0123456789abcdef\"},\"written_ms\":1}", -EAGAIN, "incomplete"}, /* duplicate keys */
		{"{\"version\":1,\"entity\":\"default\",\"seq\":2,\"configs\":[],\"writer\":{\"broker\":3,\"nonce\":"
		 "\"0123456789abcdef\"},\"written_ms\":1}", -EINVAL, "configs is not an object"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		int rc = kb__dyn_parse(bad[i].text, strlen(bad[i].text), KB_DYN_DEFAULT, 2, &s, why, sizeof(why));
		ck_assert_msg(rc == bad[i].rc, "case %zu: rc %d (%s)", i, rc, why);
		ck_assert_msg(strstr(why, bad[i].why), "case %zu: why '%s' lacks '%s'", i, why, bad[i].why);
	}

	/* On the volume: a good version 1, then each bad one as version 2. */
	put_file("default", 1, good);
	kb_dyncfg *d;
	ck_assert_int_eq(kb_dyncfg_open(VFS, &stat_cfg, 1, NULL, &d), 0);
	ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_LOG_RETENTION_MS), 5000);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		put_file("default", 2, bad[i].text);
		ck_assert_int_ge(kb_dyncfg_poll(d), 0);
		ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_LOG_RETENTION_MS), 5000);
		kb_dyncfg *fresh; /* a broker starting now takes the good one too */
		ck_assert_int_eq(kb_dyncfg_open(VFS, &stat_cfg, 2, NULL, &fresh), 0);
		ck_assert_int_eq(kb_dyncfg_value(fresh, KB_DYN_LOG_RETENTION_MS), 5000);
		kb_dyncfg_close(fresh);
	}
	/* Too large, and names that are not versions: ignored. */
	char *huge = malloc(40000);
	memset(huge, ' ', 39999);
	huge[39999] = '\0';
	huge[0] = '{';
	put_file("default", 2, huge);
	free(huge);
	ck_assert_int_eq(sub_write_atomic(VFS, "configs/brokers/default/99999999999999999999.json", good, strlen(good)), 0);
	ck_assert_int_eq(sub_write_atomic(VFS, "configs/brokers/default/notes.txt", "x", 1), 0);
	ck_assert_int_ge(kb_dyncfg_poll(d), 0);
	ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_LOG_RETENTION_MS), 5000);

	/* A complete bad newest version does not block writers: the next
	 * version goes above it, built on the last good one. */
	put_file("default", 2, GOOD(2, "default", "\"log.retention.ms\":\"abc\""));
	alter(d, KB_DYN_DEFAULT, "num.partitions", "4");
	ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_LOG_RETENTION_MS), 5000);
	ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_NUM_PARTITIONS), 4);
	ck_assert_int_eq(access("/dev/null", F_OK), 0);
	char p3[512];
	snprintf(p3, sizeof(p3), "%s/configs/brokers/default/%020d.json", scratch_vol.dir, 3);
	ck_assert_int_eq(access(p3, F_OK), 0);
	kb_dyncfg_close(d);
}
END_TEST

START_TEST(an_abandoned_incomplete_version_is_passed_over)
{
	kb_dyncfg_options o;
	kb_dyncfg_options_init(&o);
	o.abandon_ms = 2000;
	o.write_deadline_ms = 1000;
	put_file("default", 1, GOOD(1, "default", "\"log.retention.ms\":\"5000\""));
	put_file("default", 2, ""); /* a writer that died between its create and its write */
	kb_dyncfg *d;
	ck_assert_int_eq(kb_dyncfg_open(VFS, &stat_cfg, 1, &o, &d), 0);
	ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_LOG_RETENTION_MS), 5000); /* readers never wait */
	int64_t t0 = ku_mono_ms();
	alter(d, KB_DYN_DEFAULT, "log.retention.bytes", "4096");
	int64_t took = ku_mono_ms() - t0;
	ck_assert_int_ge(took, 2000); /* waited for it to be abandoned */
	ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_LOG_RETENTION_MS), 5000); /* built on version 1 */
	ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_LOG_RETENTION_BYTES), 4096);
	/* The next alter does not wait again: version 3 is complete. */
	t0 = ku_mono_ms();
	alter(d, KB_DYN_DEFAULT, "log.retention.bytes", "8192");
	ck_assert_int_lt(ku_mono_ms() - t0, 2000);
	kb_dyncfg_close(d);
}
END_TEST

START_TEST(validate_only_and_no_change_write_nothing)
{
	kb_dyncfg *d;
	char msg[256];
	kb_dyncfg_options opt;
	kb_dyncfg_options_init(&opt);
	opt.write_deadline_ms = 2000; /* an fsync on a busy machine can take a second */
	opt.clean_ms = 4000;
	ck_assert_int_eq(kb_dyncfg_open(VFS, &stat_cfg, 1, &opt, &d), 0);
	one o = {"log.retention.ms", "7000"};
	ck_assert_int_eq(kb_dyncfg_alter(d, KB_DYN_DEFAULT, set_one, &o, 1, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_LOG_RETENTION_MS), 1000);
	ck_assert_int_ne(access(scratch_vol.dir, F_OK), -1);
	alter(d, KB_DYN_DEFAULT, "log.retention.ms", "7000");
	alter(d, KB_DYN_DEFAULT, "log.retention.ms", "7000"); /* the same again: no new version */
	ck_assert_int_eq(count_versions("default"), 1);
	one bad = {"log.retention.ms", "x"};
	ck_assert_int_eq(kb_dyncfg_alter(d, KB_DYN_DEFAULT, set_one, &bad, 0, msg, sizeof(msg)), KERR_INVALID_REQUEST);
	ck_assert_int_eq(count_versions("default"), 1);
	/* Cleanup: a version goes once it has been eight below the newest for
	 * clean_ms (4 s here), never sooner. */
	for (int i = 0; i < 20; i++) {
		char v[16];
		snprintf(v, sizeof(v), "%d", 8000 + i);
		alter(d, KB_DYN_DEFAULT, "log.retention.ms", v);
	}
	ck_assert_int_eq(count_versions("default"), 21); /* nothing yet: too recent */
	usleep(4100 * 1000);
	alter(d, KB_DYN_DEFAULT, "log.retention.ms", "9000"); /* removes up to the first mark: version 1 */
	ck_assert_int_eq(count_versions("default"), 21);
	usleep(4100 * 1000);
	alter(d, KB_DYN_DEFAULT, "log.retention.ms", "9001");
	ck_assert_int_ge(count_versions("default"), 8);
	ck_assert_int_le(count_versions("default"), 10);
	ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_LOG_RETENTION_MS), 9001);
	kb_dyncfg_close(d);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){.suite = "dyncfg", .timeout = 120, .setup = up, .teardown = down},
			  KTEST_LIST(every_dynamic_key_is_a_static_one, values_are_checked_like_the_static_config,
				     precedence_broker_over_default_over_static, concurrent_writers_never_lose_an_update,
				     hostile_versions_are_refused_and_the_last_good_kept,
				     an_abandoned_incomplete_version_is_passed_over,
				     validate_only_and_no_change_write_nothing));
}
