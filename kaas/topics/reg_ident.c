/*
 * reg_ident.c — proving who a topic directory belongs to before anything is
 * done to it, and rebuilding lost registry entries from the volume.
 *
 * The evidence (docs/topics.md, "Identity"): the directory's stamp
 * (.topic-id.json), the topic_id of every partition manifest below it, the
 * registry entry of its name, and the records of deleted incarnations
 * (CLUSTER/deleted-topics/<id>.json while a delete runs,
 * CLUSTER/deleted-ids/<id>.json for good).  A directory is reclaimed only
 * when all of it agrees that it is an earlier, deleted incarnation; a
 * directory holding records that no registry entry names is re-adopted
 * under its own ID; anything contradictory is kept.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kaas/topics/registry_int.h"
#include "kaas/topics/trash.h"
#include "util/clock.h"
#include "util/log.h"

#define MANIFEST_FILE "manifest.json" /* the storage engine's (docs/formats.md) */
#define DELETED_DIR "deleted-ids"

/* ---- what the volume says ---------------------------------------------------------------- */

static void vol_count_id(kt__vol *v, const char *id)
{
	for (int i = 0; i < v->nids; i++) {
		if (strcmp(v->ids[i].id, id) == 0) {
			v->ids[i].n++;
			return;
		}
	}
	if (v->nids == KT_VOL_IDS) {
		v->ids_overflow = 1;
		return;
	}
	snprintf(v->ids[v->nids].id, sizeof(v->ids[0].id), "%s", id);
	v->ids[v->nids++].n = 1;
}

int kt__vol_manifests(const kt__vol *v, const char *id)
{
	for (int i = 0; i < v->nids; i++)
		if (strcmp(v->ids[i].id, id) == 0)
			return v->ids[i].n;
	return 0;
}

/* A partition directory's name: "0".."9999", no leading zeros. */
static int partition_number(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 5 || (n > 1 && s[0] == '0'))
		return -1;
	int p = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		p = p * 10 + (s[i] - '0');
	}
	return p < KAAS_TOPIC_PARTITIONS_MAX ? p : -1;
}

static int has_suffix(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

/* One partition directory: its manifest's topic_id and whether a segment
 * log holds bytes.  A manifest that does not parse counts as no evidence
 * (the storage engine recovers such a partition from its log). */
static int scan_partition(kt_topics *reg, const char *pdir, kt__vol *v)
{
	char path[SUB_PATH_MAX], *buf = NULL;
	size_t len;
	int rc = sub_join(path, sizeof(path), pdir, MANIFEST_FILE);
	if (rc)
		return rc;
	rc = sub_read_file(reg->o.data, path, 65536, &buf, &len);
	if (rc == 0) {
		json_t *o = json_loadb(buf, len, 0, NULL);
		json_t *jid = json_object_get(o, "topic_id");
		char id[KAAS_TOPIC_ID_LEN + 1];
		if (json_is_string(jid) && kt_topic_id_parse(json_string_value(jid), id, NULL) == 0)
			vol_count_id(v, id);
		else if (jid && !json_is_null(jid))
			v->bad_manifests++;
		json_decref(o);
		free(buf);
	} else if (rc != -ENOENT && rc != -EFBIG) {
		return rc;
	}
	if (v->holds_data)
		return 0;
	char **names = NULL;
	size_t n = 0;
	rc = sub_list(reg->o.data, pdir, &names, &n);
	if (rc)
		return rc == -ENOENT || rc == -ENOTDIR ? 0 : rc;
	for (size_t i = 0; i < n && !v->holds_data; i++) {
		sub_stat st;
		if (!has_suffix(names[i], ".log"))
			continue;
		if (sub_join(path, sizeof(path), pdir, names[i]))
			continue;
		if (sub_stat_path(reg->o.data, path, &st) == 0 && S_ISREG(st.mode) && st.size > 0)
			v->holds_data = 1;
	}
	sub_names_free(names, n);
	return 0;
}

int kt__vol_scan(kt_topics *reg, const char *name, kt__vol *v)
{
	memset(v, 0, sizeof(*v));
	sub_stat st;
	int rc = sub_stat_path(reg->o.data, name, &st);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (!S_ISDIR(st.mode)) {
		v->not_dir = 1;
		return 0;
	}
	v->exists = 1;
	v->stamp_rc = kt__stamp_read(reg, name, v->stamp);
	if (v->stamp_rc && v->stamp_rc != -ENOENT && v->stamp_rc != -EBADMSG)
		return v->stamp_rc;
	char **names = NULL;
	size_t n = 0;
	rc = sub_list(reg->o.data, name, &names, &n);
	if (rc)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++) {
		int p = partition_number(names[i]);
		if (p < 0)
			continue;
		char pdir[SUB_PATH_MAX];
		if (sub_join(pdir, sizeof(pdir), name, names[i]))
			continue;
		if (sub_stat_path(reg->o.data, pdir, &st) || !S_ISDIR(st.mode))
			continue;
		if (p + 1 > v->partitions)
			v->partitions = p + 1;
		rc = scan_partition(reg, pdir, v);
	}
	sub_names_free(names, n);
	return rc;
}

