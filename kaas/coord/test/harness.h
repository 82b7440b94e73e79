/*
 * harness.h — what the coordinator's unit tests share: a coordinator on a
 * scratch directory with a test clock and no threads, a capture for
 * deferred answers, and request encoders / response decoders written from
 * Kafka's message schemas (independently of the code under test).
 */
#ifndef KAAS_COORD_TEST_HARNESS_H
#define KAAS_COORD_TEST_HARNESS_H

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kaas/coord/coord.h"
#include "kaas/proto/api.h"
#include "kaas/proto/buf.h"
#include "kaas/proto/test/ckrd.h"
#include "substrates/sub.h"
#include "substrates/test/scratch.h"
#include "kaas/proto/kerr.h"

typedef struct th_resp {
	int got;       /* answers received (must end up exactly 1) */
	kw_wr w;     /* the last answer's body */
} th_resp;

static inline void th_done(void *ctx, kw_wr *resp)
{
	th_resp *r = ctx;
	r->got++;
	kw_wr_free(&r->w);
	r->w = *resp;
	memset(resp, 0, sizeof(*resp));
}

static inline void th_resp_free(th_resp *r)
{
	kw_wr_free(&r->w);
	r->got = 0;
}

typedef struct th {
	scratch vol; /* the coordinator's volume: vol.dir, vol.vfs */
	kg_coord *c;
	kg_coord_config cfg;
	int64_t now;
	int64_t wall;
} th;

static inline int64_t th_clock(void *arg) { return ((th *)arg)->now; }
static inline int64_t th_wall(void *arg) { return ((th *)arg)->wall; }

static inline void th_start(th *t)
{
	t->c = NULL;
	ck_assert_int_eq(kg_coord_create(t->vol.vfs, &t->cfg, &t->c), 0);
}

static inline void th_open(th *t)
{
	memset(t, 0, sizeof(*t));
	scratch_open(&t->vol, "coord");
	kg_coord_config_defaults(&t->cfg);
	t->cfg.manual = 1;
	t->cfg.now_ms = th_clock;
	t->cfg.wall_ms = th_wall;
	t->cfg.now_arg = t;
	t->cfg.initial_rebalance_delay_ms = 0;
	t->cfg.host = "broker-a";
	t->cfg.port = 19092;
	t->cfg.broker_id = 7;
	t->now = 1000000;
	t->wall = 1700000000000LL;
	th_start(t);
}

/* A coordinator restart on the same volume. */
static inline void th_restart(th *t)
{
	kg_coord_close(t->c);
	th_start(t);
}

static inline void th_close(th *t)
{
	kg_coord_close(t->c);
	scratch_close(&t->vol);
}

static inline int th_flex(int16_t api, int16_t v)
{
	return (api == KAAS_API_OFFSET_FETCH && v >= 6) || (api == KAAS_API_INIT_PRODUCER_ID && v >= 2);
}

/* Calls an API with the request body in req (freed).  A handled answer is
 * captured in r like a deferred one. */
static inline int th_call_as(th *t, int16_t api, int16_t v, kw_wr *req, th_resp *r, const char *client)
{
	kg_coord_call call = {api, v, th_flex(api, v), {client, (int32_t)strlen(client)},
				"/127.0.0.1", th_done, r, NULL, 0, NULL};
	kw_rd rd;
	kw_wr resp = KAAS_WR_INIT;
	ck_assert_int_eq(req->oom, 0);
	kw_rd_init(&rd, req->buf, req->len);
	int rc = kg_coord_handle(t->c, &call, &rd, &resp);
	ck_assert_msg(rc == KAAS_HANDLED || rc == KAAS_DEFERRED, "api %d v%d: rc %d (%s)", api, v, rc,
		      rd.err ? rd.err : "-");
	ck_assert_msg(kw_rd_remain(&rd) == 0, "api %d v%d: %zu request bytes left unread", api, v,
		      kw_rd_remain(&rd));
	if (rc == KAAS_HANDLED)
		th_done(r, &resp);
	kw_wr_free(&resp);
	kw_wr_free(req);
	return rc;
}

static inline int th_call(th *t, int16_t api, int16_t v, kw_wr *req, th_resp *r)
{
	return th_call_as(t, api, v, req, r, "cli");
}

/* ---- a response reader that fails the test on a short response ---------------- */

