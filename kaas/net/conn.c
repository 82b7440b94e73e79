/*
 * conn.c — one client connection: its life cycle (accepted, closed, reaped,
 * freed), reading and cutting frames, admitting each frame by the
 * request-byte budget before its buffer exists, the idle timeout and the
 * gentle shutdown after a drain.  The design is in server.c's header.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kaas/net/sasl.h"
#include "kaas/net/server_int.h"
#include "util/log.h"
#include "util/clock.h"
#include "util/metrics.h"

static void frame_done(conn *c, uint8_t *f, size_t len);
static int parse_frames(conn *c, const uint8_t *buf, size_t n);

/* ---- the request-byte budget (queued.max.request.bytes) ---------------------- */

static void on_budget_timer(uv_timer_t *t);

/* Granted connections resume from a callback of their own, never from inside
 * the release (which runs deep in another connection's send or close). */
static void budget_kick(kn_server *s)
{
	if (s->budget.ghead && !s->stopped)
		uv_timer_start(&s->budget_timer, on_budget_timer, 0, 0);
	if (s->budget_episode && !s->budget.qhead) {
		ku_counter_add(s->m_passed, s->budget.passed - s->budget_passed0);
		KLOG_INFO("server", "queued.max.request.bytes: every waiting request has room again after %llu ms "
			  "(%llu waited, %llu passed over a connection above its share); reading resumed",
			  (unsigned long long)(uv_now(&s->loop) - s->budget_episode_ms),
			  (unsigned long long)s->budget_waited, (unsigned long long)(s->budget.passed - s->budget_passed0));
		s->budget_episode = 0;
		s->budget_waited = 0;
	}
}

void kn__budget_release(conn *c, size_t n)
{
	kn_budget_release_owned(&c->s->budget, &c->bw, (int64_t)n);
	budget_kick(c->s);
}

/* The frame whose size starts buf[0..n) does not fit: c waits in line with
 * those n bytes (at most one read's worth) kept and counted. */
static void budget_wait(conn *c, int32_t len, const uint8_t *buf, size_t n)
{
	kn_server *s = c->s;
	s->budget_waited++;
	ku_counter_add(s->m_waits, 1);
	if (!s->budget_episode) {
		/* Starved: every client may now wait, so it is an operator's
		 * business (a WARN, counted), not a detail. */
		s->budget_episode = 1;
		s->budget_episodes++;
		ku_counter_add(s->m_starved, 1);
		s->budget_episode_ms = uv_now(&s->loop);
		s->budget_passed0 = s->budget.passed;
		KLOG_WARN("server", "queued.max.request.bytes (%lld) is used up (%lld bytes of requests held by %d "
			  "connection(s)): new requests wait until answers free room (starved %llu time(s) so far; "
			  "%llu slow frame(s) dropped)",
			  (long long)s->budget.limit, (long long)s->budget.held, s->budget.nholders,
			  (unsigned long long)s->budget_episodes, (unsigned long long)s->slow_frames);
	}
	KLOG_DEBUG("server", "%s: a %d-byte request waits for queued.max.request.bytes (%d waiting, %lld held)",
		   c->peer, len, s->budget.nqueued, (long long)s->budget.held);
	c->stash = malloc(n);
	if (!c->stash) {
		kn__conn_close(c, "out of memory");
		return;
	}
	memcpy(c->stash, buf, n);
	c->stash_len = n;
	kn_budget_keep(&s->budget, &c->bw, (int64_t)n);
}

/* Gives back whatever c holds of the budget: its place in line or its grant,
 * the bytes kept while waiting, a frame it was receiving. */
void kn__conn_drop_budget(conn *c)
{
	kn_server *s = c->s;
	kn_budget_cancel(&s->budget, &c->bw);
	size_t n = c->stash_len;
	free(c->stash);
	c->stash = NULL;
	c->stash_len = 0;
	if (c->big) {
		n += c->big_len;
		c->buffered -= c->big_len;
		free(c->big);
		c->big = NULL;
		c->big_len = c->big_have = 0;
	}
	kn__budget_release(c, n);
}

