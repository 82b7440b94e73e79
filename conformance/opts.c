/*
 * opts.c — option parsing for kaas-conform.
 */
#include "conformance/opts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/judge.h"
#include "conformance/kc.h"

const char kc_usage[] =
	"usage: kaas-conform check URL [--mount URL ...] [--actors N] [--iterations N]\n"
	"                          [--seed S] [--checks LIST] [--json FILE] [--junit FILE]\n"
	"                          [--stamp [--cluster-dir DIR]]\n"
	"                          [--crash-cmd CMD | --power-loss-cmd CMD]\n"
	"                          [--require-power-loss]\n"
	"                          [--timeout SECONDS] [--progress|--no-progress]\n"
	"                          [--agent HOST:PORT --agent HOST:PORT ...]\n"
	"                          [--detect-rate PCT] [--detect-power PCT]\n"
	"                          [--perf [--perf-fsync-p99-ms MS] [--perf-min-mibps N]\n"
	"                           [--perf-strict]]\n"
	"                          [--enospc SIZE]\n"
	"       kaas-conform agent --listen ADDR:PORT --root URL [--keepalive SECONDS]\n"
	"       kaas-conform stamp-verify URL [--cluster-dir DIR]\n"
	"       kaas-conform clean URL [--older-than DURATION]\n"
	"       kaas-conform --version\n"
	"\n"
	"URL is a directory (path or posix:PATH), nfs://server/export?version=3|4,\n"
	"or fault:<url>?<options>.  Checks: preflight, rename, excl, cto, unlink-open,\n"
	"fsync, rename-copy (default: all of these), perf (with --perf), enospc (with\n"
	"--enospc SIZE: fills the volume when it has at most SIZE free).  Exit: 0 pass\n"
	"(or warn, or unproven: fsync not disproven, no power-loss hook), 1 fail,\n"
	"2 usage or internal error, 3 refused, 4 unproven with --require-power-loss.\n"
	"See docs/conformance.md.\n";

int kc_parse_checks(const char *list, unsigned *mask, char *err, size_t errlen)
{
	unsigned m = 0;
	char buf[512];
	if (!list || !*list || strlen(list) >= sizeof(buf)) {
		snprintf(err, errlen, "--checks: expected a comma-separated list of check names");
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", list);
	char *save = NULL;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (strcmp(t, "all") == 0) {
			m |= KC_DEFAULT_CHECKS;
			continue;
		}
		int id = kc_check_lookup(t);
		if (id < 0) {
			snprintf(err, errlen,
				 "--checks: unknown check '%s' (known: preflight, rename, excl, cto, unlink-open, fsync, rename-copy, perf, enospc)",
				 t);
			return -EINVAL;
		}
		m |= 1u << id;
	}
	if (!m) {
		snprintf(err, errlen, "--checks: no check named");
		return -EINVAL;
	}
	*mask = m;
	return 0;
}

/* Whole-string unsigned decimal (or 0x hex) within [lo, hi]. */
static int parse_u64(const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out,
		     char *err, size_t errlen)
{
	char *end;
	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		goto bad;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (*end || (errno && errno != ERANGE))
		goto bad;
	if (errno == ERANGE || v < lo || v > hi) {
		snprintf(err, errlen, "%s: %s is out of range (%llu..%llu)", opt, s,
			 (unsigned long long)lo, (unsigned long long)hi);
		return -EINVAL;
	}
	*out = v;
	return 0;
bad:
	snprintf(err, errlen, "%s: '%s' is not a number", opt, s ? s : "");
	return -EINVAL;
}

int kc_parse_size(const char *opt, const char *s, int64_t *out, char *err, size_t errlen)
{
	uint64_t mult = 1;
	size_t n = s ? strlen(s) : 0;
	char num[32];
	if (n && strchr("kKmMgG", s[n - 1])) {
		mult = strchr("kK", s[n - 1]) ? 1ull << 10 : strchr("mM", s[n - 1]) ? 1ull << 20 : 1ull << 30;
		n--;
	}
	if (n == 0 || n >= sizeof(num) || s[0] < '0' || s[0] > '9')
		goto bad;
	memcpy(num, s, n);
	num[n] = '\0';
	uint64_t v;
	for (size_t i = 0; i < n; i++)
		if (num[i] < '0' || num[i] > '9')
			goto bad;
	if (parse_u64(opt, num, 1, (1ull << 50) / mult, &v, err, errlen))
		return -EINVAL;
	*out = (int64_t)(v * mult);
	return 0;
bad:
	snprintf(err, errlen, "%s: '%s' is not a size (like 64m, 512k, 2g)", opt, s ? s : "");
	return -EINVAL;
}