typedef struct tr {
	kw_rd rd;
	int flex;
} tr;

static inline void tr_init(tr *r, const th_resp *resp, int flex)
{
	ck_assert_int_eq(resp->got, 1);
	kw_rd_init(&r->rd, resp->w.buf, resp->w.len);
	r->flex = flex;
}

static inline int8_t tr_i8(tr *r) { return ckrd_i8(&r->rd); }
static inline int16_t tr_i16(tr *r) { return ckrd_i16(&r->rd); }
static inline int32_t tr_i32(tr *r) { return ckrd_i32(&r->rd); }
static inline int64_t tr_i64(tr *r) { return ckrd_i64(&r->rd); }
static inline kw_str tr_str(tr *r) { return ckrd_str(&r->rd, r->flex); }
static inline kw_bytes tr_bytes(tr *r) { kw_bytes b = {0}; ck_assert_int_eq(kw_rd_bytes(&r->rd, r->flex, &b), 0); return b; }
static inline int32_t tr_arr(tr *r) { int32_t n = 0; ck_assert_int_eq(kw_rd_array(&r->rd, r->flex, 0, &n), 0); return n; }
static inline void tr_tags(tr *r) { ck_assert_int_eq(kw_rd_tags(&r->rd, r->flex), 0); }
static inline void tr_end(tr *r) { ck_assert_uint_eq(kw_rd_remain(&r->rd), 0); }
static inline int tr_streq(kw_str s, const char *want)
{
	if (!want)
		return s.len < 0;
	return s.len == (int32_t)strlen(want) && memcmp(s.s, want, (size_t)s.len) == 0;
}
#define ck_assert_kstr(ks_, want_) \
	ck_assert_msg(tr_streq((ks_), (want_)), "got '%.*s', want '%s'", (ks_).len < 0 ? 4 : (ks_).len, \
		      (ks_).len < 0 ? "null" : (ks_).s, (want_) ? (want_) : "null")

/* ---- JoinGroup / SyncGroup / Heartbeat / LeaveGroup ------------------------------- */

typedef struct jg_resp {
	int16_t err;
	int32_t gen;
	char proto[64];
	char leader[256];
	char member[256];
	int32_t nmembers;
	char members[8][256];
	char metas[8][64];
	char insts[8][64];
} jg_resp;

/* protos: "name=meta,name=meta" (a tiny notation for tests) */
static inline void jg_req(kw_wr *w, int16_t v, const char *group, int32_t session, int32_t rebalance,
		   const char *member, const char *inst, const char *ptype, const char *protos)
{
	kw_wr_str(w, 0, group);
	kw_wr_i32(w, session);
	if (v >= 1)
		kw_wr_i32(w, rebalance);
	kw_wr_str(w, 0, member);
	if (v >= 5)
		kw_wr_str(w, 0, inst);
	kw_wr_str(w, 0, ptype);
	char buf[256];
	snprintf(buf, sizeof(buf), "%s", protos);
	int n = 0;
	for (char *p = buf; *p; p++)
		n += *p == '=';
	kw_wr_array(w, 0, n);
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		*eq = '\0';
		kw_wr_str(w, 0, tok);
		kw_wr_bytes(w, 0, eq + 1, (int32_t)strlen(eq + 1));
	}
}

static inline void jg_parse(const th_resp *resp, int16_t v, jg_resp *out)
{
	tr r;
	memset(out, 0, sizeof(*out));
	tr_init(&r, resp, 0);
	if (v >= 2)
		ck_assert_int_eq(tr_i32(&r), 0);
	out->err = tr_i16(&r);
	out->gen = tr_i32(&r);
	kw_str s = tr_str(&r);
	snprintf(out->proto, sizeof(out->proto), "%.*s", s.len, s.s);
	s = tr_str(&r);
	snprintf(out->leader, sizeof(out->leader), "%.*s", s.len, s.s);
	s = tr_str(&r);
	snprintf(out->member, sizeof(out->member), "%.*s", s.len, s.s);
	out->nmembers = tr_arr(&r);
	for (int32_t i = 0; i < out->nmembers; i++) {
		s = tr_str(&r);
		if (i < 8)
			snprintf(out->members[i], sizeof(out->members[i]), "%.*s", s.len, s.s);
		if (v >= 5) {
			s = tr_str(&r);
			if (i < 8)
				snprintf(out->insts[i], sizeof(out->insts[i]), "%.*s", s.len < 0 ? 4 : s.len,
					 s.len < 0 ? "null" : s.s);
		}
		kw_bytes b = tr_bytes(&r);
		if (i < 8)
			snprintf(out->metas[i], sizeof(out->metas[i]), "%.*s", b.len, (const char *)b.p);
	}
	tr_end(&r);
}

