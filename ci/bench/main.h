/*
 * main.h — the subcommands of kaas-bench (main.c dispatches).  Each takes
 * its options, prints one JSON object per measurement and returns the exit
 * status: 0 done, 1 the measured work failed, 2 bad usage.
 */
#ifndef KAAS_BENCH_MAIN_H
#define KAAS_BENCH_MAIN_H

#include "ci/bench/bench.h"

int bench_device(bn_opts *o); /* device.c: raw write+fsync limit */
int bench_append(bn_opts *o); /* append.c: storage engine append + group commit */
int bench_compare(bn_opts *o); /* compare.c: device / engine modes in alternating slices */
int bench_read(bn_opts *o);   /* read.c: read plans vs raw pread/sendfile */
int bench_net(bn_opts *o);    /* net.c: loopback TCP throughput and round trip */

#endif
