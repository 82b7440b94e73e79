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

static int cmp_key(kw_str topic, int32_t part, const kg_offset *o)
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
static size_t tab_search(const kg_offset *v, size_t n, kw_str topic, int32_t part, int *found)
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
static int tab_set(kg_offset **v, size_t *n, size_t *cap, const kg_offset *o, kg_offset *replaced)
{
	int found;
	size_t i = tab_search(*v, *n, kg_k(&o->topic), o->partition, &found);
	if (found) {
		if (replaced)
			*replaced = (*v)[i];
		(*v)[i] = *o;
		return 1;
	}
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 8;
		kg_offset *nv = realloc(*v, ncap * sizeof(*nv));
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

static int tab_del(kg_offset *v, size_t *n, kw_str topic, int32_t part, kg_offset *removed)
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

kg_offset *kg__offset_find(kg_group *g, kw_str topic, int32_t partition)
{
	int found;
	size_t i = tab_search(g->offs, g->noffs, topic, partition, &found);
	return found ? &g->offs[i] : NULL;
}

void kg__offset_free(kg_offset *o)
{
	kg__str_free(&o->topic);
	kg__str_free(&o->metadata);
}

int kg__offset_put(kg_group *g, const kg_offset *o)
{
	kg_offset cp = *o;
	cp.topic.s = NULL;
	cp.topic.len = -1;
	cp.metadata.s = NULL;
	cp.metadata.len = -1;
	if (kg__str_set(&cp.topic, o->topic.s, o->topic.len) ||
	    kg__str_set(&cp.metadata, o->metadata.s, o->metadata.len)) {
		kg__offset_free(&cp);
		return -ENOMEM;
	}
	kg_offset old;
	int rc = tab_set(&g->offs, &g->noffs, &g->capoffs, &cp, &old);
	if (rc < 0) {
		kg__offset_free(&cp);
		return rc;
	}
	if (rc == 1)
		kg__offset_free(&old);
	return 0;
}

void kg__offset_remove(kg_group *g, kw_str topic, int32_t partition)
{
	kg_offset old;
	if (tab_del(g->offs, &g->noffs, topic, partition, &old))
		kg__offset_free(&old);
}

void kg__offsets_clear(kg_group *g)
{
	for (size_t i = 0; i < g->noffs; i++)
		kg__offset_free(&g->offs[i]);
	free(g->offs);
	g->offs = NULL;
	g->noffs = g->capoffs = 0;
}

void kg__pcommit_free(kg_pcommit *pc)
{
	if (!pc)
		return;
	for (size_t i = 0; i < pc->n; i++)
		kg__offset_free(&pc->items[i].off);
	free(pc->items);
	free(pc);
}

/* ---- serialising durable + pending ----------------------------------------------- */

char *kg__group_serialize(kg_coord *c, kg_group *g, uint64_t upto, size_t *len, size_t *count)
{
	/* A shallow copy of the table with the pending changes applied: the
	 * strings stay owned by the table and the queue. */
	size_t n = g->noffs, cap = g->noffs + 8;
	kg_offset *v = malloc(cap * sizeof(*v));
	if (!v)
		return NULL;
	if (n)
		memcpy(v, g->offs, n * sizeof(*v));
	for (kg_pcommit *pc = g->pc_head; pc && pc->seq <= upto; pc = pc->next) {
		for (size_t i = 0; i < pc->n; i++) {
			const kg_citem *it = &pc->items[i];
			if (it->err)
				continue;
			if (it->del)
				tab_del(v, &n, kg_k(&it->off.topic), it->off.partition, NULL);
			else if (tab_set(&v, &n, &cap, &it->off, NULL) < 0) {
				free(v);
				return NULL;
			}
		}
	}
	char *buf = kg__group_serialize_view(c, g, v, n);
	free(v);
	if (buf) {
		*len = strlen(buf);
		*count = n;
	}
	return buf;
}

/* ---- answering parked commits ------------------------------------------------------- */

static void enc_items(kw_wr *w, const kg_citem *items, size_t n, int16_t override)
{
	int32_t topics = 0;
	for (size_t i = 0; i < n; i++)
		topics += items[i].topic_start;
	kw_wr_array(w, 0, topics);
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && !items[j].topic_start)
			j++;
		kw_wr_kstr(w, 0, kg_k(&items[i].off.topic));
		kw_wr_array(w, 0, (int32_t)(j - i));
		for (size_t k = i; k < j; k++) {
			kw_wr_i32(w, items[k].off.partition);
			kw_wr_i16(w, items[k].err ? items[k].err : override);
		}
		i = j;
	}
}

