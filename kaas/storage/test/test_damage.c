/*
 * test_damage.c — damage the engine did not cause and numbers it did not
 * write: a flipped bit or a truncation in a sealed segment (after a crash
 * and after a clean close), epochs of 2^31-1 in a manifest, a segment name
 * and a producer snapshot, the background scrub and its rate bound, and
 * the descriptors an idle and an active partition hold.
 *
 * The rule under test (docs/storage.md, "Damage and foreign numbers"):
 * recovery scans only the tail written since the last durable point;
 * damage anywhere else is reported, counted and quarantined, never a
 * reason to truncate or delete, and a fetch that meets it is answered
 * CORRUPT_MESSAGE instead of skipping the records.
 */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "kaas/storage/test/harness.h"
#include "util/test/ktest.h"
#include "util/clock.h"
#include "util/crc32c.h"

static void snapshot_dir(const char *src, const char *dst)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "cp -a %s/%s %s/%s", h_dir, src, h_dir, dst);
	ck_assert_int_eq(system(cmd), 0);
}

static void write_file(const char *dir, const char *leaf, const void *buf, size_t len)
{
	char path[1024];
	snprintf(path, sizeof(path), "%s/%s/%s", h_dir, dir, leaf);
	FILE *f = fopen(path, "wb");
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
	fclose(f);
}

/* Files whose name ends with suffix anywhere under the partition directory
 * (its quarantine area included). */
static int count_tree(const char *dir, const char *suffix)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "find %s/%s -name '*%s' | wc -l", h_dir, dir, suffix);
	FILE *f = popen(cmd, "r");
	int n = -1;
	ck_assert_int_eq(fscanf(f, "%d", &n), 1);
	pclose(f);
	return n;
}

static int count_quarantine(const char *dir)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "ls %s/%s/quarantine 2>/dev/null | wc -l", h_dir, dir);
	FILE *f = popen(cmd, "r");
	int n = -1;
	ck_assert_int_eq(fscanf(f, "%d", &n), 1);
	pclose(f);
	return n;
}

/* A leader at epoch 1 that wrote n batches of 3 records (offsets 0..3n-1). */
static ks_partition *make_log(const char *dir, int n, int64_t segment_bytes, kbuild *all)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = segment_bytes;
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, dir, NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	for (int i = 0; i < n; i++) {
		kbuild b = KBUILD_INIT;
		ks_append_result res;
		kbuild_simple(&b, -1, -1, -1, 3, 1700000000000LL + i, "rec", 20 + i % 40, KBUILD_NONE);
		ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
		ck_assert_int_eq(res.error, 0);
		kbuild__put(&all->buf, &all->len, &all->cap, b.buf, b.len);
		kbuild_free(&b);
	}
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	return p;
}

/* Where batch k of `all` is: its byte position in the whole log, size,
 * base offset. */
static void batch_at(const kbuild *all, int k, size_t *pos, size_t *size, int64_t *base)
{
	size_t p = 0;
	int64_t off = 0;
	for (int i = 0;; i++) {
		kb_hdr h;
		ks__kb_decode(all->buf + p, &h);
		if (i == k) {
			*pos = p;
			*size = kb_size(&h);
			*base = off;
			return;
		}
		p += kb_size(&h);
		off += h.count;
	}
}

/* The segment of dir holding offset off: its path, base, the base of the
 * next segment (INT64_MAX if none) and the byte position of off's batch in
 * the whole log `all` at which the segment starts. */
typedef struct segloc {
	char path[512];
	int64_t base, next;
	size_t start; /* position of the segment's first batch in all */
} segloc;

