/*
 * json.h — the cluster files' shared JSON reading rules (private to
 * kaas/cluster).
 *
 * Every cluster file was written by another host, possibly by a newer or a
 * broken kaas, possibly cut short.  These helpers turn "missing", "wrong
 * type" and "out of range" into one named refusal in the caller's error
 * buffer, so no decoder can forget a check or crash on a surprise.
 *
 * Errors: -EBADMSG (not a JSON object: empty, truncated, garbage),
 * -EPROTONOSUPPORT (a format version this code does not know),
 * -EINVAL (a field missing or of the wrong type), -ERANGE (a value no
 * correct writer produces).
 */
#ifndef KAAS_CLUSTER_JSON_H
#define KAAS_CLUSTER_JSON_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Writes a message into err (may be NULL) and returns rc. */
int kcl__fail(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Parses exactly len bytes as one JSON object (*out owned by the caller). */
int kcl__parse(const char *buf, size_t len, const char *what, json_t **out, char *err,
	       size_t errlen);

/* Serialises compactly with sorted keys; *out is malloc'd, NUL-terminated. */
int kcl__dump(json_t *doc, char **out, size_t *len);

/* "version" must be an integer in 1..max_known. */
int kcl__version(json_t *o, const char *what, int64_t max_known, int64_t *out, char *err,
		 size_t errlen);

int kcl__int(json_t *o, const char *key, int64_t min, int64_t max, int64_t *out, char *err,
	     size_t errlen);

/* A string of 0..maxlen bytes without NUL copied to dst (dstlen > maxlen);
 * allow_empty = 0 refuses "". */
int kcl__str(json_t *o, const char *key, size_t maxlen, int allow_empty, char *dst,
	     size_t dstlen, char *err, size_t errlen);

/* Exactly 16 lower-case hex digits, the text form of a 64-bit nonce. */
int kcl__hex64(json_t *o, const char *key, uint64_t *out, char *err, size_t errlen);
void kcl__hex64_fmt(uint64_t v, char dst[17]);

/* A fresh random 64-bit value from the kernel (never 0). */
int kcl__random64(uint64_t *out);

#endif