/* A percentage strictly between 0 and 100 ("1", "0.5", "99.9"). */
static int parse_pct(const char *opt, const char *s, double *out, char *err, size_t errlen)
{
	char *end;
	errno = 0;
	double v = s && *s && *s != ' ' ? strtod(s, &end) : 0;
	if (!s || !*s || *s == ' ' || *end || errno || !(v > 0 && v < 100)) {
		snprintf(err, errlen, "%s: '%s' is not a percentage between 0 and 100 (exclusive)", opt,
			 s ? s : "");
		return -EINVAL;
	}
	*out = v / 100.0;
	return 0;
}

/* A positive decimal number below 10^6 ("10", "2.5"). */
static int parse_positive(const char *opt, const char *s, double *out, char *err, size_t errlen)
{
	char *end;
	errno = 0;
	double v = s && *s && *s != ' ' ? strtod(s, &end) : 0;
	if (!s || !*s || *s == ' ' || *end || errno || !(v > 0 && v < 1e6)) {
		snprintf(err, errlen, "%s: '%s' is not a positive number", opt, s ? s : "");
		return -EINVAL;
	}
	*out = v;
	return 0;
}

/* A value that must not be empty; the message is "opt: what". */
static int nonempty(const char *opt, const char *v, const char *what, char *err, size_t errlen)
{
	if (*v)
		return 0;
	snprintf(err, errlen, "%s: %s", opt, what);
	return -EINVAL;
}

