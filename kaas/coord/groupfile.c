/*
 * groupfile.c — CLUSTER/groups/<group>.json: a group's committed offsets and
 * its membership as one JSON document, replaced whole with sub_write_atomic
 * (docs/formats.md).
 *
 *   {"version": 2, "group_id": "...", "coordinator_epoch": 0,
 *    "writer": <broker id>, "written_ms": <wall ms>, "generation": N,
 *    "protocol_type": "consumer" | null,
 *    "state": "Empty" | "Stable" | "PreparingRebalance",
 *    "protocol": "range" | null, "leader": "<member id>" | null,
 *    "members": [{"member_id": "...", "group_instance_id": null,
 *                 "client_id": "...", "client_host": "/10.0.0.7",
 *                 "session_timeout_ms": 10000, "rebalance_timeout_ms": 300000,
 *                 "protocols": [{"name": "range", "metadata": "<hex>"}, ...],
 *                 "assignment": "<hex>"}, ...],
 *    "offsets": [{"topic": "...", "partition": P, "offset": O,
 *                 "leader_epoch": E, "metadata": "...", "commit_ms": T}, ...]}
 *
 * Version 1 files (no membership) are still read.  Strings from clients
 * (group id, member and instance ids, client id, topic, metadata) that are
 * not valid UTF-8 are stored as {"hex": "<bytes in hex>"} so that nothing a
 * client sends can make the file unwritable or change its meaning; the
 * protocol metadata and assignments are bytes and always hex strings.
 *
 * Everything read is checked before it is used: the file may come from
 * another host, another kaas version, or a broken disk.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/coord/coord_int.h"
#include "util/hex.h"
#include "util/log.h"

#define KC_GROUP_FILE_VERSION 2     /* written; 1 is still read */
#define KC_GROUP_FILE_MAX (256u << 20)
#define KC_EPOCH_MAX 9999999999LL /* ten digits in a file name */

