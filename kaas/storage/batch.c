/*
 * batch.c — validation of v2 record batches from producers.
 *
 * Records are walked from a byte source that is either the batch itself or
 * a decompressor handing out bounded pieces (codec.h), so a compressed batch
 * is checked without ever being inflated whole.
 *
 * Follows Kafka's LogValidator for client input: the whole request is
 * refused when any batch is bad, with CORRUPT_MESSAGE for format errors
 * (INVALID_RECORD only exists from Produce v8, above our range),
 * MESSAGE_TOO_LARGE for oversize batches and INVALID_TIMESTAMP for
 * timestamps outside message.timestamp.difference.max.ms.
 */
#include "kaas/storage/batch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/storage/codec.h"
#include "util/crc32c.h"
#include "kaas/proto/kerr.h"

/* A raw snappy payload (or one snappy-java chunk) is inflated whole: from a
 * Produce up to 8 x max.message.bytes (at least 1 MiB); from the log, where
 * the limit that applied is unknown, up to what snappy's format allows (a
 * copy of at most 64 bytes costs 3 bytes, so a block inflates less than
 * 22-fold). */
#define KB_SNAPPY_BLOCK_FACTOR 8
#define KB_SNAPPY_BLOCK_MIN ((uint64_t)1 << 20)
#define KB_SNAPPY_STORED_FACTOR 22
/* What ListOffsets inflates of one stored batch at most. */
#define KB_FIND_MAX_OUT ((uint64_t)1 << 30)

void ks__kb_decode(const uint8_t *p, kb_hdr *h)
{
	h->base_offset = (int64_t)kb_get64(p + KB_OFF_BASE_OFFSET);
	h->length = (int32_t)kb_get32(p + KB_OFF_LENGTH);
	h->leader_epoch = (int32_t)kb_get32(p + KB_OFF_LEADER_EPOCH);
	h->magic = (int8_t)p[KB_OFF_MAGIC];
	h->crc = kb_get32(p + KB_OFF_CRC);
	h->attrs = (int16_t)kb_get16(p + KB_OFF_ATTRS);
	h->last_delta = (int32_t)kb_get32(p + KB_OFF_LAST_DELTA);
	h->base_ts = (int64_t)kb_get64(p + KB_OFF_BASE_TS);
	h->max_ts = (int64_t)kb_get64(p + KB_OFF_MAX_TS);
	h->pid = (int64_t)kb_get64(p + KB_OFF_PID);
	h->pepoch = (int16_t)kb_get16(p + KB_OFF_PEPOCH);
	h->base_seq = (int32_t)kb_get32(p + KB_OFF_BASE_SEQ);
	h->count = (int32_t)kb_get32(p + KB_OFF_COUNT);
}

int ks__kb_header_sane(const kb_hdr *h)
{
	return h->magic == 2 && h->length >= KB_MIN_LENGTH && h->base_offset >= 0 &&
	       h->base_offset <= KB_OFFSET_MAX && h->last_delta >= 0 && h->count >= 0 &&
	       h->count <= h->last_delta + 1;
	/* Fewer records than offsets: a batch the cleaner rewrote (its
	 * records keep their offsets) or an empty one standing for offsets
	 * whose records it removed (docs/storage.md, "Compaction"). */
}

uint32_t ks__kb_crc(const uint8_t *batch, size_t size)
{
	return ku_crc32c(0, batch + KB_OFF_ATTRS, size - KB_OFF_ATTRS);
}

int ks__kb_count(const uint8_t *records, size_t len)
{
	int n = 0;
	size_t pos = 0;
	while (len - pos >= KB_LOG_OVERHEAD) {
		int32_t l = (int32_t)kb_get32(records + pos + KB_OFF_LENGTH);
		if (l < 0 || (size_t)l > len - pos - KB_LOG_OVERHEAD)
			break;
		pos += (size_t)l + KB_LOG_OVERHEAD;
		n++;
	}
	return n;
}

/* ---- the record walk ------------------------------------------------------
 *
 * Records are read from a source: the bytes of an uncompressed batch, or
 * the pieces a ks_inflate hands out.  Reads go a byte at a time through
 * the current piece and fetch the next one when it runs out, so a varint or
 * a record may straddle pieces; keys, values and headers are skipped, never
 * copied, so a record of any size costs no memory. */

