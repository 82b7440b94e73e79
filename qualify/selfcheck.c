/*
 * selfcheck.c — the broker's start-up probe of the two atomic primitives.
 *
 * Not a qualification (one client, one host, a few operations): it catches a
 * volume that changed under a stamped cluster, e.g. a remount of a different
 * export at the same path, or a read-only or full filesystem, in well under a
 * second.  Two threads race O_CREAT|O_EXCL on one name (exactly one must win,
 * the other must get EEXIST), a file is renamed over another and read back,
 * and everything is removed again.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "qualify/stamp.h"

typedef struct racer {
	sub_vfs *v;
	const char *path;
	pthread_barrier_t *bar;
	int rc;
} racer;

static void *race(void *arg)
{
	racer *r = arg;
	sub_file *f = NULL;
	pthread_barrier_wait(r->bar);
	r->rc = sub_open(r->v, r->path, O_WRONLY | O_CREAT | O_EXCL, 0644, &f);
	if (r->rc == 0)
		r->rc = sub_close(f);
	return NULL;
}

static int write_plain(sub_vfs *v, const char *path, const char *s)
{
	sub_file *f = NULL;
	int rc = sub_open(v, path, O_WRONLY | O_CREAT | O_EXCL, 0644, &f);
	if (rc)
		return rc;
	rc = sub_pwrite_full(f, s, strlen(s), 0);
	if (!rc)
		rc = sub_fsync(f);
	int cr = sub_close(f);
	return rc ? rc : cr;
}

int kq_selfcheck(sub_vfs *v, const char *scratch_dir, char *why, size_t whylen)
{
	uint64_t rnd = 0;
	char leaf[64], dir[SUB_PATH_MAX], claim[SUB_PATH_MAX], a[SUB_PATH_MAX], b[SUB_PATH_MAX];
	if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		snprintf(why, whylen, "self-check: no randomness");
		return -EIO;
	}
	snprintf(leaf, sizeof(leaf), "~kaas-selfcheck-%016llx", (unsigned long long)rnd);
	int rc = sub_join(dir, sizeof(dir), scratch_dir, leaf);
	if (!rc)
		rc = sub_join(claim, sizeof(claim), dir, "claim");
	if (!rc)
		rc = sub_join(a, sizeof(a), dir, "target");
	if (!rc)
		rc = sub_join(b, sizeof(b), dir, "next");
	if (rc) {
		snprintf(why, whylen, "self-check: path too long");
		return rc;
	}
	if ((rc = sub_mkdir(v, dir, 0755))) {
		snprintf(why, whylen, "self-check: mkdir %s: %s", dir, sub_strerror(rc));
		return rc;
	}

	pthread_barrier_t bar;
	pthread_barrier_init(&bar, NULL, 2);
	racer r[2] = {{v, claim, &bar, 0}, {v, claim, &bar, 0}};
	pthread_t t[2];
	int started = 0;
	for (; started < 2; started++)
		if (pthread_create(&t[started], NULL, race, &r[started]) != 0)
			break;
	if (started < 2) {
		/* Stand in for the missing thread so the barrier opens. */
		for (int i = started; i < 2; i++)
			race(&r[i]);
	}
	for (int i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&bar);
	int wins = (r[0].rc == 0) + (r[1].rc == 0);
	int loser = r[0].rc == 0 ? r[1].rc : r[0].rc;
	if (wins != 1 || loser != -EEXIST) {
		snprintf(why, whylen, "self-check: O_CREAT|O_EXCL race had %d winners, loser got %s", wins,
			 sub_strerror(loser));
		rc = -EPROTO;
		goto out;
	}

	char *buf = NULL;
	size_t len = 0;
	sub_stat st;
	if ((rc = write_plain(v, a, "old")) || (rc = write_plain(v, b, "new"))) {
		snprintf(why, whylen, "self-check: write in %s: %s", dir, sub_strerror(rc));
		goto out;
	}
	if ((rc = sub_rename(v, b, a))) {
		snprintf(why, whylen, "self-check: rename over an existing file: %s", sub_strerror(rc));
		goto out;
	}
	rc = sub_read_file(v, a, 64, &buf, &len);
	if (rc || len != 3 || memcmp(buf, "new", 3) != 0) {
		snprintf(why, whylen, "self-check: after rename the target reads %s",
			 rc ? sub_strerror(rc) : "the old or mixed content");
		rc = rc ? rc : -EPROTO;
		goto out_free;
	}
	if (sub_stat_path(v, b, &st) != -ENOENT) {
		snprintf(why, whylen, "self-check: the renamed name still exists");
		rc = -EPROTO;
		goto out_free;
	}
	rc = 0;
out_free:
	free(buf);
out:;
	int cr = sub_remove_tree(v, dir);
	if (!rc && cr) {
		snprintf(why, whylen, "self-check: cannot remove %s: %s", dir, sub_strerror(cr));
		rc = cr;
	}
	return rc;
}
