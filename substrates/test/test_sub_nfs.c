/*
 * test_sub_nfs.c — the nfs backend against a real server: nfs-ganesha
 * (FSAL_VFS) started by substrates/nfs-ganesha/start.sh in its own network
 * namespace, spoken to over NFSv3 and NFSv4.0.
 *
 * main() starts two instances: one shared by the functional tests, one the
 * fault tests may stop, freeze and restart.  Each test (a forked child under
 * CK_FORK) enters the namespace of the server it uses.  Every test runs for
 * both versions (loop index 0 = v3, 1 = v4).
 *
 * Needs root and the packages of ci/deps.sh test; run from the repository
 * root (make unit does), where it finds the server scripts and its
 * LeakSanitizer suppressions (elsewhere: KAAS_NFS_SCRIPTS names the scripts'
 * directory, LSAN_OPTIONS=suppressions=... the suppression file).
 * Length: the libnfs backend against real nfs-ganesha servers started once
 * for the whole program.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "substrates/sub.h"
#include "substrates/sub_nfs_int.h"
#include "util/test/ktest.h"

/* libnfs 4.0 leaks the default NFSv4 client name when nfs4_set_client_name()
 * replaces it (28 bytes per NFSv4 context): lsan-libnfs.supp suppresses that
 * one allocation and nothing else.  The path is relative to the repository
 * root, where the test runs. */
const char *__lsan_default_options(void);
const char *__lsan_default_options(void)
{
	return "suppressions=substrates/test/lsan-libnfs.supp:print_suppressions=0";
}

typedef struct server {
	char dir[256];
	char ns[64];
} server;

static server main_srv, fault_srv;
static const char *scripts;

static int start_server(server *s, const char *args)
{
	snprintf(s->dir, sizeof(s->dir), "/tmp/kaas-test-nfs.XXXXXX");
	if (!mkdtemp(s->dir))
		return -1;
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s/start.sh %s %s", scripts, s->dir, args);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -1;
	char line[1024];
	while (fgets(line, sizeof(line), p)) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "NFS_NS=", 7) == 0)
			snprintf(s->ns, sizeof(s->ns), "%.63s", line + 7);
	}
	int rc = pclose(p);
	return rc == 0 && s->ns[0] ? 0 : -1;
}

static void stop_server(server *s)
{
	char cmd[1024];
	if (!s->dir[0])
		return;
	snprintf(cmd, sizeof(cmd), "%s/stop.sh %s --kill >/dev/null 2>&1; rm -rf %s", scripts, s->dir, s->dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cleanup of %s failed\n", s->dir);
}

static void enter(server *s)
{
	char path[128];
	snprintf(path, sizeof(path), "/run/netns/%s", s->ns);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(setns(fd, CLONE_NEWNET), 0);
	close(fd);
}

static int ganesha_pid(server *s)
{
	char path[300], line[128];
	snprintf(path, sizeof(path), "%s/state", s->dir);
	FILE *f = fopen(path, "r");
	int pid = 0;
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "ganesha_pid=", 12) == 0)
			pid = atoi(line + 12);
	if (f)
		fclose(f);
	return pid;
}

static int version_of(int i)
{
	return i == 0 ? 3 : 4;
}

static sub_vfs *open_v(int version, const char *extra)
{
	char url[256], err[512] = "";
	snprintf(url, sizeof(url), "nfs://127.0.0.1/export?version=%d%s", version, extra ? extra : "");
	sub_vfs *v = NULL;
	int rc = sub_open_url(url, &v, err, sizeof(err));
	ck_assert_msg(rc == 0, "open %s: %d %s", url, rc, err);
	return v;
}

/* A directory of its own for each test and version. */
static void test_dir(sub_vfs *v, char *dst, size_t n, const char *name, int version)
{
	snprintf(dst, n, "%s-v%d", name, version);
	ck_assert_int_eq(sub_remove_tree(v, dst), 0);
	ck_assert_int_eq(sub_mkdir(v, dst, 0755), 0);
}

static int count_names(sub_vfs *v, const char *dir)
{
	char **names;
	size_t n;
	ck_assert_int_eq(sub_list(v, dir, &names, &n), 0);
	sub_names_free(names, n);
	return (int)n;
}

static void write_file(sub_vfs *v, const char *path, const char *s)
{
	sub_file *f;
	ck_assert_int_eq(sub_open(v, path, O_WRONLY | O_CREAT | O_TRUNC, 0644, &f), 0);
	ck_assert_int_eq(sub_pwrite_full(f, s, strlen(s), 0), 0);
	ck_assert_int_eq(sub_close(f), 0);
}

static void expect_file(sub_vfs *v, const char *path, const char *s)
{
	char *buf;
	size_t len;
	ck_assert_int_eq(sub_read_file(v, path, 1 << 20, &buf, &len), 0);
	ck_assert_uint_eq(len, strlen(s));
	ck_assert_str_eq(buf, s);
	free(buf);
}

typedef struct dtype_acc {
	int files, dirs, other;
} dtype_acc;

static int count_types(void *arg, const char *name, int d_type)
{
	dtype_acc *a = arg;
	(void)name;
	if (d_type == SUB_DT_REG)
		a->files++;
	else if (d_type == SUB_DT_DIR)
		a->dirs++;
	else
		a->other++;
	return 0;
}

