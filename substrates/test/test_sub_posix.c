/*
 * test_sub_posix.c — the posix backend and the shared helpers (write_atomic,
 * create_excl, mkdirs, remove_tree, list, URL dispatch, path checks).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "substrates/sub.h"
#include "substrates/test/scratch.h"
#include "util/test/ktest.h"

static scratch vol;
static sub_vfs *vfs; /* vol.vfs */

/* Defined in the program, these replace the C library's for every caller in
 * the process, exactly as an LD_PRELOADed eatmydata does.  The posix backend
 * must never reach them: it syncs through the raw system call. */
static int libc_syncs;
int fsync(int fd)
{
	(void)fd;
	libc_syncs++;
	return 0;
}
int fdatasync(int fd)
{
	(void)fd;
	libc_syncs++;
	return 0;
}

static void setup(void)
{
	scratch_open(&vol, "sub");
	vfs = vol.vfs;
}

static void teardown(void)
{
	scratch_close(&vol);
	vfs = NULL;
}

static int count_entries(const char *dir)
{
	char **names;
	size_t n;
	ck_assert_int_eq(sub_list(vfs, dir, &names, &n), 0);
	sub_names_free(names, n);
	return (int)n;
}

START_TEST(write_atomic_replaces_and_leaves_no_temp)
{
	char *buf;
	size_t len;
	ck_assert_int_eq(sub_mkdirs(vfs, "a/b/c", 0755), 0);
	ck_assert_int_eq(sub_write_atomic(vfs, "a/b/c/m.json", "first", 5), 0);
	ck_assert_int_eq(sub_write_atomic(vfs, "a/b/c/m.json", "second!", 7), 0);
	ck_assert_int_eq(sub_read_file(vfs, "a/b/c/m.json", 1024, &buf, &len), 0);
	ck_assert_uint_eq(len, 7);
	ck_assert_str_eq(buf, "second!");
	free(buf);
	ck_assert_int_eq(count_entries("a/b/c"), 1);
	/* Into a missing directory: error, nothing created. */
	ck_assert_int_eq(sub_write_atomic(vfs, "nodir/x", "y", 1), -ENOENT);
	ck_assert_int_eq(count_entries(""), 1);
}
END_TEST

START_TEST(fsync_bypasses_an_interposed_libc)
{
	/* The interposition is in force: a direct call lands in it. */
	ck_assert_int_eq(fsync(-1), 0);
	ck_assert_int_eq(libc_syncs, 1);
	libc_syncs = 0;
	sub_file *f = NULL;
	ck_assert_int_eq(sub_open(vfs, "f", O_CREAT | O_RDWR, 0644, &f), 0);
	ck_assert_int_eq(sub_pwrite_full(f, "x", 1, 0), 0);
	ck_assert_int_eq(sub_fsync(f), 0);
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_fsync_dir(vfs, ""), 0);
	ck_assert_int_eq(sub_write_atomic(vfs, "m", "1", 1), 0);
	ck_assert_int_eq(sub_create_excl(vfs, "c", "1", 1), 0);
	ck_assert_int_eq(libc_syncs, 0);
	/* The raw call is real: it reports a bad descriptor, the stub would not. */
	ck_assert_int_eq(sub_open(vfs, "f", O_RDONLY, 0, &f), 0);
	close(sub_native_fd(f));
	ck_assert_int_eq(sub_fsync(f), -EBADF);
	sub_close(f);
	ck_assert_int_eq(libc_syncs, 0);
}
END_TEST

START_TEST(create_excl_has_one_winner)
{
	ck_assert_int_eq(sub_create_excl(vfs, "claim", "me", 2), 0);
	ck_assert_int_eq(sub_create_excl(vfs, "claim", "you", 3), -EEXIST);
	char *buf;
	size_t len;
	ck_assert_int_eq(sub_read_file(vfs, "claim", 16, &buf, &len), 0);
	ck_assert_str_eq(buf, "me");
	free(buf);
}
END_TEST

START_TEST(read_file_enforces_limit)
{
	char big[5000];
	memset(big, 'x', sizeof(big));
	char *buf = NULL;
	size_t len;
	ck_assert_int_eq(sub_write_atomic(vfs, "big", big, sizeof(big)), 0);
	ck_assert_int_eq(sub_read_file(vfs, "big", 4999, &buf, &len), -EFBIG);
	ck_assert_int_eq(sub_read_file(vfs, "big", 5000, &buf, &len), 0);
	ck_assert_uint_eq(len, 5000);
	free(buf);
}
END_TEST