static inline void sg_req(kw_wr *w, int16_t v, const char *group, int32_t gen, const char *member,
		   const char *inst, int n, const char *const *ids, const char *const *asg)
{
	kw_wr_str(w, 0, group);
	kw_wr_i32(w, gen);
	kw_wr_str(w, 0, member);
	if (v >= 3)
		kw_wr_str(w, 0, inst);
	kw_wr_array(w, 0, n);
	for (int i = 0; i < n; i++) {
		kw_wr_str(w, 0, ids[i]);
		kw_wr_bytes(w, 0, asg[i], (int32_t)strlen(asg[i]));
	}
}

/* Returns the error; the assignment goes to out (NUL-terminated). */
static inline int16_t sg_parse(const th_resp *resp, int16_t v, char *out, size_t outlen)
{
	tr r;
	tr_init(&r, resp, 0);
	if (v >= 1)
		ck_assert_int_eq(tr_i32(&r), 0);
	int16_t err = tr_i16(&r);
	kw_bytes b = tr_bytes(&r);
	if (out)
		snprintf(out, outlen, "%.*s", b.len < 0 ? 0 : b.len, b.len > 0 ? (const char *)b.p : "");
	tr_end(&r);
	return err;
}

/* A leader's SyncGroup that completes a generation: answered only once the
 * group file holding the assignment is on the volume (the flush). */
static inline void th_sync_durable(th *t, int16_t v, kw_wr *req, th_resp *r)
{
	ck_assert_int_eq(th_call(t, KAAS_API_SYNC_GROUP, v, req, r), KAAS_DEFERRED);
	ck_assert_int_eq(r->got, 0);
	kg_coord_flush(t->c);
	ck_assert_int_eq(r->got, 1);
}

static inline int16_t th_heartbeat(th *t, int16_t v, const char *group, int32_t gen, const char *member,
			    const char *inst)
{
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	kw_wr_str(&w, 0, group);
	kw_wr_i32(&w, gen);
	kw_wr_str(&w, 0, member);
	if (v >= 3)
		kw_wr_str(&w, 0, inst);
	ck_assert_int_eq(th_call(t, KAAS_API_HEARTBEAT, v, &w, &r), KAAS_HANDLED);
	tr rr;
	tr_init(&rr, &r, 0);
	if (v >= 1)
		ck_assert_int_eq(tr_i32(&rr), 0);
	int16_t err = tr_i16(&rr);
	tr_end(&rr);
	th_resp_free(&r);
	return err;
}

/* LeaveGroup of one member (v0-2) or a batch (v3); returns the top error. */
static inline int16_t th_leave(th *t, int16_t v, const char *group, const char *member, const char *inst,
			int16_t *member_err)
{
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	kw_wr_str(&w, 0, group);
	if (v <= 2) {
		kw_wr_str(&w, 0, member);
	} else {
		kw_wr_array(&w, 0, 1);
		kw_wr_str(&w, 0, member);
		kw_wr_str(&w, 0, inst);
	}
	ck_assert_int_eq(th_call(t, KAAS_API_LEAVE_GROUP, v, &w, &r), KAAS_HANDLED);
	tr rr;
	tr_init(&rr, &r, 0);
	if (v >= 1)
		ck_assert_int_eq(tr_i32(&rr), 0);
	int16_t top = tr_i16(&rr);
	if (v >= 3) {
		int32_t n = tr_arr(&rr);
		if (top == 0) {
			ck_assert_int_eq(n, 1);
			kw_str id = tr_str(&rr);
			ck_assert_kstr(id, member);
			kw_str in = tr_str(&rr);
			ck_assert_kstr(in, inst);
			*member_err = tr_i16(&rr);
		}
	} else if (member_err) {
		*member_err = top;
	}
	tr_end(&rr);
	th_resp_free(&r);
	return top;
}

/* ---- offsets ----------------------------------------------------------------------------- */

