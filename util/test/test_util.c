/* test_util.c — unit tests for util: CRC-32C vectors and chaining,
 * hexadecimal encoding. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/crc32c.h"
#include "util/hex.h"
#include "util/test/ktest.h"

START_TEST(crc32c_known_vectors)
{
	/* RFC 3720 B.4 and the classic check value. */
	ck_assert_uint_eq(ku_crc32c(0, "123456789", 9), 0xE3069283u);
	unsigned char zeros[32] = {0}, ones[32];
	memset(ones, 0xff, sizeof(ones));
	ck_assert_uint_eq(ku_crc32c(0, zeros, 32), 0x8A9136AAu);
	ck_assert_uint_eq(ku_crc32c(0, ones, 32), 0x62A8AB43u);
	ck_assert_uint_eq(ku_crc32c(0, "", 0), 0u);
}
END_TEST

START_TEST(crc32c_chains)
{
	unsigned char buf[10007];
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	uint32_t whole = ku_crc32c(0, buf, sizeof(buf));
	for (size_t cut = 0; cut <= sizeof(buf); cut += 997) {
		uint32_t c = ku_crc32c(ku_crc32c(0, buf, cut), buf + cut, sizeof(buf) - cut);
		ck_assert_uint_eq(c, whole);
	}
	buf[5000] ^= 1;
	ck_assert_uint_ne(ku_crc32c(0, buf, sizeof(buf)), whole);
}
END_TEST

START_TEST(hex_round_trip_and_refusals)
{
	uint8_t all[256], back[256];
	char txt[2 * sizeof(all) + 1];
	for (size_t i = 0; i < sizeof(all); i++)
		all[i] = (uint8_t)(255 - i);
	ku_hex_encode(all, sizeof(all), txt);
	ck_assert_uint_eq(strlen(txt), 2 * sizeof(all));
	ck_assert(strncmp(txt, "fffefdfc", 8) == 0);
	ck_assert_str_eq(txt + 2 * 250, "0504030201" "00");
	ck_assert_int_eq(ku_hex_decode(txt, sizeof(all), back), 0);
	ck_assert(memcmp(back, all, sizeof(all)) == 0);
	/* Either case reads; anything else is refused. */
	ck_assert_int_eq(ku_hex_decode("aBcD", 2, back), 0);
	ck_assert_uint_eq(back[0], 0xab);
	ck_assert_uint_eq(back[1], 0xcd);
	ck_assert_int_eq(ku_hex_decode("0g", 1, back), -EINVAL);
	ck_assert_int_eq(ku_hex_decode("-1", 1, back), -EINVAL);
	ck_assert_int_eq(ku_hex_decode("1 ", 1, back), -EINVAL);
	ck_assert_int_eq(ku_hex_val('/'), -1);
	ck_assert_int_eq(ku_hex_val(':'), -1);
	ck_assert_int_eq(ku_hex_val('G'), -1);
	ck_assert_int_eq(ku_hex_val('F'), 15);
	ku_hex_encode(all, 0, txt);
	ck_assert_str_eq(txt, "");
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "util", .tcase = "crc32c" },
			  KTEST_LIST(crc32c_known_vectors,
				     crc32c_chains,
				     hex_round_trip_and_refusals));
}
