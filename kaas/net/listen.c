/*
 * listen.c — the listening sockets (one per entry of listeners=, each with
 * its security protocol and advertised endpoint) and the limits on
 * accepting, which count every listener's connections together: at
 * max.connections the listening socket is not polled (new connections wait
 * in the kernel's backlog, as Kafka's acceptor leaves them); over
 * max.connections.per.ip a new connection is closed at once; out of
 * descriptors, accepting pauses for a moment instead of spinning.  Both
 * limits are dynamic broker configs (kb_broker_dyn: one atomic load): a
 * lower limit applies to the next accept, a higher one too, and a listener
 * paused at the old limit resumes when a connection closes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kaas/core/dyncfg.h"
#include "kaas/net/server_int.h"
#include "util/log.h"

void kn__conn_open_ended(kn_server *s)
{
	s->nopen--;
	if (s->accept_full && s->nopen < kb_broker_dyn(s->b, KB_DYN_MAX_CONNECTIONS) && !s->draining && !s->stopped &&
	    s->lpoll_active) {
		s->accept_full = 0;
		uv_timer_start(&s->accept_pause, kn__on_accept_resume, 0, 0);
	}
}

/* ---- accepting ------------------------------------------------------------------------------- */


void kn__on_accept_resume(uv_timer_t *t)
{
	kn_server *s = t->data;
	if (!s->draining && s->lpoll_active && !s->accept_full) {
		for (int i = 0; i < s->nlst && !s->accept_full; i++) {
			uv_poll_start(&s->lst[i].poll, UV_READABLE, kn__on_accept);
			kn__on_accept(&s->lst[i].poll, 0, UV_READABLE); /* also learns that the backlog is empty */
		}
	}
}

static int same_host(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return 0;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
			      sizeof(struct in6_addr)) == 0;
	return 0;
}

static void host_text(const struct sockaddr_storage *ss, char *out, size_t len)
{
	snprintf(out, len, "?");
	if (ss->ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, out, (socklen_t)len);
	else if (ss->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, out, (socklen_t)len);
}

/* max.connections.per.ip: like Kafka, a connection over the limit is closed
 * as soon as it is accepted.  Counting walks the open connections, and only
 * when the limit is set. */
static int ip_over_limit(kn_server *s, const struct sockaddr_storage *ss)
{
	int32_t lim = (int32_t)kb_broker_dyn(s->b, KB_DYN_MAX_CONNECTIONS_PER_IP);
	if (lim == INT32_MAX)
		return 0;
	int n = 0;
	for (conn *c = s->conns; c; c = c->next)
		if (!c->closed && same_host(&c->addr, ss))
			n++;
	char host[INET6_ADDRSTRLEN];
	if (n < lim) {
		if (s->ip_refusing && same_host(&s->ip_refused, ss)) {
			host_text(ss, host, sizeof(host));
			KLOG_INFO("server", "%s is below max.connections.per.ip again (%llu connection(s) refused)", host,
				  (unsigned long long)s->ip_refused_n);
			s->ip_refusing = 0;
		}
		return 0;
	}
	if (!s->ip_refusing || !same_host(&s->ip_refused, ss)) {
		host_text(ss, host, sizeof(host));
		KLOG_WARN("server", "%s has %d connection(s) open, max.connections.per.ip is %d: closing its new "
			  "connections until one closes", host, n, lim);
		s->ip_refusing = 1;
		s->ip_refused = *ss;
		s->ip_refused_n = 0;
	}
	s->ip_refused_n++;
	return 1;
}

void kn__on_accept(uv_poll_t *h, int status, int events)
{
	(void)events;
	kn_listener *l = h->data;
	kn_server *s = l->s;
	if (status < 0)
		return;
	for (int i = 0; i < MAX_ACCEPT_PER_CB; i++) {
		int32_t maxc = (int32_t)kb_broker_dyn(s->b, KB_DYN_MAX_CONNECTIONS);
		if (s->nopen >= maxc) {
			/* As Kafka's acceptor: leave the rest in the listen backlog.
			 * Logged once until the backlog has been emptied. */
			if (!s->accept_episode)
				KLOG_WARN("server", "max.connections (%d) connections open: new connections wait in the "
					  "listen backlog until one closes", maxc);
			s->accept_episode = 1;
			s->accept_full = 1;
			for (int j = 0; j < s->nlst; j++)
				uv_poll_stop(&s->lst[j].poll);
			return;
		}
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				KLOG_WARN("server", "accept: %s; pausing new connections for 100 ms", strerror(errno));
				for (int j = 0; j < s->nlst; j++)
					uv_poll_stop(&s->lst[j].poll);
				uv_timer_start(&s->accept_pause, kn__on_accept_resume, 100, 0);
			} else if (errno == EAGAIN && s->accept_episode) {
				KLOG_INFO("server", "below max.connections (%d) with no connection left waiting in the "
					  "backlog", maxc);
				s->accept_episode = 0;
			}
			return;
		}
		if (ip_over_limit(s, &ss)) {
			close(fd);
			continue;
		}
		kn__conn_new(s, l, fd, &ss);
	}
}

