/*
 * server_int.h — what the network server's files share: the connection, the
 * request and the server structures, and the internals one file calls in
 * another (kn__*).  server.c has the design (loop discipline, ordering,
 * backpressure, broker-wide limits, the drain); conn.c connections and
 * framing; listen.c the listening socket and the accept limits.
 *
 * Everything here is loop-thread only unless a field says otherwise.
 */
#ifndef KAAS_NET_SERVER_INT_H
#define KAAS_NET_SERVER_INT_H

#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "kaas/net/budget.h"
#include "kaas/net/pool.h"
#include "kaas/net/server.h"
#include "kaas/proto/header.h"

#define SCRATCH_SIZE (64 * 1024)
#define MAX_READ_PER_CB (1 << 20)
#define MAX_SEND_PER_CB (4 << 20)
#define MAX_ACCEPT_PER_CB 64
#define MAX_IOV 64
#define MAX_EVENTS_PER_CB 4096
#define HOUSEKEEP_MS 1000
#define LINGER_MS 5000
#define FRAME_CHECK_MS 1000        /* how often frames in progress are checked */
#define REQUEST_RATE_GRACE_MS 5000 /* before kaas.request.min.bytes.per.sec applies */

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
typedef struct kn_tls kn_tls; /* tls.c: the TLS settings of the SSL listeners */
struct kn_sasl;               /* sasl.h: one connection's SASL exchange */
struct kn_sasl_env;

/* One listening socket (listen.c), of the listeners= setting. */
typedef struct kn_listener {
	struct kn_server *s;
	kb_listener cfg;
	int fd;
	int port;              /* bound */
	uv_poll_t poll;
	char adv_host[256];    /* what Metadata answers on its connections */
	int32_t adv_port;
	kn_tls *tls;           /* SSL and SASL_SSL: its own settings (listener.name.<name>.ssl.*) */
	struct kn_sasl_env *sasl_env; /* SASL_*: its own settings (listener.name.<name>.sasl.*) */
} kn_listener;

typedef struct sreq {
	kb_req pub; /* first: handlers get &pub */
	conn *c;
	struct sreq *next;
	uint8_t *frame;
	size_t frame_len;
	const kw_api *api;
	kw_rd body;
	int unsupported;
	int unparsed; /* before SASL authentication: classified at dispatch */
	int raw;      /* an unframed SASL token (after SaslHandshake v0): answered without a header */
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
	int64_t received_ns; /* monotonic, for the latency histogram */
	ev ev_done, ev_resp;
} sreq;

struct conn {
	kn_server *s;
	int fd;
	uint64_t id;
	char peer[64];
	uv_poll_t poll;
	uv_timer_t idle;     /* also the TLS handshake's deadline */
	int poll_events;
	kn_listener *lst;    /* the listener it arrived on */
	/* TLS (tls.c): NULL on a PLAINTEXT listener */
	struct ssl_st *ssl;
	int tls_ready;       /* handshake finished */
	int tls_ktls_send;   /* the kernel encrypts what is sent: SSL_sendfile works */
	int tls_rd_wants_write, tls_wr_wants_read; /* SSL_read needs POLLOUT and vice versa */
	char principal[320]; /* "User:NAME" from SASL, else "User:CN=..." from a client
	                        certificate, else User:ANONYMOUS; for authorization */
	/* SASL (h_sasl.c): NULL on a listener without it.  The fields below are
	 * the loop's copy of the exchange's outcome, applied after each step. */
	struct kn_sasl *sasl;
	int sasl_authed;      /* authenticated at least once */
	int sasl_raw;         /* the next frame is an unframed token */
	int sasl_reauth;      /* a re-authentication is under way */
	int sasl_closing;     /* failed: answer what was dispatched, then close */
	uint64_t sasl_expiry_ms; /* loop time the session ends (0: never) */
	int closed;
	int lingering; /* draining: answers sent, FIN sent, discarding input */
	int handles_open;
	uint64_t last_active;
	/* input */
	uint8_t carry[4];
	size_t carry_len;
	uint8_t *big;
	size_t big_len, big_have;
	uint64_t frame_start_ms; /* when big's reception began (loop time) */
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
	kn_listener lst[KB_MAX_LISTENERS];
	int nlst;
	int lpoll_active;      /* the listeners' poll handles are open */
	uint8_t sasl_secret[32];  /* kb_users_secret, read once for every SASL listener */
	int sasl_secret_read;
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
	uint64_t budget_episodes;  /* times the budget was used up (starved) */
	uint64_t budget_episode_ms; /* when the current one began */
	uint64_t budget_passed0;   /* budget.passed when it began */
	uv_timer_t frame_timer;    /* kaas.request.min.bytes.per.sec */
	uint64_t slow_frames;      /* frames dropped for arriving too slowly */
	struct ku_metric *m_starved, *m_waits, *m_slow, *m_passed; /* counters; NULL without metrics */
	struct kn_obs *obs;        /* obs.c: request metrics, collectors, the HTTP listener */
	uint64_t next_conn_id;
	int draining;
	int stopped;
	uint8_t scratch[SCRATCH_SIZE];
	kb_server_ops ops;
	kb_timer *hk_timer;
	pthread_mutex_t hkmu;
	int hk_stop;
};


