/*
 * test_agent.c — remote agents on loopback: address parsing, the --agent
 * options, the host identity, and real agent processes (kc_cmd_agent) driven
 * by kc_drv_connect_agents: greeting and hello, steps over TCP, a second
 * driver refused with a reason, crash and reconnect, the agent freed when
 * the driver leaves, a clean exit on SIGTERM.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance/agent.h"
#include "conformance/agent_int.h"
#include "conformance/driver.h"
#include "conformance/kc.h"
#include "conformance/opts.h"
#include "util/test/ktest.h"
#include "substrates/test/scratch.h"

START_TEST(hostport_parsing)
{
	char h[64], p[16];
	ck_assert_int_eq(kc_split_hostport("node-1.example:7070", h, sizeof(h), p, sizeof(p)), 0);
	ck_assert_str_eq(h, "node-1.example");
	ck_assert_str_eq(p, "7070");
	ck_assert_int_eq(kc_split_hostport("[::1]:65535", h, sizeof(h), p, sizeof(p)), 0);
	ck_assert_str_eq(h, "::1");
	ck_assert_str_eq(p, "65535");
	const char *bad[] = {"", "host", ":80", "host:", "host:0", "host:65536", "::1:80",
			     "[::1]", "[::1]80", "host:8a", "host:-1"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(kc_split_hostport(bad[i], h, sizeof(h), p, sizeof(p)) == -EINVAL, "%s", bad[i]);
}
END_TEST

static int parse(const char *line, kc_opts *o, char *err, size_t n)
{
	char buf[512], *argv[32];
	int argc = 0;
	snprintf(buf, sizeof(buf), "%s", line);
	for (char *t = strtok(buf, " "); t && argc < 31; t = strtok(NULL, " "))
		argv[argc++] = t;
	argv[argc] = NULL;
	return kc_opts_parse_check(argc, argv, o, err, n);
}

START_TEST(agent_options)
{
	kc_opts o;
	char err[256];
	ck_assert_int_eq(parse("check /d --agent a:1 --agent b:2 --agent=c:3", &o, err, sizeof(err)), 0);
	ck_assert_int_eq(o.nagents, 3);
	ck_assert_int_eq(o.actors, 3);
	ck_assert_str_eq(o.agents[2], "c:3");
	ck_assert_int_eq(parse("check /d --agent a:1 --agent b:2 --actors 2", &o, err, sizeof(err)), 0);
	ck_assert_int_eq(parse("check /d --agent a:1 --agent b:2 --actors 3", &o, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "one actor per agent"));
	ck_assert_int_eq(parse("check /d --agent a:1", &o, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "at least"));
	ck_assert_int_eq(parse("check /d --agent nocolon --agent b:2", &o, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "HOST:PORT"));
	ck_assert_int_eq(parse("check /d --agent a:1 --agent b:2 --mount /e", &o, err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(parse("check /d", &o, err, sizeof(err)), 0);
	ck_assert_int_eq(o.nagents, 0);
}
END_TEST

START_TEST(host_identity)
{
	char id[400], host[256];
	kc_host_id(id, sizeof(id));
	gethostname(host, sizeof(host));
	char *a = strchr(id, '/'), *b = a ? strchr(a + 1, '/') : NULL;
	ck_assert_ptr_nonnull(b);
	ck_assert_int_eq(strncmp(id, host, (size_t)(a - id)), 0);
	ck_assert_int_eq((int)(b - a - 1), 8); /* the boot id prefix */
	ck_assert_int_eq(strncmp(b + 1, "netns:", 6), 0);
	ck_assert_int_gt(atoll(b + 7), 0);
}
END_TEST

/* ---- real agents ---------------------------------------------------------- */

static scratch vol; /* the agents' --root */
static int ports[2];
static pid_t agents[2];

static int free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	return ntohs(sa.sin_port);
}

static pid_t start_agent(int port)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char listen_at[64];
		snprintf(listen_at, sizeof(listen_at), "127.0.0.1:%d", port);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		dup2(null, 2);
		char *argv[] = {"agent", "--listen", listen_at, "--root", vol.dir, "--keepalive", "2", NULL};
		_exit(kc_cmd_agent(7, argv));
	}
	return pid;
}

static void wait_listening(int port)
{
	for (int i = 0; i < 200; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		int ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		close(fd);
		if (ok)
			return;
		usleep(20000);
	}
	ck_abort_msg("agent on port %d never listened", port);
}

static void agents_up(void)
{
	scratch_make(&vol, "agent");
	for (int i = 0; i < 2; i++) {
		ports[i] = free_port();
		agents[i] = start_agent(ports[i]);
	}
	for (int i = 0; i < 2; i++)
		wait_listening(ports[i]); /* an empty session each: harmless */
}

