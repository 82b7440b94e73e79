/*
 * producer.h — idempotent-producer state of one partition: per producer id
 * the epoch and the last five batches (sequence range, offsets), the window
 * Kafka clients rely on for retries (max.in.flight <= 5).  Also the
 * producer-state.snapshot encoding (docs/storage.md).
 */
#ifndef KAAS_STORAGE_PRODUCER_H
#define KAAS_STORAGE_PRODUCER_H

#include <stddef.h>
#include <stdint.h>

#define KP_BATCHES 5

typedef struct kp_batch {
	int32_t first_seq, last_seq;
	int64_t first_off, last_off;
	int64_t max_ts;
} kp_batch;

typedef struct kp_entry {
	int64_t pid;
	int16_t epoch;
	uint8_t n;              /* cached batches, oldest first */
	kp_batch b[KP_BATCHES];
	int64_t last_ts;        /* newest batch timestamp seen (expiry) */
	struct kp_entry *next;  /* hash chain */
} kp_entry;

typedef struct kp_table {
	kp_entry **buckets;
	size_t nbuckets;
	size_t count;
} kp_table;

#define KP_TABLE_INIT {NULL, 0, 0}

void ks__kp_free(kp_table *t);
kp_entry *ks__kp_find(const kp_table *t, int64_t pid);

/* Kafka 2.x checks for one batch against `e` (NULL: producer unknown).
 * Returns KERR_NONE, or an error code; *dup set (and *dup_batch the cached
 * original) when the batch is an idempotent retry. */
int ks__kp_check(const kp_entry *e, int16_t epoch, int32_t first_seq, int32_t last_seq, int *dup,
	     kp_batch *dup_batch, const char **msg);

/* Records a batch in `e` (an epoch change drops the old window). */
void ks__kp_entry_apply(kp_entry *e, int16_t epoch, const kp_batch *b);

/* Find-or-create then apply.  -ENOMEM. */
int ks__kp_apply(kp_table *t, int64_t pid, int16_t epoch, const kp_batch *b);

/* Replaces/inserts a whole entry (copy). -ENOMEM. */
int ks__kp_put(kp_table *t, const kp_entry *src);

/* Drops producers whose newest batch lies wholly below log_start (retention
 * or DeleteRecords removed them), and those idle since before expire_before
 * (a timestamp; INT64_MIN for none).  Returns how many were dropped. */
size_t ks__kp_evict(kp_table *t, int64_t log_start, int64_t expire_before);

/* Snapshot: header {magic "KPS1", u16 version, u16 flags, i32 leader epoch,
 * i64 offset, u32 count}, entries, u32 CRC-32C of everything before it. */
int ks__kp_encode(const kp_table *t, int32_t epoch, int64_t offset, uint8_t **out, size_t *len);
/* Returns 0 with a fresh table, or -EBADMSG (corrupt / wrong version). */
int ks__kp_decode(const uint8_t *buf, size_t len, kp_table *t, int32_t *epoch, int64_t *offset);

#endif