/* c's frame was granted: allocate it, fill in what was kept, read on. */
static void budget_resume(conn *c)
{
	kn_server *s = c->s;
	size_t need = (size_t)c->bw.need;
	uint8_t *st = c->stash;
	size_t sl = c->stash_len;
	c->stash = NULL;
	c->stash_len = 0;
	c->bw.kept = 0;
	if (c->closed || s->draining) {
		free(st);
		kn__budget_release(c, need + sl);
		return;
	}
	KLOG_DEBUG("server", "%s: the %zu-byte request has room in queued.max.request.bytes; reading on", c->peer,
		   need);
	uint8_t *f = malloc(need);
	if (!f) {
		free(st);
		kn__budget_release(c, need + sl);
		kn__conn_close(c, "out of memory for a frame");
		return;
	}
	size_t have = sl - 4, copy = have < need ? have : need;
	memcpy(f, st + 4, copy);
	if (copy == need) {
		frame_done(c, f, need);
		if (!c->closed && have > need)
			parse_frames(c, st + 4 + need, have - need);
	} else {
		c->big = f;
		c->big_len = need;
		c->big_have = copy;
		c->buffered += need;
		c->frame_start_ms = uv_now(&s->loop); /* its wait was not the client's doing */
	}
	free(st);
	kn__budget_release(c, sl);
	kn__after_progress(c);
}

static void on_budget_timer(uv_timer_t *t)
{
	kn_server *s = t->data;
	kn_budget_waiter *w;
	for (int i = 0; i < MAX_EVENTS_PER_CB && !s->stopped && (w = kn_budget_collect(&s->budget)); i++)
		budget_resume(CONN_OF_WAITER(w));
	budget_kick(s); /* more than one callback's worth: come back */
}

/* ---- connection life cycle ------------------------------------------------------- */

static void conn_free_if_done(conn *c)
{
	if (c->closed && c->handles_open == 0 && c->nreqs == 0) {
		kn_server *s = c->s;
		if (c->prev)
			c->prev->next = c->next;
		else
			s->conns = c->next;
		if (c->next)
			c->next->prev = c->prev;
		s->nconns--;
		free(c->big);
		kn__tls_conn_free(c);
		kn_sasl_free(c->sasl);
		free(c);
		kn__check_drained(s);
	}
}

static void on_handle_closed(uv_handle_t *h)
{
	conn *c = h->data;
	c->handles_open--;
	conn_free_if_done(c);
}

/* Frees what a closed connection no longer needs; requests still on a worker
 * or deferred are freed when their events arrive. */
void kn__conn_reap(conn *c)
{
	while (c->pend_head) {
		sreq *r = c->pend_head;
		c->pend_head = r->next;
		kn__req_free(r);
	}
	c->pend_tail = NULL;
	sreq **pp = &c->fl_head;
	c->fl_tail = NULL;
	while (*pp) {
		sreq *r = *pp;
		if (kn__req_finished(r)) {
			*pp = r->next;
			kn__req_free(r);
		} else {
			c->fl_tail = r;
			pp = &r->next;
		}
	}
	conn_free_if_done(c);
}


/* One connection fewer: below max.connections the backlog is accepted again,
 * from a callback of its own (this runs inside a connection's close). */
void kn__conn_close(conn *c, const char *why)
{
	if (c->closed)
		return;
	KLOG_DEBUG("server", "%s: closing connection %llu: %s", c->peer, (unsigned long long)c->id, why);
	c->closed = 1;
	kn__conn_drop_budget(c);
	kn__conn_open_ended(c->s);
	/* Take the descriptor out of epoll (uv_close stops the poll handle)
	 * before close(2): once closed, its number may already belong to a file
	 * a worker opened. */
	uv_close((uv_handle_t *)&c->poll, on_handle_closed);
	uv_close((uv_handle_t *)&c->idle, on_handle_closed);
	close(c->fd);
	c->fd = -1;
	kn__conn_reap(c);
}

/* Nothing received is waiting for an answer (a partial frame does not count). */
int kn__conn_idle(const conn *c)
{
	return !c->pend_head && !c->fl_head && !c->running;
}

/* ---- reading and framing ------------------------------------------------------------ */