static void seg_of(const char *dir, const kbuild *all, int64_t off, segloc *out)
{
	char cmd[1024], line[512];
	snprintf(cmd, sizeof(cmd), "ls %s/%s/*.log", h_dir, dir);
	FILE *ls = popen(cmd, "r");
	out->base = -1;
	out->next = INT64_MAX;
	while (fgets(line, sizeof(line), ls)) {
		line[strcspn(line, "\n")] = 0;
		long long base = atoll(strrchr(line, '-') + 1);
		if (base <= off && base > out->base) {
			out->base = base;
			snprintf(out->path, sizeof(out->path), "%s", line);
		} else if (base > off && base < out->next) {
			out->next = base;
		}
	}
	pclose(ls);
	ck_assert_int_ge(out->base, 0);
	size_t p = 0;
	int64_t o = 0;
	while (o < out->base) {
		kb_hdr h;
		ks__kb_decode(all->buf + p, &h);
		p += kb_size(&h);
		o += h.count;
	}
	out->start = p;
}

static void flip_byte(const char *path, size_t at)
{
	int fd = open(path, O_RDWR);
	ck_assert_int_ge(fd, 0);
	uint8_t byte;
	ck_assert_int_eq(pread(fd, &byte, 1, (off_t)at), 1);
	byte ^= 0x10;
	ck_assert_int_eq(pwrite(fd, &byte, 1, (off_t)at), 1);
	close(fd);
}

/* One fetch at `off`: its error, and the bytes of the whole batches it
 * returned appended to *buf; *next the offset after the last whole one. */
static int16_t fetch(ks_partition *p, int64_t off, int32_t max_bytes, kbuild *buf, int64_t *next)
{
	ks_read_plan plan = KAAS_READ_PLAN_INIT;
	ck_assert_int_eq(ks_partition_read(p, off, max_bytes, &plan), 0);
	*next = off;
	if (plan.error) {
		ks_read_plan_release(&plan);
		return plan.error;
	}
	uint8_t *b = malloc(plan.total ? plan.total : 1);
	size_t len = 0;
	for (int i = 0; i < plan.n; i++) {
		ck_assert_int_eq(sub_pread_full(plan.r[i].file, b + len, plan.r[i].len, plan.r[i].pos), 0);
		len += plan.r[i].len;
	}
	ks_read_plan_release(&plan);
	size_t scanned = 0;
	while (len - scanned >= KB_HDR) {
		kb_hdr h;
		ks__kb_decode(b + scanned, &h);
		if (kb_size(&h) > len - scanned)
			break;
		/* A fetch never starts after the offset asked for: no skipping. */
		if (scanned == 0)
			ck_assert_int_le(h.base_offset, off);
		ck_assert_uint_eq(ks__kb_crc(b + scanned, kb_size(&h)), h.crc);
		*next = kb_last_offset(&h) + 1;
		scanned += kb_size(&h);
	}
	kbuild__put(&buf->buf, &buf->len, &buf->cap, b, scanned);
	free(b);
	return 0;
}

/* Reads from `from` until an error or the high watermark; returns the error
 * (0 at the end) and leaves *at where it stopped. */
static int16_t read_until_error(ks_partition *p, int64_t from, kbuild *buf, int64_t *at)
{
	int64_t cur = from;
	int64_t hw = ks_partition_high_watermark(p);
	while (cur < hw) {
		int64_t next;
		int16_t err = fetch(p, cur, 700, buf, &next);
		if (err) {
			*at = cur;
			return err;
		}
		ck_assert_int_gt(next, cur);
		cur = next;
	}
	*at = cur;
	return 0;
}

/* The log of dir after a take-over at epoch 2 must be all of `all` except
 * the offsets [bad_lo, bad_hi), which answer CORRUPT_MESSAGE: the records
 * before the damage, and every record after it, are served as appended. */
