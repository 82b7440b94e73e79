/*
 * ckrd.h — for Check tests that decode a response field by field: each
 * reads one value with the kw_rd reader of proto/buf.h and fails the test
 * when the response ends too early.
 */
#ifndef KAAS_PROTO_TEST_CKRD_H
#define KAAS_PROTO_TEST_CKRD_H

#include <check.h>

#include "kaas/proto/buf.h"

/* ckrd_i8, ckrd_i16, ckrd_i32, ckrd_i64. */
#define CKRD_INT(bits)                                                   \
	static inline int##bits##_t ckrd_i##bits(kw_rd *rd)            \
	{                                                                \
		int##bits##_t v = 0;                                     \
		ck_assert_int_eq(kw_rd_i##bits(rd, &v), 0);            \
		return v;                                                \
	}
CKRD_INT(8)
CKRD_INT(16)
CKRD_INT(32)
CKRD_INT(64)
#undef CKRD_INT

static inline kw_str ckrd_str(kw_rd *rd, int flex)
{
	kw_str s = {0};
	ck_assert_int_eq(kw_rd_str(rd, flex, &s), 0);
	return s;
}

#endif
