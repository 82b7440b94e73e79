/*
 * stamp.c — writing, reading and checking the qualification stamp, and the
 * volume key that binds a stamp to one volume.
 *
 * A volume has to be recognised from every host that mounts it, so the key
 * prefers what is the same everywhere (the NFS server and export, a device or
 * network source) over what is per mount and per host (statfs f_fsid, which
 * the kernel invents per NFS mount).  Only sources that name nothing in
 * particular ("tmpfs", "none", a FUSE daemon's name) fall back to the fsid,
 * which binds the stamp to that one mount.
 */
#include "qualify/stamp.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const kq_stamp_required_checks[] = {
	"preflight", "rename", "excl", "cto", "unlink-open", "fsync", "rename-copy", NULL};

static int is_nfs_identity(const sub_identity *id)
{
	return strcmp(id->backend, "nfs") == 0 || strcmp(id->fstype, "nfs") == 0 ||
	       strcmp(id->fstype, "nfs4") == 0 || strncmp(id->fstype, "nfs3", 4) == 0 ||
	       strncmp(id->fstype, "nfs4", 4) == 0 || id->fs_magic == 0x6969;
}

/* "server:/export/" -> "server:/export"; "[v6]:/x" kept as is otherwise. */
static void normalise_export(const char *src, char *out, size_t len)
{
	snprintf(out, len, "%s", src);
	size_t n = strlen(out);
	while (n > 1 && out[n - 1] == '/' && out[n - 2] != ':') {
		out[--n] = '\0';
	}
}

/* A source names one particular volume when it is a path (a device), or has
 * a host or cluster part (server:/export, mon:port:/, user@host:path). */
static int specific_source(const char *s)
{
	return s[0] == '/' || strchr(s, ':') || strchr(s, '@');
}

int kq_volume_key(const sub_identity *id, char *key, size_t keylen)
{
	int n;
	if (is_nfs_identity(id)) {
		char exp[600];
		const char *src = id->source[0] ? id->source : id->fsid;
		if (!src[0] || !strchr(src, ':'))
			return -EINVAL;
		normalise_export(src, exp, sizeof(exp));
		n = snprintf(key, keylen, "nfs:%s", exp);
	} else if (id->source[0] && specific_source(id->source)) {
		n = snprintf(key, keylen, "%s:%s", id->fstype[0] ? id->fstype : "unknown", id->source);
	} else if (id->fsid[0]) {
		n = snprintf(key, keylen, "%s:fsid:%s", id->fstype[0] ? id->fstype : "unknown", id->fsid);
	} else {
		return -EINVAL;
	}
	return (n < 0 || (size_t)n >= keylen) ? -ENAMETOOLONG : 0;
}

json_t *kq_identity_json(const sub_identity *id)
{
	char magic[32], key[1200];
	snprintf(magic, sizeof(magic), "0x%" PRIx64, id->fs_magic);
	if (kq_volume_key(id, key, sizeof(key)) != 0)
		key[0] = '\0';
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "backend", id->backend, "fstype",
			 id->fstype, "fs_magic", magic, "fsid", id->fsid, "source", id->source,
			 "options", id->options, "mountpoint", id->mountpoint, "root", id->root,
			 "volume_key", key);
}

static void copy_member(const json_t *j, const char *k, char *dst, size_t len)
{
	const char *s = json_string_value(json_object_get(j, k));
	snprintf(dst, len, "%s", s ? s : "");
}

int kq_identity_from_json(const json_t *j, sub_identity *id)
{
	memset(id, 0, sizeof(*id));
	if (!json_is_object(j))
		return -EINVAL;
	copy_member(j, "backend", id->backend, sizeof(id->backend));
	copy_member(j, "fstype", id->fstype, sizeof(id->fstype));
	copy_member(j, "fsid", id->fsid, sizeof(id->fsid));
	copy_member(j, "source", id->source, sizeof(id->source));
	copy_member(j, "options", id->options, sizeof(id->options));
	copy_member(j, "mountpoint", id->mountpoint, sizeof(id->mountpoint));
	copy_member(j, "root", id->root, sizeof(id->root));
	const char *m = json_string_value(json_object_get(j, "fs_magic"));
	id->fs_magic = m ? strtoull(m, NULL, 0) : 0;
	return 0;
}

