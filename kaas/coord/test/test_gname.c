/* test_gname.c — group ids as file names: hostile ids stay inside groups/,
 * the encoding round-trips, long ids get a bounded, hashed name. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kaas/coord/coord_int.h"
#include "util/test/ktest.h"

static void roundtrip(const char *id, size_t len)
{
	char stem[KC_GNAME_MAX + 64], back[KC_GNAME_MAX + 1];
	size_t blen = 0;
	ck_assert_int_eq(kg__gname_encode(id, len, stem, sizeof(stem)), 0);
	ck_assert_int_eq(kg__gname_decode(stem, back, sizeof(back), &blen), 0);
	ck_assert_uint_eq(blen, len);
	ck_assert(memcmp(back, id, len) == 0);
}

/* A stem is safe when it is one path component, not hidden, and made of
 * characters that mean nothing to any filesystem or shell. */
static void assert_safe(const char *stem)
{
	ck_assert(stem[0] != '\0');
	ck_assert(stem[0] != '.');
	ck_assert(strlen(stem) <= KC_GNAME_MAX + 33);
	for (const char *p = stem; *p; p++)
		ck_assert_msg(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-%~", *p),
			      "unsafe byte 0x%02x in '%s'", (unsigned char)*p, stem);
}

START_TEST(hostile_ids_are_single_safe_components)
{
	static const char *ids[] = {"../x", "..", ".", "/", "a/b", "/etc/passwd", "\\..\\x", ".hidden",
				    "x.tmp.0123", "~", "%", "%2F", "a b\tc\n", "grüße", "\xff\xfe",
				    "con", "a:b", "*?\"<>|"};
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		char stem[KC_GNAME_MAX + 64];
		ck_assert_int_eq(kg__gname_encode(ids[i], strlen(ids[i]), stem, sizeof(stem)), 0);
		assert_safe(stem);
		ck_assert_msg(!strchr(stem, '/'), "slash in %s", stem);
		roundtrip(ids[i], strlen(ids[i]));
	}
	char stem[KC_GNAME_MAX + 64];
	kg__gname_encode("../x", 4, stem, sizeof(stem));
	ck_assert_str_eq(stem, "%2E.%2Fx");
	kg__gname_encode("my-group.1_A", 12, stem, sizeof(stem));
	ck_assert_str_eq(stem, "my-group.1_A");
}
END_TEST

START_TEST(empty_and_binary_ids_round_trip)
{
	char stem[KC_GNAME_MAX + 64];
	ck_assert_int_eq(kg__gname_encode("", 0, stem, sizeof(stem)), 0);
	ck_assert_str_eq(stem, "%");
	roundtrip("", 0);
	char bin[256];
	for (int i = 0; i < 40; i++)
		bin[i] = (char)(i * 37 + 1);
	bin[5] = '\0'; /* an embedded NUL */
	roundtrip(bin, 40);
	/* Every single byte value. */
	for (int b = 0; b < 256; b++) {
		char one = (char)b;
		roundtrip(&one, 1);
	}
}
END_TEST

START_TEST(encoding_is_canonical)
{
	char out[64];
	size_t len;
	/* Escaping a byte that is plain, lower-case hex, stray '%', bare '~' or
	 * hidden names are not encodings: listing skips them. */
	ck_assert_int_eq(kg__gname_decode("%61", out, sizeof(out), &len), -EINVAL);
	ck_assert_int_eq(kg__gname_decode("%2f", out, sizeof(out), &len), -EINVAL);
	ck_assert_int_eq(kg__gname_decode("a%", out, sizeof(out), &len), -EINVAL);
	ck_assert_int_eq(kg__gname_decode("a%2", out, sizeof(out), &len), -EINVAL);
	ck_assert_int_eq(kg__gname_decode(".x", out, sizeof(out), &len), -EINVAL);
	ck_assert_int_eq(kg__gname_decode("a/b", out, sizeof(out), &len), -EINVAL);
	ck_assert_int_eq(kg__gname_decode("abc~0123", out, sizeof(out), &len), -ENOTUNIQ);
	/* Case matters: two ids, two names. */
	char a[64], b[64];
	kg__gname_encode("Group", 5, a, sizeof(a) + KC_GNAME_MAX);
	kg__gname_encode("group", 5, b, sizeof(b) + KC_GNAME_MAX);
	ck_assert_str_ne(a, b);
}
END_TEST

START_TEST(long_ids_are_bounded_and_distinct)
{
	size_t n = 30000;
	char *id = malloc(n);
	for (size_t i = 0; i < n; i++)
		id[i] = (char)('a' + i % 26);
	char s1[KC_GNAME_MAX + 64], s2[KC_GNAME_MAX + 64];
	ck_assert_int_eq(kg__gname_encode(id, n, s1, sizeof(s1)), 1);
	assert_safe(s1);
	ck_assert(strchr(s1, '~'));
	ck_assert_uint_le(strlen(s1) + 5, 255); /* + ".json": a valid file name */
	/* Same prefix, one byte different at the end: different names. */
	id[n - 1] ^= 1;
	ck_assert_int_eq(kg__gname_encode(id, n, s2, sizeof(s2)), 1);
	ck_assert_str_ne(s1, s2);
	/* Deterministic: another broker computes the same name. */
	id[n - 1] ^= 1;
	ck_assert_int_eq(kg__gname_encode(id, n, s2, sizeof(s2)), 1);
	ck_assert_str_eq(s1, s2);
	/* A long id made only of escaped bytes never gets cut inside an escape. */
	memset(id, '/', 500);
	ck_assert_int_eq(kg__gname_encode(id, 500, s1, sizeof(s1)), 1);
	char *tilde = strchr(s1, '~');
	ck_assert((tilde - s1) % 3 == 0);
	assert_safe(s1);
	/* Right at the limit: still reversible. */
	memset(id, 'q', KC_GNAME_MAX);
	roundtrip(id, KC_GNAME_MAX);
	ck_assert_int_eq(kg__gname_encode(id, KC_GNAME_MAX + 1, s1, sizeof(s1)), 1);
	free(id);
}
END_TEST

int main(void)
{
	return ktest_main((struct ktest){ .suite = "coord-gname", .tcase = "gname" },
			  KTEST_LIST(hostile_ids_are_single_safe_components,
				     empty_and_binary_ids_round_trip,
				     encoding_is_canonical,
				     long_ids_are_bounded_and_distinct));
}
