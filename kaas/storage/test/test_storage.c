/*
 * test_storage.c — the partition log's main paths: open without
 * descriptors, take over, append with offset assignment, group commit and
 * the high watermark, read plans, roll, index lookups, relinquish and take
 * over by another instance, batch validation.
 * Length: the engine's basic contract (append, read, roll, fence,
 * relinquish) against one set of batch builders.
 */
#include <pthread.h>

#include "util/clock.h"

#include "kaas/storage/storage_int.h"
#include "kaas/storage/test/harness.h"
#include "kaas/storage/test/shim.h"
#include "util/test/ktest.h"

START_TEST(append_flush_read_roundtrip)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/0", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_FOLLOWER);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	int32_t ep;
	ck_assert_int_eq(ks_partition_state_of(p, &ep), KAAS_PART_LEADER);
	ck_assert_int_eq(ep, 1);

	kbuild b = KBUILD_INIT;
	kbuild_simple(&b, -1, -1, -1, 3, 1700000000000LL, "a", 10, KBUILD_NONE);
	kbuild_simple(&b, -1, -1, -1, 2, 1700000000100LL, "b", 10, KBUILD_NONE);
	ks_append_result res;
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, 0);
	ck_assert_int_eq(res.base_offset, 0);
	ck_assert_int_eq(res.last_offset, 4);
	ck_assert_int_eq(res.log_append_time, -1);
	/* Offsets and the leader epoch were written into the batches. */
	kb_hdr h;
	ks__kb_decode(b.buf, &h);
	ck_assert_int_eq(h.base_offset, 0);
	ck_assert_int_eq(h.leader_epoch, 1);
	ks__kb_decode(b.buf + kb_size(&h), &h);
	ck_assert_int_eq(h.base_offset, 3);

	/* Written is not visible until durable (and not out of range either). */
	ck_assert_int_eq(ks_partition_log_end(p), 5);
	ck_assert_int_eq(ks_partition_high_watermark(p), 0);
	ks_read_plan plan = KAAS_READ_PLAN_INIT;
	ck_assert_int_eq(ks_partition_read(p, 0, 1 << 20, &plan), 0);
	ck_assert_int_eq(plan.error, 0);
	ck_assert_int_eq(plan.n, 0);
	ck_assert_int_eq(ks_partition_read(p, 3, 1 << 20, &plan), 0);
	ck_assert_int_eq(plan.error, 0);
	ck_assert_int_eq(plan.n, 0);
	ck_assert_int_eq(ks_partition_read(p, 6, 1 << 20, &plan), 0);
	ck_assert_int_eq(plan.error, KERR_OFFSET_OUT_OF_RANGE);
	ks_read_plan_release(&plan);

	int64_t durable;
	ck_assert_int_eq(ks_partition_flush(p, &durable), 0);
	ck_assert_int_eq(durable, 5);
	ck_assert_int_eq(ks_partition_high_watermark(p), 5);

	uint8_t *log;
	size_t len = h_read_all(p, 0, 1 << 20, &log);
	ck_assert_uint_eq(len, b.len);
	ck_assert_mem_eq(log, b.buf, len);
	free(log);

	/* From the middle of the second batch: that whole batch. */
	ck_assert_int_eq(ks_partition_read(p, 4, 1 << 20, &plan), 0);
	ck_assert_int_eq(plan.n, 1);
	ks__kb_decode(b.buf, &h);
	ck_assert_uint_eq(plan.r[0].pos, kb_size(&h));
	ck_assert_uint_eq(plan.total, b.len - kb_size(&h));
	ks_read_plan_release(&plan);
	ks_read_plan_release(&plan); /* safe to repeat */

	/* Out of range both ways; at the HW: empty, no error. */
	ck_assert_int_eq(ks_partition_read(p, 6, 100, &plan), 0);
	ck_assert_int_eq(plan.error, KERR_OFFSET_OUT_OF_RANGE);
	ck_assert_int_eq(ks_partition_read(p, -1, 100, &plan), 0);
	ck_assert_int_eq(plan.error, KERR_OFFSET_OUT_OF_RANGE);
	ck_assert_int_eq(ks_partition_read(p, 5, 100, &plan), 0);
	ck_assert_int_eq(plan.error, 0);
	ck_assert_int_eq(plan.n, 0);
	ck_assert_int_eq(plan.high_watermark, 5);

	/* KIP-74: max_bytes smaller than the first batch still returns it. */
	ck_assert_int_eq(ks_partition_read(p, 0, 1, &plan), 0);
	ck_assert_int_eq(plan.n, 1);
	ck_assert_uint_eq(plan.total, kb_size(&h));
	ks_read_plan_release(&plan);

	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_FOLLOWER);
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, KERR_NOT_LEADER_OR_FOLLOWER);
	ck_assert_int_eq(ks_partition_read(p, 0, 100, &plan), 0);
	ck_assert_int_eq(plan.error, KERR_NOT_LEADER_OR_FOLLOWER);
	ks_partition_close(p);
	kbuild_free(&b);
}
END_TEST

