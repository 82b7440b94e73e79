/*
 * assignment.c — the assignment document and its pointer: codec,
 * validation, publication and polling (see assignment.h).
 */
#include "kaas/cluster/assignment.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/cluster/controller.h"
#include "kaas/cluster/json.h"

#define ADIR "assignment"
#define APTR "assignment.json"

void kcl_assign_free(kcl_assign *a)
{
	if (!a)
		return;
	for (size_t i = 0; i < a->ntopics; i++)
		free(a->topics[i].parts);
	free(a->topics);
	free(a->brokers);
	free(a->shards);
	memset(a, 0, sizeof(*a));
}

int kcl_assign_alloc(kcl_assign *a, size_t nbrokers, size_t ntopics, int32_t nshards)
{
	memset(a, 0, sizeof(*a));
	a->brokers = calloc(nbrokers ? nbrokers : 1, sizeof(*a->brokers));
	a->topics = calloc(ntopics ? ntopics : 1, sizeof(*a->topics));
	a->shards = calloc(nshards > 0 ? (size_t)nshards : 1, sizeof(*a->shards));
	if (!a->brokers || !a->topics || !a->shards) {
		kcl_assign_free(a);
		return -ENOMEM;
	}
	a->nbrokers = nbrokers;
	a->nshards = nshards;
	return 0; /* ntopics grows as the caller fills topics[] */
}

int kcl_atopic_alloc(kcl_atopic *t, const char *name, const char *topic_id, int32_t n)
{
	memset(t, 0, sizeof(*t));
	if (!name || strlen(name) > KCL_TOPIC_NAME_MAX || n < 0 || n > KCL_PARTS_MAX ||
	    (topic_id && strlen(topic_id) > 36))
		return -EINVAL;
	t->parts = calloc(n ? (size_t)n : 1, sizeof(*t->parts));
	if (!t->parts)
		return -ENOMEM;
	strcpy(t->name, name);
	if (topic_id)
		strcpy(t->topic_id, topic_id);
	t->n = n;
	return 0;
}

/* ---- validation ------------------------------------------------------------------- */

static int topic_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > KCL_TOPIC_NAME_MAX || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
			return 0;
	return 1;
}

static int uuid_ok(const char *s)
{
	if (!*s)
		return 1;
	if (strlen(s) != 36)
		return 0;
	for (int i = 0; i < 36; i++) {
		if (i == 8 || i == 13 || i == 18 || i == 23) {
			if (s[i] != '-')
				return 0;
		} else if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i])) {
			return 0;
		}
	}
	return 1;
}

static int slot_ok(const kcl_assign *a, const kcl_slot *s)
{
	if (s->epoch < 0)
		return 0;
	if (s->leader == -1)
		return 1;
	return s->epoch >= 1 && kcl_assign_broker(a, s->leader) != NULL;
}

