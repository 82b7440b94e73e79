/*
 * steps_basic.c — the single-operation steps: hello, directory and file
 * primitives, held-open handles, timed renames, the O_EXCL race and the
 * close-to-open write/read pair.
 *
 * A step answers ok:false only when it could not do what it was asked (bad
 * argument, setup error); an outcome the check wants to observe (a read that
 * came back stale, an unlink that failed) is part of an ok:true result.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conformance/actor.h"
#include "conformance/agent.h"
#include "conformance/kc.h"
#include "conformance/layers.h"
#include "conformance/payload.h"
#include "qualify/stamp.h"
#include "util/clock.h"

#define CHUNK (1u << 20)

int kc_step_hello(kc_step *st)
{
	kc_actor_state *as = st->as;
	const char *url = json_string_value(json_object_get(st->req, "url"));
	json_int_t idx = json_integer_value(json_object_get(st->req, "actor"));
	if (json_is_integer(json_object_get(st->req, "actor")))
		as->index = (int)idx;
	if (url)
		snprintf(as->url, sizeof(as->url), "%s", url);
	if (!as->url[0])
		return kc_step_fail(st, -EINVAL, "hello without a URL and no default");
	if (!as->vfs) {
		char err[512] = "";
		int rc = sub_open_url(as->url, &as->vfs, err, sizeof(err));
		if (rc)
			return kc_step_fail(st, rc, "%s", err[0] ? err : kc_errname(rc));
	}
	sub_identity id;
	int rc = sub_identity_of(as->vfs, &id);
	if (rc)
		return kc_step_fail(st, rc, "identity of %s: %s", as->url, sub_strerror(rc));
	/* One kernel mount is one client for every process on the host; any other
	 * backend handle is a client of its own. */
	char client[SUB_PATH_MAX + 300];
	if (id.mountpoint[0] && (strcmp(id.backend, "posix") == 0 || strcmp(id.backend, "fault") == 0))
		snprintf(client, sizeof(client), "%s:%s", as->host, id.mountpoint);
	else
		snprintf(client, sizeof(client), "%s:pid%d", as->host, (int)getpid());
	json_object_set_new(st->result, "protocol", json_integer(KC_PROTOCOL_VERSION));
	json_object_set_new(st->result, "version", json_string(KC_VERSION));
	json_object_set_new(st->result, "pid", json_integer(getpid()));
	json_object_set_new(st->result, "host", json_string(as->host));
	char host_id[400];
	kc_host_id(host_id, sizeof(host_id));
	json_object_set_new(st->result, "host_id", json_string(host_id));
	json_object_set_new(st->result, "actor", json_integer(as->index));
	json_object_set_new(st->result, "url", json_string(as->url));
	json_object_set_new(st->result, "client", json_string(client));
	json_object_set_new(st->result, "identity", kq_identity_json(&id));
	/* Only this host can see what stores the bytes of its mount. */
	if (id.root[0] == '/') {
		json_t *layers = kc_layers_resolve(id.root);
		if (layers)
			json_object_set_new(st->result, "layers", layers);
	}
	return 0;
}

/* The steps that act on one path find it checked in st->path (actor.c). */

/* For a setup step, a failure of what it was asked is a step failure. */
static int must(kc_step *st, int rc, const char *what)
{
	return rc ? kc_step_fail(st, rc, "%s %s: %s", what, st->path, sub_strerror(rc)) : 0;
}

int kc_step_mkdirs(kc_step *st)
{
	return must(st, sub_mkdirs(st->as->vfs, st->path, 0755), "mkdir");
}

int kc_step_remove_tree(kc_step *st)
{
	return must(st, sub_remove_tree(st->as->vfs, st->path), "remove");
}

/* Observation steps: the outcome is the result, never a step failure. */
static void set_err(kc_step *st, int rc)
{
	json_object_set_new(st->result, "rc", json_integer(rc));
	json_object_set_new(st->result, "err", json_string(kc_errname(rc)));
}

