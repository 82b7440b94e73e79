/*
 * reg_ops.c — the Kafka-facing registry operations: create (and Metadata's
 * auto-create), delete, CreatePartitions, AlterConfigs, DescribeConfigs.
 * Every mutation runs under the registry's op mutex; docs/topics.md has the
 * steps of each and why they are safe.
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
#include <unistd.h>

#include "kaas/topics/registry_int.h"
#include "util/clock.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* ---- create ------------------------------------------------------------------------------------ */

/* What is at CLUSTER/topics/<name>.json, for a creator.  Returns KERR_NONE
 * when the name is free (possibly after reclaiming an abandoned claim), or
 * the error for the client. */
static int16_t name_free_for_create(kt_topics *reg, const char *name, char *msg, size_t msglen)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		topic_ent *e = NULL;
		sub_stat st;
		char why[128], path[SUB_PATH_MAX];
		int rc = kt__reg_read(reg, name, &e, &st, why, sizeof(why));
		if (rc < 0)
			return kt__storage_fail(msg, msglen, "reading the topic registry", rc);
		if (rc == RF_MISSING)
			return KERR_NONE;
		if (rc == RF_OK) {
			pthread_rwlock_wrlock(&reg->lock);
			kt__mem_merge(reg, e); /* learn it: lookups now find it */
			pthread_rwlock_unlock(&reg->lock);
			snprintf(msg, msglen, "Topic '%s' already exists.", name);
			return KERR_TOPIC_ALREADY_EXISTS;
		}
		if (rc == RF_CORRUPT) {
			snprintf(msg, msglen, "Topic '%s' has a registry entry kaas cannot read (%s); an operator must "
				 "repair or remove it", name, why);
			KLOG_ERR("topics", "topic %s: registry file invalid: %s", name, why);
			return KERR_TOPIC_ALREADY_EXISTS;
		}
		kt__reg_path(path, sizeof(path), name);
		if (!kt__claim_abandoned(reg, path, &st)) {
			snprintf(msg, msglen, "Topic '%s' is being created by another client (an incomplete claim "
				 "is reclaimed after %" PRId64 " ms if its creator died)", name, reg->o.claim_grace_ms);
			return KERR_TOPIC_ALREADY_EXISTS;
		}
		rc = kt__reclaim_claim(reg, name);
		if (rc)
			return kt__storage_fail(msg, msglen, "reclaiming an abandoned registry claim", rc);
	}
	snprintf(msg, msglen, "Topic '%s' is being created concurrently; retry", name);
	return KERR_TOPIC_ALREADY_EXISTS;
}

/* The registry holds the topic (or its new partition count), but the
 * partition table could not lead every partition (out of descriptors, a
 * volume error): say so instead of answering success.  The topic stays, and
 * the broker's upkeep re-drives the partitions that failed. */
static int16_t not_led(const char *name, int rc, char *msg, size_t msglen)
{
	snprintf(msg, msglen,
		 "Topic %s is in the registry, but this broker could not lead all of its partitions (%s); "
		 "they are retried by the broker's upkeep", name, sub_strerror(rc));
	return KERR_KAFKA_STORAGE_ERROR;
}

