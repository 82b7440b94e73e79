/*
 * kbuild.h — a test-only builder of real Kafka v2 record batches (optionally
 * compressed with gzip, snappy — raw, or framed by snappy-java when
 * b.xerial_chunk is set —, lz4 frame or zstd), as producers send them:
 * baseOffset 0, partitionLeaderEpoch -1, CRC-32C over attributes..end.
 * Header-only so any module's tests can include it ("storage/test/kbuild.h")
 * and link util (crc32c) plus the compression libraries.
 *
 *   kbuild b = KBUILD_INIT;
 *   kbuild_begin(&b, pid, pepoch, base_seq, base_ts);
 *   kbuild_record(&b, "k", 1, "value", 5, ts);
 *   kbuild_end(&b, KBUILD_NONE);      // appends one whole batch to b.buf
 *   ... b.buf / b.len hold every batch built so far; kbuild_free(&b).
 */
#ifndef KAAS_STORAGE_TEST_KBUILD_H
#define KAAS_STORAGE_TEST_KBUILD_H

#include <lz4frame.h>
#include <snappy-c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "util/crc32c.h"

/* Compression codecs, the attribute values Kafka uses. */
enum { KBUILD_NONE = 0, KBUILD_GZIP, KBUILD_SNAPPY, KBUILD_LZ4, KBUILD_ZSTD };

typedef struct kbuild {
	uint8_t *buf;      /* finished batches */
	size_t len, cap;
	uint8_t *rec;      /* records of the batch being built */
	size_t rlen, rcap;
	int64_t pid;
	int16_t pepoch;
	int32_t seq;
	int64_t base_ts, max_ts;
	int32_t count;
	int16_t extra_attrs; /* e.g. 0x10 transactional, 0x20 control */
	size_t xerial_chunk; /* snappy: the snappy-java framing with chunks of
				this many bytes (Java producers: 32 KiB); 0: raw */
} kbuild;

#define KBUILD_INIT {0}

static inline void kbuild__grow(uint8_t **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return;
	size_t nc = *cap ? *cap : 256;
	while (nc < need)
		nc *= 2;
	*p = realloc(*p, nc);
	if (!*p)
		abort();
	*cap = nc;
}

static inline void kbuild__put(uint8_t **p, size_t *len, size_t *cap, const void *d, size_t n)
{
	kbuild__grow(p, cap, *len + n);
	memcpy(*p + *len, d, n);
	*len += n;
}

static inline void kbuild__varint(uint8_t **p, size_t *len, size_t *cap, int64_t v)
{
	uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
	uint8_t tmp[10];
	int n = 0;
	while (u >= 0x80) {
		tmp[n++] = (uint8_t)(u | 0x80);
		u >>= 7;
	}
	tmp[n++] = (uint8_t)u;
	kbuild__put(p, len, cap, tmp, (size_t)n);
}

