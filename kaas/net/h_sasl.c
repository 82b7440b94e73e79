/*
 * h_sasl.c — SASL on the wire: the SaslHandshake (v0-v1) and
 * SaslAuthenticate (v0-v2) handlers, the unframed tokens that follow a v0
 * handshake, and the loop's side: which requests a connection may send
 * before it is authenticated and after its session ended, and what a
 * finished step changes on the connection.
 *
 * As Kafka: before authentication a SASL listener serves ApiVersions,
 * SaslHandshake and SaslAuthenticate, and closes the connection on any
 * other request; frames are bounded by sasl.server.max.receive.size until
 * then.  A failed handshake or authentication is answered (where the
 * protocol has an answer) and the connection closed.  With
 * connections.max.reauth.ms (KIP-368) SaslAuthenticate v1+ tells the client
 * its session lifetime; a connection whose session ended is closed at its
 * next request unless that request begins a re-authentication.  On a
 * listener without SASL both APIs answer ILLEGAL_SASL_STATE.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "kaas/net/handlers.h"
#include "kaas/net/sasl.h"
#include "kaas/net/server_int.h"
#include "util/log.h"

/* ---- the broker's side of the exchange ------------------------------------------------ */

static int broker_lookup(void *arg, const char *name, kb_user *out, char *why, size_t whylen)
{
	kb_broker *b = arg;
	if (!b->cluster)
		return -ENOENT;
	return kb_users_get(b->cluster, name, out, why, whylen);
}

/* One SASL listener's exchange settings: lc is the broker's settings with
 * that listener's listener.name.<name>.* over them. */
int kn__sasl_env_create(kn_server *s, kn_listener *l, const kb_config *lc, char *err, size_t errlen)
{
	int rc = 0;
	char why[300];
	if (!s->sasl_secret_read) {
		if (s->b->cluster)
			rc = kb_users_secret(s->b->cluster, s->sasl_secret, why, sizeof(why));
		else if (RAND_bytes(s->sasl_secret, sizeof(s->sasl_secret)) != 1)
			rc = -EIO, snprintf(why, sizeof(why), "no random bytes from OpenSSL");
		if (rc) {
			snprintf(err, errlen, "SASL: the cluster directory's secret: %s", why);
			return rc;
		}
		s->sasl_secret_read = 1;
	}
	kn_sasl_env *env = calloc(1, sizeof(*env));
	if (!env) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (const char *p = lc->sasl_enabled_mechanisms; *p;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		int m = kn_sasl_mech_of(p, n);
		if (m >= 0)
			env->enabled[m] = 1;
		p = e ? e + 1 : p + n;
	}
	char reauth[160] = "";
	for (int m = 0; m < KN_MECH_N; m++) {
		int64_t own = lc->sasl_mech_reauth_ms[m];
		env->reauth_ms[m] = own >= 0 ? own : lc->connections_max_reauth_ms;
		if (own >= 0)
			snprintf(reauth + strlen(reauth), sizeof(reauth) - strlen(reauth), ", %s %lld ms",
				 kn_sasl_mech_name(m), (long long)own);
	}
	env->max_receive = lc->sasl_server_max_receive_size;
	memcpy(env->secret, s->sasl_secret, sizeof(env->secret));
	env->lookup = broker_lookup;
	env->lookup_arg = s->b;
	l->sasl_env = env;
	KLOG_INFO("server", "SASL on listener %s: mechanisms %s, connections.max.reauth.ms=%lld%s, "
		  "sasl.server.max.receive.size=%d, users in the cluster directory's %s/", l->cfg.name,
		  lc->sasl_enabled_mechanisms, (long long)lc->connections_max_reauth_ms, reauth,
		  (int)lc->sasl_server_max_receive_size, KB_USERS_DIR);
	return 0;
}

void kn__sasl_env_free(kn_listener *l)
{
	if (l->sasl_env)
		OPENSSL_cleanse(l->sasl_env, sizeof(*l->sasl_env));
	free(l->sasl_env);
	l->sasl_env = NULL;
}

/* ---- handlers (workers) ----------------------------------------------------------------- */

int kn_h_sasl_handshake(kb_req *req, kw_rd *body, kw_wr *resp)
{
	kw_str mech;
	KRD_STR(body, 0, &mech);
	const kn_sasl_env *env = req->sasl_env;
	int16_t err = KERR_ILLEGAL_SASL_STATE;
	if (req->sasl)
		err = (int16_t)kn_sasl_handshake(req->sasl, env, req->api_version, mech.len > 0 ? mech.s : "",
						 mech.len > 0 ? (size_t)mech.len : 0);
	kw_wr_i16(resp, err);
	int n = 0;
	for (int m = 0; env && m < KN_MECH_N; m++)
		n += env->enabled[m];
	kw_wr_array(resp, 0, n);
	for (int m = 0; env && m < KN_MECH_N; m++)
		if (env->enabled[m])
			kw_wr_str(resp, 0, kn_sasl_mech_name(m));
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}

