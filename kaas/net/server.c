/*
 * server.c — the event loop: requests handed to workers and answered in
 * order, the event queue workers post to, housekeeping, the SIGTERM drain.
 * Connections and framing are in conn.c, listening and accept limits in
 * listen.c; this header describes the whole server.
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

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "kaas/core/ptable.h"
#include "kaas/core/splice.h"
#include "kaas/net/obs.h"
#include "kaas/net/server_int.h"
#include "kaas/proto/kerr.h"
#include "util/assert.h"
#include "util/log.h"
#include "util/clock.h"
#include "util/metrics.h"

/* ---- requests ----------------------------------------------------------------- */

static void splices_free_job(void *arg) { kb_splices_free(arg); }

void kn__req_free(sreq *r)
{
	conn *c = r->c;
	size_t held = r->frame_len + sizeof(*r) + (r->counted ? r->resp_mem : 0);
	/* The per-connection sums are unsigned: a request freed twice, or
	 * counted once and uncounted twice, would wrap them instead of failing. */
	KAAS_ASSERT(c->nreqs > 0 && c->buffered >= held);
	KAAS_ASSERT(!r->counted || c->out_mem >= r->resp_mem);
	kn__budget_release(c, r->frame_len);
	c->buffered -= held;
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
	size_t hl = r->raw ? 4 : flex ? 9 : 8; /* an unframed SASL token has its size alone */
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
int kn__req_finished(const sreq *r)
{
	return r->handler_done && (r->result != KAAS_DEFERRED || r->ready);
}

int kn__req_silent(const sreq *r)
{
	return r->handler_done && (r->result == KAAS_NO_RESPONSE || r->result < 0);
}

/* ---- dispatching and responding ------------------------------------------------------ */

void kn__try_dispatch(conn *c)
{
	if (c->closed || c->running || !c->pend_head || c->sasl_closing)
		return;
	/* A client that does not read its responses gets no new ones: the
	 * requests wait, and once they fill the budget reading stops too. */
	if ((int64_t)c->out_mem >= c->s->b->cfg.connection_max_buffered_bytes)
		return;
	sreq *r = c->pend_head;
	if (c->sasl && kn__sasl_gate(c, r))
		return; /* closed */
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
		kn__conn_close(c, "worker pool stopped");
	}
}

/* Consumes `n` sent bytes from the in-flight queue (skipping what was sent
 * already) and frees the requests at its head that are completely done. */
static void advance(conn *c, size_t n)
{
	for (sreq *q = c->fl_head; q && n > 0; q = q->next) {
		if (kn__req_silent(q))
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
		if (!kn__req_silent(r) && !(r->ready && r->cur == r->nparts && r->handler_done))
			break;
		c->fl_head = r->next;
		if (!c->fl_head)
			c->fl_tail = NULL;
		kn__req_free(r);
	}
}

