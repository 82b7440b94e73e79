/*
 * main.c — kaas-bench, the storage and network microbenchmarks behind
 * `make bench` (docs/performance.md):
 *
 *   kaas-bench device --dir DIR ...   raw pwrite+fsync loop (the device limit)
 *   kaas-bench append --dir URL ...   storage engine append + group commit
 *   kaas-bench compare --dir DIR ...  device and engine in alternating slices
 *   kaas-bench read   --dir URL ...   read plans vs raw pread/sendfile
 *   kaas-bench net ...                loopback TCP throughput and round trip
 *
 * Each prints one JSON object per measurement on stdout.
 */
#include <stdio.h>
#include <string.h>

#include "ci/bench/bench.h"
#include "ci/bench/main.h"

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(bn_opts *);
	} cmds[] = {
		{"device", bench_device},
		{"append", bench_append},
		{"compare", bench_compare},
		{"read", bench_read},
		{"net", bench_net},
	};
	if (argc >= 2) {
		for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
			if (strcmp(argv[1], cmds[i].name) == 0) {
				bn_opts o;
				if (bn_opts_init(&o, argc - 2, argv + 2))
					return 1;
				int rc = cmds[i].fn(&o);
				bn_opts_free(&o);
				return rc;
			}
		}
	}
	fprintf(stderr, "usage: kaas-bench device|append|compare|read|net [--option value ...]\n"
			"(see ci/bench/*.c and docs/performance.md)\n");
	return 2;
}
