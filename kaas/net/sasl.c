/*
 * sasl.c — the SASL exchange of one connection (sasl.h): the handshake's
 * mechanism, PLAIN (RFC 4616) checked against the stored SCRAM credential,
 * the SCRAM steps, re-authentication (KIP-368: the same mechanism and the
 * same principal, or the connection closes).
 *
 * PLAIN costs one PBKDF2 whether or not the user exists: an unknown user is
 * checked against a decoy credential, and both fail with one message.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "kaas/net/sasl.h"
#include "kaas/proto/kerr.h"

static const char *const mech_names[KN_MECH_N] = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"};

const char *kn_sasl_mech_name(int mech) { return mech >= 0 && mech < KN_MECH_N ? mech_names[mech] : "?"; }

int kn_sasl_mech_of(const char *name, size_t len)
{
	for (int i = 0; i < KN_MECH_N; i++)
		if (strlen(mech_names[i]) == len && memcmp(mech_names[i], name, len) == 0)
			return i;
	return -1;
}

#define PLAIN_FIELD_MAX 255
#define PLAIN_PASS_MAX 1024 /* kaas users add's limit */

int kn_sasl_plain_parse(const uint8_t *msg, size_t len, kn_plain *out, char *why, size_t whylen)
{
	memset(out, 0, sizeof(*out));
	const uint8_t *n1 = len ? memchr(msg, 0, len) : NULL;
	const uint8_t *n2 = n1 ? memchr(n1 + 1, 0, len - (size_t)(n1 + 1 - msg)) : NULL;
	if (!n1 || !n2) {
		snprintf(why, whylen, "expected [authzid] NUL user NUL password");
		return -EINVAL;
	}
	if (memchr(n2 + 1, 0, len - (size_t)(n2 + 1 - msg))) {
		snprintf(why, whylen, "more than two NUL separators");
		return -EINVAL;
	}
	out->authzid = (const char *)msg;
	out->authzid_len = (size_t)(n1 - msg);
	out->user = (const char *)n1 + 1;
	out->user_len = (size_t)(n2 - n1 - 1);
	out->pass = (const char *)n2 + 1;
	out->pass_len = len - (size_t)(n2 + 1 - msg);
	if (out->user_len == 0 || out->pass_len == 0) {
		snprintf(why, whylen, "an empty %s", out->user_len ? "password" : "user name");
		return -EINVAL;
	}
	if (out->authzid_len > PLAIN_FIELD_MAX || out->user_len > PLAIN_FIELD_MAX || out->pass_len > PLAIN_PASS_MAX) {
		snprintf(why, whylen, "a name over %d bytes or a password over %d", PLAIN_FIELD_MAX, PLAIN_PASS_MAX);
		return -EINVAL;
	}
	return 0;
}

kn_sasl *kn_sasl_new(void)
{
	kn_sasl *x = calloc(1, sizeof(*x));
	if (x)
		x->first_mech = -1;
	return x;
}

void kn_sasl_free(kn_sasl *x)
{
	if (!x)
		return;
	kn_scram_free(x->scram);
	OPENSSL_cleanse(x, sizeof(*x));
	free(x);
}

int kn_sasl_handshake(kn_sasl *x, const kn_sasl_env *env, int version, const char *mech, size_t len)
{
	int m = kn_sasl_mech_of(mech, len);
	x->close_after = 1; /* unless all is well below */
	if (x->state == KN_SASL_AUTH) {
		snprintf(x->fail_why, sizeof(x->fail_why), "a second SaslHandshake before authenticating");
		return KERR_ILLEGAL_SASL_STATE;
	}
	if (m < 0 || !env->enabled[m]) {
		snprintf(x->fail_why, sizeof(x->fail_why), "mechanism '%.*s' is not enabled", (int)(len > 40 ? 40 : len),
			 mech);
		return KERR_UNSUPPORTED_SASL_MECHANISM;
	}
	if (x->state == KN_SASL_DONE) {
		/* KIP-368: only SaslAuthenticate (v1 handshake) can carry it, with
		 * the mechanism of the first authentication. */
		if (version < 1 || m != x->first_mech) {
			snprintf(x->fail_why, sizeof(x->fail_why), "re-authentication %s",
				 version < 1 ? "with SaslHandshake v0" : "with another mechanism");
			return KERR_ILLEGAL_SASL_STATE;
		}
		x->reauth = 1;
	}
	x->mech = m;
	x->raw = version == 0;
	x->state = KN_SASL_AUTH;
	x->close_after = 0;
	return KERR_NONE;
}

static int lookup_user(const kn_sasl_env *env, const char *name, size_t len, kb_user *u, char *lw, size_t lwl)
{
	char nm[KB_USER_MAX + 1];
	if (len > KB_USER_MAX || kb_user_name_check(name, len, lw, lwl))
		return -ENOENT;
	memcpy(nm, name, len);
	nm[len] = 0;
	return env->lookup(env->lookup_arg, nm, u, lw, lwl);
}

