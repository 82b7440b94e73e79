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

/* ---- compression ------------------------------------------------------------- */

#define SNAPPY_CHUNK (32u << 10) /* snappy-java's block size */
#define LZ4_FEED (64u << 10)

struct ks_deflate {
	int codec, level;
	int err;
	uint8_t *out;          /* reserve, then the stream */
	size_t len, cap, max_out;
	uint64_t pledged;      /* 0: unknown */
	int started;
	int zinit;
	z_stream zs;
	ZSTD_CCtx *zc;
	LZ4F_cctx *lc;
	LZ4F_preferences_t lp;
	uint8_t *scratch;      /* lz4 / snappy: one block's compressed bound */
	size_t scap;
	uint8_t *chunk;        /* snappy: the chunk being filled */
	size_t clen;
};

/* At least `want` bytes of room (less when max_out is near: then 0 < room
 * < want); -EMSGSIZE when there is none. */
static int room(ks_deflate *z, size_t want)
{
	if (z->cap - z->len >= want)
		return 0;
	size_t nc = z->cap * 2 > z->len + want ? z->cap * 2 : z->len + want;
	if (nc > z->max_out)
		nc = z->max_out;
	if (nc <= z->len)
		return -EMSGSIZE;
	if (nc == z->cap)
		return 0;
	uint8_t *n = realloc(z->out, nc);
	if (!n)
		return -ENOMEM;
	z->out = n;
	z->cap = nc;
	return 0;
}

static int put(ks_deflate *z, const uint8_t *p, size_t n)
{
	if (n > z->max_out - z->len)
		return -EMSGSIZE;
	int rc = room(z, n);
	if (rc)
		return rc;
	memcpy(z->out + z->len, p, n);
	z->len += n;
	return 0;
}