static void check_contained(const char *dir, const kbuild *all, int64_t leo, size_t bad_pos,
			    int64_t bad_lo, int64_t bad_hi, size_t resume_pos)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, dir, NULL, 0, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	ck_assert_int_eq(ks_partition_log_end(p), leo);
	ck_assert_int_eq(ks_partition_high_watermark(p), leo);
	kbuild got = KBUILD_INIT;
	int64_t at;
	int16_t err = read_until_error(p, 0, &got, &at);
	ck_assert_msg(err == KERR_CORRUPT_MESSAGE, "read from 0 ended at %lld with %s", (long long)at,
		      kw_kerr_name(err));
	ck_assert_int_eq(at, bad_lo);
	ck_assert_uint_eq(got.len, bad_pos);
	ck_assert_mem_eq(got.buf, all->buf, bad_pos);
	/* Every offset of the damaged range says so. */
	for (int64_t o = bad_lo; o < bad_hi; o++) {
		int64_t next;
		kbuild none = KBUILD_INIT;
		ck_assert_int_eq(fetch(p, o, 700, &none, &next), KERR_CORRUPT_MESSAGE);
		kbuild_free(&none);
	}
	/* And everything after it is still there. */
	kbuild rest = KBUILD_INIT;
	ck_assert_int_eq(read_until_error(p, bad_hi, &rest, &at), 0);
	ck_assert_int_eq(at, leo);
	ck_assert_uint_eq(rest.len, all->len - resume_pos);
	ck_assert_mem_eq(rest.buf, all->buf + resume_pos, rest.len);
	ks_partition_stats st;
	ks_partition_stats_get(p, &st);
	ck_assert_uint_ge(st.corrupt_ranges, 1);
	ck_assert_uint_ge(st.corrupt_reads, 1);
	ck_assert_uint_ge(st.quarantined_files, 1);
	ks_storage_stats tot;
	ks_storage_stats_get(&tot);
	ck_assert_uint_ge(tot.corrupt_ranges, 1);
	/* Appends go on after the damage. */
	ck_assert_int_eq(h_put(p, 2, "after", 10), leo);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	/* A second take-over knows the damage from the quarantine area. */
	ck_assert_int_eq(ks_partition_take_over(p, 3), 0);
	ck_assert_int_eq(ks_partition_log_end(p), leo + 2);
	int64_t next;
	kbuild none = KBUILD_INIT;
	ck_assert_int_eq(fetch(p, bad_lo, 700, &none, &next), KERR_CORRUPT_MESSAGE);
	kbuild_free(&none);
	ks_partition_close(p);
	kbuild_free(&got);
	kbuild_free(&rest);
}

/* The crash the issue describes: a leader killed (its directory copied while
 * it runs), a bit flipped in an early sealed segment. */
START_TEST(bitflip_in_a_sealed_segment_after_a_crash)
{
	kbuild all = KBUILD_INIT;
	ks_partition *live = make_log("live", 60, 2048, &all);
	int nlogs = h_count_files("live", ".log");
	ck_assert_int_ge(nlogs, 5);
	snapshot_dir("live", "crashed");
	size_t pos, size;
	int64_t base;
	batch_at(&all, 15, &pos, &size, &base);
	segloc s;
	seg_of("crashed", &all, base, &s);
	ck_assert_int_gt(s.base, 0);            /* not the first segment ... */
	ck_assert_int_lt(s.next, 150);          /* ... nor the last */
	flip_byte(s.path, pos - s.start + KB_HDR + 7);
	/* Only batch 15 is lost (the walk resynchronises after it). */
	check_contained("crashed", &all, 180, pos, base, base + 3, pos + size);
	/* Nothing was deleted: every segment is still on the volume. */
	ck_assert_int_eq(count_tree("crashed", ".log"), nlogs + 2);
	ck_assert_int_ge(count_quarantine("crashed"), 1);
	ks_partition_close(live);
	kbuild_free(&all);
}
END_TEST