/* conn.c: connections and framing */
void kn__conn_new(kn_server *s, kn_listener *l, int fd, const struct sockaddr_storage *ss);
void kn__conn_close(conn *c, const char *why);
void kn__conn_linger(conn *c);
void kn__conn_reap(conn *c);
int kn__conn_idle(const conn *c);
void kn__conn_drop_budget(conn *c);
void kn__budget_release(conn *c, size_t n); /* what c held */
void kn__frame_watch_start(kn_server *s);
void kn__update_poll(conn *c);
void kn__after_progress(conn *c);
const char *kn__req_parse(conn *c, sreq *r); /* the header; NULL, or why the connection must close */

/* h_sasl.c: SASL's part in the loop */
int kn__sasl_env_create(kn_server *s, kn_listener *l, const kb_config *lc, char *err, size_t errlen);
void kn__sasl_env_free(kn_listener *l);
int kn__sasl_gate(conn *c, sreq *r);   /* before dispatching r: 0, or -1 (c closed) */
int kn__sasl_is_step(const sreq *r);   /* r was a step of c's exchange */
void kn__sasl_applied(conn *c);        /* after such a step's handler returned */

/* listen.c: the listening sockets and the accept limits */
int kn__listeners_open(kn_server *s, char *err, size_t errlen); /* resolve, bind, TLS */
int kn__listeners_init(kn_server *s);   /* their poll handles */
void kn__listeners_start(kn_server *s);
void kn__listeners_close(kn_server *s, uv_close_cb cb); /* handles and sockets */
void kn__listeners_free(kn_server *s);  /* sockets and TLS, after the loop */
void kn__on_accept(uv_poll_t *h, int status, int events);
void kn__on_accept_resume(uv_timer_t *t);
void kn__conn_open_ended(kn_server *s);

/* tls.c: TLS on a connection's socket, non-blocking, on the loop */
int kn__tls_create(const kb_config *cfg, kn_tls **out, char *err, size_t errlen);
void kn__tls_destroy(kn_tls *t);
int kn__tls_conn_start(conn *c); /* 0 or -errno */
void kn__tls_conn_free(conn *c);
int kn__tls_handshake(conn *c);  /* 1 done, 0 in progress, -1 closed */
/* read(2)/send(2)-like, errno EAGAIN when the socket or TLS must wait */
ssize_t kn__conn_read(conn *c, void *buf, size_t n);
ssize_t kn__conn_write(conn *c, const struct iovec *iov, int niov, size_t want);
ssize_t kn__conn_sendfile(conn *c, int fd, off_t pos, size_t want);
int kn__tls_pending(const conn *c); /* decrypted bytes waiting in OpenSSL */
void kn__tls_close_notify(conn *c); /* before the FIN of a drain */

/* server.c: requests, responses, the event queue, shutdown */
void kn__req_free(sreq *r);
int kn__req_finished(const sreq *r);
int kn__req_silent(const sreq *r);
void kn__try_dispatch(conn *c);
void kn__try_send(conn *c);
void kn__check_drained(kn_server *s);

#endif
