/*
 * driver.c — actor processes and the message pump.
 */
#include "conformance/driver.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance/actor.h"
#include "conformance/agent.h"
#include "conformance/kc.h"
#include "conformance/opts.h"
#include "util/assert.h"
#include "util/clock.h"

static void describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status))
		snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
			 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
	else
		snprintf(buf, len, "ended (status 0x%x)", status);
}

static void mark_dead(kc_driver *d, kc_actor *a)
{
	(void)d;
	if (!a->alive)
		return;
	a->alive = 0;
	if (a->pid > 0) {
		int status = 0;
		pid_t r;
		/* The socket closes just before the process is gone; give it a moment. */
		for (int i = 0; i < 200; i++) {
			r = waitpid(a->pid, &status, WNOHANG);
			if (r != 0)
				break;
			usleep(5000);
		}
		if (r == a->pid)
			describe_status(status, a->why, sizeof(a->why));
		else
			snprintf(a->why, sizeof(a->why), "closed its channel");
		if (r == a->pid)
			a->pid = 0;
	} else if (a->agent[0]) {
		snprintf(a->why, sizeof(a->why), "lost its agent %.180s (connection closed or timed out)", a->agent);
	} else {
		snprintf(a->why, sizeof(a->why), "closed its channel");
	}
	kc_chan_close(&a->ch);
}

static void dispatch(kc_driver *d, kc_actor *a, json_t *m)
{
	(void)d;
	json_t *idv = json_object_get(m, "id");
	if (!json_is_integer(idv) || json_integer_value(idv) != a->busy || a->busy == 0) {
		json_decref(m); /* late progress of a finished step */
		return;
	}
	const char *ev = json_string_value(json_object_get(m, "ev"));
	if (ev) {
		if (strcmp(ev, "ready") == 0) {
			a->ready = 1;
		} else if (strcmp(ev, "progress") == 0) {
			a->done = json_integer_value(json_object_get(m, "done"));
			a->anomalies = json_integer_value(json_object_get(m, "anomalies"));
		}
		json_decref(m);
		return;
	}
	json_decref(a->reply);
	a->reply = m;
	a->busy = 0;
}

/* Drains complete messages already buffered. */
static void drain(kc_driver *d, kc_actor *a)
{
	for (;;) {
		json_t *m = NULL;
		int rc = kc_chan_pop(&a->ch, &m);
		if (rc == 0) {
			dispatch(d, a, m);
			continue;
		}
		if (rc != -EAGAIN)
			mark_dead(d, a);
		return;
	}
}

/* Reads whatever the actors sent, waiting up to timeout_ms for something. */
static void pump(kc_driver *d, int timeout_ms)
{
	struct pollfd pfd[KC_MAX_ACTORS];
	int idx[KC_MAX_ACTORS];
	int np = 0;
	KAAS_ASSERT(d->n <= KC_MAX_ACTORS); /* opts.c refuses more actors */
	for (int i = 0; i < d->n; i++) {
		kc_actor *a = &d->a[i];
		if (!a->alive)
			continue;
		drain(d, a);
		if (!a->alive)
			continue;
		pfd[np].fd = a->ch.fd;
		pfd[np].events = POLLIN;
		pfd[np].revents = 0;
		idx[np++] = i;
	}
	if (np == 0) {
		if (timeout_ms > 0)
			usleep((useconds_t)timeout_ms * 1000);
		return;
	}
	int r = poll(pfd, (nfds_t)np, timeout_ms);
	if (r <= 0)
		return;
	for (int k = 0; k < np; k++) {
		if (!pfd[k].revents)
			continue;
		kc_actor *a = &d->a[idx[k]];
		int rc = kc_chan_fill(&a->ch);
		if (rc < 0 && rc != -EAGAIN) {
			drain(d, a); /* a last answer may precede the end of stream */
			mark_dead(d, a);
			continue;
		}
		drain(d, a);
	}
}

static void tick_progress(kc_driver *d)
{
	int64_t now = ku_mono_ms();
	if (d->on_progress && now >= d->next_progress_ms) {
		d->next_progress_ms = now + 250;
		d->on_progress(d->progress_arg);
	}
}

/* Waits until cond(a) holds for actor a; the shared error paths. */
typedef int (*cond_fn)(const kc_actor *a);