START_TEST(every_operation)
{
	int ver = version_of(_i);
	enter(&main_srv);
	sub_vfs *v = open_v(ver, NULL);
	char d[64], p[128], q[128];
	test_dir(v, d, sizeof(d), "ops", ver);

	/* open/pwrite/pread/fstat/ftruncate/fsync/close, with a write big
	 * enough to need many NFSv4 pieces and an unaligned tail. */
	size_t big = 300 * 1024 + 123;
	char *wbuf = malloc(big), *rbuf = malloc(big);
	for (size_t i = 0; i < big; i++)
		wbuf[i] = (char)(i * 7 + i / 251);
	snprintf(p, sizeof(p), "%s/data", d);
	sub_file *f;
	ck_assert_int_eq(sub_open(v, p, O_RDWR | O_CREAT | O_EXCL, 0640, &f), 0);
	ck_assert_int_eq(sub_native_fd(f), -1);
	ck_assert_int_eq(sub_pwrite_full(f, wbuf, big, 0), 0);
	ck_assert_int_eq(sub_fsync(f), 0);
	ck_assert_int_eq(sub_pread_full(f, rbuf, big, 0), 0);
	ck_assert_int_eq(memcmp(wbuf, rbuf, big), 0);
	ck_assert_int_eq(sub_pread(f, rbuf, 10, big - 4), 4); /* short at EOF */
	ck_assert_int_eq(sub_pread(f, rbuf, 10, big + 10), 0);
	sub_stat st;
	ck_assert_int_eq(sub_fstat(f, &st), 0);
	ck_assert_uint_eq(st.size, big);
	ck_assert(S_ISREG(st.mode));
	ck_assert_uint_eq(st.mode & 0777, 0640);
	ck_assert_uint_eq(st.nlink, 1);
	ck_assert_int_eq(sub_ftruncate(f, 1000), 0);
	ck_assert_int_eq(sub_fstat(f, &st), 0);
	ck_assert_uint_eq(st.size, 1000);
	ck_assert_int_eq(sub_close(f), 0);
	free(wbuf);
	free(rbuf);

	/* stat, mkdir, readdir with types, rename, fsync_dir, statvfs */
	ck_assert_int_eq(sub_stat_path(v, p, &st), 0);
	ck_assert_uint_eq(st.size, 1000);
	sub_stat dst;
	ck_assert_int_eq(sub_stat_path(v, d, &dst), 0);
	ck_assert(S_ISDIR(dst.mode));
	ck_assert_uint_ne(dst.ino, st.ino);
	snprintf(q, sizeof(q), "%s/sub", d);
	ck_assert_int_eq(sub_mkdir(v, q, 0755), 0);
	ck_assert_int_eq(sub_mkdir(v, q, 0755), -EEXIST);
	dtype_acc acc = {0};
	ck_assert_int_eq(sub_readdir(v, d, count_types, &acc), 0);
	ck_assert_int_eq(acc.files, 1);
	ck_assert_int_eq(acc.dirs, 1);
	ck_assert_int_eq(acc.other, 0);
	snprintf(q, sizeof(q), "%s/sub/moved", d);
	ck_assert_int_eq(sub_rename(v, p, q), 0);
	ck_assert_int_eq(sub_stat_path(v, p, &st), -ENOENT);
	ck_assert_int_eq(sub_stat_path(v, q, &st), 0);
	ck_assert_uint_eq(st.size, 1000);
	ck_assert_int_eq(sub_fsync_dir(v, d), 0);
	ck_assert_int_eq(sub_fsync_dir(v, ""), 0);
	ck_assert_int_eq(sub_fsync_dir(v, q), -ENOTDIR);
	snprintf(p, sizeof(p), "%s/none", d);
	ck_assert_int_eq(sub_fsync_dir(v, p), -ENOENT);
	sub_fsinfo fi;
	ck_assert_int_eq(sub_statvfs(v, "", &fi), 0);
	ck_assert_uint_gt(fi.blocks, 0);
	ck_assert_uint_gt(fi.bsize, 0);

	/* errors come back as the errno a local filesystem would give */
	ck_assert_int_eq(sub_open(v, p, O_RDONLY, 0, &f), -ENOENT);
	ck_assert_int_eq(sub_rename(v, p, q), -ENOENT);
	ck_assert_int_eq(sub_unlink(v, p), -ENOENT);
	snprintf(p, sizeof(p), "%s/sub", d);
	ck_assert_int_eq(sub_rmdir(v, p), -ENOTEMPTY);
	ck_assert_int_eq(sub_unlink(v, q), 0);
	ck_assert_int_eq(sub_rmdir(v, p), 0);
	ck_assert_int_eq(sub_open(v, "../x", O_RDONLY, 0, &f), -EINVAL);
	ck_assert_int_eq(count_names(v, d), 0);

	sub_identity id;
	ck_assert_int_eq(sub_identity_of(v, &id), 0);
	ck_assert_str_eq(id.backend, "nfs");
	ck_assert_str_eq(id.fstype, ver == 3 ? "nfs3" : "nfs4");
	ck_assert_str_eq(id.source, "127.0.0.1:/export");
	ck_assert_uint_eq(id.fs_magic, 0x6969);
	char root[64];
	snprintf(root, sizeof(root), "nfs://127.0.0.1/export?version=%d", ver);
	ck_assert_str_eq(id.root, root);
	ck_assert_str_eq(id.mountpoint, "");
	sub_destroy(v);
}
END_TEST

