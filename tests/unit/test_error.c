/* The error idiom (base/error.c), as a table: an error filled by sr_fail or
 * sr_refuse, marked with a kind or not, then wrapped with what was being
 * done on the way up: the message gains each context in front, errnum and
 * the kind stay, a new error starts without a kind, and a message that no
 * longer fits is cut at its end. */
#include <errno.h>
#include <string.h>

#include "base/base.h"
#include "check.h"
#include "saferun.h"

struct row {
	const char *name;
	int errnum;
	bool refuse; /* sr_refuse (no strerror appended), else sr_fail */
	const char *detail;
	sr_error_code code;
	const char *wraps[2]; /* innermost first */
	const char *message;
};

static const struct row rows[] = {
	{ "sr_fail appends strerror",
	  ENOENT,
	  false,
	  "open /x",
	  SR_ERR_NONE,
	  { NULL },
	  "open /x: No such file or directory" },
	{ "sr_refuse does not", EINVAL, true, "bad \"x\"", SR_ERR_NONE, { NULL }, "bad \"x\"" },
	{ "one context",
	  ENOENT,
	  false,
	  "open /x",
	  SR_ERR_NONE,
	  { "load policy" },
	  "load policy: open /x: No such file or directory" },
	{ "contexts stack outward",
	  EACCES,
	  false,
	  "mkdir /w",
	  SR_ERR_NONE,
	  { "the pip workspace", "dependencies" },
	  "dependencies: the pip workspace: mkdir /w: Permission denied" },
	{ "the kind survives wrapping",
	  EINVAL,
	  true,
	  "\"h\" does not resolve: x",
	  SR_ERR_NET_HOST,
	  { "policy.network.allow[3].host" },
	  "policy.network.allow[3].host: \"h\" does not resolve: x" },
};

static void check_row(const struct row *r)
{
	sr_error err = { .code = SR_ERR_NET_HOST }; /* left from an earlier error */
	int rc = r->refuse ? sr_refuse(&err, r->errnum, "%s", r->detail)
			   : sr_fail(&err, r->errnum, "%s", r->detail);
	fprintf(stderr, "-- %s\n", r->name);
	CHECK_INT(rc, -1);
	CHECK_INT(err.code, SR_ERR_NONE);
	if (r->code)
		CHECK_INT(sr_error_mark(&err, r->code), -1);
	for (size_t i = 0; i < ARRAY_LEN(r->wraps) && r->wraps[i]; i++)
		CHECK_INT(sr_error_wrap(&err, "%s", r->wraps[i]), -1);
	CHECK_STR(err.msg, r->message);
	CHECK_INT(err.errnum, r->errnum);
	CHECK_INT(err.code, r->code);
}

int main(void)
{
	for (size_t i = 0; i < ARRAY_LEN(rows); i++)
		check_row(&rows[i]);

	/* No error to fill: still -1. */
	CHECK_INT(sr_error_wrap(NULL, "x"), -1);
	CHECK_INT(sr_error_mark(NULL, SR_ERR_NET_HOST), -1);

	/* Too long: the context is whole, the message cut at its end. */
	sr_error err = { 0 };
	char long_detail[SR_ERROR_MSG_MAX];
	memset(long_detail, 'd', sizeof long_detail - 1);
	long_detail[sizeof long_detail - 1] = '\0';
	sr_refuse(&err, E2BIG, "%s", long_detail);
	sr_error_wrap(&err, "ctx %d", 7);
	CHECK_INT(strlen(err.msg), SR_ERROR_MSG_MAX - 1);
	CHECK(strncmp(err.msg, "ctx 7: ddd", 10) == 0);
	CHECK_INT(err.errnum, E2BIG);
	return check_report();
}
