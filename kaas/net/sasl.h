/*
 * sasl.h — SASL on the SASL_PLAINTEXT and SASL_SSL listeners: the
 * per-connection exchange (sasl.c), the SCRAM server of RFC 5802/7677
 * (scram.c) and the SaslHandshake/SaslAuthenticate handlers (h_sasl.c).
 *
 * The exchange itself knows no sockets: kn_sasl_step() takes a client token
 * and gives the server's answer, looking users up through kn_sasl_env, so
 * that unit tests drive it directly.  On the wire it runs in a handler, on a
 * worker; the loop reads its outcome once the handler has returned (no
 * handler of the connection runs then) and applies it to the connection:
 * authenticated, its principal, the session's end, close after the answer.
 */
#ifndef KAAS_NET_SASL_H
#define KAAS_NET_SASL_H

#include <stddef.h>
#include <stdint.h>

#include "kaas/core/users.h"

enum { KN_MECH_PLAIN, KN_MECH_SCRAM_SHA256, KN_MECH_SCRAM_SHA512, KN_MECH_N };

/* What an exchange needs from the broker: one per SASL listener, with
 * that listener's settings (listener.name.<name>.* over the broker's). */
typedef struct kn_sasl_env {
	int enabled[KN_MECH_N];     /* sasl.enabled.mechanisms */
	uint8_t secret[32];         /* kb_users_secret: decoys for unknown users */
	int64_t reauth_ms[KN_MECH_N]; /* [<mechanism>.]connections.max.reauth.ms (0: never) */
	int32_t max_receive;        /* sasl.server.max.receive.size */
	/* 0, -ENOENT (no such user) or another -errno with why */
	int (*lookup)(void *arg, const char *name, kb_user *out, char *why, size_t whylen);
	void *lookup_arg;
	const char *snonce;         /* tests only: the server nonce (RFC 7677's vector) */
} kn_sasl_env;

const char *kn_sasl_mech_name(int mech);
int kn_sasl_mech_of(const char *name, size_t len); /* -1 */

/* ---- PLAIN (RFC 4616) -------------------------------------------------------- */

/* [authzid] NUL authcid NUL passwd, each without NUL, authcid and passwd not
 * empty, names up to 255 bytes, the password up to 1024.  Slices of msg.  0 or -EINVAL with why. */
typedef struct kn_plain {
	const char *authzid, *user, *pass;
	size_t authzid_len, user_len, pass_len;
} kn_plain;
int kn_sasl_plain_parse(const uint8_t *msg, size_t len, kn_plain *out, char *why, size_t whylen);

/* ---- SCRAM (scram.c) ------------------------------------------------------------ */

typedef struct kn_scram kn_scram;
/* The client-first-message: finds the user's credential (or a decoy for an
 * unknown one) and answers the server-first-message (malloc'd into out). */
int kn_scram_first(kn_scram **xp, int scram_mech, const kn_sasl_env *env, const uint8_t *msg, size_t len,
		   uint8_t **out, size_t *outlen, char *why, size_t whylen);
/* The client-final-message: 1 and the server-final-message when the proof
 * holds; -EACCES when it does not (or the user is unknown); -EINVAL
 * malformed.  The user name is copied into user. */
int kn_scram_final(kn_scram *x, const uint8_t *msg, size_t len, uint8_t **out, size_t *outlen, char *user,
		   size_t userlen, char *why, size_t whylen);
void kn_scram_free(kn_scram *x); /* NULL-safe */

/* ---- the exchange ------------------------------------------------------------------ */

enum { KN_SASL_START, KN_SASL_AUTH, KN_SASL_DONE };

typedef struct kn_sasl {
	int state;            /* KN_SASL_* */
	int mech;             /* chosen by SaslHandshake */
	int raw;              /* SaslHandshake v0: tokens unframed */
	int reauth;           /* KIP-368: a re-authentication is under way */
	int first_mech;       /* the mechanism of the first authentication */
	char user[KB_USER_MAX + 1]; /* authenticated */
	kn_scram *scram;      /* a SCRAM exchange in progress */
	/* outcome of the last step, for the loop */
	int just_authed;
	int close_after;      /* answer, then close (Kafka closes on a failure) */
	char fail_why[400];   /* for the broker's log, never the client */
} kn_sasl;

kn_sasl *kn_sasl_new(void);
void kn_sasl_free(kn_sasl *x); /* NULL-safe; frees an exchange cut in the middle */

/* SaslHandshake: the mechanism the client asks for.  A Kafka error code;
 * anything but NONE sets close_after (except on a non-SASL listener). */
int kn_sasl_handshake(kn_sasl *x, const kn_sasl_env *env, int version, const char *mech, size_t len);

/* One token of the exchange.  Returns 0 (out holds the next challenge), 1
 * (authenticated; out holds the last server message, possibly empty), or
 * a Kafka error code < 0 negated: -KERR_SASL_AUTHENTICATION_FAILED with
 * msg for the client (the same for a wrong password and an unknown user),
 * -KERR_ILLEGAL_SASL_STATE.  Failures set close_after.  out is malloc'd
 * (or NULL when empty). */
int kn_sasl_step(kn_sasl *x, const kn_sasl_env *env, const uint8_t *tok, size_t len, uint8_t **out,
		 size_t *outlen, char *msg, size_t msglen);

#endif
