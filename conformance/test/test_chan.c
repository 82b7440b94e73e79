/*
 * test_chan.c — the actor protocol: message framing, the step executor as a
 * remote agent will drive it (hello, steps, barriers, stop, handles,
 * errors), and the driver with forked actors (phases, crash and respawn).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance/actor.h"
#include "conformance/chan.h"
#include "conformance/driver.h"
#include "conformance/kc.h"
#include "util/test/ktest.h"
#include "substrates/test/scratch.h"

START_TEST(framing_splits_joins_and_rejects)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	kc_chan a, b;
	kc_chan_init(&a, sv[0]);
	kc_chan_init(&b, sv[1]);
	json_t *m = NULL;
	ck_assert_int_eq(kc_chan_sendf(&a, "{s:s,s:i}", "op", "x\ny", "id", 1), 0);
	ck_assert_int_eq(kc_chan_sendf(&a, "{s:s,s:i}", "op", "two", "id", 2), 0);
	ck_assert_int_eq(kc_chan_recv(&b, &m, 1000), 0);
	ck_assert_str_eq(json_string_value(json_object_get(m, "op")), "x\ny");
	json_decref(m);
	ck_assert_int_eq(kc_chan_recv(&b, &m, 1000), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(m, "id")), 2);
	json_decref(m);
	ck_assert_int_eq(kc_chan_recv(&b, &m, 0), -ETIMEDOUT);

	/* A message that arrives in pieces is only returned when complete. */
	ck_assert_int_eq(write(sv[0], "{\"op\":\"pa", 9), 9);
	ck_assert_int_eq(kc_chan_recv(&b, &m, 50), -ETIMEDOUT);
	ck_assert_int_eq(write(sv[0], "rt\"}\n{\"op\":", 11), 11);
	ck_assert_int_eq(kc_chan_recv(&b, &m, 1000), 0);
	ck_assert_str_eq(json_string_value(json_object_get(m, "op")), "part");
	json_decref(m);
	ck_assert_int_eq(write(sv[0], "\"z\"}\n", 5), 5);
	ck_assert_int_eq(kc_chan_recv(&b, &m, 1000), 0);
	json_decref(m);

	/* Garbage and non-objects are refused, the stream goes on. */
	ck_assert_int_eq(write(sv[0], "not json\n[1,2]\n{\"ok\":1}\n", 24), 24);
	ck_assert_int_eq(kc_chan_recv(&b, &m, 1000), -EBADMSG);
	ck_assert_int_eq(kc_chan_recv(&b, &m, 1000), -EBADMSG);
	ck_assert_int_eq(kc_chan_recv(&b, &m, 1000), 0);
	json_decref(m);

	/* End of stream after the last message. */
	ck_assert_int_eq(kc_chan_sendf(&a, "{s:i}", "last", 1), 0);
	kc_chan_close(&a);
	ck_assert_int_eq(kc_chan_recv(&b, &m, 1000), 0);
	json_decref(m);
	ck_assert_int_eq(kc_chan_recv(&b, &m, 1000), -EPIPE);
	kc_chan_close(&b);
}
END_TEST

START_TEST(framing_refuses_oversized_lines)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	kc_chan b;
	kc_chan_init(&b, sv[1]);
	/* A writer that never ends its line must not make us grow forever. */
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char junk[65536];
		memset(junk, 'a', sizeof(junk));
		for (size_t sent = 0; sent < KC_CHAN_MAX + sizeof(junk);) {
			ssize_t w = write(sv[0], junk, sizeof(junk));
			if (w <= 0)
				_exit(0);
			sent += (size_t)w;
		}
		_exit(0);
	}
	close(sv[0]);
	json_t *m = NULL;
	int rc;
	while ((rc = kc_chan_recv(&b, &m, 5000)) == -EAGAIN)
		;
	ck_assert_int_eq(rc, -EMSGSIZE);
	kc_chan_close(&b);
	waitpid(pid, NULL, 0);
}
END_TEST

