/*
 * sub_util.c — URL dispatch and the helpers every caller shares.
 *
 * write_atomic and create_excl live here and nowhere else: Rule 1 of the
 * substrate contract (temp + fsync + rename + directory fsync) is implemented
 * once, so the broker, the conformance stamp and the crash tests all exercise
 * the same code.
 */
#include "substrates/sub.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/grow.h"

int sub_open_url(const char *url, sub_vfs **out, char *err, size_t errlen)
{
	*out = NULL;
	if (!url || !*url) {
		snprintf(err, errlen, "empty substrate URL");
		return -EINVAL;
	}
	if (strncmp(url, "posix:", 6) == 0)
		return sub_posix_open(url + 6, out, err, errlen);
	if (strncmp(url, "fault:", 6) == 0)
		return sub_fault_open(url + 6, out, err, errlen);
	if (strncmp(url, "nfs://", 6) == 0)
		return sub_nfs_open(url, out, err, errlen);
	/* Anything else with a scheme is a mistake, not a relative path. */
	const char *colon = strchr(url, ':');
	const char *slash = strchr(url, '/');
	if (colon && (!slash || colon < slash)) {
		snprintf(err, errlen, "unknown substrate URL scheme in '%s' (use a path, posix:, nfs:// or fault:)",
			 url);
		return -EPROTONOSUPPORT;
	}
	return sub_posix_open(url, out, err, errlen);
}

void sub_destroy(sub_vfs *vfs)
{
	if (vfs)
		vfs->m->destroy(vfs);
}

int sub_close(sub_file *f)
{
	if (!f)
		return 0;
	return f->vfs->m->close(f);
}