int kcl_assign_check(const kcl_assign *a, char *err, size_t errlen)
{
	if (a->gen.controller_epoch < 1 || a->gen.controller_epoch > KCL_EPOCH_MAX)
		return kcl__fail(err, errlen, -ERANGE, "controller epoch %" PRId64 " is impossible",
				 a->gen.controller_epoch);
	if (a->gen.generation < 1 || a->gen.generation > KCL_SEQ_MAX)
		return kcl__fail(err, errlen, -ERANGE, "generation %" PRId64 " is impossible",
				 a->gen.generation);
	if (a->controller < 0)
		return kcl__fail(err, errlen, -ERANGE, "controller id %" PRId32 " is impossible",
				 a->controller);
	if (a->nbrokers > KCL_BROKERS_MAX)
		return kcl__fail(err, errlen, -ERANGE, "%zu brokers, at most %d", a->nbrokers,
				 KCL_BROKERS_MAX);
	for (size_t i = 0; i < a->nbrokers; i++) {
		const kcl_abroker *b = &a->brokers[i];
		if (b->id < 0 || b->inc.incarnation < 1 || b->inc.incarnation > (uint64_t)KCL_SEQ_MAX ||
		    b->inc.nonce == 0)
			return kcl__fail(err, errlen, -ERANGE, "broker entry %zu is impossible", i);
		if (i && b->id <= a->brokers[i - 1].id)
			return kcl__fail(err, errlen, -EINVAL, "brokers not sorted by id or id %" PRId32 " twice",
					 b->id);
	}
	size_t total = 0;
	for (size_t i = 0; i < a->ntopics; i++) {
		const kcl_atopic *t = &a->topics[i];
		if (!topic_name_ok(t->name))
			return kcl__fail(err, errlen, -EINVAL, "topic %zu: invalid name", i);
		if (i && strcmp(t->name, a->topics[i - 1].name) <= 0)
			return kcl__fail(err, errlen, -EINVAL, "topics not sorted or '%s' twice", t->name);
		if (!uuid_ok(t->topic_id))
			return kcl__fail(err, errlen, -EINVAL, "topic '%s': invalid topic_id", t->name);
		if (t->n < 1 || t->n > KCL_PARTS_MAX)
			return kcl__fail(err, errlen, -ERANGE, "topic '%s': %" PRId32 " partitions", t->name,
					 t->n);
		total += (size_t)t->n;
		if (total > KCL_TOTAL_PARTS_MAX)
			return kcl__fail(err, errlen, -ERANGE, "more than %d partitions in all",
					 KCL_TOTAL_PARTS_MAX);
		for (int32_t p = 0; p < t->n; p++)
			if (!slot_ok(a, &t->parts[p]))
				return kcl__fail(err, errlen, -ERANGE,
						 "topic '%s' partition %" PRId32 ": leader %" PRId32 " epoch %" PRId32
						 " is impossible",
						 t->name, p, t->parts[p].leader, t->parts[p].epoch);
	}
	if (a->nshards < 0 || a->nshards > KCL_SHARDS_MAX)
		return kcl__fail(err, errlen, -ERANGE, "%" PRId32 " shards, at most %d", a->nshards,
				 KCL_SHARDS_MAX);
	for (int32_t s = 0; s < a->nshards; s++)
		if (!slot_ok(a, &a->shards[s]))
			return kcl__fail(err, errlen, -ERANGE, "shard %" PRId32 ": leader %" PRId32
				       " epoch %" PRId32 " is impossible",
				       s, a->shards[s].leader, a->shards[s].epoch);
	return 0;
}

