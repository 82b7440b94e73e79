/*
 * crc32c.c — CRC-32C over ISA-L.  ISA-L's crc32_iscsi neither pre- nor
 * post-inverts, so the standard reflected-CRC conditioning is applied here;
 * that makes ku_crc32c(ku_crc32c(0, a), b) == ku_crc32c(0, a || b).
 */
#include "util/crc32c.h"

#include <isa-l/crc.h>
#include <limits.h>

uint32_t ku_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	crc = ~crc;
	while (len > 0) {
		/* ISA-L takes an int length. */
		int n = len > (size_t)INT_MAX ? INT_MAX : (int)len;
		crc = crc32_iscsi((unsigned char *)p, n, crc);
		p += n;
		len -= (size_t)n;
	}
	return ~crc;
}
