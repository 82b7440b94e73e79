/*
 * manifest.c — manifest.json: {"version", "topic_id", "epoch",
 * "high_watermark", "log_start_offset"}.  Written whole with
 * sub_write_atomic; read as a hint that recovery reconciles with the log.
 * A file another host wrote is outside input: every field is checked, and
 * an unreadable manifest is treated as absent rather than trusted.
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
	char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!s)
		return -ENOMEM;
	*out = s;
	*len = strlen(s);
	return 0;
}
