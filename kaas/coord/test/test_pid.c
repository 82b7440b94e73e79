/* test_pid.c — producer IDs: unique within a run, never reissued after a
 * restart, never shared by two coordinators racing for blocks on the same
 * volume; epoch bumps (v3+); transactional ids refused. */
#include <pthread.h>

#include "kaas/coord/test/harness.h"
#include "util/test/ktest.h"

typedef struct pid_ans {
	int16_t err;
	int64_t pid;
	int16_t epoch;
} pid_ans;

static pid_ans init_pid(kg_coord *c, int16_t v, const char *txn, int64_t pid, int16_t epoch)
{
	int flex = v >= 2;
	kw_wr w = KAAS_WR_INIT;
	kw_wr_str(&w, flex, txn);
	kw_wr_i32(&w, 60000);
	if (v >= 3) {
		kw_wr_i64(&w, pid);
		kw_wr_i16(&w, epoch);
	}
	kw_wr_tags(&w, flex);
	th_resp r = {0};
	kg_coord_call call = {KAAS_API_INIT_PRODUCER_ID, v, flex, {"p", 1}, "/h", th_done, &r, NULL, 0, NULL};
	kw_rd rd;
	kw_wr resp = KAAS_WR_INIT;
	kw_rd_init(&rd, w.buf, w.len);
	ck_assert_int_eq(kg_coord_handle(c, &call, &rd, &resp), KAAS_HANDLED);
	ck_assert_uint_eq(kw_rd_remain(&rd), 0);
	th_done(&r, &resp);
	tr rr;
	tr_init(&rr, &r, flex);
	pid_ans a;
	ck_assert_int_eq(tr_i32(&rr), 0);
	a.err = tr_i16(&rr);
	a.pid = tr_i64(&rr);
	a.epoch = tr_i16(&rr);
	tr_tags(&rr);
	tr_end(&rr);
	th_resp_free(&r);
	kw_wr_free(&w);
	return a;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

START_TEST(ids_unique_and_never_reissued_after_restart)
{
	th t;
	th_open(&t);
	enum { PER_RUN = 1500, RUNS = 3 };
	int64_t *seen = malloc(sizeof(int64_t) * PER_RUN * RUNS);
	size_t n = 0;
	for (int run = 0; run < RUNS; run++) {
		for (int i = 0; i < PER_RUN; i++) {
			pid_ans a = init_pid(t.c, (int16_t)(i % 5), NULL, -1, -1);
			ck_assert_int_eq(a.err, 0);
			ck_assert_int_eq(a.epoch, 0);
			ck_assert(a.pid >= 0);
			seen[n++] = a.pid;
		}
		th_restart(&t); /* a crash would do the same: the block in use is abandoned */
	}
	qsort(seen, n, sizeof(*seen), cmp64);
	for (size_t i = 1; i < n; i++)
		ck_assert_msg(seen[i] != seen[i - 1], "producer id %lld handed out twice", (long long)seen[i]);
	ck_assert_int_eq(seen[0], 0);
	/* Each run: two blocks (1500 ids); runs never share a block. */
	char **names;
	size_t nn;
	ck_assert_int_eq(sub_list(t.vol.vfs, "pid-blocks", &names, &nn), 0);
	ck_assert_uint_eq(nn, 6);
	ck_assert_str_eq(names[0], "0000000000");
	ck_assert_str_eq(names[5], "0000000005");
	sub_names_free(names, nn);
	char *buf;
	size_t len;
	ck_assert_int_eq(sub_read_file(t.vol.vfs, "pid-blocks/0000000002", 4096, &buf, &len), 0);
	ck_assert(strstr(buf, "\"broker_id\":7"));
	ck_assert(strstr(buf, "\"first_id\":2000"));
	free(buf);
	free(seen);
	th_close(&t);
}
END_TEST

/* Two coordinators (two independent substrate clients of one volume)
 * allocate at the same time: the O_EXCL claims keep them apart. */
typedef struct racer {
	kg_coord *c;
	int64_t ids[2500];
} racer;

static void *race(void *arg)
{
	racer *r = arg;
	for (int i = 0; i < 2500; i++) {
		pid_ans a = init_pid(r->c, 4, NULL, -1, -1);
		r->ids[i] = a.err ? -1 : a.pid;
	}
	return NULL;
}

START_TEST(two_coordinators_race_for_blocks)
{
	th t;
	th_open(&t);
	sub_vfs *v2;
	char err[256];
	ck_assert_int_eq(sub_open_url(t.vol.dir, &v2, err, sizeof(err)), 0);
	kg_coord_config cfg2 = t.cfg;
	cfg2.broker_id = 8;
	kg_coord *c2;
	ck_assert_int_eq(kg_coord_create(v2, &cfg2, &c2), 0);
	static racer r[2];
	r[0].c = t.c;
	r[1].c = c2;
	pthread_t th1, th2;
	ck_assert_int_eq(pthread_create(&th1, NULL, race, &r[0]), 0);
	ck_assert_int_eq(pthread_create(&th2, NULL, race, &r[1]), 0);
	pthread_join(th1, NULL);
	pthread_join(th2, NULL);
	int64_t all[5000];
	for (int i = 0; i < 2500; i++) {
		ck_assert(r[0].ids[i] >= 0 && r[1].ids[i] >= 0);
		all[i] = r[0].ids[i];
		all[2500 + i] = r[1].ids[i];
	}
	qsort(all, 5000, sizeof(all[0]), cmp64);
	for (int i = 1; i < 5000; i++)
		ck_assert_msg(all[i] != all[i - 1], "both coordinators handed out %lld", (long long)all[i]);
	/* Every block has one owner, and it is the one that used it. */
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 2500; i += 250) {
			char path[64], *buf;
			size_t len;
			snprintf(path, sizeof(path), "pid-blocks/%010lld", (long long)(r[k].ids[i] / 1000));
			ck_assert_int_eq(sub_read_file(t.vol.vfs, path, 4096, &buf, &len), 0);
			ck_assert(strstr(buf, k == 0 ? "\"broker_id\":7" : "\"broker_id\":8"));
			free(buf);
		}
	}
	kg_coord_close(c2);
	sub_destroy(v2);
	th_close(&t);
}
END_TEST

