/*
 * test_retention.c — DeleteRecords, retention by size and by time,
 * segment.ms rolls and the removal of stray files by housekeeping; read
 * plans stay readable while retention unlinks their segment.
 */
#include <sys/stat.h>

#include "kaas/storage/test/harness.h"
#include "util/clock.h"
#include "util/test/ktest.h"

static ks_partition *leader(const char *dir, const ks_log_config *cfg)
{
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, dir, NULL, 1, cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	return p;
}

/* Appends n batches of 2 records stamped ts. */
static void fill(ks_partition *p, int n, int64_t ts)
{
	for (int i = 0; i < n; i++) {
		kbuild b = KBUILD_INIT;
		ks_append_result res;
		kbuild_simple(&b, -1, -1, -1, 2, ts, "ret", 80, KBUILD_NONE);
		ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
		ck_assert_int_eq(res.error, 0);
		kbuild_free(&b);
	}
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
}

static uint64_t dir_log_bytes(const char *dir)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", h_dir, dir);
	DIR *d = opendir(path);
	uint64_t total = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l > 4 && strcmp(e->d_name + l - 4, ".log") == 0) {
			char f[1024];
			struct stat st;
			snprintf(f, sizeof(f), "%s/%s", path, e->d_name);
			ck_assert_int_eq(stat(f, &st), 0);
			total += (uint64_t)st.st_size;
		}
	}
	closedir(d);
	return total;
}

START_TEST(delete_records)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = 2048;
	ks_partition *p = leader("d", &cfg);
	fill(p, 60, 1700000000000LL);
	int nseg = h_count_files("d", ".log");
	ck_assert_int_gt(nseg, 4);
	int64_t low;
	int16_t err;
	/* Beyond the high watermark, negative: out of range. */
	ck_assert_int_eq(ks_partition_delete_records(p, 121, &low, &err), 0);
	ck_assert_int_eq(err, KERR_OFFSET_OUT_OF_RANGE);
	ck_assert_int_eq(ks_partition_delete_records(p, -5, &low, &err), 0);
	ck_assert_int_eq(err, KERR_OFFSET_OUT_OF_RANGE);
	/* Into the middle of a batch in the third segment. */
	ck_assert_int_eq(ks_partition_delete_records(p, 61, &low, &err), 0);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(low, 61);
	ck_assert_int_eq(ks_partition_log_start(p), 61);
	ck_assert_int_lt(h_count_files("d", ".log"), nseg);
	/* Going back is a no-op answering the current start. */
	ck_assert_int_eq(ks_partition_delete_records(p, 10, &low, &err), 0);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(low, 61);
	ks_read_plan plan = KAAS_READ_PLAN_INIT;
	ck_assert_int_eq(ks_partition_read(p, 60, 100, &plan), 0);
	ck_assert_int_eq(plan.error, KERR_OFFSET_OUT_OF_RANGE);
	ck_assert_int_eq(plan.log_start_offset, 61);
	ck_assert_int_eq(ks_partition_read(p, 61, 1, &plan), 0);
	ck_assert_int_eq(plan.error, 0);
	ck_assert_int_eq(plan.n, 1);
	ks_read_plan_release(&plan);
	int64_t off, ts;
	ck_assert_int_eq(ks_partition_offset_for_time(p, KAAS_TS_EARLIEST, &off, &ts), 0);
	ck_assert_int_eq(off, 61);
	ck_assert_int_eq(ks_partition_offset_for_time(p, 0, &off, &ts), 0);
	ck_assert_int_eq(off, 61);
	/* Persisted: a crash right now (copy) and a clean takeover agree. */
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "cp -a %s/d %s/d2", h_dir, h_dir);
	ck_assert_int_eq(system(cmd), 0);
	ks_partition *q;
	ck_assert_int_eq(ks_partition_open(h_vfs, "d2", NULL, 0, &cfg, &q), 0);
	ck_assert_int_eq(ks_partition_log_start(q), 61);
	ck_assert_int_eq(ks_partition_take_over(q, 2), 0);
	ck_assert_int_eq(ks_partition_log_start(q), 61);
	ck_assert_int_eq(ks_partition_log_end(q), 120);
	ks_partition_close(q);
	/* -1: up to the high watermark; the active segment stays. */
	ck_assert_int_eq(ks_partition_delete_records(p, -1, &low, &err), 0);
	ck_assert_int_eq(low, 120);
	ck_assert_int_eq(h_count_files("d", ".log"), 1);
	ck_assert_int_eq(ks_partition_read(p, 120, 100, &plan), 0);
	ck_assert_int_eq(plan.error, 0);
	ck_assert_int_eq(plan.n, 0);
	fill(p, 1, 1700000000000LL);
	ck_assert_int_eq(ks_partition_log_end(p), 122);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 3), 0);
	ck_assert_int_eq(ks_partition_log_start(p), 120);
	uint8_t *log;
	size_t len = h_read_all(p, 120, 1000, &log);
	ck_assert_int_eq(h_check_log(log, len, 120), 122);
	free(log);
	ks_partition_close(p);
}
END_TEST

START_TEST(retention_by_size)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = 2048;
	cfg.retention_bytes = 6000;
	ks_partition *p = leader("s", &cfg);
	fill(p, 100, 1700000000000LL);
	uint64_t before = dir_log_bytes("s");
	ck_assert_uint_gt(before, 12000);
	int deleted = ks_partition_housekeep(p, 1700000001000LL);
	ck_assert_int_gt(deleted, 0);
	uint64_t after = dir_log_bytes("s");
	/* At least retention.bytes kept, less than one segment more. */
	ck_assert_uint_ge(after, 6000);
	ck_assert_uint_lt(after, 6000 + 2048);
	int64_t start = ks_partition_log_start(p);
	ck_assert_int_gt(start, 0);
	uint8_t *log;
	size_t len = h_read_all(p, start, 4096, &log);
	ck_assert_int_eq(h_check_log(log, len, start), 200);
	free(log);
	/* Nothing more to delete; a follower sees the new start after relinquish. */
	ck_assert_int_eq(ks_partition_housekeep(p, 1700000001000LL), 0);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ck_assert_int_eq(ks_partition_log_start(p), start);
	ks_partition_close(p);
}
END_TEST

