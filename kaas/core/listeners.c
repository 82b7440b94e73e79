/*
 * listeners.c — Kafka's listener settings: `listeners` and
 * `advertised.listeners` (NAME://HOST:PORT lists) and
 * `listener.security.protocol.map` (NAME:PROTOCOL), resolved into one row per
 * listener with its security protocol and advertised endpoint.  The server
 * binds one socket per row and starts TLS (SSL, SASL_SSL) and SASL
 * (SASL_PLAINTEXT, SASL_SSL) on its connections.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/core/listeners.h"

static const char *const proto_names[] = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"};

const char *kb_security_protocol_name(int protocol)
{
	return protocol >= 0 && protocol < 4 ? proto_names[protocol] : "?";
}

static int proto_of(const char *name, size_t len)
{
	for (int i = 0; i < 4; i++)
		if (strlen(proto_names[i]) == len && strncmp(proto_names[i], name, len) == 0)
			return i;
	return -1;
}

static int why_(char *why, size_t whylen, const char *fmt, const char *a, size_t alen)
{
	snprintf(why, whylen, fmt, (int)alen, a);
	return -1;
}

/* One NAME://HOST:PORT or HOST:PORT in s[0..len). */
static int parse_entry(const char *s, size_t len, kb_listener *l, char *why, size_t whylen)
{
	memset(l, 0, sizeof(*l));
	const char *sep = NULL;
	for (size_t i = 0; i + 2 < len; i++)
		if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') {
			sep = s + i;
			break;
		}
	const char *hp = s;
	size_t hplen = len;
	if (sep) {
		size_t nl = (size_t)(sep - s);
		if (nl == 0 || nl >= sizeof(l->name))
			return why_(why, whylen, "'%.*s': a listener name of 1 to 63 characters", s, len);
		for (size_t i = 0; i < nl; i++)
			if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '-'))
				return why_(why, whylen, "'%.*s': a listener name is letters, digits, '_' and '-'", s, len);
		memcpy(l->name, s, nl);
		hp = sep + 3;
		hplen = len - nl - 3;
	} else {
		snprintf(l->name, sizeof(l->name), "PLAINTEXT");
	}
	l->protocol = proto_of(l->name, strlen(l->name));
	const char *colon = NULL;
	for (size_t i = 0; i < hplen; i++)
		if (hp[i] == ':')
			colon = hp + i;
	if (!colon)
		return why_(why, whylen, "'%.*s': expected NAME://HOST:PORT or HOST:PORT", s, len);
	const char *h = hp;
	size_t hl = (size_t)(colon - hp);
	if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
		h++;
		hl -= 2;
	}
	if (hl >= sizeof(l->host))
		return why_(why, whylen, "'%.*s': host name too long", s, len);
	for (size_t i = 0; i < hl; i++)
		if (!(isalnum((unsigned char)h[i]) || strchr(".-_:", h[i])))
			return why_(why, whylen, "'%.*s': bad character in the host", s, len);
	size_t pl = hplen - hl - (size_t)(h != hp ? 2 : 0) - 1;
	const char *p = colon + 1;
	if (pl == 0 || pl > 5)
		return why_(why, whylen, "'%.*s': a port from 0 to 65535", s, len);
	long port = 0;
	for (size_t i = 0; i < pl; i++) {
		if (!isdigit((unsigned char)p[i]))
			return why_(why, whylen, "'%.*s': a port from 0 to 65535", s, len);
		port = port * 10 + (p[i] - '0');
	}
	if (port > 65535)
		return why_(why, whylen, "'%.*s': a port from 0 to 65535", s, len);
	memcpy(l->host, h, hl);
	l->host[hl] = 0;
	l->port = (int32_t)port;
	return 0;
}

int kb__listener_list_parse(const char *s, kb_listener *out, int *n, char *why, size_t whylen)
{
	*n = 0;
	const char *p = s;
	for (;;) {
		while (*p == ' ')
			p++;
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		while (len && p[len - 1] == ' ')
			len--;
		if (len == 0) {
			snprintf(why, whylen, "an empty listener entry");
			return -1;
		}
		if (*n == KB_MAX_LISTENERS) {
			snprintf(why, whylen, "more than %d listeners", KB_MAX_LISTENERS);
			return -1;
		}
		if (parse_entry(p, len, &out[*n], why, whylen))
			return -1;
		for (int i = 0; i < *n; i++)
			if (strcmp(out[i].name, out[*n].name) == 0) {
				snprintf(why, whylen, "listener name %s appears twice", out[*n].name);
				return -1;
			}
		(*n)++;
		if (!e)
			return 0;
		p = e + 1;
	}
}

/* listener.security.protocol.map: NAME:PROTOCOL[,...]; the protocol of name. */
static int map_lookup(const char *map, const char *name, int *proto, char *err, size_t errlen)
{
	const char *p = map;
	while (*p) {
		while (*p == ' ')
			p++;
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		const char *colon = memchr(p, ':', len);
		if (!colon) {
			snprintf(err, errlen, "listener.security.protocol.map: '%.*s' is not NAME:PROTOCOL", (int)len, p);
			return -EINVAL;
		}
		size_t nl = (size_t)(colon - p), pl = len - nl - 1;
		while (pl && colon[pl] == ' ')
			pl--;
		int pr = proto_of(colon + 1, pl);
		if (pr < 0) {
			snprintf(err, errlen, "listener.security.protocol.map: '%.*s': the protocol must be PLAINTEXT, "
				 "SSL, SASL_PLAINTEXT or SASL_SSL", (int)len, p);
			return -EINVAL;
		}
		if (strlen(name) == nl && strncmp(name, p, nl) == 0)
			*proto = pr;
		if (!e)
			break;
		p = e + 1;
	}
	return 0;
}

int kb_listeners_resolve(const kb_config *c, kb_listener *out, int *n, char *err, size_t errlen)
{
	char why[256];
	if (kb__listener_list_parse(c->listeners, out, n, why, sizeof(why))) {
		snprintf(err, errlen, "listeners=%s: %s", c->listeners, why);
		return -EINVAL;
	}
	for (int i = 0; i < *n; i++) {
		int pr = out[i].protocol;
		int rc = map_lookup(c->listener_protocol_map, out[i].name, &pr, err, errlen);
		if (rc)
			return rc;
		if (pr < 0) {
			snprintf(err, errlen, "listeners: %s is not a security protocol and "
				 "listener.security.protocol.map does not name it", out[i].name);
			return -EINVAL;
		}
		out[i].protocol = pr;
	}
	if (c->advertised_listeners[0]) {
		kb_listener adv[KB_MAX_LISTENERS];
		int na = 0;
		if (kb__listener_list_parse(c->advertised_listeners, adv, &na, why, sizeof(why))) {
			snprintf(err, errlen, "advertised.listeners=%s: %s", c->advertised_listeners, why);
			return -EINVAL;
		}
		for (int j = 0; j < na; j++) {
			int i;
			for (i = 0; i < *n; i++)
				if (strcmp(out[i].name, adv[j].name) == 0)
					break;
			if (i == *n) {
				snprintf(err, errlen, "advertised.listeners names %s, which is not one of listeners",
					 adv[j].name);
				return -EINVAL;
			}
			snprintf(out[i].adv_host, sizeof(out[i].adv_host), "%s", adv[j].host);
			out[i].adv_port = adv[j].port;
		}
	}
	return 0;
}
