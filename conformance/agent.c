/*
 * agent.c — `kaas-conform agent`: an actor that lives on another host and
 * waits for a driver to connect over TCP.
 *
 * The agent process itself only listens (libuv): it accepts one driver at a
 * time, forks a session process for it, and refuses everyone else until the
 * session ends.  The session runs the ordinary actor executor
 * (kc_actor_serve) on the connection, so checks run unchanged and files stay
 * open between steps.  A "crash" step kills only the session, as a client
 * crash would; the agent accepts the driver's reconnect.  The session ends
 * when the driver says bye, closes, or vanishes (keepalive), and when the
 * agent is stopped.
 *
 * A connection that arrives while a session runs waits up to
 * KC_AGENT_BUSY_GRACE_MS for it to end before it is refused: a TCP probe
 * (a readiness check, a port scan, a driver's reconnect) starts a session
 * that ends as soon as it reads EOF, and the real driver right behind it must
 * not be turned away for that.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "conformance/actor.h"
#include "conformance/agent.h"
#include "conformance/agent_int.h"
#include "conformance/chan.h"
#include "conformance/kc.h"
#include "qualify/stamp.h"
#include "util/clock.h"
#include "util/log.h"

#define COMP "agent"

typedef struct agent {
	uv_loop_t *loop;
	uv_tcp_t server;
	uv_signal_t sig_chld, sig_term, sig_int;
	uv_timer_t idle_timer;
	const char *root;
	char listen[300];
	char host_id[400];
	int keepalive_s;
	int exit_when_idle_s;  /* 0: serve forever */
	int64_t idle_since_ms; /* when the last session ended */
	pid_t session; /* the session process, 0 when idle */
	char peer[128];
	int64_t session_since_ms;
	unsigned long sessions;
	uv_tcp_t *waiting; /* a connection that arrived while busy */
	char waiting_peer[128];
	uv_timer_t busy_timer; /* refuses `waiting` when the session outlives the grace */
} agent;

#define KC_AGENT_BUSY_GRACE_MS 2000

static void start_session(agent *ag, uv_tcp_t *c, const char *peer);

static const char agent_usage[] =
	"usage: kaas-conform agent --listen ADDR:PORT --root URL [--keepalive SECONDS]\n"
	"                          [--exit-when-idle SECONDS]\n"
	"\n"
	"Serves one kaas-conform driver at a time (check --agent HOST:PORT).  URL is\n"
	"this host's view of the volume under test (a mounted path or nfs://...).\n"
	"See docs/conformance.md, \"Agents\".\n";

static void peer_name(uv_tcp_t *c, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	int n = sizeof(ss);
	char ip[64] = "?";
	int port = 0;
	if (uv_tcp_getpeername(c, (struct sockaddr *)&ss, &n) == 0) {
		if (ss.ss_family == AF_INET) {
			uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
			port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
			port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
		}
	}
	snprintf(buf, len, ss.ss_family == AF_INET6 ? "[%s]:%d" : "%s:%d", ip, port);
}

/* Collects exited children; notes the end of the session. */
static void reap(agent *ag)
{
	int status;
	pid_t p;
	while ((p = waitpid(-1, &status, WNOHANG)) > 0) {
		if (p != ag->session)
			continue;
		char how[64];
		if (WIFEXITED(status))
			snprintf(how, sizeof(how), "exit %d", WEXITSTATUS(status));
		else
			snprintf(how, sizeof(how), "signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		KLOG_INFO(COMP, "session %lu with %s ended after %lld ms (%s)", ag->sessions, ag->peer,
			  (long long)(ku_mono_ms() - ag->session_since_ms), how);
		ag->session = 0;
		ag->idle_since_ms = ku_mono_ms();
	}
	if (!ag->session && ag->waiting) {
		uv_tcp_t *c = ag->waiting;
		ag->waiting = NULL;
		uv_timer_stop(&ag->busy_timer);
		start_session(ag, c, ag->waiting_peer);
	}
}

static void on_closed(uv_handle_t *h)
{
	free(h);
}

