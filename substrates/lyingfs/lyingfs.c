/*
 * lyingfs.c — a FUSE passthrough that can lie about durability, for testing
 * the conformance tool's fsync-honesty check.
 *
 *   kaas-lyingfs [--lying] BACKING_DIR MOUNTPOINT [FUSE options]
 *
 * Every operation is forwarded to BACKING_DIR.  In honest mode (the default)
 * writes go straight to the backing file and fsync is a real fsync, so data
 * survives a SIGKILL of this daemon.  In lying mode (--lying, or LYING=1 in
 * the environment) written data stays in this process's memory and fsync
 * returns success without doing anything.  Held data reaches the backing
 * file when the process that opened the file closes it (close-to-open keeps
 * working), or, like a page cache's writeback, LYING_WRITEBACK_MS (default
 * 5000) after it was written when nobody closes it (a writer that died).
 * Killing the daemon before that loses data whose fsync "succeeded".
 *
 * SIGUSR1 simulates a crash and restart of the daemon without taking the
 * mount away (a real FUSE daemon's death ends its mount, and with it every
 * descriptor the clients hold): everything held in memory is forgotten and
 * reads show the backing file again.  The daemon logs one "crash" line per
 * signal once it is done.  In honest mode nothing is held, so nothing is lost.
 *
 * LYINGFS_HANG=fsync,unlink (either or both) makes those calls hang until
 * the daemon is killed: a hung filesystem, for testing what the tools do
 * when a call never returns.
 *
 * Two more lies, about names, for the conformance tool's convergence and
 * detection-power tests (either mode, set per mount in the environment):
 *
 * LYINGFS_STALE_NAMES=1: a client whose name lookups never revalidate.  The
 * first read-only open of a path pins the file found there, and from then
 * on that path opens (and stats as) the pinned file forever, although
 * other clients rename new files over the name.  Reads follow the pinned
 * inode, so in-place rewrites are seen; only a change through this mount
 * (a write open, a rename, an unlink, an rmdir of the path or a parent)
 * unpins it.  At most STALE_PINS paths are pinned; later ones are honest.
 *
 * LYINGFS_SPLIT_DIRS=N: every Nth directory rename is carried out one
 * entry at a time (mkdir the new name, move the entries one by one, pausing
 * LYINGFS_SPLIT_DELAY_US, default 100, after each, remove the old name), as
 * an object-store mount copies a directory: a lister sees it half moved in
 * a few percent of its listings.
 *
 * Otherwise rename, exclusive create and unlink are forwarded at once in
 * both modes: only durability lies.
 *
 * Kernel attribute and entry caching are off and unlinked-but-open files are
 * really unlinked (hard_remove), so the honest mode is a coherent filesystem
 * that the tool must pass.
 * Length: a standalone FUSE test program built without the project's
 * modules, kept in one file so the matrix can build it alone.
 */
#define FUSE_USE_VERSION 31

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse3/fuse.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The data a lying mount holds back for one inode, shared by every handle
 * that has it open. */
typedef struct lf_held {
	dev_t dev;
	ino_t ino;
	int refs;          /* open handles that use it */
	int dirty;         /* holds bytes the backing file does not have */
	long long dirty_ms; /* when it became dirty (CLOCK_MONOTONIC) */
	int fd;            /* a writable descriptor to publish through */
	char *buf;
	size_t len, cap;
	struct lf_held *next;
} lf_held;

typedef struct lf_file {
	int fd;
	int writable;
	pid_t owner;       /* process (thread group) that opened it */
	lf_held *held;     /* lying mode, after the first write */
} lf_file;

static int g_root = -1;   /* directory descriptor of the backing tree */
static int g_lying;
static int g_hang_fsync, g_hang_unlink; /* LYINGFS_HANG: calls that never answer */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static lf_held *g_held;   /* held inodes: open, or dirty and waiting for writeback */
static long long g_writeback_ms = 5000;
static volatile sig_atomic_t g_crash_req; /* SIGUSR1s received */