START_TEST(takeover_by_another_instance_continues_the_log)
{
	ks_log_config cfg = h_cfg();
	ks_partition *a, *b;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/1", "0f6a4b8e-1111-4c3b-9a57-5a0d6f2a9c01", 1,
					     &cfg, &a), 0);
	ck_assert_int_eq(ks_partition_take_over(a, 3), 0);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(h_put(a, 4, "x", 50), i * 4);
	ck_assert_int_eq(ks_partition_relinquish(a), 0);
	ck_assert_int_eq(h_count_files("t/1", ".log"), 1);

	ck_assert_int_eq(ks_partition_open(h_vfs, "t/1", "0f6a4b8e-1111-4c3b-9a57-5a0d6f2a9c01", 0,
					     &cfg, &b), 0);
	/* Followers know the offsets from the manifest. */
	ck_assert_int_eq(ks_partition_high_watermark(b), 40);
	/* Lower epochs are refused once 3 exists, when the caller knows 3 was
	 * issued (above what was issued an epoch is foreign: test_damage.c). */
	ck_assert_int_eq(ks_partition_take_over_bounded(b, 2, 3), -ESTALE);
	ck_assert_int_eq(ks_partition_state_of(b, NULL), KAAS_PART_FOLLOWER);
	ck_assert_int_eq(ks_partition_take_over(b, 4), 0);
	ck_assert_int_eq(ks_partition_log_end(b), 40);
	ck_assert_int_eq(ks_partition_high_watermark(b), 40);
	ck_assert_int_eq(h_put(b, 1, "y", 10), 40);
	ck_assert_int_eq(ks_partition_flush(b, NULL), 0);
	/* A new segment named with the new epoch holds the new batch. */
	char path[512];
	snprintf(path, sizeof(path), "%s/t/1/0000000004-00000000000000000040.log", h_dir);
	ck_assert_int_eq(access(path, F_OK), 0);
	uint8_t *log;
	size_t len = h_read_all(b, 0, 300, &log);
	ck_assert_int_eq(h_check_log(log, len, 0), 41);
	free(log);
	/* A different topic id: an older incarnation's directory. */
	ks_partition *c;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/1", "9a9a9a9a-1111-4c3b-9a57-5a0d6f2a9c01", 0,
					     &cfg, &c), -ESTALE);
	ks_partition_close(a);
	ks_partition_close(b);
}
END_TEST

START_TEST(roll_by_size_and_reads_across_segments)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = 4096;
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/2", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	kbuild all = KBUILD_INIT;
	for (int i = 0; i < 200; i++) {
		kbuild b = KBUILD_INIT;
		ks_append_result res;
		kbuild_simple(&b, -1, -1, -1, 1 + i % 3, 1700000000000LL + i, "r", 60 + i % 50, KBUILD_NONE);
		ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
		ck_assert_int_eq(res.error, 0);
		kbuild__put(&all.buf, &all.len, &all.cap, b.buf, b.len);
		kbuild_free(&b);
		if (i % 17 == 0)
			ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	}
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	int nseg = h_count_files("t/2", ".log");
	ck_assert_int_gt(nseg, 5);
	/* Every sealed segment's index was written at its roll; the active
	 * one's is written at a checkpoint or relinquish. */
	ck_assert_int_eq(h_count_files("t/2", ".index"), nseg - 1);
	/* Whole log, in small and large fetches. */
	uint8_t *log;
	size_t len = h_read_all(p, 0, 700, &log);
	ck_assert_uint_eq(len, all.len);
	ck_assert_mem_eq(log, all.buf, len);
	free(log);
	len = h_read_all(p, 0, 1 << 20, &log);
	ck_assert_uint_eq(len, all.len);
	free(log);
	/* Every offset: the plan starts with the batch holding it. */
	int64_t leo = ks_partition_log_end(p);
	for (int64_t off = 0; off < leo; off++) {
		ks_read_plan plan = KAAS_READ_PLAN_INIT;
		ck_assert_int_eq(ks_partition_read(p, off, 1, &plan), 0);
		ck_assert_int_eq(plan.n, 1);
		uint8_t hdr[KB_HDR];
		ck_assert_int_eq(sub_pread_full(plan.r[0].file, hdr, KB_HDR, plan.r[0].pos), 0);
		kb_hdr h;
		ks__kb_decode(hdr, &h);
		ck_assert_int_le(h.base_offset, off);
		ck_assert_int_ge(kb_last_offset(&h), off);
		ck_assert_uint_eq(plan.r[0].len, kb_size(&h));
		ks_read_plan_release(&plan);
	}
	/* The same after a takeover (indexes loaded from their files). */
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	for (int64_t off = 0; off < leo; off += 7) {
		ks_read_plan plan = KAAS_READ_PLAN_INIT;
		ck_assert_int_eq(ks_partition_read(p, off, 1, &plan), 0);
		ck_assert_int_eq(plan.n, 1);
		uint8_t hdr[KB_HDR];
		ck_assert_int_eq(sub_pread_full(plan.r[0].file, hdr, KB_HDR, plan.r[0].pos), 0);
		kb_hdr h;
		ks__kb_decode(hdr, &h);
		ck_assert_int_le(h.base_offset, off);
		ck_assert_int_ge(kb_last_offset(&h), off);
		ks_read_plan_release(&plan);
	}
	len = h_read_all(p, 0, 5000, &log);
	ck_assert_uint_eq(len, all.len);
	ck_assert_mem_eq(log, all.buf, len);
	free(log);
	ks_partition_close(p);
	kbuild_free(&all);
}
END_TEST

/* A batch with one field broken, rebuilt with a correct CRC where needed. */
static void corrupt(kbuild *b, int what)
{
	uint8_t *h = b->buf;
	switch (what) {
	case 0: h[KB_HDR + 2] ^= 0x40; return;              /* payload byte: CRC fails */
	case 1: h[KB_OFF_MAGIC] = 1; return;                /* magic */
	case 2: kb_put32(h + KB_OFF_LAST_DELTA, 7); break;  /* count vs lastOffsetDelta */
	case 3: kb_put32(h + KB_OFF_COUNT, 0); kb_put32(h + KB_OFF_LAST_DELTA, (uint32_t)-1); break;
	case 4: kb_put32(h + KB_OFF_LENGTH, 10); return;    /* batchLength too small */
	case 5: kb_put32(h + KB_OFF_LENGTH, 100000); return; /* runs past the request */
	case 6: h[KB_HDR] = 0x7f; break;                    /* record length negative */
	case 7: kb_put16(h + KB_OFF_ATTRS, 0x20); break;    /* control batch */
	case 8: kb_put16(h + KB_OFF_ATTRS, 0x07); break;    /* unknown codec */
	}
	kb_put32(h + KB_OFF_CRC, ks__kb_crc(h, b->len));
}

