/*
 * net.c — `kaas-bench net`: the loopback limits the broker numbers are
 * divided by.
 *
 *   stream  one TCP connection over 127.0.0.1, a thread writing `chunk`-byte
 *           buffers and another reading them: bytes per second through the
 *           kernel's loopback, two copies (user to socket, socket to user),
 *           the same as a produce request's way into a broker
 *   rtt     ping-pong of `rtt-size`-byte messages on one connection: the
 *           round-trip floor under any request latency
 */
#include "ci/bench/bench.h"
#include "ci/bench/main.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Connected pair over loopback: *a the connecting end, *b the accepted. */
static int tcp_pair(int *a, int *b)
{
	struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(addr);
	int l = socket(AF_INET, SOCK_STREAM, 0), rc = 0, one = 1;
	*a = *b = -1;
	if (l < 0)
		return -errno;
	if (bind(l, (struct sockaddr *)&addr, sizeof(addr)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&addr, &al) || (*a = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
	    connect(*a, (struct sockaddr *)&addr, sizeof(addr)) || (*b = accept(l, NULL, NULL)) < 0)
		rc = -errno;
	close(l);
	if (rc == 0) {
		setsockopt(*a, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		setsockopt(*b, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	return rc;
}

static int io_all(int fd, void *buf, size_t n, int wr)
{
	uint8_t *p = buf;
	while (n > 0) {
		ssize_t k = wr ? write(fd, p, n) : read(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EPIPE;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

typedef struct reader {
	int fd;
	size_t chunk;
	uint64_t got;
} reader;

static void *reader_main(void *arg)
{
	reader *r = arg;
	uint8_t *buf = malloc(r->chunk);
	if (!buf)
		return NULL;
	for (;;) {
		ssize_t k = read(r->fd, buf, r->chunk);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		r->got += (uint64_t)k;
	}
	free(buf);
	return NULL;
}

static int stream(size_t chunk, double secs)
{
	int a, b, rc = 1;
	if (tcp_pair(&a, &b)) {
		fprintf(stderr, "kaas-bench net: loopback connection: %s\n", strerror(errno));
		return 1;
	}
	uint8_t *buf = malloc(chunk);
	reader r = {.fd = b, .chunk = chunk};
	pthread_t th;
	if (!buf || pthread_create(&th, NULL, reader_main, &r)) {
		close(a);
		close(b);
		free(buf);
		return 1;
	}
	bn_fill_random(buf, chunk, 3);
	uint64_t sent = 0;
	int64_t t0 = bn_now_ns(), deadline = t0 + (int64_t)(secs * 1e9);
	int err = 0;
	while (bn_now_ns() < deadline) {
		if ((err = io_all(a, buf, chunk, 1)))
			break;
		sent += chunk;
	}
	shutdown(a, SHUT_WR);
	pthread_join(th, NULL);
	int64_t el = bn_now_ns() - t0;
	if (!err && r.got == sent)
		rc = bn_emit(json_pack("{s:s,s:s,s:I,s:f,s:I,s:f}", "kind", "net", "mode", "stream", "chunk",
				       (json_int_t)chunk, "secs", (double)el / 1e9, "bytes", (json_int_t)r.got,
				       "mbps", bn_mbps(r.got, el)))
			     ? 1
			     : 0;
	else
		fprintf(stderr, "kaas-bench net: stream sent %llu, received %llu (%s)\n", (unsigned long long)sent,
			(unsigned long long)r.got, err ? strerror(-err) : "short");
	close(a);
	close(b);
	free(buf);
	return rc;
}

typedef struct echo {
	int fd;
	size_t size;
} echo;

static void *echo_main(void *arg)
{
	echo *e = arg;
	uint8_t *buf = malloc(e->size);
	while (buf && io_all(e->fd, buf, e->size, 0) == 0 && io_all(e->fd, buf, e->size, 1) == 0)
		;
	free(buf);
	return NULL;
}

static int rtt(size_t size, int count)
{
	int a, b, rc = 1;
	if (tcp_pair(&a, &b)) {
		fprintf(stderr, "kaas-bench net: loopback connection: %s\n", strerror(errno));
		return 1;
	}
	uint8_t *buf = calloc(1, size);
	echo e = {.fd = b, .size = size};
	pthread_t th;
	if (!buf || pthread_create(&th, NULL, echo_main, &e)) {
		close(a);
		close(b);
		free(buf);
		return 1;
	}
	bn_lat lat = BN_LAT_INIT;
	int err = 0;
	for (int i = 0; i < count && !err; i++) {
		int64_t t0 = bn_now_ns();
		if (!(err = io_all(a, buf, size, 1)))
			err = io_all(a, buf, size, 0);
		bn_lat_add(&lat, bn_now_ns() - t0);
	}
	shutdown(a, SHUT_WR);
	pthread_join(th, NULL);
	if (!err)
		rc = bn_emit(json_pack("{s:s,s:s,s:I,s:o}", "kind", "net", "mode", "rtt", "size", (json_int_t)size,
				       "lat", bn_lat_json(&lat)))
			     ? 1
			     : 0;
	bn_lat_free(&lat);
	close(a);
	close(b);
	free(buf);
	return rc;
}

int bench_net(bn_opts *o)
{
	size_t chunk = (size_t)bn_opt_int(o, "chunk", 1 << 20);
	double secs = bn_opt_double(o, "secs", 2.0);
	size_t rsize = (size_t)bn_opt_int(o, "rtt-size", 100);
	int count = (int)bn_opt_int(o, "rtt-count", 5000);
	if (bn_opts_check(o, "kaas-bench net"))
		return 2;
	if (chunk < 1 || secs <= 0 || rsize < 1 || count < 1) {
		fprintf(stderr, "kaas-bench net: [--chunk B] [--secs S] [--rtt-size B] [--rtt-count N]\n");
		return 2;
	}
	int rc = stream(chunk, secs);
	if (rc == 0)
		rc = rtt(rsize, count);
	return rc;
}