/* LYINGFS_STALE_NAMES: path -> the descriptor of the file first found there. */
#define STALE_PINS 4096
typedef struct lf_pin {
	char *path;
	int fd;
	struct lf_pin *next;
} lf_pin;
static int g_stale_names;
static lf_pin *g_pins;
static int g_npins;
static pthread_mutex_t g_pin_lock = PTHREAD_MUTEX_INITIALIZER;
/* LYINGFS_SPLIT_DIRS */
static long g_split_every, g_split_delay_us = 100;
static unsigned long g_dir_renames;

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* FUSE paths start with '/'; the backing calls take them relative to g_root. */
static const char *rel(const char *path)
{
	while (*path == '/')
		path++;
	return *path ? path : ".";
}

/* Who sent the current request: the thread group (FUSE reports the calling
 * thread, and any thread of the opener may close the file) and whether the
 * task is exiting (PF_EXITING in /proc/TID/stat): a killed process closes its
 * files on the way out, which is not the writer closing them. */
#define LF_PF_EXITING 0x4u
/* The pinned descriptor of path (a dup the caller closes), or -1. */
static int pin_get(const char *path)
{
	int fd = -1;
	pthread_mutex_lock(&g_pin_lock);
	for (lf_pin *p = g_pins; p; p = p->next)
		if (strcmp(p->path, path) == 0) {
			fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
			break;
		}
	pthread_mutex_unlock(&g_pin_lock);
	return fd;
}

static void pin_put(const char *path, int fd)
{
	pthread_mutex_lock(&g_pin_lock);
	lf_pin *p = g_npins < STALE_PINS ? calloc(1, sizeof(*p)) : NULL;
	if (p && (p->path = strdup(path)) && (p->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) >= 0) {
		p->next = g_pins;
		g_pins = p;
		g_npins++;
	} else if (p) {
		free(p->path);
		free(p);
	}
	pthread_mutex_unlock(&g_pin_lock);
}

/* This client changed path (or everything under it): it sees it anew. */
static void pin_drop(const char *path)
{
	if (!g_stale_names)
		return;
	size_t n = strlen(path);
	pthread_mutex_lock(&g_pin_lock);
	for (lf_pin **pp = &g_pins; *pp;) {
		lf_pin *p = *pp;
		if (strcmp(p->path, path) == 0 || (strncmp(p->path, path, n) == 0 && p->path[n] == '/')) {
			*pp = p->next;
			close(p->fd);
			free(p->path);
			free(p);
			g_npins--;
		} else {
			pp = &p->next;
		}
	}
	pthread_mutex_unlock(&g_pin_lock);
}

static pid_t caller_tgid(int *exiting)
{
	pid_t tid = fuse_get_context()->pid, tgid = tid;
	char path[64], line[512];
	if (exiting) {
		*exiting = 1; /* gone already: certainly not a normal close */
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)tid);
		FILE *f = fopen(path, "r");
		if (f) {
			if (fgets(line, sizeof(line), f)) {
				/* fields after "(comm) ": state ppid pgrp session tty tpgid flags */
				char *p = strrchr(line, ')');
				unsigned long flags = 0;
				if (p && sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) == 1)
					*exiting = (flags & LF_PF_EXITING) != 0;
			}
			fclose(f);
		}
	}
	snprintf(path, sizeof(path), "/proc/%d/status", (int)tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return tid;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Tgid:", 5) == 0) {
			tgid = (pid_t)atoi(line + 5);
			break;
		}
	fclose(f);
	return tgid;
}

static lf_file *file_of(struct fuse_file_info *fi)
{
	return (lf_file *)(uintptr_t)fi->fh;
}

static lf_held *held_find(dev_t dev, ino_t ino)
{
	for (lf_held *h = g_held; h; h = h->next)
		if (h->dev == dev && h->ino == ino)
			return h;
	return NULL;
}