START_TEST(truncation_of_a_sealed_segment_after_a_crash)
{
	kbuild all = KBUILD_INIT;
	ks_partition *live = make_log("live", 60, 2048, &all);
	int nlogs = h_count_files("live", ".log");
	snapshot_dir("live", "crashed");
	size_t pos, size;
	int64_t base;
	batch_at(&all, 15, &pos, &size, &base);
	segloc s;
	seg_of("crashed", &all, base, &s);
	ck_assert_int_lt(s.next, 150);
	ck_assert_int_eq(truncate(s.path, (off_t)(pos - s.start + 20)), 0);
	/* From the cut to the next segment's base nothing is readable. */
	size_t npos, nsize;
	int64_t nbase = -1;
	int k = 15;
	do
		batch_at(&all, ++k, &npos, &nsize, &nbase);
	while (nbase < s.next);
	check_contained("crashed", &all, 180, pos, base, s.next, npos);
	ck_assert_int_eq(count_tree("crashed", ".log"), nlogs + 2);
	ks_partition_close(live);
	kbuild_free(&all);
}
END_TEST

/* The same damage after a clean shutdown: recovery has nothing to scan,
 * the damage is found where the log is read. */
START_TEST(damage_after_a_clean_close_is_answered_not_skipped)
{
	kbuild all = KBUILD_INIT;
	ks_partition *p = make_log("live", 60, 2048, &all);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);
	int nlogs = h_count_files("live", ".log");
	size_t pos, size;
	int64_t base;
	batch_at(&all, 20, &pos, &size, &base);
	segloc s;

	snapshot_dir("live", "flip");
	seg_of("flip", &all, base, &s);
	flip_byte(s.path, pos - s.start + size - 3);
	check_contained("flip", &all, 180, pos, base, base + 3, pos + size);
	ck_assert_int_eq(count_tree("flip", ".log"), nlogs + 2);

	snapshot_dir("live", "cut");
	seg_of("cut", &all, base, &s);
	ck_assert_int_eq(truncate(s.path, (off_t)(pos - s.start + 70)), 0);
	size_t npos, nsize;
	int64_t nbase = -1;
	int k = 20;
	do
		batch_at(&all, ++k, &npos, &nsize, &nbase);
	while (nbase < s.next);
	check_contained("cut", &all, 180, pos, base, s.next, npos);
	ck_assert_int_eq(count_tree("cut", ".log"), nlogs + 2);
	kbuild_free(&all);
}
END_TEST

/* The background scrub finds damage nobody has read yet, never faster than
 * its bound; a clean log's pass reads every sealed byte and finds nothing. */
START_TEST(scrub_finds_damage_within_its_rate)
{
	kbuild all = KBUILD_INIT;
	ks_partition *p = make_log("live", 60, 2048, &all);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);
	snapshot_dir("live", "flip");
	size_t pos, size;
	int64_t base;
	batch_at(&all, 25, &pos, &size, &base);
	segloc s;
	seg_of("flip", &all, base, &s);
	flip_byte(s.path, pos - s.start + KB_HDR + 2);

	const char *dirs[] = {"live", "flip"};
	for (int d = 0; d < 2; d++) {
		ks_log_config cfg = h_cfg();
		ck_assert_int_eq(ks_partition_open(h_vfs, dirs[d], NULL, 0, &cfg, &p), 0);
		ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
		ks_scrub_rate rate;
		const int64_t bps = 1000;
		ks_scrub_rate_init(&rate, bps, 0);
		int64_t now = 0, total = 0;
		int done = 0, steps = 0;
		while (!done) {
			int64_t n = ks_partition_scrub(p, &rate, now, &done);
			ck_assert_int_ge(n, 0);
			total += n;
			/* The bound: the rate times the time, plus one burst and
			 * one batch of debt. */
			ck_assert_int_le(total, bps * now / 1000 + bps + (int64_t)size + 512);
			now += 100;
			ck_assert_int_lt(++steps, 100000);
		}
		ck_assert_int_gt(now, 1000 * (int64_t)(all.len / 2) / bps); /* it took its time */
		ks_partition_stats st;
		ks_partition_stats_get(p, &st);
		ck_assert_uint_eq(st.scrub_passes, 1);
		if (d == 0) {
			/* Every sealed byte was read (the active segment is empty). */
			ck_assert_int_eq(total, (int64_t)all.len);
			ck_assert_uint_eq(st.corrupt_ranges, 0);
			ck_assert_int_eq(count_quarantine("live"), 0);
		} else {
			ck_assert_uint_eq(st.corrupt_ranges, 1);
			ck_assert_int_ge(count_quarantine("flip"), 1);
			int64_t next;
			kbuild none = KBUILD_INIT;
			ck_assert_int_eq(fetch(p, base + 1, 700, &none, &next), KERR_CORRUPT_MESSAGE);
			ck_assert_int_eq(fetch(p, base + 3, 700, &none, &next), 0);
			kbuild_free(&none);
		}
		/* Not leader: nothing to scrub. */
		ck_assert_int_eq(ks_partition_relinquish(p), 0);
		ck_assert_int_eq(ks_partition_scrub(p, &rate, now + 10000, &done), -EPERM);
		ks_partition_close(p);
	}
	kbuild_free(&all);
}
END_TEST

