/* ktest.h — the main() of every Check test program.  Each test is a test
 * case of its own, named after the test function, so that one test can be
 * run alone:
 *
 *	make unit UNIT=storage T=truncated_tail    (the Makefile sets CK_RUN_CASE)
 *	CK_RUN_CASE=truncated_tail build/san/kaas/storage/test/test_recovery
 *
 * A program with one group of tests (one fixture, one timeout):
 *
 *	int main(void)
 *	{
 *		return ktest_main((struct ktest){ .suite = "coord-pid", .timeout = 120 },
 *				  KTEST_LIST(ids_unique, epoch_bump));
 *	}
 *
 * One with several groups adds each to a suite and runs it:
 *
 *	Suite *s = suite_create("chan");
 *	ktest_add(s, (struct ktest){ .tcase = "framing" }, KTEST_LIST(a, b));
 *	ktest_add(s, (struct ktest){ .tcase = "executor", .timeout = 60,
 *				     .setup = up, .teardown = down }, KTEST_LIST(c));
 *	ktest_add_loop(s, (struct ktest){ .timeout = 120 }, d, 0, 2);
 *	return ktest_run(s);
 *
 * A group's name (.tcase) becomes a Check tag of its tests, so
 * CK_INCLUDE_TAGS=executor runs that group alone.  Exit status: 0 when every
 * test that ran passed, 1 when one failed, KTEST_NOT_HERE (77) when
 * CK_RUN_CASE names no test of this program (the Makefile's T= then looks
 * in the next one).  Header-only so that a test program needs no extra
 * module to link.
 */
#ifndef KAAS_KTEST_H
#define KAAS_KTEST_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#define KTEST_NOT_HERE 77

struct ktest {
	const char *suite;	/* the suite's name (ktest_main only) */
	const char *tcase;	/* the group's name, a tag of its tests; optional */
	int timeout;		/* seconds; Check's default (or CK_DEFAULT_TIMEOUT) when 0 */
	SFun setup, teardown;	/* a checked fixture (run in each test's process) when set */
};

/* The tests, as the NULL-terminated array ktest_add walks. */
#define KTEST_LIST(...) ((const TTest *const[]){ __VA_ARGS__, NULL })

static inline TCase *ktest__tcase(Suite *s, const struct ktest *k, const TTest *t)
{
	TCase *tc = tcase_create(t->name);
	if (k->tcase)
		tcase_set_tags(tc, k->tcase);
	if (k->setup || k->teardown)
		tcase_add_checked_fixture(tc, k->setup, k->teardown);
	if (k->timeout > 0)
		tcase_set_timeout(tc, k->timeout);
	suite_add_tcase(s, tc);
	return tc;
}

/* Adds each test as a test case of its own, in the order given. */
static inline void ktest_add(Suite *s, struct ktest k, const TTest *const *tests)
{
	for (; *tests; tests++)
		tcase_add_test(ktest__tcase(s, &k, *tests), *tests);
}

/* A loop test (tcase_add_loop_test): one test case running t for every
 * _i in [start, end). */
static inline void ktest_add_loop(Suite *s, struct ktest k, const TTest *t, int start, int end)
{
	tcase_add_loop_test(ktest__tcase(s, &k, t), t, start, end);
}

/* 0 when CK_RUN_CASE names a test this suite does not have: a program
 * with costly set-up outside the fixtures (servers to start) can skip it. */
static inline int ktest_here(Suite *s)
{
	const char *only = getenv("CK_RUN_CASE");
	return !(only && *only && !suite_tcase(s, only));
}

/* Runs the suite (or the test CK_RUN_CASE names) and frees it. */
static inline int ktest_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	if (!ktest_here(s)) {
		srunner_free(sr); /* frees the suite too */
		return KTEST_NOT_HERE;
	}
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

static inline int ktest_main(struct ktest k, const TTest *const *tests)
{
	Suite *s = suite_create(k.suite);
	ktest_add(s, k, tests);
	return ktest_run(s);
}

#endif
