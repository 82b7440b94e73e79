/*
 * fuzz_batch.c — fuzz target: the `records` field of a Produce request as
 * the storage engine validates it (ks__kb_validate: batch headers, CRC-32C,
 * record walks, decompression of gzip/snappy/lz4/zstd payloads with a
 * bound), and the by-timestamp search over each batch that passed
 * (ks__kb_find_ts, which decompresses again).  No I/O: this reaches the record
 * decoders far faster than whole requests do.
 *
 * Built like fuzz_request.c: libFuzzer's main for `make fuzz`, or the
 * replay main over kaas/fuzz/corpus/batch/ as a unit test.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kaas/fuzz/replay.h"
#include "kaas/storage/batch.h"

#define MAX_BATCHES 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kb_limits lim = {
		.max_batch_bytes = 1 << 20,
		.ts_diff_max_ms = -1,
		.now_ms = 1700000000000LL,
		.create_time = 1,
		.validate_compressed = 1,
		.max_decompressed = 4u << 20,
	};
	kb_info info[MAX_BATCHES];
	int n = 0, bad = -1;
	const char *msg = NULL;
	int nb = ks__kb_count(data, size);
	(void)nb;
	int err = ks__kb_validate(data, size, &lim, info, MAX_BATCHES, &n, &bad, &msg);
	if (err && !msg) {
		fprintf(stderr, "fuzz_batch: error %d without a message\n", err);
		abort();
	}
	if (err)
		return 0;
	for (int i = 0; i < n && i < MAX_BATCHES; i++) {
		if ((uint64_t)info[i].pos + info[i].size > size || info[i].size < KB_HDR) {
			fprintf(stderr, "fuzz_batch: batch %d [%u, +%u) outside the %zu input bytes\n", i, info[i].pos,
				info[i].size, size);
			abort();
		}
		int64_t off, ts;
		const int64_t probes[] = {INT64_MIN, 0, info[i].first_ts, info[i].max_ts, INT64_MAX};
		for (size_t k = 0; k < sizeof(probes) / sizeof(probes[0]); k++)
			(void)ks__kb_find_ts(data + info[i].pos, info[i].size, probes[k], 0, &off, &ts);
	}
	return 0;
}

#ifndef KAAS_LIBFUZZER
int main(int argc, char **argv)
{
	return fz_replay_main(argc, argv, "kaas/fuzz/corpus/batch", LLVMFuzzerTestOneInput);
}
#endif