const char *kn__req_parse(conn *c, sreq *r)
{
	kw_rd rd;
	kw_rd_init(&rd, r->frame, r->frame_len);
	kw_req_header h;
	if (kw_req_header_prefix(&rd, &h))
		return "short request header";
	r->pub.api_key = h.api_key;
	r->pub.api_version = h.api_version;
	r->pub.correlation_id = h.correlation_id;
	r->pub.client_id = h.client_id;
	const kw_api *api = kw_api_find(kn_dispatch_table, kn_dispatch_table_len, h.api_key);
	if (!api || !api->handler) {
		KLOG_WARN("server", "%s: unknown API key %d (version %d, correlation id %d); closing the connection",
			  c->peer, h.api_key, h.api_version, h.correlation_id);
		return "unknown API key";
	}
	r->api = api;
	if (h.api_version < api->min || h.api_version > api->max) {
		r->unsupported = 1;
		r->pub.flex = 0;
	} else {
		r->pub.flex = kw_api_flexible(api, h.api_version);
		if (kw_req_header_rest(&rd, r->pub.flex, &h)) {
			KLOG_WARN("server", "%s: malformed %s v%d request header: bad field '%s'; closing",
				  c->peer, api->name, h.api_version, rd.err);
			return "malformed request header";
		}
		r->pub.client_id = h.client_id;
	}
	r->body = rd;
	return NULL;
}

static void frame_done(conn *c, uint8_t *f, size_t len)
{
	kn_server *s = c->s;
	sreq *r = calloc(1, sizeof(*r));
	if (!r) {
		free(f);
		kn__budget_release(c, len);
		kn__conn_close(c, "out of memory");
		return;
	}
	r->c = c;
	r->frame = f;
	r->frame_len = len;
	c->buffered += len + sizeof(*r);
	c->nreqs++;
	r->pub.broker = s->b;
	r->pub.client_id.len = -1;
	r->pub.conn_id = c->id;
	r->pub.peer = c->peer;
	r->pub.adv_host = c->lst->adv_host;
	r->pub.adv_port = c->lst->adv_port;
	r->pub.listener = c->lst->cfg.name;
	r->pub.principal = c->principal;
	r->pub.received_ms = (int64_t)uv_now(&s->loop);
	r->received_ns = ku_mono_ns();
	r->pub.sasl = c->sasl;
	r->pub.sasl_env = c->lst->sasl_env;
	/* Before authentication a frame may be an unframed SASL token: what it
	 * is depends on the step before it, known once that one has run. */
	if (c->sasl && !c->sasl_authed) {
		r->unparsed = 1;
	} else {
		const char *why = kn__req_parse(c, r);
		if (why) {
			kn__req_free(r);
			kn__conn_close(c, why);
			return;
		}
	}
	if (c->pend_tail)
		c->pend_tail->next = r;
	else
		c->pend_head = r;
	c->pend_tail = r;
}

/* Parses frames out of buf[0..n); a trailing partial frame is moved into
 * c->big (allocated at its full, already checked size) or c->carry.  Each
 * frame is admitted by queued.max.request.bytes before it is allocated; one
 * that does not fit makes c wait with the rest of buf kept. */
static int parse_frames(conn *c, const uint8_t *buf, size_t n)
{
	kn_server *s = c->s;
	int64_t max = s->b->cfg.socket_request_max_bytes, min = 8;
	int presasl = c->sasl && !c->sasl_authed;
	if (presasl) { /* sasl.server.max.receive.size; an unframed token may be short */
		if (max > c->lst->sasl_env->max_receive)
			max = c->lst->sasl_env->max_receive;
		min = 1;
	}
	size_t pos = 0;
	while (!c->closed && n - pos >= 4) {
		int32_t len = kw_get_i32(buf + pos);
		if ((int64_t)len > max && !c->ssl && pos == 0 && buf[0] == 0x16 && buf[1] == 0x03) {
			KLOG_INFO("server", "%s: a TLS handshake on the PLAINTEXT listener %s; closing", c->peer,
				  c->lst->cfg.name);
			kn__conn_close(c, "TLS on a PLAINTEXT listener");
			return -1;
		}
		if (len < min || (int64_t)len > max) {
			KLOG_WARN("server", "%s: request size %d outside [%lld, %lld] (%s); closing", c->peer, len,
				  (long long)min, (long long)max,
				  presasl ? "sasl.server.max.receive.size, before SASL authentication"
					  : "socket.request.max.bytes");
			kn__conn_close(c, "bad frame size");
			return -1;
		}
		size_t avail = n - pos - 4;
		if (!kn_budget_acquire(&s->budget, &c->bw, len)) {
			budget_wait(c, len, buf + pos, n - pos);
			return c->closed ? -1 : 0;
		}
		uint8_t *f = malloc((size_t)len);
		if (!f) {
			kn__budget_release(c, (size_t)len);
			kn__conn_close(c, "out of memory for a frame");
			return -1;
		}
		if (avail >= (size_t)len) {
			memcpy(f, buf + pos + 4, (size_t)len);
			pos += 4 + (size_t)len;
			frame_done(c, f, (size_t)len);
		} else {
			memcpy(f, buf + pos + 4, avail);
			c->big = f;
			c->big_len = (size_t)len;
			c->big_have = avail;
			c->buffered += (size_t)len;
			c->frame_start_ms = uv_now(&s->loop);
			return 0;
		}
	}
	if (!c->closed) {
		c->carry_len = n - pos;
		memcpy(c->carry, buf + pos, c->carry_len);
	}
	return 0;
}