int kg__group_path(kw_str id, int64_t epoch, char *path, size_t len)
{
	char stem[KC_GNAME_MAX + 64];
	if (id.len < 0 || epoch < 0 || epoch > KC_EPOCH_MAX)
		return -EINVAL;
	int rc = kg__gname_encode(id.s, (size_t)id.len, stem, sizeof(stem));
	if (rc < 0)
		return rc;
	int n = epoch == 0 ? snprintf(path, len, "groups/%s.json", stem)
			   : snprintf(path, len, "groups/%s.%010lld.json", stem, (long long)epoch);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int kg__group_fname_parse(const char *name, char *stem, size_t stemlen, int64_t *epoch)
{
	size_t n = strlen(name);
	if (name[0] == '.' || n <= 5 || strcmp(name + n - 5, ".json") != 0)
		return -EINVAL; /* temp files of writes in flight, strangers */
	n -= 5;
	*epoch = -1;
	if (n > 11 && name[n - 11] == '.') {
		int digits = 1;
		for (size_t i = n - 10; i < n; i++)
			digits &= name[i] >= '0' && name[i] <= '9';
		if (digits) {
			*epoch = strtoll(name + n - 10, NULL, 10);
			n -= 11;
		}
	}
	if (n == 0 || n >= stemlen)
		return -EINVAL;
	memcpy(stem, name, n);
	stem[n] = '\0';
	return 0;
}

/* ---- strings ----------------------------------------------------------------------- */

/* Bytes as a lower-case hex string. */
static json_t *jhex(const uint8_t *p, int32_t len)
{
	if (len < 0)
		len = 0;
	char *h = malloc((size_t)len * 2 + 1);
	if (!h)
		return NULL;
	ku_hex_encode(p, (size_t)len, h);
	json_t *j = json_stringn(h, (size_t)len * 2);
	free(h);
	return j;
}

static json_t *jstr(const char *s, int32_t len)
{
	if (len < 0)
		return json_null();
	json_t *j = json_stringn(s ? s : "", (size_t)len);
	if (j)
		return j;
	/* Not UTF-8: keep the exact bytes. */
	return json_pack("{s:o}", "hex", jhex((const uint8_t *)s, len));
}

/* A hex string back into bytes (*out malloc'd, never NULL on success). */
static int jget_hex(json_t *j, uint8_t **out, int32_t *len)
{
	if (!j || !json_is_string(j))
		return -EBADMSG;
	const char *hs = json_string_value(j);
	size_t hn = json_string_length(j);
	if (hn % 2 || hn / 2 > INT32_MAX)
		return -EBADMSG;
	uint8_t *b = malloc(hn / 2 + 1);
	if (!b)
		return -ENOMEM;
	if (ku_hex_decode(hs, hn / 2, b)) {
		free(b);
		return -EBADMSG;
	}
	*out = b;
	*len = (int32_t)(hn / 2);
	return 0;
}

/* A string as written by jstr(); null allowed only when nullable. */
static int jget_str(json_t *j, int nullable, kg_str *out)
{
	if (!j)
		return -EBADMSG;
	if (json_is_null(j))
		return nullable ? kg__str_set(out, NULL, -1) : -EBADMSG;
	if (json_is_string(j)) {
		size_t n = json_string_length(j);
		if (n > INT32_MAX)
			return -EBADMSG;
		return kg__str_set(out, json_string_value(j), (int32_t)n);
	}
	uint8_t *b;
	int32_t n;
	int rc = jget_hex(json_is_object(j) ? json_object_get(j, "hex") : NULL, &b, &n);
	if (rc)
		return rc;
	rc = kg__str_set(out, (const char *)b, n);
	free(b);
	return rc;
}

static int jget_int(json_t *obj, const char *key, int64_t min, int64_t max, int64_t *out)
{
	json_t *j = json_object_get(obj, key);
	if (!j || !json_is_integer(j))
		return -EBADMSG;
	json_int_t v = json_integer_value(j);
	if (v < min || v > max)
		return -EBADMSG;
	*out = (int64_t)v;
	return 0;
}

/* ---- writing --------------------------------------------------------------------------- */

/* What a reader restores: a group with members is Stable when its current
 * generation's assignment is complete (or is what this write makes
 * durable), else a rebalance was under way and the reader starts one. */
static const char *file_state(const kg_group *g)
{
	if (!g->members)
		return "Empty";
	if (g->state == KC_STABLE || (g->state == KC_COMPLETING && g->sync_pending))
		return "Stable";
	return "PreparingRebalance";
}

static json_t *member_json(const kg_member *m)
{
	json_t *o = json_object(), *ps = json_array();
	if (!o || !ps)
		goto fail;
	for (int32_t i = 0; i < m->nprotos; i++) {
		json_t *p = json_object();
		if (json_array_append_new(ps, p) || /* ps owns p (also on failure) */
		    json_object_set_new(p, "name", jstr(m->protos[i].name.s, m->protos[i].name.len)) ||
		    json_object_set_new(p, "metadata", jhex(m->protos[i].meta, m->protos[i].meta_len)))
			goto fail;
	}
	if (json_object_set_new(o, "member_id", jstr(m->id.s, m->id.len)) ||
	    json_object_set_new(o, "group_instance_id", jstr(m->instance_id.s, m->instance_id.len)) ||
	    json_object_set_new(o, "client_id",
				jstr(m->client_id.len > 0 ? m->client_id.s : "",
				     m->client_id.len > 0 ? m->client_id.len : 0)) ||
	    json_object_set_new(o, "client_host",
				jstr(m->client_host.len > 0 ? m->client_host.s : "",
				     m->client_host.len > 0 ? m->client_host.len : 0)) ||
	    json_object_set_new(o, "session_timeout_ms", json_integer(m->session_timeout_ms)) ||
	    json_object_set_new(o, "rebalance_timeout_ms", json_integer(m->rebalance_timeout_ms)) ||
	    json_object_set(o, "protocols", ps) ||
	    json_object_set_new(o, "assignment",
				jhex(m->assignment, m->assignment ? m->assignment_len : 0)))
		goto fail;
	json_decref(ps);
	return o;
fail:
	json_decref(ps);
	json_decref(o);
	return NULL;
}

char *kg__group_serialize_view(kg_coord *c, kg_group *g, const kg_offset *v, size_t n)
{
	char *out = NULL, *head = NULL, *tail = NULL;
	json_t *offs = json_array();
	json_t *doc = json_object();
	if (!offs || !doc)
		goto out;
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_object();
		if (!o || json_array_append_new(offs, o) ||
		    json_object_set_new(o, "topic", jstr(v[i].topic.s, v[i].topic.len)) ||
		    json_object_set_new(o, "partition", json_integer(v[i].partition)) ||
		    json_object_set_new(o, "offset", json_integer(v[i].offset)) ||
		    json_object_set_new(o, "leader_epoch", json_integer(v[i].leader_epoch)) ||
		    json_object_set_new(o, "metadata",
					jstr(v[i].metadata.len > 0 ? v[i].metadata.s : "",
					     v[i].metadata.len > 0 ? v[i].metadata.len : 0)) ||
		    json_object_set_new(o, "commit_ms", json_integer(v[i].commit_ms)))
			goto out;
	}
	const char *state = file_state(g);
	int empty = !g->members;
	if (json_object_set_new(doc, "version", json_integer(KC_GROUP_FILE_VERSION)) ||
	    json_object_set_new(doc, "group_id", jstr(g->id.s, g->id.len)) ||
	    json_object_set_new(doc, "coordinator_epoch", json_integer(g->epoch)) ||
	    json_object_set_new(doc, "writer", json_integer(c->cfg.broker_id)) ||
	    json_object_set_new(doc, "written_ms", json_integer(kg__wall(c))) ||
	    json_object_set_new(doc, "generation", json_integer(g->generation)) ||
	    json_object_set_new(doc, "protocol_type", jstr(g->protocol_type.s, g->protocol_type.len)) ||
	    json_object_set_new(doc, "state", json_string(state)) ||
	    json_object_set_new(doc, "protocol",
				empty ? json_null() : jstr(g->protocol.s, g->protocol.len)) ||
	    json_object_set_new(doc, "leader", empty ? json_null() : jstr(g->leader.s, g->leader.len)))
		goto out;
	/* Members change at rebalances, offsets at every commit: each member's
	 * JSON is kept between writes (kg_member_touch() drops it) and the
	 * document is put together from the parts, so a commit to a group of a
	 * thousand members does not rebuild all of them under c->mu. */
	size_t mlen = 0;
	for (kg_member *m = g->members; m; m = m->next) {
		if (!m->json) {
			json_t *o = member_json(m);
			m->json = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
			json_decref(o);
			if (!m->json)
				goto out;
			m->json_len = strlen(m->json);
		}
		mlen += m->json_len + 1;
	}
	head = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
	tail = json_dumps(offs, JSON_COMPACT);
	if (!head || !tail)
		goto out;
	size_t hlen = strlen(head), tlen = strlen(tail);
	static const char k_members[] = ",\"members\":[", k_offsets[] = "],\"offsets\":";
	size_t total = hlen - 1 + sizeof(k_members) - 1 + mlen + sizeof(k_offsets) - 1 + tlen + 2;
	if (hlen < 2 || head[hlen - 1] != '}' || !(out = malloc(total)))
		goto out;
	char *p = out;
	memcpy(p, head, hlen - 1); /* the header object without its closing brace */
	p += hlen - 1;
	memcpy(p, k_members, sizeof(k_members) - 1);
	p += sizeof(k_members) - 1;
	for (const kg_member *m = g->members; m; m = m->next) {
		if (m != g->members)
			*p++ = ',';
		memcpy(p, m->json, m->json_len);
		p += m->json_len;
	}
	memcpy(p, k_offsets, sizeof(k_offsets) - 1);
	p += sizeof(k_offsets) - 1;
	memcpy(p, tail, tlen);
	p += tlen;
	*p++ = '}';
	*p = '\0';
out:
	free(head);
	free(tail);
	json_decref(offs);
	json_decref(doc);
	return out;
}

