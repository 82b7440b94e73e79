/*
 * storage.h — the partition log on a shared volume.
 *
 * A partition is a directory DATA/<topic>/<partition>/ holding epoch-named
 * segments (docs/storage.md).  Only the partition's leader holds descriptors:
 * ks_partition_open() only stats; ks_partition_take_over() opens handles,
 * recovers the tail and rolls a segment named with the new epoch;
 * ks_partition_relinquish() persists manifest + producer snapshot and closes
 * every handle.
 *
 * Threading: every function may be called from any thread; a partition has
 * its own lock.  ks_partition_flush() runs its fsyncs without holding the
 * append path, so appends continue while a group commit is in flight.
 *
 * Errors: functions return 0 or a negative errno.  A failed write, fsync or
 * rename poisons the partition (LMDB-style): from then on appends and reads
 * answer KERR_KAFKA_STORAGE_ERROR until the partition is taken over again;
 * nothing is served from memory that the disk may not hold.
 */
#ifndef KAAS_STORAGE_H
#define KAAS_STORAGE_H

#include <stddef.h>
#include <stdint.h>

#include "substrates/sub.h"

typedef struct ks_log_config {
	int64_t segment_bytes;          /* roll at this size (Kafka default 1 GiB) */
	int64_t segment_ms;             /* roll when the active segment is this old (7 days) */
	int64_t retention_ms;           /* -1 = keep forever (default 7 days) */
	int64_t retention_bytes;        /* -1 = unlimited (default) */
	int32_t max_message_bytes;      /* largest batch accepted (1048588) */
	int32_t index_interval_bytes;   /* bytes between sparse index entries (4096) */
	int32_t timestamp_type;         /* 0 CreateTime (default), 1 LogAppendTime */
	/* Added by the storage engine (docs/storage.md); a zeroed field means
	 * the default, so callers unaware of them stay safe: */
	int64_t timestamp_difference_max_ms; /* message.timestamp.difference.max.ms, <= 0 = unlimited (default) */
	int32_t validate_compressed;    /* decompress compressed batches to check their records (1; 0 = off) */
	int64_t producer_expiration_ms; /* forget idle producer ids after this (<= 0: 7 days) */
	int64_t checkpoint_ms;          /* housekeep rewrites the manifest's high watermark this often (0: 60 s; < 0: every time) */
	int32_t flush_depth;            /* group commit: fsyncs of one partition in flight at once,
	                                   1..KAAS_FLUSH_DEPTH_MAX (0: KAAS_FLUSH_DEPTH_DEFAULT);
	                                   taken at open, ks_partition_set_config leaves it */
	int64_t idle_close_ms;          /* housekeep closes the logs of a partition unused this long (0: 60 s; < 0: never) */
	/* Log compaction (docs/storage.md, "Compaction"); a zeroed
	 * cleanup_compact means cleanup.policy=delete and the rest is unused. */
	int32_t cleanup_compact;        /* KS_CLEANUP_* */
	int64_t delete_retention_ms;    /* delete.retention.ms: tombstones kept this long (1 day) */
	int64_t min_compaction_lag_ms;  /* min.compaction.lag.ms (0) */
	int64_t max_compaction_lag_ms;  /* max.compaction.lag.ms (<= 0 or INT64_MAX: none) */
	double min_cleanable_dirty_ratio; /* min.cleanable.dirty.ratio (0.5) */
	/* compression.type (docs/storage.md, "Recompression"): a zeroed field
	 * means producer, batches stored as the producer compressed them. */
	int32_t compression_type;       /* KS_COMPRESS_* */
	int32_t compression_gzip_level; /* compression.gzip.level: -1, 1..9 (0: -1, zlib's 6) */
	int32_t compression_lz4_level;  /* compression.lz4.level: 1..17 (0: 9) */
	int32_t compression_zstd_level; /* compression.zstd.level: -131072..22 (0: 3) */
} ks_log_config;

/* compression.type, in Kafka's order of the values; a codec's is
 * KB_CODEC_* + 1 (KS_COMPRESS_CODEC). */
enum {
	KS_COMPRESS_PRODUCER = 0,
	KS_COMPRESS_UNCOMPRESSED,
	KS_COMPRESS_GZIP,
	KS_COMPRESS_SNAPPY,
	KS_COMPRESS_LZ4,
	KS_COMPRESS_ZSTD,
};
#define KS_COMPRESS_CODEC(t) ((t) - 1)

enum {
	KS_CLEANUP_DELETE = 0,          /* cleanup.policy=delete: retention only */
	KS_CLEANUP_COMPACT = 1,         /* compact: the cleaner, no retention */
	KS_CLEANUP_COMPACT_DELETE = 2,  /* compact,delete: both */
};

