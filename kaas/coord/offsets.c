/*
 * offsets.c — committed offsets: OffsetCommit v0-7, OffsetFetch v0-7
 * (flexible from 6), OffsetDelete v0, and the write that makes them durable.
 *
 * A group's offsets live in memory in two parts: the durable table (what is
 * in its file; the only thing OffsetFetch shows) and a queue of pending
 * commits/deletes.  A commit is validated, queued, and its request parked;
 * the flusher writes durable + pending as the new file (sub_write_atomic)
 * and only then moves the pending entries into the table and answers the
 * parked requests.  Commits that arrive while a write is in flight ride in
 * the next one, so a group causes at most one write at a time however
 * often its consumers commit (docs/groups.md: "Durability").
 *
 * The same write carries the group's membership (groupfile.c): a membership
 * change queues the group for a write just as a commit does.
 *
 * A failed write answers its commits with NOT_COORDINATOR (clients look the
 * coordinator up again and retry) and forgets the group's table: the file
 * may hold the old or the new contents, so it is read again before the
 * group is served (LMDB-style: never keep serving from memory that may not
 * match the disk).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/coord/coord_int.h"
#include "kaas/proto/kerr.h"
#include "util/log.h"

/* ---- the sorted table ---------------------------------------------------------- */

static int cmp_key(kaas_str topic, int32_t part, const kc_offset *o)
{
	int32_t n = topic.len < o->topic.len ? topic.len : o->topic.len;
	int c = n > 0 ? memcmp(topic.s, o->topic.s, (size_t)n) : 0;
	if (c)
		return c;
	if (topic.len != o->topic.len)
		return topic.len < o->topic.len ? -1 : 1;
	return part < o->partition ? -1 : part > o->partition;
}

/* Index of the entry, or of where it would go (*found tells which). */
static size_t tab_search(const kc_offset *v, size_t n, kaas_str topic, int32_t part, int *found)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = cmp_key(topic, part, &v[mid]);
		if (c == 0) {
			*found = 1;
			return mid;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	*found = 0;
	return lo;
}

/* Inserts or replaces by struct copy (no string copies). */
static int tab_set(kc_offset **v, size_t *n, size_t *cap, const kc_offset *o, kc_offset *replaced)
{
	int found;
	size_t i = tab_search(*v, *n, kc_k(&o->topic), o->partition, &found);
	if (found) {
		if (replaced)
			*replaced = (*v)[i];
		(*v)[i] = *o;
		return 1;
	}
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 8;
		kc_offset *nv = realloc(*v, ncap * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = ncap;
	}
	memmove(*v + i + 1, *v + i, (*n - i) * sizeof(**v));
	(*v)[i] = *o;
	(*n)++;
	return 0;
}

static int tab_del(kc_offset *v, size_t *n, kaas_str topic, int32_t part, kc_offset *removed)
{
	int found;
	size_t i = tab_search(v, *n, topic, part, &found);
	if (!found)
		return 0;
	if (removed)
		*removed = v[i];
	memmove(v + i, v + i + 1, (*n - i - 1) * sizeof(*v));
	(*n)--;
	return 1;
}

kc_offset *kc_offset_find(kc_group *g, kaas_str topic, int32_t partition)
{
	int found;
	size_t i = tab_search(g->offs, g->noffs, topic, partition, &found);
	return found ? &g->offs[i] : NULL;
}

void kc_offset_free(kc_offset *o)
{
	kc_str_free(&o->topic);
	kc_str_free(&o->metadata);
}

int kc_offset_put(kc_group *g, const kc_offset *o)
{
	kc_offset cp = *o;
	cp.topic.s = NULL;
	cp.topic.len = -1;
	cp.metadata.s = NULL;
	cp.metadata.len = -1;
	if (kc_str_set(&cp.topic, o->topic.s, o->topic.len) ||
	    kc_str_set(&cp.metadata, o->metadata.s, o->metadata.len)) {
		kc_offset_free(&cp);
		return -ENOMEM;
	}
	kc_offset old;
	int rc = tab_set(&g->offs, &g->noffs, &g->capoffs, &cp, &old);
	if (rc < 0) {
		kc_offset_free(&cp);
		return rc;
	}
	if (rc == 1)
		kc_offset_free(&old);
	return 0;
}