static void write_manifest(const char *dir, const char *json)
{
	write_file(dir, "manifest.json", json, strlen(json));
}

/* A manifest claiming epoch 2^31-1 must not make the partition unleadable
 * (today: -ESTALE at every epoch the broker can pick, forever). */
START_TEST(foreign_epoch_in_the_manifest)
{
	kbuild all = KBUILD_INIT;
	ks_partition *p = make_log("m", 30, 2048, &all);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);
	write_manifest("m", "{\"version\":1,\"topic_id\":null,\"epoch\":2147483647,"
			    "\"high_watermark\":90,\"log_start_offset\":0}");
	ks_log_config cfg = h_cfg();
	ck_assert_int_eq(ks_partition_open(h_vfs, "m", NULL, 0, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 3), 0);
	ck_assert_int_eq(ks_partition_log_end(p), 90);
	uint8_t *log;
	size_t len = h_read_all(p, 0, 4000, &log);
	ck_assert_uint_eq(len, all.len);
	ck_assert_mem_eq(log, all.buf, len);
	free(log);
	ks_partition_stats st;
	ks_partition_stats_get(p, &st);
	ck_assert_uint_ge(st.foreign_numbers, 1);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	/* Kept for the operator, not deleted. */
	ck_assert_int_eq(count_quarantine("m"), 1);
	/* A newer epoch the caller knows was issued still fences. */
	write_manifest("m", "{\"version\":1,\"topic_id\":null,\"epoch\":6,"
			    "\"high_watermark\":90,\"log_start_offset\":0}");
	ck_assert_int_eq(ks_partition_take_over_bounded(p, 5, 6), -ESTALE);
	ck_assert_int_eq(ks_partition_take_over_bounded(p, 6, 6), 0);
	ck_assert_int_eq(ks_partition_log_end(p), 90);
	ks_partition_close(p);
	kbuild_free(&all);
}
END_TEST