#define KAAS_FLUSH_DEPTH_DEFAULT 2
#define KAAS_FLUSH_DEPTH_MAX 8

void ks_log_config_defaults(ks_log_config *cfg);

typedef struct ks_partition ks_partition;

enum ks_partition_state {
	KAAS_PART_FOLLOWER = 0, /* open: metadata only, no descriptors */
	KAAS_PART_LEADER,       /* taken over: handles open, accepts appends */
	KAAS_PART_POISONED,     /* a write/fsync/rename failed: storage error until re-taken */
};

/* Opens DATA-relative `dir` ("orders/3") on vfs, creating it when `create`.
 * Reads names, sizes and the manifest; opens no descriptors.  topic_id (a
 * 36-character UUID string, or NULL to skip the check) must match the one in
 * the manifest when there is one: -ESTALE means the directory belongs to an
 * earlier incarnation of the topic. */
int ks_partition_open(sub_vfs *vfs, const char *dir, const char *topic_id, int create,
			const ks_log_config *cfg, ks_partition **out);

/* Becomes leader at `epoch`: opens the active log, restores the producer
 * snapshot, recovers the tail written since the last durable point (damage
 * below it is contained, never cut: see "damage" below), reconciles the
 * manifest and rolls a new segment <epoch>-<logEndOffset>.  A file of a
 * higher epoch means a newer leader: the take-over is abandoned (-ESTALE)
 * and nothing is moved, unless that epoch is one no authority can have
 * issued (above KS_EPOCH_PLAUSIBLE): such a file is foreign, set aside. */
int ks_partition_take_over(ks_partition *p, int32_t epoch);

/* The same, with `ceiling` the highest epoch the caller's authority has
 * ever issued for this partition (>= epoch).  An epoch read from the volume
 * (manifest, segment name, producer snapshot, clean.json) in (epoch,
 * max(ceiling, KS_EPOCH_PLAUSIBLE)] is a newer leader's: -ESTALE, nothing
 * moved.  One above both cannot have been issued: it is foreign, reported
 * by name, its file moved into the quarantine area, and never obeyed.
 * ks_partition_take_over(p, e) is ks_partition_take_over_bounded(p, e, e)
 * (docs/storage.md, "Numbers from the volume"). */
int ks_partition_take_over_bounded(ks_partition *p, int32_t epoch, int32_t ceiling);

/* Epochs grow by one per leadership change: no authority ever issues one
 * above this (kaas/core's KB_EPOCH_PLAUSIBLE is this number). */
#define KS_EPOCH_PLAUSIBLE (1 << 30)

/* Persists manifest + producer snapshot, then closes every handle.  The
 * final manifest carries the relinquish record (epoch, end offset, active
 * segment and its byte length), written after the last fsync: a successor
 * that finds it matching the files skips the recovery scan. */
int ks_partition_relinquish(ks_partition *p);

/* Relinquishes if leader, then frees.  NULL-safe. */
void ks_partition_close(ks_partition *p);

void ks_partition_set_config(ks_partition *p, const ks_log_config *cfg);

typedef struct ks_append_result {
	int16_t error;           /* Kafka error code (KERR_*), KERR_NONE when appended */
	int duplicate;           /* an idempotent retry: offsets are the original's */
	int64_t base_offset;     /* offset of the first record (-1 on error) */
	int64_t last_offset;
	int64_t log_append_time; /* -1 unless the topic uses LogAppendTime */
	int64_t log_start_offset;
	int32_t batch_index;     /* on INVALID_RECORD etc.: which batch (0-based) */
	int maybe_written;       /* on a volume failure: a batch of the request may be complete
				  * in the log (the write went through, or one of several batches
				  * may have); 0: none of them is (refused before the write, or
				  * the only batch's write failed, leaving it torn) */
	const char *message;     /* static text explaining error, or NULL */
} ks_append_result;

/* Appends one or more v2 record batches (the `records` field of a Produce
 * request).  Validates every batch (length, magic 2, CRC-32C, record count,
 * timestamps, size limit, producer sequence) before writing any; assigns
 * offsets by rewriting baseOffset and partitionLeaderEpoch in place (outside
 * the CRC); compressed payloads are stored as they are.
 *
 * Returns 0 with res->error set for anything the client did wrong (nothing
 * written), or a negative errno when the volume failed (partition poisoned,
 * res->error = KERR_KAFKA_STORAGE_ERROR).  Not leader: KERR_NOT_LEADER_OR_FOLLOWER.
 * Written is not durable: see ks_partition_flush(). */
