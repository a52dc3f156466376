/* A tiny test harness: CHECK records a failure and goes on; a test file's
 * main ends with `return check_report();`, which prints "N passed, M
 * failed" (the line ctest's log and CI read) and exits non-zero on failure. */
#ifndef SR_TEST_CHECK_H
#define SR_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_passed, check_failed;

#define CHECK(cond)                                                                          \
	do {                                                                                 \
		if (cond) {                                                                  \
			check_passed++;                                                      \
		} else {                                                                     \
			check_failed++;                                                      \
			fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, \
				__func__, #cond);                                            \
		}                                                                            \
	} while (0)

#define CHECK_STR(got, want)                                                                   \
	do {                                                                                   \
		const char *got_ = (got), *want_ = (want);                                     \
		if (got_ && want_ && strcmp(got_, want_) == 0) {                               \
			check_passed++;                                                        \
		} else {                                                                       \
			check_failed++;                                                        \
			fprintf(stderr, "%s:%d: %s: got  \"%s\"\n%*s want \"%s\"\n", __FILE__, \
				__LINE__, __func__, got_ ? got_ : "(null)",                    \
				(int)strlen(__FILE__) + 8, "", want_ ? want_ : "(null)");      \
		}                                                                              \
	} while (0)

#define CHECK_INT(got, want)                                                                      \
	do {                                                                                      \
		long long got_ = (long long)(got), want_ = (long long)(want);                     \
		if (got_ == want_) {                                                              \
			check_passed++;                                                           \
		} else {                                                                          \
			check_failed++;                                                           \
			fprintf(stderr, "%s:%d: %s: %s is %lld, want %lld\n", __FILE__, __LINE__, \
				__func__, #got, got_, want_);                                     \
		}                                                                                 \
	} while (0)

static inline int check_report(void)
{
	printf("%d passed, %d failed\n", check_passed, check_failed);
	return check_failed ? 1 : 0;
}

#endif