START_TEST(invalid_batches_are_refused_whole)
{
	ks_log_config cfg = h_cfg();
	cfg.max_message_bytes = 2000;
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/3", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	ks_append_result res;
	for (int what = 0; what <= 8; what++) {
		kbuild b = KBUILD_INIT;
		kbuild_simple(&b, -1, -1, -1, 3, 1700000000000LL, "bad", 20, KBUILD_NONE);
		corrupt(&b, what);
		ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
		ck_assert_msg(res.error == KERR_CORRUPT_MESSAGE, "case %d: %s", what,
			      kw_kerr_name(res.error));
		ck_assert_ptr_nonnull(res.message);
		kbuild_free(&b);
	}
	/* A good batch followed by a bad one: nothing is written. */
	kbuild b = KBUILD_INIT;
	kbuild_simple(&b, -1, -1, -1, 2, 1700000000000LL, "ok", 20, KBUILD_NONE);
	size_t second = kbuild_simple(&b, -1, -1, -1, 2, 1700000000000LL, "no", 20, KBUILD_NONE);
	b.buf[second + KB_HDR + 3] ^= 1;
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, KERR_CORRUPT_MESSAGE);
	ck_assert_int_eq(res.batch_index, 1);
	ck_assert_int_eq(ks_partition_log_end(p), 0);
	kbuild_free(&b);
	/* Too large. */
	kbuild_simple(&b, -1, -1, -1, 3, 1700000000000LL, "big", 1000, KBUILD_NONE);
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, KERR_MESSAGE_TOO_LARGE);
	kbuild_free(&b);
	/* Transactional batches are refused until transactions exist. */
	b.extra_attrs = 0x10;
	kbuild_simple(&b, 7, 0, 0, 1, 1700000000000LL, "txn", 10, KBUILD_NONE);
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, KERR_INVALID_TXN_STATE);
	kbuild_free(&b);
	/* A length no request can have (positions are 32-bit): refused before
	 * anything is read. */
	kbuild_simple(&b, -1, -1, -1, 1, 1700000000000LL, "len", 10, KBUILD_NONE);
	ck_assert_int_eq(ks_partition_append(p, b.buf, (size_t)INT32_MAX + 5, &res), 0);
	ck_assert_int_eq(res.error, KERR_MESSAGE_TOO_LARGE);
	kbuild_free(&b);
	/* Empty and truncated requests. */
	uint8_t junk[30] = {0};
	ck_assert_int_eq(ks_partition_append(p, junk, 0, &res), 0);
	ck_assert_int_eq(res.error, KERR_CORRUPT_MESSAGE);
	ck_assert_int_eq(ks_partition_append(p, junk, sizeof(junk), &res), 0);
	ck_assert_int_eq(res.error, KERR_CORRUPT_MESSAGE);
	/* Timestamps: negative is refused; the difference limit when set. */
	kbuild_simple(&b, -1, -1, -1, 1, -5, "neg", 10, KBUILD_NONE);
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, KERR_INVALID_TIMESTAMP);
	kbuild_free(&b);
	cfg.timestamp_difference_max_ms = 3600 * 1000;
	ks_partition_set_config(p, &cfg);
	kbuild_simple(&b, -1, -1, -1, 1, 1000, "old", 10, KBUILD_NONE);
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, KERR_INVALID_TIMESTAMP);
	kbuild_free(&b);
	ck_assert_int_eq(ks_partition_log_end(p), 0);
	ks_partition_close(p);
}
END_TEST

START_TEST(compressed_batches_validated_and_stored_as_is)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/4", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	kbuild all = KBUILD_INIT;
	for (int codec = KBUILD_GZIP; codec <= KBUILD_ZSTD; codec++) {
		kbuild b = KBUILD_INIT;
		ks_append_result res;
		kbuild_simple(&b, -1, -1, -1, 20, 1700000000000LL + codec * 100, "z", 100, codec);
		ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
		ck_assert_msg(res.error == 0, "codec %d: %s", codec, res.message);
		kbuild__put(&all.buf, &all.len, &all.cap, b.buf, b.len);
		/* The same with a payload byte broken and the CRC fixed up. */
		b.buf[b.len - 3] ^= 0x55;
		kb_put32(b.buf + KB_OFF_CRC, ks__kb_crc(b.buf, b.len));
		ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
		ck_assert_msg(res.error == KERR_CORRUPT_MESSAGE, "codec %d corrupt: %s", codec,
			      kw_kerr_name(res.error));
		kbuild_free(&b);
	}
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	uint8_t *log;
	size_t len = h_read_all(p, 0, 1 << 20, &log);
	ck_assert_uint_eq(len, all.len);
	ck_assert_mem_eq(log, all.buf, len);
	free(log);
	/* ListOffsets finds a record inside a compressed batch. */
	int64_t off, ts;
	ck_assert_int_eq(ks_partition_offset_for_time(p, 1700000000000LL + 305, &off, &ts), 0);
	ck_assert_int_eq(off, 45); /* zstd batch starts at 40, record 5 */
	ck_assert_int_eq(ts, 1700000000000LL + 305);
	ks_partition_close(p);
	kbuild_free(&all);
}
END_TEST

START_TEST(log_append_time_and_max_timestamp_fixup)
{
	ks_log_config cfg = h_cfg();
	cfg.timestamp_type = 1;
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/5", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	kbuild b = KBUILD_INIT;
	ks_append_result res;
	kbuild_simple(&b, -1, -1, -1, 2, 1000, "lat", 10, KBUILD_NONE);
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, 0);
	ck_assert_int_gt(res.log_append_time, 1600000000000LL);
	kb_hdr h;
	ks__kb_decode(b.buf, &h);
	ck_assert_int_eq(h.max_ts, res.log_append_time);
	ck_assert_int_ne(h.attrs & KB_ATTR_LOG_APPEND_TIME, 0);
	ck_assert_uint_eq(ks__kb_crc(b.buf, b.len), h.crc);
	kbuild_free(&b);
	/* CreateTime: a wrong header maxTimestamp is corrected (CRC too). */
	cfg.timestamp_type = 0;
	ks_partition_set_config(p, &cfg);
	kbuild_simple(&b, -1, -1, -1, 3, 5000, "ct", 10, KBUILD_NONE);
	kb_put64(b.buf + KB_OFF_MAX_TS, 1);
	kb_put32(b.buf + KB_OFF_CRC, ks__kb_crc(b.buf, b.len));
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, 0);
	ks__kb_decode(b.buf, &h);
	ck_assert_int_eq(h.max_ts, 5002);
	ck_assert_uint_eq(ks__kb_crc(b.buf, b.len), h.crc);
	kbuild_free(&b);
	ks_partition_close(p);
}
END_TEST