/* Commits one partition; returns KAAS_HANDLED/DEFERRED, the answer in r. */
static inline int th_commit(th *t, int16_t v, const char *group, int32_t gen, const char *member,
		     const char *topic, int32_t part, int64_t off, const char *meta, th_resp *r)
{
	kw_wr w = KAAS_WR_INIT;
	kw_wr_str(&w, 0, group);
	if (v >= 1) {
		kw_wr_i32(&w, gen);
		kw_wr_str(&w, 0, member);
	}
	if (v >= 7)
		kw_wr_str(&w, 0, NULL);
	if (v >= 2 && v <= 4)
		kw_wr_i64(&w, -1);
	kw_wr_array(&w, 0, 1);
	kw_wr_str(&w, 0, topic);
	kw_wr_array(&w, 0, 1);
	kw_wr_i32(&w, part);
	kw_wr_i64(&w, off);
	if (v >= 6)
		kw_wr_i32(&w, 5);
	if (v == 1)
		kw_wr_i64(&w, -1);
	kw_wr_str(&w, 0, meta);
	return th_call(t, KAAS_API_OFFSET_COMMIT, v, &w, r);
}

/* The start of an OffsetCommit or OffsetFetch answer about one partition:
 * throttle time (v3+), then exactly that topic and partition. */
static inline void tr_one_partition(tr *rr, int16_t v, const char *topic, int32_t part)
{
	if (v >= 3)
		ck_assert_int_eq(tr_i32(rr), 0);
	ck_assert_int_eq(tr_arr(rr), 1);
	kw_str tn = tr_str(rr);
	ck_assert_kstr(tn, topic);
	ck_assert_int_eq(tr_arr(rr), 1);
	ck_assert_int_eq(tr_i32(rr), part);
}

/* The error of a one-partition commit answer. */
static inline int16_t commit_err(const th_resp *r, int16_t v, const char *topic, int32_t part)
{
	tr rr;
	tr_init(&rr, r, 0);
	tr_one_partition(&rr, v, topic, part);
	int16_t err = tr_i16(&rr);
	tr_end(&rr);
	return err;
}

/* Commit, flush, and return the partition's error. */
static inline int16_t th_commit_sync(th *t, int16_t v, const char *group, int32_t gen, const char *member,
			      const char *topic, int32_t part, int64_t off, const char *meta)
{
	th_resp r = {0};
	int rc = th_commit(t, v, group, gen, member, topic, part, off, meta, &r);
	if (rc == KAAS_DEFERRED) {
		ck_assert_int_eq(r.got, 0);
		kg_coord_flush(t->c);
	}
	int16_t err = commit_err(&r, v, topic, part);
	th_resp_free(&r);
	return err;
}

/* Fetches one partition's committed offset (v as given); returns it, -1
 * when none; the partition error in *perr and metadata in meta. */
static inline int64_t th_fetch(th *t, int16_t v, const char *group, const char *topic, int32_t part,
			int16_t *perr, char *meta, size_t metalen)
{
	int flex = v >= 6;
	kw_wr w = KAAS_WR_INIT;
	th_resp r = {0};
	kw_wr_str(&w, flex, group);
	kw_wr_array(&w, flex, 1);
	kw_wr_str(&w, flex, topic);
	kw_wr_array(&w, flex, 1);
	kw_wr_i32(&w, part);
	kw_wr_tags(&w, flex);
	if (v >= 7)
		kw_wr_i8(&w, 1);
	kw_wr_tags(&w, flex);
	ck_assert_int_eq(th_call(t, KAAS_API_OFFSET_FETCH, v, &w, &r), KAAS_HANDLED);
	tr rr;
	tr_init(&rr, &r, flex);
	tr_one_partition(&rr, v, topic, part);
	int64_t off = tr_i64(&rr);
	if (v >= 5)
		tr_i32(&rr);
	kw_str m = tr_str(&rr);
	if (meta)
		snprintf(meta, metalen, "%.*s", m.len < 0 ? 0 : m.len, m.len > 0 ? m.s : "");
	int16_t err = tr_i16(&rr);
	tr_tags(&rr);
	tr_tags(&rr);
	if (v >= 2)
		ck_assert_int_eq(tr_i16(&rr), 0);
	tr_tags(&rr);
	tr_end(&rr);
	th_resp_free(&r);
	if (perr)
		*perr = err;
	return off;
}

#endif