typedef struct src {
	const uint8_t *p, *end;  /* the unread part of the current piece */
	uint64_t end_pos;        /* stream position of `end` */
	ks_inflate *z;         /* NULL: p..end is the whole stream */
	int err;                 /* the inflater's error, negative errno */
	int eof;                 /* a read found the stream's end */
	int last_null;           /* the last field read was null */
	int require_key;         /* a keyless record is refused (compacted topics) */
	int keyless;             /* ... and one was found */
} src;

static void src_plain(src *s, const uint8_t *p, size_t len)
{
	memset(s, 0, sizeof(*s));
	s->p = p;
	s->end = p + len;
	s->end_pos = len;
}

/* Fetches the next piece; 0 with bytes to read, -1 at the end or on error. */
static int src_fill(src *s)
{
	if (!s->z || s->err || s->eof) {
		s->eof = !s->err;
		return -1;
	}
	const uint8_t *p;
	size_t n;
	int rc = ks_inflate_next(s->z, &p, &n);
	if (rc <= 0) {
		if (rc < 0)
			s->err = rc;
		else
			s->eof = 1;
		return -1;
	}
	s->p = p;
	s->end = p + n;
	s->end_pos += n;
	return 0;
}

static inline uint64_t src_pos(const src *s) { return s->end_pos - (uint64_t)(s->end - s->p); }

static inline int src_byte(src *s, uint8_t *b)
{
	if (s->p == s->end && src_fill(s))
		return -1;
	*b = *s->p++;
	return 0;
}

static int src_skip(src *s, uint64_t n)
{
	for (;;) {
		size_t have = (size_t)(s->end - s->p);
		if (n <= have) {
			s->p += n;
			return 0;
		}
		n -= have;
		s->p = s->end;
		if (src_fill(s))
			return -1;
	}
}

/* Is there another byte?  (Fetches a piece to find out.) */
static int src_more(src *s) { return s->p < s->end || src_fill(s) == 0; }

/* ---- varints (zigzag) ------------------------------------------------------ */

/* Byte by byte through src_byte: a varint that straddles two pieces. */
static int rd_varlong_slow(src *s, int64_t *v)
{
	uint64_t x = 0;
	for (int shift = 0; shift < 70; shift += 7) {
		uint8_t b;
		if (src_byte(s, &b))
			return -1;
		if (shift == 63 && (b & 0x7e))
			return -1;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = (int64_t)(x >> 1) ^ -(int64_t)(x & 1);
			return 0;
		}
	}
	return -1;
}

static inline int rd_varlong(src *s, int64_t *v)
{
	const uint8_t *p = s->p;
	if (s->end - p < 10)
		return rd_varlong_slow(s, v);
	/* The common case: the longest varint fits in the current piece. */
	uint64_t x = 0;
	for (int shift = 0; shift < 70; shift += 7) {
		uint8_t b = *p++;
		if (shift == 63 && (b & 0x7e))
			return -1;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			s->p = p;
			*v = (int64_t)(x >> 1) ^ -(int64_t)(x & 1);
			return 0;
		}
	}
	return -1;
}

static inline int rd_varint(src *s, int32_t *v)
{
	int64_t x;
	if (rd_varlong(s, &x) || x < INT32_MIN || x > INT32_MAX)
		return -1;
	*v = (int32_t)x;
	return 0;
}

/* A length-prefixed field inside a record ending at stream position rend:
 * -1 (null) allowed when nullable. */
static int rd_field(src *s, uint64_t rend, int nullable)
{
	int32_t n;
	if (rd_varint(s, &n))
		return -1;
	s->last_null = n == -1;
	if (n < 0)
		return (n == -1 && nullable) ? 0 : -1;
	uint64_t pos = src_pos(s);
	if (pos > rend || (uint64_t)n > rend - pos)
		return -1;
	if ((size_t)(s->end - s->p) >= (size_t)n) {
		s->p += n;
		return 0;
	}
	return src_skip(s, (uint64_t)n);
}