int ks_partition_append(ks_partition *p, uint8_t *records, size_t len, ks_append_result *res);

/* Group commit: fsyncs everything appended so far and advances the durable
 * offset.  Concurrent callers share fsyncs; a second fsync may start while
 * one is in flight, and the durable offset advances in their start order
 * (docs/storage.md, durability contract).  *durable (may be NULL) gets
 * the durable offset afterwards.  A flush answers for the leadership its
 * caller appended under: once that leadership has ended it returns 0 (and
 * that leadership's final log end) only if its relinquish made everything
 * durable, else -EIO (failed or poisoned), -ESTALE (fenced) or -EPERM
 * (replaced by a take-over without relinquish).  Never led here: 0. */
int ks_partition_flush(ks_partition *p, int64_t *durable);

/* Offsets.  The high watermark is the durable offset: a consumer never sees a
 * record a crash could take back, so offsets are never reused for different
 * data. */
int64_t ks_partition_log_start(ks_partition *p);
int64_t ks_partition_log_end(ks_partition *p);
int64_t ks_partition_high_watermark(ks_partition *p);
int ks_partition_state_of(ks_partition *p, int32_t *epoch);
/* Where this engine's last leadership of p ended if an I/O failure ended it:
 * its durable offset and epoch (valid = 0 otherwise).  Everything it wrote
 * past that offset was answered with an error, so the next take-over of p
 * by this broker recovers the log only up to there (docs/storage.md,
 * "Poisoning").  A broker that closes the partition and opens it again
 * keeps it and hands it to ks_partition_take_over_after. */
typedef struct ks_failed_end {
	int valid;
	int64_t offset;
	int32_t epoch;
} ks_failed_end;
void ks_partition_failed_end(ks_partition *p, ks_failed_end *out);
/* ks_partition_take_over, also obeying `prev` (ks_partition_failed_end of
 * an earlier instance of this partition; NULL or zeroed: none) when this
 * instance has never led and knows no failed end of its own. */
int ks_partition_take_over_after(ks_partition *p, int32_t epoch, const ks_failed_end *prev);

/* Asked by a take-over right before every step that moves, renames,
 * truncates, unlinks or sets aside anything on the volume (`step` names
 * it, for the log).  0 lets it go on, with *ceiling (preset to -1: not
 * known) the highest epoch the caller's authority has issued for the
 * partition as read from the volume just now: above the epoch being taken
 * over means a newer leader was named, and the take-over is abandoned.  A
 * negative errno abandons it too: -ETIME the caller's lease lapsed,
 * -ESTALE the assignment it acts for was replaced, or any failure to find
 * out.  Called with the partition lock held, from the take-over's thread:
 * it must not call back into the partition. */
typedef int (*ks_takeover_guard_fn)(void *arg, int32_t epoch, const char *step, int32_t *ceiling);

typedef struct ks_takeover_opts {
	int32_t ceiling;           /* as in _bounded; < epoch: epoch */
	int32_t from_epoch;        /* > 0: the epoch the caller knows it takes over from
				    * (a relinquish record must name it); 0: the newest on the volume */
	const ks_failed_end *prev; /* as in _after; NULL: none */
	ks_takeover_guard_fn guard; /* NULL: only the volume's own epochs are re-checked */
	void *guard_arg;
} ks_takeover_opts;

/* The general take-over (the others are it with fewer options).  Before
 * each step that changes the volume it asks opts->guard and lists the
 * directory again: a newer epoch named by either abandons the take-over
 * (-ESTALE, or the guard's errno), logged, counted in takeovers_abandoned,
 * with nothing of the newer leader's moved.  A planned hand-off skips the
 * tail scan when the manifest carries a relinquish record that matches the
 * files (docs/storage.md, "Relinquish record"), counted in scans_skipped. */
int ks_partition_take_over_opts(ks_partition *p, int32_t epoch, const ks_takeover_opts *opts);
/* census.c: bytes of its segments on the volume, from the metadata in
 * memory (DescribeLogDirs); no I/O. */
int64_t ks_partition_size(ks_partition *p);

/* A read for Fetch, as Kafka serves one: the log from the start of the
 * batch containing `offset`, max_bytes long, never past the high watermark.
 * The first batch is always whole, even when larger than max_bytes (KIP-74);
 * the last one may be cut short (clients skip a truncated last batch and
 * fetch it again from its offset).  Only the start is looked up in the log,
 * so a plan costs at most one short read.  OFFSET_OUT_OF_RANGE below the log
 * start or beyond the log end; between the high watermark and the log end
 * the plan is empty.  The plan holds references that keep its segment files
 * open (even if retention unlinks them meanwhile) until released. */