static int16_t create_locked(kt_topics *reg, const char *name, int32_t partitions, const kt_tcfg_set *ov,
			     int validate_only, kt_topic_info *out, char *msg, size_t msglen, trash_list *tl,
			     int *pending)
{
	/* Kafka refuses names that differ only in '.' vs '_' (their metrics
	 * collide).  Best effort: checked against what this broker knows. */
	pthread_rwlock_rdlock(&reg->lock);
	for (size_t i = 0; i < reg->n; i++) {
		const char *other = reg->ents[i]->info.name;
		if (strcmp(other, name) != 0 && kt_topic_names_collide(other, name)) {
			snprintf(msg, msglen, "Topic '%s' collides with existing topic: %s", name, other);
			pthread_rwlock_unlock(&reg->lock);
			return KERR_INVALID_TOPIC_EXCEPTION;
		}
	}
	pthread_rwlock_unlock(&reg->lock);

	/* A directory holding records that no readable registry entry names
	 * (the entry was lost or damaged) is that topic: it is re-adopted, never
	 * replaced by a new incarnation that would reclaim its data. */
	int arc = validate_only ? 0 : kt__adopt_from_volume(reg, name);
	if (arc < 0)
		return kt__storage_fail(msg, msglen, "checking DATA/<topic> for a topic to re-adopt", arc);
	if (arc > 0) {
		kt_topic_info info;
		int have = 0;
		pthread_rwlock_rdlock(&reg->lock);
		topic_ent *m = kt__mem_find(reg, name);
		if (m) {
			info = m->info;
			have = 1;
		}
		pthread_rwlock_unlock(&reg->lock);
		if (have && kt__prepare_dir_locked(reg, &info, tl) == 0)
			kt__hook_changed(reg, name); /* else the tick re-drives both */
		snprintf(msg, msglen, "Topic '%s' already exists (its registry entry was rebuilt from its data "
			 "directory).", name);
		return KERR_TOPIC_ALREADY_EXISTS;
	}
	int16_t err = name_free_for_create(reg, name, msg, msglen);
	if (err != KERR_NONE || validate_only)
		return err;
	/* A delete of an earlier incarnation that has not finished (its
	 * partitions not yet closed) is finished first, so the new topic never
	 * meets the old one's open partitions. */
	int rc = kt__redrive_tombstones(reg, 1, name, tl);
	if (rc) {
		snprintf(msg, msglen, "Topic '%s': the delete of its previous incarnation has not completed (%s); retry",
			 name, sub_strerror(rc));
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	/* In a cluster the controller finishes that delete once every broker
	 * closed the old partitions; until then the name is not free (its
	 * directory still holds the old incarnation). */
	rc = reg->o.controller_deletes ? kt__tomb_pending(reg, name) : 0;
	if (rc < 0)
		return kt__storage_fail(msg, msglen, "reading the pending deletes", rc);
	if (rc > 0) {
		*pending = 1;
		snprintf(msg, msglen, "Topic '%s' is marked for deletion.", name);
		return KERR_TOPIC_ALREADY_EXISTS;
	}

	topic_ent *e = calloc(1, sizeof(*e));
	char *json = NULL, path[SUB_PATH_MAX];
	if (!e || kt_tcfg_set_copy(&e->ov, ov)) {
		kt__ent_free(e);
		return kt__storage_fail(msg, msglen, "creating the topic", -ENOMEM);
	}
	snprintf(e->info.name, sizeof(e->info.name), "%s", name);
	rc = kt_topic_id_new(e->info.id, e->info.id_bytes);
	e->info.partitions = partitions;
	e->info.created_ms = ku_wall_ms();
	kt__ent_fill_info(reg, e);
	if (rc == 0 && !(json = kt__ent_json(e)))
		rc = -ENOMEM;
	if (rc) {
		kt__ent_free(e);
		return kt__storage_fail(msg, msglen, "creating the topic", rc);
	}
	kt__reg_path(path, sizeof(path), name);
	rc = sub_create_excl(reg->o.cluster, path, json, strlen(json));
	free(json);
	if (rc == -EEXIST) {
		kt__ent_free(e);
		/* Lost the race to another creator (here or on another host). */
		err = name_free_for_create(reg, name, msg, msglen);
		if (err == KERR_NONE)
			snprintf(msg, msglen, "Topic '%s' was created and deleted concurrently; retry", name);
		return err == KERR_NONE ? KERR_TOPIC_ALREADY_EXISTS : err;
	}
	if (rc) {
		kt__ent_free(e);
		return kt__storage_fail(msg, msglen, "claiming the topic name in the registry", rc);
	}
	/* Read it back: a reclaimer that judged an empty claim abandoned could
	 * have moved ours aside if we stalled for longer than the grace period
	 * before writing.  Only a claim that reads back as ours is ours. */
	topic_ent *back = NULL;
	sub_stat st;
	char why[128];
	rc = kt__reg_read(reg, name, &back, &st, why, sizeof(why));
	if (rc != RF_OK || strcmp(back->info.id, e->info.id) != 0) {
		kt__ent_free(back);
		kt__ent_free(e);
		snprintf(msg, msglen, "Topic '%s': the registry claim was lost while it was being written; retry", name);
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	e->f_ino = back->f_ino;
	e->f_size = back->f_size;
	e->f_mtime = back->f_mtime;
	kt__ent_free(back);
	KLOG_INFO("topics", "created topic %s (id %s, %d partitions)", name, e->info.id, e->info.partitions);
	kt_topic_info info = e->info;
	pthread_rwlock_wrlock(&reg->lock);
	e->unsynced = 1;
	rc = kt__mem_put(reg, e);
	pthread_rwlock_unlock(&reg->lock);
	if (rc)
		kt__ent_free(e);
	if (out)
		*out = info;
	/* The topic exists from here on; the rest is re-driven if it fails. */
	rc = kt__prepare_dir_locked(reg, &info, tl);
	if (rc)
		KLOG_ERR("topics", "topic %s: preparing DATA/%s failed (%s); retried by the tick", name, name,
			 sub_strerror(rc));
	else if ((rc = kt__hook_changed(reg, name)))
		return not_led(name, rc, msg, msglen);
	return KERR_NONE;
}

static int16_t reserved_check(kt_topics *reg, const char *name, char *msg, size_t msglen)
{
	if (reg->reserved[0] && strcmp(name, reg->reserved) == 0) {
		snprintf(msg, msglen, "Topic name '%s' is reserved: kaas keeps its cluster directory under that name",
			 name);
		return KERR_INVALID_TOPIC_EXCEPTION;
	}
	return KERR_NONE;
}

static int16_t create_waiting(kt_topics *reg, const kt_topic_spec *spec, int validate_only, kt_topic_info *out,
			      char *msg, size_t msglen, int64_t wait_ms)
{
	char name[KAAS_TOPIC_NAME_MAX + 1];
	int16_t err = kt_topic_name_check(spec->name.s, spec->name.len, msg, msglen);
	if (err)
		return err;
	memcpy(name, spec->name.s, (size_t)spec->name.len);
	name[spec->name.len] = '\0';
	if ((err = reserved_check(reg, name, msg, msglen)))
		return err;
	int32_t parts = spec->partitions == -1 ? kt__num_partitions(reg) : spec->partitions;
	if (parts < 1 || parts > KAAS_TOPIC_PARTITIONS_MAX) {
		if (parts < 1)
			snprintf(msg, msglen, "Number of partitions must be larger than 0 (or -1 for num.partitions).");
		else
			snprintf(msg, msglen, "Number of partitions %d exceeds the maximum of %d per topic.", parts,
				 KAAS_TOPIC_PARTITIONS_MAX);
		return KERR_INVALID_PARTITIONS;
	}
	if (spec->replication_factor < 1 && spec->replication_factor != -1) {
		snprintf(msg, msglen, "Replication factor must be larger than 0 (or -1 for the default).");
		return KERR_INVALID_REPLICATION_FACTOR;
	}
	kt_tcfg_set ov = KAAS_TCFG_SET_INIT;
	if ((err = kt_tcfg_set_from_kv(&ov, spec->configs, spec->nconfigs, msg, msglen)))
		return err;
	trash_list tl = {0};
	int64_t deadline = ku_mono_ms() + wait_ms;
	for (;;) {
		int pending = 0;
		pthread_mutex_lock(&reg->op);
		err = create_locked(reg, name, parts, &ov, validate_only, out, msg, msglen, &tl, &pending);
		pthread_mutex_unlock(&reg->op);
		kt__trash_remove(reg, &tl);
		/* Waited for without the lock: the controller of this very process
		 * needs it to finish the old delete. */
		if (!pending || ku_mono_ms() >= deadline)
			break;
		usleep(50000); /* each look reads the registry file and DATA/<name> */
	}
	kt_tcfg_set_free(&ov);
	if (err == KERR_NONE)
		msg[0] = '\0';
	return err;
}

int16_t kt_topics_create(kt_topics *reg, const kt_topic_spec *spec, int validate_only, kt_topic_info *out,
			   char *msg, size_t msglen)
{
	return create_waiting(reg, spec, validate_only, out, msg, msglen, reg->o.delete_wait_ms);
}

int16_t kt_topics_auto_create(kt_topics *reg, kw_str name, kt_topic_info *out)
{
	char msg[256];
	int rc = kt_topics_lookup(reg, name.s, name.len, out);
	if (rc == 0)
		return KERR_NONE;
	if (rc == -EINVAL)
		return KERR_INVALID_TOPIC_EXCEPTION;
	kt_topic_spec spec = {name, -1, -1, NULL, 0};
	/* Never waits for a pending delete: Metadata answers LEADER_NOT_AVAILABLE
	 * and the client asks again. */
	int16_t err = create_waiting(reg, &spec, 0, out, msg, sizeof(msg), 0);
	if (err == KERR_NONE || err == KERR_INVALID_TOPIC_EXCEPTION)
		return err;
	if (err == KERR_TOPIC_ALREADY_EXISTS && kt_topics_lookup(reg, name.s, name.len, out) == 0)
		return KERR_NONE;
	KLOG_DEBUG("topics", "auto-create: %s", msg);
	return KERR_LEADER_NOT_AVAILABLE;
}

/* ---- delete ------------------------------------------------------------------------------------- */

static int tomb_write(kt_topics *reg, const char *name, const char *id)
{
	char path[SUB_PATH_MAX], buf[512];
	snprintf(path, sizeof(path), TOMB_DIR "/%s.json", id);
	int n = snprintf(buf, sizeof(buf),
			 "{\"version\":1,\"name\":\"%s\",\"topic_id\":\"%s\",\"deleted_ms\":%" PRId64 "}\n", name, id,
			 ku_wall_ms());
	return sub_write_atomic(reg->o.cluster, path, buf, (size_t)n);
}

static int tomb_remove(kt_topics *reg, const char *id)
{
	char path[SUB_PATH_MAX];
	snprintf(path, sizeof(path), TOMB_DIR "/%s.json", id);
	int rc = sub_unlink(reg->o.cluster, path);
	if (rc == -ENOENT)
		return 0;
	return rc ? rc : sub_fsync_dir(reg->o.cluster, TOMB_DIR);
}

/* The part of a delete after the registry entry is gone: close the
 * partitions, record the ID as deleted, move the directory to the trash when
 * (and only when) its stamp is the deleted ID, drop the tombstone (the last
 * two only when `whole`: in a cluster they are the controller's).
 * Idempotent; the tick re-drives it from the tombstone until it completes. */
int kt__finish_delete(kt_topics *reg, const char *name, const char *id, int call_hooks, int whole, trash_list *tl)
{
	/* If a newer incarnation is registered, its creator already finished
	 * this delete's drop (create re-drives pending deletes of its name
	 * first): the partitions open under this name are the new topic's. */
	pthread_rwlock_rdlock(&reg->lock);
	topic_ent *cur = kt__mem_find(reg, name);
	if (cur && strcmp(cur->info.id, id) != 0)
		call_hooks = 0;
	pthread_rwlock_unlock(&reg->lock);
	int rc = call_hooks ? kt__hook_dropped(reg, name, id) : 0;
	if (rc) {
		KLOG_WARN("topics", "topic %s: closing its partitions failed (%s); retried by the tick", name,
			  sub_strerror(rc));
		return rc;
	}
	/* The lasting record that this incarnation is gone: the evidence a
	 * later reclaim of a directory stamped with it needs (reg_ident.c). */
	rc = kt__deleted_record(reg, name, id);
	if (rc) {
		KLOG_WARN("topics", "topic %s: recording the deleted id failed (%s); retried by the tick", name,
			  sub_strerror(rc));
		return rc;
	}
	/* In a cluster other brokers may still hold descriptors under
	 * DATA/<name>/: the controller renames it once all let go. */
	if (!whole)
		return 0;
	char sid[KAAS_TOPIC_ID_LEN + 1];
	rc = kt__stamp_read(reg, name, sid);
	if (rc == 0 && strcmp(sid, id) == 0) {
		rc = kt__move_to_trash(reg, name, id, "deleted", tl);
		if (rc == -ENOENT)
			rc = 0;
	} else if (rc == 0) {
		KLOG_WARN("topics", "topic %s (id %s) deleted: DATA/%s is stamped with another id (%s), so it is left "
			  "in place", name, id, name, sid);
		rc = 0; /* a newer incarnation owns it, or an operator put it there */
	} else if (rc == -ENOENT) {
		sub_stat st;
		if (sub_stat_path(reg->o.data, name, &st) == 0)
			KLOG_WARN("topics", "topic %s deleted: DATA/%s has no stamp, so it is left in place (unknown "
				  "identity is never deleted)", name, name);
		rc = 0;
	} else if (rc == -EBADMSG) {
		KLOG_WARN("topics", "topic %s deleted: DATA/%s has an unreadable stamp; left in place", name, name);
		rc = 0;
	} else if (rc == -ENOTDIR) {
		rc = 0;
	}
	if (rc) {
		KLOG_WARN("topics", "topic %s: moving its directory aside failed (%s); retried by the tick", name,
			  sub_strerror(rc));
		return rc;
	}
	return tomb_remove(reg, id);
}

/* The client is answered once the deletes finished on every broker, or
 * after delete_wait_ms; the topics are gone for clients either way, and the
 * controller finishes the rest. */
void kt_topics_delete_wait(kt_topics *reg, const char (*ids)[KAAS_TOPIC_ID_LEN + 1], size_t n)
{
	if (!reg->o.controller_deletes)
		return;
	int64_t t0 = ku_mono_ms(), deadline = t0 + reg->o.delete_wait_ms;
	size_t first = 0, waited = 0; /* ids before `first` are finished */
	for (;;) {
		int rc = -ENOENT;
		for (; first < n; first++) {
			char path[SUB_PATH_MAX];
			sub_stat st;
			if (!ids[first][0])
				continue;
			snprintf(path, sizeof(path), TOMB_DIR "/%s.json", ids[first]);
			if ((rc = sub_stat_path(reg->o.cluster, path, &st)) != -ENOENT)
				break;
			waited++;
		}
		if (first == n)
			break;
		if (ku_mono_ms() >= deadline) {
			KLOG_WARN("topics", "the delete of topic id %s has not finished after %" PRId64 " ms (%s); the "
				  "controller finishes it once every broker closed the partitions", ids[first],
				  reg->o.delete_wait_ms, rc ? sub_strerror(rc) : "tombstone still there");
			return;
		}
		usleep(20000);
	}
	if (waited)
		KLOG_INFO("topics", "%zu delete(s) finished on every broker after %" PRId64 " ms", waited,
			  ku_mono_ms() - t0);
}

int16_t kt_topics_delete(kt_topics *reg, kw_str name, char *msg, size_t msglen)
{
	char id[1][KAAS_TOPIC_ID_LEN + 1];
	int16_t err = kt_topics_delete_start(reg, name, id[0], msg, msglen);
	if (err == KERR_NONE)
		kt_topics_delete_wait(reg, (const char(*)[KAAS_TOPIC_ID_LEN + 1])id, 1);
	return err;
}

int16_t kt_topics_delete_start(kt_topics *reg, kw_str name, char id_out[KAAS_TOPIC_ID_LEN + 1], char *msg,
				 size_t msglen)
{
	id_out[0] = '\0';
	char nm[KAAS_TOPIC_NAME_MAX + 1], path[SUB_PATH_MAX], why[128];
	int16_t err = kt_topic_name_check(name.s, name.len, msg, msglen);
	if (err)
		return err;
	memcpy(nm, name.s, (size_t)name.len);
	nm[name.len] = '\0';
	trash_list tl = {0};
	pthread_mutex_lock(&reg->op);
	topic_ent *e = NULL;
	sub_stat st;
	int rc = kt__reg_read(reg, nm, &e, &st, why, sizeof(why));
	if (rc < 0) {
		err = kt__storage_fail(msg, msglen, "reading the topic registry", rc);
		goto out;
	}
	if (rc != RF_OK) {
		if (rc == RF_CORRUPT)
			KLOG_ERR("topics", "delete %s: registry file invalid (%s); not touching it", nm, why);
		pthread_rwlock_wrlock(&reg->lock);
		kt__mem_remove(reg, nm); /* forget a stale memory entry, if any */
		pthread_rwlock_unlock(&reg->lock);
		snprintf(msg, msglen, "This server does not host this topic-partition.");
		err = KERR_UNKNOWN_TOPIC_OR_PARTITION;
		goto out;
	}
	char id[KAAS_TOPIC_ID_LEN + 1];
	snprintf(id, sizeof(id), "%s", e->info.id);
	/* 1. the tombstone names the incarnation being deleted, so every later
	 *    step can be re-driven and can tell it from a newer topic; */
	rc = tomb_write(reg, nm, id);
	if (rc) {
		err = kt__storage_fail(msg, msglen, "recording the delete", rc);
		goto out;
	}
	/* 2. the registry entry goes: from here the topic does not exist; */
	kt__reg_path(path, sizeof(path), nm);
	rc = sub_unlink(reg->o.cluster, path);
	if (rc == 0 || rc == -ENOENT)
		rc = sub_fsync_dir(reg->o.cluster, REG_DIR);
	if (rc) {
		err = kt__storage_fail(msg, msglen, "removing the registry entry", rc);
		goto out;
	}
	pthread_rwlock_wrlock(&reg->lock);
	kt__mem_remove(reg, nm);
	pthread_rwlock_unlock(&reg->lock);
	KLOG_INFO("topics", "deleted topic %s (id %s)", nm, id);
	snprintf(id_out, KAAS_TOPIC_ID_LEN + 1, "%s", id);
	/* 3. partitions closed, directory moved aside, tombstone dropped (in a
	 *    cluster: this broker's partitions closed; the rest is the
	 *    controller's, once every broker closed them). */
	kt__finish_delete(reg, nm, id, 1, !reg->o.controller_deletes, &tl);
	err = KERR_NONE;
	msg[0] = '\0';
out:
	pthread_mutex_unlock(&reg->op);
	kt__ent_free(e);
	kt__trash_remove(reg, &tl);
	return err;
}

/* ---- rewrites: CreatePartitions, AlterConfigs ------------------------------------------------- */

/* Re-reads the entry (the volume is the truth), lets `edit` change it and
 * writes it back with write_atomic.  Called with reg->op held. */
static int16_t rewrite_locked(kt_topics *reg, const char *name, int (*edit)(topic_ent *, void *, char *, size_t),
			      void *arg, int validate_only, char *msg, size_t msglen)
{
	topic_ent *e = NULL;
	sub_stat st;
	char why[128], path[SUB_PATH_MAX];
	int rc = kt__reg_read(reg, name, &e, &st, why, sizeof(why));
	if (rc < 0)
		return kt__storage_fail(msg, msglen, "reading the topic registry", rc);
	if (rc != RF_OK) {
		if (rc == RF_CORRUPT) {
			snprintf(msg, msglen, "Topic '%s' has a registry entry kaas cannot read (%s)", name, why);
			return KERR_UNKNOWN_SERVER_ERROR;
		}
		snprintf(msg, msglen, "Topic '%s' does not exist.", name);
		return KERR_UNKNOWN_TOPIC_OR_PARTITION;
	}
	/* Never shrink: a concurrent rewrite elsewhere may have read an older
	 * count; what this broker has seen for the same ID is kept. */
	pthread_rwlock_rdlock(&reg->lock);
	topic_ent *m = kt__mem_find(reg, name);
	if (m && strcmp(m->info.id, e->info.id) == 0 && m->info.partitions > e->info.partitions)
		e->info.partitions = m->info.partitions;
	pthread_rwlock_unlock(&reg->lock);

	rc = edit(e, arg, msg, msglen);
	if (rc) {
		kt__ent_free(e);
		return (int16_t)rc;
	}
	if (validate_only) {
		kt__ent_free(e);
		return KERR_NONE;
	}
	e->generation++;
	kt__ent_fill_info(reg, e);
	char *json = kt__ent_json(e);
	if (!json) {
		kt__ent_free(e);
		return kt__storage_fail(msg, msglen, "writing the registry entry", -ENOMEM);
	}
	kt__reg_path(path, sizeof(path), name);
	/* Narrow the read-modify-write window: if the file was replaced since
	 * it was read (another broker rewrote it, or deleted and re-created the
	 * topic), do not write over it with what was read. */
	sub_stat now;
	rc = sub_stat_path(reg->o.cluster, path, &now);
	if (rc == -ENOENT) {
		free(json);
		kt__ent_free(e);
		snprintf(msg, msglen, "Topic '%s' does not exist.", name);
		return KERR_UNKNOWN_TOPIC_OR_PARTITION;
	}
	if (rc == 0 && (now.ino != e->f_ino || now.size != e->f_size || now.mtime_ns != e->f_mtime)) {
		free(json);
		kt__ent_free(e);
		snprintf(msg, msglen, "Topic '%s' was changed concurrently; retry", name);
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	if (rc == 0)
		rc = sub_write_atomic(reg->o.cluster, path, json, strlen(json));
	free(json);
	if (rc) {
		kt__ent_free(e);
		return kt__storage_fail(msg, msglen, "writing the registry entry", rc);
	}
	if (sub_stat_path(reg->o.cluster, path, &st) == 0) {
		e->f_ino = st.ino;
		e->f_size = st.size;
		e->f_mtime = st.mtime_ns;
	}
	pthread_rwlock_wrlock(&reg->lock);
	rc = kt__mem_merge(reg, e);
	pthread_rwlock_unlock(&reg->lock);
	if (rc > 0 && (rc = kt__hook_changed(reg, name)))
		return not_led(name, rc, msg, msglen);
	return KERR_NONE;
}

static int edit_partitions(topic_ent *e, void *arg, char *msg, size_t msglen)
{
	int32_t count = *(int32_t *)arg;
	if (count > KAAS_TOPIC_PARTITIONS_MAX) {
		snprintf(msg, msglen, "Number of partitions %d exceeds the maximum of %d per topic.", count,
			 KAAS_TOPIC_PARTITIONS_MAX);
		return KERR_INVALID_PARTITIONS;
	}
	if (count == e->info.partitions) {
		snprintf(msg, msglen, "Topic already has %d partitions.", e->info.partitions);
		return KERR_INVALID_PARTITIONS;
	}
	if (count < e->info.partitions) {
		snprintf(msg, msglen, "Topic currently has %d partitions, which is higher than the requested %d.",
			 e->info.partitions, count);
		return KERR_INVALID_PARTITIONS;
	}
	e->info.partitions = count;
	return 0;
}

static int edit_configs(topic_ent *e, void *arg, char *msg, size_t msglen)
{
	(void)msg;
	(void)msglen;
	if (kt_tcfg_set_copy(&e->ov, arg))
		return KERR_UNKNOWN_SERVER_ERROR;
	return 0;
}

static int16_t named_op_prologue(kw_str name, char nm[KAAS_TOPIC_NAME_MAX + 1], char *msg, size_t msglen)
{
	int16_t err = kt_topic_name_check(name.s, name.len, msg, msglen);
	if (err)
		return err;
	memcpy(nm, name.s, (size_t)name.len);
	nm[name.len] = '\0';
	return KERR_NONE;
}

int16_t kt_topics_add_partitions(kt_topics *reg, kw_str name, int32_t count, int validate_only, char *msg,
				   size_t msglen)
{
	char nm[KAAS_TOPIC_NAME_MAX + 1];
	int16_t err = named_op_prologue(name, nm, msg, msglen);
	if (err)
		return err;
	pthread_mutex_lock(&reg->op);
	err = rewrite_locked(reg, nm, edit_partitions, &count, validate_only, msg, msglen);
	pthread_mutex_unlock(&reg->op);
	if (err == KERR_NONE) {
		msg[0] = '\0';
		if (!validate_only)
			KLOG_INFO("topics", "topic %s now has %d partitions", nm, count);
	}
	return err;
}

int16_t kt_topics_alter_configs(kt_topics *reg, kw_str name, const kt_config_kv *kv, size_t n,
				  int validate_only, char *msg, size_t msglen)
{
	char nm[KAAS_TOPIC_NAME_MAX + 1];
	int16_t err = named_op_prologue(name, nm, msg, msglen);
	if (err)
		return err;
	kt_tcfg_set ov = KAAS_TCFG_SET_INIT;
	if ((err = kt_tcfg_set_from_kv(&ov, kv, n, msg, msglen)))
		return err;
	pthread_mutex_lock(&reg->op);
	err = rewrite_locked(reg, nm, edit_configs, &ov, validate_only, msg, msglen);
	pthread_mutex_unlock(&reg->op);
	kt_tcfg_set_free(&ov);
	if (err == KERR_NONE)
		msg[0] = '\0';
	return err;
}

int16_t kt_topics_describe_configs(kt_topics *reg, kw_str name, kt_config_list *out, char *msg,
				     size_t msglen)
{
	char nm[KAAS_TOPIC_NAME_MAX + 1];
	int16_t err = named_op_prologue(name, nm, msg, msglen);
	if (err)
		return err;
	kt_topic_info info;
	int rc = kt_topics_lookup(reg, nm, name.len, &info);
	if (rc == -ENOENT) {
		snprintf(msg, msglen, "Topic '%s' does not exist.", nm);
		return KERR_UNKNOWN_TOPIC_OR_PARTITION;
	}
	if (rc)
		return kt__storage_fail(msg, msglen, "reading the topic registry", rc);
	kt_tcfg_set ov = KAAS_TCFG_SET_INIT;
	pthread_rwlock_rdlock(&reg->lock);
	topic_ent *e = kt__mem_find(reg, nm);
	rc = e ? kt_tcfg_set_copy(&ov, &e->ov) : -ENOENT;
	pthread_rwlock_unlock(&reg->lock);
	ks_log_config defaults;
	kt_topics_defaults(reg, &defaults);
	if (rc == 0)
		rc = kt_tcfg_describe(&ov, &defaults, out);
	kt_tcfg_set_free(&ov);
	if (rc == -ENOENT) {
		snprintf(msg, msglen, "Topic '%s' does not exist.", nm);
		return KERR_UNKNOWN_TOPIC_OR_PARTITION;
	}
	if (rc)
		return kt__storage_fail(msg, msglen, "describing configs", rc);
	msg[0] = '\0';
	return KERR_NONE;
}