/* One record; *ts gets its absolute timestamp. */
static int rd_record(src *s, int32_t expect_delta, int64_t base_ts, int64_t *ts, int64_t *odelta,
		     const char **msg)
{
	int32_t len;
	/* Where the stream is in memory whole, a record running past it is
	 * told before reading it. */
	if (rd_varint(s, &len) || len < 0 || (!s->z && (size_t)(s->end - s->p) < (size_t)len)) {
		*msg = "record length runs past the batch";
		return -1;
	}
	uint64_t rend = src_pos(s) + (uint64_t)len;
	int64_t tsd;
	int32_t od, nh;
	uint8_t attr;
	if (len == 0) {
		*msg = "empty record";
		return -1;
	}
	/* attributes: unused in v2 */
	if (src_byte(s, &attr) || rd_varlong(s, &tsd) || rd_varint(s, &od) || src_pos(s) > rend) {
		*msg = "record header truncated";
		goto fail;
	}
	if (expect_delta >= 0 && od != expect_delta) {
		*msg = "record offset deltas are not consecutive";
		return -1;
	}
	if (rd_field(s, rend, 1)) {
		*msg = "record key or value length invalid";
		goto fail;
	}
	if (s->require_key && s->last_null) {
		*msg = "Compacted topic cannot accept message without key";
		s->keyless = 1;
		return -1;
	}
	if (rd_field(s, rend, 1)) {
		*msg = "record key or value length invalid";
		goto fail;
	}
	if (rd_varint(s, &nh) || nh < 0 || src_pos(s) > rend) {
		*msg = "record header count invalid";
		goto fail;
	}
	for (int32_t i = 0; i < nh; i++) {
		if (rd_field(s, rend, 0) || rd_field(s, rend, 1)) {
			*msg = "record header key or value invalid";
			goto fail;
		}
	}
	if (src_pos(s) != rend) {
		*msg = "record length does not match its fields";
		return -1;
	}
	if ((tsd > 0 && base_ts > INT64_MAX - tsd) || (tsd < 0 && base_ts < INT64_MIN - tsd)) {
		*msg = "record timestamp overflows";
		return -1;
	}
	*ts = base_ts + tsd;
	if (odelta)
		*odelta = od;
	return 0;
fail:
	/* A field cut off by the end of a decompressed stream: the record's
	 * length promised more than there is. */
	if (s->eof && s->z)
		*msg = "record length runs past the batch";
	return -1;
}

/* Walks `count` records from s to its exact end: offset deltas 0..count-1;
 * computes the max and min timestamps.  Returns 0 or -1 with *msg set (on
 * an inflater error s->err says which). */
static int walk_records(src *s, int32_t count, int64_t base_ts, int64_t *max_ts, int64_t *min_ts,
		const char **msg)
{
	int64_t mx = INT64_MIN, mn = INT64_MAX;
	for (int32_t i = 0; i < count; i++) {
		int64_t ts;
		if (rd_record(s, i, base_ts, &ts, NULL, msg))
			return -1;
		if (ts > mx)
			mx = ts;
		if (ts < mn)
			mn = ts;
	}
	if (src_more(s)) {
		*msg = "bytes left over after the last record";
		return -1;
	}
	if (s->err) {
		*msg = "compressed payload does not decompress";
		return -1;
	}
	*max_ts = mx;
	*min_ts = mn;
	return 0;
}

int ks__kb_walk_records(const uint8_t *p, size_t len, int32_t count, int64_t base_ts, int64_t *max_ts,
		    int64_t *min_ts, const char **msg)
{
	src s;
	src_plain(&s, p, len);
	return walk_records(&s, count, base_ts, max_ts, min_ts, msg);
}

/* Starts s on the inflated payload of a compressed batch. */
static int src_inflate(src *s, int codec, const uint8_t *p, size_t len, uint64_t max_out,
		       size_t max_block)
{
	memset(s, 0, sizeof(*s));
	return ks_inflate_open(&s->z, codec, p, len, max_out, max_block);
}