static int held_reserve(lf_held *h, size_t need)
{
	if (need <= h->cap)
		return 0;
	size_t cap = h->cap ? h->cap : 65536;
	while (cap < need)
		cap *= 2;
	char *nb = realloc(h->buf, cap);
	if (!nb)
		return -ENOMEM;
	memset(nb + h->cap, 0, cap - h->cap);
	h->buf = nb;
	h->cap = cap;
	return 0;
}

/* Called with g_lock held: attach the handle to the inode's held data,
 * loading the current backing contents the first time. */
static int held_attach(lf_file *f)
{
	struct stat st;
	if (f->held)
		return 0;
	if (fstat(f->fd, &st) < 0)
		return -errno;
	lf_held *h = held_find(st.st_dev, st.st_ino);
	if (!h) {
		h = calloc(1, sizeof(*h));
		if (!h)
			return -ENOMEM;
		h->dev = st.st_dev;
		h->ino = st.st_ino;
		h->fd = dup(f->fd);
		if (h->fd < 0 || held_reserve(h, (size_t)st.st_size + 1) < 0) {
			int err = h->fd < 0 ? -errno : -ENOMEM;
			if (h->fd >= 0)
				close(h->fd);
			free(h);
			return err;
		}
		size_t got = 0;
		while (got < (size_t)st.st_size) {
			ssize_t n = pread(f->fd, h->buf + got, (size_t)st.st_size - got, (off_t)got);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		h->len = got;
		h->next = g_held;
		g_held = h;
	}
	h->refs++;
	f->held = h;
	return 0;
}

/* Called with g_lock held: write the held bytes to the backing file (no
 * fsync: a close is not a durability point either). */
static int held_publish(lf_held *h)
{
	size_t done = 0;
	while (done < h->len) {
		ssize_t n = pwrite(h->fd, h->buf + done, h->len - done, (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		done += (size_t)n;
	}
	if (ftruncate(h->fd, (off_t)h->len) < 0)
		return -errno;
	h->dirty = 0;
	return 0;
}

static void held_free(lf_held *h)
{
	for (lf_held **pp = &g_held; *pp; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	close(h->fd);
	free(h->buf);
	free(h);
}

/* Called with g_lock held: forget whatever was not published, as a daemon
 * that died and came back would have.  Open handles keep their descriptors
 * and see the backing file's contents from now on. */
static void held_forget_all(int n)
{
	size_t lost = 0, files = 0;
	for (lf_held *h = g_held, *next; h; h = next) {
		next = h->next;
		if (h->dirty) {
			lost += h->len;
			files++;
		}
		if (h->refs == 0) {
			held_free(h);
			continue;
		}
		struct stat st;
		h->len = 0;
		h->dirty = 0;
		if (fstat(h->fd, &st) == 0 && held_reserve(h, (size_t)st.st_size + 1) == 0) {
			ssize_t got = pread(h->fd, h->buf, (size_t)st.st_size, 0);
			h->len = got > 0 ? (size_t)got : 0;
		}
	}
	fprintf(stderr, "kaas-lyingfs: crash %d: forgot %zu held bytes of %zu files\n", n, lost, files);
}

static void on_crash_signal(int sig)
{
	(void)sig;
	g_crash_req++;
}

/* The writeback of data nobody closed: a lying cache still writes back
 * eventually, just not when fsync asks.  Also carries out simulated crashes. */
static void *writeback_main(void *arg)
{
	(void)arg;
	int crashes = 0;
	for (;;) {
		usleep(50 * 1000);
		long long now = now_ms();
		pthread_mutex_lock(&g_lock);
		while (crashes != g_crash_req)
			held_forget_all(++crashes);
		for (lf_held *h = g_held, *next; h; h = next) {
			next = h->next;
			if (h->dirty && now - h->dirty_ms >= g_writeback_ms)
				held_publish(h);
			if (!h->dirty && h->refs == 0)
				held_free(h);
		}
		pthread_mutex_unlock(&g_lock);
	}
	return NULL;
}

static void held_detach(lf_file *f)
{
	lf_held *h = f->held;
	if (!h)
		return;
	f->held = NULL;
	if (--h->refs > 0 || h->dirty)
		return; /* dirty and unreferenced: the writeback thread frees it */
	held_free(h);
}

/* A lying mount reports the size of the data it holds, not the backing
 * file's, or the kernel would read short. */
static void held_patch_stat(struct stat *st)
{
	if (!g_lying || !S_ISREG(st->st_mode))
		return;
	pthread_mutex_lock(&g_lock);
	lf_held *h = held_find(st->st_dev, st->st_ino);
	if (h) {
		st->st_size = (off_t)h->len;
		st->st_blocks = (blkcnt_t)((h->len + 511) / 512);
	}
	pthread_mutex_unlock(&g_lock);
}

static void *lf_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	cfg->use_ino = 1;
	cfg->nullpath_ok = 1;
	cfg->hard_remove = 1;
	cfg->entry_timeout = 0;
	cfg->attr_timeout = 0;
	cfg->negative_timeout = 0;
	return NULL;
}

static int lf_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	int pin = !fi && g_stale_names ? pin_get(path) : -1;
	int rc = fi ? fstat(file_of(fi)->fd, st)
	          : pin >= 0 ? fstat(pin, st)
		    : fstatat(g_root, rel(path), st, AT_SYMLINK_NOFOLLOW);
	if (pin >= 0)
		close(pin);
	if (rc < 0)
		return -errno;
	held_patch_stat(st);
	return 0;
}

static int lf_readlink(const char *path, char *buf, size_t size)
{
	ssize_t n = readlinkat(g_root, rel(path), buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int lf_mkdir(const char *path, mode_t mode)
{
	return mkdirat(g_root, rel(path), mode) < 0 ? -errno : 0;
}

/* A hung server: the caller waits in the kernel for an answer that never
 * comes, beyond the reach of any signal, until this daemon dies. */
static void hang_if(int hang)
{
	while (hang)
		pause();
}

static int lf_unlink(const char *path)
{
	hang_if(g_hang_unlink);
	pin_drop(path);
	return unlinkat(g_root, rel(path), 0) < 0 ? -errno : 0;
}

static int lf_rmdir(const char *path)
{
	pin_drop(path);
	return unlinkat(g_root, rel(path), AT_REMOVEDIR) < 0 ? -errno : 0;
}

static int lf_symlink(const char *target, const char *path)
{
	return symlinkat(target, g_root, rel(path)) < 0 ? -errno : 0;
}

/* LYINGFS_SPLIT_DIRS: a directory moved entry by entry.  Only onto a name
 * that does not exist (a rename over an empty directory stays atomic). */
static int split_rename(const char *from, const char *to)
{
	struct stat st;
	if (fstatat(g_root, rel(from), &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (mkdirat(g_root, rel(to), st.st_mode & 07777) < 0)
		return -errno;
	int dfd = openat(g_root, rel(from), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return -errno;
	}
	int rc = 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char a[4096], b[4096];
		snprintf(a, sizeof(a), "%s/%s", rel(from), e->d_name);
		snprintf(b, sizeof(b), "%s/%s", rel(to), e->d_name);
		if (renameat(g_root, a, g_root, b) < 0)
			rc = -errno;
		else if (g_split_delay_us > 0)
			usleep((useconds_t)g_split_delay_us);
	}
	closedir(d);
	if (rc == 0 && unlinkat(g_root, rel(from), AT_REMOVEDIR) < 0)
		rc = -errno;
	return rc;
}

static int lf_rename(const char *from, const char *to, unsigned int flags)
{
	pin_drop(from);
	pin_drop(to);
	if (g_split_every > 0 && flags == 0) {
		struct stat fs, ts;
		if (fstatat(g_root, rel(from), &fs, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(fs.st_mode) &&
		    fstatat(g_root, rel(to), &ts, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT &&
		    __atomic_add_fetch(&g_dir_renames, 1, __ATOMIC_RELAXED) % (unsigned long)g_split_every == 0)
			return split_rename(from, to);
	}
	return renameat2(g_root, rel(from), g_root, rel(to), flags) < 0 ? -errno : 0;
}

static int lf_link(const char *from, const char *to)
{
	return linkat(g_root, rel(from), g_root, rel(to), 0) < 0 ? -errno : 0;
}

static int lf_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int rc = fi ? fchmod(file_of(fi)->fd, mode) : fchmodat(g_root, rel(path), mode, 0);
	return rc < 0 ? -errno : 0;
}

static int lf_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	int rc = fi ? fchown(file_of(fi)->fd, uid, gid)
		    : fchownat(g_root, rel(path), uid, gid, AT_SYMLINK_NOFOLLOW);
	return rc < 0 ? -errno : 0;
}

static int lf_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	if (!fi)
		pin_drop(path);
	int fd = fi ? file_of(fi)->fd : openat(g_root, rel(path), O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = 0;
	struct stat st;
	pthread_mutex_lock(&g_lock);
	if (ftruncate(fd, size) < 0)
		rc = -errno;
	else if (g_lying && fstat(fd, &st) == 0) {
		lf_held *h = held_find(st.st_dev, st.st_ino);
		if (h && (rc = held_reserve(h, (size_t)size + 1)) == 0) {
			if ((size_t)size > h->len)
				memset(h->buf + h->len, 0, (size_t)size - h->len);
			h->len = (size_t)size;
		}
	}
	pthread_mutex_unlock(&g_lock);
	if (!fi)
		close(fd);
	return rc;
}

static int lf_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	int rc = fi ? futimens(file_of(fi)->fd, tv)
		    : utimensat(g_root, rel(path), tv, AT_SYMLINK_NOFOLLOW);
	return rc < 0 ? -errno : 0;
}

static int open_common(const char *path, int flags, mode_t mode, struct fuse_file_info *fi)
{
	lf_file *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	int plain_read = (flags & O_ACCMODE) == O_RDONLY && !(flags & (O_CREAT | O_TRUNC));
	if (g_stale_names && !plain_read)
		pin_drop(path);
	f->fd = g_stale_names && plain_read ? pin_get(path) : -1;
	/* The kernel supplies the offset of every write, O_APPEND included;
	 * pwrite on an O_APPEND descriptor would ignore it. */
	if (f->fd < 0) {
		f->fd = openat(g_root, rel(path), (flags & ~O_APPEND) | O_CLOEXEC, mode);
		if (f->fd < 0) {
			int err = -errno;
			free(f);
			return err;
		}
		struct stat st;
		if (g_stale_names && plain_read && fstat(f->fd, &st) == 0 && S_ISREG(st.st_mode))
			pin_put(path, f->fd);
	}
	f->writable = (flags & O_ACCMODE) != O_RDONLY;
	f->owner = g_lying ? caller_tgid(NULL) : 0;
	fi->fh = (uint64_t)(uintptr_t)f;
	return 0;
}

static int lf_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	return open_common(path, fi->flags | O_CREAT, mode, fi);
}

static int lf_open(const char *path, struct fuse_file_info *fi)
{
	return open_common(path, fi->flags, 0, fi);
}

static int lf_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)path;
	lf_file *f = file_of(fi);
	if (g_lying) {
		struct stat st;
		int served = 0;
		size_t n = 0;
		pthread_mutex_lock(&g_lock);
		lf_held *h = f->held;
		if (!h && fstat(f->fd, &st) == 0)
			h = held_find(st.st_dev, st.st_ino);
		if (h) {
			served = 1;
			if ((size_t)off < h->len) {
				n = h->len - (size_t)off;
				if (n > size)
					n = size;
				memcpy(buf, h->buf + off, n);
			}
		}
		pthread_mutex_unlock(&g_lock);
		if (served)
			return (int)n;
	}
	ssize_t n = pread(f->fd, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int lf_write(const char *path, const char *buf, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	(void)path;
	lf_file *f = file_of(fi);
	if (!g_lying) {
		ssize_t n = pwrite(f->fd, buf, size, off);
		return n < 0 ? -errno : (int)n;
	}
	pthread_mutex_lock(&g_lock);
	int rc = held_attach(f);
	if (rc == 0)
		rc = held_reserve(f->held, (size_t)off + size + 1);
	if (rc == 0) {
		lf_held *h = f->held;
		if ((size_t)off > h->len)
			memset(h->buf + h->len, 0, (size_t)off - h->len);
		memcpy(h->buf + off, buf, size);
		if ((size_t)off + size > h->len)
			h->len = (size_t)off + size;
		if (!h->dirty) {
			h->dirty = 1;
			h->dirty_ms = now_ms();
		}
		rc = (int)size;
	}
	pthread_mutex_unlock(&g_lock);
	return rc;
}

static int lf_statfs(const char *path, struct statvfs *st)
{
	(void)path;
	return fstatvfs(g_root, st) < 0 ? -errno : 0;
}

/* close(2) by the opener: the data becomes visible to other clients, honest
 * or not.  Every close of a copy of the descriptor also sends FLUSH: the
 * exec of a child the writer forked (close-on-exec), or the writer being
 * killed.  Neither is the writer closing its file, so the data stays held
 * for the writeback thread. */
static int lf_flush(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	lf_file *f = file_of(fi);
	int rc = 0, exiting = 0;
	if (!g_lying)
		return 0;
	pid_t who = caller_tgid(&exiting);
	pthread_mutex_lock(&g_lock);
	if (f->held && f->held->dirty && who == f->owner && !exiting)
		rc = held_publish(f->held);
	pthread_mutex_unlock(&g_lock);
	return rc;
}

static int lf_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	lf_file *f = file_of(fi);
	pthread_mutex_lock(&g_lock);
	held_detach(f);
	pthread_mutex_unlock(&g_lock);
	close(f->fd);
	free(f);
	return 0;
}

static int lf_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path;
	hang_if(g_hang_fsync);
	if (g_lying)
		return 0; /* the lie */
	int fd = file_of(fi)->fd;
	return (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? -errno : 0;
}

static int lf_opendir(const char *path, struct fuse_file_info *fi)
{
	int fd = openat(g_root, rel(path), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		int err = -errno;
		close(fd);
		return err;
	}
	fi->fh = (uint64_t)(uintptr_t)d;
	return 0;
}

static int lf_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		      struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)path;
	(void)off;
	(void)flags;
	DIR *d = (DIR *)(uintptr_t)fi->fh;
	rewinddir(d);
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		memset(&st, 0, sizeof(st));
		st.st_ino = de->d_ino;
		st.st_mode = (mode_t)DTTOIF(de->d_type);
		if (fill(buf, de->d_name, &st, 0, 0))
			break;
	}
	return errno ? -errno : 0;
}

