/* policy.filesystem: the rootfs profile, the working directory and the
 * writable paths, and the absolute-path check the dependencies section
 * shares. (That workdir is among the writable paths is checked once the
 * whole document is read, in policy.c.) */
#include <cjson/cJSON.h>
#include <string.h>

#include "base/base.h"
#include "policy_schema.h"
#include "saferun.h"

#define MAX_WRITABLE 32

/* Absolute, normalized (no "", "." or ".." components), printable. */
int sr_pol_check_abs_path(const struct ctx *c, const char *path, const cJSON *v)
{
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	const char *s = v->valuestring;
	if (s[0] != '/')
		return sr_pol_bad_value(c, path, v, "must be an absolute path");
	if (strlen(s) > 4095)
		return sr_pol_bad(c, path, "is longer than 4095 bytes");
	for (const char *p = s; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			return sr_pol_bad_value(c, path, v, "contains a control character");
	if (s[1] == '\0')
		return 0;
	for (const char *comp = s + 1;; comp++) {
		size_t len = strcspn(comp, "/");
		if (len == 0)
			return sr_pol_bad_value(
			    c, path, v, "must not contain empty components (// or a trailing /)");
		if ((len == 1 && comp[0] == '.') || (len == 2 && comp[0] == '.' && comp[1] == '.'))
			return sr_pol_bad_value(c, path, v, "must not contain . or .. components");
		comp += len;
		if (*comp == '\0')
			return 0;
	}
}

/* Each entry of policy.filesystem.writable: absolute, not "/", once. */
static int check_writable_entry(const struct ctx *c, const char *path, const cJSON *v,
				char *const *before, size_t n_before)
{
	if (sr_pol_check_abs_path(c, path, v) < 0)
		return -1;
	if (strcmp(v->valuestring, "/") == 0)
		return sr_pol_bad(c, path, "\"/\" cannot be writable (the root stays read-only)");
	return sr_pol_listed_before(c, path, v, before, n_before);
}

static int check_profile(const struct ctx *c, const char *path, const cJSON *v)
{
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	size_t len = strlen(v->valuestring);
	if (len == 0 || len > 64 ||
	    strspn(v->valuestring, "abcdefghijklmnopqrstuvwxyz0123456789_-") != len)
		return sr_pol_bad_value(
		    c, path, v,
		    "is not a profile name (use 1 to 64 of [a-z0-9_-], e.g. host, "
		    "minimal, datascience)");
	return 0;
}

const struct field sr_pol_filesystem_fields[] = {
	{ "profile", F_STRING, AT(profile), .def_str = "datascience", .check = check_profile },
	{ "workdir", F_STRING, AT(workdir), .def_str = "/work", .check = sr_pol_check_abs_path },
	{ "writable", F_LIST, AT(writable), .off_n = offsetof(sr_policy, n_writable),
	  .max = MAX_WRITABLE, .what = "an array of absolute paths",
	  .entry = check_writable_entry },
};
_Static_assert(ARRAY_LEN(sr_pol_filesystem_fields) == SR_POL_N_FILESYSTEM,
	       "SR_POL_N_FILESYSTEM is the length of sr_pol_filesystem_fields");