/* ---- reading ---------------------------------------------------------------------------- */

void kg__loaded_free(kg_loaded *l)
{
	for (size_t i = 0; i < l->noffs; i++)
		kg__offset_free(&l->offs[i]);
	free(l->offs);
	l->offs = NULL;
	l->noffs = 0;
	kg__str_free(&l->protocol_type);
	kg__str_free(&l->protocol);
	kg__str_free(&l->leader);
	while (l->members) {
		kg_member *m = l->members;
		l->members = m->next;
		kg__member_free(m);
	}
	l->nmembers = 0;
}

static int cmp_offset(const void *a, const void *b)
{
	const kg_offset *x = a, *y = b;
	int32_t n = x->topic.len < y->topic.len ? x->topic.len : y->topic.len;
	int c = n > 0 ? memcmp(x->topic.s, y->topic.s, (size_t)n) : 0;
	if (c)
		return c;
	if (x->topic.len != y->topic.len)
		return x->topic.len < y->topic.len ? -1 : 1;
	return x->partition < y->partition ? -1 : x->partition > y->partition;
}

/* A failed check: remember which field, refuse the file. */
#define BAD(what_)                    \
	do {                          \
		*why = (what_);       \
		rc = -EBADMSG;        \
		goto out;             \
	} while (0)
