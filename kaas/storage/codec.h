/*
 * codec.h — streaming decompression of Kafka batch payloads, used only to
 * validate compressed batches (they are stored exactly as the producer
 * compressed them).  gzip (zlib), snappy (raw or the xerial/snappy-java
 * framing that Java producers write), LZ4 frame format (what Kafka means by
 * lz4), zstd.
 *
 * The output comes in pieces, so what a decompression holds in memory is
 * bounded by the piece size and the codec's own window, never by how far
 * the payload inflates:
 *
 *   codec            memory besides the codec context
 *   gzip             64 KiB pieces + zlib's 32 KiB window
 *   lz4              64 KiB pieces + the frame's block size (64 KiB from
 *                    Kafka's clients, 4 MiB at most by the format)
 *   zstd             64 KiB pieces + the frame's window, refused above
 *                    KAAS_ZSTD_WINDOW_MAX
 *   snappy (raw)     the whole payload: one block whose length is in its
 *                    header, refused above max_block
 *   snappy (xerial)  one chunk at a time (32 KiB from snappy-java), each
 *                    refused above max_block
 */
#ifndef KAAS_STORAGE_CODEC_H
#define KAAS_STORAGE_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* Output piece size of the streaming codecs (gzip, lz4, zstd). */
#define KAAS_INFLATE_PIECE (64u << 10)
/* The largest zstd window accepted: 8 MiB is what zstd levels up to 19
 * use; the "ultra" levels 20-22 declare 32-128 MiB. */
#define KAAS_ZSTD_WINDOW_LOG_MAX 23
#define KAAS_ZSTD_WINDOW_MAX ((size_t)1 << KAAS_ZSTD_WINDOW_LOG_MAX)

typedef struct ks_inflate ks_inflate;

/* Starts decompressing `in` (which must stay valid until ks_inflate_free)
 * with codec (KB_CODEC_*).  max_out bounds the total output, max_block the
 * size of one snappy block inflated at once.  Returns 0, -ENOTSUP for an
 * unknown codec, -ENOMEM. */
int ks_inflate_open(ks_inflate **zp, int codec, const uint8_t *in, size_t len,
		      uint64_t max_out, size_t max_block);

/* The next piece of output: *p and *n point into z's own memory, valid until
 * the next call.  Returns 1 with a piece (*n > 0); 0 when the payload ended
 * exactly where its compressed stream ends; or an error, after which every
 * call repeats it:
 *   -EMSGSIZE  the output would exceed max_out
 *   -EFBIG     a snappy block would exceed max_block
 *   -ERANGE    a zstd frame's window exceeds KAAS_ZSTD_WINDOW_MAX
 *   -EBADMSG   corrupt or truncated input, or bytes after the stream's end
 *   -ENOMEM */
int ks_inflate_next(ks_inflate *z, const uint8_t **p, size_t *n);

/* Bytes output so far. */
uint64_t ks_inflate_total(const ks_inflate *z);

/* NULL-safe. */
void ks_inflate_free(ks_inflate *z);

#endif
