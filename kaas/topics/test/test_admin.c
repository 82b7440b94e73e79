/*
 * test_admin.c — the admin API codecs, every version: requests are built
 * with the wire writer as a client would send them, the responses are
 * decoded field by field with the reader (and must be consumed exactly).
 * Broker resources are exercised with a dynamic config store as well.
 *
 * Length: one program for every admin codec, so that the request builders
 * and the field-by-field response decoders are written once.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "substrates/sub.h"
#include "kaas/core/dyncfg.h"
#include "kaas/topics/admin.h"
#include "kaas/topics/admin_int.h"
#include "kaas/topics/topics.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"
#include "kaas/proto/test/ckrd.h"
#include "kaas/topics/test/harness.h"
#include "util/test/ktest.h"

static kt_topics *reg;
static kb_config bcfg, bdef;
static kt_admin_ctx ctx;

/* DeleteRecords calls that reached the broker side. */
static struct {
	int calls;
	char topic[64];
	int32_t partition;
	int64_t offset;
} dr;

static int16_t fake_delete_records(void *arg, kw_str topic, int32_t partition, int64_t offset, int64_t *low)
{
	(void)arg;
	dr.calls++;
	snprintf(dr.topic, sizeof(dr.topic), "%.*s", (int)topic.len, topic.s);
	dr.partition = partition;
	dr.offset = offset;
	if (partition == 9)
		return KERR_NOT_LEADER_OR_FOLLOWER;
	if (offset > 1000)
		return KERR_OFFSET_OUT_OF_RANGE;
	*low = offset == -1 ? 1000 : offset;
	return KERR_NONE;
}

static void setup(void)
{
	volumes_open("admin");
	kt_topics_options o;
	kt_topics_options_init(&o);
	o.refresh_ms = 0;
	o.cluster = cluster;
	o.data = data;
	o.num_partitions = 2;
	ck_assert_int_eq(kt_topics_open(&o, &reg), 0);

	memset(&bdef, 0, sizeof(bdef));
	bdef.broker_id = 1;
	bdef.num_partitions = 1;
	bdef.auto_create_topics = 1;
	bdef.default_replication_factor = 1;
	bdef.log.retention_ms = 604800000;
	bdef.log.segment_bytes = 1073741824;
	bcfg = bdef;
	bcfg.num_partitions = 2; /* set by the operator */
	snprintf(bcfg.listen_host, sizeof(bcfg.listen_host), "127.0.0.1");
	bcfg.listen_port = 9092;
	snprintf(bcfg.data_url, sizeof(bcfg.data_url), "/var/kaas");

	memset(&ctx, 0, sizeof(ctx));
	ctx.topics = reg;
	ctx.bcfg = &bcfg;
	ctx.bdefaults = &bdef;
	ctx.broker_id = 1;
	ctx.delete_records = fake_delete_records;
	memset(&dr, 0, sizeof(dr));
}

static void teardown(void)
{
	kt_topics_close(reg);
	volumes_close();
}

typedef int (*admin_fn)(const kt_admin_ctx *, int16_t, kw_rd *, kw_wr *);

/* Runs a handler on the request in `req`; the response is left in resp and
 * a reader over it in rd. */
static int call(admin_fn fn, int16_t v, kw_wr *req, kw_wr *resp, kw_rd *rd)
{
	kw_rd body;
	kw_rd_init(&body, req->buf, req->len);
	int rc = fn(&ctx, v, &body, resp);
	if (rc == KAAS_HANDLED) {
		ck_assert_int_eq(resp->oom, 0);
		kw_rd_init(rd, resp->buf, resp->len);
	}
	return rc;
}

/* Reads a string into buf ("<null>" for null). */
static int rd_flex; /* the response being read uses flexible encodings */

static const char *rdstr(kw_rd *rd, char *buf, size_t len)
{
	kw_str s = ckrd_str(rd, rd_flex);
	if (s.len < 0)
		snprintf(buf, len, "<null>");
	else
		snprintf(buf, len, "%.*s", (int)s.len, s.s);
	return buf;
}

/* ---- CreateTopics -------------------------------------------------------------------- */

typedef struct ct_in {
	const char *name;
	int32_t parts;
	int16_t rf;
	int nassign;              /* partitions in the assignment */
	int32_t broker;           /* the broker each assigned partition names */
	const char *cfg_name, *cfg_value;
} ct_in;

static void ct_request(kw_wr *w, int16_t v, const ct_in *t, int n, int validate_only)
{
	kw_wr_i32(w, n);
	for (int i = 0; i < n; i++) {
		kw_wr_str(w, 0, t[i].name);
		kw_wr_i32(w, t[i].parts);
		kw_wr_i16(w, t[i].rf);
		kw_wr_i32(w, t[i].nassign);
		for (int a = 0; a < t[i].nassign; a++) {
			kw_wr_i32(w, a);
			kw_wr_i32(w, 1);
			kw_wr_i32(w, t[i].broker);
		}
		kw_wr_i32(w, t[i].cfg_name ? 1 : 0);
		if (t[i].cfg_name) {
			kw_wr_str(w, 0, t[i].cfg_name);
			kw_wr_str(w, 0, t[i].cfg_value);
		}
	}
	kw_wr_i32(w, 30000);
	if (v >= 1)
		kw_wr_bool(w, validate_only);
}

/* One CreateTopics round trip; results in err[]/msg[]; returns the count. */
static int ct(int16_t v, const ct_in *t, int n, int validate_only, int16_t *err, char msg[][320], char names[][300])
{
	kw_wr req = KAAS_WR_INIT, resp = KAAS_WR_INIT;
	kw_rd rd;
	ct_request(&req, v, t, n, validate_only);
	ck_assert_int_eq(call(kt_admin_create_topics, v, &req, &resp, &rd), KAAS_HANDLED);
	if (v >= 2)
		ck_assert_int_eq(ckrd_i32(&rd), 0);
	int32_t cnt = ckrd_i32(&rd);
	for (int32_t i = 0; i < cnt; i++) {
		rdstr(&rd, names[i], 300);
		err[i] = ckrd_i16(&rd);
		if (v >= 1)
			rdstr(&rd, msg[i], 320);
		else
			snprintf(msg[i], 320, "<none>");
	}
	ck_assert_uint_eq(kw_rd_remain(&rd), 0);
	kw_wr_free(&req);
	kw_wr_free(&resp);
	return cnt;
}

