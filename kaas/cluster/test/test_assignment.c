/* test_assignment.c — the assignment document and pointer: codec, hostile
 * documents refused by name, publication, polling that reads only the small
 * pointer while nothing changes, and stale controllers ignored. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/cluster/assignment.h"
#include "kaas/cluster/test/harness.h"
#include "util/test/ktest.h"

/* brokers 1..nb, topics t0..t(nt-1) of np partitions, round robin. */
static void build(kcl_assign *a, int64_t ce, int64_t gen, int nb, int nt, int np, int nshards)
{
	ck_assert_int_eq(kcl_assign_alloc(a, (size_t)nb, (size_t)nt, nshards), 0);
	a->gen = (kcl_gen){ce, gen};
	a->controller = 1;
	for (int b = 0; b < nb; b++) {
		a->brokers[b].id = b + 1;
		a->brokers[b].inc = (kcl_incarn){500 + (uint64_t)b, 0x9900 + (uint64_t)b};
	}
	for (int t = 0; t < nt; t++) {
		char name[32];
		snprintf(name, sizeof(name), "topic-%04d", t);
		ck_assert_int_eq(kcl_atopic_alloc(&a->topics[t], name, "8ff59561-6ae4-4256-a104-3e084a3bf123", np), 0);
		a->ntopics = (size_t)t + 1;
		for (int p = 0; p < np; p++)
			a->topics[t].parts[p] = (kcl_slot){(p % nb) + 1, 1 + p % 5};
	}
	for (int s = 0; s < nshards; s++)
		a->shards[s] = (kcl_slot){(s % nb) + 1, 2};
}

START_TEST(document_round_trip)
{
	kcl_assign a, b;
	char *buf, err[256];
	size_t len;
	build(&a, 3, 17, 3, 4, 6, 8);
	a.topics[1].parts[2] = (kcl_slot){-1, 4}; /* nobody can lead it */
	a.topics[2].topic_id[0] = '\0';
	ck_assert_int_eq(kcl_assign_encode(&a, &buf, &len), 0);
	ck_assert_int_eq(kcl_assign_decode(buf, len, &b, err, sizeof(err)), 0);
	ck_assert_int_eq(b.gen.controller_epoch, 3);
	ck_assert_int_eq(b.gen.generation, 17);
	ck_assert_uint_eq(b.nbrokers, 3);
	ck_assert(kcl_incarn_cmp(b.brokers[2].inc, a.brokers[2].inc) == 0);
	ck_assert_uint_eq(b.ntopics, 4);
	ck_assert_int_eq(b.nshards, 8);
	for (size_t t = 0; t < 4; t++) {
		ck_assert_str_eq(b.topics[t].name, a.topics[t].name);
		ck_assert_str_eq(b.topics[t].topic_id, a.topics[t].topic_id);
		ck_assert_int_eq(b.topics[t].n, 6);
		ck_assert(memcmp(b.topics[t].parts, a.topics[t].parts, 6 * sizeof(kcl_slot)) == 0);
	}
	ck_assert(memcmp(b.shards, a.shards, 8 * sizeof(kcl_slot)) == 0);
	const kcl_atopic *t = kcl_assign_topic(&b, "topic-0002");
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_null(kcl_assign_topic(&b, "topic-9"));
	ck_assert_ptr_nonnull(kcl_assign_broker(&b, 2));
	ck_assert_ptr_null(kcl_assign_broker(&b, 4));
	kcl_assign_free(&b);
	for (size_t cut = 0; cut < len; cut += 7)
		ck_assert_int_eq(kcl_assign_decode(buf, cut, &b, err, sizeof(err)), -EBADMSG);
	free(buf);
	kcl_assign_free(&a);
}
END_TEST

/* Re-encodes a built document after `mutate` broke it, then expects the
 * decoder to refuse it with rc and a message naming `says`. */
static void refuse_json(const char *text, int rc, const char *says)
{
	kcl_assign b;
	char err[256] = "";
	int got = kcl_assign_decode(text, strlen(text), &b, err, sizeof(err));
	ck_assert_msg(got == rc, "rc %d, want %d (%s) for %.80s", got, rc, err, text);
	ck_assert_msg(strstr(err, says), "'%s' does not say '%s'", err, says);
}

