/*
 * tls.c — TLS on the SSL listeners' connections, with OpenSSL, on the loop.
 *
 * OpenSSL owns the connection's non-blocking socket (SSL_set_fd): the
 * handshake, SSL_read and SSL_write are called from the poll callbacks and
 * never wait; what they would wait for (SSL_ERROR_WANT_READ/WRITE) becomes
 * EAGAIN for the caller and the poll events to wait on.  Each callback does
 * bounded work: one handshake step, or the read and send budgets of
 * server_int.h counted in plaintext bytes.  Records OpenSSL has already taken
 * off the socket and decrypted, but not read yet, are not seen by epoll, so
 * conn.c reads them from a timer of 0 (kn__tls_pending).
 *
 * A handshake has kaas.ssl.handshake.timeout.ms from the accept to finish (the
 * connection's idle timer stands for it).  A client that speaks plaintext
 * here fails the handshake and is closed with OpenSSL's reason logged.
 *
 * The client certificate's subject, in RFC 2253 form as Kafka's default
 * principal builder writes it (Java's X500Principal.getName(): the whole
 * DN, last RDN first, UTF-8 unescaped, attributes without a keyword as
 * OID=#hex), is the connection's principal: User:O=example,CN=alice.  On
 * an SSL listener ssl.principal.mapping.rules (KIP-371, kaas/core/sslmap.h)
 * maps it first: User:alice; a certificate no rule maps is refused, as Kafka
 * refuses it.  On SASL_SSL the principal is SASL's, the rules do not apply.
 *
 * Fetch: with kernel TLS (SSL_OP_ENABLE_KTLS, and the kernel's `tls` upper
 * layer protocol), the segment ranges go out by SSL_sendfile as plaintext
 * connections send them by sendfile(2).  Without it they are read into the
 * loop's scratch buffer (pread, at most SCRATCH_SIZE at a time, like
 * sendfile reading the page cache on the loop) and written through SSL_write.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "kaas/core/sslmap.h"
#include "kaas/net/server_int.h"
#include "util/log.h"

struct kn_tls {
	SSL_CTX *ctx;
	char *password; /* ssl.key.password, for the PEM callback */
	kb_sslmap *map; /* ssl.principal.mapping.rules */
	int map_default; /* the rules are DEFAULT alone: the DN as it is */
};

static void ossl_reason(char *out, size_t len)
{
	unsigned long e = ERR_peek_last_error();
	if (e)
		ERR_error_string_n(e, out, len);
	else
		snprintf(out, len, "(no OpenSSL reason)");
	ERR_clear_error();
}

static int fail(char *err, size_t errlen, const char *what, const char *arg)
{
	char why[256];
	ossl_reason(why, sizeof(why));
	snprintf(err, errlen, "%s%s%s: %s", what, arg ? " " : "", arg ? arg : "", why);
	return -EINVAL;
}

static int pem_password(char *buf, int size, int rwflag, void *u)
{
	(void)rwflag;
	const char *p = u;
	if (!p)
		return 0;
	int n = (int)strlen(p);
	if (n > size)
		return 0;
	memcpy(buf, p, (size_t)n);
	return n;
}

/* ssl.enabled.protocols: TLSv1.2 and/or TLSv1.3; anything older is refused
 * by name (Kafka's default has been TLSv1.2,TLSv1.3 since 2.6). */
static int set_protocols(SSL_CTX *ctx, const char *list, char *err, size_t errlen)
{
	int lo = 0, hi = 0;
	char buf[KB_CFG_STR];
	snprintf(buf, sizeof(buf), "%s", list);
	for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		int v;
		if (strcmp(t, "TLSv1.2") == 0)
			v = TLS1_2_VERSION;
		else if (strcmp(t, "TLSv1.3") == 0)
			v = TLS1_3_VERSION;
		else {
			snprintf(err, errlen, "ssl.enabled.protocols: '%s' is not supported (TLSv1.2, TLSv1.3)", t);
			return -EINVAL;
		}
		lo = !lo || v < lo ? v : lo;
		hi = v > hi ? v : hi;
	}
	if (!lo) {
		snprintf(err, errlen, "ssl.enabled.protocols: empty (TLSv1.2, TLSv1.3)");
		return -EINVAL;
	}
	if (!SSL_CTX_set_min_proto_version(ctx, lo) || !SSL_CTX_set_max_proto_version(ctx, hi))
		return fail(err, errlen, "ssl.enabled.protocols", list);
	return 0;
}

