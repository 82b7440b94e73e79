/*
 * test_recovery.c — take-over recovery of logs a crashed leader left:
 * truncated tails, garbage after the last batch, flipped CRC bytes, missing
 * or garbage index files, stale, garbage and newer manifests; epoch fencing
 * against a zombie leader; poisoning after an I/O failure.
 *
 * A crashed leader's directory is made by copying the directory of a live
 * leader (what the volume holds when its host dies), then damaging it.
 * Length: the take-over recovery cases share one partition-building
 * fixture; split by area they would each copy it.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "kaas/storage/test/harness.h"
#include "kaas/storage/test/shim.h"
#include "util/clock.h"
#include "substrates/sub_fault.h"
#include "util/test/ktest.h"

/* Copies DATA/src to DATA/dst as it is now (leader still running). */
static void snapshot_dir(const char *src, const char *dst)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "cp -a %s/%s %s/%s", h_dir, src, h_dir, dst);
	ck_assert_int_eq(system(cmd), 0);
}

static void file_path(char *out, size_t n, const char *dir, const char *leaf)
{
	snprintf(out, n, "%s/%s/%s", h_dir, dir, leaf);
}

/* The name of the newest .log (largest name) in dir. */
static void newest(const char *dir, const char *suffix, char *leaf, size_t n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", h_dir, dir);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	leaf[0] = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name), s = strlen(suffix);
		if (l > s && strcmp(e->d_name + l - s, suffix) == 0 && strcmp(e->d_name, leaf) > 0)
			snprintf(leaf, n, "%s", e->d_name);
	}
	closedir(d);
	ck_assert(leaf[0]);
}

/* A leader at epoch 1 that wrote `n` batches (3 records, ~100 B each). */
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
		if (all)
			kbuild__put(&all->buf, &all->len, &all->cap, b.buf, b.len);
		kbuild_free(&b);
	}
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	return p;
}

/* Takes over `dir` at epoch, checks the log is exactly the first `bytes` of
 * `all`, appends one more batch, and checks a further takeover sees it. */
static void check_recovered(const char *dir, int32_t epoch, const kbuild *all, size_t bytes,
			    int64_t leo)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, dir, NULL, 0, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, epoch), 0);
	ck_assert_int_eq(ks_partition_log_end(p), leo);
	ck_assert_int_eq(ks_partition_high_watermark(p), leo);
	uint8_t *log;
	size_t len = h_read_all(p, 0, 4000, &log);
	ck_assert_uint_eq(len, bytes);
	ck_assert_mem_eq(log, all->buf, bytes);
	free(log);
	ck_assert_int_eq(h_put(p, 2, "after", 10), leo);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, epoch + 1), 0);
	ck_assert_int_eq(ks_partition_log_end(p), leo + 2);
	len = h_read_all(p, 0, 4000, &log);
	ck_assert_int_eq(h_check_log(log, len, 0), leo + 2);
	ck_assert_mem_eq(log, all->buf, bytes);
	free(log);
	ks_partition_close(p);
}

/* Byte position and end offset of batch k in all. */
static void batch_at(const kbuild *all, int k, size_t *pos, size_t *size, int64_t *end_off)
{
	size_t p = 0;
	int64_t off = 0;
	for (int i = 0;; i++) {
		kb_hdr h;
		ks__kb_decode(all->buf + p, &h);
		if (i == k) {
			*pos = p;
			*size = kb_size(&h);
			*end_off = off;
			return;
		}
		p += kb_size(&h);
		off += h.count;
	}
}

START_TEST(truncated_tail)
{
	kbuild all = KBUILD_INIT;
	ks_partition *p = make_log("live", 40, 1 << 20, &all);
	/* Cut the last batch at several points: in its header, in its records,
	 * one byte short, and exactly at its start. */
	size_t pos, size;
	int64_t off;
	batch_at(&all, 39, &pos, &size, &off);
	size_t cuts[] = {pos + 5, pos + KB_HDR + 3, pos + size - 1, pos};
	for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
		char dir[32], leaf[128], path[512];
		snprintf(dir, sizeof(dir), "cut%zu", c);
		snapshot_dir("live", dir);
		newest(dir, ".log", leaf, sizeof(leaf));
		file_path(path, sizeof(path), dir, leaf);
		ck_assert_int_eq(truncate(path, (off_t)cuts[c]), 0);
		check_recovered(dir, 2, &all, pos, off);
	}
	ks_partition_close(p);
	kbuild_free(&all);
}
END_TEST

