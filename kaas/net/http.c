/*
 * http.c — the HTTP side door (http.h): a bounds-checked HTTP/1.x request
 * head reader, the three endpoints, and a poll(2) loop on a thread of its
 * own.  Every socket is non-blocking; one request per connection, answered
 * with Connection: close, so no state outlives an exchange.
 */
#include "kaas/net/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"
#include "util/metrics.h"

/* ---- the request reader ------------------------------------------------------------- */

static int is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

int kn_http_parse(const char *buf, size_t len, kn_http_req *out)
{
	size_t lim = len < KN_HTTP_MAX_HEAD ? len : KN_HTTP_MAX_HEAD;
	size_t end = 0;
	for (size_t i = 3; i < lim; i++)
		if (buf[i - 3] == '\r' && buf[i - 2] == '\n' && buf[i - 1] == '\r' && buf[i] == '\n') {
			end = i + 1;
			break;
		}
	/* Bytes that can never be part of a valid head fail at once, before
	 * the head is complete: a client need not fill the buffer to be told. */
	for (size_t i = 0; i < (end ? end : lim); i++) {
		unsigned char c = (unsigned char)buf[i];
		if ((c < 0x20 && c != '\r' && c != '\n' && c != '\t') || c == 0x7f)
			return -EBADMSG;
	}
	if (!end)
		return len >= KN_HTTP_MAX_HEAD ? -E2BIG : 0;

	/* request line: METHOD SP target SP HTTP/1.x CRLF */
	const char *p = buf, *e = buf + end;
	size_t n = 0;
	while (p + n < e && is_tchar((unsigned char)p[n]))
		n++;
	if (n == 0 || n >= sizeof(out->method) || p[n] != ' ')
		return -EBADMSG;
	memcpy(out->method, p, n);
	out->method[n] = 0;
	p += n + 1;
	n = 0;
	while (p + n < e && p[n] != ' ' && p[n] != '\r')
		n++;
	if (n == 0 || p[0] != '/' || p[n] != ' ')
		return -EBADMSG;
	size_t plen = n;
	const char *q = memchr(p, '?', n);
	if (q)
		plen = (size_t)(q - p);
	if (plen >= sizeof(out->path))
		return -EBADMSG;
	memcpy(out->path, p, plen);
	out->path[plen] = 0;
	p += n + 1;
	if (e - p < 10 || memcmp(p, "HTTP/", 5) || p[6] != '.' || p[8] != '\r' || p[9] != '\n' ||
	    p[5] < '0' || p[5] > '9' || p[7] < '0' || p[7] > '9')
		return -EBADMSG;
	if (p[5] != '1' || (p[7] != '0' && p[7] != '1'))
		return -EPROTONOSUPPORT;
	out->minor = p[7] - '0';
	p += 10;

	/* header fields: name ":" value CRLF, until the empty line */
	while (p < e - 2) {
		n = 0;
		while (p + n < e && is_tchar((unsigned char)p[n]))
			n++;
		if (n == 0 || p[n] != ':')
			return -EBADMSG; /* also obs-fold and a space before the colon */
		const char *nl = memchr(p, '\n', (size_t)(e - p));
		if (!nl || nl[-1] != '\r')
			return -EBADMSG;
		p = nl + 1;
	}
	return (int)end;
}

/* ---- the endpoints ------------------------------------------------------------------------ */

static int text(const char *s, char **body, size_t *len)
{
	*body = strdup(s);
	if (!*body)
		return -ENOMEM;
	*len = strlen(s);
	return 0;
}

int kn_http_answer(const kn_http_req *rq, struct ku_metrics *m, kn_http_ready_fn ready, void *arg,
		   const char **ctype, char **body, size_t *body_len)
{
	*ctype = "text/plain; charset=utf-8";
	int known = !strcmp(rq->path, "/metrics") || !strcmp(rq->path, "/healthz") || !strcmp(rq->path, "/readyz");
	if (!known)
		return text("not found: this listener serves /metrics, /healthz and /readyz\n", body, body_len) ? -ENOMEM
														   : 404;
	if (strcmp(rq->method, "GET") && strcmp(rq->method, "HEAD"))
		return text("method not allowed: GET or HEAD\n", body, body_len) ? -ENOMEM : 405;
	if (!strcmp(rq->path, "/healthz"))
		return text("ok\n", body, body_len) ? -ENOMEM : 200;
	if (!strcmp(rq->path, "/readyz")) {
		char why[256] = "";
		int ok = ready ? ready(arg, why, sizeof(why)) : 0;
		char msg[300];
		snprintf(msg, sizeof(msg), "%s%s%s\n", ok ? "ready" : "not ready", why[0] ? ": " : "", why);
		return text(msg, body, body_len) ? -ENOMEM : ok ? 200 : 503;
	}
	*ctype = "text/plain; version=0.0.4; charset=utf-8";
	if (!m)
		return text("", body, body_len) ? -ENOMEM : 200;
	return ku_metrics_render(m, body, body_len) ? -ENOMEM : 200;
}

