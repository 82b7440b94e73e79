/* test_sasl.c — the SASL exchange without sockets (sasl.c, scram.c):
 * SCRAM-SHA-256 against RFC 7677's test vector, byte for byte; SCRAM-SHA-512
 * with a client written here; a wrong password and an unknown user fail
 * alike (same message, and an unknown user's salt is stable); PLAIN's parser
 * against hostile input; malformed SCRAM messages; the handshake's state
 * rules (re-authentication keeps mechanism and principal); an exchange cut
 * in the middle frees everything (ASan's leak check). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/net/sasl.h"
#include "kaas/proto/kerr.h"
#include "util/test/ktest.h"

static kb_user the_user; /* the one user of the test's store */

static int lookup(void *arg, const char *name, kb_user *out, char *why, size_t whylen)
{
	(void)arg;
	(void)why;
	(void)whylen;
	if (strcmp(name, the_user.name) != 0)
		return -ENOENT;
	*out = the_user;
	return 0;
}

static kn_sasl_env env_all(void)
{
	kn_sasl_env e;
	memset(&e, 0, sizeof(e));
	e.enabled[0] = e.enabled[1] = e.enabled[2] = 1;
	memset(e.secret, 7, sizeof(e.secret));
	e.lookup = lookup;
	return e;
}

static void set_user(const char *name, const char *pw, int mech, const uint8_t *salt, size_t slen, int32_t iter)
{
	snprintf(the_user.name, sizeof(the_user.name), "%s", name);
	ck_assert_int_eq(kb_scram_derive(mech, pw, strlen(pw), salt, slen, iter, &the_user.scram[mech]), 0);
}

static int step(kn_sasl *x, const kn_sasl_env *e, const char *tok, char **out, char *msg)
{
	uint8_t *o = NULL;
	size_t ol = 0;
	int rc = kn_sasl_step(x, e, (const uint8_t *)tok, strlen(tok), &o, &ol, msg, 300);
	*out = calloc(1, ol + 1);
	if (o)
		memcpy(*out, o, ol);
	free(o);
	return rc;
}

