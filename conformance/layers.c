/*
 * layers.c — resolving a directory to the layers that store its bytes
 * (layers.h): mountinfo, overlay options, FUSE mount sources, and the block
 * devices of /sys (loop backing files, RAM disks, device-mapper members).
 */
#include "conformance/layers.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
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

static int copy(char *dst, size_t len, const char *src)
{
	int n = snprintf(dst, len, "%s", src);
	return n < 0 || (size_t)n >= len ? -EINVAL : 0;
}

int kc_mountinfo_parse(const char *line, kc_mount *m)
{
	/* id parent maj:min root mountpoint opts [optional...] - fstype source superopts */
	char buf[8192];
	memset(m, 0, sizeof(*m));
	if (copy(buf, sizeof(buf), line))
		return -EINVAL;
	buf[strcspn(buf, "\n")] = '\0';
	char *sep = strstr(buf, " - ");
	if (!sep)
		return -EINVAL;
	*sep = '\0';
	char *save = NULL, *tok[6];
	char *p = buf;
	for (int i = 0; i < 6; i++) {
		tok[i] = strtok_r(p, " ", &save);
		p = NULL;
		if (!tok[i])
			return -EINVAL;
	}
	char *fstype = strtok_r(sep + 3, " ", &save);
	char *source = strtok_r(NULL, " ", &save);
	char *superopts = strtok_r(NULL, " ", &save);
	if (!fstype || !source)
		return -EINVAL;
	char *end;
	long id = strtol(tok[0], &end, 10);
	if (*end || id < 0)
		return -EINVAL;
	long parent = strtol(tok[1], &end, 10);
	if (*end || parent < 0)
		return -EINVAL;
	unsigned maj, min;
	char tail;
	if (sscanf(tok[2], "%u:%u%c", &maj, &min, &tail) != 2)
		return -EINVAL;
	m->id = (int)id;
	m->parent = (int)parent;
	m->major = maj;
	m->minor = min;
	unescape(tok[3]);
	unescape(tok[4]);
	unescape(source);
	if (copy(m->root, sizeof(m->root), tok[3]) || copy(m->mountpoint, sizeof(m->mountpoint), tok[4]) ||
	    copy(m->fstype, sizeof(m->fstype), fstype) || copy(m->source, sizeof(m->source), source))
		return -EINVAL;
	int n = snprintf(m->options, sizeof(m->options), "%s%s%s", tok[5], superopts ? "," : "",
			 superopts ? superopts : "");
	if (n < 0 || (size_t)n >= sizeof(m->options))
		return -EINVAL;
	return 0;
}

int kc_find_option(const char *opts, const char *name, char *val, size_t vlen)
{
	size_t n = strlen(name);
	const char *p = opts;
	int found = 0;
	while (p && *p) {
		/* A '\,' inside a value (overlay paths) does not end the option. */
		const char *e = p;
		while (*e && *e != ',') {
			if (e[0] == '\\' && e[1])
				e++;
			e++;
		}
		size_t l = (size_t)(e - p);
		if (l >= n && strncmp(p, name, n) == 0 && (l == n || p[n] == '=')) {
			found = 1;
			if (val && vlen) {
				size_t vl = l > n ? l - n - 1 : 0;
				if (vl >= vlen)
					vl = vlen - 1;
				memcpy(val, p + n + (l > n ? 1 : 0), vl);
				val[vl] = '\0';
			}
		}
		p = *e ? e + 1 : NULL;
	}
	return found;
}

/* Undoes overlay's '\' escapes of ',' ':' and '\' in a path. */
static void unbackslash(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (r[0] == '\\' && r[1])
			r++;
		*w++ = *r;
	}
	*w = '\0';
}

int kc_overlay_dirs(const char *options, char *upper, size_t ulen, char *work, size_t wlen,
		    char *lower, size_t llen)
{
	char v[SUB_PATH_MAX * 2];
	upper[0] = work[0] = lower[0] = '\0';
	if (kc_find_option(options, "upperdir", v, sizeof(v))) {
		unbackslash(v);
		if (copy(upper, ulen, v))
			return -EINVAL;
	}
	if (kc_find_option(options, "workdir", v, sizeof(v))) {
		unbackslash(v);
		if (copy(work, wlen, v))
			return -EINVAL;
	}
	if (kc_find_option(options, "lowerdir", v, sizeof(v)) && copy(lower, llen, v))
		return -EINVAL;
	/* Kernels from 6.7 list layers added one at a time as "lowerdir+=". */
	const char *p = options;
	while (p && (p = strstr(p, "lowerdir+=")) != NULL) {
		p += strlen("lowerdir+=");
		size_t l = 0;
		while (p[l] && p[l] != ',') {
			if (p[l] == '\\' && p[l + 1])
				l++;
			l++;
		}
		size_t have = strlen(lower);
		if (have + (have ? 1 : 0) + l + 1 > llen)
			return -EINVAL;
		if (have)
			lower[have++] = ':';
		memcpy(lower + have, p, l);
		lower[have + l] = '\0';
	}
	return 0;
}

