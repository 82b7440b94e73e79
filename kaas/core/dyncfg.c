/*
 * dyncfg.c — the dynamic broker config store (dyncfg.h): reading and
 * writing the write-once versions on the cluster volume, and the published
 * snapshot.  The key table and the file codec are dynkeys.c.
 *
 * Why write-once versions and not one file rewritten with rename: several
 * brokers take AlterConfigs at once, and IncrementalAlterConfigs is a
 * read-modify-write; with rename the second writer silently replaces the
 * first one's change.  With exclusive creates of numbered names the second
 * writer's create of the same number fails, it re-reads the winner's state
 * and applies its edit on top (optimistic concurrency).  The protocol and
 * its argument are in docs/cluster.md ("Dynamic broker configs").
 */
#include "kaas/core/dyncfg.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "kaas/core/config.h"
#include "kaas/core/dyncfg_int.h"
#include "kaas/proto/kerr.h"
#include "util/clock.h"
#include "util/log.h"

#define PEND_MAX 16
#define REFUSED_MAX 32
struct kb_dyncfg {
	sub_vfs *vfs;
	kb_config *stat;               /* copy of the static settings */
	int32_t id;
	kb_dyncfg_options o;
	pthread_mutex_t mu;            /* guards snap, lv, pend, refused */
	kb_dynsnap snap;
	int64_t eff[KB_DYN_COUNT];     /* atomics: the effective values of snap */
	struct {
		int64_t max_name;          /* highest version name at the last poll */
		int64_t state_seq;         /* the version whose state is in force (0: none) */
	} lv[2];
	struct {
		int level;
		int64_t seq;
		int64_t first_mono;
	} pend[PEND_MAX];              /* incomplete versions a writer waits on */
	int npend;
	struct {
		int level;
		int64_t seq;
	} refused[REFUSED_MAX];        /* logged once each */
	int nrefused;
	struct {
		int64_t seq;               /* versions up to this one were `keep` below the newest */
		int64_t mono;              /* when this process saw that (0: no mark) */
	} clean[2];                    /* guarded by wmu */
	pthread_mutex_t wmu;           /* one alter of this process at a time */
};

/* What one entity's directory holds. */
typedef struct scan {
	int64_t max_name;     /* highest version name (0: none) */
	int64_t best_seq;     /* highest valid version (0: none) */
	kb_dyn_set best;
	int64_t incomplete[PEND_MAX]; /* incomplete versions above best_seq */
	int nincomplete;
} scan;

static int refused_before(kb_dyncfg *d, int level, int64_t seq)
{
	for (int i = 0; i < d->nrefused; i++)
		if (d->refused[i].level == level && d->refused[i].seq == seq)
			return 1;
	int at = d->nrefused < REFUSED_MAX ? d->nrefused++ : (int)(seq % REFUSED_MAX);
	d->refused[at].level = level;
	d->refused[at].seq = seq;
	return 0;
}

/* Reads the directory of `entity`, from the highest name down to the
 * first valid version.  With skip_if_seq: when the highest name is that
 * version (already in force), nothing is read.  mu not held. */
static int scan_entity(kb_dyncfg *d, int32_t entity, int64_t skip_if_seq, scan *sc)
{
	char dir[64], path[128];
	char **names = NULL;
	size_t n = 0;
	int level = entity == KB_DYN_DEFAULT ? KB_DYN_LEVEL_DEFAULT : KB_DYN_LEVEL_BROKER;
	memset(sc, 0, sizeof(*sc));
	kb__dyn_entity_dir(dir, sizeof(dir), entity);
	int rc = sub_list(d->vfs, dir, &names, &n);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		int64_t s = kb__dyn_seq_of_name(names[i]);
		if (s > sc->max_name)
			sc->max_name = s;
	}
	if (sc->max_name && sc->max_name == skip_if_seq) {
		sc->best_seq = -1; /* unchanged: the caller keeps what it has */
		goto out;
	}
	/* sub_list sorts by name, and the zero-padded names sort by number. */
	for (size_t i = n; i-- > 0;) {
		int64_t s = kb__dyn_seq_of_name(names[i]);
		if (s < 0)
			continue;
		char *buf = NULL, why[320];
		size_t len = 0;
		if (sub_join(path, sizeof(path), dir, names[i]))
			continue;
		rc = sub_read_file(d->vfs, path, DYN_FILE_MAX, &buf, &len);
		if (rc == -ENOENT) { /* cleaned meanwhile: below a newer one */
			rc = 0;
			continue;
		}
		if (rc == -EFBIG) {
			snprintf(why, sizeof(why), "larger than %d bytes", DYN_FILE_MAX);
			rc = -EINVAL;
		} else if (rc) {
			goto out;
		} else {
			rc = kb__dyn_parse(buf, len, entity, s, &sc->best, why, sizeof(why));
		}
		free(buf);
		if (rc == 0) {
			sc->best_seq = s;
			break;
		}
		if (rc == -EAGAIN) {
			if (sc->nincomplete < PEND_MAX)
				sc->incomplete[sc->nincomplete++] = s;
		} else {
			pthread_mutex_lock(&d->mu);
			int seen = refused_before(d, level, s);
			pthread_mutex_unlock(&d->mu);
			if (!seen)
				KLOG_ERR("dyncfg", "refusing CLUSTER/%s: %s (the highest good version below it stays in force)",
					 path, why);
		}
		memset(&sc->best, 0, sizeof(sc->best));
		rc = 0;
	}