START_TEST(create_topics_every_version)
{
	for (int16_t v = 0; v <= 4; v++) {
		char name[32], names[8][300], msg[8][320];
		int16_t err[8];
		snprintf(name, sizeof(name), "ct-%d", v);
		ct_in t = {name, 3, 1, 0, 0, "retention.ms", "60000"};
		ck_assert_int_eq(ct(v, &t, 1, 0, err, msg, names), 1);
		ck_assert_str_eq(names[0], name);
		ck_assert_int_eq(err[0], KERR_NONE);
		if (v >= 1)
			ck_assert_str_eq(msg[0], "<null>");
		kt_topic_info info;
		ck_assert_int_eq(kt_topics_lookup(reg, name, -1, &info), 0);
		ck_assert_int_eq(info.partitions, 3);
		ck_assert_int_eq(info.cfg.retention_ms, 60000);

		ck_assert_int_eq(ct(v, &t, 1, 0, err, msg, names), 1);
		ck_assert_int_eq(err[0], KERR_TOPIC_ALREADY_EXISTS);
		if (v >= 1)
			ck_assert_ptr_nonnull(strstr(msg[0], "already exists"));
		else
			ck_assert_str_eq(msg[0], "<none>");
	}
}
END_TEST

START_TEST(create_topics_errors)
{
	char names[8][300], msg[8][320];
	int16_t err[8];
	ct_in t[] = {
		{"../x", 1, 1, 0, 0, NULL, NULL},
		{"zero", 0, 1, 0, 0, NULL, NULL},
		{"rf0", 1, 0, 0, 0, NULL, NULL},
		{"comp", 1, 1, 0, 0, "cleanup.policy", "purge"},
		{"unk", 1, 1, 0, 0, "no.such.config", "1"},
		{"dup", 1, 1, 0, 0, NULL, NULL},
		{"dup", 1, 1, 0, 0, NULL, NULL},
		{"other-broker", -1, -1, 2, 7, NULL, NULL},
	};
	int n = ct(3, t, 8, 0, err, msg, names);
	ck_assert_int_eq(n, 7); /* "dup" answered once */
	ck_assert_int_eq(err[0], KERR_INVALID_TOPIC_EXCEPTION);
	ck_assert_int_eq(err[1], KERR_INVALID_PARTITIONS);
	ck_assert_int_eq(err[2], KERR_INVALID_REPLICATION_FACTOR);
	ck_assert_int_eq(err[3], KERR_INVALID_CONFIG);
	ck_assert_ptr_nonnull(strstr(msg[3], "cleanup.policy"));
	ck_assert_int_eq(err[4], KERR_INVALID_CONFIG);
	ck_assert_ptr_nonnull(strstr(msg[4], "no.such.config"));
	ck_assert_str_eq(names[5], "dup");
	ck_assert_int_eq(err[5], KERR_INVALID_REQUEST);
	ck_assert_int_eq(err[6], KERR_INVALID_REPLICA_ASSIGNMENT);
	kt_topic_info *all;
	size_t cnt;
	ck_assert_int_eq(kt_topics_list(reg, &all, &cnt), 0);
	free(all);
	ck_assert_uint_eq(cnt, 0);
	char **dn;
	size_t dcount;
	ck_assert_int_eq(sub_list(data, "", &dn, &dcount), 0);
	sub_names_free(dn, dcount);
	ck_assert_uint_eq(dcount, 0); /* nothing reached the data volume */
}
END_TEST

START_TEST(create_topics_assignment_and_validate_only)
{
	char names[4][300], msg[4][320];
	int16_t err[4];
	/* A manual assignment naming this broker: accepted, its size decides
	 * the partition count. */
	ct_in a = {"assigned", -1, -1, 3, 1, NULL, NULL};
	ck_assert_int_eq(ct(4, &a, 1, 0, err, msg, names), 1);
	ck_assert_int_eq(err[0], KERR_NONE);
	kt_topic_info info;
	ck_assert_int_eq(kt_topics_lookup(reg, "assigned", -1, &info), 0);
	ck_assert_int_eq(info.partitions, 3);
	/* Both a count and an assignment: refused. */
	ct_in both = {"both", 3, 1, 3, 1, NULL, NULL};
	ck_assert_int_eq(ct(4, &both, 1, 0, err, msg, names), 1);
	ck_assert_int_eq(err[0], KERR_INVALID_REQUEST);
	/* -1/-1 without assignment (v4): num.partitions. */
	ct_in dflt = {"dflt", -1, -1, 0, 0, NULL, NULL};
	ck_assert_int_eq(ct(4, &dflt, 1, 0, err, msg, names), 1);
	ck_assert_int_eq(err[0], KERR_NONE);
	ck_assert_int_eq(kt_topics_lookup(reg, "dflt", -1, &info), 0);
	ck_assert_int_eq(info.partitions, 2);
	/* validate_only: checked, not created. */
	ct_in vo = {"vo", 4, 3, 0, 0, "retention.ms", "1"};
	ck_assert_int_eq(ct(1, &vo, 1, 1, err, msg, names), 1);
	ck_assert_int_eq(err[0], KERR_NONE);
	ck_assert_int_eq(kt_topics_lookup(reg, "vo", -1, &info), -ENOENT);
	ct_in vobad = {"vo", 4, 3, 0, 0, "retention.ms", "x"};
	ck_assert_int_eq(ct(1, &vobad, 1, 1, err, msg, names), 1);
	ck_assert_int_eq(err[0], KERR_INVALID_CONFIG);
}
END_TEST

