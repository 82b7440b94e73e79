/*
 * dynkeys.c — the dynamic broker configs' key table (which settings can
 * change at run time, validated by the static config's own kb_config_set)
 * and the codec of their version files (docs/formats.md): names, JSON
 * encoding, and the validation of every field of a file that may come from
 * another host.  The store that uses them is dyncfg.c.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/config.h"
#include "kaas/core/dyncfg.h"
#include "kaas/core/dyncfg_int.h"
#include "util/clock.h"

static const char *const dyn_names[KB_DYN_COUNT] = {
	[KB_DYN_LOG_RETENTION_MS] = "log.retention.ms",
	[KB_DYN_LOG_RETENTION_BYTES] = "log.retention.bytes",
	[KB_DYN_LOG_SEGMENT_BYTES] = "log.segment.bytes",
	[KB_DYN_LOG_ROLL_MS] = "log.roll.ms",
	[KB_DYN_MESSAGE_MAX_BYTES] = "message.max.bytes",
	[KB_DYN_LOG_INDEX_INTERVAL_BYTES] = "log.index.interval.bytes",
	[KB_DYN_LOG_MESSAGE_TIMESTAMP_TYPE] = "log.message.timestamp.type",
	[KB_DYN_LOG_CLEANUP_POLICY] = "log.cleanup.policy",
	[KB_DYN_COMPRESSION_TYPE] = "compression.type",
	[KB_DYN_NUM_PARTITIONS] = "num.partitions",
	[KB_DYN_AUTO_CREATE_TOPICS_ENABLE] = "auto.create.topics.enable",
	[KB_DYN_MAX_CONNECTIONS] = "max.connections",
	[KB_DYN_MAX_CONNECTIONS_PER_IP] = "max.connections.per.ip",
};

/* ---- the key table ------------------------------------------------------------------------- */

const char *kb_dyn_name(int k)
{
	return k >= 0 && k < KB_DYN_COUNT ? dyn_names[k] : NULL;
}

int kb_dyn_index(const char *name, size_t len)
{
	for (int k = 0; k < KB_DYN_COUNT; k++)
		if (strlen(dyn_names[k]) == len && memcmp(dyn_names[k], name, len) == 0)
			return k;
	return -1;
}

static const kb_config_key *row_of(int k)
{
	for (const kb_config_key *r = kb_config_keys; r->key; r++)
		if (strcmp(r->key, dyn_names[k]) == 0)
			return r;
	return NULL; /* every dynamic key is a static one: test_dyncfg checks */
}

int64_t kb__dyn_field(const kb_config *c, int k)
{
	const kb_config_key *r = row_of(k);
	const char *p = (const char *)c + r->off;
	switch (r->type) {
	case KCFG_I16: return *(const int16_t *)p;
	case KCFG_I32: case KCFG_TSTYPE: case KCFG_CLEANUP: case KCFG_COMPRESSION: return *(const int32_t *)p;
	case KCFG_BOOL: return *(const int *)p != 0;
	default: return *(const int64_t *)p;
	}
}

static void format_value(int k, int64_t v, char canon[KB_DYN_VALUE_MAX])
{
	const kb_config_key *r = row_of(k);
	if (r->type == KCFG_BOOL)
		snprintf(canon, KB_DYN_VALUE_MAX, "%s", v ? "true" : "false");
	else if (r->type == KCFG_CLEANUP)
		snprintf(canon, KB_DYN_VALUE_MAX, "%s", v == KS_CLEANUP_COMPACT ? "compact"
							 : v == KS_CLEANUP_COMPACT_DELETE ? "compact,delete" : "delete");
	else if (r->type == KCFG_COMPRESSION)
		snprintf(canon, KB_DYN_VALUE_MAX, "%s",
			 v >= KS_COMPRESS_PRODUCER && v <= KS_COMPRESS_ZSTD ? kb_compression_names[v] : "producer");
	else if (r->type == KCFG_TSTYPE)
		snprintf(canon, KB_DYN_VALUE_MAX, "%s", v == 1 ? "LogAppendTime" : "CreateTime");
	else
		snprintf(canon, KB_DYN_VALUE_MAX, "%" PRId64, v);
}

