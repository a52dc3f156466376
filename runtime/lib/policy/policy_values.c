/* What every section's parser uses (policy_schema.h): errors that name
 * the JSON path and the value, paths, sizes and durations (also public:
 * sr_parse_size, sr_parse_duration), the plain values of the tables
 * (bools, words, numbers, sizes, durations, strings, lists of strings)
 * with their range checks, and the key check of an object. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "policy_schema.h"
#include "saferun.h"

#define MAX_KEYS 32 /* in one object of the schema (dependencies: 11) */

/* ---- errors ------------------------------------------------------------ */

int sr_pol_bad(const struct ctx *c, const char *path, const char *fmt, ...)
{
	char msg[SR_ERROR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (c->origin && *c->origin)
		sr_fail(c->err, 0, "%s: %s: %s", c->origin, path, msg);
	else
		sr_fail(c->err, 0, "%s: %s", path, msg);
	if (c->err)
		c->err->errnum = EINVAL;
	return -1;
}

/* The JSON text of v, shortened to fit an error message. */
static void show(const cJSON *v, char *buf, size_t n)
{
	char *s = cJSON_PrintUnformatted(v);

	if (!s)
		snprintf(buf, n, "(value)");
	else if (strlen(s) < n)
		snprintf(buf, n, "%s", s);
	else
		snprintf(buf, n, "%.*s...", (int)(n - 4), s);
	free(s);
}

/* "<path>: <value> <what is wrong with it>" */
int sr_pol_bad_value(const struct ctx *c, const char *path, const cJSON *v, const char *fmt, ...)
{
	char shown[SHOW_MAX], msg[SR_ERROR_MSG_MAX];
	va_list ap;

	show(v, shown, sizeof shown);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return sr_pol_bad(c, path, "%s %s", shown, msg);
}

int sr_pol_bad_type(const struct ctx *c, const char *path, const cJSON *v, const char *want)
{
	char shown[SHOW_MAX];

	if (cJSON_IsObject(v) && v->child)
		snprintf(shown, sizeof shown, "an object");
	else if (cJSON_IsArray(v) && v->child)
		snprintf(shown, sizeof shown, "an array");
	else
		show(v, shown, sizeof shown);
	return sr_pol_bad(c, path, "expected %s, got %s", want, shown);
}

/* buf = a b c, cut to PATH_BUF: paths only go into messages. */
static void path_cat(char *buf, const char *a, const char *b, const char *c)
{
	const char *parts[] = { a, b, c };
	size_t n = 0;

	for (size_t i = 0; i < 3; i++)
		for (const char *q = parts[i]; *q && n < PATH_BUF - 1; q++)
			buf[n++] = *q;
	buf[n] = '\0';
}

void sr_pol_path_key(char *buf, const char *parent, const char *key)
{
	path_cat(buf, parent, ".", key);
}

void sr_pol_path_index(char *buf, const char *parent, size_t i)
{
	char idx[32];

	snprintf(idx, sizeof idx, "[%zu]", i);
	path_cat(buf, parent, idx, "");
}

/* ---- small helpers -------------------------------------------------------- */

void sr_pol_strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

int sr_pol_replace_str(char **dst, const char *src)
{
	char *s = strdup(src);

	if (!s)
		return -1;
	free(*dst);
	*dst = s;
	return 0;
}

int sr_pol_oom(const struct ctx *c)
{
	return sr_fail(c->err, ENOMEM, "%s: read policy", c->origin ? c->origin : "policy");
}

void sr_pol_join_names(char *buf, size_t n, const char *const *names, size_t count)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < count && used < n; i++) {
		int w = snprintf(buf + used, n - used, "%s%s", i ? ", " : "", names[i]);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

/* ---- sizes and durations ---------------------------------------------------- */

/* A decimal "12" or "12.5": at most 6 fraction digits count (the rest are
 * cut), so frac * unit never overflows for units up to 2^40. */
struct decimal {
	uint64_t whole, frac, frac_scale;
	int has_dot;
};

static const char *parse_decimal(const char *s, struct decimal *d)
{
	*d = (struct decimal){ 0, 0, 1, 0 };
	if (!isdigit((unsigned char)*s))
		return NULL;
	for (; isdigit((unsigned char)*s); s++)
		if (__builtin_mul_overflow(d->whole, 10, &d->whole) ||
		    __builtin_add_overflow(d->whole, (uint64_t)(*s - '0'), &d->whole))
			return NULL;
	if (*s != '.')
		return s;
	d->has_dot = 1;
	if (!isdigit((unsigned char)*++s))
		return NULL;
	for (; isdigit((unsigned char)*s); s++)
		if (d->frac_scale < 1000000) {
			d->frac = d->frac * 10 + (uint64_t)(*s - '0');
			d->frac_scale *= 10;
		}
	return s;
}

static int scale_decimal(const struct decimal *d, uint64_t unit, uint64_t *out)
{
	uint64_t v;

	if (__builtin_mul_overflow(d->whole, unit, &v) ||
	    __builtin_add_overflow(v, d->frac * unit / d->frac_scale, &v))
		return -1;
	*out = v;
	return 0;
}

int sr_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "kmgt";
	struct decimal d;
	uint64_t unit = 1;
	const char *p;

	if (!s || !(p = parse_decimal(s, &d)))
		return -1;
	const char *u = *p ? strchr(units, tolower((unsigned char)*p)) : NULL;
	if (u) {
		unit = 1ULL << (10 * (u - units + 1));
		p++;
		if (strcmp(p, "iB") == 0)
			p += 2;
	} else if (d.has_dot) {
		return -1; /* no fractions of a byte */
	}
	if (strcmp(p, "B") == 0)
		p++;
	if (*p)
		return -1;
	return scale_decimal(&d, unit, out);
}