START_TEST(list_offsets_by_time)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = 2048;
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/6", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	/* Batch i: 4 records with timestamps 10000 + 10*i + j. */
	for (int i = 0; i < 100; i++) {
		kbuild b = KBUILD_INIT;
		ks_append_result res;
		kbuild_simple(&b, -1, -1, -1, 4, 10000 + 10 * i, "t", 40, KBUILD_NONE);
		ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
		ck_assert_int_eq(res.error, 0);
		kbuild_free(&b);
	}
	int64_t off, ts;
	/* Not durable yet: nothing found. */
	ck_assert_int_eq(ks_partition_offset_for_time(p, 10000, &off, &ts), 0);
	ck_assert_int_eq(off, -1);
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	ck_assert_int_gt(h_count_files("t/6", ".log"), 3);
	for (int rep = 0; rep < 2; rep++) {
		for (int i = 0; i < 100; i += 3) {
			for (int j = 0; j < 4; j++) {
				ck_assert_int_eq(ks_partition_offset_for_time(p, 10000 + 10 * i + j, &off, &ts), 0);
				ck_assert_int_eq(off, 4 * i + j);
				ck_assert_int_eq(ts, 10000 + 10 * i + j);
			}
			/* Between batches: the next batch's first record. */
			ck_assert_int_eq(ks_partition_offset_for_time(p, 10000 + 10 * i + 5, &off, &ts), 0);
			ck_assert_int_eq(off, i == 99 ? -1 : 4 * (i + 1));
		}
		ck_assert_int_eq(ks_partition_offset_for_time(p, 1, &off, &ts), 0);
		ck_assert_int_eq(off, 0);
		ck_assert_int_eq(ks_partition_offset_for_time(p, 99999, &off, &ts), 0);
		ck_assert_int_eq(off, -1);
		ck_assert_int_eq(ks_partition_offset_for_time(p, KAAS_TS_LATEST, &off, &ts), 0);
		ck_assert_int_eq(off, 400);
		ck_assert_int_eq(ks_partition_offset_for_time(p, KAAS_TS_EARLIEST, &off, &ts), 0);
		ck_assert_int_eq(off, 0);
		/* Again from the index files of a new leader. */
		ck_assert_int_eq(ks_partition_relinquish(p), 0);
		ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	}
	ks_partition_close(p);
}
END_TEST

/* ---- group commit ---------------------------------------------------------------- */

typedef struct gc_arg {
	ks_partition *p;
	int n;
	int errors;
} gc_arg;

static void *gc_worker(void *x)
{
	gc_arg *a = x;
	for (int i = 0; i < a->n; i++) {
		kbuild b = KBUILD_INIT;
		ks_append_result res;
		kbuild_simple(&b, -1, -1, -1, 1, 1700000000000LL, "gc", 30, KBUILD_NONE);
		if (ks_partition_append(a->p, b.buf, b.len, &res) || res.error)
			a->errors++;
		int64_t durable;
		if (ks_partition_flush(a->p, &durable) || durable <= res.last_offset)
			a->errors++;
		kbuild_free(&b);
	}
	return NULL;
}

static int64_t listener_hw;
static int listener_calls;
/* Keeps the maximum: two flushing threads may call it out of order. */
static void on_hw(void *arg, ks_partition *p, int64_t hw)
{
	(void)arg;
	(void)p;
	int64_t cur = __atomic_load_n(&listener_hw, __ATOMIC_RELAXED);
	while (hw > cur &&
	       !__atomic_compare_exchange_n(&listener_hw, &cur, hw, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	__atomic_add_fetch(&listener_calls, 1, __ATOMIC_RELAXED);
}

START_TEST(group_commit_concurrent_appenders)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = 8192;
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/7", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	ks_partition_set_listener(p, on_hw, NULL);
	enum { T = 6, N = 60 };
	pthread_t th[T];
	gc_arg args[T];
	for (int i = 0; i < T; i++) {
		args[i] = (gc_arg){p, N, 0};
		pthread_create(&th[i], NULL, gc_worker, &args[i]);
	}
	for (int i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(args[i].errors, 0);
	}
	ck_assert_int_eq(ks_partition_high_watermark(p), T * N);
	ck_assert_int_eq(__atomic_load_n(&listener_hw, __ATOMIC_RELAXED), T * N);
	ck_assert_int_gt(listener_calls, 0);
	ck_assert_int_le(listener_calls, T * N);
	uint8_t *log;
	size_t len = h_read_all(p, 0, 1 << 16, &log);
	ck_assert_int_eq(h_check_log(log, len, 0), T * N);
	free(log);
	ks_partition_close(p);
}
END_TEST

/* The group commit made observable: the first fsync of a segment is held
 * in flight by the substrate until the test lets it go; one .log fsync
 * (fail_nth) can be made to fail. */
typedef struct gate {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int log_fsyncs;     /* fsyncs of .log files started */
	int held;           /* the first one is waiting */
	int open;           /* let it go */
	int appended;       /* appenders done appending */
	int fail_nth;       /* this .log fsync (1 = the held one) answers EIO; 0: none */
	ks_partition *p;
	int64_t hw_in_fsync; /* the high watermark while the first fsync runs */
} gate;

static __thread int gate_nth; /* which .log fsync this thread is running */

static void gate_hook(void *arg, const char *op, const char *path, const char *to)
{
	gate *g = arg;
	(void)to;
	if (strcmp(op, "fsync") || !shim_ends(path, ".log"))
		return;
	pthread_mutex_lock(&g->mu);
	gate_nth = ++g->log_fsyncs;
	int first = gate_nth == 1;
	if (first) {
		g->held = 1;
		pthread_cond_broadcast(&g->cv);
		while (!g->open)
			pthread_cond_wait(&g->cv, &g->mu);
	}
	pthread_mutex_unlock(&g->mu);
	if (first)
		g->hw_in_fsync = ks_partition_high_watermark(g->p);
}

static int gate_rc(void *arg, const char *path, int rc)
{
	gate *g = arg;
	if (!shim_ends(path, ".log"))
		return rc;
	pthread_mutex_lock(&g->mu);
	if (gate_nth == g->fail_nth)
		rc = -EIO;
	pthread_mutex_unlock(&g->mu);
	return rc;
}

/* Waits (generously) for *flag under g->mu. */
static void gate_wait(gate *g, int *flag, int want)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 60;
	pthread_mutex_lock(&g->mu);
	while (*flag < want)
		ck_assert_int_eq(pthread_cond_timedwait(&g->cv, &g->mu, &dl), 0);
	pthread_mutex_unlock(&g->mu);
}

