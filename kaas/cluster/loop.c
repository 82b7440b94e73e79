/*
 * loop.c — the cluster loop, one pass every kaas.cluster.poll.ms:
 *   membership  read every brokers/<id>.json into the view (the observer's
 *               clock), look for exit certificates, probe same-host tokens;
 *   controller  find the controller, elect one when it is gone (lowest live
 *               id first), step down on a higher epoch; as controller,
 *               balance the live brokers and publish when the result changed;
 *   assignment  read the pointer (and the document when it is new);
 *   driver      converge the partition table to the assignment last read
 *               (driver.c): relinquish what it lost, report `released`, take
 *               over what it gained once the successor rule allows;
 *   deletes     as controller, finish topic deletes every broker let go of
 *               (tdelete.c);
 *   leaders     hand the applied leader map and live brokers to the table.
 * Every step is idempotent and re-driven by the next pass (Rule 2).  Files
 * that do not decode are refused by name in the log (rate-limited) and never
 * acted on.
 *
 * The driver is driver.c, the delete step tdelete.c; this file holds the
 * other steps, the refusal log they share and the loop itself.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kaas/cluster/runtime_int.h"
#include "kaas/core/leaders.h"
#include "kaas/core/ptable.h"
#include "kaas/topics/topics.h"
#include "util/clock.h"
#include "util/log.h"

/* ---- refusals, logged by name but not every poll ------------------------------------- */

#define REFUSE_SLOTS 32
static struct {
	char what[96];
	int64_t next_ns;
} refused[REFUSE_SLOTS];

/* `consequence` says what happens next: a refused file leaves the last good
 * state in force; a failed take-over is re-driven. */
void kcl__refuse_as(const char *what, const char *why, const char *consequence)
{
	int64_t now = ku_mono_ns();
	int slot = -1;
	for (int i = 0; i < REFUSE_SLOTS; i++)
		if (strncmp(refused[i].what, what, sizeof(refused[i].what) - 1) == 0) { /* stored cut short */
			slot = i;
			break;
		}
	if (slot < 0) {
		slot = 0;
		for (int i = 1; i < REFUSE_SLOTS; i++)
			if (refused[i].next_ns < refused[slot].next_ns)
				slot = i;
		snprintf(refused[slot].what, sizeof(refused[slot].what), "%s", what);
		refused[slot].next_ns = 0;
	}
	if (now < refused[slot].next_ns)
		return;
	refused[slot].next_ns = now + 30 * 1000000000LL;
	KLOG_WARN("cluster", "%s: %s (%s)", what, why, consequence);
}

static void refuse(const char *what, const char *why)
{
	char w[400];
	snprintf(w, sizeof(w), "refusing %s", what);
	kcl__refuse_as(w, why, "ignored; the last good state stays in force");
}

/* ---- membership ------------------------------------------------------------------------ */

static kcl_hostent *hostent(kcl_rt *rt, int32_t id, kcl_incarn inc)
{
	for (size_t i = 0; i < rt->nhosts; i++)
		if (rt->hosts[i].id == id && kcl_incarn_cmp(rt->hosts[i].inc, inc) == 0)
			return &rt->hosts[i];
	if (rt->nhosts == rt->caphosts) {
		size_t nc = rt->caphosts ? rt->caphosts * 2 : 16;
		kcl_hostent *nh = realloc(rt->hosts, nc * sizeof(*nh));
		if (!nh)
			return NULL;
		rt->hosts = nh;
		rt->caphosts = nc;
	}
	kcl_hostent *h = &rt->hosts[rt->nhosts++];
	memset(h, 0, sizeof(*h));
	h->id = id;
	h->inc = inc;
	h->first_seen_ns = ku_mono_ns();
	return h;
}

static int parse_hb_name(const char *s, int32_t *id)
{
	int64_t v = 0;
	const char *p = s;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (*p - '0');
		if (v > KCL_ID_MAX)
			return -1;
	}
	if (strcmp(p, ".json") != 0)
		return -1;
	*id = (int32_t)v;
	return 0;
}

