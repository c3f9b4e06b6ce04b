/* The checks of the C unit tests: CHECK counts each one and, when cond is
 * false, prints where and why (a printf format and its arguments) and
 * goes on; check_report prints the totals and gives main's exit status. */
#ifndef TB_CHECK_H
#define TB_CHECK_H

#include <stdio.h>

static int failures, checks;

#define CHECK(cond, ...)                                                   \
	do {                                                                   \
		checks++;                                                          \
		if (!(cond)) {                                                     \
			failures++;                                                    \
			fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                  \
			fputc('\n', stderr);                                           \
		}                                                                  \
	} while (0)

static int check_report(void) {
	printf("%d passed, %d failed\n", checks - failures, failures);
	return failures != 0;
}

#endif