static int lf_releasedir(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	closedir((DIR *)(uintptr_t)fi->fh);
	return 0;
}

static int lf_fsyncdir(const char *path, int datasync, struct fuse_file_info *fi)
{
	(void)path;
	if (g_lying)
		return 0;
	int fd = dirfd((DIR *)(uintptr_t)fi->fh);
	return (datasync ? fdatasync(fd) : fsync(fd)) < 0 ? -errno : 0;
}

static const struct fuse_operations lf_ops = {
	.init = lf_init,
	.getattr = lf_getattr,
	.readlink = lf_readlink,
	.mkdir = lf_mkdir,
	.unlink = lf_unlink,
	.rmdir = lf_rmdir,
	.symlink = lf_symlink,
	.rename = lf_rename,
	.link = lf_link,
	.chmod = lf_chmod,
	.chown = lf_chown,
	.truncate = lf_truncate,
	.utimens = lf_utimens,
	.create = lf_create,
	.open = lf_open,
	.read = lf_read,
	.write = lf_write,
	.statfs = lf_statfs,
	.flush = lf_flush,
	.release = lf_release,
	.fsync = lf_fsync,
	.opendir = lf_opendir,
	.readdir = lf_readdir,
	.releasedir = lf_releasedir,
	.fsyncdir = lf_fsyncdir,
};