START_TEST(garbage_after_the_last_batch)
{
	kbuild all = KBUILD_INIT;
	ks_partition *p = make_log("live", 25, 1 << 20, &all);
	const char *garbage[] = {"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", "kaas kaas kaas kaas kaas kaas kaas kaas",
				 "\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x01\x00"};
	size_t glen[] = {16, 39, 12};
	for (int g = 0; g < 3; g++) {
		char dir[32], leaf[128], path[512];
		snprintf(dir, sizeof(dir), "g%d", g);
		snapshot_dir("live", dir);
		newest(dir, ".log", leaf, sizeof(leaf));
		file_path(path, sizeof(path), dir, leaf);
		FILE *f = fopen(path, "ab");
		for (int rep = 0; rep < 50; rep++)
			fwrite(garbage[g], 1, glen[g], f);
		fclose(f);
		check_recovered(dir, 2, &all, all.len, 75);
	}
	/* A whole valid batch whose offsets do not follow on: not ours either. */
	snapshot_dir("live", "g3");
	char leaf[128], path[512];
	newest("g3", ".log", leaf, sizeof(leaf));
	file_path(path, sizeof(path), "g3", leaf);
	FILE *f = fopen(path, "ab");
	fwrite(all.buf, 1, 200, f); /* batch 0 again (offset 0), and a torn piece */
	fclose(f);
	check_recovered("g3", 2, &all, all.len, 75);
	ks_partition_close(p);
	kbuild_free(&all);
}
END_TEST

START_TEST(flipped_crc_bytes)
{
	kbuild all = KBUILD_INIT;
	/* Several segments: damage in the tail written since the last durable
	 * point (here: the newest segment) ends the log there.  The same damage
	 * in a sealed segment is corruption, never a reason to cut the log
	 * (test_damage.c). */
	ks_partition *p = make_log("live", 60, 2048, &all);
	ck_assert_int_gt(h_count_files("live", ".log"), 2);
	int victims[] = {59, 59, 59};
	int which[] = {KB_OFF_CRC + 1, KB_HDR + 7, KB_OFF_ATTRS + 1};
	for (int v = 0; v < 3; v++) {
		char dir[32], path[512];
		snprintf(dir, sizeof(dir), "f%d", v);
		snapshot_dir("live", dir);
		size_t pos, size;
		int64_t off;
		batch_at(&all, victims[v], &pos, &size, &off);
		/* Find the segment holding the batch: names sort by base offset. */
		char cmd[1024];
		snprintf(cmd, sizeof(cmd), "ls %s/%s/*.log", h_dir, dir);
		FILE *ls = popen(cmd, "r");
		char line[512], chosen[512] = "";
		long long chosen_base = -1;
		while (fgets(line, sizeof(line), ls)) {
			line[strcspn(line, "\n")] = 0;
			long long base = atoll(strrchr(line, '-') + 1);
			if (base <= off && base > chosen_base) {
				chosen_base = base;
				snprintf(chosen, sizeof(chosen), "%s", line);
			}
		}
		pclose(ls);
		ck_assert(chosen[0]);
		/* Byte position of the batch inside its segment. */
		size_t segpos = 0;
		int64_t o = 0;
		for (int i = 0; o < chosen_base; i++) {
			kb_hdr h;
			ks__kb_decode(all.buf + segpos, &h);
			segpos += kb_size(&h);
			o += h.count;
		}
		snprintf(path, sizeof(path), "%s", chosen);
		int fd = open(path, O_RDWR);
		uint8_t byte;
		ck_assert_int_eq(pread(fd, &byte, 1, (off_t)(pos - segpos + which[v])), 1);
		byte ^= 0x10;
		ck_assert_int_eq(pwrite(fd, &byte, 1, (off_t)(pos - segpos + which[v])), 1);
		close(fd);
		check_recovered(dir, 2, &all, pos, off);
	}
	ks_partition_close(p);
	kbuild_free(&all);
}
END_TEST

/* Rewrites every index file of dir in place: how = 0 paired entries that
 * are consistent with each other but point at wrong positions; 1 the
 * positions of all but the last offset entry moved 8 bytes into their
 * batch (the last, which loading checks, stays right). */
static void forge_indexes(const char *dir, int how)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", h_dir, dir);
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	struct dirent *e;
	int forged = 0;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l < 7 || strcmp(e->d_name + l - 6, ".index"))
			continue;
		char ip[1024], tp[1024];
		snprintf(ip, sizeof(ip), "%s/%s", path, e->d_name);
		snprintf(tp, sizeof(tp), "%s/%.*s.timeindex", path, (int)(l - 6), e->d_name);
		FILE *f = fopen(ip, "r+b"), *t = fopen(tp, "r+b");
		ck_assert_ptr_nonnull(f);
		ck_assert_ptr_nonnull(t);
		uint8_t buf[8 * 512];
		size_t n = fread(buf, 8, 512, f);
		for (size_t i = 0; i < n; i++) {
			uint8_t *x = buf + 8 * i;
			if (how == 0) {
				kb_put32(x, (uint32_t)(2 * i + 1));
				kb_put32(x + 4, (uint32_t)(61 * i + 5));
				uint8_t te[12];
				kb_put64(te, 1700000000000ULL + i);
				kb_put32(te + 8, (uint32_t)(2 * i + 1));
				ck_assert_int_eq(fseek(t, (long)(12 * i), SEEK_SET), 0);
				ck_assert_uint_eq(fwrite(te, 12, 1, t), 1);
			} else if (i + 1 < n) {
				kb_put32(x + 4, kb_get32(x + 4) + 8);
			}
		}
		forged += n > 1;
		rewind(f);
		ck_assert_uint_eq(fwrite(buf, 8, n, f), n);
		fclose(f);
		fclose(t);
	}
	closedir(d);
	ck_assert_int_gt(forged, 0);
}

