/*
 * server.c — the event loop: accept, frame, dispatch, respond in order.
 *
 * The discipline is libuv's and Redis's: the loop thread only moves bytes.
 * Sockets are raw non-blocking descriptors watched with uv_poll so that the
 * loop can write responses with writev and stream segment ranges with
 * sendfile(2); everything that may block on the volume runs on the worker
 * pool (pool.c).  Each callback does bounded work (MAX_READ_PER_CB,
 * MAX_SEND_PER_CB, MAX_ACCEPT_PER_CB) and relies on level-triggered polling
 * to come back.
 *
 * Per connection:
 *   pending   frames received, not yet handed to a worker (FIFO)
 *   inflight  requests handed out, in arrival order; responses leave from its
 *             head only, so pipelined requests are answered in order even
 *             when a later handler finishes first
 *   running   the one request whose handler is executing: a connection's
 *             handlers run one at a time, in order; a handler that returns
 *             KAAS_DEFERRED frees the connection for its next request.
 * Workers and completers never touch a connection: they fill in the request
 * and post an event (mutex-protected list + uv_async_send); the loop applies
 * it.  A request is freed by the loop once its handler has returned and its
 * response was sent (or it had none, or the connection is gone).
 *
 * Frames: the 4-byte size is checked against socket.request.max.bytes (and a
 * minimum of one header) before anything is allocated; a bad size closes the
 * connection, as Kafka does.  Unknown API keys close the connection (Kafka's
 * behaviour: there is no way to frame an answer the client would read);
 * unsupported versions of known APIs get an UNSUPPORTED_VERSION response.
 *
 * Backpressure: while a connection has more than
 * kaas.connection.max.buffered.bytes of responses its client has not read,
 * no further request of it is processed; while it holds more than that of
 * unanswered requests plus unsent responses, it is not read from.  A client
 * that stops reading therefore costs a bounded amount of memory.
 *
 * Broker-wide limits: every frame is admitted by queued.max.request.bytes
 * (budget.c) before its buffer is allocated and holds its bytes until the
 * request is freed.  A frame that does not fit keeps only what was read of it
 * (its 4-byte size, or at most one read's worth) and its connection stops
 * being read until the budget grants it, in the order the frames started
 * waiting; the grant is applied from a timer callback of its own, so frees
 * anywhere (a send, a completion, a close) wake the waiters.  While the
 * budget is nearly used up or someone waits, frame sizes are read alone, so
 * nothing is read past a frame that is not admitted.  At max.connections
 * the listening socket is not polled (new connections wait in the backlog);
 * over max.connections.per.ip a new connection is closed at once.
 *
 * SIGTERM: the listening socket is closed and no more requests are read;
 * requests already received are answered, then each connection is shut down
 * gently (FIN after the last answer, input discarded until the client
 * closes), because a close(2) with unread input would reset the connection
 * and lose answers still in the kernel's send queue.
 */
#include "kaas/net/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <uv.h>

#include "kaas/proto/header.h"
#include "kaas/net/budget.h"
#include "kaas/net/pool.h"
#include "kaas/core/ptable.h"
#include "kaas/core/splice.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

#define SCRATCH_SIZE (64 * 1024)
#define MAX_READ_PER_CB (1 << 20)
#define MAX_SEND_PER_CB (4 << 20)
#define MAX_ACCEPT_PER_CB 64
#define MAX_IOV 64
#define MAX_EVENTS_PER_CB 4096
#define HOUSEKEEP_MS 1000
#define LINGER_MS 5000

typedef struct ev {
	struct ev *next;
	struct sreq *r;
	int kind;
} ev;
enum { EV_DONE = 1, EV_RESP = 2 };

typedef struct part {
	const uint8_t *mem; /* NULL: a file range */
	int fd;
	uint64_t pos;
	size_t len;
} part;

typedef struct conn conn;

typedef struct sreq {
	kb_req pub; /* first: handlers get &pub */
	conn *c;
	struct sreq *next;
	uint8_t *frame;
	size_t frame_len;
	const kw_api *api;
	kw_rd body;
	int unsupported;
	int result; /* handler's return value, set before EV_DONE */
	/* the response, built by a worker or completer before it posts */
	uint8_t hdr[9];
	uint8_t *body_buf;
	size_t body_len;
	part *parts;
	int nparts;
	int cur;
	size_t cur_off;
	size_t resp_mem;
	int resp_bad;
	/* loop-side state */
	int handler_done, ready, counted;
	ev ev_done, ev_resp;
} sreq;

struct conn {
	kn_server *s;
	int fd;
	uint64_t id;
	char peer[64];
	uv_poll_t poll;
	uv_timer_t idle;
	int poll_events;
	int closed;
	int lingering; /* draining: answers sent, FIN sent, discarding input */
	int handles_open;
	uint64_t last_active;
	/* input */
	uint8_t carry[4];
	size_t carry_len;
	uint8_t *big;
	size_t big_len, big_have;
	sreq *pend_head, *pend_tail;
	sreq *fl_head, *fl_tail;
	sreq *running;
	size_t buffered;   /* frames held + response memory not yet sent */
	size_t out_mem;    /* response memory not yet sent */
	int nreqs;
	int want_write;
	/* queued.max.request.bytes: a frame waiting for room keeps what was read
	 * of it (its size, and in a whole-chunk read what followed) in stash */
	kn_budget_waiter bw;
	uint8_t *stash;
	size_t stash_len;
	struct sockaddr_storage addr;
	conn *prev, *next;
};

