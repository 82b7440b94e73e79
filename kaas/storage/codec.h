/*
 * codec.h — streaming decompression of Kafka batch payloads (to validate
 * compressed batches, and to read their records when the broker
 * recompresses or cleans them) and streaming compression (the broker's
 * recompression for a topic's compression.type, and the cleaner's rewrite
 * of a partly kept batch).  gzip (zlib), snappy (raw or the
 * xerial/snappy-java framing that Java producers write), LZ4 frame format
 * (what Kafka means by lz4), zstd.
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

/* ---- compression ------------------------------------------------------------
 *
 * Input comes in pieces of any size; the output is one buffer that grows
 * as the compressed stream does, refused once it would exceed max_out, so
 * what a compression holds is max_out plus the codec's own state:
 *
 *   codec   what the broker writes                 state besides the output
 *   gzip    a gzip member, zlib's deflate           ~256 KiB (window and hash)
 *   snappy  snappy-java framing, 32 KiB chunks      one 32 KiB chunk + its bound
 *   lz4     LZ4 frame, independent 64 KiB blocks    one 64 KiB block + LZ4F state
 *   zstd    one zstd frame, window <= 8 MiB         the level's tables (level 3:
 *                                                   ~1.3 MiB; 19: ~90 MiB)
 *   none    the bytes as they are                   nothing
 *
 * Every format is what Kafka's Java producer writes and what every client
 * reads (librdkafka, the Java client, kafka-python, franz-go, kafkajs). */

/* Default levels, Kafka's (KIP-390): gzip -1 (zlib's 6), lz4 9, zstd 3. */
#define KAAS_LZ4_LEVEL_DEFAULT 9
#define KAAS_ZSTD_LEVEL_DEFAULT 3

typedef struct ks_deflate ks_deflate;

/* Starts compressing with codec (KB_CODEC_*, KB_CODEC_NONE copies) at
 * level (the codec's own scale; 0 means its default; ignored by snappy).
 * The output starts with `reserve` bytes the caller fills later (a batch
 * header).  Returns 0, -ENOTSUP for an unknown codec, -ENOMEM. */
int ks_deflate_open(ks_deflate **zp, int codec, int level, size_t reserve, size_t max_out);

/* The exact number of bytes that will be fed, when known before the first
 * write: zstd records it in the frame (clients that inflate whole, such as
 * kafka-python's, size their buffer by it) and sizes its tables for it. */
void ks_deflate_pledge(ks_deflate *z, uint64_t total_in);

/* Feeds n bytes.  0, -EMSGSIZE (the output would exceed max_out), -ENOMEM,
 * -EIO (the codec failed); an error sticks. */
int ks_deflate_write(ks_deflate *z, const uint8_t *p, size_t n);

/* Ends the stream: *out (malloc'd, the caller's to free) holds `reserve`
 * bytes then the compressed stream, *len bytes in all.  Errors as
 * ks_deflate_write; z is spent either way (free it). */
int ks_deflate_finish(ks_deflate *z, uint8_t **out, size_t *len);

/* NULL-safe. */
void ks_deflate_free(ks_deflate *z);

#endif