/* ssl.cipher.suites: Kafka takes IANA names (TLS_ECDHE_RSA_WITH_...); OpenSSL
 * names are accepted too.  TLS 1.3 suites go to SSL_CTX_set_ciphersuites. */
static int set_ciphers(SSL_CTX *ctx, const char *list, char *err, size_t errlen)
{
	if (!*list)
		return 0;
	char buf[KB_CFG_STR], v12[KB_CFG_STR] = "", v13[KB_CFG_STR] = "";
	snprintf(buf, sizeof(buf), "%s", list);
	SSL *probe = SSL_new(ctx);
	if (!probe)
		return fail(err, errlen, "ssl.cipher.suites", NULL);
	SSL_set_cipher_list(probe, "ALL:COMPLEMENTOFALL");
	STACK_OF(SSL_CIPHER) *all = SSL_get_ciphers(probe);
	int rc = 0;
	for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
		const SSL_CIPHER *found = NULL;
		for (int i = 0; all && i < sk_SSL_CIPHER_num(all) && !found; i++) {
			const SSL_CIPHER *c = sk_SSL_CIPHER_value(all, i);
			if (strcmp(SSL_CIPHER_get_name(c), t) == 0 || strcmp(SSL_CIPHER_standard_name(c), t) == 0)
				found = c;
		}
		if (!found) {
			snprintf(err, errlen, "ssl.cipher.suites: unknown cipher suite '%s'", t);
			rc = -EINVAL;
			break;
		}
		char *dst = SSL_CIPHER_get_protocol_id(found) >> 8 == 0x13 ? v13 : v12;
		size_t dl = strlen(dst);
		snprintf(dst + dl, KB_CFG_STR - dl, "%s%s", dl ? ":" : "", SSL_CIPHER_get_name(found));
	}
	SSL_free(probe);
	if (rc)
		return rc;
	/* Naming suites of one version only leaves the other's defaults alone
	 * (Kafka's JSSE would disable it; say so in the docs). */
	if (*v12 && !SSL_CTX_set_cipher_list(ctx, v12))
		return fail(err, errlen, "ssl.cipher.suites", list);
	if (*v13 && !SSL_CTX_set_ciphersuites(ctx, v13))
		return fail(err, errlen, "ssl.cipher.suites", list);
	return 0;
}

static int load_identity(SSL_CTX *ctx, const kb_config *cfg, char *err, size_t errlen)
{
	const char *cert = cfg->ssl_certificate_location, *key = cfg->ssl_key_location;
	if (cfg->ssl_keystore_location[0]) {
		if (*cert || *key) {
			snprintf(err, errlen, "ssl.keystore.location and ssl.certificate.location/ssl.key.location "
				 "are alternatives: set one");
			return -EINVAL;
		}
		cert = key = cfg->ssl_keystore_location;
	} else if (!*cert || !*key) {
		snprintf(err, errlen, "an SSL listener needs ssl.keystore.location (PEM with the key and the "
			 "certificate chain) or both ssl.certificate.location and ssl.key.location");
		return -EINVAL;
	}
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
		return fail(err, errlen, cfg->ssl_keystore_location[0] ? "ssl.keystore.location" :
			    "ssl.certificate.location", cert);
	if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
		return fail(err, errlen, cfg->ssl_keystore_location[0] ? "ssl.keystore.location (private key)" :
			    "ssl.key.location", key);
	if (SSL_CTX_check_private_key(ctx) != 1)
		return fail(err, errlen, "the private key does not match the certificate of", cert);
	return 0;
}