/* O_CREAT without O_EXCL opens an existing file; O_TRUNC truncates only
 * then; O_CREAT|O_EXCL refuses an existing name. */
START_TEST(open_flags)
{
	int ver = version_of(_i);
	enter(&main_srv);
	sub_vfs *v = open_v(ver, NULL);
	char d[64], p[128];
	test_dir(v, d, sizeof(d), "flags", ver);
	snprintf(p, sizeof(p), "%s/f", d);
	sub_file *f;
	ck_assert_int_eq(sub_open(v, p, O_WRONLY | O_CREAT, 0600, &f), 0);
	ck_assert_int_eq(sub_pwrite_full(f, "abcdef", 6, 0), 0);
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_open(v, p, O_RDWR | O_CREAT, 0600, &f), 0);
	ck_assert_int_eq(sub_pwrite_full(f, "X", 1, 0), 0);
	ck_assert_int_eq(sub_close(f), 0);
	expect_file(v, p, "Xbcdef");
	ck_assert_int_eq(sub_open(v, p, O_WRONLY | O_CREAT | O_EXCL, 0600, &f), -EEXIST);
	ck_assert_int_eq(sub_open(v, p, O_WRONLY | O_CREAT | O_TRUNC, 0600, &f), 0);
	ck_assert_int_eq(sub_close(f), 0);
	expect_file(v, p, "");
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(v, p, &st), 0);
	ck_assert_uint_eq(st.mode & 0777, 0600);
	/* O_TRUNC without O_CREAT */
	write_file(v, p, "12345");
	ck_assert_int_eq(sub_open(v, p, O_WRONLY | O_TRUNC, 0, &f), 0);
	ck_assert_int_eq(sub_close(f), 0);
	expect_file(v, p, "");
	ck_assert_int_eq(sub_remove_tree(v, d), 0);
	sub_destroy(v);
}
END_TEST

/* One client opens a file it already holds open.  NFSv4 servers keep one
 * open state per client and file: closing either handle must not end the
 * other's (libnfs alone would send CLOSE and leave the other handle with a
 * dead stateid). */
START_TEST(same_file_twice)
{
	int ver = version_of(_i);
	enter(&main_srv);
	sub_vfs *v = open_v(ver, NULL), *other = open_v(ver, NULL);
	char d[64], p[128], buf[16];
	test_dir(v, d, sizeof(d), "twice", ver);
	snprintf(p, sizeof(p), "%s/f", d);
	sub_file *w, *r, *r2;
	ck_assert_int_eq(sub_open(v, p, O_RDWR | O_CREAT | O_TRUNC, 0644, &w), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(sub_pwrite_full(w, "0123456789", 10, (uint64_t)i * 10), 0);
		ck_assert_int_eq(sub_fsync(w), 0);
		ck_assert_int_eq(sub_open(v, p, O_RDONLY, 0, &r), 0);
		ck_assert_int_eq(sub_pread_full(r, buf, 10, 0), 0);
		ck_assert_int_eq(sub_close(r), 0);
	}
	/* read-only first, then read-write: the second open upgrades */
	ck_assert_int_eq(sub_close(w), 0);
	ck_assert_int_eq(sub_open(v, p, O_RDONLY, 0, &r), 0);
	ck_assert_int_eq(sub_open(v, p, O_WRONLY, 0, &w), 0);
	ck_assert_int_eq(sub_pwrite_full(w, "ab", 2, 0), 0);
	ck_assert_int_eq(sub_close(w), 0);
	ck_assert_int_eq(sub_pread_full(r, buf, 4, 0), 0);
	ck_assert_int_eq(memcmp(buf, "ab23", 4), 0);
	/* another client replaces the name: a new open sees the new file, the
	 * held one keeps the old (NFSv4) or goes stale (NFSv3) */
	snprintf(buf, sizeof(buf), "%s", "replacement");
	ck_assert_int_eq(sub_write_atomic(other, p, buf, 11), 0);
	ck_assert_int_eq(sub_open(v, p, O_RDONLY, 0, &r2), 0);
	ck_assert_int_eq(sub_pread_full(r2, buf, 11, 0), 0);
	ck_assert_int_eq(memcmp(buf, "replacement", 11), 0);
	ck_assert_int_eq(sub_close(r2), 0);
	ssize_t n = sub_pread(r, buf, 4, 0);
	if (ver == 4) {
		ck_assert_int_eq(n, 4);
		ck_assert_int_eq(memcmp(buf, "ab23", 4), 0);
	} else {
		ck_assert(n == 4 || n == -ESTALE);
	}
	sub_close(r);
	ck_assert_int_eq(sub_remove_tree(v, d), 0);
	sub_destroy(v);
	sub_destroy(other);
}
END_TEST

/* ---- two clients ------------------------------------------------------------ */

#define RACE_ROUNDS 40

typedef struct racer {
	sub_vfs *v;
	const char *dir;
	const char *held; /* a file this client holds open during the race */
	pthread_barrier_t *bar;
	int wins, losses, errors;
} racer;

/* Each client holds a file open while it races, so that the server keeps
 * its NFSv4 open-owner (and sequence id) alive across the rounds; a loser's
 * refused OPEN must not spoil the client's next opens and closes. */