/* Matches "--name value" and "--name=value"; advances *i past the value. */
static int take(int argc, char **argv, int *i, const char *name, const char **val, char *err,
		size_t errlen, int *bad)
{
	const char *a = argv[*i];
	size_t n = strlen(name);
	if (strncmp(a, name, n) != 0)
		return 0;
	if (a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	if (a[n] != '\0')
		return 0;
	if (*i + 1 >= argc) {
		snprintf(err, errlen, "%s needs a value", name);
		*bad = 1;
		return 1;
	}
	*val = argv[++*i];
	return 1;
}

int kc_opts_parse_check(int argc, char **argv, kc_opts *o, char *err, size_t errlen)
{
	memset(o, 0, sizeof(*o));
	o->actors = KC_DEFAULT_ACTORS;
	o->detect_rate = KC_DETECT_RATE_PCT / 100.0;
	o->detect_power = KC_DETECT_POWER_PCT / 100.0;
	o->checks = KC_DEFAULT_CHECKS;
	o->perf_fsync_p99_us = KC_PERF_FSYNC_P99_MS * 1000;
	o->progress = -1;
	o->timeout_s = 300;
	int checks_given = 0, actors_given = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		int bad = 0;
		uint64_t u;
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			o->help = 1;
			return 0;
		}
		if (take(argc, argv, &i, "--mount", &v, err, errlen, &bad)) {
			if (bad || nonempty("--mount", v, "empty URL", err, errlen))
				return -EINVAL;
			if (o->nmounts >= KC_MAX_MOUNTS) {
				snprintf(err, errlen, "--mount: at most %d mounts", KC_MAX_MOUNTS);
				return -EINVAL;
			}
			o->mounts[o->nmounts++] = v;
		} else if (take(argc, argv, &i, "--actors", &v, err, errlen, &bad)) {
			if (bad || parse_u64("--actors", v, KC_MIN_ACTORS, KC_MAX_ACTORS, &u, err, errlen))
				return -EINVAL;
			o->actors = (int)u;
			actors_given = 1;
		} else if (take(argc, argv, &i, "--agent", &v, err, errlen, &bad)) {
			if (bad)
				return -EINVAL;
			if (!*v || !strchr(v, ':')) {
				snprintf(err, errlen, "--agent: expected HOST:PORT, got '%s'", v);
				return -EINVAL;
			}
			if (o->nagents >= KC_MAX_ACTORS) {
				snprintf(err, errlen, "--agent: at most %d agents", KC_MAX_ACTORS);
				return -EINVAL;
			}
			o->agents[o->nagents++] = v;
		} else if (take(argc, argv, &i, "--iterations", &v, err, errlen, &bad)) {
			if (bad || parse_u64("--iterations", v, 1, KC_MAX_ITERATIONS, &u, err, errlen))
				return -EINVAL;
			o->iterations = (int64_t)u;
			o->iterations_set = 1;
		} else if (take(argc, argv, &i, "--detect-rate", &v, err, errlen, &bad)) {
			if (bad || parse_pct("--detect-rate", v, &o->detect_rate, err, errlen))
				return -EINVAL;
		} else if (take(argc, argv, &i, "--detect-power", &v, err, errlen, &bad)) {
			if (bad || parse_pct("--detect-power", v, &o->detect_power, err, errlen))
				return -EINVAL;
		} else if (take(argc, argv, &i, "--seed", &v, err, errlen, &bad)) {
			if (bad || parse_u64("--seed", v, 0, KC_SEED_MAX, &u, err, errlen))
				return -EINVAL;
			o->seed = u;
			o->seed_set = 1;
		} else if (take(argc, argv, &i, "--checks", &v, err, errlen, &bad)) {
			if (bad || kc_parse_checks(v, &o->checks, err, errlen))
				return -EINVAL;
			checks_given = 1;
		} else if (take(argc, argv, &i, "--json", &v, err, errlen, &bad)) {
			if (bad || nonempty("--json", v, "empty file name", err, errlen))
				return -EINVAL;
			o->json = v;
		} else if (take(argc, argv, &i, "--junit", &v, err, errlen, &bad)) {
			if (bad || nonempty("--junit", v, "empty file name", err, errlen))
				return -EINVAL;
			o->junit = v;
		} else if (strcmp(a, "--stamp") == 0) {
			o->stamp = 1;
		} else if (take(argc, argv, &i, "--cluster-dir", &v, err, errlen, &bad)) {
			if (bad || nonempty("--cluster-dir", v, "empty", err, errlen))
				return -EINVAL;
			o->cluster_dir = v;
		} else if (take(argc, argv, &i, "--crash-cmd", &v, err, errlen, &bad)) {
			if (bad || nonempty("--crash-cmd", v, "empty command", err, errlen))
				return -EINVAL;
			o->crash_cmd = v;
		} else if (take(argc, argv, &i, "--power-loss-cmd", &v, err, errlen, &bad)) {
			if (bad || nonempty("--power-loss-cmd", v, "empty command", err, errlen))
				return -EINVAL;
			o->power_loss_cmd = v;
		} else if (strcmp(a, "--require-power-loss") == 0) {
			o->require_power_loss = 1;
		} else if (take(argc, argv, &i, "--timeout", &v, err, errlen, &bad)) {
			if (bad || parse_u64("--timeout", v, 1, 86400, &u, err, errlen))
				return -EINVAL;
			o->timeout_s = (int)u;
		} else if (strcmp(a, "--perf") == 0) {
			o->perf = 1;
		} else if (strcmp(a, "--perf-strict") == 0) {
			o->perf_strict = 1;
		} else if (take(argc, argv, &i, "--perf-fsync-p99-ms", &v, err, errlen, &bad)) {
			double ms;
			if (bad || parse_positive("--perf-fsync-p99-ms", v, &ms, err, errlen))
				return -EINVAL;
			o->perf_fsync_p99_us = (int64_t)(ms * 1000.0 + 0.5);
		} else if (take(argc, argv, &i, "--enospc", &v, err, errlen, &bad)) {
			if (bad || kc_parse_size("--enospc", v, &o->enospc_limit, err, errlen))
				return -EINVAL;
		} else if (take(argc, argv, &i, "--perf-min-mibps", &v, err, errlen, &bad)) {
			if (bad || parse_positive("--perf-min-mibps", v, &o->perf_min_mibps, err, errlen))
				return -EINVAL;
		} else if (strcmp(a, "--progress") == 0) {
			o->progress = 1;
		} else if (strcmp(a, "--no-progress") == 0) {
			o->progress = 0;
		} else if (a[0] == '-' && a[1] != '\0') {
			snprintf(err, errlen, "unknown option '%s' (see --help)", a);
			return -EINVAL;
		} else if (!o->url) {
			if (!*a) {
				snprintf(err, errlen, "empty URL");
				return -EINVAL;
			}
			o->url = a;
		} else {
			snprintf(err, errlen, "unexpected argument '%s' (one URL; more mounts with --mount)", a);
			return -EINVAL;
		}
	}
	if (!o->url) {
		snprintf(err, errlen, "missing URL of the volume to check (see --help)");
		return -EINVAL;
	}
	if (!o->iterations_set) {
		int64_t need = kc_power_needed(o->detect_rate, o->detect_power);
		if (need > KC_MAX_ITERATIONS) {
			snprintf(err, errlen,
				 "--detect-rate %g%% with --detect-power %g%% needs %lld observations, more than %d",
				 o->detect_rate * 100, o->detect_power * 100, (long long)need,
				 KC_MAX_ITERATIONS);
			return -EINVAL;
		}
		o->iterations = need;
	}
	if (o->nagents) {
		/* One actor per agent: the agents are the actors. */
		if (o->nagents < KC_MIN_ACTORS) {
			snprintf(err, errlen, "--agent: at least %d agents", KC_MIN_ACTORS);
			return -EINVAL;
		}
		if (actors_given && o->actors != o->nagents) {
			snprintf(err, errlen, "--actors %d disagrees with %d --agent options (one actor per agent)",
				 o->actors, o->nagents);
			return -EINVAL;
		}
		if (o->nmounts) {
			snprintf(err, errlen, "--mount and --agent do not mix (each agent has its own --root)");
			return -EINVAL;
		}
		o->actors = o->nagents;
	}
	if (o->crash_cmd && o->power_loss_cmd) {
		snprintf(err, errlen,
			 "--crash-cmd and --power-loss-cmd: give one (a power-loss hook is a crash hook that also models the loss of unsynced storage)");
		return -EINVAL;
	}
	if (o->require_power_loss && !(o->checks & (1u << KC_CHK_FSYNC))) {
		snprintf(err, errlen, "--require-power-loss needs the fsync check");
		return -EINVAL;
	}
	if (o->cluster_dir && !o->stamp) {
		snprintf(err, errlen, "--cluster-dir only makes sense with --stamp");
		return -EINVAL;
	}
	if (o->perf)
		o->checks |= 1u << KC_CHK_PERF;
	if (o->enospc_limit)
		o->checks |= 1u << KC_CHK_ENOSPC;
	if ((o->checks & (1u << KC_CHK_ENOSPC)) && !o->enospc_limit) {
		snprintf(err, errlen,
			 "--checks enospc fills the volume: give --enospc SIZE, the most free space you allow it to fill");
		return -EINVAL;
	}
	if (o->stamp && checks_given && (o->checks & KC_DEFAULT_CHECKS) != KC_DEFAULT_CHECKS) {
		snprintf(err, errlen, "--stamp needs every check; drop --checks");
		return -EINVAL;
	}
	return 0;
}

int kc_opts_parse_verify(int argc, char **argv, kc_verify_opts *o, char *err, size_t errlen)
{
	memset(o, 0, sizeof(*o));
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		int bad = 0;
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			o->help = 1;
			return 0;
		}
		if (take(argc, argv, &i, "--cluster-dir", &v, err, errlen, &bad)) {
			if (bad)
				return -EINVAL;
			o->cluster_dir = v;
		} else if (a[0] == '-' && a[1] != '\0') {
			snprintf(err, errlen, "unknown option '%s' (see --help)", a);
			return -EINVAL;
		} else if (!o->url) {
			o->url = a;
		} else {
			snprintf(err, errlen, "unexpected argument '%s'", a);
			return -EINVAL;
		}
	}
	if (!o->url) {
		snprintf(err, errlen, "missing URL of the volume");
		return -EINVAL;
	}
	return 0;
}
