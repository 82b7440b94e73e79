/*
 * users.c — the SASL credential store (users.h): SCRAM primitives on
 * OpenSSL, the file name encoding, the user file's format with every field
 * checked on the way in, and the decoy credential for unknown users.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "kaas/core/users.h"

#define SECRET_PATH KB_USERS_DIR "/.secret.json"

static const char *const mech_names[KB_SCRAM_N] = {"SCRAM-SHA-256", "SCRAM-SHA-512"};

const char *kb_scram_name(int mech) { return mech >= 0 && mech < KB_SCRAM_N ? mech_names[mech] : "?"; }

int kb_scram_mech(const char *name, size_t len)
{
	for (int i = 0; i < KB_SCRAM_N; i++)
		if (strlen(mech_names[i]) == len && memcmp(mech_names[i], name, len) == 0)
			return i;
	return -1;
}

size_t kb_scram_hash_len(int mech) { return mech == KB_SCRAM_SHA512 ? 64 : 32; }

static const EVP_MD *md_of(int mech) { return mech == KB_SCRAM_SHA512 ? EVP_sha512() : EVP_sha256(); }

int kb_scram_hmac(int mech, const void *key, size_t klen, const void *msg, size_t mlen, uint8_t *out)
{
	unsigned int n = 0;
	if (!HMAC(md_of(mech), key, (int)klen, msg, mlen, out, &n) || n != kb_scram_hash_len(mech))
		return -EIO;
	return 0;
}

int kb_scram_hash(int mech, const void *msg, size_t mlen, uint8_t *out)
{
	unsigned int n = 0;
	if (EVP_Digest(msg, mlen, out, &n, md_of(mech), NULL) != 1 || n != kb_scram_hash_len(mech))
		return -EIO;
	return 0;
}

int kb_scram_salted(int mech, const void *pw, size_t pwlen, const uint8_t *salt, size_t slen, int32_t iter,
		    uint8_t *out)
{
	if (iter < 1 || pwlen > INT32_MAX)
		return -EINVAL;
	if (PKCS5_PBKDF2_HMAC(pw, (int)pwlen, salt, (int)slen, iter, md_of(mech), (int)kb_scram_hash_len(mech),
			      out) != 1)
		return -EIO;
	return 0;
}

int kb_scram_derive(int mech, const void *pw, size_t pwlen, const uint8_t *salt, size_t slen, int32_t iter,
		    kb_scram_cred *out)
{
	uint8_t sp[KB_SCRAM_MAX_HASH], ck[KB_SCRAM_MAX_HASH];
	size_t hl = kb_scram_hash_len(mech);
	if (slen > KB_SALT_MAX)
		return -EINVAL;
	int rc = kb_scram_salted(mech, pw, pwlen, salt, slen, iter, sp);
	if (!rc)
		rc = kb_scram_hmac(mech, sp, hl, "Client Key", 10, ck);
	if (!rc)
		rc = kb_scram_hash(mech, ck, hl, out->stored_key);
	if (!rc)
		rc = kb_scram_hmac(mech, sp, hl, "Server Key", 10, out->server_key);
	if (!rc) {
		memcpy(out->salt, salt, slen);
		out->salt_len = slen;
		out->iterations = iter;
		out->present = 1;
	}
	OPENSSL_cleanse(sp, sizeof(sp));
	OPENSSL_cleanse(ck, sizeof(ck));
	return rc;
}

/* ---- base64 ----------------------------------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t kb_b64_encode(const uint8_t *src, size_t n, char *dst)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)src[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)src[i + 1] << 8;
		if (i + 2 < n)
			v |= src[i + 2];
		dst[o++] = b64[(v >> 18) & 63];
		dst[o++] = b64[(v >> 12) & 63];
		dst[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		dst[o++] = i + 2 < n ? b64[v & 63] : '=';
	}
	dst[o] = 0;
	return o;
}

static int b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long kb_b64_decode(const char *src, size_t n, uint8_t *dst, size_t dstlen)
{
	if (n % 4)
		return -1;
	size_t o = 0;
	for (size_t i = 0; i < n; i += 4) {
		int last = i + 4 == n;
		int v[4], pad = 0;
		for (int j = 0; j < 4; j++) {
			if (src[i + j] == '=' && last && j >= 2) {
				v[j] = 0;
				pad++;
				continue;
			}
			if (pad) /* data after '=' */
				return -1;
			v[j] = b64_val(src[i + j]);
			if (v[j] < 0)
				return -1;
		}
		uint32_t x = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
		/* Non-canonical padding bits would make two texts of one value. */
		if ((pad == 1 && (x & 0xff)) || (pad == 2 && (x & 0xffff)))
			return -1;
		int k = 3 - pad;
		if (o + (size_t)k > dstlen)
			return -1;
		for (int j = 0; j < k; j++)
			dst[o++] = (uint8_t)(x >> (16 - 8 * j));
	}
	return (long)o;
}