START_TEST(create_topics_malformed_changes_nothing)
{
	ct_in t[2] = {{"first", 1, 1, 0, 0, NULL, NULL}, {"second", 1, 1, 0, 0, NULL, NULL}};
	kw_wr req = KAAS_WR_INIT, resp = KAAS_WR_INIT;
	kw_rd rd;
	ct_request(&req, 1, t, 2, 0);
	/* Cut inside the second topic, then at every other length. */
	for (size_t cut = 0; cut < req.len; cut++) {
		kw_wr part = KAAS_WR_INIT;
		kw_wr_raw(&part, req.buf, cut);
		ck_assert_int_eq(call(kt_admin_create_topics, 1, &part, &resp, &rd), -EBADMSG);
		kw_wr_free(&part);
		resp.len = 0;
	}
	kt_topic_info info;
	ck_assert_int_eq(kt_topics_lookup(reg, "first", -1, &info), -ENOENT);
	/* A count far beyond the bytes present is refused before allocating. */
	kw_wr huge = KAAS_WR_INIT;
	kw_wr_i32(&huge, 0x7fffffff);
	kw_wr_i32(&huge, 0);
	ck_assert_int_eq(call(kt_admin_create_topics, 0, &huge, &resp, &rd), -EBADMSG);
	kw_wr_free(&huge);
	kw_wr_free(&req);
	kw_wr_free(&resp);
}
END_TEST

/* ---- DeleteTopics ----------------------------------------------------------------------- */

START_TEST(delete_topics_every_version)
{
	for (int16_t v = 0; v <= 3; v++) {
		char msg[256], buf[300];
		kt_topic_spec spec = {{"del", 3}, 1, 1, NULL, 0};
		ck_assert_int_eq(kt_topics_create(reg, &spec, 0, NULL, msg, sizeof(msg)), KERR_NONE);
		kw_wr req = KAAS_WR_INIT, resp = KAAS_WR_INIT;
		kw_rd rd;
		kw_wr_i32(&req, 4);
		kw_wr_str(&req, 0, "del");
		kw_wr_str(&req, 0, "missing");
		kw_wr_str(&req, 0, "bad/name");
		kw_wr_str(&req, 0, "del");
		kw_wr_i32(&req, 5000);
		ck_assert_int_eq(call(kt_admin_delete_topics, v, &req, &resp, &rd), KAAS_HANDLED);
		if (v >= 1)
			ck_assert_int_eq(ckrd_i32(&rd), 0);
		ck_assert_int_eq(ckrd_i32(&rd), 3);
		ck_assert_str_eq(rdstr(&rd, buf, sizeof(buf)), "del");
		ck_assert_int_eq(ckrd_i16(&rd), KERR_NONE);
		ck_assert_str_eq(rdstr(&rd, buf, sizeof(buf)), "missing");
		ck_assert_int_eq(ckrd_i16(&rd), KERR_UNKNOWN_TOPIC_OR_PARTITION);
		ck_assert_str_eq(rdstr(&rd, buf, sizeof(buf)), "bad/name");
		ck_assert_int_eq(ckrd_i16(&rd), KERR_INVALID_TOPIC_EXCEPTION);
		ck_assert_uint_eq(kw_rd_remain(&rd), 0);
		kt_topic_info info;
		ck_assert_int_eq(kt_topics_lookup(reg, "del", -1, &info), -ENOENT);
		kw_wr_free(&req);
		kw_wr_free(&resp);
	}
}
END_TEST

/* ---- CreatePartitions --------------------------------------------------------------------- */

static void cp_request(kw_wr *w, const char *name, int32_t count, int32_t nassign, int validate_only)
{
	kw_wr_i32(w, 1);
	kw_wr_str(w, 0, name);
	kw_wr_i32(w, count);
	kw_wr_i32(w, nassign);
	for (int32_t a = 0; a < nassign; a++) {
		kw_wr_i32(w, 1);
		kw_wr_i32(w, 1);
	}
	kw_wr_i32(w, 5000);
	kw_wr_bool(w, validate_only);
}

static int16_t cp(int16_t v, const char *name, int32_t count, int32_t nassign, int validate_only, char *msg)
{
	kw_wr req = KAAS_WR_INIT, resp = KAAS_WR_INIT;
	kw_rd rd;
	char buf[300];
	cp_request(&req, name, count, nassign, validate_only);
	ck_assert_int_eq(call(kt_admin_create_partitions, v, &req, &resp, &rd), KAAS_HANDLED);
	ck_assert_int_eq(ckrd_i32(&rd), 0);
	ck_assert_int_eq(ckrd_i32(&rd), 1);
	ck_assert_str_eq(rdstr(&rd, buf, sizeof(buf)), name);
	int16_t err = ckrd_i16(&rd);
	rdstr(&rd, msg, 320);
	ck_assert_uint_eq(kw_rd_remain(&rd), 0);
	kw_wr_free(&req);
	kw_wr_free(&resp);
	return err;
}

START_TEST(create_partitions_every_version)
{
	char msg[320];
	kt_topic_spec spec = {{"cp", 2}, 2, 1, NULL, 0};
	ck_assert_int_eq(kt_topics_create(reg, &spec, 0, NULL, msg, sizeof(msg)), KERR_NONE);
	kt_topic_info info;
	for (int16_t v = 0; v <= 1; v++) {
		int32_t now = 2 + 2 * v;
		ck_assert_int_eq(cp(v, "cp", now + 2, -1, 1, msg), KERR_NONE); /* validate only */
		ck_assert_int_eq(kt_topics_lookup(reg, "cp", -1, &info), 0);
		ck_assert_int_eq(info.partitions, now);
		ck_assert_int_eq(cp(v, "cp", now + 2, -1, 0, msg), KERR_NONE);
		ck_assert_str_eq(msg, "<null>");
		ck_assert_int_eq(kt_topics_lookup(reg, "cp", -1, &info), 0);
		ck_assert_int_eq(info.partitions, now + 2);
		ck_assert_int_eq(cp(v, "cp", now + 2, -1, 0, msg), KERR_INVALID_PARTITIONS);
		ck_assert_ptr_nonnull(strstr(msg, "already has"));
		ck_assert_int_eq(cp(v, "cp", 1, -1, 0, msg), KERR_INVALID_PARTITIONS);
		ck_assert_int_eq(cp(v, "nope", 9, -1, 0, msg), KERR_UNKNOWN_TOPIC_OR_PARTITION);
	}
	/* An assignment must cover exactly the new partitions. */
	ck_assert_int_eq(cp(1, "cp", 8, 1, 0, msg), KERR_INVALID_REPLICA_ASSIGNMENT);
	ck_assert_int_eq(cp(1, "cp", 8, 2, 0, msg), KERR_NONE);
	ck_assert_int_eq(kt_topics_lookup(reg, "cp", -1, &info), 0);
	ck_assert_int_eq(info.partitions, 8);
}
END_TEST

