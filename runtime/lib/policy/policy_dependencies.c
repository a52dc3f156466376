/* policy.dependencies (docs/dependencies.md): the packages a run may
 * install (names stored normalised), the index and its CA, the
 * wheelhouse, the cache and the installer's limits; and policy.commands,
 * which turns the daemon's commands on or off. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "policy.h"
#include "policy_schema.h"
#include "saferun.h"

#define MAX_DEP_NAMES 1024

/* A PEP 503-normalised package name or "*": what allow and ignore hold. */
static int check_dep_name(const struct ctx *c, const char *path, const cJSON *v,
			  char *const *before, size_t n_before)
{
	char norm[160];
	sr_error e = { 0 };
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	if (strcmp(v->valuestring, "*") != 0 &&
	    (sr_deps_check_requirement(v->valuestring, 0, norm, sizeof norm, &e) < 0 ||
	     strpbrk(v->valuestring, "<>=!~ ,")))
		return sr_pol_bad_value(c, path, v,
					"is not a package name (letters, digits and . _ -, e.g. "
					"\"scikit-learn\"; or \"*\" for any)");
	return sr_pol_listed_before(c, path, v, before, n_before);
}

/* Names are stored normalised, as requirements are compared: after
 * dependencies.allow and .ignore are read. */
static int normalise_names(const struct ctx *c, const struct field *f, sr_policy *p)
{
	char **v = *sr_pol_field_strv(p, f);
	size_t n = *sr_pol_field_count(p, f);

	(void)c;
	for (size_t i = 0; i < n; i++) {
		char norm[160];
		sr_error e = { 0 };
		if (strcmp(v[i], "*") != 0 &&
		    sr_deps_check_requirement(v[i], 0, norm, sizeof norm, &e) == 0)
			snprintf(v[i], strlen(v[i]) + 1, "%s", norm); /* never longer */
	}
	return 0;
}

/* true, false, or a directory (which means true) */
static int parse_dep_cache(const struct ctx *c, const struct field *f, const char *path,
			   const cJSON *v, sr_policy *p)
{
	sr_deps_policy *d = &p->dependencies;

	(void)f;
	if (cJSON_IsBool(v)) {
		d->cache = cJSON_IsTrue(v);
		return 0;
	}
	if (!cJSON_IsString(v))
		return sr_pol_bad_type(c, path, v, "true, false or an absolute path");
	if (sr_pol_check_abs_path(c, path, v) < 0)
		return -1;
	if (strcmp(v->valuestring, "/") == 0)
		return sr_pol_bad_value(c, path, v, "cannot be /");
	d->cache = true;
	return sr_pol_replace_str(&d->cache_dir, v->valuestring) < 0 ? sr_pol_oom(c) : 0;
}

static int check_index_url(const struct ctx *c, const char *path, const cJSON *v)
{
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	const char *s = v->valuestring, *why;
	char host[256];
	uint16_t port;
	if (sr_deps_parse_index_url(s, host, sizeof host, &port, &why) < 0)
		/* credentials are never echoed back */
		return strchr(why, '@') ? sr_pol_bad(c, path, "%s", why)
					: sr_pol_bad_value(c, path, v, "%s", why);
	return 0;
}

static int check_index_ca(const struct ctx *c, const struct field *f, sr_policy *p)
{
	const sr_deps_policy *d = &p->dependencies;

	(void)f;
	if (d->index_ca && (!d->index_url || strncmp(d->index_url, "https://", 8) != 0))
		return sr_pol_bad(
		    c, "policy.dependencies.index_ca",
		    "needs an https:// policy.dependencies.index_url (it is the CA pip "
		    "checks that index's certificate with)");
	return 0;
}

static int add_dep_cache(cJSON *o, const struct field *f, const sr_policy *p)
{
	const sr_deps_policy *d = &p->dependencies;

	return (d->cache && d->cache_dir ? cJSON_AddStringToObject(o, f->key, d->cache_dir)
					 : cJSON_AddBoolToObject(o, f->key, d->cache))
		   ? 0
		   : -1;
}

const struct field sr_pol_dependencies_fields[] = {
	{ "allow", F_LIST, AT(dependencies.allow),
	  .off_n = offsetof(sr_policy, dependencies.n_allow), .max = MAX_DEP_NAMES,
	  .what = "an array of package names (or [\"*\"])", .entry = check_dep_name,
	  .after = normalise_names },
	{ "ignore", F_LIST, AT(dependencies.ignore),
	  .off_n = offsetof(sr_policy, dependencies.n_ignore), .max = MAX_DEP_NAMES,
	  .what = "an array of package names", .entry = check_dep_name, .after = normalise_names },
	{ "wheelhouse", F_STRING, AT(dependencies.wheelhouse), .nullable = true,
	  .check = sr_pol_check_abs_path },
	{ "index_url", F_STRING, AT(dependencies.index_url), .nullable = true,
	  .check = check_index_url },
	{ "index_ca", F_STRING, AT(dependencies.index_ca), .nullable = true,
	  .check = sr_pol_check_abs_path, .after = check_index_ca },
	{ "auto_detect", F_BOOL, AT(dependencies.auto_detect), .def = false },
	{ "cache", .parse = parse_dep_cache, .to_json = add_dep_cache },
	{ "cache_entries", F_UINT, AT(dependencies.cache_entries), .min = 1, .max = 100000,
	  .def = 32, .what = "must be at least 1 (set \"cache\": false for no cache)" },
	{ "install_time", F_DURATION_TEXT, AT(dependencies.install_wall_ms), .min = 1000,
	  .max = 3600 * 1000, .def = 120 * 1000 },
	{ "install_memory", F_SIZE_TEXT, AT(dependencies.install_memory_bytes), .min = 64 * MIB,
	  .max = TIB, .def = 1024 * MIB },
	{ "max_size", F_SIZE_TEXT, AT(dependencies.max_size_bytes), .min = MIB, .max = TIB,
	  .def = 512 * MIB },
};
_Static_assert(ARRAY_LEN(sr_pol_dependencies_fields) == SR_POL_N_DEPENDENCIES,
	       "SR_POL_N_DEPENDENCIES is the length of sr_pol_dependencies_fields");

const struct field sr_pol_commands_fields[] = {
	{ "enabled", F_BOOL, AT(commands_enabled), .def = true },
};
_Static_assert(ARRAY_LEN(sr_pol_commands_fields) == SR_POL_N_COMMANDS,
	       "SR_POL_N_COMMANDS is the length of sr_pol_commands_fields");