/* An actor served in a thread, driven by hand as a remote driver would. */
static scratch vol; /* the actor's directory */
static kc_chan drv;
static pthread_t actor_thread;
static int actor_fd;

static void *serve(void *arg)
{
	(void)arg;
	kc_chan ch;
	kc_chan_init(&ch, actor_fd);
	kc_actor_serve(&ch, 7, vol.dir);
	kc_chan_close(&ch);
	return NULL;
}

static void actor_setup(void)
{
	scratch_make(&vol, "chan");
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	kc_chan_init(&drv, sv[0]);
	actor_fd = sv[1];
	ck_assert_int_eq(pthread_create(&actor_thread, NULL, serve, NULL), 0);
}

static void actor_teardown(void)
{
	kc_chan_close(&drv); /* end of stream: the actor ends */
	pthread_join(actor_thread, NULL);
	scratch_close(&vol);
}

/* Sends a request and returns the final answer (skipping events). */
static json_t *ask(json_t *req)
{
	ck_assert_int_eq(kc_chan_send(&drv, req), 0);
	json_decref(req);
	for (;;) {
		json_t *m = NULL;
		ck_assert_int_eq(kc_chan_recv(&drv, &m, 10000), 0);
		if (!json_object_get(m, "ev"))
			return m;
		json_decref(m);
	}
}

static json_t *result_of(json_t *reply)
{
	ck_assert_msg(json_is_true(json_object_get(reply, "ok")), "step failed: %s",
		      json_string_value(json_object_get(reply, "error")));
	return json_object_get(reply, "result");
}

START_TEST(executor_runs_named_steps)
{
	/* Steps before hello are refused. */
	json_t *r = ask(json_pack("{s:s,s:i,s:s}", "op", "mkdirs", "id", 1, "path", "a"));
	ck_assert(json_is_false(json_object_get(r, "ok")));
	ck_assert_str_eq(json_string_value(json_object_get(r, "errno")), "ENOTCONN");
	json_decref(r);

	/* hello without a URL uses the agent's default root. */
	r = ask(json_pack("{s:s,s:i}", "op", "hello", "id", 2));
	json_t *h = result_of(r);
	ck_assert_int_eq(json_integer_value(json_object_get(h, "actor")), 7);
	ck_assert_int_eq(json_integer_value(json_object_get(h, "protocol")), KC_PROTOCOL_VERSION);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(h, "identity"), "backend")),
			 "posix");
	ck_assert_int_eq(json_integer_value(json_object_get(r, "id")), 2);
	json_decref(r);

	/* A step's path is checked before the step runs. */
	r = ask(json_pack("{s:s,s:i,s:s}", "op", "unlink", "id", 30, "path", "../x"));
	ck_assert_str_eq(json_string_value(json_object_get(r, "errno")), "EINVAL");
	ck_assert_str_eq(json_string_value(json_object_get(r, "error")), "argument 'path': bad path '../x'");
	json_decref(r);
	r = ask(json_pack("{s:s,s:i}", "op", "stat", "id", 31));
	ck_assert_str_eq(json_string_value(json_object_get(r, "error")), "missing string argument 'path'");
	json_decref(r);

	r = ask(json_pack("{s:s,s:i,s:s}", "op", "mkdirs", "id", 3, "path", "a/b"));
	result_of(r);
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:s,s:i,s:i,s:b}", "op", "file_write", "id", 4, "path", "a/b/f",
			  "size", 100000, "tag", 5, "fsync", 1));
	result_of(r);
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:s,s:i,s:i}", "op", "file_verify", "id", 5, "path", "a/b/f", "size",
			  100000, "tag", 5));
	ck_assert_str_eq(json_string_value(json_object_get(result_of(r), "status")), "ok");
	json_decref(r);
	/* The wrong expectation is seen. */
	r = ask(json_pack("{s:s,s:i,s:s,s:i,s:i}", "op", "file_verify", "id", 6, "path", "a/b/f", "size",
			  100000, "tag", 6));
	ck_assert_str_eq(json_string_value(json_object_get(result_of(r), "status")), "mismatch");
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:s,s:i,s:i}", "op", "file_verify", "id", 7, "path", "a/b/f", "size",
			  200000, "tag", 5));
	ck_assert_str_eq(json_string_value(json_object_get(result_of(r), "status")), "short");
	json_decref(r);

	/* Handles persist between steps. */
	r = ask(json_pack("{s:s,s:i,s:s}", "op", "open_handle", "id", 8, "path", "a/b/f"));
	json_int_t hd = json_integer_value(json_object_get(result_of(r), "handle"));
	ck_assert_int_gt(hd, 0);
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:s}", "op", "unlink", "id", 9, "path", "a/b/f"));
	ck_assert_str_eq(json_string_value(json_object_get(result_of(r), "err")), "OK");
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:I,s:i,s:i}", "op", "handle_verify", "id", 10, "handle", hd, "size",
			  100000, "tag", 5));
	ck_assert_str_eq(json_string_value(json_object_get(result_of(r), "status")), "ok");
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:I}", "op", "close_handle", "id", 11, "handle", hd));
	result_of(r);
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:I}", "op", "close_handle", "id", 12, "handle", hd));
	ck_assert_str_eq(json_string_value(json_object_get(r, "errno")), "EBADF");
	json_decref(r);

	/* Bad requests answer ok:false naming the problem. */
	r = ask(json_pack("{s:s,s:i}", "op", "no_such_step", "id", 13));
	ck_assert_str_eq(json_string_value(json_object_get(r, "errno")), "ENOSYS");
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(r, "error")), "no_such_step"));
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:s}", "op", "mkdirs", "id", 14, "path", "../escape"));
	ck_assert_str_eq(json_string_value(json_object_get(r, "errno")), "EINVAL");
	json_decref(r);
	r = ask(json_pack("{s:s,s:i}", "op", "unlink", "id", 15));
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(r, "error")), "path"));
	json_decref(r);
}
END_TEST

