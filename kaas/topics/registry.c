/*
 * registry.c — the topic registry: CLUSTER/topics/<name>.json on the volume,
 * a sorted array of topics in memory.
 *
 * Two locks.  `lock` (a rwlock) guards the in-memory view and is only held
 * for memory work, so lookups never wait for the volume.  `op` (a mutex)
 * serialises every mutation and the tick on this broker, so create, delete,
 * alter and the re-drivers of one process never interleave; between brokers
 * the volume's two atomic primitives and the rules in docs/topics.md decide.
 *
 * Paths (docs/formats.md):
 *   CLUSTER/topics/<name>.json            the registry entry (create_excl, then write_atomic)
 *   CLUSTER/topics/~abandoned-<hex>       an abandoned claim being reclaimed
 *   CLUSTER/topics/~lost-<hex>            a claim that could not be put back (operator)
 *   CLUSTER/deleted-topics/<id>.json      a delete in progress (tombstone)
 *   DATA/<name>/.topic-id.json            the directory's stamp
 *   CLUSTER/deleted-ids/<id>.json         an incarnation that was deleted (kept)
 *   DATA/~trash-<ms>-<id>-<hex>-<name>    a deleted or reclaimed directory (trash.h)
 *   DATA/~quarantine-...                  a directory of unknown identity (kept)
 * '~' is not in Kafka's topic alphabet, so these never collide with a topic.
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
#include "util/hex.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* ---- small helpers ----------------------------------------------------------- */