/* ---- deleted incarnations ------------------------------------------------------------------ */

int kt__deleted_record(kt_topics *reg, const char *name, const char *id)
{
	char path[SUB_PATH_MAX], buf[512];
	int rc = sub_mkdirs(reg->o.cluster, DELETED_DIR, 0755);
	if (rc)
		return rc;
	snprintf(path, sizeof(path), DELETED_DIR "/%s.json", id);
	int n = snprintf(buf, sizeof(buf),
			 "{\"version\":1,\"name\":\"%s\",\"topic_id\":\"%s\",\"deleted_ms\":%" PRId64 "}\n", name, id,
			 ku_wall_ms());
	rc = sub_create_excl(reg->o.cluster, path, buf, (size_t)n);
	return rc == -EEXIST ? 0 : rc; /* write-once: an earlier attempt stands */
}

/* 1 when `id` is recorded as deleted (a tombstone or a deleted-ids record),
 * 0 when not, -errno when the cluster volume cannot say.  The tombstone is
 * looked at first: a delete writes its deleted-ids record before it removes
 * the tombstone, so a delete that finishes between the two looks is still
 * seen (the other order could miss both). */
int kt__is_deleted(kt_topics *reg, const char *id)
{
	char path[SUB_PATH_MAX];
	const char *dirs[] = {TOMB_DIR, DELETED_DIR};
	for (size_t i = 0; i < 2; i++) {
		sub_stat st;
		snprintf(path, sizeof(path), "%s/%s.json", dirs[i], id);
		int rc = sub_stat_path(reg->o.cluster, path, &st);
		if (rc == 0)
			return 1;
		if (rc != -ENOENT)
			return rc;
	}
	return 0;
}

/* ---- the verdict on a directory whose stamp is not the registered ID ------------------------- */

int kt__judge_foreign_stamp(kt_topics *reg, const kt_topic_info *t, const kt__vol *v, char *why, size_t whylen)
{
	int mine = kt__vol_manifests(v, t->id);
	int theirs = kt__vol_manifests(v, v->stamp);
	int others = 0;
	for (int i = 0; i < v->nids; i++)
		others += v->ids[i].n;
	others -= mine + theirs;
	if (mine > 0) {
		snprintf(why, whylen, "stamp says %s but %d partition manifest(s) say the registered id %s%s", v->stamp,
			 mine, t->id, theirs || others ? " and others disagree" : "");
		return KT_VERDICT_ADOPT;
	}
	if (others > 0 || v->ids_overflow || v->bad_manifests) {
		snprintf(why, whylen, "stamp %s, manifests naming other ids", v->stamp);
		return KT_VERDICT_QUARANTINE;
	}
	int del = kt__is_deleted(reg, v->stamp);
	if (del < 0)
		return del;
	if (!del) {
		snprintf(why, whylen, "stamp %s%s, not recorded as deleted", v->stamp,
			 theirs ? " agreeing with its manifests" : "");
		return KT_VERDICT_QUARANTINE;
	}
	snprintf(why, whylen, "stamp %s, %d manifest(s) agreeing, recorded as deleted", v->stamp, theirs);
	return KT_VERDICT_RECLAIM;
}

/* ---- rebuilding a registry entry from the volume ---------------------------------------------- */

