/*
 * groupfile.c — CLUSTER/groups/<group>.json: a group's committed offsets as
 * one JSON document, replaced whole with sub_write_atomic (docs/formats.md).
 *
 *   {"version": 1, "group_id": "...", "coordinator_epoch": 0,
 *    "writer": <broker id>, "written_ms": <wall ms>, "generation": N,
 *    "protocol_type": "consumer" | null,
 *    "offsets": [{"topic": "...", "partition": P, "offset": O,
 *                 "leader_epoch": E, "metadata": "...", "commit_ms": T}, ...]}
 *
 * Strings from clients (group id, topic, metadata) that are not valid UTF-8
 * are stored as {"hex": "<bytes in hex>"} so that nothing a client sends can
 * make the file unwritable or change its meaning.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord/coord_int.h"
#include "util/log.h"

#define KC_GROUP_FILE_VERSION 1
#define KC_GROUP_FILE_MAX (256u << 20)

int kc_group_path(kaas_str id, char *path, size_t len)
{
	char stem[KC_GNAME_MAX + 64];
	if (id.len < 0)
		return -EINVAL;
	int rc = kc_gname_encode(id.s, (size_t)id.len, stem, sizeof(stem));
	if (rc < 0)
		return rc;
	int n = snprintf(path, len, "groups/%s.json", stem);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- strings ----------------------------------------------------------------------- */

static json_t *jstr(const char *s, int32_t len)
{
	if (len < 0)
		return json_null();
	json_t *j = json_stringn(s ? s : "", (size_t)len);
	if (j)
		return j;
	/* Not UTF-8: keep the exact bytes. */
	static const char hex[] = "0123456789abcdef";
	char *h = malloc((size_t)len * 2 + 1);
	if (!h)
		return NULL;
	for (int32_t i = 0; i < len; i++) {
		h[2 * i] = hex[(unsigned char)s[i] >> 4];
		h[2 * i + 1] = hex[(unsigned char)s[i] & 15];
	}
	h[2 * len] = '\0';
	j = json_pack("{s:s}", "hex", h);
	free(h);
	return j;
}

