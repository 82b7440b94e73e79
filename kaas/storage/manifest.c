/*
 * manifest.c — manifest.json: {"version", "topic_id", "epoch",
 * "high_watermark", "log_start_offset"} and, in the final manifest of a
 * relinquish, "relinquished": {"epoch", "end_offset", "segment_base",
 * "segment_bytes"}.  Written whole with sub_write_atomic; read as a hint
 * that recovery reconciles with the log.  A file another host wrote is
 * outside input: every field is checked, an unreadable manifest is treated
 * as absent rather than trusted, and a relinquish record that does not
 * check out is ignored (the successor scans).
 */
#include "kaas/storage/storage_int.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"

#define MANIFEST_MAX 65536

static int get_i64(json_t *o, const char *k, int64_t min, int64_t *v)
{
	json_t *x = json_object_get(o, k);
	if (!json_is_integer(x))
		return -1;
	json_int_t n = json_integer_value(x);
	if (n < min)
		return -1;
	*v = (int64_t)n;
	return 0;
}

/* The relinquish record: every field present and possible, and naming the
 * manifest's own epoch and high watermark (its writer set both). */
static const char *rel_parse(json_t *r, kmanifest *m)
{
	int64_t epoch, end, base, bytes;
	if (!json_is_object(r))
		return "not an object";
	if (get_i64(r, "epoch", 0, &epoch) || epoch > INT32_MAX)
		return "bad epoch";
	if (epoch != m->epoch)
		return "its epoch is not the manifest's";
	if (get_i64(r, "end_offset", 0, &end) || end > KB_OFFSET_MAX)
		return "bad end_offset";
	if (end != m->hw)
		return "end_offset is not the manifest's high_watermark";
	if (get_i64(r, "segment_base", 0, &base) || base > end)
		return "bad segment_base (beyond end_offset)";
	if (get_i64(r, "segment_bytes", 0, &bytes) || bytes > INT64_MAX / 2 || (bytes == 0) != (base == end))
		return "bad segment_bytes";
	m->rel = 1;
	m->rel_epoch = (int32_t)epoch;
	m->rel_end = end;
	m->rel_seg_base = base;
	m->rel_seg_bytes = bytes;
	return NULL;
}

int ks__manifest_read(sub_vfs *vfs, const char *dir, kmanifest *m)
{
	char path[SUB_PATH_MAX], *buf = NULL;
	size_t len;
	memset(m, 0, sizeof(*m));
	int rc = sub_join(path, sizeof(path), dir, MANIFEST_NAME);
	if (rc)
		return rc;
	rc = sub_read_file(vfs, path, MANIFEST_MAX, &buf, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc == -EFBIG) {
		KLOG_WARN("storage", "%s: larger than %d bytes, ignored", path, MANIFEST_MAX);
		return 0;
	}
	if (rc)
		return rc;
	json_error_t jerr;
	json_t *o = json_loadb(buf, len, 0, &jerr);
	free(buf);
	int64_t version, epoch, hw, lso;
	const char *why = NULL;
	if (!json_is_object(o))
		why = len ? "not a JSON object" : "empty (a write was interrupted)";
	else if (get_i64(o, "version", 1, &version) || version != 1)
		why = "unknown version";
	else if (get_i64(o, "epoch", 0, &epoch) || epoch > INT32_MAX)
		why = "bad epoch";
	else if (get_i64(o, "high_watermark", 0, &hw) || hw > KB_OFFSET_MAX)
		why = "bad high_watermark";
	else if (get_i64(o, "log_start_offset", 0, &lso) || lso > hw)
		why = "bad log_start_offset (negative or beyond high_watermark)";
	if (!why) {
		json_t *t = json_object_get(o, "topic_id");
		if (json_is_string(t) && json_string_length(t) < sizeof(m->topic_id))
			strcpy(m->topic_id, json_string_value(t));
		else if (t && !json_is_null(t))
			why = "bad topic_id";
	}
	if (why) {
		KLOG_WARN("storage", "%s: %s; recovering from the log alone", path, why);
		memset(m, 0, sizeof(*m));
	} else {
		m->valid = 1;
		m->epoch = (int32_t)epoch;
		m->hw = hw;
		m->log_start = lso;
		json_t *r = json_object_get(o, "relinquished");
		const char *rwhy = r && !json_is_null(r) ? rel_parse(r, m) : NULL;
		if (rwhy) {
			KLOG_WARN("storage", "%s: relinquish record ignored (%s); the next take-over scans the tail",
				  path, rwhy);
			m->rel = 0;
		}
	}
	json_decref(o);
	return 0;
}

