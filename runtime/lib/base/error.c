#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int sr_fail(sr_error *err, int errnum, const char *fmt, ...)
{
	if (!err)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	if (errnum && n >= 0 && (size_t)n < sizeof err->msg)
		snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errnum));
	err->errnum = errnum;
	return -1;
}

int sr_refuse(sr_error *err, int errnum, const char *fmt, ...)
{
	if (!err)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	err->errnum = errnum;
	return -1;
}