/* A reader that may fail with ENOMEM as well as EBADMSG. */
#define GET(call_, what_)                 \
	do {                              \
		rc = (call_);             \
		if (rc == -EBADMSG)       \
			BAD(what_);       \
		if (rc)                   \
			goto out;         \
	} while (0)
#define GET_STR(j_, nullable_, dst_, what_) GET(jget_str((j_), (nullable_), (dst_)), (what_))
#define GET_HEX(j_, p_, len_, what_) GET(jget_hex((j_), (p_), (len_)), (what_))

static int member_supports_name(const kg_member *m, const kg_str *name)
{
	for (int32_t i = 0; i < m->nprotos; i++)
		if (kg__str_eq(&m->protos[i].name, name))
			return 1;
	return 0;
}

/* One entry of "members" into a new kg_member (*out). */
static int parse_member(json_t *o, kg_member **out, const char **why)
{
	int rc = 0;
	int64_t x;
	kg_member *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->id.len = m->instance_id.len = m->client_id.len = m->client_host.len = -1;
	if (!json_is_object(o))
		BAD("members[] is not an object");
	GET_STR(json_object_get(o, "member_id"), 0, &m->id, "members[].member_id");
	if (m->id.len <= 0)
		BAD("members[].member_id is empty");
	GET_STR(json_object_get(o, "group_instance_id"), 1, &m->instance_id,
		"members[].group_instance_id");
	GET_STR(json_object_get(o, "client_id"), 0, &m->client_id, "members[].client_id");
	GET_STR(json_object_get(o, "client_host"), 0, &m->client_host, "members[].client_host");
	if (jget_int(o, "session_timeout_ms", 1, INT32_MAX, &x))
		BAD("members[].session_timeout_ms");
	m->session_timeout_ms = (int32_t)x;
	if (jget_int(o, "rebalance_timeout_ms", 1, INT32_MAX, &x))
		BAD("members[].rebalance_timeout_ms");
	m->rebalance_timeout_ms = (int32_t)x;
	json_t *ps = json_object_get(o, "protocols");
	if (!ps || !json_is_array(ps) || json_array_size(ps) == 0)
		BAD("members[].protocols (a non-empty array)");
	size_t np = json_array_size(ps);
	if (np > INT32_MAX / 2)
		BAD("members[].protocols (too many)");
	m->protos = calloc(np, sizeof(*m->protos));
	if (!m->protos) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < np; i++) {
		json_t *p = json_array_get(ps, i);
		kg_proto *kp = &m->protos[i];
		kp->name.len = -1;
		m->nprotos = (int32_t)i + 1;
		if (!json_is_object(p))
			BAD("members[].protocols[] is not an object");
		GET_STR(json_object_get(p, "name"), 0, &kp->name, "members[].protocols[].name");
		GET_HEX(json_object_get(p, "metadata"), &kp->meta, &kp->meta_len,
			"members[].protocols[].metadata (hex)");
		for (size_t k = 0; k < i; k++)
			if (kg__str_eq(&m->protos[k].name, &kp->name))
				BAD("members[].protocols[].name (twice)");
	}
	GET_HEX(json_object_get(o, "assignment"), &m->assignment, &m->assignment_len,
		"members[].assignment (hex)");
	if (m->assignment_len == 0) {
		free(m->assignment);
		m->assignment = NULL;
	}
	*out = m;
	return 0;