typedef struct refusal {
	uv_write_t req;
	uv_tcp_t *conn;
	char *text;
} refusal;

static void on_refusal_written(uv_write_t *req, int status)
{
	(void)status;
	refusal *r = (refusal *)req;
	uv_close((uv_handle_t *)r->conn, on_closed);
	free(r->text);
	free(r);
}

static void refuse(agent *ag, uv_tcp_t *c, const char *peer)
{
	char msg[512];
	snprintf(msg, sizeof(msg), "agent %s is serving driver %s (for %lld s); one driver at a time",
		 ag->listen, ag->peer, (long long)(ku_mono_ms() - ag->session_since_ms) / 1000);
	KLOG_WARN(COMP, "refused %s: busy with %s", peer, ag->peer);
	json_t *m = json_pack("{s:s,s:s,s:s}", "ev", "refused", "reason", "busy", "error", msg);
	char *s = m ? json_dumps(m, JSON_COMPACT) : NULL;
	json_decref(m);
	refusal *r = calloc(1, sizeof(*r));
	char *line = s ? malloc(strlen(s) + 2) : NULL;
	if (!r || !line) {
		free(s);
		free(r);
		free(line);
		uv_close((uv_handle_t *)c, on_closed);
		return;
	}
	sprintf(line, "%s\n", s);
	free(s);
	r->conn = c;
	r->text = line;
	uv_buf_t b = uv_buf_init(line, (unsigned int)strlen(line));
	if (uv_write(&r->req, (uv_stream_t *)c, &b, 1, on_refusal_written) != 0) {
		free(line);
		free(r);
		uv_close((uv_handle_t *)c, on_closed);
	}
}

/* The session process: the actor executor on the connection. */
static void session_main(agent *ag, int fd)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL); /* the agent stopped: so do we */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGINT, SIG_IGN);
	int server_fd = -1;
	if (uv_fileno((uv_handle_t *)&ag->server, &server_fd) == 0 && server_fd >= 0)
		close(server_fd);
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	kc_tcp_keepalive(fd, ag->keepalive_s);
	kc_chan ch;
	kc_chan_init(&ch, fd);
	char host[256] = "";
	gethostname(host, sizeof(host) - 1);
	if (kc_chan_sendf(&ch, "{s:s,s:i,s:s,s:s,s:s,s:s}", "ev", "agent", "protocol",
			  KC_PROTOCOL_VERSION, "version", KC_VERSION, "root", ag->root, "host", host,
			  "host_id", ag->host_id) != 0)
		_exit(0);
	int status = kc_actor_serve(&ch, 0, ag->root);
	kc_chan_close(&ch);
	_exit(status);
}

static void start_session(agent *ag, uv_tcp_t *c, const char *peer)
{
	int fd = -1;
	if (uv_fileno((uv_handle_t *)c, &fd) != 0) {
		uv_close((uv_handle_t *)c, on_closed);
		return;
	}
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		KLOG_ERR(COMP, "fork: %s", strerror(errno));
		uv_close((uv_handle_t *)c, on_closed);
		return;
	}
	if (pid == 0)
		session_main(ag, fd);
	ag->session = pid;
	ag->sessions++;
	ag->session_since_ms = ku_mono_ms();
	snprintf(ag->peer, sizeof(ag->peer), "%s", peer);
	KLOG_INFO(COMP, "session %lu with driver %s started (pid %d)", ag->sessions, peer, (int)pid);
	uv_close((uv_handle_t *)c, on_closed); /* the session has its own copy */
}

static void on_busy_timeout(uv_timer_t *t)
{
	agent *ag = t->data;
	reap(ag);
	if (ag->waiting) {
		uv_tcp_t *c = ag->waiting;
		ag->waiting = NULL;
		refuse(ag, c, ag->waiting_peer);
	}
}