/* Waits until the engine has taken in the end of group-commit ticket t
 * (white box: the ticket table, under the partition lock). */
static void wait_ticket_done(ks_partition *p, uint64_t t)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 60;
	pthread_mutex_lock(&p->mu);
	while (!(p->fl_retired > t || (p->fl_next > t && p->fl[t % (uint64_t)p->depth].done)))
		ck_assert_int_eq(pthread_cond_timedwait(&p->cv, &p->mu, &dl), 0);
	pthread_mutex_unlock(&p->mu);
}

static void gate_release(gate *g)
{
	pthread_mutex_lock(&g->mu);
	g->open = 1;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

typedef struct gflush {
	gate *g;
	int append;      /* append one batch before flushing */
	int rc;
	int64_t last;    /* last offset appended */
	int64_t durable;
} gflush;

static void *gflush_main(void *x)
{
	gflush *a = x;
	a->last = -1;
	if (a->append) {
		kbuild b = KBUILD_INIT;
		ks_append_result res;
		kbuild_simple(&b, -1, -1, -1, 1, 1700000000000LL, "gate", 30, KBUILD_NONE);
		a->rc = ks_partition_append(a->g->p, b.buf, b.len, &res);
		if (a->rc == 0 && res.error)
			a->rc = -EINVAL;
		a->last = res.last_offset;
		kbuild_free(&b);
		pthread_mutex_lock(&a->g->mu);
		a->g->appended++;
		pthread_cond_broadcast(&a->g->cv);
		pthread_mutex_unlock(&a->g->mu);
		if (a->rc)
			return NULL;
	}
	a->rc = ks_partition_flush(a->g->p, &a->durable);
	return NULL;
}

enum { GATE_K = 8 };

/* One flush for offset 0 is held in its fsync; K appenders then append and
 * flush.  Returns when all K have appended and a second fsync, started
 * while the first is held, has completed. */
static void gate_start(gate *g, shim_vfs **sv, const char *dir, pthread_t *t0, gflush *f0,
		       pthread_t *tk, gflush *fk)
{
	*sv = shim_wrap(h_vfs, gate_hook, g);
	(*sv)->fsync_rc = gate_rc;
	ks_log_config cfg = h_cfg();
	ck_assert_int_eq(ks_partition_open(&(*sv)->base, dir, NULL, 1, &cfg, &g->p), 0);
	ck_assert_int_eq(ks_partition_take_over(g->p, 1), 0);
	h_put(g->p, 1, "first", 30);
	*f0 = (gflush){g, 0, 0, -1, -1};
	pthread_create(t0, NULL, gflush_main, f0);
	gate_wait(g, &g->held, 1);
	/* Appends go on while it is in flight (they would hang here if the
	 * fsync held the partition lock); each appender then flushes. */
	for (int i = 0; i < GATE_K; i++) {
		fk[i] = (gflush){g, 1, 0, -1, -1};
		pthread_create(&tk[i], NULL, gflush_main, &fk[i]);
	}
	gate_wait(g, &g->appended, GATE_K);
	/* The first flush after an append the held fsync does not cover
	 * starts a second fsync at once (this would wait forever if fsyncs
	 * ran one at a time). */
	wait_ticket_done(g->p, 1);
	if (g->fail_nth != 2) /* (else the appends after the failure were refused) */
		ck_assert_int_eq(ks_partition_log_end(g->p), 1 + GATE_K);
	/* Two in flight at most: no third starts while the first is held. */
	ck_assert_int_eq(g->log_fsyncs, 2);
}

START_TEST(group_commit_appends_during_fsync_and_shares_it)
{
	gate g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .hw_in_fsync = -1};
	shim_vfs *sv;
	pthread_t t0, tk[GATE_K];
	gflush f0, fk[GATE_K];
	gate_start(&g, &sv, "t/gc", &t0, &f0, tk, fk);
	/* The second fsync is done but the first is not: nothing is durable
	 * yet as far as anybody is told, the high watermark advances in order. */
	ck_assert_int_eq(ks_partition_high_watermark(g.p), 0);
	ck_assert_int_eq(ks_partition_state_of(g.p, NULL), KAAS_PART_LEADER);
	gate_release(&g);
	pthread_join(t0, NULL);
	for (int i = 0; i < GATE_K; i++)
		pthread_join(tk[i], NULL);
	/* The held fsync's own flush could not claim the later appends while
	 * it ran; once it completed, the completed second one counts too. */
	ck_assert_int_eq(g.hw_in_fsync, 0);
	ck_assert_int_eq(f0.rc, 0);
	ck_assert_int_ge(f0.durable, 1);
	/* The K later flushes shared at most two fsyncs (the pipelined one
	 * and, for appends that came after it started, one more), and each
	 * saw its batch durable. */
	ck_assert_int_le(g.log_fsyncs, 3);
	for (int i = 0; i < GATE_K; i++) {
		ck_assert_int_eq(fk[i].rc, 0);
		ck_assert_int_gt(fk[i].durable, fk[i].last);
	}
	ck_assert_int_eq(ks_partition_high_watermark(g.p), 1 + GATE_K);
	ks_partition_close(g.p);
	sub_destroy(&sv->base);
}
END_TEST