void kc_offset_remove(kc_group *g, kaas_str topic, int32_t partition)
{
	kc_offset old;
	if (tab_del(g->offs, &g->noffs, topic, partition, &old))
		kc_offset_free(&old);
}

void kc_offsets_clear(kc_group *g)
{
	for (size_t i = 0; i < g->noffs; i++)
		kc_offset_free(&g->offs[i]);
	free(g->offs);
	g->offs = NULL;
	g->noffs = g->capoffs = 0;
}

void kc_pcommit_free(kc_pcommit *pc)
{
	if (!pc)
		return;
	for (size_t i = 0; i < pc->n; i++)
		kc_offset_free(&pc->items[i].off);
	free(pc->items);
	free(pc);
}

/* ---- serialising durable + pending ----------------------------------------------- */

char *kc_group_serialize(kaas_coord *c, kc_group *g, uint64_t upto, size_t *len, size_t *count)
{
	/* A shallow copy of the table with the pending changes applied: the
	 * strings stay owned by the table and the queue. */
	size_t n = g->noffs, cap = g->noffs + 8;
	kc_offset *v = malloc(cap * sizeof(*v));
	if (!v)
		return NULL;
	if (n)
		memcpy(v, g->offs, n * sizeof(*v));
	for (kc_pcommit *pc = g->pc_head; pc && pc->seq <= upto; pc = pc->next) {
		for (size_t i = 0; i < pc->n; i++) {
			const kc_citem *it = &pc->items[i];
			if (it->err)
				continue;
			if (it->del)
				tab_del(v, &n, kc_k(&it->off.topic), it->off.partition, NULL);
			else if (tab_set(&v, &n, &cap, &it->off, NULL) < 0) {
				free(v);
				return NULL;
			}
		}
	}
	char *buf = kc_group_serialize_view(c, g, v, n);
	free(v);
	if (buf) {
		*len = strlen(buf);
		*count = n;
	}
	return buf;
}

/* ---- answering parked commits ------------------------------------------------------- */

static void enc_items(kaas_wr *w, const kc_citem *items, size_t n, int16_t override)
{
	int32_t topics = 0;
	for (size_t i = 0; i < n; i++)
		topics += items[i].topic_start;
	kaas_wr_array(w, 0, topics);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && !items[j].topic_start)
			j++;
		kaas_wr_kstr(w, 0, kc_k(&items[i].off.topic));
		kaas_wr_array(w, 0, (int32_t)(j - i));
		for (size_t k = i; k < j; k++) {
			kaas_wr_i32(w, items[k].off.partition);
			kaas_wr_i16(w, items[k].err ? items[k].err : override);
		}
		i = j;
	}
}

/* The response of a commit/delete whose accepted entries got `err`. */
static void enc_pcommit(kaas_wr *w, const kc_pcommit *pc, int16_t err)
{
	if (pc->is_delete) {
		kaas_wr_i16(w, KERR_NONE);
		kaas_wr_i32(w, 0);
	} else if (pc->w.version >= 3) {
		kaas_wr_i32(w, 0);
	}
	enc_items(w, pc->items, pc->n, err);
}

static void answer_pcommit(kc_pcommit *pc, int16_t err, kc_outbox *ob)
{
	kaas_wr w = KAAS_WR_INIT;
	enc_pcommit(&w, pc, err);
	kc_outbox_add(ob, &pc->w, &w);
}

void kc_group_fail_commits(kaas_coord *c, kc_group *g, int16_t err, kc_outbox *ob)
{
	(void)c;
	while (g->pc_head) {
		kc_pcommit *pc = g->pc_head;
		g->pc_head = pc->next;
		answer_pcommit(pc, err, ob);
		kc_pcommit_free(pc);
	}
	g->pc_tail = &g->pc_head;
}

