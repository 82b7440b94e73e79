/*
 * storage_int.h — what the storage engine's files share: the segment and
 * partition structures, segment naming, the batch walker, the manifest,
 * and the functions one file of the partition offers the others.
 * Not for use outside kaas/storage/.
 */
#ifndef KAAS_STORAGE_STORAGE_INT_H
#define KAAS_STORAGE_STORAGE_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "kaas/storage/batch.h"
#include "kaas/storage/producer.h"
#include "kaas/storage/storage.h"
#include "substrates/sub.h"
#include "util/assert.h"

/* <epoch:10>-<baseOffset:20> */
#define SEG_STEM_LEN 31
#define SNAPSHOT_NAME "producer-state.snapshot"
#define MANIFEST_NAME "manifest.json"
/* The cleaner's swap record (docs/storage.md, "Compaction"). */
#define CLEAN_NAME "clean.json"
/* Where damaged and foreign files are moved (docs/storage.md, "Damage").
 * A damaged segment keeps its name there and stays part of the log; files
 * that are not (foreign epochs, an unacknowledged torn tail) get a prefix
 * that no segment name parses as. */
#define QUARANTINE_DIR "quarantine"

enum { SEG_LOG = 0, SEG_INDEX, SEG_TIMEINDEX, SEG_TXNINDEX, SEG_NKINDS };
extern const char *const ks__seg_suffix[SEG_NKINDS];

/* Parses "<epoch>-<base>.<suffix>"; returns the kind (SEG_*) or -1. */
int ks__seg_parse_name(const char *name, int32_t *epoch, int64_t *base);
/* The same, also accepting a cleaned segment's name
 * "<epoch>-<base>.c<gen:20><suffix>" (*gen > 0; 0 for a plain one).  A
 * generation is the cleaning leader's epoch times 2^31 plus its count of
 * passes, so no two leaders ever write the same name. */
#define CLEAN_GEN(epoch, seq) (((int64_t)(epoch) << 31) | (int64_t)(seq))
#define CLEAN_GEN_EPOCH(gen) ((int32_t)((gen) >> 31))
#define CLEAN_GEN_SEQ(gen) ((gen) & (((int64_t)1 << 31) - 1))
int ks__seg_parse_name_g(const char *name, int32_t *epoch, int64_t *base, int64_t *gen);
/* dir/<epoch>-<base><suffix> */
int ks__seg_path(char *dst, size_t len, const char *dir, int32_t epoch, int64_t base, int kind);
/* dir/<epoch>-<base>[.c<gen>]<suffix> */
int ks__seg_path_g(char *dst, size_t len, const char *dir, int32_t epoch, int64_t base, int64_t gen,
		   int kind);

typedef struct kidx { uint32_t rel; uint32_t pos; } kidx;     /* .index entry */
typedef struct ktidx { int64_t ts; uint32_t rel; } ktidx;     /* .timeindex entry */

#define IDX_ENTRY 8
#define TIDX_ENTRY 12

/* Group commit runs up to p->depth (cfg.flush_depth, at most this many)
 * fsyncs per partition at once (commit.c).  Each pipeline slot fsyncs
 * through its own descriptor of a segment: an error is reported to every
 * open file description but only once to each, so two fsyncs overlapping on
 * one descriptor could see one of them answer success for pages whose write
 * failed. */
#define FLUSH_DEPTH_MAX KAAS_FLUSH_DEPTH_MAX