static int load_trust(SSL_CTX *ctx, const kb_config *cfg, char *err, size_t errlen)
{
	const char *ts = cfg->ssl_truststore_location;
	int mode = SSL_VERIFY_NONE;
	if (cfg->ssl_client_auth != KB_SSL_AUTH_NONE) {
		if (!*ts) {
			snprintf(err, errlen, "ssl.client.auth=%s needs ssl.truststore.location (PEM CA bundle)",
				 cfg->ssl_client_auth == KB_SSL_AUTH_REQUIRED ? "required" : "requested");
			return -EINVAL;
		}
		mode = SSL_VERIFY_PEER;
		if (cfg->ssl_client_auth == KB_SSL_AUTH_REQUIRED)
			mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
	}
	if (*ts) {
		if (SSL_CTX_load_verify_locations(ctx, ts, NULL) != 1)
			return fail(err, errlen, "ssl.truststore.location", ts);
		STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ts);
		if (!names)
			return fail(err, errlen, "ssl.truststore.location: no CA certificate in", ts);
		SSL_CTX_set_client_CA_list(ctx, names);
	}
	SSL_CTX_set_verify(ctx, mode, NULL);
	return 0;
}

int kn__tls_create(const kb_config *cfg, kn_tls **out, char *err, size_t errlen)
{
	int rc = -ENOMEM;
	kn_tls *t = calloc(1, sizeof(*t));
	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	t->ctx = SSL_CTX_new(TLS_server_method());
	if (!t->ctx) {
		rc = fail(err, errlen, "TLS context", NULL);
		goto out;
	}
	/* No renegotiation (a client could make the broker do handshakes at
	 * will); a peer's EOF without close_notify is an EOF, as Kafka's. */
	uint64_t opts = SSL_OP_NO_RENEGOTIATION | SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_CIPHER_SERVER_PREFERENCE;
#ifdef SSL_OP_ENABLE_KTLS
	opts |= SSL_OP_ENABLE_KTLS;
#endif
	SSL_CTX_set_options(t->ctx, opts);
	SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
				      SSL_MODE_RELEASE_BUFFERS);
	static const unsigned char sid[] = "kaas";
	SSL_CTX_set_session_id_context(t->ctx, sid, sizeof(sid) - 1);
	if (cfg->ssl_key_password[0]) {
		t->password = strdup(cfg->ssl_key_password);
		if (!t->password) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
	}
	SSL_CTX_set_default_passwd_cb(t->ctx, pem_password);
	SSL_CTX_set_default_passwd_cb_userdata(t->ctx, t->password);
	rc = set_protocols(t->ctx, cfg->ssl_enabled_protocols, err, errlen);
	if (!rc)
		rc = set_ciphers(t->ctx, cfg->ssl_cipher_suites, err, errlen);
	if (!rc)
		rc = load_identity(t->ctx, cfg, err, errlen);
	if (!rc)
		rc = load_trust(t->ctx, cfg, err, errlen);
	if (!rc) {
		char why[600];
		rc = kb_sslmap_parse(cfg->ssl_principal_mapping_rules, &t->map, why, sizeof(why));
		if (rc)
			snprintf(err, errlen, "ssl.principal.mapping.rules: %s", why);
		else
			t->map_default = strcmp(cfg->ssl_principal_mapping_rules, "DEFAULT") == 0;
	}
	if (!rc) {
		*out = t;
		KLOG_INFO("server", "TLS: %s, protocols %s, ssl.client.auth=%s, kernel TLS %s", OpenSSL_version(OPENSSL_VERSION),
			  cfg->ssl_enabled_protocols,
			  cfg->ssl_client_auth == KB_SSL_AUTH_REQUIRED    ? "required"
			  : cfg->ssl_client_auth == KB_SSL_AUTH_REQUESTED ? "requested"
									   : "none",
#ifdef OPENSSL_NO_KTLS
			  "not built into this OpenSSL"
#else
			  "asked for (used where the kernel offers it)"
#endif
		);
	}
out:
	if (rc)
		kn__tls_destroy(t);
	return rc;
}

void kn__tls_destroy(kn_tls *t)
{
	if (!t)
		return;
	SSL_CTX_free(t->ctx);
	kb_sslmap_free(t->map);
	if (t->password)
		OPENSSL_cleanse(t->password, strlen(t->password));
	free(t->password);
	free(t);
}

int kn__tls_conn_start(conn *c)
{
	c->ssl = SSL_new(c->lst->tls->ctx);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
		ERR_clear_error();
		return -ENOMEM;
	}
	SSL_set_accept_state(c->ssl);
	return 0;
}