static void on_connection(uv_stream_t *server, int status)
{
	agent *ag = server->data;
	if (status < 0) {
		KLOG_WARN(COMP, "accept: %s", uv_strerror(status));
		return;
	}
	uv_tcp_t *c = calloc(1, sizeof(*c));
	if (!c)
		return;
	uv_tcp_init(ag->loop, c);
	if (uv_accept(server, (uv_stream_t *)c) != 0) {
		uv_close((uv_handle_t *)c, on_closed);
		return;
	}
	char peer[128];
	peer_name(c, peer, sizeof(peer));
	/* SIGCHLD may not have been processed yet for a session that just
	 * ended (a driver reconnecting after a crash step). */
	reap(ag);
	if (ag->session) {
		if (ag->waiting) {
			refuse(ag, c, peer);
			return;
		}
		ag->waiting = c;
		snprintf(ag->waiting_peer, sizeof(ag->waiting_peer), "%s", peer);
		uv_timer_start(&ag->busy_timer, on_busy_timeout, KC_AGENT_BUSY_GRACE_MS, 0);
		return;
	}
	start_session(ag, c, peer);
}

static void on_sigchld(uv_signal_t *h, int sig)
{
	(void)sig;
	reap(h->data);
}

/* --exit-when-idle: once a driver has come and gone, and none came back
 * within the grace time, the run is over (a batch Job's agents). */
static void on_idle_tick(uv_timer_t *t)
{
	agent *ag = t->data;
	reap(ag);
	if (ag->sessions > 0 && !ag->session &&
	    ku_mono_ms() - ag->idle_since_ms >= (int64_t)ag->exit_when_idle_s * 1000) {
		KLOG_INFO(COMP, "idle for %d s after %lu session(s): exiting", ag->exit_when_idle_s,
			  ag->sessions);
		uv_stop(ag->loop);
	}
}

static void on_stop(uv_signal_t *h, int sig)
{
	agent *ag = h->data;
	KLOG_INFO(COMP, "signal %d: stopping", sig);
	if (ag->session > 0) {
		kill(ag->session, SIGKILL);
		waitpid(ag->session, NULL, 0);
		ag->session = 0;
	}
	uv_stop(ag->loop);
}

static int parse_args(int argc, char **argv, agent *ag, const char **listen, char *err, size_t errlen)
{
	*listen = NULL;
	ag->keepalive_s = KC_AGENT_DEFAULT_KEEPALIVE_S;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = NULL;
		const char *names[] = {"--listen", "--root", "--keepalive", "--exit-when-idle"};
		int which = -1;
		for (int k = 0; k < 4; k++) {
			size_t n = strlen(names[k]);
			if (strncmp(a, names[k], n) == 0 && (a[n] == '\0' || a[n] == '=')) {
				which = k;
				if (a[n] == '=')
					v = a + n + 1;
				else if (i + 1 < argc)
					v = argv[++i];
				else {
					snprintf(err, errlen, "%s needs a value", names[k]);
					return -EINVAL;
				}
			}
		}
		if (which < 0) {
			snprintf(err, errlen, "unknown argument '%s'", a);
			return -EINVAL;
		}
		if (which == 0) {
			*listen = v;
		} else if (which == 1) {
			ag->root = v;
		} else {
			char *end;
			long s = strtol(v, &end, 10);
			if (!*v || *end || s < 1 || s > 86400 || (which == 2 && s > 3600)) {
				snprintf(err, errlen, "%s: '%s' is not 1..%d seconds", names[which], v,
					 which == 2 ? 3600 : 86400);
				return -EINVAL;
			}
			if (which == 2)
				ag->keepalive_s = (int)s;
			else
				ag->exit_when_idle_s = (int)s;
		}
	}
	if (!*listen || !ag->root || !*ag->root) {
		snprintf(err, errlen, "--listen ADDR:PORT and --root URL are required");
		return -EINVAL;
	}
	return 0;
}

