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
#define KC_DEFAULT_ITERATIONS 200
#define KC_MAX_ITERATIONS 1000000

typedef struct kc_opts {
	const char *url;
	const char *mounts[KC_MAX_MOUNTS];
	int nmounts;
	const char *agents[KC_MAX_ACTORS]; /* --agent HOST:PORT: one remote actor each */
	int nagents;
	int actors;
	int64_t iterations;
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
	int progress; /* -1 auto (a TTY), 0 off, 1 on */
	int help;
} kc_opts;

#define KC_DEFAULT_REPORT "kaas-conform-report.json"

/* argv[0] is the subcommand ("check").  0, or -EINVAL with err set. */
int kc_opts_parse_check(int argc, char **argv, kc_opts *o, char *err, size_t errlen);

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
