/*
 * read.c — `kaas-bench read`: Fetch-style sequential reads through the
 * storage engine's read plans against raw reads of the same segment file.
 *
 * One partition is filled with `mib` MiB of batches (appended and flushed
 * through the engine).  A consumer catching up from offset 0 asks for
 * `max-bytes` at a time (librdkafka's max.partition.fetch.bytes is 1 MiB):
 *
 *   plan           ks_partition_read + release only: the planning cost
 *   plan_pread     plan, then pread every range into a buffer
 *   raw_pread      pread of the same file in the requests the plans make:
 *                  max-bytes from the start of a batch (the last batch cut
 *                  short, as Kafka sends it), the next one from the batch
 *                  that was cut
 *   plan_sendfile  plan, then sendfile every range into a loopback TCP
 *                  connection drained by another thread (the broker's way)
 *   raw_sendfile   sendfile of the file in the same chunks, same sink
 *   cold_*         pread passes after dropping the file's cached pages
 *                  (posix_fadvise DONTNEED on this file only)
 *
 * Each mode runs whole passes over the log for at least `secs` seconds, in
 * each of `rounds` rounds.  Bytes count what a consumer keeps (the whole
 * batches of each answer); a cut batch is sent again with the next one.
 */
#include "ci/bench/bench.h"
#include "ci/bench/main.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kaas/storage/storage.h"
#include "kaas/storage/test/kbuild.h"
#include "util/clock.h"
#include "util/log.h"

typedef struct sink {
	pthread_t th;
	int lfd, rfd, wfd;   /* listener, receiving end, sending end */
	_Atomic uint64_t got;
} sink;

static void *sink_main(void *arg)
{
	sink *s = arg;
	size_t cap = 1 << 20;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return NULL;
	for (;;) {
		ssize_t k = read(s->rfd, buf, cap);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		atomic_fetch_add(&s->got, (uint64_t)k);
	}
	free(buf);
	return NULL;
}

/* A loopback TCP connection whose far end is drained by a thread. */
static int sink_open(sink *s)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	s->lfd = s->rfd = s->wfd = -1;
	if ((s->lfd = socket(AF_INET, SOCK_STREAM, 0)) < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(s->lfd, 1) || getsockname(s->lfd, (struct sockaddr *)&a, &al))
		return -errno;
	if ((s->wfd = socket(AF_INET, SOCK_STREAM, 0)) < 0 || connect(s->wfd, (struct sockaddr *)&a, sizeof(a)))
		return -errno;
	if ((s->rfd = accept(s->lfd, NULL, NULL)) < 0)
		return -errno;
	if (pthread_create(&s->th, NULL, sink_main, s))
		return -EAGAIN;
	return 0;
}

static void sink_wait(sink *s, uint64_t total)
{
	while (atomic_load(&s->got) < total)
		usleep(100);
}

static void sink_close(sink *s, int joinable)
{
	if (s->wfd >= 0)
		shutdown(s->wfd, SHUT_WR);
	if (joinable)
		pthread_join(s->th, NULL);
	if (s->wfd >= 0)
		close(s->wfd);
	if (s->rfd >= 0)
		close(s->rfd);
	if (s->lfd >= 0)
		close(s->lfd);
}

