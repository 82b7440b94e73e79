/*
 * assert.h — KAAS_ASSERT: an invariant stated where it can break.
 *
 * Live where a broken invariant must stop the program at once, with the
 * expression, file and line: the sanitizer builds (every unit test) and the
 * fuzz builds, which compile with -DKAAS_ASSERTS.  In the release build the
 * condition is type-checked but not evaluated, so an assertion may be as
 * expensive as it needs to be and must have no side effects.
 *
 * Assert what the code relies on and a bug could falsify (slot and ticket
 * accounting, reference counts, lock order, budget sums) — never a
 * condition that input from outside can make false: that is validated and
 * answered with an error.
 */
#ifndef KAAS_ASSERT_H
#define KAAS_ASSERT_H

#ifdef KAAS_ASSERTS
#include <stdio.h>
#include <stdlib.h>
#define KAAS_ASSERT(cond)                                                                  \
	do {                                                                               \
		if (__builtin_expect(!(cond), 0)) {                                         \
			fprintf(stderr, "%s:%d: %s: assertion failed: %s\n", __FILE__, __LINE__, \
				__func__, #cond);                                           \
			abort();                                                            \
		}                                                                          \
	} while (0)
#else
#define KAAS_ASSERT(cond) ((void)sizeof(!(cond)))
#endif

#endif