START_TEST(missing_and_garbage_index_files)
{
	kbuild all = KBUILD_INIT;
	ks_partition *p = make_log("live", 80, 4096, &all);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);
	snapshot_dir("live", "noidx");
	snapshot_dir("live", "badidx");
	snapshot_dir("live", "pairidx");
	snapshot_dir("live", "shiftidx");
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "rm %s/noidx/*.index %s/noidx/*.timeindex", h_dir, h_dir);
	ck_assert_int_eq(system(cmd), 0);
	/* Random bytes: out of bounds, rejected when loaded. */
	snprintf(cmd, sizeof(cmd),
		 "for f in %s/badidx/*.index %s/badidx/*.timeindex; do n=$(stat -c %%s $f); "
		 "head -c $n /dev/urandom > $f.x && mv $f.x $f; done",
		 h_dir, h_dir);
	ck_assert_int_eq(system(cmd), 0);
	/* Plausible: in bounds, increasing, paired, but wrong. */
	forge_indexes("pairidx", 0);
	forge_indexes("shiftidx", 1);
	const char *dirs[] = {"noidx", "badidx", "pairidx", "shiftidx"};
	for (int d = 0; d < 4; d++)
		check_recovered(dirs[d], 2, &all, all.len, 240);
	/* Lookups by offset and time are right without (good) indexes. */
	for (int d = 0; d < 4; d++) {
		/* Epoch 1's damaged index files are still there (a leader writes
		 * only its own epoch's); loaded lazily this time. */
		ks_partition *q;
		ks_log_config cfg = h_cfg();
		const char *name = dirs[d];
		ck_assert_int_eq(ks_partition_open(h_vfs, name, NULL, 0, &cfg, &q), 0);
		ck_assert_int_eq(ks_partition_take_over(q, 9), 0);
		for (int64_t off = 0; off < 240; off++) {
			ks_read_plan plan = KAAS_READ_PLAN_INIT;
			ck_assert_int_eq(ks_partition_read(q, off, 1, &plan), 0);
			ck_assert_msg(plan.n == 1, "%s: read at %lld: %d ranges", name, (long long)off, plan.n);
			uint8_t hdr[KB_HDR];
			ck_assert_int_eq(sub_pread_full(plan.r[0].file, hdr, KB_HDR, plan.r[0].pos), 0);
			kb_hdr h;
			ks__kb_decode(hdr, &h);
			ck_assert_msg(h.base_offset == off - off % 3, "%s: read at %lld: batch %lld", name,
				      (long long)off, (long long)h.base_offset);
			ks_read_plan_release(&plan);
		}
		int64_t off, ts;
		/* Batch i holds timestamps base+i .. base+i+2 at offsets 3i..3i+2:
		 * the first record at or after base+T is batch T-2's last. */
		for (int64_t t = 0; t <= 81; t++) {
			ck_assert_int_eq(ks_partition_offset_for_time(q, 1700000000000LL + t, &off, &ts), 0);
			ck_assert_msg(off == (t >= 2 ? 3 * (t - 2) + 2 : t), "%s: time +%lld: offset %lld", name,
				      (long long)t, (long long)off);
			ck_assert_int_eq(ts, 1700000000000LL + t);
		}
		ck_assert_int_eq(ks_partition_offset_for_time(q, 1700000000000LL + 50, &off, &ts), 0);
		ck_assert_int_eq(off, 146);
		ck_assert_int_eq(ts, 1700000000000LL + 50);
		ks_partition_close(q);
	}
	kbuild_free(&all);
}
END_TEST