int kc_step_unlink(kc_step *st)
{
	set_err(st, sub_unlink(st->as->vfs, st->path));
	return 0;
}

int kc_step_rmdir(kc_step *st)
{
	set_err(st, sub_rmdir(st->as->vfs, st->path));
	return 0;
}

int kc_step_list(kc_step *st)
{
	char **names = NULL;
	size_t n = 0;
	int rc = sub_list(st->as->vfs, st->path, &names, &n);
	set_err(st, rc);
	json_t *arr = json_array();
	for (size_t i = 0; rc == 0 && i < n; i++)
		json_array_append_new(arr, json_string(names[i]));
	json_object_set_new(st->result, "names", arr);
	if (rc == 0)
		sub_names_free(names, n);
	return 0;
}

static json_t *stat_json(const sub_stat *s)
{
	return json_pack("{s:I,s:I,s:I,s:I}", "ino", (json_int_t)s->ino, "size", (json_int_t)s->size,
			 "nlink", (json_int_t)s->nlink, "mode", (json_int_t)s->mode);
}

int kc_step_stat(kc_step *st)
{
	sub_stat s;
	int rc = sub_stat_path(st->as->vfs, st->path, &s);
	set_err(st, rc);
	if (rc == 0) {
		json_t *j = stat_json(&s);
		json_object_update(st->result, j);
		json_decref(j);
	}
	return 0;
}

int kc_step_statvfs(kc_step *st)
{
	sub_fsinfo fi;
	int rc = sub_statvfs(st->as->vfs, st->path, &fi);
	set_err(st, rc);
	if (rc == 0) {
		json_object_set_new(st->result, "bsize", json_integer((json_int_t)fi.bsize));
		json_object_set_new(st->result, "blocks", json_integer((json_int_t)fi.blocks));
		json_object_set_new(st->result, "bfree", json_integer((json_int_t)fi.bfree));
		json_object_set_new(st->result, "bavail", json_integer((json_int_t)fi.bavail));
	}
	return 0;
}

int kc_step_identity(kc_step *st)
{
	sub_identity id;
	int rc = sub_identity_of(st->as->vfs, &id);
	if (rc)
		return kc_step_fail(st, rc, "identity: %s", sub_strerror(rc));
	json_object_set_new(st->result, "identity", kq_identity_json(&id));
	return 0;
}

int kc_step_read_small(kc_step *st)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = sub_read_file(st->as->vfs, st->path, 64 * 1024, &buf, &len);
	set_err(st, rc);
	if (rc == 0) {
		json_object_set_new(st->result, "data", json_stringn_nocheck(buf, len));
		free(buf);
	}
	return 0;
}

/* Writes the pattern of `tag` into f at [0, size). */
static int write_pattern(sub_file *f, uint64_t tag, uint64_t size)
{
	char *buf = malloc(CHUNK);
	if (!buf)
		return -ENOMEM;
	int rc = 0;
	for (uint64_t off = 0; off < size && rc == 0; off += CHUNK) {
		size_t n = size - off < CHUNK ? (size_t)(size - off) : CHUNK;
		kc_pattern_fill(buf, n, tag, off);
		rc = sub_pwrite_full(f, buf, n, off);
	}
	free(buf);
	return rc;
}

/* Reads f from 0 to EOF (never trusting a cached size) and compares with the
 * pattern.  status: ok, short, long, mismatch, or the errno name of a failed
 * read. */
static void verify_pattern(sub_file *f, uint64_t tag, uint64_t size, json_t *res)
{
	char *buf = malloc(CHUNK);
	uint64_t off = 0;
	int64_t bad = -1;
	const char *status = "ok";
	int rc = 0;
	if (!buf) {
		status = "ENOMEM";
		goto out;
	}
	for (;;) {
		ssize_t r = sub_pread(f, buf, CHUNK, off);
		if (r < 0) {
			rc = (int)r;
			status = kc_errname(rc);
			break;
		}
		if (r == 0)
			break;
		size_t cmp = (size_t)r;
		if (off + cmp > size)
			cmp = off >= size ? 0 : (size_t)(size - off);
		int64_t m = kc_pattern_check(buf, cmp, tag, off);
		if (m >= 0 && bad < 0)
			bad = (int64_t)off + m;
		off += (uint64_t)r;
		if (off > size + CHUNK)
			break;
	}
	if (rc == 0) {
		if (bad >= 0)
			status = "mismatch";
		else if (off < size)
			status = "short";
		else if (off > size)
			status = "long";
	}
out:
	json_object_set_new(res, "status", json_string(status));
	json_object_set_new(res, "bytes", json_integer((json_int_t)off));
	json_object_set_new(res, "first_bad", json_integer(bad));
	free(buf);
}