/* PLAIN: 1 authenticated, 0 not (x->fail_why says why). */
static int plain_check(kn_sasl *x, const kn_sasl_env *env, const kn_plain *pl)
{
	kb_user u;
	char lw[200];
	int rc = lookup_user(env, pl->user, pl->user_len, &u, lw, sizeof(lw));
	int mech = KB_SCRAM_SHA512;
	kb_scram_cred cred;
	int known = rc == 0 && (u.scram[KB_SCRAM_SHA512].present || u.scram[KB_SCRAM_SHA256].present);
	if (known) {
		mech = u.scram[KB_SCRAM_SHA512].present ? KB_SCRAM_SHA512 : KB_SCRAM_SHA256;
		cred = u.scram[mech];
	} else {
		kb_users_decoy(env->secret, pl->user, pl->user_len, mech, &cred);
		snprintf(x->fail_why, sizeof(x->fail_why), "%s%s",
			 rc == -ENOENT || rc == 0 ? "unknown user" : "the user's credentials could not be read: ",
			 rc == -ENOENT || rc == 0 ? "" : lw);
	}
	OPENSSL_cleanse(&u, sizeof(u));
	kb_scram_cred got;
	int ok = 0;
	if (kb_scram_derive(mech, pl->pass, pl->pass_len, cred.salt, cred.salt_len, cred.iterations, &got) == 0)
		ok = CRYPTO_memcmp(got.stored_key, cred.stored_key, kb_scram_hash_len(mech)) == 0;
	OPENSSL_cleanse(&got, sizeof(got));
	OPENSSL_cleanse(&cred, sizeof(cred));
	if (known && !ok)
		snprintf(x->fail_why, sizeof(x->fail_why), "wrong password");
	return known && ok;
}

static int failed(kn_sasl *x, char *msg, size_t msglen, const char *client_msg)
{
	snprintf(msg, msglen, "%s", client_msg);
	x->close_after = 1;
	kn_scram_free(x->scram);
	x->scram = NULL;
	return -KERR_SASL_AUTHENTICATION_FAILED;
}

/* The exchange reached its end for user: a first authentication, or a
 * re-authentication that must keep the principal. */
static int succeeded(kn_sasl *x, const char *user, char *msg, size_t msglen)
{
	if (x->reauth && strcmp(user, x->user) != 0) {
		snprintf(x->fail_why, sizeof(x->fail_why), "re-authentication as another user (%.80s)", user);
		return failed(x, msg, msglen, "Cannot change principals during re-authentication");
	}
	snprintf(x->user, sizeof(x->user), "%s", user);
	if (x->first_mech < 0)
		x->first_mech = x->mech;
	x->state = KN_SASL_DONE;
	x->raw = 0;
	x->reauth = 0;
	x->just_authed = 1;
	return 1;
}

int kn_sasl_step(kn_sasl *x, const kn_sasl_env *env, const uint8_t *tok, size_t len, uint8_t **out,
		 size_t *outlen, char *msg, size_t msglen)
{
	*out = NULL;
	*outlen = 0;
	x->fail_why[0] = 0;
	if (x->state != KN_SASL_AUTH) {
		snprintf(x->fail_why, sizeof(x->fail_why), "SaslAuthenticate without a SaslHandshake before it");
		snprintf(msg, msglen, "SaslAuthenticate without SaslHandshake");
		x->close_after = 1;
		return -KERR_ILLEGAL_SASL_STATE;
	}
	char why[200];
	if (x->mech == KN_MECH_PLAIN) {
		kn_plain pl;
		if (kn_sasl_plain_parse(tok, len, &pl, why, sizeof(why))) {
			snprintf(x->fail_why, sizeof(x->fail_why), "invalid SASL/PLAIN message: %s", why);
			return failed(x, msg, msglen, "Authentication failed: Invalid SASL/PLAIN request");
		}
		if (pl.authzid_len && (pl.authzid_len != pl.user_len || memcmp(pl.authzid, pl.user, pl.user_len))) {
			snprintf(x->fail_why, sizeof(x->fail_why), "the authorization id differs from the user name");
			return failed(x, msg, msglen, "Authentication failed: Client requested an authorization id "
				      "that is different from username");
		}
		if (!plain_check(x, env, &pl))
			return failed(x, msg, msglen, "Authentication failed: Invalid username or password");
		char user[KB_USER_MAX + 1];
		memcpy(user, pl.user, pl.user_len);
		user[pl.user_len] = 0;
		return succeeded(x, user, msg, msglen);
	}
	int sm = x->mech == KN_MECH_SCRAM_SHA512 ? KB_SCRAM_SHA512 : KB_SCRAM_SHA256;
	char generic[160];
	snprintf(generic, sizeof(generic), "Authentication failed during authentication due to invalid credentials "
		 "with SASL mechanism %s", kn_sasl_mech_name(x->mech));
	if (!x->scram) {
		int rc = kn_scram_first(&x->scram, sm, env, tok, len, out, outlen, why, sizeof(why));
		if (rc == -ENOMEM || rc == -EIO) {
			snprintf(x->fail_why, sizeof(x->fail_why), "%s", strerror(-rc));
			return failed(x, msg, msglen, "Authentication failed: server error");
		}
		if (rc) {
			char cm[260];
			snprintf(x->fail_why, sizeof(x->fail_why), "invalid SCRAM client-first-message: %s", why);
			snprintf(cm, sizeof(cm), "Invalid SCRAM client first message: %s", why);
			return failed(x, msg, msglen, cm);
		}
		return 0;
	}
	char user[KB_USER_MAX + 1];
	int rc = kn_scram_final(x->scram, tok, len, out, outlen, user, sizeof(user), why, sizeof(why));
	kn_scram_free(x->scram);
	x->scram = NULL;
	if (rc == 1)
		return succeeded(x, user, msg, msglen);
	if (rc == -EINVAL) {
		char cm[260];
		snprintf(x->fail_why, sizeof(x->fail_why), "invalid SCRAM client-final-message: %s", why);
		snprintf(cm, sizeof(cm), "Invalid SCRAM client final message: %s", why);
		return failed(x, msg, msglen, cm);
	}
	snprintf(x->fail_why, sizeof(x->fail_why), "%s", rc == -EACCES ? why : strerror(-rc));
	return failed(x, msg, msglen, generic);
}