/* ---- DescribeConfigs ------------------------------------------------------------------------ */

typedef struct dc_entry {
	char name[64], value[4200], doc[300];
	int read_only, is_default, source, sensitive, nsyn, type;
	char syn_name[5][64], syn_value[5][64];
	int syn_source[5];
} dc_entry;

typedef struct dc_result {
	int16_t err;
	char msg[320];
	int8_t type;
	char name[64];
	int n;
	dc_entry e[40];
} dc_result;

static int dc_docs; /* v3+: ask for documentation */

static void dc_request(kw_wr *w, int16_t v, int8_t type, const char *name, const char *const *keys, int nkeys,
		       int synonyms)
{
	int f = v >= 4;
	kw_wr_array(w, f, 1);
	kw_wr_i8(w, type);
	kw_wr_str(w, f, name);
	kw_wr_array(w, f, keys ? nkeys : -1);
	for (int i = 0; keys && i < nkeys; i++)
		kw_wr_str(w, f, keys[i]);
	kw_wr_tags(w, f);
	if (v >= 1)
		kw_wr_bool(w, synonyms);
	if (v >= 3)
		kw_wr_bool(w, dc_docs);
	kw_wr_tags(w, f);
}

static int32_t rd_arr(kw_rd *rd)
{
	int32_t n;
	ck_assert_int_eq(kw_rd_array(rd, rd_flex, 0, &n), 0);
	return n;
}

static void rd_tags(kw_rd *rd)
{
	ck_assert_int_eq(kw_rd_tags(rd, rd_flex), 0);
}

static void dc(int16_t v, int8_t type, const char *name, const char *const *keys, int nkeys, int synonyms,
	       dc_result *r)
{
	kw_wr req = KAAS_WR_INIT, resp = KAAS_WR_INIT;
	kw_rd rd;
	dc_request(&req, v, type, name, keys, nkeys, synonyms);
	ck_assert_int_eq(call(kt_admin_describe_configs, v, &req, &resp, &rd), KAAS_HANDLED);
	rd_flex = v >= 4;
	ck_assert_int_eq(ckrd_i32(&rd), 0);
	ck_assert_int_eq(rd_arr(&rd), 1);
	memset(r, 0, sizeof(*r));
	r->err = ckrd_i16(&rd);
	rdstr(&rd, r->msg, sizeof(r->msg));
	r->type = ckrd_i8(&rd);
	rdstr(&rd, r->name, sizeof(r->name));
	r->n = rd_arr(&rd);
	ck_assert_int_le(r->n, 40);
	for (int i = 0; i < r->n; i++) {
		dc_entry *e = &r->e[i];
		rdstr(&rd, e->name, sizeof(e->name));
		rdstr(&rd, e->value, sizeof(e->value));
		e->read_only = ckrd_i8(&rd);
		if (v == 0)
			e->is_default = ckrd_i8(&rd);
		else
			e->source = ckrd_i8(&rd);
		e->sensitive = ckrd_i8(&rd);
		if (v >= 1) {
			e->nsyn = rd_arr(&rd);
			ck_assert_int_le(e->nsyn, 5);
			for (int k = 0; k < e->nsyn; k++) {
				rdstr(&rd, e->syn_name[k], 64);
				rdstr(&rd, e->syn_value[k], 64);
				e->syn_source[k] = ckrd_i8(&rd);
				rd_tags(&rd);
			}
		}
		if (v >= 3) {
			e->type = ckrd_i8(&rd);
			rdstr(&rd, e->doc, sizeof(e->doc));
		}
		rd_tags(&rd);
	}
	rd_tags(&rd);
	rd_tags(&rd);
	ck_assert_uint_eq(kw_rd_remain(&rd), 0);
	rd_flex = 0;
	kw_wr_free(&req);
	kw_wr_free(&resp);
}

static const dc_entry *find(const dc_result *r, const char *name)
{
	for (int i = 0; i < r->n; i++)
		if (strcmp(r->e[i].name, name) == 0)
			return &r->e[i];
	return NULL;
}

