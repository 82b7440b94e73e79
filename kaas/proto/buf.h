/*
 * buf.h — the Kafka wire codec's reader and writer.
 *
 * Reader: a cursor over bytes that have already arrived in full.  Every read
 * is bounds-checked; on a short or invalid field the KRD_* macros record the
 * field name and `goto err_parse`, so a decoder is a straight run of reads with
 * one error label (the librdkafka style).  Strings and byte fields are slices
 * into the request buffer: decoding allocates nothing.  Array counts are
 * checked against the bytes that remain before a caller can allocate for them.
 *
 * Writer: a growable buffer.  Sizes that are only known later (frame length,
 * record batch length, CRC) are reserved and back-filled.  Allocation failure
 * is sticky (w->oom) and checked once when the response is finished.
 *
 * Flexible versions (KIP-482): the _F variants take a `flex` flag and use the
 * compact encodings (unsigned varint length + 1) and tagged-field sections.
 */
#ifndef KAAS_PROTO_BUF_H
#define KAAS_PROTO_BUF_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A slice: len < 0 means null. */
typedef struct kw_str {
	const char *s;
	int32_t len;
} kw_str;

typedef struct kw_bytes {
	const uint8_t *p;
	int32_t len; /* -1 = null */
} kw_bytes;

typedef struct kw_rd {
	const uint8_t *start;
	const uint8_t *p;
	const uint8_t *end;
	const char *err;    /* name of the field that failed, NULL when fine */
} kw_rd;

static inline void kw_rd_init(kw_rd *rd, const void *buf, size_t len)
{
	rd->start = rd->p = buf;
	rd->end = rd->p + len;
	rd->err = NULL;
}

static inline size_t kw_rd_remain(const kw_rd *rd) { return (size_t)(rd->end - rd->p); }

/* ---- primitive readers: return 0, or -1 leaving rd->err set ---------------- */

static inline int kw_rd_fail(kw_rd *rd, const char *what)
{
	if (!rd->err)
		rd->err = what;
	return -1;
}

static inline int kw_rd_i8(kw_rd *rd, int8_t *v)
{
	if (kw_rd_remain(rd) < 1)
		return kw_rd_fail(rd, "int8");
	*v = (int8_t)rd->p[0];
	rd->p += 1;
	return 0;
}

static inline int kw_rd_i16(kw_rd *rd, int16_t *v)
{
	if (kw_rd_remain(rd) < 2)
		return kw_rd_fail(rd, "int16");
	*v = (int16_t)(((uint16_t)rd->p[0] << 8) | rd->p[1]);
	rd->p += 2;
	return 0;
}

static inline int kw_rd_i32(kw_rd *rd, int32_t *v)
{
	if (kw_rd_remain(rd) < 4)
		return kw_rd_fail(rd, "int32");
	*v = (int32_t)(((uint32_t)rd->p[0] << 24) | ((uint32_t)rd->p[1] << 16) |
		       ((uint32_t)rd->p[2] << 8) | rd->p[3]);
	rd->p += 4;
	return 0;
}

static inline int kw_rd_i64(kw_rd *rd, int64_t *v)
{
	if (kw_rd_remain(rd) < 8)
		return kw_rd_fail(rd, "int64");
	uint64_t x = 0;
	for (int i = 0; i < 8; i++)
		x = (x << 8) | rd->p[i];
	*v = (int64_t)x;
	rd->p += 8;
	return 0;
}

static inline int kw_rd_uvarint(kw_rd *rd, uint64_t *v)
{
	uint64_t x = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (rd->p >= rd->end)
			return kw_rd_fail(rd, "varint");
		uint8_t b = *rd->p++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return 0;
		}
	}
	return kw_rd_fail(rd, "varint (too long)");
}

static inline int kw_rd_varint(kw_rd *rd, int64_t *v)
{
	uint64_t u;
	if (kw_rd_uvarint(rd, &u))
		return -1;
	*v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1); /* zigzag */
	return 0;
}

