/*
 * bench.h — shared pieces of the benchmark programs (kaas-bench,
 * kaas-bench-rdk): clocks, latency samples, option parsing, JSON output.
 *
 * Every measurement prints one JSON object on stdout; ci/bench/run.sh
 * collects them and ci/bench/report.py turns them into results/bench/.
 * Programs exit non-zero when the work they timed did not complete
 * correctly (a short write, a record missing after the run), so a broken
 * path can never show up as a fast one.
 */
#ifndef KAAS_BENCH_H
#define KAAS_BENCH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

int64_t bn_now_ns(void);

/* Latency samples in nanoseconds; one per thread, merged at the end. */
typedef struct bn_lat {
	int64_t *v;
	size_t n, cap;
	int sorted;
} bn_lat;

#define BN_LAT_INIT {0}

void bn_lat_add(bn_lat *l, int64_t ns);
int bn_lat_merge(bn_lat *dst, const bn_lat *src);
/* p in [0, 100]; 0 when empty. */
int64_t bn_lat_pct(bn_lat *l, double p);
/* {"n", "p50_us", "p90_us", "p99_us", "max_us", "mean_us"} */
json_t *bn_lat_json(bn_lat *l);
void bn_lat_free(bn_lat *l);

/* Options: "--name value" pairs after the subcommand.  bn_opt_* return the
 * value of the last occurrence or the default; unknown names are an error
 * found by bn_opts_check (each lookup marks its name as known). */
typedef struct bn_opts {
	int argc;
	char **argv;
	unsigned char *used;
} bn_opts;

int bn_opts_init(bn_opts *o, int argc, char **argv);
const char *bn_opt_str(bn_opts *o, const char *name, const char *dflt);
int64_t bn_opt_int(bn_opts *o, const char *name, int64_t dflt);
double bn_opt_double(bn_opts *o, const char *name, double dflt);
/* 0 when every argument was a known option with a value; else prints the
 * offender and returns -1. */
int bn_opts_check(bn_opts *o, const char *prog);
void bn_opts_free(bn_opts *o);

/* Prints obj on one line to stdout and releases it.  0 or -1. */
int bn_emit(json_t *obj);

/* Fills buf with bytes from a fixed-seed generator: incompressible. */
void bn_fill_random(void *buf, size_t n, uint64_t seed);
/* Fills buf with words from a small vocabulary: compresses about 3-4x,
 * closer to real log/JSON payloads than zeros or noise. */
void bn_fill_text(void *buf, size_t n, uint64_t seed);

/* MB/s (10^6 bytes per second) of `bytes` over `ns`. */
static inline double bn_mbps(uint64_t bytes, int64_t ns)
{
	return ns > 0 ? (double)bytes / ((double)ns / 1e9) / 1e6 : 0.0;
}

#endif