static void *race_main(void *arg)
{
	racer *r = arg;
	sub_file *held = NULL;
	if (sub_open(r->v, r->held, O_RDWR | O_CREAT | O_EXCL, 0644, &held) != 0)
		r->errors++;
	for (int i = 0; i < RACE_ROUNDS; i++) {
		char p[128];
		snprintf(p, sizeof(p), "%s/claim-%d", r->dir, i);
		pthread_barrier_wait(r->bar);
		sub_file *f;
		int rc = sub_open(r->v, p, O_WRONLY | O_CREAT | O_EXCL, 0644, &f);
		if (rc == 0) {
			r->wins++;
			if (sub_close(f) != 0)
				r->errors++;
		} else if (rc == -EEXIST) {
			r->losses++;
		} else {
			r->errors++;
		}
	}
	if (held && (sub_pwrite_full(held, "held", 4, 0) != 0 || sub_close(held) != 0))
		r->errors++;
	return NULL;
}

START_TEST(two_clients_exclusive_create)
{
	int ver = version_of(_i);
	enter(&main_srv);
	sub_vfs *a = open_v(ver, NULL), *b = open_v(ver, NULL);
	char d[64];
	test_dir(a, d, sizeof(d), "race", ver);
	pthread_barrier_t bar;
	pthread_barrier_init(&bar, NULL, 2);
	char ha[128], hb[128];
	snprintf(ha, sizeof(ha), "%s/held-a", d);
	snprintf(hb, sizeof(hb), "%s/held-b", d);
	racer ra = {.v = a, .dir = d, .held = ha, .bar = &bar}, rb = {.v = b, .dir = d, .held = hb, .bar = &bar};
	pthread_t ta, tb;
	pthread_create(&ta, NULL, race_main, &ra);
	pthread_create(&tb, NULL, race_main, &rb);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	pthread_barrier_destroy(&bar);
	ck_assert_int_eq(ra.errors + rb.errors, 0);
	ck_assert_int_eq(ra.wins + rb.wins, RACE_ROUNDS);
	ck_assert_int_eq(ra.losses + rb.losses, RACE_ROUNDS);
	ck_assert_int_eq(count_names(b, d), RACE_ROUNDS + 2);
	expect_file(a, hb, "held");
	expect_file(b, ha, "held");
	ck_assert_int_eq(sub_unlink(a, ha), 0);
	ck_assert_int_eq(sub_unlink(b, hb), 0);

	/* The helpers: one winner for create_excl, write_atomic replaces. */
	char p[128];
	snprintf(p, sizeof(p), "%s/owner", d);
	ck_assert_int_eq(sub_create_excl(a, p, "a", 1), 0);
	ck_assert_int_eq(sub_create_excl(b, p, "b", 1), -EEXIST);
	expect_file(b, p, "a");
	snprintf(p, sizeof(p), "%s/meta.json", d);
	ck_assert_int_eq(sub_write_atomic(a, p, "{\"v\":1}", 7), 0);
	expect_file(b, p, "{\"v\":1}");
	ck_assert_int_eq(sub_write_atomic(b, p, "{\"v\":22}", 8), 0);
	expect_file(a, p, "{\"v\":22}");
	ck_assert_int_eq(count_names(a, d), RACE_ROUNDS + 2); /* no temp left */
	ck_assert_int_eq(sub_remove_tree(a, d), 0);
	sub_destroy(a);
	sub_destroy(b);
}
END_TEST

/* ---- NFSv4 open-owner sequence ids ----------------------------------------
 * libnfs 4.0 numbers the OPENs and CLOSEs of a context with one open-owner
 * sequence id, and forgets to count an OPEN the server refused at the OPEN
 * operation (EXIST, ACCES, ...).  The server keeps the owner (and its count)
 * while any file of the client is open, so the next CLOSE came back
 * NFS4ERR_BAD_SEQID (EIO), and the next OPEN in the same directory got the
 * refused OPEN's cached reply.  These tests make the server refuse OPENs while
 * files are held open, and check that everything after it still works. */

#define ONE_CLIENT_ROUNDS 100

typedef struct excl_racer {
	sub_vfs *v;
	char path[128];
	pthread_barrier_t *bar;
	int rc, close_rc;
} excl_racer;

static void *excl_race(void *arg)
{
	excl_racer *r = arg;
	sub_file *f = NULL;
	pthread_barrier_wait(r->bar);
	r->rc = sub_open(r->v, r->path, O_WRONLY | O_CREAT | O_EXCL, 0644, &f);
	r->close_rc = r->rc == 0 ? sub_close(f) : 0;
	return NULL;
}

/* Two threads of one client race O_EXCL on one name, round after round,
 * while the client holds another file open (as the broker does): exactly one
 * wins, the other gets EEXIST, the winner's close succeeds, the name can be
 * unlinked, and the held file still writes and closes. */