/* The size and tag of a patterned file. */
static int args_pattern(kc_step *st, int64_t *size, int64_t *tag)
{
	int rc = kc_arg_int(st, "size", 0, 0, (int64_t)1 << 36, size);
	if (!rc)
		rc = kc_arg_int(st, "tag", 0, 0, INT64_MAX, tag);
	return rc;
}

/* path, size, tag, fsync, fsync_parents, keep (leave open and return a
 * handle).  fsync_parents: every directory up to the root is fsynced too,
 * so that the file's whole path survives a crash, not only its entry. */
static int write_file(kc_step *st, int keep)
{
	const char *p = st->path;
	int64_t size, tag;
	int rc = args_pattern(st, &size, &tag);
	if (rc)
		return rc;
	int do_fsync = kc_arg_bool(st, "fsync", 1);
	sub_file *f = NULL;
	rc = sub_open(st->as->vfs, p, O_RDWR | O_CREAT | O_TRUNC, 0644, &f);
	if (rc)
		return kc_step_fail(st, rc, "create %s: %s", p, sub_strerror(rc));
	if ((rc = write_pattern(f, (uint64_t)tag, (uint64_t)size))) {
		kc_step_fail(st, rc, "write %s: %s", p, sub_strerror(rc));
		goto out;
	}
	int64_t t = ku_mono_ns();
	if (do_fsync && (rc = sub_fsync(f))) {
		kc_step_fail(st, rc, "fsync %s: %s", p, sub_strerror(rc));
		goto out;
	}
	json_object_set_new(st->result, "fsync_ns", json_integer(ku_mono_ns() - t));
	if (do_fsync) {
		char dir[512];
		snprintf(dir, sizeof(dir), "%s", p);
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = '\0';
		else
			dir[0] = '\0';
		if ((rc = sub_fsync_dir(st->as->vfs, dir))) {
			kc_step_fail(st, rc, "fsync directory of %s: %s", p, sub_strerror(rc));
			goto out;
		}
		while (dir[0] && kc_arg_bool(st, "fsync_parents", 0)) {
			char *up = strrchr(dir, '/');
			if (up)
				*up = '\0';
			else
				dir[0] = '\0';
			if ((rc = sub_fsync_dir(st->as->vfs, dir))) {
				kc_step_fail(st, rc, "fsync directory '%s': %s", dir, sub_strerror(rc));
				goto out;
			}
		}
	}
	sub_stat s;
	if (sub_fstat(f, &s) == 0)
		json_object_set_new(st->result, "ino", json_integer((json_int_t)s.ino));
	if (keep) {
		int h = kc_handle_put(st->as, f, p);
		if (h < 0) {
			rc = kc_step_fail(st, h, "too many open handles");
			goto out;
		}
		json_object_set_new(st->result, "handle", json_integer(h));
		return 0;
	}
out:;
	int crc = sub_close(f);
	if (!rc && crc)
		rc = kc_step_fail(st, crc, "close %s: %s", p, sub_strerror(crc));
	return rc;
}

int kc_step_file_write(kc_step *st)
{
	return write_file(st, 0);
}

int kc_step_hold_open(kc_step *st)
{
	return write_file(st, 1);
}