static int send_range(int sock, int fd, uint64_t pos, size_t len)
{
	off_t off = (off_t)pos;
	while (len > 0) {
		ssize_t k = sendfile(sock, fd, &off, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		len -= (size_t)k;
	}
	return 0;
}

static int pread_all(int fd, uint8_t *buf, size_t len, uint64_t pos)
{
	while (len > 0) {
		ssize_t k = pread(fd, buf, len, (off_t)pos);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EIO;
		buf += k;
		len -= (size_t)k;
		pos += (uint64_t)k;
	}
	return 0;
}

enum { R_PLAN, R_PLAN_PREAD, R_RAW_PREAD, R_PLAN_SENDFILE, R_RAW_SENDFILE, R_COLD_PLAN, R_COLD_RAW };
static const char *mode_names[] = {"plan",         "plan_pread",    "raw_pread",      "plan_sendfile",
				   "raw_sendfile", "cold_plan_pread", "cold_raw_pread"};

typedef struct rctx {
	ks_partition *p;
	int fd;            /* the segment, for raw reads and cache drops */
	uint64_t file_len;
	int64_t hw;
	size_t batch_bytes;
	int32_t records;
	int32_t max_bytes;
	uint8_t *buf;
	sink *sk;
	uint64_t sent;
} rctx;

/* What a fetch of max_bytes from the batch at `pos` answers, as Kafka
 * does: max_bytes (the first batch whole), never past the log's end. */
static size_t plan_len(const rctx *c, uint64_t pos)
{
	uint64_t n = (uint64_t)c->max_bytes;
	if (n < c->batch_bytes)
		n = c->batch_bytes;
	if (n > c->file_len - pos)
		n = c->file_len - pos;
	return (size_t)n;
}

/* One pass over the whole log; adds bytes delivered and plans made. */
static int pass(rctx *c, int mode, uint64_t *bytes, uint64_t *plans)
{
	if (mode == R_COLD_PLAN || mode == R_COLD_RAW)
		(void)posix_fadvise(c->fd, 0, 0, POSIX_FADV_DONTNEED);
	if (mode == R_RAW_PREAD || mode == R_RAW_SENDFILE || mode == R_COLD_RAW) {
		/* The same requests as the plans make: copy speed depends on
		 * size and alignment. */
		for (uint64_t pos = 0; pos < c->file_len;) {
			size_t n = plan_len(c, pos), keep = n / c->batch_bytes * c->batch_bytes;
			int rc = mode == R_RAW_SENDFILE ? send_range(c->sk->wfd, c->fd, pos, n)
							: pread_all(c->fd, c->buf, n, pos);
			if (rc)
				return rc;
			pos += keep;
			*bytes += keep;
			if (mode == R_RAW_SENDFILE)
				c->sent += n;
		}
		return 0;
	}
	for (int64_t off = 0; off < c->hw;) {
		ks_read_plan plan = KAAS_READ_PLAN_INIT;
		int rc = ks_partition_read(c->p, off, c->max_bytes, &plan);
		uint64_t pos = (uint64_t)(off / c->records) * c->batch_bytes;
		if (rc || plan.error || plan.total != plan_len(c, pos) || plan.n < 1 || plan.r[0].pos != pos) {
			fprintf(stderr, "kaas-bench read: plan at offset %lld: rc %d error %d total %u, want %zu\n",
				(long long)off, rc, plan.error, plan.total, plan_len(c, pos));
			ks_read_plan_release(&plan);
			return rc ? rc : -EIO;
		}
		for (int i = 0; i < plan.n && mode != R_PLAN; i++) {
			ks_read_range *r = &plan.r[i];
			int fd = sub_native_fd(r->file);
			if (mode == R_PLAN_SENDFILE) {
				rc = send_range(c->sk->wfd, fd, r->pos, r->len);
				c->sent += r->len;
			} else {
				rc = pread_all(fd, c->buf, r->len, r->pos);
			}
			if (rc) {
				ks_read_plan_release(&plan);
				return rc;
			}
		}
		off += (int64_t)(plan.total / c->batch_bytes) * c->records;
		*bytes += plan.total / c->batch_bytes * c->batch_bytes;
		(*plans)++;
		ks_read_plan_release(&plan);
	}
	return 0;
}

/* "all", or `name` is one of the comma-separated names in `list`. */
static int mode_wanted(const char *list, const char *name)
{
	if (strcmp(list, "all") == 0)
		return 1;
	size_t n = strlen(name);
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (len == n && strncmp(p, name, n) == 0)
			return 1;
		p += len + (e ? 1 : 0);
	}
	return 0;
}

/* Whole passes of one mode for at least `secs`; prints the result. */
static int measure(rctx *c, int m, int round, double secs)
{
	uint64_t bytes = 0, plans = 0, passes = 0;
	int64_t t0 = bn_now_ns(), deadline = t0 + (int64_t)(secs * 1e9);
	do {
		int e = pass(c, m, &bytes, &plans);
		if (e) {
			fprintf(stderr, "kaas-bench read: %s: %s\n", mode_names[m], strerror(-e));
			return 1;
		}
		passes++;
	} while (bn_now_ns() < deadline);
	if (m == R_PLAN_SENDFILE || m == R_RAW_SENDFILE)
		sink_wait(c->sk, c->sent);
	int64_t el = bn_now_ns() - t0;
	json_t *j = json_pack("{s:s,s:s,s:i,s:I,s:i,s:I,s:f,s:I,s:I,s:I,s:f,s:f}", "kind", "read", "mode",
			      mode_names[m], "round", round, "log_bytes", (json_int_t)c->file_len, "max_bytes",
			      c->max_bytes, "batch_bytes", (json_int_t)c->batch_bytes, "secs", (double)el / 1e9,
			      "passes", (json_int_t)passes, "bytes", (json_int_t)bytes, "plans", (json_int_t)plans,
			      "mbps", bn_mbps(bytes, el), "plans_per_s", (double)plans / ((double)el / 1e9));
	return bn_emit(j) ? 1 : 0;
}

