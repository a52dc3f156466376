/* policy.warm: the warm path's pools (docs/warm.md): which languages get
 * one, the Python modules a zygote imports and the code it runs before
 * forking, the pool's size, what happens when no warm sandbox is ready. */
#include <cjson/cJSON.h>
#include <string.h>

#include "base/base.h"
#include "policy_schema.h"
#include "saferun.h"

#define MAX_PRELOAD      64
#define MAX_WARMUP_BYTES (64u << 10)
#define MAX_MODULE_NAME  100
#define MAX_POOL_SIZE    64 /* sandboxes kept ready by the warm path */

/* A dotted Python module name: parts of ASCII letters, digits and _, not
 * starting with a digit, joined by single dots. The zygote imports each
 * one, so nothing else (paths, relative imports) may get through. */
static int is_module_name(const char *s)
{
	static const char ident[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				    "0123456789_";

	for (;;) {
		size_t len = strspn(s, ident);
		if (len == 0 || (*s >= '0' && *s <= '9'))
			return 0;
		s += len;
		if (*s == '\0')
			return 1;
		if (*s++ != '.')
			return 0;
	}
}

static int check_preload_entry(const struct ctx *c, const char *path, const cJSON *v,
			       char *const *before, size_t n_before)
{
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	if (strlen(v->valuestring) > MAX_MODULE_NAME)
		return sr_pol_bad_value(c, path, v, "is longer than %d characters",
					MAX_MODULE_NAME);
	if (!is_module_name(v->valuestring))
		return sr_pol_bad_value(c, path, v,
					"is not a Python module name (letters, digits and _, not "
					"starting with a digit, parts joined by dots: numpy, "
					"matplotlib.pyplot)");
	return sr_pol_listed_before(c, path, v, before, n_before);
}

/* The languages with a warm path, by bit (warm.languages). */
static const char *const warm_language_names[] = {
	[SR_LANG_PYTHON] = "python", [SR_LANG_JAVASCRIPT] = "javascript"
};

#define N_WARM_LANGUAGES (sizeof warm_language_names / sizeof *warm_language_names)

/* "languages": ["python", "javascript"], each once, at least one. Bash
 * has no pool: its start-up is the sandbox's own (docs/languages.md). */
static int parse_warm_languages(const struct ctx *c, const struct field *f, const char *path,
				const cJSON *arr, sr_policy *p)
{
	char at[PATH_BUF];
	unsigned set = 0;
	size_t i = 0;

	(void)f;
	if (!cJSON_IsArray(arr))
		return sr_pol_bad_type(c, path, arr, "an array of languages (python, javascript)");
	for (const cJSON *it = arr->child; it; it = it->next, i++) {
		sr_pol_path_index(at, path, i);
		if (sr_pol_want_string(c, at, it) < 0)
			return -1;
		unsigned bit = 0;
		for (unsigned l = 0; l < N_WARM_LANGUAGES; l++)
			if (strcmp(it->valuestring, warm_language_names[l]) == 0)
				bit = 1u << l;
		if (!bit)
			return sr_pol_bad_value(
			    c, at, it,
			    "is not a language with a warm path (known: python, "
			    "javascript; bash always runs cold)");
		if (set & bit)
			return sr_pol_bad_value(c, at, it, "is listed twice");
		set |= bit;
	}
	if (!set)
		return sr_pol_bad(
		    c, path,
		    "an empty list: name python, javascript or both (or set enabled to false)");
	p->warm.languages = set;
	return 0;
}

static int parse_warmup(const struct ctx *c, const struct field *f, const char *path,
			const cJSON *v, sr_policy *p)
{
	(void)f;
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	size_t n = strlen(v->valuestring);
	if (n > MAX_WARMUP_BYTES)
		return sr_pol_bad(c, path, "%zu bytes, at most %u", n, MAX_WARMUP_BYTES);
	if (sr_pol_replace_str(&p->warm.warmup, v->valuestring) < 0)
		return sr_pol_bad(c, path, "out of memory");
	return 0;
}

static int parse_pool_size(const struct ctx *c, const struct field *f, const char *path,
			   const cJSON *v, sr_policy *p)
{
	bool is_auto = cJSON_IsString(v) && strcmp(v->valuestring, "auto") == 0;
	uint64_t pool;

	(void)f;
	if (cJSON_IsString(v) && !is_auto)
		return sr_pol_bad_value(c, path, v,
					"is not a pool size (a whole number from 0 to %d, or "
					"\"auto\": sized from the machine)",
					MAX_POOL_SIZE);
	if (!is_auto && sr_pol_get_u64(c, path, v, MAX_POOL_SIZE, 0, &pool) < 0)
		return -1;
	p->warm.pool_size_auto = is_auto;
	p->warm.pool_size = is_auto ? 0 : (unsigned)pool;
	return 0;
}

static int add_warm_languages(cJSON *o, const struct field *f, const sr_policy *p)
{
	cJSON *langs = cJSON_AddArrayToObject(o, f->key);

	for (unsigned l = 0; langs && l < N_WARM_LANGUAGES; l++)
		if ((p->warm.languages & (1u << l)) &&
		    !cJSON_AddItemToArray(langs, cJSON_CreateString(warm_language_names[l])))
			return -1;
	return langs ? 0 : -1;
}

static int add_warmup(cJSON *o, const struct field *f, const sr_policy *p)
{
	return !p->warm.warmup || cJSON_AddStringToObject(o, f->key, p->warm.warmup) ? 0 : -1;
}

static int add_pool_size(cJSON *o, const struct field *f, const sr_policy *p)
{
	const struct sr_warm_policy *w = &p->warm;

	return (w->pool_size_auto ? cJSON_AddStringToObject(o, f->key, "auto")
				  : cJSON_AddNumberToObject(o, f->key, w->pool_size))
		   ? 0
		   : -1;
}

const struct field sr_pol_warm_fields[] = {
	{ "enabled", F_BOOL, AT(warm.enabled), .def = true },
	{ "languages", AT(warm.languages), .def = 1u << SR_LANG_PYTHON,
	  .parse = parse_warm_languages, .to_json = add_warm_languages },
	{ "preload", F_LIST, AT(warm.preload), .off_n = offsetof(sr_policy, warm.n_preload),
	  .max = MAX_PRELOAD, .what = "an array of module names", .entry = check_preload_entry },
	{ "warmup", .parse = parse_warmup, .to_json = add_warmup },
	{ "pool_size", .parse = parse_pool_size, .to_json = add_pool_size },
	{ "fallback", F_ENUM, AT(warm.fallback_cold), .def = true, .words = { "error", "cold" },
	  .what = "is not a fallback (known: cold, error)" },
	{ "refill", F_ENUM, AT(warm.refill_eager), .def = false, .words = { "idle", "eager" },
	  .what = "is not a refill behaviour (known: idle, eager)" },
};
_Static_assert(ARRAY_LEN(sr_pol_warm_fields) == SR_POL_N_WARM,
	       "SR_POL_N_WARM is the length of sr_pol_warm_fields");
