/* test_supervise.c — the supervisor's proof of a child's end: the report
 * line and its refusals, the broker side of the report (only to the parent
 * that named itself, only into a pipe), and kcl_sup_run on real child
 * processes (/bin/sh scripts standing in for the broker): a certificate
 * after kill -9 and after an exit, none for a child that did not report or
 * reported another pid, none while the child is stopped, none when the
 * supervisor itself is killed, SIGTERM passed on, restarts after 76, a
 * certificate write bounded when the volume never answers. */
#include <check.h>
#include <errno.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kaas/cluster/supervise.h"
#include "kaas/cluster/test/harness.h"
#include "util/test/ktest.h"

static const kcl_incarn INC = {42, 0xab};

static void nap_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* The broker stand-in: reports (id 7, incarnation 42 unless the script
 * sets INC, nonce ab) into the supervisor's pipe, then runs `rest`. */
static char script[4096];
static const char *sh_script(const char *pid_expr, const char *rest)
{
	snprintf(script, sizeof(script),
		 "INC=${INC:-42}; printf 'kaas-supervise 1 pid=%%s id=7 incarnation=%%s nonce=00000000000000ab "
		 "cluster=%%s\\n' %s \"$INC\" '%s' >&$" KCL_SUP_ENV_FD "; %s",
		 pid_expr, h_dir, rest);
	return script;
}

static int run_sh(const char *body, int restart, int max_starts)
{
	char *argv[] = {"/bin/sh", "-c", (char *)body, NULL};
	kcl_sup_opts o = {.argv = argv, .restart = restart, .certify_ms = 2000, .max_starts = max_starts};
	return kcl_sup_run(&o);
}

/* The number of certificates in brokers/. */
static int ncerts(void)
{
	char **names = NULL;
	size_t n = 0;
	int rc = sub_list(h_vfs, "brokers", &names, &n);
	if (rc == -ENOENT)
		return 0;
	ck_assert_int_eq(rc, 0);
	int k = 0;
	for (size_t i = 0; i < n; i++)
		k += strstr(names[i], ".gone") != NULL;
	sub_names_free(names, n);
	return k;
}

/* Waits until path exists (a script's marker), up to 10 s. */
static void wait_file(const char *path)
{
	for (int i = 0; i < 1000; i++) {
		if (access(path, F_OK) == 0)
			return;
		nap_ms(10);
	}
	ck_abort_msg("%s did not appear", path);
}

static pid_t read_pid(const char *path)
{
	wait_file(path);
	for (int i = 0; i < 100; i++) {
		FILE *f = fopen(path, "r");
		long v = 0;
		int ok = f && fscanf(f, "%ld", &v) == 1;
		if (f)
			fclose(f);
		if (ok && v > 0)
			return (pid_t)v;
		nap_ms(10);
	}
	ck_abort_msg("no pid in %s", path);
	return -1;
}

START_TEST(report_round_trip)
{
	kcl_sup_report r = {.pid = 1234, .id = 7, .inc = {1764472700456ULL, 0x1f6a105b0c2c7e2fULL}};
	snprintf(r.cluster_url, sizeof(r.cluster_url), "nfs://10.96.0.3/export/cl?version=4");
	char line[KCL_SUP_REPORT_MAX + 1], err[256];
	ck_assert_int_eq(kcl_sup_report_encode(&r, line, sizeof(line)), 0);
	ck_assert_str_eq(line, "kaas-supervise 1 pid=1234 id=7 incarnation=1764472700456 nonce=1f6a105b0c2c7e2f "
			       "cluster=nfs://10.96.0.3/export/cl?version=4\n");
	kcl_sup_report d;
	ck_assert_int_eq(kcl_sup_report_decode(line, strlen(line) - 1, &d, err, sizeof(err)), 0);
	ck_assert_int_eq(d.pid, 1234);
	ck_assert_int_eq(d.id, 7);
	ck_assert_int_eq(kcl_incarn_cmp(d.inc, r.inc), 0);
	ck_assert_str_eq(d.cluster_url, r.cluster_url);
	/* Every line cut short before the URL is refused, never half read (a
	 * cut inside the URL is why the report must end in a newline). */
	size_t url_at = (size_t)(strstr(line, "cluster=") - line) + strlen("cluster=");
	for (size_t n = 0; n <= url_at; n++)
		ck_assert_msg(kcl_sup_report_decode(line, n, &d, err, sizeof(err)) != 0, "cut at %zu read", n);
	/* Invalid reports are not encoded. */
	kcl_sup_report bad = r;
	bad.inc.nonce = 0;
	ck_assert_int_eq(kcl_sup_report_encode(&bad, line, sizeof(line)), -EINVAL);
	bad = r;
	bad.cluster_url[0] = 0;
	ck_assert_int_eq(kcl_sup_report_encode(&bad, line, sizeof(line)), -EINVAL);
	ck_assert_int_eq(kcl_sup_report_encode(&r, line, 40), -ENAMETOOLONG);
}
END_TEST

