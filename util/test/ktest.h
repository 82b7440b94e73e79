/* ktest.h — the main() of a Check test program in one call: one suite with
 * one test case, an optional fixture and timeout, the tests in the order
 * given, exit status 1 when any test failed.  Header-only so that a test
 * program needs no extra module to link.
 *
 *	int main(void)
 *	{
 *		return ktest_main((struct ktest){ .suite = "coord-pid", .tcase = "pid",
 *						  .timeout = 120 },
 *				  KTEST_LIST(ids_unique, epoch_bump));
 *	}
 */
#ifndef KAAS_KTEST_H
#define KAAS_KTEST_H

#include <check.h>
#include <stdlib.h>

struct ktest {
	const char *suite;	/* the suite's name in Check's output */
	const char *tcase;	/* the test case's name; the suite's when NULL */
	int timeout;		/* seconds; Check's default (or CK_DEFAULT_TIMEOUT) when 0 */
	SFun setup, teardown;	/* a checked fixture (run in each test's process) when set */
};

/* The tests, as the NULL-terminated array ktest_main walks. */
#define KTEST_LIST(...) ((const TTest *const[]){ __VA_ARGS__, NULL })

static inline int ktest_main(struct ktest k, const TTest *const *tests)
{
	Suite *s = suite_create(k.suite);
	TCase *tc = tcase_create(k.tcase ? k.tcase : k.suite);
	if (k.setup || k.teardown)
		tcase_add_checked_fixture(tc, k.setup, k.teardown);
	if (k.timeout > 0)
		tcase_set_timeout(tc, k.timeout);
	for (; *tests; tests++)
		tcase_add_test(tc, *tests);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
