/*
 * json.c — validated field access for the cluster files (see json.h).
 */
#include "kaas/cluster/json.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

int kcl__fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

int kcl__parse(const char *buf, size_t len, const char *what, json_t **out, char *err,
	       size_t errlen)
{
	json_error_t je;
	*out = NULL;
	if (!buf || len == 0)
		return kcl__fail(err, errlen, -EBADMSG, "%s: empty file", what);
	json_t *doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!doc)
		return kcl__fail(err, errlen, -EBADMSG, "%s: not JSON (%s at byte %d)", what, je.text,
				 je.position);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return kcl__fail(err, errlen, -EBADMSG, "%s: not a JSON object", what);
	}
	*out = doc;
	return 0;
}

int kcl__dump(json_t *doc, char **out, size_t *len)
{
	char *s = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
	if (!s)
		return -ENOMEM;
	*out = s;
	*len = strlen(s);
	return 0;
}

int kcl__int(json_t *o, const char *key, int64_t min, int64_t max, int64_t *out, char *err,
	     size_t errlen)
{
	json_t *v = json_object_get(o, key);
	if (!v)
		return kcl__fail(err, errlen, -EINVAL, "field '%s' missing", key);
	if (!json_is_integer(v))
		return kcl__fail(err, errlen, -EINVAL, "field '%s' is not an integer", key);
	json_int_t x = json_integer_value(v);
	if (x < min || x > max)
		return kcl__fail(err, errlen, -ERANGE, "field '%s' = %lld outside %" PRId64 "..%" PRId64,
				 key, (long long)x, min, max);
	*out = (int64_t)x;
	return 0;
}

int kcl__version(json_t *o, const char *what, int64_t max_known, int64_t *out, char *err,
		 size_t errlen)
{
	json_t *v = json_object_get(o, "version");
	if (!json_is_integer(v))
		return kcl__fail(err, errlen, -EINVAL, "%s: field 'version' missing or not an integer",
				 what);
	json_int_t x = json_integer_value(v);
	if (x < 1)
		return kcl__fail(err, errlen, -ERANGE, "%s: version %lld is impossible", what,
				 (long long)x);
	if (x > max_known)
		return kcl__fail(err, errlen, -EPROTONOSUPPORT,
				 "%s: version %lld is newer than this broker reads (%" PRId64 ")", what,
				 (long long)x, max_known);
	*out = (int64_t)x;
	return 0;
}

int kcl__str(json_t *o, const char *key, size_t maxlen, int allow_empty, char *dst,
	     size_t dstlen, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, key);
	if (!v)
		return kcl__fail(err, errlen, -EINVAL, "field '%s' missing", key);
	if (!json_is_string(v))
		return kcl__fail(err, errlen, -EINVAL, "field '%s' is not a string", key);
	size_t n = json_string_length(v);
	const char *s = json_string_value(v);
	if (n > maxlen || n >= dstlen)
		return kcl__fail(err, errlen, -ERANGE, "field '%s' is %zu bytes, at most %zu", key, n,
				 maxlen);
	if (memchr(s, '\0', n))
		return kcl__fail(err, errlen, -EINVAL, "field '%s' holds a NUL byte", key);
	if (!allow_empty && n == 0)
		return kcl__fail(err, errlen, -EINVAL, "field '%s' is empty", key);
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 0;
}

int kcl__hex64(json_t *o, const char *key, uint64_t *out, char *err, size_t errlen)
{
	char s[17];
	int rc = kcl__str(o, key, 16, 0, s, sizeof(s), err, errlen);
	if (rc)
		return rc;
	if (strlen(s) != 16)
		return kcl__fail(err, errlen, -EINVAL, "field '%s' is not 16 hex digits", key);
	uint64_t v = 0;
	for (int i = 0; i < 16; i++) {
		char c = s[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (d < 0)
			return kcl__fail(err, errlen, -EINVAL, "field '%s' is not lower-case hex", key);
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return 0;
}

void kcl__hex64_fmt(uint64_t v, char dst[17])
{
	snprintf(dst, 17, "%016" PRIx64, v);
}

int kcl__random64(uint64_t *out)
{
	uint64_t r = 0;
	while (r == 0)
		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			return -EIO;
	*out = r;
	return 0;
}
