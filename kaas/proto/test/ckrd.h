/*
 * ckrd.h — for Check tests that decode a response field by field: each
 * reads one value with the kaas_rd reader of proto/buf.h and fails the test
 * when the response ends too early.
 */
#ifndef KAAS_PROTO_TEST_CKRD_H
#define KAAS_PROTO_TEST_CKRD_H

#include <check.h>

#include "proto/buf.h"

static inline int8_t ckrd_i8(kaas_rd *rd)
{
	int8_t v = 0;
	ck_assert_int_eq(kaas_rd_i8(rd, &v), 0);
	return v;
}

static inline int16_t ckrd_i16(kaas_rd *rd)
{
	int16_t v = 0;
	ck_assert_int_eq(kaas_rd_i16(rd, &v), 0);
	return v;
}

static inline int32_t ckrd_i32(kaas_rd *rd)
{
	int32_t v = 0;
	ck_assert_int_eq(kaas_rd_i32(rd, &v), 0);
	return v;
}

static inline int64_t ckrd_i64(kaas_rd *rd)
{
	int64_t v = 0;
	ck_assert_int_eq(kaas_rd_i64(rd, &v), 0);
	return v;
}

static inline kaas_str ckrd_str(kaas_rd *rd, int flex)
{
	kaas_str s = {0};
	ck_assert_int_eq(kaas_rd_str(rd, flex, &s), 0);
	return s;
}

#endif
