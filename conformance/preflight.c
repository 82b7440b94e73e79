/*
 * preflight.c — classifying a volume by statfs magic, mount type, source and
 * options.
 */
#include "conformance/preflight.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* FUSE subtype from "fuse.s3fs" (or the source for plain "fuse" mounts). */
static const char *fuse_subtype(const sub_identity *id)
{
	if (has_prefix(id->fstype, "fuse."))
		return id->fstype + 5;
	if (has_prefix(id->fstype, "fuseblk."))
		return id->fstype + 8;
	if (strcmp(id->fstype, "fuse") == 0 || strcmp(id->fstype, "fuseblk") == 0 ||
	    id->fs_magic == KC_MAGIC_FUSE)
		return id->source;
	return NULL;
}

static int is_fuse(const sub_identity *id)
{
	return id->fs_magic == KC_MAGIC_FUSE || has_prefix(id->fstype, "fuse");
}

static int is_nfs(const sub_identity *id)
{
	return id->fs_magic == KC_MAGIC_NFS || strcmp(id->fstype, "nfs") == 0 ||
	       strcmp(id->fstype, "nfs4") == 0 || strcmp(id->backend, "nfs") == 0;
}

static int is_ceph(const sub_identity *id)
{
	return id->fs_magic == KC_MAGIC_CEPH || strcmp(id->fstype, "ceph") == 0 ||
	       strcmp(id->fstype, "fuse.ceph-fuse") == 0 || strcmp(id->fstype, "fuse.ceph") == 0;
}

static int name_in(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (s && strcasecmp(s, *list) == 0)
			return 1;
	return 0;
}

static const char *const object_store_fuse[] = {
	"s3fs", "gcsfuse", "mountpoint-s3", "mount-s3", "blobfuse", "blobfuse2", "goofys",
	"rclone", "s3ql", "riofs", "yas3fs", NULL};
static const char *const smb_fuse[] = {"smbnetfs", "fusesmb", "smb", NULL};

const char *kc_fs_kind(const sub_identity *id, char *buf, size_t len)
{
	const char *sub = fuse_subtype(id);
	if (strcmp(id->backend, "nfs") == 0)
		snprintf(buf, len, "NFS server (userspace client)");
	else if (id->fs_magic == KC_MAGIC_TMPFS || strcmp(id->fstype, "tmpfs") == 0)
		snprintf(buf, len, "tmpfs");
	else if (id->fs_magic == KC_MAGIC_RAMFS || strcmp(id->fstype, "ramfs") == 0)
		snprintf(buf, len, "ramfs");
	else if (is_nfs(id))
		snprintf(buf, len, "NFS");
	else if (is_ceph(id))
		snprintf(buf, len, "CephFS");
	else if (id->fs_magic == KC_MAGIC_CIFS || id->fs_magic == KC_MAGIC_SMB2 ||
		 id->fs_magic == KC_MAGIC_SMB)
		snprintf(buf, len, "SMB/CIFS");
	else if (is_fuse(id))
		snprintf(buf, len, "FUSE (%s)", sub && *sub ? sub : "unknown");
	else
		snprintf(buf, len, "%s", id->fstype[0] ? id->fstype : "unknown");
	return buf;
}

static void add(json_t *f, const char *level, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void add(json_t *f, const char *level, const char *code, const char *fmt, ...)
{
	char buf[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	json_array_append_new(f, json_pack("{s:s,s:s,s:s}", "level", level, "code", code, "explain", buf));
}

/* Looks up option `name` in a comma-separated list: 1 and its value (or "")
 * when present. */
static int find_opt(const char *opts, const char *name, char *val, size_t vlen)
{
	size_t n = strlen(name);
	const char *p = opts;
	int found = 0;
	while (p && *p) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l >= n && strncmp(p, name, n) == 0 && (l == n || p[n] == '=')) {
			found = 1;
			if (val && vlen) {
				size_t vl = l > n ? l - n - 1 : 0;
				if (vl >= vlen)
					vl = vlen - 1;
				memcpy(val, p + n + (l > n ? 1 : 0), vl);
				val[vl] = '\0';
			}
			/* Later occurrences (superblock options) win. */
		}
		p = e ? e + 1 : NULL;
	}
	return found;
}