out:
	kg__member_free(m);
	return rc;
}

/* Version 2: state, protocol, leader, members — all checked together, so a
 * group is only ever restored into a state the coordinator could be in. */
static int parse_membership(json_t *doc, kg_loaded *out, const char **why)
{
	int rc = 0;
	json_t *st = json_object_get(doc, "state");
	const char *sv = st && json_is_string(st) ? json_string_value(st) : "";
	if (strcmp(sv, "Empty") == 0)
		out->state = KC_EMPTY;
	else if (strcmp(sv, "Stable") == 0)
		out->state = KC_STABLE;
	else if (strcmp(sv, "PreparingRebalance") == 0)
		out->state = KC_PREPARING;
	else
		BAD("state (Empty, Stable or PreparingRebalance)");
	GET_STR(json_object_get(doc, "protocol"), 1, &out->protocol, "protocol");
	GET_STR(json_object_get(doc, "leader"), 1, &out->leader, "leader");
	json_t *arr = json_object_get(doc, "members");
	if (!arr || !json_is_array(arr))
		BAD("members (an array)");
	size_t n = json_array_size(arr);
	if (n > INT32_MAX)
		BAD("members (too many)");
	kg_member **tail = &out->members;
	for (size_t i = 0; i < n; i++) {
		kg_member *m = NULL;
		if ((rc = parse_member(json_array_get(arr, i), &m, why)))
			goto out;
		for (kg_member *o = out->members; o; o = o->next) {
			if (kg__str_eq(&o->id, &m->id) ||
			    (m->instance_id.len >= 0 && kg__str_eq(&o->instance_id, &m->instance_id))) {
				kg__member_free(m);
				BAD("members[]: a member id or group instance id twice");
			}
		}
		*tail = m;
		tail = &m->next;
		out->nmembers++;
	}
	if (out->state == KC_EMPTY) {
		if (out->nmembers)
			BAD("state Empty with members");
		goto out;
	}
	if (!out->nmembers)
		BAD("state with members but no members");
	if (out->protocol_type.len <= 0)
		BAD("protocol_type (a group with members has one)");
	int leader_found = out->leader.len < 0;
	for (kg_member *m = out->members; m; m = m->next)
		leader_found |= kg__str_eq(&m->id, &out->leader);
	if (!leader_found)
		BAD("leader (not a member)");
	if (out->state == KC_STABLE) {
		if (out->protocol.len < 0 || out->leader.len < 0)
			BAD("protocol and leader (a Stable group has both)");
		for (kg_member *m = out->members; m; m = m->next)
			if (!member_supports_name(m, &out->protocol))
				BAD("protocol (a member does not support it)");
	}
out:
	return rc;
}