START_TEST(hostile_reports_are_refused_by_name)
{
	static const struct {
		const char *line;
		int rc;
		const char *says;
	} cases[] = {
		{"", -EBADMSG, "not a report"},
		{"hello world", -EBADMSG, "not a report"},
		{"kaas-supervise 2 pid=1 id=1 incarnation=1 nonce=0000000000000001 cluster=/x", -EPROTONOSUPPORT,
		 "version 2"},
		{"kaas-supervise 1 pid=0 id=1 incarnation=1 nonce=0000000000000001 cluster=/x", -ERANGE, "pid"},
		{"kaas-supervise 1 pid=99999999999 id=1 incarnation=1 nonce=0000000000000001 cluster=/x", -ERANGE,
		 "pid"},
		{"kaas-supervise 1 pid=5 id=2147483648 incarnation=1 nonce=0000000000000001 cluster=/x", -ERANGE,
		 "id"},
		{"kaas-supervise 1 pid=5 id=-1 incarnation=1 nonce=0000000000000001 cluster=/x", -EBADMSG, "id"},
		{"kaas-supervise 1 pid=5 id=1 incarnation=0 nonce=0000000000000001 cluster=/x", -ERANGE,
		 "incarnation"},
		{"kaas-supervise 1 pid=5 id=1 incarnation=9007199254740992 nonce=0000000000000001 cluster=/x",
		 -ERANGE, "incarnation"},
		{"kaas-supervise 1 pid=5 id=1 incarnation=3 nonce=0000000000000000 cluster=/x", -ERANGE, "nonce"},
		{"kaas-supervise 1 pid=5 id=1 incarnation=3 nonce=00000000000000AB cluster=/x", -EBADMSG, "nonce"},
		{"kaas-supervise 1 pid=5 id=1 incarnation=3 nonce=ab cluster=/x", -EBADMSG, "nonce"},
		{"kaas-supervise 1 pid=5 id=1 incarnation=3 nonce=00000000000000ab cluster=", -EBADMSG, "cluster"},
		{"kaas-supervise 1 pid=5 id=1 incarnation=3 nonce=00000000000000ab", -EBADMSG, "cluster"},
		{"kaas-supervise 1 id=1 pid=5 incarnation=3 nonce=00000000000000ab cluster=/x", -EBADMSG, "pid"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		kcl_sup_report d;
		char err[256] = "";
		int rc = kcl_sup_report_decode(cases[i].line, strlen(cases[i].line), &d, err, sizeof(err));
		ck_assert_msg(rc == cases[i].rc, "%s: rc %d, want %d (%s)", cases[i].line, rc, cases[i].rc, err);
		ck_assert_msg(strstr(err, cases[i].says), "%s: \"%s\" does not say %s", cases[i].line, err,
			      cases[i].says);
	}
	char nul[] = "kaas-supervise 1 pid=5 id=1 incarnation=3 nonce=00000000000000ab cluster=/x\0y";
	kcl_sup_report d;
	char err[256];
	ck_assert_int_eq(kcl_sup_report_decode(nul, sizeof(nul) - 1, &d, err, sizeof(err)), -EBADMSG);
}
END_TEST

START_TEST(the_broker_reports_only_to_its_parent_through_a_pipe)
{
	char err[256];
	unsetenv(KCL_SUP_ENV_FD);
	unsetenv(KCL_SUP_ENV_PID);
	ck_assert_int_eq(kcl_sup_tell(7, INC, "posix:/x", err, sizeof(err)), 0); /* not supervised */

	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	char num[32], ppid[32];
	snprintf(num, sizeof(num), "%d", p[1]);
	/* Stale variables from another process tree: nothing is written. */
	setenv(KCL_SUP_ENV_FD, num, 1);
	snprintf(ppid, sizeof(ppid), "%ld", (long)getpid()); /* not our parent */
	setenv(KCL_SUP_ENV_PID, ppid, 1);
	ck_assert_int_eq(kcl_sup_tell(7, INC, "posix:/x", err, sizeof(err)), -ESRCH);
	ck_assert_ptr_nonnull(strstr(err, "not this process's parent"));
	ck_assert_ptr_null(getenv(KCL_SUP_ENV_FD));
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	char buf[KCL_SUP_REPORT_MAX + 1];
	ck_assert_int_eq(read(p[0], buf, sizeof(buf)), -1);
	ck_assert_int_eq(errno, EAGAIN);

	/* A descriptor that is not a pipe is not written either. */
	char f[300];
	snprintf(f, sizeof(f), "%s/file", h_dir);
	int fd = open(f, O_CREAT | O_RDWR, 0644);
	ck_assert_int_ge(fd, 3);
	snprintf(num, sizeof(num), "%d", fd);
	setenv(KCL_SUP_ENV_FD, num, 1);
	snprintf(ppid, sizeof(ppid), "%ld", (long)getppid());
	setenv(KCL_SUP_ENV_PID, ppid, 1);
	ck_assert_int_eq(kcl_sup_tell(7, INC, "posix:/x", err, sizeof(err)), -EBADF);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, 0);
	close(fd);
	setenv(KCL_SUP_ENV_FD, "3x", 1);
	setenv(KCL_SUP_ENV_PID, ppid, 1);
	ck_assert_int_eq(kcl_sup_tell(7, INC, "posix:/x", err, sizeof(err)), -EINVAL);

	/* The real thing: one line, this pid, then the descriptor is closed. */
	snprintf(num, sizeof(num), "%d", p[1]);
	setenv(KCL_SUP_ENV_FD, num, 1);
	setenv(KCL_SUP_ENV_PID, ppid, 1);
	ck_assert_int_eq(kcl_sup_tell(7, INC, "posix:/x y", err, sizeof(err)), 1);
	ck_assert_int_eq(fcntl(p[1], F_GETFD), -1); /* closed */
	ssize_t n = read(p[0], buf, sizeof(buf) - 1);
	ck_assert_int_gt(n, 0);
	buf[n] = 0;
	ck_assert_int_eq(buf[n - 1], '\n');
	kcl_sup_report d;
	ck_assert_int_eq(kcl_sup_report_decode(buf, (size_t)n - 1, &d, err, sizeof(err)), 0);
	ck_assert_int_eq(d.pid, getpid());
	ck_assert_int_eq(d.id, 7);
	ck_assert_int_eq(kcl_incarn_cmp(d.inc, INC), 0);
	ck_assert_str_eq(d.cluster_url, "posix:/x y");
	close(p[0]);
}
END_TEST