static void write_manifest(const char *dir, const char *text)
{
	char path[512];
	file_path(path, sizeof(path), dir, "manifest.json");
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

START_TEST(stale_garbage_and_newer_manifests)
{
	kbuild all = KBUILD_INIT;
	ks_partition *p = make_log("live", 30, 2048, &all);
	/* Stale: the manifest of the takeover (hw 0) while 90 records exist. */
	snapshot_dir("live", "stale");
	check_recovered("stale", 2, &all, all.len, 90);
	/* A manifest whose high watermark is ahead of the log (the volume lost
	 * acknowledged writes): the log as it is, loudly. */
	snapshot_dir("live", "ahead");
	write_manifest("ahead", "{\"version\":1,\"topic_id\":null,\"epoch\":1,\"high_watermark\":500,\"log_start_offset\":0}");
	check_recovered("ahead", 2, &all, all.len, 90);
	/* Garbage and empty manifests are ignored. */
	snapshot_dir("live", "junk");
	write_manifest("junk", "{\"version\":1,\"epoch\":\"x\"");
	check_recovered("junk", 2, &all, all.len, 90);
	snapshot_dir("live", "empty");
	write_manifest("empty", "");
	check_recovered("empty", 2, &all, all.len, 90);
	snapshot_dir("live", "nomani");
	char path[512];
	file_path(path, sizeof(path), "nomani", "manifest.json");
	ck_assert_int_eq(unlink(path), 0);
	check_recovered("nomani", 2, &all, all.len, 90);
	/* A manifest of a newer epoch: someone newer leads. */
	snapshot_dir("live", "newer");
	write_manifest("newer", "{\"version\":1,\"topic_id\":null,\"epoch\":7,\"high_watermark\":0,\"log_start_offset\":0}");
	ks_partition *q;
	ks_log_config cfg = h_cfg();
	ck_assert_int_eq(ks_partition_open(h_vfs, "newer", NULL, 0, &cfg, &q), 0);
	/* Obeyed when the caller knows epoch 7 was issued; above what was
	 * issued it is foreign (test_damage.c). */
	ck_assert_int_eq(ks_partition_take_over_bounded(q, 5, 7), -ESTALE);
	ck_assert_int_eq(ks_partition_take_over(q, 7), 0);
	ck_assert_int_eq(ks_partition_log_end(q), 90);
	ks_partition_close(q);
	ks_partition_close(p);
	kbuild_free(&all);
}
END_TEST

/* A manifest older than the newest live segment (its writer was superseded
 * and its rename landed late, or the newer take-over died before writing
 * its own): its high watermark is ignored and its log start is honoured
 * only up to where the newer epoch's log begins, since above that the old
 * writer's offsets named other records. */
START_TEST(stale_manifest_of_an_older_epoch)
{
	kbuild all = KBUILD_INIT;
	ks_partition *p = make_log("se", 30, 2048, &all); /* epoch 1: offsets 0..89 */
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);
	ks_log_config cfg = h_cfg();
	ck_assert_int_eq(ks_partition_open(h_vfs, "se", NULL, 0, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(h_put(p, 2, "epoch-two", 10), 90 + 2 * i);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);
	/* Epoch 1's leader believed it reached 95 and deleted records below it. */
	write_manifest("se", "{\"version\":1,\"topic_id\":null,\"epoch\":1,"
			     "\"high_watermark\":95,\"log_start_offset\":95}");
	ck_assert_int_eq(ks_partition_open(h_vfs, "se", NULL, 0, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 3), 0);
	ck_assert_int_eq(ks_partition_log_end(p), 100);
	ck_assert_int_eq(ks_partition_log_start(p), 90);
	uint8_t *log;
	size_t len = h_read_all(p, 90, 4000, &log);
	ck_assert_int_eq(h_check_log(log, len, 90), 100);
	ck_assert_ptr_nonnull(memmem(log, len, "epoch-two", 9));
	free(log);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);
	/* Below that point an old manifest's log start still counts. */
	write_manifest("se", "{\"version\":1,\"topic_id\":null,\"epoch\":1,"
			     "\"high_watermark\":90,\"log_start_offset\":30}");
	ck_assert_int_eq(ks_partition_open(h_vfs, "se", NULL, 0, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 4), 0);
	ck_assert_int_eq(ks_partition_log_start(p), 30);
	ck_assert_int_eq(ks_partition_log_end(p), 100);
	len = h_read_all(p, 30, 4000, &log);
	ck_assert_int_eq(h_check_log(log, len, -1), 100);
	size_t pos30, size30;
	int64_t off30;
	batch_at(&all, 10, &pos30, &size30, &off30); /* batch 10 holds offset 30 */
	ck_assert_int_eq(off30, 30);
	ck_assert_mem_eq(log, all.buf + pos30, all.len - pos30);
	free(log);
	ks_partition_close(p);
	kbuild_free(&all);
}
END_TEST

/* Offsets near the end of the int64 range, in names, batches and the
 * manifest, as a broken or hostile host could leave them: never a crash (the
 * sanitizers abort on signed overflow), never an unlinked segment. */
START_TEST(hostile_offsets_on_the_volume)
{
	ks_log_config cfg = h_cfg();
	ks_partition *q;
	char path[512];
	/* A segment named near INT64_MAX, holding a valid batch at that base
	 * whose last offset would overflow. */
	ck_assert_int_eq(mkdir(strcat(strcpy(path, h_dir), "/hn"), 0755), 0);
	snprintf(path, sizeof(path), "%s/hn/0000000001-09223372036854775802.log", h_dir);
	kbuild b = KBUILD_INIT;
	kbuild_simple(&b, -1, -1, -1, 10, 1700000000000LL, "far", 10, KBUILD_NONE);
	kb_put64(b.buf, (uint64_t)INT64_MAX - 5);
	FILE *f = fopen(path, "wb");
	fwrite(b.buf, 1, b.len, f);
	fclose(f);
	kbuild_free(&b);
	ck_assert_int_eq(ks_partition_open(h_vfs, "hn", NULL, 0, &cfg, &q), 0);
	ck_assert_int_eq(ks_partition_take_over(q, 2), 0);
	ck_assert_int_eq(h_put(q, 3, "near", 10), 0); /* not a segment: a fresh log */
	ck_assert_int_eq(ks_partition_flush(q, NULL), 0);
	ks_partition_close(q);
	ck_assert_int_eq(access(path, F_OK), 0); /* and left alone */

	/* A manifest claiming offsets near INT64_MAX, no segments. */
	ck_assert_int_eq(ks_partition_open(h_vfs, "hm", NULL, 1, &cfg, &q), 0);
	ks_partition_close(q);
	write_manifest("hm", "{\"version\":1,\"topic_id\":null,\"epoch\":1,"
			     "\"high_watermark\":9223372036854775807,\"log_start_offset\":9223372036854775807}");
	ck_assert_int_eq(ks_partition_open(h_vfs, "hm", NULL, 0, &cfg, &q), 0);
	ck_assert_int_eq(ks_partition_take_over(q, 2), 0);
	ck_assert_int_eq(h_put(q, 2, "mani", 10), 0);
	ks_partition_close(q);

	/* A manifest whose log start lies beyond its own high watermark is not
	 * one the engine wrote: it must not make the take-over drop the log. */
	kbuild all = KBUILD_INIT;
	ks_partition *p = make_log("hl", 30, 2048, &all);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);
	write_manifest("hl", "{\"version\":1,\"topic_id\":null,\"epoch\":1,"
			     "\"high_watermark\":90,\"log_start_offset\":1000000}");
	check_recovered("hl", 2, &all, all.len, 90);
	kbuild_free(&all);
}
END_TEST

