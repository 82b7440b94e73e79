/*
 * supervise.c — `kaas supervise` and the broker's report to it
 * (supervise.h; the safety argument is in docs/cluster.md, "Process death:
 * the fast path").
 *
 * The only proof this file hands out is the kernel's: waitpid() returned an
 * exit or a killing signal for the pid fork() gave us, and that same pid
 * named its incarnation on the pipe.  Everything else (a silent child, a
 * stopped one, a report from another pid, the supervisor's own death) ends
 * in no certificate, which costs the lease and nothing else.
 */
#include "kaas/cluster/supervise.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "substrates/sub.h"
#include "util/clock.h"
#include "util/log.h"

#define REPORT_MAGIC "kaas-supervise"
#define REPORT_VERSION 1
#define SHORT_RUN_NS (10 * 1000000000LL) /* a run shorter than this backs off */
#define BACKOFF_MAX_MS 10000

/* ---- the report ----------------------------------------------------------------------- */

static int valid_report(const kcl_sup_report *r)
{
	return r->pid > 0 && r->id >= 0 && r->inc.incarnation >= 1 && r->inc.incarnation <= (uint64_t)KCL_SEQ_MAX &&
	       r->inc.nonce != 0 && r->cluster_url[0] && !strchr(r->cluster_url, '\n');
}

int kcl_sup_report_encode(const kcl_sup_report *r, char *dst, size_t dstlen)
{
	if (!valid_report(r))
		return -EINVAL;
	int n = snprintf(dst, dstlen,
			 REPORT_MAGIC " %d pid=%ld id=%" PRId32 " incarnation=%" PRIu64 " nonce=%016" PRIx64
				      " cluster=%s\n",
			 REPORT_VERSION, (long)r->pid, r->id, r->inc.incarnation, r->inc.nonce, r->cluster_url);
	return n < 0 || (size_t)n >= dstlen || (size_t)n > KCL_SUP_REPORT_MAX ? -ENAMETOOLONG : 0;
}

/* One "key=value" word of a report: the value's digits in base `base`,
 * bounded by max; the word must end at a space. */