const kcl_atopic *kcl_assign_topic(const kcl_assign *a, const char *name)
{
	size_t lo = 0, hi = a->ntopics;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(a->topics[mid].name, name);
		if (c == 0)
			return &a->topics[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const kcl_abroker *kcl_assign_broker(const kcl_assign *a, int32_t id)
{
	size_t lo = 0, hi = a->nbrokers;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (a->brokers[mid].id == id)
			return &a->brokers[mid];
		if (a->brokers[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* ---- the document's codec ------------------------------------------------------------ */

static json_t *slots_json(const kcl_slot *s, int32_t n, int which)
{
	json_t *arr = json_array();
	for (int32_t i = 0; arr && i < n; i++)
		if (json_array_append_new(arr, json_integer(which ? s[i].epoch : s[i].leader))) {
			json_decref(arr);
			return NULL;
		}
	return arr;
}

int kcl_assign_encode(const kcl_assign *a, char **out, size_t *len)
{
	if (kcl_assign_check(a, NULL, 0))
		return -EINVAL;
	int rc = -ENOMEM;
	json_t *brokers = json_array(), *topics = json_array();
	json_t *doc = NULL;
	if (!brokers || !topics)
		goto out;
	for (size_t i = 0; i < a->nbrokers; i++) {
		char nonce[17];
		kcl__hex64_fmt(a->brokers[i].inc.nonce, nonce);
		if (json_array_append_new(brokers, json_pack("{s:i,s:I,s:s}", "id", (int)a->brokers[i].id,
							     "incarnation",
							     (json_int_t)a->brokers[i].inc.incarnation,
							     "nonce", nonce)))
			goto out;
	}
	for (size_t i = 0; i < a->ntopics; i++) {
		const kcl_atopic *t = &a->topics[i];
		json_t *l = slots_json(t->parts, t->n, 0), *e = slots_json(t->parts, t->n, 1);
		if (json_array_append_new(topics, json_pack("{s:s,s:s,s:o,s:o}", "name", t->name,
							    "topic_id", t->topic_id, "leaders", l,
							    "epochs", e)))
			goto out;
	}
	json_t *sl = slots_json(a->shards, a->nshards, 0), *se = slots_json(a->shards, a->nshards, 1);
	doc = json_pack("{s:i,s:I,s:I,s:i,s:O,s:O,s:{s:o,s:o}}", "version", KCL_ASSIGN_VERSION,
			"controller_epoch", (json_int_t)a->gen.controller_epoch, "generation",
			(json_int_t)a->gen.generation, "controller", (int)a->controller, "brokers",
			brokers, "topics", topics, "shards", "leaders", sl, "epochs", se);
	if (!doc)
		goto out;
	rc = kcl__dump(doc, out, len);
out:
	json_decref(doc);
	json_decref(brokers);
	json_decref(topics);
	return rc;
}

/* leaders[] and epochs[] of equal length n into slots. */
static int slots_from(json_t *o, const char *what, int32_t max, kcl_slot **out, int32_t *n,
		      char *err, size_t errlen)
{
	json_t *l = json_object_get(o, "leaders"), *e = json_object_get(o, "epochs");
	if (!json_is_array(l) || !json_is_array(e))
		return kcl__fail(err, errlen, -EINVAL, "%s: 'leaders' or 'epochs' missing or not arrays",
				 what);
	size_t k = json_array_size(l);
	if (k != json_array_size(e))
		return kcl__fail(err, errlen, -EINVAL, "%s: %zu leaders but %zu epochs", what, k,
				 json_array_size(e));
	if (k > (size_t)max)
		return kcl__fail(err, errlen, -ERANGE, "%s: %zu entries, at most %" PRId32, what, k, max);
	kcl_slot *s = calloc(k ? k : 1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < k; i++) {
		json_t *li = json_array_get(l, i), *ei = json_array_get(e, i);
		if (!json_is_integer(li) || !json_is_integer(ei)) {
			free(s);
			return kcl__fail(err, errlen, -EINVAL, "%s: entry %zu is not an integer", what, i);
		}
		json_int_t lv = json_integer_value(li), ev = json_integer_value(ei);
		if (lv < -1 || lv > KCL_ID_MAX || ev < 0 || ev > KCL_EPOCH32_MAX) {
			free(s);
			return kcl__fail(err, errlen, -ERANGE, "%s: entry %zu (leader %lld, epoch %lld) is impossible",
					 what, i, (long long)lv, (long long)ev);
		}
		s[i].leader = (int32_t)lv;
		s[i].epoch = (int32_t)ev;
	}
	*out = s;
	*n = (int32_t)k;
	return 0;
}

int kcl_assign_decode(const char *buf, size_t len, kcl_assign *out, char *err, size_t errlen)
{
	json_t *doc = NULL;
	kcl_assign a;
	memset(&a, 0, sizeof(a));
	memset(out, 0, sizeof(*out));
	int64_t ver, x;
	char sub[256];
	int rc = kcl__parse(buf, len, "assignment", &doc, err, errlen);
	if (rc)
		return rc;
	if ((rc = kcl__version(doc, "assignment", KCL_ASSIGN_VERSION, &ver, err, errlen)) ||
	    (rc = kcl__int(doc, "controller_epoch", 1, KCL_EPOCH_MAX, &a.gen.controller_epoch, err,
			   errlen)) ||
	    (rc = kcl__int(doc, "generation", 1, KCL_SEQ_MAX, &a.gen.generation, err, errlen)) ||
	    (rc = kcl__int(doc, "controller", 0, KCL_ID_MAX, &x, err, errlen)))
		goto out;
	a.controller = (int32_t)x;
	json_t *brokers = json_object_get(doc, "brokers"), *topics = json_object_get(doc, "topics");
	json_t *shards = json_object_get(doc, "shards");
	if (!json_is_array(brokers) || !json_is_array(topics) || !json_is_object(shards)) {
		rc = kcl__fail(err, errlen, -EINVAL, "'brokers', 'topics' or 'shards' missing or mistyped");
		goto out;
	}
	if (json_array_size(brokers) > KCL_BROKERS_MAX) {
		rc = kcl__fail(err, errlen, -ERANGE, "%zu brokers, at most %d", json_array_size(brokers),
			       KCL_BROKERS_MAX);
		goto out;
	}
	size_t nb = json_array_size(brokers), nt = json_array_size(topics);
	if (nt > KCL_TOTAL_PARTS_MAX) {
		rc = kcl__fail(err, errlen, -ERANGE, "%zu topics", nt);
		goto out;
	}
	a.brokers = calloc(nb ? nb : 1, sizeof(*a.brokers));
	a.topics = calloc(nt ? nt : 1, sizeof(*a.topics));
	if (!a.brokers || !a.topics) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nb; i++) {
		json_t *b = json_array_get(brokers, i);
		kcl_abroker *ab = &a.brokers[i];
		if (!json_is_object(b)) {
			rc = kcl__fail(err, errlen, -EINVAL, "broker entry %zu is not an object", i);
			goto out;
		}
		if ((rc = kcl__int(b, "id", 0, KCL_ID_MAX, &x, sub, sizeof(sub))))
			goto bad_broker;
		ab->id = (int32_t)x;
		if ((rc = kcl__int(b, "incarnation", 1, KCL_SEQ_MAX, &x, sub, sizeof(sub))))
			goto bad_broker;
		ab->inc.incarnation = (uint64_t)x;
		if ((rc = kcl__hex64(b, "nonce", &ab->inc.nonce, sub, sizeof(sub))))
			goto bad_broker;
		a.nbrokers = i + 1;
		continue;
bad_broker:
		kcl__fail(err, errlen, rc, "broker entry %zu: %s", i, sub);
		goto out;
	}
	for (size_t i = 0; i < nt; i++) {
		json_t *t = json_array_get(topics, i);
		kcl_atopic *at = &a.topics[i];
		if (!json_is_object(t)) {
			rc = kcl__fail(err, errlen, -EINVAL, "topic entry %zu is not an object", i);
			goto out;
		}
		if ((rc = kcl__str(t, "name", KCL_TOPIC_NAME_MAX, 0, at->name, sizeof(at->name), sub,
				   sizeof(sub))) ||
		    (rc = kcl__str(t, "topic_id", 36, 1, at->topic_id, sizeof(at->topic_id), sub,
				   sizeof(sub)))) {
			kcl__fail(err, errlen, rc, "topic entry %zu: %s", i, sub);
			goto out;
		}
		if ((rc = slots_from(t, at->name, KCL_PARTS_MAX, &at->parts, &at->n, err, errlen)))
			goto out;
		a.ntopics = i + 1;
	}
	if ((rc = slots_from(shards, "shards", KCL_SHARDS_MAX, &a.shards, &a.nshards, err, errlen)))
		goto out;
	if ((rc = kcl_assign_check(&a, err, errlen)))
		goto out;
	*out = a;
	memset(&a, 0, sizeof(a));
out:
	kcl_assign_free(&a);
	json_decref(doc);
	return rc;
}

/* ---- the pointer ------------------------------------------------------------------ */

int kcl_assign_doc_path(kcl_gen g, char *dst, size_t dstlen)
{
	if (g.controller_epoch < 1 || g.controller_epoch > KCL_EPOCH_MAX || g.generation < 1)
		return -ERANGE;
	int n = snprintf(dst, dstlen, ADIR "/%010" PRId64 "-%020" PRId64 ".json", g.controller_epoch,
			 g.generation);
	return n < 0 || (size_t)n >= dstlen ? -ENAMETOOLONG : 0;
}

int kcl_aptr_encode(const kcl_aptr *p, char **out, size_t *len)
{
	char doc[64];
	int rc = kcl_assign_doc_path(p->gen, doc, sizeof(doc));
	if (rc || p->controller < 0 || p->doc_bytes < 1)
		return -EINVAL;
	json_t *j = json_pack("{s:i,s:s,s:I,s:I,s:i,s:s,s:I,s:I}", "version", KCL_APTR_VERSION, "kind",
			      "pointer", "controller_epoch", (json_int_t)p->gen.controller_epoch,
			      "generation", (json_int_t)p->gen.generation, "controller",
			      (int)p->controller, "document", doc, "document_bytes",
			      (json_int_t)p->doc_bytes, "wall_ms", (json_int_t)p->wall_ms);
	if (!j)
		return -ENOMEM;
	rc = kcl__dump(j, out, len);
	json_decref(j);
	return rc;
}

int kcl_aptr_decode(const char *buf, size_t len, kcl_aptr *out, char *err, size_t errlen)
{
	json_t *doc = NULL;
	kcl_aptr p;
	memset(&p, 0, sizeof(p));
	int64_t ver, x;
	char kind[16], docname[80], want[64];
	int rc = kcl__parse(buf, len, "assignment pointer", &doc, err, errlen);
	if (rc)
		return rc;
	if (!json_object_get(doc, "kind") && json_object_get(doc, "partitions")) {
		rc = kcl__fail(err, errlen, -EPROTONOSUPPORT,
			       "a single-broker assignment (whole document, no pointer)");
		goto out;
	}
	if ((rc = kcl__version(doc, "assignment pointer", KCL_APTR_VERSION, &ver, err, errlen)) ||
	    (rc = kcl__str(doc, "kind", 15, 0, kind, sizeof(kind), err, errlen)))
		goto out;
	if (strcmp(kind, "pointer") != 0) {
		rc = kcl__fail(err, errlen, -EINVAL, "field 'kind' = '%s', not 'pointer'", kind);
		goto out;
	}
	if ((rc = kcl__int(doc, "controller_epoch", 1, KCL_EPOCH_MAX, &p.gen.controller_epoch, err,
			   errlen)) ||
	    (rc = kcl__int(doc, "generation", 1, KCL_SEQ_MAX, &p.gen.generation, err, errlen)) ||
	    (rc = kcl__int(doc, "controller", 0, KCL_ID_MAX, &x, err, errlen)) ||
	    (rc = kcl__int(doc, "document_bytes", 1, KCL_ASSIGN_MAX_BYTES, &p.doc_bytes, err, errlen)) ||
	    (rc = kcl__int(doc, "wall_ms", INT64_MIN, INT64_MAX, &p.wall_ms, err, errlen)) ||
	    (rc = kcl__str(doc, "document", sizeof(docname) - 1, 0, docname, sizeof(docname), err,
			   errlen)))
		goto out;
	p.controller = (int32_t)x;
	/* The name is derived, never trusted: a pointer cannot send a reader
	 * anywhere but the document of its own generation. */
	if ((rc = kcl_assign_doc_path(p.gen, want, sizeof(want))) || strcmp(want, docname) != 0) {
		rc = kcl__fail(err, errlen, -EINVAL, "field 'document' = '%s' does not match its generation",
			       docname);
		goto out;
	}
	*out = p;
out:
	json_decref(doc);
	return rc;
}

int kcl_assign_publish(sub_vfs *v, const kcl_assign *a, int64_t wall_ms, char *err, size_t errlen)
{
	char path[64], *doc = NULL, *ptr = NULL;
	size_t dlen = 0, plen = 0;
	int rc = kcl_assign_check(a, err, errlen);
	if (rc)
		return rc;
	if ((rc = kcl_assign_doc_path(a->gen, path, sizeof(path))) ||
	    (rc = kcl_assign_encode(a, &doc, &dlen)))
		goto out;
	kcl_aptr p = {.gen = a->gen, .controller = a->controller, .doc_bytes = (int64_t)dlen,
		      .wall_ms = wall_ms};
	if ((rc = kcl_aptr_encode(&p, &ptr, &plen)))
		goto out;
	rc = sub_write_atomic(v, path, doc, dlen);
	if (rc == -ENOENT && (rc = sub_mkdirs(v, ADIR, 0755)) == 0)
		rc = sub_write_atomic(v, path, doc, dlen);
	if (rc) {
		kcl__fail(err, errlen, rc, "%s: %s", path, sub_strerror(rc));
		goto out;
	}
	/* Only a durable document may be pointed at. */
	if ((rc = sub_write_atomic(v, APTR, ptr, plen)))
		kcl__fail(err, errlen, rc, APTR ": %s", sub_strerror(rc));
out:
	free(doc);
	free(ptr);
	return rc;
}

static int parse_doc_name(const char *name, kcl_gen *g)
{
	/* <10 digits>-<20 digits>.json */
	if (strlen(name) != 36 || name[10] != '-' || strcmp(name + 31, ".json") != 0)
		return -1;
	int64_t e = 0, n = 0;
	for (int i = 0; i < 10; i++) {
		if (!isdigit((unsigned char)name[i]))
			return -1;
		e = e * 10 + (name[i] - '0');
	}
	for (int i = 11; i < 31; i++) {
		if (!isdigit((unsigned char)name[i]) || n > (INT64_MAX - 9) / 10)
			return -1;
		n = n * 10 + (name[i] - '0');
	}
	g->controller_epoch = e;
	g->generation = n;
	return 0;
}

static int gen_desc(const void *a, const void *b)
{
	return -kcl_gen_cmp(*(const kcl_gen *)a, *(const kcl_gen *)b);
}

int kcl_assign_cleanup(sub_vfs *v, kcl_gen current, unsigned keep, unsigned *removed)
{
	char **names = NULL;
	size_t nn = 0;
	unsigned gone = 0;
	kcl_gen *g = NULL;
	int rc = sub_list(v, ADIR, &names, &nn);
	if (rc == -ENOENT) {
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;
	g = calloc(nn ? nn : 1, sizeof(*g));
	if (!g) {
		rc = -ENOMEM;
		goto out;
	}
	size_t k = 0;
	for (size_t i = 0; i < nn; i++)
		if (parse_doc_name(names[i], &g[k]) == 0)
			k++;
	qsort(g, k, sizeof(*g), gen_desc);
	for (size_t i = keep; i < k; i++) {
		if (kcl_gen_cmp(g[i], current) >= 0)
			continue;
		char path[64];
		if ((rc = kcl_assign_doc_path(g[i], path, sizeof(path))))
			goto out;
		int u = sub_unlink(v, path);
		if (u == 0)
			gone++;
		else if (u != -ENOENT) {
			rc = u;
			goto out;
		}
	}
	rc = 0;
out:
	if (removed)
		*removed = gone;
	free(g);
	sub_names_free(names, nn);
	return rc;
}

/* ---- polling ------------------------------------------------------------------------- */

void kcl_areader_note_epoch(kcl_areader *r, int64_t controller_epoch)
{
	if (controller_epoch > r->max_epoch)
		r->max_epoch = controller_epoch;
}

int kcl_aptr_read(sub_vfs *v, kcl_aptr *p, char *err, size_t errlen)
{
	char *buf = NULL, why[256];
	size_t len = 0;
	int rc = sub_read_file(v, APTR, KCL_APTR_MAX_BYTES, &buf, &len);
	if (rc == -EFBIG)
		return kcl__fail(err, errlen, -ERANGE, APTR ": longer than %d bytes", KCL_APTR_MAX_BYTES);
	if (rc)
		return kcl__fail(err, errlen, rc, APTR ": %s", sub_strerror(rc));
	rc = kcl_aptr_decode(buf, len, p, why, sizeof(why));
	free(buf);
	return rc ? kcl__fail(err, errlen, rc, APTR ": %s", why) : 0;
}

int kcl_assign_read(sub_vfs *v, const kcl_aptr *p, kcl_assign *out, char *err, size_t errlen)
{
	char path[64], *buf = NULL, why[256];
	size_t len = 0;
	memset(out, 0, sizeof(*out));
	int rc = kcl_assign_doc_path(p->gen, path, sizeof(path));
	if (rc)
		return rc;
	rc = sub_read_file(v, path, KCL_ASSIGN_MAX_BYTES, &buf, &len);
	if (rc)
		return kcl__fail(err, errlen, rc, "%s: %s", path, sub_strerror(rc));
	if ((int64_t)len != p->doc_bytes) {
		free(buf);
		return kcl__fail(err, errlen, -EBADMSG, "%s: %zu bytes, the pointer says %" PRId64, path, len,
				 p->doc_bytes);
	}
	rc = kcl_assign_decode(buf, len, out, why, sizeof(why));
	free(buf);
	if (rc)
		return kcl__fail(err, errlen, rc, "%s: %s", path, why);
	if (kcl_gen_cmp(out->gen, p->gen) != 0) {
		kcl_assign_free(out);
		return kcl__fail(err, errlen, -EINVAL, "%s: holds another generation than its name", path);
	}
	return 0;
}

int kcl_assign_poll(sub_vfs *v, kcl_areader *r, kcl_assign *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	r->polls++;
	for (int attempt = 0;; attempt++) {
		kcl_aptr p;
		int rc = kcl_aptr_read(v, &p, err, errlen);
		r->pointer_present = rc != -ENOENT;
		r->pointer_valid = rc == 0;
		if (rc == 0)
			r->pointer_gen = p.gen;
		if (rc == -ENOENT)
			return 0; /* no controller has published yet */
		if (rc) {
			r->refused++;
			return rc;
		}
		if (p.gen.controller_epoch < r->max_epoch ||
		    (r->applied.controller_epoch == p.gen.controller_epoch &&
		     p.gen.generation < r->applied.generation)) {
			r->refused++;
			return kcl__fail(err, errlen, -ESTALE,
					 APTR ": controller epoch %" PRId64 " generation %" PRId64
					 " is older than what this broker follows (epoch %" PRId64 ")",
					 p.gen.controller_epoch, p.gen.generation, r->max_epoch);
		}
		if (kcl_gen_cmp(p.gen, r->applied) == 0)
			return 0;
		rc = kcl_assign_read(v, &p, out, err, errlen);
		if (rc == -ENOENT && attempt < 2)
			continue; /* replaced and cleaned up meanwhile: follow the pointer again */
		if (rc) {
			r->refused++;
			return rc;
		}
		r->docs_read++;
		kcl_areader_note_epoch(r, p.gen.controller_epoch);
		r->applied = p.gen;
		return 1;
	}
}