/* Two fsyncs in flight and one fails: the partition is poisoned and no
 * flush is acknowledged, neither one whose fsync completed after the
 * failure (whenever it started) nor one whose fsync completed first but
 * started after the failed one. */
START_TEST(pipelined_fsync_failure_acknowledges_nothing_after_it)
{
	for (int fail = 1; fail <= 2; fail++) {
		gate g = {.mu = PTHREAD_MUTEX_INITIALIZER,
			  .cv = PTHREAD_COND_INITIALIZER,
			  .hw_in_fsync = -1,
			  .fail_nth = fail};
		shim_vfs *sv;
		pthread_t t0, tk[GATE_K];
		gflush f0, fk[GATE_K];
		char dir[16];
		snprintf(dir, sizeof(dir), "t/pf%d", fail);
		gate_start(&g, &sv, dir, &t0, &f0, tk, fk);
		ck_assert_int_eq(ks_partition_high_watermark(g.p), 0);
		/* fail 2: the later fsync failed while the earlier one runs;
		 * fail 1: the later one succeeded, the earlier one will fail. */
		int want = fail == 2 ? KAAS_PART_POISONED : KAAS_PART_LEADER;
		ck_assert_int_eq(ks_partition_state_of(g.p, NULL), want);
		gate_release(&g);
		pthread_join(t0, NULL);
		for (int i = 0; i < GATE_K; i++)
			pthread_join(tk[i], NULL);
		ck_assert_int_eq(ks_partition_state_of(g.p, NULL), KAAS_PART_POISONED);
		ck_assert_int_eq(f0.rc, -EIO);
		ck_assert_int_eq(f0.durable, 0);
		int appended = 1;
		for (int i = 0; i < GATE_K; i++) {
			ck_assert_int_eq(fk[i].rc, -EIO);
			appended += fk[i].last >= 0;
		}
		ck_assert_int_eq(ks_partition_high_watermark(g.p), 0);
		ks_read_plan plan = KAAS_READ_PLAN_INIT;
		ck_assert_int_eq(ks_partition_read(g.p, 0, 1 << 20, &plan), 0);
		ck_assert_int_eq(plan.error, KERR_KAFKA_STORAGE_ERROR);
		/* Re-taken by this engine, the log ends at the failed
		 * leadership's durable offset: every batch past it was
		 * answered with an error (recover.c, cut_own_failed_tail). */
		ck_assert_int_gt(appended, 1);
		g.fail_nth = 0;
		ck_assert_int_eq(ks_partition_take_over(g.p, 2), 0);
		ck_assert_int_eq(ks_partition_high_watermark(g.p), 0);
		ck_assert_int_eq(ks_partition_log_end(g.p), 0);
		ks_partition_close(g.p);
		sub_destroy(&sv->base);
	}
}
END_TEST

/* Readers walk the log while writers append and roll and housekeeping
 * deletes segments underneath them: every plan must hold whole, valid,
 * consecutive batches, and the log start only moves forward. */
typedef struct mix_arg {
	ks_partition *p;
	int *stop;
	int reads;
	int bad;
} mix_arg;

static void *mix_reader(void *x)
{
	mix_arg *a = x;
	while (!__atomic_load_n(a->stop, __ATOMIC_ACQUIRE)) {
		int64_t cur = ks_partition_log_start(a->p);
		for (int i = 0; i < 50 && !__atomic_load_n(a->stop, __ATOMIC_ACQUIRE); i++) {
			ks_read_plan plan = KAAS_READ_PLAN_INIT;
			if (ks_partition_read(a->p, cur, 3000, &plan)) {
				a->bad++;
				break;
			}
			if (plan.error == KERR_OFFSET_OUT_OF_RANGE)
				break; /* retention overtook us */
			if (plan.error) {
				a->bad++;
				break;
			}
			int64_t next = cur;
			for (int r = 0; r < plan.n; r++) {
				uint8_t *buf = malloc(plan.r[r].len);
				if (sub_pread_full(plan.r[r].file, buf, plan.r[r].len, plan.r[r].pos)) {
					a->bad++;
				} else {
					size_t pos = 0;
					while (pos < plan.r[r].len) {
						kb_hdr h;
						size_t left = plan.r[r].len - pos;
						if (left >= KB_HDR)
							ks__kb_decode(buf + pos, &h);
						if (left < KB_HDR || kb_size(&h) > left) {
							/* Cut short: only the plan's very end may be. */
							if (r != plan.n - 1)
								a->bad++;
							break;
						}
						if (h.magic != 2 || ks__kb_crc(buf + pos, kb_size(&h)) != h.crc ||
						    (next != cur && h.base_offset != next) || kb_last_offset(&h) < cur)
							a->bad++;
						next = kb_last_offset(&h) + 1;
						pos += kb_size(&h);
					}
				}
				free(buf);
			}
			if (plan.n)
				a->reads++;
			ks_read_plan_release(&plan);
			if (next == cur)
				break;
			cur = next;
		}
	}
	return NULL;
}

static void *mix_keeper(void *x)
{
	mix_arg *a = x;
	int64_t last = 0;
	for (int i = 0; !__atomic_load_n(a->stop, __ATOMIC_ACQUIRE); i++) {
		if (ks_partition_housekeep(a->p, ku_wall_ms()) < 0)
			a->bad++;
		if (i % 5 == 0) {
			int64_t low;
			int16_t err;
			int64_t hw = ks_partition_high_watermark(a->p);
			if (ks_partition_delete_records(a->p, hw / 2, &low, &err) || err)
				a->bad++;
		}
		int64_t ls = ks_partition_log_start(a->p);
		if (ls < last)
			a->bad++;
		last = ls;
		usleep(2000);
	}
	return NULL;
}

