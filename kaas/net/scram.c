/*
 * scram.c — the server side of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802,
 * RFC 7677) against the stored credentials of kaas/core/users.h.
 *
 * Not supported, refused by name: channel binding ("p=" in the GS2 header),
 * mandatory extensions ("m="), delegation tokens (the tokenauth extension).
 * An authorization id must equal the user name.  Names and passwords are
 * used as the client's UTF-8 bytes, without SASLprep, as Kafka does.
 *
 * No user enumeration: an unknown user (or one without this mechanism's
 * credential) gets a server-first-message built from a decoy credential
 * whose salt is stable per name (kb_users_decoy), and fails at the proof
 * with the same error as a wrong password.  The proof is checked with
 * CRYPTO_memcmp.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "kaas/net/sasl.h"

#define NONCE_MAX 256
#define MSG_MAX 4096

struct kn_scram {
	int mech;
	int known;             /* the user exists with this credential */
	kb_scram_cred cred;
	char user[KB_USER_MAX + 1];
	char *gs2;             /* the GS2 header, as sent */
	size_t gs2_len;
	char *auth;            /* client-first-bare "," server-first "," (grows at the final) */
	size_t auth_len;
	char nonce[2 * NONCE_MAX + 1];
	size_t nonce_len;
	char note[260];        /* why an unknown user will fail, for the log */
};

void kn_scram_free(kn_scram *x)
{
	if (!x)
		return;
	free(x->gs2);
	free(x->auth);
	OPENSSL_cleanse(x, sizeof(*x));
	free(x);
}

static int fail(char *why, size_t whylen, const char *what)
{
	snprintf(why, whylen, "%s", what);
	return -EINVAL;
}

/* saslname -> name: "=2C" is ',', "=3D" is '=', any other '=' is an error. */
static int saslname(const char *s, size_t n, char *out, size_t cap, size_t *olen)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (c == '=') {
			if (i + 2 >= n)
				return -1;
			if (s[i + 1] == '2' && s[i + 2] == 'C')
				c = ',';
			else if (s[i + 1] == '3' && s[i + 2] == 'D')
				c = '=';
			else
				return -1;
			i += 2;
		} else if (c == ',' || c == 0) {
			return -1;
		}
		if (o + 1 >= cap)
			return -1;
		out[o++] = c;
	}
	out[o] = 0;
	*olen = o;
	return 0;
}

static int printable_nonce(const char *s, size_t n)
{
	if (n == 0 || n > NONCE_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x21 || s[i] > 0x7e || s[i] == ',')
			return 0;
	return 1;
}

/* The next attribute "X=value" of s[*pos..n): its letter and value. */
static int attr(const char *s, size_t n, size_t *pos, char *letter, const char **v, size_t *vlen)
{
	size_t p = *pos;
	if (p + 2 > n || s[p + 1] != '=')
		return -1;
	*letter = s[p];
	const char *e = memchr(s + p + 2, ',', n - p - 2);
	size_t end = e ? (size_t)(e - s) : n;
	*v = s + p + 2;
	*vlen = end - p - 2;
	*pos = e ? end + 1 : n + 1; /* past the comma; n + 1 marks the end */
	return 0;
}