int kg__group_file_parse(const char *buf, size_t len, kg_str *id_out, kg_loaded *out,
			const char **why)
{
	json_error_t jerr;
	const char *why_local = NULL;
	if (!why)
		why = &why_local;
	*why = NULL;
	*out = (kg_loaded)KC_LOADED_INIT;
	json_t *doc = json_loadb(buf, len, JSON_ALLOW_NUL, &jerr);
	int rc = 0;
	int64_t ver, x;
	if (!doc || !json_is_object(doc))
		BAD("not a JSON object");
	if (jget_int(doc, "version", 1, INT32_MAX, &ver) || ver < 1 || ver > KC_GROUP_FILE_VERSION)
		BAD("version (1 or 2)");
	GET_STR(json_object_get(doc, "group_id"), 0, id_out, "group_id");
	if (jget_int(doc, "coordinator_epoch", 0, INT64_MAX, &out->coordinator_epoch))
		BAD("coordinator_epoch");
	if (jget_int(doc, "generation", 0, INT32_MAX, &x))
		BAD("generation");
	out->generation = (int32_t)x;
	json_t *pt = json_object_get(doc, "protocol_type");
	if (pt)
		GET_STR(pt, 1, &out->protocol_type, "protocol_type");
	json_t *arr = json_object_get(doc, "offsets");
	if (!arr || !json_is_array(arr))
		BAD("offsets (an array)");
	size_t n = json_array_size(arr);
	out->offs = calloc(n + 1, sizeof(*out->offs));
	if (!out->offs) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(arr, i);
		kg_offset *e = &out->offs[i];
		e->topic.len = e->metadata.len = -1;
		out->noffs = i + 1;
		if (!json_is_object(o))
			BAD("offsets[] is not an object");
		GET_STR(json_object_get(o, "topic"), 0, &e->topic, "offsets[].topic");
		GET_STR(json_object_get(o, "metadata"), 1, &e->metadata, "offsets[].metadata");
		if (jget_int(o, "partition", 0, INT32_MAX, &x))
			BAD("offsets[].partition");
		e->partition = (int32_t)x;
		if (jget_int(o, "offset", INT64_MIN, INT64_MAX, &e->offset))
			BAD("offsets[].offset");
		if (jget_int(o, "leader_epoch", INT32_MIN, INT32_MAX, &x))
			BAD("offsets[].leader_epoch");
		e->leader_epoch = (int32_t)x;
		if (jget_int(o, "commit_ms", INT64_MIN, INT64_MAX, &e->commit_ms))
			BAD("offsets[].commit_ms");
	}
	qsort(out->offs, out->noffs, sizeof(*out->offs), cmp_offset);
	for (size_t i = 1; i < out->noffs; i++)
		if (cmp_offset(&out->offs[i - 1], &out->offs[i]) == 0)
			BAD("offsets[]: a partition twice");
	out->state = KC_EMPTY;
	if (ver >= 2)
		rc = parse_membership(doc, out, why);
out:
	json_decref(doc);
	if (rc) {
		kg__loaded_free(out);
		kg__str_free(id_out);
	}
	return rc;
}

/* The names in groups/ that may be files of the group with file-name stem
 * `stem`, with their epochs (the legacy name: 0), newest first.  A name
 * "<stem>.<10 digits>.json" may also be the legacy file of another group
 * whose id ends in ".<10 digits>": the contents decide. */
typedef struct kg_cand {
	char name[KC_GNAME_MAX + 64];
	int64_t epoch;
} kg_cand;

static int cmp_cand(const void *a, const void *b)
{
	const kg_cand *x = a, *y = b;
	return (x->epoch < y->epoch) - (x->epoch > y->epoch);
}

static int candidates(kg_coord *c, const char *stem, kg_cand **out, size_t *nout)
{
	char **names = NULL;
	size_t n = 0, k = 0;
	*out = NULL;
	*nout = 0;
	int rc = sub_list(c->vfs, "groups", &names, &n);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	kg_cand *v = calloc(n + 1, sizeof(*v));
	if (!v) {
		sub_names_free(names, n);
		return -ENOMEM;
	}
	size_t slen = strlen(stem);
	for (size_t i = 0; i < n; i++) {
		char fstem[KC_GNAME_MAX + 64];
		int64_t e;
		if (strlen(names[i]) >= sizeof(v[k].name) ||
		    kg__group_fname_parse(names[i], fstem, sizeof(fstem), &e))
			continue;
		if (e >= 0 && strcmp(fstem, stem) == 0) {
			v[k].epoch = e;
		} else if (strncmp(names[i], stem, slen) == 0 && strcmp(names[i] + slen, ".json") == 0) {
			v[k].epoch = 0; /* the legacy name */
		} else {
			continue;
		}
		strcpy(v[k].name, names[i]);
		k++;
	}
	sub_names_free(names, n);
	qsort(v, k, sizeof(*v), cmp_cand);
	*out = v;
	*nout = k;
	return 0;
}