START_TEST(concurrent_readers_writers_and_retention)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = 4096;
	cfg.retention_bytes = 20000;
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/9", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	int stop = 0;
	enum { W = 3, R = 2 };
	pthread_t wt[W], rt[R], kt;
	gc_arg wa[W];
	mix_arg ra[R], ka = {p, &stop, 0, 0};
	for (int i = 0; i < W; i++) {
		wa[i] = (gc_arg){p, 150, 0};
		pthread_create(&wt[i], NULL, gc_worker, &wa[i]);
	}
	for (int i = 0; i < R; i++) {
		ra[i] = (mix_arg){p, &stop, 0, 0};
		pthread_create(&rt[i], NULL, mix_reader, &ra[i]);
	}
	pthread_create(&kt, NULL, mix_keeper, &ka);
	for (int i = 0; i < W; i++) {
		pthread_join(wt[i], NULL);
		ck_assert_int_eq(wa[i].errors, 0);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < R; i++) {
		pthread_join(rt[i], NULL);
		ck_assert_int_eq(ra[i].bad, 0);
		ck_assert_int_gt(ra[i].reads, 0);
	}
	pthread_join(kt, NULL);
	ck_assert_int_eq(ka.bad, 0);
	ck_assert_int_eq(ks_partition_high_watermark(p), W * 150);
	ck_assert_int_gt(ks_partition_log_start(p), 0);
	uint8_t *log;
	int64_t ls = ks_partition_log_start(p);
	size_t len = h_read_all(p, ls, 1 << 16, &log);
	ck_assert_int_eq(h_check_log(log, len, -1), W * 150);
	free(log);
	ks_partition_close(p);
}
END_TEST

/* ---- read plans as Kafka's: cut at max_bytes and at the high watermark ---------------- */

static const sub_methods *cnt_inner;
static int cnt_preads;

static ssize_t cnt_pread(sub_file *f, void *buf, size_t n, uint64_t off)
{
	__atomic_add_fetch(&cnt_preads, 1, __ATOMIC_RELAXED);
	return cnt_inner->pread(f, buf, n, off);
}

typedef struct mid_batch {
	int64_t base, last;
	int seg;           /* which segment (rolls replayed by the test) */
	uint64_t pos;
	uint32_t size;
	uint8_t *bytes;    /* as written: offsets assigned */
} mid_batch;

/* What a plan for (off, max_bytes) must hold, from the table alone: the
 * log bytes from the batch holding off, max_bytes of them (the first batch
 * whole), never past batch `hwb` (the first one not durable). */
static size_t mid_expect(const mid_batch *t, int hwb, int64_t off, uint32_t max_bytes, uint8_t *out,
			 int *nranges)
{
	int k = 0;
	while (t[k].last < off)
		k++;
	size_t total = 0;
	int seg = -1;
	*nranges = 0;
	for (int j = k; j < hwb && total < max_bytes; j++) {
		uint32_t n = t[j].size;
		if (total + n > max_bytes && !(j == k))
			n = (uint32_t)(max_bytes - total);
		if (t[j].seg != seg) {
			seg = t[j].seg;
			if (++*nranges > KAAS_READ_MAX_RANGES)
				break;
		}
		memcpy(out + total, t[j].bytes, n);
		total += n;
	}
	return total;
}

START_TEST(read_plans_end_mid_batch)
{
	enum { N = 30, HWB = 24 };
	char err[256];
	sub_vfs *cv;
	static sub_methods cm;
	ck_assert_int_eq(sub_open_url(h_dir, &cv, err, sizeof(err)), 0);
	cnt_inner = cv->m;
	cm = *cv->m;
	cm.pread = cnt_pread;
	cv->m = &cm;
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = 200 * 1024;
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(cv, "t/mid", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	/* Large batches (12 x 4000 B) among small ones; the last N - HWB are
	 * written but not durable. */
	mid_batch t[N];
	uint64_t seg_pos = 0;
	int seg = 0;
	for (int i = 0; i < N; i++) {
		kbuild b = KBUILD_INIT;
		ks_append_result res;
		if (i % 3 == 0)
			kbuild_simple(&b, -1, -1, -1, 12, 1700000000000LL + i, "big", 4000, KBUILD_NONE);
		else
			kbuild_simple(&b, -1, -1, -1, 1, 1700000000000LL + i, "small", 100 + 37 * i, KBUILD_NONE);
		if (seg_pos > 0 && seg_pos + b.len > (uint64_t)cfg.segment_bytes) {
			seg++;
			seg_pos = 0;
		}
		ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
		ck_assert_int_eq(res.error, 0);
		t[i] = (mid_batch){res.base_offset, res.last_offset, seg, seg_pos, (uint32_t)b.len, b.buf};
		seg_pos += b.len;
		b.buf = NULL;
		kbuild_free(&b);
		if (i == HWB - 1)
			ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	}
	ck_assert_int_ge(t[N - 1].seg, 2);
	int64_t hw = t[HWB].base;
	ck_assert_int_eq(ks_partition_high_watermark(p), hw);
	uint8_t *want = malloc(2u << 20), *got = malloc(2u << 20);
	static const uint32_t maxes[] = {1, 100, 5000, 49000, 60000, 130000, 250000, 1u << 20};
	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1) {
			/* Again without the tail ring, indexes from their files. */
			ck_assert_int_eq(ks_partition_relinquish(p), 0);
			ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
			hw = t[N - 1].last + 1;
			ck_assert_int_eq(ks_partition_high_watermark(p), hw);
			/* Load every segment's metadata, and let the first read
			 * of each byte verify its CRC, before counting reads. */
			for (int i = 0; i < N; i++) {
				ks_read_plan plan = KAAS_READ_PLAN_INIT;
				ck_assert_int_eq(ks_partition_read(p, t[i].base, 1, &plan), 0);
				ks_read_plan_release(&plan);
			}
			uint8_t *all;
			h_read_all(p, 0, 1 << 30, &all);
			free(all);
		}
		int hwb = pass == 0 ? HWB : N;
		int cut = 0, kip74 = 0, at_hw = 0, multi = 0;
		for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
			for (int64_t off = 0; off < hw; off++) {
				ks_read_plan plan = KAAS_READ_PLAN_INIT;
				int before = __atomic_load_n(&cnt_preads, __ATOMIC_RELAXED);
				ck_assert_int_eq(ks_partition_read(p, off, (int32_t)maxes[m], &plan), 0);
				int reads = __atomic_load_n(&cnt_preads, __ATOMIC_RELAXED) - before;
				ck_assert_int_eq(plan.error, 0);
				int nr;
				size_t wlen = mid_expect(t, hwb, off, maxes[m], want, &nr);
				ck_assert_msg(plan.total == wlen, "pass %d off %lld max %u: %u bytes, want %zu", pass,
					      (long long)off, maxes[m], plan.total, wlen);
				ck_assert_int_eq(plan.n, nr);
				size_t glen = 0;
				for (int r = 0; r < plan.n; r++) {
					ck_assert_int_eq(sub_pread_full(plan.r[r].file, got + glen, plan.r[r].len,
									plan.r[r].pos), 0);
					glen += plan.r[r].len;
				}
				ck_assert_mem_eq(got, want, wlen);
				/* Only the start is looked up: one short read at most
				 * however many batches the plan spans, none at the tail. */
				ck_assert_int_le(reads, 1);
				int k = 0;
				while (t[k].last < off)
					k++;
				if (pass == 0 && t[k].seg == t[N - 1].seg)
					ck_assert_int_eq(reads, 0);
				kip74 += maxes[m] < t[k].size && wlen == t[k].size;
				at_hw += wlen < maxes[m];
				cut += wlen == maxes[m] && wlen > t[k].size;
				multi += plan.n > 1;
				ks_read_plan_release(&plan);
			}
		}
		/* Every kind of plan was met. */
		ck_assert_int_gt(kip74, 0);
		ck_assert_int_gt(at_hw, 0);
		ck_assert_int_gt(cut, 0);
		ck_assert_int_gt(multi, 0);
	}
	/* A client reading the log this way gets every batch once. */
	uint8_t *log;
	size_t len = h_read_all(p, 0, 70000, &log);
	ck_assert_int_eq(h_check_log(log, len, 0), t[N - 1].last + 1);
	free(log);
	for (int i = 0; i < N; i++)
		free(t[i].bytes);
	free(want);
	free(got);
	ks_partition_close(p);
	sub_destroy(cv);
}
END_TEST