START_TEST(describe_configs_every_version)
{
	char msg[256];
	kt_config_kv kv = {{"retention.ms", 12}, {"3600000", 7}};
	kt_topic_spec spec = {{"dc", 2}, 1, 1, &kv, 1};
	ck_assert_int_eq(kt_topics_create(reg, &spec, 0, NULL, msg, sizeof(msg)), KERR_NONE);
	dc_result *r = malloc(sizeof(*r));
	for (int16_t v = 0; v <= 4; v++) {
		dc(v, 2, "dc", NULL, 0, 1, r);
		ck_assert_int_eq(r->err, KERR_NONE);
		ck_assert_str_eq(r->msg, "<null>");
		ck_assert_int_eq(r->type, 2);
		ck_assert_str_eq(r->name, "dc");
		ck_assert_int_eq(r->n, KAAS_TC_COUNT);
		const dc_entry *e = find(r, "retention.ms");
		ck_assert_ptr_nonnull(e);
		ck_assert_str_eq(e->value, "3600000");
		ck_assert_int_eq(e->read_only, 0);
		const dc_entry *seg = find(r, "segment.bytes");
		ck_assert_ptr_nonnull(seg);
		ck_assert_str_eq(seg->value, "1073741824");
		ck_assert_ptr_nonnull(find(r, "cleanup.policy"));
		ck_assert_ptr_nonnull(find(r, "max.message.bytes"));
		ck_assert_ptr_nonnull(find(r, "message.timestamp.type"));
		if (v == 0) {
			ck_assert_int_eq(e->is_default, 0);
			ck_assert_int_eq(seg->is_default, 1);
		} else {
			ck_assert_int_eq(e->source, KAAS_CFG_SRC_TOPIC);
			ck_assert_int_eq(seg->source, KAAS_CFG_SRC_DEFAULT);
			ck_assert_int_eq(e->nsyn, 2);
			ck_assert_str_eq(e->syn_name[0], "retention.ms");
			ck_assert_int_eq(e->syn_source[0], KAAS_CFG_SRC_TOPIC);
			ck_assert_str_eq(e->syn_name[1], "log.retention.ms");
			ck_assert_str_eq(e->syn_value[1], "604800000");
		}
		/* Without include_synonyms: empty synonym lists. */
		if (v >= 1) {
			dc(v, 2, "dc", NULL, 0, 0, r);
			ck_assert_int_eq(find(r, "retention.ms")->nsyn, 0);
		}
		/* Only the keys asked for (unknown keys are simply absent). */
		dc(v, 2, "dc", (const char *const[]){NULL}, 0, 0, r); /* an empty list: all */
		ck_assert_int_eq(r->n, KAAS_TC_COUNT);
		const char *keys[] = {"segment.ms", "no.such.key"};
		dc(v, 2, "dc", keys, 2, 0, r);
		ck_assert_int_eq(r->n, 1);
		ck_assert_str_eq(r->e[0].name, "segment.ms");

		dc(v, 2, "missing", NULL, 0, 0, r);
		ck_assert_int_eq(r->err, KERR_UNKNOWN_TOPIC_OR_PARTITION);
		ck_assert_int_eq(r->n, 0);
		dc(v, 2, "bad name", NULL, 0, 0, r);
		ck_assert_int_eq(r->err, KERR_INVALID_TOPIC_EXCEPTION);

		/* The broker resource: this broker's id, read-only settings. */
		dc(v, 4, "1", NULL, 0, 1, r);
		ck_assert_int_eq(r->err, KERR_NONE);
		const dc_entry *np = find(r, "num.partitions");
		ck_assert_ptr_nonnull(np);
		ck_assert_str_eq(np->value, "2");
		ck_assert_int_eq(np->read_only, 1);
		if (v >= 1)
			ck_assert_int_eq(np->source, KAAS_CFG_SRC_STATIC_BROKER);
		const dc_entry *ac = find(r, "auto.create.topics.enable");
		ck_assert_ptr_nonnull(ac);
		ck_assert_str_eq(ac->value, "true");
		if (v >= 1)
			ck_assert_int_eq(ac->source, KAAS_CFG_SRC_DEFAULT);
		else
			ck_assert_int_eq(ac->is_default, 1);
		ck_assert_ptr_nonnull(find(r, "log.retention.ms"));
		ck_assert_str_eq(find(r, "listeners")->value, "PLAINTEXT://127.0.0.1:9092");
		dc(v, 4, "", NULL, 0, 0, r);
		ck_assert_int_eq(r->err, KERR_NONE);
		dc(v, 4, "7", NULL, 0, 0, r);
		ck_assert_int_eq(r->err, KERR_INVALID_REQUEST);
		ck_assert_int_eq(r->n, 0);
		dc(v, 8, "1", NULL, 0, 0, r);
		ck_assert_int_eq(r->err, KERR_INVALID_REQUEST);
	}
	free(r);
}
END_TEST

/* v3+: every config of both resource types has a type, and its
 * documentation exactly when asked for. */
START_TEST(describe_configs_documentation)
{
	char msg[256];
	kt_topic_spec spec = {{"docs", 4}, 1, 1, NULL, 0};
	ck_assert_int_eq(kt_topics_create(reg, &spec, 0, NULL, msg, sizeof(msg)), KERR_NONE);
	ck_assert(kt__config_docs_sorted());
	dc_result *r = malloc(sizeof(*r));
	for (int16_t v = 3; v <= 4; v++) {
		for (int8_t type = 2; type <= 4; type += 2) {
			const char *name = type == 2 ? "docs" : "1";
			dc_docs = 1;
			dc(v, type, name, NULL, 0, 0, r);
			ck_assert_int_eq(r->err, KERR_NONE);
			ck_assert_int_gt(r->n, 10);
			for (int i = 0; i < r->n; i++) {
				ck_assert_msg(r->e[i].type > 0, "%s: no type", r->e[i].name);
				ck_assert_msg(strcmp(r->e[i].doc, "<null>") != 0 && strlen(r->e[i].doc) > 20,
					      "%s: no documentation", r->e[i].name);
			}
			dc_docs = 0;
			dc(v, type, name, NULL, 0, 0, r);
			for (int i = 0; i < r->n; i++)
				ck_assert_str_eq(r->e[i].doc, "<null>");
		}
		const dc_entry *rm = find(r, "auto.create.topics.enable");
		ck_assert_ptr_nonnull(rm);
		ck_assert_int_eq(rm->type, 1); /* BOOLEAN */
		dc(v, 2, "docs", NULL, 0, 0, r);
		ck_assert_int_eq(find(r, "retention.ms")->type, 5); /* LONG */
		ck_assert_int_eq(find(r, "segment.bytes")->type, 3); /* INT */
		ck_assert_int_eq(find(r, "cleanup.policy")->type, 7); /* LIST */
	}
	free(r);
}
END_TEST

/* ---- AlterConfigs --------------------------------------------------------------------------- */

static int16_t ac(int16_t v, int8_t type, const char *name, const char *k, const char *val, int validate_only,
		  char *msg)
{
	kw_wr req = KAAS_WR_INIT, resp = KAAS_WR_INIT;
	kw_rd rd;
	char buf[300];
	kw_wr_i32(&req, 1);
	kw_wr_i8(&req, type);
	kw_wr_str(&req, 0, name);
	kw_wr_i32(&req, k ? 1 : 0);
	if (k) {
		kw_wr_str(&req, 0, k);
		kw_wr_str(&req, 0, val);
	}
	kw_wr_bool(&req, validate_only);
	ck_assert_int_eq(call(kt_admin_alter_configs, v, &req, &resp, &rd), KAAS_HANDLED);
	ck_assert_int_eq(ckrd_i32(&rd), 0);
	ck_assert_int_eq(ckrd_i32(&rd), 1);
	int16_t err = ckrd_i16(&rd);
	rdstr(&rd, msg, 320);
	ck_assert_int_eq(ckrd_i8(&rd), type);
	ck_assert_str_eq(rdstr(&rd, buf, sizeof(buf)), name);
	ck_assert_uint_eq(kw_rd_remain(&rd), 0);
	kw_wr_free(&req);
	kw_wr_free(&resp);
	return err;
}

