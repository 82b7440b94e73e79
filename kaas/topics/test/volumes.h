/*
 * volumes.h — the scratch volumes of the topics tests: a fresh directory
 * under /tmp holding data/ and cluster/, each opened as a posix substrate
 * (data and cluster).  For checked fixtures: every test runs in its own
 * process, so these statics are per test.
 */
#ifndef KAAS_TOPICS_TEST_VOLUMES_H
#define KAAS_TOPICS_TEST_VOLUMES_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "substrates/sub.h"

static char tmpdir[256];
static sub_vfs *data, *cluster;

/* Opens (another handle on) tmpdir/sub, creating it. */
static inline void open_vfs(const char *sub, sub_vfs **v)
{
	char path[512], err[256];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, sub);
	mkdir(path, 0755);
	ck_assert_int_eq(sub_open_url(path, v, err, sizeof(err)), 0);
}

/* /tmp/kaas-test-<name>.XXXXXX with data and cluster open on it. */
static inline void volumes_open(const char *name)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/kaas-test-%s.XXXXXX", name);
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	open_vfs("data", &data);
	open_vfs("cluster", &cluster);
}

static inline void volumes_close(void)
{
	sub_destroy(data);
	sub_destroy(cluster);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	ck_assert_int_eq(system(cmd), 0);
}

#endif