static void usage(FILE *out)
{
	fprintf(out, "usage: kaas-lyingfs [--lying] BACKING_DIR MOUNTPOINT [FUSE options]\n"
		     "  honest passthrough by default; --lying (or LYING=1) makes fsync a\n"
		     "  no-op and holds written data in memory until the opener closes the\n"
		     "  file (or LYING_WRITEBACK_MS, default 5000, after the write);\n"
		     "  SIGUSR1 forgets all held data (a simulated daemon crash)\n");
}

int main(int argc, char **argv)
{
	int i = 1;
	const char *env = getenv("LYING");
	g_lying = env && strcmp(env, "0") != 0 && *env;
	if (i < argc && strcmp(argv[i], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	if (i < argc && strcmp(argv[i], "--lying") == 0) {
		g_lying = 1;
		i++;
	}
	if (argc - i < 2) {
		usage(stderr);
		return 2;
	}
	const char *back = argv[i++];
	g_root = open(back, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (g_root < 0) {
		fprintf(stderr, "kaas-lyingfs: cannot open backing directory %s: %s\n", back,
			strerror(errno));
		return 1;
	}
	/* fuse_main gets: program, mountpoint, then the caller's options. */
	char **fargv = calloc((size_t)(argc - i) + 2, sizeof(char *));
	if (!fargv)
		return 1;
	int fargc = 0;
	fargv[fargc++] = argv[0];
	while (i < argc)
		fargv[fargc++] = argv[i++];
	const char *hang = getenv("LYINGFS_HANG");
	if (hang && *hang) {
		char list[64];
		snprintf(list, sizeof(list), "%s", hang);
		for (char *save = NULL, *op = strtok_r(list, ",", &save); op; op = strtok_r(NULL, ",", &save)) {
			if (strcmp(op, "fsync") == 0) {
				g_hang_fsync = 1;
			} else if (strcmp(op, "unlink") == 0) {
				g_hang_unlink = 1;
			} else {
				fprintf(stderr, "kaas-lyingfs: LYINGFS_HANG: unknown call '%s' (fsync, unlink)\n", op);
				return 2;
			}
		}
	}
	const char *sn = getenv("LYINGFS_STALE_NAMES");
	g_stale_names = sn && *sn && strcmp(sn, "0") != 0;
	const char *sd = getenv("LYINGFS_SPLIT_DIRS");
	if (sd && *sd)
		g_split_every = atol(sd);
	const char *sdl = getenv("LYINGFS_SPLIT_DELAY_US");
	if (sdl && *sdl)
		g_split_delay_us = atol(sdl);
	if (g_stale_names) {
		/* every pinned name holds a descriptor */
		struct rlimit rl;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	const char *wb = getenv("LYING_WRITEBACK_MS");
	if (wb && *wb)
		g_writeback_ms = atoll(wb);
	/* the handler is installed before fuse_main, which keeps it (it only
	 * sets handlers for signals that have none) */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_crash_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	pthread_t t;
	if (pthread_create(&t, NULL, writeback_main, NULL) != 0) {
		fprintf(stderr, "kaas-lyingfs: cannot start the writeback thread\n");
		return 1;
	}
	pthread_detach(t);
	fprintf(stderr, "kaas-lyingfs: %s mode over %s%s", g_lying ? "LYING" : "honest", back,
		g_stale_names ? ", stale names" : "");
	if (g_split_every > 0)
		fprintf(stderr, ", every %ldth directory rename split", g_split_every);
	fprintf(stderr, "\n");
	umask(0);
	int rc = fuse_main(fargc, fargv, &lf_ops, NULL);
	free(fargv);
	close(g_root);
	return rc;
}