START_TEST(foreign_epoch_in_a_segment_name)
{
	kbuild all = KBUILD_INIT;
	ks_partition *p = make_log("s", 30, 2048, &all);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);
	/* A valid batch at offset 90 in a segment of epoch 2^31-1. */
	kbuild b = KBUILD_INIT;
	kbuild_simple(&b, -1, -1, -1, 4, 1700000000000LL, "foreign", 10, KBUILD_NONE);
	kb_put64(b.buf, 90);
	write_file("s", "2147483647-00000000000000000090.log", b.buf, b.len);
	kbuild_free(&b);
	ks_log_config cfg = h_cfg();
	ck_assert_int_eq(ks_partition_open(h_vfs, "s", NULL, 0, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 3), 0);
	/* Not obeyed: its batch is not part of the log. */
	ck_assert_int_eq(ks_partition_log_end(p), 90);
	ck_assert_int_eq(h_put(p, 2, "mine", 10), 90);
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	ks_partition_stats st;
	ks_partition_stats_get(p, &st);
	ck_assert_uint_ge(st.foreign_numbers, 1);
	ck_assert_uint_ge(st.quarantined_files, 1);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	/* Moved aside, not deleted; and the next take-over is not fenced. */
	ck_assert_int_eq(count_tree("s", "2147483647-00000000000000000090.log"), 1);
	ck_assert_int_eq(h_count_files("s", "2147483647-00000000000000000090.log"), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 4), 0);
	ck_assert_int_eq(ks_partition_log_end(p), 92);
	uint8_t *log;
	size_t len = h_read_all(p, 0, 4000, &log);
	ck_assert_int_eq(h_check_log(log, len, 0), 92);
	ck_assert_ptr_null(memmem(log, len, "foreign", 7));
	free(log);
	ks_partition_close(p);
	kbuild_free(&all);
}
END_TEST

/* A producer snapshot claiming epoch 2^31-1: rebuilt from the log, the
 * file kept aside. */
START_TEST(foreign_epoch_in_the_producer_snapshot)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "ps", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	kbuild b = KBUILD_INIT;
	ks_append_result res;
	kbuild_simple(&b, 7, 0, 0, 2, 1700000000000LL, "idem", 10, KBUILD_NONE);
	ck_assert_int_eq(h_append(p, &b, &res), 0);
	kbuild_free(&b);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	/* Rewrite the snapshot's epoch field (bytes 8..11) and fix its CRC. */
	char path[1024];
	snprintf(path, sizeof(path), "%s/ps/producer-state.snapshot", h_dir);
	FILE *f = fopen(path, "rb");
	uint8_t buf[4096];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	ck_assert_uint_gt(n, 28);
	kb_put32(buf + 8, 0x7fffffffu);
	kb_put32(buf + n - 4, ku_crc32c(0, buf, n - 4));
	write_file("ps", "producer-state.snapshot", buf, n);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	ks_partition_stats st;
	ks_partition_stats_get(p, &st);
	ck_assert_uint_ge(st.foreign_numbers, 1);
	/* The state came from the log: a retry is still a duplicate. */
	kbuild_simple(&b, 7, 0, 0, 2, 1700000000000LL, "idem", 10, KBUILD_NONE);
	ck_assert_int_eq(h_append(p, &b, &res), 0);
	ck_assert(res.duplicate);
	kbuild_free(&b);
	ks_partition_close(p);
	ck_assert_int_eq(count_quarantine("ps"), 1);
}
END_TEST

/* Descriptors: a led partition holds at most its active log (no index
 * files), and none once idle; 10,000 of them fit in this machine's hard
 * limit with room for the sockets. */
