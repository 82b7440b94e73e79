/*
 * batch.h — the Kafka v2 record batch as it sits in a Produce request and on
 * disk: header accessors, validation of client input, and the in-place
 * offset assignment.  Nothing here does I/O.
 *
 * Layout (big-endian), 61-byte header then the records:
 *   0 baseOffset i64 | 8 batchLength i32 | 12 partitionLeaderEpoch i32 |
 *   16 magic i8 | 17 crc u32 | 21 attributes i16 | 23 lastOffsetDelta i32 |
 *   27 baseTimestamp i64 | 35 maxTimestamp i64 | 43 producerId i64 |
 *   51 producerEpoch i16 | 53 baseSequence i32 | 57 recordCount i32 | 61 ...
 * The CRC-32C covers bytes 21..end, so baseOffset and partitionLeaderEpoch
 * can be rewritten without touching it.
 */
#ifndef KAAS_STORAGE_BATCH_H
#define KAAS_STORAGE_BATCH_H

#include <stddef.h>
#include <stdint.h>

#define KB_HDR 61              /* full v2 header */
/* The largest offset the engine accepts from the volume (names, batch
 * headers, the manifest): 2^62, so that adding any batch's record count or
 * a segment's relative offset can never overflow an int64. */
#define KB_OFFSET_MAX ((int64_t)1 << 62)
#define KB_LOG_OVERHEAD 12     /* baseOffset + batchLength */
#define KB_MIN_LENGTH (KB_HDR - KB_LOG_OVERHEAD)

#define KB_OFF_BASE_OFFSET 0
#define KB_OFF_LENGTH 8
#define KB_OFF_LEADER_EPOCH 12
#define KB_OFF_MAGIC 16
#define KB_OFF_CRC 17
#define KB_OFF_ATTRS 21
#define KB_OFF_LAST_DELTA 23
#define KB_OFF_BASE_TS 27
#define KB_OFF_MAX_TS 35
#define KB_OFF_PID 43
#define KB_OFF_PEPOCH 51
#define KB_OFF_BASE_SEQ 53
#define KB_OFF_COUNT 57

#define KB_ATTR_CODEC_MASK 0x07
#define KB_ATTR_LOG_APPEND_TIME 0x08
#define KB_ATTR_TRANSACTIONAL 0x10
#define KB_ATTR_CONTROL 0x20

enum { KB_CODEC_NONE = 0, KB_CODEC_GZIP, KB_CODEC_SNAPPY, KB_CODEC_LZ4, KB_CODEC_ZSTD };

static inline uint16_t kb_get16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t kb_get32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t kb_get64(const uint8_t *p)
{
	return ((uint64_t)kb_get32(p) << 32) | kb_get32(p + 4);
}
static inline void kb_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static inline void kb_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static inline void kb_put64(uint8_t *p, uint64_t v)
{
	kb_put32(p, (uint32_t)(v >> 32));
	kb_put32(p + 4, (uint32_t)v);
}

/* The decoded header. */
typedef struct kb_hdr {
	int64_t base_offset;
	int32_t length;          /* batchLength: bytes after the field */
	int32_t leader_epoch;
	int8_t magic;
	uint32_t crc;
	int16_t attrs;
	int32_t last_delta;
	int64_t base_ts;
	int64_t max_ts;
	int64_t pid;
	int16_t pepoch;
	int32_t base_seq;
	int32_t count;
} kb_hdr;

/* Decodes the 61 header bytes at p (no checks). */
void ks__kb_decode(const uint8_t *p, kb_hdr *h);

static inline uint32_t kb_size(const kb_hdr *h) { return (uint32_t)h->length + KB_LOG_OVERHEAD; }
static inline int64_t kb_last_offset(const kb_hdr *h) { return h->base_offset + h->last_delta; }

/* Kafka's sequence arithmetic: sequences wrap from INT32_MAX to 0. */
static inline int32_t kb_seq_add(int32_t seq, int32_t n)
{
	if (seq > INT32_MAX - n)
		return n - (INT32_MAX - seq) - 1;
	return seq + n;
}

/* Is the header at p (of `avail` bytes, whole batch not required) a plausible
 * stored batch: magic 2, sane length and count?  Used when walking a segment. */
int ks__kb_header_sane(const kb_hdr *h);

/* Computes the stored CRC-32C of a whole batch (bytes 21..end). */
uint32_t ks__kb_crc(const uint8_t *batch, size_t size);

