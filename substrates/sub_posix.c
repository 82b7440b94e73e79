/*
 * sub_posix.c — the posix backend: a directory of a mounted filesystem.
 *
 * Every operation is relative to a directory descriptor opened on the root
 * (openat/renameat/...), so the root cannot be swapped under us by a rename
 * of its parent.  fsync goes through the raw system call: an LD_PRELOADed
 * fsync (eatmydata) must not be able to make the broker or the conformance
 * tool believe data is durable when it is not.
 */
#include "substrates/sub.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct posix_vfs {
	sub_vfs base;
	int rootfd;
	char root[SUB_PATH_MAX];
} posix_vfs;

typedef struct posix_file {
	sub_file base;
	int fd;
} posix_file;

#define PV(v) ((posix_vfs *)(v))
#define PF(f) ((posix_file *)(f))

/* "" and "." both mean the root directory. */
static const char *rel(const char *p)
{
	return (p == NULL || p[0] == '\0') ? "." : p;
}

static int raw_fsync(int fd)
{
	/* syscall(2) bypasses any interposed libc fsync symbol. */
	if (syscall(SYS_fsync, fd) != 0)
		return -errno;
	return 0;
}

static int px_open(sub_vfs *v, const char *path, int flags, unsigned mode, sub_file **out)
{
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	posix_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->fd = openat(PV(v)->rootfd, rel(path), flags | O_CLOEXEC, (mode_t)mode);
	if (f->fd < 0) {
		rc = -errno;
		free(f);
		return rc;
	}
	f->base.vfs = v;
	*out = &f->base;
	return 0;
}

static int px_close(sub_file *f)
{
	int rc = close(PF(f)->fd) == 0 ? 0 : -errno;
	free(f);
	return rc;
}

static ssize_t px_pread(sub_file *f, void *buf, size_t n, uint64_t off)
{
	ssize_t r;
	do
		r = pread(PF(f)->fd, buf, n, (off_t)off);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r;
}

static ssize_t px_pwrite(sub_file *f, const void *buf, size_t n, uint64_t off)
{
	ssize_t r;
	do
		r = pwrite(PF(f)->fd, buf, n, (off_t)off);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r;
}

static int px_fsync(sub_file *f)
{
	return raw_fsync(PF(f)->fd);
}

static int px_ftruncate(sub_file *f, uint64_t size)
{
	return ftruncate(PF(f)->fd, (off_t)size) == 0 ? 0 : -errno;
}

static void fill_stat(const struct stat *s, sub_stat *st)
{
	st->size = (uint64_t)s->st_size;
	st->ino = (uint64_t)s->st_ino;
	st->dev = (uint64_t)s->st_dev;
	st->nlink = (uint64_t)s->st_nlink;
	st->mtime_ns = (int64_t)s->st_mtim.tv_sec * 1000000000LL + s->st_mtim.tv_nsec;
	st->mode = (uint32_t)s->st_mode;
}

static int px_fstat(sub_file *f, sub_stat *st)
{
	struct stat s;
	if (fstat(PF(f)->fd, &s) != 0)
		return -errno;
	fill_stat(&s, st);
	return 0;
}

static int px_stat(sub_vfs *v, const char *path, sub_stat *st)
{
	struct stat s;
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	if (fstatat(PV(v)->rootfd, rel(path), &s, AT_SYMLINK_NOFOLLOW) != 0)
		return -errno;
	fill_stat(&s, st);
	return 0;
}

static int px_rename(sub_vfs *v, const char *from, const char *to)
{
	int rc = sub_path_check(from);
	if (rc || (rc = sub_path_check(to)))
		return rc;
	return renameat(PV(v)->rootfd, from, PV(v)->rootfd, to) == 0 ? 0 : -errno;
}

static int px_unlink(sub_vfs *v, const char *path)
{
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	return unlinkat(PV(v)->rootfd, path, 0) == 0 ? 0 : -errno;
}

static int px_mkdir(sub_vfs *v, const char *path, unsigned mode)
{
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	return mkdirat(PV(v)->rootfd, path, (mode_t)mode) == 0 ? 0 : -errno;
}

static int px_rmdir(sub_vfs *v, const char *path)
{
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	return unlinkat(PV(v)->rootfd, path, AT_REMOVEDIR) == 0 ? 0 : -errno;
}

static int px_readdir(sub_vfs *v, const char *path, sub_readdir_cb cb, void *arg)
{
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	int fd = openat(PV(v)->rootfd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		rc = -errno;
		close(fd);
		return rc;
	}
	for (;;) {
		errno = 0;
		struct dirent *e = readdir(d);
		if (!e) {
			rc = errno ? -errno : 0;
			break;
		}
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		rc = cb(arg, e->d_name, e->d_type);
		if (rc)
			break;
	}
	closedir(d);
	return rc;
}