START_TEST(executor_barrier_and_stop)
{
	json_t *r = ask(json_pack("{s:s,s:i}", "op", "hello", "id", 1));
	result_of(r);
	json_decref(r);
	/* A sync step says ready and waits for go. */
	ck_assert_int_eq(kc_chan_sendf(&drv, "{s:s,s:i,s:b,s:s,s:i}", "op", "excl_create", "id", 2,
				       "sync", 1, "path", "claim", "tag", 3),
			 0);
	json_t *m = NULL;
	ck_assert_int_eq(kc_chan_recv(&drv, &m, 10000), 0);
	ck_assert_str_eq(json_string_value(json_object_get(m, "ev")), "ready");
	json_decref(m);
	ck_assert_int_eq(kc_chan_recv(&drv, &m, 100), -ETIMEDOUT); /* still waiting */
	char path[300];
	snprintf(path, sizeof(path), "%s/claim", vol.dir);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(kc_chan_sendf(&drv, "{s:s,s:i}", "op", "go", "id", 2), 0);
	ck_assert_int_eq(kc_chan_recv(&drv, &m, 10000), 0);
	ck_assert(json_is_true(json_object_get(result_of(m), "won")));
	json_decref(m);
	ck_assert_int_eq(access(path, F_OK), 0);

	/* A loop runs until stopped, and still answers with its counts. */
	r = ask(json_pack("{s:s,s:i,s:s,s:s,s:i,s:i,s:i}", "op", "rename_writer", "id", 3, "dir", "",
			  "target", "t", "iterations", 20, "tag", 9, "max", 200));
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(result_of(r), "counts"), "renames")),
			 20);
	json_decref(r);
	ck_assert_int_eq(kc_chan_sendf(&drv, "{s:s,s:i,s:s,s:s,s:i}", "op", "rename_reader", "id", 4,
				       "dir", "", "target", "t", "tag", 9),
			 0);
	usleep(100 * 1000);
	ck_assert_int_eq(kc_chan_sendf(&drv, "{s:s,s:i}", "op", "stop", "id", 4), 0);
	for (;;) {
		ck_assert_int_eq(kc_chan_recv(&drv, &m, 10000), 0);
		if (!json_object_get(m, "ev"))
			break;
		json_decref(m);
	}
	json_t *c = json_object_get(result_of(m), "counts");
	ck_assert_int_gt(json_integer_value(json_object_get(c, "ok")), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(c, "ok")),
			 json_integer_value(json_object_get(c, "reads")));
	ck_assert_int_eq(json_integer_value(json_object_get(result_of(m), "last_seq")), 20);
	json_decref(m);
	/* A reader of a different stream sees torn data, not ok. */
	ck_assert_int_eq(kc_chan_sendf(&drv, "{s:s,s:i,s:s,s:s,s:i}", "op", "rename_reader", "id", 5,
				       "dir", "", "target", "t", "tag", 10),
			 0);
	usleep(50 * 1000);
	ck_assert_int_eq(kc_chan_sendf(&drv, "{s:s,s:i}", "op", "stop", "id", 5), 0);
	for (;;) {
		ck_assert_int_eq(kc_chan_recv(&drv, &m, 10000), 0);
		if (!json_object_get(m, "ev"))
			break;
		json_decref(m);
	}
	c = json_object_get(result_of(m), "counts");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "ok")), 0);
	ck_assert_int_gt(json_integer_value(json_object_get(c, "torn")), 0);
	ck_assert_uint_gt(json_array_size(json_object_get(result_of(m), "anomalies")), 0);
	json_decref(m);

	/* bye ends the session. */
	r = ask(json_pack("{s:s,s:i}", "op", "bye", "id", 6));
	result_of(r);
	json_decref(r);
	ck_assert_int_eq(kc_chan_recv(&drv, &m, 5000), -EPIPE);
}
END_TEST

