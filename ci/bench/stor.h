/*
 * stor.h — the write-path measurements shared by `kaas-bench device`,
 * `kaas-bench append` and `kaas-bench compare`: a set of raw files or of
 * storage-engine partitions is opened once and then driven for as many
 * time slices as the caller wants, so that a limit and the thing it limits
 * can be measured in alternation, close together in time.
 */
#ifndef KAAS_BENCH_STOR_H
#define KAAS_BENCH_STOR_H

#include <stddef.h>
#include <stdint.h>

#include "ci/bench/bench.h"

/* What one slice did. */
typedef struct st_res {
	int64_t ns;          /* wall time of the slice */
	uint64_t ops;        /* writes (device) or appended batches (engine) */
	uint64_t bytes;
	uint64_t fsyncs;     /* file fsyncs (device: one per sync; engine: counted in the substrate) */
} st_res;

static inline double st_mbps(const st_res *r) { return bn_mbps(r->bytes, r->ns); }

/* A model of a volume whose fsync is a round trip away (an NFS COMMIT, a
 * network block device): every fsync of the device loop and of the engine
 * (through the substrate) first sleeps this long, and such sleeps overlap
 * like requests in flight do.  0 (the default): the real device only. */
extern int st_fsync_delay_us;

/* The engine's group-commit depth (ks_log_config.flush_depth: fsyncs of
 * one partition in flight at once) for the partitions app_open opens;
 * 0 (the default): the engine's default. */
extern int st_flush_depth;

/* ---- device.c: raw files, pwrite + fsync through the system call ---------------- */
typedef struct dev_set dev_set;

int dev_open(const char *dir, int nfiles, dev_set **out);
/* `threads` threads (thread i on file i % nfiles) write `size` bytes at
 * offsets reserved with an atomic add and fsync after every `sync_every`
 * writes, for `secs`.  Latency of each write(+fsync) goes into lat. */
int dev_run(dev_set *s, int threads, size_t size, int sync_every, double secs, bn_lat *lat, st_res *res);
void dev_close(dev_set *s); /* closes and unlinks; NULL-safe */

/* ---- append.c: storage-engine partitions --------------------------------------- */
enum { APP_GC, APP_NAIVE, APP_NOSYNC };
typedef struct app_set app_set;

/* Opens (creates) `nparts` partitions under DIR/bench/ and takes them over;
 * the batch every append sends is `records` records of `rsize`-byte values
 * (random or text), compressed with `codec` (0 none, 1 gzip, 2 snappy,
 * 3 lz4, 4 zstd). */
int app_open(const char *dir, int nparts, int32_t records, int32_t rsize, int codec, int text, app_set **out);
size_t app_batch_bytes(const app_set *s);
/* `threads` appenders (thread i on partition i % nparts) for `secs`, or
 * `count` batches each when count > 0. */
int app_run(app_set *s, int threads, int mode, double secs, int64_t count, bn_lat *lat, st_res *res);
/* Every partition holds exactly what was appended, all of it durable. */
int app_verify(app_set *s);
void app_close(app_set *s); /* closes and removes DIR/bench; NULL-safe */

int app_parse_mode(const char *s);
int app_parse_codec(const char *s);

#endif
