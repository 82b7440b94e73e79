/* test_member.c — heartbeat files (codec and refusals of hostile files),
 * exit certificates, incarnations and the observer's liveness verdicts. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/cluster/member.h"
#include "kaas/cluster/test/harness.h"
#include "util/test/ktest.h"

#define MS 1000000LL

static kcl_hb sample(int32_t id, uint64_t inc, int64_t seq)
{
	kcl_hb hb;
	memset(&hb, 0, sizeof(hb));
	hb.id = id;
	hb.inc.incarnation = inc;
	hb.inc.nonce = 0x1234abcd0000ull + inc;
	hb.seq = seq;
	hb.state = KCL_ST_RUNNING;
	snprintf(hb.endpoint, sizeof(hb.endpoint), "10.0.0.%d:9092", (int)id);
	snprintf(hb.rack, sizeof(hb.rack), "rack-%d", (int)(id % 2));
	snprintf(hb.host_id, sizeof(hb.host_id), "node-%d/3f2a9c1e/netns:4026531840", (int)id);
	hb.released = (kcl_gen){3, 17};
	hb.wall_ms = 1764472800000;
	return hb;
}

static int decode_text(const char *s, kcl_hb *out, char *err, size_t errlen)
{
	return kcl_hb_decode(s, strlen(s), out, err, errlen);
}

START_TEST(heartbeat_round_trip)
{
	kcl_hb hb = sample(7, 1764472800123, 42), back;
	hb.pred_how = KCL_PRED_EXPIRED;
	hb.pred.incarnation = 1764472800000;
	hb.pred.nonce = 0xfeedull;
	hb.pred_seq = 991;
	char *buf, err[256];
	size_t len;
	ck_assert_int_eq(kcl_hb_encode(&hb, &buf, &len), 0);
	ck_assert_int_eq(kcl_hb_decode(buf, len, &back, err, sizeof(err)), 0);
	ck_assert_int_eq(back.id, 7);
	ck_assert(kcl_incarn_cmp(back.inc, hb.inc) == 0);
	ck_assert_int_eq(back.seq, 42);
	ck_assert_int_eq(back.state, KCL_ST_RUNNING);
	ck_assert_str_eq(back.endpoint, "10.0.0.7:9092");
	ck_assert_str_eq(back.rack, "rack-1");
	ck_assert_str_eq(back.host_id, hb.host_id);
	ck_assert(kcl_gen_cmp(back.released, hb.released) == 0);
	ck_assert_int_eq(back.pred_how, KCL_PRED_EXPIRED);
	ck_assert(kcl_incarn_cmp(back.pred, hb.pred) == 0);
	ck_assert_int_eq(back.pred_seq, 991);
	/* Every state survives the trip. */
	for (int st = KCL_ST_RUNNING; st <= KCL_ST_STOPPED; st++) {
		free(buf);
		hb.state = st;
		ck_assert_int_eq(kcl_hb_encode(&hb, &buf, &len), 0);
		ck_assert_int_eq(kcl_hb_decode(buf, len, &back, err, sizeof(err)), 0);
		ck_assert_int_eq(back.state, st);
	}
	free(buf);
	/* The encoder refuses what the decoder would. */
	hb.seq = 0;
	ck_assert_int_eq(kcl_hb_encode(&hb, &buf, &len), -EINVAL);
}
END_TEST

START_TEST(every_truncation_is_refused)
{
	kcl_hb hb = sample(1, 5, 9), back;
	char *buf, err[256];
	size_t len;
	ck_assert_int_eq(kcl_hb_encode(&hb, &buf, &len), 0);
	for (size_t cut = 0; cut < len; cut++) {
		err[0] = '\0';
		int rc = kcl_hb_decode(buf, cut, &back, err, sizeof(err));
		ck_assert_msg(rc == -EBADMSG, "cut at %zu: rc %d (%s)", cut, rc, err);
		ck_assert(err[0] != '\0');
	}
	free(buf);
}
END_TEST