START_TEST(rfc7677_vector)
{
	uint8_t salt[16];
	const char *s64 = "W22ZaJ0SNY7soEsUEjb6gQ==";
	ck_assert_int_eq(kb_b64_decode(s64, strlen(s64), salt, sizeof(salt)), 16);
	memset(&the_user, 0, sizeof(the_user));
	set_user("user", "pencil", KB_SCRAM_SHA256, salt, 16, 4096);
	kn_sasl_env e = env_all();
	e.snonce = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
	kn_sasl *x = kn_sasl_new();
	ck_assert_int_eq(kn_sasl_handshake(x, &e, 1, "SCRAM-SHA-256", 13), KERR_NONE);
	char *out, msg[300];
	ck_assert_int_eq(step(x, &e, "n,,n=user,r=rOprNGfwEbeRWgbNEkqO", &out, msg), 0);
	ck_assert_str_eq(out, "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096");
	free(out);
	ck_assert_int_eq(step(x, &e,
			      "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
			      "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
			      &out, msg),
			 1);
	ck_assert_str_eq(out, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
	free(out);
	ck_assert_int_eq(x->state, KN_SASL_DONE);
	ck_assert_str_eq(x->user, "user");
	ck_assert(x->just_authed && !x->close_after);
	kn_sasl_free(x);
}
END_TEST

/* A SCRAM client: the final message for password pw after server-first sf. */
static char *client_final(int mech, const char *cfb, const char *sf, const char *pw)
{
	const char *r = strstr(sf, "r="), *sp = strstr(sf, ",s="), *ip = strstr(sf, ",i=");
	ck_assert(r && sp && ip);
	uint8_t salt[64];
	long sl = kb_b64_decode(sp + 3, (size_t)(ip - sp - 3), salt, sizeof(salt));
	ck_assert_int_gt(sl, 0);
	int iter = atoi(ip + 3);
	size_t hl = kb_scram_hash_len(mech);
	uint8_t spw[64], ck[64], sk[64], sig[64], proof[64];
	ck_assert_int_eq(kb_scram_salted(mech, pw, strlen(pw), salt, (size_t)sl, iter, spw), 0);
	kb_scram_hmac(mech, spw, hl, "Client Key", 10, ck);
	kb_scram_hash(mech, ck, hl, sk);
	char without[600], auth[2000];
	snprintf(without, sizeof(without), "c=biws,r=%.*s", (int)(sp - r - 2), r + 2);
	snprintf(auth, sizeof(auth), "%s,%s,%s", cfb, sf, without);
	kb_scram_hmac(mech, sk, hl, auth, strlen(auth), sig);
	for (size_t i = 0; i < hl; i++)
		proof[i] = ck[i] ^ sig[i];
	char p64[100], *msg = malloc(800);
	kb_b64_encode(proof, hl, p64);
	snprintf(msg, 800, "%s,p=%s", without, p64);
	return msg;
}

/* The outcome of one SCRAM-SHA-512 login as name with pw; the server-first
 * message into sf. */
static int scram_login(const char *name, const char *pw, char *sf, size_t sflen, char *msg)
{
	kn_sasl_env e = env_all();
	kn_sasl *x = kn_sasl_new();
	ck_assert_int_eq(kn_sasl_handshake(x, &e, 1, "SCRAM-SHA-512", 13), KERR_NONE);
	char cf[200], *out;
	snprintf(cf, sizeof(cf), "n,,n=%s,r=clientnonce123", name);
	ck_assert_int_eq(step(x, &e, cf, &out, msg), 0);
	snprintf(sf, sflen, "%s", out);
	char *fin = client_final(KB_SCRAM_SHA512, cf + 3, out, pw);
	free(out);
	int rc = step(x, &e, fin, &out, msg);
	if (rc == 1) {
		ck_assert(strncmp(out, "v=", 2) == 0);
		ck_assert_str_eq(x->user, name);
	} else {
		ck_assert(x->close_after);
	}
	free(fin);
	free(out);
	kn_sasl_free(x);
	return rc;
}

START_TEST(scram512_and_no_enumeration)
{
	uint8_t salt[32];
	memset(salt, 3, sizeof(salt));
	memset(&the_user, 0, sizeof(the_user));
	set_user("alice", "s3cret", KB_SCRAM_SHA512, salt, sizeof(salt), 4096);
	char sf[400], sf2[400], m1[300], m2[300], m3[300];
	ck_assert_int_eq(scram_login("alice", "s3cret", sf, sizeof(sf), m1), 1);
	ck_assert_int_eq(scram_login("alice", "wrong", sf, sizeof(sf), m1), -KERR_SASL_AUTHENTICATION_FAILED);
	ck_assert_int_eq(scram_login("mallory", "s3cret", sf, sizeof(sf), m2), -KERR_SASL_AUTHENTICATION_FAILED);
	ck_assert_str_eq(m1, m2);
	/* The unknown user's salt and iterations are the same each time. */
	ck_assert_int_eq(scram_login("mallory", "x", sf2, sizeof(sf2), m3), -KERR_SASL_AUTHENTICATION_FAILED);
	ck_assert_str_eq(strstr(sf, ",s="), strstr(sf2, ",s="));
	/* alice has no SCRAM-SHA-256 credential: fails like an unknown user. */
	kn_sasl_env e = env_all();
	kn_sasl *x = kn_sasl_new();
	kn_sasl_handshake(x, &e, 1, "SCRAM-SHA-256", 13);
	char *out;
	ck_assert_int_eq(step(x, &e, "n,,n=alice,r=abc", &out, m3), 0);
	free(out);
	kn_sasl_free(x);
}
END_TEST

START_TEST(plain_hostile)
{
	static const struct {
		const char *m;
		size_t len;
		int ok;
	} v[] = {
		{"\0alice\0pw", 9, 1},
		{"alice\0alice\0pw", 14, 1},
		{"", 0, 0},
		{"alice", 5, 0},
		{"\0alice", 6, 0},
		{"\0alice\0", 7, 0},       /* empty password */
		{"\0\0pw", 4, 0},          /* empty user */
		{"\0a\0b\0c", 6, 0},       /* three NULs */
		{"\0a\0b\0", 5, 0},
		{"\0\0\0", 3, 0},
	};
	char why[100];
	kn_plain p;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		ck_assert_msg((kn_sasl_plain_parse((const uint8_t *)v[i].m, v[i].len, &p, why, sizeof(why)) == 0) == v[i].ok,
			      "case %zu", i);
	ck_assert_int_eq(kn_sasl_plain_parse((const uint8_t *)"\0alice\0pw", 9, &p, why, sizeof(why)), 0);
	ck_assert(p.user_len == 5 && memcmp(p.user, "alice", 5) == 0 && p.pass_len == 2 && p.authzid_len == 0);
	uint8_t big[1400];
	memset(big, 'a', sizeof(big));
	big[0] = 0;
	big[300] = 0;
	ck_assert_int_eq(kn_sasl_plain_parse(big, sizeof(big), &p, why, sizeof(why)), -EINVAL); /* 299-byte name */
	big[0] = 'a';
	big[100] = 0;
	ck_assert_int_eq(kn_sasl_plain_parse(big + 100, 1300, &p, why, sizeof(why)), -EINVAL); /* 1099-byte password */
	ck_assert_int_eq(kn_sasl_plain_parse(big + 100, 1000, &p, why, sizeof(why)), 0);      /* 799 bytes: fine */
	big[0] = 0;
	big[350] = 0;
	ck_assert_int_eq(kn_sasl_plain_parse(big, sizeof(big), &p, why, sizeof(why)), -EINVAL); /* three NULs */
}
END_TEST

static int plain_login(const char *tok, size_t len, char *msg)
{
	kn_sasl_env e = env_all();
	kn_sasl *x = kn_sasl_new();
	ck_assert_int_eq(kn_sasl_handshake(x, &e, 0, "PLAIN", 5), KERR_NONE);
	ck_assert(x->raw);
	uint8_t *out = NULL;
	size_t ol = 0;
	int rc = kn_sasl_step(x, &e, (const uint8_t *)tok, len, &out, &ol, msg, 300);
	ck_assert(ol == 0 && !out);
	ck_assert(rc == 1 || x->close_after);
	kn_sasl_free(x);
	return rc;
}

START_TEST(plain_logins)
{
	uint8_t salt[32] = {1};
	memset(&the_user, 0, sizeof(the_user));
	set_user("bob", "hunter2", KB_SCRAM_SHA256, salt, sizeof(salt), 4096);
	char m1[300], m2[300], m3[300];
	ck_assert_int_eq(plain_login("\0bob\0hunter2", 12, m1), 1);
	ck_assert_int_eq(plain_login("bob\0bob\0hunter2", 15, m1), 1);
	ck_assert_int_eq(plain_login("\0bob\0hunter3", 12, m1), -KERR_SASL_AUTHENTICATION_FAILED);
	ck_assert_int_eq(plain_login("\0eve\0hunter2", 12, m2), -KERR_SASL_AUTHENTICATION_FAILED);
	ck_assert_str_eq(m1, m2);
	ck_assert_int_eq(plain_login("eve\0bob\0hunter2", 15, m3), -KERR_SASL_AUTHENTICATION_FAILED);
	ck_assert(strstr(m3, "authorization id"));
	ck_assert_int_eq(plain_login("\0bob\0hunter2\0", 13, m3), -KERR_SASL_AUTHENTICATION_FAILED);
	ck_assert_int_eq(plain_login("\0b\x01ob\0hunter2", 13, m3), -KERR_SASL_AUTHENTICATION_FAILED);
}
END_TEST

START_TEST(scram_malformed)
{
	static const char *const first[] = {
		"", "x", "p=tls-unique,,n=a,r=b", "n,,", "n,,m=ext,n=a,r=b", "n,,r=b", "n,,n=a", "n,,n=a,r=",
		"n,,n=a,r=b c", "n,,n=a=ZZ,r=b", "n,a=bob,n=alice,r=x", "n,,n=a,r=b,tokenauth=true", "n,,n=,r=b",
		"y", "n,,n=a,r=b,junk",
	};
	kn_sasl_env e = env_all();
	for (size_t i = 0; i < sizeof(first) / sizeof(first[0]); i++) {
		kn_sasl *x = kn_sasl_new();
		kn_sasl_handshake(x, &e, 1, "SCRAM-SHA-256", 13);
		char *out, msg[300];
		ck_assert_msg(step(x, &e, first[i], &out, msg) == -KERR_SASL_AUTHENTICATION_FAILED, "first %zu", i);
		ck_assert(x->close_after);
		free(out);
		kn_sasl_free(x);
	}
	static const char *const final[] = {
		"", "c=biws", "c=biws,r=cn", "c=eSws,r=cnSN,p=AAAA", "c=biws,r=cnXX,p=AAAA", "c=biws,r=cnSN,p=AAAA",
		"c=biws,r=cnSN,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=,x=1", "r=cnSN,c=biws,p=AAAA",
		"c=biws,r=cnSN,p=!!!!",
	};
	e.snonce = "SN";
	for (size_t i = 0; i < sizeof(final) / sizeof(final[0]); i++) {
		kn_sasl *x = kn_sasl_new();
		kn_sasl_handshake(x, &e, 1, "SCRAM-SHA-256", 13);
		char *out, msg[300];
		ck_assert_int_eq(step(x, &e, "n,,n=user,r=cn", &out, msg), 0);
		free(out);
		ck_assert_msg(step(x, &e, final[i], &out, msg) == -KERR_SASL_AUTHENTICATION_FAILED, "final %zu", i);
		free(out);
		kn_sasl_free(x);
	}
}
END_TEST

START_TEST(handshake_rules)
{
	kn_sasl_env e = env_all();
	e.enabled[KN_MECH_PLAIN] = 0;
	kn_sasl *x = kn_sasl_new();
	ck_assert_int_eq(kn_sasl_handshake(x, &e, 1, "PLAIN", 5), KERR_UNSUPPORTED_SASL_MECHANISM);
	ck_assert(x->close_after);
	kn_sasl_free(x);
	x = kn_sasl_new();
	ck_assert_int_eq(kn_sasl_handshake(x, &e, 1, "GSSAPI", 6), KERR_UNSUPPORTED_SASL_MECHANISM);
	kn_sasl_free(x);
	/* SaslAuthenticate before any handshake, and two handshakes. */
	x = kn_sasl_new();
	char *out, msg[300];
	ck_assert_int_eq(step(x, &e, "n,,n=a,r=b", &out, msg), -KERR_ILLEGAL_SASL_STATE);
	free(out);
	kn_sasl_free(x);
	x = kn_sasl_new();
	ck_assert_int_eq(kn_sasl_handshake(x, &e, 1, "SCRAM-SHA-256", 13), KERR_NONE);
	ck_assert_int_eq(kn_sasl_handshake(x, &e, 1, "SCRAM-SHA-256", 13), KERR_ILLEGAL_SASL_STATE);
	kn_sasl_free(x);
	/* Re-authentication: v1 and the same mechanism only, and the same user. */
	e.enabled[KN_MECH_PLAIN] = 1;
	uint8_t salt[16] = {9};
	memset(&the_user, 0, sizeof(the_user));
	set_user("carol", "pw", KB_SCRAM_SHA512, salt, sizeof(salt), 4096);
	x = kn_sasl_new();
	kn_sasl_handshake(x, &e, 1, "PLAIN", 5);
	uint8_t *o;
	size_t ol;
	ck_assert_int_eq(kn_sasl_step(x, &e, (const uint8_t *)"\0carol\0pw", 9, &o, &ol, msg, sizeof(msg)), 1);
	ck_assert_int_eq(kn_sasl_handshake(x, &e, 0, "PLAIN", 5), KERR_ILLEGAL_SASL_STATE);
	x->close_after = 0;
	ck_assert_int_eq(kn_sasl_handshake(x, &e, 1, "SCRAM-SHA-512", 13), KERR_ILLEGAL_SASL_STATE);
	x->close_after = 0;
	ck_assert_int_eq(kn_sasl_handshake(x, &e, 1, "PLAIN", 5), KERR_NONE);
	ck_assert(x->reauth);
	ck_assert_int_eq(kn_sasl_step(x, &e, (const uint8_t *)"\0carol\0pw", 9, &o, &ol, msg, sizeof(msg)), 1);
	ck_assert(!x->reauth && x->state == KN_SASL_DONE);
	/* Another principal on re-authentication closes. */
	snprintf(the_user.name, sizeof(the_user.name), "dave");
	ck_assert_int_eq(kn_sasl_handshake(x, &e, 1, "PLAIN", 5), KERR_NONE);
	ck_assert_int_eq(kn_sasl_step(x, &e, (const uint8_t *)"\0dave\0pw", 8, &o, &ol, msg, sizeof(msg)),
			 -KERR_SASL_AUTHENTICATION_FAILED);
	ck_assert(x->close_after);
	kn_sasl_free(x);
}
END_TEST

START_TEST(cut_in_the_middle)
{
	kn_sasl_env e = env_all();
	kn_sasl *x = kn_sasl_new();
	kn_sasl_handshake(x, &e, 1, "SCRAM-SHA-512", 13);
	char *out, msg[300];
	ck_assert_int_eq(step(x, &e, "n,,n=someone,r=nonce", &out, msg), 0);
	free(out);
	ck_assert_ptr_nonnull(x->scram);
	kn_sasl_free(x); /* the connection closed here: ASan finds any leak */
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){.suite = "sasl", .timeout = 60},
			  KTEST_LIST(rfc7677_vector, scram512_and_no_enumeration, plain_hostile, plain_logins,
				     scram_malformed, handshake_rules, cut_in_the_middle));
}
