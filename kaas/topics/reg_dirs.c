/*
 * reg_dirs.c — the registry's work on the volumes outside its own entries:
 * registry claims whose creator never completed them, and the topic
 * directories on the data volume (stamps; what to do with a directory whose
 * stamp is not the registered ID, decided in reg_ident.c; adoption of
 * unstamped directories).
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
#include "kaas/topics/trash.h"
#include "util/clock.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* ---- claims that never got their content ------------------------------------------------
 * sub_create_excl claims the name first and writes the content after; a
 * creator that crashed in between leaves an empty or short file.  It is
 * "abandoned" once this process has seen it unchanged (same inode, size and
 * mtime) for claim_grace_ms of its own monotonic clock — no clocks of other
 * hosts are compared. */

int kt__claim_abandoned(kt_topics *reg, const char *key, const sub_stat *st)
{
	int64_t now = ku_mono_ms();
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
void kt__claims_expire(kt_topics *reg)
{
	size_t j = 0;
	for (size_t i = 0; i < reg->nclaims; i++)
		if (reg->claims[i].round == reg->round)
			reg->claims[j++] = reg->claims[i];
	reg->nclaims = j;
	reg->round++;
}

void kt__claim_forget(kt_topics *reg, const char *key)
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
int kt__settle_aside(kt_topics *reg, const char *aside)
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
	int st = rc ? RF_CORRUPT : kt__ent_parse(reg, NULL, buf, len, &e, why, sizeof(why));
	if (st == RF_OK) {
		char path[SUB_PATH_MAX];
		kt__reg_path(path, sizeof(path), e->info.name);
		rc = sub_create_excl(reg->o.cluster, path, buf, len);
		if (rc == -EEXIST) {
			topic_ent *cur = NULL;
			sub_stat cst;
			int cs = kt__reg_read(reg, e->info.name, &cur, &cst, why, sizeof(why));
			if (cs == RF_OK && strcmp(cur->info.id, e->info.id) == 0) {
				rc = 0; /* someone put it back already */
			} else {
				char hex[17], lost[SUB_PATH_MAX];
				kt__rand_hex(hex, 16);
				snprintf(lost, sizeof(lost), REG_DIR "/" LOST_PREFIX "%s", hex);
				KLOG_ERR("topics", "topic %s (id %s): its registry claim was reclaimed while its creator "
					 "was completing it and the name was taken meanwhile; kept as %s for an operator",
					 e->info.name, e->info.id, lost);
				rc = sub_rename(reg->o.cluster, aside, lost);
				kt__ent_free(cur);
				kt__ent_free(e);
				free(buf);
				return rc;
			}
			kt__ent_free(cur);
		}
		if (rc == 0)
			KLOG_WARN("topics", "topic %s: put back a registry entry completed during its reclaim",
				  e->info.name);
		kt__ent_free(e);
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
int kt__reclaim_claim(kt_topics *reg, const char *name)
{
	char path[SUB_PATH_MAX], aside[SUB_PATH_MAX], hex[17];
	kt__reg_path(path, sizeof(path), name);
	int rc = kt__rand_hex(hex, 16);
	if (rc)
		return rc;
	snprintf(aside, sizeof(aside), REG_DIR "/" ABANDONED_PREFIX "%s", hex);
	rc = sub_rename(reg->o.cluster, path, aside);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	KLOG_WARN("topics", "topic %s: reclaiming a registry claim whose creator never completed it", name);
	kt__claim_forget(reg, path);
	return kt__settle_aside(reg, aside);
}

/* ---- directories on the data volume -------------------------------------------------------- */

int kt__stamp_read(kt_topics *reg, const char *name, char id[KAAS_TOPIC_ID_LEN + 1])
{
	char path[SUB_PATH_MAX], *buf = NULL;
	size_t len;
	snprintf(path, sizeof(path), "%s/" STAMP_NAME, name);
	int rc = sub_read_file(reg->o.data, path, 4096, &buf, &len);
	if (rc)
		return rc == -EFBIG ? -EBADMSG : rc;
	json_t *root = json_loadb(buf, len, 0, NULL);
	json_t *jid = json_object_get(root, "topic_id");
	rc = json_is_string(jid) && kt_topic_id_parse(json_string_value(jid), id, NULL) == 0 ? 0 : -EBADMSG;
	json_decref(root);
	free(buf);
	return rc;
}

int kt__stamp_write(kt_topics *reg, const kt_topic_info *t)
{
	char path[SUB_PATH_MAX], buf[160];
	snprintf(path, sizeof(path), "%s/" STAMP_NAME, t->name);
	int n = snprintf(buf, sizeof(buf), "{\"topic_id\":\"%s\",\"created_ms\":%" PRId64 "}\n", t->id,
			 t->created_ms);
	return sub_write_atomic(reg->o.data, path, buf, (size_t)n);
}

/* Is t still the incarnation CLUSTER/topics/<name>.json names, read now?
 * Every caller of prepare got t from that file, but a broker paused since
 * (or one whose registry view lags) would otherwise judge the directory of
 * the incarnation registered after t — live data another broker leads — as
 * foreign, and move it aside or restamp it.  Asked right before each such
 * step; anything but "yes" leaves the directory alone (-ESTALE: the tick
 * reads the registry again and re-drives).  Never on the common paths (the
 * stamp is ours, or the directory is new): one read per judgement only. */
static int still_registered(kt_topics *reg, const kt_topic_info *t)
{
	topic_ent *e = NULL;
	sub_stat st;
	char why[128];
	int rc = kt__reg_read(reg, t->name, &e, &st, why, sizeof(why));
	if (rc < 0)
		return rc;
	int same = rc == RF_OK && strcmp(e->info.id, t->id) == 0;
	if (!same)
		KLOG_WARN("topics", "topic %s: id %s is no longer the registered incarnation (%s%s); leaving DATA/%s "
			  "alone", t->name, t->id,
			  rc == RF_OK ? "the registry names " : "the entry is missing or unreadable",
			  rc == RF_OK ? e->info.id : "", t->name);
	kt__ent_free(e);
	return same ? 0 : -ESTALE;
}

/* DATA/<t->name> is stamped with another ID than the registered t->id.
 * Whether that is an earlier incarnation is decided on the whole evidence
 * (reg_ident.c, docs/topics.md "Identity"), never on the stamp alone:
 * reclaimed to the trash only when stamp and manifests agree on an ID that
 * is recorded as deleted; adopted when manifests name the registered ID
 * (the stamp is the odd one out: it is kept aside and rewritten);
 * quarantined otherwise.  1 adopted, 0 moved aside, -errno. */
static int foreign_stamp(kt_topics *reg, const kt_topic_info *t, trash_list *tl)
{
	kt__vol v;
	char why[256];
	int rc = kt__vol_scan(reg, t->name, &v);
	if (rc)
		return rc;
	if (!v.exists || v.stamp_rc != 0)
		return -EAGAIN; /* changed under us: look again */
	int verdict = kt__judge_foreign_stamp(reg, t, &v, why, sizeof(why));
	if (verdict < 0)
		return verdict;
	if (verdict == KT_VERDICT_RECLAIM && reg->o.controller_deletes) {
		/* The delete of that incarnation is still in progress: other
		 * brokers may hold descriptors under the directory, and the
		 * controller renames it once they let go.  Wait for that. */
		char tomb[SUB_PATH_MAX];
		sub_stat tst;
		snprintf(tomb, sizeof(tomb), TOMB_DIR "/%s.json", v.stamp);
		rc = sub_stat_path(reg->o.cluster, tomb, &tst);
		if (rc == 0) {
			KLOG_INFO("topics", "topic %s: DATA/%s still belongs to the deleted id %s, whose delete the "
				  "controller has not finished; waiting for it", t->name, t->name, v.stamp);
			return -EBUSY;
		}
		if (rc != -ENOENT)
			return rc;
	}
	/* The verdict is about to move or restamp a directory: only for the
	 * incarnation the volume registers now. */
	if ((rc = still_registered(reg, t)))
		return rc;
	if (verdict == KT_VERDICT_RECLAIM) {
		KLOG_INFO("topics", "topic %s: directory belongs to an earlier, deleted incarnation (%s); reclaiming it "
			  "for id %s", t->name, why, t->id);
		return kt__move_aside(reg, t->name, v.stamp, KT_TRASH, "reclaimed", tl);
	}
	if (verdict == KT_VERDICT_QUARANTINE) {
		KLOG_ERR("topics", "topic %s (id %s): conflicting identity of DATA/%s (%s); quarantining it, a fresh "
			 "directory is made for the registered topic", t->name, t->id, t->name, why);
		return kt__move_aside(reg, t->name, v.stamp, KT_QUARANTINE, "conflict", tl);
	}
	/* Adopt: keep the contradicting stamp for the operator, then restamp. */
	char from[SUB_PATH_MAX], to[SUB_PATH_MAX];
	snprintf(from, sizeof(from), "%s/" STAMP_NAME, t->name);
	snprintf(to, sizeof(to), "%s/.topic-id.conflict-%" PRId64 ".json", t->name, ku_wall_ms());
	rc = sub_rename(reg->o.data, from, to);
	if (rc && rc != -ENOENT)
		return rc;
	KLOG_WARN("topics", "topic %s: conflicting identity of DATA/%s: %s; keeping the data and restamping it "
		  "with the registered id %s (the old stamp is kept as DATA/%s)", t->name, t->name, why, t->id, to);
	rc = kt__stamp_write(reg, t);
	return rc ? rc : 1;
}

static void mark_dir_ready(kt_topics *reg, const kt_topic_info *t, int ready)
{
	pthread_rwlock_wrlock(&reg->lock);
	topic_ent *e = kt__mem_find(reg, t->name);
	if (e && strcmp(e->info.id, t->id) == 0)
		e->dir_ready = ready;
	pthread_rwlock_unlock(&reg->lock);
}

int kt__prepare_dir_locked(kt_topics *reg, const kt_topic_info *t, trash_list *tl)
{
	pthread_rwlock_rdlock(&reg->lock);
	topic_ent *e = kt__mem_find(reg, t->name);
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
				rc = kt__stamp_write(reg, t);
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
		rc = kt__stamp_read(reg, t->name, sid);
		if (rc == 0 && strcmp(sid, t->id) == 0)
			break; /* ours already */
		if (rc == 0) {
			rc = foreign_stamp(reg, t, tl);
			if (rc == 1) {
				rc = 0; /* adopted */
				break;
			}
			if (rc == 0 || rc == -ENOENT || rc == -EAGAIN)
				continue; /* moved aside (the name is free now) or changed: look again */
			break;
		}
		if (rc == -ENOENT || rc == -EBADMSG) {
			/* Unknown identity: adopt, never delete.  Partition manifests
			 * still carry their own topic IDs, which the storage engine
			 * checks. */
			int src = rc;
			if ((rc = still_registered(reg, t)))
				break;
			KLOG_WARN("topics", "topic %s: adopting the %s directory DATA/%s (stamping it with id %s)",
				  t->name, src == -ENOENT ? "unstamped" : "unreadably stamped", t->name, t->id);
			rc = kt__stamp_write(reg, t);
			break;
		}
		break;
	}
	if (rc == 0)
		mark_dir_ready(reg, t, 1);
	return rc;
}

int kt_topics_prepare_dir(kt_topics *reg, const kt_topic_info *t)
{
	trash_list tl = {0};
	pthread_mutex_lock(&reg->op);
	int rc = kt__prepare_dir_locked(reg, t, &tl);
	pthread_mutex_unlock(&reg->op);
	kt__trash_remove(reg, &tl);
	return rc;
}