START_TEST(alter_configs_every_version)
{
	char msg[320];
	kt_topic_spec spec = {{"ac", 2}, 1, 1, NULL, 0};
	ck_assert_int_eq(kt_topics_create(reg, &spec, 0, NULL, msg, sizeof(msg)), KERR_NONE);
	kt_topic_info info;
	for (int16_t v = 0; v <= 1; v++) {
		ck_assert_int_eq(ac(v, 2, "ac", "retention.ms", "123", 0, msg), KERR_NONE);
		ck_assert_str_eq(msg, "<null>");
		ck_assert_int_eq(kt_topics_lookup(reg, "ac", -1, &info), 0);
		ck_assert_int_eq(info.cfg.retention_ms, 123);
		ck_assert_int_eq(ac(v, 2, "ac", "retention.bytes", "1000", 1, msg), KERR_NONE);
		ck_assert_int_eq(kt_topics_lookup(reg, "ac", -1, &info), 0);
		ck_assert_int_eq(info.cfg.retention_bytes, -1); /* validate only */
		ck_assert_int_eq(info.cfg.retention_ms, 123);
		ck_assert_int_eq(ac(v, 2, "ac", "cleanup.policy", "compact,purge", 0, msg), KERR_INVALID_CONFIG);
		ck_assert_ptr_nonnull(strstr(msg, "compact"));
		ck_assert_int_eq(ac(v, 2, "ac", "segment.bytes", "abc", 0, msg), KERR_INVALID_CONFIG);
		ck_assert_int_eq(ac(v, 2, "nope", "retention.ms", "1", 0, msg), KERR_UNKNOWN_TOPIC_OR_PARTITION);
		ck_assert_int_eq(ac(v, 4, "1", "log.retention.ms", "1", 0, msg), KERR_INVALID_REQUEST);
		/* Non-incremental: an empty set reverts everything to defaults. */
		ck_assert_int_eq(ac(v, 2, "ac", NULL, NULL, 0, msg), KERR_NONE);
		ck_assert_int_eq(kt_topics_lookup(reg, "ac", -1, &info), 0);
		ck_assert_int_eq(info.cfg.retention_ms, 604800000);
		ck_assert_uint_eq(info.overrides, 0);
	}
}
END_TEST

/* ---- dynamic broker configs ------------------------------------------------------------------- */

/* IncrementalAlterConfigs v1 (flexible) with one operation. */
static int16_t iac(int8_t type, const char *name, const char *k, int8_t op, const char *val, char *msg)
{
	kw_wr req = KAAS_WR_INIT, resp = KAAS_WR_INIT;
	kw_rd rd;
	char buf[300];
	kw_wr_array(&req, 1, 1);
	kw_wr_i8(&req, type);
	kw_wr_str(&req, 1, name);
	kw_wr_array(&req, 1, 1);
	kw_wr_str(&req, 1, k);
	kw_wr_i8(&req, op);
	kw_wr_str(&req, 1, val);
	kw_wr_tags(&req, 1);
	kw_wr_tags(&req, 1);
	kw_wr_bool(&req, 0);
	kw_wr_tags(&req, 1);
	ck_assert_int_eq(call(kt_admin_incremental_alter_configs, 1, &req, &resp, &rd), KAAS_HANDLED);
	rd_flex = 1;
	ck_assert_int_eq(ckrd_i32(&rd), 0);
	ck_assert_int_eq(rd_arr(&rd), 1);
	int16_t err = ckrd_i16(&rd);
	rdstr(&rd, msg, 320);
	ck_assert_int_eq(ckrd_i8(&rd), type);
	ck_assert_str_eq(rdstr(&rd, buf, sizeof(buf)), name);
	rd_tags(&rd);
	rd_tags(&rd);
	ck_assert_uint_eq(kw_rd_remain(&rd), 0);
	rd_flex = 0;
	kw_wr_free(&req);
	kw_wr_free(&resp);
	return err;
}

static int64_t retention_of(const char *topic)
{
	kt_topic_info info;
	ck_assert_int_eq(kt_topics_lookup(reg, topic, -1, &info), 0);
	return info.cfg.retention_ms;
}