static void membership(kcl_rt *rt)
{
	sub_vfs *v = rt->b->cluster;
	char **names = NULL;
	size_t n = 0;
	int rc = sub_list(v, "brokers", &names, &n);
	if (rc) {
		refuse("brokers/", sub_strerror(rc));
		return;
	}
	/* Once this incarnation has run for a session timeout, the certificates
	 * of its id's older incarnations have done their work: those ended
	 * before this one began, so every observer has judged them expired by
	 * now even without one.  Removing a certificate is always safe (without
	 * it, a peer waits out the lease); keeping them all would make this
	 * listing grow by one name per restart. */
	int sweep = !rt->gone_swept && kcl_view_settled(&rt->view, ku_mono_ns());
	for (size_t i = 0; sweep && i < n; i++) {
		int32_t gid;
		kcl_incarn ginc;
		char path[300];
		if (kcl_gone_parse_name(names[i], &gid, &ginc) || gid != rt->id ||
		    ginc.incarnation >= rt->inc.incarnation)
			continue;
		snprintf(path, sizeof(path), "brokers/%s", names[i]);
		int u = sub_unlink(v, path);
		if (u && u != -ENOENT)
			KLOG_WARN("cluster", "removing the old exit certificate %s: %s", path, sub_strerror(u));
	}
	if (sweep)
		rt->gone_swept = 1;
	for (size_t i = 0; i < n; i++) {
		int32_t id;
		if (parse_hb_name(names[i], &id))
			continue; /* certificates, temporaries */
		kcl_hb hb;
		char err[256], what[96];
		int64_t s = ku_mono_ns();
		rc = kcl_hb_read(v, id, &hb, err, sizeof(err));
		int64_t e = ku_mono_ns();
		if (rc == 0) {
			kcl_view_observe(&rt->view, &hb, s, e);
			kcl_hostent *h = hostent(rt, hb.id, hb.inc);
			if (h)
				snprintf(h->host_id, sizeof(h->host_id), "%s", hb.host_id);
		} else {
			if (rc != -ENOENT) {
				snprintf(what, sizeof(what), "brokers/%d.json", id);
				refuse(what, err);
			}
			kcl_view_unreadable(&rt->view, id, e);
		}
	}
	sub_names_free(names, n);
	/* Proofs of death, faster than the session timeout. */
	for (size_t i = 0; i < rt->view.n; i++) {
		kcl_peer *p = &rt->view.peers[i];
		if (p->live != KCL_LIVE_ALIVE || (p->id == rt->id && kcl_incarn_cmp(p->inc, rt->inc) == 0))
			continue;
		char by[KCL_GONE_BY_MAX + 1], how[KCL_GONE_HOW_MAX + 1];
		if (kcl_gone_read(v, p->id, p->inc, by, sizeof(by), how, sizeof(how)) == 1) {
			KLOG_INFO("cluster", "broker %d incarnation %" PRIu64 " is gone (exit certificate by %s%s%s)",
				  p->id, p->inc.incarnation, by, how[0] ? ": " : "", how);
			kcl_view_proven_gone(&rt->view, p->id, p->inc);
			continue;
		}
		kcl_hostent *h = hostent(rt, p->id, p->inc);
		if (h && h->host_id[0] && strcmp(h->host_id, rt->host_id) == 0 &&
		    kcl_token_probe(rt->b->cluster_id, p->id, p->inc) == 0) {
			KLOG_INFO("cluster", "broker %d incarnation %" PRIu64 " is gone (same-host token refused)",
				  p->id, p->inc.incarnation);
			kcl_gone_write(v, p->id, p->inc, "same-host");
			kcl_view_proven_gone(&rt->view, p->id, p->inc);
		}
	}
}

/* A live broker that may lead: the newest incarnation of its id, alive. */
int kcl__eligible_peer(const kcl_rt *rt, const kcl_peer *p)
{
	if (p->live != KCL_LIVE_ALIVE || p->superseded)
		return 0;
	if (kcl_view_current(&rt->view, p->id) != p)
		return 0;
	return p->state == KCL_ST_RUNNING || p->state == KCL_ST_DRAINING;
}

