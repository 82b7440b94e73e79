/*
 * resident.c — makes a file range resident in the page cache, on a worker,
 * before the event loop streams it with sendfile(2) (resident.h).
 *
 * The range (and as much again after it) is asked for with
 * posix_fadvise(WILLNEED), then sent to /dev/null with sendfile(2): that
 * goes through the page cache like the loop's own sendfile will, waiting
 * for what is missing and for reads already in flight (the kernel's
 * readahead marks pages present long before they are filled, so asking
 * which pages are cached — mincore(2), cachestat(2) — is not enough), and
 * it copies nothing to user space: a cached MiB costs some microseconds of
 * the worker's time.  Where
 * that is refused, pread(2) into a scratch buffer does the same with a copy.
 * A page evicted again between this call and the loop's sendfile is read
 * by the loop: rare, and only then can the loop still wait.
 */
#include "kaas/core/resident.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <unistd.h>

#define COPY_CHUNK (256u << 10)
#define SEND_MAX (1u << 30)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int devnull = -1;

static void init(void)
{
	devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
}

static int read_copy(int fd, uint64_t off, uint64_t len)
{
	size_t cap = len < COPY_CHUNK ? (size_t)len : COPY_CHUNK;
	char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	int rc = 0;
	while (len > 0) {
		ssize_t k = pread(fd, buf, len < cap ? (size_t)len : cap, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			rc = -errno;
			break;
		}
		if (k == 0)
			break; /* end of file: the loop reports the short segment */
		off += (uint64_t)k;
		len -= (uint64_t)k;
	}
	free(buf);
	return rc;
}

int kb_make_resident(int fd, uint64_t pos, uint64_t len)
{
	pthread_once(&once, init);
	/* The range's reads at once, in large requests, and as much again
	 * after it, which a consumer reading on asks for next: it arrives while
	 * the loop sends this range.  (The pass below alone would read as the
	 * kernel's readahead heuristics decide, and the loop's sendfile of each
	 * range after this pass looks to them like reading backwards.) */
	if (len > 0)
		(void)posix_fadvise(fd, (off_t)pos, (off_t)(2 * len), POSIX_FADV_WILLNEED);
	while (len > 0) {
		if (devnull < 0)
			return read_copy(fd, pos, len);
		off_t o = (off_t)pos;
		ssize_t k = sendfile(devnull, fd, &o, len < SEND_MAX ? (size_t)len : SEND_MAX);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EINVAL || errno == ENOSYS))
			return read_copy(fd, pos, len);
		if (k < 0)
			return -errno;
		if (k == 0)
			return 0;
		pos += (uint64_t)k;
		len -= (uint64_t)k;
	}
	return 0;
}