/* A 32-bit varint (record fields): out of int32 range is an error. */
static inline int kw_rd_varint32(kw_rd *rd, int32_t *v)
{
	int64_t x;
	if (kw_rd_varint(rd, &x))
		return -1;
	if (x < INT32_MIN || x > INT32_MAX)
		return kw_rd_fail(rd, "varint32 (out of range)");
	*v = (int32_t)x;
	return 0;
}

static inline int kw_rd_skip(kw_rd *rd, size_t n)
{
	if (kw_rd_remain(rd) < n)
		return kw_rd_fail(rd, "skip");
	rd->p += n;
	return 0;
}

/* Length-prefixed string: int16 length (-1 null) or compact (uvarint len+1). */
static inline int kw_rd_str(kw_rd *rd, int flex, kw_str *s)
{
	int64_t len;
	if (flex) {
		uint64_t u;
		if (kw_rd_uvarint(rd, &u))
			return -1;
		if (u > 0x7fff + 1)
			return kw_rd_fail(rd, "string length");
		len = (int64_t)u - 1;
	} else {
		int16_t l;
		if (kw_rd_i16(rd, &l))
			return -1;
		len = l;
	}
	if (len < -1)
		return kw_rd_fail(rd, "string length");
	if (len == -1) {
		s->s = NULL;
		s->len = -1;
		return 0;
	}
	if (kw_rd_remain(rd) < (size_t)len)
		return kw_rd_fail(rd, "string");
	s->s = (const char *)rd->p;
	s->len = (int32_t)len;
	rd->p += len;
	return 0;
}

/* Bytes: int32 length (-1 null) or compact. */
static inline int kw_rd_bytes(kw_rd *rd, int flex, kw_bytes *b)
{
	int64_t len;
	if (flex) {
		uint64_t u;
		if (kw_rd_uvarint(rd, &u))
			return -1;
		if (u > (uint64_t)INT32_MAX)
			return kw_rd_fail(rd, "bytes length");
		len = (int64_t)u - 1;
	} else {
		int32_t l;
		if (kw_rd_i32(rd, &l))
			return -1;
		len = l;
	}
	if (len < -1)
		return kw_rd_fail(rd, "bytes length");
	if (len == -1) {
		b->p = NULL;
		b->len = -1;
		return 0;
	}
	if (kw_rd_remain(rd) < (size_t)len)
		return kw_rd_fail(rd, "bytes");
	b->p = rd->p;
	b->len = (int32_t)len;
	rd->p += len;
	return 0;
}

/* Array count: int32 (-1 null -> *n = -1) or compact.  A count that cannot
 * fit in the remaining bytes at min_elem bytes per element is rejected here,
 * before anyone allocates n elements. */
static inline int kw_rd_array(kw_rd *rd, int flex, size_t min_elem, int32_t *n)
{
	int64_t cnt;
	if (flex) {
		uint64_t u;
		if (kw_rd_uvarint(rd, &u))
			return -1;
		if (u > (uint64_t)INT32_MAX)
			return kw_rd_fail(rd, "array count");
		cnt = (int64_t)u - 1;
	} else {
		int32_t c;
		if (kw_rd_i32(rd, &c))
			return -1;
		cnt = c;
	}
	if (cnt < -1)
		return kw_rd_fail(rd, "array count");
	if (cnt > 0 && min_elem > 0 && (uint64_t)cnt > kw_rd_remain(rd) / min_elem)
		return kw_rd_fail(rd, "array count (exceeds request)");
	*n = (int32_t)cnt;
	return 0;
}

static inline int kw_rd_uuid(kw_rd *rd, uint8_t uuid[16])
{
	if (kw_rd_remain(rd) < 16)
		return kw_rd_fail(rd, "uuid");
	memcpy(uuid, rd->p, 16);
	rd->p += 16;
	return 0;
}

/* Skips a tagged-field section (flexible versions only; no-op otherwise).
 * kaas accepts and ignores every tag it does not know, as Kafka does. */