void kn__try_send(conn *c)
{
	size_t budget = MAX_SEND_PER_CB;
	c->want_write = 0;
	while (!c->closed && budget > 0) {
		advance(c, 0);
		sreq *r = c->fl_head;
		while (r && (kn__req_silent(r) || (r->ready && r->cur == r->nparts)))
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
			k = kn__conn_sendfile(c, p->fd, (off_t)(p->pos + r->cur_off), want);
			if (k == 0) {
				KLOG_ERR("server", "%s: a segment file ended before the range being sent", c->peer);
				kn__conn_close(c, "short segment file");
				return;
			}
		} else {
			struct iovec iov[MAX_IOV];
			int niov = 0;
			want = 0;
			for (sreq *q = r; q && niov < MAX_IOV && want < budget; q = q->next) {
				if (kn__req_silent(q))
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
			k = kn__conn_write(c, iov, niov, want);
		}
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				c->want_write = 1;
				break;
			}
			kn__conn_close(c, errno == EPROTO ? "TLS error" : strerror(errno));
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
		if (e->kind == EV_DONE && r->result == KAAS_NO_RESPONSE)
			kn_obs_request(s->obs, r->pub.api_key, r->pub.api_version, ku_mono_ns() - r->received_ns);
		if (r->ready && !r->counted && !r->resp_bad) {
			kn_obs_request(s->obs, r->pub.api_key, r->pub.api_version, ku_mono_ns() - r->received_ns);
			r->counted = 1;
			c->buffered += r->resp_mem;
			c->out_mem += r->resp_mem;
		}
		/* Closing may free r (and, once idle, c): nothing touches them after. */
		if (c->closed) {
			kn__conn_reap(c);
			continue;
		}
		if (r->handler_done && r->result < 0) {
			kn__conn_close(c, "request failed");
			continue;
		}
		if (e->kind == EV_DONE && kn__sasl_is_step(r))
			kn__sasl_applied(c);
		if (r->ready && r->resp_bad) {
			KLOG_ERR("server", "%s: the %s response could not be built (out of memory or over 2 GiB)",
				 c->peer, r->api ? r->api->name : "?");
			kn__conn_close(c, "response could not be built");
			continue;
		}
		kn__after_progress(c);
	}
	/* More events than one callback may handle: come back. */
	if (!s->stopped)
		uv_async_send(&s->async);
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
	uv_close((uv_handle_t *)&s->frame_timer, close_cb_noop);
	uv_close((uv_handle_t *)&s->sigterm, close_cb_noop);
	uv_close((uv_handle_t *)&s->sigint, close_cb_noop);
	/* Relinquishing comes next and must not be cut short by a repeated
	 * SIGTERM (libuv restored the default action just now). */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	kn__listeners_close(s, close_cb_noop);
}

void kn__check_drained(kn_server *s)
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
		kn__conn_close(c, "shutdown timeout");
	}
	/* Requests still on workers keep their connections allocated; stop now. */
	finish_loop(s);
	for (conn *c = s->conns; c; c = c->next)
		c->nreqs = 0; /* their memory goes with the process */
	uv_stop(&s->loop);
}

/* The cluster drain runs first, on its own thread, while the server keeps
 * answering (NOT_LEADER_OR_FOLLOWER as partitions move away); when it is
 * done it raises SIGTERM again and the server's own drain follows. */
static int cluster_drain_state; /* 0 none, 1 running, 2 done */

static void *cluster_drain_main(void *arg)
{
	kn_server *s = arg;
	s->b->drain(s->b->drain_arg);
	int running = 1;
	if (__atomic_compare_exchange_n(&cluster_drain_state, &running, 2, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE))
		kill(getpid(), SIGTERM);
	return NULL;
}