int kt__rand_hex(char *dst, size_t n) /* n hex digits + NUL */
{
	uint8_t b[16];
	if (n > 32 || getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return -EIO;
	for (size_t i = 0; i < n; i++)
		dst[i] = ku_hex_char(b[i / 2] >> ((i & 1) ? 0 : 4));
	dst[n] = '\0';
	return 0;
}

void kt__reg_path(char *dst, size_t len, const char *name)
{
	snprintf(dst, len, REG_DIR "/%s.json", name);
}

int16_t kt__storage_fail(char *msg, size_t msglen, const char *what, int rc)
{
	snprintf(msg, msglen, "%s failed on the volume: %s", what, sub_strerror(rc));
	KLOG_ERR("topics", "%s failed: %s", what, sub_strerror(rc));
	return KERR_UNKNOWN_SERVER_ERROR;
}

/* ---- topic entries --------------------------------------------------------------- */

void kt__ent_free(topic_ent *e)
{
	if (!e)
		return;
	kt_tcfg_set_free(&e->ov);
	free(e);
}

void kt__ent_fill_info(kt_topics *reg, topic_ent *e)
{
	ks_log_config d;
	kt_topics_defaults(reg, &d);
	kt_tcfg_apply(&e->ov, &d, &e->info.cfg);
	e->info.overrides = e->ov.set;
	e->info.replication_factor = 1;
}

/* Parses a registry file.  RF_INCOMPLETE: not a JSON object at all (empty,
 * short, zero-filled: a claim whose content never made it).  RF_CORRUPT: a
 * JSON object that is not a valid entry (never reclaimed automatically). */
int kt__ent_parse(kt_topics *reg, const char *name, const char *buf, size_t len, topic_ent **out, char *why,
		     size_t whylen)
{
	json_error_t jerr;
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	topic_ent *e = NULL;
	int st = RF_CORRUPT;
	if (!root || !json_is_object(root)) {
		snprintf(why, whylen, "incomplete (%zu bytes, not a JSON object)", len);
		json_decref(root);
		return RF_INCOMPLETE;
	}
	json_t *ver = json_object_get(root, "version");
	json_t *jn = json_object_get(root, "name");
	json_t *jid = json_object_get(root, "topic_id");
	json_t *jp = json_object_get(root, "partitions");
	json_t *jc = json_object_get(root, "created_ms");
	json_t *jg = json_object_get(root, "generation");
	json_t *jcfg = json_object_get(root, "configs");
	char msg[256];
	if (!json_is_integer(ver) || json_integer_value(ver) != FORMAT_VERSION) {
		snprintf(why, whylen, "unsupported format version");
		goto out;
	}
	if (!json_is_string(jn) || (name && strcmp(json_string_value(jn), name) != 0) ||
	    kt_topic_name_check(json_string_value(jn), (int32_t)json_string_length(jn), msg, sizeof(msg))) {
		snprintf(why, whylen, "name field does not match the file name");
		goto out;
	}
	if (!(e = calloc(1, sizeof(*e)))) {
		st = -ENOMEM;
		goto out;
	}
	snprintf(e->info.name, sizeof(e->info.name), "%s", json_string_value(jn));
	if (!json_is_string(jid) || kt_topic_id_parse(json_string_value(jid), e->info.id, e->info.id_bytes)) {
		snprintf(why, whylen, "topic_id is not a UUID");
		goto out;
	}
	if (!json_is_integer(jp) || json_integer_value(jp) < 1 ||
	    json_integer_value(jp) > KAAS_TOPIC_PARTITIONS_MAX) {
		snprintf(why, whylen, "partitions out of range");
		goto out;
	}
	e->info.partitions = (int32_t)json_integer_value(jp);
	e->info.created_ms = json_is_integer(jc) ? json_integer_value(jc) : 0;
	e->generation = json_is_integer(jg) ? json_integer_value(jg) : 0;
	if (jcfg && kt_tcfg_set_from_json(&e->ov, jcfg, e->info.name) == -ENOMEM) {
		st = -ENOMEM;
		goto out;
	}
	kt__ent_fill_info(reg, e);
	*out = e;
	e = NULL;
	st = RF_OK;
out:
	kt__ent_free(e);
	json_decref(root);
	return st;
}

char *kt__ent_json(const topic_ent *e)
{
	json_t *o = json_object();
	json_t *cfg = kt_tcfg_set_to_json(&e->ov);
	char *s = NULL;
	if (!o || !cfg)
		goto out;
	if (json_object_set_new(o, "version", json_integer(FORMAT_VERSION)) ||
	    json_object_set_new(o, "name", json_string(e->info.name)) ||
	    json_object_set_new(o, "topic_id", json_string(e->info.id)) ||
	    json_object_set_new(o, "partitions", json_integer(e->info.partitions)) ||
	    json_object_set_new(o, "replication_factor", json_integer(1)) ||
	    json_object_set_new(o, "created_ms", json_integer(e->info.created_ms)) ||
	    json_object_set_new(o, "generation", json_integer(e->generation)) ||
	    json_object_set(o, "configs", cfg))
		goto out;
	s = json_dumps(o, JSON_PRESERVE_ORDER | JSON_COMPACT);
out:
	json_decref(cfg);
	json_decref(o);
	return s;
}

/* Reads CLUSTER/topics/<name>.json.  Returns RF_* or -errno; *st gets the
 * file's identity as of before the read (so a rewrite in between makes the
 * next comparison differ, never hides one). */
int kt__reg_read(kt_topics *reg, const char *name, topic_ent **out, sub_stat *st, char *why, size_t whylen)
{
	char path[SUB_PATH_MAX];
	char *buf = NULL;
	size_t len = 0;
	kt__reg_path(path, sizeof(path), name);
	*out = NULL;
	why[0] = '\0';
	int rc = sub_stat_path(reg->o.cluster, path, st);
	if (rc == 0)
		rc = sub_read_file(reg->o.cluster, path, REG_FILE_MAX, &buf, &len);
	if (rc == -ENOENT)
		return RF_MISSING;
	if (rc == -EFBIG) {
		snprintf(why, whylen, "larger than %d bytes", REG_FILE_MAX);
		return RF_CORRUPT;
	}
	if (rc)
		return rc;
	rc = kt__ent_parse(reg, name, buf, len, out, why, whylen);
	free(buf);
	if (rc == RF_OK) {
		(*out)->f_ino = st->ino;
		(*out)->f_size = st->size;
		(*out)->f_mtime = st->mtime_ns;
	}
	return rc;
}

/* ---- the in-memory view (callers hold reg->lock) ----------------------------------- */

static ssize_t find_pos(kt_topics *reg, const char *name, int *found)
{
	size_t lo = 0, hi = reg->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(reg->ents[mid]->info.name, name);
		if (c == 0) {
			*found = 1;
			return (ssize_t)mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = 0;
	return (ssize_t)lo;
}

topic_ent *kt__mem_find(kt_topics *reg, const char *name)
{
	int found;
	ssize_t i = find_pos(reg, name, &found);
	return found ? reg->ents[i] : NULL;
}

static void neg_remove(kt_topics *reg, const char *name)
{
	for (size_t i = 0; i < reg->nneg; i++) {
		if (strcmp(reg->neg[i].name, name) == 0) {
			reg->neg[i] = reg->neg[--reg->nneg];
			return;
		}
	}
}

/* Inserts or replaces (takes e over; the replaced entry is freed). */
int kt__mem_put(kt_topics *reg, topic_ent *e)
{
	int found;
	ssize_t i = find_pos(reg, e->info.name, &found);
	neg_remove(reg, e->info.name);
	reg->seq++;
	if (found) {
		kt__ent_free(reg->ents[i]);
		reg->ents[i] = e;
		return 0;
	}
	if (reg->n == reg->cap) {
		size_t ncap = reg->cap ? reg->cap * 2 : 32;
		topic_ent **nv = realloc(reg->ents, ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		reg->ents = nv;
		reg->cap = ncap;
	}
	memmove(reg->ents + i + 1, reg->ents + i, (reg->n - (size_t)i) * sizeof(*reg->ents));
	reg->ents[i] = e;
	reg->n++;
	return 0;
}

void kt__mem_remove(kt_topics *reg, const char *name)
{
	int found;
	ssize_t i = find_pos(reg, name, &found);
	reg->seq++;
	if (!found)
		return;
	kt__ent_free(reg->ents[i]);
	memmove(reg->ents + i, reg->ents + i + 1, (reg->n - (size_t)i - 1) * sizeof(*reg->ents));
	reg->n--;
}

static void neg_add(kt_topics *reg, const char *name, int64_t now)
{
	for (size_t i = 0; i < reg->nneg; i++) {
		if (strcmp(reg->neg[i].name, name) == 0) {
			reg->neg[i].mono = now;
			return;
		}
	}
	if (reg->nneg == NEG_MAX)
		reg->nneg = 0; /* crude but bounded: forget everything */
	snprintf(reg->neg[reg->nneg].name, sizeof(reg->neg[0].name), "%s", name);
	reg->neg[reg->nneg++].mono = now;
}

/* Puts a freshly read entry into memory, keeping what this process knows
 * about the same incarnation (directory readiness, hook state) and never
 * letting the partition count go down: it only grows (docs/topics.md).
 * Returns 1 when the broker must hear about it (new, grew, config changed). */
int kt__mem_merge(kt_topics *reg, topic_ent *e)
{
	topic_ent *old = kt__mem_find(reg, e->info.name);
	int notify = 1;
	if (old && strcmp(old->info.id, e->info.id) == 0) {
		e->dir_ready = old->dir_ready;
		if (e->info.partitions < old->info.partitions) {
			KLOG_ERR("topics", "topic %s: registry file shows %d partitions, fewer than the %d known; "
				 "keeping %d (partition counts only grow)", e->info.name, e->info.partitions,
				 old->info.partitions, old->info.partitions);
			e->info.partitions = old->info.partitions;
		}
		notify = old->unsynced || e->info.partitions != old->info.partitions ||
			 memcmp(&e->info.cfg, &old->info.cfg, sizeof(e->info.cfg)) != 0;
	}
	e->unsynced = notify;
	if (kt__mem_put(reg, e)) {
		kt__ent_free(e);
		return -ENOMEM;
	}
	return notify;
}

/* The entry of info's incarnation took info.cfg: clear its re-drive mark
 * unless something else changed meanwhile; lock held for writing. */
static void topic_entity_synced(kt_topics *reg, const kt_topic_info *info)
{
	topic_ent *e = kt__mem_find(reg, info->name);
	if (e && strcmp(e->info.id, info->id) == 0 && e->info.partitions == info->partitions &&
	    memcmp(&e->info.cfg, &info->cfg, sizeof(info->cfg)) == 0)
		e->unsynced = 0;
}

/* ---- options, open, close ------------------------------------------------------------ */

void kt_topics_options_init(kt_topics_options *o)
{
	memset(o, 0, sizeof(*o));
	kt_tcfg_kafka_defaults(&o->defaults);
	o->num_partitions = 1;
	o->default_replication_factor = 1;
	o->reserved_name = "__cluster";
	o->miss_ttl_ms = 1000;
	o->refresh_ms = 5000;
	o->claim_grace_ms = 30000;
	o->trash_retention_ms = 24LL * 3600 * 1000;
	o->delete_wait_ms = 10000;
}

void kt_topics_defaults(kt_topics *reg, ks_log_config *out)
{
	pthread_mutex_lock(&reg->defmu);
	*out = reg->o.defaults;
	pthread_mutex_unlock(&reg->defmu);
}

int32_t kt__num_partitions(kt_topics *reg)
{
	pthread_mutex_lock(&reg->defmu);
	int32_t n = reg->o.num_partitions;
	pthread_mutex_unlock(&reg->defmu);
	return n;
}

int kt_topics_set_defaults(kt_topics *reg, const ks_log_config *d, int32_t num_partitions)
{
	typedef struct { kt_topic_info info; int was_unsynced; } chg;
	chg *v = NULL;
	size_t nv = 0;
	int first_err = 0;
	pthread_mutex_lock(&reg->op);
	pthread_mutex_lock(&reg->defmu);
	reg->o.defaults = *d;
	if (num_partitions >= 1)
		reg->o.num_partitions = num_partitions;
	pthread_mutex_unlock(&reg->defmu);
	pthread_rwlock_wrlock(&reg->lock);
	v = calloc(reg->n ? reg->n : 1, sizeof(*v));
	for (size_t i = 0; i < reg->n; i++) {
		topic_ent *e = reg->ents[i];
		ks_log_config was = e->info.cfg;
		kt__ent_fill_info(reg, e);
		if (memcmp(&was, &e->info.cfg, sizeof(was)) == 0)
			continue;
		if (v) {
			v[nv].was_unsynced = e->unsynced;
			v[nv++].info = e->info;
		}
		e->unsynced = 1; /* re-driven by the tick if the hook below fails */
	}
	reg->seq++;
	pthread_rwlock_unlock(&reg->lock);
	for (size_t i = 0; i < nv; i++) {
		int rc = reg->o.hooks.config_changed ? reg->o.hooks.config_changed(reg->o.hooks.arg, &v[i].info)
						     : -ENOSYS;
		if (rc == 0 && !v[i].was_unsynced) {
			pthread_rwlock_wrlock(&reg->lock);
			topic_entity_synced(reg, &v[i].info);
			pthread_rwlock_unlock(&reg->lock);
		} else if (rc != -ENOSYS && !first_err) {
			first_err = rc;
		}
	}
	pthread_mutex_unlock(&reg->op);
	free(v);
	return first_err ? first_err : (int)nv;
}


int kt_topics_open(const kt_topics_options *o, kt_topics **out)
{
	*out = NULL;
	if (!o->cluster || !o->data)
		return -EINVAL;
	kt_topics *reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	reg->o = *o;
	if (o->reserved_name)
		snprintf(reg->reserved, sizeof(reg->reserved), "%s", o->reserved_name);
	reg->o.reserved_name = reg->reserved;
	if (reg->o.num_partitions < 1)
		reg->o.num_partitions = 1;
	pthread_rwlock_init(&reg->lock, NULL);
	pthread_mutex_init(&reg->defmu, NULL);
	pthread_mutex_init(&reg->op, NULL);
	reg->neg = calloc(NEG_MAX, sizeof(*reg->neg));
	if (!reg->neg) {
		kt_topics_close(reg);
		return -ENOMEM;
	}
	int rc = sub_mkdirs(reg->o.cluster, REG_DIR, 0755);
	if (rc == 0)
		rc = sub_mkdirs(reg->o.cluster, TOMB_DIR, 0755);
	if (rc == 0)
		rc = kt__load_all(reg);
	if (rc) {
		KLOG_ERR("topics", "cannot read the topic registry: %s", sub_strerror(rc));
		kt_topics_close(reg);
		return rc;
	}
	/* Start-up re-drive: finish interrupted deletes (nothing is open yet,
	 * so no hooks), re-adopt directories holding records whose registry
	 * entry is lost or unreadable, then make every registered topic's
	 * directory carry its stamp (moving proven old incarnations to the
	 * trash) before any partition opens. */
	trash_list tl = {0};
	pthread_mutex_lock(&reg->op);
	kt__redrive_tombstones(reg, 0, NULL, &tl);
	pthread_mutex_unlock(&reg->op);
	kt__adopt_orphans(reg);
	pthread_mutex_lock(&reg->op);
	for (size_t i = 0; i < reg->n; i++) {
		kt_topic_info info = reg->ents[i]->info;
		int prc = kt__prepare_dir_locked(reg, &info, &tl);
		if (prc)
			KLOG_ERR("topics", "topic %s: preparing its directory failed (%s); retried later", info.name,
				 sub_strerror(prc));
		reg->ents[i]->unsynced = 0; /* the partition table starts from kt_topics_list() */
	}
	pthread_mutex_unlock(&reg->op);
	(void)tl; /* the trash is emptied by the tick, after its retention, never while the broker starts */
	*out = reg;
	return 0;
}

void kt_topics_close(kt_topics *reg)
{
	if (!reg)
		return;
	for (size_t i = 0; i < reg->n; i++)
		kt__ent_free(reg->ents[i]);
	free(reg->ents);
	free(reg->neg);
	free(reg->claims);
	pthread_rwlock_destroy(&reg->lock);
	pthread_mutex_destroy(&reg->defmu);
	pthread_mutex_destroy(&reg->op);
	free(reg);
}

/* ---- reads ------------------------------------------------------------------------------ */

int kt__name_from(const char *s, int32_t len, char out[KAAS_TOPIC_NAME_MAX + 1])
{
	char msg[160];
	if (kt_topic_name_check(s, len, msg, sizeof(msg)) != KERR_NONE)
		return -EINVAL;
	memcpy(out, s, (size_t)len);
	out[len] = '\0';
	return 0;
}

int kt_topics_lookup(kt_topics *reg, const char *name, int32_t len, kt_topic_info *out)
{
	char nm[KAAS_TOPIC_NAME_MAX + 1];
	if (len < 0 && name)
		len = (int32_t)strnlen(name, KAAS_TOPIC_NAME_MAX + 1);
	if (kt__name_from(name, len, nm))
		return -EINVAL;
	int64_t now = ku_mono_ms();
	pthread_rwlock_rdlock(&reg->lock);
	topic_ent *e = kt__mem_find(reg, nm);
	if (e) {
		*out = e->info;
		pthread_rwlock_unlock(&reg->lock);
		return 0;
	}
	for (size_t i = 0; i < reg->nneg; i++) {
		if (strcmp(reg->neg[i].name, nm) == 0 && now - reg->neg[i].mono < reg->o.miss_ttl_ms) {
			pthread_rwlock_unlock(&reg->lock);
			return -ENOENT;
		}
	}
	uint64_t seq0 = reg->seq;
	pthread_rwlock_unlock(&reg->lock);

	/* A miss: another broker may have created it.  Read that one file. */
	sub_stat st;
	char why[128];
	topic_ent *ne = NULL;
	int rc = kt__reg_read(reg, nm, &ne, &st, why, sizeof(why));
	if (rc < 0 && rc != -ENOENT)
		return rc;
	pthread_rwlock_wrlock(&reg->lock);
	e = kt__mem_find(reg, nm);
	if (e) {
		*out = e->info;
		rc = 0;
	} else if (rc == RF_OK && reg->seq == seq0) {
		/* Seen here first: the tick prepares its directory and tells the
		 * partition table (lookups stay free of that work). */
		*out = ne->info;
		ne->unsynced = 1;
		rc = kt__mem_put(reg, ne);
		ne = NULL;
	} else if (rc == RF_OK) {
		rc = -ENOENT; /* something changed meanwhile: trust memory, retry later */
	} else {
		neg_add(reg, nm, now);
		rc = -ENOENT;
	}
	pthread_rwlock_unlock(&reg->lock);
	kt__ent_free(ne);
	return rc;
}

int kt_topics_list(kt_topics *reg, kt_topic_info **out, size_t *n)
{
	pthread_rwlock_rdlock(&reg->lock);
	kt_topic_info *v = malloc((reg->n ? reg->n : 1) * sizeof(*v));
	if (!v) {
		pthread_rwlock_unlock(&reg->lock);
		return -ENOMEM;
	}
	for (size_t i = 0; i < reg->n; i++)
		v[i] = reg->ents[i]->info;
	*n = reg->n;
	pthread_rwlock_unlock(&reg->lock);
	*out = v;
	return 0;
}

/* ---- the hooks ------------------------------------------------------------------------------- */

int kt__hook_changed(kt_topics *reg, const char *name)
{
	kt_topic_info info;
	pthread_rwlock_rdlock(&reg->lock);
	topic_ent *e = kt__mem_find(reg, name);
	int have = e != NULL;
	if (e)
		info = e->info;
	pthread_rwlock_unlock(&reg->lock);
	if (!have)
		return 0;
	int rc = reg->o.hooks.topic_changed ? reg->o.hooks.topic_changed(reg->o.hooks.arg, &info) : 0;
	pthread_rwlock_wrlock(&reg->lock);
	e = kt__mem_find(reg, name);
	if (e && strcmp(e->info.id, info.id) == 0)
		e->unsynced = rc != 0 || e->info.partitions != info.partitions ||
			      memcmp(&e->info.cfg, &info.cfg, sizeof(info.cfg)) != 0;
	pthread_rwlock_unlock(&reg->lock);
	if (rc)
		KLOG_WARN("topics", "topic %s: the partition table did not take the change (%s); retried by the tick",
			  name, sub_strerror(rc));
	return rc;
}

int kt__hook_dropped(kt_topics *reg, const char *name, const char *id)
{
	if (!reg->o.hooks.topic_dropped)
		return 0;
	return reg->o.hooks.topic_dropped(reg->o.hooks.arg, name, id);
}