START_TEST(descriptors_of_idle_and_active_partitions)
{
	enum { N = 300 };
	ks_log_config cfg = h_cfg();
	cfg.idle_close_ms = 1000;
	static ks_partition *ps[N];
	int before = h_count_fds();
	for (int i = 0; i < N; i++) {
		char dir[32];
		snprintf(dir, sizeof(dir), "d/%d", i);
		ck_assert_int_eq(ks_partition_open(h_vfs, dir, NULL, 1, &cfg, &ps[i]), 0);
		ck_assert_int_eq(ks_partition_take_over(ps[i], 1), 0);
		for (int k = 0; k < 30; k++)
			h_put(ps[i], 3, "fd", 60); /* past several index intervals */
		ck_assert_int_eq(ks_partition_flush(ps[i], NULL), 0);
	}
	int active = h_count_fds() - before;
	ck_assert_msg(active <= N, "%d descriptors for %d active partitions", active, N);
	/* Idle: housekeeping closes what nobody uses. */
	int64_t later = ku_wall_ms() + 5000;
	for (int i = 0; i < N; i++)
		ck_assert_int_ge(ks_partition_housekeep(ps[i], later), 0);
	int idle = h_count_fds() - before;
	ck_assert_msg(idle == 0, "%d descriptors for %d idle partitions", idle, N);
	ks_partition_stats st;
	ks_partition_stats_get(ps[0], &st);
	ck_assert_int_eq(st.open_files, 0);
	/* Reopened on demand: reads and appends work as before. */
	for (int i = 0; i < N; i++) {
		uint8_t *log;
		size_t len = h_read_all(ps[i], 0, 1 << 20, &log);
		ck_assert_int_eq(h_check_log(log, len, 0), 90);
		free(log);
		ck_assert_int_eq(h_put(ps[i], 1, "again", 10), 90);
		ck_assert_int_eq(ks_partition_flush(ps[i], NULL), 0);
	}
	ck_assert_int_le(h_count_fds() - before, N);
	for (int i = 0; i < N; i++)
		ck_assert_int_ge(ks_partition_housekeep(ps[i], later + 5000), 0);
	ck_assert_int_eq(h_count_fds() - before, 0);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(ks_partition_relinquish(ps[i]), 0);
		ck_assert_int_eq(ks_partition_take_over(ps[i], 2), 0);
		ck_assert_int_eq(ks_partition_log_end(ps[i]), 91);
		ks_partition_close(ps[i]);
	}
	ck_assert_int_eq(h_count_fds(), before);
}
END_TEST

/* The goal of the descriptor economy: 10,000 led partitions on one broker,
 * each with an appended batch, hold one descriptor each (under the hard
 * limit of 20,000 here, with the soft limit raised to it as the broker
 * does), and none once idle. */
START_TEST(ten_thousand_led_partitions)
{
	enum { N = 10000 };
	struct rlimit rl;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < N + 256) {
		fprintf(stderr, "ten_thousand_led_partitions: hard limit %llu is below %d, not run\n",
			(unsigned long long)rl.rlim_max, N + 256);
		return;
	}
	rl.rlim_cur = rl.rlim_max;
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	ks_log_config cfg = h_cfg();
	cfg.idle_close_ms = 1000;
	ks_partition **ps = calloc(N, sizeof(*ps));
	int before = h_count_fds();
	for (int i = 0; i < N; i++) {
		char dir[32];
		snprintf(dir, sizeof(dir), "t%d/%d", i / 100, i % 100);
		ck_assert_int_eq(ks_partition_open(h_vfs, dir, NULL, 1, &cfg, &ps[i]), 0);
		ck_assert_int_eq(ks_partition_take_over(ps[i], 1), 0);
		h_put(ps[i], 1, "k", 10);
		ck_assert_int_eq(ks_partition_flush(ps[i], NULL), 0);
	}
	int held = h_count_fds() - before;
	ck_assert_msg(held <= N, "%d descriptors for %d led partitions", held, N);
	int64_t later = ku_wall_ms() + 5000;
	for (int i = 0; i < N; i++)
		ck_assert_int_ge(ks_partition_housekeep(ps[i], later), 0);
	ck_assert_int_eq(h_count_fds() - before, 0);
	for (int i = 0; i < N; i++)
		ks_partition_close(ps[i]);
	free(ps);
	ck_assert_int_eq(h_count_fds(), before);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "storage-damage", .tcase = "damage", .timeout = 120,
					  .setup = h_setup_mem, .teardown = h_teardown },
			  KTEST_LIST(bitflip_in_a_sealed_segment_after_a_crash,
				     truncation_of_a_sealed_segment_after_a_crash,
				     damage_after_a_clean_close_is_answered_not_skipped,
				     scrub_finds_damage_within_its_rate, foreign_epoch_in_the_manifest,
				     foreign_epoch_in_a_segment_name, foreign_epoch_in_the_producer_snapshot,
				     descriptors_of_idle_and_active_partitions, ten_thousand_led_partitions));
}