static void on_signal(uv_signal_t *h, int signum)
{
	kn_server *s = h->data;
	if (s->b->drain && !s->draining) {
		int none = 0, running = 1;
		if (__atomic_compare_exchange_n(&cluster_drain_state, &none, 1, 0, __ATOMIC_ACQ_REL,
						__ATOMIC_ACQUIRE)) {
			pthread_t th;
			KLOG_INFO("server", "%s: handing this broker's partitions to the others first",
				  signum == SIGTERM ? "SIGTERM" : "SIGINT");
			if (pthread_create(&th, NULL, cluster_drain_main, s) == 0) {
				pthread_detach(th);
				return;
			}
			__atomic_store_n(&cluster_drain_state, 2, __ATOMIC_RELEASE);
		} else if (__atomic_compare_exchange_n(&cluster_drain_state, &running, 2, 0, __ATOMIC_ACQ_REL,
						       __ATOMIC_ACQUIRE)) {
			KLOG_WARN("server", "second %s during the hand-offs: stopping now",
				  signum == SIGTERM ? "SIGTERM" : "SIGINT");
		}
	}
	if (s->draining) {
		KLOG_WARN("server", "second %s: exiting without waiting", signum == SIGTERM ? "SIGTERM" : "SIGINT");
		on_drain_deadline(&s->drain_deadline);
		return;
	}
	KLOG_INFO("server", "%s: draining %d connection(s): no new connections, finishing requests in flight",
		  signum == SIGTERM ? "SIGTERM" : "SIGINT", s->nconns);
	s->draining = 1;
	__atomic_store_n(&s->b->stopping, 1, __ATOMIC_RELEASE);
	kn__listeners_close(s, close_cb_noop);
	for (int i = 0; i < s->nlst; i++) {
		close(s->lst[i].fd); /* its poll handle is closing: epoll forgot it */
		s->lst[i].fd = -1;
	}
	if (s->b->parts)
		kb_ptable_wake_all(s->b->parts); /* long polls answer now */
	uv_timer_start(&s->drain_deadline, on_drain_deadline, (uint64_t)s->b->cfg.shutdown_timeout_ms, 0);
	for (conn *c = s->conns, *n; c; c = n) {
		n = c->next;
		kn__conn_drop_budget(c); /* no more requests are read */
	}
	for (conn *c = s->conns, *n; c; c = n) {
		n = c->next;
		if (kn__conn_idle(c))
			kn__conn_linger(c);
		else
			kn__update_poll(c);
	}
	kn__check_drained(s);
}

/* ---- public ------------------------------------------------------------------------------------- */

/* libuv aborts (no message) when it cannot create its process-wide signal
 * pipe during its first loop's initialisation.  So before it is asked, make
 * sure a few descriptors are free, and name the limit when they are not. */