/* The response of a commit/delete whose accepted entries got `err`. */
static void enc_pcommit(kw_wr *w, const kg_pcommit *pc, int16_t err)
{
	if (pc->is_delete) {
		kw_wr_i16(w, KERR_NONE);
		kw_wr_i32(w, 0);
	} else if (pc->w.version >= 3) {
		kw_wr_i32(w, 0);
	}
	enc_items(w, pc->items, pc->n, err);
}

static void answer_pcommit(kg_pcommit *pc, int16_t err, kg_outbox *ob)
{
	kw_wr w = KAAS_WR_INIT;
	enc_pcommit(&w, pc, err);
	kg__outbox_add(ob, &pc->w, &w);
}

void kg__group_fail_commits(kg_coord *c, kg_group *g, int16_t err, kg_outbox *ob)
{
	(void)c;
	while (g->pc_head) {
		kg_pcommit *pc = g->pc_head;
		g->pc_head = pc->next;
		answer_pcommit(pc, err, ob);
		kg__pcommit_free(pc);
	}
	g->pc_tail = &g->pc_head;
}

void kg__group_write(kg_coord *c, kg_group *g, kg_outbox *ob)
{
	int meta = g->meta_seq > g->meta_written;
	if (!g->pc_head && !meta)
		return;
	if (g->deleting) {
		kg__group_fail_commits(c, g, KERR_NOT_COORDINATOR, ob);
		return; /* the membership of a group being deleted is empty */
	}
	if (!g->loaded) {
		/* A failed write made it forget its offsets: the file is read
		 * again before it is replaced whole. */
		kg_group *same = NULL;
		g->refs++;
		int16_t err = kg__group_get(c, kg_k(&g->id), 1, &same);
		g->refs--;
		if (err || !g->loaded) {
			kg__group_fail_commits(c, g, KERR_NOT_COORDINATOR, ob);
			kg__group_meta_written(c, g, 0, 0, ob);
			return;
		}
	}
	/* Not (or no longer) this broker's to write: stop at once. */
	int64_t wepoch = g->epoch, ep;
	if (kg__serve_epoch(c, kg_k(&g->id), 1, &ep) || ep != wepoch) {
		kg__group_disown(c, g, ob);
		return;
	}
	uint64_t upto = g->next_seq - 1;
	uint64_t meta_upto = g->meta_seq;
	size_t len = 0, count = 0;
	char path[SUB_PATH_MAX];
	char *buf = NULL;
	int rc = kg__group_path(kg_k(&g->id), wepoch, path, sizeof(path));
	if (!rc && !(buf = kg__group_serialize(c, g, upto, &len, &count)))
		rc = -ENOMEM;
	if (rc) {
		kg__group_fail_commits(c, g, KERR_COORDINATOR_NOT_AVAILABLE, ob);
		kg__group_meta_written(c, g, 0, meta_upto, ob);
		return;
	}
	/* Nothing left to remember and nobody in the group: no file at all. */
	int remove = count == 0 && g->nmembers == 0;
	int may_exist = g->file_exists;
	g->writing = 1;
	pthread_mutex_unlock(&c->mu);
	if (remove) {
		/* Older owners' files first: with ours gone they would be read. */
		rc = may_exist && wepoch > 0 ? kg__group_files_prune(c, kg_k(&g->id), wepoch) : 0;
		rc = rc < 0 ? rc : may_exist ? sub_unlink(c->vfs, path) : 0;
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
		kg__group_fail_commits(c, g, KERR_NOT_COORDINATOR, ob);
		kg__offsets_clear(g);
		g->loaded = 0;
		g->file_exists = 1; /* whatever the volume holds now */
		kg__group_meta_written(c, g, 0, meta_upto, ob);
		return;
	}
	c->stats.group_writes++;
	/* Durable; acknowledged only if this broker still holds its lease (the
	 * ack gate) and the shard at the epoch written — both asked after the
	 * write.  A successor loads only after this broker gave the shard up
	 * (the map changed here before it said `released`) or its lease ran
	 * out, so what is acknowledged here is what the successor reads. */
	if (kg__serve_epoch(c, kg_k(&g->id), 1, &ep) || ep != wepoch || g->epoch != wepoch) {
		c->stats.write_unacked++;
		KLOG_WARN("coord", "group '%s': wrote %s but no longer coordinates it (shard moved "
				   "or lease lost); its commits are not acknowledged", g->id.s, path);
		kg__group_disown(c, g, ob);
		return;
	}
	g->file_exists = !remove;
	g->file_epoch = wepoch;
	kg__group_meta_written(c, g, 1, meta_upto, ob);
	int16_t ok = KERR_NONE;
	while (g->pc_head && g->pc_head->seq <= upto) {
		kg_pcommit *pc = g->pc_head;
		g->pc_head = pc->next;
		if (!g->pc_head)
			g->pc_tail = &g->pc_head;
		for (size_t i = 0; i < pc->n; i++) {
			kg_citem *it = &pc->items[i];
			if (it->err)
				continue;
			if (it->del) {
				kg__offset_remove(g, kg_k(&it->off.topic), it->off.partition);
				continue;
			}
			if (kg__offset_put(g, &it->off))
				g->loaded = 0; /* the file has it, memory does not: read it again */
		}
		answer_pcommit(pc, ok, ob);
		kg__pcommit_free(pc);
	}
	if (!g->loaded) {
		kg__group_fail_commits(c, g, KERR_NOT_COORDINATOR, ob);
		kg__offsets_clear(g);
	}
	if (g->pc_head || g->meta_seq > g->meta_written)
		kg__flush_enqueue(c, g);
}