static int field(const char **p, const char *end, const char *key, int base, uint64_t max, uint64_t *out)
{
	size_t kl = strlen(key);
	if ((size_t)(end - *p) <= kl || memcmp(*p, key, kl) != 0)
		return -EBADMSG;
	const char *s = *p + kl;
	uint64_t v = 0;
	int nd = 0;
	for (; s < end && *s != ' '; s++, nd++) {
		int d = *s >= '0' && *s <= '9'   ? *s - '0'
			: base == 16 && *s >= 'a' && *s <= 'f' ? *s - 'a' + 10
							       : -1;
		if (d < 0)
			return -EBADMSG;
		if (v > (max - (uint64_t)d) / (uint64_t)base)
			return -ERANGE;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	if (nd == 0 || nd > 20 || s >= end)
		return -EBADMSG;
	*p = s + 1;
	*out = v;
	return 0;
}

int kcl_sup_report_decode(const char *line, size_t len, kcl_sup_report *out, char *err, size_t errlen)
{
	const char *p = line, *end = line + len;
	const size_t ml = strlen(REPORT_MAGIC " ");
	uint64_t ver, pid, id, inc, nonce;
	int rc;
	memset(out, 0, sizeof(*out));
	if (len > KCL_SUP_REPORT_MAX || memchr(line, 0, len) || memchr(line, '\n', len)) {
		snprintf(err, errlen, "not a report line (too long, or a NUL or newline inside)");
		return -EBADMSG;
	}
	if (len < ml || memcmp(p, REPORT_MAGIC " ", ml) != 0) {
		snprintf(err, errlen, "not a report (no \"" REPORT_MAGIC "\" at its start)");
		return -EBADMSG;
	}
	p += ml;
	if ((rc = field(&p, end, "", 10, 1000, &ver))) {
		snprintf(err, errlen, "no version");
		return -EBADMSG;
	}
	if (ver != REPORT_VERSION) {
		snprintf(err, errlen, "report version %" PRIu64 " (this kaas reads %d)", ver, REPORT_VERSION);
		return ver > REPORT_VERSION ? -EPROTONOSUPPORT : -EBADMSG;
	}
	if ((rc = field(&p, end, "pid=", 10, INT_MAX, &pid)) || pid == 0) {
		snprintf(err, errlen, "pid: missing or out of range");
		return rc == -ERANGE || pid == 0 ? -ERANGE : -EBADMSG;
	}
	if ((rc = field(&p, end, "id=", 10, KCL_ID_MAX, &id))) {
		snprintf(err, errlen, "id: missing or out of range");
		return rc;
	}
	if ((rc = field(&p, end, "incarnation=", 10, (uint64_t)KCL_SEQ_MAX, &inc)) || inc == 0) {
		snprintf(err, errlen, "incarnation: missing or out of range 1..2^53-1");
		return rc ? rc : -ERANGE;
	}
	if ((size_t)(end - p) == strlen("nonce=") + 16) {
		snprintf(err, errlen, "cluster: missing");
		return -EBADMSG;
	}
	if ((size_t)(end - p) < strlen("nonce=") + 17 || p[strlen("nonce=") + 16] != ' ') {
		snprintf(err, errlen, "nonce: not 16 lower-case hex digits");
		return -EBADMSG;
	}
	if ((rc = field(&p, end, "nonce=", 16, UINT64_MAX, &nonce)) || nonce == 0) {
		snprintf(err, errlen, "nonce: not 16 lower-case hex digits, or zero");
		return rc ? rc : -ERANGE;
	}
	const size_t cl = strlen("cluster=");
	if ((size_t)(end - p) <= cl || memcmp(p, "cluster=", cl) != 0) {
		snprintf(err, errlen, "cluster: missing or empty");
		return -EBADMSG;
	}
	p += cl;
	out->pid = (pid_t)pid;
	out->id = (int32_t)id;
	out->inc.incarnation = inc;
	out->inc.nonce = nonce;
	memcpy(out->cluster_url, p, (size_t)(end - p));
	out->cluster_url[end - p] = 0;
	return 0;
}

/* A descriptor number from the environment: digits only, 3..INT_MAX. */
static int env_number(const char *s, long *out)
{
	if (!s || !*s || strlen(s) > 10)
		return -EINVAL;
	long v = 0;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (*s - '0');
	}
	*out = v;
	return v > INT_MAX ? -EINVAL : 0;
}

int kcl_sup_tell(int32_t id, kcl_incarn inc, const char *cluster_url, char *err, size_t errlen)
{
	const char *fds = getenv(KCL_SUP_ENV_FD), *pids = getenv(KCL_SUP_ENV_PID);
	if (!fds && !pids)
		return 0;
	long fd = -1, ppid = 0;
	int rc = 0;
	struct stat st;
	kcl_sup_report r = {.pid = getpid(), .id = id, .inc = inc};
	char line[KCL_SUP_REPORT_MAX + 1];
	if (env_number(fds, &fd) || fd < 3 || env_number(pids, &ppid) || ppid <= 1) {
		snprintf(err, errlen, "%s=%s and %s=%s do not name a descriptor and a supervisor", KCL_SUP_ENV_FD,
			 fds ? fds : "(unset)", KCL_SUP_ENV_PID, pids ? pids : "(unset)");
		fd = -1;
		rc = -EINVAL;
		goto out;
	}
	/* Inherited variables of some other process tree must not make this
	 * broker write into whatever descriptor has that number here. */
	if (getppid() != (pid_t)ppid) {
		snprintf(err, errlen, "%s=%ld is not this process's parent (%ld): stale variables, not reporting",
			 KCL_SUP_ENV_PID, ppid, (long)getppid());
		fd = -1;
		rc = -ESRCH;
		goto out;
	}
	if (fstat((int)fd, &st) || !S_ISFIFO(st.st_mode)) {
		snprintf(err, errlen, "%s=%ld is not a pipe", KCL_SUP_ENV_FD, fd);
		fd = -1;
		rc = -EBADF;
		goto out;
	}
	snprintf(r.cluster_url, sizeof(r.cluster_url), "%s", cluster_url ? cluster_url : "");
	if ((rc = kcl_sup_report_encode(&r, line, sizeof(line)))) {
		snprintf(err, errlen, "the report does not fit in one line (cluster directory URL of %zu bytes)",
			 strlen(r.cluster_url));
		goto out;
	}
	/* At most PIPE_BUF bytes: one write, whole or not at all. */
	size_t n = strlen(line);
	ssize_t w;
	do
		w = write((int)fd, line, n);
	while (w < 0 && errno == EINTR);
	if (w < 0 || (size_t)w != n) {
		rc = w < 0 ? -errno : -EIO;
		snprintf(err, errlen, "writing the report to the supervisor: %s", strerror(-rc));
		goto out;
	}
	rc = 1;
out:
	if (fd >= 3)
		close((int)fd);
	unsetenv(KCL_SUP_ENV_FD);
	unsetenv(KCL_SUP_ENV_PID);
	return rc;
}