typedef struct kseg {
	int32_t epoch;
	int64_t base;
	int64_t gen;             /* 0: as appended; > 0: written by the cleaner, named in clean.json */
	uint64_t disk_size;      /* size seen when listed */
	int refs;                /* partition list + read plans + flusher (atomic) */
	/* leader only */
	sub_file *log;           /* index files are never held open (docs/storage.md) */
	sub_file *sync[FLUSH_DEPTH_MAX]; /* pipeline slot k > 0 fsyncs the log through sync[k] (slot 0: log) */
	int active;              /* the segment appends go to (ours, writable) */
	int meta;                /* end_pos/end_off/max_ts/index known */
	uint64_t end_pos;        /* valid bytes */
	uint64_t synced_pos;     /* bytes known durable (fsynced) */
	int64_t end_off;         /* offset after the last valid batch */
	int64_t max_ts;          /* largest batch timestamp, -1 when none */
	int64_t max_ts_off;
	kidx *ix;
	uint32_t nix, capix;
	ktidx *tx;
	uint32_t ntx, captx;
	uint64_t since_ix;       /* bytes appended since the last index entry */
	int idx_dirty;           /* index entries not yet written to the index files */
	uint32_t ix_written;     /* entries of ix[] / tx[] already in the files */
	uint32_t tx_written;
	int flush_pins;          /* flushers using sync (under the partition lock) */
	int detached;            /* dropped by the partition: close sync when unpinned */
	int64_t first_append_ms; /* wall time of the first append (segment.ms) */
	/* Damage (damage.c): offsets [dmg_lo, dmg_hi), bytes [dpos_lo, dpos_hi),
	 * are unreadable; dmg_hi > dmg_lo when there is any. */
	int64_t dmg_lo, dmg_hi;
	uint64_t dpos_lo, dpos_hi;
	int quarantined;         /* its files are in DIR/quarantine/ */
	uint64_t vlo, vhi;       /* bytes whose CRCs were verified this leadership */
} kseg;

kseg *ks__seg_new(int32_t epoch, int64_t base);
void ks__seg_ref(kseg *s);
void ks__seg_unref(kseg *s);  /* closes files and frees at zero */
void ks__seg_close_files(kseg *s);
void ks__seg_close_sync(kseg *s); /* the pipeline slots' extra descriptors */
/* The partition lets go of s: the slots' descriptors close now (or when
 * the last flusher using them is done), the log when the last reference
 * goes. */
void ks__seg_detach(kseg *s);

int ks__seg_ix_push(kseg *s, uint32_t rel, uint32_t pos);
int ks__seg_tx_push(kseg *s, int64_t ts, uint32_t rel);
/* Largest index entry at or below `off` (pos 0/base when none). */
void ks__seg_ix_lookup(const kseg *s, int64_t off, uint64_t *pos, int64_t *entry_off);
/* The first time index entry whose timestamp (by_ts) or relative offset is
 * not below key; s->ntx when there is none. */
uint32_t ks__seg_tx_lower(const kseg *s, int by_ts, int64_t key);

/* Walks batches in a segment file. */
typedef struct seg_iter {
	sub_file *f;
	uint64_t pos;     /* next batch */
	uint64_t end;     /* byte limit */
	int crc;          /* verify each batch's CRC */
	uint8_t *buf;
	size_t cap;
	uint64_t boff;
	size_t blen;
	const char *why;  /* why the walk ended */
	int io_err;
	int crc_bad;      /* the walk ended at a batch whose header is sane and CRC wrong
			   * (its header in *h, its position in *pos): skippable */
} seg_iter;

void ks__seg_iter_init(seg_iter *it, sub_file *f, uint64_t pos, uint64_t end, int crc, size_t bufsize);
void ks__seg_iter_free(seg_iter *it);
/* 1: *h and *pos describe a whole sane batch; 0: end (it->why); <0: I/O error. */
int ks__seg_iter_next(seg_iter *it, kb_hdr *h, uint64_t *pos);
/* Reads a whole batch into a malloc'd buffer. */
int ks__seg_read_batch(sub_file *f, uint64_t pos, uint32_t size, uint8_t **out);

/* ---- manifest ------------------------------------------------------------- */
typedef struct kmanifest {
	int valid;
	char topic_id[40]; /* "" when none */
	int32_t epoch;
	int64_t hw;
	int64_t log_start;
	/* The relinquish record (docs/formats.md, manifest.json "relinquished"):
	 * only the final manifest of a clean relinquish carries one.  Its
	 * writer, the leader of rel_epoch (= epoch), had fsynced everything up
	 * to rel_end, its active segment rel_epoch-rel_seg_base being exactly
	 * rel_seg_bytes long, and wrote nothing after it. */
	int rel;           /* 1: a record was read, or is to be written */
	int32_t rel_epoch;
	int64_t rel_end;
	int64_t rel_seg_base;
	int64_t rel_seg_bytes;
} kmanifest;

/* 0 with m->valid = 1, 0 with m->valid = 0 when missing or unreadable
 * (logged), -errno on I/O failure. */
int ks__manifest_read(sub_vfs *vfs, const char *dir, kmanifest *m);
int ks__manifest_encode(const kmanifest *m, char **out, size_t *len);