/* ---- zombies ---------------------------------------------------------------------- */

/* Reads the whole log of p and fails on any batch whose records carry tag. */
static int64_t read_no_tag(ks_partition *p, const char *tag, size_t *len_out)
{
	uint8_t *log;
	size_t len = h_read_all(p, 0, 1000, &log);
	int64_t end = h_check_log(log, len, 0);
	ck_assert_ptr_null(memmem(log, len, tag, strlen(tag)));
	free(log);
	if (len_out)
		*len_out = len;
	return end;
}

/* Writes a segment file by hand: what a zombie's roll leaves if it raced
 * past its fencing check.  Batches start at `base`. */
static void forge_segment(const char *dir, int32_t epoch, int64_t base, int nbatches)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s/%010d-%020lld.log", h_dir, dir, epoch, (long long)base);
	FILE *f = fopen(path, "wb");
	int64_t off = base;
	for (int i = 0; i < nbatches; i++) {
		kbuild b = KBUILD_INIT;
		kbuild_simple(&b, -1, -1, -1, 2, 1700000000000LL, "ZOMBIE", 30, KBUILD_NONE);
		kb_put64(b.buf, (uint64_t)off);
		off += 2;
		fwrite(b.buf, 1, b.len, f);
		kbuild_free(&b);
	}
	fclose(f);
}

START_TEST(zombie_writes_never_reach_the_new_leader)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = 2048;
	ks_partition *old, *neu;
	sub_vfs *vfs2;
	char err[256];
	/* Two engines, two substrate clients, one directory. */
	ck_assert_int_eq(sub_open_url(h_dir, &vfs2, err, sizeof(err)), 0);
	ck_assert_int_eq(ks_partition_open(h_vfs, "z", NULL, 1, &cfg, &old), 0);
	ck_assert_int_eq(ks_partition_take_over(old, 1), 0);
	for (int i = 0; i < 10; i++)
		h_put(old, 2, "legit-one", 30);
	ck_assert_int_eq(ks_partition_flush(old, NULL), 0);

	ck_assert_int_eq(ks_partition_open(vfs2, "z", NULL, 0, &cfg, &neu), 0);
	ck_assert_int_eq(ks_partition_take_over(neu, 2), 0);
	ck_assert_int_eq(ks_partition_log_end(neu), 20);

	/* The old leader does not know: it keeps appending to its segment. */
	kbuild b = KBUILD_INIT;
	ks_append_result res;
	int zombie_appends = 0, fenced = 0;
	for (int i = 0; i < 60 && !fenced; i++) {
		kbuild_reset(&b);
		kbuild_simple(&b, -1, -1, -1, 2, 1700000000000LL, "ZOMBIE", 30, KBUILD_NONE);
		ck_assert_int_eq(ks_partition_append(old, b.buf, b.len, &res), 0);
		if (res.error == 0) {
			zombie_appends++;
			ks_partition_flush(old, NULL);
		} else {
			/* Its roll saw the newer epoch's segment. */
			ck_assert_int_eq(res.error, KERR_NOT_LEADER_OR_FOLLOWER);
			fenced = 1;
		}
		if (i % 3 == 0)
			h_put(neu, 1, "legit-two", 30);
	}
	ck_assert_int_gt(zombie_appends, 0);
	ck_assert(fenced);
	ck_assert_int_eq(ks_partition_flush(neu, NULL), 0);
	int64_t end = read_no_tag(neu, "ZOMBIE", NULL);
	ck_assert_int_eq(end, ks_partition_high_watermark(neu));

	/* Zombie rolls that raced past the check: one after the new leader's
	 * base, one exactly at it. */
	forge_segment("z", 1, 20, 3);
	forge_segment("z", 1, end + 4, 3);
	forge_segment("z", 1, end + 40, 3);
	ck_assert_int_eq(read_no_tag(neu, "ZOMBIE", NULL), end);
	h_put(neu, 1, "legit-two", 30);
	ck_assert_int_eq(ks_partition_flush(neu, NULL), 0);
	size_t len_before;
	end = read_no_tag(neu, "ZOMBIE", &len_before);

	/* The zombie's relinquish must not overwrite the newer manifest. */
	ck_assert_int_eq(ks_partition_relinquish(old), -ESTALE);
	char *m;
	size_t mlen;
	ck_assert_int_eq(sub_read_file(h_vfs, "z/manifest.json", 4096, &m, &mlen), 0);
	ck_assert_ptr_nonnull(strstr(m, "\"epoch\":2"));
	free(m);

	/* Another takeover: same log, still no zombie byte; zombie files go. */
	ck_assert_int_eq(ks_partition_relinquish(neu), 0);
	ks_partition *third;
	ck_assert_int_eq(ks_partition_open(h_vfs, "z", NULL, 0, &cfg, &third), 0);
	ck_assert_int_eq(ks_partition_take_over(third, 3), 0);
	ck_assert_int_eq(ks_partition_log_end(third), end);
	size_t len_after;
	ck_assert_int_eq(read_no_tag(third, "ZOMBIE", &len_after), end);
	ck_assert_uint_eq(len_after, len_before);
	char path[512];
	snprintf(path, sizeof(path), "%s/z/%010d-%020lld.log", h_dir, 1, (long long)(end + 40));
	ck_assert_int_eq(access(path, F_OK), -1);
	h_put(third, 1, "legit-three", 30);
	ck_assert_int_eq(ks_partition_flush(third, NULL), 0);
	ck_assert_int_eq(read_no_tag(third, "ZOMBIE", NULL), end + 1);
	ks_partition_close(third);
	ks_partition_close(neu);
	ks_partition_close(old);
	kbuild_free(&b);
	sub_destroy(vfs2);
}
END_TEST

