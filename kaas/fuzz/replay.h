/*
 * replay.h — the unit-test main of the fuzz targets: feeds every file of the
 * committed seed corpus (or of the files and directories named on the
 * command line) to the target once, in name order, under whatever
 * sanitizers the binary was built with.  Fails when it finds no input, so a
 * lost corpus cannot pass unnoticed.
 */
#ifndef KAAS_PROTO_FUZZ_REPLAY_H
#define KAAS_PROTO_FUZZ_REPLAY_H

#include <stddef.h>
#include <stdint.h>

typedef int (*fz_target_fn)(const uint8_t *data, size_t size);

/* Replays the files and directories given (default_dir when none); 1 when
 * one fails or none is found.  With CK_RUN_CASE set to anything but
 * "corpus" it runs nothing and returns 77 (make unit T=, ktest.h). */
int fz_replay_main(int argc, char **argv, const char *default_dir, fz_target_fn target);

#endif