/* ---- names ------------------------------------------------------------------------ */

/* Well-formed UTF-8 (no overlongs, no surrogates), no C0/C1 controls or DEL. */
int kb_user_name_check(const char *name, size_t len, char *why, size_t whylen)
{
	const uint8_t *s = (const uint8_t *)name;
	if (len == 0 || len > KB_USER_MAX) {
		snprintf(why, whylen, "a user name is 1 to %d bytes", KB_USER_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < len;) {
		uint32_t c = s[i];
		size_t k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
		if (!k || i + k > len)
			goto bad_utf8;
		if (k > 1) {
			c &= 0x3f >> (k - 1);
			for (size_t j = 1; j < k; j++) {
				if ((s[i + j] & 0xc0) != 0x80)
					goto bad_utf8;
				c = c << 6 | (s[i + j] & 0x3f);
			}
			static const uint32_t minv[5] = {0, 0, 0x80, 0x800, 0x10000};
			if (c < minv[k] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
				goto bad_utf8;
		}
		if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0)) {
			snprintf(why, whylen, "a user name has no control characters");
			return -EINVAL;
		}
		i += k;
	}
	return 0;
bad_utf8:
	snprintf(why, whylen, "a user name is UTF-8");
	return -EINVAL;
}

static int plain_byte(uint8_t c, size_t i)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '-' || (c == '.' && i > 0);
}

int kb_user_path(const char *name, char *path, size_t len)
{
	size_t o = (size_t)snprintf(path, len, "%s/", KB_USERS_DIR);
	for (size_t i = 0; name[i]; i++) {
		uint8_t c = (uint8_t)name[i];
		if (o + 4 >= len)
			return -ENAMETOOLONG;
		if (plain_byte(c, i))
			path[o++] = (char)c;
		else
			o += (size_t)snprintf(path + o, len - o, "%%%02X", c);
	}
	if (o + 6 > len)
		return -ENAMETOOLONG;
	memcpy(path + o, ".json", 6);
	return 0;
}

