/*
 * batch.c — validation of v2 record batches from producers.
 *
 * Follows Kafka's LogValidator for client input: the whole request is
 * refused when any batch is bad, with CORRUPT_MESSAGE for format errors
 * (INVALID_RECORD only exists from Produce v8, above our range),
 * MESSAGE_TOO_LARGE for oversize batches and INVALID_TIMESTAMP for
 * timestamps outside message.timestamp.difference.max.ms.
 */
#include "batch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "util/crc32c.h"
#include "util/kerr.h"

void kb_decode(const uint8_t *p, kb_hdr *h)
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

int kb_header_sane(const kb_hdr *h)
{
	return h->magic == 2 && h->length >= KB_MIN_LENGTH && h->base_offset >= 0 &&
	       h->base_offset <= KB_OFFSET_MAX && h->last_delta >= 0 && h->count > 0 &&
	       h->count == h->last_delta + 1;
}

uint32_t kb_crc(const uint8_t *batch, size_t size)
{
	return kaas_crc32c(0, batch + KB_OFF_ATTRS, size - KB_OFF_ATTRS);
}

int kb_count(const uint8_t *records, size_t len)
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

/* ---- varints (zigzag), bounds-checked ------------------------------------ */

typedef struct cur {
	const uint8_t *p, *end;
} cur;

static int rd_varlong(cur *c, int64_t *v)
{
	uint64_t x = 0;
	for (int shift = 0; shift < 70; shift += 7) {
		if (c->p >= c->end)
			return -1;
		uint8_t b = *c->p++;
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

static int rd_varint(cur *c, int32_t *v)
{
	int64_t x;
	if (rd_varlong(c, &x) || x < INT32_MIN || x > INT32_MAX)
		return -1;
	*v = (int32_t)x;
	return 0;
}

/* A length-prefixed field: -1 (null) allowed when nullable. */
static int rd_field(cur *c, int nullable)
{
	int32_t n;
	if (rd_varint(c, &n))
		return -1;
	if (n < 0)
		return (n == -1 && nullable) ? 0 : -1;
	if ((size_t)(c->end - c->p) < (size_t)n)
		return -1;
	c->p += n;
	return 0;
}

/* One record; *ts gets its absolute timestamp. */
static int rd_record(cur *c, int32_t expect_delta, int64_t base_ts, int64_t *ts, int64_t *odelta,
		     const char **msg)
{
	int32_t len;
	if (rd_varint(c, &len) || len < 0 || (size_t)(c->end - c->p) < (size_t)len) {
		*msg = "record length runs past the batch";
		return -1;
	}
	cur r = {c->p, c->p + len};
	int64_t tsd;
	int32_t od, nh;
	if (r.p >= r.end) {
		*msg = "empty record";
		return -1;
	}
	r.p++; /* attributes: unused in v2 */
	if (rd_varlong(&r, &tsd) || rd_varint(&r, &od)) {
		*msg = "record header truncated";
		return -1;
	}
	if (expect_delta >= 0 && od != expect_delta) {
		*msg = "record offset deltas are not consecutive";
		return -1;
	}
	if (rd_field(&r, 1) || rd_field(&r, 1)) {
		*msg = "record key or value length invalid";
		return -1;
	}
	if (rd_varint(&r, &nh) || nh < 0) {
		*msg = "record header count invalid";
		return -1;
	}
	for (int32_t i = 0; i < nh; i++) {
		if (rd_field(&r, 0) || rd_field(&r, 1)) {
			*msg = "record header key or value invalid";
			return -1;
		}
	}
	if (r.p != r.end) {
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
	c->p = r.end;
	return 0;
}

int kb_walk_records(const uint8_t *p, size_t len, int32_t count, int64_t base_ts, int64_t *max_ts,
		    int64_t *min_ts, const char **msg)
{
	cur c = {p, p + len};
	int64_t mx = INT64_MIN, mn = INT64_MAX;
	for (int32_t i = 0; i < count; i++) {
		int64_t ts;
		if (rd_record(&c, i, base_ts, &ts, NULL, msg))
			return -1;
		if (ts > mx)
			mx = ts;
		if (ts < mn)
			mn = ts;
	}
	if (c.p != c.end) {
		*msg = "bytes left over after the last record";
		return -1;
	}
	*max_ts = mx;
	*min_ts = mn;
	return 0;
}

int kb_find_ts(const uint8_t *batch, size_t size, int64_t ts, int64_t min_off, int64_t *off,
	       int64_t *rts)
{
	kb_hdr h;
	const char *msg;
	kb_decode(batch, &h);
	const uint8_t *recs = batch + KB_HDR;
	size_t rlen = size - KB_HDR;
	uint8_t *plain = NULL;
	int codec = h.attrs & KB_ATTR_CODEC_MASK;
	if (codec != KB_CODEC_NONE) {
		if (kaas_decompress(codec, recs, rlen, 1u << 30, &plain, &rlen))
			return -1;
		recs = plain;
	}
	int rc = -1;
	cur c = {recs, recs + rlen};
	for (int32_t i = 0; i < h.count; i++) {
		int64_t t, od;
		if (rd_record(&c, -1, h.base_ts, &t, &od, &msg))
			break;
		if (t >= ts && h.base_offset + od >= min_off) {
			*off = h.base_offset + od;
			*rts = t;
			rc = 0;
			break;
		}
	}
	free(plain);
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

static int validate_one(const uint8_t *b, uint32_t size, const kb_limits *lim, kb_info *in,
			const char **msg)
{
	kb_hdr h;
	kb_decode(b, &h);
	if (h.magic != 2) {
		*msg = "record batch magic is not 2";
		return KERR_CORRUPT_MESSAGE;
	}
	if (kb_crc(b, size) != h.crc) {
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

	const uint8_t *recs = b + KB_HDR;
	size_t rlen = size - KB_HDR;
	uint8_t *plain = NULL;
	int walk = 1;
	if (codec != KB_CODEC_NONE) {
		walk = lim->validate_compressed;
		if (walk) {
			size_t plen;
			int rc = kaas_decompress(codec, recs, rlen, lim->max_decompressed, &plain, &plen);
			if (rc == -ENOMEM) {
				*msg = "out of memory decompressing a batch";
				return KERR_UNKNOWN_SERVER_ERROR;
			}
			if (rc == -EMSGSIZE) {
				*msg = "batch decompresses beyond the broker's limit";
				return KERR_MESSAGE_TOO_LARGE;
			}
			if (rc) {
				*msg = "compressed payload does not decompress";
				return KERR_CORRUPT_MESSAGE;
			}
			recs = plain;
			rlen = plen;
		}
	}
	int err = KERR_NONE;
	if (walk) {
		int64_t mx, mn;
		if (kb_walk_records(recs, rlen, h.count, h.base_ts, &mx, &mn, msg)) {
			err = KERR_CORRUPT_MESSAGE;
		} else if (check_ts(lim, mn, msg) || check_ts(lim, mx, msg)) {
			err = KERR_INVALID_TIMESTAMP;
		} else if (mx != h.max_ts) {
			/* Kafka recomputes maxTimestamp (and the CRC) when it differs. */
			in->max_ts = mx;
			in->fix_max_ts = 1;
		}
		in->first_ts = mn;
	} else if (check_ts(lim, h.max_ts, msg) || check_ts(lim, h.base_ts, msg)) {
		err = KERR_INVALID_TIMESTAMP;
	}
	free(plain);
	return err;
}

int kb_validate(const uint8_t *records, size_t len, const kb_limits *lim, kb_info *info, int cap,
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
