/*
 * sub_nfs_url.c — nfs://server[:port]/export[/subdir]?version=3|4&... into
 * the settings of an nfs vfs.  Strict: an unknown option or a bad value is
 * an error naming it, never ignored.
 */
#include "substrates/sub_nfs_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

static int parse_int(const char *s, size_t n, long lo, long hi, int *out)
{
	if (n == 0 || n > 10)
		return -EINVAL;
	long val = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		val = val * 10 + (s[i] - '0');
	}
	if (val < lo || val > hi)
		return -ERANGE;
	*out = (int)val;
	return 0;
}

int sub_nfs_parse_url(nfs_vfs *v, const char *url, char *err, size_t errlen)
{
	const char *p = url + 6; /* after nfs:// */
	const char *slash = strchr(p, '/');
	const char *q = strchr(p, '?');
	if (!slash || (q && q < slash)) {
		snprintf(err, errlen, "%s: expected nfs://server[:port]/export[/subdir]?version=3|4", url);
		return -EINVAL;
	}
	/* host[:port], or [v6addr][:port] */
	const char *host = p, *hend = slash, *colon = NULL;
	if (*host == '[') {
		const char *rb = memchr(host, ']', (size_t)(slash - host));
		if (!rb) {
			snprintf(err, errlen, "%s: unterminated [address]", url);
			return -EINVAL;
		}
		if (rb + 1 < slash && rb[1] == ':')
			colon = rb + 1;
		else if (rb + 1 != slash) {
			snprintf(err, errlen, "%s: junk after [address]", url);
			return -EINVAL;
		}
		host++;
		hend = rb;
	} else {
		colon = memchr(host, ':', (size_t)(slash - host));
		if (colon)
			hend = colon;
	}
	if (hend == host || (size_t)(hend - host) >= sizeof(v->server)) {
		snprintf(err, errlen, "%s: missing or too long server name", url);
		return -EINVAL;
	}
	memcpy(v->server, host, (size_t)(hend - host));
	v->server[hend - host] = '\0';
	if (colon && parse_int(colon + 1, (size_t)(slash - colon - 1), 1, 65535, &v->port)) {
		snprintf(err, errlen, "%s: bad port", url);
		return -EINVAL;
	}
	/* path */
	size_t plen = q ? (size_t)(q - slash) : strlen(slash);
	if (plen >= sizeof(v->path) - 1) {
		snprintf(err, errlen, "%s: path too long", url);
		return -ENAMETOOLONG;
	}
	/* Normalise: collapse '//' and drop a trailing '/'. */
	size_t w = 0;
	for (size_t i = 0; i < plen; i++) {
		if (slash[i] == '/' && w > 0 && v->path[w - 1] == '/')
			continue;
		v->path[w++] = slash[i];
	}
	while (w > 1 && v->path[w - 1] == '/')
		w--;
	v->path[w] = '\0';
	if (strcmp(v->path, "/") == 0 || sub_path_check(v->path + 1) != 0) {
		snprintf(err, errlen, "%s: the path must name an export (no '..')", url);
		return -EINVAL;
	}
	/* query */
	v->version = 3;
	v->uid = v->gid = -1;
	v->timeout_ms = DEFAULT_TIMEOUT_MS;
	const char *s = q ? q + 1 : NULL;
	while (s && *s) {
		const char *amp = strchr(s, '&');
		size_t n = amp ? (size_t)(amp - s) : strlen(s);
		const char *eq = memchr(s, '=', n);
		if (!eq) {
			snprintf(err, errlen, "%s: query item '%.*s' has no value", url, (int)n, s);
			return -EINVAL;
		}
		size_t kn = (size_t)(eq - s), vn = n - kn - 1;
		const char *val = eq + 1;
		int rc;
#define KEY(k) (kn == sizeof(k) - 1 && strncmp(s, k, kn) == 0)
		if (KEY("version")) {
			rc = parse_int(val, vn, 3, 4, &v->version);
		} else if (KEY("nfsport")) {
			rc = parse_int(val, vn, 1, 65535, &v->nfsport);
		} else if (KEY("mountport")) {
			rc = parse_int(val, vn, 1, 65535, &v->mountport);
		} else if (KEY("uid")) {
			rc = parse_int(val, vn, 0, INT_MAX, &v->uid);
		} else if (KEY("gid")) {
			rc = parse_int(val, vn, 0, INT_MAX, &v->gid);
		} else if (KEY("timeout_ms")) {
			rc = parse_int(val, vn, 1000, 3600000, &v->timeout_ms);
		} else {
			snprintf(err, errlen,
				 "%s: unknown option '%.*s' (version, nfsport, mountport, uid, gid, timeout_ms)",
				 url, (int)kn, s);
			return -EINVAL;
		}
#undef KEY
		if (rc) {
			snprintf(err, errlen, "%s: bad value for '%.*s'", url, (int)kn, s);
			return -EINVAL;
		}
		s = amp ? amp + 1 : NULL;
	}
	if (v->port && v->nfsport && v->port != v->nfsport) {
		snprintf(err, errlen, "%s: :%d and nfsport=%d disagree", url, v->port, v->nfsport);
		return -EINVAL;
	}
	/* libnfs timeouts are whole seconds. */
	v->timeout_ms = (v->timeout_ms + 999) / 1000 * 1000;
	v->renew_ms = 1000; /* well inside any lease (ganesha 60 s, Linux knfsd 90 s) */
	int ww;
	if (v->port)
		ww = snprintf(v->root_url, sizeof(v->root_url), "nfs://%s%s%s:%d%s?version=%d",
			      strchr(v->server, ':') ? "[" : "", v->server, strchr(v->server, ':') ? "]" : "",
			      v->port, v->path, v->version);
	else
		ww = snprintf(v->root_url, sizeof(v->root_url), "nfs://%s%s%s%s?version=%d",
			      strchr(v->server, ':') ? "[" : "", v->server, strchr(v->server, ':') ? "]" : "",
			      v->path, v->version);
	if (ww < 0 || (size_t)ww >= sizeof(v->root_url)) {
		snprintf(err, errlen, "%s: too long", url);
		return -ENAMETOOLONG;
	}
	return 0;
}

/* Finds which prefix of the path the server exports: the whole path first
 * (NFSv4 always, NFSv3 servers that allow mounting subdirectories), then
 * shorter ones; the rest becomes a subdirectory. */
