/* scratch.h — the scratch volume of a unit test: a fresh temporary
 * directory, the posix backend opened on it, and both gone after the test.
 * Every test program that needs a directory or a volume uses this one
 * fixture.  (It lives with the substrates because it opens a vfs: util/,
 * below them, may not.)
 *
 * The common case is the checked fixture, run in each test's process:
 *
 *	return ktest_main((struct ktest){ .suite = "x", .setup = scratch_setup,
 *					  .teardown = scratch_teardown }, KTEST_LIST(...));
 *	... scratch_vol.vfs, scratch_vol.dir inside the tests ...
 *
 * Harnesses with more to set up embed a `scratch` of their own and call
 * scratch_open / scratch_close (or scratch_make for a bare directory).
 * Header-only, for the same reason as ktest.h.
 */
#ifndef KAAS_SCRATCH_H
#define KAAS_SCRATCH_H

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "substrates/sub.h"

typedef struct scratch {
	char dir[256];	/* /tmp/kaas-test-<name>.XXXXXX */
	sub_vfs *vfs;	/* the posix backend on dir; NULL after scratch_make */
} scratch;

/* A fresh empty directory <base>/kaas-test-<name>.XXXXXX, no vfs. */
static inline void scratch_make_in(scratch *s, const char *base, const char *name)
{
	s->vfs = NULL;
	int n = snprintf(s->dir, sizeof(s->dir), "%s/kaas-test-%s.XXXXXX", base, name);
	ck_assert_msg(n > 0 && (size_t)n < sizeof(s->dir), "scratch: name too long: %s", name);
	ck_assert_msg(mkdtemp(s->dir) != NULL, "scratch: mkdtemp %s: %s", s->dir, strerror(errno));
}

static inline void scratch_make(scratch *s, const char *name)
{
	scratch_make_in(s, "/tmp", name);
}

/* The directory and the posix vfs on it. */
static inline void scratch_open_in(scratch *s, const char *base, const char *name)
{
	char err[256];
	scratch_make_in(s, base, name);
	ck_assert_msg(sub_open_url(s->dir, &s->vfs, err, sizeof(err)) == 0, "scratch: %s", err);
}

static inline void scratch_open(scratch *s, const char *name)
{
	scratch_open_in(s, "/tmp", name);
}

/* In memory where there is some (/dev/shm): for tests whose crashes the
 * fault backend simulates, real fsyncs only cost time. */
static inline void scratch_open_mem(scratch *s, const char *name)
{
	struct stat st;
	int shm = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0;
	scratch_open_in(s, shm ? "/dev/shm" : "/tmp", name);
}

/* A second volume in the subdirectory sub (created): "data", "cluster".
 * The caller destroys it before scratch_close. */
static inline sub_vfs *scratch_subvol(scratch *s, const char *sub)
{
	char path[512], err[256];
	snprintf(path, sizeof(path), "%s/%s", s->dir, sub);
	ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "scratch: mkdir %s: %s", path,
		      strerror(errno));
	sub_vfs *v = NULL;
	ck_assert_msg(sub_open_url(path, &v, err, sizeof(err)) == 0, "scratch: %s", err);
	return v;
}

static inline int scratch__rm(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (type == FTW_DP ? rmdir(path) : unlink(path)) == 0 || errno == ENOENT ? 0 : -1;
}

/* Removes a directory tree; 0 or -1 (errno set).  A missing tree is fine. */
static inline int scratch_remove_tree(const char *dir)
{
	struct stat st;
	if (lstat(dir, &st) != 0 && errno == ENOENT)
		return 0;
	return nftw(dir, scratch__rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Destroys the vfs (when open) and removes the directory with everything
 * the test left in it. */
static inline void scratch_close(scratch *s)
{
	if (s->vfs)
		sub_destroy(s->vfs);
	s->vfs = NULL;
	if (s->dir[0])
		ck_assert_msg(scratch_remove_tree(s->dir) == 0, "scratch: cannot remove %s: %s", s->dir,
			      strerror(errno));
	s->dir[0] = '\0';
}

/* The checked fixture: scratch_vol is the test's volume. */
static scratch scratch_vol __attribute__((unused));

static inline void scratch_setup(void)
{
	scratch_open(&scratch_vol, "unit");
}

static inline void scratch_teardown(void)
{
	scratch_close(&scratch_vol);
}

#endif