START_TEST(hostile_documents_are_refused_by_name)
{
	refuse_json("{\"version\":2}", -EPROTONOSUPPORT, "newer");
	refuse_json("{\"version\":1,\"controller_epoch\":0}", -ERANGE, "controller_epoch");
	refuse_json("{\"version\":1,\"controller_epoch\":1,\"generation\":-5}", -ERANGE, "generation");
	const char *head = "{\"version\":1,\"controller_epoch\":1,\"generation\":1,\"controller\":1,";
	char doc[2048];
#define DOC(rest) (snprintf(doc, sizeof(doc), "%s%s", head, rest), doc)
	refuse_json(DOC("\"brokers\":[],\"topics\":[],\"shards\":[]}"), -EINVAL, "mistyped");
	refuse_json(DOC("\"brokers\":[{\"id\":1,\"incarnation\":5,\"nonce\":\"00000000000000aa\"}],"
			"\"topics\":[{\"name\":\"a\",\"topic_id\":\"\",\"leaders\":[2],\"epochs\":[1]}],"
			"\"shards\":{\"leaders\":[],\"epochs\":[]}}"),
		    -ERANGE, "leader 2");
	refuse_json(DOC("\"brokers\":[{\"id\":1,\"incarnation\":5,\"nonce\":\"00000000000000aa\"}],"
			"\"topics\":[{\"name\":\"a\",\"topic_id\":\"\",\"leaders\":[1,1],\"epochs\":[1]}],"
			"\"shards\":{\"leaders\":[],\"epochs\":[]}}"),
		    -EINVAL, "2 leaders but 1 epochs");
	refuse_json(DOC("\"brokers\":[{\"id\":1,\"incarnation\":5,\"nonce\":\"00000000000000aa\"}],"
			"\"topics\":[{\"name\":\"a\",\"topic_id\":\"\",\"leaders\":[1],\"epochs\":[-3]}],"
			"\"shards\":{\"leaders\":[],\"epochs\":[]}}"),
		    -ERANGE, "impossible");
	refuse_json(DOC("\"brokers\":[{\"id\":1,\"incarnation\":5,\"nonce\":\"00000000000000aa\"}],"
			"\"topics\":[{\"name\":\"a\",\"topic_id\":\"\",\"leaders\":[1],\"epochs\":[0]}],"
			"\"shards\":{\"leaders\":[],\"epochs\":[]}}"),
		    -ERANGE, "epoch 0");
	refuse_json(DOC("\"brokers\":[{\"id\":1,\"incarnation\":5,\"nonce\":\"00000000000000aa\"}],"
			"\"topics\":[{\"name\":\"../etc\",\"topic_id\":\"\",\"leaders\":[1],\"epochs\":[1]}],"
			"\"shards\":{\"leaders\":[],\"epochs\":[]}}"),
		    -EINVAL, "invalid name");
	refuse_json(DOC("\"brokers\":[{\"id\":1,\"incarnation\":5,\"nonce\":\"00000000000000aa\"}],"
			"\"topics\":[{\"name\":\"b\",\"topic_id\":\"\",\"leaders\":[1],\"epochs\":[1]},"
			"{\"name\":\"a\",\"topic_id\":\"\",\"leaders\":[1],\"epochs\":[1]}],"
			"\"shards\":{\"leaders\":[],\"epochs\":[]}}"),
		    -EINVAL, "not sorted");
	refuse_json(DOC("\"brokers\":[{\"id\":1,\"incarnation\":5,\"nonce\":\"00000000000000aa\"},"
			"{\"id\":1,\"incarnation\":6,\"nonce\":\"00000000000000ab\"}],"
			"\"topics\":[],\"shards\":{\"leaders\":[],\"epochs\":[]}}"),
		    -EINVAL, "twice");
	refuse_json(DOC("\"brokers\":[{\"id\":1,\"incarnation\":5,\"nonce\":\"00000000000000aa\"}],"
			"\"topics\":[{\"name\":\"a\",\"topic_id\":\"NOT-A-UUID\",\"leaders\":[1],\"epochs\":[1]}],"
			"\"shards\":{\"leaders\":[],\"epochs\":[]}}"),
		    -EINVAL, "topic_id");
	refuse_json(DOC("\"brokers\":[{\"id\":1,\"incarnation\":5,\"nonce\":\"00000000000000aa\"}],"
			"\"topics\":[{\"name\":\"a\",\"topic_id\":\"\",\"leaders\":[],\"epochs\":[]}],"
			"\"shards\":{\"leaders\":[],\"epochs\":[]}}"),
		    -ERANGE, "0 partitions");
#undef DOC
}
END_TEST