static int reading_allowed(const conn *c)
{
	/* A frame being received is always finished: it was admitted by size.
	 * One waiting for queued.max.request.bytes is not read on. */
	return !c->closed && (c->lingering || (!c->s->draining && !c->sasl_closing && c->bw.state == KAAS_BW_IDLE &&
					       (c->big || (int64_t)c->buffered <
									      c->s->b->cfg.connection_max_buffered_bytes)));
}

/* A lingering connection: what the client still sends is read and dropped
 * until it closes its side. */
static void on_readable_linger(conn *c)
{
	kn_server *s = c->s;
	for (size_t total = 0; total < MAX_READ_PER_CB;) {
		ssize_t n = kn__conn_read(c, s->scratch, SCRATCH_SIZE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			kn__conn_close(c, n == 0 ? "closed by the client after the drain" : strerror(errno));
			return;
		}
		total += (size_t)n;
	}
}

static void on_readable(conn *c)
{
	kn_server *s = c->s;
	size_t total = 0;
	if (c->lingering) {
		on_readable_linger(c);
		return;
	}
	c->tls_rd_wants_write = 0;
	while (reading_allowed(c) && total < MAX_READ_PER_CB) {
		ssize_t n;
		/* Near the end of queued.max.request.bytes (or with others waiting
		 * for it) a frame's size is read alone: nothing is read past a
		 * frame that cannot be admitted yet. */
		int whole = !c->big && kn_budget_loose(&s->budget, SCRATCH_SIZE);
		if (c->big) {
			n = kn__conn_read(c, c->big + c->big_have, c->big_len - c->big_have);
		} else if (!whole) {
			n = kn__conn_read(c, c->carry + c->carry_len, 4 - c->carry_len);
		} else {
			memcpy(s->scratch, c->carry, c->carry_len);
			n = kn__conn_read(c, s->scratch + c->carry_len, SCRATCH_SIZE - c->carry_len);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			kn__conn_close(c, errno == EPROTO ? "TLS error" : strerror(errno));
			return;
		}
		if (n == 0) {
			kn__conn_close(c, "closed by the client");
			return;
		}
		total += (size_t)n;
		c->last_active = uv_now(&s->loop);
		if (c->big) {
			c->big_have += (size_t)n;
			if (c->big_have == c->big_len) {
				uint8_t *f = c->big;
				size_t len = c->big_len;
				c->big = NULL;
				c->buffered -= len;
				frame_done(c, f, len);
			}
		} else if (!whole) {
			c->carry_len += (size_t)n;
			if (c->carry_len == 4) {
				uint8_t size[4];
				memcpy(size, c->carry, 4);
				c->carry_len = 0;
				if (parse_frames(c, size, 4))
					return;
			}
		} else {
			size_t have = c->carry_len + (size_t)n;
			c->carry_len = 0;
			if (parse_frames(c, s->scratch, have))
				return;
		}
		kn__try_dispatch(c);
	}
	if (!c->closed)
		kn__update_poll(c);
}

static void on_poll(uv_poll_t *h, int status, int events);
static void on_idle_timer(uv_timer_t *t);

/* The idle timer lends itself for a moment: it is restarted after. */
static void on_tls_pending(uv_timer_t *t)
{
	conn *c = t->data;
	if (c->s->b->cfg.connections_max_idle_ms >= 0)
		uv_timer_start(&c->idle, on_idle_timer, (uint64_t)c->s->b->cfg.connections_max_idle_ms, 0);
	else
		uv_timer_stop(&c->idle);
	if (c->closed || c->lingering)
		return;
	on_readable(c);
	if (!c->closed)
		kn__after_progress(c);
}