static inline int kw_rd_tags(kw_rd *rd, int flex)
{
	if (!flex)
		return 0;
	uint64_t n;
	if (kw_rd_uvarint(rd, &n))
		return -1;
	if (n > kw_rd_remain(rd))
		return kw_rd_fail(rd, "tagged fields count");
	for (uint64_t i = 0; i < n; i++) {
		uint64_t tag, sz;
		if (kw_rd_uvarint(rd, &tag) || kw_rd_uvarint(rd, &sz))
			return -1;
		if (sz > kw_rd_remain(rd))
			return kw_rd_fail(rd, "tagged field");
		rd->p += sz;
	}
	return 0;
}

/* The decoder macros: read into dst or jump to err_parse. */
#define KRD(call)                       \
	do {                            \
		if ((call) != 0)        \
			goto err_parse; \
	} while (0)
#define KRD_I8(rd, dst) KRD(kw_rd_i8((rd), (dst)))
#define KRD_I16(rd, dst) KRD(kw_rd_i16((rd), (dst)))
#define KRD_I32(rd, dst) KRD(kw_rd_i32((rd), (dst)))
#define KRD_I64(rd, dst) KRD(kw_rd_i64((rd), (dst)))
#define KRD_VARINT(rd, dst) KRD(kw_rd_varint((rd), (dst)))
#define KRD_UVARINT(rd, dst) KRD(kw_rd_uvarint((rd), (dst)))
#define KRD_STR(rd, flex, dst) KRD(kw_rd_str((rd), (flex), (dst)))
#define KRD_BYTES(rd, flex, dst) KRD(kw_rd_bytes((rd), (flex), (dst)))
#define KRD_ARRAY(rd, flex, min_elem, dst) KRD(kw_rd_array((rd), (flex), (min_elem), (dst)))
#define KRD_UUID(rd, dst) KRD(kw_rd_uuid((rd), (dst)))
#define KRD_TAGS(rd, flex) KRD(kw_rd_tags((rd), (flex)))
#define KRD_SKIP(rd, n) KRD(kw_rd_skip((rd), (n)))
/* A semantic check on a decoded value: fails the parse with a field name. */
#define KRD_EXPECT(rd, cond, what)                   \
	do {                                         \
		if (!(cond)) {                       \
			kw_rd_fail((rd), (what));  \
			goto err_parse;              \
		}                                    \
	} while (0)

/* ---- writer ---------------------------------------------------------------- */

typedef struct kw_wr {
	uint8_t *buf;
	size_t len;
	size_t cap;
	int oom;
} kw_wr;

#define KAAS_WR_INIT {NULL, 0, 0, 0}

/* Makes room for n more bytes; returns a pointer to them or NULL (sticky oom). */
uint8_t *kw_wr_room(kw_wr *w, size_t n);
void kw_wr_free(kw_wr *w);
/* Hands the buffer to the caller (who frees it) and resets w. */
uint8_t *kw_wr_take(kw_wr *w, size_t *len);

static inline void kw_wr_raw(kw_wr *w, const void *p, size_t n)
{
	uint8_t *d = kw_wr_room(w, n);
	if (d && n)
		memcpy(d, p, n);
}

static inline void kw_wr_i8(kw_wr *w, int8_t v)
{
	uint8_t *d = kw_wr_room(w, 1);
	if (d)
		d[0] = (uint8_t)v;
}

static inline void kw_put_i16(uint8_t *d, int16_t v)
{
	d[0] = (uint8_t)((uint16_t)v >> 8);
	d[1] = (uint8_t)v;
}

static inline void kw_put_i32(uint8_t *d, int32_t v)
{
	uint32_t u = (uint32_t)v;
	d[0] = (uint8_t)(u >> 24);
	d[1] = (uint8_t)(u >> 16);
	d[2] = (uint8_t)(u >> 8);
	d[3] = (uint8_t)u;
}

static inline void kw_put_i64(uint8_t *d, int64_t v)
{
	uint64_t u = (uint64_t)v;
	for (int i = 7; i >= 0; i--) {
		d[i] = (uint8_t)u;
		u >>= 8;
	}
}

static inline int32_t kw_get_i32(const uint8_t *d)
{
	return (int32_t)(((uint32_t)d[0] << 24) | ((uint32_t)d[1] << 16) | ((uint32_t)d[2] << 8) | d[3]);
}