void kb_dyn_format(int k, const kb_config *c, char canon[KB_DYN_VALUE_MAX])
{
	format_value(k, kb__dyn_field(c, k), canon);
}

int kb_dyn_check(int k, const char *value, size_t len, char canon[KB_DYN_VALUE_MAX], char *err, size_t errlen)
{
	if (k < 0 || k >= KB_DYN_COUNT) {
		snprintf(err, errlen, "not a dynamic config");
		return -EINVAL;
	}
	while (len && isspace((unsigned char)*value)) {
		value++;
		len--;
	}
	while (len && isspace((unsigned char)value[len - 1]))
		len--;
	char buf[KB_DYN_VALUE_MAX];
	if (len >= sizeof(buf)) {
		snprintf(err, errlen, "%s: invalid value (longer than %zu bytes)", dyn_names[k], sizeof(buf) - 1);
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)value[i] < 0x20 || (unsigned char)value[i] >= 0x7f) {
			snprintf(err, errlen, "%s: invalid value (control or non-ASCII bytes)", dyn_names[k]);
			return -EINVAL;
		}
	memcpy(buf, value, len);
	buf[len] = '\0';
	kb_config *scratch = malloc(sizeof(*scratch));
	if (!scratch) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	kb_config_defaults(scratch);
	int rc = kb_config_set(scratch, dyn_names[k], buf, err, errlen);
	if (rc == 0)
		kb_dyn_format(k, scratch, canon);
	free(scratch);
	return rc ? -EINVAL : 0;
}

/* ---- the version files ------------------------------------------------------------------------ */

void kb__dyn_entity_dir(char *dst, size_t len, int32_t entity)
{
	if (entity == KB_DYN_DEFAULT)
		snprintf(dst, len, DYN_DIR "/default");
	else
		snprintf(dst, len, DYN_DIR "/%" PRId32, entity);
}

void kb__dyn_entity_name(char *dst, size_t len, int32_t entity)
{
	if (entity == KB_DYN_DEFAULT)
		snprintf(dst, len, "default");
	else
		snprintf(dst, len, "%" PRId32, entity);
}

/* "<seq:020>.json" -> seq in 1..DYN_SEQ_MAX, else -1 (not a version name). */
int64_t kb__dyn_seq_of_name(const char *n)
{
	if (strlen(n) != DYN_SEQ_DIGITS + 5 || strcmp(n + DYN_SEQ_DIGITS, ".json") != 0)
		return -1;
	int64_t v = 0;
	for (int i = 0; i < DYN_SEQ_DIGITS; i++) {
		if (!isdigit((unsigned char)n[i]))
			return -1;
		if (v > DYN_SEQ_MAX / 10)
			return -1;
		v = v * 10 + (n[i] - '0');
	}
	return v >= 1 && v <= DYN_SEQ_MAX ? v : -1;
}