START_TEST(kill_9_of_a_reporting_child_is_certified_by_the_supervisor)
{
	ck_assert_int_eq(run_sh(sh_script("$$", "kill -9 $$"), 0, 0), 128 + SIGKILL);
	char by[64], how[80];
	ck_assert_int_eq(kcl_gone_read(h_vfs, 7, INC, by, sizeof(by), how, sizeof(how)), 1);
	ck_assert_str_eq(by, "supervisor");
	ck_assert_str_eq(how, "killed by signal 9");
	kcl_incarn other = {42, 0xac};
	ck_assert_int_eq(kcl_gone_exists(h_vfs, 7, other), 0);
	ck_assert_int_eq(ncerts(), 1);
}
END_TEST

START_TEST(an_exit_is_certified_and_passed_on)
{
	ck_assert_int_eq(run_sh(sh_script("$$", "exit 76"), 0, 0), 76);
	char by[64], how[80];
	ck_assert_int_eq(kcl_gone_read(h_vfs, 7, INC, by, sizeof(by), how, sizeof(how)), 1);
	ck_assert_str_eq(how, "exited 76");
}
END_TEST

START_TEST(no_report_no_certificate)
{
	ck_assert_int_eq(run_sh("exit 3", 0, 0), 3);
	ck_assert_int_eq(run_sh("kill -9 $$", 0, 0), 128 + SIGKILL);
	/* A report from another process (a wrapper's child, say): its end is
	 * not what waitpid() shows. */
	ck_assert_int_eq(run_sh(sh_script("1", "kill -9 $$"), 0, 0), 128 + SIGKILL);
	ck_assert_int_eq(run_sh(sh_script("$(sh -c 'echo $$')", "kill -9 $$"), 0, 0), 128 + SIGKILL);
	/* Unreadable, or cut short by the death. */
	char bad[512];
	snprintf(bad, sizeof(bad), "printf 'kaas-supervise 1 pid=%%s id=7 incarnation=0 nonce=00000000000000ab cluster=%s\\n' "
			      "$$ >&$" KCL_SUP_ENV_FD "; kill -9 $$", h_dir);
	ck_assert_int_eq(run_sh(bad, 0, 0), 128 + SIGKILL);
	snprintf(bad, sizeof(bad), "printf 'kaas-supervise 1 pid=%%s id=7 incarnation=42 nonce=00000000000000ab cluster=%s' "
			      "$$ >&$" KCL_SUP_ENV_FD "; kill -9 $$", h_dir);
	ck_assert_int_eq(run_sh(bad, 0, 0), 128 + SIGKILL);
	ck_assert_int_eq(ncerts(), 0);
}
END_TEST

