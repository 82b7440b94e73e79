/* test_resident.c — kb_make_resident: after it returns, every page of the
 * range can be read without waiting for the disk (a read with RWF_NOWAIT
 * succeeds on each), whether nothing, part or all of the range was cached
 * before, and also while the kernel is still reading it in (pages present
 * in the cache but not yet filled); a range it cannot read is an error. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "kaas/core/resident.h"
#include "util/test/ktest.h"
#include "substrates/test/scratch.h"

#define FILE_MIB 8

static scratch vol;
static char path[300];
static long pg;

static void setup(void)
{
	/* Not /dev/shm: tmpfs pages cannot be dropped from memory. */
	scratch_make(&vol, "resident");
	snprintf(path, sizeof(path), "%s/seg", vol.dir);
	pg = sysconf(_SC_PAGESIZE);
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	char *buf = malloc(1 << 20);
	for (int i = 0; i < FILE_MIB; i++) {
		for (int k = 0; k < (1 << 20); k++)
			buf[k] = (char)(k * 31 + i);
		ck_assert_int_eq(write(fd, buf, 1 << 20), 1 << 20);
	}
	free(buf);
	ck_assert_int_eq(fsync(fd), 0); /* clean pages: they can be dropped */
	close(fd);
}

static void teardown(void)
{
	scratch_close(&vol);
}

/* Pages of [pos, pos + len) that a read without waiting for the disk
 * cannot get (the probe itself may start the kernel's readahead). */
static int not_ready(int fd, uint64_t pos, uint64_t len)
{
	int n = 0;
	char c;
	for (uint64_t o = pos & ~(uint64_t)(pg - 1); o < pos + len; o += (uint64_t)pg) {
		struct iovec v = {&c, 1};
		if (preadv2(fd, &v, 1, (off_t)o, RWF_NOWAIT) != 1)
			n++;
	}
	return n;
}

/* Drops the file's pages; returns how many are not in memory (mincore,
 * which starts no reads). */
static int drop(int fd)
{
	size_t len = (size_t)FILE_MIB << 20;
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	unsigned char *vec = malloc(len / (size_t)pg);
	void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(m, MAP_FAILED);
	ck_assert_int_eq(mincore(m, len, vec), 0);
	munmap(m, len);
	int n = 0;
	for (size_t i = 0; i < len / (size_t)pg; i++)
		n += !(vec[i] & 1);
	free(vec);
	return n;
}

START_TEST(ranges_become_readable_without_waiting)
{
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	int pages = (FILE_MIB << 20) / (int)pg;
	uint64_t pos = (1u << 20) + 100, len = (3u << 20) - 50;

	/* Nothing cached: an unaligned range in the middle. */
	ck_assert_int_gt(drop(fd), pages / 2);
	ck_assert_int_eq(kb_make_resident(fd, pos, len), 0);
	ck_assert_int_eq(not_ready(fd, pos, len), 0);

	/* Part of it cached: two islands inside the range. */
	ck_assert_int_gt(drop(fd), pages / 2);
	char buf[8192];
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), (off_t)(pos + (1u << 20))), (ssize_t)sizeof(buf));
	ck_assert_int_eq(pread(fd, buf, 100, (off_t)(pos + len - 100)), 100);
	ck_assert_int_eq(kb_make_resident(fd, pos, len), 0);
	ck_assert_int_eq(not_ready(fd, pos, len), 0);

	/* Being read in: the kernel was asked for it and is still at it. */
	ck_assert_int_gt(drop(fd), pages / 2);
	ck_assert_int_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED), 0);
	ck_assert_int_eq(kb_make_resident(fd, pos, len), 0);
	ck_assert_int_eq(not_ready(fd, pos, len), 0);

	/* All of it cached; a page-sized and a one-byte range; nothing. */
	ck_assert_int_eq(kb_make_resident(fd, pos, len), 0);
	ck_assert_int_eq(not_ready(fd, pos, len), 0);
	ck_assert_int_gt(drop(fd), pages / 2);
	ck_assert_int_eq(kb_make_resident(fd, 5u << 20, (uint64_t)pg), 0);
	ck_assert_int_eq(kb_make_resident(fd, (6u << 20) + 7, 1), 0);
	ck_assert_int_eq(not_ready(fd, 5u << 20, (uint64_t)pg), 0);
	ck_assert_int_eq(not_ready(fd, (6u << 20) + 7, 1), 0);
	ck_assert_int_eq(kb_make_resident(fd, 0, 0), 0);
	close(fd);

	/* A descriptor that cannot be read: the error, not a silent success. */
	int wfd = open(path, O_WRONLY);
	ck_assert_int_ge(wfd, 0);
	ck_assert_int_lt(kb_make_resident(wfd, 0, 1u << 20), 0);
	close(wfd);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "resident", .tcase = "resident", .timeout = 60,
					  .setup = setup, .teardown = teardown },
			  KTEST_LIST(ranges_become_readable_without_waiting));
}