#define CONN_OF_WAITER(w) ((conn *)((char *)(w) - offsetof(conn, bw)))

struct kn_server {
	kb_broker *b;
	uv_loop_t loop;
	int lfd;
	int port;
	uv_poll_t lpoll;
	int lpoll_active;
	uv_timer_t accept_pause;
	uv_async_t async;
	uv_signal_t sigterm, sigint;
	uv_timer_t drain_deadline;
	kn_pool *pool;
	pthread_mutex_t evmu;
	ev *evhead, *evtail;
	int async_alive;
	conn *conns;
	int nconns;
	int nopen;        /* connections not closed yet: max.connections */
	int accept_full;  /* at max.connections: the listening socket is not polled */
	int accept_episode; /* max.connections was reached; logged until the backlog is empty */
	int ip_refusing;  /* at max.connections.per.ip for ip_refused (logged once) */
	struct sockaddr_storage ip_refused;
	uint64_t ip_refused_n;
	kn_budget budget;      /* queued.max.request.bytes */
	uv_timer_t budget_timer; /* resumes the connections the budget granted */
	int budget_episode;      /* a pause was logged; its end is logged once */
	uint64_t budget_waited;
	uint64_t next_conn_id;
	int draining;
	int stopped;
	uint8_t scratch[SCRATCH_SIZE];
	kb_server_ops ops;
	kb_timer *hk_timer;
	pthread_mutex_t hkmu;
	int hk_stop;
};

static void conn_close(conn *c, const char *why);
static void conn_linger(conn *c);
static void try_send(conn *c);
static void try_dispatch(conn *c);
static void update_poll(conn *c);
static void check_drained(kn_server *s);
static void after_progress(conn *c);
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
		KLOG_INFO("server", "queued.max.request.bytes: every waiting request has room again "
			  "(%llu waited); reading resumed", (unsigned long long)s->budget_waited);
		s->budget_episode = 0;
		s->budget_waited = 0;
	}
}

static void budget_release(kn_server *s, size_t n)
{
	kn_budget_release(&s->budget, (int64_t)n);
	budget_kick(s);
}

/* The frame whose size starts buf[0..n) does not fit: c waits in line with
 * those n bytes (at most one read's worth) kept and counted. */
static void budget_wait(conn *c, int32_t len, const uint8_t *buf, size_t n)
{
	kn_server *s = c->s;
	s->budget_waited++;
	if (!s->budget_episode) {
		s->budget_episode = 1;
		KLOG_INFO("server", "queued.max.request.bytes (%lld) is used up (%lld bytes of requests held): "
			  "new requests wait until answers free room",
			  (long long)s->budget.limit, (long long)s->budget.held);
	}
	KLOG_DEBUG("server", "%s: a %d-byte request waits for queued.max.request.bytes (%d waiting, %lld held)",
		   c->peer, len, s->budget.nqueued, (long long)s->budget.held);
	c->stash = malloc(n);
	if (!c->stash) {
		conn_close(c, "out of memory");
		return;
	}
	memcpy(c->stash, buf, n);
	c->stash_len = n;
	kn_budget_keep(&s->budget, &c->bw, (int64_t)n);
}

/* Gives back whatever c holds of the budget: its place in line or its grant,
 * the bytes kept while waiting, a frame it was receiving. */
static void conn_drop_budget(conn *c)
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
	budget_release(s, n);
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
		budget_release(s, need + sl);
		return;
	}
	KLOG_DEBUG("server", "%s: the %zu-byte request has room in queued.max.request.bytes; reading on", c->peer,
		   need);
	uint8_t *f = malloc(need);
	if (!f) {
		free(st);
		budget_release(s, need + sl);
		conn_close(c, "out of memory for a frame");
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
	}
	free(st);
	budget_release(s, sl);
	after_progress(c);
}

static void on_budget_timer(uv_timer_t *t)
{
	kn_server *s = t->data;
	kn_budget_waiter *w;
	for (int i = 0; i < MAX_EVENTS_PER_CB && !s->stopped && (w = kn_budget_collect(&s->budget)); i++)
		budget_resume(CONN_OF_WAITER(w));
	budget_kick(s); /* more than one callback's worth: come back */
}

/* ---- requests ----------------------------------------------------------------- */

static void splices_free_job(void *arg) { kb_splices_free(arg); }

static void req_free(sreq *r)
{
	conn *c = r->c;
	budget_release(c->s, r->frame_len);
	c->buffered -= r->frame_len + sizeof(*r) + (r->counted ? r->resp_mem : 0);
	if (r->counted)
		c->out_mem -= r->resp_mem;
	c->nreqs--;
	if (r->pub.splices) {
		/* Releasing read plans may close files: not on the loop. */
		if (kn_pool_run(c->s->pool, splices_free_job, r->pub.splices))
			kb_splices_free(r->pub.splices);
	}
	free(r->frame);
	free(r->body_buf);
	free(r->parts);
	free(r);
}