void kc_group_write(kaas_coord *c, kc_group *g, kc_outbox *ob)
{
	int meta = g->meta_seq > g->meta_written;
	if (!g->pc_head && !meta)
		return;
	if (g->deleting) {
		kc_group_fail_commits(c, g, KERR_NOT_COORDINATOR, ob);
		return; /* the membership of a group being deleted is empty */
	}
	if (!g->loaded) {
		/* A failed write made it forget its offsets: the file is read
		 * again before it is replaced whole. */
		kc_group *same = NULL;
		g->refs++;
		int16_t err = kc_group_get(c, kc_k(&g->id), 1, &same);
		g->refs--;
		if (err || !g->loaded) {
			kc_group_fail_commits(c, g, KERR_NOT_COORDINATOR, ob);
			kc_group_meta_written(c, g, 0, 0, ob);
			return;
		}
	}
	uint64_t upto = g->next_seq - 1;
	uint64_t meta_upto = g->meta_seq;
	size_t len = 0, count = 0;
	char path[SUB_PATH_MAX];
	char *buf = NULL;
	int rc = kc_group_path(kc_k(&g->id), path, sizeof(path));
	if (!rc && !(buf = kc_group_serialize(c, g, upto, &len, &count)))
		rc = -ENOMEM;
	if (rc) {
		kc_group_fail_commits(c, g, KERR_COORDINATOR_NOT_AVAILABLE, ob);
		kc_group_meta_written(c, g, 0, meta_upto, ob);
		return;
	}
	/* Nothing left to remember and nobody in the group: no file at all. */
	int remove = count == 0 && g->nmembers == 0;
	int may_exist = g->file_exists;
	g->writing = 1;
	pthread_mutex_unlock(&c->mu);
	if (remove) {
		rc = may_exist ? sub_unlink(c->vfs, path) : 0;
		if (rc == -ENOENT)
			rc = 0;
	} else {
		rc = sub_write_atomic(c->vfs, path, buf, len);
		if (rc == -ENOENT && sub_mkdirs(c->vfs, "groups", 0755) == 0)
			rc = sub_write_atomic(c->vfs, path, buf, len);
	}
	free(buf);
	pthread_mutex_lock(&c->mu);
	g->writing = 0;
	pthread_cond_broadcast(&c->state_cv);
	if (rc) {
		c->stats.write_failures++;
		KLOG_ERR("coord", "group '%s': writing %s failed: %s; its commits are refused and "
				  "the file will be read again", g->id.s, path, sub_strerror(rc));
		kc_group_fail_commits(c, g, KERR_NOT_COORDINATOR, ob);
		kc_offsets_clear(g);
		g->loaded = 0;
		g->file_exists = 1; /* whatever the volume holds now */
		kc_group_meta_written(c, g, 0, meta_upto, ob);
		return;
	}
	c->stats.group_writes++;
	g->file_exists = !remove;
	kc_group_meta_written(c, g, 1, meta_upto, ob);
	while (g->pc_head && g->pc_head->seq <= upto) {
		kc_pcommit *pc = g->pc_head;
		g->pc_head = pc->next;
		if (!g->pc_head)
			g->pc_tail = &g->pc_head;
		for (size_t i = 0; i < pc->n; i++) {
			kc_citem *it = &pc->items[i];
			if (it->err)
				continue;
			if (it->del) {
				kc_offset_remove(g, kc_k(&it->off.topic), it->off.partition);
				continue;
			}
			if (kc_offset_put(g, &it->off))
				g->loaded = 0; /* the file has it, memory does not: read it again */
		}
		answer_pcommit(pc, KERR_NONE, ob);
		kc_pcommit_free(pc);
	}
	if (!g->loaded) {
		kc_group_fail_commits(c, g, KERR_NOT_COORDINATOR, ob);
		kc_offsets_clear(g);
	}
	if (g->pc_head || g->meta_seq > g->meta_written)
		kc_flush_enqueue(c, g);
}