static void agents_down(void)
{
	for (int i = 0; i < 2; i++) {
		if (agents[i] > 0) {
			kill(agents[i], SIGKILL);
			waitpid(agents[i], NULL, 0);
		}
	}
	scratch_close(&vol);
}

static int connect_driver(kc_driver *d)
{
	char a0[32], a1[32];
	snprintf(a0, sizeof(a0), "127.0.0.1:%d", ports[0]);
	snprintf(a1, sizeof(a1), "127.0.0.1:%d", ports[1]);
	const char *addrs[] = {a0, a1};
	memset(d, 0, sizeof(*d));
	d->timeout_ms = 20000;
	return kc_drv_connect_agents(d, addrs, 2);
}

START_TEST(agents_serve_one_driver)
{
	kc_driver d, d2;
	ck_assert_msg(connect_driver(&d) == 0, "%s", d.err);
	for (int i = 0; i < 2; i++) {
		ck_assert_ptr_nonnull(json_object_get(d.a[i].hello, "host_id"));
		ck_assert_str_eq(d.a[i].url, vol.dir);
		ck_assert_int_eq(d.a[i].pid, 0);
	}
	/* Steps run in the agent's session and keep state between them. */
	json_t *res = NULL;
	ck_assert_int_eq(kc_drv_call(&d, 0, "mkdirs", json_pack("{s:s}", "path", "x/y"), &res), 0);
	json_decref(res);
	ck_assert_int_eq(kc_drv_call(&d, 1, "hold_open",
				     json_pack("{s:s,s:i,s:i}", "path", "x/y/f", "size", 100, "tag", 7), &res),
			 0);
	json_int_t h = json_integer_value(json_object_get(res, "handle"));
	json_decref(res);
	ck_assert_int_eq(kc_drv_call(&d, 1, "handle_verify", json_pack("{s:I,s:i,s:i}", "handle", h, "size", 100, "tag", 7), &res), 0);
	ck_assert_str_eq(json_string_value(json_object_get(res, "status")), "ok");
	json_decref(res);

	/* A second driver is turned away, with the reason. */
	ck_assert_int_eq(connect_driver(&d2), -EBUSY);
	ck_assert_ptr_nonnull(strstr(d2.err, "one driver at a time"));
	kc_drv_kill_all(&d2);

	/* A crashed session: the driver reconnects; the agent lives on. */
	ck_assert_int_eq(kc_drv_crash(&d, 1), 0);
	ck_assert_int_eq(kc_drv_respawn(&d, 1), 0);
	ck_assert_int_eq(kc_drv_call(&d, 1, "list", json_pack("{s:s}", "path", "x/y"), &res), 0);
	ck_assert_int_eq(json_array_size(json_object_get(res, "names")), 1);
	json_decref(res);

	/* The driver leaves: another one is served. */
	kc_drv_shutdown(&d);
	int rc = -EBUSY;
	for (int i = 0; i < 100 && rc == -EBUSY; i++) {
		rc = connect_driver(&d2);
		if (rc == -EBUSY) {
			kc_drv_kill_all(&d2);
			usleep(50000);
		}
	}
	ck_assert_msg(rc == 0, "%s", d2.err);
	kc_drv_shutdown(&d2);

	/* SIGTERM: a clean exit. */
	for (int i = 0; i < 2; i++) {
		int status;
		kill(agents[i], SIGTERM);
		ck_assert_int_eq(waitpid(agents[i], &status, 0), agents[i]);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		agents[i] = 0;
	}
}
END_TEST

START_TEST(absent_agent_is_an_error)
{
	kc_driver d;
	char a0[32];
	snprintf(a0, sizeof(a0), "127.0.0.1:%d", free_port());
	const char *addrs[] = {a0, a0};
	memset(&d, 0, sizeof(d));
	ck_assert_int_eq(kc_drv_connect_agents(&d, addrs, 2), -EINVAL); /* twice */
	kc_drv_kill_all(&d);
	const char *one[] = {a0, "127.0.0.1:1"};
	memset(&d, 0, sizeof(d));
	ck_assert_int_eq(kc_drv_connect_agents(&d, one, 2), -ECONNREFUSED);
	ck_assert_ptr_nonnull(strstr(d.err, "cannot connect"));
	ck_assert_ptr_nonnull(strstr(d.err, a0));
	kc_drv_kill_all(&d);
}
END_TEST

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	Suite *s = suite_create("conformance-agent");
	const struct ktest parsing = { .tcase = "parsing" };
	ktest_add(s, parsing, KTEST_LIST(hostport_parsing, agent_options, host_identity,
					 absent_agent_is_an_error));
	const struct ktest agents = { .tcase = "agents", .timeout = 60,
				      .setup = agents_up, .teardown = agents_down };
	ktest_add(s, agents, KTEST_LIST(agents_serve_one_driver));
	return ktest_run(s);
}
