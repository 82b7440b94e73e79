/*
 * gname.c — group ids as file names.
 *
 * Group ids are whatever string a client sends ("../x", "a/b", "", 30 KiB of
 * UTF-8, bytes that are not UTF-8 at all).  A file name must be none of
 * those things, so the id is percent-encoded:
 *
 *   - [A-Za-z0-9_-] stay as they are, '.' too except as the first byte (no
 *     hidden files, no "." or "..", no clash with sub_write_atomic's
 *     ".<name>.tmp.<random>" temp files);
 *   - every other byte becomes %XX (upper-case hex), '%' and '~' included;
 *   - the empty id is the lone "%" (an encoding never ends in a bare '%').
 *
 * The encoding is reversible and case-exact.  Encodings longer than
 * KC_GNAME_MAX bytes are cut to a prefix (never inside an escape) and end
 * in '~' plus 32 hex digits of a 128-bit hash of the whole id; '~' appears
 * nowhere else, so a reader knows the id must be taken from the file's
 * contents, and the loader checks that it matches (a collision is reported,
 * never merged).  docs/formats.md has the rules.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kaas/coord/coord_int.h"

#define KC_GNAME_PREFIX 160 /* bytes of encoding kept before '~' + hash */

static int plain(unsigned char ch, int first)
{
	if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	    ch == '_' || ch == '-')
		return 1;
	return ch == '.' && !first;
}

/* Two 64-bit FNV-1a lanes with different bases, each finished with the
 * splitmix64 mixer: 128 bits, stable across hosts and versions. */
static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void hash128(const unsigned char *p, size_t n, uint64_t out[2])
{
	uint64_t a = 0xcbf29ce484222325ULL, b = 0x84222325cbf29ce4ULL ^ (uint64_t)n;
	for (size_t i = 0; i < n; i++) {
		a = (a ^ p[i]) * 0x100000001b3ULL;
		b = (b ^ (uint64_t)(p[i] + 0x9e)) * 0x100000001b3ULL;
		b ^= b >> 29;
	}
	out[0] = mix64(a ^ (uint64_t)n);
	out[1] = mix64(b + out[0]);
}

int kg__gname_encode(const char *id, size_t len, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *p = (const unsigned char *)id;
	if (outlen < KC_GNAME_MAX + 1)
		return -ENAMETOOLONG;
	if (len == 0) {
		strcpy(out, "%");
		return 0;
	}
	size_t o = 0, cut = 0;
	int hashed = 0;
	for (size_t i = 0; i < len; i++) {
		size_t need = plain(p[i], i == 0) ? 1 : 3;
		if (o + need > KC_GNAME_MAX) {
			hashed = 1;
			break;
		}
		if (o + need <= KC_GNAME_PREFIX)
			cut = o + need;
		if (need == 1) {
			out[o++] = (char)p[i];
		} else {
			out[o++] = '%';
			out[o++] = hex[p[i] >> 4];
			out[o++] = hex[p[i] & 15];
		}
	}
	if (!hashed) {
		out[o] = '\0';
		return 0;
	}
	uint64_t h[2];
	hash128(p, len, h);
	snprintf(out + cut, outlen - cut, "~%016llx%016llx", (unsigned long long)h[0],
		 (unsigned long long)h[1]);
	return 1;
}

static int unhex(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

int kg__gname_decode(const char *stem, char *out, size_t outlen, size_t *len)
{
	size_t n = strlen(stem), o = 0;
	if (n == 0 || n > KC_GNAME_MAX + 1 + 32)
		return -EINVAL;
	if (strcmp(stem, "%") == 0) {
		if (outlen < 1)
			return -ENAMETOOLONG;
		out[0] = '\0';
		*len = 0;
		return 0;
	}
	if (strchr(stem, '~'))
		return -ENOTUNIQ;
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)stem[i];
		int v;
		if (ch == '%') {
			int hi = i + 2 < n ? unhex(stem[i + 1]) : -1;
			int lo = hi >= 0 ? unhex(stem[i + 2]) : -1;
			if (hi < 0 || lo < 0)
				return -EINVAL;
			v = hi << 4 | lo;
			/* Canonical only: a byte that would be plain is never escaped,
			 * so each id has exactly one name. */
			if (plain((unsigned char)v, o == 0))
				return -EINVAL;
			i += 2;
		} else if (plain(ch, o == 0)) {
			v = ch;
		} else {
			return -EINVAL;
		}
		if (o + 1 >= outlen)
			return -ENAMETOOLONG;
		out[o++] = (char)v;
	}
	out[o] = '\0';
	*len = o;
	return 0;
}