out:
	sub_names_free(names, n);
	return rc;
}

/* ---- the snapshot ------------------------------------------------------------------------------- */

/* Builds the effective values from the two levels over the static
 * settings; mu held. */
static int republish_locked(kb_dyncfg *d)
{
	kb_config *scratch = malloc(sizeof(*scratch));
	if (!scratch)
		return -ENOMEM;
	*scratch = *d->stat;
	for (int lvl = KB_DYN_LEVEL_DEFAULT; lvl <= KB_DYN_LEVEL_BROKER; lvl++)
		for (int k = 0; k < KB_DYN_COUNT; k++) {
			char err[256];
			if ((d->snap.level[lvl].set & (1u << k)) &&
			    kb_config_set(scratch, kb_dyn_name(k), d->snap.level[lvl].val[k], err, sizeof(err)))
				KLOG_ERR("dyncfg", "%s", err); /* validated when read: cannot happen */
		}
	for (int k = 0; k < KB_DYN_COUNT; k++) {
		d->snap.eff[k] = kb__dyn_field(scratch, k);
		kb_dyn_format(k, scratch, d->snap.eff_text[k]);
		__atomic_store_n(&d->eff[k], d->snap.eff[k], __ATOMIC_RELEASE);
	}
	d->snap.gen++;
	free(scratch);
	return 0;
}

static int set_equal(const kb_dyn_set *a, const kb_dyn_set *b)
{
	if (a->set != b->set)
		return 0;
	for (int k = 0; k < KB_DYN_COUNT; k++)
		if ((a->set & (1u << k)) && strcmp(a->val[k], b->val[k]) != 0)
			return 0;
	return 1;
}

static void describe_change(int32_t entity, const kb_dyn_set *was, const kb_dyn_set *now, int64_t seq)
{
	char line[1024], ename[16];
	size_t off = 0;
	kb__dyn_entity_name(ename, sizeof(ename), entity);
	line[0] = '\0';
	for (int k = 0; k < KB_DYN_COUNT && off < sizeof(line); k++) {
		uint32_t bit = 1u << k;
		if ((was->set & bit) == (now->set & bit) && (!(now->set & bit) || !strcmp(was->val[k], now->val[k])))
			continue;
		if (now->set & bit)
			off += (size_t)snprintf(line + off, sizeof(line) - off, " %s=%s", kb_dyn_name(k), now->val[k]);
		else
			off += (size_t)snprintf(line + off, sizeof(line) - off, " %s (removed)", kb_dyn_name(k));
	}
	KLOG_INFO("dyncfg", "dynamic configs of %s now version %" PRId64 ":%s", ename, seq, line[0] ? line : " (unchanged)");
}