START_TEST(one_client_exclusive_race)
{
	int ver = version_of(_i);
	enter(&main_srv);
	sub_vfs *v = open_v(ver, NULL);
	char d[64], p[128];
	test_dir(v, d, sizeof(d), "race1", ver);
	snprintf(p, sizeof(p), "%s/held", d);
	sub_file *held;
	ck_assert_int_eq(sub_open(v, p, O_RDWR | O_CREAT | O_EXCL, 0644, &held), 0);
	int bad = 0;
	char first[200] = "";
	for (int i = 0; i < ONE_CLIENT_ROUNDS; i++) {
		pthread_barrier_t bar;
		pthread_barrier_init(&bar, NULL, 2);
		excl_racer r[2];
		pthread_t t[2];
		for (int k = 0; k < 2; k++) {
			r[k] = (excl_racer){.v = v, .bar = &bar};
			snprintf(r[k].path, sizeof(r[k].path), "%s/claim", d);
			ck_assert_int_eq(pthread_create(&t[k], NULL, excl_race, &r[k]), 0);
		}
		for (int k = 0; k < 2; k++)
			pthread_join(t[k], NULL);
		pthread_barrier_destroy(&bar);
		int wins = (r[0].rc == 0) + (r[1].rc == 0);
		int loser = r[0].rc == 0 ? r[1].rc : r[0].rc;
		int crc = r[0].rc == 0 ? r[0].close_rc : r[1].close_rc;
		int urc = sub_unlink(v, r[0].path);
		if (wins != 1 || loser != -EEXIST || crc != 0 || urc != 0) {
			if (!bad++)
				snprintf(first, sizeof(first), "round %d: %d winners, loser %d, close %d, unlink %d",
					 i, wins, loser, crc, urc);
		}
	}
	ck_assert_msg(bad == 0, "%d of %d rounds went wrong; first: %s", bad, ONE_CLIENT_ROUNDS, first);
	ck_assert_int_eq(sub_pwrite_full(held, "held", 4, 0), 0);
	ck_assert_int_eq(sub_close(held), 0);
	expect_file(v, p, "held");
	ck_assert_int_eq(sub_remove_tree(v, d), 0);
	sub_destroy(v);
}
END_TEST

/* The server refuses an OPEN (ACCES: another user's private file) while the
 * client holds a file open.  Afterwards an exclusive create in the same
 * directory really creates the file, and the held file closes cleanly. */
START_TEST(refused_open_keeps_client_usable)
{
	int ver = version_of(_i);
	enter(&main_srv);
	sub_vfs *root = open_v(ver, NULL), *user = open_v(ver, "&uid=1000&gid=1000");
	char d[64], p[128], q[128];
	test_dir(root, d, sizeof(d), "refused", ver);
	ck_assert_int_eq(sub_rmdir(root, d), 0);
	ck_assert_int_eq(sub_mkdir(root, d, 0777), 0);
	snprintf(p, sizeof(p), "%s/secret", d);
	sub_file *f;
	ck_assert_int_eq(sub_open(root, p, O_WRONLY | O_CREAT | O_EXCL, 0600, &f), 0);
	ck_assert_int_eq(sub_pwrite_full(f, "s", 1, 0), 0);
	ck_assert_int_eq(sub_close(f), 0);
	snprintf(q, sizeof(q), "%s/held", d);
	sub_file *held;
	ck_assert_int_eq(sub_open(user, q, O_RDWR | O_CREAT | O_EXCL, 0644, &held), 0);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(sub_open(user, p, O_RDONLY, 0, &f), -EACCES);
		char n[160];
		snprintf(n, sizeof(n), "%s/new-%d", d, i);
		int rc = sub_open(user, n, O_WRONLY | O_CREAT | O_EXCL, 0644, &f);
		ck_assert_msg(rc == 0, "exclusive create after a refused open: %d", rc);
		ck_assert_int_eq(sub_pwrite_full(f, "n", 1, 0), 0);
		ck_assert_int_eq(sub_close(f), 0);
		expect_file(root, n, "n");
		ck_assert_int_eq(sub_pwrite_full(held, "0123456789", 10, 0), 0);
	}
	ck_assert_int_eq(sub_close(held), 0);
	expect_file(root, q, "0123456789");
	/* and the user client goes on opening and closing */
	ck_assert_int_eq(sub_open(user, q, O_RDONLY, 0, &f), 0);
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_remove_tree(root, d), 0);
	sub_destroy(user);
	sub_destroy(root);
}
END_TEST

/* What one client wrote and closed, the next client to open sees. */
START_TEST(close_to_open)
{
	int ver = version_of(_i);
	enter(&main_srv);
	sub_vfs *a = open_v(ver, NULL), *b = open_v(ver, NULL);
	char d[64], p[128], want[64];
	test_dir(a, d, sizeof(d), "cto", ver);
	snprintf(p, sizeof(p), "%s/f", d);
	for (int i = 0; i < 20; i++) {
		snprintf(want, sizeof(want), "round %d %s", i, i % 2 ? "odd" : "even, longer");
		write_file(a, p, want);
		expect_file(b, p, want);
		/* and the other way, through a rename over the name */
		snprintf(want, sizeof(want), "renamed %d", i);
		ck_assert_int_eq(sub_write_atomic(b, p, want, strlen(want)), 0);
		expect_file(a, p, want);
	}
	/* A directory entry made by one client is listed by the other. */
	ck_assert_int_eq(count_names(b, d), 1);
	snprintf(p, sizeof(p), "%s/g", d);
	write_file(a, p, "x");
	ck_assert_int_eq(count_names(b, d), 2);
	ck_assert_int_eq(sub_remove_tree(a, d), 0);
	sub_destroy(a);
	sub_destroy(b);
}
END_TEST