static int wait_for(kc_driver *d, kc_actor *a, cond_fn cond, const char *what)
{
	int64_t deadline = ku_mono_ms() + d->timeout_ms;
	for (;;) {
		if (a->alive)
			drain(d, a);
		if (cond(a))
			return 0;
		if (d->interrupted && *d->interrupted) {
			snprintf(d->err, sizeof(d->err), "interrupted");
			return -EINTR;
		}
		if (!a->alive) {
			snprintf(d->err, sizeof(d->err), "actor %d (%.300s) %s during '%s'", a->index,
				 a->url, a->why, a->busy_op);
			return -EPIPE;
		}
		int64_t left = deadline - ku_mono_ms();
		if (left <= 0) {
			snprintf(d->err, sizeof(d->err), "actor %d did not %s '%s' within %d s", a->index,
				 what, a->busy_op, d->timeout_ms / 1000);
			return -ETIMEDOUT;
		}
		pump(d, left < 100 ? (int)left : 100);
		tick_progress(d);
	}
}

static int is_idle(const kc_actor *a)
{
	return a->busy == 0;
}

static int is_ready(const kc_actor *a)
{
	return a->ready || a->busy == 0;
}

int kc_drv_start(kc_driver *d, int ai, const char *op, json_t *args, int sync)
{
	kc_actor *a = &d->a[ai];
	json_t *m = args ? args : json_object();
	if (!a->alive) {
		json_decref(m);
		snprintf(d->err, sizeof(d->err), "actor %d is not running (%s)", ai, a->why);
		return -EPIPE;
	}
	if (a->busy) {
		json_decref(m);
		snprintf(d->err, sizeof(d->err), "actor %d is busy with '%s'", ai, a->busy_op);
		return -EBUSY;
	}
	json_int_t id = ++d->next_id;
	json_object_set_new(m, "op", json_string(op));
	json_object_set_new(m, "id", json_integer(id));
	if (sync)
		json_object_set_new(m, "sync", json_true());
	json_decref(a->reply);
	a->reply = NULL;
	a->busy = id;
	a->ready = 0;
	a->done = a->anomalies = 0;
	snprintf(a->busy_op, sizeof(a->busy_op), "%s", op);
	int rc = kc_chan_send(&a->ch, m);
	json_decref(m);
	if (rc) {
		mark_dead(d, a);
		snprintf(d->err, sizeof(d->err), "actor %d: cannot send '%s': %s", ai, op, kc_errname(rc));
		a->busy = 0;
		return -EPIPE;
	}
	return 0;
}

int kc_drv_wait(kc_driver *d, int ai, json_t **result)
{
	kc_actor *a = &d->a[ai];
	*result = NULL;
	int rc = wait_for(d, a, is_idle, "answer");
	if (rc)
		return rc;
	json_t *m = a->reply;
	a->reply = NULL;
	if (!m) {
		snprintf(d->err, sizeof(d->err), "actor %d: no answer to '%s'", ai, a->busy_op);
		return -EPROTO;
	}
	if (json_is_true(json_object_get(m, "ok"))) {
		json_t *r = json_object_get(m, "result");
		*result = json_is_object(r) ? json_incref(r) : json_object();
		json_decref(m);
		return 0;
	}
	int erc = (int)json_integer_value(json_object_get(m, "rc"));
	const char *msg = json_string_value(json_object_get(m, "error"));
	snprintf(d->err, sizeof(d->err), "actor %d: %s: %s", ai, a->busy_op, msg ? msg : "failed");
	json_decref(m);
	return erc < 0 ? erc : -EIO;
}

int kc_drv_call(kc_driver *d, int a, const char *op, json_t *args, json_t **result)
{
	int rc = kc_drv_start(d, a, op, args, 0);
	if (rc)
		return rc;
	return kc_drv_wait(d, a, result);
}

