/*
 * device.c — `kaas-bench device`: the device's own write+fsync limit, the
 * yardstick for the storage engine's append numbers.
 *
 * The minimal loop a storage engine cannot beat at the same write size and
 * concurrency: `threads` threads append `size`-byte writes to `files` fresh
 * files (thread i writes file i % files, at an offset reserved with an
 * atomic add) and call fsync after every write through the raw system call,
 * as the posix substrate does.  `--sync-every K` syncs after every K-th
 * write only: with a large size that measures the device's sequential
 * bandwidth when fsyncs are amortised (the "stream" ceiling).
 */
#include "bench.h"
#include "main.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct dev_file {
	int fd;
	_Atomic uint64_t off;
	char path[4096];
} dev_file;

typedef struct dev_thread {
	pthread_t th;
	dev_file *f;
	size_t size;
	int sync_every;
	int64_t deadline_ns;
	const uint8_t *buf;
	uint64_t ops, bytes, syncs;
	int err;
	bn_lat lat;
} dev_thread;

static void *dev_main(void *arg)
{
	dev_thread *t = arg;
	int since = 0;
	while (bn_now_ns() < t->deadline_ns) {
		uint64_t pos = atomic_fetch_add(&t->f->off, t->size);
		int64_t t0 = bn_now_ns();
		size_t done = 0;
		while (done < t->size) {
			ssize_t k = pwrite(t->f->fd, t->buf + done, t->size - done, (off_t)(pos + done));
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				t->err = k < 0 ? errno : EIO;
				return NULL;
			}
			done += (size_t)k;
		}
		if (++since >= t->sync_every) {
			since = 0;
			if (syscall(SYS_fsync, t->f->fd) != 0) {
				t->err = errno;
				return NULL;
			}
			t->syncs++;
		}
		bn_lat_add(&t->lat, bn_now_ns() - t0);
		t->ops++;
		t->bytes += t->size;
	}
	return NULL;
}

int bench_device(bn_opts *o)
{
	const char *dir = bn_opt_str(o, "dir", NULL);
	int nthreads = (int)bn_opt_int(o, "threads", 1);
	int nfiles = (int)bn_opt_int(o, "files", 1);
	size_t size = (size_t)bn_opt_int(o, "size", 100 * 1024);
	int sync_every = (int)bn_opt_int(o, "sync-every", 1);
	double secs = bn_opt_double(o, "secs", 2.0);
	const char *label = bn_opt_str(o, "label", "device");
	if (bn_opts_check(o, "kaas-bench device"))
		return 2;
	if (!dir || nthreads < 1 || nfiles < 1 || size < 1 || sync_every < 1 || secs <= 0) {
		fprintf(stderr, "kaas-bench device: --dir DIR [--threads N] [--files M] [--size B] "
				"[--sync-every K] [--secs S]\n");
		return 2;
	}
	int rc = 1;
	dev_file *files = calloc((size_t)nfiles, sizeof(*files));
	dev_thread *th = calloc((size_t)nthreads, sizeof(*th));
	uint8_t *buf = malloc(size);
	if (!files || !th || !buf)
		goto out;
	bn_fill_random(buf, size, 42);
	for (int i = 0; i < nfiles; i++)
		files[i].fd = -1;
	for (int i = 0; i < nfiles; i++) {
		snprintf(files[i].path, sizeof(files[i].path), "%s/device-%d.dat", dir, i);
		files[i].fd = open(files[i].path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (files[i].fd < 0) {
			fprintf(stderr, "kaas-bench device: %s: %s\n", files[i].path, strerror(errno));
			goto out;
		}
	}
	/* The new files' directory entries are made durable first, as a
	 * segment roll does, so the loop times data syncs only. */
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	if (dfd >= 0) {
		syscall(SYS_fsync, dfd);
		close(dfd);
	}
	int64_t t0 = bn_now_ns();
	int64_t deadline = t0 + (int64_t)(secs * 1e9);
	int started = 0;
	for (int i = 0; i < nthreads; i++) {
		th[i].f = &files[i % nfiles];
		th[i].size = size;
		th[i].sync_every = sync_every;
		th[i].deadline_ns = deadline;
		th[i].buf = buf;
		if (pthread_create(&th[i].th, NULL, dev_main, &th[i]))
			break;
		started++;
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i].th, NULL);
	int64_t elapsed = bn_now_ns() - t0;
	uint64_t ops = 0, bytes = 0, syncs = 0;
	bn_lat all = BN_LAT_INIT;
	int err = started == nthreads ? 0 : EAGAIN;
	for (int i = 0; i < started; i++) {
		ops += th[i].ops;
		bytes += th[i].bytes;
		syncs += th[i].syncs;
		bn_lat_merge(&all, &th[i].lat);
		if (th[i].err)
			err = th[i].err;
	}
	if (err) {
		fprintf(stderr, "kaas-bench device: %s\n", strerror(err));
		bn_lat_free(&all);
		goto out;
	}
	json_t *j = json_pack("{s:s,s:s,s:i,s:i,s:I,s:i,s:f,s:I,s:I,s:I,s:f,s:f,s:o}", "kind", "device",
			      "label", label, "threads", nthreads, "files", nfiles, "size", (json_int_t)size,
			      "sync_every", sync_every, "secs", (double)elapsed / 1e9, "ops", (json_int_t)ops,
			      "bytes", (json_int_t)bytes, "fsyncs", (json_int_t)syncs, "mbps",
			      bn_mbps(bytes, elapsed), "ops_per_s", (double)ops / ((double)elapsed / 1e9),
			      "lat", bn_lat_json(&all));
	bn_lat_free(&all);
	rc = bn_emit(j) ? 1 : 0;
out:
	for (int i = 0; files && i < nfiles; i++) {
		if (files[i].fd >= 0) {
			close(files[i].fd);
			unlink(files[i].path);
		}
	}
	for (int i = 0; th && i < nthreads; i++)
		bn_lat_free(&th[i].lat);
	free(files);
	free(th);
	free(buf);
	return rc;
}
