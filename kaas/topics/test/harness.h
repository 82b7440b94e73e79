/*
 * harness.h — the scratch volumes of the topics tests: a fresh directory
 * under /tmp holding data/ and cluster/, each opened as a posix substrate
 * (data and cluster).  For checked fixtures: every test runs in its own
 * process, so these statics are per test.
 */
#ifndef KAAS_TOPICS_TEST_HARNESS_H
#define KAAS_TOPICS_TEST_HARNESS_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "substrates/sub.h"
#include "substrates/test/scratch.h"

static scratch vol;          /* substrates/test/scratch.h */
#define tmpdir (vol.dir) /* the tests' name for its directory */
static sub_vfs *data, *cluster;

/* Opens (another handle on) tmpdir/sub, creating it. */
static inline void open_vfs(const char *sub, sub_vfs **v)
{
	*v = scratch_subvol(&vol, sub);
}

/* /tmp/kaas-test-<name>.XXXXXX with data and cluster open on it. */
static inline void volumes_open(const char *name)
{
	scratch_make(&vol, name);
	open_vfs("data", &data);
	open_vfs("cluster", &cluster);
}

static inline void volumes_close(void)
{
	sub_destroy(data);
	sub_destroy(cluster);
	scratch_close(&vol);
}

#endif