START_TEST(pointer_codec_and_refusals)
{
	kcl_aptr p = {.gen = {7, 42}, .controller = 2, .doc_bytes = 1234, .wall_ms = 5}, q;
	char *buf, err[256];
	size_t len;
	ck_assert_int_eq(kcl_aptr_encode(&p, &buf, &len), 0);
	ck_assert_ptr_nonnull(strstr(buf, "assignment/0000000007-00000000000000000042.json"));
	ck_assert_int_eq(kcl_aptr_decode(buf, len, &q, err, sizeof(err)), 0);
	ck_assert(kcl_gen_cmp(q.gen, p.gen) == 0);
	ck_assert_int_eq(q.doc_bytes, 1234);
	ck_assert_uint_lt(len, 300); /* what every broker reads every poll */
	free(buf);
	/* The single-broker file of earlier versions. */
	const char *legacy = "{\"version\":12,\"controller_epoch\":0,\"partitions\":{\"a-0\":{\"leader\":1,\"epoch\":3}}}";
	ck_assert_int_eq(kcl_aptr_decode(legacy, strlen(legacy), &q, err, sizeof(err)), -EPROTONOSUPPORT);
	ck_assert_ptr_nonnull(strstr(err, "single-broker"));
	/* A pointer may only name its own generation's document. */
	const char *elsewhere = "{\"version\":1,\"kind\":\"pointer\",\"controller_epoch\":7,\"generation\":42,"
				"\"controller\":2,\"document\":\"../../etc/passwd\",\"document_bytes\":5,\"wall_ms\":0}";
	ck_assert_int_eq(kcl_aptr_decode(elsewhere, strlen(elsewhere), &q, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "does not match"));
}
END_TEST