int kc_drv_release(kc_driver *d, const int *as, int n)
{
	for (int i = 0; i < n; i++) {
		int rc = wait_for(d, &d->a[as[i]], is_ready, "reach the barrier of");
		if (rc)
			return rc;
		if (d->a[as[i]].busy == 0) {
			/* It answered instead of getting ready: a set-up failure.  The
			 * answer stays for kc_drv_wait to report. */
			snprintf(d->err, sizeof(d->err), "actor %d failed before the start", as[i]);
			return -ECANCELED;
		}
	}
	/* Back to back, so the actors start within microseconds of each other. */
	for (int i = 0; i < n; i++) {
		kc_actor *a = &d->a[as[i]];
		int rc = kc_chan_sendf(&a->ch, "{s:s,s:I}", "op", "go", "id", a->busy);
		if (rc) {
			mark_dead(d, a);
			snprintf(d->err, sizeof(d->err), "actor %d (%.300s) %s: cannot release it: %s",
				 as[i], a->url, a->why, kc_errname(rc));
			return -EPIPE;
		}
	}
	return 0;
}

int kc_drv_stop(kc_driver *d, int ai)
{
	kc_actor *a = &d->a[ai];
	if (!a->alive || !a->busy)
		return 0;
	return kc_chan_sendf(&a->ch, "{s:s,s:I}", "op", "stop", "id", a->busy);
}

void kc_drv_abort(kc_driver *d)
{
	for (int i = 0; i < d->n; i++)
		kc_drv_stop(d, i);
	for (int i = 0; i < d->n; i++) {
		json_t *r = NULL;
		if (d->a[i].alive && d->a[i].busy) {
			char keep[sizeof(d->err)];
			memcpy(keep, d->err, sizeof(keep));
			kc_drv_wait(d, i, &r);
			memcpy(d->err, keep, sizeof(keep));
		}
		json_decref(r);
	}
}

static void child_main(kc_driver *d, int ai, int fd, pid_t parent)
{
	/* Only this actor's end of its own channel stays open. */
	for (int i = 0; i < d->n; i++)
		if (i != ai && d->a[i].ch.fd >= 0)
			close(d->a[i].ch.fd);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	/* The driver decides when actors end, so a terminal's ^C reaches only
	 * the driver's handler, which then cleans up in order. */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	signal(SIGQUIT, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
	signal(SIGPIPE, SIG_IGN);
	kc_chan ch;
	kc_chan_init(&ch, fd);
	int status = kc_actor_serve(&ch, ai, NULL);
	kc_chan_close(&ch);
	_exit(status);
}

static int fork_actor(kc_driver *d, int ai)
{
	kc_actor *a = &d->a[ai];
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		int e = errno;
		snprintf(d->err, sizeof(d->err), "socketpair: %s", strerror(e));
		return -e;
	}
	fflush(NULL);
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		snprintf(d->err, sizeof(d->err), "fork: %s", strerror(e));
		return -e;
	}
	if (pid == 0) {
		close(sv[0]);
		child_main(d, ai, sv[1], parent);
	}
	close(sv[1]);
	kc_chan_init(&a->ch, sv[0]);
	a->pid = pid;
	a->alive = 1;
	a->busy = 0;
	a->why[0] = '\0';
	return 0;
}

int kc_drv_slots(kc_driver *d, int n)
{
	d->a = calloc((size_t)n, sizeof(kc_actor));
	if (!d->a)
		return -ENOMEM;
	d->n = n;
	if (d->timeout_ms <= 0)
		d->timeout_ms = 300 * 1000;
	for (int i = 0; i < n; i++) {
		d->a[i].index = i;
		d->a[i].ch.fd = -1;
	}
	return 0;
}

static json_t *hello_args(kc_driver *d, int ai)
{
	return json_pack("{s:s,s:i,s:i}", "url", d->a[ai].url, "actor", ai, "protocol", KC_PROTOCOL_VERSION);
}

/* After a failed hello: the actor's message already names the URL and the
 * reason; d->err says which actor (and agent) it was. */
static void name_hello_failure(kc_driver *d, int ai)
{
	const char *colon = strstr(d->err, "hello: ");
	char msg[sizeof(d->err)];
	snprintf(msg, sizeof(msg), "%s", colon ? colon + 7 : d->err);
	if (d->a[ai].agent[0])
		snprintf(d->err, sizeof(d->err), "agent %.200s (actor %d): %.500s", d->a[ai].agent, ai, msg);
	else
		snprintf(d->err, sizeof(d->err), "actor %d: %.700s", ai, msg);
}

