/* test_util.c — unit tests for kaas/util: CRC-32C vectors and chaining. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "util/crc32c.h"
#include "util/test/ktest.h"

START_TEST(crc32c_known_vectors)
{
	/* RFC 3720 B.4 and the classic check value. */
	ck_assert_uint_eq(kaas_crc32c(0, "123456789", 9), 0xE3069283u);
	unsigned char zeros[32] = {0}, ones[32];
	memset(ones, 0xff, sizeof(ones));
	ck_assert_uint_eq(kaas_crc32c(0, zeros, 32), 0x8A9136AAu);
	ck_assert_uint_eq(kaas_crc32c(0, ones, 32), 0x62A8AB43u);
	ck_assert_uint_eq(kaas_crc32c(0, "", 0), 0u);
}
END_TEST

START_TEST(crc32c_chains)
{
	unsigned char buf[10007];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	uint32_t whole = kaas_crc32c(0, buf, sizeof(buf));
	for (size_t cut = 0; cut <= sizeof(buf); cut += 997) {
		uint32_t c = kaas_crc32c(kaas_crc32c(0, buf, cut), buf + cut, sizeof(buf) - cut);
		ck_assert_uint_eq(c, whole);
	}
	buf[5000] ^= 1;
	ck_assert_uint_ne(kaas_crc32c(0, buf, sizeof(buf)), whole);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "util", .tcase = "crc32c" },
			  KTEST_LIST(crc32c_known_vectors,
				     crc32c_chains));
}