int kc_step_file_verify(kc_step *st)
{
	int64_t size, tag;
	int rc = args_pattern(st, &size, &tag);
	if (rc)
		return rc;
	sub_file *f = NULL;
	rc = sub_open(st->as->vfs, st->path, O_RDONLY, 0, &f);
	if (rc) {
		json_object_set_new(st->result, "status",
				    json_string(rc == -ENOENT ? "missing" : kc_errname(rc)));
		json_object_set_new(st->result, "bytes", json_integer(0));
		return 0;
	}
	verify_pattern(f, (uint64_t)tag, (uint64_t)size, st->result);
	sub_close(f);
	return 0;
}

/* Closes every handle and the substrate, and opens the actor's URL again:
 * after a crash command that replaced what the URL names (a FUSE daemon
 * killed and mounted again, an image copy mounted in place), whatever was
 * open still points at the old filesystem. */
int kc_step_reopen(kc_step *st)
{
	kc_actor_state *as = st->as;
	int closed = 0;
	for (int i = 0; i < KC_MAX_HANDLES; i++) {
		if (as->h[i].f) {
			sub_close(as->h[i].f); /* the old mount may be gone: errors are moot */
			as->h[i].f = NULL;
			closed++;
		}
	}
	sub_destroy(as->vfs);
	as->vfs = NULL;
	char err[512] = "";
	int rc = sub_open_url(as->url, &as->vfs, err, sizeof(err));
	if (rc)
		return kc_step_fail(st, rc, "opening %s again: %s", as->url, err[0] ? err : kc_errname(rc));
	sub_identity id;
	if ((rc = sub_identity_of(as->vfs, &id)))
		return kc_step_fail(st, rc, "identity of %s: %s", as->url, sub_strerror(rc));
	json_object_set_new(st->result, "closed_handles", json_integer(closed));
	json_object_set_new(st->result, "identity", kq_identity_json(&id));
	return 0;
}

int kc_step_open_handle(kc_step *st)
{
	const char *p = st->path;
	sub_file *f = NULL;
	int rc = sub_open(st->as->vfs, p, kc_arg_bool(st, "write", 0) ? O_RDWR : O_RDONLY, 0, &f);
	if (rc)
		return kc_step_fail(st, rc, "open %s: %s", p, sub_strerror(rc));
	int h = kc_handle_put(st->as, f, p);
	if (h < 0) {
		sub_close(f);
		return kc_step_fail(st, h, "too many open handles");
	}
	json_object_set_new(st->result, "handle", json_integer(h));
	return 0;
}

static int arg_handle(kc_step *st, sub_file **f, int64_t *h)
{
	int rc = kc_arg_int(st, "handle", 0, 1, KC_MAX_HANDLES, h);
	if (rc)
		return rc;
	*f = kc_handle_get(st->as, *h);
	if (!*f)
		return kc_step_fail(st, -EBADF, "no open handle %lld", (long long)*h);
	return 0;
}

/* An open handle and the pattern expected in its file. */
static int args_handle_pattern(kc_step *st, sub_file **f, int64_t *size, int64_t *tag)
{
	int64_t h;
	int rc = arg_handle(st, f, &h);
	return rc ? rc : args_pattern(st, size, tag);
}

/* What the holder of a file can still do with it after another client
 * deleted it: read (and is it the right data), write, fstat. */
int kc_step_handle_probe(kc_step *st)
{
	sub_file *f;
	int64_t size, tag;
	int rc = args_handle_pattern(st, &f, &size, &tag);
	if (rc)
		return rc;
	char buf[4096];
	size_t n = size < (int64_t)sizeof(buf) ? (size_t)size : sizeof(buf);
	ssize_t r = sub_pread(f, buf, n, 0);
	const char *rs = r < 0 ? kc_errname((int)r)
			 : (size_t)r != n ? "short"
			 : kc_pattern_check(buf, n, (uint64_t)tag, 0) >= 0 ? "mismatch"
									 : "ok";
	json_object_set_new(st->result, "read", json_string(rs));
	/* Write past the pattern so a later verify of [0,size) is unaffected. */
	memset(buf, 0x5a, sizeof(buf));
	ssize_t w = sub_pwrite(f, buf, sizeof(buf), (uint64_t)size);
	json_object_set_new(st->result, "write", json_string(w < 0 ? kc_errname((int)w) : "ok"));
	/* Synced, so that nothing the holder wrote is still pending when it
	 * closes (a pending change may keep the file referenced). */
	json_object_set_new(st->result, "fsync", json_string(kc_errname(sub_fsync(f))));
	sub_stat s;
	int sr = sub_fstat(f, &s);
	json_object_set_new(st->result, "fstat", json_string(kc_errname(sr)));
	if (sr == 0)
		json_object_set_new(st->result, "nlink", json_integer((json_int_t)s.nlink));
	return 0;
}