int ks__kb_find_ts(const uint8_t *batch, size_t size, int64_t ts, int64_t min_off, int64_t *off,
	       int64_t *rts)
{
	kb_hdr h;
	const char *msg;
	ks__kb_decode(batch, &h);
	src s;
	int codec = h.attrs & KB_ATTR_CODEC_MASK;
	if (codec == KB_CODEC_NONE)
		src_plain(&s, batch + KB_HDR, size - KB_HDR);
	else {
		uint64_t block = KB_SNAPPY_STORED_FACTOR * (uint64_t)size;
		if (src_inflate(&s, codec, batch + KB_HDR, size - KB_HDR, KB_FIND_MAX_OUT,
				(size_t)(block < KB_FIND_MAX_OUT ? block : KB_FIND_MAX_OUT)))
			return -1;
	}
	int rc = -1;
	for (int32_t i = 0; i < h.count; i++) {
		int64_t t, od;
		if (rd_record(&s, -1, h.base_ts, &t, &od, &msg))
			break;
		if (t >= ts && h.base_offset + od >= min_off) {
			*off = h.base_offset + od;
			*rts = t;
			rc = 0;
			break;
		}
	}
	ks_inflate_free(s.z);
	return rc;
}

/* ---- whole-request validation --------------------------------------------- */

static int check_ts(const kb_limits *lim, int64_t ts, const char **msg)
{
	if (ts < -1) {
		*msg = "negative record timestamp";
		return -1;
	}
	if (lim->create_time && lim->ts_diff_max_ms >= 0 && ts != -1) {
		int64_t d = ts - lim->now_ms;
		if (d < 0)
			d = -d;
		if (d > lim->ts_diff_max_ms) {
			*msg = "record timestamp outside message.timestamp.difference.max.ms";
			return -1;
		}
	}
	return 0;
}

/* The largest snappy block a Produce may carry (codec.h: a raw snappy
 * payload is inflated whole). */
size_t ks__kb_snappy_block_max(const kb_limits *lim)
{
	int32_t mb = lim->max_batch_bytes > 0 ? lim->max_batch_bytes : 0;
	uint64_t m = KB_SNAPPY_BLOCK_FACTOR * (uint64_t)mb;
	if (m < KB_SNAPPY_BLOCK_MIN)
		m = KB_SNAPPY_BLOCK_MIN;
	if (m > lim->max_decompressed)
		m = lim->max_decompressed;
	return m > SIZE_MAX ? SIZE_MAX : (size_t)m;
}

int ks__kb_inflate_kerr(int rc, const char **msg)
{
	switch (rc) {
	case -ENOMEM:
		*msg = "out of memory decompressing a batch";
		return KERR_UNKNOWN_SERVER_ERROR;
	case -EMSGSIZE:
		*msg = "batch decompresses beyond the broker's limit";
		return KERR_MESSAGE_TOO_LARGE;
	case -EFBIG:
		*msg = "snappy block inflates beyond 8 x max.message.bytes";
		return KERR_MESSAGE_TOO_LARGE;
	case -ERANGE:
		*msg = "zstd frame window above 8 MiB (compression levels above 19)";
		return KERR_CORRUPT_MESSAGE;
	default:
		*msg = "compressed payload does not decompress";
		return KERR_CORRUPT_MESSAGE;
	}
}