/* ---- the loop --------------------------------------------------------------------------------- */

typedef struct hconn {
	int fd;
	int64_t deadline_ms;
	char in[KN_HTTP_MAX_HEAD];
	size_t in_len;
	char *out; /* the whole answer, head and body */
	size_t out_len, out_off;
} hconn;

struct kn_http {
	int lfd;
	int port;
	int wake[2];
	pthread_t thread;
	int started;
	struct ku_metrics *m;
	kn_http_ready_fn ready;
	void *arg;
	hconn conns[KN_HTTP_MAX_CONNS];
	int nconns;
	ku_metric *m_req[6]; /* by status class: 2xx 4xx 5xx and refused */
};

static const char *reason(int code)
{
	switch (code) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 431: return "Request Header Fields Too Large";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Internal Server Error";
	}
}

/* Builds c->out; a failure to allocate leaves it NULL (closed unanswered). */
static void respond(kn_http *h, hconn *c, int code, const char *ctype, char *body, size_t blen, int head_only)
{
	char hdr[256];
	int hl = snprintf(hdr, sizeof(hdr),
			  "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n",
			  code, reason(code), ctype, blen, code == 405 ? "Allow: GET, HEAD\r\n" : "");
	size_t total = (size_t)hl + (head_only ? 0 : blen);
	c->out = malloc(total);
	if (c->out) {
		memcpy(c->out, hdr, (size_t)hl);
		if (!head_only && blen)
			memcpy(c->out + hl, body, blen);
		c->out_len = total;
		c->out_off = 0;
	}
	free(body);
	ku_counter_add(h->m_req[code < 300 ? 0 : code < 500 ? 1 : 2], 1);
}

static void respond_text(kn_http *h, hconn *c, int code, const char *msg)
{
	char *b = strdup(msg);
	respond(h, c, code, "text/plain; charset=utf-8", b, b ? strlen(b) : 0, 0);
}

static void close_conn(kn_http *h, int i)
{
	/* Unread input would make close(2) reset the connection, and the
	 * answer still in the send queue could be lost: read what is there. */
	char sink[4096];
	for (int k = 0; k < 16 && recv(h->conns[i].fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; k++)
		;
	close(h->conns[i].fd);
	free(h->conns[i].out);
	h->nconns--;
	if (i != h->nconns)
		h->conns[i] = h->conns[h->nconns];
	h->conns[h->nconns].out = NULL;
}

/* Reads what is there; once the head is complete (or bad) the answer is
 * built.  Returns -1 when the connection is to be closed now. */
static int on_readable(kn_http *h, hconn *c)
{
	for (;;) {
		if (c->in_len == sizeof(c->in))
			break;
		ssize_t k = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (k <= 0)
			return -1; /* reset, or closed before a whole head */
		c->in_len += (size_t)k;
	}
	kn_http_req rq;
	int rc = kn_http_parse(c->in, c->in_len, &rq);
	if (rc == 0)
		return 0;
	if (rc == -E2BIG)
		respond_text(h, c, 431, "request head too large\n");
	else if (rc == -EPROTONOSUPPORT)
		respond_text(h, c, 505, "HTTP/1.0 or HTTP/1.1 only\n");
	else if (rc < 0)
		respond_text(h, c, 400, "malformed request\n");
	else {
		const char *ctype;
		char *body = NULL;
		size_t blen = 0;
		int code = kn_http_answer(&rq, h->m, h->ready, h->arg, &ctype, &body, &blen);
		if (code < 0)
			return -1;
		respond(h, c, code, ctype, body, blen, !strcmp(rq.method, "HEAD"));
	}
	return c->out ? 0 : -1;
}

/* Returns -1 when done (sent or failed). */
static int on_writable(hconn *c)
{
	while (c->out_off < c->out_len) {
		ssize_t k = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (k < 0)
			return -1;
		c->out_off += (size_t)k;
	}
	shutdown(c->fd, SHUT_WR);
	return -1;
}

static void on_accept(kn_http *h)
{
	for (int i = 0; i < 64; i++) {
		int fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return; /* EAGAIN, or out of descriptors: poll comes back */
		if (h->nconns == KN_HTTP_MAX_CONNS) {
			static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
						   "Connection: close\r\n\r\n";
			ssize_t k = send(fd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
			(void)k;
			close(fd);
			ku_counter_add(h->m_req[3], 1);
			continue;
		}
		hconn *c = &h->conns[h->nconns++];
		c->fd = fd;
		c->in_len = 0;
		c->out = NULL;
		c->out_len = c->out_off = 0;
		c->deadline_ms = ku_mono_ms() + KN_HTTP_DEADLINE_MS;
	}
}

static void *run(void *arg)
{
	kn_http *h = arg;
	struct pollfd pf[2 + KN_HTTP_MAX_CONNS];
	for (;;) {
		pf[0] = (struct pollfd){.fd = h->wake[0], .events = POLLIN};
		pf[1] = (struct pollfd){.fd = h->lfd, .events = POLLIN};
		int64_t now = ku_mono_ms(), next = now + KN_HTTP_DEADLINE_MS;
		for (int i = 0; i < h->nconns; i++) {
			pf[2 + i] = (struct pollfd){.fd = h->conns[i].fd, .events = h->conns[i].out ? POLLOUT : POLLIN};
			if (h->conns[i].deadline_ms < next)
				next = h->conns[i].deadline_ms;
		}
		int n = h->nconns;
		int rc = poll(pf, (nfds_t)(2 + n), (int)(next > now ? next - now : 0));
		if (rc < 0 && errno != EINTR) {
			KLOG_ERR("metrics", "the HTTP listener's poll failed: %s; it stops", strerror(errno));
			break;
		}
		if (pf[0].revents)
			break;
		now = ku_mono_ms();
		/* Back to front: close_conn moves the last slot into the freed one. */
		for (int i = n - 1; i >= 0; i--) {
			hconn *c = &h->conns[i];
			int done = 0;
			if (pf[2 + i].revents & (POLLERR | POLLNVAL))
				done = 1;
			else if (!c->out && (pf[2 + i].revents & (POLLIN | POLLHUP)))
				done = on_readable(h, c) < 0;
			if (!done && c->out && (pf[2 + i].revents & POLLOUT || !(pf[2 + i].events & POLLOUT)))
				done = on_writable(c) < 0;
			if (!done && now >= c->deadline_ms)
				done = 1; /* too slow: closed without an answer */
			if (done)
				close_conn(h, i);
		}
		if (pf[1].revents & POLLIN)
			on_accept(h);
	}
	return NULL;
}

static int bind_listener(kn_http *h, const char *host, int port, char *err, size_t errlen)
{
	struct addrinfo hints = {0}, *ai = NULL;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	char ps[16];
	snprintf(ps, sizeof(ps), "%d", port);
	int g = getaddrinfo(host, ps, &hints, &ai);
	if (g) {
		snprintf(err, errlen, "metrics.listen %s:%d: %s", host, port, gai_strerror(g));
		return -EINVAL;
	}
	int rc = -EADDRNOTAVAIL;
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, a->ai_addr, a->ai_addrlen) || listen(fd, 64)) {
			rc = -errno;
			close(fd);
			continue;
		}
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		getsockname(fd, (struct sockaddr *)&ss, &sl);
		h->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
							 : ((struct sockaddr_in *)&ss)->sin_port);
		h->lfd = fd;
		rc = 0;
		break;
	}
	freeaddrinfo(ai);
	if (rc)
		snprintf(err, errlen, "metrics.listen %s:%d: %s", host, port, strerror(-rc));
	return rc;
}

