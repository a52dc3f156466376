/* Filling an sr_error: every failing function says what it was doing. */
#ifndef SR_ERROR_H
#define SR_ERROR_H

#include "saferun.h"

/* Set err (if not NULL) to errnum and a formatted message; returns -1 so a
 * caller can write `return sr_fail(err, errno, "open %s", path);`. When
 * errnum is non-zero its strerror text is appended. */
int sr_fail(sr_error *err, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The same for a refusal whose message already says what and what to do:
 * errnum is recorded but its text is not appended. */
int sr_refuse(sr_error *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