int sr_parse_duration(const char *s, uint64_t *out_ms)
{
	static const struct {
		const char *suffix;
		uint64_t ms;
	} units[] = { { "", 1000 }, { "s", 1000 }, { "ms", 1 }, { "m", 60000 }, { "h", 3600000 } };
	struct decimal d;
	const char *p;

	if (!s || !(p = parse_decimal(s, &d)))
		return -1;
	for (size_t i = 0; i < ARRAY_LEN(units); i++)
		if (strcmp(p, units[i].suffix) == 0)
			return scale_decimal(&d, units[i].ms, out_ms);
	return -1;
}

/* ---- plain values ------------------------------------------------------------- */

char **sr_pol_field_str(sr_policy *p, const struct field *f)
{
	return (char **)(void *)((char *)p + f->off);
}

/* F_LIST: the strings and their count */
char ***sr_pol_field_strv(sr_policy *p, const struct field *f)
{
	return (char ***)(void *)((char *)p + f->off);
}

size_t *sr_pol_field_count(sr_policy *p, const struct field *f)
{
	return (size_t *)(void *)((char *)p + f->off_n);
}

void sr_pol_fmt_size(uint64_t v, char *buf, size_t n)
{
	static const char units[] = "TGMK";

	for (int i = 0; i < 4; i++) {
		uint64_t unit = 1ULL << (10 * (4 - i));
		if (v && v % unit == 0) {
			snprintf(buf, n, "%llu%c", (unsigned long long)(v / unit), units[i]);
			return;
		}
	}
	snprintf(buf, n, "%llu", (unsigned long long)v);
}

static void fmt_value(enum field_kind kind, uint64_t v, char *buf, size_t n)
{
	switch (kind) {
	case F_SIZE:
	case F_SIZE_TEXT: sr_pol_fmt_size(v, buf, n); break;
	case F_DURATION:
	case F_DURATION_TEXT:
		if (v % 3600000 == 0)
			snprintf(buf, n, "%lluh", (unsigned long long)(v / 3600000));
		else if (v % 1000 == 0)
			snprintf(buf, n, "%llus", (unsigned long long)(v / 1000));
		else
			snprintf(buf, n, "%llums", (unsigned long long)v);
		break;
	case F_CPUS: snprintf(buf, n, "%g", (double)v / 1000.0); break;
	default: snprintf(buf, n, "%llu", (unsigned long long)v); break;
	}
}