START_TEST(broker_dynamic_configs)
{
	char msg[320];
	kb_config_defaults(&bdef);
	bcfg = bdef;
	bcfg.num_partitions = 2; /* static, as the registry was opened */
	kb_dyncfg *d;
	ck_assert_int_eq(kb_dyncfg_open(cluster, &bcfg, 1, NULL, &d), 0);
	ctx.dyn = d;
	kt_config_kv kv = {{"retention.ms", 12}, {"3600000", 7}};
	kt_topic_spec plain = {{"plain", 5}, 1, 1, NULL, 0}, own = {{"own", 3}, 1, 1, &kv, 1};
	ck_assert_int_eq(kt_topics_create(reg, &plain, 0, NULL, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(kt_topics_create(reg, &own, 0, NULL, msg, sizeof(msg)), KERR_NONE);

	/* Settings that need a restart, another broker's id, bad values. */
	ck_assert_int_eq(ac(1, 4, "1", "listeners", "PLAINTEXT://x:1", 0, msg), KERR_INVALID_REQUEST);
	ck_assert_msg(strstr(msg, "Cannot update these configs dynamically: [listeners]"), "%s", msg);
	ck_assert_int_eq(iac(4, "", "broker.id", 0, "5", msg), KERR_INVALID_REQUEST);
	ck_assert_msg(strstr(msg, "Cannot update these configs dynamically: [broker.id]"), "%s", msg);
	ck_assert_int_eq(iac(4, "", "ssl.keystore.location", 1, NULL, msg), KERR_INVALID_REQUEST);
	ck_assert_msg(strstr(msg, "[ssl.keystore.location]"), "%s", msg);
	ck_assert_int_eq(ac(1, 4, "7", "log.retention.ms", "1", 0, msg), KERR_INVALID_REQUEST);
	ck_assert_msg(strstr(msg, "Unexpected broker id"), "%s", msg);
	ck_assert_int_eq(ac(1, 4, "", "log.retention.ms", "abc", 0, msg), KERR_INVALID_REQUEST);
	ck_assert_msg(strstr(msg, "log.retention.ms") && strstr(msg, "not an integer"), "%s", msg);
	ck_assert_int_eq(ac(1, 4, "", "log.segment.bytes", "100", 0, msg), KERR_INVALID_REQUEST);
	ck_assert_int_eq(iac(4, "", "log.retention.ms", 2, "1", msg), KERR_INVALID_CONFIG); /* APPEND */
	ck_assert_int_eq(ac(1, 4, "", "log.retention.ms", "5000", 1, msg), KERR_NONE);  /* validate only */
	ck_assert_int_eq(retention_of("plain"), 604800000);
	ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_LOG_RETENTION_MS), 604800000);

	/* The cluster default: every topic without an override follows. */
	ck_assert_int_eq(ac(1, 4, "", "log.retention.ms", "5000", 0, msg), KERR_NONE);
	ck_assert_int_eq(retention_of("plain"), 5000);
	ck_assert_int_eq(retention_of("own"), 3600000);
	dc_result *r = malloc(sizeof(*r));
	dc(1, 4, "", NULL, 0, 1, r);
	ck_assert_int_eq(r->err, KERR_NONE);
	ck_assert_int_eq(r->n, 1);
	ck_assert_str_eq(r->e[0].name, "log.retention.ms");
	ck_assert_str_eq(r->e[0].value, "5000");
	ck_assert_int_eq(r->e[0].source, KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
	dc(1, 4, "1", NULL, 0, 1, r);
	const dc_entry *e = find(r, "log.retention.ms");
	ck_assert_str_eq(e->value, "5000");
	ck_assert_int_eq(e->source, KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
	ck_assert_int_eq(e->read_only, 0);
	ck_assert_int_eq(e->nsyn, 2);
	ck_assert_int_eq(e->syn_source[0], KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
	ck_assert_int_eq(e->syn_source[1], KAAS_CFG_SRC_DEFAULT);
	ck_assert_str_eq(e->syn_value[1], "604800000");
	e = find(r, "num.partitions"); /* static, dynamic-capable */
	ck_assert_str_eq(e->value, "2");
	ck_assert_int_eq(e->source, KAAS_CFG_SRC_STATIC_BROKER);
	ck_assert_int_eq(e->nsyn, 2);
	ck_assert_int_eq(find(r, "listeners")->read_only, 1);
	dc(1, 2, "plain", NULL, 0, 1, r);
	e = find(r, "retention.ms");
	ck_assert_str_eq(e->value, "5000");
	ck_assert_int_eq(e->source, KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
	ck_assert_str_eq(e->syn_name[0], "log.retention.ms");
	dc(1, 2, "own", NULL, 0, 1, r);
	e = find(r, "retention.ms");
	ck_assert_str_eq(e->value, "3600000");
	ck_assert_int_eq(e->source, KAAS_CFG_SRC_TOPIC);
	ck_assert_int_eq(e->nsyn, 3);
	ck_assert_int_eq(e->syn_source[1], KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER);

	/* This broker's own value wins over the default; deleting it falls back. */
	ck_assert_int_eq(iac(4, "1", "log.retention.ms", 0, "7000", msg), KERR_NONE);
	ck_assert_int_eq(retention_of("plain"), 7000);
	dc(1, 4, "1", NULL, 0, 1, r);
	e = find(r, "log.retention.ms");
	ck_assert_str_eq(e->value, "7000");
	ck_assert_int_eq(e->source, KAAS_CFG_SRC_DYNAMIC_BROKER);
	ck_assert_int_eq(e->nsyn, 3);
	ck_assert_str_eq(e->syn_value[1], "5000");
	ck_assert_int_eq(iac(4, "1", "log.retention.ms", 1, NULL, msg), KERR_NONE);
	ck_assert_int_eq(retention_of("plain"), 5000);

	/* log.cleanup.policy (compaction): topics without their own follow it. */
	ck_assert_int_eq(iac(4, "", "log.cleanup.policy", 0, "compact", msg), KERR_NONE);
	kt_topic_info ci;
	ck_assert_int_eq(kt_topics_lookup(reg, "plain", -1, &ci), 0);
	ck_assert_int_eq(ci.cfg.cleanup_compact, KS_CLEANUP_COMPACT);
	dc(1, 2, "plain", NULL, 0, 1, r);
	ck_assert_str_eq(find(r, "cleanup.policy")->value, "compact");
	ck_assert_int_eq(find(r, "cleanup.policy")->source, KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
	ck_assert_int_eq(iac(4, "", "log.cleanup.policy", 0, "shred", msg), KERR_INVALID_REQUEST);

	/* compression.type: the broker default topics without their own are
	 * stored in; a topic's own wins.  The registry hands it to the open
	 * partitions, so the next append recompresses in it. */
	kt_config_kv zkv = {{"compression.type", 16}, {"zstd", 4}};
	kt_topic_spec ownz = {{"ownz", 4}, 1, 1, &zkv, 1};
	ck_assert_int_eq(kt_topics_create(reg, &ownz, 0, NULL, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(kt_topics_lookup(reg, "plain", -1, &ci), 0);
	ck_assert_int_eq(ci.cfg.compression_type, KS_COMPRESS_PRODUCER);
	dc(1, 4, "1", NULL, 0, 1, r);
	e = find(r, "compression.type");
	ck_assert_str_eq(e->value, "producer");
	ck_assert_int_eq(e->source, KAAS_CFG_SRC_DEFAULT);
	ck_assert_int_eq(e->read_only, 0);
	ck_assert_int_eq(iac(4, "", "compression.type", 0, "gzip", msg), KERR_NONE);
	ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_COMPRESSION_TYPE), KS_COMPRESS_GZIP);
	ck_assert_int_eq(kt_topics_lookup(reg, "plain", -1, &ci), 0);
	ck_assert_int_eq(ci.cfg.compression_type, KS_COMPRESS_GZIP);
	ck_assert_int_eq(kt_topics_lookup(reg, "ownz", -1, &ci), 0);
	ck_assert_int_eq(ci.cfg.compression_type, KS_COMPRESS_ZSTD);
	dc(1, 4, "1", NULL, 0, 1, r);
	e = find(r, "compression.type");
	ck_assert_str_eq(e->value, "gzip");
	ck_assert_int_eq(e->source, KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
	ck_assert_int_eq(e->nsyn, 2);
	ck_assert_str_eq(e->syn_value[1], "producer");
	ck_assert_int_eq(e->syn_source[1], KAAS_CFG_SRC_DEFAULT);
	dc(1, 2, "plain", NULL, 0, 1, r);
	e = find(r, "compression.type");
	ck_assert_str_eq(e->value, "gzip");
	ck_assert_int_eq(e->source, KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
	ck_assert_str_eq(e->syn_name[0], "compression.type");
	ck_assert_str_eq(e->syn_value[0], "gzip");
	dc(1, 2, "ownz", NULL, 0, 1, r);
	e = find(r, "compression.type");
	ck_assert_str_eq(e->value, "zstd");
	ck_assert_int_eq(e->source, KAAS_CFG_SRC_TOPIC);
	ck_assert_int_eq(e->syn_source[1], KAAS_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
	ck_assert_str_eq(e->syn_value[1], "gzip");
	ck_assert_int_eq(iac(4, "", "compression.type", 0, "brotli", msg), KERR_INVALID_REQUEST);
	ck_assert_msg(strstr(msg, "compression.type") && strstr(msg, "must be one of"), "%s", msg);
	ck_assert_int_eq(kb_dyncfg_value(d, KB_DYN_COMPRESSION_TYPE), KS_COMPRESS_GZIP); /* unchanged */

	/* AlterConfigs replaces the whole set: retention reverts, num.partitions moves. */
	ck_assert_int_eq(ac(1, 4, "", "num.partitions", "3", 0, msg), KERR_NONE);
	ck_assert_int_eq(retention_of("plain"), 604800000);
	kt_topic_spec dflt = {{"dflt", 4}, -1, 1, NULL, 0};
	kt_topic_info info;
	ck_assert_int_eq(kt_topics_create(reg, &dflt, 0, &info, msg, sizeof(msg)), KERR_NONE);
	ck_assert_int_eq(info.partitions, 3);
	ck_assert_int_eq(kt_topics_lookup(reg, "plain", -1, &ci), 0);
	ck_assert_int_eq(ci.cfg.cleanup_compact, KS_CLEANUP_DELETE);
	ck_assert_int_eq(ci.cfg.compression_type, KS_COMPRESS_PRODUCER); /* replaced away too */
	free(r);
	ctx.dyn = NULL;
	kb_dyncfg_close(d);
}
END_TEST

/* ---- DeleteRecords --------------------------------------------------------------------------- */

START_TEST(delete_records_every_version)
{
	for (int16_t v = 0; v <= 1; v++) {
		kw_wr req = KAAS_WR_INIT, resp = KAAS_WR_INIT;
		kw_rd rd;
		char buf[300];
		memset(&dr, 0, sizeof(dr));
		kw_wr_i32(&req, 1);
		kw_wr_str(&req, 0, "recs");
		kw_wr_i32(&req, 5);
		int32_t parts[5] = {0, 1, 9, 2, 3};
		int64_t offs[5] = {42, -1, 5, -2, 5000};
		for (int i = 0; i < 5; i++) {
			kw_wr_i32(&req, parts[i]);
			kw_wr_i64(&req, offs[i]);
		}
		kw_wr_i32(&req, 1000);
		ck_assert_int_eq(call(kt_admin_delete_records, v, &req, &resp, &rd), KAAS_HANDLED);
		ck_assert_int_eq(ckrd_i32(&rd), 0);
		ck_assert_int_eq(ckrd_i32(&rd), 1);
		ck_assert_str_eq(rdstr(&rd, buf, sizeof(buf)), "recs");
		ck_assert_int_eq(ckrd_i32(&rd), 5);
		int64_t want_low[5] = {42, 1000, -1, -1, -1};
		int16_t want_err[5] = {KERR_NONE, KERR_NONE, KERR_NOT_LEADER_OR_FOLLOWER, KERR_OFFSET_OUT_OF_RANGE,
				       KERR_OFFSET_OUT_OF_RANGE};
		for (int i = 0; i < 5; i++) {
			ck_assert_int_eq(ckrd_i32(&rd), parts[i]);
			ck_assert_int_eq(ckrd_i64(&rd), want_low[i]);
			ck_assert_int_eq(ckrd_i16(&rd), want_err[i]);
		}
		ck_assert_uint_eq(kw_rd_remain(&rd), 0);
		ck_assert_int_eq(dr.calls, 4); /* offset -2 never reached the partition */
		ck_assert_str_eq(dr.topic, "recs");
		kw_wr_free(&req);
		kw_wr_free(&resp);
	}
}
END_TEST

int main(void)
{
	ku_log_init_from_env();
	return ktest_main((struct ktest){ .suite = "topics-admin", .tcase = "core", .timeout = 60, .setup = setup, .teardown = teardown },
			  KTEST_LIST(create_topics_every_version,
				     create_topics_errors,
				     create_topics_assignment_and_validate_only,
				     create_topics_malformed_changes_nothing,
				     delete_topics_every_version,
				     create_partitions_every_version,
				     describe_configs_every_version, describe_configs_documentation,
				     alter_configs_every_version, broker_dynamic_configs,
				     delete_records_every_version));
}