int kc_step_handle_verify(kc_step *st)
{
	sub_file *f;
	int64_t size, tag;
	int rc = args_handle_pattern(st, &f, &size, &tag);
	if (rc)
		return rc;
	verify_pattern(f, (uint64_t)tag, (uint64_t)size, st->result);
	return 0;
}

int kc_step_close_handle(kc_step *st)
{
	sub_file *f;
	int64_t h;
	int rc = arg_handle(st, &f, &h);
	if (rc)
		return rc;
	kc_handle_drop(st->as, h);
	set_err(st, sub_close(f));
	return 0;
}

/* "pairs": [[from, to], ...] renamed in order, each timed on this actor's
 * monotonic clock. */
int kc_step_rename_timed(kc_step *st)
{
	json_t *pairs = json_object_get(st->req, "pairs");
	if (!json_is_array(pairs) || json_array_size(pairs) > 1000)
		return kc_step_fail(st, -EINVAL, "argument 'pairs' must be an array of [from,to]");
	json_t *ns = json_array(), *errs = json_array();
	size_t i;
	json_t *pr;
	json_array_foreach(pairs, i, pr)
	{
		const char *a = json_string_value(json_array_get(pr, 0));
		const char *b = json_string_value(json_array_get(pr, 1));
		if (!a || !b || sub_path_check(a) || sub_path_check(b)) {
			json_decref(ns);
			json_decref(errs);
			return kc_step_fail(st, -EINVAL, "pair %zu is not [from,to]", i);
		}
		int64_t t = ku_mono_ns();
		int rc = sub_rename(st->as->vfs, a, b);
		json_array_append_new(ns, json_integer(ku_mono_ns() - t));
		json_array_append_new(errs, json_string(kc_errname(rc)));
	}
	json_object_set_new(st->result, "ns", ns);
	json_object_set_new(st->result, "err", errs);
	return 0;
}

/* One round of the O_EXCL race: every actor is released at the same instant
 * and creates the same name; the winner writes who it is. */
int kc_step_excl_create(kc_step *st)
{
	int64_t tag;
	int rc = kc_arg_int(st, "tag", 0, 0, INT64_MAX, &tag);
	if (rc)
		return rc;
	if ((rc = kc_step_barrier(st)))
		return rc;
	sub_file *f = NULL;
	int64_t t = ku_mono_ns();
	rc = sub_open(st->as->vfs, st->path, O_WRONLY | O_CREAT | O_EXCL, 0644, &f);
	json_object_set_new(st->result, "ns", json_integer(ku_mono_ns() - t));
	json_object_set_new(st->result, "won", json_boolean(rc == 0));
	json_object_set_new(st->result, "err", json_string(kc_errname(rc)));
	if (rc == 0) {
		char line[64];
		int n = snprintf(line, sizeof(line), "actor %d tag %lld\n", st->as->index, (long long)tag);
		int wr = sub_pwrite_full(f, line, (size_t)n, 0);
		int cr = sub_close(f);
		json_object_set_new(st->result, "write", json_string(kc_errname(wr ? wr : cr)));
	}
	return 0;
}

static int cto_args(kc_step *st, int64_t *version, int64_t *size, int64_t *tag)
{
	int rc = kc_arg_int(st, "version", 0, 0, INT64_MAX, version);
	if (!rc)
		rc = kc_arg_int(st, "size", 4096, KC_PAYLOAD_HDR, 16 << 20, size);
	if (!rc)
		rc = kc_arg_int(st, "tag", 0, 0, INT64_MAX, tag);
	return rc;
}