static void explain_nfs(const sub_identity *id, json_t *f)
{
	char v[128];
	const char *o = id->options;
	if (strcmp(id->backend, "nfs") == 0) {
		add(f, "INFO", "nfs-userspace",
		    "userspace NFS client (libnfs): tests the server itself; kernel-client mount options of the hosts that will mount it are not involved");
		return;
	}
	if (find_opt(o, "vers", v, sizeof(v)) || find_opt(o, "nfsvers", v, sizeof(v)))
		add(f, "INFO", "nfs-version", "NFS version %s", v);
	if (find_opt(o, "nocto", NULL, 0))
		add(f, "WARN", "nfs-nocto",
		    "nocto: the client skips the attribute check at open, so a host may read stale data after another host closed the file; remove nocto");
	if (find_opt(o, "soft", NULL, 0))
		add(f, "WARN", "nfs-soft",
		    "soft: a request that times out fails with EIO instead of being retried, which can lose or tear a write the application believes done; use hard");
	if (find_opt(o, "actimeo", v, sizeof(v)))
		add(f, "INFO", "nfs-actimeo",
		    "actimeo=%s: attributes are cached up to %s s between opens; close-to-open still revalidates at every open (unless nocto)",
		    v, v);
	if (find_opt(o, "noac", NULL, 0))
		add(f, "INFO", "nfs-noac", "noac: no attribute caching; correct but slower");
	if (find_opt(o, "lookupcache", v, sizeof(v))) {
		if (strcmp(v, "none") == 0)
			add(f, "INFO", "nfs-lookupcache",
			    "lookupcache=none: every name lookup asks the server; the strictest and slowest setting");
		else if (strcmp(v, "pos") == 0 || strcmp(v, "positive") == 0)
			add(f, "INFO", "nfs-lookupcache",
			    "lookupcache=%s: absent names are not cached, so a file another host creates is visible at once; existing names are cached until revalidated",
			    v);
		else
			add(f, "INFO", "nfs-lookupcache",
			    "lookupcache=%s: names and absences are cached and revalidated with the directory's attributes",
			    v);
	}
	if (find_opt(o, "local_lock", v, sizeof(v)) && strcmp(v, "none") != 0)
		add(f, "INFO", "nfs-local-lock",
		    "local_lock=%s: these locks are visible on this host only; kaas takes no file locks, so it is unaffected, but other software on this mount is",
		    v);
}

static void explain_ceph(const sub_identity *id, json_t *f)
{
	if (find_opt(id->options, "nowsync", NULL, 0))
		add(f, "WARN", "ceph-nowsync",
		    "nowsync: creates and unlinks are acknowledged before the MDS has them (asynchronous directory operations); a client crash can lose a create the application saw succeed");
	if (find_opt(id->options, "wsync", NULL, 0))
		add(f, "INFO", "ceph-wsync", "wsync: directory operations wait for the MDS");
}

kc_verdict kc_preflight_classify(const sub_identity *id, json_t *findings, char *summary, size_t len)
{
	kc_verdict v = KC_PASS;
	char kind[128];
	kc_fs_kind(id, kind, sizeof(kind));
	const char *sub = fuse_subtype(id);
	if (id->fs_magic == KC_MAGIC_TMPFS || id->fs_magic == KC_MAGIC_RAMFS ||
	    strcmp(id->fstype, "tmpfs") == 0 || strcmp(id->fstype, "ramfs") == 0) {
		add(findings, "REFUSED", "not-durable",
		    "%s keeps files in memory only: nothing survives a reboot or an unmount, so fsync promises nothing",
		    kind);
		v = KC_REFUSED;
	} else if (id->fs_magic == KC_MAGIC_CIFS || id->fs_magic == KC_MAGIC_SMB2 ||
		   id->fs_magic == KC_MAGIC_SMB || strcmp(id->fstype, "cifs") == 0 ||
		   strcmp(id->fstype, "smb3") == 0 || strcmp(id->fstype, "smbfs") == 0 ||
		   strcmp(id->backend, "smb") == 0 || (is_fuse(id) && name_in(sub, smb_fuse))) {
		add(findings, "REFUSED", "smb",
		    "SMB/CIFS (%s): renaming over an open file fails, deleting an open file fails with EBUSY, and open/rename follow Windows sharing semantics, not the contract",
		    id->fstype[0] ? id->fstype : kind);
		v = KC_REFUSED;
	} else if (is_fuse(id) && (name_in(sub, object_store_fuse) ||
				   name_in(id->source, object_store_fuse))) {
		add(findings, "REFUSED", "object-store-fuse",
		    "FUSE object-store mount (%s): rename is a copy followed by a delete, and O_CREAT|O_EXCL is not atomic between clients",
		    sub && *sub ? sub : id->source);
		v = KC_REFUSED;
	} else if (is_nfs(id)) {
		explain_nfs(id, findings);
	} else if (is_ceph(id)) {
		explain_ceph(id, findings);
	} else if (is_fuse(id)) {
		add(findings, "INFO", "fuse",
		    "FUSE filesystem (%s): its semantics are whatever its daemon implements; the behavioural checks decide",
		    sub && *sub ? sub : "unknown");
	} else if (strcmp(id->backend, "fault") == 0) {
		add(findings, "INFO", "fault", "fault-injection backend: a test configuration");
	} else {
		add(findings, "INFO", "local",
		    "%s: a filesystem of one host; actors on this host share one kernel client, so cross-host behaviour is not exercised",
		    kind);
	}
	for (size_t i = 0; i < json_array_size(findings); i++) {
		const char *lv = json_string_value(json_object_get(json_array_get(findings, i), "level"));
		if (lv && strcmp(lv, "WARN") == 0 && v == KC_PASS)
			v = KC_WARN;
	}
	const char *first = NULL;
	for (size_t i = 0; i < json_array_size(findings) && !first; i++) {
		json_t *fi = json_array_get(findings, i);
		const char *lv = json_string_value(json_object_get(fi, "level"));
		if (lv && strcmp(lv, kc_verdict_name(v)) == 0)
			first = json_string_value(json_object_get(fi, "explain"));
	}
	if (v == KC_PASS)
		snprintf(summary, len, "%s%s%s%s%s", kind, id->source[0] ? " from " : "", id->source,
			 id->mountpoint[0] ? " on " : "", id->mountpoint);
	else
		snprintf(summary, len, "%s", first ? first : kind);
	return v;
}