/* ---- OffsetCommit ------------------------------------------------------------------------ */

typedef struct kc_items {
	kc_citem *v;
	size_t n, cap;
} kc_items;

static kc_citem *items_add(kc_items *it)
{
	if (it->n == it->cap) {
		size_t ncap = it->cap ? it->cap * 2 : 16;
		kc_citem *nv = realloc(it->v, ncap * sizeof(*nv));
		if (!nv)
			return NULL;
		it->v = nv;
		it->cap = ncap;
	}
	kc_citem *e = &it->v[it->n++];
	memset(e, 0, sizeof(*e));
	e->off.topic.len = e->off.metadata.len = -1;
	return e;
}

static void items_free(kc_items *it)
{
	for (size_t i = 0; i < it->n; i++)
		kc_offset_free(&it->v[i].off);
	free(it->v);
	it->v = NULL;
	it->n = it->cap = 0;
}

/* Queues the accepted entries (c->mu held).  Returns KAAS_DEFERRED, or
 * KAAS_HANDLED when nothing needs writing (the answer is in resp). */
static int queue_commit(kaas_coord *c, kc_group *g, const kaas_coord_call *call, kc_items *it,
			int is_delete, kaas_wr *resp)
{
	int any = 0;
	for (size_t i = 0; i < it->n; i++)
		any |= it->v[i].err == KERR_NONE;
	kc_pcommit *pc = calloc(1, sizeof(*pc));
	if (!pc)
		return -ENOMEM;
	pc->items = it->v;
	pc->n = it->n;
	pc->is_delete = is_delete;
	pc->w.version = call->version;
	pc->w.flex = call->flex;
	it->v = NULL;
	it->n = it->cap = 0;
	if (!any || !call->done) {
		enc_pcommit(resp, pc, call->done ? KERR_NONE : KERR_COORDINATOR_NOT_AVAILABLE);
		kc_pcommit_free(pc);
		return KAAS_HANDLED;
	}
	pc->w.done = call->done;
	pc->w.ctx = call->ctx;
	pc->seq = g->next_seq++;
	*g->pc_tail = pc;
	g->pc_tail = &pc->next;
	if (!is_delete)
		c->stats.commits++;
	kc_flush_enqueue(c, g);
	return KAAS_DEFERRED;
}