/* ---- descriptors ------------------------------------------------------------------- */

START_TEST(open_without_takeover_holds_no_descriptors)
{
	enum { N = 1000 };
	ks_log_config cfg = h_cfg();
	static ks_partition *ps[N];
	/* Some of them have data already. */
	for (int i = 0; i < 20; i++) {
		char dir[64];
		snprintf(dir, sizeof(dir), "fd/%d", i);
		ck_assert_int_eq(ks_partition_open(h_vfs, dir, NULL, 1, &cfg, &ps[i]), 0);
		ck_assert_int_eq(ks_partition_take_over(ps[i], 1), 0);
		h_put(ps[i], 2, "fd", 10);
		ks_partition_close(ps[i]);
	}
	int before = h_count_fds();
	for (int i = 0; i < N; i++) {
		char dir[64];
		snprintf(dir, sizeof(dir), "fd/%d", i);
		ck_assert_int_eq(ks_partition_open(h_vfs, dir, NULL, 1, &cfg, &ps[i]), 0);
	}
	ck_assert_int_eq(h_count_fds(), before);
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(ks_partition_high_watermark(ps[i]), 2);
	/* Leaders hold descriptors; relinquish closes every one. */
	for (int i = 0; i < 30; i++)
		ck_assert_int_eq(ks_partition_take_over(ps[i], 2), 0);
	ck_assert_int_gt(h_count_fds(), before);
	for (int i = 0; i < 30; i++) {
		ks_read_plan plan = KAAS_READ_PLAN_INIT;
		ck_assert_int_eq(ks_partition_read(ps[i], 0, 100, &plan), 0);
		ks_read_plan_release(&plan);
		ck_assert_int_eq(ks_partition_relinquish(ps[i]), 0);
	}
	ck_assert_int_eq(h_count_fds(), before);
	for (int i = 0; i < N; i++)
		ks_partition_close(ps[i]);
	ck_assert_int_eq(h_count_fds(), before);
}
END_TEST

START_TEST(read_plan_keeps_file_after_relinquish)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(h_vfs, "t/8", NULL, 1, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 1), 0);
	h_put(p, 3, "keep", 20);
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	int before = h_count_fds();
	ks_read_plan plan = KAAS_READ_PLAN_INIT;
	ck_assert_int_eq(ks_partition_read(p, 0, 1000, &plan), 0);
	ck_assert_int_eq(plan.n, 1);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ck_assert_int_le(h_count_fds(), before); /* only the plan's log is left */
	/* Still readable through the plan. */
	uint8_t buf[KB_HDR];
	ck_assert_int_eq(sub_pread_full(plan.r[0].file, buf, KB_HDR, plan.r[0].pos), 0);
	ck_assert_int_eq(buf[KB_OFF_MAGIC], 2);
	int held = h_count_fds();
	ks_read_plan_release(&plan);
	ck_assert_int_eq(h_count_fds(), held - 1);
	ks_partition_close(p);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "storage", .tcase = "core", .timeout = 60,
					  .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(append_flush_read_roundtrip,
				     takeover_by_another_instance_continues_the_log,
				     roll_by_size_and_reads_across_segments,
				     invalid_batches_are_refused_whole,
				     compressed_batches_validated_and_stored_as_is,
				     log_append_time_and_max_timestamp_fixup, list_offsets_by_time,
				     group_commit_concurrent_appenders,
				     group_commit_appends_during_fsync_and_shares_it,
				     pipelined_fsync_failure_acknowledges_nothing_after_it,
				     concurrent_readers_writers_and_retention,
				     read_plans_end_mid_batch,
				     open_without_takeover_holds_no_descriptors,
				     read_plan_keeps_file_after_relinquish));
}
