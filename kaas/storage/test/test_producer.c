/*
 * test_producer.c — idempotent producers: duplicates answered with the
 * original offsets, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
 * UNKNOWN_PRODUCER_ID, the five-batch window, and the producer-state
 * snapshot carried across a takeover by another engine instance (intact,
 * corrupt, missing, or older than the log tail).
 */
#include <sys/stat.h>

#include "kaas/storage/producer.h"
#include "kaas/storage/test/harness.h"
#include "util/test/ktest.h"

typedef struct pres {
	int16_t err;
	int dup;
	int64_t base, last;
} pres;

static pres send(ks_partition *p, int64_t pid, int16_t epoch, int32_t seq, int n)
{
	kbuild b = KBUILD_INIT;
	ks_append_result res;
	kbuild_simple(&b, pid, epoch, seq, n, 1700000000000LL, "idem", 20, KBUILD_NONE);
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	kbuild_free(&b);
	return (pres){res.error, res.duplicate, res.base_offset, res.last_offset};
}

static ks_partition *leader(sub_vfs *vfs, const char *dir, int32_t epoch, const ks_log_config *cfg)
{
	ks_partition *p;
	ck_assert_int_eq(ks_partition_open(vfs, dir, NULL, 1, cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, epoch), 0);
	return p;
}