static inline void kbuild__be(uint8_t *p, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

static inline void kbuild_begin(kbuild *b, int64_t pid, int16_t pepoch, int32_t base_seq, int64_t base_ts)
{
	b->rlen = 0;
	b->pid = pid;
	b->pepoch = pepoch;
	b->seq = base_seq;
	b->base_ts = base_ts;
	b->max_ts = base_ts;
	b->count = 0;
}

/* klen/vlen -1 = null.  One header "h"="<index>" when with_header. */
static inline void kbuild_record_h(kbuild *b, const void *key, int32_t klen, const void *val,
				   int32_t vlen, int64_t ts, int with_header)
{
	uint8_t *body = NULL;
	size_t blen = 0, bcap = 0;
	uint8_t attr = 0;
	kbuild__put(&body, &blen, &bcap, &attr, 1);
	kbuild__varint(&body, &blen, &bcap, ts - b->base_ts);
	kbuild__varint(&body, &blen, &bcap, b->count);
	kbuild__varint(&body, &blen, &bcap, klen);
	if (klen > 0)
		kbuild__put(&body, &blen, &bcap, key, (size_t)klen);
	kbuild__varint(&body, &blen, &bcap, vlen);
	if (vlen > 0)
		kbuild__put(&body, &blen, &bcap, val, (size_t)vlen);
	if (with_header) {
		char hv[16];
		int hn = snprintf(hv, sizeof(hv), "%d", b->count);
		kbuild__varint(&body, &blen, &bcap, 1);
		kbuild__varint(&body, &blen, &bcap, 1);
		kbuild__put(&body, &blen, &bcap, "h", 1);
		kbuild__varint(&body, &blen, &bcap, hn);
		kbuild__put(&body, &blen, &bcap, hv, (size_t)hn);
	} else {
		kbuild__varint(&body, &blen, &bcap, 0);
	}
	kbuild__varint(&b->rec, &b->rlen, &b->rcap, (int64_t)blen);
	kbuild__put(&b->rec, &b->rlen, &b->rcap, body, blen);
	free(body);
	if (b->count == 0 || ts > b->max_ts)
		b->max_ts = ts;
	b->count++;
}

static inline void kbuild_record(kbuild *b, const void *key, int32_t klen, const void *val,
				 int32_t vlen, int64_t ts)
{
	kbuild_record_h(b, key, klen, val, vlen, ts, 0);
}

/* Compresses b->rec with codec into *out (malloc'd). */
static inline size_t kbuild__compress(const kbuild *b, int codec, uint8_t **out)
{
	size_t n = 0;
	switch (codec) {
	case KBUILD_GZIP: {
		z_stream zs;
		memset(&zs, 0, sizeof(zs));
		if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
			abort();
		size_t cap = deflateBound(&zs, (uLong)b->rlen) + 32;
		*out = malloc(cap);
		zs.next_in = b->rec;
		zs.avail_in = (uInt)b->rlen;
		zs.next_out = *out;
		zs.avail_out = (uInt)cap;
		if (deflate(&zs, Z_FINISH) != Z_STREAM_END)
			abort();
		n = cap - zs.avail_out;
		deflateEnd(&zs);
		break;
	}
	case KBUILD_SNAPPY: {
		if (b->xerial_chunk) {
			/* magic, version 1, minimum compatible version 1; then
			 * [u32 length][raw snappy block] per chunk. */
			static const uint8_t hdr[16] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1};
			size_t nchunks = b->rlen / b->xerial_chunk + 1;
			size_t cap = 16 + nchunks * (4 + snappy_max_compressed_length(b->xerial_chunk));
			*out = malloc(cap);
			memcpy(*out, hdr, 16);
			n = 16;
			for (size_t pos = 0; pos < b->rlen; pos += b->xerial_chunk) {
				size_t in = b->rlen - pos < b->xerial_chunk ? b->rlen - pos : b->xerial_chunk;
				size_t clen = cap - n - 4;
				if (snappy_compress((const char *)b->rec + pos, in, (char *)*out + n + 4, &clen) !=
				    SNAPPY_OK)
					abort();
				kbuild__be(*out + n, clen, 4);
				n += 4 + clen;
			}
			break;
		}
		size_t cap = snappy_max_compressed_length(b->rlen);
		*out = malloc(cap);
		n = cap;
		if (snappy_compress((const char *)b->rec, b->rlen, (char *)*out, &n) != SNAPPY_OK)
			abort();
		break;
	}
	case KBUILD_LZ4: {
		size_t cap = LZ4F_compressFrameBound(b->rlen, NULL);
		*out = malloc(cap);
		n = LZ4F_compressFrame(*out, cap, b->rec, b->rlen, NULL);
		if (LZ4F_isError(n))
			abort();
		break;
	}
	case KBUILD_ZSTD: {
		size_t cap = ZSTD_compressBound(b->rlen);
		*out = malloc(cap);
		n = ZSTD_compress(*out, cap, b->rec, b->rlen, 3);
		if (ZSTD_isError(n))
			abort();
		break;
	}
	default:
		*out = malloc(b->rlen ? b->rlen : 1);
		memcpy(*out, b->rec, b->rlen);
		n = b->rlen;
	}
	return n;
}

/* Finishes the batch: header, payload, CRC.  Returns its offset in b->buf. */
static inline size_t kbuild_end(kbuild *b, int codec)
{
	uint8_t *payload;
	size_t plen = kbuild__compress(b, codec, &payload);
	size_t start = b->len;
	kbuild__grow(&b->buf, &b->cap, b->len + 61 + plen);
	uint8_t *h = b->buf + start;
	memset(h, 0, 61);
	kbuild__be(h + 0, 0, 8);                                  /* baseOffset */
	kbuild__be(h + 8, (uint64_t)(49 + plen), 4);              /* batchLength */
	kbuild__be(h + 12, (uint64_t)(int64_t)-1, 4);             /* partitionLeaderEpoch */
	h[16] = 2;                                                /* magic */
	kbuild__be(h + 21, (uint64_t)(codec | b->extra_attrs), 2);
	kbuild__be(h + 23, (uint64_t)(b->count - 1), 4);          /* lastOffsetDelta */
	kbuild__be(h + 27, (uint64_t)b->base_ts, 8);
	kbuild__be(h + 35, (uint64_t)b->max_ts, 8);
	kbuild__be(h + 43, (uint64_t)b->pid, 8);
	kbuild__be(h + 51, (uint64_t)b->pepoch, 2);
	kbuild__be(h + 53, (uint64_t)b->seq, 4);
	kbuild__be(h + 57, (uint64_t)b->count, 4);
	memcpy(h + 61, payload, plen);
	free(payload);
	b->len += 61 + plen;
	uint32_t crc = ku_crc32c(0, b->buf + start + 21, 61 + plen - 21);
	kbuild__be(b->buf + start + 17, crc, 4);
	return start;
}

/* A batch of n records with values "<tag>-<i>" padded to vsize bytes. */
static inline size_t kbuild_simple(kbuild *b, int64_t pid, int16_t pepoch, int32_t seq, int n,
				   int64_t ts, const char *tag, int vsize, int codec)
{
	char v[4096];
	if (vsize > (int)sizeof(v))
		vsize = (int)sizeof(v);
	kbuild_begin(b, pid, pepoch, seq, ts);
	for (int i = 0; i < n; i++) {
		int k = snprintf(v, sizeof(v), "%s-%d", tag, i);
		if (k < vsize) {
			memset(v + k, 'x', (size_t)(vsize - k));
			k = vsize;
		}
		kbuild_record(b, "key", 3, v, k, ts + i);
	}
	return kbuild_end(b, codec);
}

static inline void kbuild_reset(kbuild *b) { b->len = 0; }

static inline void kbuild_free(kbuild *b)
{
	free(b->buf);
	free(b->rec);
	memset(b, 0, sizeof(*b));
}

#endif
