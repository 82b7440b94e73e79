/*
 * replay.c — fz_replay_main() (replay.h).
 */
#include "kaas/fuzz/replay.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int run_file(const char *path, fz_target_fn target)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	size_t cap = 4096, len = 0;
	uint8_t *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap * 2);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
			cap *= 2;
		}
	}
	fclose(f);
	if (!buf) {
		fprintf(stderr, "replay: %s: out of memory\n", path);
		return -1;
	}
	/* An exact-size copy: a read past the input is a heap overflow. */
	uint8_t *exact = malloc(len ? len : 1);
	if (exact)
		memcpy(exact, buf, len);
	free(buf);
	if (!exact)
		return -1;
	target(exact, len);
	free(exact);
	return 0;
}

static int cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_path(const char *path, fz_target_fn target, int *count)
{
	struct stat st;
	if (stat(path, &st)) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (run_file(path, target))
			return -1;
		(*count)++;
		return 0;
	}
	DIR *d = opendir(path);
	if (!d)
		return -1;
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **nn = realloc(names, cap * sizeof(*names));
			if (!nn) {
				rc = -1;
				break;
			}
			names = nn;
		}
		size_t l = strlen(path) + strlen(e->d_name) + 2;
		if (!(names[n] = malloc(l))) {
			rc = -1;
			break;
		}
		snprintf(names[n++], l, "%s/%s", path, e->d_name);
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp);
	for (size_t i = 0; i < n; i++) {
		if (!rc && run_file(names[i], target) == 0)
			(*count)++;
		else
			rc = -1;
		free(names[i]);
	}
	free(names);
	return rc;
}

int fz_replay_main(int argc, char **argv, const char *default_dir, fz_target_fn target)
{
	int count = 0, rc = 0;
	/* make unit T=<test>: the replay is the one test "corpus" of a target
	 * (77, as util/test/ktest.h answers, for any other name). */
	const char *only = getenv("CK_RUN_CASE");
	if (only && *only && strcmp(only, "corpus") != 0)
		return 77;
	if (argc > 1) {
		for (int i = 1; i < argc && !rc; i++)
			rc = run_path(argv[i], target, &count);
	} else {
		rc = run_path(default_dir, target, &count);
	}
	if (rc || count == 0) {
		fprintf(stderr, "replay: %s (%d inputs run)\n", rc ? "failed" : "no inputs found", count);
		return 1;
	}
	printf("replay: %d inputs, no sanitizer reports\n", count);
	return 0;
}