/* ---- OffsetCommit ------------------------------------------------------------------------ */

typedef struct kg_items {
	kg_citem *v;
	size_t n, cap;
} kg_items;

static kg_citem *items_add(kg_items *it)
{
	if (it->n == it->cap) {
		size_t ncap = it->cap ? it->cap * 2 : 16;
		kg_citem *nv = realloc(it->v, ncap * sizeof(*nv));
		if (!nv)
			return NULL;
		it->v = nv;
		it->cap = ncap;
	}
	kg_citem *e = &it->v[it->n++];
	memset(e, 0, sizeof(*e));
	e->off.topic.len = e->off.metadata.len = -1;
	return e;
}

static void items_free(kg_items *it)
{
	for (size_t i = 0; i < it->n; i++)
		kg__offset_free(&it->v[i].off);
	free(it->v);
	it->v = NULL;
	it->n = it->cap = 0;
}

/* Queues the accepted entries (c->mu held).  Returns KAAS_DEFERRED, or
 * KAAS_HANDLED when nothing needs writing (the answer is in resp). */
static int queue_commit(kg_coord *c, kg_group *g, const kg_coord_call *call, kg_items *it,
			int is_delete, kw_wr *resp)
{
	int any = 0;
	for (size_t i = 0; i < it->n; i++)
		any |= it->v[i].err == KERR_NONE;
	kg_pcommit *pc = calloc(1, sizeof(*pc));
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
		kg__pcommit_free(pc);
		return KAAS_HANDLED;
	}
	pc->w.done = call->done;
	pc->w.ctx = call->ctx;
	pc->seq = g->next_seq++;
	*g->pc_tail = pc;
	g->pc_tail = &pc->next;
	if (!is_delete)
		c->stats.commits++;
	kg__flush_enqueue(c, g);
	return KAAS_DEFERRED;
}

