/*
 * epochs.h — where each leader epoch ends in a partition log, the answer
 * OffsetForLeaderEpoch gives (KIP-101, KIP-320).
 *
 * kaas keeps no leader-epoch cache beside the log: a segment is named with
 * the epoch of the leader that wrote it (<epoch:10>-<baseOffset:20>.log,
 * docs/storage.md) and a leader only ever appends to segments of its own
 * epoch, so the live segment list is the epoch history.  Epoch e starts at
 * the base of its first live segment and ends where the first segment of a
 * higher epoch begins; the current epoch ends at the log end.  Segments are
 * judged as the read path judges them: in base-offset order, one whose epoch
 * is lower than an earlier segment's is a zombie's and ignored.
 *
 * The answer follows Kafka's leader-epoch cache (LeaderEpochFileCache
 * .endOffsetFor), which is what clients' truncation checks are built for:
 *   requested < 0                      -> (-1, -1)  UNDEFINED
 *   requested > current epoch          -> (-1, -1)  UNDEFINED
 *   requested == current epoch         -> (current, log end)
 *   otherwise, with H the first epoch after `requested` and F the largest
 *   epoch <= requested:                -> (F, start of H)
 *   no such F (requested is older than every epoch still in the log,
 *   e.g. retention removed its segments) -> (requested, start of H)
 * Epochs below the log start offset are cut as Kafka's truncateFromStart
 * cuts them: of the epochs starting at or below the log start only the
 * last is kept, starting at the log start.  So a consumer positioned at
 * the log start is not told its log was truncated merely because
 * retention removed the segments of the epoch it last read.
 */
#ifndef KAAS_STORAGE_EPOCHS_H
#define KAAS_STORAGE_EPOCHS_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/storage/storage.h"

#define KS_UNDEFINED_EPOCH (-1)
#define KS_UNDEFINED_EPOCH_OFFSET (-1)

/* One segment as named: the epoch that wrote it and its base offset. */
typedef struct ks_epoch_seg {
	int32_t epoch;
	int64_t base;
} ks_epoch_seg;

/* The end of `requested` in a log whose segments are segs[0..n) sorted by
 * base offset (zombies may be among them: they are skipped), led now at
 * `current` (a leader with no segment of its own yet counts as one
 * starting at log_end), holding offsets [log_start, log_end).  Writes the
 * epoch and end offset of the table above; never fails. */
void ks_epoch_end_offset(const ks_epoch_seg *segs, size_t n, int32_t current, int64_t log_start,
			 int64_t log_end, int32_t requested, int32_t *epoch, int64_t *end_offset);

/* The same on a partition this process leads, from its live segment list,
 * its epoch, log start and log end, read under the partition lock.
 * *current (may be NULL) gets the partition's epoch.  0, or the reason it
 * cannot answer: -EPERM not leader, -ESTALE fenced by a newer leader, -EIO
 * poisoned, -ENOMEM. */
int ks_partition_epoch_end(ks_partition *p, int32_t requested, int32_t *epoch, int64_t *end_offset,
			   int32_t *current);

/* The epoch of the leader that wrote `offset` (ListOffsets v4+ answers it
 * beside the offset): that of the live segment holding it; at or past
 * log_end, the current epoch, which writes the next record.  -1 for a
 * negative offset or one below every segment. */
int32_t ks_epoch_at(const ks_epoch_seg *segs, size_t n, int32_t current, int64_t log_end,
		    int64_t offset);

/* The same on a partition this process leads; 0 or as above. */
int ks_partition_epoch_at(ks_partition *p, int64_t offset, int32_t *epoch);

#endif