int kc_drv_hello_all(kc_driver *d)
{
	/* Hellos go out together and are collected together: opening a
	 * network client can take a while. */
	for (int i = 0; i < d->n; i++) {
		int rc = kc_drv_start(d, i, "hello", hello_args(d, i), 0);
		if (rc)
			return rc;
	}
	for (int i = 0; i < d->n; i++) {
		json_t *res = NULL;
		int rc = kc_drv_wait(d, i, &res);
		if (rc) {
			name_hello_failure(d, i);
			return rc;
		}
		d->a[i].hello = res;
	}
	return 0;
}

int kc_drv_hello(kc_driver *d, int ai)
{
	json_t *res = NULL;
	int rc = kc_drv_call(d, ai, "hello", hello_args(d, ai), &res);
	if (rc) {
		name_hello_failure(d, ai);
		return rc;
	}
	json_decref(d->a[ai].hello);
	d->a[ai].hello = res;
	return 0;
}

int kc_drv_spawn(kc_driver *d, int n, const char *const *urls, int nurls)
{
	int rc = kc_drv_slots(d, n);
	if (rc)
		return rc;
	for (int i = 0; i < n; i++)
		snprintf(d->a[i].url, sizeof(d->a[i].url), "%s", urls[i % nurls]);
	for (int i = 0; i < n; i++) {
		if ((rc = fork_actor(d, i)))
			return rc;
	}
	return kc_drv_hello_all(d);
}

int kc_drv_crash(kc_driver *d, int ai)
{
	kc_actor *a = &d->a[ai];
	if (a->pid > 0) {
		kill(a->pid, SIGKILL);
		int status;
		while (waitpid(a->pid, &status, 0) < 0 && errno == EINTR)
			;
		describe_status(status, a->why, sizeof(a->why));
		a->pid = 0;
	} else if (a->alive) {
		/* Not our child (a remote agent's session): it kills itself. */
		kc_chan_sendf(&a->ch, "{s:s,s:I}", "op", "crash", "id", ++d->next_id);
	}
	a->alive = 0;
	a->busy = 0;
	kc_chan_close(&a->ch);
	return 0;
}

int kc_drv_respawn(kc_driver *d, int ai)
{
	if (d->a[ai].agent[0])
		return kc_drv_reconnect_agent(d, ai);
	int rc = fork_actor(d, ai);
	if (rc)
		return rc;
	return kc_drv_hello(d, ai);
}

void kc_drv_kill_all(kc_driver *d)
{
	for (int i = 0; i < d->n; i++)
		if (d->a[i].pid > 0)
			kill(d->a[i].pid, SIGKILL);
	for (int i = 0; i < d->n; i++) {
		kc_actor *a = &d->a[i];
		if (a->pid > 0) {
			int status;
			while (waitpid(a->pid, &status, 0) < 0 && errno == EINTR)
				;
			a->pid = 0;
		}
		a->alive = 0;
		kc_chan_close(&a->ch);
		json_decref(a->hello);
		json_decref(a->reply);
		a->hello = a->reply = NULL;
	}
	free(d->a);
	d->a = NULL;
	d->n = 0;
}

void kc_drv_shutdown(kc_driver *d)
{
	for (int i = 0; i < d->n; i++) {
		kc_actor *a = &d->a[i];
		if (a->alive && !a->busy)
			kc_chan_sendf(&a->ch, "{s:s,s:I}", "op", "bye", "id", ++d->next_id);
	}
	for (int i = 0; i < d->n; i++) {
		kc_actor *a = &d->a[i];
		if (a->pid > 0) {
			int status = 0, done = 0;
			for (int k = 0; k < 400 && !done; k++) {
				if (waitpid(a->pid, &status, WNOHANG) == a->pid)
					done = 1;
				else
					usleep(5000);
			}
			if (!done) {
				kill(a->pid, SIGKILL);
				waitpid(a->pid, &status, 0);
			}
			a->pid = 0;
		}
	}
	kc_drv_kill_all(d);
}

void kc_drv_progress(const kc_driver *d, int64_t *done, int64_t *anomalies)
{
	*done = *anomalies = 0;
	for (int i = 0; i < d->n; i++) {
		*done += d->a[i].done;
		*anomalies += d->a[i].anomalies;
	}
}