int kg__api_offset_commit(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	int16_t v = call->version;
	kw_str gid, member_id = {"", 0}, inst = {NULL, -1};
	int32_t gen = -1, ntopics;
	int64_t retention;
	kg_items it = {0};
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
	int64_t wall = kg__wall(c);
	for (int32_t t = 0; t < ntopics; t++) {
		kw_str topic;
		int32_t nparts;
		KRD_STR(rd, 0, &topic);
		KRD_EXPECT(rd, topic.len >= 0, "topic name (null)");
		KRD_ARRAY(rd, 0, 14, &nparts);
		for (int32_t p = 0; p < nparts; p++) {
			int32_t part, epoch = -1;
			int64_t off, ts;
			kw_str meta;
			KRD_I32(rd, &part);
			KRD_I64(rd, &off);
			if (v >= 6)
				KRD_I32(rd, &epoch);
			if (v == 1)
				KRD_I64(rd, &ts);
			KRD_STR(rd, 0, &meta);
			kg_citem *e = items_add(&it);
			if (!e || kg_str_setk(&e->off.topic, topic) ||
			    kg__str_set(&e->off.metadata, meta.len > 0 ? meta.s : "", meta.len > 0 ? meta.len : 0)) {
				rc = -ENOMEM;
				goto out;
			}
			e->topic_start = p == 0;
			e->off.partition = part;
			e->off.offset = off;
			e->off.leader_epoch = epoch;
			e->off.commit_ms = wall;
			if (!kg__authorized(c, call, KB_OP_READ, KB_RES_TOPIC, topic))
				e->err = KERR_TOPIC_AUTHORIZATION_FAILED;
			else if (meta.len > c->cfg.offset_metadata_max_bytes)
				e->err = KERR_OFFSET_METADATA_TOO_LARGE;
			else if (c->topic_fn)
				e->err = c->topic_fn(c->topic_arg, topic, part);
		}
	}
	(void)retention;

	int16_t err = kg__group_authz(c, call, gid, 1, KB_OP_READ);
	kg_outbox ob;
	kg__outbox_init(&ob);
	pthread_mutex_lock(&c->mu);
	kg_group *g = NULL;
	if (!err)
		err = kg__group_get(c, gid, gen < 0, &g);
	if (!err && !g)
		err = KERR_ILLEGAL_GENERATION; /* a generation of a group that is gone */
	if (!err && g->deleting)
		err = KERR_NOT_COORDINATOR;
	if (!err) {
		kg_member *m = kg__member_find(g, member_id);
		if (kg__member_fenced(g, member_id, inst))
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
			m->deadline = kg__now(c) + m->session_timeout_ms;
		}
	}
	if (err)
		for (size_t i = 0; i < it.n; i++)
			it.v[i].err = err;
	rc = queue_commit(c, g, call, &it, 0, w);
	if (g)
		kg__group_maybe_drop(c, g);
	pthread_mutex_unlock(&c->mu);
	kg__outbox_deliver(&ob);
	goto out;
err_parse:
	rc = -EBADMSG;
out:
	items_free(&it);
	return rc;
}

/* ---- OffsetFetch --------------------------------------------------------------------------- */

static void enc_fetch_part(kw_wr *w, int16_t v, int flex, int32_t part, const kg_offset *o,
			   int16_t err)
{
	kw_wr_i32(w, part);
	kw_wr_i64(w, o ? o->offset : -1);
	if (v >= 5)
		kw_wr_i32(w, o ? o->leader_epoch : -1);
	if (o && o->metadata.len > 0)
		kw_wr_strn(w, flex, o->metadata.s, o->metadata.len);
	else
		kw_wr_strn(w, flex, "", 0);
	kw_wr_i16(w, err);
	kw_wr_tags(w, flex);
}