int kn_scram_first(kn_scram **xp, int mech, const kn_sasl_env *env, const uint8_t *msg, size_t len,
		   uint8_t **out, size_t *outlen, char *why, size_t whylen)
{
	const char *s = (const char *)msg;
	*out = NULL;
	*xp = NULL;
	if (len == 0 || len > MSG_MAX || memchr(msg, 0, len))
		return fail(why, whylen, "a client-first-message of 1 to 4096 bytes without NUL");
	/* gs2-header: n / y / p=..., then [a=authzid], then ','. */
	if (s[0] == 'p')
		return fail(why, whylen, "channel binding is not supported");
	if ((s[0] != 'n' && s[0] != 'y') || len < 3 || s[1] != ',')
		return fail(why, whylen, "the GS2 header must begin with n, or y,");
	size_t p = 2;
	char authz[KB_USER_MAX + 1] = "";
	size_t authz_len = 0;
	int has_authz = 0;
	if (s[p] == 'a' && p + 1 < len && s[p + 1] == '=') {
		const char *e = memchr(s + p, ',', len - p);
		if (!e || saslname(s + p + 2, (size_t)(e - s) - p - 2, authz, sizeof(authz), &authz_len))
			return fail(why, whylen, "a malformed authorization id");
		has_authz = 1;
		p = (size_t)(e - s);
	}
	if (p >= len || s[p] != ',')
		return fail(why, whylen, "the GS2 header must end with ','");
	p++;
	size_t gs2_len = p, bare = p;
	char letter;
	const char *v;
	size_t vl;
	if (attr(s, len, &p, &letter, &v, &vl) || letter == 'm')
		return fail(why, whylen, letter == 'm' ? "mandatory extensions are not supported"
						       : "expected n=<user> after the GS2 header");
	kn_scram *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->mech = mech;
	size_t ul = 0;
	if (letter != 'n' || vl == 0 || saslname(v, vl, x->user, sizeof(x->user), &ul)) {
		kn_scram_free(x);
		return fail(why, whylen, "a missing or malformed user name (n=)");
	}
	if (has_authz && (authz_len != ul || memcmp(authz, x->user, ul) != 0)) {
		kn_scram_free(x);
		return fail(why, whylen, "the authorization id differs from the user name");
	}
	if (p > len || attr(s, len, &p, &letter, &v, &vl) || letter != 'r' || !printable_nonce(v, vl)) {
		kn_scram_free(x);
		return fail(why, whylen, "a missing or malformed nonce (r=)");
	}
	memcpy(x->nonce, v, vl);
	x->nonce_len = vl;
	/* Extensions: key=value; tokenauth (delegation tokens) is not offered. */
	while (p < len) {
		const char *e = memchr(s + p, ',', len - p);
		size_t el = e ? (size_t)(e - s) - p : len - p;
		if (el >= 9 && memcmp(s + p, "tokenauth", 9) == 0 && (el == 9 || s[p + 9] == '=')) {
			kn_scram_free(x);
			return fail(why, whylen, "delegation tokens are not supported");
		}
		if (!memchr(s + p, '=', el)) {
			kn_scram_free(x);
			return fail(why, whylen, "a malformed extension");
		}
		p += el + 1;
	}
	/* The credential, or a decoy that looks the same. */
	kb_user u;
	char lw[200];
	int rc = -ENOENT;
	if (kb_user_name_check(x->user, ul, lw, sizeof(lw)) == 0)
		rc = env->lookup(env->lookup_arg, x->user, &u, lw, sizeof(lw));
	if (rc == 0 && u.scram[mech].present) {
		x->cred = u.scram[mech];
		x->known = 1;
	} else {
		if (rc && rc != -ENOENT)
			snprintf(x->note, sizeof(x->note), "the user's credentials could not be read: %s", lw);
		else
			snprintf(x->note, sizeof(x->note), rc ? "unknown user" : "the user has no %s credential",
				 kb_scram_name(mech));
		kb_users_decoy(env->secret, x->user, ul, mech, &x->cred);
	}
	OPENSSL_cleanse(&u, sizeof(u));
	/* The server's half of the nonce: 24 random bytes in base64 (no ','). */
	if (env->snonce) {
		size_t sl = strlen(env->snonce);
		if (sl > NONCE_MAX)
			sl = NONCE_MAX;
		memcpy(x->nonce + x->nonce_len, env->snonce, sl);
		x->nonce_len += sl;
	} else {
		uint8_t rnd[24];
		if (RAND_bytes(rnd, sizeof(rnd)) != 1) {
			kn_scram_free(x);
			return -EIO;
		}
		x->nonce_len += kb_b64_encode(rnd, sizeof(rnd), x->nonce + x->nonce_len);
	}
	x->nonce[x->nonce_len] = 0;
	char salt[4 * KB_SALT_MAX / 3 + 8];
	kb_b64_encode(x->cred.salt, x->cred.salt_len, salt);
	size_t cap = (len - bare) + x->nonce_len + strlen(salt) + 64;
	x->gs2 = malloc(gs2_len);
	x->auth = malloc(cap + 2 * MSG_MAX + 2);
	if (!x->gs2 || !x->auth) {
		kn_scram_free(x);
		return -ENOMEM;
	}
	memcpy(x->gs2, s, gs2_len);
	x->gs2_len = gs2_len;
	memcpy(x->auth, s + bare, len - bare);
	x->auth_len = len - bare;
	x->auth[x->auth_len++] = ',';
	int n = snprintf(x->auth + x->auth_len, cap, "r=%s,s=%s,i=%d", x->nonce, salt, (int)x->cred.iterations);
	*out = malloc((size_t)n);
	if (!*out) {
		kn_scram_free(x);
		return -ENOMEM;
	}
	memcpy(*out, x->auth + x->auth_len, (size_t)n);
	*outlen = (size_t)n;
	x->auth_len += (size_t)n;
	x->auth[x->auth_len++] = ',';
	*xp = x;
	return 0;
}