int sub_pwrite_full(sub_file *f, const void *buf, size_t n, uint64_t off)
{
	const char *p = buf;
	while (n > 0) {
		ssize_t w = sub_pwrite(f, p, n, off);
		if (w < 0)
			return (int)w;
		if (w == 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

int sub_pread_full(sub_file *f, void *buf, size_t n, uint64_t off)
{
	char *p = buf;
	while (n > 0) {
		ssize_t r = sub_pread(f, p, n, off);
		if (r < 0)
			return (int)r;
		if (r == 0)
			return -EIO;
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int sub_read_file(sub_vfs *v, const char *path, size_t max, char **out, size_t *len)
{
	sub_file *f = NULL;
	char *buf = NULL;
	size_t cap = 0, used = 0;
	int rc = sub_open(v, path, O_RDONLY, 0, &f);
	if (rc)
		goto out;
	/* Read until EOF rather than trusting a size from stat: the size may be
	 * stale on a network filesystem. */
	for (;;) {
		if (used + 1 >= cap) {
			size_t ncap = cap ? cap * 2 : 4096;
			if (ncap > max + 2)
				ncap = max + 2;
			if (ncap <= used + 1) {
				rc = -EFBIG;
				goto out;
			}
			char *nb = realloc(buf, ncap);
			if (!nb) {
				rc = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap = ncap;
		}
		ssize_t r = sub_pread(f, buf + used, cap - used - 1, used);
		if (r < 0) {
			rc = (int)r;
			goto out;
		}
		if (r == 0)
			break;
		used += (size_t)r;
		if (used > max) {
			rc = -EFBIG;
			goto out;
		}
	}
	buf[used] = '\0';
	*out = buf;
	*len = used;
	buf = NULL;
out:
	free(buf);
	int crc = sub_close(f);
	return rc ? rc : crc;
}

int sub_join(char *dst, size_t dstlen, const char *a, const char *b)
{
	int n;
	if (!a || !*a || strcmp(a, ".") == 0)
		n = snprintf(dst, dstlen, "%s", b ? b : "");
	else if (!b || !*b)
		n = snprintf(dst, dstlen, "%s", a);
	else
		n = snprintf(dst, dstlen, "%s/%s", a, b);
	return (n < 0 || (size_t)n >= dstlen) ? -ENAMETOOLONG : 0;
}

int sub_path_check(const char *path)
{
	if (!path)
		return -EINVAL;
	if (path[0] == '/')
		return -EINVAL;
	const char *p = path;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return -EINVAL;
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

/* Splits "a/b/c" into dir "a/b" (or "" for the root) and base "c". */
static int split_path(const char *path, char *dir, size_t dirlen, const char **base)
{
	const char *slash = strrchr(path, '/');
	if (!slash) {
		dir[0] = '\0';
		*base = path;
		return 0;
	}
	size_t n = (size_t)(slash - path);
	if (n >= dirlen)
		return -ENAMETOOLONG;
	memcpy(dir, path, n);
	dir[n] = '\0';
	*base = slash + 1;
	return 0;
}

/* A temp name no other writer on any host can pick: random bits, not the pid
 * (pids repeat across hosts and containers). */
static int temp_name(char *dst, size_t dstlen, const char *dir, const char *base)
{
	uint64_t r[2];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return -EIO;
	char leaf[320];
	int n = snprintf(leaf, sizeof(leaf), ".%.200s.tmp.%016llx%016llx", base,
			 (unsigned long long)r[0], (unsigned long long)r[1]);
	if (n < 0 || (size_t)n >= sizeof(leaf))
		return -ENAMETOOLONG;
	return sub_join(dst, dstlen, dir, leaf);
}

int sub_write_atomic(sub_vfs *v, const char *path, const void *buf, size_t len)
{
	char dir[SUB_PATH_MAX], tmp[SUB_PATH_MAX];
	const char *base;
	sub_file *f = NULL;
	int created = 0;
	int rc = split_path(path, dir, sizeof(dir), &base);
	if (rc)
		return rc;
	if ((rc = temp_name(tmp, sizeof(tmp), dir, base)))
		return rc;
	if ((rc = sub_open(v, tmp, O_WRONLY | O_CREAT | O_EXCL, 0644, &f)))
		goto out;
	created = 1;
	if ((rc = sub_pwrite_full(f, buf, len, 0)))
		goto out;
	if ((rc = sub_fsync(f)))
		goto out;
	rc = sub_close(f);
	f = NULL;
	if (rc)
		goto out;
	if ((rc = sub_rename(v, tmp, path)))
		goto out;
	created = 0;
	rc = sub_fsync_dir(v, dir);
out:
	if (f)
		sub_close(f);
	if (created)
		sub_unlink(v, tmp);
	return rc;
}

int sub_create_excl(sub_vfs *v, const char *path, const void *buf, size_t len)
{
	char dir[SUB_PATH_MAX];
	const char *base;
	sub_file *f = NULL;
	int rc = split_path(path, dir, sizeof(dir), &base);
	if (rc)
		return rc;
	if ((rc = sub_open(v, path, O_WRONLY | O_CREAT | O_EXCL, 0644, &f)))
		return rc;
	if (len && (rc = sub_pwrite_full(f, buf, len, 0)))
		goto out;
	if ((rc = sub_fsync(f)))
		goto out;
	rc = sub_close(f);
	f = NULL;
	if (rc)
		goto out;
	rc = sub_fsync_dir(v, dir);
out:
	/* The name stays claimed even when writing its contents failed: removing
	 * it would let a second creator win a race we already won. */
	if (f)
		sub_close(f);
	return rc;
}

int sub_mkdirs(sub_vfs *v, const char *path, unsigned mode)
{
	char buf[SUB_PATH_MAX];
	if (!path || !*path || strcmp(path, ".") == 0)
		return 0;
	if (strlen(path) >= sizeof(buf))
		return -ENAMETOOLONG;
	strcpy(buf, path);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			int rc = sub_mkdir(v, buf, mode);
			if (rc && rc != -EEXIST)
				return rc;
			if (c == '\0')
				break;
			*p = c;
		}
	}
	return 0;
}

typedef struct names_acc {
	char **v;
	size_t n, cap;
	int err;
} names_acc;

static int collect_name(void *arg, const char *name, int d_type)
{
	(void)d_type;
	names_acc *a = arg;
	if (KAAS_GROW(a->v, a->n, a->cap, 16)) {
		a->err = -ENOMEM;
		return 1;
	}
	a->v[a->n] = strdup(name);
	if (!a->v[a->n]) {
		a->err = -ENOMEM;
		return 1;
	}
	a->n++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int sub_list(sub_vfs *v, const char *path, char ***names, size_t *n)
{
	names_acc a = {0};
	int rc = sub_readdir(v, path, collect_name, &a);
	if (a.err)
		rc = a.err;
	if (rc < 0 || rc == 1) {
		sub_names_free(a.v, a.n);
		return rc < 0 ? rc : -ENOMEM;
	}
	if (a.n)
		qsort(a.v, a.n, sizeof(*a.v), cmp_str);
	*names = a.v;
	*n = a.n;
	return 0;
}

void sub_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int sub_remove_tree(sub_vfs *v, const char *path)
{
	sub_stat st;
	int rc = sub_stat_path(v, path, &st);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (!S_ISDIR(st.mode)) {
		rc = sub_unlink(v, path);
		return rc == -ENOENT ? 0 : rc;
	}
	char **names = NULL;
	size_t n = 0;
	rc = sub_list(v, path, &names, &n);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		char child[SUB_PATH_MAX];
		rc = sub_join(child, sizeof(child), path, names[i]);
		if (rc == 0)
			rc = sub_remove_tree(v, child);
	}
	sub_names_free(names, n);
	if (rc)
		return rc;
	rc = sub_rmdir(v, path);
	return rc == -ENOENT ? 0 : rc;
}

const char *sub_strerror(int neg_errno)
{
	return strerror(neg_errno < 0 ? -neg_errno : neg_errno);
}
