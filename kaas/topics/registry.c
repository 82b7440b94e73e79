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
 *   DATA/~trash-<id>-<hex>                a reclaimed or deleted directory being removed
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

#include "topics/registry_int.h"
#include "util/clock.h"
#include "util/kerr.h"
#include "util/log.h"

#define REG_DIR "topics"
#define TOMB_DIR "deleted-topics"
#define STAMP_NAME ".topic-id.json"
#define TRASH_PREFIX "~trash-"
#define ABANDONED_PREFIX "~abandoned-"
#define LOST_PREFIX "~lost-"
#define REG_FILE_MAX (64 * 1024)
#define NEG_MAX 4096
#define FORMAT_VERSION 1

/* ---- small helpers ----------------------------------------------------------- */

static int rand_hex(char *dst, size_t n) /* n hex digits + NUL */
{
	uint8_t b[16];
	static const char hx[] = "0123456789abcdef";
	if (n > 32 || getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		return -EIO;
	for (size_t i = 0; i < n; i++)
		dst[i] = hx[(b[i / 2] >> ((i & 1) ? 0 : 4)) & 15];
	dst[n] = '\0';
	return 0;
}

static void reg_path(char *dst, size_t len, const char *name)
{
	snprintf(dst, len, REG_DIR "/%s.json", name);
}

static int16_t storage_fail(char *msg, size_t msglen, const char *what, int rc)
{
	snprintf(msg, msglen, "%s failed on the volume: %s", what, sub_strerror(rc));
	KLOG_ERR("topics", "%s failed: %s", what, sub_strerror(rc));
	return KERR_UNKNOWN_SERVER_ERROR;
}

/* ---- topic entries --------------------------------------------------------------- */

static void ent_free(topic_ent *e)
{
	if (!e)
		return;
	kaas_tcfg_set_free(&e->ov);
	free(e);
}

static void ent_fill_info(kaas_topics *reg, topic_ent *e)
{
	kaas_tcfg_apply(&e->ov, &reg->o.defaults, &e->info.cfg);
	e->info.overrides = e->ov.set;
	e->info.replication_factor = 1;
}

/* Parses a registry file.  RF_INCOMPLETE: not a JSON object at all (empty,
 * short, zero-filled: a claim whose content never made it).  RF_CORRUPT: a
 * JSON object that is not a valid entry (never reclaimed automatically). */
static int ent_parse(kaas_topics *reg, const char *name, const char *buf, size_t len, topic_ent **out, char *why,
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
	    kaas_topic_name_check(json_string_value(jn), (int32_t)json_string_length(jn), msg, sizeof(msg))) {
		snprintf(why, whylen, "name field does not match the file name");
		goto out;
	}
	if (!(e = calloc(1, sizeof(*e)))) {
		st = -ENOMEM;
		goto out;
	}
	snprintf(e->info.name, sizeof(e->info.name), "%s", json_string_value(jn));
	if (!json_is_string(jid) || kaas_topic_id_parse(json_string_value(jid), e->info.id, e->info.id_bytes)) {
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
	if (jcfg && kaas_tcfg_set_from_json(&e->ov, jcfg, e->info.name) == -ENOMEM) {
		st = -ENOMEM;
		goto out;
	}
	ent_fill_info(reg, e);
	*out = e;
	e = NULL;
	st = RF_OK;
out:
	ent_free(e);
	json_decref(root);
	return st;
}

static char *ent_json(const topic_ent *e)
{
	json_t *o = json_object();
	json_t *cfg = kaas_tcfg_set_to_json(&e->ov);
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
static int reg_read(kaas_topics *reg, const char *name, topic_ent **out, sub_stat *st, char *why, size_t whylen)
{
	char path[SUB_PATH_MAX];
	char *buf = NULL;
	size_t len = 0;
	reg_path(path, sizeof(path), name);
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
	rc = ent_parse(reg, name, buf, len, out, why, whylen);
	free(buf);
	if (rc == RF_OK) {
		(*out)->f_ino = st->ino;
		(*out)->f_size = st->size;
		(*out)->f_mtime = st->mtime_ns;
	}
	return rc;
}

/* ---- the in-memory view (callers hold reg->lock) ----------------------------------- */

static ssize_t find_pos(kaas_topics *reg, const char *name, int *found)
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

static topic_ent *mem_find(kaas_topics *reg, const char *name)
{
	int found;
	ssize_t i = find_pos(reg, name, &found);
	return found ? reg->ents[i] : NULL;
}

static void neg_remove(kaas_topics *reg, const char *name)
{
	for (size_t i = 0; i < reg->nneg; i++) {
		if (strcmp(reg->neg[i].name, name) == 0) {
			reg->neg[i] = reg->neg[--reg->nneg];
			return;
		}
	}
}

/* Inserts or replaces (takes e over; the replaced entry is freed). */
static int mem_put(kaas_topics *reg, topic_ent *e)
{
	int found;
	ssize_t i = find_pos(reg, e->info.name, &found);
	neg_remove(reg, e->info.name);
	reg->seq++;
	if (found) {
		ent_free(reg->ents[i]);
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

static void mem_remove(kaas_topics *reg, const char *name)
{
	int found;
	ssize_t i = find_pos(reg, name, &found);
	reg->seq++;
	if (!found)
		return;
	ent_free(reg->ents[i]);
	memmove(reg->ents + i, reg->ents + i + 1, (reg->n - (size_t)i - 1) * sizeof(*reg->ents));
	reg->n--;
}

static void neg_add(kaas_topics *reg, const char *name, int64_t now)
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
static int mem_merge(kaas_topics *reg, topic_ent *e)
{
	topic_ent *old = mem_find(reg, e->info.name);
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
	if (mem_put(reg, e)) {
		ent_free(e);
		return -ENOMEM;
	}
	return notify;
}

/* ---- options, open, close ------------------------------------------------------------ */

void kaas_topics_options_init(kaas_topics_options *o)
{
	memset(o, 0, sizeof(*o));
	kaas_tcfg_kafka_defaults(&o->defaults);
	o->num_partitions = 1;
	o->default_replication_factor = 1;
	o->reserved_name = "__cluster";
	o->miss_ttl_ms = 1000;
	o->refresh_ms = 5000;
	o->claim_grace_ms = 30000;
}

const kaas_log_config *kaas_topics_defaults(const kaas_topics *reg)
{
	return &reg->o.defaults;
}

static int load_all(kaas_topics *reg);
static int redrive_tombstones(kaas_topics *reg, int call_hooks, const char *only, trash_list *tl);
static int prepare_dir_locked(kaas_topics *reg, const kaas_topic_info *t, trash_list *tl);
static void trash_remove(kaas_topics *reg, trash_list *tl);
static void warn_orphans(kaas_topics *reg);

int kaas_topics_open(const kaas_topics_options *o, kaas_topics **out)
{
	*out = NULL;
	if (!o->cluster || !o->data)
		return -EINVAL;
	kaas_topics *reg = calloc(1, sizeof(*reg));
	if (!reg)
		return -ENOMEM;
	reg->o = *o;
	if (o->reserved_name)
		snprintf(reg->reserved, sizeof(reg->reserved), "%s", o->reserved_name);
	reg->o.reserved_name = reg->reserved;
	if (reg->o.num_partitions < 1)
		reg->o.num_partitions = 1;
	pthread_rwlock_init(&reg->lock, NULL);
	pthread_mutex_init(&reg->op, NULL);
	reg->neg = calloc(NEG_MAX, sizeof(*reg->neg));
	if (!reg->neg) {
		kaas_topics_close(reg);
		return -ENOMEM;
	}
	int rc = sub_mkdirs(reg->o.cluster, REG_DIR, 0755);
	if (rc == 0)
		rc = sub_mkdirs(reg->o.cluster, TOMB_DIR, 0755);
	if (rc == 0)
		rc = load_all(reg);
	if (rc) {
		KLOG_ERR("topics", "cannot read the topic registry: %s", sub_strerror(rc));
		kaas_topics_close(reg);
		return rc;
	}
	/* Start-up re-drive: finish interrupted deletes (nothing is open yet,
	 * so no hooks), then make every registered topic's directory carry its
	 * stamp, reclaiming old incarnations before any partition opens. */
	trash_list tl = {0};
	pthread_mutex_lock(&reg->op);
	redrive_tombstones(reg, 0, NULL, &tl);
	for (size_t i = 0; i < reg->n; i++) {
		kaas_topic_info info = reg->ents[i]->info;
		int prc = prepare_dir_locked(reg, &info, &tl);
		if (prc)
			KLOG_ERR("topics", "topic %s: preparing its directory failed (%s); retried later", info.name,
				 sub_strerror(prc));
		reg->ents[i]->unsynced = 0; /* the partition table starts from kaas_topics_list() */
	}
	pthread_mutex_unlock(&reg->op);
	warn_orphans(reg);
	(void)tl; /* trash is removed by the first tick, not while the broker starts */
	*out = reg;
	return 0;
}

void kaas_topics_close(kaas_topics *reg)
{
	if (!reg)
		return;
	for (size_t i = 0; i < reg->n; i++)
		ent_free(reg->ents[i]);
	free(reg->ents);
	free(reg->neg);
	free(reg->claims);
	pthread_rwlock_destroy(&reg->lock);
	pthread_mutex_destroy(&reg->op);
	free(reg);
}

/* ---- reads ------------------------------------------------------------------------------ */

static int name_from(const char *s, int32_t len, char out[KAAS_TOPIC_NAME_MAX + 1])
{
	char msg[160];
	if (kaas_topic_name_check(s, len, msg, sizeof(msg)) != KERR_NONE)
		return -EINVAL;
	memcpy(out, s, (size_t)len);
	out[len] = '\0';
	return 0;
}

int kaas_topics_lookup(kaas_topics *reg, const char *name, int32_t len, kaas_topic_info *out)
{
	char nm[KAAS_TOPIC_NAME_MAX + 1];
	if (len < 0 && name)
		len = (int32_t)strnlen(name, KAAS_TOPIC_NAME_MAX + 1);
	if (name_from(name, len, nm))
		return -EINVAL;
	int64_t now = kaas_mono_ms();
	pthread_rwlock_rdlock(&reg->lock);
	topic_ent *e = mem_find(reg, nm);
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
	int rc = reg_read(reg, nm, &ne, &st, why, sizeof(why));
	if (rc < 0 && rc != -ENOENT)
		return rc;
	pthread_rwlock_wrlock(&reg->lock);
	e = mem_find(reg, nm);
	if (e) {
		*out = e->info;
		rc = 0;
	} else if (rc == RF_OK && reg->seq == seq0) {
		/* Seen here first: the tick prepares its directory and tells the
		 * partition table (lookups stay free of that work). */
		*out = ne->info;
		ne->unsynced = 1;
		rc = mem_put(reg, ne);
		ne = NULL;
	} else if (rc == RF_OK) {
		rc = -ENOENT; /* something changed meanwhile: trust memory, retry later */
	} else {
		neg_add(reg, nm, now);
		rc = -ENOENT;
	}
	pthread_rwlock_unlock(&reg->lock);
	ent_free(ne);
	return rc;
}

int kaas_topics_list(kaas_topics *reg, kaas_topic_info **out, size_t *n)
{
	pthread_rwlock_rdlock(&reg->lock);
	kaas_topic_info *v = malloc((reg->n ? reg->n : 1) * sizeof(*v));
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

/* ---- claims that never got their content ------------------------------------------------
 * sub_create_excl claims the name first and writes the content after; a
 * creator that crashed in between leaves an empty or short file.  It is
 * "abandoned" once this process has seen it unchanged (same inode, size and
 * mtime) for claim_grace_ms of its own monotonic clock — no clocks of other
 * hosts are compared. */

static int claim_abandoned(kaas_topics *reg, const char *key, const sub_stat *st)
{
	int64_t now = kaas_mono_ms();
	if (reg->o.claim_grace_ms <= 0)
		return 1;
	for (size_t i = 0; i < reg->nclaims; i++) {
		claim_seen *c = &reg->claims[i];
		if (strcmp(c->key, key) != 0)
			continue;
		c->round = reg->round;
		if (c->ino == st->ino && c->size == st->size && c->mtime == st->mtime_ns)
			return now - c->first_mono >= reg->o.claim_grace_ms;
		c->ino = st->ino;
		c->size = st->size;
		c->mtime = st->mtime_ns;
		c->first_mono = now;
		return 0;
	}
	claim_seen *nv = realloc(reg->claims, (reg->nclaims + 1) * sizeof(*nv));
	if (!nv)
		return 0;
	reg->claims = nv;
	claim_seen *c = &reg->claims[reg->nclaims++];
	snprintf(c->key, sizeof(c->key), "%s", key);
	c->ino = st->ino;
	c->size = st->size;
	c->mtime = st->mtime_ns;
	c->first_mono = now;
	c->round = reg->round;
	return 0;
}

/* Forgets files that were not seen in the last round (gone or completed). */
static void claims_expire(kaas_topics *reg)
{
	size_t j = 0;
	for (size_t i = 0; i < reg->nclaims; i++)
		if (reg->claims[i].round == reg->round)
			reg->claims[j++] = reg->claims[i];
	reg->nclaims = j;
	reg->round++;
}

static void claim_forget(kaas_topics *reg, const char *key)
{
	for (size_t i = 0; i < reg->nclaims; i++) {
		if (strcmp(reg->claims[i].key, key) == 0) {
			reg->claims[i] = reg->claims[--reg->nclaims];
			return;
		}
	}
}

/* Settles a claim file that was moved aside to `aside` (topics/~abandoned-*):
 * if it is (now) a complete entry — its creator finished after all — it is
 * put back under its name with an exclusive create; otherwise it is removed.
 * Idempotent: a crash anywhere leaves an ~abandoned- file that the next tick
 * settles the same way. */
static int settle_aside(kaas_topics *reg, const char *aside)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = sub_read_file(reg->o.cluster, aside, REG_FILE_MAX, &buf, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc && rc != -EFBIG)
		return rc;
	topic_ent *e = NULL;
	char why[128];
	int st = rc ? RF_CORRUPT : ent_parse(reg, NULL, buf, len, &e, why, sizeof(why));
	if (st == RF_OK) {
		char path[SUB_PATH_MAX];
		reg_path(path, sizeof(path), e->info.name);
		rc = sub_create_excl(reg->o.cluster, path, buf, len);
		if (rc == -EEXIST) {
			topic_ent *cur = NULL;
			sub_stat cst;
			int cs = reg_read(reg, e->info.name, &cur, &cst, why, sizeof(why));
			if (cs == RF_OK && strcmp(cur->info.id, e->info.id) == 0) {
				rc = 0; /* someone put it back already */
			} else {
				char hex[17], lost[SUB_PATH_MAX];
				rand_hex(hex, 16);
				snprintf(lost, sizeof(lost), REG_DIR "/" LOST_PREFIX "%s", hex);
				KLOG_ERR("topics", "topic %s (id %s): its registry claim was reclaimed while its creator "
					 "was completing it and the name was taken meanwhile; kept as %s for an operator",
					 e->info.name, e->info.id, lost);
				rc = sub_rename(reg->o.cluster, aside, lost);
				ent_free(cur);
				ent_free(e);
				free(buf);
				return rc;
			}
			ent_free(cur);
		}
		if (rc == 0)
			KLOG_WARN("topics", "topic %s: put back a registry entry completed during its reclaim",
				  e->info.name);
		ent_free(e);
		if (rc) {
			free(buf);
			return rc;
		}
	}
	free(buf);
	rc = sub_unlink(reg->o.cluster, aside);
	return rc == -ENOENT ? 0 : rc;
}

/* Moves an abandoned claim CLUSTER/topics/<name>.json aside and settles it.
 * The rename is the atomic step: of several reclaimers exactly one moves
 * the file, the others see ENOENT. */
static int reclaim_claim(kaas_topics *reg, const char *name)
{
	char path[SUB_PATH_MAX], aside[SUB_PATH_MAX], hex[17];
	reg_path(path, sizeof(path), name);
	int rc = rand_hex(hex, 16);
	if (rc)
		return rc;
	snprintf(aside, sizeof(aside), REG_DIR "/" ABANDONED_PREFIX "%s", hex);
	rc = sub_rename(reg->o.cluster, path, aside);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	KLOG_WARN("topics", "topic %s: reclaiming a registry claim whose creator never completed it", name);
	claim_forget(reg, path);
	return settle_aside(reg, aside);
}

/* ---- directories on the data volume -------------------------------------------------------- */

static int stamp_read(kaas_topics *reg, const char *name, char id[KAAS_TOPIC_ID_LEN + 1])
{
	char path[SUB_PATH_MAX], *buf = NULL;
	size_t len;
	snprintf(path, sizeof(path), "%s/" STAMP_NAME, name);
	int rc = sub_read_file(reg->o.data, path, 4096, &buf, &len);
	if (rc)
		return rc == -EFBIG ? -EBADMSG : rc;
	json_t *root = json_loadb(buf, len, 0, NULL);
	json_t *jid = json_object_get(root, "topic_id");
	rc = json_is_string(jid) && kaas_topic_id_parse(json_string_value(jid), id, NULL) == 0 ? 0 : -EBADMSG;
	json_decref(root);
	free(buf);
	return rc;
}

static int stamp_write(kaas_topics *reg, const kaas_topic_info *t)
{
	char path[SUB_PATH_MAX], buf[160];
	snprintf(path, sizeof(path), "%s/" STAMP_NAME, t->name);
	int n = snprintf(buf, sizeof(buf), "{\"topic_id\":\"%s\",\"created_ms\":%" PRId64 "}\n", t->id,
			 t->created_ms);
	return sub_write_atomic(reg->o.data, path, buf, (size_t)n);
}

/* Renames DATA/<name> to DATA/~trash-<id>-<hex>: one atomic step frees the
 * name; removing the renamed tree is idempotent and re-driven (tick). */
static int move_to_trash(kaas_topics *reg, const char *name, const char *old_id, trash_list *tl)
{
	char hex[9], trash[128];
	int rc = rand_hex(hex, 8);
	if (rc)
		return rc;
	snprintf(trash, sizeof(trash), TRASH_PREFIX "%s-%s", old_id, hex);
	rc = sub_rename(reg->o.data, name, trash);
	if (rc)
		return rc;
	rc = sub_fsync_dir(reg->o.data, "");
	if (tl && tl->n < TRASH_LIST_MAX)
		snprintf(tl->v[tl->n++], sizeof(tl->v[0]), "%s", trash);
	return rc;
}

static void mark_dir_ready(kaas_topics *reg, const kaas_topic_info *t, int ready)
{
	pthread_rwlock_wrlock(&reg->lock);
	topic_ent *e = mem_find(reg, t->name);
	if (e && strcmp(e->info.id, t->id) == 0)
		e->dir_ready = ready;
	pthread_rwlock_unlock(&reg->lock);
}

static int prepare_dir_locked(kaas_topics *reg, const kaas_topic_info *t, trash_list *tl)
{
	pthread_rwlock_rdlock(&reg->lock);
	topic_ent *e = mem_find(reg, t->name);
	int ready = e && strcmp(e->info.id, t->id) == 0 && e->dir_ready;
	pthread_rwlock_unlock(&reg->lock);
	if (ready)
		return 0;

	sub_vfs *d = reg->o.data;
	sub_stat st;
	char sid[KAAS_TOPIC_ID_LEN + 1];
	int rc = -EAGAIN; /* when the name keeps changing under us */
	for (int attempt = 0; attempt < 4; attempt++, rc = -EAGAIN) {
		rc = sub_stat_path(d, t->name, &st);
		if (rc == -ENOENT) {
			rc = sub_mkdir(d, t->name, 0755);
			if (rc == -EEXIST)
				continue; /* someone made it meanwhile: look again */
			if (rc == 0)
				rc = sub_fsync_dir(d, "");
			if (rc == 0)
				rc = stamp_write(reg, t);
			break;
		}
		if (rc)
			break;
		if (!S_ISDIR(st.mode)) {
			KLOG_ERR("topics", "topic %s: DATA/%s exists and is not a directory; not touching it", t->name,
				 t->name);
			rc = -ENOTDIR;
			break;
		}
		rc = stamp_read(reg, t->name, sid);
		if (rc == 0 && strcmp(sid, t->id) == 0)
			break; /* ours already */
		if (rc == 0) {
			/* An earlier incarnation of this name: reclaim. */
			KLOG_INFO("topics", "topic %s: directory belongs to an earlier topic (id %s); reclaiming it for id %s",
				  t->name, sid, t->id);
			rc = move_to_trash(reg, t->name, sid, tl);
			if (rc == 0 || rc == -ENOENT)
				continue; /* the name is free now: make the new one */
			break;
		}
		if (rc == -ENOENT || rc == -EBADMSG) {
			/* Unknown identity: adopt, never delete.  Partition manifests
			 * still carry their own topic IDs, which the storage engine
			 * checks. */
			KLOG_WARN("topics", "topic %s: adopting the %s directory DATA/%s (stamping it with id %s)",
				  t->name, rc == -ENOENT ? "unstamped" : "unreadably stamped", t->name, t->id);
			rc = stamp_write(reg, t);
			break;
		}
		break;
	}
	if (rc == 0)
		mark_dir_ready(reg, t, 1);
	return rc;
}

int kaas_topics_prepare_dir(kaas_topics *reg, const kaas_topic_info *t)
{
	trash_list tl = {0};
	pthread_mutex_lock(&reg->op);
	int rc = prepare_dir_locked(reg, t, &tl);
	pthread_mutex_unlock(&reg->op);
	trash_remove(reg, &tl);
	return rc;
}

static void trash_remove(kaas_topics *reg, trash_list *tl)
{
	for (size_t i = 0; i < tl->n; i++) {
		int rc = sub_remove_tree(reg->o.data, tl->v[i]);
		if (rc)
			KLOG_WARN("topics", "removing DATA/%s: %s (retried by the next tick)", tl->v[i], sub_strerror(rc));
	}
	tl->n = 0;
}

/* ---- the hooks ------------------------------------------------------------------------------- */

static int hook_changed(kaas_topics *reg, const char *name)
{
	kaas_topic_info info;
	pthread_rwlock_rdlock(&reg->lock);
	topic_ent *e = mem_find(reg, name);
	int have = e != NULL;
	if (e)
		info = e->info;
	pthread_rwlock_unlock(&reg->lock);
	if (!have)
		return 0;
	int rc = reg->o.hooks.topic_changed ? reg->o.hooks.topic_changed(reg->o.hooks.arg, &info) : 0;
	pthread_rwlock_wrlock(&reg->lock);
	e = mem_find(reg, name);
	if (e && strcmp(e->info.id, info.id) == 0)
		e->unsynced = rc != 0 || e->info.partitions != info.partitions ||
			      memcmp(&e->info.cfg, &info.cfg, sizeof(info.cfg)) != 0;
	pthread_rwlock_unlock(&reg->lock);
	if (rc)
		KLOG_WARN("topics", "topic %s: the partition table did not take the change (%s); retried by the tick",
			  name, sub_strerror(rc));
	return rc;
}

static int hook_dropped(kaas_topics *reg, const char *name, const char *id)
{
	if (!reg->o.hooks.topic_dropped)
		return 0;
	return reg->o.hooks.topic_dropped(reg->o.hooks.arg, name, id);
}

/* ---- create ------------------------------------------------------------------------------------ */

/* What is at CLUSTER/topics/<name>.json, for a creator.  Returns KERR_NONE
 * when the name is free (possibly after reclaiming an abandoned claim), or
 * the error for the client. */
static int16_t name_free_for_create(kaas_topics *reg, const char *name, char *msg, size_t msglen)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		topic_ent *e = NULL;
		sub_stat st;
		char why[128], path[SUB_PATH_MAX];
		int rc = reg_read(reg, name, &e, &st, why, sizeof(why));
		if (rc < 0)
			return storage_fail(msg, msglen, "reading the topic registry", rc);
		if (rc == RF_MISSING)
			return KERR_NONE;
		if (rc == RF_OK) {
			pthread_rwlock_wrlock(&reg->lock);
			mem_merge(reg, e); /* learn it: lookups now find it */
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
		reg_path(path, sizeof(path), name);
		if (!claim_abandoned(reg, path, &st)) {
			snprintf(msg, msglen, "Topic '%s' is being created by another client (an incomplete claim "
				 "is reclaimed after %" PRId64 " ms if its creator died)", name, reg->o.claim_grace_ms);
			return KERR_TOPIC_ALREADY_EXISTS;
		}
		rc = reclaim_claim(reg, name);
		if (rc)
			return storage_fail(msg, msglen, "reclaiming an abandoned registry claim", rc);
	}
	snprintf(msg, msglen, "Topic '%s' is being created concurrently; retry", name);
	return KERR_TOPIC_ALREADY_EXISTS;
}

static int16_t create_locked(kaas_topics *reg, const char *name, int32_t partitions, const kaas_tcfg_set *ov,
			     int validate_only, kaas_topic_info *out, char *msg, size_t msglen, trash_list *tl)
{
	/* Kafka refuses names that differ only in '.' vs '_' (their metrics
	 * collide).  Best effort: checked against what this broker knows. */
	pthread_rwlock_rdlock(&reg->lock);
	for (size_t i = 0; i < reg->n; i++) {
		const char *other = reg->ents[i]->info.name;
		if (strcmp(other, name) != 0 && kaas_topic_names_collide(other, name)) {
			snprintf(msg, msglen, "Topic '%s' collides with existing topic: %s", name, other);
			pthread_rwlock_unlock(&reg->lock);
			return KERR_INVALID_TOPIC_EXCEPTION;
		}
	}
	pthread_rwlock_unlock(&reg->lock);

	int16_t err = name_free_for_create(reg, name, msg, msglen);
	if (err != KERR_NONE || validate_only)
		return err;
	/* A delete of an earlier incarnation that has not finished (its
	 * partitions not yet closed) is finished first, so the new topic never
	 * meets the old one's open partitions. */
	int rc = redrive_tombstones(reg, 1, name, tl);
	if (rc) {
		snprintf(msg, msglen, "Topic '%s': the delete of its previous incarnation has not completed (%s); retry",
			 name, sub_strerror(rc));
		return KERR_UNKNOWN_SERVER_ERROR;
	}

	topic_ent *e = calloc(1, sizeof(*e));
	char *json = NULL, path[SUB_PATH_MAX];
	if (!e || kaas_tcfg_set_copy(&e->ov, ov)) {
		ent_free(e);
		return storage_fail(msg, msglen, "creating the topic", -ENOMEM);
	}
	snprintf(e->info.name, sizeof(e->info.name), "%s", name);
	rc = kaas_topic_id_new(e->info.id, e->info.id_bytes);
	e->info.partitions = partitions;
	e->info.created_ms = kaas_wall_ms();
	ent_fill_info(reg, e);
	if (rc == 0 && !(json = ent_json(e)))
		rc = -ENOMEM;
	if (rc) {
		ent_free(e);
		return storage_fail(msg, msglen, "creating the topic", rc);
	}
	reg_path(path, sizeof(path), name);
	rc = sub_create_excl(reg->o.cluster, path, json, strlen(json));
	free(json);
	if (rc == -EEXIST) {
		ent_free(e);
		/* Lost the race to another creator (here or on another host). */
		err = name_free_for_create(reg, name, msg, msglen);
		if (err == KERR_NONE)
			snprintf(msg, msglen, "Topic '%s' was created and deleted concurrently; retry", name);
		return err == KERR_NONE ? KERR_TOPIC_ALREADY_EXISTS : err;
	}
	if (rc) {
		ent_free(e);
		return storage_fail(msg, msglen, "claiming the topic name in the registry", rc);
	}
	/* Read it back: a reclaimer that judged an empty claim abandoned could
	 * have moved ours aside if we stalled for longer than the grace period
	 * before writing.  Only a claim that reads back as ours is ours. */
	topic_ent *back = NULL;
	sub_stat st;
	char why[128];
	rc = reg_read(reg, name, &back, &st, why, sizeof(why));
	if (rc != RF_OK || strcmp(back->info.id, e->info.id) != 0) {
		ent_free(back);
		ent_free(e);
		snprintf(msg, msglen, "Topic '%s': the registry claim was lost while it was being written; retry", name);
		return KERR_UNKNOWN_SERVER_ERROR;
	}
	e->f_ino = back->f_ino;
	e->f_size = back->f_size;
	e->f_mtime = back->f_mtime;
	ent_free(back);
	KLOG_INFO("topics", "created topic %s (id %s, %d partitions)", name, e->info.id, e->info.partitions);
	kaas_topic_info info = e->info;
	pthread_rwlock_wrlock(&reg->lock);
	e->unsynced = 1;
	rc = mem_put(reg, e);
	pthread_rwlock_unlock(&reg->lock);
	if (rc)
		ent_free(e);
	if (out)
		*out = info;
	/* The topic exists from here on; the rest is re-driven if it fails. */
	rc = prepare_dir_locked(reg, &info, tl);
	if (rc)
		KLOG_ERR("topics", "topic %s: preparing DATA/%s failed (%s); retried by the tick", name, name,
			 sub_strerror(rc));
	else
		hook_changed(reg, name);
	return KERR_NONE;
}

static int16_t reserved_check(kaas_topics *reg, const char *name, char *msg, size_t msglen)
{
	if (reg->reserved[0] && strcmp(name, reg->reserved) == 0) {
		snprintf(msg, msglen, "Topic name '%s' is reserved: kaas keeps its cluster directory under that name",
			 name);
		return KERR_INVALID_TOPIC_EXCEPTION;
	}
	return KERR_NONE;
}

int16_t kaas_topics_create(kaas_topics *reg, const kaas_topic_spec *spec, int validate_only, kaas_topic_info *out,
			   char *msg, size_t msglen)
{
	char name[KAAS_TOPIC_NAME_MAX + 1];
	int16_t err = kaas_topic_name_check(spec->name.s, spec->name.len, msg, msglen);
	if (err)
		return err;
	memcpy(name, spec->name.s, (size_t)spec->name.len);
	name[spec->name.len] = '\0';
	if ((err = reserved_check(reg, name, msg, msglen)))
		return err;
	int32_t parts = spec->partitions == -1 ? reg->o.num_partitions : spec->partitions;
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
	kaas_tcfg_set ov = KAAS_TCFG_SET_INIT;
	if ((err = kaas_tcfg_set_from_kv(&ov, spec->configs, spec->nconfigs, msg, msglen)))
		return err;
	trash_list tl = {0};
	pthread_mutex_lock(&reg->op);
	err = create_locked(reg, name, parts, &ov, validate_only, out, msg, msglen, &tl);
	pthread_mutex_unlock(&reg->op);
	trash_remove(reg, &tl);
	kaas_tcfg_set_free(&ov);
	if (err == KERR_NONE)
		msg[0] = '\0';
	return err;
}

int16_t kaas_topics_auto_create(kaas_topics *reg, kaas_str name, kaas_topic_info *out)
{
	char msg[256];
	int rc = kaas_topics_lookup(reg, name.s, name.len, out);
	if (rc == 0)
		return KERR_NONE;
	if (rc == -EINVAL)
		return KERR_INVALID_TOPIC_EXCEPTION;
	kaas_topic_spec spec = {name, -1, -1, NULL, 0};
	int16_t err = kaas_topics_create(reg, &spec, 0, out, msg, sizeof(msg));
	if (err == KERR_NONE || err == KERR_INVALID_TOPIC_EXCEPTION)
		return err;
	if (err == KERR_TOPIC_ALREADY_EXISTS && kaas_topics_lookup(reg, name.s, name.len, out) == 0)
		return KERR_NONE;
	KLOG_DEBUG("topics", "auto-create: %s", msg);
	return KERR_LEADER_NOT_AVAILABLE;
}

/* ---- delete ------------------------------------------------------------------------------------- */

static int tomb_write(kaas_topics *reg, const char *name, const char *id)
{
	char path[SUB_PATH_MAX], buf[512];
	snprintf(path, sizeof(path), TOMB_DIR "/%s.json", id);
	int n = snprintf(buf, sizeof(buf),
			 "{\"version\":1,\"name\":\"%s\",\"topic_id\":\"%s\",\"deleted_ms\":%" PRId64 "}\n", name, id,
			 kaas_wall_ms());
	return sub_write_atomic(reg->o.cluster, path, buf, (size_t)n);
}

static int tomb_remove(kaas_topics *reg, const char *id)
{
	char path[SUB_PATH_MAX];
	snprintf(path, sizeof(path), TOMB_DIR "/%s.json", id);
	int rc = sub_unlink(reg->o.cluster, path);
	if (rc == -ENOENT)
		return 0;
	return rc ? rc : sub_fsync_dir(reg->o.cluster, TOMB_DIR);
}

/* The part of a delete after the registry entry is gone: close the
 * partitions, move the directory aside when (and only when) its stamp is the
 * deleted ID, drop the tombstone.  Idempotent; the tick re-drives it from the
 * tombstone until it completes. */
static int finish_delete(kaas_topics *reg, const char *name, const char *id, int call_hooks, trash_list *tl)
{
	/* If a newer incarnation is registered, its creator already finished
	 * this delete's drop (create re-drives pending deletes of its name
	 * first): the partitions open under this name are the new topic's. */
	pthread_rwlock_rdlock(&reg->lock);
	topic_ent *cur = mem_find(reg, name);
	if (cur && strcmp(cur->info.id, id) != 0)
		call_hooks = 0;
	pthread_rwlock_unlock(&reg->lock);
	int rc = call_hooks ? hook_dropped(reg, name, id) : 0;
	if (rc) {
		KLOG_WARN("topics", "topic %s: closing its partitions failed (%s); retried by the tick", name,
			  sub_strerror(rc));
		return rc;
	}
	char sid[KAAS_TOPIC_ID_LEN + 1];
	rc = stamp_read(reg, name, sid);
	if (rc == 0 && strcmp(sid, id) == 0) {
		rc = move_to_trash(reg, name, id, tl);
		if (rc == -ENOENT)
			rc = 0;
	} else if (rc == 0) {
		rc = 0; /* a newer incarnation owns it now */
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

int16_t kaas_topics_delete(kaas_topics *reg, kaas_str name, char *msg, size_t msglen)
{
	char nm[KAAS_TOPIC_NAME_MAX + 1], path[SUB_PATH_MAX], why[128];
	int16_t err = kaas_topic_name_check(name.s, name.len, msg, msglen);
	if (err)
		return err;
	memcpy(nm, name.s, (size_t)name.len);
	nm[name.len] = '\0';
	trash_list tl = {0};
	pthread_mutex_lock(&reg->op);
	topic_ent *e = NULL;
	sub_stat st;
	int rc = reg_read(reg, nm, &e, &st, why, sizeof(why));
	if (rc < 0) {
		err = storage_fail(msg, msglen, "reading the topic registry", rc);
		goto out;
	}
	if (rc != RF_OK) {
		if (rc == RF_CORRUPT)
			KLOG_ERR("topics", "delete %s: registry file invalid (%s); not touching it", nm, why);
		pthread_rwlock_wrlock(&reg->lock);
		mem_remove(reg, nm); /* forget a stale memory entry, if any */
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
		err = storage_fail(msg, msglen, "recording the delete", rc);
		goto out;
	}
	/* 2. the registry entry goes: from here the topic does not exist; */
	reg_path(path, sizeof(path), nm);
	rc = sub_unlink(reg->o.cluster, path);
	if (rc == 0 || rc == -ENOENT)
		rc = sub_fsync_dir(reg->o.cluster, REG_DIR);
	if (rc) {
		err = storage_fail(msg, msglen, "removing the registry entry", rc);
		goto out;
	}
	pthread_rwlock_wrlock(&reg->lock);
	mem_remove(reg, nm);
	pthread_rwlock_unlock(&reg->lock);
	KLOG_INFO("topics", "deleted topic %s (id %s)", nm, id);
	/* 3. partitions closed, directory moved aside, tombstone dropped. */
	finish_delete(reg, nm, id, 1, &tl);
	err = KERR_NONE;
	msg[0] = '\0';
out:
	pthread_mutex_unlock(&reg->op);
	ent_free(e);
	trash_remove(reg, &tl);
	return err;
}

/* ---- rewrites: CreatePartitions, AlterConfigs ------------------------------------------------- */

/* Re-reads the entry (the volume is the truth), lets `edit` change it and
 * writes it back with write_atomic.  Called with reg->op held. */
static int16_t rewrite_locked(kaas_topics *reg, const char *name, int (*edit)(topic_ent *, void *, char *, size_t),
			      void *arg, int validate_only, char *msg, size_t msglen)
{
	topic_ent *e = NULL;
	sub_stat st;
	char why[128], path[SUB_PATH_MAX];
	int rc = reg_read(reg, name, &e, &st, why, sizeof(why));
	if (rc < 0)
		return storage_fail(msg, msglen, "reading the topic registry", rc);
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
	topic_ent *m = mem_find(reg, name);
	if (m && strcmp(m->info.id, e->info.id) == 0 && m->info.partitions > e->info.partitions)
		e->info.partitions = m->info.partitions;
	pthread_rwlock_unlock(&reg->lock);

	rc = edit(e, arg, msg, msglen);
	if (rc) {
		ent_free(e);
		return (int16_t)rc;
	}
	if (validate_only) {
		ent_free(e);
		return KERR_NONE;
	}
	e->generation++;
	ent_fill_info(reg, e);
	char *json = ent_json(e);
	if (!json) {
		ent_free(e);
		return storage_fail(msg, msglen, "writing the registry entry", -ENOMEM);
	}
	reg_path(path, sizeof(path), name);
	rc = sub_write_atomic(reg->o.cluster, path, json, strlen(json));
	free(json);
	if (rc) {
		ent_free(e);
		return storage_fail(msg, msglen, "writing the registry entry", rc);
	}
	if (sub_stat_path(reg->o.cluster, path, &st) == 0) {
		e->f_ino = st.ino;
		e->f_size = st.size;
		e->f_mtime = st.mtime_ns;
	}
	pthread_rwlock_wrlock(&reg->lock);
	rc = mem_merge(reg, e);
	pthread_rwlock_unlock(&reg->lock);
	if (rc > 0)
		hook_changed(reg, name);
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
	if (kaas_tcfg_set_copy(&e->ov, arg))
		return KERR_UNKNOWN_SERVER_ERROR;
	return 0;
}

static int16_t named_op_prologue(kaas_str name, char nm[KAAS_TOPIC_NAME_MAX + 1], char *msg, size_t msglen)
{
	int16_t err = kaas_topic_name_check(name.s, name.len, msg, msglen);
	if (err)
		return err;
	memcpy(nm, name.s, (size_t)name.len);
	nm[name.len] = '\0';
	return KERR_NONE;
}

int16_t kaas_topics_add_partitions(kaas_topics *reg, kaas_str name, int32_t count, int validate_only, char *msg,
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

int16_t kaas_topics_alter_configs(kaas_topics *reg, kaas_str name, const kaas_config_kv *kv, size_t n,
				  int validate_only, char *msg, size_t msglen)
{
	char nm[KAAS_TOPIC_NAME_MAX + 1];
	int16_t err = named_op_prologue(name, nm, msg, msglen);
	if (err)
		return err;
	kaas_tcfg_set ov = KAAS_TCFG_SET_INIT;
	if ((err = kaas_tcfg_set_from_kv(&ov, kv, n, msg, msglen)))
		return err;
	pthread_mutex_lock(&reg->op);
	err = rewrite_locked(reg, nm, edit_configs, &ov, validate_only, msg, msglen);
	pthread_mutex_unlock(&reg->op);
	kaas_tcfg_set_free(&ov);
	if (err == KERR_NONE)
		msg[0] = '\0';
	return err;
}

int16_t kaas_topics_describe_configs(kaas_topics *reg, kaas_str name, kaas_config_list *out, char *msg,
				     size_t msglen)
{
	char nm[KAAS_TOPIC_NAME_MAX + 1];
	int16_t err = named_op_prologue(name, nm, msg, msglen);
	if (err)
		return err;
	kaas_topic_info info;
	int rc = kaas_topics_lookup(reg, nm, name.len, &info);
	if (rc == -ENOENT) {
		snprintf(msg, msglen, "Topic '%s' does not exist.", nm);
		return KERR_UNKNOWN_TOPIC_OR_PARTITION;
	}
	if (rc)
		return storage_fail(msg, msglen, "reading the topic registry", rc);
	kaas_tcfg_set ov = KAAS_TCFG_SET_INIT;
	pthread_rwlock_rdlock(&reg->lock);
	topic_ent *e = mem_find(reg, nm);
	rc = e ? kaas_tcfg_set_copy(&ov, &e->ov) : -ENOENT;
	pthread_rwlock_unlock(&reg->lock);
	if (rc == 0)
		rc = kaas_tcfg_describe(&ov, &reg->o.defaults, out);
	kaas_tcfg_set_free(&ov);
	if (rc == -ENOENT) {
		snprintf(msg, msglen, "Topic '%s' does not exist.", nm);
		return KERR_UNKNOWN_TOPIC_OR_PARTITION;
	}
	if (rc)
		return storage_fail(msg, msglen, "describing configs", rc);
	msg[0] = '\0';
	return KERR_NONE;
}

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
static int temp_leftover(kaas_topics *reg, const char *dir, const char *file, int *first_err)
{
	if (file[0] != '.' || !strstr(file, ".tmp."))
		return 0;
	char path[SUB_PATH_MAX];
	sub_stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (sub_stat_path(reg->o.cluster, path, &st) == 0 && claim_abandoned(reg, path, &st)) {
		claim_forget(reg, path);
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
	if (n == 0 || n > KAAS_TOPIC_NAME_MAX || kaas_topic_name_check(file, (int32_t)n, msg, sizeof(msg)))
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
static int refresh_locked(kaas_topics *reg, drop_list *drops)
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
			if (sub_stat_path(reg->o.cluster, path, &st) == 0 && claim_abandoned(reg, path, &st)) {
				claim_forget(reg, path);
				int src = settle_aside(reg, path);
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
		topic_ent *m = mem_find(reg, name);
		int same = m && m->f_ino == st.ino && m->f_size == st.size && m->f_mtime == st.mtime_ns;
		pthread_rwlock_unlock(&reg->lock);
		if (same)
			continue;
		topic_ent *e = NULL;
		int r = reg_read(reg, name, &e, &st, why, sizeof(why));
		if (r < 0) {
			if (!first_err)
				first_err = r;
			continue;
		}
		if (r == RF_INCOMPLETE) {
			if (claim_abandoned(reg, path, &st)) {
				int crc = reclaim_claim(reg, name);
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
		claim_forget(reg, path);
		pthread_rwlock_wrlock(&reg->lock);
		m = mem_find(reg, name);
		if (m && strcmp(m->info.id, e->info.id) != 0 && drops)
			drop_add(drops, m->info.name, m->info.id); /* replaced by a new incarnation */
		r = mem_merge(reg, e);
		pthread_rwlock_unlock(&reg->lock);
		if (r < 0 && !first_err)
			first_err = r;
	}
	/* Topics whose file is gone were deleted by someone else. */
	for (size_t j = 0; j < nm; j++) {
		if (present[j])
			continue;
		char path[SUB_PATH_MAX];
		reg_path(path, sizeof(path), seen_names[j]);
		sub_stat st;
		if (sub_stat_path(reg->o.cluster, path, &st) != -ENOENT)
			continue; /* listing raced with a create: keep it */
		pthread_rwlock_wrlock(&reg->lock);
		topic_ent *m = mem_find(reg, seen_names[j]);
		if (m) {
			if (drops)
				drop_add(drops, m->info.name, m->info.id);
			KLOG_INFO("topics", "topic %s (id %s) was deleted elsewhere", m->info.name, m->info.id);
			mem_remove(reg, seen_names[j]);
		}
		pthread_rwlock_unlock(&reg->lock);
	}
	free(seen_names);
	free(present);
	sub_names_free(names, n);
	return first_err;
}

static int load_all(kaas_topics *reg)
{
	pthread_mutex_lock(&reg->op);
	int rc = refresh_locked(reg, NULL);
	pthread_mutex_unlock(&reg->op);
	return rc;
}

/* Every tombstone is a delete to finish.  If the registry file still holds
 * the deleted ID (a crash before its unlink, or a rewrite racing the delete
 * on another broker), the delete is driven forward: the entry is removed. */
static int redrive_tombstones(kaas_topics *reg, int call_hooks, const char *only, trash_list *tl)
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
		char path[SUB_PATH_MAX], *buf = NULL;
		size_t len;
		if (temp_leftover(reg, TOMB_DIR, names[i], &first_err))
			continue;
		if (!has_suffix(names[i], ".json"))
			continue;
		snprintf(path, sizeof(path), TOMB_DIR "/%s", names[i]);
		if (sub_read_file(reg->o.cluster, path, 4096, &buf, &len))
			continue;
		json_t *root = json_loadb(buf, len, 0, NULL);
		free(buf);
		json_t *jn = json_object_get(root, "name"), *jid = json_object_get(root, "topic_id");
		char id[KAAS_TOPIC_ID_LEN + 1], name[KAAS_TOPIC_NAME_MAX + 1], msg[160];
		if (!json_is_string(jn) || !json_is_string(jid) ||
		    kaas_topic_id_parse(json_string_value(jid), id, NULL) ||
		    kaas_topic_name_check(json_string_value(jn), (int32_t)json_string_length(jn), msg, sizeof(msg))) {
			KLOG_ERR("topics", "tombstone %s is invalid; left for an operator", path);
			json_decref(root);
			continue;
		}
		snprintf(name, sizeof(name), "%s", json_string_value(jn));
		json_decref(root);
		if (only && strcmp(only, name) != 0)
			continue;

		topic_ent *e = NULL;
		sub_stat st;
		char why[128];
		int r = reg_read(reg, name, &e, &st, why, sizeof(why));
		if (r == RF_OK && strcmp(e->info.id, id) == 0) {
			char rp[SUB_PATH_MAX];
			reg_path(rp, sizeof(rp), name);
			int urc = sub_unlink(reg->o.cluster, rp);
			if (urc == 0)
				urc = sub_fsync_dir(reg->o.cluster, REG_DIR);
			if (urc && urc != -ENOENT) {
				ent_free(e);
				if (!first_err)
					first_err = urc;
				continue;
			}
			pthread_rwlock_wrlock(&reg->lock);
			topic_ent *m = mem_find(reg, name);
			if (m && strcmp(m->info.id, id) == 0)
				mem_remove(reg, name);
			pthread_rwlock_unlock(&reg->lock);
			KLOG_INFO("topics", "finished deleting topic %s (id %s): registry entry removed", name, id);
		}
		ent_free(e);
		if (r < 0) {
			if (!first_err)
				first_err = r;
			continue;
		}
		int frc = finish_delete(reg, name, id, call_hooks, tl);
		if (frc && !first_err)
			first_err = frc;
	}
	sub_names_free(names, n);
	return first_err;
}

/* Stamped directories with no registry entry and no tombstone: logged, never
 * deleted — the registry may have been lost, and unknown identity must not
 * be destructive.  (Creating the topic again reclaims such a directory.) */
static void warn_orphans(kaas_topics *reg)
{
	char **names = NULL;
	size_t n = 0;
	if (sub_list(reg->o.data, "", &names, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		char msg[160], sid[KAAS_TOPIC_ID_LEN + 1];
		if (kaas_topic_name_check(names[i], (int32_t)strlen(names[i]), msg, sizeof(msg)))
			continue;
		if (reg->reserved[0] && strcmp(names[i], reg->reserved) == 0)
			continue;
		pthread_rwlock_rdlock(&reg->lock);
		int known = mem_find(reg, names[i]) != NULL;
		pthread_rwlock_unlock(&reg->lock);
		if (known || stamp_read(reg, names[i], sid) != 0)
			continue;
		KLOG_WARN("topics", "DATA/%s is stamped with topic id %s but no topic of that name is registered; "
			  "left in place (delete it by hand, or create the topic again to reclaim it)", names[i], sid);
	}
	sub_names_free(names, n);
}

/* Removes every DATA/~trash-* directory.  They exist only because a rename
 * moved a deleted or reclaimed topic there, so all of them are garbage. */
static int sweep_trash(kaas_topics *reg)
{
	char **names = NULL;
	size_t n = 0;
	int rc = sub_list(reg->o.data, "", &names, &n);
	if (rc)
		return rc;
	int first_err = 0;
	for (size_t i = 0; i < n; i++) {
		if (!has_prefix(names[i], TRASH_PREFIX))
			continue;
		int r = sub_remove_tree(reg->o.data, names[i]);
		if (r) {
			KLOG_WARN("topics", "removing DATA/%s: %s (retried by the next tick)", names[i], sub_strerror(r));
			if (!first_err)
				first_err = r;
		}
	}
	sub_names_free(names, n);
	return first_err;
}

int kaas_topics_tick(kaas_topics *reg)
{
	drop_list drops = {0};
	trash_list tl = {0};
	int first_err = 0, rc;
	int64_t now = kaas_mono_ms();
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
		rc = hook_dropped(reg, drops.v[i].name, drops.v[i].id);
		if (rc) {
			KLOG_WARN("topics", "topic %s: closing its partitions failed (%s)", drops.v[i].name, sub_strerror(rc));
			if (!first_err)
				first_err = rc;
		}
	}
	rc = redrive_tombstones(reg, 1, NULL, &tl);
	if (rc && !first_err)
		first_err = rc;
	claims_expire(reg);
	/* Registered topics whose directory or partitions are not in place yet. */
	kaas_topic_info *todo = NULL;
	size_t ntodo = 0;
	pthread_rwlock_rdlock(&reg->lock);
	todo = malloc((reg->n ? reg->n : 1) * sizeof(*todo));
	if (todo)
		for (size_t i = 0; i < reg->n; i++)
			if (!reg->ents[i]->dir_ready || reg->ents[i]->unsynced)
				todo[ntodo++] = reg->ents[i]->info;
	pthread_rwlock_unlock(&reg->lock);
	for (size_t i = 0; i < ntodo; i++) {
		rc = prepare_dir_locked(reg, &todo[i], &tl);
		if (rc == 0)
			rc = hook_changed(reg, todo[i].name);
		if (rc && !first_err)
			first_err = rc;
	}
	free(todo);
	pthread_mutex_unlock(&reg->op);
	free(drops.v);
	trash_remove(reg, &tl);
	rc = sweep_trash(reg);
	if (rc && !first_err)
		first_err = rc;
	return first_err;
}