/* ---- controller ----------------------------------------------------------------------- */

static int assign_equal(const kcl_assign *a, const kcl_assign *b)
{
	if (a->nbrokers != b->nbrokers || a->ntopics != b->ntopics || a->nshards != b->nshards)
		return 0;
	for (size_t i = 0; i < a->nbrokers; i++)
		if (a->brokers[i].id != b->brokers[i].id || kcl_incarn_cmp(a->brokers[i].inc, b->brokers[i].inc))
			return 0;
	for (size_t i = 0; i < a->ntopics; i++) {
		const kcl_atopic *x = &a->topics[i], *y = &b->topics[i];
		if (strcmp(x->name, y->name) || strcmp(x->topic_id, y->topic_id) || x->n != y->n)
			return 0;
		for (int32_t k = 0; k < x->n; k++)
			if (x->parts[k].leader != y->parts[k].leader || x->parts[k].epoch != y->parts[k].epoch)
				return 0;
	}
	for (int32_t k = 0; k < a->nshards; k++)
		if (a->shards[k].leader != b->shards[k].leader || a->shards[k].epoch != b->shards[k].epoch)
			return 0;
	return 1;
}

static void assignment_poll(kcl_rt *rt);


/* The controller checks that the pointer still names its document: one
 * that another writer replaced or damaged is republished (a reader that
 * cannot follow it would never apply anything). */
static int pointer_ok(kcl_rt *rt, kcl_gen mine)
{
	char *buf = NULL, why[256];
	size_t len = 0;
	kcl_aptr p;
	int rc = sub_read_file(rt->b->cluster, "assignment.json", KCL_APTR_MAX_BYTES, &buf, &len);
	if (!rc)
		rc = kcl_aptr_decode(buf, len, &p, why, sizeof(why));
	free(buf);
	if (rc || kcl_gen_cmp(p.gen, mine) != 0) {
		KLOG_WARN("cluster", "controller epoch %" PRId64 ": assignment.json no longer names generation %" PRId64
				     " (%s); publishing again",
			  rt->ctl_epoch, mine.generation, rc ? "unreadable" : "another document");
		return 0;
	}
	return 1;
}

/* pointer_ok, answered from the pointer this pass's poll read when it
 * names `mine` (the poll runs just before the controller step). */
static int pointer_names(kcl_rt *rt, kcl_gen mine)
{
	if (rt->areader.pointer_valid && kcl_gen_cmp(rt->areader.pointer_gen, mine) == 0)
		return 1;
	return pointer_ok(rt, mine);
}

