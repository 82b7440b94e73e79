/*
 * preflight.c — classifying a volume by statfs magic, mount type, source and
 * options.
 */
#include "conformance/preflight.h"

#include "conformance/layers.h"

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

static int find_opt(const char *opts, const char *name, char *val, size_t vlen)
{
	return kc_find_option(opts, name, val, vlen);
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

/* ---- mount options that make fsync a promise about nothing -------------
 *
 * Per filesystem family: the option (with a value, or any value when NULL)
 * and what it means for the contract.  KC_OPT_BARRIER is decided by the
 * device below: a volatile write cache ("write back" in sysfs) without the
 * cache flushes the option suppresses loses what fsync acknowledged at a
 * power cut, so it is REFUSED; with a write-through or unknown cache the
 * option is dangerous (move the volume to another disk and it bites) and a
 * WARN. */
enum { KC_OPT_INFO, KC_OPT_WARN, KC_OPT_REFUSED, KC_OPT_BARRIER };

typedef struct kc_opt_rule {
	const char *fs; /* space-separated fstypes; "*" any */
	const char *opt; /* NULL: the filesystem itself (no option) */
	const char *val; /* NULL: any value (or none) */
	int level;
	const char *code;
	const char *explain;
} kc_opt_rule;

static const char barrier_why[] =
	"write barriers off: the filesystem no longer asks the device to flush its write cache, so fsync returns once the data is in that cache, and a power cut loses it";

static const kc_opt_rule opt_rules[] = {
	{"ext2 ext3 ext4", "barrier", "0", KC_OPT_BARRIER, "no-barrier", barrier_why},
	{"ext2 ext3 ext4", "nobarrier", NULL, KC_OPT_BARRIER, "no-barrier", barrier_why},
	{"xfs", "nobarrier", NULL, KC_OPT_BARRIER, "no-barrier", barrier_why},
	{"xfs", "barrier", "0", KC_OPT_BARRIER, "no-barrier", barrier_why},
	{"btrfs", "nobarrier", NULL, KC_OPT_BARRIER, "no-barrier", barrier_why},
	{"f2fs", "nobarrier", NULL, KC_OPT_BARRIER, "no-barrier", barrier_why},
	{"f2fs", "fsync_mode", "nobarrier", KC_OPT_BARRIER, "no-barrier", barrier_why},
	{"reiserfs", "barrier", "none", KC_OPT_BARRIER, "no-barrier", barrier_why},
	{"nilfs2", "nobarrier", NULL, KC_OPT_BARRIER, "no-barrier", barrier_why},
	{"gfs2 ocfs2", "nobarrier", NULL, KC_OPT_BARRIER, "no-barrier", barrier_why},
	{"ocfs2", "barrier", "0", KC_OPT_BARRIER, "no-barrier", barrier_why},
	{"ext3 ext4", "journal_async_commit", NULL, KC_OPT_WARN, "journal-async-commit",
	 "journal_async_commit: the commit block is written without waiting for the blocks before it; a power cut can leave a commit that the journal replay discards, taking fsynced data with it"},
	{"ext3 ext4 xfs", "norecovery", NULL, KC_OPT_WARN, "no-recovery",
	 "norecovery: the journal is not replayed at mount, so what fsync made durable in the journal before a crash is not applied"},
	{"ext3 ext4", "noload", NULL, KC_OPT_WARN, "no-recovery",
	 "noload: the journal is not loaded or replayed, so what fsync made durable in the journal before a crash is not applied"},
	{"ext3 ext4", "data", "writeback", KC_OPT_INFO, "data-writeback",
	 "data=writeback: only metadata is journalled; fsync still writes the data first, but after a crash a file that was not fsynced may show old blocks (kaas fsyncs everything it acknowledges)"},
	{"overlay", "volatile", NULL, KC_OPT_REFUSED, "overlay-volatile",
	 "overlay volatile: fsync and syncfs are ignored for the upper layer, so nothing written through this mount is ever forced to storage"},
	{"overlay", "fsync", "volatile", KC_OPT_REFUSED, "overlay-volatile",
	 "overlay fsync=volatile: fsync and syncfs are ignored for the upper layer, so nothing written through this mount is ever forced to storage"},
	{"nfs nfs4", "async", NULL, KC_OPT_INFO, "nfs-async",
	 "async (the client default): writes are buffered until close or fsync, and fsync still waits for the server's COMMIT; whether the server exports with async (acknowledging COMMIT from memory) cannot be seen from a client"},
	{"nfs nfs4", "softreval", NULL, KC_OPT_INFO, "nfs-softreval",
	 "softreval: while the server is unreachable, cached attributes are used instead of failing; close-to-open checks are skipped for that time"},
	{"9p", "cache", "loose", KC_OPT_WARN, "9p-cache",
	 "cache=loose: no coherence with the server for data, attributes or names; another client's rename or write may not be seen at open"},
	{"9p", "cache", "fscache", KC_OPT_WARN, "9p-cache",
	 "cache=fscache: like cache=loose, with a local persistent cache; no coherence with other clients"},
	{"virtiofs", NULL, NULL, KC_OPT_INFO, "virtiofs",
	 "virtiofs: whether fsync reaches stable storage is decided on the host (virtiofsd's cache and writeback settings and the host's filesystem), none of which a guest can see; only a power-loss hook proves it"},
	{"ceph", "recover_session", "clean", KC_OPT_WARN, "ceph-recover-session",
	 "recover_session=clean: after the cluster blocklists this client, it reconnects and silently drops its dirty data and capabilities; writes the application saw succeed can vanish"},
	{"fuse.ceph-fuse fuse.ceph", NULL, NULL, KC_OPT_INFO, "ceph-fuse",
	 "ceph-fuse: client settings (client_oc, fuse_disable_pagecache) live in ceph.conf, not in the mount options, and are not seen here"},
	{"zfs", NULL, NULL, KC_OPT_INFO, "zfs-sync",
	 "ZFS: the dataset property sync=disabled makes fsync return without writing; it is not a mount option and is not seen here (zfs get sync)"},
	{"*", "sync", NULL, KC_OPT_INFO, "sync", "sync: every write is synchronous (correct, slower)"},
	{NULL, NULL, NULL, 0, NULL, NULL}};

static int word_in(const char *word, const char *list)
{
	size_t n = strlen(word);
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ' ');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if ((l == 1 && *p == '*') || (l == n && strncmp(p, word, n) == 0))
			return 1;
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

static const char *level_name(int level)
{
	return level == KC_OPT_REFUSED ? "REFUSED" : level == KC_OPT_INFO ? "INFO" : "WARN";
}

int kc_option_findings(const char *fstype, const char *options, const char *write_cache,
		       const char *where, json_t *findings)
{
	int worst = 0; /* 0 info, 1 warn, 2 refused */
	const char *last_code = "";
	for (const kc_opt_rule *r = opt_rules; r->fs; r++) {
		if (!word_in(fstype, r->fs))
			continue;
		char v[256] = "";
		if (r->opt && !kc_find_option(options, r->opt, v, sizeof(v)))
			continue;
		if (r->opt && r->val && strcmp(v, r->val) != 0)
			continue;
		/* "barrier=0" and "nobarrier" in one list are one finding. */
		if (strcmp(last_code, r->code) == 0)
			continue;
		int level = r->level;
		const char *dev = "";
		if (level == KC_OPT_BARRIER) {
			if (write_cache && strcmp(write_cache, "write back") == 0) {
				level = KC_OPT_REFUSED;
				dev = "; the device below has a volatile write cache (write back), so fsynced data is lost at a power cut";
			} else {
				level = KC_OPT_WARN;
				dev = write_cache && *write_cache
					      ? "; the device below reports a write-through cache today, but the option makes fsync depend on that"
					      : "; whether the device below has a volatile write cache is unknown";
			}
		}
		char opt[300];
		if (r->opt)
			snprintf(opt, sizeof(opt), "%s%s%s", r->opt, v[0] ? "=" : "", v);
		else
			snprintf(opt, sizeof(opt), "%s", fstype);
		add(findings, level_name(level), r->code, "%s%s%s (option %s)%s", where ? where : "",
		    where && *where ? ": " : "", r->explain, opt, dev);
		json_t *last = json_array_get(findings, json_array_size(findings) - 1);
		json_object_set_new(last, "option", json_string(opt));
		last_code = r->code;
		int w = level == KC_OPT_REFUSED ? 2 : level == KC_OPT_WARN ? 1 : 0;
		if (w > worst)
			worst = w;
	}
	return worst;
}

static const char *jstr(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

/* The write cache of the block device right below layer i, or NULL. */
static const char *device_cache_below(const json_t *layers, size_t i)
{
	json_int_t d = json_integer_value(json_object_get(json_array_get(layers, i), "depth"));
	for (size_t k = i + 1; k < json_array_size(layers); k++) {
		const json_t *l = json_array_get(layers, k);
		json_int_t dk = json_integer_value(json_object_get(l, "depth"));
		if (dk <= d)
			break;
		if (dk == d + 1 && strcmp(jstr(l, "role"), "block device") == 0)
			return jstr(l, "write_cache");
	}
	return NULL;
}

static int layer_in_memory(const json_t *l)
{
	uint64_t magic = strtoull(jstr(l, "fs_magic"), NULL, 0);
	const char *t = jstr(l, "fstype");
	return magic == KC_MAGIC_TMPFS || magic == KC_MAGIC_RAMFS || strcmp(t, "tmpfs") == 0 ||
	       strcmp(t, "ramfs") == 0;
}

/* "overlay upperdir /x/upper (tmpfs on /x)" */
static void describe_layer(const json_t *l, char *buf, size_t len)
{
	if (strcmp(jstr(l, "role"), "block device") == 0) {
		snprintf(buf, len, "block device %s (%s) below %s", jstr(l, "device"), jstr(l, "kind"),
			 jstr(l, "path"));
		return;
	}
	int bind = json_is_true(json_object_get(l, "bind"));
	snprintf(buf, len, "%s %s (%s%s%s on %s%s%s)", jstr(l, "role"), jstr(l, "path"),
		 jstr(l, "fstype"), jstr(l, "source")[0] ? " from " : "", jstr(l, "source"),
		 jstr(l, "mountpoint"), bind ? ", a bind mount of " : "", bind ? jstr(l, "mount_root") : "");
}

kc_verdict kc_preflight_layers(const json_t *layers, json_t *findings, char *decided, size_t dlen)
{
	kc_verdict v = KC_PASS;
	if (decided && dlen)
		decided[0] = '\0';
	for (size_t i = 0; i < json_array_size(layers); i++) {
		const json_t *l = json_array_get(layers, i);
		size_t before = json_array_size(findings);
		char where[1200];
		describe_layer(l, where, sizeof(where));
		kc_verdict lv = KC_PASS;
		const char *role = jstr(l, "role");
		int is_dev = strcmp(role, "block device") == 0;
		if (json_object_get(l, "error")) {
			add(findings, "INFO", "layer-unknown", "%s: cannot be resolved (%s)", where,
			    jstr(l, "error"));
		} else if (is_dev) {
			const char *k = jstr(l, "kind");
			if (strcmp(k, "ram") == 0 || strcmp(k, "zram") == 0 || strcmp(k, "null") == 0) {
				add(findings, "REFUSED", "ram-device",
				    "%s: a %s device keeps its blocks in memory (or nowhere): nothing survives a reboot, so fsync promises nothing",
				    where, strcmp(k, "null") == 0 ? "null_blk" : k);
				lv = KC_REFUSED;
			} else if (strcmp(k, "pmem") == 0) {
				add(findings, "INFO", "pmem",
				    "%s: persistent memory is durable only when it is real NVDIMM; memory reserved with memmap= looks the same and is RAM",
				    where);
			} else if (strcmp(k, "nbd") == 0 || strcmp(k, "rbd") == 0) {
				add(findings, "INFO", "network-device",
				    "%s: a network block device; its server's storage cannot be seen from here", where);
			}
		} else {
			if (i > 0 && layer_in_memory(l)) {
				add(findings, "REFUSED", "not-durable",
				    "%s: that layer keeps files in memory only, so what is written through the mount above lives in RAM: nothing survives a reboot, so fsync promises nothing",
				    where);
				lv = KC_REFUSED;
			}
			if (strcmp(jstr(l, "fstype"), "overlay") == 0 && i == 0)
				add(findings, "INFO", "overlay",
				    "%s: writes land in its upperdir; the layers below decide durability (lowerdir %s is read-only here)",
				    where, jstr(l, "lowerdir")[0] ? jstr(l, "lowerdir") : "none");
			if (json_is_true(json_object_get(l, "bind")) && i == 0)
				add(findings, "INFO", "bind-mount",
				    "%s: the filesystem's own type and options decide, as for its other mounts", where);
			/* The top mount's options are explained by identity
			 * (NFS, Ceph) as well; the table adds the others. */
			int w = kc_option_findings(jstr(l, "fstype"), jstr(l, "options"),
						   device_cache_below(layers, i), where, findings);
			if (w == 2)
				lv = KC_REFUSED;
			else if (w == 1 && lv == KC_PASS)
				lv = KC_WARN;
		}
		for (size_t k = before; k < json_array_size(findings); k++) {
			json_t *f = json_array_get(findings, k);
			json_object_set_new(f, "layer", json_integer((json_int_t)i));
			json_object_set_new(f, "layer_role", json_string(role));
		}
		if (lv > v && decided && dlen)
			snprintf(decided, dlen, "%s", where);
		v = kc_verdict_worst(v, lv);
	}
	return v;
}