static int listen_on(kn_listener *l, char *err, size_t errlen)
{
	const char *host = l->cfg.host;
	int port = l->cfg.port;
	struct addrinfo hints = {0}, *res = NULL;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	char ps[16];
	snprintf(ps, sizeof(ps), "%d", port);
	int rc = getaddrinfo(*host ? host : NULL, ps, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "listener %s %s:%d: %s", l->cfg.name, host, port, gai_strerror(rc));
		return -EINVAL;
	}
	int fd = -1, e = 0;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			e = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0)
			break;
		e = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0) {
		snprintf(err, errlen, "listener %s %s:%d: %s", l->cfg.name, host, port, strerror(e));
		return -e;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	l->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
					   : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	l->fd = fd;
	return 0;
}

/* Its advertised.listeners entry, else its own address (this host's name
 * for a wildcard) with the port it bound. */
static void copy_host(char *dst, const char *src) /* both 256 bytes, NUL-terminated */
{
	size_t n = strnlen(src, 255);
	memcpy(dst, src, n);
	dst[n] = 0;
}

static void advertised(kn_listener *l)
{
	if (l->cfg.adv_host[0]) {
		copy_host(l->adv_host, l->cfg.adv_host);
		l->adv_port = l->cfg.adv_port;
		return;
	}
	const char *lh = l->cfg.host;
	if (!*lh || strcmp(lh, "0.0.0.0") == 0 || strcmp(lh, "::") == 0) {
		if (gethostname(l->adv_host, sizeof(l->adv_host) - 1))
			snprintf(l->adv_host, sizeof(l->adv_host), "localhost");
	} else {
		copy_host(l->adv_host, lh);
	}
	l->adv_port = l->port;
}

int kn__listeners_open(kn_server *s, char *err, size_t errlen)
{
	kb_listener rows[KB_MAX_LISTENERS];
	int n = 0;
	int rc = kb_listeners_resolve(&s->b->cfg, rows, &n, err, errlen);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		kn_listener *l = &s->lst[i];
		l->s = s;
		l->cfg = rows[i];
		l->fd = -1;
		s->nlst = i + 1;
		/* Each listener its own settings: the broker's with its
		 * listener.name.<name>.* ones over them (checked for every
		 * listener, so an override naming none is refused even where no
		 * listener uses TLS or SASL). */
		kb_config *lc = NULL;
		char why[400];
		int p = rows[i].protocol;
		rc = kb_config_for_listener(&s->b->cfg, rows[i].name, &lc, why, sizeof(why));
		if (!rc && (p == KB_SEC_SSL || p == KB_SEC_SASL_SSL))
			rc = kn__tls_create(lc, &l->tls, why, sizeof(why));
		if (!rc && (p == KB_SEC_SASL_PLAINTEXT || p == KB_SEC_SASL_SSL))
			rc = kn__sasl_env_create(s, l, lc, why, sizeof(why));
		free(lc);
		if (rc) {
			snprintf(err, errlen, "listener %s: %s", rows[i].name, why);
			return rc;
		}
		rc = listen_on(l, err, errlen);
		if (rc)
			return rc;
		advertised(l);
		kb_endpoint *e = &s->b->adv[i];
		snprintf(e->name, sizeof(e->name), "%s", l->cfg.name);
		copy_host(e->host, l->adv_host);
		e->port = l->adv_port;
		s->b->nadv = i + 1;
		KLOG_INFO("server", "listener %s (%s) on %s:%d, advertised as %s:%d", l->cfg.name,
			  kb_security_protocol_name(l->cfg.protocol), l->cfg.host, l->port, l->adv_host, l->adv_port);
	}
	return 0;
}

int kn__listeners_init(kn_server *s)
{
	for (int i = 0; i < s->nlst; i++) {
		int rc = uv_poll_init(&s->loop, &s->lst[i].poll, s->lst[i].fd);
		if (rc) {
			for (int j = 0; j < i; j++)
				uv_close((uv_handle_t *)&s->lst[j].poll, NULL);
			return rc;
		}
		s->lst[i].poll.data = &s->lst[i];
	}
	s->lpoll_active = 1;
	return 0;
}

void kn__listeners_start(kn_server *s)
{
	for (int i = 0; i < s->nlst; i++)
		uv_poll_start(&s->lst[i].poll, UV_READABLE, kn__on_accept);
}

void kn__listeners_close(kn_server *s, uv_close_cb cb)
{
	if (s->lpoll_active)
		for (int i = 0; i < s->nlst; i++)
			uv_close((uv_handle_t *)&s->lst[i].poll, cb);
	s->lpoll_active = 0;
}

void kn__listeners_free(kn_server *s)
{
	for (int i = 0; i < s->nlst; i++) {
		if (s->lst[i].fd >= 0)
			close(s->lst[i].fd);
		s->lst[i].fd = -1;
	}
	for (int i = 0; i < s->nlst; i++) {
		kn__tls_destroy(s->lst[i].tls);
		s->lst[i].tls = NULL;
		kn__sasl_env_free(&s->lst[i]);
	}
}