static void publish(kcl_rt *rt)
{
	kb_broker *b = rt->b;
	kt_topic_info *list = NULL;
	size_t nt = 0;
	if (kt_topics_list(b->topics, &list, &nt))
		return;
	kcl_bbroker *br = calloc(rt->view.n + 1, sizeof(*br));
	kcl_btopic *tp = calloc(nt ? nt : 1, sizeof(*tp));
	int32_t **floors = calloc(nt ? nt : 1, sizeof(*floors));
	kcl_assign next;
	memset(&next, 0, sizeof(next));
	if (!br || !tp || !floors)
		goto out;
	size_t nb = 0;
	const kcl_assign *prev = rt->have_cur ? &rt->cur : NULL;
	int64_t now = ku_mono_ns();
	for (size_t i = 0; i < rt->view.n; i++) {
		const kcl_peer *p = &rt->view.peers[i];
		if (!kcl__eligible_peer(rt, p))
			continue;
		/* A joiner takes nothing over before it has watched its peers for
		 * a session (kcl_view_settled): give it partitions only once that
		 * is over, or they would wait on it. */
		const kcl_abroker *was = prev ? kcl_assign_broker(prev, p->id) : NULL;
		kcl_hostent *h = hostent(rt, p->id, p->inc);
		if (h && now - h->first_seen_ns < rt->session_ns && !(was && kcl_incarn_cmp(was->inc, p->inc) == 0))
			continue;
		int self = p->id == rt->id && kcl_incarn_cmp(p->inc, rt->inc) == 0;
		pthread_mutex_lock(&rt->mu);
		int draining = self ? rt->state == KCL_ST_DRAINING : p->state == KCL_ST_DRAINING;
		pthread_mutex_unlock(&rt->mu);
		br[nb++] = (kcl_bbroker){p->id, p->inc, p->rack, draining};
	}
	size_t k = 0;
	for (size_t i = 0; i < nt; i++)
		if (list[i].partitions > 0)
			tp[k++] = (kcl_btopic){list[i].name, list[i].id, list[i].partitions, NULL};
	kcl_binput in = {br, nb, tp, k, KCL_NSHARDS, prev, {rt->ctl_epoch, 0}, rt->id};
	/* Nothing to balance when nothing it reads changed since the last pass
	 * that found the assignment in force already right (kcl_balance_sig):
	 * at 10,000 partitions a balance is most of the controller's pass. */
	uint64_t sig = kcl_balance_sig(&in);
	if (prev && prev->gen.controller_epoch == rt->ctl_epoch && rt->have_in_sig && sig == rt->in_sig) {
		/* The pointer read at the start of this pass is still this
		 * controller's document: nothing to read again. */
		if (pointer_names(rt, prev->gen)) {
			rt->balances_skipped++;
			goto out;
		}
		rt->have_in_sig = 0; /* republished below */
	}
	for (size_t i = 0; i < k; i++) {
		const kcl_atopic *pt = prev ? kcl_assign_topic(prev, tp[i].name) : NULL;
		if (!pt || strcmp(pt->topic_id, tp[i].topic_id) != 0) {
			/* New to the assignment (first controller on a volume an earlier
			 * single broker ran, or a topic created since): epochs continue
			 * above whatever its files carry. */
			floors[i] = calloc((size_t)tp[i].partitions, sizeof(int32_t));
			for (int32_t p = 0; floors[i] && p < tp[i].partitions; p++)
				floors[i][p] = kb_ptable_disk_epoch(b->parts, tp[i].name, p);
			tp[i].epoch_floor = floors[i];
		}
	}
	int64_t g = 1;
	if (prev && prev->gen.controller_epoch == rt->ctl_epoch)
		g = prev->gen.generation + 1;
	if (rt->last_pub_gen >= g)
		g = rt->last_pub_gen + 1;
	in.gen.generation = g;
	kcl_bstats st;
	int rc = kcl_balance(&in, &next, &st);
	if (rc) {
		KLOG_ERR("cluster", "controller: balancing failed: %s", strerror(-rc));
		goto out;
	}
	rt->balances++;
	if (prev && prev->gen.controller_epoch == rt->ctl_epoch && assign_equal(prev, &next) && pointer_names(rt, prev->gen)) {
		rt->in_sig = sig;
		rt->have_in_sig = 1;
		goto out;
	}
	if (!kcl_lease_holds(&rt->lease, ku_mono_ns()) || kcl_ctl_superseded(b->cluster, rt->ctl_epoch) != 0)
		goto out;
	char err[256];
	rc = kcl_assign_publish(b->cluster, &next, ku_wall_ms(), err, sizeof(err));
	if (rc) {
		KLOG_WARN("cluster", "controller: publishing generation %" PRId64 ": %s", g, err);
		goto out;
	}
	rt->last_pub_gen = g;
	KLOG_INFO("cluster",
		  "controller epoch %" PRId64 ": published generation %" PRId64 " (%zu broker(s), %zu partition(s) "
		  "moved, %zu kept, %zu unled)",
		  rt->ctl_epoch, g, nb, st.moved_parts, st.kept_parts, st.unled);
	assignment_poll(rt);
out:
	kcl_assign_free(&next);
	for (size_t i = 0; floors && i < nt; i++)
		free(floors[i]);
	free(floors);
	free(tp);
	free(br);
	free(list);
}


