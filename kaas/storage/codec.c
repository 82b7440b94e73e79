/*
 * codec.c — payload decompression for validating compressed batches, one
 * bounded piece at a time (codec.h has the memory each codec needs).
 *
 * The caller walks the records as the pieces come, so a small
 * "decompression bomb" costs CPU up to max_out but never memory; and a
 * payload that turns out to be malformed is given up as soon as its records
 * stop making sense rather than after inflating all of it.
 */
#include "kaas/storage/codec.h"

#include <errno.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "kaas/storage/batch.h"

struct ks_inflate {
	int codec;
	const uint8_t *in;
	size_t len, pos;       /* input and how much of it was consumed */
	uint64_t total, max_out;
	size_t max_block;
	int err;               /* sticky error */
	int done;              /* the stream ended; nothing more comes */
	int xerial;            /* snappy: snappy-java framing */
	int zinit;             /* gzip: inflateInit2 succeeded */
	z_stream zs;
	ZSTD_DStream *zd;
	LZ4F_dctx *lz;
	uint8_t *buf;          /* the current piece */
	size_t cap;
};

static const uint8_t xerial_magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
#define XERIAL_HDR 16 /* magic, version, minimum compatible version */

int ks_inflate_open(ks_inflate **zp, int codec, const uint8_t *in, size_t len,
		      uint64_t max_out, size_t max_block)
{
	*zp = NULL;
	if (codec < KB_CODEC_GZIP || codec > KB_CODEC_ZSTD)
		return -ENOTSUP;
	ks_inflate *z = calloc(1, sizeof(*z));
	if (!z)
		return -ENOMEM;
	z->codec = codec;
	z->in = in;
	z->len = len;
	z->max_out = max_out;
	z->max_block = max_block;
	int rc = 0;
	if (codec != KB_CODEC_SNAPPY) {
		z->cap = KAAS_INFLATE_PIECE;
		if (!(z->buf = malloc(z->cap)))
			rc = -ENOMEM;
	}
	switch (codec) {
	case KB_CODEC_GZIP:
		if (rc == 0) {
			/* 15 + 32: a gzip or a zlib header. */
			if (len > UINT32_MAX) /* z_stream counts 32-bit */
				rc = -EMSGSIZE;
			else if (inflateInit2(&z->zs, 15 + 32) != Z_OK)
				rc = -ENOMEM;
			else
				z->zinit = 1;
			z->zs.next_in = (Bytef *)in;
			z->zs.avail_in = (uInt)len;
		}
		break;
	case KB_CODEC_SNAPPY:
		z->xerial = len >= XERIAL_HDR && memcmp(in, xerial_magic, sizeof(xerial_magic)) == 0;
		if (z->xerial)
			z->pos = XERIAL_HDR;
		break;
	case KB_CODEC_LZ4:
		if (rc == 0 && LZ4F_isError(LZ4F_createDecompressionContext(&z->lz, LZ4F_VERSION)))
			rc = -ENOMEM;
		break;
	case KB_CODEC_ZSTD:
		if (rc == 0 && !(z->zd = ZSTD_createDStream()))
			rc = -ENOMEM;
		/* Bounds what the stream allocates for its window. */
		if (rc == 0 && ZSTD_isError(ZSTD_DCtx_setParameter(z->zd, ZSTD_d_windowLogMax,
								   KAAS_ZSTD_WINDOW_LOG_MAX)))
			rc = -ENOMEM;
		break;
	}
	if (rc) {
		ks_inflate_free(z);
		return rc;
	}
	*zp = z;
	return 0;
}

void ks_inflate_free(ks_inflate *z)
{
	if (!z)
		return;
	if (z->zinit)
		inflateEnd(&z->zs);
	ZSTD_freeDStream(z->zd);
	if (z->lz)
		LZ4F_freeDecompressionContext(z->lz);
	free(z->buf);
	free(z);
}

uint64_t ks_inflate_total(const ks_inflate *z) { return z->total; }

/* The piece producers fill z->buf up to z->cap and stop short only where
 * the stream ends; 1, 0 (nothing more) or an error, like ks_inflate_next. */

static int gzip_piece(ks_inflate *z, size_t *got)
{
	z->zs.next_out = z->buf;
	z->zs.avail_out = (uInt)z->cap;
	for (;;) {
		int r = inflate(&z->zs, Z_NO_FLUSH);
		*got = z->cap - z->zs.avail_out;
		if (r == Z_STREAM_END) {
			/* A second gzip member is legal gzip, but Kafka never writes one. */
			if (z->zs.avail_in)
				return -EBADMSG;
			z->done = 1;
			return *got ? 1 : 0;
		}
		if (r == Z_OK) {
			if (z->zs.avail_out == 0)
				return 1;
			continue;
		}
		/* Z_BUF_ERROR with room to write: the input ended inside the stream. */
		return r == Z_MEM_ERROR ? -ENOMEM : -EBADMSG;
	}
}