START_TEST(sequence_rules)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p = leader(h_vfs, "p", 1, &cfg);
	pres r = send(p, 100, 0, 0, 3);
	ck_assert_int_eq(r.err, 0);
	ck_assert_int_eq(r.base, 0);
	r = send(p, 100, 0, 3, 2);
	ck_assert_int_eq(r.err, 0);
	ck_assert_int_eq(r.base, 3);
	/* Retries of either: the original offsets, nothing written. */
	r = send(p, 100, 0, 0, 3);
	ck_assert_int_eq(r.err, 0);
	ck_assert(r.dup);
	ck_assert_int_eq(r.base, 0);
	ck_assert_int_eq(r.last, 2);
	r = send(p, 100, 0, 3, 2);
	ck_assert(r.dup);
	ck_assert_int_eq(r.base, 3);
	ck_assert_int_eq(ks_partition_log_end(p), 5);
	/* A gap, an overlap that is not a retry. */
	ck_assert_int_eq(send(p, 100, 0, 7, 1).err, KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	ck_assert_int_eq(send(p, 100, 0, 4, 1).err, KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	/* Unknown producer not starting at 0. */
	ck_assert_int_eq(send(p, 200, 0, 5, 1).err, KERR_UNKNOWN_PRODUCER_ID);
	/* Epochs: a bump must restart at 0; older epochs are fenced. */
	ck_assert_int_eq(send(p, 100, 1, 5, 1).err, KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	r = send(p, 100, 1, 0, 1);
	ck_assert_int_eq(r.err, 0);
	ck_assert(!r.dup);
	ck_assert_int_eq(send(p, 100, 0, 5, 1).err, KERR_INVALID_PRODUCER_EPOCH);
	ck_assert_int_eq(send(p, 100, 0, 0, 3).err, KERR_INVALID_PRODUCER_EPOCH);
	/* Window of five: the sixth-newest batch is no longer recognised. */
	for (int i = 1; i <= 6; i++)
		ck_assert_int_eq(send(p, 100, 1, i, 1).err, 0);
	ck_assert(send(p, 100, 1, 2, 1).dup);
	ck_assert_int_eq(send(p, 100, 1, 1, 1).err, KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	/* Two batches of one producer in one request. */
	kbuild b = KBUILD_INIT;
	ks_append_result res;
	kbuild_simple(&b, 300, 0, 0, 2, 1700000000000LL, "m", 10, KBUILD_NONE);
	kbuild_simple(&b, 300, 0, 2, 2, 1700000000000LL, "m", 10, KBUILD_NONE);
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, 0);
	ck_assert_int_eq(res.last_offset - res.base_offset, 3);
	kbuild_free(&b);
	kbuild_simple(&b, 300, 0, 4, 1, 1700000000000LL, "m", 10, KBUILD_NONE);
	kbuild_simple(&b, 300, 0, 6, 1, 1700000000000LL, "m", 10, KBUILD_NONE);
	ck_assert_int_eq(ks_partition_append(p, b.buf, b.len, &res), 0);
	ck_assert_int_eq(res.error, KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	ck_assert_int_eq(res.batch_index, 1);
	kbuild_free(&b);
	/* Non-idempotent batches are not checked at all. */
	ck_assert_int_eq(send(p, -1, -1, -1, 2).err, 0);
	ck_assert_int_eq(send(p, -1, -1, -1, 2).err, 0);
	ks_partition_close(p);
}
END_TEST

START_TEST(sequence_wraps_and_snapshot_codec)
{
	kp_entry e;
	memset(&e, 0, sizeof(e));
	e.pid = 9;
	e.epoch = 3;
	kp_batch b = {INT32_MAX - 4, INT32_MAX, 10, 14, 1000};
	ks__kp_entry_apply(&e, 3, &b);
	int dup;
	kp_batch orig;
	const char *msg;
	ck_assert_int_eq(ks__kp_check(&e, 3, 0, 4, &dup, &orig, &msg), 0);
	ck_assert(!dup);
	ck_assert_int_eq(ks__kp_check(&e, 3, 1, 4, &dup, &orig, &msg), KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	ck_assert_int_eq(kb_seq_add(INT32_MAX - 1, 3), 1);

	kp_table t = KP_TABLE_INIT, u = KP_TABLE_INIT;
	for (int64_t pid = 0; pid < 300; pid++)
		for (int k = 0; k < 1 + pid % 7; k++) {
			kp_batch x = {k * 2, k * 2 + 1, pid * 100 + k * 2, pid * 100 + k * 2 + 1, pid};
			ck_assert_int_eq(ks__kp_apply(&t, pid, (int16_t)(pid % 4), &x), 0);
		}
	uint8_t *buf;
	size_t len;
	ck_assert_int_eq(ks__kp_encode(&t, 5, 40000, &buf, &len), 0);
	int32_t ep;
	int64_t off;
	ck_assert_int_eq(ks__kp_decode(buf, len, &u, &ep, &off), 0);
	ck_assert_int_eq(ep, 5);
	ck_assert_int_eq(off, 40000);
	ck_assert_uint_eq(u.count, 300);
	for (int64_t pid = 0; pid < 300; pid++) {
		kp_entry *a = ks__kp_find(&t, pid), *c = ks__kp_find(&u, pid);
		ck_assert_ptr_nonnull(c);
		ck_assert_int_eq(a->n, c->n);
		ck_assert_int_eq(a->epoch, c->epoch);
		ck_assert_mem_eq(a->b, c->b, sizeof(a->b[0]) * a->n);
	}
	/* Every single flipped bit and every truncation is detected. */
	for (size_t i = 0; i < len; i += 7) {
		buf[i] ^= 0x04;
		ck_assert_int_eq(ks__kp_decode(buf, len, &u, &ep, &off), -EBADMSG);
		buf[i] ^= 0x04;
	}
	for (size_t n = 0; n < len; n += 97)
		ck_assert_int_eq(ks__kp_decode(buf, n, &u, &ep, &off), -EBADMSG);
	free(buf);
	/* Producers wholly below the log start are forgotten. */
	ck_assert_uint_eq(ks__kp_evict(&t, 150 * 100, INT64_MIN), 150);
	ck_assert_ptr_null(ks__kp_find(&t, 149));
	ck_assert_ptr_nonnull(ks__kp_find(&t, 150));
	ks__kp_free(&t);
	ks__kp_free(&u);
}
END_TEST

/* What another engine instance (own vfs) sees after taking over `dir`. */
static uint64_t snap_ino(const char *dir)
{
	char path[512];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s/producer-state.snapshot", h_dir, dir);
	return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* rebuilt: whether the take-over must have rebuilt (and so rewritten) the
 * snapshot; an intact one is used as it is. */
static void check_window_after_takeover(const char *dir, int32_t epoch, int64_t pid, int nb,
					int rebuilt)
{
	sub_vfs *v2;
	char err[256];
	ck_assert_int_eq(sub_open_url(h_dir, &v2, err, sizeof(err)), 0);
	ks_log_config cfg = h_cfg();
	uint64_t ino = snap_ino(dir);
	ks_partition *q = leader(v2, dir, epoch, &cfg);
	if (rebuilt)
		ck_assert_uint_ne(snap_ino(dir), ino);
	else
		ck_assert_uint_eq(snap_ino(dir), ino);
	/* Batches were seq 2k..2k+1 at offsets base 2k (only this producer). */
	for (int k = nb - 5; k < nb; k++) {
		pres r = send(q, pid, 0, 2 * k, 2);
		ck_assert_msg(r.err == 0 && r.dup, "batch %d: err %d dup %d", k, r.err, r.dup);
		ck_assert_int_eq(r.base, 2 * k);
	}
	ck_assert_int_eq(send(q, pid, 0, 2 * nb + 4, 2).err, KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	ck_assert_int_eq(send(q, pid, 0, 2 * (nb - 6), 2).err, KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	pres r = send(q, pid, 0, 2 * nb, 2);
	ck_assert_int_eq(r.err, 0);
	ck_assert(!r.dup);
	ck_assert_int_eq(r.base, 2 * nb);
	ks_partition_close(q);
	sub_destroy(v2);
}

START_TEST(snapshot_carries_the_window_across_takeover)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = 1024;
	ks_partition *p = leader(h_vfs, "s", 1, &cfg);
	for (int k = 0; k < 30; k++)
		ck_assert_int_eq(send(p, 77, 0, 2 * k, 2).err, 0);
	ck_assert_int_gt(h_count_files("s", ".log"), 2);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "cp -a %s/s %s/s2 && cp -a %s/s %s/s3 && cp -a %s/s %s/s4", h_dir, h_dir,
		 h_dir, h_dir, h_dir, h_dir);
	ck_assert_int_eq(system(cmd), 0);
	/* Intact snapshot. */
	check_window_after_takeover("s", 2, 77, 30, 0);
	/* Corrupt: rebuilt from the log, same answers. */
	snprintf(cmd, sizeof(cmd), "printf '\\x55' | dd of=%s/s2/producer-state.snapshot bs=1 seek=30 conv=notrunc 2>/dev/null",
		 h_dir);
	ck_assert_int_eq(system(cmd), 0);
	check_window_after_takeover("s2", 2, 77, 30, 1);
	/* Missing. */
	snprintf(cmd, sizeof(cmd), "rm %s/s3/producer-state.snapshot", h_dir);
	ck_assert_int_eq(system(cmd), 0);
	check_window_after_takeover("s3", 2, 77, 30, 1);
	/* Written by an older epoch whose log a newer leader superseded: the
	 * snapshot claims offsets the live log does not have from that epoch. */
	snprintf(cmd, sizeof(cmd), "cp %s/s/producer-state.snapshot %s/s4/producer-state.snapshot", h_dir, h_dir);
	ck_assert_int_eq(system(cmd), 0);
	check_window_after_takeover("s4", 5, 77, 30, 1);
}
END_TEST

/* What only the snapshot knows: DeleteRecords removed the older batches of
 * a producer's window from the log, so a take-over that rebuilt the state
 * from the log would call their retries out of order. */
START_TEST(snapshot_is_used_not_rebuilt_from_the_log)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p = leader(h_vfs, "sd", 1, &cfg);
	for (int k = 0; k < 30; k++)
		ck_assert_int_eq(send(p, 77, 0, 2 * k, 2).err, 0);
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	int64_t low;
	int16_t err;
	ck_assert_int_eq(ks_partition_delete_records(p, 56, &low, &err), 0);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);

	sub_vfs *v2;
	char e[256];
	ck_assert_int_eq(sub_open_url(h_dir, &v2, e, sizeof(e)), 0);
	ks_partition *q = leader(v2, "sd", 2, &cfg);
	ck_assert_int_eq(ks_partition_log_start(q), 56);
	/* Batches 25..29 (seq 50..59) are the window; 25..27 lie below 56. */
	for (int k = 25; k < 30; k++) {
		pres r = send(q, 77, 0, 2 * k, 2);
		ck_assert_msg(r.err == 0 && r.dup, "batch %d: err %d dup %d", k, r.err, r.dup);
		ck_assert_int_eq(r.base, 2 * k);
	}
	ck_assert_int_eq(send(q, 77, 0, 2 * 24, 2).err, KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	ck_assert_int_eq(send(q, 77, 0, 62, 2).err, KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	pres r = send(q, 77, 0, 60, 2);
	ck_assert_int_eq(r.err, 0);
	ck_assert(!r.dup);
	ck_assert_int_eq(r.base, 60);
	ks_partition_close(q);
	sub_destroy(v2);
}
END_TEST

/* Writing the rebuilt snapshot is a write like any other: when it fails
 * the take-over fails (and is re-driven), it does not lead half-done. */
START_TEST(failed_snapshot_write_fails_the_takeover)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p = leader(h_vfs, "sf", 1, &cfg);
	for (int k = 0; k < 5; k++)
		ck_assert_int_eq(send(p, 12, 0, 2 * k, 2).err, 0);
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ks_partition_close(p);
	char path[512];
	snprintf(path, sizeof(path), "%s/sf/producer-state.snapshot", h_dir);
	ck_assert_int_eq(unlink(path), 0);
	char url[600], e[256];
	sub_vfs *fv;
	snprintf(url, sizeof(url), "fault:%s?failpath=*producer-state.snapshot:rename:EIO", h_dir);
	ck_assert_int_eq(sub_open_url(url, &fv, e, sizeof(e)), 0);
	ck_assert_int_eq(ks_partition_open(fv, "sf", NULL, 0, &cfg, &p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), -EIO);
	ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_FOLLOWER);
	ks_partition_close(p);
	sub_destroy(fv);
	/* Re-driven through a healthy client: leads, snapshot written. */
	p = leader(h_vfs, "sf", 2, &cfg);
	ck_assert_int_eq(access(path, F_OK), 0);
	pres r = send(p, 12, 0, 8, 2);
	ck_assert(r.dup);
	ck_assert_int_eq(r.base, 8);
	ks_partition_close(p);
}
END_TEST

START_TEST(snapshot_from_roll_plus_replayed_tail_after_crash)
{
	ks_log_config cfg = h_cfg();
	cfg.segment_bytes = 1024;
	ks_partition *p = leader(h_vfs, "c", 1, &cfg);
	for (int k = 0; k < 25; k++) {
		ck_assert_int_eq(send(p, 5, 0, 2 * k, 2).err, 0);
		ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	}
	/* The leader's host dies: the volume as it is now. */
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "cp -a %s/c %s/c2", h_dir, h_dir);
	ck_assert_int_eq(system(cmd), 0);
	check_window_after_takeover("c2", 2, 5, 25, 0);
	ks_partition_close(p);
}
END_TEST

START_TEST(producers_below_log_start_are_unknown)
{
	ks_log_config cfg = h_cfg();
	ks_partition *p = leader(h_vfs, "u", 1, &cfg);
	ck_assert_int_eq(send(p, 8, 0, 0, 2).err, 0);
	ck_assert_int_eq(send(p, 9, 0, 0, 2).err, 0);
	ck_assert_int_eq(ks_partition_flush(p, NULL), 0);
	int64_t low;
	int16_t err;
	ck_assert_int_eq(ks_partition_delete_records(p, 2, &low, &err), 0);
	ck_assert_int_eq(err, 0);
	ck_assert_int_eq(send(p, 8, 0, 2, 1).err, KERR_UNKNOWN_PRODUCER_ID);
	ck_assert_int_eq(send(p, 9, 0, 2, 1).err, 0);
	/* The same after a takeover. */
	ck_assert_int_eq(ks_partition_relinquish(p), 0);
	ck_assert_int_eq(ks_partition_take_over(p, 2), 0);
	ck_assert_int_eq(send(p, 8, 0, 2, 1).err, KERR_UNKNOWN_PRODUCER_ID);
	ck_assert_int_eq(send(p, 9, 0, 3, 1).err, 0);
	ks_partition_close(p);
}
END_TEST

START_TEST(snapshot_of_a_superseded_epoch_is_not_trusted)
{
	ks_log_config cfg = h_cfg();
	char cmd[2048];
	/* A stale leader at epoch 1 got to offset 30 (producer 7, seq 0..29)
	 * and wrote its snapshot... */
	ks_partition *a = leader(h_vfs, "za", 1, &cfg);
	for (int k = 0; k < 15; k++)
		ck_assert_int_eq(send(a, 7, 0, 2 * k, 2).err, 0);
	ck_assert_int_eq(ks_partition_relinquish(a), 0);
	ks_partition_close(a);
	/* ...but the real successor took over when epoch 1's log ended at 20. */
	ks_partition *b = leader(h_vfs, "zb", 1, &cfg);
	for (int k = 0; k < 10; k++)
		ck_assert_int_eq(send(b, 7, 0, 2 * k, 2).err, 0);
	ck_assert_int_eq(ks_partition_flush(b, NULL), 0);
	snprintf(cmd, sizeof(cmd), "cp -a %s/zb %s/z", h_dir, h_dir);
	ck_assert_int_eq(system(cmd), 0);
	ks_partition_close(b);
	ks_partition *c = leader(h_vfs, "z", 2, &cfg);
	for (int k = 0; k < 10; k++)
		ck_assert_int_eq(send(c, 8, 0, 2 * k, 2).err, 0);
	ck_assert_int_eq(ks_partition_log_end(c), 40);
	ck_assert_int_eq(ks_partition_relinquish(c), 0);
	ks_partition_close(c);
	/* The stale snapshot lands last (it raced the fencing check). */
	snprintf(cmd, sizeof(cmd), "cp %s/za/producer-state.snapshot %s/z/", h_dir, h_dir);
	ck_assert_int_eq(system(cmd), 0);
	ks_partition *d = leader(h_vfs, "z", 3, &cfg);
	/* Producer 7's real history ends at seq 19: 20 is next, 28 a duplicate of nothing. */
	ck_assert_int_eq(send(d, 7, 0, 28, 2).err, KERR_OUT_OF_ORDER_SEQUENCE_NUMBER);
	pres r = send(d, 7, 0, 18, 2);
	ck_assert(r.dup);
	ck_assert_int_eq(r.base, 18);
	r = send(d, 7, 0, 20, 2);
	ck_assert_int_eq(r.err, 0);
	ck_assert(!r.dup);
	ck_assert_int_eq(r.base, 40);
	ck_assert(send(d, 8, 0, 18, 2).dup);
	ks_partition_close(d);
}
END_TEST

static scratch h_mem;

/* send(), for a partition whose append may fail (poisoned). */
static pres send_may_fail(ks_partition *p, int64_t pid, int16_t epoch, int32_t seq, int n)
{
	kbuild b = KBUILD_INIT;
	ks_append_result res;
	kbuild_simple(&b, pid, epoch, seq, n, 1700000000000LL, "idem", 20, KBUILD_NONE);
	int rc = ks_partition_append(p, b.buf, b.len, &res);
	kbuild_free(&b);
	if (rc < 0 && !res.error)
		res.error = KERR_KAFKA_STORAGE_ERROR;
	return (pres){res.error, res.duplicate, res.base_offset, res.last_offset};
}

/* A leader whose I/O fails at one call (each call of the kind in turn: the
 * data may have reached the file, as when a write lands and its fsync then
 * fails) is poisoned; this engine takes it over again, as the broker
 * re-drives it, and the producer sends what was not acknowledged again —
 * with the same sequence numbers, or (bump) as librdkafka does after it
 * bumped its epoch for a reason elsewhere: from sequence 0 of the next
 * epoch, since it was told the batch was not written.  Either way every
 * record must be in the log once: a batch answered with an error must not
 * come back in the re-take. */
static void retake_sweep(const char *op, int nth, int roll, int bump)
{
	ks_log_config cfg = h_cfg();
	if (roll)
		cfg.segment_bytes = 700;
	char dir[64], url[700], e[256];
	snprintf(dir, sizeof(dir), "rt-%s-%d-%d-%d", op, nth, roll, bump);
	snprintf(url, sizeof(url), "fault:%s?fail=%s:%d:ENOSPC", h_mem.dir, op, nth);
	sub_vfs *fv;
	ck_assert_int_eq(sub_open_url(url, &fv, e, sizeof(e)), 0);
	ks_partition *p = NULL;
	for (int i = 0; i < 3 && !p; i++)
		if (ks_partition_open(fv, dir, NULL, 1, &cfg, &p))
			p = NULL;
	ck_assert_ptr_nonnull(p);
	int led = 0;
	for (int i = 0; i < 4 && !led; i++)
		led = ks_partition_take_over(p, 1) == 0;
	ck_assert(led);
	int k = 0, failed = 0, base_k = 0;
	int16_t pepoch = 0;
	while (k < 40) {
		pres r = send_may_fail(p, 77, pepoch, k - base_k, 1);
		ck_assert_msg(r.err == 0 || r.err == KERR_KAFKA_STORAGE_ERROR, "%s:%d roll %d: record %d: error %d",
			      op, nth, roll, k, r.err);
		int rc = r.err ? -EIO : ks_partition_flush(p, NULL);
		if (rc == 0) {
			k++;
			continue;
		}
		ck_assert_msg(failed++ < 3, "%s:%d: keeps failing", op, nth);
		for (int i = 0; i < 4; i++)
			if (ks_partition_take_over(p, 1) == 0)
				break;
		ck_assert_int_eq(ks_partition_state_of(p, NULL), KAAS_PART_LEADER);
		if (bump) {
			pepoch++;
			base_k = k;
		}
	}
	ck_assert_msg(ks_partition_log_end(p) == 40, "%s:%d roll %d bump %d: %lld records for 40 sent",
		      op, nth, roll, bump, (long long)ks_partition_log_end(p));
	ks_partition_close(p);
	sub_destroy(fv);
}

START_TEST(a_batch_answered_with_an_error_is_not_in_the_retaken_log)
{
	static const char *ops[] = {"fsync", "pwrite", "rename", "fsync_dir"};
	scratch_open_mem(&h_mem, "retake");
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (int roll = 0; roll < 2; roll++)
			for (int bump = 0; bump < 2; bump++)
				for (int n = 1; n <= 16; n++)
					retake_sweep(ops[o], n, roll, bump);
	scratch_close(&h_mem);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "storage-producer", .tcase = "producer", .timeout = 60,
					  .setup = h_setup, .teardown = h_teardown },
			  KTEST_LIST(sequence_rules, sequence_wraps_and_snapshot_codec,
				     snapshot_carries_the_window_across_takeover,
				     snapshot_is_used_not_rebuilt_from_the_log,
				     snapshot_from_roll_plus_replayed_tail_after_crash,
				     failed_snapshot_write_fails_the_takeover,
				     producers_below_log_start_are_unknown,
				     snapshot_of_a_superseded_epoch_is_not_trusted,
				     a_batch_answered_with_an_error_is_not_in_the_retaken_log));
}
