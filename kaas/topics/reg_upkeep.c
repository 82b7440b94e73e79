/*
 * reg_upkeep.c — the registry's re-drivers: re-reading CLUSTER/topics/
 * (changes made by other brokers), finishing interrupted deletes from their
 * tombstones, emptying the trash after its retention, and the periodic tick.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "kaas/topics/registry_int.h"
#include "util/clock.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* ---- refresh, re-drive, sweep ---------------------------------------------------------------- */

static int has_suffix(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

static int has_prefix(const char *s, const char *pre)
{
	return strncmp(s, pre, strlen(pre)) == 0;
}

/* A temp file of sub_write_atomic (".<name>.tmp.<hex>") left by a writer
 * that crashed before its rename.  Removed once it has sat unchanged for the
 * claim grace period (a live writer renames it within milliseconds).
 * Returns 1 when `file` is such a temp name (handled), 0 otherwise. */
static int temp_leftover(kt_topics *reg, const char *dir, const char *file, int *first_err)
{
	if (file[0] != '.' || !strstr(file, ".tmp."))
		return 0;
	char path[SUB_PATH_MAX];
	sub_stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (sub_stat_path(reg->o.cluster, path, &st) == 0 && kt__claim_abandoned(reg, path, &st)) {
		kt__claim_forget(reg, path);
		int rc = sub_unlink(reg->o.cluster, path);
		if (rc && rc != -ENOENT && !*first_err)
			*first_err = rc;
	}
	return 1;
}

/* Names in CLUSTER/topics/ that are registry entries: "<valid name>.json". */
static int entry_name(const char *file, char out[KAAS_TOPIC_NAME_MAX + 1])
{
	if (!has_suffix(file, ".json"))
		return 0;
	size_t n = strlen(file) - 5;
	char msg[160];
	if (n == 0 || n > KAAS_TOPIC_NAME_MAX || kt_topic_name_check(file, (int32_t)n, msg, sizeof(msg)))
		return 0;
	memcpy(out, file, n);
	out[n] = '\0';
	return 1;
}

typedef struct drop_list {
	struct {
		char name[KAAS_TOPIC_NAME_MAX + 1];
		char id[KAAS_TOPIC_ID_LEN + 1];
	} *v;
	size_t n;
} drop_list;

static void drop_add(drop_list *d, const char *name, const char *id)
{
	void *nv = realloc(d->v, (d->n + 1) * sizeof(*d->v));
	if (!nv)
		return;
	d->v = nv;
	snprintf(d->v[d->n].name, sizeof(d->v[0].name), "%s", name);
	snprintf(d->v[d->n].id, sizeof(d->v[0].id), "%s", id);
	d->n++;
}

/* Re-reads CLUSTER/topics/: new, changed and vanished entries; settles
 * abandoned claims.  With `drops`, topics that vanished (deleted elsewhere)
 * are collected for the drop hook.  Called with reg->op held. */
static int refresh_locked(kt_topics *reg, drop_list *drops)
{
	char **names = NULL;
	size_t n = 0;
	int rc = sub_list(reg->o.cluster, REG_DIR, &names, &n);
	if (rc)
		return rc;
	int first_err = 0;
	/* Which in-memory topics still have a file (by name). */
	pthread_rwlock_rdlock(&reg->lock);
	size_t nm = reg->n;
	char (*seen_names)[KAAS_TOPIC_NAME_MAX + 1] = malloc((nm ? nm : 1) * sizeof(*seen_names));
	if (seen_names)
		for (size_t i = 0; i < nm; i++)
			snprintf(seen_names[i], sizeof(seen_names[i]), "%s", reg->ents[i]->info.name);
	pthread_rwlock_unlock(&reg->lock);
	unsigned char *present = calloc(nm ? nm : 1, 1);
	if (!seen_names || !present) {
		free(seen_names);
		free(present);
		sub_names_free(names, n);
		return -ENOMEM;
	}

	for (size_t i = 0; i < n; i++) {
		char name[KAAS_TOPIC_NAME_MAX + 1], path[SUB_PATH_MAX], why[128];
		snprintf(path, sizeof(path), REG_DIR "/%s", names[i]);
		if (temp_leftover(reg, REG_DIR, names[i], &first_err))
			continue;
		if (has_prefix(names[i], ABANDONED_PREFIX)) {
			sub_stat st;
			if (sub_stat_path(reg->o.cluster, path, &st) == 0 && kt__claim_abandoned(reg, path, &st)) {
				kt__claim_forget(reg, path);
				int src = kt__settle_aside(reg, path);
				if (src && !first_err)
					first_err = src;
			}
			continue;
		}
		if (!entry_name(names[i], name))
			continue; /* temp files of write_atomic, ~lost-, foreign files */
		for (size_t j = 0; j < nm; j++)
			if (strcmp(seen_names[j], name) == 0)
				present[j] = 1;
		sub_stat st;
		if (sub_stat_path(reg->o.cluster, path, &st))
			continue;
		pthread_rwlock_rdlock(&reg->lock);
		topic_ent *m = kt__mem_find(reg, name);
		int same = m && m->f_ino == st.ino && m->f_size == st.size && m->f_mtime == st.mtime_ns;
		pthread_rwlock_unlock(&reg->lock);
		if (same)
			continue;
		topic_ent *e = NULL;
		int r = kt__reg_read(reg, name, &e, &st, why, sizeof(why));
		if (r < 0) {
			if (!first_err)
				first_err = r;
			continue;
		}
		if (r == RF_INCOMPLETE || r == RF_CORRUPT) {
			/* Records under DATA/<name> outrank a bad entry: rebuild it
			 * from the volume (the bad file is kept as ~lost-). */
			int arc = kt__adopt_from_volume(reg, name);
			if (arc > 0)
				continue;
			if (arc < 0 && !first_err)
				first_err = arc;
		}
		if (r == RF_INCOMPLETE) {
			if (kt__claim_abandoned(reg, path, &st)) {
				int crc = kt__reclaim_claim(reg, name);
				if (crc && !first_err)
					first_err = crc;
			}
			continue;
		}
		if (r == RF_CORRUPT) {
			KLOG_ERR("topics", "topic %s: registry file invalid (%s); ignored", name, why);
			continue;
		}
		if (r != RF_OK)
			continue;
		kt__claim_forget(reg, path);
		pthread_rwlock_wrlock(&reg->lock);
		m = kt__mem_find(reg, name);
		if (m && strcmp(m->info.id, e->info.id) != 0 && drops)
			drop_add(drops, m->info.name, m->info.id); /* replaced by a new incarnation */
		r = kt__mem_merge(reg, e);
		pthread_rwlock_unlock(&reg->lock);
		if (r < 0 && !first_err)
			first_err = r;
	}
	/* Topics whose file is gone were deleted by someone else — if the
	 * delete is on record.  A delete writes its tombstone before it removes
	 * the entry, so an entry gone without one (a lost cluster directory, a
	 * file removed by hand) while DATA/<name> holds records is rewritten
	 * from what this broker knows instead of dropping the topic. */
	for (size_t j = 0; j < nm; j++) {
		if (present[j])
			continue;
		char path[SUB_PATH_MAX];
		kt__reg_path(path, sizeof(path), seen_names[j]);
		sub_stat st;
		if (sub_stat_path(reg->o.cluster, path, &st) != -ENOENT)
			continue; /* listing raced with a create: keep it */
		int arc = kt__adopt_from_volume(reg, seen_names[j]);
		if (arc > 0)
			continue;
		if (arc < 0) {
			if (!first_err)
				first_err = arc;
			continue; /* cannot tell: keep it, look again next time */
		}
		pthread_rwlock_wrlock(&reg->lock);
		topic_ent *m = kt__mem_find(reg, seen_names[j]);
		if (m) {
			if (drops)
				drop_add(drops, m->info.name, m->info.id);
			KLOG_INFO("topics", "topic %s (id %s) was deleted elsewhere", m->info.name, m->info.id);
			kt__mem_remove(reg, seen_names[j]);
		}
		pthread_rwlock_unlock(&reg->lock);
	}
	free(seen_names);
	free(present);
	sub_names_free(names, n);
	return first_err;
}

int kt__load_all(kt_topics *reg)
{
	pthread_mutex_lock(&reg->op);
	int rc = refresh_locked(reg, NULL);
	pthread_mutex_unlock(&reg->op);
	return rc;
}

/* Reads CLUSTER/deleted-topics/<file>: 0 with t filled, -EBADMSG when it
 * does not name a valid topic and ID, or the read's -errno. */
static int tomb_read(kt_topics *reg, const char *file, kt_tombstone *t)
{
	char path[SUB_PATH_MAX], *buf = NULL, msg[160];
	size_t len;
	snprintf(path, sizeof(path), TOMB_DIR "/%s", file);
	int rc = sub_read_file(reg->o.cluster, path, 4096, &buf, &len);
	if (rc)
		return rc == -EFBIG ? -EBADMSG : rc;
	json_t *root = json_loadb(buf, len, 0, NULL);
	free(buf);
	json_t *jn = json_object_get(root, "name"), *jid = json_object_get(root, "topic_id");
	rc = -EBADMSG;
	if (json_is_string(jn) && json_is_string(jid) && kt_topic_id_parse(json_string_value(jid), t->id, NULL) == 0 &&
	    kt_topic_name_check(json_string_value(jn), (int32_t)json_string_length(jn), msg, sizeof(msg)) == 0) {
		snprintf(t->name, sizeof(t->name), "%s", json_string_value(jn));
		/* The file is named after the ID it deletes: one that says another
		 * is not trusted with anything. */
		char expect[KAAS_TOPIC_ID_LEN + 8];
		snprintf(expect, sizeof(expect), "%s.json", t->id);
		rc = strcmp(expect, file) == 0 ? 0 : -EBADMSG;
	}
	json_decref(root);
	return rc;
}

int kt_topics_tombstones(kt_topics *reg, kt_tombstone **out, size_t *n)
{
	char **names = NULL;
	size_t nn = 0, k = 0;
	*out = NULL;
	*n = 0;
	int rc = sub_list(reg->o.cluster, TOMB_DIR, &names, &nn);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	kt_tombstone *v = calloc(nn ? nn : 1, sizeof(*v));
	if (!v) {
		sub_names_free(names, nn);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nn; i++) {
		if (names[i][0] == '.' || !has_suffix(names[i], ".json"))
			continue; /* temporaries of write_atomic: the tick settles them */
		int r = tomb_read(reg, names[i], &v[k]);
		if (r == 0)
			k++;
		else if (r != -EBADMSG && r != -ENOENT && !rc)
			rc = r; /* unreadable now: the caller looks again */
	}
	sub_names_free(names, nn);
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*n = k;
	return 0;
}

/* Every tombstone is a delete to finish.  If the registry file still holds
 * the deleted ID (a crash before its unlink, or a rewrite racing the delete
 * on another broker), the delete is driven forward: the entry is removed.
 * With controller_deletes the directory and the tombstone are left to the
 * controller (kt_topics_delete_finish); `whole` forces the whole delete. */
static int redrive(kt_topics *reg, int call_hooks, const char *only, const char *only_id, int whole,
		   trash_list *tl)
{
	char **names = NULL;
	size_t n = 0;
	int rc = sub_list(reg->o.cluster, TOMB_DIR, &names, &n);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	int first_err = 0;
	for (size_t i = 0; i < n; i++) {
		if (temp_leftover(reg, TOMB_DIR, names[i], &first_err))
			continue;
		if (!has_suffix(names[i], ".json"))
			continue;
		kt_tombstone t;
		int tr = tomb_read(reg, names[i], &t);
		if (tr == -EBADMSG) {
			KLOG_ERR("topics", "tombstone " TOMB_DIR "/%s is invalid; left for an operator", names[i]);
			continue;
		}
		if (tr)
			continue;
		if ((only && strcmp(only, t.name) != 0) || (only_id && strcmp(only_id, t.id) != 0))
			continue;

		topic_ent *e = NULL;
		sub_stat st;
		char why[128];
		int r = kt__reg_read(reg, t.name, &e, &st, why, sizeof(why));
		if (r == RF_OK && strcmp(e->info.id, t.id) == 0) {
			char rp[SUB_PATH_MAX];
			kt__reg_path(rp, sizeof(rp), t.name);
			int urc = sub_unlink(reg->o.cluster, rp);
			if (urc == 0)
				urc = sub_fsync_dir(reg->o.cluster, REG_DIR);
			if (urc && urc != -ENOENT) {
				kt__ent_free(e);
				if (!first_err)
					first_err = urc;
				continue;
			}
			pthread_rwlock_wrlock(&reg->lock);
			topic_ent *m = kt__mem_find(reg, t.name);
			if (m && strcmp(m->info.id, t.id) == 0)
				kt__mem_remove(reg, t.name);
			pthread_rwlock_unlock(&reg->lock);
			KLOG_INFO("topics", "finished deleting topic %s (id %s): registry entry removed", t.name, t.id);
		}
		kt__ent_free(e);
		if (r < 0) {
			if (!first_err)
				first_err = r;
			continue;
		}
		int frc = kt__finish_delete(reg, t.name, t.id, call_hooks, whole || !reg->o.controller_deletes, tl);
		if (frc && !first_err)
			first_err = frc;
	}
	sub_names_free(names, n);
	return first_err;
}

int kt__redrive_tombstones(kt_topics *reg, int call_hooks, const char *only, trash_list *tl)
{
	return redrive(reg, call_hooks, only, NULL, 0, tl);
}

int kt__tomb_pending(kt_topics *reg, const char *name)
{
	kt_tombstone *v = NULL;
	size_t n = 0;
	int rc = kt_topics_tombstones(reg, &v, &n);
	if (rc)
		return rc;
	int found = 0;
	for (size_t i = 0; i < n && !found; i++)
		found = strcmp(v[i].name, name) == 0;
	free(v);
	return found;
}

int kt_topics_delete_finish(kt_topics *reg, const char *name, const char *id)
{
	char msg[160], parsed[KAAS_TOPIC_ID_LEN + 1];
	if (kt_topic_name_check(name, (int32_t)strlen(name), msg, sizeof(msg)) || kt_topic_id_parse(id, parsed, NULL))
		return -EINVAL;
	/* Never wait behind a create that waits for its partitions to be led:
	 * the caller is the cluster loop that leads them. */
	if (pthread_mutex_trylock(&reg->op) != 0)
		return -EBUSY;
	trash_list tl = {0};
	int rc = redrive(reg, 0, name, parsed, 1, &tl);
	pthread_mutex_unlock(&reg->op);
	kt__trash_remove(reg, &tl);
	return rc;
}

int kt_topics_tick(kt_topics *reg)
{
	drop_list drops = {0};
	trash_list tl = {0};
	int first_err = 0, rc;
	int64_t now = ku_mono_ms();
	pthread_mutex_lock(&reg->op);
	if (reg->ticked && now - reg->last_tick_mono < reg->o.refresh_ms) {
		pthread_mutex_unlock(&reg->op);
		return 0;
	}
	reg->ticked = 1;
	reg->last_tick_mono = now;
	rc = refresh_locked(reg, &drops);
	if (rc && !first_err)
		first_err = rc;
	for (size_t i = 0; i < drops.n; i++) {
		/* In a cluster, a newer incarnation registered under the name is
		 * learnt by the cluster loop at any moment, and the drop hook goes
		 * by name: it would close the new one's partitions.  The partition
		 * table lets go of the old one itself when it learns the new. */
		pthread_rwlock_rdlock(&reg->lock);
		topic_ent *cur = kt__mem_find(reg, drops.v[i].name);
		int newer = reg->o.controller_deletes && cur && strcmp(cur->info.id, drops.v[i].id) != 0;
		pthread_rwlock_unlock(&reg->lock);
		if (newer)
			continue;
		rc = kt__hook_dropped(reg, drops.v[i].name, drops.v[i].id);
		if (rc) {
			KLOG_WARN("topics", "topic %s: closing its partitions failed (%s)", drops.v[i].name, sub_strerror(rc));
			if (!first_err)
				first_err = rc;
		}
	}
	rc = kt__redrive_tombstones(reg, 1, NULL, &tl);
	if (rc && !first_err)
		first_err = rc;
	kt__claims_expire(reg);
	/* Registered topics whose directory or partitions are not in place yet. */
	kt_topic_info *todo = NULL;
	size_t ntodo = 0;
	pthread_rwlock_rdlock(&reg->lock);
	todo = malloc((reg->n ? reg->n : 1) * sizeof(*todo));
	if (todo)
		for (size_t i = 0; i < reg->n; i++)
			if (!reg->ents[i]->dir_ready || reg->ents[i]->unsynced)
				todo[ntodo++] = reg->ents[i]->info;
	pthread_rwlock_unlock(&reg->lock);
	for (size_t i = 0; i < ntodo; i++) {
		rc = kt__prepare_dir_locked(reg, &todo[i], &tl);
		if (rc == 0)
			rc = kt__hook_changed(reg, todo[i].name);
		if (rc && !first_err)
			first_err = rc;
	}
	free(todo);
	pthread_mutex_unlock(&reg->op);
	free(drops.v);
	kt__trash_remove(reg, &tl);
	rc = kt__trash_sweep(reg);
	if (rc && !first_err)
		first_err = rc;
	return first_err;
}