int bench_read(bn_opts *o)
{
	const char *dir = bn_opt_str(o, "dir", NULL);
	int64_t mib = bn_opt_int(o, "mib", 128);
	int32_t records = (int32_t)bn_opt_int(o, "records", 100);
	int32_t rsize = (int32_t)bn_opt_int(o, "record-size", 1024);
	int32_t max_bytes = (int32_t)bn_opt_int(o, "max-bytes", 1 << 20);
	double secs = bn_opt_double(o, "secs", 1.0);
	const char *modes = bn_opt_str(o, "modes", "all");
	int rounds = (int)bn_opt_int(o, "rounds", 1);
	if (bn_opts_check(o, "kaas-bench read"))
		return 2;
	if (!dir || mib < 1 || records < 1 || rsize < 1 || max_bytes < 1 || secs <= 0 || rounds < 1) {
		fprintf(stderr, "kaas-bench read: --dir DIR [--mib N] [--records R] [--record-size B] "
				"[--max-bytes N] [--secs S] [--rounds R] [--modes all|m1,m2]\n");
		return 2;
	}
	ku_log_level = KAAS_LOG_WARN;
	int rc = 1, sink_up = 0;
	char err[256];
	sub_vfs *vfs = NULL;
	ks_partition *p = NULL;
	sink sk = {.lfd = -1, .rfd = -1, .wfd = -1};
	rctx c = {.fd = -1, .records = records, .max_bytes = max_bytes, .sk = &sk};
	kbuild b = KBUILD_INIT;
	uint8_t *val = malloc((size_t)rsize);
	c.buf = malloc((size_t)max_bytes + (4u << 20));
	if (!val || !c.buf)
		goto out;
	if (sub_open_url(dir, &vfs, err, sizeof(err))) {
		fprintf(stderr, "kaas-bench read: %s: %s\n", dir, err);
		goto out;
	}
	ks_log_config cfg;
	ks_log_config_defaults(&cfg);
	int e = ks_partition_open(vfs, "bench-read/0", NULL, 1, &cfg, &p);
	if (e == 0)
		e = ks_partition_take_over(p, 1);
	if (e) {
		fprintf(stderr, "kaas-bench read: partition: %s\n", sub_strerror(e));
		goto out;
	}
	c.p = p;
	/* Fill. */
	int64_t ts = ku_wall_ms();
	kbuild_begin(&b, -1, -1, -1, ts);
	for (int32_t i = 0; i < records; i++) {
		bn_fill_random(val, (size_t)rsize, (uint64_t)i + 7);
		kbuild_record(&b, "key", 3, val, rsize, ts);
	}
	kbuild_end(&b, KBUILD_NONE);
	c.batch_bytes = b.len;
	uint8_t *req = malloc(b.len);
	if (!req)
		goto out;
	uint64_t target = (uint64_t)mib << 20;
	for (uint64_t done = 0; done < target; done += b.len) {
		memcpy(req, b.buf, b.len);
		ks_append_result res;
		if (ks_partition_append(p, req, b.len, &res) || res.error) {
			fprintf(stderr, "kaas-bench read: fill append failed (%d)\n", res.error);
			free(req);
			goto out;
		}
	}
	free(req);
	if (ks_partition_flush(p, &c.hw)) {
		fprintf(stderr, "kaas-bench read: fill flush failed\n");
		goto out;
	}
	/* The segment's descriptor, from a plan of the first batch. */
	ks_read_plan plan = KAAS_READ_PLAN_INIT;
	if (ks_partition_read(p, 0, 1, &plan) || plan.n < 1 || sub_native_fd(plan.r[0].file) < 0) {
		fprintf(stderr, "kaas-bench read: no native descriptor for the segment (posix directory needed)\n");
		ks_read_plan_release(&plan);
		goto out;
	}
	c.fd = dup(sub_native_fd(plan.r[0].file));
	ks_read_plan_release(&plan);
	c.file_len = (uint64_t)lseek(c.fd, 0, SEEK_END);
	if (c.file_len != (uint64_t)(c.hw / records) * c.batch_bytes) {
		fprintf(stderr, "kaas-bench read: segment holds %llu bytes, expected %llu\n",
			(unsigned long long)c.file_len, (unsigned long long)(c.hw / records) * c.batch_bytes);
		goto out;
	}
	if ((e = sink_open(&sk))) {
		fprintf(stderr, "kaas-bench read: loopback sink: %s\n", strerror(-e));
		goto out;
	}
	sink_up = 1;
	rc = 0;
	/* Modes take turns within each round, so that a change in the
	 * machine's load hits both sides of a comparison alike; even rounds run
	 * the raw side of each pair first. */
	static const int order[2][7] = {
		{R_PLAN, R_PLAN_PREAD, R_RAW_PREAD, R_PLAN_SENDFILE, R_RAW_SENDFILE, R_COLD_PLAN, R_COLD_RAW},
		{R_PLAN, R_RAW_PREAD, R_PLAN_PREAD, R_RAW_SENDFILE, R_PLAN_SENDFILE, R_COLD_RAW, R_COLD_PLAN},
	};
	for (int round = 1; round <= rounds && rc == 0; round++) {
		for (int k = 0; k < 7 && rc == 0; k++) {
			int m = order[(round - 1) % 2][k];
			if (mode_wanted(modes, mode_names[m]))
				rc = measure(&c, m, round, secs);
		}
	}
out:
	sink_close(&sk, sink_up);
	if (c.fd >= 0)
		close(c.fd);
	ks_partition_close(p);
	if (vfs)
		sub_remove_tree(vfs, "bench-read");
	sub_destroy(vfs);
	kbuild_free(&b);
	free(val);
	free(c.buf);
	return rc;
}