int kc_api_offset_commit(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w)
{
	int16_t v = call->version;
	kaas_str gid, member_id = {"", 0}, inst = {NULL, -1};
	int32_t gen = -1, ntopics;
	int64_t retention;
	kc_items it = {0};
	int rc;
	KRD_STR(rd, 0, &gid);
	if (v >= 1) {
		KRD_I32(rd, &gen);
		KRD_STR(rd, 0, &member_id);
	}
	if (v >= 7)
		KRD_STR(rd, 0, &inst);
	if (v >= 2 && v <= 4)
		KRD_I64(rd, &retention);
	KRD_ARRAY(rd, 0, 6, &ntopics);
	int64_t wall = kc_wall(c);
	for (int32_t t = 0; t < ntopics; t++) {
		kaas_str topic;
		int32_t nparts;
		KRD_STR(rd, 0, &topic);
		KRD_EXPECT(rd, topic.len >= 0, "topic name (null)");
		KRD_ARRAY(rd, 0, 14, &nparts);
		for (int32_t p = 0; p < nparts; p++) {
			int32_t part, epoch = -1;
			int64_t off, ts;
			kaas_str meta;
			KRD_I32(rd, &part);
			KRD_I64(rd, &off);
			if (v >= 6)
				KRD_I32(rd, &epoch);
			if (v == 1)
				KRD_I64(rd, &ts);
			KRD_STR(rd, 0, &meta);
			kc_citem *e = items_add(&it);
			if (!e || kc_str_setk(&e->off.topic, topic) ||
			    kc_str_set(&e->off.metadata, meta.len > 0 ? meta.s : "", meta.len > 0 ? meta.len : 0)) {
				rc = -ENOMEM;
				goto out;
			}
			e->topic_start = p == 0;
			e->off.partition = part;
			e->off.offset = off;
			e->off.leader_epoch = epoch;
			e->off.commit_ms = wall;
			if (meta.len > c->cfg.offset_metadata_max_bytes)
				e->err = KERR_OFFSET_METADATA_TOO_LARGE;
			else if (c->topic_fn)
				e->err = c->topic_fn(c->topic_arg, topic, part);
		}
	}
	(void)retention;

	int16_t err = kc_group_status(c, gid, 1);
	kc_outbox ob;
	kc_outbox_init(&ob);
	pthread_mutex_lock(&c->mu);
	kc_group *g = NULL;
	if (!err)
		err = kc_group_get(c, gid, gen < 0, &g);
	if (!err && !g)
		err = KERR_ILLEGAL_GENERATION; /* a generation of a group that is gone */
	if (!err && g->deleting)
		err = KERR_NOT_COORDINATOR;
	if (!err) {
		kc_member *m = kc_member_find(g, member_id);
		if (kc_member_fenced(g, member_id, inst))
			err = KERR_FENCED_INSTANCE_ID;
		if (err) {
		} else if (gen < 0 && g->state == KC_EMPTY) {
			/* A consumer that manages its own partitions (assign()). */
		} else if (!m) {
			err = KERR_UNKNOWN_MEMBER_ID;
		} else if (gen != g->generation) {
			err = KERR_ILLEGAL_GENERATION;
		} else if (g->state == KC_COMPLETING) {
			err = KERR_REBALANCE_IN_PROGRESS;
		} else {
			m->deadline = kc_now(c) + m->session_timeout_ms;
		}
	}
	if (err)
		for (size_t i = 0; i < it.n; i++)
			it.v[i].err = err;
	rc = queue_commit(c, g, call, &it, 0, w);
	if (g)
		kc_group_maybe_drop(c, g);
	pthread_mutex_unlock(&c->mu);
	kc_outbox_deliver(&ob);
	goto out;
err_parse:
	rc = -EBADMSG;
out:
	items_free(&it);
	return rc;
}

/* ---- OffsetFetch --------------------------------------------------------------------------- */

static void enc_fetch_part(kaas_wr *w, int16_t v, int flex, int32_t part, const kc_offset *o,
			   int16_t err)
{
	kaas_wr_i32(w, part);
	kaas_wr_i64(w, o ? o->offset : -1);
	if (v >= 5)
		kaas_wr_i32(w, o ? o->leader_epoch : -1);
	if (o && o->metadata.len > 0)
		kaas_wr_strn(w, flex, o->metadata.s, o->metadata.len);
	else
		kaas_wr_strn(w, flex, "", 0);
	kaas_wr_i16(w, err);
	kaas_wr_tags(w, flex);
}