static int check_descriptors(char *err, size_t errlen)
{
	int fds[8], n = 0, rc = 0;
	for (; n < 8; n++) {
		fds[n] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fds[n] < 0) {
			rc = -errno;
			break;
		}
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	if (rc) {
		struct rlimit rl = {0, 0};
		getrlimit(RLIMIT_NOFILE, &rl);
		snprintf(err, errlen, "event loop: no descriptors left for the server (%s; RLIMIT_NOFILE soft %llu, "
			 "hard %llu): raise the limit (ulimit -n) or lead fewer partitions", strerror(-rc),
			 (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
	}
	return rc;
}

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

/* The loop's handles; on failure the caller closes whatever was set up. */
static int init_handles(kn_server *s, char *err, size_t errlen)
{
	const char *what = "the listening sockets' poll handles";
	int rc = kn__listeners_init(s);
	if (!rc) {
		what = "the wake-up handle (eventfd)";
		rc = uv_async_init(&s->loop, &s->async, on_async);
	}
	if (!rc) {
		s->async.data = s;
		s->async_alive = 1;
		uv_timer_init(&s->loop, &s->accept_pause);
		s->accept_pause.data = s;
		uv_timer_init(&s->loop, &s->budget_timer);
		s->budget_timer.data = s;
		uv_timer_init(&s->loop, &s->drain_deadline);
		s->drain_deadline.data = s;
		uv_timer_init(&s->loop, &s->frame_timer);
		s->frame_timer.data = s;
		what = "the SIGTERM handler (signal pipe)";
		rc = uv_signal_init(&s->loop, &s->sigterm);
	}
	if (!rc) {
		s->sigterm.data = s;
		what = "the SIGINT handler (signal pipe)";
		rc = uv_signal_init(&s->loop, &s->sigint);
	}
	if (!rc)
		s->sigint.data = s;
	else
		snprintf(err, errlen, "event loop: %s: %s", what, uv_strerror(rc));
	return rc;
}

/* The request-byte budget's counters, when the broker keeps metrics. */
static ku_metric *counter(ku_metrics *m, const char *name, const char *help)
{
	ku_family *f = NULL;
	static const char *const none[] = {NULL};
	if (!m || ku_metrics_family(m, name, help, KU_COUNTER, none, NULL, 0, &f))
		return NULL;
	return ku_metrics_series(f, none);
}

static void register_metrics(kn_server *s)
{
	ku_metrics *m = s->b->metrics;
	s->m_starved = counter(m, "kaas_request_budget_starved_total",
			       "times queued.max.request.bytes was used up and requests had to wait");
	s->m_waits = counter(m, "kaas_request_budget_waits_total",
			     "request frames that waited for queued.max.request.bytes");
	s->m_passed = counter(m, "kaas_request_budget_fair_share_passes_total",
			      "grants that passed over a connection holding more than its share");
	s->m_slow = counter(m, "kaas_request_slow_frames_dropped_total",
			    "request frames dropped for arriving below kaas.request.min.bytes.per.sec");
}

int kn_server_create(kb_broker *b, kn_server **out, char *err, size_t errlen)
{
	kn_server *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->b = b;
	pthread_mutex_init(&s->evmu, NULL);
	pthread_mutex_init(&s->hkmu, NULL);
	kn_budget_init(&s->budget, b->cfg.queued_max_request_bytes);
	register_metrics(s);
	int rc = check_descriptors(err, errlen);
	if (rc) {
		free(s);
		return rc;
	}
	rc = uv_loop_init(&s->loop);
	if (rc) {
		snprintf(err, errlen, "event loop: %s", uv_strerror(rc));
		free(s);
		return rc;
	}
	rc = kn__listeners_open(s, err, errlen);
	if (rc)
		goto out;
	rc = kn_obs_create(s, &s->obs, err, errlen);
	if (rc)
		goto out;
	rc = kn_pool_create(b->cfg.num_io_threads, &s->pool);
	if (rc) {
		snprintf(err, errlen, "worker threads: %s", strerror(-rc));
		goto out;
	}
	rc = init_handles(s, err, errlen);
	if (rc)
		goto out;
	s->ops.complete = op_complete;
	s->ops.run = op_run;
	s->ops.timer_start = op_timer_start;
	s->ops.timer_cancel = op_timer_cancel;
	b->ops = &s->ops;
	b->server = s;
	*out = s;
out:
	if (rc) {
		uv_walk(&s->loop, close_walk, NULL);
		uv_run(&s->loop, UV_RUN_DEFAULT);
		uv_loop_close(&s->loop);
		if (s->pool) {
			kn_pool_stop(s->pool);
			kn_pool_destroy(s->pool);
		}
		kn__listeners_free(s);
		kn_obs_destroy(s->obs);
		free(s);
	}
	return rc;
}

int kn_server_port(const kn_server *s) { return s->lst[0].port; }

void kn_server_advertised(const kn_server *s, const char **host, int32_t *port)
{
	*host = s->lst[0].adv_host;
	*port = s->lst[0].adv_port;
}

int kn_server_run(kn_server *s)
{
	uv_signal_start(&s->sigterm, on_signal, SIGTERM);
	uv_signal_start(&s->sigint, on_signal, SIGINT);
	kn__listeners_start(s);
	kn__frame_watch_start(s);
	pthread_mutex_lock(&s->hkmu);
	s->hk_timer = kn_pool_timer(s->pool, HOUSEKEEP_MS, housekeep, s);
	pthread_mutex_unlock(&s->hkmu);
	kn_obs_ready(s->obs);
	uv_run(&s->loop, UV_RUN_DEFAULT);
	/* The collectors read the coordinator and the partition table, which
	 * the caller closes next: no scrape from here on. */
	kn_obs_destroy(s->obs);
	s->obs = NULL;
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
	kn__listeners_free(s);
	kn_pool_destroy(s->pool);
	kn_obs_destroy(s->obs);
	pthread_mutex_destroy(&s->evmu);
	pthread_mutex_destroy(&s->hkmu);
	if (s->b && s->b->server == s) {
		s->b->ops = NULL;
		s->b->server = NULL;
	}
	free(s);
}