/* The supervisor in a process of its own, so that the test can signal it. */
static pid_t fork_supervisor(const char *body, int restart)
{
	pid_t p = fork();
	ck_assert_int_ge(p, 0);
	if (p == 0)
		_exit(run_sh(body, restart, 0));
	return p;
}

START_TEST(a_stopped_child_is_not_certified)
{
	char pidf[300], rest[1200];
	snprintf(pidf, sizeof(pidf), "%s/child.pid", h_dir);
	snprintf(rest, sizeof(rest), "echo $$ > %s.tmp; mv %s.tmp %s; kill -STOP $$; exit 5", pidf, pidf, pidf);
	pid_t sup = fork_supervisor(sh_script("$$", rest), 1);
	pid_t child = read_pid(pidf);
	/* Stopped (and reported): a pause, not an end. */
	for (int i = 0; i < 100; i++) {
		char st[64] = "";
		char path[64];
		snprintf(path, sizeof(path), "/proc/%ld/stat", (long)child);
		FILE *f = fopen(path, "r");
		if (f) {
			if (!fgets(st, sizeof(st), f))
				st[0] = 0;
			fclose(f);
		}
		if (strstr(st, ") T "))
			break;
		nap_ms(10);
	}
	nap_ms(300);
	ck_assert_int_eq(ncerts(), 0);
	int ws;
	ck_assert_int_eq(waitpid(sup, &ws, WNOHANG), 0); /* still supervising */
	kill(child, SIGCONT);
	ck_assert_int_eq(waitpid(sup, &ws, 0), sup);
	ck_assert(WIFEXITED(ws));
	ck_assert_int_eq(WEXITSTATUS(ws), 5); /* 5 is not restarted */
	ck_assert_int_eq(kcl_gone_exists(h_vfs, 7, INC), 1);
}
END_TEST

START_TEST(a_killed_supervisor_leaves_the_child_and_no_certificate)
{
	char pidf[300], rest[1200];
	snprintf(pidf, sizeof(pidf), "%s/child.pid", h_dir);
	snprintf(rest, sizeof(rest), "echo $$ > %s.tmp; mv %s.tmp %s; while :; do sleep 0.05; done", pidf, pidf,
		 pidf);
	pid_t sup = fork_supervisor(sh_script("$$", rest), 1);
	pid_t child = read_pid(pidf);
	nap_ms(100);
	kill(sup, SIGKILL);
	int ws;
	ck_assert_int_eq(waitpid(sup, &ws, 0), sup);
	nap_ms(200);
	ck_assert_int_eq(kill(child, 0), 0); /* the broker runs on */
	kill(child, SIGKILL);
	nap_ms(300);
	ck_assert_int_eq(ncerts(), 0); /* nobody saw it end */
}
END_TEST

