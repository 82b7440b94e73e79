/*
 * recompress.c — re-encoding record batches in another codec: a topic's
 * compression.type on append (Kafka's LogValidator recompresses a batch
 * whose codec is not the topic's) and the cleaner's rewrite of a batch
 * that keeps only some of its records.
 *
 * The records themselves are never decoded: their bytes go from the
 * inflater (or the uncompressed batch) to the compressor in pieces, so the
 * offsets deltas, timestamps, keys, values and headers stay byte for byte,
 * and memory is the new batch plus the two codecs' bounded state
 * (codec.h), never the whole inflated payload.
 */
#include "kaas/storage/batch.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/storage/codec.h"

/* The header of the new batch at out: hdr's fields, `codec`, the length
 * and count given, the CRC over the whole. */
static void finish_header(uint8_t *out, size_t len, const uint8_t *hdr, int codec, int32_t count)
{
	memcpy(out, hdr, KB_HDR);
	kb_put32(out + KB_OFF_LENGTH, (uint32_t)(len - KB_LOG_OVERHEAD));
	uint16_t attrs = kb_get16(hdr + KB_OFF_ATTRS);
	kb_put16(out + KB_OFF_ATTRS, (uint16_t)((attrs & ~KB_ATTR_CODEC_MASK) | (uint16_t)codec));
	kb_put32(out + KB_OFF_COUNT, (uint32_t)count);
	kb_put32(out + KB_OFF_CRC, ks__kb_crc(out, len));
}

int ks__kb_recompress(const uint8_t *b, size_t size, int to, int level, uint64_t inflated,
		      const kb_limits *lim, size_t max_size, uint8_t **out, size_t *outlen)
{
	*out = NULL;
	*outlen = 0;
	if (size < KB_HDR || size > INT32_MAX)
		return -EBADMSG;
	int from = kb_get16(b + KB_OFF_ATTRS) & KB_ATTR_CODEC_MASK;
	if (from > KB_CODEC_ZSTD)
		return -ENOTSUP;
	ks_deflate *d = NULL;
	ks_inflate *z = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc = ks_deflate_open(&d, to, level, KB_HDR, max_size);
	if (rc)
		goto out;
	if (from == KB_CODEC_NONE)
		inflated = size - KB_HDR;
	if (inflated)
		ks_deflate_pledge(d, inflated);
	if (from == KB_CODEC_NONE) {
		rc = ks_deflate_write(d, b + KB_HDR, size - KB_HDR);
	} else {
		if ((rc = ks_inflate_open(&z, from, b + KB_HDR, size - KB_HDR, lim->max_decompressed,
					  ks__kb_snappy_block_max(lim))))
			goto out;
		const uint8_t *p;
		size_t n;
		while ((rc = ks_inflate_next(z, &p, &n)) == 1)
			if ((rc = ks_deflate_write(d, p, n)))
				break;
		if (rc == 0 && inflated && ks_inflate_total(z) != inflated)
			rc = -EBADMSG; /* not what validation walked */
	}
	if (rc == 0)
		rc = ks_deflate_finish(d, &buf, &len);
	if (rc)
		goto out;
	finish_header(buf, len, b, to, (int32_t)kb_get32(b + KB_OFF_COUNT));
	*out = buf;
	*outlen = len;
out:
	ks_inflate_free(z);
	ks_deflate_free(d);
	return rc;
}

int ks__kb_seal(const uint8_t *hdr, const uint8_t *recs, size_t rlen, int32_t count, int codec, int level,
		size_t max_size, uint8_t **out, size_t *outlen)
{
	*out = NULL;
	*outlen = 0;
	ks_deflate *d = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc = ks_deflate_open(&d, codec, level, KB_HDR, max_size);
	if (rc == 0) {
		ks_deflate_pledge(d, rlen);
		rc = ks_deflate_write(d, recs, rlen);
	}
	if (rc == 0)
		rc = ks_deflate_finish(d, &buf, &len);
	ks_deflate_free(d);
	if (rc)
		return rc;
	finish_header(buf, len, hdr, codec, count);
	*out = buf;
	*outlen = len;
	return 0;
}