static int lz4_piece(ks_inflate *z, size_t *got)
{
	*got = 0;
	for (;;) {
		size_t dst = z->cap - *got, src = z->len - z->pos;
		size_t hint = LZ4F_decompress(z->lz, z->buf + *got, &dst, z->in + z->pos, &src, NULL);
		if (LZ4F_isError(hint))
			return -EBADMSG;
		z->pos += src;
		*got += dst;
		if (hint == 0) {
			if (z->pos != z->len)
				return -EBADMSG; /* bytes after the frame */
			z->done = 1;
			return *got ? 1 : 0;
		}
		if (*got == z->cap)
			return 1;
		if (src == 0 && dst == 0)
			return -EBADMSG; /* the input ended inside the frame */
	}
}

static int zstd_piece(ks_inflate *z, size_t *got)
{
	ZSTD_inBuffer ib = {z->in, z->len, z->pos};
	ZSTD_outBuffer ob = {z->buf, z->cap, 0};
	for (;;) {
		size_t before = ob.pos, from = ib.pos;
		size_t r = ZSTD_decompressStream(z->zd, &ob, &ib);
		z->pos = ib.pos;
		*got = ob.pos;
		if (ZSTD_isError(r)) {
			ZSTD_ErrorCode e = ZSTD_getErrorCode(r);
			if (e == ZSTD_error_frameParameter_windowTooLarge)
				return -ERANGE;
			return e == ZSTD_error_memory_allocation ? -ENOMEM : -EBADMSG;
		}
		if (r == 0 && ib.pos == ib.size) {
			z->done = 1;
			return ob.pos ? 1 : 0;
		}
		if (ob.pos == ob.size)
			return 1;
		if (ib.pos == ib.size || (ob.pos == before && ib.pos == from))
			return -EBADMSG; /* the input ended inside a frame */
		/* A frame ended and another follows, or a header was read. */
	}
}

/* Inflates one snappy block whole into z->buf. */
static int snappy_block(ks_inflate *z, const uint8_t *blk, size_t blen, size_t *got)
{
	size_t n;
	if (snappy_uncompressed_length((const char *)blk, blen, &n) != SNAPPY_OK)
		return -EBADMSG;
	if (z->total + n > z->max_out)
		return -EMSGSIZE;
	if (n > z->max_block)
		return -EFBIG;
	if (n > z->cap) {
		/* The largest block so far: xerial chunks are all alike. */
		free(z->buf);
		z->cap = 0;
		if (!(z->buf = malloc(n)))
			return -ENOMEM;
		z->cap = n;
	}
	*got = n;
	if (n == 0)
		return 0;
	size_t out = n;
	if (snappy_uncompress((const char *)blk, blen, (char *)z->buf, &out) != SNAPPY_OK || out != n)
		return -EBADMSG;
	return 1;
}

static int snappy_piece(ks_inflate *z, size_t *got)
{
	if (!z->xerial) {
		/* Raw snappy: the whole payload is one block. */
		z->done = 1;
		return snappy_block(z, z->in, z->len, got);
	}
	/* snappy-java framing: after the header, [u32 length][raw block]... */
	for (;;) {
		if (z->pos == z->len) {
			z->done = 1;
			return 0;
		}
		if (z->len - z->pos < 4)
			return -EBADMSG;
		uint32_t blen = kb_get32(z->in + z->pos);
		z->pos += 4;
		if (blen > z->len - z->pos)
			return -EBADMSG;
		const uint8_t *blk = z->in + z->pos;
		z->pos += blen;
		int rc = snappy_block(z, blk, blen, got);
		if (rc)
			return rc;
		/* An empty chunk: on to the next. */
	}
}

int ks_inflate_next(ks_inflate *z, const uint8_t **p, size_t *n)
{
	if (z->err)
		return z->err;
	if (z->done)
		return 0;
	size_t got = 0;
	int rc;
	switch (z->codec) {
	case KB_CODEC_GZIP: rc = gzip_piece(z, &got); break;
	case KB_CODEC_SNAPPY: rc = snappy_piece(z, &got); break;
	case KB_CODEC_LZ4: rc = lz4_piece(z, &got); break;
	default: rc = zstd_piece(z, &got); break;
	}
	if (rc == 1 && z->total + got > z->max_out)
		rc = -EMSGSIZE;
	if (rc < 0) {
		z->err = rc;
		return rc;
	}
	if (rc == 0)
		return 0;
	z->total += got;
	*p = z->buf;
	*n = got;
	return 1;
}