static int validate_one(const uint8_t *b, uint32_t size, const kb_limits *lim, kb_info *in,
			const char **msg)
{
	kb_hdr h;
	ks__kb_decode(b, &h);
	if (h.magic != 2) {
		*msg = "record batch magic is not 2";
		return KERR_CORRUPT_MESSAGE;
	}
	if (ks__kb_crc(b, size) != h.crc) {
		*msg = "record batch CRC-32C mismatch";
		return KERR_CORRUPT_MESSAGE;
	}
	if (h.attrs & KB_ATTR_CONTROL) {
		*msg = "clients may not write control batches";
		return KERR_CORRUPT_MESSAGE;
	}
	if (h.attrs & KB_ATTR_TRANSACTIONAL) {
		*msg = "transactional batches are not supported by this broker";
		return KERR_INVALID_TXN_STATE;
	}
	int codec = h.attrs & KB_ATTR_CODEC_MASK;
	if (codec > KB_CODEC_ZSTD) {
		*msg = "unknown compression codec";
		return KERR_CORRUPT_MESSAGE;
	}
	if (h.count <= 0 || h.last_delta < 0 || h.count != h.last_delta + 1) {
		*msg = "record count does not match lastOffsetDelta";
		return KERR_CORRUPT_MESSAGE;
	}
	if (h.pid >= 0 && h.base_seq < 0) {
		*msg = "idempotent batch without a base sequence";
		return KERR_CORRUPT_MESSAGE;
	}
	in->count = h.count;
	in->pid = h.pid >= 0 ? h.pid : -1;
	in->pepoch = h.pepoch;
	in->base_seq = h.base_seq;
	in->last_seq = h.pid >= 0 ? kb_seq_add(h.base_seq, h.last_delta) : -1;
	in->first_ts = h.base_ts;
	in->max_ts = h.max_ts;
	in->fix_max_ts = 0;
	in->inflated = 0;

	src s;
	int walk_it = 1;
	src_plain(&s, b + KB_HDR, size - KB_HDR);
	if (codec != KB_CODEC_NONE) {
		walk_it = lim->validate_compressed;
		if (walk_it && src_inflate(&s, codec, b + KB_HDR, size - KB_HDR, lim->max_decompressed,
					   ks__kb_snappy_block_max(lim))) {
			*msg = "out of memory decompressing a batch";
			return KERR_UNKNOWN_SERVER_ERROR;
		}
	}
	int err = KERR_NONE;
	s.require_key = lim->require_key;
	if (walk_it) {
		int64_t mx, mn;
		if (walk_records(&s, h.count, h.base_ts, &mx, &mn, msg)) {
			err = s.err ? ks__kb_inflate_kerr(s.err, msg) : s.keyless ? KERR_INVALID_RECORD : KERR_CORRUPT_MESSAGE;
		} else if (check_ts(lim, mn, msg) || check_ts(lim, mx, msg)) {
			err = KERR_INVALID_TIMESTAMP;
		} else if (mx != h.max_ts) {
			/* Kafka recomputes maxTimestamp (and the CRC) when it differs. */
			in->max_ts = mx;
			in->fix_max_ts = 1;
		}
		in->first_ts = mn;
		if (err == KERR_NONE)
			in->inflated = s.z ? ks_inflate_total(s.z) : size - KB_HDR;
	} else if (check_ts(lim, h.max_ts, msg) || check_ts(lim, h.base_ts, msg)) {
		err = KERR_INVALID_TIMESTAMP;
	}
	ks_inflate_free(s.z);
	return err;
}

int ks__kb_validate(const uint8_t *records, size_t len, const kb_limits *lim, kb_info *info, int cap,
		int *n, int *bad, const char **msg)
{
	size_t pos = 0;
	int i = 0;
	*n = 0;
	*bad = 0;
	*msg = NULL;
	if (len == 0) {
		*msg = "no record batches";
		return KERR_CORRUPT_MESSAGE;
	}
	while (pos < len) {
		*bad = i;
		size_t left = len - pos;
		if (left < KB_HDR) {
			*msg = "record batch truncated";
			return KERR_CORRUPT_MESSAGE;
		}
		int32_t l = (int32_t)kb_get32(records + pos + KB_OFF_LENGTH);
		if (l < KB_MIN_LENGTH || (size_t)l > left - KB_LOG_OVERHEAD) {
			*msg = "batchLength out of range";
			return KERR_CORRUPT_MESSAGE;
		}
		uint32_t size = (uint32_t)l + KB_LOG_OVERHEAD;
		if ((int64_t)size > lim->max_batch_bytes) {
			*msg = "record batch larger than max.message.bytes";
			return KERR_MESSAGE_TOO_LARGE;
		}
		if (i >= cap) {
			*msg = "too many batches in one request";
			return KERR_CORRUPT_MESSAGE;
		}
		info[i].pos = (uint32_t)pos;
		info[i].size = size;
		int err = validate_one(records + pos, size, lim, &info[i], msg);
		if (err)
			return err;
		pos += size;
		i++;
	}
	*n = i;
	return KERR_NONE;
}