/* Turns a finished body (+ splices) into the parts to send.  Any thread. */
static void build_response(sreq *r, kw_wr *w)
{
	struct kb_splices *sp = r->pub.splices;
	int flex = r->pub.flex && r->pub.api_key != KAAS_API_API_VERSIONS;
	size_t hl = flex ? 9 : 8;
	uint64_t total = (hl - 4) + (uint64_t)w->len + (sp ? sp->total : 0);
	if (w->oom || total > INT32_MAX) {
		r->resp_bad = 1;
		return;
	}
	kw_put_i32(r->hdr, (int32_t)total);
	kw_put_i32(r->hdr + 4, r->pub.correlation_id);
	r->hdr[8] = 0;
	r->body_buf = kw_wr_take(w, &r->body_len);
	int maxparts = 2 + (sp ? 2 * sp->n : 0);
	r->parts = calloc((size_t)maxparts, sizeof(part));
	if (!r->parts) {
		r->resp_bad = 1;
		return;
	}
	int n = 0;
	r->parts[n++] = (part){r->hdr, -1, 0, hl};
	size_t prev = 0;
	for (int i = 0; sp && i < sp->n; i++) {
		size_t at = sp->v[i].at;
		if (at > r->body_len || at < prev) {
			r->resp_bad = 1;
			return;
		}
		if (at > prev)
			r->parts[n++] = (part){r->body_buf + prev, -1, 0, at - prev};
		r->parts[n++] = (part){NULL, sp->v[i].fd, sp->v[i].pos, sp->v[i].len};
		prev = at;
	}
	if (r->body_len > prev)
		r->parts[n++] = (part){r->body_buf + prev, -1, 0, r->body_len - prev};
	r->nparts = n;
	r->resp_mem = hl + r->body_len;
}

static void post(sreq *r, int kind)
{
	kn_server *s = r->c->s;
	ev *e = kind == EV_DONE ? &r->ev_done : &r->ev_resp;
	e->r = r;
	e->kind = kind;
	e->next = NULL;
	pthread_mutex_lock(&s->evmu);
	if (s->evtail)
		s->evtail->next = e;
	else
		s->evhead = e;
	s->evtail = e;
	if (s->async_alive)
		uv_async_send(&s->async);
	pthread_mutex_unlock(&s->evmu);
}

static void run_req(void *arg)
{
	sreq *r = arg;
	kw_wr w = KAAS_WR_INIT;
	int rc;
	if (r->unsupported) {
		const kw_api *api = r->api;
		KLOG_INFO("server", "%s: %s v%d is not supported (kaas serves v%d-v%d): UNSUPPORTED_VERSION",
			  r->pub.peer, api->name, r->pub.api_version, api->min, api->max);
		if (api->key == KAAS_API_API_VERSIONS)
			kw_api_versions_write(&w, 0, KERR_UNSUPPORTED_VERSION, kn_dispatch_table,
						kn_dispatch_table_len);
		else
			kw_wr_i16(&w, KERR_UNSUPPORTED_VERSION);
		rc = KAAS_HANDLED;
	} else {
		rc = r->api->handler(&r->pub, &r->body, &w);
		if (rc == -ECONNABORTED)
			KLOG_INFO("server", "%s: %s v%d (correlation id %d) failed without an answer to carry the error; closing",
				  r->pub.peer, r->api->name, r->pub.api_version, r->pub.correlation_id);
		else if (rc == -EBADMSG)
			KLOG_WARN("server", "%s: malformed %s v%d request (correlation id %d): bad field '%s'; closing",
				  r->pub.peer, r->api->name, r->pub.api_version, r->pub.correlation_id,
				  r->body.err ? r->body.err : "?");
		else if (rc < 0)
			KLOG_ERR("server", "%s: %s v%d failed: %s; closing", r->pub.peer, r->api->name,
				 r->pub.api_version, strerror(-rc));
	}
	if (rc == KAAS_HANDLED)
		build_response(r, &w);
	kw_wr_free(&w);
	r->result = rc;
	post(r, EV_DONE);
}

static void op_complete(void *server, kb_req *req, kw_wr *resp)
{
	(void)server;
	sreq *r = (sreq *)req;
	build_response(r, resp);
	kw_wr_free(resp);
	post(r, EV_RESP);
}

static int op_run(void *server, kb_work_fn fn, void *arg)
{
	return kn_pool_run(((kn_server *)server)->pool, fn, arg);
}

static kb_timer *op_timer_start(void *server, int64_t delay_ms, kb_work_fn fn, void *arg)
{
	return kn_pool_timer(((kn_server *)server)->pool, delay_ms, fn, arg);
}

static int op_timer_cancel(void *server, kb_timer *t)
{
	return kn_pool_timer_cancel(((kn_server *)server)->pool, t);
}

/* A request is done with once its handler returned and its response (if any)
 * has arrived. */
static int req_finished(const sreq *r)
{
	return r->handler_done && (r->result != KAAS_DEFERRED || r->ready);
}

