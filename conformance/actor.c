/*
 * actor.c — the step executor: reads requests, runs the named step, answers.
 *
 * It is the whole actor process for forked actors and the per-driver session
 * of a remote agent.  Steps only see kc_step; everything they touch on the
 * volume goes through their own sub_vfs.
 */
#include "conformance/actor.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance/kc.h"
#include "util/clock.h"

/* What a step needs before it runs: the substrate (after hello), and the
 * "path" argument checked into st->path. */
enum { NEEDS_NOTHING, NEEDS_VFS, NEEDS_PATH };

static const struct {
	const char *name;
	kc_step_fn fn;
	int needs;
} step_table[] = {
	{"hello", kc_step_hello, NEEDS_NOTHING},
	{"mkdirs", kc_step_mkdirs, NEEDS_PATH},
	{"remove_tree", kc_step_remove_tree, NEEDS_PATH},
	{"unlink", kc_step_unlink, NEEDS_PATH},
	{"rmdir", kc_step_rmdir, NEEDS_PATH},
	{"list", kc_step_list, NEEDS_PATH},
	{"stat", kc_step_stat, NEEDS_PATH},
	{"statvfs", kc_step_statvfs, NEEDS_PATH},
	{"identity", kc_step_identity, NEEDS_VFS},
	{"read_small", kc_step_read_small, NEEDS_PATH},
	{"file_write", kc_step_file_write, NEEDS_PATH},
	{"file_verify", kc_step_file_verify, NEEDS_PATH},
	{"open_handle", kc_step_open_handle, NEEDS_PATH},
	{"reopen", kc_step_reopen, NEEDS_VFS},
	{"hold_open", kc_step_hold_open, NEEDS_PATH},
	{"handle_probe", kc_step_handle_probe, NEEDS_VFS},
	{"handle_verify", kc_step_handle_verify, NEEDS_VFS},
	{"close_handle", kc_step_close_handle, NEEDS_VFS},
	{"rename_timed", kc_step_rename_timed, NEEDS_VFS},
	{"rename_writer", kc_step_rename_writer, NEEDS_VFS},
	{"rename_reader", kc_step_rename_reader, NEEDS_VFS},
	{"dir_renamer", kc_step_dir_renamer, NEEDS_VFS},
	{"dir_lister", kc_step_dir_lister, NEEDS_VFS},
	{"excl_create", kc_step_excl_create, NEEDS_PATH},
	{"cto_write", kc_step_cto_write, NEEDS_PATH},
	{"cto_read", kc_step_cto_read, NEEDS_PATH},
	{"fsync_probe", kc_step_fsync_probe, NEEDS_VFS},
	{"perf_probe", kc_step_perf_probe, NEEDS_VFS},
};

int kc_step_fail(kc_step *st, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(st->err, sizeof(st->err), fmt, ap);
	va_end(ap);
	return rc < 0 ? rc : -EIO;
}

/* A control message that arrives while a step runs: "stop" (for this step)
 * ends it; "go" outside a barrier and anything else are protocol errors that
 * the step cannot answer, so they are dropped. */
static void handle_control(kc_step *st, json_t *m)
{
	const char *op = json_string_value(json_object_get(m, "op"));
	if (op && strcmp(op, "stop") == 0)
		st->stopped = 1;
	json_decref(m);
}

int kc_step_barrier(kc_step *st)
{
	if (!st->sync)
		goto started;
	if (kc_chan_sendf(st->as->ch, "{s:I,s:s}", "id", (json_int_t)st->id, "ev", "ready") != 0)
		return kc_step_fail(st, -EPIPE, "driver gone");
	for (;;) {
		json_t *m = NULL;
		int rc = kc_chan_recv(st->as->ch, &m, -1);
		if (rc == -EINTR)
			continue;
		if (rc != 0)
			return kc_step_fail(st, rc, "driver gone while waiting at the barrier");
		const char *op = json_string_value(json_object_get(m, "op"));
		if (op && strcmp(op, "go") == 0) {
			json_decref(m);
			break;
		}
		handle_control(st, m);
		if (st->stopped)
			return kc_step_fail(st, -ECANCELED, "stopped before start");
	}
started:
	st->t0_ns = ku_mono_ns();
	return 0;
}