/* One client unlinks a file another has open.  libnfs does no silly-rename;
 * what the holder sees is the server's behaviour: ganesha's NFSv3 handle
 * goes stale (and the errno must say ESTALE, not EIO), its NFSv4 open state
 * keeps the file readable. */
START_TEST(delete_while_open)
{
	int ver = version_of(_i);
	enter(&main_srv);
	sub_vfs *a = open_v(ver, NULL), *b = open_v(ver, NULL);
	char d[64], p[128], buf[16];
	test_dir(a, d, sizeof(d), "dwo", ver);
	snprintf(p, sizeof(p), "%s/f", d);
	write_file(a, p, "still here");
	sub_file *f;
	ck_assert_int_eq(sub_open(a, p, O_RDWR, 0, &f), 0);
	ck_assert_int_eq(sub_unlink(b, p), 0);
	ck_assert_int_eq(count_names(b, d), 0); /* no .nfsXXXX */
	ssize_t r = sub_pread(f, buf, sizeof(buf), 0);
	if (ver == 3) {
		ck_assert_int_eq(r, -ESTALE);
		ck_assert_int_eq(sub_pwrite(f, "x", 1, 0), -ESTALE);
		sub_stat st;
		ck_assert_int_eq(sub_fstat(f, &st), -ESTALE);
	} else {
		ck_assert_int_eq(r, 10);
		ck_assert_int_eq(memcmp(buf, "still here", 10), 0);
	}
	sub_close(f);
	ck_assert_int_eq(sub_remove_tree(a, d), 0);
	sub_destroy(a);
	sub_destroy(b);
}
END_TEST

/* ---- URLs ------------------------------------------------------------------- */

static int try_url(const char *url, char *err, size_t n)
{
	sub_vfs *v = NULL;
	err[0] = '\0';
	int rc = sub_open_url(url, &v, err, n);
	sub_destroy(v);
	return rc;
}

/* The statuses libnfs only names in its message become the errno a local
 * filesystem would give, or a retry; no server needed. */
START_TEST(status_mapping)
{
	ck_assert_int_eq(sub_nfs_status_errno("NFS3ERR_STALE"), -ESTALE);
	ck_assert_int_eq(sub_nfs_status_errno("READ failed with NFS4ERR_BAD_STATEID(-10025)"), -ESTALE);
	ck_assert_int_eq(sub_nfs_status_errno("NFS4: READ failed with NFS4ERR_STALE_STATEID(-10023)"), -ESTALE);
	ck_assert_int_eq(sub_nfs_status_errno("NFS4ERR_OLD_STATEID"), -EIO);
	ck_assert_int_eq(sub_nfs_status_errno("NFS4ERR_STALE_CLIENTID"), ERR_RETRY_NEWCONN);
	ck_assert_int_eq(sub_nfs_status_errno("NFS4ERR_BAD_SEQID"), ERR_RETRY_SEQID);
	ck_assert_int_eq(sub_nfs_status_errno("NFS4ERR_DELAY"), ERR_RETRY_DELAY);
	ck_assert_int_eq(sub_nfs_status_errno("NFS3ERR_JUKEBOX"), ERR_RETRY_DELAY);
	ck_assert_int_eq(sub_nfs_status_errno("NFS4ERR_FILE_OPEN"), -EBUSY);
	ck_assert_int_eq(sub_nfs_status_errno("NFS3ERR_DQUOT"), -EDQUOT);
	/* a prefix of a longer name is not that name */
	ck_assert_int_eq(sub_nfs_status_errno("NFS4ERR_STALEX"), 0);
	ck_assert_int_eq(sub_nfs_status_errno("XNFS4ERR_STALE"), -ESTALE);
	ck_assert_int_eq(sub_nfs_status_errno("ERR_STALE"), 0);
	ck_assert_int_eq(sub_nfs_status_errno("connection reset"), 0);
	ck_assert_int_eq(sub_nfs_status_errno(""), 0);
}
END_TEST