int kb_dyncfg_poll(kb_dyncfg *d)
{
	int changed = 0, first_err = 0;
	int32_t ents[2] = {KB_DYN_DEFAULT, d->id};
	for (int lvl = 0; lvl < 2; lvl++) {
		scan sc;
		pthread_mutex_lock(&d->mu);
		int64_t known = d->lv[lvl].max_name == d->lv[lvl].state_seq ? d->lv[lvl].state_seq : -1;
		pthread_mutex_unlock(&d->mu);
		int rc = scan_entity(d, ents[lvl], known, &sc);
		if (rc) {
			if (!first_err)
				first_err = rc;
			continue;
		}
		pthread_mutex_lock(&d->mu);
		if (sc.best_seq >= 0)
			d->lv[lvl].max_name = sc.max_name;
		/* Versions only move forward: a refused or vanished newest one
		 * leaves the last good state in force. */
		if (sc.best_seq > d->lv[lvl].state_seq) {
			if (!set_equal(&sc.best, &d->snap.level[lvl])) {
				describe_change(ents[lvl], &d->snap.level[lvl], &sc.best, sc.best_seq);
				d->snap.level[lvl] = sc.best;
				changed = 1;
			}
			d->lv[lvl].state_seq = sc.best_seq;
			d->snap.seq[lvl] = sc.best_seq;
		}
		pthread_mutex_unlock(&d->mu);
	}
	if (changed) {
		pthread_mutex_lock(&d->mu);
		int rc = republish_locked(d);
		pthread_mutex_unlock(&d->mu);
		if (rc && !first_err)
			first_err = rc;
	}
	return first_err ? first_err : changed;
}

void kb_dyncfg_snapshot(kb_dyncfg *d, kb_dynsnap *out)
{
	pthread_mutex_lock(&d->mu);
	*out = d->snap;
	pthread_mutex_unlock(&d->mu);
}

uint64_t kb_dyncfg_gen(kb_dyncfg *d)
{
	pthread_mutex_lock(&d->mu);
	uint64_t g = d->snap.gen;
	pthread_mutex_unlock(&d->mu);
	return g;
}

int64_t kb_dyncfg_value(kb_dyncfg *d, int k)
{
	return __atomic_load_n(&d->eff[k], __ATOMIC_ACQUIRE);
}

int32_t kb_dyncfg_broker_id(const kb_dyncfg *d)
{
	return d->id;
}

const kb_config *kb_dyncfg_static(const kb_dyncfg *d)
{
	return d->stat;
}

int64_t kb_broker_dyn(const kb_broker *b, int k)
{
	return b->dyn ? kb_dyncfg_value(b->dyn, k) : kb__dyn_field(&b->cfg, k);
}

/* ---- open, close ---------------------------------------------------------------------------------- */

void kb_dyncfg_options_init(kb_dyncfg_options *o)
{
	o->write_deadline_ms = 3000;
	o->abandon_ms = 10000;
	o->clean_ms = 10000;
	o->keep = 8;
}

int kb_dyncfg_open(sub_vfs *cluster, const kb_config *stat, int32_t broker_id, const kb_dyncfg_options *o,
		   kb_dyncfg **out)
{
	*out = NULL;
	if (!cluster || !stat || broker_id < 0)
		return -EINVAL;
	kb_dyncfg *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	if (!(d->stat = malloc(sizeof(*d->stat)))) {
		free(d);
		return -ENOMEM;
	}
	*d->stat = *stat;
	d->vfs = cluster;
	d->id = broker_id;
	if (o)
		d->o = *o;
	else
		kb_dyncfg_options_init(&d->o);
	if (d->o.keep < 2)
		d->o.keep = 2;
	/* The argument of docs/cluster.md needs both well over the deadline. */
	if (d->o.clean_ms < 2 * d->o.write_deadline_ms)
		d->o.clean_ms = 2 * d->o.write_deadline_ms;
	if (d->o.abandon_ms < 2 * d->o.write_deadline_ms)
		d->o.abandon_ms = 2 * d->o.write_deadline_ms;
	pthread_mutex_init(&d->mu, NULL);
	pthread_mutex_init(&d->wmu, NULL);
	pthread_mutex_lock(&d->mu);
	int rc = republish_locked(d); /* the static values until something is read */
	pthread_mutex_unlock(&d->mu);
	if (rc == 0)
		rc = kb_dyncfg_poll(d);
	if (rc < 0) {
		kb_dyncfg_close(d);
		return rc;
	}
	*out = d;
	return 0;
}

void kb_dyncfg_close(kb_dyncfg *d)
{
	if (!d)
		return;
	pthread_mutex_destroy(&d->mu);
	pthread_mutex_destroy(&d->wmu);
	free(d->stat);
	free(d);
}

/* ---- alter ------------------------------------------------------------------------------------------ */