/* Rewrites the file in place (no truncate, no rename) and closes it: the
 * close is what close-to-open promises to publish.  With via_rename the new
 * version is written to "<path>.new", closed, and renamed over the name (a
 * new inode behind an old name: what a broker does with assignment.json). */
int kc_step_cto_write(kc_step *st)
{
	int64_t version, size, tag;
	int rc = cto_args(st, &version, &size, &tag);
	if (rc)
		return rc;
	int via_rename = kc_arg_bool(st, "via_rename", 0);
	char tmp[SUB_PATH_MAX];
	if (via_rename && snprintf(tmp, sizeof(tmp), "%s.new", st->path) >= (int)sizeof(tmp))
		return kc_step_fail(st, -ENAMETOOLONG, "path too long");
	char *buf = malloc((size_t)size);
	if (!buf)
		return kc_step_fail(st, -ENOMEM, "out of memory");
	kc_payload_fill(buf, (size_t)size, (uint64_t)tag, (uint64_t)version);
	sub_file *f = NULL;
	const char *what = "open";
	rc = sub_open(st->as->vfs, via_rename ? tmp : st->path,
		      via_rename ? O_WRONLY | O_CREAT | O_TRUNC : O_WRONLY | O_CREAT, 0644, &f);
	if (!rc) {
		what = "write";
		rc = sub_pwrite_full(f, buf, (size_t)size, 0);
		int cr = sub_close(f);
		if (!rc && cr) {
			what = "close";
			rc = cr;
		}
	}
	if (!rc && via_rename) {
		what = "rename";
		rc = sub_rename(st->as->vfs, tmp, st->path);
	}
	free(buf);
	set_err(st, rc);
	json_object_set_new(st->result, "op", json_string(what));
	return 0;
}

/* Opens fresh, reads to EOF, says what it saw: ok, stale (an older complete
 * version), short, long, torn, empty, missing, or the errno of a failure.
 * ESTALE at open is retried (NFSv3 after a replace) and counted. */
int kc_step_cto_read(kc_step *st)
{
	int64_t version, size, tag;
	int rc = cto_args(st, &version, &size, &tag);
	if (rc)
		return rc;
	size_t cap = (size_t)size * 2 + 4096;
	char *buf = malloc(cap);
	if (!buf)
		return kc_step_fail(st, -ENOMEM, "out of memory");
	sub_file *f = NULL;
	int estale = 0;
	for (;;) {
		rc = sub_open(st->as->vfs, st->path, O_RDONLY, 0, &f);
		if (rc == -ESTALE && estale < 5) {
			estale++;
			continue;
		}
		break;
	}
	json_object_set_new(st->result, "estale", json_integer(estale));
	const char *status;
	size_t got = 0;
	if (rc) {
		status = rc == -ENOENT ? "missing" : kc_errname(rc);
		goto out;
	}
	while (got < cap) {
		ssize_t r = sub_pread(f, buf + got, cap - got, got);
		if (r < 0) {
			rc = (int)r;
			break;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	sub_close(f);
	if (rc) {
		status = kc_errname(rc);
		goto out;
	}
	uint64_t seen = 0;
	uint32_t len = 0;
	int pl = kc_payload_check(buf, got, (uint64_t)tag, &seen, &len);
	if (pl == KC_PL_OK)
		status = seen == (uint64_t)version ? "ok" : seen < (uint64_t)version ? "stale" : "future";
	else
		status = kc_payload_status_name(pl);
	if (pl == KC_PL_OK || pl == KC_PL_SHORT || pl == KC_PL_LONG)
		json_object_set_new(st->result, "seen_version", json_integer((json_int_t)seen));
out:
	free(buf);
	json_object_set_new(st->result, "status", json_string(status));
	json_object_set_new(st->result, "bytes", json_integer((json_int_t)got));
	return 0;
}