static void controller(kcl_rt *rt)
{
	sub_vfs *v = rt->b->cluster;
	int64_t now = ku_mono_ns();
	kcl_ctl_view cv;
	/* Claims are judged against the highest epoch this broker knows to be
	 * real (controller.h): the assignment it follows (read just before),
	 * its own claim; with neither, a fresh cluster's 0, or the lowest
	 * claim present when assignment.json exists but cannot be read. */
	int64_t base = rt->areader.max_epoch > rt->ctl_epoch ? rt->areader.max_epoch : rt->ctl_epoch;
	if (base == 0 && rt->areader.pointer_present)
		base = KCL_CTL_BASE_LOWEST;
	int rc = kcl_ctl_scan(v, base, &cv);
	if (rc) {
		refuse("controller/", sub_strerror(rc));
		return;
	}
	if (cv.impossible) {
		char what[64];
		snprintf(what, sizeof(what), "controller/%010" PRId64 ".json", cv.impossible_lowest);
		refuse(what, cv.impossible_note);
	}
	/* A complete claim naming this very incarnation that this process does
	 * not hold: forged, or its own attempt whose read-back failed.  Either
	 * way nobody controls at that epoch; followed, everyone would wait on
	 * a controller that does nothing. */
	int forged = cv.highest_complete > 0 && cv.current.owner == rt->id &&
		     kcl_incarn_cmp(cv.current.inc, rt->inc) == 0 && rt->ctl_epoch != cv.highest_complete;
	if (forged) {
		char what[64];
		snprintf(what, sizeof(what), "controller/%010" PRId64 ".json", cv.highest_complete);
		refuse(what, "names this broker's incarnation, which does not hold that epoch");
	}
	if (cv.highest_complete > 0)
		kcl_areader_note_epoch(&rt->areader, cv.highest_complete);
	if (cv.highest_name > cv.highest_complete && cv.note[0]) {
		char what[64];
		snprintf(what, sizeof(what), "controller/%010" PRId64 ".json", cv.highest_name);
		refuse(what, cv.note);
	}
	if (rt->ctl_epoch > 0) {
		if (cv.highest_name > rt->ctl_epoch || rt->areader.max_epoch > rt->ctl_epoch ||
		    kcl_ctl_superseded(v, rt->ctl_epoch) == 1) {
			KLOG_WARN("cluster", "controller epoch %" PRId64 ": a higher epoch exists; stepping down",
				  rt->ctl_epoch);
			rt->ctl_epoch = 0;
		} else {
			rt->ctl_owner = rt->id;
			publish(rt);
			if (now >= rt->ctl_cleanup_ns) {
				unsigned removed;
				kcl_ctl_cleanup(v, rt->ctl_epoch, 8, &removed);
				if (rt->have_cur)
					kcl_assign_cleanup(v, rt->cur.gen, 4, &removed);
				rt->ctl_cleanup_ns = now + 10 * 1000000000LL;
			}
			return;
		}
	}
	/* Is there a live controller? */
	int live = 0;
	if (forged) {
		live = 0;
	} else if (cv.highest_complete > 0 && cv.highest_name == cv.highest_complete) {
		const kcl_peer *p = kcl_view_get(&rt->view, cv.current.owner, cv.current.inc);
		rt->ctl_owner = cv.current.owner;
		if (p && p->live == KCL_LIVE_ALIVE && !p->superseded)
			live = 1;
		else if (!p && !kcl_view_settled(&rt->view, now))
			live = 1; /* not seen yet: give it a session to show up */
	} else if (cv.highest_name > cv.highest_complete) {
		/* Undecided claim on top: nobody holds that epoch; wait it out. */
		if (rt->undecided_epoch != cv.highest_name) {
			rt->undecided_epoch = cv.highest_name;
			rt->undecided_since_ns = now;
		}
		live = now - rt->undecided_since_ns < rt->session_ns;
	}
	if (live) {
		rt->noctl_since_ns = 0;
		return;
	}
	rt->ctl_owner = -1;
	pthread_mutex_lock(&rt->mu);
	int draining = rt->state != KCL_ST_RUNNING;
	pthread_mutex_unlock(&rt->mu);
	if (draining || !kcl_lease_holds(&rt->lease, now))
		return;
	if (!rt->noctl_since_ns)
		rt->noctl_since_ns = now;
	/* The lowest live id races first; the others after a back-off. */
	int rank = 0;
	for (size_t i = 0; i < rt->view.n; i++) {
		const kcl_peer *p = &rt->view.peers[i];
		if (kcl__eligible_peer(rt, p) && p->state == KCL_ST_RUNNING && p->id < rt->id)
			rank++;
	}
	if (now - rt->noctl_since_ns < (int64_t)rank * 4 * rt->poll_ns)
		return;
	kcl_claim mine;
	memset(&mine, 0, sizeof(mine));
	mine.epoch = kcl_ctl_next_epoch(&cv, rt->areader.max_epoch);
	if (mine.epoch <= 0 || mine.epoch > KCL_EPOCH_MAX) {
		refuse("controller/ (epochs)", "no controller epoch left below the maximum");
		return;
	}
	mine.owner = rt->id;
	mine.inc = rt->inc;
	mine.nonce = ((uint64_t)ku_mono_ns() ^ rt->inc.nonce ^ (uint64_t)mine.epoch) & ((1ULL << 53) - 1);
	if (!mine.nonce)
		mine.nonce = 1;
	snprintf(mine.endpoint, sizeof(mine.endpoint), "%s:%d", rt->b->host, rt->b->port);
	mine.wall_ms = ku_wall_ms();
	int outcome = 0;
	kcl_claim winner;
	char err[256];
	rc = kcl_ctl_elect(v, &mine, 3, &outcome, &winner, err, sizeof(err));
	if (rc) {
		KLOG_WARN("cluster", "controller election at epoch %" PRId64 ": %s", mine.epoch, err);
		return;
	}
	if (outcome == KCL_ELECT_WON) {
		rt->ctl_epoch = mine.epoch;
		rt->ctl_owner = rt->id;
		rt->noctl_since_ns = 0;
		kcl_areader_note_epoch(&rt->areader, mine.epoch);
		KLOG_INFO("cluster", "broker %d elected controller at epoch %" PRId64, rt->id, mine.epoch);
		publish(rt);
	} else if (outcome == KCL_ELECT_LOST) {
		KLOG_DEBUG("cluster", "controller epoch %" PRId64 " went to broker %d", mine.epoch, winner.owner);
	}
}