/* ---- the supervisor ------------------------------------------------------------------- */

int kcl_sup_exit_code(int wstatus)
{
	if (WIFEXITED(wstatus))
		return WEXITSTATUS(wstatus);
	if (WIFSIGNALED(wstatus))
		return 128 + WTERMSIG(wstatus);
	return 1;
}

static void describe(int wstatus, char *dst, size_t len)
{
	if (WIFEXITED(wstatus))
		snprintf(dst, len, "exited %d", WEXITSTATUS(wstatus));
	else if (WIFSIGNALED(wstatus))
		snprintf(dst, len, "killed by signal %d%s", WTERMSIG(wstatus),
			 WCOREDUMP(wstatus) ? " (core dumped)" : "");
	else
		snprintf(dst, len, "ended (status %#x)", (unsigned)wstatus);
}

static void sleep_ms(int64_t ms)
{
	struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* The certificate, retried while the volume answers errors; bounded, since
 * after the peers' session timeout it only speeds up the next incarnation. */
static int certify(const kcl_sup_report *r, const char *how, int64_t budget_ms)
{
	int64_t deadline = ku_mono_ns() + budget_ms * 1000000LL, delay = 100;
	char err[512], path[96];
	kcl_gone_path(r->id, r->inc, path, sizeof(path));
	for (int attempt = 1;; attempt++) {
		sub_vfs *v = NULL;
		int rc = sub_open_url(r->cluster_url, &v, err, sizeof(err));
		if (rc == 0) {
			rc = kcl_gone_write_how(v, r->id, r->inc, "supervisor", how);
			snprintf(err, sizeof(err), "%s", sub_strerror(rc));
			sub_destroy(v);
		}
		if (rc == 0)
			return 0;
		if (ku_mono_ns() >= deadline) {
			KLOG_ERR("supervise", "could not write %s in %s after %d attempts: %s; peers wait out its lease",
				 path, r->cluster_url, attempt, err);
			return rc;
		}
		KLOG_WARN("supervise", "writing %s in %s: %s; retrying", path, r->cluster_url, err);
		sleep_ms(delay);
		delay = delay * 2 > 1000 ? 1000 : delay * 2;
	}
}

/* certify() in a child process, killed at the budget: a volume that
 * accepts calls and never answers them holds each libnfs call for its own
 * RPC timeout (tens of seconds per call), and the supervisor must go on
 * restarting the broker and passing signals.  A certificate is one atomic
 * create, so a writer killed midway leaves none, never half of one. */
static int certify_bounded(const kcl_sup_report *r, const char *how, int64_t budget_ms)
{
	int64_t deadline = ku_mono_ns() + budget_ms * 1000000LL;
	pid_t pid = fork();
	if (pid < 0) /* no process to spare: write it here, unbounded */
		return certify(r, how, budget_ms);
	if (pid == 0)
		_exit(certify(r, how, budget_ms) == 0 ? 0 : 1);
	int st = 0;
	for (;;) {
		pid_t w = waitpid(pid, &st, WNOHANG);
		if (w == pid)
			return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
		if (w < 0 && errno != EINTR)
			return -errno;
		if (ku_mono_ns() >= deadline + 500000000LL) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			char path[96];
			kcl_gone_path(r->id, r->inc, path, sizeof(path));
			KLOG_ERR("supervise", "gave up writing %s in %s after %lld ms: the volume does not answer; "
					      "peers wait out its lease",
				 path, r->cluster_url, (long long)budget_ms);
			return -ETIMEDOUT;
		}
		sleep_ms(20);
	}
}