static int stamp_path(const char *dir, char *out, size_t len)
{
	return sub_join(out, len, dir, KC_STAMP_FILE);
}

int kq_stamp_write(sub_vfs *v, const char *dir, const json_t *stamp)
{
	char path[SUB_PATH_MAX];
	int rc = stamp_path(dir, path, sizeof(path));
	if (rc)
		return rc;
	if (dir && *dir && (rc = sub_mkdirs(v, dir, 0755)))
		return rc;
	char *text = json_dumps(stamp, JSON_INDENT(2));
	if (!text)
		return -ENOMEM;
	size_t n = strlen(text);
	char *buf = malloc(n + 2);
	if (!buf) {
		free(text);
		return -ENOMEM;
	}
	memcpy(buf, text, n);
	buf[n] = '\n';
	rc = sub_write_atomic(v, path, buf, n + 1);
	free(buf);
	free(text);
	return rc;
}

int kq_stamp_read(sub_vfs *v, const char *dir, json_t **out, char *why, size_t whylen)
{
	char path[SUB_PATH_MAX];
	char *buf = NULL;
	size_t len = 0;
	*out = NULL;
	int rc = stamp_path(dir, path, sizeof(path));
	if (rc) {
		snprintf(why, whylen, "cluster directory path too long");
		return rc;
	}
	rc = sub_read_file(v, path, 1 << 20, &buf, &len);
	if (rc == -ENOENT) {
		snprintf(why, whylen, "no qualification stamp (%s); run kaas-conform check --stamp on this volume",
			 KC_STAMP_FILE);
		return -ENOENT;
	}
	if (rc) {
		snprintf(why, whylen, "cannot read %s: %s", KC_STAMP_FILE, sub_strerror(rc));
		return rc == -EFBIG ? -EBADMSG : rc;
	}
	json_error_t jerr;
	json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	free(buf);
	if (!j || !json_is_object(j)) {
		json_decref(j);
		snprintf(why, whylen, "%s is not a JSON object (line %d: %s)", KC_STAMP_FILE, jerr.line,
			 jerr.text);
		return -EBADMSG;
	}
	*out = j;
	return 0;
}

int kq_stamp_check(const json_t *stamp, const sub_identity *volume, char *why, size_t whylen)
{
	const char *kind = json_string_value(json_object_get(stamp, "kind"));
	json_t *sv = json_object_get(stamp, "schema_version");
	if (!kind || strcmp(kind, KC_STAMP_KIND) != 0 || !json_is_integer(sv)) {
		snprintf(why, whylen, "%s is not a kaas qualification stamp", KC_STAMP_FILE);
		return -EBADMSG;
	}
	if (json_integer_value(sv) < 1 || json_integer_value(sv) > KC_STAMP_SCHEMA) {
		snprintf(why, whylen, "stamp schema_version %lld is not understood by this build (expects 1 to %d)",
			 (long long)json_integer_value(sv), KC_STAMP_SCHEMA);
		return -EBADMSG;
	}
	/* UNPROVEN: every guarantee held, fsync was not disproven but no
	 * power-loss hook proved it; the stamp's "durability" says so. */
	const char *verdict = json_string_value(json_object_get(stamp, "verdict"));
	if (!verdict || (strcmp(verdict, "PASS") != 0 && strcmp(verdict, "UNPROVEN") != 0)) {
		snprintf(why, whylen, "the stamp records verdict %s, not PASS", verdict ? verdict : "(none)");
		return -EPERM;
	}
	json_t *checks = json_object_get(stamp, "checks");
	for (const char *const *req = kq_stamp_required_checks; *req; req++) {
		const char *cv = NULL;
		size_t i;
		json_t *c;
		json_array_foreach(checks, i, c)
		{
			const char *name = json_string_value(json_object_get(c, "name"));
			if (name && strcmp(name, *req) == 0)
				cv = json_string_value(json_object_get(c, "verdict"));
		}
		if (!cv || (strcmp(cv, "PASS") != 0 &&
			    !(strcmp(*req, "fsync") == 0 && strcmp(cv, "UNPROVEN") == 0))) {
			snprintf(why, whylen, "the stamp does not record check '%s' as PASS", *req);
			return -EPERM;
		}
	}
	const char *skey = json_string_value(json_object_get(json_object_get(stamp, "volume"), "volume_key"));
	if (!skey || !*skey) {
		snprintf(why, whylen, "the stamp names no volume");
		return -EBADMSG;
	}
	char key[1200];
	if (kq_volume_key(volume, key, sizeof(key)) != 0) {
		snprintf(why, whylen, "this volume's identity is unknown, so no stamp can be matched to it");
		return -EXDEV;
	}
	if (strcmp(key, skey) != 0) {
		snprintf(why, whylen, "the stamp qualifies volume '%s', this volume is '%s'", skey, key);
		return -EXDEV;
	}
	return 0;
}