static uint64_t round_u64(double x)
{
	return x >= 0x1p64 ? UINT64_MAX : (uint64_t)(x + 0.5);
}

static const char *const lim_expect[] = {
	[F_DURATION] = "is not a duration (use 20, 20s, 500ms or 2m)",
	[F_CPUS] = "is not a number of CPUs (use 1 or 0.5)",
	[F_SIZE] = "is not a size (use 512M, 1G, or bytes)",
	[F_COUNT] = "is not a whole number",
};

/* A JSON number: seconds, CPUs, bytes or a count. Negative values come
 * back as -1 and fail the range check as "too small". */
static int limit_number(const struct field *f, double x, uint64_t *out, int *negative)
{
	*negative = x < 0 || (f->kind == F_CPUS && x == 0);
	if (*negative)
		return 0;
	if (f->kind == F_DURATION || f->kind == F_CPUS) {
		*out = round_u64(x * 1000.0);
		return 0;
	}
	if (x != floor(x) || x > JSON_MAX_EXACT)
		return -1;
	*out = (uint64_t)x;
	return 0;
}

/* F_DURATION, F_CPUS, F_SIZE, F_COUNT: what policy.limits holds. */
static int limit_value(const struct ctx *c, const char *path, const struct field *f, const cJSON *v,
		       uint64_t *out)
{
	char bound[32];
	int negative = 0, rc = -1;

	if (cJSON_IsNumber(v) && isfinite(v->valuedouble))
		rc = limit_number(f, v->valuedouble, out, &negative);
	else if (cJSON_IsString(v) && f->kind == F_SIZE)
		rc = sr_parse_size(v->valuestring, out);
	else if (cJSON_IsString(v) && f->kind == F_DURATION)
		rc = sr_parse_duration(v->valuestring, out);
	if (rc < 0)
		return sr_pol_bad_value(c, path, v, "%s", lim_expect[f->kind]);
	if (negative || *out < f->min) {
		fmt_value(f->kind, f->min, bound, sizeof bound);
		return sr_pol_bad_value(c, path, v, "is too small (at least %s)", bound);
	}
	if (*out > f->max) {
		fmt_value(f->kind, f->max, bound, sizeof bound);
		return sr_pol_bad_value(c, path, v, "is too large (at most %s)", bound);
	}
	return 0;
}

/* ---- generic object walking -------------------------------------------------- */

/* v must be an object whose keys are all in known or "comment", each
 * once. "comment" keys must be strings and are ignored. */
int sr_pol_check_keys(const struct ctx *c, const char *path, const cJSON *v,
		      const struct field *known, size_t n_fields)
{
	char sub[PATH_BUF], list[256];
	const char *names[MAX_KEYS + 1];
	size_t n_known = 0;

	if (!cJSON_IsObject(v))
		return sr_pol_bad_type(c, path, v, "an object");
	for (size_t i = 0; i < n_fields && n_known < MAX_KEYS; i++)
		names[n_known++] = known[i].key;
	names[n_known++] = "comment";
	for (const cJSON *k = v->child; k; k = k->next) {
		size_t i = 0;
		while (i < n_known && strcmp(names[i], k->string) != 0)
			i++;
		sr_pol_path_key(sub, path, k->string);
		if (i == n_known) {
			sr_pol_join_names(list, sizeof list, names, n_known);
			return sr_pol_bad(c, sub, "unknown key (known: %s)", list);
		}
		for (const cJSON *j = v->child; j != k; j = j->next)
			if (strcmp(j->string, k->string) == 0)
				return sr_pol_bad(c, sub, "appears twice");
		if (strcmp(k->string, "comment") == 0 && !cJSON_IsString(k))
			return sr_pol_bad_type(c, sub, k, "a string");
	}
	return 0;
}