/* Reads and parses groups/<name>; -ENOTUNIQ when it names another group. */
static int read_one(kg_coord *c, kw_str id, const char *name, int64_t name_epoch, kg_loaded *out)
{
	char path[SUB_PATH_MAX];
	char *buf = NULL;
	size_t len = 0;
	snprintf(path, sizeof(path), "groups/%s", name);
	int rc = sub_read_file(c->vfs, path, KC_GROUP_FILE_MAX, &buf, &len);
	if (rc)
		return rc;
	kg_str fid = KC_STR_NULL;
	const char *why = NULL;
	rc = kg__group_file_parse(buf, len, &fid, out, &why);
	if (rc == 0 && !kg__str_eqk(&fid, id)) {
		kg__loaded_free(out);
		rc = -ENOTUNIQ;
	} else if (rc == 0 && name_epoch > 0 && out->coordinator_epoch != name_epoch) {
		kg__loaded_free(out);
		why = "coordinator_epoch (not the epoch in the file's name)";
		rc = -EBADMSG;
	}
	if (rc == -EBADMSG)
		KLOG_ERR("coord", "%s is not a group file this kaas can read (%s); the group is not "
				  "served until it is fixed or removed", path, why ? why : "?");
	kg__str_free(&fid);
	free(buf);
	return rc;
}

int kg__group_file_read(kg_coord *c, kw_str id, kg_loaded *out, int64_t *epoch)
{
	char stem[KC_GNAME_MAX + 64];
	if (id.len < 0)
		return -EINVAL;
	int rc = kg__gname_encode(id.s, (size_t)id.len, stem, sizeof(stem));
	if (rc < 0)
		return rc;
	/* A file that vanishes between the listing and the read was pruned
	 * by a newer owner: list again rather than fall back to an older one. */
	for (int attempt = 0; attempt < 3; attempt++) {
		kg_cand *v = NULL;
		size_t n = 0;
		if ((rc = candidates(c, stem, &v, &n))) {
			free(v);
			return rc;
		}
		rc = -ENOENT;
		int foreign = 0, vanished = 0;
		for (size_t i = 0; i < n; i++) {
			/* A legacy-named file is epoch 0 by name; its contents may
			 * still say otherwise (a newer coordinator's, refused). */
			int legacy = v[i].epoch == 0;
			rc = read_one(c, id, v[i].name, v[i].epoch, out);
			if (rc == -ENOTUNIQ) {
				foreign++; /* another group's legacy file (or a hash collision) */
				rc = -ENOENT;
				continue;
			}
			if (rc == -ENOENT) {
				vanished = 1;
				break;
			}
			if (rc == 0)
				*epoch = legacy ? out->coordinator_epoch : v[i].epoch;
			break;
		}
		free(v);
		if (vanished)
			continue;
		if (rc == -ENOENT && foreign && strchr(stem, '~'))
			rc = -ENOTUNIQ; /* a long id's name taken by another: a hash collision */
		return rc;
	}
	return -EAGAIN;
}

int kg__group_files_prune(kg_coord *c, kw_str id, int64_t below)
{
	char stem[KC_GNAME_MAX + 64];
	kg_cand *v = NULL;
	size_t n = 0;
	int removed = 0;
	int rc = kg__gname_encode(id.s, (size_t)id.len, stem, sizeof(stem));
	if (rc < 0)
		return rc;
	if ((rc = candidates(c, stem, &v, &n)))
		goto out;
	for (size_t i = 0; i < n; i++) {
		kg_loaded l = KC_LOADED_INIT;
		if (v[i].epoch >= below)
			continue; /* never a file of the epoch being served, or above */
		/* Only files that name this group: a legacy "<id>.<digits>.json"
		 * of another group looks like one of ours by name. */
		int r = read_one(c, id, v[i].name, v[i].epoch, &l);
		kg__loaded_free(&l);
		if (r)
			continue; /* not known to be ours (unreadable, another group's): kept */
		char path[SUB_PATH_MAX];
		snprintf(path, sizeof(path), "groups/%s", v[i].name);
		r = sub_unlink(c->vfs, path);
		if (r == 0)
			removed++;
		else if (r != -ENOENT)
			KLOG_WARN("coord", "cannot remove %s (an older coordinator epoch's): %s", path,
				  sub_strerror(r));
	}
	rc = removed;
out:
	free(v);
	return rc;
}