START_TEST(epoch_bump_and_errors)
{
	th t;
	th_open(&t);
	pid_ans a = init_pid(t.c, 4, NULL, -1, -1);
	ck_assert_int_eq(a.err, 0);
	/* KIP-360: same id, next epoch. */
	pid_ans b = init_pid(t.c, 3, NULL, a.pid, 0);
	ck_assert_int_eq(b.err, 0);
	ck_assert_int_eq(b.pid, a.pid);
	ck_assert_int_eq(b.epoch, 1);
	b = init_pid(t.c, 4, NULL, a.pid, 41);
	ck_assert_int_eq(b.epoch, 42);
	/* The epoch is used up: a new id. */
	b = init_pid(t.c, 4, NULL, a.pid, 32766);
	ck_assert_int_eq(b.err, 0);
	ck_assert_int_ne(b.pid, a.pid);
	ck_assert_int_eq(b.epoch, 0);
	/* An id nobody issued: a new one, not that one. */
	b = init_pid(t.c, 4, NULL, 987654321, 3);
	ck_assert_int_eq(b.err, 0);
	ck_assert_int_ne(b.pid, 987654321);
	ck_assert_int_eq(b.epoch, 0);
	/* Half a producer identity. */
	b = init_pid(t.c, 3, NULL, a.pid, -1);
	ck_assert_int_eq(b.err, KERR_INVALID_REQUEST);
	ck_assert_int_eq(b.pid, -1);
	/* Transactions are not there yet: a refusal every client treats as fatal. */
	for (int16_t v = 0; v <= 4; v++) {
		b = init_pid(t.c, v, "txn-1", -1, -1);
		ck_assert_int_eq(b.err, KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
		ck_assert_int_eq(b.pid, -1);
		ck_assert_int_eq(b.epoch, -1);
	}
	th_close(&t);
}
END_TEST

/* The volume refuses the claim: a retriable error, and no id. */
START_TEST(claim_failure_is_an_error)
{
	th t;
	th_open(&t);
	char path[512];
	snprintf(path, sizeof(path), "%s/pid-blocks", t.vol.dir);
	ck_assert_int_eq(rmdir(path), 0);
	FILE *f = fopen(path, "w");
	fclose(f);
	pid_ans a = init_pid(t.c, 1, NULL, -1, -1);
	ck_assert_int_eq(a.err, KERR_COORDINATOR_NOT_AVAILABLE);
	ck_assert_int_eq(a.pid, -1);
	unlink(path);
	a = init_pid(t.c, 1, NULL, -1, -1);
	ck_assert_int_eq(a.err, 0);
	/* The failed attempt may have left its name claimed; either way the
	 * id comes from a block nobody else can have. */
	ck_assert(a.pid >= 0);
	th_close(&t);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "coord-pid", .tcase = "pid", .timeout = 120 },
			  KTEST_LIST(ids_unique_and_never_reissued_after_restart,
				     two_coordinators_race_for_blocks,
				     epoch_bump_and_errors,
				     claim_failure_is_an_error));
}