START_TEST(retention_by_time)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = 2048;
	cfg.retention_ms = 24LL * 3600 * 1000;
	cfg.segment_ms = -1;
	int64_t now = 1800000000000LL;
	ks_partition *p = leader("t", &cfg);
	fill(p, 50, now - 3 * cfg.retention_ms);  /* expired */
	fill(p, 50, now - cfg.retention_ms / 2);   /* not yet */
	int nseg = h_count_files("t", ".log");
	int deleted = ks_partition_housekeep(p, now);
	ck_assert_int_gt(deleted, 0);
	ck_assert_int_eq(h_count_files("t", ".log"), nseg - deleted);
	int64_t start = ks_partition_log_start(p);
	ck_assert_int_gt(start, 0);
	ck_assert_int_le(start, 100);
	/* Every record older than retention is gone except those sharing a
	 * segment with newer ones. */
	int64_t off, ts;
	ck_assert_int_eq(ks_partition_offset_for_time(p, now - cfg.retention_ms / 2, &off, &ts), 0);
	ck_assert_int_eq(off, 100);
	ks_partition_close(p);
}
END_TEST

START_TEST(segment_ms_rolls_the_active_segment)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_ms = 60000;
	cfg.retention_ms = -1;
	ks_partition *p = leader("m", &cfg);
	fill(p, 3, 1700000000000LL);
	ck_assert_int_eq(h_count_files("m", ".log"), 1);
	/* Not old enough: nothing. */
	ck_assert_int_eq(ks_partition_housekeep(p, ku_wall_ms()), 0);
	ck_assert_int_eq(h_count_files("m", ".log"), 1);
	ck_assert_int_eq(ks_partition_housekeep(p, ku_wall_ms() + 120000), 0);
	ck_assert_int_eq(h_count_files("m", ".log"), 2);
	/* An empty active segment is not rolled again. */
	ck_assert_int_eq(ks_partition_housekeep(p, ku_wall_ms() + 240000), 0);
	ck_assert_int_eq(h_count_files("m", ".log"), 2);
	fill(p, 1, 1700000000000LL);
	uint8_t *log;
	size_t len = h_read_all(p, 0, 1 << 20, &log);
	ck_assert_int_eq(h_check_log(log, len, 0), 8);
	free(log);
	ks_partition_close(p);
}
END_TEST

START_TEST(housekeeping_removes_strays_and_plans_survive_unlink)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = 2048;
	ks_partition *p = leader("h", &cfg);
	fill(p, 40, 1700000000000LL);
	/* A plan on the oldest segment, then DeleteRecords removes it. */
	ks_read_plan plan = KAAS_READ_PLAN_INIT;
	ck_assert_int_eq(ks_partition_read(p, 0, 1 << 20, &plan), 0);
	ck_assert_int_ge(plan.n, 1);
	int64_t low;
	int16_t err;
	ck_assert_int_eq(ks_partition_delete_records(p, 60, &low, &err), 0);
	char path[512];
	snprintf(path, sizeof(path), "%s/h/%010d-%020d.log", h_dir, 1, 0);
	ck_assert_int_eq(access(path, F_OK), -1);
	uint8_t *buf = malloc(plan.r[0].len);
	ck_assert_int_eq(sub_pread_full(plan.r[0].file, buf, plan.r[0].len, plan.r[0].pos), 0);
	ck_assert_int_eq(h_check_log(buf, plan.r[0].len, 0) > 0, 1);
	free(buf);
	ks_read_plan_release(&plan);
	/* Strays: an index without its log, a zombie's segment. */
	FILE *f;
	snprintf(path, sizeof(path), "%s/h/%010d-%020d.index", h_dir, 1, 3);
	f = fopen(path, "w");
	fclose(f);
	snprintf(path, sizeof(path), "%s/h/%010d-%020d.log", h_dir, 0, 70);
	f = fopen(path, "w");
	fputs("zombie", f);
	fclose(f);
	ck_assert_int_eq(ks_partition_housekeep(p, 1700000001000LL), 0);
	ck_assert_int_eq(access(path, F_OK), -1);
	snprintf(path, sizeof(path), "%s/h/%010d-%020d.index", h_dir, 1, 3);
	ck_assert_int_eq(access(path, F_OK), -1);
	/* A newer epoch's file fences housekeeping. */
	snprintf(path, sizeof(path), "%s/h/%010d-%020d.log", h_dir, 9, 80);
	f = fopen(path, "w");
	fclose(f);
	ck_assert_int_eq(ks_partition_housekeep(p, 1700000001000LL), -ESTALE);
	ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_POISONED);
	ck_assert_int_eq(access(path, F_OK), 0);
	ks_append_result res;
	kbuild b = KBUILD_INIT;
	kbuild_simple(&b, -1, -1, -1, 1, 1, "f", 5, KBUILD_NONE);
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, KERR_NOT_LEADER_OR_FOLLOWER);
	kbuild_free(&b);
	ks_partition_close(p);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "storage-retention", .tcase = "retention", .timeout = 60,
					  .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(delete_records, retention_by_size, retention_by_time,
				     segment_ms_rolls_the_active_segment,
				     housekeeping_removes_strays_and_plans_survive_unlink));
}