static inline int16_t kw_get_i16(const uint8_t *d)
{
	return (int16_t)(((uint16_t)d[0] << 8) | d[1]);
}

static inline int64_t kw_get_i64(const uint8_t *d)
{
	uint64_t x = 0;
	for (int i = 0; i < 8; i++)
		x = (x << 8) | d[i];
	return (int64_t)x;
}

static inline void kw_wr_i16(kw_wr *w, int16_t v)
{
	uint8_t *d = kw_wr_room(w, 2);
	if (d)
		kw_put_i16(d, v);
}

static inline void kw_wr_i32(kw_wr *w, int32_t v)
{
	uint8_t *d = kw_wr_room(w, 4);
	if (d)
		kw_put_i32(d, v);
}

static inline void kw_wr_i64(kw_wr *w, int64_t v)
{
	uint8_t *d = kw_wr_room(w, 8);
	if (d)
		kw_put_i64(d, v);
}

static inline void kw_wr_bool(kw_wr *w, int v) { kw_wr_i8(w, v ? 1 : 0); }

static inline void kw_wr_uvarint(kw_wr *w, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;
	do {
		uint8_t b = v & 0x7f;
		v >>= 7;
		tmp[n++] = (uint8_t)(b | (v ? 0x80 : 0));
	} while (v);
	kw_wr_raw(w, tmp, n);
}

static inline void kw_wr_varint(kw_wr *w, int64_t v)
{
	kw_wr_uvarint(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* String: len < 0 writes null.  Compact when flex. */
static inline void kw_wr_strn(kw_wr *w, int flex, const char *s, int32_t len)
{
	if (flex)
		kw_wr_uvarint(w, len < 0 ? 0 : (uint64_t)len + 1);
	else
		kw_wr_i16(w, (int16_t)(len < 0 ? -1 : len));
	if (len > 0)
		kw_wr_raw(w, s, (size_t)len);
}

static inline void kw_wr_str(kw_wr *w, int flex, const char *s)
{
	kw_wr_strn(w, flex, s, s ? (int32_t)strlen(s) : -1);
}

static inline void kw_wr_kstr(kw_wr *w, int flex, kw_str s)
{
	kw_wr_strn(w, flex, s.s, s.len);
}

static inline void kw_wr_bytes(kw_wr *w, int flex, const void *p, int32_t len)
{
	if (flex)
		kw_wr_uvarint(w, len < 0 ? 0 : (uint64_t)len + 1);
	else
		kw_wr_i32(w, len < 0 ? -1 : len);
	if (len > 0)
		kw_wr_raw(w, p, (size_t)len);
}

/* Array count (n < 0 writes null). */
static inline void kw_wr_array(kw_wr *w, int flex, int32_t n)
{
	if (flex)
		kw_wr_uvarint(w, n < 0 ? 0 : (uint64_t)n + 1);
	else
		kw_wr_i32(w, n);
}

/* An empty tagged-field section (flexible versions only). */
static inline void kw_wr_tags(kw_wr *w, int flex)
{
	if (flex)
		kw_wr_uvarint(w, 0);
}

static inline void kw_wr_uuid(kw_wr *w, const uint8_t uuid[16]) { kw_wr_raw(w, uuid, 16); }

/* Reserve an int32 to back-fill (lengths, counts not known up front).
 * Returns its offset; kw_wr_patch_i32 fills it in. */
static inline size_t kw_wr_reserve_i32(kw_wr *w)
{
	size_t off = w->len;
	kw_wr_i32(w, 0);
	return off;
}

static inline void kw_wr_patch_i32(kw_wr *w, size_t off, int32_t v)
{
	if (!w->oom && off + 4 <= w->len)
		kw_put_i32(w->buf + off, v);
}

/* Back-fills the length of everything written after the reserved slot. */
static inline void kw_wr_patch_len(kw_wr *w, size_t off)
{
	kw_wr_patch_i32(w, off, (int32_t)(w->len - off - 4));
}

/* Back-fills a CRC-32C (record batch) over [from, end of buffer) at crc_off. */
void kw_wr_patch_crc32c(kw_wr *w, size_t crc_off, size_t from);

#endif