int kn_scram_final(kn_scram *x, const uint8_t *msg, size_t len, uint8_t **out, size_t *outlen, char *user,
		   size_t userlen, char *why, size_t whylen)
{
	const char *s = (const char *)msg;
	*out = NULL;
	snprintf(user, userlen, "%s", x->user);
	if (len == 0 || len > MSG_MAX || memchr(msg, 0, len))
		return fail(why, whylen, "a client-final-message of 1 to 4096 bytes without NUL");
	size_t p = 0;
	char letter;
	const char *v;
	size_t vl;
	/* c=base64(gs2 header): no channel binding data follows it. */
	uint8_t cb[KB_USER_MAX * 3 + 16];
	if (attr(s, len, &p, &letter, &v, &vl) || letter != 'c')
		return fail(why, whylen, "expected c= first");
	long cbl = kb_b64_decode(v, vl, cb, sizeof(cb));
	if (cbl < 0 || (size_t)cbl != x->gs2_len || memcmp(cb, x->gs2, x->gs2_len) != 0)
		return fail(why, whylen, "the channel binding (c=) is not the GS2 header of the first message");
	if (p > len || attr(s, len, &p, &letter, &v, &vl) || letter != 'r')
		return fail(why, whylen, "expected r= second");
	/* Ends with: librdkafka (2.0 here) sends its own nonce again in front of
	 * the combined one, and Kafka accepts that.  Freshness holds either way:
	 * the server's nonce is in it, and the proof covers what was sent. */
	if (vl < x->nonce_len || vl > 2 * NONCE_MAX || memcmp(v + vl - x->nonce_len, x->nonce, x->nonce_len) != 0)
		return fail(why, whylen, "the nonce (r=) is not the one of this exchange");
	/* Extensions up to the proof, which is last. */
	const char *proof = NULL;
	size_t proof_len = 0, without = 0;
	while (p < len) {
		size_t at = p;
		if (attr(s, len, &p, &letter, &v, &vl))
			return fail(why, whylen, "a malformed attribute");
		if (letter == 'p') {
			if (p <= len)
				return fail(why, whylen, "the proof (p=) must be last");
			proof = v;
			proof_len = vl;
			without = at - 1; /* before its comma */
		}
	}
	if (!proof)
		return fail(why, whylen, "no proof (p=)");
	size_t hl = kb_scram_hash_len(x->mech);
	uint8_t pr[KB_SCRAM_MAX_HASH], sig[KB_SCRAM_MAX_HASH], ck[KB_SCRAM_MAX_HASH], sk[KB_SCRAM_MAX_HASH];
	long pl = kb_b64_decode(proof, proof_len, pr, sizeof(pr));
	if (pl != (long)hl)
		return fail(why, whylen, "the proof (p=) is not base64 of the hash's length");
	/* AuthMessage = client-first-bare "," server-first "," client-final-without-proof */
	memcpy(x->auth + x->auth_len, s, without);
	size_t alen = x->auth_len + without;
	int rc = kb_scram_hmac(x->mech, x->cred.stored_key, hl, x->auth, alen, sig);
	for (size_t i = 0; i < hl; i++)
		ck[i] = pr[i] ^ sig[i];
	if (!rc)
		rc = kb_scram_hash(x->mech, ck, hl, sk);
	if (rc)
		return rc;
	int match = CRYPTO_memcmp(sk, x->cred.stored_key, hl) == 0;
	OPENSSL_cleanse(ck, sizeof(ck));
	if (!match || !x->known) {
		snprintf(why, whylen, "%s", x->known ? "wrong password" : x->note);
		return -EACCES;
	}
	if ((rc = kb_scram_hmac(x->mech, x->cred.server_key, hl, x->auth, alen, sig)))
		return rc;
	char b[4 * KB_SCRAM_MAX_HASH / 3 + 8];
	size_t bl = kb_b64_encode(sig, hl, b);
	*out = malloc(bl + 2);
	if (!*out)
		return -ENOMEM;
	memcpy(*out, "v=", 2);
	memcpy(*out + 2, b, bl);
	*outlen = bl + 2;
	return 1;
}