START_TEST(urls)
{
	int ver = version_of(_i);
	enter(&main_srv);
	char err[512], url[256];
	ck_assert_int_eq(try_url("nfs://127.0.0.1/export?version=5", err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "version"));
	ck_assert_int_eq(try_url("nfs://127.0.0.1/export?colour=blue", err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "colour"));
	ck_assert_int_eq(try_url("nfs://127.0.0.1", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(try_url("nfs://127.0.0.1/", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(try_url("nfs://127.0.0.1/export/../etc", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(try_url("nfs://127.0.0.1:2049/export?nfsport=2050", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(try_url("nfs://127.0.0.1:99999/export", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(try_url("nfs://127.0.0.1/export?timeout_ms=5", err, sizeof(err)), -EINVAL);
	snprintf(url, sizeof(url), "nfs://127.0.0.1/nosuchexport?version=%d", ver);
	ck_assert_int_lt(try_url(url, err, sizeof(err)), 0);
	ck_assert_int_gt(strlen(err), 0);

	/* Explicit ports (no portmapper) and a port in the authority. */
	sub_vfs *v = open_v(ver, "&nfsport=2049&mountport=20048&timeout_ms=3000&uid=0&gid=0");
	sub_stat st;
	ck_assert_int_eq(sub_stat_path(v, "", &st), 0);
	sub_destroy(v);
	snprintf(url, sizeof(url), "nfs://127.0.0.1:2049/export?version=%d&mountport=20048", ver);
	ck_assert_int_eq(try_url(url, err, sizeof(err)), 0);

	/* A subdirectory of the export is the root; a missing one is refused. */
	v = open_v(ver, NULL);
	char d[64], p[128];
	test_dir(v, d, sizeof(d), "subroot", ver);
	snprintf(url, sizeof(url), "nfs://127.0.0.1/export/%s/?version=%d", d, ver);
	sub_vfs *s = NULL;
	ck_assert_int_eq(sub_open_url(url, &s, err, sizeof(err)), 0);
	write_file(s, "inside", "sub");
	snprintf(p, sizeof(p), "%s/inside", d);
	expect_file(v, p, "sub");
	sub_identity id;
	ck_assert_int_eq(sub_identity_of(s, &id), 0);
	char want[256];
	snprintf(want, sizeof(want), "nfs://127.0.0.1/export/%s?version=%d", d, ver);
	ck_assert_str_eq(id.root, want);
	sub_destroy(s);
	snprintf(url, sizeof(url), "nfs://127.0.0.1/export/%s/missing?version=%d", d, ver);
	ck_assert_int_eq(try_url(url, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "missing"));
	ck_assert_int_eq(sub_remove_tree(v, d), 0);
	sub_destroy(v);
}
END_TEST

/* ---- faults (their own server) ---------------------------------------------- */

static int script(const char *name, server *s)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s/%s %s >/dev/null", scripts, name, s->dir);
	return system(cmd);
}

/* SIGSTOP stops a process's threads asynchronously: one still running on
 * another core can answer a request sent right after kill() returned.  Waits
 * (up to 10 s) until every thread of pid is stopped; 0 when they are. */
static int wait_stopped(int pid)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/task", pid);
	for (int tries = 0; tries < 1000; tries++) {
		DIR *d = opendir(dir);
		if (!d)
			return -1;
		int running = 0;
		struct dirent *e;
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			char path[sizeof(dir) + sizeof(e->d_name) + 8], buf[512];
			snprintf(path, sizeof(path), "%s/%s/stat", dir, e->d_name);
			FILE *f = fopen(path, "r");
			if (!f)
				continue; /* the thread ended */
			size_t n = fread(buf, 1, sizeof(buf) - 1, f);
			fclose(f);
			buf[n] = '\0';
			const char *st = strrchr(buf, ')'); /* the state follows "(comm) " */
			if (st && st[1] == ' ' && st[2] != 'T' && st[2] != 't')
				running = 1;
		}
		closedir(d);
		if (!running)
			return 0;
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
	return -1;
}

/* A server that stops answering makes calls fail within the timeout, and
 * the client works again once it answers. */
START_TEST(hung_server_times_out)
{
	int ver = version_of(_i);
	enter(&fault_srv);
	sub_vfs *v = open_v(ver, "&timeout_ms=2000");
	char d[64], p[128];
	test_dir(v, d, sizeof(d), "hang", ver);
	snprintf(p, sizeof(p), "%s/f", d);
	write_file(v, p, "before");
	sub_file *f;
	ck_assert_int_eq(sub_open(v, p, O_RDONLY, 0, &f), 0);
	int pid = ganesha_pid(&fault_srv);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(kill(pid, SIGSTOP), 0);
	ck_assert_int_eq(wait_stopped(pid), 0);
	sub_stat st;
	int rc = sub_stat_path(v, p, &st);
	char buf[8];
	ssize_t r = sub_pread(f, buf, sizeof(buf), 0);
	/* A new client cannot even mount: it fails too, it does not hang. */
	char url[128], err[512] = "";
	snprintf(url, sizeof(url), "nfs://127.0.0.1/export?version=%d&timeout_ms=2000", ver);
	sub_vfs *w = NULL;
	int orc = sub_open_url(url, &w, err, sizeof(err));
	ck_assert_int_eq(kill(pid, SIGCONT), 0);
	ck_assert_int_eq(rc, -ETIMEDOUT);
	ck_assert_int_eq(r, -ETIMEDOUT);
	ck_assert_int_eq(orc, -ETIMEDOUT);
	ck_assert_int_gt(strlen(err), 0);
	sub_close(f);
	/* A new session is made for path operations. */
	expect_file(v, p, "before");
	ck_assert_int_eq(sub_remove_tree(v, d), 0);
	sub_destroy(v);
}
END_TEST

/* A server that crashes and comes back: path operations continue on a new
 * session (NFSv4: a new client ID). */
START_TEST(server_restart)
{
	int ver = version_of(_i);
	enter(&fault_srv);
	sub_vfs *v = open_v(ver, "&timeout_ms=2000");
	char d[64], p[128];
	test_dir(v, d, sizeof(d), "restart", ver);
	snprintf(p, sizeof(p), "%s/f", d);
	write_file(v, p, "durable");
	ck_assert_int_eq(script("crash-restart.sh", &fault_srv), 0);
	/* The first calls may see the broken connection; within a few tries
	 * a new session must work. */
	int ok = 0;
	for (int i = 0; i < 5 && !ok; i++) {
		char *buf;
		size_t len;
		if (sub_read_file(v, p, 64, &buf, &len) == 0) {
			ok = len == 7 && memcmp(buf, "durable", 7) == 0;
			free(buf);
		}
	}
	ck_assert(ok);
	write_file(v, p, "after");
	expect_file(v, p, "after");
	ck_assert_int_eq(sub_remove_tree(v, d), 0);
	sub_destroy(v);
}
END_TEST

/* NFSv4: a file held open while the client is otherwise idle for several
 * lease periods stays usable (the lease keeper renews it). */
START_TEST(lease_survives_idle)
{
	enter(&fault_srv);
	sub_vfs *v = open_v(4, NULL);
	char d[64], p[128], buf[8];
	test_dir(v, d, sizeof(d), "lease", 4);
	snprintf(p, sizeof(p), "%s/f", d);
	write_file(v, p, "leased");
	sub_file *f;
	ck_assert_int_eq(sub_open(v, p, O_RDWR, 0, &f), 0);
	sleep(9); /* the server's lease is 3 s */
	ck_assert_int_eq(sub_pwrite_full(f, "L", 1, 0), 0);
	ck_assert_int_eq(sub_pread_full(f, buf, 6, 0), 0);
	ck_assert_int_eq(memcmp(buf, "Leased", 6), 0);
	ck_assert_int_eq(sub_close(f), 0);
	ck_assert_int_eq(sub_remove_tree(v, d), 0);
	sub_destroy(v);
}
END_TEST

/* A child forked after its parent made NFSv4 creates would reuse the
 * parent's EXCLUSIVE4 verifiers: it must refuse rather than risk two
 * winners of an O_EXCL race. */
START_TEST(forked_child_refuses_inherited_verifiers)
{
	enter(&main_srv);
	sub_vfs *v = open_v(4, NULL);
	char d[64], p[128];
	test_dir(v, d, sizeof(d), "fork", 4);
	snprintf(p, sizeof(p), "%s/f", d);
	write_file(v, p, "x");
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		sub_vfs *c = NULL;
		char err[512];
		int rc = sub_open_url("nfs://127.0.0.1/export?version=4", &c, err, sizeof(err));
		_exit(rc == -ENOTRECOVERABLE && strstr(err, "fork") ? 0 : 1);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_eq(sub_remove_tree(v, d), 0);
	sub_destroy(v);
}
END_TEST

/* Server gone: calls fail with an error instead of hanging, on sessions
 * made before and on new ones.  Last test: it stops the fault server. */
START_TEST(dead_server_fails)
{
	enter(&fault_srv);
	sub_vfs *v3 = open_v(3, "&timeout_ms=2000"), *v4 = open_v(4, "&timeout_ms=2000");
	ck_assert_int_eq(script("stop.sh", &fault_srv), 0);
	sub_stat st;
	ck_assert_int_lt(sub_stat_path(v3, "", &st), 0);
	ck_assert_int_lt(sub_stat_path(v4, "", &st), 0);
	sub_destroy(v3);
	sub_destroy(v4);
	for (int ver = 3; ver <= 4; ver++) {
		char err[512], url[128];
		sub_vfs *w = NULL;
		snprintf(url, sizeof(url), "nfs://127.0.0.1/export?version=%d&timeout_ms=2000", ver);
		ck_assert_int_lt(sub_open_url(url, &w, err, sizeof(err)), 0);
		ck_assert_int_gt(strlen(err), 0);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("substrates-nfs");
	const struct ktest nfs = {.tcase = "nfs", .timeout = 120};
	ktest_add_loop(s, nfs, every_operation, 0, 2);
	ktest_add_loop(s, nfs, open_flags, 0, 2);
	ktest_add_loop(s, nfs, same_file_twice, 0, 2);
	ktest_add_loop(s, nfs, two_clients_exclusive_create, 0, 2);
	ktest_add_loop(s, nfs, one_client_exclusive_race, 0, 2);
	ktest_add_loop(s, nfs, refused_open_keeps_client_usable, 0, 2);
	ktest_add_loop(s, nfs, close_to_open, 0, 2);
	ktest_add_loop(s, nfs, delete_while_open, 0, 2);
	ktest_add_loop(s, nfs, urls, 0, 2);
	ktest_add(s, nfs, KTEST_LIST(status_mapping, forked_child_refuses_inherited_verifiers));
	const struct ktest faults = {.tcase = "faults", .timeout = 120};
	ktest_add_loop(s, faults, hung_server_times_out, 0, 2);
	ktest_add_loop(s, faults, server_restart, 0, 2);
	ktest_add(s, faults, KTEST_LIST(lease_survives_idle, dead_server_fails));
	if (!ktest_here(s))
		return ktest_run(s); /* not asked for: no servers to start */

	scripts = getenv("KAAS_NFS_SCRIPTS");
	if (!scripts)
		scripts = "substrates/nfs-ganesha";
	if (start_server(&main_srv, "vfs") != 0 || start_server(&fault_srv, "vfs --lease 3") != 0) {
		fprintf(stderr, "cannot start nfs-ganesha with %s/start.sh\n", scripts);
		stop_server(&main_srv);
		stop_server(&fault_srv);
		return EXIT_FAILURE;
	}
	int rc = ktest_run(s);
	stop_server(&main_srv);
	stop_server(&fault_srv);
	return rc;
}