/* The race the fencing check cannot close: the stale leader lists the
 * directory (no newer epoch yet), the new leader takes over, then the stale
 * one creates its rolled segment and keeps appending into it.  The shim
 * runs the new leader's take-over at exactly that point. */
typedef struct race {
	int armed;
	sub_vfs *vfs2;
	ks_log_config cfg;
	ks_partition *neu;
	int64_t base;     /* where the new leader's log continues */
} race;

static void race_hook(void *arg, const char *op, const char *path, const char *to)
{
	race *r = arg;
	(void)to;
	if (!r->armed || strcmp(op, "create") || !shim_ends(path, ".log"))
		return;
	r->armed = 0;
	ck_assert_int_eq(ks_partition_open(r->vfs2, "zr", NULL, 0, &r->cfg, &r->neu), 0);
	ck_assert_int_eq(ks_partition_take_over(r->neu, 2), 0);
	r->base = ks_partition_log_end(r->neu);
}

START_TEST(zombie_rolls_after_the_takeover)
{
	race r = {0};
	char err[256];
	r.cfg = h_cfg();
	r.cfg.segment_bytes = 2048;
	r.cfg.segment_ms = 60000;
	r.cfg.retention_ms = -1;
	ck_assert_int_eq(sub_open_url(h_dir, &r.vfs2, err, sizeof(err)), 0);
	shim_vfs *sv = shim_wrap(h_vfs, race_hook, &r);
	ks_partition *old;
	ck_assert_int_eq(ks_partition_open(&sv->base, "zr", NULL, 1, &r.cfg, &old), 0);
	ck_assert_int_eq(ks_partition_take_over(old, 1), 0);
	for (int i = 0; i < 6; i++)
		h_put(old, 2, "legit-one", 30);
	ck_assert_int_eq(ks_partition_flush(old, NULL), 0);
	/* segment.ms rolls the old leader's segment; the new one takes over
	 * between its fencing check and its create. */
	r.armed = 1;
	ck_assert_int_ge(ks_partition_housekeep(old, ku_wall_ms() + 3600 * 1000), 0);
	ck_assert_int_eq(r.armed, 0);
	ck_assert_ptr_nonnull(r.neu);
	ck_assert_int_eq(r.base, 12);
	char zpath[512];
	snprintf(zpath, sizeof(zpath), "%s/zr/%010d-%020lld.log", h_dir, 1, (long long)r.base);
	ck_assert_int_eq(access(zpath, F_OK), 0); /* the stale leader's roll happened */

	/* Both append; the stale one into its rolled segment until its next
	 * roll meets the newer epoch. */
	kbuild b = KBUILD_INIT;
	ks_append_result res;
	int zombie_appends = 0, fenced = 0;
	for (int i = 0; i < 200 && !fenced; i++) {
		kbuild_reset(&b);
		kbuild_simple(&b, -1, -1, -1, 2, 1700000000000LL, "ZOMBIE", 30, KBUILD_NONE);
		ck_assert_int_eq(ks_partition_append(old, b.buf, b.len, &res), 0);
		if (res.error == 0) {
			zombie_appends++;
			ck_assert_int_eq(ks_partition_flush(old, NULL), 0);
		} else {
			ck_assert_int_eq(res.error, KERR_NOT_LEADER_OR_FOLLOWER);
			fenced = 1;
		}
		if (i % 4 == 0)
			h_put(r.neu, 1, "legit-two", 30);
	}
	kbuild_free(&b);
	ck_assert_int_gt(zombie_appends, 10);
	ck_assert(fenced);
	ck_assert_int_eq(ks_partition_flush(r.neu, NULL), 0);
	size_t len_before;
	int64_t end = read_no_tag(r.neu, "ZOMBIE", &len_before);
	ck_assert_int_eq(end, ks_partition_high_watermark(r.neu));
	ck_assert_int_gt(end, r.base);
	ck_assert_int_eq(ks_partition_relinquish(old), -ESTALE);
	ks_partition_close(old);
	ck_assert_int_eq(ks_partition_relinquish(r.neu), 0);
	ks_partition_close(r.neu);

	/* Another takeover: the same log, no zombie byte, the zombie's segment
	 * gone (and its snapshot, written after the new leader's, harmless). */
	ks_partition *third;
	ck_assert_int_eq(ks_partition_open(h_vfs, "zr", NULL, 0, &r.cfg, &third), 0);
	ck_assert_int_eq(ks_partition_take_over(third, 3), 0);
	ck_assert_int_eq(ks_partition_log_end(third), end);
	size_t len_after;
	ck_assert_int_eq(read_no_tag(third, "ZOMBIE", &len_after), end);
	ck_assert_uint_eq(len_after, len_before);
	ck_assert_int_eq(access(zpath, F_OK), -1);
	ks_partition_close(third);
	sub_destroy(&sv->base);
	sub_destroy(r.vfs2);
}
END_TEST

