/* test_token.c — the same-host proof of a process's end: a token held by a
 * live process probes alive, after kill -9 it probes gone, and another
 * incarnation's token is not this one's. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kaas/cluster/token.h"
#include "util/test/ktest.h"

START_TEST(host_id_names_kernel_and_namespace)
{
	char a[256], b[256];
	ck_assert_int_eq(kcl_host_id(a, sizeof(a)), 0);
	ck_assert_int_eq(kcl_host_id(b, sizeof(b)), 0);
	ck_assert_str_eq(a, b);
	ck_assert_ptr_nonnull(strstr(a, "/netns:"));
	ck_assert_int_eq(kcl_host_id(a, 8), -ENAMETOOLONG);
}
END_TEST

START_TEST(kill_9_is_proven_at_once)
{
	char key[64];
	snprintf(key, sizeof(key), "test-%d", (int)getpid());
	kcl_incarn inc = {77, 0x1234}, other = {78, 0x1234};
	ck_assert_int_eq(kcl_token_probe(key, 4, inc), 0); /* nobody holds it */
	/* ready: child to parent; hold: its write end stays with the parent,
	 * so the child also ends when a failed assertion ends the parent. */
	int ready[2], hold[2];
	ck_assert_int_eq(pipe(ready), 0);
	ck_assert_int_eq(pipe(hold), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd;
		close(hold[1]);
		char ok = kcl_token_hold(key, 4, inc, &fd) == 0 ? 'y' : 'n';
		if (write(ready[1], &ok, 1) != 1)
			_exit(2);
		char c;
		while (read(hold[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(hold[0]);
	char ok = 0;
	ck_assert_int_eq(read(ready[0], &ok, 1), 1);
	ck_assert_int_eq(ok, 'y');
	ck_assert_int_eq(kcl_token_probe(key, 4, inc), 1);
	ck_assert_int_eq(kcl_token_probe(key, 4, other), 0);
	ck_assert_int_eq(kcl_token_probe(key, 5, inc), 0);
	int fd;
	ck_assert_int_eq(kcl_token_hold(key, 4, inc, &fd), -EADDRINUSE);
	kill(pid, SIGKILL);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_int_eq(kcl_token_probe(key, 4, inc), 0);
	/* The kernel freed the name with the process. */
	ck_assert_int_eq(kcl_token_hold(key, 4, inc, &fd), 0);
	ck_assert_int_eq(kcl_token_probe(key, 4, inc), 1);
	close(fd);
	ck_assert_int_eq(kcl_token_probe(key, 4, inc), 0);
	close(ready[0]);
	close(ready[1]);
	close(hold[1]);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "cluster-token", .tcase = "token", .timeout = 30 },
			  KTEST_LIST(host_id_names_kernel_and_namespace, kill_9_is_proven_at_once));
}