typedef struct child {
	pid_t pid;
	int rfd;
	char buf[KCL_SUP_REPORT_MAX + 1];
	size_t len;
	int reported;   /* a valid report of this pid was read */
	int refused;    /* something unusable was read: never a certificate */
	kcl_sup_report rep;
	int64_t started_ns;
} child;

/* Reads what the child wrote so far; the first complete line decides. */
static void read_report(child *c)
{
	for (;;) {
		if (c->rfd < 0)
			return;
		char tmp[512];
		ssize_t n = read(c->rfd, tmp, sizeof(tmp));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
				close(c->rfd);
				c->rfd = -1;
			}
			return;
		}
		if (c->reported || c->refused)
			continue; /* one report per process: the rest is ignored */
		size_t take = (size_t)n;
		if (c->len + take > KCL_SUP_REPORT_MAX)
			take = KCL_SUP_REPORT_MAX - c->len;
		memcpy(c->buf + c->len, tmp, take);
		c->len += take;
		char *nl = memchr(c->buf, '\n', c->len);
		if (!nl) {
			if (c->len >= KCL_SUP_REPORT_MAX) {
				KLOG_WARN("supervise", "pid %ld: report longer than %d bytes; no certificate for it",
					  (long)c->pid, KCL_SUP_REPORT_MAX);
				c->refused = 1;
			}
			continue;
		}
		char err[256];
		kcl_sup_report r;
		int rc = kcl_sup_report_decode(c->buf, (size_t)(nl - c->buf), &r, err, sizeof(err));
		if (rc) {
			KLOG_WARN("supervise", "pid %ld: unreadable report (%s); no certificate for it", (long)c->pid, err);
			c->refused = 1;
		} else if (r.pid != c->pid) {
			/* Not the process we will see exit (a wrapper that forks?): its
			 * end would prove nothing about the reporter. */
			KLOG_WARN("supervise", "report of broker %" PRId32 " from pid %ld, not from the child %ld; "
					       "no certificate for it",
				  r.id, (long)r.pid, (long)c->pid);
			c->refused = 1;
		} else {
			c->rep = r;
			c->reported = 1;
			KLOG_INFO("supervise", "broker %" PRId32 " (pid %ld) is incarnation %" PRIu64 " nonce %016" PRIx64
					       " in %s",
				  r.id, (long)r.pid, r.inc.incarnation, r.inc.nonce, r.cluster_url);
		}
	}
}

static int start_child(const kcl_sup_opts *o, const sigset_t *oldmask, child *c)
{
	int p[2];
	memset(c, 0, sizeof(*c));
	c->rfd = -1;
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	char fdbuf[16], pidbuf[24];
	snprintf(fdbuf, sizeof(fdbuf), "%d", p[1]);
	snprintf(pidbuf, sizeof(pidbuf), "%ld", (long)getpid());
	pid_t pid = fork();
	if (pid < 0) {
		int rc = -errno;
		close(p[0]);
		close(p[1]);
		return rc;
	}
	if (pid == 0) {
		/* The supervisor has one thread: setenv is safe here. */
		close(p[0]);
		if (p[1] < 3) { /* never 0..2: the broker checks for >= 3 */
			int d = fcntl(p[1], F_DUPFD_CLOEXEC, 3);
			if (d < 0)
				_exit(127);
			p[1] = d;
			snprintf(fdbuf, sizeof(fdbuf), "%d", d);
		}
		fcntl(p[1], F_SETFD, 0);
		signal(SIGPIPE, SIG_DFL);
		sigprocmask(SIG_SETMASK, oldmask, NULL);
		setenv(KCL_SUP_ENV_FD, fdbuf, 1);
		setenv(KCL_SUP_ENV_PID, pidbuf, 1);
		execv(o->argv[0], o->argv);
		static const char msg[] = "kaas supervise: cannot execute the broker\n";
		if (write(2, msg, sizeof(msg) - 1) < 0)
			_exit(127);
		_exit(127);
	}
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	c->pid = pid;
	c->rfd = p[0];
	c->started_ns = ku_mono_ns();
	return 0;
}

/* Restart after a give-up exit or a crash; never after a clean or
 * configuration exit (0, 1, 2, 78: starting again would fail the same way). */