/* ---- poisoning --------------------------------------------------------------------- */

static void poison_case(const char *opts, int fail_on_flush)
{
	char url[600], err[256];
	sub_vfs *fv;
	snprintf(url, sizeof(url), "fault:%s?%s", h_dir, opts);
	ck_assert_int_eq(sub_open_url(url, &fv, err, sizeof(err)), 0);
	ks_log_config cfg = h_cfg();
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(fv, "pz", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	h_put(p, 2, "before", 10);
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	kbuild b = KBUILD_INIT;
	ks_append_result res;
	kbuild_simple(&b, -1, -1, -1, 2, 1700000000000LL, "x", 10, KBUILD_NONE);
	int rc = ks_partition_append(p, b.buf, b.len, &res);
	if (fail_on_flush) {
		ck_assert_int_eq(rc, 0);
		ck_assert_int_eq(ks_partition_flush(p, NULL), -EIO);
	} else {
		ck_assert_int_lt(rc, 0);
		ck_assert_int_eq(res.error, KERR_KAFKA_STORAGE_ERROR);
	}
	ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_POISONED);
	/* Everything answers a storage error; nothing is served from memory. */
	kbuild_reset(&b);
	kbuild_simple(&b, -1, -1, -1, 2, 1700000000000LL, "y", 10, KBUILD_NONE);
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), -EIO);
	ck_assert_int_eq(res.error, KERR_KAFKA_STORAGE_ERROR);
	ks_read_plan plan = KAAS_READ_PLAN_INIT;
	ck_assert_int_eq(ks_partition_read(p, 0, 100, &plan), 0);
	ck_assert_int_eq(plan.error, KERR_KAFKA_STORAGE_ERROR);
	ck_assert_int_eq(ks_partition_flush(p, NULL), -EIO);
	int64_t low;
	int16_t e16;
	ks_partition_delete_records(p, 1, &low, &e16);
	ck_assert_int_eq(e16, KERR_KAFKA_STORAGE_ERROR);
	int64_t toff, tts;
	ck_assert_int_eq(ks_partition_offset_for_time(p, 0, &toff, &tts), -EIO);
	ck_assert_int_eq(toff, -1);
	ck_assert_int_eq(ks_partition_housekeep(p, 1700000000000LL), -EIO);
	ck_assert_int_eq(ks_partition_high_watermark(p), 2);
	/* Re-taken (the fault was transient): the durable data is there. */
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_LEADER);
	ck_assert_int_ge(ks_partition_log_end(p), 2);
	int64_t leo = ks_partition_log_end(p);
	ck_assert_int_eq(h_put(p, 1, "after", 10), leo);
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	uint8_t *log;
	size_t len = h_read_all(p, 0, 1000, &log);
	ck_assert_int_eq(h_check_log(log, len, 0), leo + 1);
	free(log);
	ks_partition_close(p);
	kbuild_free(&b);
	sub_destroy(fv);
}

START_TEST(failed_write_or_fsync_poisons)
{
	/* pwrites: the new partition's manifest (1), the take-over's manifest
	 * (2), the first append (3), the next append (4). */
	poison_case("fail=pwrite:4:EIO", 0);
	h_teardown();
	h_setup();
	/* fsyncs: the two manifests (1, 2), first flush (3), second flush (4). */
	poison_case("fail=fsync:4:EIO", 1);
	h_teardown();
	h_setup();
	poison_case("fail=pwrite:4:ENOSPC", 0);
}
END_TEST