/* ---- clean.json (the cleaner's swap record) ------------------------------------
 * The log below clean_end is the cleaned segments listed (all of
 * generation gen, in base order, each covering up to the next one's base,
 * the last up to clean_end); plain segments below clean_end are what they
 * replaced.  dirty: the first offset not yet de-duplicated. */
typedef struct kclean_ent {
	int32_t epoch;
	int64_t base;
} kclean_ent;

/* When offsets first became clean: every offset below `off` was
 * de-duplicated by wall time `ms` (the tombstone clock). */
typedef struct kclean_at {
	int64_t off, ms;
} kclean_at;
#define CLEAN_HIST_MAX 64

typedef struct kclean {
	int state;         /* 0: no file; 1: valid; -1: unreadable (nothing cleaned is touched) */
	int32_t epoch;     /* the leader that wrote it */
	int64_t gen;
	int64_t clean_end;
	int64_t dirty;
	kclean_ent *v;
	size_t n;
	kclean_at hist[CLEAN_HIST_MAX]; /* ascending in off and ms */
	size_t nhist;
	int64_t tomb_ms;   /* the earliest time a kept tombstone became clean; -1: none */
} kclean;

/* 0 (c->state says what was found) or -errno on I/O failure. */
int ks__clean_read(sub_vfs *vfs, const char *dir, kclean *c);
int ks__clean_encode(const kclean *c, char **out, size_t *len);
void ks__clean_free(kclean *c);
/* The entry of c covering offset `off` below clean_end, or -1. */
long ks__clean_find(const kclean *c, int64_t off);

/* ---- the partition ------------------------------------------------------------ */
/* p->state holds the public states (storage.h) and one more: FENCED, a
 * leader that found a newer leader's files.  It is poisoned as far as the
 * API says (ks_partition_state_of answers KAAS_PART_POISONED: nothing is
 * served or acknowledged, only a take-over ends it), but its answers say
 * "not the leader" rather than "storage error", so that clients look for
 * the new leader instead of retrying here.  Fenced wins over poisoned:
 * once fenced, a later I/O failure does not turn it back.  Read it through
 * ks__p_unfit() and ks__p_kerr(), change it through ks__p_poison() and
 * ks__p_fence(), never by hand. */
enum { KS__PART_FENCED = KAAS_PART_POISONED + 1 };

#define RING 512 /* recent batches of the active segment, for tail reads */

typedef struct kring {
	int64_t base;    /* batch base offset */
	int64_t last;
	uint64_t pos;
	uint32_t size;
} kring;

struct ks_partition {
	pthread_mutex_t mu;
	const void *lock_owner; /* who holds mu (KAAS_ASSERTS builds only) */
	pthread_cond_t cv;
	sub_vfs *vfs;
	char dir[SUB_PATH_MAX];
	char topic_id[40];
	ks_log_config cfg;

	int state;          /* enum ks_partition_state, or KS__PART_FENCED */
	int32_t epoch;
	kseg **segs;        /* live segments by base offset (leader); listed ones (follower) */
	size_t nsegs, capsegs;
	int64_t log_start;
	int64_t leo;        /* log end offset: next offset to assign */
	int64_t hw;         /* durable offset = high watermark */
	int64_t hw_seg;     /* where hw is in the log: byte hw_pos of the live */
	uint64_t hw_pos;    /* segment with base hw_seg (read plans end there) */
	kmanifest man;      /* as last read or written */
	kclean clean;       /* clean.json as last read or written */
	int cleaning;       /* a clean is running (unlocked): its files are not strays */

	kp_table prod;

	/* group commit: fsyncs started and not yet retired, in start order
	 * (ticket t in slot t % depth); the high watermark advances to a
	 * ticket's end only when it and every earlier ticket succeeded */
	int depth;                  /* fsyncs in flight at most (cfg.flush_depth at open) */
	int flushing;               /* tickets pending: fl_next - fl_retired */
	uint64_t fl_next, fl_retired;
	int64_t fl_end;             /* end of the newest ticket started */
	uint64_t appends;           /* append requests so far */
	uint64_t fl_appends;        /* ... when the newest ticket started */
	uint64_t fl_covers;         /* requests the newest ticket covers (>= 1) */
	struct kflight {
		int64_t end;        /* log end when it started: what it makes durable */
		int64_t seg;        /* ... and its position: active segment's base, */
		uint64_t pos;       /* its end_pos */
		uint64_t ticket;    /* the ticket that owns the slot */
		int done;
		int fd;             /* the descriptor it fsyncs through: 0 the log's, k sync[k] */
	} fl[FLUSH_DEPTH_MAX];
	uint64_t fl_stalls;         /* flushes that waited because every slot was busy */
	int dir_dirty;              /* a segment was created since the last flush */
	uint8_t *snap_buf;          /* snapshot waiting for the fsync that covers it */
	size_t snap_len;
	int64_t snap_off;
	int64_t manifest_ms;        /* wall time of the last manifest write */