int kn_h_sasl_authenticate(kb_req *req, kw_rd *body, kw_wr *resp)
{
	kb_req *r = req;
	int flex = req->flex;
	kw_bytes tok;
	KRD_BYTES(body, flex, &tok);
	KRD_TAGS(body, flex);
	uint8_t *out = NULL;
	size_t outlen = 0;
	char msg[300] = "";
	int rc;
	if (!r->sasl) {
		rc = -KERR_ILLEGAL_SASL_STATE;
		snprintf(msg, sizeof(msg), "SaslAuthenticate on a listener without SASL");
	} else if (r->sasl->raw) {
		rc = -KERR_ILLEGAL_SASL_STATE;
		snprintf(msg, sizeof(msg), "SaslAuthenticate after SaslHandshake v0, whose tokens are unframed");
		snprintf(r->sasl->fail_why, sizeof(r->sasl->fail_why), "%s", msg);
		r->sasl->close_after = 1;
	} else {
		rc = kn_sasl_step(r->sasl, r->sasl_env, tok.len > 0 ? tok.p : (const uint8_t *)"",
				  tok.len > 0 ? (size_t)tok.len : 0, &out, &outlen, msg, sizeof(msg));
	}
	kw_wr_i16(resp, (int16_t)(rc < 0 ? -rc : KERR_NONE));
	kw_wr_str(resp, flex, rc < 0 ? msg : NULL);
	kw_wr_bytes(resp, flex, out ? out : (const uint8_t *)"", (int32_t)outlen);
	if (req->api_version >= 1) { /* the session lifetime of this listener and mechanism */
		int64_t life = rc == 1 ? r->sasl_env->reauth_ms[r->sasl->mech] : 0;
		kw_wr_i64(resp, life > 0 ? life : 0);
	}
	kw_wr_tags(resp, flex);
	free(out);
	return KAAS_HANDLED;
err_parse:
	return -EBADMSG;
}

/* A token after SaslHandshake v0: the whole frame, answered by a frame of the
 * server's token alone (no header).  A failure has no answer: the
 * connection closes, as Kafka closes it. */
static int raw_token(kb_req *req, kw_rd *body, kw_wr *resp)
{
	uint8_t *out = NULL;
	size_t outlen = 0;
	char msg[300];
	int rc = kn_sasl_step(req->sasl, req->sasl_env, body->p, (size_t)(body->end - body->p), &out, &outlen, msg,
			      sizeof(msg));
	if (rc < 0)
		return KAAS_NO_RESPONSE;
	kw_wr_raw(resp, out, outlen);
	free(out);
	return KAAS_HANDLED;
}

static const kw_api raw_api = {KAAS_API_SASL_AUTHENTICATE, 0, 0, -1, "SASL token (unframed, SaslHandshake v0)",
			       raw_token};

/* ---- the loop's side ----------------------------------------------------------------------- */

int kn__sasl_gate(conn *c, sreq *r)
{
	if (r->unparsed) {
		r->unparsed = 0;
		if (c->sasl_raw) {
			r->raw = 1;
			r->api = &raw_api;
			r->pub.api_key = KAAS_API_SASL_AUTHENTICATE;
			r->pub.api_version = 0;
			r->pub.flex = 0;
			kw_rd_init(&r->body, r->frame, r->frame_len);
			return 0;
		}
		const char *why = kn__req_parse(c, r);
		if (why) {
			kn__conn_close(c, why);
			return -1;
		}
	}
	int16_t k = r->pub.api_key;
	if (!c->sasl_authed) {
		if (k == KAAS_API_API_VERSIONS || k == KAAS_API_SASL_HANDSHAKE || k == KAAS_API_SASL_AUTHENTICATE)
			return 0;
		KLOG_INFO("server", "%s: %s before SASL authentication on listener %s: closing (a client without SASL "
			  "settings?)", c->peer, r->api->name, c->lst->cfg.name);
		kn__conn_close(c, "a request before SASL authentication");
		return -1;
	}
	if (c->sasl_expiry_ms && uv_now(&c->s->loop) >= c->sasl_expiry_ms && !c->sasl_reauth &&
	    k != KAAS_API_SASL_HANDSHAKE) {
		KLOG_INFO("server", "%s: the SASL session of %s ended (connections.max.reauth.ms=%lld) without a "
			  "re-authentication: closing at its %s request", c->peer, c->principal,
			  (long long)c->lst->sasl_env->reauth_ms[c->sasl->mech], r->api->name);
		kn__conn_close(c, "SASL session expired");
		return -1;
	}
	return 0;
}

int kn__sasl_is_step(const sreq *r)
{
	return r->pub.sasl && (r->raw || r->pub.api_key == KAAS_API_SASL_HANDSHAKE ||
			   r->pub.api_key == KAAS_API_SASL_AUTHENTICATE);
}

void kn__sasl_applied(conn *c)
{
	kn_sasl *x = c->sasl;
	/* A refused first handshake chose no mechanism: its why names the one asked for. */
	const char *mech = x->state == KN_SASL_START ? "handshake" : kn_sasl_mech_name(x->mech);
	const char *lst = c->lst->cfg.name;
	if (x->just_authed) {
		x->just_authed = 0;
		int again = c->sasl_authed;
		c->sasl_authed = 1;
		snprintf(c->principal, sizeof(c->principal), "User:%s", x->user);
		int64_t ms = c->lst->sasl_env->reauth_ms[x->mech];
		c->sasl_expiry_ms = ms > 0 ? uv_now(&c->s->loop) + (uint64_t)ms : 0;
		KLOG_INFO("server", "%s: SASL %s %s with %s on listener %s%s", c->peer,
			  again ? "re-authenticated" : "authenticated", c->principal, mech, lst,
			  !again && c->sasl_raw ? " (unframed tokens)" : "");
	}
	c->sasl_raw = x->state == KN_SASL_AUTH && x->raw;
	c->sasl_reauth = x->state == KN_SASL_AUTH && x->reauth;
	if (x->close_after && !c->sasl_closing) {
		c->sasl_closing = 1;
		KLOG_INFO("server", "%s: SASL %s on listener %s failed: %s; closing the connection", c->peer, mech, lst,
			  x->fail_why[0] ? x->fail_why : "?");
		while (c->pend_head) { /* nothing after a failure is served */
			sreq *p = c->pend_head;
			c->pend_head = p->next;
			kn__req_free(p);
		}
		c->pend_tail = NULL;
	}
}