static int hexv(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A file name of users/ back to its user name; -1 when it is none kaas writes. */
static int name_of_file(const char *f, char *out, size_t outlen)
{
	size_t n = strlen(f), o = 0;
	if (n <= 5 || strcmp(f + n - 5, ".json") != 0 || f[0] == '.')
		return -1;
	for (size_t i = 0; i < n - 5; i++) {
		if (o + 1 >= outlen)
			return -1;
		if (f[i] == '%') {
			int a = i + 2 < n - 5 ? hexv(f[i + 1]) : -1, b = a >= 0 ? hexv(f[i + 2]) : -1;
			if (a < 0 || b < 0)
				return -1;
			out[o++] = (char)(a << 4 | b);
			i += 2;
		} else {
			out[o++] = f[i];
		}
	}
	out[o] = 0;
	char why[64], again[512];
	if (kb_user_name_check(out, o, why, sizeof(why)) || kb_user_path(out, again, sizeof(again)) ||
	    strcmp(again + strlen(KB_USERS_DIR) + 1, f) != 0)
		return -1; /* not the one encoding of its name */
	return 0;
}

/* ---- the file ------------------------------------------------------------------------ */

static int why_(char *why, size_t whylen, const char *fmt, const char *a)
{
	snprintf(why, whylen, fmt, a);
	return -EBADMSG;
}

static int get_b64(json_t *o, const char *key, uint8_t *dst, size_t min, size_t max, size_t *len, char *why,
		   size_t whylen)
{
	json_t *v = json_object_get(o, key);
	if (!json_is_string(v))
		return why_(why, whylen, "%s: missing or not a string", key);
	uint8_t tmp[KB_SALT_MAX > KB_SCRAM_MAX_HASH ? KB_SALT_MAX : KB_SCRAM_MAX_HASH];
	long n = kb_b64_decode(json_string_value(v), json_string_length(v), tmp, sizeof(tmp));
	if (n < 0 || (size_t)n < min || (size_t)n > max) {
		snprintf(why, whylen, "%s: not base64 of %zu to %zu bytes", key, min, max);
		return -EBADMSG;
	}
	memcpy(dst, tmp, (size_t)n);
	*len = (size_t)n;
	return 0;
}

int kb_user_parse(const char *buf, size_t len, const char *expect_name, kb_user *out, char *why, size_t whylen)
{
	memset(out, 0, sizeof(*out));
	json_error_t je;
	json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	int rc = -EBADMSG;
	if (!root || !json_is_object(root)) {
		snprintf(why, whylen, "not a JSON object%s%s", root ? "" : ": ", root ? "" : je.text);
		goto out;
	}
	json_t *ver = json_object_get(root, "version"), *user = json_object_get(root, "user");
	json_t *scram = json_object_get(root, "scram"), *upd = json_object_get(root, "updated_ms");
	if (!json_is_integer(ver) || json_integer_value(ver) != 1) {
		snprintf(why, whylen, "version: must be 1");
		goto out;
	}
	if (!json_is_string(user) || json_string_length(user) > KB_USER_MAX ||
	    kb_user_name_check(json_string_value(user), json_string_length(user), why, whylen) ||
	    strlen(json_string_value(user)) != json_string_length(user)) {
		snprintf(why, whylen, "user: missing or not a valid user name");
		goto out;
	}
	if (expect_name && strcmp(json_string_value(user), expect_name) != 0) {
		snprintf(why, whylen, "user: the file names another user");
		goto out;
	}
	memcpy(out->name, json_string_value(user), json_string_length(user) + 1);
	if (upd && !(json_is_integer(upd) && json_integer_value(upd) >= 0)) {
		snprintf(why, whylen, "updated_ms: not a non-negative integer");
		goto out;
	}
	out->updated_ms = upd ? json_integer_value(upd) : 0;
	if (!json_is_object(scram) || json_object_size(scram) == 0) {
		snprintf(why, whylen, "scram: missing or empty");
		goto out;
	}
	const char *mk;
	json_t *mv;
	json_object_foreach(scram, mk, mv) {
		int m = kb_scram_mech(mk, strlen(mk));
		if (m < 0) {
			rc = why_(why, whylen, "scram: unknown mechanism '%.40s'", mk);
			goto out;
		}
		kb_scram_cred *c = &out->scram[m];
		size_t hl = kb_scram_hash_len(m), n;
		json_t *it = json_object_get(mv, "iterations");
		if (!json_is_object(mv) || !json_is_integer(it) || json_integer_value(it) < KB_SCRAM_MIN_ITER ||
		    json_integer_value(it) > KB_SCRAM_MAX_ITER) {
			snprintf(why, whylen, "scram.%s.iterations: not an integer from %d to %d", mk,
				 KB_SCRAM_MIN_ITER, KB_SCRAM_MAX_ITER);
			goto out;
		}
		c->iterations = (int32_t)json_integer_value(it);
		if ((rc = get_b64(mv, "salt", c->salt, KB_SALT_MIN, KB_SALT_MAX, &c->salt_len, why, whylen)) ||
		    (rc = get_b64(mv, "stored_key", c->stored_key, hl, hl, &n, why, whylen)) ||
		    (rc = get_b64(mv, "server_key", c->server_key, hl, hl, &n, why, whylen)))
			goto out;
		if (json_object_size(mv) != 4) {
			rc = why_(why, whylen, "scram.%s: unexpected fields", mk);
			goto out;
		}
		c->present = 1;
	}
	rc = 0;
out:
	json_decref(root);
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}

char *kb_user_format(const kb_user *u)
{
	json_t *scram = json_object();
	for (int m = 0; m < KB_SCRAM_N; m++) {
		const kb_scram_cred *c = &u->scram[m];
		if (!c->present)
			continue;
		char salt[4 * KB_SALT_MAX / 3 + 8], sk[4 * KB_SCRAM_MAX_HASH / 3 + 8], vk[sizeof(sk)];
		size_t hl = kb_scram_hash_len(m);
		kb_b64_encode(c->salt, c->salt_len, salt);
		kb_b64_encode(c->stored_key, hl, sk);
		kb_b64_encode(c->server_key, hl, vk);
		json_object_set_new(scram, kb_scram_name(m),
				    json_pack("{s:s, s:i, s:s, s:s}", "salt", salt, "iterations", (json_int_t)c->iterations,
					      "stored_key", sk, "server_key", vk));
	}
	json_t *root = json_pack("{s:i, s:s, s:o, s:I}", "version", 1, "user", u->name, "scram", scram, "updated_ms",
				 (json_int_t)u->updated_ms);
	char *s = root ? json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	json_decref(root);
	return s;
}

int kb_users_get(sub_vfs *cluster, const char *name, kb_user *out, char *why, size_t whylen)
{
	char path[512], *buf = NULL;
	size_t len = 0;
	int rc = kb_user_name_check(name, strlen(name), why, whylen);
	if (rc)
		return -ENOENT; /* no such name can exist */
	if ((rc = kb_user_path(name, path, sizeof(path))))
		return rc;
	rc = sub_read_file(cluster, path, KB_USERS_FILE_MAX, &buf, &len);
	if (rc == -EFBIG) {
		snprintf(why, whylen, "%s: larger than %d bytes", path, KB_USERS_FILE_MAX);
		return -EBADMSG;
	}
	if (rc)
		return rc;
	char w[200];
	rc = kb_user_parse(buf, len, name, out, w, sizeof(w));
	if (rc)
		snprintf(why, whylen, "%s: %s", path, w);
	free(buf);
	return rc;
}

int kb_users_put(sub_vfs *cluster, const kb_user *u)
{
	char path[512], why[96];
	if (kb_user_name_check(u->name, strlen(u->name), why, sizeof(why)))
		return -EINVAL;
	int rc = kb_user_path(u->name, path, sizeof(path));
	if (rc)
		return rc;
	if ((rc = sub_mkdirs(cluster, KB_USERS_DIR, 0755)))
		return rc;
	char *s = kb_user_format(u);
	if (!s)
		return -ENOMEM;
	rc = sub_write_atomic(cluster, path, s, strlen(s));
	free(s);
	return rc;
}

int kb_users_remove(sub_vfs *cluster, const char *name)
{
	char path[512], why[96];
	if (kb_user_name_check(name, strlen(name), why, sizeof(why)))
		return -ENOENT;
	int rc = kb_user_path(name, path, sizeof(path));
	if (rc)
		return rc;
	rc = sub_unlink(cluster, path);
	if (!rc)
		rc = sub_fsync_dir(cluster, KB_USERS_DIR);
	return rc;
}

int kb_users_list(sub_vfs *cluster, char ***names, size_t *n)
{
	char **all = NULL;
	size_t na = 0;
	*names = NULL;
	*n = 0;
	int rc = sub_list(cluster, KB_USERS_DIR, &all, &na);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	size_t k = 0;
	for (size_t i = 0; i < na; i++) {
		char nm[KB_USER_MAX + 1];
		if (name_of_file(all[i], nm, sizeof(nm)) == 0) {
			free(all[i]);
			all[k++] = strdup(nm);
			if (!all[k - 1]) {
				sub_names_free(all, i + 1);
				return -ENOMEM;
			}
		} else {
			free(all[i]);
		}
	}
	*names = all;
	*n = k;
	return 0;
}

/* ---- unknown users -------------------------------------------------------------------- */

/* Parses the secret file; -EBADMSG when it is not (yet) complete. */
static int parse_secret(const char *buf, size_t len, uint8_t out[32])
{
	json_t *root = json_loadb(buf, len, 0, NULL);
	json_t *sec = json_object_get(root, "secret");
	int rc = -EBADMSG;
	if (json_is_integer(json_object_get(root, "version")) &&
	    json_integer_value(json_object_get(root, "version")) == 1 && json_is_string(sec) &&
	    kb_b64_decode(json_string_value(sec), json_string_length(sec), out, 32) == 32)
		rc = 0;
	json_decref(root);
	return rc;
}

int kb_users_secret(sub_vfs *cluster, uint8_t out[32], char *why, size_t whylen)
{
	char *buf = NULL;
	size_t len = 0;
	int rc = sub_read_file(cluster, SECRET_PATH, 4096, &buf, &len);
	if (rc == -ENOENT) {
		uint8_t s[32];
		char text[64], body[160];
		if (RAND_bytes(s, sizeof(s)) != 1) {
			snprintf(why, whylen, "no random bytes from OpenSSL");
			return -EIO;
		}
		kb_b64_encode(s, sizeof(s), text);
		int n = snprintf(body, sizeof(body), "{\"version\": 1, \"secret\": \"%s\"}\n", text);
		if ((rc = sub_mkdirs(cluster, KB_USERS_DIR, 0755)) == 0)
			rc = sub_create_excl(cluster, SECRET_PATH, body, (size_t)n);
		OPENSSL_cleanse(s, sizeof(s));
		OPENSSL_cleanse(body, sizeof(body));
		if (rc && rc != -EEXIST) {
			snprintf(why, whylen, "creating %s: %s", SECRET_PATH, sub_strerror(rc));
			return rc;
		}
		/* Ours or another broker's: read what won. */
		rc = sub_read_file(cluster, SECRET_PATH, 4096, &buf, &len);
	}
	/* A broker starting at the same moment may have created the file and
	 * not written it yet (an exclusive create is not atomic with its
	 * contents): look again for a while before calling it damaged. */
	for (int tries = 0; !rc && parse_secret(buf, len, out) != 0; tries++) {
		OPENSSL_cleanse(buf, len);
		free(buf);
		buf = NULL;
		if (tries == 40) {
			snprintf(why, whylen, "%s: not {\"version\": 1, \"secret\": <base64 of 32 bytes>} (an "
				 "interrupted creation leaves it empty: remove it and restart)", SECRET_PATH);
			return -EBADMSG;
		}
		usleep(50000);
		rc = sub_read_file(cluster, SECRET_PATH, 4096, &buf, &len);
	}
	if (rc) {
		snprintf(why, whylen, "reading %s: %s", SECRET_PATH, sub_strerror(rc));
		return rc;
	}
	OPENSSL_cleanse(buf, len);
	free(buf);
	return 0;
}

void kb_users_decoy(const uint8_t secret[32], const char *name, size_t len, int mech, kb_scram_cred *out)
{
	uint8_t h[64];
	unsigned int hl = 0;
	memset(out, 0, sizeof(*out));
	/* salt = HMAC(secret, "salt" NUL mech NUL name), keys from another label. */
	uint8_t msg[16 + KB_USER_MAX + 8];
	size_t ml = (size_t)snprintf((char *)msg, sizeof(msg), "salt%c%d%c", 0, mech, 0);
	if (len > KB_USER_MAX)
		len = KB_USER_MAX;
	memcpy(msg + ml, name, len);
	HMAC(EVP_sha512(), secret, 32, msg, ml + len, h, &hl);
	memcpy(out->salt, h, KB_SALT_LEN);
	out->salt_len = KB_SALT_LEN;
	out->iterations = KB_SCRAM_DEFAULT_ITER;
	msg[0] = 'k';
	HMAC(EVP_sha512(), secret, 32, msg, ml + len, h, &hl);
	memcpy(out->stored_key, h, kb_scram_hash_len(mech));
	memcpy(out->server_key, h, kb_scram_hash_len(mech));
	out->present = 1;
}