	kring ring[RING];
	uint32_t ring_head, ring_n; /* entries of the active segment only */

	ks_hw_listener listener;
	void *listener_arg;

	/* How the last leadership ended, for flushes that outlive it (a flush
	 * answers for the leadership its caller appended under). */
	uint64_t lead_gen;      /* bumped by every successful take-over */
	uint64_t ended_gen;     /* lead_gen of the leadership that ended last; 0: none */
	int ended_rc;           /* 0: its relinquish made everything durable */
	int64_t ended_durable;  /* its durable offset when it ended */
	/* A leadership of this engine that ended by an I/O failure: its
	 * durable offset and epoch (-1: none).  What it wrote past that was
	 * answered with an error and may be only in the client's cache, so a
	 * re-take by this engine recovers the log up to here (recover.c). */
	int64_t retake_cut;
	int32_t retake_cut_epoch;

	/* Damage and foreign numbers (damage.c). */
	int64_t durable_floor;  /* offsets below this were durable before the
				 * take-over: a segment ending short there is
				 * damaged, not torn (INT64_MAX once led) */
	int recovering;         /* a take-over is running (may quarantine) */
	/* The take-over running (recover.c): what it asks before every step
	 * that changes the volume, the epochs that decide, and its verdict. */
	ks_takeover_guard_fn guard;
	void *guard_arg;
	int32_t tk_epoch;       /* the epoch being taken over at */
	int32_t tk_limit;       /* above this an epoch is foreign: max(ceiling, KS_EPOCH_PLAUSIBLE) */
	int tk_abandoned;       /* < 0: the take-over was abandoned with this (sticky) */
	int32_t tk_trusted;     /* the epoch whose relinquish record it trusted (-1: it scanned) */
	int64_t last_use_ms;    /* wall time of the last append or read */
	int64_t scrub_base;     /* the scrub's cursor: segment base, -1 = a new pass */
	uint64_t scrub_pos;
	int64_t scrub_off;
	int scrubbing;          /* a scrub step is reading (unlocked) */
	ks_partition_stats st;
};

/* ---- the partition lock ------------------------------------------------------
 * The lock order (docs/storage.md, "For the broker"): a partition's lock is
 * the innermost lock.  It is never held across a flush ticket's fsyncs nor
 * across a listener call, so a listener may take the broker's own locks,
 * which are taken before a partition's, never after; storage code never
 * takes it twice.  The ks__p_* helpers run with it held.  Under KAAS_ASSERTS
 * the lock records its owner and KS__P_LOCKED / KS__P_UNLOCKED check it; in
 * release builds these are the bare mutex calls. */
const void *ks__p_self(void); /* this thread's identity for the record */

static inline const void *ks__p_owner(const ks_partition *p)
{
	return __atomic_load_n(&p->lock_owner, __ATOMIC_RELAXED);
}

static inline void ks__p_lock(ks_partition *p)
{
	KAAS_ASSERT(ks__p_owner(p) != ks__p_self()); /* would deadlock */
	pthread_mutex_lock(&p->mu);
#ifdef KAAS_ASSERTS
	__atomic_store_n(&p->lock_owner, ks__p_self(), __ATOMIC_RELAXED);
#endif
}

static inline void ks__p_unlock(ks_partition *p)
{
	KAAS_ASSERT(ks__p_owner(p) == ks__p_self());
#ifdef KAAS_ASSERTS
	__atomic_store_n(&p->lock_owner, NULL, __ATOMIC_RELAXED);
#endif
	pthread_mutex_unlock(&p->mu);
}