/* The created_ms of the stamp (0 when it has none). */
static int64_t stamp_created(kt_topics *reg, const char *name)
{
	char path[SUB_PATH_MAX], *buf = NULL;
	size_t len;
	snprintf(path, sizeof(path), "%s/" STAMP_NAME, name);
	if (sub_read_file(reg->o.data, path, 4096, &buf, &len))
		return 0;
	json_t *o = json_loadb(buf, len, 0, NULL);
	free(buf);
	json_t *jc = json_object_get(o, "created_ms");
	int64_t ms = json_is_integer(jc) && json_integer_value(jc) > 0 ? json_integer_value(jc) : 0;
	json_decref(o);
	return ms;
}

/* Is DATA/<name> a directory that must be re-adopted: it holds records,
 * its ID is not recorded as deleted, and the evidence names one ID — the
 * stamp's, which every manifest naming an ID agrees with, or (no readable
 * stamp) the one ID all such manifests name.  1 yes (v and id filled), 0
 * no, -errno. */
static int adoptable(kt_topics *reg, const char *name, kt__vol *v, char id[KAAS_TOPIC_ID_LEN + 1])
{
	int rc = kt__vol_scan(reg, name, v);
	if (rc)
		return rc;
	if (!v->exists || !v->holds_data || v->partitions < 1)
		return 0;
	if (v->ids_overflow || v->bad_manifests || v->nids > 1)
		return 0; /* contradicting evidence: left for an operator */
	if (v->stamp_rc == 0) {
		if (v->nids == 1 && strcmp(v->ids[0].id, v->stamp) != 0)
			return 0;
		snprintf(id, KAAS_TOPIC_ID_LEN + 1, "%s", v->stamp);
	} else if (v->nids == 1) {
		snprintf(id, KAAS_TOPIC_ID_LEN + 1, "%s", v->ids[0].id);
	} else {
		return 0; /* no ID anywhere: adopted by a create, as any unstamped directory */
	}
	rc = kt__is_deleted(reg, id);
	return rc < 0 ? rc : !rc;
}

/* Re-creates CLUSTER/topics/<name>.json from DATA/<name>: its ID (see
 * adoptable()), as many partitions as the directory has, no config
 * overrides (those were only in the lost entry).  An unreadable entry in the way is kept as
 * CLUSTER/topics/~lost-<hex>.  1 when the entry now exists (made here or by
 * a racing broker; memory updated), 0 when there was nothing to adopt,
 * -errno.  Called with reg->op held. */
