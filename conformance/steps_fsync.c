/*
 * steps_fsync.c — fsync_probe: is this process's fsync the C library's, and
 * how long does a real fsync take compared with one metadata round trip?
 *
 * The round trip is measured two ways, each as the fastest of the samples
 * (the driver's kc_fsync_too_fast takes the cheaper): the stat of a name
 * that never existed (no cache can hold it) and the fstat of the open file
 * (one GETATTR where attributes are not cached; libnfs resolves a path one
 * LOOKUP per component, a GlusterFS lookup is several requests).  Opening a
 * file is not one round trip: through FUSE with caches off it is a lookup,
 * an open and a getattr.
 *
 * An LD_PRELOADed library (eatmydata) replaces fsync and friends with no-ops.
 * The substrate backends call the raw system call, so kaas itself is immune,
 * but anything else in the same environment is not, and a qualification run
 * under such a preload proves nothing about durability.  Two independent
 * signals: dladdr() names the object that defines the symbol, and the libc
 * call is timed against the raw system call on the same file.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conformance/actor.h"
#include "conformance/kc.h"
#include "util/clock.h"

int kc_symbol_interposed(const char *name, char *object, size_t objlen)
{
	Dl_info libc, sym;
	void *ref = dlsym(RTLD_DEFAULT, "gnu_get_libc_version");
	void *p = dlsym(RTLD_DEFAULT, name);
	if (object && objlen)
		object[0] = '\0';
	if (!ref || !p || !dladdr(ref, &libc) || !dladdr(p, &sym) || !libc.dli_fname ||
	    !sym.dli_fname)
		return 0;
	if (object && objlen)
		snprintf(object, objlen, "%s", sym.dli_fname);
	return strcmp(libc.dli_fname, sym.dli_fname) != 0;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int64_t median(int64_t *v, int n)
{
	if (n <= 0)
		return -1;
	qsort(v, (size_t)n, sizeof(*v), cmp64);
	return v[n / 2];
}

static int64_t minimum(const int64_t *v, int n)
{
	int64_t m = -1;
	for (int i = 0; i < n; i++)
		if (m < 0 || v[i] < m)
			m = v[i];
	return m;
}

int kc_step_fsync_probe(kc_step *st)
{
	static const char *const sync_syms[] = {"fsync", "fdatasync", "syncfs", "sync",
						"sync_file_range", "msync"};
	static const char *const other_syms[] = {"open", "open64", "openat"};
	const char *dir;
	int64_t samples;
	int rc = kc_arg_path(st, "dir", &dir);
	if (!rc)
		rc = kc_arg_int(st, "samples", 20, 0, 1000, &samples);
	if (rc)
		return rc;

	json_t *interposed = json_array(), *other = json_array();
	char obj[1024];
	for (size_t i = 0; i < sizeof(sync_syms) / sizeof(sync_syms[0]); i++)
		if (kc_symbol_interposed(sync_syms[i], obj, sizeof(obj)))
			json_array_append_new(interposed,
					      json_pack("{s:s,s:s}", "symbol", sync_syms[i], "object", obj));
	for (size_t i = 0; i < sizeof(other_syms) / sizeof(other_syms[0]); i++)
		if (kc_symbol_interposed(other_syms[i], obj, sizeof(obj)))
			json_array_append_new(other,
					      json_pack("{s:s,s:s}", "symbol", other_syms[i], "object", obj));
	kc_symbol_interposed("fsync", obj, sizeof(obj));
	json_object_set_new(st->result, "fsync_object", json_string(obj));
	json_object_set_new(st->result, "interposed", interposed);
	json_object_set_new(st->result, "interposed_other", other);
	json_object_set_new(st->result, "preload", json_string(getenv("LD_PRELOAD") ? getenv("LD_PRELOAD") : ""));
	json_object_set_new(st->result, "samples", json_integer(samples));
	if (samples == 0)
		return 0;

	sub_vfs *v = st->as->vfs;
	char path[600];
	if (sub_join(path, sizeof(path), dir, "fsync-probe"))
		return kc_step_fail(st, -ENAMETOOLONG, "path too long");
	sub_file *f = NULL;
	if ((rc = sub_open(v, path, O_RDWR | O_CREAT | O_TRUNC, 0644, &f)))
		return kc_step_fail(st, rc, "create %s: %s", path, sub_strerror(rc));
	int64_t *raw = calloc((size_t)samples, sizeof(int64_t));
	int64_t *lib = calloc((size_t)samples, sizeof(int64_t));
	int64_t *cre = calloc((size_t)samples, sizeof(int64_t));
	int64_t *opn = calloc((size_t)samples, sizeof(int64_t));
	int64_t *lku = calloc((size_t)samples, sizeof(int64_t));
	int64_t *gat = calloc((size_t)samples, sizeof(int64_t));
	char block[4096];
	int nfd = sub_native_fd(f);
	int nraw = 0, nlib = 0, ncre = 0, nopn = 0, nlku = 0, ngat = 0;
	if (!raw || !lib || !cre || !opn || !lku || !gat) {
		rc = kc_step_fail(st, -ENOMEM, "out of memory");
		goto out;
	}
	for (int64_t i = 0; i < samples; i++) {
		memset(block, (int)(i & 0xff), sizeof(block));
		/* Each fsync has fresh dirty data behind it; the two kinds
		 * alternate so drift affects both alike. */
		if ((rc = sub_pwrite_full(f, block, sizeof(block), (uint64_t)(2 * i) * sizeof(block)))) {
			kc_step_fail(st, rc, "write %s: %s", path, sub_strerror(rc));
			goto out;
		}
		int64_t t = ku_mono_ns();
		if ((rc = sub_fsync(f))) {
			kc_step_fail(st, rc, "fsync %s: %s", path, sub_strerror(rc));
			goto out;
		}
		raw[nraw++] = ku_mono_ns() - t;
		if (nfd >= 0) {
			if ((rc = sub_pwrite_full(f, block, sizeof(block),
						  (uint64_t)(2 * i + 1) * sizeof(block)))) {
				kc_step_fail(st, rc, "write %s: %s", path, sub_strerror(rc));
				goto out;
			}
			t = ku_mono_ns();
			/* Deliberately the libc symbol, as this process resolves it. */
			if (fsync(nfd) == 0)
				lib[nlib++] = ku_mono_ns() - t;
		}
		char cp[640];
		snprintf(cp, sizeof(cp), "%s.c%lld", path, (long long)i);
		sub_file *c = NULL;
		t = ku_mono_ns();
		int cr = sub_open(v, cp, O_WRONLY | O_CREAT | O_EXCL, 0644, &c);
		if (cr == 0) {
			sub_close(c);
			cre[ncre++] = ku_mono_ns() - t;
			sub_unlink(v, cp);
		}
		/* Opening an existing file: reported, not a reference (it is
		 * several round trips through FUSE without caches). */
		t = ku_mono_ns();
		if (sub_open(v, path, O_RDONLY, 0, &c) == 0) {
			sub_close(c);
			opn[nopn++] = ku_mono_ns() - t;
		}
		/* A name that never existed: nothing can answer from a cache. */
		sub_stat sb;
		snprintf(cp, sizeof(cp), "%s.n%lld", path, (long long)i);
		t = ku_mono_ns();
		int lr = sub_stat_path(v, cp, &sb);
		int64_t dt = ku_mono_ns() - t;
		if (lr == -ENOENT)
			lku[nlku++] = dt;
		t = ku_mono_ns();
		if (sub_fstat(f, &sb) == 0)
			gat[ngat++] = ku_mono_ns() - t;
		if (kc_step_should_stop(st))
			break;
		kc_step_progress(st, i + 1, 0);
	}
	rc = 0;
	json_object_set_new(st->result, "raw_fsync_ns", json_integer(median(raw, nraw)));
	json_object_set_new(st->result, "libc_fsync_ns", json_integer(median(lib, nlib)));
	json_object_set_new(st->result, "create_ns", json_integer(median(cre, ncre)));
	json_object_set_new(st->result, "open_ns", json_integer(median(opn, nopn)));
	json_object_set_new(st->result, "lookup_ns", json_integer(minimum(lku, nlku)));
	json_object_set_new(st->result, "getattr_ns", json_integer(minimum(gat, ngat)));
	json_object_set_new(st->result, "native", json_boolean(nfd >= 0));
out:
	free(raw);
	free(lib);
	free(cre);
	free(opn);
	free(lku);
	free(gat);
	sub_close(f);
	sub_unlink(v, path);
	return rc;
}