int kc_api_offset_fetch(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w)
{
	int16_t v = call->version;
	int flex = v >= 6;
	kaas_str gid;
	int32_t ntopics;
	int8_t require_stable = 0;
	KRD_STR(rd, flex, &gid);
	KRD_ARRAY(rd, flex, 2, &ntopics);
	KRD_EXPECT(rd, ntopics >= 0 || v >= 2, "topics (null before v2)");
	/* The topic list stays in the request: walk it once to validate, and
	 * again while answering. */
	kaas_rd topics_at = *rd;
	for (int32_t t = 0; t < ntopics; t++) {
		kaas_str topic;
		int32_t np;
		KRD_STR(rd, flex, &topic);
		KRD_ARRAY(rd, flex, 4, &np);
		KRD_SKIP(rd, (size_t)(np > 0 ? np : 0) * 4);
		KRD_TAGS(rd, flex);
	}
	if (v >= 7)
		KRD_I8(rd, &require_stable);
	KRD_TAGS(rd, flex);
	(void)require_stable; /* no transactions yet: every committed offset is stable */

	int16_t err = kc_group_status(c, gid, 1);
	pthread_mutex_lock(&c->mu);
	kc_group *g = NULL;
	if (!err)
		err = kc_group_get(c, gid, 0, &g);
	if (v >= 3)
		kaas_wr_i32(w, 0);
	if (err && v >= 2) {
		kaas_wr_array(w, flex, 0);
	} else if (ntopics < 0) {
		/* Every committed offset of the group, by topic. */
		size_t n = g ? g->noffs : 0, at = 0;
		int32_t cnt = 0;
		for (size_t i = 0; i < n; i++)
			cnt += i == 0 || !kc_str_eq(&g->offs[i].topic, &g->offs[i - 1].topic);
		kaas_wr_array(w, flex, cnt);
		while (at < n) {
			size_t end = at + 1;
			while (end < n && kc_str_eq(&g->offs[end].topic, &g->offs[at].topic))
				end++;
			kaas_wr_kstr(w, flex, kc_k(&g->offs[at].topic));
			kaas_wr_array(w, flex, (int32_t)(end - at));
			for (size_t i = at; i < end; i++)
				enc_fetch_part(w, v, flex, g->offs[i].partition, &g->offs[i], KERR_NONE);
			kaas_wr_tags(w, flex);
			at = end;
		}
	} else {
		kaas_rd r2 = topics_at;
		kaas_wr_array(w, flex, ntopics);
		for (int32_t t = 0; t < ntopics; t++) {
			kaas_str topic = {"", 0};
			int32_t np = 0;
			kaas_rd_str(&r2, flex, &topic);
			kaas_rd_array(&r2, flex, 4, &np);
			kaas_wr_kstr(w, flex, topic);
			kaas_wr_array(w, flex, np > 0 ? np : 0);
			for (int32_t p = 0; p < np; p++) {
				int32_t part = -1;
				kaas_rd_i32(&r2, &part);
				const kc_offset *o = g && !err ? kc_offset_find(g, topic, part) : NULL;
				enc_fetch_part(w, v, flex, part, o, err);
			}
			kaas_rd_tags(&r2, flex);
			kaas_wr_tags(w, flex);
		}
	}
	pthread_mutex_unlock(&c->mu);
	if (v >= 2)
		kaas_wr_i16(w, err);
	kaas_wr_tags(w, flex);
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}

/* ---- OffsetDelete ---------------------------------------------------------------------------- */

int kc_api_offset_delete(kaas_coord *c, const kaas_coord_call *call, kaas_rd *rd, kaas_wr *w)
{
	kaas_str gid;
	int32_t ntopics;
	kc_items it = {0};
	int rc;
	KRD_STR(rd, 0, &gid);
	KRD_ARRAY(rd, 0, 6, &ntopics);
	for (int32_t t = 0; t < ntopics; t++) {
		kaas_str topic;
		int32_t np;
		KRD_STR(rd, 0, &topic);
		KRD_EXPECT(rd, topic.len >= 0, "topic name (null)");
		KRD_ARRAY(rd, 0, 4, &np);
		for (int32_t p = 0; p < np; p++) {
			int32_t part;
			KRD_I32(rd, &part);
			kc_citem *e = items_add(&it);
			if (!e || kc_str_setk(&e->off.topic, topic)) {
				rc = -ENOMEM;
				goto out;
			}
			e->topic_start = p == 0;
			e->off.partition = part;
			e->del = 1;
		}
	}

	int16_t top = kc_group_status(c, gid, 0);
	kc_group *g = NULL;
	pthread_mutex_lock(&c->mu);
	if (!top)
		top = kc_group_get(c, gid, 0, &g);
	if (!top && (!g || g->state == KC_DEAD))
		top = KERR_GROUP_ID_NOT_FOUND;
	if (!top && g->deleting)
		top = KERR_NOT_COORDINATOR;
	int consumer = g && g->protocol_type.len == 8 && memcmp(g->protocol_type.s, "consumer", 8) == 0;
	if (!top && g->state != KC_EMPTY && !consumer)
		top = KERR_NON_EMPTY_GROUP;
	if (!top && g->state != KC_EMPTY) {
		/* Offsets of topics the group consumes stay. */
		for (size_t i = 0; i < it.n; i++)
			if (kc_group_subscribed(g, kc_k(&it.v[i].off.topic)) != 0)
				it.v[i].err = KERR_GROUP_SUBSCRIBED_TO_TOPIC;
	}
	if (top) {
		kaas_wr_i16(w, top);
		kaas_wr_i32(w, 0);
		kaas_wr_array(w, 0, 0);
		rc = KAAS_HANDLED;
	} else {
		rc = queue_commit(c, g, call, &it, 1, w);
	}
	pthread_mutex_unlock(&c->mu);
	goto out;
err_parse:
	rc = -EBADMSG;
out:
	items_free(&it);
	return rc;
}

