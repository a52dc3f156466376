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
	err->code = SR_ERR_NONE;
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
	err->code = SR_ERR_NONE;
	return -1;
}

int sr_error_wrap(sr_error *err, const char *fmt, ...)
{
	if (!err)
		return -1;
	char msg[sizeof err->msg];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof msg)
		snprintf(msg + n, sizeof msg - (size_t)n, ": %s", err->msg);
	memcpy(err->msg, msg, sizeof msg);
	return -1;
}

int sr_error_mark(sr_error *err, sr_error_code code)
{
	if (err)
		err->code = code;
	return -1;
}