/* Writes both messages with one write(2), so that the actor reads them
 * together: the second is already waiting when the step of the first starts. */
static void send_pair(json_t *a, json_t *b)
{
	char *sa = json_dumps(a, JSON_COMPACT), *sb = json_dumps(b, JSON_COMPACT);
	char line[4096];
	int n = snprintf(line, sizeof(line), "%s\n%s\n", sa, sb);
	ck_assert(n > 0 && (size_t)n < sizeof(line));
	ck_assert_int_eq(write(drv.fd, line, (size_t)n), n);
	free(sa);
	free(sb);
	json_decref(a);
	json_decref(b);
}

static json_t *final_answer(void)
{
	for (;;) {
		json_t *m = NULL;
		ck_assert_int_eq(kc_chan_recv(&drv, &m, 30000), 0);
		if (!json_object_get(m, "ev"))
			return m;
		json_decref(m);
	}
}

/* The worst a scheduler can do to a reader: the writer is done and the stop
 * is there before the reader has read anything.  It still verifies its
 * minimum before it answers, so "verified nothing" never comes from timing. */
START_TEST(reader_stopped_before_it_ran_still_verifies)
{
	json_t *r = ask(json_pack("{s:s,s:i}", "op", "hello", "id", 1));
	result_of(r);
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:s,s:s,s:i,s:i,s:i}", "op", "rename_writer", "id", 2, "dir", "",
			  "target", "t", "iterations", 5, "tag", 9, "max", 200));
	result_of(r);
	json_decref(r);
	send_pair(json_pack("{s:s,s:i,s:s,s:s,s:i}", "op", "rename_reader", "id", 3, "dir", "",
			    "target", "t", "tag", 9),
		  json_pack("{s:s,s:i}", "op", "stop", "id", 3));
	json_t *m = final_answer();
	json_t *c = json_object_get(result_of(m), "counts");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "ok")), KC_READER_MIN_OK);
	ck_assert_int_eq(json_integer_value(json_object_get(c, "reads_after_stop")), KC_READER_MIN_OK);
	ck_assert_int_eq(json_integer_value(json_object_get(c, "versions")), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(result_of(m), "last_seq")), 5);
	json_decref(m);

	/* When every attempt fails the minimum of attempts ends it: the
	 * evidence is the failures (here: a stream that is not the writer's). */
	send_pair(json_pack("{s:s,s:i,s:s,s:s,s:i,s:i}", "op", "rename_reader", "id", 4, "dir", "",
			    "target", "t", "tag", 10, "min_reads", 30),
		  json_pack("{s:s,s:i}", "op", "stop", "id", 4));
	m = final_answer();
	c = json_object_get(result_of(m), "counts");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "ok")), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(c, "reads")), 30);
	ck_assert_int_eq(json_integer_value(json_object_get(c, "torn")), 30);
	json_decref(m);

	/* Sized in observations, a stopped reader still makes all of its own
	 * (the stop is there before it read anything). */
	send_pair(json_pack("{s:s,s:i,s:s,s:s,s:i,s:i}", "op", "rename_reader", "id", 6, "dir", "",
			    "target", "t", "tag", 9, "observations", 300),
		  json_pack("{s:s,s:i}", "op", "stop", "id", 6));
	m = final_answer();
	c = json_object_get(result_of(m), "counts");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "reads")), 300);
	ck_assert_int_eq(json_integer_value(json_object_get(c, "ok")), 300);
	json_decref(m);

	/* Nothing to read at all: the grace time ends it. */
	send_pair(json_pack("{s:s,s:i,s:s,s:s,s:i,s:i,s:i}", "op", "rename_reader", "id", 5, "dir", "",
			    "target", "absent", "tag", 9, "min_reads", 1000000, "grace_ms", 200),
		  json_pack("{s:s,s:i}", "op", "stop", "id", 5));
	m = final_answer();
	c = json_object_get(result_of(m), "counts");
	ck_assert_int_eq(json_integer_value(json_object_get(c, "ok")), 0);
	ck_assert_int_gt(json_integer_value(json_object_get(c, "missing")), 0);
	json_decref(m);
}
END_TEST