START_TEST(remove_tree_is_idempotent)
{
	ck_assert_int_eq(sub_mkdirs(vfs, "t/p0", 0755), 0);
	ck_assert_int_eq(sub_mkdirs(vfs, "t/p1/deep", 0755), 0);
	ck_assert_int_eq(sub_write_atomic(vfs, "t/p0/seg", "1", 1), 0);
	ck_assert_int_eq(sub_write_atomic(vfs, "t/p1/deep/seg", "2", 1), 0);
	ck_assert_int_eq(sub_remove_tree(vfs, "t"), 0);
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(vfs, "t", &st), -ENOENT);
	ck_assert_int_eq(sub_remove_tree(vfs, "t"), 0);
}
END_TEST

START_TEST(paths_cannot_escape_root)
{
	sub_file *f = NULL;
	ck_assert_int_eq(sub_path_check("../x"), -EINVAL);
	ck_assert_int_eq(sub_path_check("a/../../x"), -EINVAL);
	ck_assert_int_eq(sub_path_check("/etc/passwd"), -EINVAL);
	ck_assert_int_eq(sub_path_check("a/..b/c"), 0);
	ck_assert_int_eq(sub_open(vfs, "../escape", O_CREAT | O_WRONLY, 0644, &f), -EINVAL);
	ck_assert_int_eq(sub_mkdir(vfs, "../escape", 0755), -EINVAL);
	ck_assert_int_eq(sub_rename(vfs, "x", "../y"), -EINVAL);
}
END_TEST

START_TEST(url_dispatch_and_errors)
{
	char err[256] = "";
	sub_vfs *v = NULL;
	ck_assert_int_eq(sub_open_url("gopher://x/y", &v, err, sizeof(err)), -EPROTONOSUPPORT);
	ck_assert_ptr_nonnull(strstr(err, "scheme"));
	ck_assert_int_lt(sub_open_url("/nonexistent/kaas/path", &v, err, sizeof(err)), 0);
	ck_assert_int_eq(sub_open_url("/etc/hostname", &v, err, sizeof(err)), -ENOTDIR);
	char url[300];
	snprintf(url, sizeof(url), "posix:%s", vol.dir);
	ck_assert_int_eq(sub_open_url(url, &v, err, sizeof(err)), 0);
	ck_assert_str_eq(v->m->name, "posix");
	sub_destroy(v);
}
END_TEST

START_TEST(io_and_identity)
{
	sub_file *f = NULL;
	sub_stat st;
	char buf[16];
	ck_assert_int_eq(sub_open(vfs, "f", O_CREAT | O_RDWR | O_EXCL, 0644, &f), 0);
	ck_assert_int_eq(sub_pwrite_full(f, "hello world", 11, 0), 0);
	ck_assert_int_eq(sub_fsync(f), 0);
	ck_assert_int_eq(sub_pread_full(f, buf, 5, 6), 0);
	ck_assert_int_eq(memcmp(buf, "world", 5), 0);
	ck_assert_int_eq(sub_pread_full(f, buf, 5, 10), -EIO); /* past EOF */
	ck_assert_int_eq(sub_fstat(f, &st), 0);
	ck_assert_uint_eq(st.size, 11);
	ck_assert_int_ge(sub_native_fd(f), 0);
	ck_assert_int_eq(sub_ftruncate(f, 3), 0);
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_stat_path(vfs, "f", &st), 0);
	ck_assert_uint_eq(st.size, 3);
	ck_assert_int_eq(sub_rename(vfs, "f", "g"), 0);
	ck_assert_int_eq(sub_stat_path(vfs, "f", &st), -ENOENT);
	ck_assert_int_eq(sub_fsync_dir(vfs, ""), 0);
	sub_identity id;
	ck_assert_int_eq(sub_identity_of(vfs, &id), 0);
	ck_assert_str_eq(id.backend, "posix");
	ck_assert_uint_ne(id.fs_magic, 0);
	ck_assert_int_gt(strlen(id.fstype), 0);
	ck_assert_int_gt(strlen(id.mountpoint), 0);
	sub_fsinfo sv;
	ck_assert_int_eq(sub_statvfs(vfs, "", &sv), 0);
	ck_assert_uint_gt(sv.blocks, 0);
	ck_assert_int_eq(sub_unlink(vfs, "g"), 0);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "substrates-posix", .tcase = "posix",
					  .setup = setup, .teardown = teardown },
			  KTEST_LIST(write_atomic_replaces_and_leaves_no_temp,
				     fsync_bypasses_an_interposed_libc, create_excl_has_one_winner,
				     read_file_enforces_limit, remove_tree_is_idempotent,
				     paths_cannot_escape_root, url_dispatch_and_errors, io_and_identity));
}