START_TEST(idle_polls_read_only_the_pointer)
{
	wrap_vfs *w = wrap_open(h_vfs);
	kcl_assign a, got;
	char err[256];
	/* 10,000 partitions on 3 brokers: 100 topics of 100. */
	build(&a, 1, 1, 3, 100, 100, 64);
	kcl_areader r = {0};
	ck_assert_int_eq(kcl_assign_poll(&w->base, &r, &got, err, sizeof(err)), 0); /* nothing yet */
	ck_assert_int_eq(kcl_assign_publish(h_vfs, &a, 0, err, sizeof(err)), 0);
	uint64_t before = w->bytes_read;
	ck_assert_int_eq(kcl_assign_poll(&w->base, &r, &got, err, sizeof(err)), 1);
	uint64_t first = w->bytes_read - before;
	ck_assert_uint_eq(got.ntopics, 100);
	ck_assert_int_eq(got.topics[99].parts[99].leader, a.topics[99].parts[99].leader);
	kcl_assign_free(&got);
	ck_assert(kcl_gen_cmp(r.applied, a.gen) == 0);
	/* Nothing changes: each poll reads the pointer and nothing else. */
	before = w->bytes_read;
	for (int i = 0; i < 100; i++)
		ck_assert_int_eq(kcl_assign_poll(&w->base, &r, &got, err, sizeof(err)), 0);
	uint64_t idle = (w->bytes_read - before) / 100;
	ck_assert_uint_eq(r.docs_read, 1);
	ck_assert_uint_lt(idle, 300);
	ck_assert_uint_gt(first, 50 * idle);
	printf("assignment of 10000 partitions: first read %llu bytes, idle poll %llu bytes\n",
	       (unsigned long long)first, (unsigned long long)idle);
	/* A change is picked up by the next poll. */
	a.gen.generation = 2;
	a.topics[0].parts[0] = (kcl_slot){2, 9};
	ck_assert_int_eq(kcl_assign_publish(h_vfs, &a, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(kcl_assign_poll(&w->base, &r, &got, err, sizeof(err)), 1);
	ck_assert_int_eq(got.topics[0].parts[0].leader, 2);
	ck_assert_int_eq(got.topics[0].parts[0].epoch, 9);
	kcl_assign_free(&got);
	kcl_assign_free(&a);
	sub_destroy(&w->base);
}
END_TEST

START_TEST(older_controllers_are_ignored)
{
	kcl_assign a, got;
	char err[256];
	kcl_areader r = {0};
	build(&a, 2, 5, 2, 1, 4, 0);
	ck_assert_int_eq(kcl_assign_publish(h_vfs, &a, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(kcl_assign_poll(h_vfs, &r, &got, err, sizeof(err)), 1);
	kcl_assign_free(&got);
	/* A deposed controller of epoch 1 publishes late. */
	kcl_assign old;
	build(&old, 1, 99, 2, 1, 4, 0);
	old.topics[0].parts[0] = (kcl_slot){2, 30};
	ck_assert_int_eq(kcl_assign_publish(h_vfs, &old, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(kcl_assign_poll(h_vfs, &r, &got, err, sizeof(err)), -ESTALE);
	ck_assert_ptr_nonnull(strstr(err, "older"));
	ck_assert(kcl_gen_cmp(r.applied, a.gen) == 0);
	/* A reader that learnt of epoch 3 from controller/ ignores epoch 2 too. */
	kcl_areader fresh = {0};
	kcl_areader_note_epoch(&fresh, 3);
	ck_assert_int_eq(kcl_assign_publish(h_vfs, &a, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(kcl_assign_poll(h_vfs, &fresh, &got, err, sizeof(err)), -ESTALE);
	ck_assert_int_eq(fresh.applied.controller_epoch, 0);
	/* The successor's publication is taken. */
	a.gen = (kcl_gen){3, 1};
	ck_assert_int_eq(kcl_assign_publish(h_vfs, &a, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(kcl_assign_poll(h_vfs, &fresh, &got, err, sizeof(err)), 1);
	kcl_assign_free(&got);
	kcl_assign_free(&old);
	kcl_assign_free(&a);
}
END_TEST

START_TEST(broken_publications_keep_the_last_applied)
{
	kcl_assign a, got;
	char err[256];
	kcl_areader r = {0};
	build(&a, 1, 1, 2, 1, 4, 0);
	ck_assert_int_eq(kcl_assign_publish(h_vfs, &a, 0, err, sizeof(err)), 0);
	ck_assert_int_eq(kcl_assign_poll(h_vfs, &r, &got, err, sizeof(err)), 1);
	kcl_assign_free(&got);
	/* A pointer to a document that is not there. */
	const char *ptr = "{\"version\":1,\"kind\":\"pointer\",\"controller_epoch\":1,\"generation\":2,"
			  "\"controller\":1,\"document\":\"assignment/0000000001-00000000000000000002.json\","
			  "\"document_bytes\":10,\"wall_ms\":0}";
	h_put("assignment.json", ptr, strlen(ptr));
	ck_assert_int_eq(kcl_assign_poll(h_vfs, &r, &got, err, sizeof(err)), -ENOENT);
	/* One whose size is not what the pointer says. */
	h_put("assignment/0000000001-00000000000000000002.json", "{\"version\":1}", 13);
	ck_assert_int_eq(kcl_assign_poll(h_vfs, &r, &got, err, sizeof(err)), -EBADMSG);
	ck_assert_ptr_nonnull(strstr(err, "the pointer says"));
	/* A truncated pointer. */
	h_put("assignment.json", ptr, 40);
	ck_assert_int_eq(kcl_assign_poll(h_vfs, &r, &got, err, sizeof(err)), -EBADMSG);
	ck_assert(kcl_gen_cmp(r.applied, a.gen) == 0);
	ck_assert_uint_eq(r.refused, 3);
	kcl_assign_free(&a);
}
END_TEST

START_TEST(cleanup_keeps_the_newest_documents)
{
	kcl_assign a;
	char err[256];
	build(&a, 1, 1, 2, 1, 2, 0);
	for (int64_t g = 1; g <= 6; g++) {
		a.gen = (kcl_gen){g <= 3 ? 1 : 2, g};
		ck_assert_int_eq(kcl_assign_publish(h_vfs, &a, 0, err, sizeof(err)), 0);
	}
	h_put("assignment/README", "x", 1);
	unsigned removed;
	ck_assert_int_eq(kcl_assign_cleanup(h_vfs, a.gen, 2, &removed), 0);
	ck_assert_uint_eq(removed, 4);
	ck_assert_int_eq(kcl_assign_cleanup(h_vfs, a.gen, 2, &removed), 0);
	ck_assert_uint_eq(removed, 0);
	char **names;
	size_t n;
	ck_assert_int_eq(sub_list(h_vfs, "assignment", &names, &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(names[0], "0000000002-00000000000000000005.json");
	ck_assert_str_eq(names[1], "0000000002-00000000000000000006.json");
	ck_assert_str_eq(names[2], "README");
	sub_names_free(names, n);
	kcl_areader r = {0};
	kcl_assign got;
	ck_assert_int_eq(kcl_assign_poll(h_vfs, &r, &got, err, sizeof(err)), 1);
	kcl_assign_free(&got);
	kcl_assign_free(&a);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "cluster-assignment", .tcase = "assignment",
					  .timeout = 120, .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(document_round_trip, hostile_documents_are_refused_by_name,
				     pointer_codec_and_refusals, idle_polls_read_only_the_pointer,
				     older_controllers_are_ignored,
				     broken_publications_keep_the_last_applied,
				     cleanup_keeps_the_newest_documents));
}