/* What validation learned about one batch. */
typedef struct kb_info {
	uint32_t pos;        /* offset of the batch in the request buffer */
	uint32_t size;       /* whole batch incl. the 12-byte log overhead */
	int32_t count;
	int64_t pid;
	int16_t pepoch;
	int32_t base_seq;
	int32_t last_seq;
	int64_t max_ts;      /* recomputed from the records where they were walked */
	int64_t first_ts;    /* first record's timestamp (base timestamp) */
	int fix_max_ts;      /* header maxTimestamp disagrees with the records */
	uint64_t inflated;   /* bytes of the records uncompressed, where they were walked (else 0) */
} kb_info;

/* Validation limits (from the log config). */
typedef struct kb_limits {
	int32_t max_batch_bytes;
	int64_t ts_diff_max_ms;     /* <0: unlimited */
	int64_t now_ms;
	int create_time;            /* topic uses CreateTime: timestamps are checked */
	int validate_compressed;    /* decompress to walk the records */
	uint64_t max_decompressed;  /* refuse batches that inflate beyond this
				       (CPU only: the walk streams, codec.h) */
	int require_key;            /* compacted topic: a keyless record is INVALID_RECORD */
} kb_limits;

/* Validates the `records` field of a Produce request: every batch, header,
 * CRC, record count, the records themselves (uncompressed always; compressed
 * when lim->validate_compressed, walked as they are decompressed in pieces,
 * so the memory a batch takes does not grow with how far it inflates; a raw
 * snappy payload, one block, is refused above 8 x max_batch_bytes).  Fills info[0..*n) (cap entries).  Returns
 * KERR_NONE or a Kafka error code with *bad = index of the offending batch and
 * *msg a static explanation. */
int ks__kb_validate(const uint8_t *records, size_t len, const kb_limits *lim, kb_info *info,
		int cap, int *n, int *bad, const char **msg);

/* The Kafka error (and *msg) for a ks_inflate error. */
int ks__kb_inflate_kerr(int rc, const char **msg);

/* The largest snappy block a Produce under lim may carry. */
size_t ks__kb_snappy_block_max(const kb_limits *lim);

/* ---- recompression (recompress.c) ----------------------------------------- */

/* Re-encodes the whole batch b (size bytes, validated) with codec `to` at
 * `level` (codec.h): the header as it was but for the codec bits, the
 * batchLength and the CRC; the records byte for byte, so offsets,
 * timestamps and the producer fields are unchanged.  `inflated` is the
 * size of the records uncompressed when known (0: not).  The input is
 * inflated in pieces (at most lim->max_decompressed) and compressed as it
 * comes, so besides the codecs' state only the new batch is held, refused
 * above max_size.  Returns 0 with *out (malloc'd) and *outlen, or -errno:
 * -EMSGSIZE the new batch exceeds max_size, the inflater's errors. */
int ks__kb_recompress(const uint8_t *b, size_t size, int to, int level, uint64_t inflated,
		      const kb_limits *lim, size_t max_size, uint8_t **out, size_t *outlen);

/* Seals a batch from its 61 header bytes and its records (uncompressed):
 * compressed with `codec` at `level`, count records, the CRC computed.
 * 0 with *out (malloc'd) and *outlen, -ENOMEM, -EMSGSIZE above max_size. */
int ks__kb_seal(const uint8_t *hdr, const uint8_t *recs, size_t rlen, int32_t count, int codec, int level,
		size_t max_size, uint8_t **out, size_t *outlen);

/* Counts the batches in a request without validating (to size info arrays).
 * Stops at the first that does not fit. */
int ks__kb_count(const uint8_t *records, size_t len);

/* Walks `count` records of an uncompressed records section (bytes after the
 * header) checking varints, lengths and offset deltas; computes the max
 * timestamp.  Returns 0 or -1 with *msg set. */
int ks__kb_walk_records(const uint8_t *p, size_t len, int32_t count, int64_t base_ts, int64_t *max_ts,
		    int64_t *min_ts, const char **msg);

/* Finds the first record of a batch (whole batch at `batch`, compressed or
 * not: decompressed in pieces up to that record, at most 1 GiB) whose
 * timestamp is >= ts and whose offset is >= min_off; 0 with *off and *rts set,
 * or -1 when none or the records are unreadable. */
int ks__kb_find_ts(const uint8_t *batch, size_t size, int64_t ts, int64_t min_off, int64_t *off,
	       int64_t *rts);

#endif