int kc_cmd_agent(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			fputs(agent_usage, stdout);
			return 0;
		}
	ku_log_init_from_env();
	agent ag;
	memset(&ag, 0, sizeof(ag));
	const char *listen_at;
	char err[1024];
	if (parse_args(argc, argv, &ag, &listen_at, err, sizeof(err)) != 0) {
		fprintf(stderr, "kaas-conform agent: %s\n%s", err, agent_usage);
		return KC_EXIT_ERROR;
	}
	char host[256], port[16];
	if (kc_split_hostport(listen_at, host, sizeof(host), port, sizeof(port)) != 0) {
		fprintf(stderr, "kaas-conform agent: --listen: expected ADDR:PORT or [ADDR]:PORT, got '%s'\n",
			listen_at);
		return KC_EXIT_ERROR;
	}
	/* The root must open here, so a typo fails now and not in the first
	 * driver's hello.  Nothing is created (a parent that made NFSv4 creates
	 * would hand its verifier sequence to the sessions it forks). */
	sub_vfs *v = NULL;
	sub_identity id;
	int rc = sub_open_url(ag.root, &v, err, sizeof(err));
	if (rc == 0)
		rc = sub_identity_of(v, &id);
	sub_destroy(v);
	if (rc) {
		fprintf(stderr, "kaas-conform agent: --root: %s\n", err[0] ? err : sub_strerror(rc));
		return KC_EXIT_ERROR;
	}
	kc_host_id(ag.host_id, sizeof(ag.host_id));

	struct sockaddr_storage addr;
	memset(&addr, 0, sizeof(addr));
	if (uv_ip4_addr(host, atoi(port), (struct sockaddr_in *)&addr) != 0 &&
	    uv_ip6_addr(host, atoi(port), (struct sockaddr_in6 *)&addr) != 0) {
		fprintf(stderr, "kaas-conform agent: --listen: '%s' is not an IP address\n", host);
		return KC_EXIT_ERROR;
	}
	snprintf(ag.listen, sizeof(ag.listen), "%s", listen_at);
	ag.loop = uv_default_loop();
	uv_tcp_init(ag.loop, &ag.server);
	ag.server.data = &ag;
	rc = uv_tcp_bind(&ag.server, (struct sockaddr *)&addr, 0);
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&ag.server, 8, on_connection);
	if (rc != 0) {
		fprintf(stderr, "kaas-conform agent: cannot listen on %s: %s\n", listen_at, uv_strerror(rc));
		return KC_EXIT_ERROR;
	}
	signal(SIGPIPE, SIG_IGN);
	uv_signal_init(ag.loop, &ag.sig_chld);
	uv_signal_init(ag.loop, &ag.sig_term);
	uv_signal_init(ag.loop, &ag.sig_int);
	ag.sig_chld.data = ag.sig_term.data = ag.sig_int.data = &ag;
	uv_signal_start(&ag.sig_chld, on_sigchld, SIGCHLD);
	uv_signal_start(&ag.sig_term, on_stop, SIGTERM);
	uv_signal_start(&ag.sig_int, on_stop, SIGINT);
	uv_timer_init(ag.loop, &ag.idle_timer);
	ag.idle_timer.data = &ag;
	uv_timer_init(ag.loop, &ag.busy_timer);
	ag.busy_timer.data = &ag;
	if (ag.exit_when_idle_s)
		uv_timer_start(&ag.idle_timer, on_idle_tick, 1000, 1000);
	printf("kaas-conform agent %s listening on %s, root %s (%s %s), host %s\n", KC_VERSION, listen_at,
	       ag.root, id.fstype, id.source, ag.host_id);
	fflush(stdout);
	uv_run(ag.loop, UV_RUN_DEFAULT);
	uv_close((uv_handle_t *)&ag.server, NULL);
	uv_close((uv_handle_t *)&ag.sig_chld, NULL);
	uv_close((uv_handle_t *)&ag.sig_term, NULL);
	uv_close((uv_handle_t *)&ag.sig_int, NULL);
	uv_close((uv_handle_t *)&ag.idle_timer, NULL);
	uv_close((uv_handle_t *)&ag.busy_timer, NULL);
	if (ag.waiting)
		uv_close((uv_handle_t *)ag.waiting, on_closed);
	uv_run(ag.loop, UV_RUN_DEFAULT);
	uv_loop_close(ag.loop);
	return 0;
}