const cJSON *sr_pol_get(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

int sr_pol_want_string(const struct ctx *c, const char *path, const cJSON *v)
{
	return cJSON_IsString(v) ? 0 : sr_pol_bad_type(c, path, v, "a string");
}

static int get_bool(const struct ctx *c, const char *path, const cJSON *v, bool *out)
{
	if (!cJSON_IsBool(v))
		return sr_pol_bad_type(c, path, v, "true or false");
	*out = cJSON_IsTrue(v);
	return 0;
}

int sr_pol_listed_before(const struct ctx *c, const char *path, const cJSON *v, char *const *before,
			 size_t n_before)
{
	for (size_t i = 0; i < n_before; i++)
		if (strcmp(before[i], v->valuestring) == 0)
			return sr_pol_bad_value(c, path, v, "is listed twice");
	return 0;
}

/* base: an array of at most max strings, each passing check. It replaces
 * *list (NULL-terminated) only when every entry passes. */
static int parse_string_list(const struct ctx *c, const char *base, const cJSON *arr, int max,
			     const char *want, entry_check check, char ***list, size_t *n_list)
{
	char path[PATH_BUF];
	char **v = NULL;
	size_t n = 0;
	int rc = -1;

	if (!cJSON_IsArray(arr))
		return sr_pol_bad_type(c, base, arr, want);
	if (cJSON_GetArraySize(arr) > max)
		return sr_pol_bad(c, base, "%d entries, at most %d", cJSON_GetArraySize(arr), max);
	v = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *v);
	if (!v)
		return sr_pol_oom(c);
	for (const cJSON *it = arr->child; it; it = it->next, n++) {
		sr_pol_path_index(path, base, n);
		if (check(c, path, it, v, n) < 0)
			goto out;
		if (!(v[n] = strdup(it->valuestring))) {
			sr_pol_oom(c);
			goto out;
		}
	}
	sr_pol_strv_free(*list, *n_list);
	*list = v;
	*n_list = n;
	v = NULL;
	rc = 0;
out:
	sr_pol_strv_free(v, n);
	return rc;
}

/* A whole JSON number 0..max, or (with strings) "123" or "0x7b" for the
 * full 64 bits JSON numbers cannot carry exactly. *out is 0 on an error:
 * defined on every path (gcc -O3 cannot see that sr_pol_bad_value() fails). */
int sr_pol_get_u64(const struct ctx *c, const char *path, const cJSON *v, uint64_t max, int strings,
		   uint64_t *out)
{
	*out = 0;
	if (cJSON_IsNumber(v)) {
		double x = v->valuedouble;
		if (!isfinite(x) || x < 0 || x != floor(x) || x > JSON_MAX_EXACT ||
		    (uint64_t)x > max)
			return sr_pol_bad_value(c, path, v, "is not a whole number from 0 to %llu",
						(unsigned long long)max);
		*out = (uint64_t)x;
		return 0;
	}
	if (!strings || !cJSON_IsString(v))
		return sr_pol_bad_type(
		    c, path, v, strings ? "a number or a string like \"0xff\"" : "a whole number");
	const char *s = v->valuestring;
	int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
	const char *digits = hex ? s + 2 : s;
	char *end;
	errno = 0;
	unsigned long long x = strtoull(digits, &end, hex ? 16 : 10);
	if (!(hex ? isxdigit((unsigned char)*digits) : isdigit((unsigned char)*digits)) || *end ||
	    errno || x > max)
		return sr_pol_bad_value(c, path, v,
					"is not an unsigned 64-bit number (use 123 or \"0x7b\")");
	*out = x;
	return 0;
}

/* F_SIZE_TEXT: bytes, min..max. */
static int size_text_value(const struct ctx *c, const char *path, const struct field *f,
			   const cJSON *v, uint64_t *out)
{
	char lo[32], hi[32];
	uint64_t x;

	if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= JSON_MAX_EXACT &&
	    v->valuedouble == floor(v->valuedouble))
		x = (uint64_t)v->valuedouble;
	else if (!cJSON_IsString(v) || sr_parse_size(v->valuestring, &x) < 0)
		return sr_pol_bad_value(c, path, v, "is not a size (use 512M, 1G, or bytes)");
	if (x < f->min || x > f->max) {
		sr_pol_fmt_size(f->min, lo, sizeof lo);
		sr_pol_fmt_size(f->max, hi, sizeof hi);
		return sr_pol_bad_value(c, path, v, "is out of range (%s to %s)", lo, hi);
	}
	*out = x;
	return 0;
}