size_t kc_mount_prefix_len(const char *mp, const char *path)
{
	size_t n = strlen(mp);
	if (strcmp(mp, "/") == 0)
		return path[0] == '/' ? 1 : 0;
	if (strncmp(mp, path, n) != 0)
		return 0;
	if (path[n] != '\0' && path[n] != '/')
		return 0;
	return n;
}

/* The mount holding path: the longest matching mount point, the last one on
 * ties (mounts stacked on one point: the newest is visible). */
static int find_mount(const char *path, kc_mount *out)
{
	FILE *fp = fopen("/proc/self/mountinfo", "re");
	if (!fp)
		return -errno;
	char line[8192];
	size_t best = 0;
	int found = 0;
	kc_mount *m = malloc(sizeof(*m));
	if (!m) {
		fclose(fp);
		return -ENOMEM;
	}
	while (fgets(line, sizeof(line), fp)) {
		if (kc_mountinfo_parse(line, m))
			continue;
		size_t n = kc_mount_prefix_len(m->mountpoint, path);
		if (n == 0 || n < best)
			continue;
		best = n;
		*out = *m;
		found = 1;
	}
	free(m);
	fclose(fp);
	return found ? 0 : -ENOENT;
}

static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

typedef struct walk {
	json_t *layers;
	int n;
} walk;

static void resolve_path(walk *w, const char *path, const char *role, int depth);

static const char *device_kind(const char *name)
{
	static const struct {
		const char *prefix, *kind;
	} kinds[] = {{"loop", "loop"}, {"zram", "zram"}, {"ram", "ram"},   {"dm-", "dm"},
		     {"md", "md"},     {"nbd", "nbd"},   {"pmem", "pmem"}, {"rbd", "rbd"},
		     {"nullb", "null"}};
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strncmp(name, kinds[i].prefix, strlen(kinds[i].prefix)) == 0)
			return kinds[i].kind;
	return "disk";
}

/* A block device by major:minor, and what is below it. */
static void resolve_device(walk *w, unsigned maj, unsigned min, const char *via, int depth)
{
	if (w->n >= KC_LAYERS_MAX || depth > 8)
		return;
	char sys[PATH_MAX], link[PATH_MAX], buf[PATH_MAX];
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", maj, min);
	ssize_t l = readlink(sys, link, sizeof(link) - 1);
	if (l < 0)
		return; /* not a block device (0:N anonymous devices) */
	link[l] = '\0';
	const char *name = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
	char disk[256];
	snprintf(disk, sizeof(disk), "%.200s", name);
	/* A partition's queue and kind are its disk's. */
	char part[PATH_MAX + 32], qdir[PATH_MAX + 32];
	snprintf(part, sizeof(part), "%s/partition", sys);
	snprintf(qdir, sizeof(qdir), "%s/queue", sys);
	if (access(part, F_OK) == 0) {
		snprintf(qdir, sizeof(qdir), "%s/../queue", sys);
		char *slash = strrchr(link, '/');
		if (slash) {
			*slash = '\0';
			const char *pd = strrchr(link, '/');
			snprintf(disk, sizeof(disk), "%.200s", pd ? pd + 1 : link);
		}
	}
	json_t *o = json_pack("{s:s,s:i,s:s,s:s,s:s}", "role", "block device", "depth", depth, "path",
			      via, "device", name, "kind", device_kind(disk));
	char wc[64] = "", wcpath[PATH_MAX + 64];
	snprintf(wcpath, sizeof(wcpath), "%s/write_cache", qdir);
	read_line(wcpath, wc, sizeof(wc));
	json_object_set_new(o, "write_cache", json_string(wc));
	json_array_append_new(w->layers, o);
	w->n++;
	if (strcmp(device_kind(disk), "loop") == 0) {
		char bf[PATH_MAX + 32];
		snprintf(bf, sizeof(bf), "/sys/block/%s/loop/backing_file", disk);
		if (read_line(bf, buf, sizeof(buf)) == 0 && buf[0]) {
			json_object_set_new(o, "backing_file", json_string(buf));
			/* The image is a file: its directory's mount stores it. */
			char dir[PATH_MAX];
			snprintf(dir, sizeof(dir), "%s", buf);
			resolve_path(w, dir, "loop backing file", depth + 1);
		}
	}
	/* device-mapper and md: every member below */
	char sl[PATH_MAX + 32];
	snprintf(sl, sizeof(sl), "/sys/block/%s/slaves", disk);
	struct stat st;
	if (stat(sl, &st) == 0 && S_ISDIR(st.st_mode)) {
		char devfile[PATH_MAX * 2];
		/* Members are listed as directory entries; read their dev files. */
		DIR *d = opendir(sl);
		if (d) {
			struct dirent *e;
			while ((e = readdir(d)) != NULL) {
				if (e->d_name[0] == '.')
					continue;
				snprintf(devfile, sizeof(devfile), "%s/%s/dev", sl, e->d_name);
				unsigned a, b;
				if (read_line(devfile, buf, sizeof(buf)) == 0 &&
				    sscanf(buf, "%u:%u", &a, &b) == 2)
					resolve_device(w, a, b, name, depth + 1);
			}
			closedir(d);
		}
	}
}