void kn__tls_conn_free(conn *c)
{
	/* The descriptor is closed already: SSL_free only frees memory. */
	SSL_free(c->ssl);
	c->ssl = NULL;
}

/* The keywords Java's X500Principal.getName() (RFC 2253) writes; every other
 * attribute it writes as OID=#hex of the value's DER. */
static const char *rfc2253_keyword(int nid)
{
	switch (nid) {
	case NID_commonName: return "CN";
	case NID_countryName: return "C";
	case NID_localityName: return "L";
	case NID_stateOrProvinceName: return "ST";
	case NID_organizationName: return "O";
	case NID_organizationalUnitName: return "OU";
	case NID_streetAddress: return "STREET";
	case NID_domainComponent: return "DC";
	case NID_userId: return "UID";
	default: return NULL;
	}
}

typedef struct dn_out {
	char *p;
	size_t len, cap;
	int overflow;
} dn_out;

static void dn_put(dn_out *o, const char *s, size_t n)
{
	if (o->len + n >= o->cap) {
		o->overflow = 1;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = 0;
}

/* One attribute value as RFC 2253 text: UTF-8 as it is, the specials
 * escaped with a backslash, a leading '#' or space and a trailing space
 * too, control characters as \XX. */
static void dn_value(dn_out *o, const unsigned char *v, int n)
{
	for (int i = 0; i < n; i++) {
		unsigned char ch = v[i];
		char esc[4];
		if (ch < 0x20 || ch == 0x7f) {
			snprintf(esc, sizeof(esc), "\\%02X", ch);
			dn_put(o, esc, 3);
			continue;
		}
		if (strchr(",+\"\\<>;", ch) || (i == 0 && (ch == '#' || ch == ' ')) || (i == n - 1 && ch == ' '))
			dn_put(o, "\\", 1);
		dn_put(o, (const char *)&ch, 1);
	}
}

/* The subject as Kafka's default principal builder (and
 * ssl.principal.mapping.rules=DEFAULT) gives it: X500Principal.getName(),
 * RFC 2253 -- the RDNs last to first, multi-valued ones joined by '+'. */
static int subject_dn(X509_NAME *name, char *out, size_t cap)
{
	dn_out o = {out, 0, cap, 0};
	out[0] = 0;
	int n = X509_NAME_entry_count(name), prev_set = -1;
	for (int i = n - 1; i >= 0; i--) {
		X509_NAME_ENTRY *e = X509_NAME_get_entry(name, i);
		ASN1_OBJECT *obj = X509_NAME_ENTRY_get_object(e);
		ASN1_STRING *val = X509_NAME_ENTRY_get_data(e);
		int set = X509_NAME_ENTRY_set(e);
		if (i != n - 1)
			dn_put(&o, set == prev_set ? "+" : ",", 1);
		prev_set = set;
		const char *kw = rfc2253_keyword(OBJ_obj2nid(obj));
		unsigned char *utf8 = NULL;
		int ulen = kw ? ASN1_STRING_to_UTF8(&utf8, val) : -1;
		if (kw && ulen >= 0) {
			dn_put(&o, kw, strlen(kw));
			dn_put(&o, "=", 1);
			dn_value(&o, utf8, ulen);
			OPENSSL_free(utf8);
			continue;
		}
		OPENSSL_free(utf8);
		char oid[80];
		if (OBJ_obj2txt(oid, sizeof(oid), obj, 1) <= 0)
			return -EINVAL;
		dn_put(&o, oid, strlen(oid));
		dn_put(&o, "=#", 2);
		ASN1_TYPE *t = ASN1_TYPE_new();
		unsigned char *der = NULL;
		int dl = -1;
		if (t && ASN1_TYPE_set1(t, ASN1_STRING_type(val), val) == 1)
			dl = i2d_ASN1_TYPE(t, &der);
		ASN1_TYPE_free(t);
		if (dl < 0)
			return -EINVAL;
		for (int k = 0; k < dl; k++) {
			char h[3];
			snprintf(h, sizeof(h), "%02x", der[k]);
			dn_put(&o, h, 2);
		}
		OPENSSL_free(der);
	}
	return o.overflow ? -ENAMETOOLONG : 0;
}

/* 0, or -1 when ssl.principal.mapping.rules refuse the certificate (the
 * caller closes the connection). */
static int set_principal(conn *c)
{
	X509 *peer = SSL_get1_peer_certificate(c->ssl);
	if (!peer)
		return 0;
	char dn[sizeof(c->principal) - 5];
	int rc = subject_dn(X509_get_subject_name(peer), dn, sizeof(dn));
	const kn_tls *t = c->lst->tls;
	if (rc == 0 && c->lst->cfg.protocol == KB_SEC_SSL && !t->map_default) {
		char name[sizeof(c->principal) - 5];
		int mr = kb_sslmap_apply(t->map, dn, name, sizeof(name));
		if (mr) {
			KLOG_INFO("server", "%s: client certificate %s on listener %s refused: %s", c->peer, dn,
				  c->lst->cfg.name, mr == -ENOENT ? "no rule of ssl.principal.mapping.rules applies to it"
				  : mr == -ENAMETOOLONG ? "ssl.principal.mapping.rules make a name too long"
							: "ssl.principal.mapping.rules: the pattern could not be matched");
			X509_free(peer);
			return -1;
		}
		KLOG_DEBUG("server", "%s: ssl.principal.mapping.rules map %s to %s", c->peer, dn, name);
		snprintf(c->principal, sizeof(c->principal), "User:%s", name);
	} else if (rc == 0) {
		snprintf(c->principal, sizeof(c->principal), "User:%s", dn);
	} else {
		/* Not ANONYMOUS, whose ACLs it would get: a user with no name,
		 * which no binding but User:* names. */
		snprintf(c->principal, sizeof(c->principal), "User:");
		KLOG_WARN("server", "%s: the client certificate's subject does not fit a principal (%s); "
				    "the connection is the unnamed User:", c->peer, strerror(-rc));
	}
	X509_free(peer);
	return 0;
}

int kn__tls_handshake(conn *c)
{
	ERR_clear_error();
	c->tls_rd_wants_write = 0;
	int r = SSL_do_handshake(c->ssl);
	if (r == 1) {
		c->tls_ready = 1;
		if (set_principal(c)) {
			kn__conn_close(c, "no principal for the client certificate");
			return -1;
		}
		c->tls_ktls_send = BIO_get_ktls_send(SSL_get_wbio(c->ssl));
		KLOG_DEBUG("server", "%s: TLS %s %s on listener %s, principal %s, kernel TLS send %s", c->peer,
			   SSL_get_version(c->ssl), SSL_get_cipher_name(c->ssl), c->lst->cfg.name, c->principal,
			   c->tls_ktls_send ? "on" : "off");
		return 1;
	}
	int e = SSL_get_error(c->ssl, r);
	if (e == SSL_ERROR_WANT_READ)
		return 0;
	if (e == SSL_ERROR_WANT_WRITE) {
		c->tls_rd_wants_write = 1;
		return 0;
	}
	char why[256];
	long vr = SSL_get_verify_result(c->ssl);
	int plain = ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_WRONG_VERSION_NUMBER ||
		    ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_HTTP_REQUEST;
	if (e == SSL_ERROR_SYSCALL && !ERR_peek_last_error())
		snprintf(why, sizeof(why), "%s", errno ? strerror(errno) : "the client closed the connection");
	else
		ossl_reason(why, sizeof(why));
	KLOG_INFO("server", "%s: TLS handshake on listener %s refused: %s%s%s%s", c->peer, c->lst->cfg.name, why,
		  plain ? " (not TLS: a plaintext client on an SSL listener?)" : "",
		  vr != X509_V_OK ? "; client certificate: " : "",
		  vr != X509_V_OK ? X509_verify_cert_error_string(vr) : "");
	kn__conn_close(c, "TLS handshake failed");
	return -1;
}

int kn__tls_pending(const conn *c)
{
	/* Decrypted bytes only: with read-ahead off OpenSSL takes no more off
	 * the socket than the record it decrypts, so an incomplete record
	 * (SSL_has_pending) waits for the socket, never for a timer. */
	return c->ssl && c->tls_ready && SSL_pending(c->ssl) > 0;
}

/* errno for an SSL_read/SSL_write that did not move bytes. */
static ssize_t ssl_err(conn *c, int r, int writing)
{
	int e = SSL_get_error(c->ssl, r);
	switch (e) {
	case SSL_ERROR_WANT_READ:
		if (writing)
			c->tls_wr_wants_read = 1;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		if (!writing)
			c->tls_rd_wants_write = 1;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN:
		if (writing) {
			errno = EPIPE;
			return -1;
		}
		return 0;
	case SSL_ERROR_SYSCALL:
		if (!ERR_peek_last_error()) {
			if (!errno) {
				if (!writing)
					return 0;
				errno = EPIPE;
			}
			return -1;
		}
		/* fall through */
	default: {
		char why[256];
		ossl_reason(why, sizeof(why));
		KLOG_INFO("server", "%s: TLS error on listener %s: %s", c->peer, c->lst->cfg.name, why);
		errno = EPROTO;
		return -1;
	}
	}
}

ssize_t kn__conn_read(conn *c, void *buf, size_t n)
{
	if (!c->ssl)
		return read(c->fd, buf, n);
	ERR_clear_error();
	errno = 0;
	int r = SSL_read(c->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
	if (r > 0)
		return r;
	return ssl_err(c, r, 0);
}

static ssize_t tls_write(conn *c, const void *buf, size_t n)
{
	ERR_clear_error();
	errno = 0;
	int r = SSL_write(c->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
	if (r > 0)
		return r;
	return ssl_err(c, r, 1);
}

/* Gathers iov[] from byte `skip` into the scratch buffer (SSL_write takes one
 * buffer).  A write that must wait is repeated later from the same byte with
 * at least as many bytes gathered, which is what OpenSSL asks of a retry
 * (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER lets the buffer be another). */
static size_t gather(conn *c, const struct iovec *iov, int niov, size_t skip)
{
	size_t n = 0;
	for (int i = 0; i < niov && n < SCRATCH_SIZE; i++) {
		size_t l = iov[i].iov_len;
		if (skip >= l) {
			skip -= l;
			continue;
		}
		size_t take = l - skip;
		if (take > SCRATCH_SIZE - n)
			take = SCRATCH_SIZE - n;
		memcpy(c->s->scratch + n, (const uint8_t *)iov[i].iov_base + skip, take);
		n += take;
		skip = 0;
	}
	return n;
}

ssize_t kn__conn_write(conn *c, const struct iovec *iov, int niov, size_t want)
{
	if (!c->ssl) {
		struct msghdr mh = {0};
		mh.msg_iov = (struct iovec *)iov;
		mh.msg_iovlen = (size_t)niov;
		return sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	c->tls_wr_wants_read = 0;
	size_t done = 0;
	while (done < want) {
		ssize_t k;
		if (niov == 1)
			k = tls_write(c, (const uint8_t *)iov[0].iov_base + done, want - done);
		else
			k = tls_write(c, c->s->scratch, gather(c, iov, niov, done));
		if (k < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)k;
	}
	return (ssize_t)done;
}

ssize_t kn__conn_sendfile(conn *c, int fd, off_t pos, size_t want)
{
	if (!c->ssl) {
		off_t p = pos;
		return sendfile(c->fd, fd, &p, want);
	}
	c->tls_wr_wants_read = 0;
	if (c->tls_ktls_send) {
		ERR_clear_error();
		errno = 0;
		ossl_ssize_t r = SSL_sendfile(c->ssl, fd, pos, want, 0);
		if (r >= 0)
			return r;
		return ssl_err(c, (int)r, 1);
	}
	size_t done = 0;
	while (done < want) {
		size_t chunk = want - done < SCRATCH_SIZE ? want - done : SCRATCH_SIZE;
		ssize_t n = pread(fd, c->s->scratch, chunk, pos + (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (done)
				return (ssize_t)done;
			return n;
		}
		ssize_t k = tls_write(c, c->s->scratch, (size_t)n);
		if (k < 0)
			return done ? (ssize_t)done : -1;
		done += (size_t)k;
		if (k < n)
			break;
	}
	return (ssize_t)done;
}

void kn__tls_close_notify(conn *c)
{
	if (c->ssl && c->tls_ready) {
		ERR_clear_error();
		SSL_shutdown(c->ssl); /* one try: the socket may be full, the FIN follows anyway */
		ERR_clear_error();
	}
}