static void register_metrics(kn_http *h)
{
	static const char *const labels[] = {"class", NULL};
	static const char *const classes[] = {"2xx", "4xx", "5xx", "refused"};
	ku_family *f = NULL;
	if (!h->m || ku_metrics_family(h->m, "kaas_http_requests_total",
				       "requests to the metrics/health listener by status class (refused: over its "
				       "connection limit)",
				       KU_COUNTER, labels, NULL, 0, &f))
		return;
	for (int i = 0; i < 4; i++)
		h->m_req[i] = ku_metrics_series(f, (const char *const[]){classes[i], NULL});
}

int kn_http_start(const char *host, int port, struct ku_metrics *m, kn_http_ready_fn ready, void *arg,
		  kn_http **out, char *err, size_t errlen)
{
	kn_http *h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, errlen, "metrics.listen: out of memory");
		return -ENOMEM;
	}
	h->lfd = h->wake[0] = h->wake[1] = -1;
	h->m = m;
	h->ready = ready;
	h->arg = arg;
	int rc = bind_listener(h, host, port, err, errlen);
	if (rc)
		goto out;
	if (pipe2(h->wake, O_CLOEXEC | O_NONBLOCK)) {
		rc = -errno;
		snprintf(err, errlen, "metrics.listen: pipe: %s", strerror(-rc));
		goto out;
	}
	register_metrics(h);
	rc = -pthread_create(&h->thread, NULL, run, h);
	if (rc) {
		snprintf(err, errlen, "metrics.listen: thread: %s", strerror(-rc));
		goto out;
	}
	h->started = 1;
	*out = h;
out:
	if (rc)
		kn_http_stop(h);
	return rc;
}

int kn_http_port(const kn_http *h) { return h->port; }

void kn_http_stop(kn_http *h)
{
	if (!h)
		return;
	if (h->started) {
		ssize_t k = write(h->wake[1], "x", 1);
		(void)k;
		pthread_join(h->thread, NULL);
	}
	while (h->nconns > 0)
		close_conn(h, h->nconns - 1);
	if (h->lfd >= 0)
		close(h->lfd);
	if (h->wake[0] >= 0)
		close(h->wake[0]);
	if (h->wake[1] >= 0)
		close(h->wake[1]);
	free(h);
}