int kg__api_offset_fetch(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	int16_t v = call->version;
	int flex = v >= 6;
	kw_str gid;
	int32_t ntopics;
	int8_t require_stable = 0;
	KRD_STR(rd, flex, &gid);
	KRD_ARRAY(rd, flex, 2, &ntopics);
	KRD_EXPECT(rd, ntopics >= 0 || v >= 2, "topics (null before v2)");
	/* The topic list stays in the request: walk it once to validate, and
	 * again while answering. */
	kw_rd topics_at = *rd;
	for (int32_t t = 0; t < ntopics; t++) {
		kw_str topic;
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

	int16_t err = kg__group_authz(c, call, gid, 1, KB_OP_DESCRIBE);
	pthread_mutex_lock(&c->mu);
	kg_group *g = NULL;
	if (!err)
		err = kg__group_get(c, gid, 0, &g);
	if (v >= 3)
		kw_wr_i32(w, 0);
	if (err && v >= 2) {
		kw_wr_array(w, flex, 0);
	} else if (ntopics < 0) {
		/* Every committed offset of the group, by topic: those of the
		 * topics the principal may describe, as Kafka. */
		size_t n = g ? g->noffs : 0, at = 0;
		int32_t cnt = 0;
		for (size_t i = 0; i < n; i++)
			cnt += (i == 0 || !kg__str_eq(&g->offs[i].topic, &g->offs[i - 1].topic)) &&
			       kg__visible(c, call, KB_OP_DESCRIBE, KB_RES_TOPIC, kg_k(&g->offs[i].topic));
		kw_wr_array(w, flex, cnt);
		while (at < n) {
			size_t end = at + 1;
			while (end < n && kg__str_eq(&g->offs[end].topic, &g->offs[at].topic))
				end++;
			if (!kg__visible(c, call, KB_OP_DESCRIBE, KB_RES_TOPIC, kg_k(&g->offs[at].topic))) {
				at = end;
				continue;
			}
			kw_wr_kstr(w, flex, kg_k(&g->offs[at].topic));
			kw_wr_array(w, flex, (int32_t)(end - at));
			for (size_t i = at; i < end; i++)
				enc_fetch_part(w, v, flex, g->offs[i].partition, &g->offs[i], KERR_NONE);
			kw_wr_tags(w, flex);
			at = end;
		}
	} else {
		kw_rd r2 = topics_at;
		kw_wr_array(w, flex, ntopics);
		for (int32_t t = 0; t < ntopics; t++) {
			kw_str topic = {"", 0};
			int32_t np = 0;
			kw_rd_str(&r2, flex, &topic);
			kw_rd_array(&r2, flex, 4, &np);
			kw_wr_kstr(w, flex, topic);
			kw_wr_array(w, flex, np > 0 ? np : 0);
			int described = kg__authorized(c, call, KB_OP_DESCRIBE, KB_RES_TOPIC, topic);
			for (int32_t p = 0; p < np; p++) {
				int32_t part = -1;
				kw_rd_i32(&r2, &part);
				const kg_offset *o = g && !err && described ? kg__offset_find(g, topic, part) : NULL;
				enc_fetch_part(w, v, flex, part, o, err ? err : described ? KERR_NONE
										 : KERR_TOPIC_AUTHORIZATION_FAILED);
			}
			kw_rd_tags(&r2, flex);
			kw_wr_tags(w, flex);
		}
	}
	pthread_mutex_unlock(&c->mu);
	if (v >= 2)
		kw_wr_i16(w, err);
	kw_wr_tags(w, flex);
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}

/* ---- OffsetDelete ---------------------------------------------------------------------------- */

int kg__api_offset_delete(kg_coord *c, const kg_coord_call *call, kw_rd *rd, kw_wr *w)
{
	kw_str gid;
	int32_t ntopics;
	kg_items it = {0};
	int rc;
	KRD_STR(rd, 0, &gid);
	KRD_ARRAY(rd, 0, 6, &ntopics);
	for (int32_t t = 0; t < ntopics; t++) {
		kw_str topic;
		int32_t np;
		KRD_STR(rd, 0, &topic);
		KRD_EXPECT(rd, topic.len >= 0, "topic name (null)");
		KRD_ARRAY(rd, 0, 4, &np);
		for (int32_t p = 0; p < np; p++) {
			int32_t part;
			KRD_I32(rd, &part);
			kg_citem *e = items_add(&it);
			if (!e || kg_str_setk(&e->off.topic, topic)) {
				rc = -ENOMEM;
				goto out;
			}
			e->topic_start = p == 0;
			e->off.partition = part;
			e->del = 1;
			if (!kg__authorized(c, call, KB_OP_READ, KB_RES_TOPIC, topic))
				e->err = KERR_TOPIC_AUTHORIZATION_FAILED;
		}
	}

	int16_t top = kg__group_authz(c, call, gid, 0, KB_OP_DELETE);
	kg_group *g = NULL;
	pthread_mutex_lock(&c->mu);
	if (!top)
		top = kg__group_get(c, gid, 0, &g);
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
			if (!it.v[i].err && kg__group_subscribed(g, kg_k(&it.v[i].off.topic)) != 0)
				it.v[i].err = KERR_GROUP_SUBSCRIBED_TO_TOPIC;
	}
	if (top) {
		kw_wr_i16(w, top);
		kw_wr_i32(w, 0);
		kw_wr_array(w, 0, 0);
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
static void expire_group(kg_coord *c, kg_group *g, int64_t wall)
{
	if (g->nmembers || g->npending || g->pc_head || g->deleting || !g->loaded || !g->noffs)
		return;
	kg_items it = {0};
	for (size_t i = 0; i < g->noffs; i++) {
		const kg_offset *o = &g->offs[i];
		int64_t since = o->commit_ms > g->empty_since ? o->commit_ms : g->empty_since;
		if (wall - since < c->cfg.offsets_retention_ms)
			continue;
		kg_citem *e = items_add(&it);
		if (!e || kg__str_set(&e->off.topic, o->topic.s, o->topic.len)) {
			items_free(&it);
			return;
		}
		e->off.partition = o->partition;
		e->del = 1;
		e->topic_start = 1;
	}
	if (!it.n)
		return;
	kg_pcommit *pc = calloc(1, sizeof(*pc));
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
	kg__flush_enqueue(c, g);
}

void kg_coord_expire_offsets(kg_coord *c)
{
	if (c->cfg.offsets_retention_ms <= 0)
		return;
	/* Groups that only exist on the volume are loaded first (each file is
	 * read once per broker run; loading restarts their retention clock,
	 * which only ever keeps offsets longer). */
	kg_str *ids = NULL;
	size_t n = 0;
	if (kg__ids_on_volume(c, &ids, &n) != 0)
		n = 0;
	pthread_mutex_lock(&c->mu);
	for (size_t i = 0; i < n && !c->stop; i++) {
		kg_group *g;
		int64_t ep;
		/* Only groups served here (others are their owner's to expire). */
		if (!kg__group_find(c, kg_k(&ids[i])) && kg__serve_epoch(c, kg_k(&ids[i]), 0, &ep) == KERR_NONE)
			kg__group_get(c, kg_k(&ids[i]), 0, &g);
	}
	int64_t wall = kg__wall(c);
	for (size_t b = 0; b < c->tabsize; b++)
		for (kg_group *g = c->tab[b]; g; g = g->hnext)
			expire_group(c, g, wall);
	pthread_mutex_unlock(&c->mu);
	for (size_t i = 0; i < n; i++)
		kg__str_free(&ids[i]);
	free(ids);
}
