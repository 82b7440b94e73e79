/*
 * device.c — `kaas-bench device`: the device's own write+fsync limit, the
 * yardstick for the storage engine's append numbers.
 *
 * The minimal loop a storage engine cannot beat at the same write size and
 * concurrency: threads append `size`-byte writes to fresh files (thread i
 * writes file i % files, at an offset reserved with an atomic add) and call
 * fsync after every write through the raw system call, as the posix
 * substrate does.  `--sync-every K` syncs after every K-th write only.
 */
#include "ci/bench/bench.h"
#include "ci/bench/main.h"
#include "ci/bench/stor.h"

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

struct dev_set {
	int nfiles;
	dev_file *files;
	size_t bufsize;
	uint8_t *buf;
};

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
			if (st_fsync_delay_us > 0)
				usleep((useconds_t)st_fsync_delay_us);
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

int dev_open(const char *dir, int nfiles, dev_set **out)
{
	static _Atomic int seq;
	dev_set *s = calloc(1, sizeof(*s));
	if (!s || !(s->files = calloc((size_t)nfiles, sizeof(*s->files)))) {
		free(s);
		return -ENOMEM;
	}
	s->nfiles = nfiles;
	for (int i = 0; i < nfiles; i++)
		s->files[i].fd = -1;
	int set = atomic_fetch_add(&seq, 1), rc = 0;
	for (int i = 0; i < nfiles && rc == 0; i++) {
		dev_file *f = &s->files[i];
		snprintf(f->path, sizeof(f->path), "%s/device-%d-%d-%d.dat", dir, (int)getpid(), set, i);
		f->fd = open(f->path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		if (f->fd < 0) {
			rc = -errno;
			fprintf(stderr, "kaas-bench: %s: %s\n", f->path, strerror(errno));
		}
	}
	/* The new names are made durable first, as a segment roll does, so
	 * the writes time data syncs only. */
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	if (dfd >= 0) {
		syscall(SYS_fsync, dfd);
		close(dfd);
	}
	if (rc) {
		dev_close(s);
		return rc;
	}
	*out = s;
	return 0;
}

void dev_close(dev_set *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->nfiles; i++) {
		if (s->files[i].fd >= 0) {
			close(s->files[i].fd);
			unlink(s->files[i].path);
		}
	}
	free(s->files);
	free(s->buf);
	free(s);
}

int dev_run(dev_set *s, int threads, size_t size, int sync_every, double secs, bn_lat *lat, st_res *res)
{
	memset(res, 0, sizeof(*res));
	if (s->bufsize < size) {
		uint8_t *nb = realloc(s->buf, size);
		if (!nb)
			return -ENOMEM;
		s->buf = nb;
		s->bufsize = size;
		bn_fill_random(s->buf, size, 42);
	}
	dev_thread *th = calloc((size_t)threads, sizeof(*th));
	if (!th)
		return -ENOMEM;
	int64_t t0 = bn_now_ns();
	int started = 0, rc = 0;
	for (int i = 0; i < threads; i++) {
		th[i].f = &s->files[i % s->nfiles];
		th[i].size = size;
		th[i].sync_every = sync_every;
		th[i].deadline_ns = t0 + (int64_t)(secs * 1e9);
		th[i].buf = s->buf;
		if (pthread_create(&th[i].th, NULL, dev_main, &th[i])) {
			rc = -EAGAIN;
			break;
		}
		started++;
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i].th, NULL);
	res->ns = bn_now_ns() - t0;
	for (int i = 0; i < started; i++) {
		res->ops += th[i].ops;
		res->bytes += th[i].bytes;
		res->fsyncs += th[i].syncs;
		if (lat)
			bn_lat_merge(lat, &th[i].lat);
		if (th[i].err && rc == 0) {
			rc = -th[i].err;
			fprintf(stderr, "kaas-bench: device write/fsync: %s\n", strerror(th[i].err));
		}
		bn_lat_free(&th[i].lat);
	}
	free(th);
	return rc;
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
	dev_set *s = NULL;
	bn_lat lat = BN_LAT_INIT;
	st_res r;
	int rc = 1;
	if (dev_open(dir, nfiles, &s) == 0 && dev_run(s, nthreads, size, sync_every, secs, &lat, &r) == 0) {
		double el = (double)r.ns / 1e9;
		json_t *j = json_pack("{s:s,s:s,s:i,s:i,s:I,s:i,s:f,s:I,s:I,s:I,s:f,s:f,s:o}", "kind", "device",
				      "label", label, "threads", nthreads, "files", nfiles, "size", (json_int_t)size,
				      "sync_every", sync_every, "secs", el, "ops", (json_int_t)r.ops, "bytes",
				      (json_int_t)r.bytes, "fsyncs", (json_int_t)r.fsyncs, "mbps", st_mbps(&r),
				      "ops_per_s", (double)r.ops / el, "lat", bn_lat_json(&lat));
		rc = bn_emit(j) ? 1 : 0;
	}
	bn_lat_free(&lat);
	dev_close(s);
	return rc;
}