/* ---- retention ---------------------------------------------------------------------------------- */

/* Queues the removal of g's expired offsets (c->mu held). */
static void expire_group(kaas_coord *c, kc_group *g, int64_t wall)
{
	if (g->nmembers || g->npending || g->pc_head || g->deleting || !g->loaded || !g->noffs)
		return;
	kc_items it = {0};
	for (size_t i = 0; i < g->noffs; i++) {
		const kc_offset *o = &g->offs[i];
		int64_t since = o->commit_ms > g->empty_since ? o->commit_ms : g->empty_since;
		if (wall - since < c->cfg.offsets_retention_ms)
			continue;
		kc_citem *e = items_add(&it);
		if (!e || kc_str_set(&e->off.topic, o->topic.s, o->topic.len)) {
			items_free(&it);
			return;
		}
		e->off.partition = o->partition;
		e->del = 1;
		e->topic_start = 1;
	}
	if (!it.n)
		return;
	kc_pcommit *pc = calloc(1, sizeof(*pc));
	if (!pc) {
		items_free(&it);
		return;
	}
	KLOG_INFO("coord", "group '%s': %zu committed offset(s) expired (offsets.retention.minutes)",
		  g->id.s, it.n);
	c->stats.expired += it.n;
	pc->items = it.v;
	pc->n = it.n;
	pc->is_delete = 1;
	pc->seq = g->next_seq++;
	*g->pc_tail = pc;
	g->pc_tail = &pc->next;
	kc_flush_enqueue(c, g);
}

void kaas_coord_expire_offsets(kaas_coord *c)
{
	if (c->cfg.offsets_retention_ms <= 0)
		return;
	/* Groups that only exist on the volume are loaded first (each file is
	 * read once per broker run; loading restarts their retention clock,
	 * which only ever keeps offsets longer). */
	char **names = NULL;
	size_t n = 0;
	if (sub_list(c->vfs, "groups", &names, &n) != 0)
		n = 0;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < n && !c->stop; i++) {
		size_t len = strlen(names[i]);
		char id[KC_GNAME_MAX + 1];
		size_t idlen;
		if (names[i][0] == '.' || len <= 5 || len - 5 > KC_GNAME_MAX ||
		    strcmp(names[i] + len - 5, ".json") != 0)
			continue;
		names[i][len - 5] = '\0';
		if (kc_gname_decode(names[i], id, sizeof(id), &idlen) != 0)
			continue; /* hashed names are loaded when ListGroups or a client names them */
		kaas_str k = {id, (int32_t)idlen};
		kc_group *g;
		if (!kc_group_find(c, k))
			kc_group_get(c, k, 0, &g);
	}
	int64_t wall = kc_wall(c);
	for (size_t b = 0; b < c->tabsize; b++)
		for (kc_group *g = c->tab[b]; g; g = g->hnext)
			expire_group(c, g, wall);
	pthread_mutex_unlock(&c->mu);
	sub_names_free(names, n);
}