/* ---- assignment ----------------------------------------------------------------------- */

static void assignment_poll(kcl_rt *rt)
{
	kcl_assign a;
	char err[256];
	int rc = kcl_assign_poll(rt->b->cluster, &rt->areader, &a, err, sizeof(err));
	if (rc == 1) {
		if (rt->have_cur)
			kcl_assign_free(&rt->cur);
		rt->cur = a;
		rt->have_cur = 1;
		KLOG_INFO("cluster", "applying assignment epoch %" PRId64 " generation %" PRId64 " (controller %d)",
			  a.gen.controller_epoch, a.gen.generation, a.controller);
	} else if (rc == -EPROTONOSUPPORT && strstr(err, "single-broker")) {
		/* A volume an earlier single broker ran: its file is replaced by
		 * the first controller's pointer; epochs continue from the disk. */
	} else if (rc < 0) {
		refuse("assignment.json", err);
	}
}

/* ---- the leader map ---------------------------------------------------------------------- */

static void split_endpoint(const char *ep, kb_lbroker *b)
{
	const char *c = strrchr(ep, ':');
	if (!c) {
		snprintf(b->host, sizeof(b->host), "%s", ep);
		return;
	}
	snprintf(b->host, sizeof(b->host), "%.*s", (int)(c - ep), ep);
	b->port = atoi(c + 1);
}

static int lb_cmp(const void *a, const void *b)
{
	const kb_lbroker *x = a, *y = b;
	return (x->id > y->id) - (x->id < y->id);
}