static int req_silent(const sreq *r)
{
	return r->handler_done && (r->result == KAAS_NO_RESPONSE || r->result < 0);
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
		free(c);
		check_drained(s);
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
static void conn_reap(conn *c)
{
	while (c->pend_head) {
		sreq *r = c->pend_head;
		c->pend_head = r->next;
		req_free(r);
	}
	c->pend_tail = NULL;
	sreq **pp = &c->fl_head;
	c->fl_tail = NULL;
	while (*pp) {
		sreq *r = *pp;
		if (req_finished(r)) {
			*pp = r->next;
			req_free(r);
		} else {
			c->fl_tail = r;
			pp = &r->next;
		}
	}
	conn_free_if_done(c);
}

static void on_accept_resume(uv_timer_t *t);

/* One connection fewer: below max.connections the backlog is accepted again,
 * from a callback of its own (this runs inside a connection's close). */
static void conn_open_ended(kn_server *s)
{
	s->nopen--;
	if (s->accept_full && s->nopen < s->b->cfg.max_connections && !s->draining && !s->stopped &&
	    s->lpoll_active) {
		s->accept_full = 0;
		uv_timer_start(&s->accept_pause, on_accept_resume, 0, 0);
	}
}

static void conn_close(conn *c, const char *why)
{
	if (c->closed)
		return;
	KLOG_DEBUG("server", "%s: closing connection %llu: %s", c->peer, (unsigned long long)c->id, why);
	c->closed = 1;
	conn_drop_budget(c);
	conn_open_ended(c->s);
	/* Take the descriptor out of epoll (uv_close stops the poll handle)
	 * before close(2): once closed, its number may already belong to a file
	 * a worker opened. */
	uv_close((uv_handle_t *)&c->poll, on_handle_closed);
	uv_close((uv_handle_t *)&c->idle, on_handle_closed);
	close(c->fd);
	c->fd = -1;
	conn_reap(c);
}

/* Nothing received is waiting for an answer (a partial frame does not count). */
static int conn_idle(const conn *c)
{
	return !c->pend_head && !c->fl_head && !c->running;
}

/* ---- reading and framing ------------------------------------------------------------ */

static void frame_done(conn *c, uint8_t *f, size_t len)
{
	kn_server *s = c->s;
	sreq *r = calloc(1, sizeof(*r));
	if (!r) {
		free(f);
		budget_release(s, len);
		conn_close(c, "out of memory");
		return;
	}
	r->c = c;
	r->frame = f;
	r->frame_len = len;
	c->buffered += len + sizeof(*r);
	c->nreqs++;
	kw_rd rd;
	kw_rd_init(&rd, f, len);
	kw_req_header h;
	if (kw_req_header_prefix(&rd, &h)) {
		req_free(r);
		conn_close(c, "short request header");
		return;
	}
	r->pub.broker = s->b;
	r->pub.api_key = h.api_key;
	r->pub.api_version = h.api_version;
	r->pub.correlation_id = h.correlation_id;
	r->pub.client_id = h.client_id;
	r->pub.conn_id = c->id;
	r->pub.peer = c->peer;
	r->pub.received_ms = (int64_t)uv_now(&s->loop);
	const kw_api *api = kw_api_find(kn_dispatch_table, kn_dispatch_table_len, h.api_key);
	if (!api || !api->handler) {
		KLOG_WARN("server", "%s: unknown API key %d (version %d, correlation id %d); closing the connection",
			  c->peer, h.api_key, h.api_version, h.correlation_id);
		req_free(r);
		conn_close(c, "unknown API key");
		return;
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
			req_free(r);
			conn_close(c, "malformed request header");
			return;
		}
		r->pub.client_id = h.client_id;
	}
	r->body = rd;
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
	int64_t max = s->b->cfg.socket_request_max_bytes;
	size_t pos = 0;
	while (!c->closed && n - pos >= 4) {
		int32_t len = kw_get_i32(buf + pos);
		if (len < 8 || (int64_t)len > max) {
			KLOG_WARN("server", "%s: request size %d outside [8, %lld] (socket.request.max.bytes); closing",
				  c->peer, len, (long long)max);
			conn_close(c, "bad frame size");
			return -1;
		}
		size_t avail = n - pos - 4;
		if (!kn_budget_acquire(&s->budget, &c->bw, len)) {
			budget_wait(c, len, buf + pos, n - pos);
			return c->closed ? -1 : 0;
		}
		uint8_t *f = malloc((size_t)len);
		if (!f) {
			budget_release(s, (size_t)len);
			conn_close(c, "out of memory for a frame");
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
	return !c->closed && (c->lingering || (!c->s->draining && c->bw.state == KAAS_BW_IDLE &&
					       (c->big || (int64_t)c->buffered <
									      c->s->b->cfg.connection_max_buffered_bytes)));
}

/* A lingering connection: what the client still sends is read and dropped
 * until it closes its side. */
static void on_readable_linger(conn *c)
{
	kn_server *s = c->s;
	for (size_t total = 0; total < MAX_READ_PER_CB;) {
		ssize_t n = read(c->fd, s->scratch, SCRATCH_SIZE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			conn_close(c, n == 0 ? "closed by the client after the drain" : strerror(errno));
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
	while (reading_allowed(c) && total < MAX_READ_PER_CB) {
		ssize_t n;
		/* Near the end of queued.max.request.bytes (or with others waiting
		 * for it) a frame's size is read alone: nothing is read past a
		 * frame that cannot be admitted yet. */
		int whole = !c->big && kn_budget_loose(&s->budget, SCRATCH_SIZE);
		if (c->big) {
			n = read(c->fd, c->big + c->big_have, c->big_len - c->big_have);
		} else if (!whole) {
			n = read(c->fd, c->carry + c->carry_len, 4 - c->carry_len);
		} else {
			memcpy(s->scratch, c->carry, c->carry_len);
			n = read(c->fd, s->scratch + c->carry_len, SCRATCH_SIZE - c->carry_len);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			conn_close(c, strerror(errno));
			return;
		}
		if (n == 0) {
			conn_close(c, "closed by the client");
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
		try_dispatch(c);
	}
	if (!c->closed)
		update_poll(c);
}

/* ---- dispatching and responding ------------------------------------------------------ */

static void try_dispatch(conn *c)
{
	if (c->closed || c->running || !c->pend_head)
		return;
	/* A client that does not read its responses gets no new ones: the
	 * requests wait, and once they fill the budget reading stops too. */
	if ((int64_t)c->out_mem >= c->s->b->cfg.connection_max_buffered_bytes)
		return;
	sreq *r = c->pend_head;
	c->pend_head = r->next;
	if (!c->pend_head)
		c->pend_tail = NULL;
	r->next = NULL;
	if (c->fl_tail)
		c->fl_tail->next = r;
	else
		c->fl_head = r;
	c->fl_tail = r;
	c->running = r;
	if (kn_pool_run(c->s->pool, run_req, r)) {
		/* Cannot happen before shutdown; treat as a dead connection. */
		c->running = NULL;
		r->handler_done = 1;
		r->result = -ESHUTDOWN;
		conn_close(c, "worker pool stopped");
	}
}

/* Consumes `n` sent bytes from the in-flight queue (skipping what was sent
 * already) and frees the requests at its head that are completely done. */
static void advance(conn *c, size_t n)
{
	for (sreq *q = c->fl_head; q && n > 0; q = q->next) {
		if (req_silent(q))
			continue;
		if (!q->ready)
			break;
		while (n > 0 && q->cur < q->nparts) {
			size_t left = q->parts[q->cur].len - q->cur_off;
			if (n >= left) {
				n -= left;
				q->cur++;
				q->cur_off = 0;
			} else {
				q->cur_off += n;
				n = 0;
			}
		}
	}
	while (c->fl_head) {
		sreq *r = c->fl_head;
		/* A deferred response can be sent before its handler has returned;
		 * the request is freed only once both happened. */
		if (!req_silent(r) && !(r->ready && r->cur == r->nparts && r->handler_done))
			break;
		c->fl_head = r->next;
		if (!c->fl_head)
			c->fl_tail = NULL;
		req_free(r);
	}
}

static void try_send(conn *c)
{
	size_t budget = MAX_SEND_PER_CB;
	c->want_write = 0;
	while (!c->closed && budget > 0) {
		advance(c, 0);
		sreq *r = c->fl_head;
		while (r && (req_silent(r) || (r->ready && r->cur == r->nparts)))
			r = r->next;
		if (!r || !r->ready)
			break;
		part *p = &r->parts[r->cur];
		ssize_t k;
		size_t want;
		if (!p->mem) {
			want = p->len - r->cur_off;
			if (want > budget)
				want = budget;
			off_t pos = (off_t)(p->pos + r->cur_off);
			k = sendfile(c->fd, p->fd, &pos, want);
			if (k == 0) {
				KLOG_ERR("server", "%s: a segment file ended before the range being sent", c->peer);
				conn_close(c, "short segment file");
				return;
			}
		} else {
			struct iovec iov[MAX_IOV];
			int niov = 0;
			want = 0;
			for (sreq *q = r; q && niov < MAX_IOV && want < budget; q = q->next) {
				if (req_silent(q))
					continue;
				if (!q->ready)
					break;
				int pi;
				for (pi = q->cur; pi < q->nparts && niov < MAX_IOV; pi++) {
					part *qp = &q->parts[pi];
					if (!qp->mem)
						break;
					size_t o = pi == q->cur ? q->cur_off : 0;
					iov[niov].iov_base = (void *)(qp->mem + o);
					iov[niov].iov_len = qp->len - o;
					want += qp->len - o;
					niov++;
				}
				if (pi < q->nparts)
					break; /* a file part (or iov full): stop gathering here */
			}
			struct msghdr mh = {0};
			mh.msg_iov = iov;
			mh.msg_iovlen = (size_t)niov;
			k = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		}
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				c->want_write = 1;
				break;
			}
			conn_close(c, strerror(errno));
			return;
		}
		c->last_active = uv_now(&c->s->loop);
		advance(c, (size_t)k);
		budget -= (size_t)k < budget ? (size_t)k : budget;
		if ((size_t)k < want) {
			c->want_write = 1;
			break;
		}
	}
	if (!c->closed && budget == 0)
		c->want_write = 1; /* more to send: come back on the next writable event */
}

static void on_poll(uv_poll_t *h, int status, int events);

static void update_poll(conn *c)
{
	if (c->closed)
		return;
	int ev = 0;
	if (reading_allowed(c))
		ev |= UV_READABLE;
	if (c->want_write)
		ev |= UV_WRITABLE;
	if (ev == c->poll_events)
		return;
	c->poll_events = ev;
	if (ev)
		uv_poll_start(&c->poll, ev, on_poll);
	else
		uv_poll_stop(&c->poll);
}

static void after_progress(conn *c)
{
	if (c->closed)
		return;
	try_send(c);
	if (c->closed)
		return;
	try_dispatch(c);
	if (c->s->draining && conn_idle(c)) {
		conn_linger(c);
		return;
	}
	update_poll(c);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	conn *c = h->data;
	if (status < 0) {
		conn_close(c, uv_strerror(status));
		return;
	}
	if (events & UV_WRITABLE) {
		try_send(c);
		if (c->closed)
			return;
	}
	if (events & UV_READABLE) {
		on_readable(c);
		if (c->closed)
			return;
	}
	after_progress(c);
}

static void on_async(uv_async_t *h)
{
	kn_server *s = h->data;
	for (int i = 0; i < MAX_EVENTS_PER_CB; i++) {
		if (s->stopped)
			return;
		pthread_mutex_lock(&s->evmu);
		ev *e = s->evhead;
		if (e) {
			s->evhead = e->next;
			if (!s->evhead)
				s->evtail = NULL;
		}
		pthread_mutex_unlock(&s->evmu);
		if (!e)
			return;
		sreq *r = e->r;
		conn *c = r->c;
		if (e->kind == EV_DONE) {
			r->handler_done = 1;
			if (c->running == r)
				c->running = NULL;
			if (r->result == KAAS_HANDLED)
				r->ready = 1;
		} else {
			r->ready = 1;
		}
		if (r->ready && !r->counted && !r->resp_bad) {
			r->counted = 1;
			c->buffered += r->resp_mem;
			c->out_mem += r->resp_mem;
		}
		/* Closing may free r (and, once idle, c): nothing touches them after. */
		if (c->closed) {
			conn_reap(c);
			continue;
		}
		if (r->handler_done && r->result < 0) {
			conn_close(c, "request failed");
			continue;
		}
		if (r->ready && r->resp_bad) {
			KLOG_ERR("server", "%s: the %s response could not be built (out of memory or over 2 GiB)",
				 c->peer, r->api ? r->api->name : "?");
			conn_close(c, "response could not be built");
			continue;
		}
		after_progress(c);
	}
	/* More events than one callback may handle: come back. */
	if (!s->stopped)
		uv_async_send(&s->async);
}

/* ---- idle connections --------------------------------------------------------------------- */

static void on_idle_timer(uv_timer_t *t)
{
	conn *c = t->data;
	int64_t idle = c->s->b->cfg.connections_max_idle_ms;
	uint64_t now = uv_now(&c->s->loop);
	uint64_t since = now - c->last_active;
	/* A request waiting for queued.max.request.bytes waits on the broker. */
	if (since >= (uint64_t)idle && conn_idle(c) && c->bw.state == KAAS_BW_IDLE) {
		KLOG_INFO("server", "%s: closing connection idle for %llu ms (connections.max.idle.ms)", c->peer,
			  (unsigned long long)since);
		conn_close(c, "idle");
		return;
	}
	uint64_t next = since >= (uint64_t)idle ? (uint64_t)idle : (uint64_t)idle - since;
	uv_timer_start(&c->idle, on_idle_timer, next, 0);
}

/* ---- shutting a connection down gently ---------------------------------------------------- */

static void on_linger_timer(uv_timer_t *t)
{
	conn_close(t->data, "the client did not close after the drain");
}

/* Draining, and every answer is with the kernel.  close(2) now would reset
 * the connection if the client has sent more than was read (pipelined
 * requests that arrived after SIGTERM), and a reset discards the answers the
 * kernel has not delivered yet.  So: FIN after the answers, drop what the
 * client still sends, close at its EOF or after LINGER_MS. */
static void conn_linger(conn *c)
{
	if (c->closed || c->lingering)
		return;
	c->lingering = 1;
	c->want_write = 0;
	conn_drop_budget(c); /* what it still sends is discarded */
	shutdown(c->fd, SHUT_WR);
	int64_t ms = c->s->b->cfg.shutdown_timeout_ms < LINGER_MS ? c->s->b->cfg.shutdown_timeout_ms : LINGER_MS;
	uv_timer_start(&c->idle, on_linger_timer, (uint64_t)ms, 0);
	update_poll(c);
}

/* ---- accepting ------------------------------------------------------------------------------- */

static void on_accept(uv_poll_t *h, int status, int events);

static void on_accept_resume(uv_timer_t *t)
{
	kn_server *s = t->data;
	if (!s->draining && s->lpoll_active && !s->accept_full) {
		uv_poll_start(&s->lpoll, UV_READABLE, on_accept);
		on_accept(&s->lpoll, 0, UV_READABLE); /* also learns that the backlog is empty */
	}
}

static void conn_new(kn_server *s, int fd, const struct sockaddr_storage *ss)
{
	conn *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->s = s;
	c->fd = fd;
	c->id = ++s->next_conn_id;
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
	if (s->b->cfg.connections_max_idle_ms >= 0)
		uv_timer_start(&c->idle, on_idle_timer, (uint64_t)s->b->cfg.connections_max_idle_ms, 0);
	update_poll(c);
	KLOG_DEBUG("server", "%s: connection %llu accepted", c->peer, (unsigned long long)c->id);
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
	int32_t lim = s->b->cfg.max_connections_per_ip;
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

static void on_accept(uv_poll_t *h, int status, int events)
{
	(void)events;
	kn_server *s = h->data;
	if (status < 0)
		return;
	for (int i = 0; i < MAX_ACCEPT_PER_CB; i++) {
		if (s->nopen >= s->b->cfg.max_connections) {
			/* As Kafka's acceptor: leave the rest in the listen backlog.
			 * Logged once until the backlog has been emptied. */
			if (!s->accept_episode)
				KLOG_WARN("server", "max.connections (%d) connections open: new connections wait in the "
					  "listen backlog until one closes", s->b->cfg.max_connections);
			s->accept_episode = 1;
			s->accept_full = 1;
			uv_poll_stop(&s->lpoll);
			return;
		}
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		int fd = accept4(s->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
				KLOG_WARN("server", "accept: %s; pausing new connections for 100 ms", strerror(errno));
				uv_poll_stop(&s->lpoll);
				uv_timer_start(&s->accept_pause, on_accept_resume, 100, 0);
			} else if (errno == EAGAIN && s->accept_episode) {
				KLOG_INFO("server", "below max.connections (%d) with no connection left waiting in the "
					  "backlog", s->b->cfg.max_connections);
				s->accept_episode = 0;
			}
			return;
		}
		if (ip_over_limit(s, &ss)) {
			close(fd);
			continue;
		}
		conn_new(s, fd, &ss);
	}
}

static int listen_on(kn_server *s, const char *host, int port, char *err, size_t errlen)
{
	struct addrinfo hints = {0}, *res = NULL;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	char ps[16];
	snprintf(ps, sizeof(ps), "%d", port);
	int rc = getaddrinfo(*host ? host : NULL, ps, &hints, &res);
	if (rc) {
		snprintf(err, errlen, "--listen %s:%d: %s", host, port, gai_strerror(rc));
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
		snprintf(err, errlen, "--listen %s:%d: %s", host, port, strerror(e));
		return -e;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &sl);
	s->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
					   : ntohs(((struct sockaddr_in *)&ss)->sin_port);
	s->lfd = fd;
	return 0;
}

/* ---- housekeeping ---------------------------------------------------------------------------- */

static void housekeep(void *arg)
{
	kn_server *s = arg;
	kb_broker_upkeep(s->b); /* the partition table's and the modules' upkeep */
	pthread_mutex_lock(&s->hkmu);
	kb_timer *old = s->hk_timer;
	s->hk_timer = s->hk_stop ? NULL : kn_pool_timer(s->pool, HOUSEKEEP_MS, housekeep, s);
	pthread_mutex_unlock(&s->hkmu);
	kn_pool_timer_cancel(s->pool, old); /* gives the fired handle back */
}

/* ---- shutdown --------------------------------------------------------------------------------- */

static void close_cb_noop(uv_handle_t *h) { (void)h; }

static void finish_loop(kn_server *s)
{
	if (s->stopped)
		return;
	s->stopped = 1;
	uv_timer_stop(&s->drain_deadline);
	pthread_mutex_lock(&s->evmu);
	s->async_alive = 0;
	pthread_mutex_unlock(&s->evmu);
	uv_close((uv_handle_t *)&s->async, close_cb_noop);
	uv_close((uv_handle_t *)&s->drain_deadline, close_cb_noop);
	uv_close((uv_handle_t *)&s->accept_pause, close_cb_noop);
	uv_close((uv_handle_t *)&s->budget_timer, close_cb_noop);
	uv_close((uv_handle_t *)&s->sigterm, close_cb_noop);
	uv_close((uv_handle_t *)&s->sigint, close_cb_noop);
	/* Relinquishing comes next and must not be cut short by a repeated
	 * SIGTERM (libuv restored the default action just now). */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	if (s->lpoll_active) {
		uv_close((uv_handle_t *)&s->lpoll, close_cb_noop);
		s->lpoll_active = 0;
	}
}

static void check_drained(kn_server *s)
{
	if (s->draining && s->nconns == 0)
		finish_loop(s);
}

static void on_drain_deadline(uv_timer_t *t)
{
	kn_server *s = t->data;
	KLOG_WARN("server", "shutdown: %d connection(s) still busy after kaas.shutdown.timeout.ms; closing them",
		  s->nconns);
	for (conn *c = s->conns, *n; c; c = n) {
		n = c->next;
		conn_close(c, "shutdown timeout");
	}
	/* Requests still on workers keep their connections allocated; stop now. */
	finish_loop(s);
	for (conn *c = s->conns; c; c = c->next)
		c->nreqs = 0; /* their memory goes with the process */
	uv_stop(&s->loop);
}

static void on_signal(uv_signal_t *h, int signum)
{
	kn_server *s = h->data;
	if (s->draining) {
		KLOG_WARN("server", "second %s: exiting without waiting", signum == SIGTERM ? "SIGTERM" : "SIGINT");
		on_drain_deadline(&s->drain_deadline);
		return;
	}
	KLOG_INFO("server", "%s: draining %d connection(s): no new connections, finishing requests in flight",
		  signum == SIGTERM ? "SIGTERM" : "SIGINT", s->nconns);
	s->draining = 1;
	__atomic_store_n(&s->b->stopping, 1, __ATOMIC_RELEASE);
	if (s->lpoll_active) {
		uv_close((uv_handle_t *)&s->lpoll, close_cb_noop);
		s->lpoll_active = 0;
	}
	close(s->lfd);
	s->lfd = -1;
	if (s->b->parts)
		kb_ptable_wake_all(s->b->parts); /* long polls answer now */
	uv_timer_start(&s->drain_deadline, on_drain_deadline, (uint64_t)s->b->cfg.shutdown_timeout_ms, 0);
	for (conn *c = s->conns, *n; c; c = n) {
		n = c->next;
		conn_drop_budget(c); /* no more requests are read */
	}
	for (conn *c = s->conns, *n; c; c = n) {
		n = c->next;
		if (conn_idle(c))
			conn_linger(c);
		else
			update_poll(c);
	}
	check_drained(s);
}

/* ---- public ------------------------------------------------------------------------------------- */

int kn_server_create(kb_broker *b, kn_server **out, char *err, size_t errlen)
{
	kn_server *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->b = b;
	s->lfd = -1;
	pthread_mutex_init(&s->evmu, NULL);
	pthread_mutex_init(&s->hkmu, NULL);
	int rc = uv_loop_init(&s->loop);
	if (rc) {
		snprintf(err, errlen, "event loop: %s", uv_strerror(rc));
		free(s);
		return rc;
	}
	rc = listen_on(s, b->cfg.listen_host, b->cfg.listen_port, err, errlen);
	if (rc)
		goto fail;
	rc = kn_pool_create(b->cfg.num_io_threads, &s->pool);
	if (rc) {
		snprintf(err, errlen, "worker threads: %s", strerror(-rc));
		goto fail;
	}
	uv_poll_init(&s->loop, &s->lpoll, s->lfd);
	s->lpoll.data = s;
	s->lpoll_active = 1;
	uv_async_init(&s->loop, &s->async, on_async);
	s->async.data = s;
	s->async_alive = 1;
	uv_timer_init(&s->loop, &s->accept_pause);
	s->accept_pause.data = s;
	kn_budget_init(&s->budget, b->cfg.queued_max_request_bytes);
	uv_timer_init(&s->loop, &s->budget_timer);
	s->budget_timer.data = s;
	uv_timer_init(&s->loop, &s->drain_deadline);
	s->drain_deadline.data = s;
	uv_signal_init(&s->loop, &s->sigterm);
	s->sigterm.data = s;
	uv_signal_init(&s->loop, &s->sigint);
	s->sigint.data = s;
	s->ops.complete = op_complete;
	s->ops.run = op_run;
	s->ops.timer_start = op_timer_start;
	s->ops.timer_cancel = op_timer_cancel;
	b->ops = &s->ops;
	b->server = s;
	*out = s;
	return 0;
fail:
	if (s->lfd >= 0)
		close(s->lfd);
	uv_loop_close(&s->loop);
	free(s);
	return rc;
}

int kn_server_port(const kn_server *s) { return s->port; }

int kn_server_run(kn_server *s)
{
	uv_signal_start(&s->sigterm, on_signal, SIGTERM);
	uv_signal_start(&s->sigint, on_signal, SIGINT);
	uv_poll_start(&s->lpoll, UV_READABLE, on_accept);
	pthread_mutex_lock(&s->hkmu);
	s->hk_timer = kn_pool_timer(s->pool, HOUSEKEEP_MS, housekeep, s);
	pthread_mutex_unlock(&s->hkmu);
	uv_run(&s->loop, UV_RUN_DEFAULT);
	pthread_mutex_lock(&s->hkmu);
	s->hk_stop = 1;
	kb_timer *t = s->hk_timer;
	s->hk_timer = NULL;
	pthread_mutex_unlock(&s->hkmu);
	kn_pool_timer_cancel(s->pool, t);
	/* Workers finish what they hold (their events are no longer applied). */
	kn_pool_stop(s->pool);
	return 0;
}

void kn_server_destroy(kn_server *s)
{
	if (!s)
		return;
	if (!s->stopped)
		finish_loop(s);
	uv_run(&s->loop, UV_RUN_NOWAIT); /* close callbacks */
	uv_loop_close(&s->loop);
	if (s->lfd >= 0)
		close(s->lfd);
	kn_pool_destroy(s->pool);
	pthread_mutex_destroy(&s->evmu);
	pthread_mutex_destroy(&s->hkmu);
	if (s->b && s->b->server == s) {
		s->b->ops = NULL;
		s->b->server = NULL;
	}
	free(s);
}