/* F_DURATION_TEXT: ms, min..max. */
static int duration_text_value(const struct ctx *c, const char *path, const struct field *f,
			       const cJSON *v, uint64_t *out)
{
	char lo[32], hi[32];
	uint64_t ms;

	if (cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0)
		ms = (uint64_t)(v->valuedouble * 1000.0 + 0.5);
	else if (!cJSON_IsString(v) || sr_parse_duration(v->valuestring, &ms) < 0)
		return sr_pol_bad_value(c, path, v,
					"is not a duration (use 120, \"120s\", \"2m\")");
	if (ms < f->min || ms > f->max) {
		fmt_value(f->kind, f->min, lo, sizeof lo);
		fmt_value(f->kind, f->max, hi, sizeof hi);
		return sr_pol_bad_value(c, path, v, "is out of range (%s to %s)", lo, hi);
	}
	*out = ms;
	return 0;
}

static int enum_value(const struct ctx *c, const char *path, const struct field *f, const cJSON *v,
		      uint64_t *out)
{
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_LEN(f->words) && f->words[i]; i++)
		if (strcmp(v->valuestring, f->words[i]) == 0) {
			*out = i;
			return 0;
		}
	return sr_pol_bad_value(c, path, v, "%s", f->what);
}

/* The value of a plain field (bool, word, number, size, duration) at
 * path, checked against the field's bounds. */
int sr_pol_field_value(const struct ctx *c, const char *path, const struct field *f, const cJSON *v,
		       uint64_t *out)
{
	bool b = false;

	*out = 0;
	switch (f->kind) {
	case F_BOOL:
		if (get_bool(c, path, v, &b) < 0)
			return -1;
		*out = b;
		return 0;
	case F_ENUM: return enum_value(c, path, f, v, out);
	case F_DURATION:
	case F_CPUS:
	case F_SIZE:
	case F_COUNT: return limit_value(c, path, f, v, out);
	case F_UINT:
		if (sr_pol_get_u64(c, path, v, f->max, 0, out) < 0)
			return -1;
		return *out < f->min ? sr_pol_bad_value(c, path, v, "%s", f->what) : 0;
	case F_SIZE_TEXT: return size_text_value(c, path, f, v, out);
	case F_DURATION_TEXT: return duration_text_value(c, path, f, v, out);
	default: return sr_pol_bad(c, path, "has no plain value"); /* a bug in a table */
	}
}

/* F_STRING: null (when nullable) or a string check accepts. */
int sr_pol_string_value(const struct ctx *c, const char *path, const struct field *f,
			const cJSON *v, sr_policy *p)
{
	char **dst = sr_pol_field_str(p, f);

	if (f->nullable && cJSON_IsNull(v)) {
		free(*dst);
		*dst = NULL;
		return 0;
	}
	if ((f->check ? f->check(c, path, v) : sr_pol_want_string(c, path, v)) < 0)
		return -1;
	return sr_pol_replace_str(dst, v->valuestring) < 0 ? sr_pol_oom(c) : 0;
}

/* F_LIST: replaces the list only when every entry passes. */
int sr_pol_list_value(const struct ctx *c, const char *path, const struct field *f, const cJSON *v,
		      sr_policy *p)
{
	return parse_string_list(c, path, v, (int)f->max, f->what, f->entry,
				 sr_pol_field_strv(p, f), sr_pol_field_count(p, f));
}

int sr_pol_add_strings(cJSON *o, const char *key, char **v, size_t n)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);

	for (size_t i = 0; a && i < n; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(v[i])))
			return -1;
	return a ? 0 : -1;
}
