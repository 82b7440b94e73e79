/* hex.h — bytes as lower-case hexadecimal digits and back (ids, file
 * fields).  Header-only. */
#ifndef KAAS_UTIL_HEX_H
#define KAAS_UTIL_HEX_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* The lower-case digit of the low four bits of v. */
static inline char ku_hex_char(unsigned v)
{
	return "0123456789abcdef"[v & 15];
}

/* The value of a hexadecimal digit of either case, or -1. */
static inline int ku_hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Writes the 2n digits of n bytes and a NUL: out holds 2n + 1 chars. */
static inline void ku_hex_encode(const void *p, size_t n, char *out)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = ku_hex_char(b[i] >> 4);
		out[2 * i + 1] = ku_hex_char(b[i]);
	}
	out[2 * n] = '\0';
}

/* Reads n bytes from the 2n digits at s; -EINVAL when one is not a digit. */
static inline int ku_hex_decode(const char *s, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++) {
		int hi = ku_hex_val(s[2 * i]), lo = ku_hex_val(s[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

#endif