static int is_fuse_type(const char *fstype)
{
	return strncmp(fstype, "fuse", 4) == 0;
}

static void resolve_path(walk *w, const char *path, const char *role, int depth)
{
	if (w->n >= KC_LAYERS_MAX || depth > 8)
		return;
	kc_mount *m = malloc(sizeof(*m));
	if (!m)
		return;
	json_t *o = json_pack("{s:s,s:i,s:s}", "role", role, "depth", depth, "path", path);
	json_array_append_new(w->layers, o);
	w->n++;
	char real[PATH_MAX];
	const char *p = realpath(path, real) ? real : path;
	int rc = find_mount(p, m);
	if (rc) {
		json_object_set_new(o, "error", json_string(strerror(-rc)));
		free(m);
		return;
	}
	char dev[32], magic[32];
	snprintf(dev, sizeof(dev), "%u:%u", m->major, m->minor);
	struct statfs sf;
	if (statfs(p, &sf) == 0)
		snprintf(magic, sizeof(magic), "0x%" PRIx64, (uint64_t)(unsigned long)sf.f_type);
	else
		magic[0] = '\0';
	json_t *fields = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:b}", "mountpoint", m->mountpoint, "fstype",
				   m->fstype, "source", m->source, "options", m->options, "mount_root", m->root,
				   "device", dev, "fs_magic", magic, "bind", strcmp(m->root, "/") != 0);
	json_object_update(o, fields); /* copies the references: ours is given back below */
	json_decref(fields);
	if (strcmp(m->fstype, "overlay") == 0) {
		char upper[SUB_PATH_MAX], work[SUB_PATH_MAX], lower[SUB_PATH_MAX * 2];
		if (kc_overlay_dirs(m->options, upper, sizeof(upper), work, sizeof(work), lower,
				    sizeof(lower)) == 0) {
			if (lower[0])
				json_object_set_new(o, "lowerdir", json_string(lower));
			if (upper[0])
				resolve_path(w, upper, "overlay upperdir", depth + 1);
			if (work[0])
				resolve_path(w, work, "overlay workdir", depth + 1);
		}
	} else if (is_fuse_type(m->fstype) && m->source[0] == '/' &&
		   strncmp(m->source, "/dev/", 5) != 0) {
		/* A passthrough daemon (bindfs, a FUSE overlay) named after its
		 * backing directory: that directory's mount stores the bytes. */
		struct stat st;
		if (stat(m->source, &st) == 0 && S_ISDIR(st.st_mode) && strcmp(m->source, p) != 0)
			resolve_path(w, m->source, "FUSE backing directory", depth + 1);
	} else if (m->major != 0) {
		resolve_device(w, m->major, m->minor, m->source, depth + 1);
	}
	free(m);
}

json_t *kc_layers_resolve(const char *path)
{
	walk w = {json_array(), 0};
	if (!w.layers)
		return NULL;
	resolve_path(&w, path, "mount", 0);
	return w.layers;
}