int kb__dyn_parse_full(const char *buf, size_t len, int32_t entity, int64_t seq, kb_dyn_set *s,
		      int32_t *writer, char nonce[NONCE_LEN + 1], char *why, size_t whylen)
{
	json_error_t jerr;
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	int rc = -EINVAL;
	kb_dyn_set t = {0};
	char ename[16];
	kb__dyn_entity_name(ename, sizeof(ename), entity);
	if (!root || !json_is_object(root)) {
		snprintf(why, whylen, "incomplete (%zu bytes, not a JSON object)", len);
		json_decref(root);
		return -EAGAIN;
	}
	const char *key;
	json_t *v;
	json_object_foreach(root, key, v)
	{
		if (strcmp(key, "version") && strcmp(key, "entity") && strcmp(key, "seq") && strcmp(key, "configs") &&
		    strcmp(key, "writer") && strcmp(key, "written_ms")) {
			snprintf(why, whylen, "unknown field %.40s", key);
			goto out;
		}
	}
	json_t *ver = json_object_get(root, "version"), *je = json_object_get(root, "entity");
	json_t *js = json_object_get(root, "seq"), *jc = json_object_get(root, "configs");
	json_t *jw = json_object_get(root, "writer"), *jt = json_object_get(root, "written_ms");
	if (!json_is_integer(ver)) {
		snprintf(why, whylen, "version missing or not an integer");
		goto out;
	}
	if (json_integer_value(ver) != DYN_FORMAT) {
		snprintf(why, whylen, "format version %" JSON_INTEGER_FORMAT " (this broker reads %d)",
			 json_integer_value(ver), DYN_FORMAT);
		goto out;
	}
	if (!json_is_string(je) || strcmp(json_string_value(je), ename) != 0) {
		snprintf(why, whylen, "entity field does not name its directory (%s)", ename);
		goto out;
	}
	if (!json_is_integer(js) || json_integer_value(js) != seq) {
		snprintf(why, whylen, "seq field does not match the file name (%" PRId64 ")", seq);
		goto out;
	}
	if (!json_is_integer(jt) || json_integer_value(jt) < 0) {
		snprintf(why, whylen, "written_ms missing or negative");
		goto out;
	}
	json_t *wb = json_object_get(jw, "broker"), *wn = json_object_get(jw, "nonce");
	if (!json_is_object(jw) || json_object_size(jw) != 2 || !json_is_integer(wb) ||
	    json_integer_value(wb) < 0 || json_integer_value(wb) > INT32_MAX || !json_is_string(wn) ||
	    json_string_length(wn) != NONCE_LEN || strspn(json_string_value(wn), "0123456789abcdef") != NONCE_LEN) {
		snprintf(why, whylen, "writer is not {broker: id, nonce: 16 hex digits}");
		goto out;
	}
	if (!json_is_object(jc)) {
		snprintf(why, whylen, "configs is not an object");
		goto out;
	}
	json_object_foreach(jc, key, v)
	{
		int k = kb_dyn_index(key, strlen(key));
		char err[256];
		if (k < 0) {
			snprintf(why, whylen, "configs names %.60s, which is not a dynamic broker config", key);
			goto out;
		}
		if (!json_is_string(v)) {
			snprintf(why, whylen, "configs.%s is not a string", key);
			goto out;
		}
		if (kb_dyn_check(k, json_string_value(v), json_string_length(v), t.val[k], err, sizeof(err))) {
			snprintf(why, whylen, "configs: %s", err);
			goto out;
		}
		t.set |= 1u << k;
	}
	if (writer)
		*writer = (int32_t)json_integer_value(wb);
	if (nonce)
		snprintf(nonce, NONCE_LEN + 1, "%s", json_string_value(wn));
	*s = t;
	rc = 0;
out:
	json_decref(root);
	return rc;
}

int kb__dyn_parse(const char *buf, size_t len, int32_t entity, int64_t seq, kb_dyn_set *s, char *why,
		  size_t whylen)
{
	return kb__dyn_parse_full(buf, len, entity, seq, s, NULL, NULL, why, whylen);
}

char *kb__dyn_encode(int32_t entity, int64_t seq, const kb_dyn_set *s, int32_t writer, const char *nonce)
{
	char ename[16];
	kb__dyn_entity_name(ename, sizeof(ename), entity);
	json_t *c = json_object();
	for (int k = 0; c && k < KB_DYN_COUNT; k++)
		if (s->set & (1u << k))
			json_object_set_new(c, dyn_names[k], json_string(s->val[k]));
	json_t *root = json_pack("{s:i, s:s, s:I, s:o, s:{s:i, s:s}, s:I}", "version", DYN_FORMAT, "entity", ename,
				 "seq", (json_int_t)seq, "configs", c, "writer", "broker", (int)writer, "nonce",
				 nonce, "written_ms", (json_int_t)ku_wall_ms());
	char *out = root ? json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
	json_decref(root);
	return out;
}