int ks__manifest_encode(const kmanifest *m, char **out, size_t *len)
{
	json_t *o = json_pack("{s:i, s:o, s:I, s:I, s:I}", "version", 1, "topic_id",
			      m->topic_id[0] ? json_string(m->topic_id) : json_null(), "epoch",
			      (json_int_t)m->epoch, "high_watermark", (json_int_t)m->hw,
			      "log_start_offset", (json_int_t)m->log_start);
	if (!o)
		return -ENOMEM;
	if (m->rel) {
		json_t *r = json_pack("{s:I, s:I, s:I, s:I}", "epoch", (json_int_t)m->rel_epoch, "end_offset",
				      (json_int_t)m->rel_end, "segment_base", (json_int_t)m->rel_seg_base,
				      "segment_bytes", (json_int_t)m->rel_seg_bytes);
		if (!r || json_object_set_new(o, "relinquished", r)) {
			json_decref(o);
			return -ENOMEM;
		}
	}
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!s)
		return -ENOMEM;
	*out = s;
	*len = strlen(s);
	return 0;
}

/* ---- clean.json ---------------------------------------------------------------
 * {"version":1,"epoch":E,"generation":G,"clean_end":X,"dirty":D,
 *  "segments":[[epoch,base],...]}: written whole by the cleaner with
 * sub_write_atomic (the swap), read by every listing.  Checked like the
 * manifest; unlike it, an unreadable one is not treated as absent: the
 * plain segments it replaced may be gone, so nothing cleaned is touched
 * until an operator looks (docs/storage.md, "Compaction"). */

void ks__clean_free(kclean *c)
{
	free(c->v);
	memset(c, 0, sizeof(*c));
}

long ks__clean_find(const kclean *c, int64_t off)
{
	if (c->state != 1 || c->n == 0 || off >= c->clean_end || off < c->v[0].base)
		return -1;
	size_t lo = 0, hi = c->n;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->v[mid].base <= off)
			lo = mid;
		else
			hi = mid;
	}
	return (long)lo;
}

