/* Filling an sr_error: every failing function says what it was doing. */
#ifndef SR_ERROR_H
#define SR_ERROR_H

#include "saferun.h"

/* Set err (if not NULL) to errnum and a formatted message, of no kind in
 * particular (code SR_ERR_NONE); returns -1 so a caller can write
 * `return sr_fail(err, errno, "open %s", path);`. When errnum is non-zero
 * its strerror text is appended. */
int sr_fail(sr_error *err, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The same for a refusal whose message already says what and what to do:
 * errnum is recorded but its text is not appended. */
int sr_refuse(sr_error *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Say what was being done on the way up: err's message becomes
 * "CONTEXT: MESSAGE" (cut at its end when it no longer fits); errnum and
 * code stay. Returns -1: `return sr_error_wrap(err, "load %s", path);`. */
int sr_error_wrap(sr_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Give err (just filled) a kind a caller can test instead of its text;
 * returns -1: `sr_refuse(err, ...); return sr_error_mark(err, SR_ERR_...);`. */
int sr_error_mark(sr_error *err, sr_error_code code);

#endif
