/*
 * agent_client.c — the driver's side of remote agents: connect, read the
 * greeting, fill an actor slot with the TCP channel, say hello.  From then on
 * the driver treats the agent like a forked actor (driver.c): same messages,
 * same barriers, same timeouts; a vanished agent ends a wait with an error
 * naming it, never a hang (keepalive + the step timeout).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conformance/agent.h"
#include "conformance/agent_int.h"
#include "conformance/chan.h"
#include "conformance/kc.h"
#include "util/clock.h"

/* Non-blocking connect with a deadline; the socket is returned blocking. */
static int tcp_connect(const char *addr, int timeout_ms, char *err, size_t errlen)
{
	char host[256], port[16];
	if (kc_split_hostport(addr, host, sizeof(host), port, sizeof(port)) != 0) {
		snprintf(err, errlen, "'%s' is not HOST:PORT", addr);
		return -EINVAL;
	}
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	int g = getaddrinfo(host, port, &hints, &res);
	if (g != 0) {
		snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(g));
		return -EHOSTUNREACH;
	}
	int rc = -ECONNREFUSED;
	int64_t deadline = ku_mono_ms() + timeout_ms;
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
			rc = -errno;
			close(fd);
			continue;
		}
		struct pollfd pfd = {.fd = fd, .events = POLLOUT};
		int64_t left = deadline - ku_mono_ms();
		int pr = left > 0 ? poll(&pfd, 1, (int)left) : 0;
		int soerr = 0;
		socklen_t sl = sizeof(soerr);
		if (pr <= 0) {
			rc = -ETIMEDOUT;
			close(fd);
			continue;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0) {
			rc = -(soerr ? soerr : errno);
			close(fd);
			continue;
		}
		int fl = fcntl(fd, F_GETFL);
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
		freeaddrinfo(res);
		return fd;
	}
	freeaddrinfo(res);
	snprintf(err, errlen, "cannot connect: %s", kc_errname(rc));
	return rc;
}

/* Connects actor slot ai to its agent and reads the greeting.  A "busy"
 * refusal is retried until busy_wait_ms has passed (the agent may not have
 * noticed yet that our previous session ended). */
static int agent_open(kc_driver *d, int ai, int busy_wait_ms)
{
	kc_actor *a = &d->a[ai];
	int64_t deadline = ku_mono_ms() + busy_wait_ms;
	char err[600];
	for (;;) {
		int fd = tcp_connect(a->agent, KC_AGENT_CONNECT_TIMEOUT_MS, err, sizeof(err));
		if (fd < 0) {
			snprintf(d->err, sizeof(d->err), "agent %.200s (actor %d): %.500s", a->agent, ai, err);
			return fd;
		}
		kc_tcp_keepalive(fd, KC_AGENT_DEFAULT_KEEPALIVE_S);
		kc_chan_close(&a->ch);
		kc_chan_init(&a->ch, fd);
		json_t *m = NULL;
		int rc = kc_chan_recv(&a->ch, &m, KC_AGENT_CONNECT_TIMEOUT_MS);
		if (rc) {
			kc_chan_close(&a->ch);
			snprintf(d->err, sizeof(d->err), "agent %s (actor %d): no greeting (%s): is it a kaas-conform agent?",
				 a->agent, ai, kc_errname(rc));
			return rc == -ETIMEDOUT ? -ETIMEDOUT : -EPROTO;
		}
		const char *ev = json_string_value(json_object_get(m, "ev"));
		if (ev && strcmp(ev, "refused") == 0) {
			const char *why = json_string_value(json_object_get(m, "error"));
			const char *reason = json_string_value(json_object_get(m, "reason"));
			int busy = reason && strcmp(reason, "busy") == 0;
			snprintf(d->err, sizeof(d->err), "agent %s (actor %d) refused the connection: %s", a->agent,
				 ai, why ? why : "no reason given");
			json_decref(m);
			kc_chan_close(&a->ch);
			if (busy && ku_mono_ms() < deadline) {
				usleep(200 * 1000);
				continue;
			}
			return busy ? -EBUSY : -EPROTO;
		}
		json_int_t proto = json_integer_value(json_object_get(m, "protocol"));
		const char *root = json_string_value(json_object_get(m, "root"));
		if (!ev || strcmp(ev, "agent") != 0 || !root) {
			json_decref(m);
			kc_chan_close(&a->ch);
			snprintf(d->err, sizeof(d->err), "agent %s (actor %d): unexpected greeting", a->agent, ai);
			return -EPROTO;
		}
		if (proto != KC_PROTOCOL_VERSION) {
			snprintf(d->err, sizeof(d->err),
				 "agent %s (actor %d) speaks actor protocol %lld, this driver %d (version %s): use the same kaas-conform release",
				 a->agent, ai, (long long)proto, KC_PROTOCOL_VERSION,
				 json_string_value(json_object_get(m, "version")) ?: "?");
			json_decref(m);
			kc_chan_close(&a->ch);
			return -EPROTO;
		}
		snprintf(a->url, sizeof(a->url), "%s", root);
		json_decref(m);
		a->pid = 0;
		a->alive = 1;
		a->busy = 0;
		a->why[0] = '\0';
		return 0;
	}
}

int kc_drv_connect_agents(kc_driver *d, const char *const *addrs, int n)
{
	int rc = kc_drv_slots(d, n);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++) {
		snprintf(d->a[i].agent, sizeof(d->a[i].agent), "%s", addrs[i]);
		for (int k = 0; k < i; k++)
			if (strcmp(addrs[k], addrs[i]) == 0) {
				snprintf(d->err, sizeof(d->err),
					 "agent %s is given twice: an agent serves one actor", addrs[i]);
				return -EINVAL;
			}
	}
	/* Connect everywhere first: a busy or absent agent fails the run
	 * before anything is opened on the volume. */
	for (int i = 0; i < n; i++) {
		if ((rc = agent_open(d, i, 0)))
			return rc;
	}
	return kc_drv_hello_all(d);
}

int kc_drv_reconnect_agent(kc_driver *d, int ai)
{
	int rc = agent_open(d, ai, 15000);
	return rc ? rc : kc_drv_hello(d, ai);
}