START_TEST(hostile_heartbeats_are_refused_by_name)
{
	static const struct {
		const char *text;
		int rc;
		const char *says;
	} cases[] = {
		{"{\"version\":2,\"id\":1}", -EPROTONOSUPPORT, "newer"},
		{"{\"version\":0}", -ERANGE, "version"},
		{"{\"id\":1}", -EINVAL, "version"},
		{"[1,2,3]", -EBADMSG, "object"},
		{"{\"version\":1,\"version\":1}", -EBADMSG, "JSON"},
		{"{\"version\":1,\"id\":-1}", -ERANGE, "'id'"},
		{"{\"version\":1,\"id\":2147483648}", -ERANGE, "'id'"},
		{"{\"version\":1,\"id\":\"1\"}", -EINVAL, "'id'"},
		{"{\"version\":1,\"id\":1,\"incarnation\":0}", -ERANGE, "'incarnation'"},
		{"{\"version\":1,\"id\":1,\"incarnation\":5,\"nonce\":\"0000000000000000\"}", -ERANGE, "nonce"},
		{"{\"version\":1,\"id\":1,\"incarnation\":5,\"nonce\":\"ABCDEF0123456789\"}", -EINVAL, "hex"},
		{"{\"version\":1,\"id\":1,\"incarnation\":5,\"nonce\":\"abc\"}", -EINVAL, "16 hex"},
		{"{\"version\":1,\"id\":1,\"incarnation\":5,\"nonce\":\"00000000000000aa\",\"seq\":0}", -ERANGE, "'seq'"},
		{"{\"version\":1,\"id\":1,\"incarnation\":5,\"nonce\":\"00000000000000aa\",\"seq\":9007199254740992}",
		 -ERANGE, "'seq'"},
		{"{\"version\":1,\"id\":1,\"incarnation\":5,\"nonce\":\"00000000000000aa\",\"seq\":3,\"state\":\"zombie\"}",
		 -EINVAL, "state"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kcl_hb back;
		char err[256] = "";
		int rc = decode_text(cases[i].text, &back, err, sizeof(err));
		ck_assert_msg(rc == cases[i].rc, "case %zu: rc %d, want %d (%s)", i, rc, cases[i].rc, err);
		ck_assert_msg(strstr(err, cases[i].says), "case %zu: '%s' does not say '%s'", i, err,
			      cases[i].says);
	}
	/* A predecessor that is not older than the incarnation itself. */
	kcl_hb hb = sample(1, 5, 9), back;
	hb.pred_how = KCL_PRED_GONE;
	hb.pred = hb.inc;
	hb.pred.incarnation = 6;
	hb.pred_seq = 1;
	char *buf, err[256];
	size_t len;
	ck_assert_int_eq(kcl_hb_encode(&hb, &buf, &len), 0);
	ck_assert_int_eq(kcl_hb_decode(buf, len, &back, err, sizeof(err)), -ERANGE);
	ck_assert_ptr_nonnull(strstr(err, "predecessor"));
	free(buf);
}
END_TEST

/* Every listener's endpoint travels; the field is optional (an older kaas
 * wrote none), and a hostile list is refused by name. */
START_TEST(heartbeat_listeners)
{
	kcl_hb hb = sample(3, 77, 5), back;
	hb.nlst = 2;
	snprintf(hb.lst[0].name, sizeof(hb.lst[0].name), "PLAINTEXT");
	snprintf(hb.lst[0].host, sizeof(hb.lst[0].host), "10.0.0.3");
	hb.lst[0].port = 9092;
	snprintf(hb.lst[1].name, sizeof(hb.lst[1].name), "EXTERNAL_TLS");
	snprintf(hb.lst[1].host, sizeof(hb.lst[1].host), "kafka-3.example.com");
	hb.lst[1].port = 19093;
	char *buf, err[256];
	size_t len;
	ck_assert_int_eq(kcl_hb_encode(&hb, &buf, &len), 0);
	ck_assert_int_eq(kcl_hb_decode(buf, len, &back, err, sizeof(err)), 0);
	ck_assert_int_eq(back.nlst, 2);
	ck_assert_str_eq(back.lst[1].name, "EXTERNAL_TLS");
	ck_assert_str_eq(back.lst[1].host, "kafka-3.example.com");
	ck_assert_int_eq(back.lst[1].port, 19093);
	free(buf);
	kb_lbroker lb;
	memset(&lb, 0, sizeof(lb));
	snprintf(lb.host, sizeof(lb.host), "10.0.0.3");
	lb.port = 9092;
	const char *h;
	int32_t port;
	/* Without a list (an older kaas): its one endpoint for every listener. */
	ck_assert_int_eq(kb_lbroker_endpoint(&lb, "EXTERNAL_TLS", &h, &port), 0);
	ck_assert_int_eq(port, 9092);
	lb.nlst = back.nlst;
	memcpy(lb.lst, back.lst, sizeof(lb.lst));
	ck_assert_int_eq(kb_lbroker_endpoint(&lb, "EXTERNAL_TLS", &h, &port), 0);
	ck_assert_str_eq(h, "kafka-3.example.com");
	ck_assert_int_eq(port, 19093);
	ck_assert_int_eq(kb_lbroker_endpoint(&lb, "SASL", &h, &port), -ENOENT);

	static const struct {
		const char *listeners;
		const char *says;
	} bad[] = {
		{"{}", "not an array"},
		{"[1]", "not an object"},
		{"[{\"name\":\"A B\",\"endpoint\":\"h:1\"}]", "not a listener name"},
		{"[{\"name\":\"A\",\"endpoint\":\"h\"}]", "host:port"},
		{"[{\"name\":\"A\",\"endpoint\":\"h:0\"}]", "host:port"},
		{"[{\"name\":\"A\",\"endpoint\":\"h:65536\"}]", "host:port"},
		{"[{\"name\":\"A\",\"endpoint\":\":9\"}]", "host:port"},
		{"[{\"name\":\"A\",\"endpoint\":\"h:1\"},{\"name\":\"A\",\"endpoint\":\"h:2\"}]", "twice"},
		{"[{\"endpoint\":\"h:1\"}]", "name"},
		{"[{},{},{},{},{},{},{},{},{}]", "at most"},
	};
	hb.nlst = 0;
	ck_assert_int_eq(kcl_hb_encode(&hb, &buf, &len), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		/* The good file with "listeners" spliced in before its end. */
		size_t n = len + strlen(bad[i].listeners) + 32;
		char *t = malloc(n);
		const char *close = strrchr(buf, '}');
		snprintf(t, n, "%.*s,\"listeners\":%s}", (int)(close - buf), buf, bad[i].listeners);
		err[0] = 0;
		int rc = decode_text(t, &back, err, sizeof(err));
		ck_assert_msg(rc < 0 && strstr(err, bad[i].says), "case %zu: rc %d '%s' does not say '%s'", i,
			      rc, err, bad[i].says);
		free(t);
	}
	free(buf);
}
END_TEST

START_TEST(files_from_another_host)
{
	char err[256];
	kcl_hb hb = sample(3, 8, 1), back;
	ck_assert_int_eq(kcl_hb_read(h_vfs, 3, &back, err, sizeof(err)), -ENOENT);
	ck_assert_int_eq(kcl_hb_write(h_vfs, &hb), 0); /* creates brokers/ */
	ck_assert_int_eq(kcl_hb_read(h_vfs, 3, &back, err, sizeof(err)), 0);
	ck_assert_int_eq(back.seq, 1);
	/* A file in 3's name claiming to be broker 4. */
	hb.id = 4;
	char *buf;
	size_t len;
	ck_assert_int_eq(kcl_hb_encode(&hb, &buf, &len), 0);
	h_put("brokers/3.json", buf, len);
	free(buf);
	ck_assert_int_eq(kcl_hb_read(h_vfs, 3, &back, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "claims to be broker 4"));
	/* Truncated, empty, oversized. */
	h_put("brokers/3.json", "{\"version\":1,\"id\":3,\"incarn", 27);
	ck_assert_int_eq(kcl_hb_read(h_vfs, 3, &back, err, sizeof(err)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err, "brokers/3.json"));
	h_put("brokers/3.json", "", 0);
	ck_assert_int_eq(kcl_hb_read(h_vfs, 3, &back, err, sizeof(err)), -EBADMSG);
	char *big = malloc(KCL_HB_MAX_BYTES + 10);
	memset(big, ' ', KCL_HB_MAX_BYTES + 10);
	h_put("brokers/3.json", big, KCL_HB_MAX_BYTES + 10);
	free(big);
	ck_assert_int_eq(kcl_hb_read(h_vfs, 3, &back, err, sizeof(err)), -ERANGE);
	ck_assert_int_eq(kcl_hb_read(h_vfs, -1, &back, err, sizeof(err)), -EINVAL);
}
END_TEST

START_TEST(exit_certificates)
{
	kcl_incarn a = {10, 0xaa}, b = {11, 0xbb};
	ck_assert_int_eq(kcl_gone_exists(h_vfs, 2, a), 0);
	ck_assert_int_eq(kcl_gone_write(h_vfs, 2, a, "supervisor"), 0);
	ck_assert_int_eq(kcl_gone_exists(h_vfs, 2, a), 1);
	/* Certifying twice is the same fact; another incarnation is not covered. */
	ck_assert_int_eq(kcl_gone_write(h_vfs, 2, a, "same-host"), 0);
	ck_assert_int_eq(kcl_gone_exists(h_vfs, 2, b), 0);
	ck_assert_int_eq(kcl_gone_exists(h_vfs, 3, a), 0);
}
END_TEST

START_TEST(incarnations_are_ordered)
{
	kcl_incarn a = {5, 0xff}, b = {6, 0x01}, c = {6, 0x02};
	ck_assert_int_lt(kcl_incarn_cmp(a, b), 0);
	ck_assert_int_lt(kcl_incarn_cmp(b, c), 0);
	ck_assert_int_eq(kcl_incarn_cmp(c, c), 0);
	/* Above the previous one even when the wall clock went back. */
	ck_assert_uint_eq(kcl_incarnation_next(0, 1000), 1000);
	ck_assert_uint_eq(kcl_incarnation_next(5000, 1000), 5001);
	ck_assert_uint_eq(kcl_incarnation_next(999, 1000), 1000);
}
END_TEST

START_TEST(silence_for_the_session_timeout_is_death)
{
	kcl_view v;
	kcl_view_init(&v, 1000, 0);
	kcl_hb hb = sample(2, 9, 1);
	ck_assert_int_eq(kcl_view_observe(&v, &hb, 0, 2 * MS), 0);
	const kcl_peer *p = kcl_view_get(&v, 2, hb.inc);
	ck_assert_int_eq(p->live, KCL_LIVE_ALIVE);
	/* Unchanged, but the read began before a whole timeout had passed
	 * since the end of the read that first showed it. */
	ck_assert_int_eq(kcl_view_observe(&v, &hb, 1001 * MS, 1500 * MS), 0);
	ck_assert_int_eq(p->live, KCL_LIVE_ALIVE);
	/* Moved: the clock starts again at the end of this read. */
	hb.seq = 2;
	ck_assert_int_eq(kcl_view_observe(&v, &hb, 1600 * MS, 1700 * MS), 0);
	ck_assert_int_eq(kcl_view_observe(&v, &hb, 2699 * MS, 2699 * MS), 0);
	ck_assert_int_eq(p->live, KCL_LIVE_ALIVE);
	ck_assert_int_eq(kcl_view_observe(&v, &hb, 2700 * MS, 2701 * MS), 0);
	ck_assert_int_eq(p->live, KCL_LIVE_EXPIRED);
	/* Expired is final: a later write of this incarnation cannot have been
	 * credited to its lease (lease.h), so it is never trusted again. */
	hb.seq = 3;
	ck_assert_int_eq(kcl_view_observe(&v, &hb, 2800 * MS, 2801 * MS), 0);
	ck_assert_int_eq(p->live, KCL_LIVE_EXPIRED);
	kcl_view_free(&v);
}
END_TEST

START_TEST(unreadable_files_never_prove_silence)
{
	kcl_view v;
	kcl_view_init(&v, 1000, 0);
	kcl_hb hb = sample(2, 9, 1);
	ck_assert_int_eq(kcl_view_observe(&v, &hb, 0, 1 * MS), 0);
	/* A newer writer's format, a missing file: for 5 timeouts. */
	for (int64_t t = 500; t <= 5000; t += 500)
		kcl_view_unreadable(&v, 2, t * MS);
	ck_assert_int_eq(kcl_view_get(&v, 2, hb.inc)->live, KCL_LIVE_ALIVE);
	/* Only a read that shows the same seq for a whole timeout decides. */
	ck_assert_int_eq(kcl_view_observe(&v, &hb, 5999 * MS, 6000 * MS), 0);
	ck_assert_int_eq(kcl_view_get(&v, 2, hb.inc)->live, KCL_LIVE_ALIVE);
	ck_assert_int_eq(kcl_view_observe(&v, &hb, 6000 * MS, 6001 * MS), 0);
	ck_assert_int_eq(kcl_view_get(&v, 2, hb.inc)->live, KCL_LIVE_EXPIRED);
	kcl_view_free(&v);
}
END_TEST

START_TEST(proofs_of_exit_are_immediate)
{
	kcl_view v;
	kcl_view_init(&v, 1000, 0);
	kcl_hb a = sample(1, 3, 10), b = sample(2, 4, 10), c = sample(3, 5, 10);
	ck_assert_int_eq(kcl_view_observe(&v, &a, 0, 1), 0);
	ck_assert_int_eq(kcl_view_observe(&v, &b, 0, 1), 0);
	ck_assert_int_eq(kcl_view_observe(&v, &c, 0, 1), 0);
	a.state = KCL_ST_STOPPED;
	a.seq++;
	b.state = KCL_ST_FENCED;
	b.seq++;
	ck_assert_int_eq(kcl_view_observe(&v, &a, 10 * MS, 11 * MS), 0);
	ck_assert_int_eq(kcl_view_observe(&v, &b, 10 * MS, 11 * MS), 0);
	kcl_view_proven_gone(&v, 3, c.inc);
	ck_assert_int_eq(kcl_view_get(&v, 1, a.inc)->live, KCL_LIVE_GONE);
	ck_assert_int_eq(kcl_view_get(&v, 2, b.inc)->live, KCL_LIVE_GONE);
	ck_assert_int_eq(kcl_view_get(&v, 3, c.inc)->live, KCL_LIVE_GONE);
	/* Draining is alive. */
	kcl_hb d = sample(4, 6, 1);
	d.state = KCL_ST_DRAINING;
	ck_assert_int_eq(kcl_view_observe(&v, &d, 10 * MS, 11 * MS), 0);
	ck_assert_int_eq(kcl_view_get(&v, 4, d.inc)->live, KCL_LIVE_ALIVE);
	kcl_view_free(&v);
}
END_TEST

START_TEST(a_newer_incarnation_wins_but_the_older_is_waited_out)
{
	kcl_view v;
	kcl_view_init(&v, 1000, 0);
	kcl_hb old = sample(5, 100, 7);
	ck_assert_int_eq(kcl_view_observe(&v, &old, 0, 1 * MS), 0);
	/* A newer process of id 5 that did not (yet) say how the old one
	 * ended: it wins the id, the old one stays to be waited out. */
	kcl_hb young = sample(5, 101, 1);
	ck_assert_int_eq(kcl_view_observe(&v, &young, 100 * MS, 101 * MS), 0);
	ck_assert_ptr_eq(kcl_view_current(&v, 5), kcl_view_get(&v, 5, young.inc));
	const kcl_peer *po = kcl_view_get(&v, 5, old.inc);
	ck_assert_int_eq(po->superseded, 1);
	ck_assert_int_eq(po->live, KCL_LIVE_ALIVE);
	/* Reads that show only the young one say nothing of the old one. */
	young.seq = 2;
	ck_assert_int_eq(kcl_view_observe(&v, &young, 5000 * MS, 5001 * MS), 0);
	ck_assert_int_eq(po->live, KCL_LIVE_ALIVE);
	/* The young one's word that it waited the old one out ends it. */
	young.seq = 3;
	young.pred_how = KCL_PRED_EXPIRED;
	young.pred = old.inc;
	young.pred_seq = 7;
	ck_assert_int_eq(kcl_view_observe(&v, &young, 5100 * MS, 5101 * MS), 0);
	po = kcl_view_get(&v, 5, old.inc);
	ck_assert_int_eq(po->live, KCL_LIVE_EXPIRED);
	/* The old one writing again (two processes, one id) is superseded
	 * and stays ended. */
	old.seq = 8;
	ck_assert_int_eq(kcl_view_observe(&v, &old, 5200 * MS, 5201 * MS), 0);
	ck_assert_int_eq(kcl_view_get(&v, 5, old.inc)->live, KCL_LIVE_EXPIRED);
	ck_assert_ptr_eq(kcl_view_current(&v, 5), kcl_view_get(&v, 5, young.inc));
	kcl_view_prune(&v);
	ck_assert_ptr_null(kcl_view_get(&v, 5, old.inc));
	ck_assert_ptr_nonnull(kcl_view_get(&v, 5, young.inc));
	kcl_view_free(&v);
}
END_TEST

START_TEST(clear_for_takeover)
{
	kcl_view v;
	kcl_view_init(&v, 1000, 0);
	kcl_incarn me = {50, 1};
	kcl_hb self = sample(1, 50, 1), other = sample(2, 60, 1);
	self.inc = me;
	other.released = (kcl_gen){4, 9};
	ck_assert_int_eq(kcl_view_observe(&v, &self, 0, 1), 0);
	ck_assert_int_eq(kcl_view_observe(&v, &other, 0, 1), 0);
	/* Not before the observer watched for a whole timeout. */
	ck_assert_int_eq(kcl_view_clear_for(&v, me, 1, (kcl_gen){4, 9}, 999 * MS), 0);
	ck_assert_int_eq(kcl_view_clear_for(&v, me, 1, (kcl_gen){4, 9}, 1000 * MS), 1);
	/* A move in a generation the other has not released yet. */
	ck_assert_int_eq(kcl_view_clear_for(&v, me, 1, (kcl_gen){4, 10}, 1000 * MS), 0);
	ck_assert_int_eq(kcl_view_clear_for(&v, me, 1, (kcl_gen){5, 1}, 1000 * MS), 0);
	/* ...until it is expired. */
	ck_assert_int_eq(kcl_view_observe(&v, &other, 1001 * MS, 1002 * MS), 0);
	ck_assert_int_eq(kcl_view_clear_for(&v, me, 1, (kcl_gen){5, 1}, 1002 * MS), 1);
	kcl_view_free(&v);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "cluster-member", .tcase = "member", .timeout = 60,
					  .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(heartbeat_round_trip, every_truncation_is_refused,
				     hostile_heartbeats_are_refused_by_name, heartbeat_listeners, files_from_another_host,
				     exit_certificates, incarnations_are_ordered,
				     silence_for_the_session_timeout_is_death,
				     unreadable_files_never_prove_silence, proofs_of_exit_are_immediate,
				     a_newer_incarnation_wins_but_the_older_is_waited_out,
				     clear_for_takeover));
}