static void publish_leaders(kcl_rt *rt)
{
	/* Rebuilt only when the assignment or the live set changed. */
	uint64_t sig = 1469598103934665603ULL;
	for (size_t i = 0; i < rt->view.n; i++) {
		const kcl_peer *p = &rt->view.peers[i];
		uint64_t x = ((uint64_t)(uint32_t)p->id << 32) ^ p->inc.incarnation ^ ((uint64_t)kcl__eligible_peer(rt, p) << 63);
		for (const char *c = p->endpoint; *c; c++)
			x = (x ^ (uint8_t)*c) * 1099511628211ULL;
		for (int l = 0; l < p->nlst; l++) {
			for (const char *c = p->lst[l].host; *c; c++)
				x = (x ^ (uint8_t)*c) * 1099511628211ULL;
			x = (x ^ (uint32_t)p->lst[l].port) * 1099511628211ULL;
		}
		sig = (sig ^ x) * 1099511628211ULL;
	}
	sig ^= (uint64_t)rt->ctl_owner * 31;
	const kcl_abroker *me = rt->have_cur ? kcl_assign_broker(&rt->cur, rt->id) : NULL;
	int clear = me && kcl_incarn_cmp(me->inc, rt->inc) == 0 &&
		    kcl_view_clear_for(&rt->view, rt->inc, rt->id, rt->cur.gen, ku_mono_ns());
	sig ^= (uint64_t)clear << 62;
	if ((int64_t)sig == rt->last_leaders_sig && kcl_gen_cmp(rt->leaders_gen, rt->cur.gen) == 0)
		return;
	size_t nb = 0;
	for (size_t i = 0; i < rt->view.n; i++)
		nb += kcl_view_current(&rt->view, rt->view.peers[i].id) == &rt->view.peers[i];
	const kcl_assign *a = rt->have_cur ? &rt->cur : NULL;
	kb_leaders *m = kb_leaders_new(nb, a ? a->ntopics : 0, a ? a->nshards : 0);
	if (!m)
		return;
	size_t k = 0;
	for (size_t i = 0; i < rt->view.n; i++) {
		const kcl_peer *p = &rt->view.peers[i];
		if (kcl_view_current(&rt->view, p->id) != p)
			continue;
		kb_lbroker *lb = &m->brokers[k++];
		lb->id = p->id;
		split_endpoint(p->endpoint, lb);
		lb->nlst = p->nlst;
		memcpy(lb->lst, p->lst, sizeof(lb->lst));
		snprintf(lb->rack, sizeof(lb->rack), "%s", p->rack);
		lb->live = kcl__eligible_peer(rt, p);
	}
	m->nbrokers = k;
	qsort(m->brokers, k, sizeof(*m->brokers), lb_cmp);
	m->controller = rt->ctl_owner;
	m->clear = clear;
	if (a) {
		m->controller_epoch = a->gen.controller_epoch;
		m->generation = a->gen.generation;
		for (size_t i = 0; i < a->ntopics; i++) {
			const kcl_atopic *at = &a->topics[i];
			if (kb_ltopic_init(&m->topics[i], at->name, at->topic_id, at->n)) {
				m->ntopics = i + 1;
				kb_leaders_put(m);
				return;
			}
			for (int32_t p = 0; p < at->n; p++) {
				m->topics[i].leader[p] = at->parts[p].leader;
				m->topics[i].epoch[p] = at->parts[p].epoch;
			}
		}
		for (int32_t s = 0; s < a->nshards; s++) {
			m->shard_leader[s] = a->shards[s].leader;
			m->shard_epoch[s] = a->shards[s].epoch;
		}
	}
	kb_ptable_apply_leaders(rt->b->parts, m);
	rt->last_leaders_sig = (int64_t)sig;
	rt->leaders_gen = a ? a->gen : (kcl_gen){0, 0};
}

/* ---- the loop -------------------------------------------------------------------------------- */

/* What a pass costs, logged now and then: the figure the control plane's
 * idle cost is judged by (docs/cluster.md). */