START_TEST(sigterm_is_passed_on_once_and_ends_the_supervisor)
{
	char ready[300], count[300], done[300], rest[1500];
	snprintf(ready, sizeof(ready), "%s/ready", h_dir);
	snprintf(count, sizeof(count), "%s/count", h_dir);
	snprintf(done, sizeof(done), "%s/done", h_dir);
	/* The child counts the TERMs it gets and ends when told to. */
	snprintf(rest, sizeof(rest),
		 "n=0; trap 'n=$((n+1)); echo $n > %s' TERM; touch %s; while [ ! -e %s ]; do sleep 0.05; done; exit 0",
		 count, ready, done);
	pid_t sup = fork_supervisor(sh_script("$$", rest), 1);
	wait_file(ready);
	/* Twice at once (a launcher and a process-group kill, say): the broker
	 * would take the second as "stop now"; it gets one. */
	kill(sup, SIGTERM);
	wait_file(count);
	kill(sup, SIGTERM); /* the first was handled: a second one would be counted */
	nap_ms(400);
	FILE *f = fopen(count, "r");
	int n = 0;
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fscanf(f, "%d", &n), 1);
	fclose(f);
	ck_assert_int_eq(n, 1);
	int ws;
	ck_assert_int_eq(waitpid(sup, &ws, WNOHANG), 0); /* the broker drains: still supervised */
	FILE *d = fopen(done, "w");
	ck_assert_ptr_nonnull(d);
	fclose(d);
	ck_assert_int_eq(waitpid(sup, &ws, 0), sup);
	ck_assert(WIFEXITED(ws));
	ck_assert_int_eq(WEXITSTATUS(ws), 0); /* the child's status; not restarted */
	char by[64], how[80];
	ck_assert_int_eq(kcl_gone_read(h_vfs, 7, INC, by, sizeof(by), how, sizeof(how)), 1);
	ck_assert_str_eq(how, "exited 0");
	ck_assert_int_eq(ncerts(), 1);
}
END_TEST

START_TEST(restart_starts_new_incarnations_after_give_ups_and_crashes)
{
	char cnt[300], rest[1200];
	snprintf(cnt, sizeof(cnt), "%s/count", h_dir);
	/* Runs 1..4: exit 76, kill -9, exit 77, exit 0 (not restarted). */
	snprintf(rest, sizeof(rest),
		 "case $INC in 1) exit 76;; 2) kill -9 $$;; 3) exit 77;; *) exit 0;; esac");
	char body[4096 + 200];
	snprintf(body, sizeof(body), "INC=$(( $(cat %s 2>/dev/null || echo 0) + 1 )); echo $INC > %s; %s", cnt, cnt,
		 sh_script("$$", rest));
	ck_assert_int_eq(run_sh(body, 1, 10), 0);
	ck_assert_int_eq(ncerts(), 4);
	const char *want[] = {"exited 76", "killed by signal 9", "exited 77", "exited 0"};
	for (uint64_t i = 1; i <= 4; i++) {
		kcl_incarn inc = {i, 0xab};
		char by[64], how[80];
		ck_assert_int_eq(kcl_gone_read(h_vfs, 7, inc, by, sizeof(by), how, sizeof(how)), 1);
		ck_assert_str_eq(by, "supervisor");
		ck_assert_str_eq(how, want[i - 1]);
	}
	/* Without --restart, the first give-up ends it. */
	ck_assert_int_eq(unlink(cnt), 0);
	ck_assert_int_eq(run_sh(body, 0, 10), 76);
	/* A configuration error (exit 2) is not restarted either. */
	ck_assert_int_eq(run_sh("exit 2", 1, 10), 2);
}
END_TEST

/* A cluster volume that takes calls and never answers them (a loopback
 * socket nobody reads: the kernel completes the connection and buffers
 * what libnfs sends): the certificate is given up at its budget, not
 * after libnfs's own RPC timeouts, and the supervisor goes on. */