int kt__adopt_from_volume(kt_topics *reg, const char *name)
{
	topic_ent *cur = NULL;
	sub_stat st;
	char why[128], path[SUB_PATH_MAX];
	int rs = kt__reg_read(reg, name, &cur, &st, why, sizeof(why));
	kt__ent_free(cur);
	if (rs < 0)
		return rs;
	if (rs == RF_OK)
		return 0; /* registered: the normal rules apply */
	kt__vol v;
	char id[KAAS_TOPIC_ID_LEN + 1];
	int rc = adoptable(reg, name, &v, id);
	if (rc <= 0)
		return rc;
	kt__reg_path(path, sizeof(path), name);
	if (rs == RF_CORRUPT || rs == RF_INCOMPLETE) {
		char hex[17], lost[SUB_PATH_MAX];
		kt__rand_hex(hex, 16);
		snprintf(lost, sizeof(lost), REG_DIR "/" LOST_PREFIX "%s", hex);
		rc = sub_rename(reg->o.cluster, path, lost);
		if (rc && rc != -ENOENT)
			return rc;
		if (rc == 0)
			KLOG_WARN("topics", "topic %s: its registry entry is unreadable (%s); kept as CLUSTER/%s", name,
				  why[0] ? why : "unreadable", lost);
		kt__claim_forget(reg, path);
	}
	topic_ent *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	snprintf(e->info.name, sizeof(e->info.name), "%s", name);
	if (kt_topic_id_parse(id, e->info.id, e->info.id_bytes)) {
		kt__ent_free(e);
		return -EBADMSG;
	}
	e->info.partitions = v.partitions;
	e->info.created_ms = stamp_created(reg, name);
	/* This broker may still know the entry (it went bad while we ran):
	 * then its configs and partition count are not lost. */
	int from_memory = 0;
	rc = 0;
	pthread_rwlock_rdlock(&reg->lock);
	topic_ent *m = kt__mem_find(reg, name);
	if (m && strcmp(m->info.id, e->info.id) == 0) {
		rc = kt_tcfg_set_copy(&e->ov, &m->ov);
		if (m->info.partitions > e->info.partitions)
			e->info.partitions = m->info.partitions;
		e->info.created_ms = m->info.created_ms;
		e->generation = m->generation + 1;
		from_memory = 1;
	}
	pthread_rwlock_unlock(&reg->lock);
	if (rc) {
		kt__ent_free(e);
		return rc;
	}
	kt__ent_fill_info(reg, e);
	char *json = kt__ent_json(e);
	if (!json) {
		kt__ent_free(e);
		return -ENOMEM;
	}
	rc = sub_create_excl(reg->o.cluster, path, json, strlen(json));
	free(json);
	if (rc && rc != -EEXIST) {
		kt__ent_free(e);
		return rc;
	}
	kt__ent_free(e);
	e = NULL;
	/* Ours or a racing adopter's: what reads back is the truth. */
	rs = kt__reg_read(reg, name, &e, &st, why, sizeof(why));
	if (rs != RF_OK) {
		kt__ent_free(e);
		return rs < 0 ? rs : -EAGAIN;
	}
	if (rc == 0 && from_memory)
		KLOG_WARN("topics", "topic %s: no readable registry entry, but DATA/%s holds records of topic id %s; "
			  "re-adopted it from the volume, rewriting the entry from what this broker knew (%d "
			  "partition(s), its config overrides)", name, name, e->info.id, e->info.partitions);
	else if (rc == 0)
		KLOG_WARN("topics", "topic %s: no readable registry entry, but DATA/%s holds records of topic id %s; "
			  "re-adopted it from the volume (%d partition(s) from its directories; config overrides, if "
			  "any, were only in the lost entry and are back to the broker defaults)",
			  name, name, e->info.id, e->info.partitions);
	e->dir_ready = v.stamp_rc == 0 && strcmp(e->info.id, v.stamp) == 0; /* else stamped by prepare_dir */
	pthread_rwlock_wrlock(&reg->lock);
	e->unsynced = 1;
	rc = kt__mem_merge(reg, e);
	pthread_rwlock_unlock(&reg->lock);
	return rc < 0 ? rc : 1;
}

/* At start-up: every directory under DATA/ that no registry entry names.
 * One holding records of an ID not recorded as deleted is re-adopted; any
 * other is logged and left in place — never deleted. */
void kt__adopt_orphans(kt_topics *reg)
{
	char **names = NULL;
	size_t n = 0;
	if (sub_list(reg->o.data, "", &names, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		char msg[160], sid[KAAS_TOPIC_ID_LEN + 1];
		if (kt_topic_name_check(names[i], (int32_t)strlen(names[i]), msg, sizeof(msg)))
			continue;
		if (reg->reserved[0] && strcmp(names[i], reg->reserved) == 0)
			continue;
		pthread_rwlock_rdlock(&reg->lock);
		int known = kt__mem_find(reg, names[i]) != NULL;
		pthread_rwlock_unlock(&reg->lock);
		if (known)
			continue;
		int stamped = kt__stamp_read(reg, names[i], sid) == 0;
		pthread_mutex_lock(&reg->op);
		int rc = kt__adopt_from_volume(reg, names[i]);
		pthread_mutex_unlock(&reg->op);
		if (rc > 0)
			continue;
		if (rc < 0) {
			KLOG_ERR("topics", "DATA/%s: re-adopting it from the volume failed (%s); left in place", names[i],
				 sub_strerror(rc));
			continue;
		}
		if (!stamped)
			continue; /* not a topic directory kaas can name */
		int del = kt__is_deleted(reg, sid);
		KLOG_WARN("topics", "DATA/%s is stamped with topic id %s but no topic of that name is registered "
			  "(%s); left in place, never deleted by kaas", names[i], sid,
			  del > 0 ? "that id is recorded as deleted" : "it holds no records, or its manifests disagree");
	}
	sub_names_free(names, n);
}