int kq_stamp_verify_at(sub_vfs *v, const char *dir, const sub_identity *volume, char *why,
		       size_t whylen)
{
	json_t *stamp = NULL;
	int rc = kq_stamp_read(v, dir, &stamp, why, whylen);
	if (rc)
		return rc;
	rc = kq_stamp_check(stamp, volume, why, whylen);
	json_decref(stamp);
	return rc;
}

int kq_stamp_verify(sub_vfs *cluster, const sub_identity *volume, char *why, size_t whylen)
{
	return kq_stamp_verify_at(cluster, "", volume, why, whylen);
}

int kq_stamp_check_cluster(const json_t *stamp, const sub_identity *data,
			   const sub_identity *cluster, char *why, size_t whylen)
{
	char dkey[1200], ckey[1200];
	if (kq_volume_key(cluster, ckey, sizeof(ckey)) != 0) {
		snprintf(why, whylen, "the cluster directory's volume cannot be identified, so no stamp can be matched to it");
		return -EINVAL;
	}
	if (kq_volume_key(data, dkey, sizeof(dkey)) == 0 && strcmp(dkey, ckey) == 0)
		return 0; /* on the data volume: qualified with it */
	const json_t *cd = json_object_get(stamp, "cluster_dir");
	const char *skey = json_string_value(json_object_get(cd, "volume_key"));
	const char *v = json_string_value(json_object_get(cd, "verdict"));
	if (!json_is_object(cd) || !skey) {
		snprintf(why, whylen,
			 "the cluster directory is on volume '%s', not on the data volume, and the stamp does not qualify it",
			 ckey);
		return -EPERM;
	}
	if (strcmp(skey, ckey) != 0) {
		snprintf(why, whylen, "the stamp qualifies a cluster directory on volume '%s', this one is on '%s'",
			 skey, ckey);
		return -EXDEV;
	}
	if (!v || (strcmp(v, "PASS") != 0 && strcmp(v, "WARN") != 0)) {
		snprintf(why, whylen, "the stamp records the cluster directory's volume '%s' as %s", ckey,
			 v ? v : "(no verdict)");
		return -EPERM;
	}
	return 0;
}

int kq_stamp_verify_cluster(sub_vfs *cluster, const sub_identity *data, char *why, size_t whylen)
{
	sub_identity cid;
	int rc = sub_identity_of(cluster, &cid);
	if (rc) {
		snprintf(why, whylen, "cannot identify the cluster directory: %s", sub_strerror(rc));
		return rc;
	}
	json_t *stamp = NULL;
	if ((rc = kq_stamp_read(cluster, "", &stamp, why, whylen)))
		return rc;
	rc = kq_stamp_check_cluster(stamp, data, &cid, why, whylen);
	json_decref(stamp);
	return rc;
}