void kn__update_poll(conn *c)
{
	if (c->closed)
		return;
	int ev = 0;
	if (c->ssl && !c->tls_ready) {
		ev = c->tls_rd_wants_write ? UV_WRITABLE : UV_READABLE; /* the handshake's */
	} else {
		if (reading_allowed(c) || c->tls_wr_wants_read)
			ev |= UV_READABLE;
		if (c->want_write || c->tls_rd_wants_write)
			ev |= UV_WRITABLE;
		/* Records OpenSSL has already taken off the socket: the poll
		 * would not report them, so a timer of 0 reads them. */
		if (!c->lingering && reading_allowed(c) && kn__tls_pending(c))
			uv_timer_start(&c->idle, on_tls_pending, 0, 0);
	}
	if (ev == c->poll_events)
		return;
	c->poll_events = ev;
	if (ev)
		uv_poll_start(&c->poll, ev, on_poll);
	else
		uv_poll_stop(&c->poll);
}

void kn__after_progress(conn *c)
{
	if (c->closed)
		return;
	kn__try_send(c);
	if (c->closed)
		return;
	kn__try_dispatch(c);
	if ((c->s->draining || c->sasl_closing) && kn__conn_idle(c)) {
		kn__conn_linger(c);
		return;
	}
	kn__update_poll(c);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	conn *c = h->data;
	if (status < 0) {
		kn__conn_close(c, uv_strerror(status));
		return;
	}
	if (c->ssl && !c->tls_ready) {
		int rc = kn__tls_handshake(c);
		if (rc <= 0) {
			if (rc == 0)
				kn__update_poll(c);
			return;
		}
		c->last_active = uv_now(&c->s->loop);
		if (!c->lingering) { /* else the drain's timer stays */
			if (c->s->b->cfg.connections_max_idle_ms >= 0)
				uv_timer_start(&c->idle, on_idle_timer,
					       (uint64_t)c->s->b->cfg.connections_max_idle_ms, 0);
			else
				uv_timer_stop(&c->idle);
		}
		events |= UV_READABLE; /* the client's first request may have come with its Finished */
	}
	if (c->tls_wr_wants_read && (events & UV_READABLE))
		events |= UV_WRITABLE;
	if (c->tls_rd_wants_write && (events & UV_WRITABLE))
		events |= UV_READABLE;
	if (events & UV_WRITABLE) {
		kn__try_send(c);
		if (c->closed)
			return;
	}
	if (events & UV_READABLE) {
		on_readable(c);
		if (c->closed)
			return;
	}
	kn__after_progress(c);
}

/* ---- idle connections --------------------------------------------------------------------- */

static void on_idle_timer(uv_timer_t *t)
{
	conn *c = t->data;
	if (c->ssl && !c->tls_ready) {
		KLOG_WARN("server", "%s: TLS handshake not finished within kaas.ssl.handshake.timeout.ms (%lld ms) "
			  "on listener %s; closing", c->peer, (long long)c->s->b->cfg.ssl_handshake_timeout_ms,
			  c->lst->cfg.name);
		kn__conn_close(c, "TLS handshake timeout");
		return;
	}
	int64_t idle = c->s->b->cfg.connections_max_idle_ms;
	uint64_t now = uv_now(&c->s->loop);
	uint64_t since = now - c->last_active;
	/* A request waiting for queued.max.request.bytes waits on the broker. */
	if (since >= (uint64_t)idle && kn__conn_idle(c) && c->bw.state == KAAS_BW_IDLE) {
		KLOG_INFO("server", "%s: closing connection idle for %llu ms (connections.max.idle.ms)", c->peer,
			  (unsigned long long)since);
		kn__conn_close(c, "idle");
		return;
	}
	uint64_t next = since >= (uint64_t)idle ? (uint64_t)idle : (uint64_t)idle - since;
	uv_timer_start(&c->idle, on_idle_timer, next, 0);
}

/* ---- shutting a connection down gently ---------------------------------------------------- */

static void on_linger_timer(uv_timer_t *t)
{
	kn__conn_close(t->data, "the client did not close after the drain");
}

/* Draining, and every answer is with the kernel.  close(2) now would reset
 * the connection if the client has sent more than was read (pipelined
 * requests that arrived after SIGTERM), and a reset discards the answers the
 * kernel has not delivered yet.  So: FIN after the answers, drop what the
 * client still sends, close at its EOF or after LINGER_MS. */
void kn__conn_linger(conn *c)
{
	if (c->closed || c->lingering)
		return;
	c->lingering = 1;
	c->want_write = 0;
	kn__conn_drop_budget(c); /* what it still sends is discarded */
	kn__tls_close_notify(c);
	shutdown(c->fd, SHUT_WR);
	int64_t ms = c->s->b->cfg.shutdown_timeout_ms < LINGER_MS ? c->s->b->cfg.shutdown_timeout_ms : LINGER_MS;
	uv_timer_start(&c->idle, on_linger_timer, (uint64_t)ms, 0);
	kn__update_poll(c);
}

