/*
 * codec.h — decompression of Kafka batch payloads, used only to validate
 * compressed batches (they are stored exactly as the producer compressed
 * them).  gzip (zlib), snappy (raw or the xerial/snappy-java framing that Java
 * producers write), LZ4 frame format (what Kafka means by lz4), zstd.
 */
#ifndef KAAS_STORAGE_CODEC_H
#define KAAS_STORAGE_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* Inflates `in` with codec (KB_CODEC_*) into a malloc'd *out.  Returns 0,
 * -EMSGSIZE when the output would exceed max, -EBADMSG for corrupt input,
 * -ENOTSUP for an unknown codec, -ENOMEM. */
int kaas_decompress(int codec, const uint8_t *in, size_t len, uint64_t max, uint8_t **out,
		    size_t *outlen);

#endif