#define LOOP_REPORT_NS (30 * 1000000000LL)
#define FAST_POLL_NS (10 * 1000000LL) /* the poll during a hand-off */

static void loop_report(kcl_rt *rt, unsigned passes, int64_t span_ns)
{
	double us[5];
	for (int k = 0; k < 5; k++)
		us[k] = passes ? (double)rt->step_ns[k] / passes / 1000.0 : 0;
	KLOG_INFO("cluster",
		  "loop: %u passes in %lld ms, per pass %.0f us (membership %.0f, assignment %.0f, controller %.0f, "
		  "driver %.0f, leaders %.0f); balances %" PRIu64 ", skipped %" PRIu64 "; assignment documents read %" PRIu64,
		  passes, (long long)(span_ns / 1000000), us[0] + us[1] + us[2] + us[3] + us[4], us[0], us[1], us[2], us[3],
		  us[4], rt->balances, rt->balances_skipped, rt->areader.docs_read);
}

void *kcl__loop_main(void *arg)
{
	kcl_rt *rt = arg;
	unsigned pass = 0, report_passes = 0;
	int64_t report_ns = 0;
	while (!__atomic_load_n(&rt->loop_stop, __ATOMIC_ACQUIRE)) {
		int64_t t0 = ku_mono_ns();
		/* A lease that ran out is over for this incarnation: nothing may be
		 * written to the partitions any more, not even a final manifest. */
		uint64_t term;
		int st = kcl_lease_state(&rt->lease, t0, &term);
		if (st == KCL_LEASE_LAPSED || st == KCL_LEASE_GIVEN_UP)
			kcl__rt_abandon(rt, KCL_EXIT_LAPSED,
					"the lease lapsed (paused or cut off from the volume past "
					"broker.session.timeout.ms)",
					1);
		int64_t ts[6];
		ts[0] = t0;
		membership(rt);
		ts[1] = ku_mono_ns();
		/* The pointer first: its epoch is what claims are judged by. */
		assignment_poll(rt);
		ts[2] = ku_mono_ns();
		controller(rt);
		ts[3] = ku_mono_ns();
		/* Before the driver reports `released`: a coordinator that lost a
		 * shard sees it in the map first, and acknowledges nothing for it
		 * after (kaas/coord checks the map after every group write). */
		publish_leaders(rt);
		kcl__driver_pass(rt);
		kcl__tdel_step(rt);
		ts[4] = ku_mono_ns();
		publish_leaders(rt);
		ts[5] = ku_mono_ns();
		for (int k = 0; k < 5; k++)
			rt->step_ns[k] += ts[k + 1] - ts[k];
		if (++pass % 100 == 0)
			kcl_view_prune(&rt->view);
		report_passes++;
		if (ts[5] - report_ns >= LOOP_REPORT_NS) {
			if (report_ns)
				loop_report(rt, report_passes, ts[5] - report_ns);
			report_ns = ts[5];
			report_passes = 0;
			for (int k = 0; k < 5; k++)
				rt->step_ns[k] = 0;
			rt->balances = rt->balances_skipped = 0;
		}
		/* Fast polls while a hand-off is under way here: draining (the
		 * assignment that takes partitions away is awaited), or waiting
		 * for an old owner's `released` (driver). */
		int64_t poll = rt->poll_ns;
		pthread_mutex_lock(&rt->mu);
		int draining = rt->state == KCL_ST_DRAINING;
		pthread_mutex_unlock(&rt->mu);
		if ((draining || ku_mono_ns() < rt->fast_until_ns) && poll > FAST_POLL_NS)
			poll = FAST_POLL_NS;
		int64_t left = t0 + poll - ku_mono_ns();
		if (left > 0)
			usleep((useconds_t)(left / 1000));
	}
	return NULL;
}

void kcl__loop_free(kcl_rt *rt)
{
	if (rt->have_cur)
		kcl_assign_free(&rt->cur);
	rt->have_cur = 0;
	free(rt->hosts);
	rt->hosts = NULL;
}