int kc_step_should_stop(kc_step *st)
{
	if (st->stopped)
		return 1;
	json_t *m = NULL;
	int rc = kc_chan_recv(st->as->ch, &m, 0);
	if (rc == 0)
		handle_control(st, m);
	else if (rc == -EPIPE || rc == -EBADMSG || rc == -EMSGSIZE)
		st->stopped = 1; /* the driver is gone: end the loop and exit */
	return st->stopped;
}

void kc_step_progress(kc_step *st, int64_t done, int64_t anomalies)
{
	int64_t now = ku_mono_ms();
	if (now < st->next_progress_ms)
		return;
	st->next_progress_ms = now + 200;
	kc_chan_sendf(st->as->ch, "{s:I,s:s,s:I,s:I}", "id", (json_int_t)st->id, "ev", "progress",
		      "done", (json_int_t)done, "anomalies", (json_int_t)anomalies);
}

int kc_arg_path(kc_step *st, const char *key, const char **out)
{
	const char *s = json_string_value(json_object_get(st->req, key));
	if (!s)
		return kc_step_fail(st, -EINVAL, "missing string argument '%s'", key);
	if (sub_path_check(s) != 0 || strlen(s) >= 512)
		return kc_step_fail(st, -EINVAL, "argument '%s': bad path '%s'", key, s);
	*out = s;
	return 0;
}

int kc_arg_int(kc_step *st, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out)
{
	json_t *v = json_object_get(st->req, key);
	if (!v) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v))
		return kc_step_fail(st, -EINVAL, "argument '%s' must be an integer", key);
	int64_t x = json_integer_value(v);
	if (x < lo || x > hi)
		return kc_step_fail(st, -EINVAL, "argument '%s' = %lld out of range", key, (long long)x);
	*out = x;
	return 0;
}

int kc_arg_bool(kc_step *st, const char *key, int def)
{
	json_t *v = json_object_get(st->req, key);
	return json_is_boolean(v) ? json_is_true(v) : def;
}

int kc_handle_put(kc_actor_state *as, sub_file *f, const char *path)
{
	for (int i = 0; i < KC_MAX_HANDLES; i++) {
		if (!as->h[i].f) {
			as->h[i].f = f;
			snprintf(as->h[i].path, sizeof(as->h[i].path), "%s", path);
			return i + 1;
		}
	}
	return -EMFILE;
}

sub_file *kc_handle_get(kc_actor_state *as, int64_t h)
{
	if (h < 1 || h > KC_MAX_HANDLES)
		return NULL;
	return as->h[h - 1].f;
}

void kc_handle_drop(kc_actor_state *as, int64_t h)
{
	if (h >= 1 && h <= KC_MAX_HANDLES)
		as->h[h - 1].f = NULL;
}

void kc_trace_init(kc_trace *t, int64_t t0_ns)
{
	t->n = t->pos = 0;
	t->t0_ns = t0_ns;
}

void kc_trace_add(kc_trace *t, const char *fmt, ...)
{
	char *l = t->line[t->pos];
	int64_t us = (ku_mono_ns() - t->t0_ns) / 1000;
	int n = snprintf(l, sizeof(t->line[0]), "+%lld.%03lldms ", (long long)(us / 1000),
			 (long long)(us % 1000));
	va_list ap;
	va_start(ap, fmt);
	if (n > 0 && (size_t)n < sizeof(t->line[0]))
		vsnprintf(l + n, sizeof(t->line[0]) - (size_t)n, fmt, ap);
	va_end(ap);
	t->pos = (t->pos + 1) % KC_TRACE_LINES;
	if (t->n < KC_TRACE_LINES)
		t->n++;
}

json_t *kc_trace_json(const kc_trace *t)
{
	json_t *a = json_array();
	int start = (t->pos - t->n + KC_TRACE_LINES) % KC_TRACE_LINES;
	for (int i = 0; i < t->n; i++)
		json_array_append_new(a, json_string(t->line[(start + i) % KC_TRACE_LINES]));
	return a;
}

