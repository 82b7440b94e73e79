/*
 * codec.c — payload decompression for validating compressed batches.
 *
 * Output grows geometrically up to a caller-given bound so a small
 * "decompression bomb" batch cannot make the broker allocate without limit.
 */
#include "codec.h"

#include <errno.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "batch.h"

typedef struct obuf {
	uint8_t *p;
	size_t len, cap;
	uint64_t max;
} obuf;

/* Makes room for at least `want` more bytes (bounded by max). */
static int ob_reserve(obuf *o, size_t want)
{
	if (o->cap - o->len >= want)
		return 0;
	if ((uint64_t)o->len + want > o->max)
		return -EMSGSIZE;
	size_t ncap = o->cap ? o->cap : 4096;
	while (ncap - o->len < want)
		ncap *= 2;
	if (ncap > o->max)
		ncap = (size_t)o->max;
	uint8_t *np = realloc(o->p, ncap ? ncap : 1);
	if (!np)
		return -ENOMEM;
	o->p = np;
	o->cap = ncap;
	return 0;
}

/* Room to write into, at least one byte, preferring `hint`. */
static int ob_room(obuf *o, size_t hint)
{
	if (o->cap > o->len)
		return 0;
	if ((uint64_t)o->len >= o->max)
		return -EMSGSIZE;
	size_t want = hint;
	if ((uint64_t)o->len + want > o->max)
		want = (size_t)(o->max - o->len);
	return ob_reserve(o, want);
}

static int do_gzip(const uint8_t *in, size_t len, obuf *o)
{
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	if (inflateInit2(&zs, 15 + 32) != Z_OK) /* gzip or zlib header */
		return -ENOMEM;
	int rc = 0;
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)len;
	for (;;) {
		if ((rc = ob_room(o, o->cap ? o->cap : len * 4 + 64)))
			break;
		zs.next_out = o->p + o->len;
		zs.avail_out = (uInt)(o->cap - o->len);
		int z = inflate(&zs, Z_NO_FLUSH);
		o->len = o->cap - zs.avail_out;
		if (z == Z_STREAM_END) {
			/* Concatenated members are legal gzip; Kafka never writes them. */
			rc = zs.avail_in ? -EBADMSG : 0;
			break;
		}
		if (z == Z_OK)
			continue;
		if (z == Z_BUF_ERROR && zs.avail_in == 0) {
			rc = -EBADMSG; /* truncated */
			break;
		}
		if (z == Z_BUF_ERROR)
			continue;
		rc = z == Z_MEM_ERROR ? -ENOMEM : -EBADMSG;
		break;
	}
	inflateEnd(&zs);
	return rc;
}

static int snappy_block(const uint8_t *in, size_t len, obuf *o)
{
	size_t n;
	if (snappy_uncompressed_length((const char *)in, len, &n) != SNAPPY_OK)
		return -EBADMSG;
	int rc = ob_reserve(o, n);
	if (rc)
		return rc;
	size_t got = n;
	if (snappy_uncompress((const char *)in, len, (char *)o->p + o->len, &got) != SNAPPY_OK ||
	    got != n)
		return -EBADMSG;
	o->len += n;
	return 0;
}

static const uint8_t xerial_magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};

static int do_snappy(const uint8_t *in, size_t len, obuf *o)
{
	if (len < 16 || memcmp(in, xerial_magic, 8) != 0)
		return snappy_block(in, len, o);
	/* snappy-java framing: 16-byte header, then [u32 length][raw block]... */
	size_t pos = 16;
	while (pos < len) {
		if (len - pos < 4)
			return -EBADMSG;
		uint32_t n = kb_get32(in + pos);
		pos += 4;
		if (n > len - pos)
			return -EBADMSG;
		int rc = snappy_block(in + pos, n, o);
		if (rc)
			return rc;
		pos += n;
	}
	return 0;
}

static int do_lz4(const uint8_t *in, size_t len, obuf *o)
{
	LZ4F_dctx *dc = NULL;
	if (LZ4F_isError(LZ4F_createDecompressionContext(&dc, LZ4F_VERSION)))
		return -ENOMEM;
	int rc = 0;
	size_t pos = 0;
	size_t hint = 1;
	while (hint != 0) {
		if ((rc = ob_room(o, o->cap ? o->cap : len * 4 + 64)))
			break;
		size_t dst = o->cap - o->len, src = len - pos;
		hint = LZ4F_decompress(dc, o->p + o->len, &dst, in + pos, &src, NULL);
		if (LZ4F_isError(hint)) {
			rc = -EBADMSG;
			break;
		}
		pos += src;
		o->len += dst;
		if (hint != 0 && pos == len && dst == 0) {
			rc = -EBADMSG; /* input ended inside the frame */
			break;
		}
	}
	if (rc == 0 && pos != len)
		rc = -EBADMSG;
	LZ4F_freeDecompressionContext(dc);
	return rc;
}

static int do_zstd(const uint8_t *in, size_t len, obuf *o)
{
	ZSTD_DStream *ds = ZSTD_createDStream();
	if (!ds)
		return -ENOMEM;
	int rc = 0;
	ZSTD_inBuffer ib = {in, len, 0};
	size_t r = 1;
	while (r != 0) {
		if ((rc = ob_room(o, o->cap ? o->cap : len * 4 + 64)))
			break;
		ZSTD_outBuffer ob = {o->p + o->len, o->cap - o->len, 0};
		r = ZSTD_decompressStream(ds, &ob, &ib);
		if (ZSTD_isError(r)) {
			rc = -EBADMSG;
			break;
		}
		o->len += ob.pos;
		if (r != 0 && ib.pos == ib.size && ob.pos < ob.size) {
			rc = -EBADMSG; /* truncated frame */
			break;
		}
		if (r == 0 && ib.pos < ib.size) {
			r = 1; /* another frame follows */
		}
	}
	ZSTD_freeDStream(ds);
	return rc;
}

int kaas_decompress(int codec, const uint8_t *in, size_t len, uint64_t max, uint8_t **out,
		    size_t *outlen)
{
	obuf o = {NULL, 0, 0, max};
	int rc;
	switch (codec) {
	case KB_CODEC_GZIP: rc = do_gzip(in, len, &o); break;
	case KB_CODEC_SNAPPY: rc = do_snappy(in, len, &o); break;
	case KB_CODEC_LZ4: rc = do_lz4(in, len, &o); break;
	case KB_CODEC_ZSTD: rc = do_zstd(in, len, &o); break;
	default: rc = -ENOTSUP; break;
	}
	if (rc) {
		free(o.p);
		return rc;
	}
	*out = o.p ? o.p : malloc(1);
	if (!*out)
		return -ENOMEM;
	*outlen = o.len;
	return 0;
}