static void sleep_ms(int64_t ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* 1 while an incomplete version of the scan has been seen incomplete for
 * less than abandon_ms (its writer may still be writing it). */
static int young_incomplete(kb_dyncfg *d, int level, const scan *sc, int64_t now)
{
	int young = 0;
	pthread_mutex_lock(&d->mu);
	for (int i = 0; i < sc->nincomplete; i++) {
		int j;
		for (j = 0; j < d->npend; j++)
			if (d->pend[j].level == level && d->pend[j].seq == sc->incomplete[i])
				break;
		if (j == d->npend) {
			j = d->npend < PEND_MAX ? d->npend++ : (int)(sc->incomplete[i] % PEND_MAX);
			d->pend[j].level = level;
			d->pend[j].seq = sc->incomplete[i];
			d->pend[j].first_mono = now;
		}
		if (now - d->pend[j].first_mono < d->o.abandon_ms)
			young = 1;
		else if (now - d->pend[j].first_mono < d->o.abandon_ms + 1000) /* say it once or so */
			KLOG_WARN("dyncfg", "version %" PRId64 " of the %s configs stayed incomplete for %lld ms: "
				  "abandoned (its writer did not acknowledge it)", sc->incomplete[i],
				  level ? "broker" : "default", (long long)(now - d->pend[j].first_mono));
	}
	pthread_mutex_unlock(&d->mu);
	return young;
}

/* Removes old versions; ENOENT is success, so two cleaners at once, or one
 * interrupted and run again, converge.  A version goes only once this
 * process has known it to be `keep` below the newest for clean_ms: a
 * writer whose listing is older than that is past its deadline and does
 * not acknowledge, so a name freed here and created again by such a
 * writer never stands for an acknowledged change.  wmu held. */
static void cleanup(kb_dyncfg *d, int level, const char *dir, int64_t top)
{
	char **names = NULL;
	size_t n = 0;
	int64_t now = ku_mono_ms(), upto;
	if (!d->clean[level].mono || d->clean[level].seq < 1) {
		d->clean[level].seq = top - d->o.keep;
		d->clean[level].mono = now;
		return;
	}
	if (now - d->clean[level].mono < d->o.clean_ms)
		return;
	upto = d->clean[level].seq;
	d->clean[level].seq = top - d->o.keep; /* the next round's */
	d->clean[level].mono = now;
	if (upto < 1 || sub_list(d->vfs, dir, &names, &n))
		return;
	for (size_t i = 0; i < n; i++) {
		int64_t s = kb__dyn_seq_of_name(names[i]);
		char path[128];
		if (s < 0 || s > upto || sub_join(path, sizeof(path), dir, names[i]))
			continue;
		int rc = sub_unlink(d->vfs, path);
		if (rc && rc != -ENOENT)
			KLOG_WARN("dyncfg", "removing the old version CLUSTER/%s: %s", path, sub_strerror(rc));
	}
	sub_names_free(names, n);
}

static int new_nonce(char nonce[NONCE_LEN + 1])
{
	uint8_t r[NONCE_LEN / 2];
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return -EIO;
	for (int i = 0; i < NONCE_LEN / 2; i++)
		snprintf(nonce + 2 * i, 3, "%02x", r[i]);
	return 0;
}

/* Reads back version `seq`: 1 when it holds our nonce, 0 when another
 * writer's, -ENOENT when it is gone, -EAGAIN when incomplete, -errno. */
static int read_back(kb_dyncfg *d, int32_t entity, const char *path, int64_t seq, const char *nonce)
{
	char *buf = NULL, why[320], got[NONCE_LEN + 1];
	size_t len = 0;
	int32_t writer = -1;
	kb_dyn_set s;
	int rc = sub_read_file(d->vfs, path, DYN_FILE_MAX, &buf, &len);
	if (rc == -EFBIG)
		return 0;
	if (rc)
		return rc;
	rc = kb__dyn_parse_full(buf, len, entity, seq, &s, &writer, got, why, sizeof(why));
	free(buf);
	if (rc == -EAGAIN)
		return -EAGAIN;
	return rc == 0 && writer == d->id && strcmp(got, nonce) == 0;
}

int16_t kb_dyncfg_alter(kb_dyncfg *d, int32_t entity, kb_dyn_edit_fn edit, void *arg, int validate_only, char *msg,
			size_t msglen)
{
	char dir[64], ename[16];
	int level = entity == KB_DYN_DEFAULT ? KB_DYN_LEVEL_DEFAULT : KB_DYN_LEVEL_BROKER;
	int16_t err = KERR_NONE;
	kb__dyn_entity_dir(dir, sizeof(dir), entity);
	kb__dyn_entity_name(ename, sizeof(ename), entity);
	msg[0] = '\0';
	pthread_mutex_lock(&d->wmu);
	int64_t start = ku_mono_ms(), give_up = start + d->o.abandon_ms + 5000;
	for (int attempt = 0;; attempt++) {
		scan sc;
		int64_t t0 = ku_mono_ms(); /* the deadline runs from the listing */
		int rc = scan_entity(d, entity, -1, &sc);
		if (rc) {
			snprintf(msg, msglen, "reading the dynamic configs of broker %s failed on the volume: %s",
				 entity == KB_DYN_DEFAULT ? "(default)" : ename, sub_strerror(rc));
			err = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
		int64_t now = ku_mono_ms();
		if (now > give_up) {
			snprintf(msg, msglen, "the dynamic configs of %s changed under every attempt for %lld ms (%d "
				 "attempts): try again", ename, (long long)(now - start), attempt);
			err = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
		if (young_incomplete(d, level, &sc, now)) {
			sleep_ms(50); /* another writer is between its create and its write */
			continue;
		}
		kb_dyn_set next = sc.best;
		if ((err = edit(arg, &next, msg, msglen)) != KERR_NONE)
			goto out;
		if (validate_only || (sc.best_seq > 0 && set_equal(&next, &sc.best)) ||
		    (sc.best_seq == 0 && next.set == 0))
			goto out; /* nothing to write */
		if (sc.max_name >= DYN_SEQ_MAX) {
			snprintf(msg, msglen, "CLUSTER/%s holds a version named %" PRId64 ": no name is left above it", dir,
				 sc.max_name);
			err = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
		int64_t seq = sc.max_name + 1;
		char nonce[NONCE_LEN + 1], name[32], path[128];
		if (new_nonce(nonce)) {
			snprintf(msg, msglen, "no randomness for the writer's nonce");
			err = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
		char *text = kb__dyn_encode(entity, seq, &next, d->id, nonce);
		snprintf(name, sizeof(name), "%0*" PRId64 ".json", DYN_SEQ_DIGITS, seq);
		if (!text || sub_join(path, sizeof(path), dir, name)) {
			free(text);
			snprintf(msg, msglen, "out of memory");
			err = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
		rc = sub_mkdirs(d->vfs, dir, 0755);
		if (rc == 0)
			rc = sub_create_excl(d->vfs, path, text, strlen(text));
		free(text);
		/* Read-back decides: a create retried after a lost reply answers
		 * EEXIST to the writer that made the file. */
		int mine = read_back(d, entity, path, seq, nonce);
		int64_t took = ku_mono_ms() - t0;
		/* Created (so written and fsynced) and already gone: newer
		 * versions, each of which read it complete, were written on top
		 * and it was cleaned; it is in their state.  Retrying would apply
		 * the edit twice.  (Only past the deadline, below: cleanup waits
		 * clean_ms.) */
		if (mine == -ENOENT && rc == 0)
			mine = 1;
		if (mine == 1 && took > d->o.write_deadline_ms) {
			snprintf(msg, msglen, "writing version %" PRId64 " of the dynamic configs of %s took %lld ms, over "
				 "the %lld ms bound from its read: it may have been passed over; DescribeConfigs shows what "
				 "is in force", seq, ename, (long long)took, (long long)d->o.write_deadline_ms);
			err = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
		if (mine == 1) {
			if (rc && rc != -EEXIST)
				KLOG_WARN("dyncfg", "CLUSTER/%s: the create answered %s but the version is ours", path,
					  sub_strerror(rc));
			cleanup(d, level, dir, seq);
			break;
		}
		if (rc == 0) {
			KLOG_ERR("dyncfg", "CLUSTER/%s: the exclusive create succeeded but the file does not hold this "
				 "writer's version: the volume breaks the create contract", path);
			continue;
		}
		if (rc != -EEXIST) {
			snprintf(msg, msglen, "writing CLUSTER/%s failed on the volume (%s); the change may or may not "
				 "be in force: DescribeConfigs shows what is", path, sub_strerror(rc));
			err = KERR_UNKNOWN_SERVER_ERROR;
			goto out;
		}
		/* Lost the race for this name: re-read and edit again. */
	}
	if (kb_dyncfg_poll(d) < 0)
		KLOG_WARN("dyncfg", "re-reading the dynamic configs after a change failed; the next poll retries");
out:
	pthread_mutex_unlock(&d->wmu);
	return err;
}