static int px_fsync_dir(sub_vfs *v, const char *path)
{
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	int fd = openat(PV(v)->rootfd, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = raw_fsync(fd);
	/* Some filesystems refuse fsync on a directory; that is not a failure to
	 * persist (their directory operations are synchronous). */
	if (rc == -EINVAL || rc == -EBADF)
		rc = 0;
	close(fd);
	return rc;
}

static int px_statvfs(sub_vfs *v, const char *path, sub_fsinfo *out)
{
	int rc = sub_path_check(path);
	if (rc)
		return rc;
	int fd = openat(PV(v)->rootfd, rel(path), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct statvfs s;
	rc = fstatvfs(fd, &s) == 0 ? 0 : -errno;
	close(fd);
	if (rc)
		return rc;
	out->bsize = s.f_frsize ? s.f_frsize : s.f_bsize;
	out->blocks = s.f_blocks;
	out->bfree = s.f_bfree;
	out->bavail = s.f_bavail;
	out->files = s.f_files;
	out->ffree = s.f_ffree;
	return 0;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape_mountinfo(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '7' && r[2] >= '0' && r[2] <= '7' &&
		    r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
			r += 3;
		} else {
			*w++ = *r;
		}
	}
	*w = '\0';
}

/* Is mp a path prefix of path at a component boundary? */
static size_t mount_prefix_len(const char *mp, const char *path)
{
	size_t n = strlen(mp);
	if (strcmp(mp, "/") == 0)
		return 1;
	if (strncmp(mp, path, n) != 0)
		return 0;
	if (path[n] != '\0' && path[n] != '/')
		return 0;
	return n;
}

/* Finds the mount that holds `path` (longest matching mount point, last one
 * wins on ties, as the kernel stacks them) and copies its fields. */
static void read_mountinfo(const char *path, sub_identity *id)
{
	FILE *fp = fopen("/proc/self/mountinfo", "re");
	if (!fp)
		return;
	char line[8192];
	size_t best = 0;
	while (fgets(line, sizeof(line), fp)) {
		/* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
		char *sep = strstr(line, " - ");
		if (!sep)
			continue;
		*sep = '\0';
		char *save = NULL, *tok[6] = {0};
		char *p = line;
		int i;
		for (i = 0; i < 6; i++) {
			tok[i] = strtok_r(p, " ", &save);
			p = NULL;
			if (!tok[i])
				break;
		}
		if (i < 6)
			continue;
		char *mp = tok[4], *mopts = tok[5];
		char *fstype = strtok_r(sep + 3, " ", &save);
		char *source = strtok_r(NULL, " ", &save);
		char *superopts = strtok_r(NULL, " \n", &save);
		if (!fstype || !source)
			continue;
		unescape_mountinfo(mp);
		size_t n = mount_prefix_len(mp, path);
		if (n == 0 || n < best)
			continue;
		best = n;
		unescape_mountinfo(source);
		snprintf(id->mountpoint, sizeof(id->mountpoint), "%s", mp);
		snprintf(id->fstype, sizeof(id->fstype), "%s", fstype);
		snprintf(id->source, sizeof(id->source), "%s", source);
		snprintf(id->options, sizeof(id->options), "%s%s%s", mopts, superopts ? "," : "",
			 superopts ? superopts : "");
	}
	fclose(fp);
}

static int px_identity(sub_vfs *v, sub_identity *id)
{
	memset(id, 0, sizeof(*id));
	snprintf(id->backend, sizeof(id->backend), "posix");
	snprintf(id->root, sizeof(id->root), "%s", PV(v)->root);
	struct statfs sf;
	if (fstatfs(PV(v)->rootfd, &sf) != 0)
		return -errno;
	id->fs_magic = (uint64_t)(unsigned long)sf.f_type;
	unsigned int fsid[2];
	memcpy(fsid, &sf.f_fsid, sizeof(fsid));
	snprintf(id->fsid, sizeof(id->fsid), "%08x%08x", fsid[0], fsid[1]);
	read_mountinfo(PV(v)->root, id);
	return 0;
}

static int px_native_fd(sub_file *f)
{
	return PF(f)->fd;
}

static void px_destroy(sub_vfs *v)
{
	close(PV(v)->rootfd);
	free(v->url);
	free(v);
}

static const sub_methods posix_methods = {
	.name = "posix",
	.open = px_open,
	.close = px_close,
	.pread = px_pread,
	.pwrite = px_pwrite,
	.fsync = px_fsync,
	.ftruncate = px_ftruncate,
	.fstat = px_fstat,
	.stat = px_stat,
	.rename = px_rename,
	.unlink = px_unlink,
	.mkdir = px_mkdir,
	.rmdir = px_rmdir,
	.readdir = px_readdir,
	.fsync_dir = px_fsync_dir,
	.statvfs = px_statvfs,
	.identity = px_identity,
	.native_fd = px_native_fd,
	.destroy = px_destroy,
};

int sub_posix_open(const char *root, sub_vfs **out, char *err, size_t errlen)
{
	int rc;
	posix_vfs *v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->rootfd = -1;
	if (!realpath(root, v->root)) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", root, strerror(-rc));
		goto out;
	}
	v->rootfd = open(v->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (v->rootfd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", root,
			 rc == -ENOTDIR ? "not a directory" : strerror(-rc));
		goto out;
	}
	if (faccessat(v->rootfd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: not writable: %s", root, strerror(-rc));
		goto out;
	}
	v->base.m = &posix_methods;
	v->base.url = malloc(strlen(v->root) + 7);
	if (!v->base.url) {
		rc = -ENOMEM;
		goto out;
	}
	sprintf(v->base.url, "posix:%s", v->root);
	*out = &v->base;
	return 0;
out:
	if (v->rootfd >= 0)
		close(v->rootfd);
	free(v);
	return rc;
}