void kn__conn_new(kn_server *s, kn_listener *l, int fd, const struct sockaddr_storage *ss)
{
	conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->s = s;
	c->lst = l;
	c->fd = fd;
	c->id = ++s->next_conn_id;
	snprintf(c->principal, sizeof(c->principal), "User:ANONYMOUS");
	c->addr = *ss;
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;
		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		port = ntohs(a->sin_port);
		snprintf(c->peer, sizeof(c->peer), "%s:%d", host, port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const void *)ss;
		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		port = ntohs(a->sin6_port);
		snprintf(c->peer, sizeof(c->peer), "[%s]:%d", host, port);
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (uv_poll_init(&s->loop, &c->poll, fd)) {
		close(fd);
		free(c);
		return;
	}
	c->poll.data = c;
	uv_timer_init(&s->loop, &c->idle);
	c->idle.data = c;
	c->handles_open = 2;
	c->last_active = uv_now(&s->loop);
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->nconns++;
	s->nopen++;
	int proto = l->cfg.protocol;
	if (proto == KB_SEC_SASL_PLAINTEXT || proto == KB_SEC_SASL_SSL) {
		c->sasl = kn_sasl_new();
		if (!c->sasl) {
			kn__conn_close(c, "out of memory for SASL");
			return;
		}
	}
	if (proto == KB_SEC_SSL || proto == KB_SEC_SASL_SSL) {
		if (kn__tls_conn_start(c)) {
			kn__conn_close(c, "out of memory for TLS");
			return;
		}
		uv_timer_start(&c->idle, on_idle_timer, (uint64_t)s->b->cfg.ssl_handshake_timeout_ms, 0);
	} else if (s->b->cfg.connections_max_idle_ms >= 0) {
		uv_timer_start(&c->idle, on_idle_timer, (uint64_t)s->b->cfg.connections_max_idle_ms, 0);
	}
	kn__update_poll(c);
	KLOG_DEBUG("server", "%s: connection %llu accepted", c->peer, (unsigned long long)c->id);
}


/* ---- frames that arrive too slowly (kaas.request.min.bytes.per.sec) -------------------------- */

/* A frame being received holds its whole size of queued.max.request.bytes
 * from its first byte: a client that announces a large frame and trickles it
 * holds that room for as long as it likes, and a few such clients starve
 * every other one.  Once a frame has had REQUEST_RATE_GRACE_MS, it must have
 * averaged the minimum rate since its size was read, or it is dropped with
 * its connection (its room goes back to the line at once). */
static void check_frame_rate(conn *c, uint64_t now, int64_t rate)
{
	kn_server *s = c->s;
	uint64_t elapsed = now - c->frame_start_ms;
	if (elapsed < REQUEST_RATE_GRACE_MS || (uint64_t)c->big_have * 1000 >= (uint64_t)rate * elapsed)
		return;
	s->slow_frames++;
	ku_counter_add(s->m_slow, 1);
	KLOG_WARN("server", "%s: a %zu-byte request arrived at %llu bytes/s (%zu bytes in %llu ms), below "
		  "kaas.request.min.bytes.per.sec=%lld: dropping it and closing the connection (%llu slow frame(s) "
		  "dropped so far)",
		  c->peer, c->big_len, (unsigned long long)((uint64_t)c->big_have * 1000 / elapsed), c->big_have,
		  (unsigned long long)elapsed, (long long)rate, (unsigned long long)s->slow_frames);
	kn__conn_close(c, "request frame below the minimum rate");
}

static void on_frame_timer(uv_timer_t *t)
{
	kn_server *s = t->data;
	int64_t rate = s->b->cfg.request_min_bytes_per_sec;
	uint64_t now = uv_now(&s->loop);
	for (conn *c = s->conns, *n; c; c = n) {
		n = c->next; /* closing never frees c here: its handles close later */
		if (c->big && !c->closed && !c->lingering)
			check_frame_rate(c, now, rate);
	}
}

void kn__frame_watch_start(kn_server *s)
{
	if (s->b->cfg.request_min_bytes_per_sec > 0)
		uv_timer_start(&s->frame_timer, on_frame_timer, FRAME_CHECK_MS, FRAME_CHECK_MS);
}