static const char *clean_parse(json_t *o, kclean *c)
{
	int64_t version, epoch;
	if (!json_is_object(o))
		return "not a JSON object";
	if (get_i64(o, "version", 1, &version) || version != 1)
		return "unknown version";
	if (get_i64(o, "epoch", 0, &epoch) || epoch > INT32_MAX)
		return "bad epoch";
	c->epoch = (int32_t)epoch;
	if (get_i64(o, "generation", 1, &c->gen) || CLEAN_GEN_EPOCH(c->gen) > c->epoch)
		return "bad generation (beyond its writer's epoch)";
	if (get_i64(o, "clean_end", 0, &c->clean_end) || c->clean_end > KB_OFFSET_MAX)
		return "bad clean_end";
	if (get_i64(o, "dirty", 0, &c->dirty) || c->dirty > c->clean_end)
		return "bad dirty (beyond clean_end)";
	json_t *a = json_object_get(o, "segments");
	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > 1000000)
		return "bad segments";
	c->n = json_array_size(a);
	if (!(c->v = calloc(c->n, sizeof(c->v[0]))))
		return "out of memory";
	for (size_t i = 0; i < c->n; i++) {
		json_t *e = json_array_get(a, i);
		json_t *je = json_array_get(e, 0), *jb = json_array_get(e, 1);
		if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_integer(je) || !json_is_integer(jb))
			return "bad segment entry";
		json_int_t ep = json_integer_value(je), b = json_integer_value(jb);
		if (ep < 0 || ep > c->epoch || b < 0 || b >= c->clean_end)
			return "segment entry out of range";
		if (i && (b <= c->v[i - 1].base || ep < c->v[i - 1].epoch))
			return "segment entries out of order";
		c->v[i].epoch = (int32_t)ep;
		c->v[i].base = (int64_t)b;
	}
	json_t *tm = json_object_get(o, "tombstones_since");
	c->tomb_ms = -1;
	if (tm && (!json_is_integer(tm) || json_integer_value(tm) < -1))
		return "bad tombstones_since";
	if (tm)
		c->tomb_ms = json_integer_value(tm);
	json_t *h = json_object_get(o, "cleaned_at");
	if (h && (!json_is_array(h) || json_array_size(h) > CLEAN_HIST_MAX))
		return "bad cleaned_at";
	for (size_t i = 0; h && i < json_array_size(h); i++) {
		json_t *e = json_array_get(h, i);
		json_t *jo = json_array_get(e, 0), *jm = json_array_get(e, 1);
		if (!json_is_array(e) || !json_is_integer(jo) || !json_is_integer(jm))
			return "bad cleaned_at entry";
		kclean_at a = {json_integer_value(jo), json_integer_value(jm)};
		if (a.off < 0 || a.off > c->dirty || a.ms < 0 ||
		    (i && (a.off <= c->hist[i - 1].off || a.ms < c->hist[i - 1].ms)))
			return "cleaned_at entries out of range or order";
		c->hist[c->nhist++] = a;
	}
	return NULL;
}

int ks__clean_read(sub_vfs *vfs, const char *dir, kclean *c)
{
	char path[SUB_PATH_MAX], *buf = NULL;
	size_t len;
	ks__clean_free(c);
	int rc = sub_join(path, sizeof(path), dir, CLEAN_NAME);
	if (rc)
		return rc;
	rc = sub_read_file(vfs, path, 64u << 20, &buf, &len);
	if (rc == -ENOENT)
		return 0;
	if (rc && rc != -EFBIG)
		return rc;
	const char *why = rc ? "too large" : NULL;
	json_t *o = NULL;
	if (!why) {
		json_error_t jerr;
		o = json_loadb(buf, len, 0, &jerr);
		why = clean_parse(o, c);
	}
	free(buf);
	json_decref(o);
	if (why) {
		KLOG_ERR("storage", "%s: %s: cleaned segments are not used and nothing the cleaner wrote "
			 "or replaced is removed until this is repaired", path, why);
		ks__clean_free(c);
		c->state = -1;
		return 0;
	}
	c->state = 1;
	return 0;
}

int ks__clean_encode(const kclean *c, char **out, size_t *len)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < c->n; i++)
		if (json_array_append_new(a, json_pack("[I,I]", (json_int_t)c->v[i].epoch,
							(json_int_t)c->v[i].base)))
			break;
	json_t *h = json_array();
	for (size_t i = 0; h && i < c->nhist; i++)
		json_array_append_new(h, json_pack("[I,I]", (json_int_t)c->hist[i].off, (json_int_t)c->hist[i].ms));
	if (!a || !h) {
		json_decref(a);
		json_decref(h);
		return -ENOMEM;
	}
	/* "o" takes both references, also when packing fails. */
	json_t *o = json_pack("{s:i, s:I, s:I, s:I, s:I, s:o, s:o, s:I}", "version", 1, "epoch",
			      (json_int_t)c->epoch, "generation", (json_int_t)c->gen, "clean_end",
			      (json_int_t)c->clean_end, "dirty", (json_int_t)c->dirty, "segments", a, "cleaned_at", h,
			      "tombstones_since", (json_int_t)c->tomb_ms);
	if (!o)
		return -ENOMEM;
	if (json_array_size(h) != c->nhist) {
		json_decref(o);
		return -ENOMEM;
	}
	if (json_array_size(a) != c->n) {
		json_decref(o);
		return -ENOMEM;
	}
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!s)
		return -ENOMEM;
	*out = s;
	*len = strlen(s);
	return 0;
}