void kc_anomaly_add(json_t *arr, kc_step *st, const char *kind, int64_t iteration,
		    const kc_trace *tr, const char *fmt, ...)
{
	if (json_array_size(arr) >= KC_MAX_ANOMALIES)
		return;
	char detail[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	json_t *a = json_pack("{s:s,s:i,s:I,s:s}", "kind", kind, "actor", st->as->index, "iteration",
			      (json_int_t)iteration, "detail", detail);
	json_object_set_new(a, "trace", tr ? kc_trace_json(tr) : json_array());
	json_array_append_new(arr, a);
}

void kc_count_add(json_t *obj, const char *key, json_int_t n)
{
	json_t *v = json_object_get(obj, key);
	json_object_set_new(obj, key, json_integer((v ? json_integer_value(v) : 0) + n));
}

static void reply(kc_actor_state *as, kc_step *st, int rc)
{
	json_t *m;
	if (rc == 0) {
		m = json_pack("{s:I,s:b,s:O}", "id", (json_int_t)st->id, "ok", 1, "result", st->result);
	} else {
		m = json_pack("{s:I,s:b,s:s,s:i,s:s}", "id", (json_int_t)st->id, "ok", 0, "errno",
			      kc_errname(rc), "rc", rc, "error", st->err[0] ? st->err : kc_errname(rc));
	}
	if (kc_chan_send(as->ch, m) != 0)
		as->quit = 1;
	json_decref(m);
}

static void run_one(kc_actor_state *as, json_t *req)
{
	kc_step st;
	memset(&st, 0, sizeof(st));
	st.as = as;
	st.req = req;
	st.result = json_object();
	st.id = json_integer_value(json_object_get(req, "id"));
	st.sync = json_is_true(json_object_get(req, "sync"));
	st.t0_ns = ku_mono_ns();
	const char *op = json_string_value(json_object_get(req, "op"));
	int rc = -ENOSYS;
	if (!op) {
		rc = kc_step_fail(&st, -EINVAL, "message without 'op'");
	} else if (strcmp(op, "bye") == 0) {
		as->quit = 1;
		rc = 0;
	} else if (strcmp(op, "crash") == 0) {
		/* Dies the way a crashed client does: no close, no flush. */
		kill(getpid(), SIGKILL);
	} else if (strcmp(op, "go") == 0 || strcmp(op, "stop") == 0) {
		/* A stop that raced with the end of its step: nothing to answer. */
		json_decref(st.result);
		return;
	} else {
		size_t i;
		for (i = 0; i < sizeof(step_table) / sizeof(step_table[0]); i++)
			if (strcmp(op, step_table[i].name) == 0)
				break;
		if (i == sizeof(step_table) / sizeof(step_table[0]))
			rc = kc_step_fail(&st, -ENOSYS, "unknown step '%s'", op);
		else if (step_table[i].needs != NEEDS_NOTHING && !as->vfs)
			rc = kc_step_fail(&st, -ENOTCONN, "step '%s' before hello", op);
		else if (step_table[i].needs != NEEDS_PATH || (rc = kc_arg_path(&st, "path", &st.path)) == 0)
			rc = step_table[i].fn(&st);
	}
	reply(as, &st, rc);
	json_decref(st.result);
}

int kc_actor_serve(kc_chan *ch, int index, const char *default_url)
{
	kc_actor_state *as = calloc(1, sizeof(*as));
	if (!as)
		return 2;
	as->ch = ch;
	as->index = index;
	if (default_url)
		snprintf(as->url, sizeof(as->url), "%s", default_url);
	if (gethostname(as->host, sizeof(as->host)) != 0)
		snprintf(as->host, sizeof(as->host), "unknown");
	int status = 0;
	while (!as->quit) {
		json_t *req = NULL;
		int rc = kc_chan_recv(ch, &req, -1);
		if (rc == -EINTR)
			continue;
		if (rc != 0) {
			status = rc == -EPIPE ? 0 : 2;
			break;
		}
		run_one(as, req);
		json_decref(req);
	}
	for (int i = 0; i < KC_MAX_HANDLES; i++)
		sub_close(as->h[i].f);
	sub_destroy(as->vfs);
	free(as);
	return status;
}