static inline void ks__p_wait(ks_partition *p)
{
	KAAS_ASSERT(ks__p_owner(p) == ks__p_self());
#ifdef KAAS_ASSERTS
	__atomic_store_n(&p->lock_owner, NULL, __ATOMIC_RELAXED);
#endif
	pthread_cond_wait(&p->cv, &p->mu);
#ifdef KAAS_ASSERTS
	__atomic_store_n(&p->lock_owner, ks__p_self(), __ATOMIC_RELAXED);
#endif
}

#define KS__P_LOCKED(p) KAAS_ASSERT(ks__p_owner(p) == ks__p_self())
#define KS__P_UNLOCKED(p) KAAS_ASSERT(ks__p_owner(p) != ks__p_self())

/* ---- shared by the partition's files (caller holds p->mu) ------------------ */
/* listing.c: the directory's segments, and the list a partition adopts. */
typedef struct seglist {
	kseg **v;
	size_t n, cap;
} seglist;

void ks__seglist_free(seglist *l);
int ks__seglist_push(seglist *l, kseg *s);
/* Every .log segment in the directory, sorted by (base, epoch desc);
 * *max_epoch the highest epoch of any segment file. */
int ks__p_list_segments(ks_partition *p, int stat_sizes, seglist *out, int32_t *max_epoch);
/* The live segments of `all` (sorted) become p's list; the zombies go.
 * Takes over `all` whatever the outcome. */
int ks__p_adopt_live(ks_partition *p, seglist *all);
/* Lets go of every segment in p's list. */
void ks__p_drop_segs(ks_partition *p);
/* The follower's view: names, sizes, manifest; no descriptors. */
int ks__p_load_view(ks_partition *p);
/* partition.c: closes every handle and forgets leader state; `why` is what
 * flushes of the leadership being dropped answer. */
void ks__p_drop_leadership(ks_partition *p, int why);

/* Why p cannot do leader work: 0 it leads; -EIO poisoned by an I/O failure;
 * -ESTALE fenced by a newer leader; -EPERM a follower. */
int ks__p_unfit(const ks_partition *p);
/* Poisoned or fenced: a leadership that failed and awaits a take-over. */
static inline int ks__p_failed(const ks_partition *p)
{
	return p->state == KAAS_PART_POISONED || p->state == KS__PART_FENCED;
}
/* The Kafka error answering a reason from ks__p_unfit() or a failed
 * operation's errno: NOT_LEADER_OR_FOLLOWER for -ESTALE and -EPERM (the
 * client looks for the leader), KAFKA_STORAGE_ERROR for any other. */
int16_t ks__p_kerr(int rc);
/* `what` failed with rc: logs it (the first failure only) and poisons p;
 * -ESTALE fences it instead.  Wakes every waiter. */
void ks__p_poison(ks_partition *p, const char *what, int rc);
/* A newer leader's files were found (the caller logged which): fences p. */
void ks__p_fence(ks_partition *p);
/* A leader's operation failed with rc: poisons p unless rc is -ESTALE
 * (a fencing check found a newer leader and fenced p already); returns the
 * Kafka error to answer. */
int16_t ks__p_fail(ks_partition *p, const char *what, int rc);
/* Lists the directory: -ESTALE (and fences us) when a newer epoch wrote a
 * segment; 0 otherwise. */
int ks__p_fence_check(ks_partition *p);
/* Writes manifest.json (without a relinquish record). */
int ks__p_write_manifest(ks_partition *p, int64_t hw, int64_t log_start);
/* The same, carrying `rel` as its relinquish record (relinquish only). */
int ks__p_write_final_manifest(ks_partition *p, int64_t hw, int64_t log_start, const kmanifest *rel);
/* recover.c: right before a take-over step that moves, renames, truncates,
 * unlinks or sets aside anything: asks the caller's guard (lease, the
 * assignment it acts for, the issued ceiling read from the volume again)
 * and lists the directory again.  0 to go on; otherwise the take-over is
 * abandoned (logged and counted once, and every later call answers the
 * same).  0 outside a take-over. */
int ks__p_guard(ks_partition *p, const char *step);
/* recover.c: abandons the running take-over with rc (a newer leader's
 * file, or the guard said no): logs why, counts it; returns rc. */
