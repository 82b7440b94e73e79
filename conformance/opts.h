/*
 * opts.h — command-line options of `kaas-conform check` and
 * `kaas-conform stamp-verify`.  Parsing is pure (no I/O) and every error is
 * one line naming the option.
 */
#ifndef KC_OPTS_H
#define KC_OPTS_H

#include <stddef.h>
#include <stdint.h>

#define KC_MAX_MOUNTS 16
#define KC_MIN_ACTORS 2
#define KC_MAX_ACTORS 64
#define KC_DEFAULT_ACTORS 4
/* Without --iterations: what the detection target needs (688 for the
 * defaults below), kc_power_needed(). */
#define KC_DETECT_RATE_PCT 1.0   /* an anomaly in 1% of observations ... */
/* etcd's rule of thumb for the disk under a log: p99 fsync below 10 ms. */
#define KC_PERF_FSYNC_P99_MS 10
#define KC_DETECT_POWER_PCT 99.9 /* ... is caught with at least 99.9% */
#define KC_MAX_ITERATIONS 1000000

typedef struct kc_opts {
	const char *url;
	const char *mounts[KC_MAX_MOUNTS];
	int nmounts;
	const char *agents[KC_MAX_ACTORS]; /* --agent HOST:PORT: one remote actor each */
	int nagents;
	int actors;
	int64_t iterations; /* observations per observer (docs/conformance.md) */
	int iterations_set;
	double detect_rate, detect_power; /* fractions in (0,1): the detection target */
	uint64_t seed;
	int seed_set;
	unsigned checks; /* bit per kc_check_id */
	const char *json;  /* NULL: the default file; "-": stdout */
	const char *junit;
	int stamp;
	const char *cluster_dir; /* NULL: <URL>/__cluster */
	const char *crash_cmd;      /* a crash of the server side: restart, remount */
	const char *power_loss_cmd; /* a power cut of the storage (docs/conformance.md) */
	int require_power_loss;     /* UNPROVEN fsync ends the run with exit 4 */
	int timeout_s;
	int perf, perf_strict; /* --perf: add the perf check; --perf-strict: a miss FAILs */
	int64_t perf_fsync_p99_us; /* --perf-fsync-p99-ms (default KC_PERF_FSYNC_P99_MS) */
	double perf_min_mibps;     /* --perf-min-mibps at 1 MiB appends; 0: no target */
	int64_t enospc_limit; /* --enospc SIZE: fill the volume only when its free space is at most this */
	int progress; /* -1 auto (a TTY), 0 off, 1 on */
	int help;
} kc_opts;

#define KC_DEFAULT_REPORT "kaas-conform-report.json"

/* argv[0] is the subcommand ("check").  0, or -EINVAL with err set. */
int kc_opts_parse_check(int argc, char **argv, kc_opts *o, char *err, size_t errlen);

/* "64m", "512k", "2g", "1048576" -> bytes (1 byte to 1 PiB).  0 or -EINVAL naming opt. */
int kc_parse_size(const char *opt, const char *s, int64_t *out, char *err, size_t errlen);

/* "rename,excl" -> mask; "all" allowed.  0 or -EINVAL naming the bad item. */
int kc_parse_checks(const char *list, unsigned *mask, char *err, size_t errlen);

/* stamp-verify URL [--cluster-dir DIR] */
typedef struct kc_verify_opts {
	const char *url;
	const char *cluster_dir;
	int help;
} kc_verify_opts;
int kc_opts_parse_verify(int argc, char **argv, kc_verify_opts *o, char *err, size_t errlen);

extern const char kc_usage[];

#endif