#define KAAS_READ_MAX_RANGES 4
typedef struct ks_read_range {
	sub_file *file;
	uint64_t pos;
	uint32_t len;
} ks_read_range;

typedef struct ks_read_plan {
	int16_t error;             /* KERR_OFFSET_OUT_OF_RANGE, KERR_NOT_LEADER_OR_FOLLOWER,
				    * KERR_CORRUPT_MESSAGE (offset in a damaged range), ... */
	int64_t high_watermark;
	int64_t log_start_offset;
	int64_t last_stable_offset;
	int n;                     /* ranges below, in file order */
	ks_read_range r[KAAS_READ_MAX_RANGES];
	uint32_t total;            /* sum of r[].len */
	void *refs[KAAS_READ_MAX_RANGES]; /* private: segment references */
} ks_read_plan;

#define KAAS_READ_PLAN_INIT {0}

int ks_partition_read(ks_partition *p, int64_t offset, int32_t max_bytes, ks_read_plan *plan);
void ks_read_plan_release(ks_read_plan *plan); /* safe to repeat */

/* ListOffsets: timestamp -1 = latest (high watermark), -2 = earliest;
 * otherwise the first offset whose batch max timestamp is >= ts, with
 * *found_ts its timestamp; offset -1 when none. */
#define KAAS_TS_LATEST (-1)
#define KAAS_TS_EARLIEST (-2)
int ks_partition_offset_for_time(ks_partition *p, int64_t ts, int64_t *offset, int64_t *found_ts);

/* DeleteRecords: advance the log start offset to `offset` (-1 = high
 * watermark), persisted in the manifest before returning; whole segments below
 * it are unlinked.  OFFSET_OUT_OF_RANGE beyond the high watermark. */
int ks_partition_delete_records(ks_partition *p, int64_t offset, int64_t *low_watermark, int16_t *error);

/* Called (from the thread that ran the flush, without the partition lock)
 * whenever the high watermark advances, e.g. to wake parked long polls.
 * Two flushes retiring tickets at about the same time call it from their
 * own threads, so calls can arrive out of order (a lower hw after a higher
 * one): a user keeps the maximum it was told, never the last value. */
typedef void (*ks_hw_listener)(void *arg, ks_partition *p, int64_t hw);
void ks_partition_set_listener(ks_partition *p, ks_hw_listener fn, void *arg);

/* Periodic work on the leader: flush, roll by segment.ms, delete by
 * retention.ms and retention.bytes, remove zombie and stray files, checkpoint
 * the manifest.  Returns the number of segments deleted or -errno. */
int ks_partition_housekeep(ks_partition *p, int64_t now_ms);

/* ---- damage, quarantine, scrub (docs/storage.md, "Damage") ----------------
 * Damage in data that was durable (a sealed segment, or bytes below the
 * last durable point) is never a reason to truncate or delete: the range is
 * logged as ERROR naming the file and byte range, counted, the segment is
 * moved into DIR/quarantine/ (and still read from there), and a fetch that
 * meets the range answers KERR_CORRUPT_MESSAGE. */
typedef struct ks_partition_stats {
	uint64_t corrupt_ranges;    /* damaged ranges found (recovery, reads, scrub) */
	uint64_t corrupt_bytes;     /* bytes in them */
	uint64_t corrupt_reads;     /* fetches answered CORRUPT_MESSAGE */
	uint64_t quarantined_files; /* files moved into the quarantine area */
	uint64_t foreign_numbers;   /* numbers read from the volume refused as impossible */
	uint64_t scrubbed_bytes;    /* bytes the scrub verified */
	uint64_t scrub_passes;      /* complete scrub passes over the sealed segments */
	uint64_t takeovers_abandoned; /* take-overs that found a newer leader (or lost the guard) and stepped down */
	uint64_t scans_skipped;     /* take-overs that trusted a matching relinquish record */
	int damaged_segments;       /* live segments with a damaged range now */
	int open_files;             /* descriptors the partition holds now (read plans' excluded) */
} ks_partition_stats;

/* This partition's counters since it was opened (not reset by take-over). */
void ks_partition_stats_get(ks_partition *p, ks_partition_stats *out);

/* The same counters summed over every partition of the process since it
 * started (damaged_segments and open_files: current totals). */
typedef ks_partition_stats ks_storage_stats;
void ks_storage_stats_get(ks_storage_stats *out);

/* A token bucket shared by the scrub steps of one worker: bytes_per_sec
 * refill, at most one second's worth banked. */
