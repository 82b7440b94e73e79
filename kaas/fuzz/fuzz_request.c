/*
 * fuzz_request.c — fuzz target: one Kafka request frame (header + body,
 * without the 4-byte size) through the broker's request path — header
 * decoding, dispatch table, version check, and the handler of every API
 * against a real in-process broker (harness.h): topic registry, partition
 * table, storage engine and group coordinator on a scratch directory.
 *
 * Built two ways (kaas/fuzz/module.mk):
 *   - with -fsanitize=fuzzer (KAAS_LIBFUZZER): libFuzzer's main, `make fuzz`;
 *   - as a unit test under ASan/UBSan: the main below replays the committed
 *     seed corpus (kaas/fuzz/corpus/request/, or the files and
 *     directories given as arguments) and fails if it finds none.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/fuzz/harness.h"
#include "kaas/fuzz/replay.h"

/* A long run restarts the broker now and then, so that topics, partitions
 * and groups created by earlier inputs do not slow every later one down. */
#define RESTART_EVERY 5000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (fz_requests() >= RESTART_EVERY)
		fz_broker_close();
	if (fz_broker_open()) {
		fprintf(stderr, "fuzz_request: cannot start the in-process broker\n");
		abort();
	}
	fz_request(data, size, 250);
	return 0;
}

static void at_exit(void) { fz_broker_close(); }

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	atexit(at_exit);
	return 0;
}

#ifndef KAAS_LIBFUZZER
int main(int argc, char **argv)
{
	LLVMFuzzerInitialize(&argc, &argv);
	return fz_replay_main(argc, argv, "kaas/fuzz/corpus/request", LLVMFuzzerTestOneInput);
}
#endif