int ks__p_abandon(ks_partition *p, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int ks__p_seg_open_log(ks_partition *p, kseg *s, int writable);
/* Makes segs[i]'s end, max timestamp and index known; `trust_off`: bytes
 * below this offset are known good, the walk CRC-checks from there. */
int ks__p_seg_load(ks_partition *p, size_t i, int64_t trust_off);
int ks__p_roll(ks_partition *p, int64_t now_ms);
/* Unlinks a segment's files (log first); ENOENT is success. */
int ks__p_unlink_seg(ks_partition *p, int32_t epoch, int64_t base, int64_t gen);
/* Is the file `name` of the partition directory (a segment's, plain or
 * cleaned) garbage by the cleaner's record: a plain segment replaced by a
 * cleaned one that is in the live list, or a cleaned file of a generation
 * clean.json does not name (and no clean of ours is writing it)?  Never
 * when clean.json is unreadable. */
int ks__p_clean_garbage(const ks_partition *p, int32_t epoch, int64_t base, int64_t gen);
/* Removes segs[i] from the list and unlinks its files. */
int ks__p_delete_seg(ks_partition *p, size_t i);
int ks__p_write_snapshot(ks_partition *p, const uint8_t *buf, size_t len);
int ks__p_index_batch(ks_partition *p, kseg *s, int64_t base, uint64_t pos, uint32_t size,
		  int64_t max_ts, int write);
/* Writes s's index entries not yet in its index files through a short-lived
 * descriptor (fsynced when `sync`).  Our own epoch's segments only. */
int ks__p_write_index(ks_partition *p, kseg *s, int sync);
/* dir/[quarantine/]<epoch>-<base><suffix> for s. */
int ks__p_seg_file(const ks_partition *p, const kseg *s, int kind, char *dst, size_t len);

/* ---- damage.c ---------------------------------------------------------------- */
/* Records damage in s (merged with what is known); returns 1 when it is
 * new.  Then reports it: ERROR naming file and byte range, counters, and
 * (leader or take-over) the segment moves into the quarantine area. */
int ks__seg_add_damage(kseg *s, int64_t lo, int64_t hi, uint64_t plo, uint64_t phi);
void ks__p_report_damage(ks_partition *p, kseg *s, const char *why);
/* Moves a file of the partition directory into the quarantine area under
 * `prefix` + its name ("" keeps the name); -ENOENT when it is gone. */
int ks__p_quarantine_file(ks_partition *p, const char *leaf, const char *prefix);
/* Moves every segment file whose epoch is above `limit` (one no authority
 * can have issued) aside as foreign, each rename after ks__p_guard. */
int ks__p_quarantine_foreign(ks_partition *p, int32_t limit);
/* A number from the volume refused: logged by name and counted. */
void ks__p_foreign(ks_partition *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
typedef struct kdamage {
	int64_t lo, hi;    /* offsets */
	uint64_t plo, phi; /* bytes */
	const char *why;
} kdamage;
/* Walks bytes [pos, end) of f (a segment's log) with CRC checks, from the
 * batch boundary of offset `off`, below the segment's `limit`.  0: clean
 * (*clean_end, *next_off: where the whole batches walked end); 1: damage
 * found, described in *d (the walk stops there); <0: I/O error.  Needs no
 * lock (sealed bytes do not change); `budget` > 0 stops it once that many
 * bytes were verified (reads at most 64 KiB more than that). */
int ks__seg_verify(sub_file *f, uint64_t pos, int64_t off, uint64_t end, int64_t limit,
		   int64_t budget, uint64_t *clean_end, int64_t *next_off, kdamage *d);
/* Global counters (ks_storage_stats_get). */
void ks__stats_add(ks_partition *p, size_t field_offset, uint64_t n);
#define KS_COUNT(p, field, n) ks__stats_add((p), offsetof(ks_partition_stats, field), (n))
/* The level the topic sets for codec (0: the codec's default). */
static inline int ks__cfg_level(const ks_log_config *c, int codec)
{
	return codec == KB_CODEC_GZIP ? c->compression_gzip_level
	       : codec == KB_CODEC_LZ4 ? c->compression_lz4_level
	       : codec == KB_CODEC_ZSTD ? c->compression_zstd_level
				       : 0;
}

static inline int64_t p_seg_limit(const ks_partition *p, size_t i)
{
	return i + 1 < p->nsegs ? p->segs[i + 1]->base : INT64_MAX;
}
/* The live segment holding `off` (largest base <= off); 0 when before all. */
size_t ks__p_seg_find(const ks_partition *p, int64_t off);

#endif