START_TEST(a_volume_that_never_answers_bounds_the_certificate)
{
	int ls = socket(AF_INET, SOCK_STREAM, 0);
	ck_assert_int_ge(ls, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	ck_assert_int_eq(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(ls, 16), 0);
	ck_assert_int_eq(getsockname(ls, (struct sockaddr *)&a, &al), 0);
	int port = ntohs(a.sin_port);
	char body[1024];
	snprintf(body, sizeof(body),
		 "printf 'kaas-supervise 1 pid=%%s id=7 incarnation=42 nonce=00000000000000ab "
		 "cluster=nfs://127.0.0.1/x?version=3&nfsport=%d&mountport=%d\n' $$ >&$" KCL_SUP_ENV_FD "; exit 76",
		 port, port);
	char *argv[] = {"/bin/sh", "-c", body, NULL};
	/* libnfs alone would wait 10 s for the first call's answer (the URL's
	 * default timeout), and as long again for each retry. */
	kcl_sup_opts o = {.argv = argv, .restart = 0, .certify_ms = 1000, .max_starts = 1};
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ck_assert_int_eq(kcl_sup_run(&o), 76);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	ck_assert_msg(s < 8.0, "the supervisor waited %.1f s on a volume that never answers", s);
	close(ls);
}
END_TEST

START_TEST(certificate_content_is_informational_and_checked)
{
	char by[64], how[80], path[128];
	ck_assert_int_eq(kcl_gone_read(h_vfs, 7, INC, by, sizeof(by), how, sizeof(how)), 0);
	ck_assert_int_eq(kcl_gone_write_how(h_vfs, 7, INC, "supervisor", "killed by signal 9\"}\n"), 0);
	ck_assert_int_eq(kcl_gone_read(h_vfs, 7, INC, by, sizeof(by), how, sizeof(how)), 1);
	ck_assert_str_eq(how, "killed by signal 9???");
	/* Written by another host: empty, garbage, too long — still a
	 * certificate (the name is the fact), the content says "?". */
	kcl_incarn b = {43, 1}, c = {44, 1}, d = {45, 1};
	ck_assert_int_eq(kcl_gone_path(7, b, path, sizeof(path)), 0);
	ck_assert_int_eq(sub_create_excl(h_vfs, path, "", 0), 0);
	ck_assert_int_eq(kcl_gone_read(h_vfs, 7, b, by, sizeof(by), how, sizeof(how)), 1);
	ck_assert_str_eq(by, "?");
	ck_assert_int_eq(kcl_gone_path(7, c, path, sizeof(path)), 0);
	ck_assert_int_eq(sub_create_excl(h_vfs, path, "{\"by\":\"\\u001b[31mx\"", 19), 0);
	ck_assert_int_eq(kcl_gone_read(h_vfs, 7, c, by, sizeof(by), how, sizeof(how)), 1);
	ck_assert_str_eq(by, "?");
	/* Names: what kcl_gone_path makes is read back; nothing else is one. */
	int32_t pid_;
	kcl_incarn pinc;
	ck_assert_int_eq(kcl_gone_path(2147483647, (kcl_incarn){9007199254740991ULL, ~0ULL}, path, sizeof(path)), 0);
	ck_assert_int_eq(kcl_gone_parse_name(path + strlen("brokers/"), &pid_, &pinc), 0);
	ck_assert_int_eq(pid_, 2147483647);
	ck_assert(pinc.incarnation == 9007199254740991ULL && pinc.nonce == ~0ULL);
	static const char *const not_names[] = {"7.json", "7-000000000000002a-00000000000000ab.gon",
		"7-2a-00000000000000ab.gone", "7-000000000000002A-00000000000000ab.gone",
		"-000000000000002a-00000000000000ab.gone", "2147483648-000000000000002a-00000000000000ab.gone",
		"7-000000000000002a-00000000000000ab.gone.tmp", "7-000000000000002a-000000000000000ab.gone", ""};
	for (size_t i = 0; i < sizeof(not_names) / sizeof(not_names[0]); i++)
		ck_assert_msg(kcl_gone_parse_name(not_names[i], &pid_, &pinc) == -EINVAL, "%s", not_names[i]);
	char big[3000];
	memset(big, 'x', sizeof(big));
	ck_assert_int_eq(kcl_gone_path(7, d, path, sizeof(path)), 0);
	ck_assert_int_eq(sub_create_excl(h_vfs, path, big, sizeof(big)), 0);
	ck_assert_int_eq(kcl_gone_read(h_vfs, 7, d, by, sizeof(by), how, sizeof(how)), 1);
	ck_assert_str_eq(by, "?");
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){.suite = "cluster-supervise", .timeout = 60, .setup = h_setup,
					 .teardown = h_teardown},
			  KTEST_LIST(report_round_trip, hostile_reports_are_refused_by_name,
				     the_broker_reports_only_to_its_parent_through_a_pipe,
				     kill_9_of_a_reporting_child_is_certified_by_the_supervisor,
				     an_exit_is_certified_and_passed_on, no_report_no_certificate,
				     a_stopped_child_is_not_certified,
				     a_killed_supervisor_leaves_the_child_and_no_certificate,
				     sigterm_is_passed_on_once_and_ends_the_supervisor,
				     restart_starts_new_incarnations_after_give_ups_and_crashes,
				     a_volume_that_never_answers_bounds_the_certificate,
				     certificate_content_is_informational_and_checked));
}