typedef struct ks_scrub_rate {
	int64_t bytes_per_sec;
	int64_t tokens;
	int64_t last_ms;
} ks_scrub_rate;

void ks_scrub_rate_init(ks_scrub_rate *r, int64_t bytes_per_sec, int64_t now_ms);

/* One step of the background scrub of p's sealed segments (every segment
 * but the active one): verifies the CRC-32C of whole batches from where
 * the previous step stopped, as much as `rate` allows at now_ms (a batch
 * larger than what is left may overdraw the bucket once: it pays it back
 * before the next step reads).  Damage is handled as above.  Returns the
 * bytes verified (0: the bucket is empty or nothing is sealed) and sets
 * *pass_done when this step finished a pass over every sealed segment
 * (the next step starts another).  Reads without the partition lock.
 * Not leader: -EPERM; I/O failure: -errno (the partition is not poisoned:
 * reading is not writing). */
int64_t ks_partition_scrub(ks_partition *p, ks_scrub_rate *rate, int64_t now_ms, int *pass_done);

/* ---- log compaction (docs/storage.md, "Compaction") -------------------------
 * A cleaner is one worker's state: the key map (bounded by its buffer
 * size; a log with more dirty keys is cleaned in several passes) and the
 * I/O token bucket.  One cleaner serves any number of partitions, one at a
 * time; it is not thread-safe. */
typedef struct ks_cleaner ks_cleaner;

typedef struct ks_clean_stats {
	uint64_t passes;          /* swaps done */
	uint64_t bytes_read;
	uint64_t bytes_written;
	uint64_t records_kept;
	uint64_t records_removed; /* superseded, tombstones past delete.retention.ms, keyless */
	uint64_t tombstones_removed;
	uint64_t slept_ms;        /* waited for the I/O bucket */
	uint64_t unlinked;        /* files removed after a swap */
	uint64_t recompressed;    /* partly kept batches compressed again */
	uint64_t fenced;          /* swaps refused: lease gone or a newer epoch on the volume */
} ks_clean_stats;

/* dedupe_bytes: log.cleaner.dedupe.buffer.size (the key map takes it,
 * 24 bytes a key, filled to 90%); io_bytes_per_sec:
 * log.cleaner.io.max.bytes.per.second (<= 0: unlimited), reads and writes
 * together.  -EINVAL when the map would hold fewer than 16 keys. */
int ks_cleaner_new(size_t dedupe_bytes, int64_t io_bytes_per_sec, ks_cleaner **out);
void ks_cleaner_free(ks_cleaner *c); /* NULL-safe */
/* Asks a clean in progress (on another thread) to stop at its next batch;
 * it then returns -ECANCELED having swapped nothing. */
void ks_cleaner_stop(ks_cleaner *c);
/* Tests: the clock and sleep the I/O bucket uses (NULL: the real ones). */
void ks_cleaner_set_clock(ks_cleaner *c, int64_t (*now_ms)(void *), void (*sleep_ms)(void *, int64_t),
			  void *arg);
void ks_cleaner_stats(const ks_cleaner *c, ks_clean_stats *out);
/* Checked under the partition lock right before a swap: ok(arg) == 0
 * (the broker's lease is gone) refuses it as a fenced one. */
void ks_cleaner_set_guard(ks_cleaner *c, int (*ok)(void *), void *arg);

/* Cleans p once if it is due at wall time now_ms: a compacted topic whose
 * dirty ratio reached min.cleanable.dirty.ratio (or whose oldest dirty
 * record passed max.compaction.lag.ms).  Reads and writes without the
 * partition lock; the swap is one sub_write_atomic of clean.json, done
 * only by the leader that started the clean, after a fencing check.
 * Returns 1 when a pass was swapped in, 0 when nothing was due, -EPERM
 * when not leader (or the leadership changed meanwhile), -EBUSY when
 * another clean of p is running, -ECANCELED, or -errno (a failed
 * clean.json write poisons p; a failure before it leaves the log as it
 * was and removes what the pass wrote). */
int ks_partition_clean(ks_partition *p, ks_cleaner *c, int64_t now_ms);

/* For metrics: the share of p's cleanable bytes (sealed segments below the
 * high watermark) not yet de-duplicated, 0..1, from memory only.  0 with
 * *ratio set; -ENOENT when p is not a compacted topic's leader. */
int ks_partition_dirty_ratio(ks_partition *p, double *ratio);

/* The first offset not yet de-duplicated (Kafka's cleaner checkpoint) and
 * the end of the cleaned segments; both the log start when never cleaned. */
void ks_partition_clean_point(ks_partition *p, int64_t *dirty, int64_t *clean_end);

#endif