static int unhex(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* A string as written by jstr(); null allowed only when nullable. */
static int jget_str(json_t *j, int nullable, kc_str *out)
{
	if (!j)
		return -EBADMSG;
	if (json_is_null(j))
		return nullable ? kc_str_set(out, NULL, -1) : -EBADMSG;
	if (json_is_string(j)) {
		size_t n = json_string_length(j);
		if (n > INT32_MAX)
			return -EBADMSG;
		return kc_str_set(out, json_string_value(j), (int32_t)n);
	}
	json_t *h = json_is_object(j) ? json_object_get(j, "hex") : NULL;
	if (!h || !json_is_string(h))
		return -EBADMSG;
	const char *hs = json_string_value(h);
	size_t hn = json_string_length(h);
	if (hn % 2 || hn / 2 > INT32_MAX)
		return -EBADMSG;
	char *b = malloc(hn / 2 + 1);
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < hn / 2; i++) {
		int hi = unhex(hs[2 * i]), lo = unhex(hs[2 * i + 1]);
		if (hi < 0 || lo < 0) {
			free(b);
			return -EBADMSG;
		}
		b[i] = (char)(hi << 4 | lo);
	}
	int rc = kc_str_set(out, b, (int32_t)(hn / 2));
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

char *kc_group_serialize_view(kaas_coord *c, kc_group *g, const kc_offset *v, size_t n)
{
	char *out = NULL;
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
	if (json_object_set_new(doc, "version", json_integer(KC_GROUP_FILE_VERSION)) ||
	    json_object_set_new(doc, "group_id", jstr(g->id.s, g->id.len)) ||
	    json_object_set_new(doc, "coordinator_epoch", json_integer(c->cfg.coordinator_epoch)) ||
	    json_object_set_new(doc, "writer", json_integer(c->cfg.broker_id)) ||
	    json_object_set_new(doc, "written_ms", json_integer(kc_wall(c))) ||
	    json_object_set_new(doc, "generation", json_integer(g->generation)) ||
	    json_object_set_new(doc, "protocol_type", jstr(g->protocol_type.s, g->protocol_type.len)))
		goto out;
	if (json_object_set(doc, "offsets", offs))
		goto out;
	out = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
out:
	json_decref(offs);
	json_decref(doc);
	return out;
}

/* ---- reading ---------------------------------------------------------------------------- */

void kc_loaded_free(kc_loaded *l)
{
	for (size_t i = 0; i < l->noffs; i++)
		kc_offset_free(&l->offs[i]);
	free(l->offs);
	l->offs = NULL;
	l->noffs = 0;
	kc_str_free(&l->protocol_type);
}

static int cmp_offset(const void *a, const void *b)
{
	const kc_offset *x = a, *y = b;
	int32_t n = x->topic.len < y->topic.len ? x->topic.len : y->topic.len;
	int c = n > 0 ? memcmp(x->topic.s, y->topic.s, (size_t)n) : 0;
	if (c)
		return c;
	if (x->topic.len != y->topic.len)
		return x->topic.len < y->topic.len ? -1 : 1;
	return x->partition < y->partition ? -1 : x->partition > y->partition;
}

int kc_group_file_parse(const char *buf, size_t len, kc_str *id_out, kc_loaded *out)
{
	json_error_t jerr;
	json_t *doc = json_loadb(buf, len, JSON_ALLOW_NUL, &jerr);
	int rc = -EBADMSG;
	int64_t ver, x;
	if (!doc || !json_is_object(doc))
		goto out;
	if (jget_int(doc, "version", 1, INT32_MAX, &ver) || ver != KC_GROUP_FILE_VERSION)
		goto out;
	if ((rc = jget_str(json_object_get(doc, "group_id"), 0, id_out)))
		goto out;
	rc = -EBADMSG;
	if (jget_int(doc, "coordinator_epoch", 0, INT64_MAX, &out->coordinator_epoch))
		goto out;
	if (jget_int(doc, "generation", 0, INT32_MAX, &x))
		goto out;
	out->generation = (int32_t)x;
	json_t *pt = json_object_get(doc, "protocol_type");
	if (pt && (rc = jget_str(pt, 1, &out->protocol_type)))
		goto out;
	rc = -EBADMSG;
	json_t *arr = json_object_get(doc, "offsets");
	if (!arr || !json_is_array(arr))
		goto out;
	size_t n = json_array_size(arr);
	out->offs = calloc(n + 1, sizeof(*out->offs));
	if (!out->offs) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(arr, i);
		kc_offset *e = &out->offs[i];
		e->topic.len = e->metadata.len = -1;
		out->noffs = i + 1;
		if (!json_is_object(o))
			goto out;
		if ((rc = jget_str(json_object_get(o, "topic"), 0, &e->topic)) ||
		    (rc = jget_str(json_object_get(o, "metadata"), 1, &e->metadata)))
			goto out;
		rc = -EBADMSG;
		if (jget_int(o, "partition", 0, INT32_MAX, &x))
			goto out;
		e->partition = (int32_t)x;
		if (jget_int(o, "offset", INT64_MIN, INT64_MAX, &e->offset))
			goto out;
		if (jget_int(o, "leader_epoch", INT32_MIN, INT32_MAX, &x))
			goto out;
		e->leader_epoch = (int32_t)x;
		if (jget_int(o, "commit_ms", INT64_MIN, INT64_MAX, &e->commit_ms))
			goto out;
	}
	qsort(out->offs, out->noffs, sizeof(*out->offs), cmp_offset);
	for (size_t i = 1; i < out->noffs; i++)
		if (cmp_offset(&out->offs[i - 1], &out->offs[i]) == 0)
			goto out; /* the same partition twice: not ours */
	rc = 0;
out:
	json_decref(doc);
	if (rc) {
		kc_loaded_free(out);
		kc_str_free(id_out);
	}
	return rc;
}

int kc_group_file_read(kaas_coord *c, kaas_str id, kc_loaded *out)
{
	char path[SUB_PATH_MAX];
	char *buf = NULL;
	size_t len = 0;
	int rc = kc_group_path(id, path, sizeof(path));
	if (rc)
		return rc;
	rc = sub_read_file(c->vfs, path, KC_GROUP_FILE_MAX, &buf, &len);
	if (rc)
		return rc;
	kc_str fid = KC_STR_NULL;
	rc = kc_group_file_parse(buf, len, &fid, out);
	if (rc == -EBADMSG)
		KLOG_ERR("coord", "%s is not a group file this kaas can read; the group is not "
				  "served until it is fixed or removed", path);
	if (rc == 0 && !kc_str_eqk(&fid, id)) {
		kc_loaded_free(out);
		rc = -ENOTUNIQ;
	}
	kc_str_free(&fid);
	free(buf);
	return rc;
}