START_TEST(failed_rename_poisons)
{
	char url[600], err[256];
	sub_vfs *fv;
	snprintf(url, sizeof(url), "fault:%s?failpath=*manifest.json:rename:EIO", h_dir);
	ck_assert_int_eq(sub_open_url(url, &fv, err, sizeof(err)), 0);
	ks_log_config cfg = h_cfg();
	ks_partition *p;
	/* A partition created elsewhere: its manifest exists already. */
	ck_assert_int_eq(ks_partition_open(h_vfs, "rn", NULL, 1, &cfg, &p), 0);
	ks_partition_close(p);
	ck_assert_int_eq(ks_partition_open(fv, "rn", NULL, 0, &cfg, &p), 0);
	/* The take-over's manifest rename fails: not leader, nothing half done. */
	ck_assert_int_eq(ks_partition_take_over(p, 1), -EIO);
	ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_FOLLOWER);
	ks_partition_close(p);
	/* Led through a healthy client, then DeleteRecords through the faulty one. */
	ck_assert_int_eq(ks_partition_open(h_vfs, "rn", NULL, 0, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	h_put(p, 4, "r", 10);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);
	/* Fail only the second manifest rename: take-over passes, DeleteRecords not. */
	snprintf(url, sizeof(url), "fault:%s?fail=rename:2:EIO", h_dir);
	sub_vfs *fv3;
	ck_assert_int_eq(sub_open_url(url, &fv3, err, sizeof(err)), 0);
	ck_assert_int_eq(ks_partition_open(fv3, "rn", NULL, 0, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 3), 0);
	int64_t low;
	int16_t e16;
	ck_assert_int_ne(ks_partition_delete_records(p, 2, &low, &e16), 0);
	ck_assert_int_eq(e16, KERR_KAFKA_STORAGE_ERROR);
	ck_assert_int_eq(low, 0);
	ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_POISONED);
	ks_partition_close(p);
	/* Nothing was acknowledged, nothing changed. */
	ck_assert_int_eq(ks_partition_open(h_vfs, "rn", NULL, 0, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 4), 0);
	ck_assert_int_eq(ks_partition_log_start(p), 0);
	ck_assert_int_eq(ks_partition_log_end(p), 4);
	ks_partition_close(p);
	sub_destroy(fv3);
	sub_destroy(fv);
}
END_TEST

/* A flush that comes after the leadership ended answers for that
 * leadership: success only if its relinquish made everything durable, and
 * never with a durable offset read from someone else's manifest. */
START_TEST(flush_after_relinquish_answers_for_that_leadership)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p;
	int64_t d = -1;
	/* Clean: everything appended was made durable by the relinquish. */
	ck_assert_int_eq(ks_partition_open(h_vfs, "fr", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	h_put(p, 3, "clean", 10);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ck_assert_int_eq(ks_partition_flush(p, &d), 0);
	ck_assert_int_eq(d, 3);
	ks_partition_close(p);

	/* The relinquish's fsync fails (fsyncs: the new partition's manifest,
	 * the take-over's manifest, then the relinquish's segment fsync). */
	char url[600], err[256];
	sub_vfs *fv;
	snprintf(url, sizeof(url), "fault:%s?fail=fsync:3:EIO", h_dir);
	ck_assert_int_eq(sub_open_url(url, &fv, err, sizeof(err)), 0);
	ck_assert_int_eq(ks_partition_open(fv, "ff", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	h_put(p, 2, "lost", 10);
	ck_assert_int_lt(ks_partition_relinquish(p), 0);
	d = -1;
	ck_assert_int_lt(ks_partition_flush(p, &d), 0);
	ck_assert_int_lt(d, 2);
	ks_partition_close(p);
	sub_destroy(fv);

	/* Fenced: a newer leader took over and got further; the stale one's
	 * appends after that are not in the log, whatever its flush says. */
	sub_vfs *v2;
	ks_partition *neu;
	ck_assert_int_eq(sub_open_url(h_dir, &v2, err, sizeof(err)), 0);
	ck_assert_int_eq(ks_partition_open(h_vfs, "fz", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	h_put(p, 3, "old", 10);
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	ck_assert_int_eq(ks_partition_open(v2, "fz", NULL, 0, &cfg, &neu), 0);
	ck_assert_int_eq(ks_partition_take_over(neu, 2), 0);
	h_put(neu, 10, "new", 10);
	ck_assert_int_eq(ks_partition_relinquish(neu), 0); /* manifest: hw 13 */
	ck_assert_int_eq(h_put(p, 2, "zombie", 10), 3);       /* offsets 3..4 in its view */
	ck_assert_int_eq(ks_partition_relinquish(p), -ESTALE);
	d = -1;
	ck_assert_int_eq(ks_partition_flush(p, &d), -ESTALE);
	ck_assert_int_le(d, 3);
	ks_partition_close(p);
	ks_partition_close(neu);
	sub_destroy(v2);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "storage-recovery", .tcase = "recovery", .timeout = 60,
					  .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(truncated_tail, garbage_after_the_last_batch,
				     flipped_crc_bytes, missing_and_garbage_index_files,
				     stale_garbage_and_newer_manifests,
				     stale_manifest_of_an_older_epoch,
				     hostile_offsets_on_the_volume,
				     zombie_writes_never_reach_the_new_leader,
				     zombie_rolls_after_the_takeover,
				     failed_write_or_fsync_poisons, failed_rename_poisons,
				     flush_after_relinquish_answers_for_that_leadership));
}
