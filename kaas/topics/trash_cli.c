/*
 * trash_cli.c — `kaas trash list|empty`: what kaas moved aside on the data
 * volume, and emptying the trash by hand (before its retention is over, or
 * when the retention is -1).  Quarantined and kept directories are listed,
 * never removed: deciding about them is an operator's job, by hand.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kaas/topics/trash.h"
#include "util/clock.h"

static void usage(FILE *out)
{
	fprintf(out, "usage: kaas trash list --data DIR\n"
		     "       kaas trash empty --data DIR [--older-than DURATION]\n"
		     "\n"
		     "list   every directory kaas moved aside under DATA: trash (deleted or reclaimed\n"
		     "       topics, removed after kaas.trash.retention.ms), quarantine and kept\n"
		     "       directories (never removed by kaas)\n"
		     "empty  remove trash entries now; with --older-than only those moved aside at\n"
		     "       least that long ago (DURATION: a number with ms, s, m, h or d; a bare\n"
		     "       number is milliseconds)\n"
		     "--data DIR is the broker's data volume (a path or substrate URL, as for kaas).\n"
		     "Safe while brokers run: the trash belongs to no topic.\n");
}

/* "90s", "24h", "1500" (ms).  -1 when malformed. */
static int64_t parse_duration(const char *s)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || v < 0)
		return -1;
	int64_t mul = 1;
	if (strcmp(end, "") == 0 || strcmp(end, "ms") == 0)
		mul = 1;
	else if (strcmp(end, "s") == 0)
		mul = 1000;
	else if (strcmp(end, "m") == 0)
		mul = 60000;
	else if (strcmp(end, "h") == 0)
		mul = 3600000;
	else if (strcmp(end, "d") == 0)
		mul = 86400000;
	else
		return -1;
	if (v > INT64_MAX / mul)
		return -1;
	return (int64_t)v * mul;
}

static const char *kind_name(int k)
{
	return k == KT_QUARANTINE ? "quarantine" : k == KT_KEPT ? "kept" : "trash";
}

static int do_list(sub_vfs *data)
{
	kt_trash_entry *v = NULL;
	size_t n = 0;
	int rc = kt_trash_list(data, &v, &n);
	if (rc) {
		fprintf(stderr, "kaas trash: listing the data volume: %s\n", sub_strerror(rc));
		return 1;
	}
	int64_t now = ku_wall_ms();
	for (size_t i = 0; i < n; i++) {
		char when[32] = "unknown", age[32] = "unknown";
		if (v[i].moved_ms >= 0) {
			time_t t = (time_t)(v[i].moved_ms / 1000);
			struct tm tm;
			if (gmtime_r(&t, &tm))
				strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
			snprintf(age, sizeof(age), "%" PRId64 "s", (now - v[i].moved_ms) / 1000);
		}
		printf("%s\t%s\ttopic=%s\tid=%s\tmoved=%s\tage=%s\treason=%s\n", kind_name(v[i].kind), v[i].dir,
		       v[i].topic[0] ? v[i].topic : "?", v[i].topic_id[0] ? v[i].topic_id : "?", when, age,
		       v[i].reason[0] ? v[i].reason : "?");
	}
	free(v);
	return 0;
}

int kt_trash_main(int argc, char **argv)
{
	enum { O_DATA = 256, O_OLDER, O_HELP };
	static const struct option opts[] = {
		{"data", required_argument, 0, O_DATA},
		{"older-than", required_argument, 0, O_OLDER},
		{"help", no_argument, 0, O_HELP},
		{0, 0, 0, 0},
	};
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "list") != 0 && strcmp(cmd, "empty") != 0) {
		fprintf(stderr, "kaas trash: unknown command '%s' (list or empty)\n", cmd);
		return 2;
	}
	const char *data_url = getenv("KAAS_DATA");
	int64_t older = -1;
	int c;
	/* The options after the command; optind 0 resets getopt completely. */
	int ac = argc - 1;
	char **av = argv + 1;
	optind = 0;
	opterr = 0;
	while ((c = getopt_long(ac, av, "", opts, NULL)) != -1) {
		switch (c) {
		case O_DATA:
			data_url = optarg;
			break;
		case O_OLDER:
			if (strcmp(cmd, "empty") != 0) {
				fprintf(stderr, "kaas trash: --older-than applies to empty only\n");
				return 2;
			}
			older = parse_duration(optarg);
			if (older < 0) {
				fprintf(stderr, "kaas trash: --older-than %s: not a duration (e.g. 3600s, 24h, 7d)\n",
					optarg);
				return 2;
			}
			break;
		case O_HELP:
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "kaas trash: bad option %s (see kaas trash --help)\n", av[optind - 1]);
			return 2;
		}
	}
	if (optind < ac) {
		fprintf(stderr, "kaas trash: unexpected argument '%s'\n", av[optind]);
		return 2;
	}
	if (!data_url || !*data_url) {
		fprintf(stderr, "kaas trash: --data is required (or KAAS_DATA)\n");
		return 2;
	}
	char err[512];
	sub_vfs *data = NULL;
	int rc = sub_open_url(data_url, &data, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "kaas trash: --data %s: %s\n", data_url, err);
		return 2;
	}
	int code;
	if (strcmp(cmd, "list") == 0) {
		code = do_list(data);
	} else {
		size_t removed = 0;
		rc = kt_trash_empty(data, older, ku_wall_ms(), &removed);
		printf("removed %zu trash entr%s\n", removed, removed == 1 ? "y" : "ies");
		if (rc)
			fprintf(stderr, "kaas trash: some entries could not be removed: %s (run it again)\n",
				sub_strerror(rc));
		code = rc ? 1 : 0;
	}
	sub_destroy(data);
	return code;
}
