/*
 * users.h — the SASL credential store: one file per user in the cluster
 * directory (CLUSTER/users/<encoded name>.json, docs/formats.md) holding the
 * salted, iterated SCRAM credentials of RFC 5802 (salt, iterations,
 * StoredKey, ServerKey) per mechanism, never a password.  PLAIN is verified
 * against the same credentials.  Also the SCRAM primitives (HMAC, H, Hi =
 * PBKDF2) that the store and the SASL exchange share, and strict base64.
 *
 * Files are written whole with sub_write_atomic and every field is checked
 * when read: another host may have written them.
 */
#ifndef KAAS_CORE_USERS_H
#define KAAS_CORE_USERS_H

#include <stddef.h>
#include <stdint.h>

#include "substrates/sub.h"

enum { KB_SCRAM_SHA256, KB_SCRAM_SHA512, KB_SCRAM_N };

#define KB_SCRAM_MAX_HASH 64
#define KB_SCRAM_MIN_ITER 4096 /* RFC 7677's floor, as Kafka */
#define KB_SCRAM_MAX_ITER 16384 /* Kafka's ceiling; bounds the PLAIN check's cost */
#define KB_SCRAM_DEFAULT_ITER 8192
#define KB_SALT_MIN 16
#define KB_SALT_MAX 64
#define KB_SALT_LEN 32 /* what `kaas users add` draws */
#define KB_USER_MAX 80 /* bytes; the encoded file name stays under 255 */
#define KB_USERS_DIR "users"
#define KB_USERS_FILE_MAX 16384

typedef struct kb_scram_cred {
	int present;
	uint8_t salt[KB_SALT_MAX];
	size_t salt_len;
	int32_t iterations;
	uint8_t stored_key[KB_SCRAM_MAX_HASH];
	uint8_t server_key[KB_SCRAM_MAX_HASH];
} kb_scram_cred;

typedef struct kb_user {
	char name[KB_USER_MAX + 1];
	kb_scram_cred scram[KB_SCRAM_N];
	int64_t updated_ms;
} kb_user;

/* "SCRAM-SHA-256" <-> KB_SCRAM_SHA256; -1 for another name. */
const char *kb_scram_name(int mech);
int kb_scram_mech(const char *name, size_t len);
size_t kb_scram_hash_len(int mech);

/* The RFC 5802 functions for mech's hash.  out holds kb_scram_hash_len().
 * 0 or -EIO (OpenSSL failed). */
int kb_scram_hmac(int mech, const void *key, size_t klen, const void *msg, size_t mlen, uint8_t *out);
int kb_scram_hash(int mech, const void *msg, size_t mlen, uint8_t *out);
int kb_scram_salted(int mech, const void *pw, size_t pwlen, const uint8_t *salt, size_t slen, int32_t iter,
		    uint8_t *out);
/* SaltedPassword -> StoredKey and ServerKey into out (present set). */
int kb_scram_derive(int mech, const void *pw, size_t pwlen, const uint8_t *salt, size_t slen, int32_t iter,
		    kb_scram_cred *out);

/* A user name kaas accepts: 1..KB_USER_MAX bytes of UTF-8 without control
 * characters.  0, or -EINVAL with why. */
int kb_user_name_check(const char *name, size_t len, char *why, size_t whylen);
/* users/<encoded>.json for a checked name: letters, digits, '.', '_', '-' as
 * they are (a leading '.' encoded), every other byte %XX. */
int kb_user_path(const char *name, char *path, size_t len);

/* The user's file, parsed and checked; expect_name is the name it must
 * carry.  0, -ENOENT (no such user), -EBADMSG (why says what is wrong),
 * other -errno from the volume. */
int kb_users_get(sub_vfs *cluster, const char *name, kb_user *out, char *why, size_t whylen);
int kb_user_parse(const char *json, size_t len, const char *expect_name, kb_user *out, char *why,
		  size_t whylen);
/* The JSON of u (malloc'd, NUL-terminated) or NULL. */
char *kb_user_format(const kb_user *u);
int kb_users_put(sub_vfs *cluster, const kb_user *u); /* sub_write_atomic */
int kb_users_remove(sub_vfs *cluster, const char *name); /* -ENOENT if none */
/* The names of CLUSTER/users/ (decoded, sorted); free with sub_names_free. */
int kb_users_list(sub_vfs *cluster, char ***names, size_t *n);

/* The cluster's secret for answering unknown users like known ones
 * (CLUSTER/users/secret.json, created once with sub_create_excl). */
int kb_users_secret(sub_vfs *cluster, uint8_t out[32], char *why, size_t whylen);
/* A credential for a user that does not exist: its salt derived from the
 * secret and the name (stable across brokers and restarts, so that a
 * client cannot tell it from a real one), keys that match no password. */
void kb_users_decoy(const uint8_t secret[32], const char *name, size_t len, int mech, kb_scram_cred *out);

/* Strict base64 (RFC 4648, padded).  encode: dst holds 4*ceil(n/3)+1;
 * returns the length.  decode: -1 on any bad character or padding, else
 * the length (at most dstlen). */
size_t kb_b64_encode(const uint8_t *src, size_t n, char *dst);
long kb_b64_decode(const char *src, size_t n, uint8_t *dst, size_t dstlen);

/* `kaas users add|remove|list` (users_cli.c); argv[0] is "users". */
int kb_users_main(int argc, char **argv);

#endif