static int wants_restart(int wstatus)
{
	if (WIFSIGNALED(wstatus))
		return 1;
	int c = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
	return c == 75 || c == 76 || c == 77;
}

#define REPEAT_NS 1000000000LL /* a stop signal this soon after another is the same request */

/* Reads the pending signals: SIGCHLD sets *chld, the others *stop and are
 * passed to the child.  A broker takes a second SIGTERM or SIGINT during
 * its drain as "stop now", so the same request must not reach it twice:
 * one the kernel sent (a terminal's Ctrl-C or hang-up) went to the whole
 * foreground process group, the broker included, and is not passed on;
 * one that follows another within REPEAT_NS (a launcher's TERM after the
 * terminal's INT) is not passed on either. */
static void take_signals(int sfd, pid_t pid, int *stop, int *chld, int64_t *last_ns)
{
	struct signalfd_siginfo si;
	while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		int sig = (int)si.ssi_signo;
		if (sig == SIGCHLD) {
			*chld = 1;
			continue;
		}
		*stop = 1;
		int64_t now = ku_mono_ns();
		int repeat = *last_ns && now - *last_ns < REPEAT_NS;
		*last_ns = now;
		if (pid <= 0)
			continue;
		if (si.ssi_code == SI_KERNEL) {
			KLOG_INFO("supervise", "signal %d from the terminal reached the broker (pid %ld) too; stopping "
					       "when it does",
				  sig, (long)pid);
		} else if (repeat) {
			KLOG_INFO("supervise", "signal %d right after another: not passed on again", sig);
		} else {
			KLOG_INFO("supervise", "passing signal %d to the broker (pid %ld)", sig, (long)pid);
			kill(pid, sig);
		}
	}
}

int kcl_sup_run(const kcl_sup_opts *o)
{
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, &old);
	int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		KLOG_ERR("supervise", "signalfd: %s", strerror(errno));
		sigprocmask(SIG_SETMASK, &old, NULL);
		return 1;
	}
	int64_t budget = o->certify_ms > 0 ? o->certify_ms : KCL_SUP_CERTIFY_MS;
	int code = 1, stop = 0, starts = 0, short_runs = 0;
	int64_t last_sig_ns = 0;
	for (;;) {
		child c;
		int rc = start_child(o, &old, &c);
		if (rc) {
			KLOG_ERR("supervise", "starting %s: %s", o->argv[0], strerror(-rc));
			code = 1;
			break;
		}
		starts++;
		KLOG_INFO("supervise", "started the broker (pid %ld)", (long)c.pid);
		int wstatus = 0, done = 0;
		while (!done) {
			struct pollfd pf[2] = {{.fd = sfd, .events = POLLIN}, {.fd = c.rfd, .events = POLLIN}};
			if (poll(pf, c.rfd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR) {
				KLOG_ERR("supervise", "poll: %s", strerror(errno));
				sleep_ms(100);
			}
			read_report(&c);
			int chld = 0;
			take_signals(sfd, c.pid, &stop, &chld, &last_sig_ns);
			/* Reap everything (as PID 1 of a container, orphans land here);
			 * only our child's exit or death counts, never a stop. */
			pid_t w;
			int st;
			while ((w = waitpid(-1, &st, WNOHANG)) > 0)
				if (w == c.pid && (WIFEXITED(st) || WIFSIGNALED(st))) {
					wstatus = st;
					done = 1;
				}
		}
		/* Whatever it wrote before its end is still in the pipe. */
		read_report(&c);
		if (c.rfd >= 0)
			close(c.rfd);
		char how[64];
		describe(wstatus, how, sizeof(how));
		code = kcl_sup_exit_code(wstatus);
		if (c.reported) {
			KLOG_INFO("supervise", "broker %" PRId32 " incarnation %" PRIu64 " (pid %ld) %s; certifying it gone",
				  c.rep.id, c.rep.inc.incarnation, (long)c.pid, how);
			if (certify_bounded(&c.rep, how, budget) == 0) {
				char path[96];
				kcl_gone_path(c.rep.id, c.rep.inc, path, sizeof(path));
				KLOG_INFO("supervise", "certified: %s is in place (by supervisor: %s, unless a same-host peer or the broker itself wrote it first)", path, how);
			}
		} else {
			KLOG_WARN("supervise", "the broker (pid %ld) %s without reporting its incarnation; "
					       "no certificate (peers wait out its lease)",
				  (long)c.pid, how);
		}
		int chld = 0;
		take_signals(sfd, -1, &stop, &chld, &last_sig_ns);
		if (stop || !o->restart || !wants_restart(wstatus) || (o->max_starts && starts >= o->max_starts))
			break;
		short_runs = ku_mono_ns() - c.started_ns < SHORT_RUN_NS ? short_runs + 1 : 0;
		int64_t delay = 0;
		if (short_runs > 1) {
			delay = 200LL << (short_runs - 2 > 6 ? 6 : short_runs - 2);
			if (delay > BACKOFF_MAX_MS)
				delay = BACKOFF_MAX_MS;
		}
		KLOG_INFO("supervise", "starting a new incarnation%s", delay ? " after a back-off" : "");
		int64_t until = ku_mono_ns() + delay * 1000000LL;
		while (!stop && ku_mono_ns() < until) {
			struct pollfd pf = {.fd = sfd, .events = POLLIN};
			int64_t left = (until - ku_mono_ns()) / 1000000 + 1;
			poll(&pf, 1, (int)left);
			take_signals(sfd, -1, &stop, &chld, &last_sig_ns);
		}
		if (stop)
			break;
	}
	close(sfd);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return code;
}