/* reopen: the actor drops its handles and its substrate and opens its URL
 * again, so that it sees what is at that path now (a remounted filesystem),
 * not what its old descriptors point at. */
START_TEST(reopen_follows_the_url_to_a_new_directory)
{
	json_t *r = ask(json_pack("{s:s,s:i}", "op", "hello", "id", 1));
	result_of(r);
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:s}", "op", "mkdirs", "id", 2, "path", "d"));
	result_of(r);
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:s,s:i,s:i}", "op", "hold_open", "id", 3, "path", "d/f", "size",
			  1000, "tag", 1));
	json_int_t hd = json_integer_value(json_object_get(result_of(r), "handle"));
	json_decref(r);
	/* The directory is put aside and an empty one takes its name. */
	char aside[300];
	snprintf(aside, sizeof(aside), "%s.old", vol.dir);
	ck_assert_int_eq(rename(vol.dir, aside), 0);
	ck_assert_int_eq(mkdir(vol.dir, 0755), 0);
	r = ask(json_pack("{s:s,s:i,s:s}", "op", "stat", "id", 4, "path", "d"));
	ck_assert_str_eq(json_string_value(json_object_get(result_of(r), "err")), "OK"); /* the old one */
	json_decref(r);
	r = ask(json_pack("{s:s,s:i}", "op", "reopen", "id", 5));
	ck_assert_int_eq(json_integer_value(json_object_get(result_of(r), "closed_handles")), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(result_of(r), "identity"), "root")),
			 vol.dir);
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:s}", "op", "stat", "id", 6, "path", "d"));
	ck_assert_str_eq(json_string_value(json_object_get(result_of(r), "err")), "ENOENT"); /* the new one */
	json_decref(r);
	r = ask(json_pack("{s:s,s:i,s:I}", "op", "close_handle", "id", 7, "handle", hd));
	ck_assert_str_eq(json_string_value(json_object_get(r, "errno")), "EBADF");
	json_decref(r);
	char cmd[700];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", aside);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(driver_forks_phases_crashes_and_respawns)
{
	scratch root;
	scratch_make(&root, "drv");
	const char *dir = root.dir;
	volatile sig_atomic_t intr = 0;
	kc_driver d;
	memset(&d, 0, sizeof(d));
	d.interrupted = &intr;
	d.timeout_ms = 60000;
	const char *urls[1] = {dir};
	ck_assert_msg(kc_drv_spawn(&d, 3, urls, 1) == 0, "%s", d.err);
	pid_t first = (pid_t)json_integer_value(json_object_get(d.a[1].hello, "pid"));
	ck_assert_int_ne(first, getpid());

	/* All three released together; the loops are stopped when the writer ends. */
	json_t *args[3];
	for (int i = 0; i < 3; i++)
		args[i] = json_pack("{s:s,s:s,s:i,s:i}", "dir", "", "target", "t", "iterations", 30, "tag", 4);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(kc_drv_start(&d, i, i ? "rename_reader" : "rename_writer", args[i], 1), 0);
	int as[3] = {0, 1, 2};
	ck_assert_int_eq(kc_drv_release(&d, as, 3), 0);
	json_t *res = NULL;
	ck_assert_int_eq(kc_drv_wait(&d, 0, &res), 0);
	ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(res, "counts"), "renames")), 30);
	json_decref(res);
	for (int i = 1; i < 3; i++) {
		kc_drv_stop(&d, i);
		ck_assert_int_eq(kc_drv_wait(&d, i, &res), 0);
		ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(res, "counts"), "missing")), 0);
		json_decref(res);
	}

	/* A failing step is an error with the actor's reason. */
	ck_assert_int_eq(kc_drv_call(&d, 2, "mkdirs", json_pack("{s:s}", "path", "t/x"), &res), -ENOTDIR);
	ck_assert_ptr_nonnull(strstr(d.err, "actor 2"));

	/* Crash: the process is gone; calls fail until it is respawned. */
	ck_assert_int_eq(kc_drv_crash(&d, 1), 0);
	ck_assert_int_eq(kill(first, 0), -1);
	ck_assert_int_eq(kc_drv_call(&d, 1, "stat", json_pack("{s:s}", "path", "t"), &res), -EPIPE);
	ck_assert_msg(kc_drv_respawn(&d, 1) == 0, "%s", d.err);
	ck_assert_int_ne(json_integer_value(json_object_get(d.a[1].hello, "pid")), first);
	ck_assert_int_eq(kc_drv_call(&d, 1, "stat", json_pack("{s:s}", "path", "t"), &res), 0);
	ck_assert_str_eq(json_string_value(json_object_get(res, "err")), "OK");
	json_decref(res);

	/* An interrupt ends a wait at once. */
	ck_assert_int_eq(kc_drv_start(&d, 0, "rename_reader",
				      json_pack("{s:s,s:s,s:i}", "dir", "", "target", "t", "tag", 4), 0),
			 0);
	intr = 1;
	ck_assert_int_eq(kc_drv_wait(&d, 0, &res), -EINTR);
	pid_t pids[3];
	for (int i = 0; i < 3; i++)
		pids[i] = d.a[i].pid;
	kc_drv_kill_all(&d);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(kill(pids[i], 0), -1);
	scratch_close(&root);
}
END_TEST

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	Suite *s = suite_create("chan");
	const struct ktest framing = { .tcase = "framing" };
	ktest_add(s, framing, KTEST_LIST(framing_splits_joins_and_rejects,
					 framing_refuses_oversized_lines));
	const struct ktest executor = { .tcase = "executor", .timeout = 60,
					.setup = actor_setup, .teardown = actor_teardown };
	ktest_add(s, executor, KTEST_LIST(executor_runs_named_steps, executor_barrier_and_stop,
					  reader_stopped_before_it_ran_still_verifies,
					  reopen_follows_the_url_to_a_new_directory));
	const struct ktest driver = { .tcase = "driver", .timeout = 60 };
	ktest_add(s, driver, KTEST_LIST(driver_forks_phases_crashes_and_respawns));
	return ktest_run(s);
}