int ks_deflate_open(ks_deflate **zp, int codec, int level, size_t reserve, size_t max_out)
{
	*zp = NULL;
	if (codec < KB_CODEC_NONE || codec > KB_CODEC_ZSTD)
		return -ENOTSUP;
	if (reserve > max_out)
		return -EMSGSIZE;
	ks_deflate *z = calloc(1, sizeof(*z));
	if (!z)
		return -ENOMEM;
	z->codec = codec;
	z->level = level;
	z->max_out = max_out;
	size_t first = reserve + 4096 < max_out ? reserve + 4096 : max_out;
	int rc = 0;
	if (!(z->out = malloc(first ? first : 1)))
		rc = -ENOMEM;
	z->cap = first;
	z->len = reserve;
	switch (codec) {
	case KB_CODEC_GZIP:
		if (rc == 0) {
			int lv = level == 0 || level < -1 || level > 9 ? Z_DEFAULT_COMPRESSION : level;
			/* 15 + 16: a gzip header and trailer, what Kafka writes. */
			if (deflateInit2(&z->zs, lv, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
				rc = -ENOMEM;
			else
				z->zinit = 1;
		}
		break;
	case KB_CODEC_SNAPPY:
		z->scap = snappy_max_compressed_length(SNAPPY_CHUNK);
		if (rc == 0 && (!(z->scratch = malloc(z->scap)) || !(z->chunk = malloc(SNAPPY_CHUNK))))
			rc = -ENOMEM;
		break;
	case KB_CODEC_LZ4:
		/* Independent 64 KiB blocks, no content size or checksum: what
		 * Kafka's Java producer writes, which every reader accepts. */
		z->lp.frameInfo.blockSizeID = LZ4F_max64KB;
		z->lp.frameInfo.blockMode = LZ4F_blockIndependent;
		z->lp.compressionLevel = level > 0 ? level : KAAS_LZ4_LEVEL_DEFAULT;
		z->scap = LZ4F_compressBound(LZ4_FEED, &z->lp);
		if (z->scap < LZ4F_HEADER_SIZE_MAX)
			z->scap = LZ4F_HEADER_SIZE_MAX;
		if (rc == 0 && (LZ4F_isError(LZ4F_createCompressionContext(&z->lc, LZ4F_VERSION)) ||
				!(z->scratch = malloc(z->scap))))
			rc = -ENOMEM;
		break;
	case KB_CODEC_ZSTD: {
		int lv = level ? level : KAAS_ZSTD_LEVEL_DEFAULT;
		if (rc == 0 && !(z->zc = ZSTD_createCCtx()))
			rc = -ENOMEM;
		if (rc == 0 && ZSTD_isError(ZSTD_CCtx_setParameter(z->zc, ZSTD_c_compressionLevel, lv)))
			rc = -ENOTSUP;
		/* The "ultra" levels' windows are more than the broker (and
		 * some clients) accept reading back: 8 MiB at most. */
		if (rc == 0 && lv > 19 && /* levels up to 19 stay within 8 MiB */
		    ZSTD_isError(ZSTD_CCtx_setParameter(z->zc, ZSTD_c_windowLog, KAAS_ZSTD_WINDOW_LOG_MAX)))
			rc = -ENOTSUP;
		break;
	}
	}
	if (rc) {
		ks_deflate_free(z);
		return rc;
	}
	*zp = z;
	return 0;
}

void ks_deflate_pledge(ks_deflate *z, uint64_t total_in)
{
	if (!z->started)
		z->pledged = total_in;
}

void ks_deflate_free(ks_deflate *z)
{
	if (!z)
		return;
	if (z->zinit)
		deflateEnd(&z->zs);
	ZSTD_freeCCtx(z->zc);
	if (z->lc)
		LZ4F_freeCompressionContext(z->lc);
	free(z->scratch);
	free(z->chunk);
	free(z->out);
	free(z);
}

static int gzip_feed(ks_deflate *z, const uint8_t *p, size_t n, int flush)
{
	z->zs.next_in = (Bytef *)p;
	z->zs.avail_in = (uInt)n;
	for (;;) {
		int rc = room(z, 16384);
		if (rc)
			return rc;
		size_t avail = z->cap - z->len;
		if (avail > UINT32_MAX)
			avail = UINT32_MAX;
		z->zs.next_out = z->out + z->len;
		z->zs.avail_out = (uInt)avail;
		int r = deflate(&z->zs, flush);
		z->len += avail - z->zs.avail_out;
		if (r == Z_STREAM_END)
			return 0;
		if (r != Z_OK && r != Z_BUF_ERROR)
			return -EIO;
		if (flush == Z_NO_FLUSH && z->zs.avail_in == 0)
			return 0;
		if (z->zs.avail_out != 0 && r == Z_BUF_ERROR)
			return -EIO; /* no progress with room to write */
	}
}

static int zstd_feed(ks_deflate *z, const uint8_t *p, size_t n, ZSTD_EndDirective how)
{
	ZSTD_inBuffer ib = {p, n, 0};
	for (;;) {
		int rc = room(z, 16384);
		if (rc)
			return rc;
		ZSTD_outBuffer ob = {z->out + z->len, z->cap - z->len, 0};
		size_t r = ZSTD_compressStream2(z->zc, &ob, &ib, how);
		z->len += ob.pos;
		if (ZSTD_isError(r))
			return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ? -ENOMEM : -EIO;
		if (how == ZSTD_e_continue ? ib.pos == ib.size : r == 0)
			return 0;
	}
}

static int snappy_flush(ks_deflate *z)
{
	if (!z->clen)
		return 0;
	size_t n = z->scap;
	if (snappy_compress((const char *)z->chunk, z->clen, (char *)z->scratch, &n) != SNAPPY_OK)
		return -EIO;
	uint8_t l[4];
	kb_put32(l, (uint32_t)n);
	int rc = put(z, l, 4);
	if (rc == 0)
		rc = put(z, z->scratch, n);
	z->clen = 0;
	return rc;
}

static int lz4_feed(ks_deflate *z, const uint8_t *p, size_t n)
{
	while (n) {
		size_t k = n < LZ4_FEED ? n : LZ4_FEED;
		size_t r = LZ4F_compressUpdate(z->lc, z->scratch, z->scap, p, k, NULL);
		if (LZ4F_isError(r))
			return -EIO;
		int rc = put(z, z->scratch, r);
		if (rc)
			return rc;
		p += k;
		n -= k;
	}
	return 0;
}

/* The stream's header, before the first byte. */
static int start(ks_deflate *z)
{
	z->started = 1;
	if (z->codec == KB_CODEC_SNAPPY) {
		uint8_t h[XERIAL_HDR];
		memcpy(h, xerial_magic, sizeof(xerial_magic));
		kb_put32(h + 8, 1);  /* version */
		kb_put32(h + 12, 1); /* minimum compatible version */
		return put(z, h, sizeof(h));
	}
	if (z->codec == KB_CODEC_LZ4) {
		size_t r = LZ4F_compressBegin(z->lc, z->scratch, z->scap, &z->lp);
		return LZ4F_isError(r) ? -EIO : put(z, z->scratch, r);
	}
	if (z->codec == KB_CODEC_ZSTD && z->pledged &&
	    ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(z->zc, z->pledged)))
		return -EIO;
	return 0;
}

int ks_deflate_write(ks_deflate *z, const uint8_t *p, size_t n)
{
	if (z->err)
		return z->err;
	int rc = z->started ? 0 : start(z);
	switch (rc || n == 0 ? -1 : z->codec) {
	case KB_CODEC_NONE: rc = put(z, p, n); break;
	case KB_CODEC_GZIP:
		/* z_stream counts 32-bit: feed in slices. */
		while (rc == 0 && n) {
			size_t k = n > (1u << 30) ? (1u << 30) : n;
			rc = gzip_feed(z, p, k, Z_NO_FLUSH);
			p += k;
			n -= k;
		}
		break;
	case KB_CODEC_SNAPPY:
		while (rc == 0 && n) {
			size_t k = SNAPPY_CHUNK - z->clen < n ? SNAPPY_CHUNK - z->clen : n;
			memcpy(z->chunk + z->clen, p, k);
			z->clen += k;
			p += k;
			n -= k;
			if (z->clen == SNAPPY_CHUNK)
				rc = snappy_flush(z);
		}
		break;
	case KB_CODEC_LZ4: rc = lz4_feed(z, p, n); break;
	case KB_CODEC_ZSTD: rc = zstd_feed(z, p, n, ZSTD_e_continue); break;
	default: break;
	}
	if (rc)
		z->err = rc;
	return rc;
}

int ks_deflate_finish(ks_deflate *z, uint8_t **out, size_t *len)
{
	*out = NULL;
	*len = 0;
	int rc = z->err ? z->err : z->started ? 0 : start(z);
	if (rc == 0) {
		switch (z->codec) {
		case KB_CODEC_GZIP: rc = gzip_feed(z, NULL, 0, Z_FINISH); break;
		case KB_CODEC_SNAPPY: rc = snappy_flush(z); break;
		case KB_CODEC_LZ4: {
			size_t r = LZ4F_compressEnd(z->lc, z->scratch, z->scap, NULL);
			rc = LZ4F_isError(r) ? -EIO : put(z, z->scratch, r);
			break;
		}
		case KB_CODEC_ZSTD: rc = zstd_feed(z, NULL, 0, ZSTD_e_end); break;
		default: break;
		}
	}
	if (rc) {
		z->err = rc;
		return rc;
	}
	*out = z->out;
	*len = z->len;
	z->out = NULL;
	z->err = -EINVAL; /* spent */
	return 0;
}
