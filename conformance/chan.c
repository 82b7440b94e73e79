/*
 * chan.c — newline-delimited JSON over a stream socket.
 */
#include "conformance/chan.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/clock.h"

void kc_chan_init(kc_chan *c, int fd)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
}

void kc_chan_close(kc_chan *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
	c->len = c->cap = 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == ENOTSOCK)
			w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd pfd = {.fd = fd, .events = POLLOUT};
				poll(&pfd, 1, 1000);
				continue;
			}
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int kc_chan_send(kc_chan *c, const json_t *msg)
{
	if (c->fd < 0)
		return -EPIPE;
	char *s = json_dumps(msg, JSON_COMPACT);
	if (!s)
		return -ENOMEM;
	size_t n = strlen(s);
	if (n + 1 > KC_CHAN_MAX) {
		free(s);
		return -EMSGSIZE;
	}
	s[n] = '\n'; /* json_dumps leaves room for the NUL we overwrite */
	int rc = write_all(c->fd, s, n + 1);
	free(s);
	return rc;
}

int kc_chan_sendf(kc_chan *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	json_t *m = json_vpack_ex(NULL, 0, fmt, ap);
	va_end(ap);
	if (!m)
		return -EINVAL;
	int rc = kc_chan_send(c, m);
	json_decref(m);
	return rc;
}

int kc_chan_pop(kc_chan *c, json_t **msg)
{
	char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
	if (!nl) {
		if (c->len >= KC_CHAN_MAX)
			return -EMSGSIZE;
		return c->eof ? -EPIPE : -EAGAIN;
	}
	size_t n = (size_t)(nl - c->buf);
	json_error_t jerr;
	json_t *m = json_loadb(c->buf, n, JSON_REJECT_DUPLICATES, &jerr);
	memmove(c->buf, nl + 1, c->len - n - 1);
	c->len -= n + 1;
	if (!m || !json_is_object(m)) {
		json_decref(m);
		return -EBADMSG;
	}
	*msg = m;
	return 0;
}

int kc_chan_fill(kc_chan *c)
{
	if (c->eof)
		return -EPIPE;
	if (c->cap - c->len < 4096) {
		size_t ncap = c->cap ? c->cap * 2 : 8192;
		if (ncap > KC_CHAN_MAX + 4096)
			ncap = KC_CHAN_MAX + 4096;
		if (ncap <= c->len)
			return -EMSGSIZE;
		char *nb = realloc(c->buf, ncap);
		if (!nb)
			return -ENOMEM;
		c->buf = nb;
		c->cap = ncap;
	}
	ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
	if (r < 0)
		return (errno == EAGAIN || errno == EINTR) ? -EAGAIN : -errno;
	if (r == 0) {
		c->eof = 1;
		return -EPIPE;
	}
	c->len += (size_t)r;
	return (int)r;
}

int kc_chan_recv(kc_chan *c, json_t **msg, int timeout_ms)
{
	int64_t deadline = timeout_ms < 0 ? -1 : ku_mono_ms() + timeout_ms;
	for (;;) {
		int rc = kc_chan_pop(c, msg);
		if (rc != -EAGAIN)
			return rc;
		int wait = -1;
		if (deadline >= 0) {
			int64_t left = deadline - ku_mono_ms();
			wait = left > 0 ? (int)left : 0;
		}
		struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
		int pr = poll(&pfd, 1, wait);
		if (pr < 0)
			return errno == EINTR ? -EINTR : -errno;
		if (pr == 0)
			return -ETIMEDOUT;
		rc = kc_chan_fill(c);
		if (rc < 0 && rc != -EAGAIN && rc != -EPIPE)
			return rc;
		/* At EOF, loop once more so a last complete message is still returned. */
	}
}