/* ---- the command ---------------------------------------------------------------------- */

static void usage(FILE *out)
{
	fprintf(out,
		"usage: kaas supervise [--restart] -- BROKER FLAGS...\n"
		"\n"
		"Runs `kaas BROKER FLAGS...` as a child and, when it exits or is killed, writes its\n"
		"exit certificate (CLUSTER/brokers/<id>-<incarnation>-<nonce>.gone) so that the other\n"
		"brokers take its partitions over at once instead of waiting out its lease.  The\n"
		"broker tells the supervisor its incarnation and cluster directory itself; a child\n"
		"that is only stopped (SIGSTOP) or silent gets no certificate.\n"
		"\n"
		"  --restart   start a new incarnation when the broker gave its leadership up\n"
		"              (exit 75, 76, 77) or died of a signal (kill -9, segfault, OOM);\n"
		"              without it the supervisor exits with the broker's status\n"
		"              (128 + N for signal N)\n"
		"\n"
		"SIGTERM, SIGINT and SIGHUP are passed to the broker (SIGTERM drains it); the\n"
		"supervisor exits when the broker does.  Use it as the container entry point or the\n"
		"systemd ExecStart (docs/operations.md).\n");
}

int kcl_supervise_main(int argc, char **argv)
{
	kcl_sup_opts o = {0};
	int i = 1;
	for (; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		if (strcmp(argv[i], "--restart") == 0) {
			o.restart = 1;
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else {
			break; /* the broker's flags, without a "--" before them */
		}
	}
	if (i >= argc) {
		fprintf(stderr, "kaas supervise: no broker flags (kaas supervise [--restart] -- --data DIR ...)\n");
		return 2;
	}
	if (strcmp(argv[i], "supervise") == 0 || strcmp(argv[i], "trash") == 0 || strcmp(argv[i], "users") == 0) {
		fprintf(stderr, "kaas supervise: supervises a broker, not `kaas %s`\n", argv[i]);
		return 2;
	}
	static char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0) {
		fprintf(stderr, "kaas supervise: cannot find this program (/proc/self/exe): %s\n", strerror(errno));
		return 1;
	}
	self[n] = 0;
	/* Replaced under us (an upgrade): the path now names the new binary. */
	if (n > 10 && strcmp(self + n - 10, " (deleted)") == 0)
		self[n - 10] = 0;
	char **cargv = calloc((size_t)(argc - i) + 2, sizeof(*cargv));
	if (!cargv) {
		fprintf(stderr, "kaas supervise: out of memory\n");
		return 1;
	}
	cargv[0] = self;
	for (int k = i; k < argc; k++)
		cargv[k - i + 1] = argv[k];
	o.argv = cargv;
	int code = kcl_sup_run(&o);
	free(cargv);
	return code;
}
