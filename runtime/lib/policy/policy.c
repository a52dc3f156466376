/* Policies: JSON documents read over the built-in default, validated
 * strictly. Every error names the JSON path and the value, and says what
 * is expected. Format reference: docs/policy.md. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "checker/checker.h"
#include "policy.h"
#include "saferun.h"
#include "seccomp_cache.h"

extern const unsigned char sr_embedded_default_policy[];
extern const size_t sr_embedded_default_policy_len;

#define POLICY_MAX_BYTES (4u << 20)
#define PATH_BUF         192 /* a JSON path in an error message */
#define SHOW_MAX         72  /* an offending value, shortened */
#define MAX_WRITABLE     32
#define MAX_ENV          1024
#define MAX_ENV_ENTRY    (128 * 1024 - 1) /* the kernel's MAX_ARG_STRLEN, less the NUL */
/* libseccomp's rule merging is quadratic: 2048 names compile in ~10 ms,
 * 16000 take half a second. The default uses about 380. */
#define MAX_RULES        1024
#define MAX_NAMES        2048
#define MAX_ERRNO_RET    4095
#define MAX_ALLOW        256
#define MAX_ALLOW_NAME   79
#define MAX_PRELOAD      64
#define MAX_WARMUP_BYTES (64u << 10)
#define MAX_MODULE_NAME  100
#define MAX_DEP_NAMES    1024
#define MAX_KEYS         32                 /* in one object of the schema (dependencies: 11) */
#define MAX_POOL_SIZE    64                 /* sandboxes kept ready by the warm path */
#define JSON_MAX_EXACT   9007199254740992.0 /* 2^53: larger JSON numbers are not exact */

/* Where errors go: the document's name and the caller's error. */
struct ctx {
	const char *origin;
	sr_error *err;
	int compile; /* compile a seccomp section to prove libseccomp takes it */
};

/* The schema: every key of every section is one entry of a table below
 * ("the tables"), which drives the unknown-key check, the parsing and
 * range checks of plain values, the built-in defaults and the JSON form.
 * Values of a shape of their own (lists with entry checks, objects of
 * free keys, seccomp rules) have hand-written parse and to_json functions
 * the entry names. A new plain key: its table entry, its sr_policy field,
 * its line in docs/policy.md. */
enum field_kind {
	F_SPECIAL,       /* hand-written parse and to_json (or only a key, in a key list);
			    with AT(member), an integer field that takes def */
	F_OBJECT,        /* a section: sub's keys, or a hand-written parse after the key check */
	F_BOOL,          /* true or false */
	F_ENUM,          /* one of words, stored as its index */
	F_STRING,        /* checked by check; nullable: null in JSON is NULL */
	F_LIST,          /* an array of at most max strings, each checked by entry */
	F_DURATION,      /* ms: 20, "20s", "500ms"; JSON out: seconds */
	F_CPUS,          /* thousandths of a CPU: 1, 0.5; JSON out: CPUs */
	F_SIZE,          /* bytes: "512M", 1048576; JSON out: bytes */
	F_COUNT,         /* a whole number min..max */
	F_UINT,          /* a whole number 0..max; below min: what */
	F_SIZE_TEXT,     /* bytes, "is out of range" messages; JSON out: "512M" */
	F_DURATION_TEXT, /* ms, "is out of range" messages; JSON out: "120s" */
};

struct field;

/* Checks one entry of a list of strings, given the entries before it. */
typedef int (*entry_check)(const struct ctx *c, const char *path, const cJSON *v,
			   char *const *before, size_t n_before);

struct field {
	const char *key;
	enum field_kind kind;
	size_t off, width;      /* where the value lands in sr_policy, and its size */
	size_t off_n;           /* F_LIST: the size_t count next to the char ** */
	uint64_t min, max, def; /* in the field's unit: ms, bytes, 1/1000 CPU, a count;
				   F_LIST: max entries; F_BOOL, F_ENUM: def is 0/1, an index */
	const char *def_str;    /* F_STRING's default (NULL: none) */
	const char *words[3];   /* F_ENUM's words, by value */
	const char *what;       /* F_ENUM: not a word; F_UINT: below min; F_LIST: the type */
	bool nullable;          /* F_STRING: null is a value (NULL), shown as null */
	int (*check)(const struct ctx *c, const char *path, const cJSON *v); /* F_STRING */
	entry_check entry;                                                   /* F_LIST */
	int (*parse)(const struct ctx *c, const struct field *f, const char *path, const cJSON *v,
		     sr_policy *p);
	int (*to_json)(cJSON *parent, const struct field *f, const sr_policy *p);
	/* runs once the field is read (present in the document or not) */
	int (*after)(const struct ctx *c, const struct field *f, sr_policy *p);
	const struct field *sub; /* F_OBJECT: its keys */
	size_t n_sub;
};

#define AT(member) .off = offsetof(sr_policy, member), .width = sizeof(((sr_policy *)0)->member)
#define SUB(table) .sub = table, .n_sub = ARRAY_LEN(table)

static const struct preset {
	const char *name;
	sr_limits limits;
} presets[] = {
	{ "tiny", { 5000, 250, 128 * MIB, 0, 16, 16 * MIB, 64 * KIB, 256 } },
	{ "small", { 10000, 500, 256 * MIB, 0, 32, 32 * MIB, 256 * KIB, 256 } },
	{ "medium", { 20000, 1000, 512 * MIB, 0, 64, 64 * MIB, MIB, 256 } },
	{ "large", { 60000, 2000, 2 * GIB, 0, 256, 512 * MIB, 10 * MIB, 256 } },
};

static const struct {
	const char *name;
	sr_seccomp_action_kind kind;
} actions[] = {
	{ "SCMP_ACT_ALLOW", SR_SCMP_ALLOW },
	{ "SCMP_ACT_ERRNO", SR_SCMP_ERRNO },
	{ "SCMP_ACT_KILL_PROCESS", SR_SCMP_KILL_PROCESS },
	{ "SCMP_ACT_KILL_THREAD", SR_SCMP_KILL_THREAD },
	{ "SCMP_ACT_KILL", SR_SCMP_KILL_THREAD }, /* libseccomp's alias */
	{ "SCMP_ACT_TRAP", SR_SCMP_TRAP },
	{ "SCMP_ACT_LOG", SR_SCMP_LOG },
};

static const char *const op_names[] = {
	[SR_CMP_NE] = "SCMP_CMP_NE",
	[SR_CMP_LT] = "SCMP_CMP_LT",
	[SR_CMP_LE] = "SCMP_CMP_LE",
	[SR_CMP_EQ] = "SCMP_CMP_EQ",
	[SR_CMP_GE] = "SCMP_CMP_GE",
	[SR_CMP_GT] = "SCMP_CMP_GT",
	[SR_CMP_MASKED_EQ] = "SCMP_CMP_MASKED_EQ",
};

/* ---- errors ------------------------------------------------------------ */

static int sr_pol_bad(const struct ctx *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int sr_pol_bad(const struct ctx *c, const char *path, const char *fmt, ...)
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

static int sr_pol_bad_value(const struct ctx *c, const char *path, const cJSON *v, const char *fmt,
			    ...) __attribute__((format(printf, 4, 5)));

/* "<path>: <value> <what is wrong with it>" */
static int sr_pol_bad_value(const struct ctx *c, const char *path, const cJSON *v, const char *fmt,
			    ...)
{
	char shown[SHOW_MAX], msg[SR_ERROR_MSG_MAX];
	va_list ap;

	show(v, shown, sizeof shown);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return sr_pol_bad(c, path, "%s %s", shown, msg);
}

static int sr_pol_bad_type(const struct ctx *c, const char *path, const cJSON *v, const char *want)
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

static void sr_pol_path_key(char *buf, const char *parent, const char *key)
{
	path_cat(buf, parent, ".", key);
}

static void sr_pol_path_index(char *buf, const char *parent, size_t i)
{
	char idx[32];

	snprintf(idx, sizeof idx, "[%zu]", i);
	path_cat(buf, parent, idx, "");
}

/* ---- small helpers -------------------------------------------------------- */

static void sr_pol_strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static void sr_pol_seccomp_free(sr_seccomp_policy *s)
{
	for (size_t i = 0; s->rules && i < s->n_rules; i++)
		sr_pol_strv_free(s->rules[i].names, s->rules[i].n_names);
	free(s->rules);
	s->rules = NULL;
	s->n_rules = 0;
}

static int sr_pol_replace_str(char **dst, const char *src)
{
	char *s = strdup(src);

	if (!s)
		return -1;
	free(*dst);
	*dst = s;
	return 0;
}

static int sr_pol_oom(const struct ctx *c)
{
	return sr_fail(c->err, ENOMEM, "%s: read policy", c->origin ? c->origin : "policy");
}

static void sr_pol_join_names(char *buf, size_t n, const char *const *names, size_t count)
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

static const struct preset *find_preset(const char *name)
{
	for (size_t i = 0; i < ARRAY_LEN(presets); i++)
		if (strcmp(presets[i].name, name) == 0)
			return &presets[i];
	return NULL;
}

static void preset_names(char *buf, size_t n)
{
	const char *names[ARRAY_LEN(presets)];

	for (size_t i = 0; i < ARRAY_LEN(presets); i++)
		names[i] = presets[i].name;
	sr_pol_join_names(buf, n, names, ARRAY_LEN(presets));
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

static uint64_t field_get(const sr_policy *p, const struct field *f)
{
	const char *at = (const char *)p + f->off;
	uint8_t v8;
	uint32_t v32;
	uint64_t v64;

	switch (f->width) {
	case sizeof v8: memcpy(&v8, at, sizeof v8); return v8;
	case sizeof v32: memcpy(&v32, at, sizeof v32); return v32;
	default: memcpy(&v64, at, sizeof v64); return v64;
	}
}

/* v is range-checked against f->max (or is a bool or a word's index) */
static void field_set(sr_policy *p, const struct field *f, uint64_t v)
{
	char *at = (char *)p + f->off;
	uint8_t v8 = (uint8_t)v;
	uint32_t v32 = (uint32_t)v;

	switch (f->width) {
	case sizeof v8: memcpy(at, &v8, sizeof v8); break;
	case sizeof v32: memcpy(at, &v32, sizeof v32); break;
	default: memcpy(at, &v, sizeof v); break;
	}
}

static char **sr_pol_field_str(sr_policy *p, const struct field *f)
{
	return (char **)(void *)((char *)p + f->off);
}

/* F_LIST: the strings and their count */
static char ***sr_pol_field_strv(sr_policy *p, const struct field *f)
{
	return (char ***)(void *)((char *)p + f->off);
}

static size_t *sr_pol_field_count(sr_policy *p, const struct field *f)
{
	return (size_t *)(void *)((char *)p + f->off_n);
}

static void sr_pol_fmt_size(uint64_t v, char *buf, size_t n)
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
static int sr_pol_check_keys(const struct ctx *c, const char *path, const cJSON *v,
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

static const cJSON *sr_pol_get(const cJSON *obj, const char *key)
{
	return cJSON_GetObjectItemCaseSensitive(obj, key);
}

static int sr_pol_want_string(const struct ctx *c, const char *path, const cJSON *v)
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

static int sr_pol_listed_before(const struct ctx *c, const char *path, const cJSON *v,
				char *const *before, size_t n_before)
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
static int sr_pol_get_u64(const struct ctx *c, const char *path, const cJSON *v, uint64_t max,
			  int strings, uint64_t *out)
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
static int sr_pol_field_value(const struct ctx *c, const char *path, const struct field *f,
			      const cJSON *v, uint64_t *out)
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
static int sr_pol_string_value(const struct ctx *c, const char *path, const struct field *f,
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
static int sr_pol_list_value(const struct ctx *c, const char *path, const struct field *f,
			     const cJSON *v, sr_policy *p)
{
	return parse_string_list(c, path, v, (int)f->max, f->what, f->entry,
				 sr_pol_field_strv(p, f), sr_pol_field_count(p, f));
}

/* ---- fields of their own shape ------------------------------------------------------ */

static int parse_preset(const struct ctx *c, const struct field *f, const char *path,
			const cJSON *v, sr_policy *p)
{
	(void)f;
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	const struct preset *ps = find_preset(v->valuestring);
	if (!ps) {
		char list[64];
		preset_names(list, sizeof list);
		return sr_pol_bad_value(c, path, v, "is not a preset (known: %s)", list);
	}
	if (sr_pol_replace_str(&p->preset, ps->name) < 0)
		return sr_pol_oom(c);
	p->limits = ps->limits;
	return 0;
}

/* Absolute, normalized (no "", "." or ".." components), printable. */
static int sr_pol_check_abs_path(const struct ctx *c, const char *path, const cJSON *v)
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

static void sr_pol_net_policy_free(sr_net_policy *n)
{
	for (size_t i = 0; i < n->n_allow; i++) {
		free(n->allow[i].cidr);
		free(n->allow[i].host);
	}
	free(n->allow);
	for (size_t i = 0; i < n->n_dns; i++)
		free(n->dns[i]);
	*n = (sr_net_policy){ 0 };
}

/* "a.b.c.d" or "a.b.c.d/n" into a network address and a prefix length. */
static int parse_ipv4(const char *s, bool cidr, uint32_t *addr, unsigned *prefix)
{
	char buf[INET_ADDRSTRLEN + 4];
	if (strlen(s) >= sizeof buf)
		return -1;
	snprintf(buf, sizeof buf, "%s", s);
	char *slash = strchr(buf, '/');
	*prefix = 32;
	if (slash) {
		char *end;
		unsigned long n = strtoul(slash + 1, &end, 10);
		if (!cidr || !isdigit((unsigned char)slash[1]) || *end || n > 32)
			return -1;
		*prefix = (unsigned)n;
		*slash = '\0';
	}
	struct in_addr a;
	if (inet_pton(AF_INET, buf, &a) != 1)
		return -1;
	*addr = ntohl(a.s_addr);
	return 0;
}

static int net_cidr(const struct ctx *c, const char *path, const cJSON *v, sr_net_allow *a)
{
	uint32_t addr;
	unsigned prefix;
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	if (strchr(v->valuestring, ':'))
		return sr_pol_bad_value(c, path, v, "is IPv6: egress is IPv4 only");
	if (parse_ipv4(v->valuestring, true, &addr, &prefix) < 0)
		return sr_pol_bad_value(c, path, v, "is not an IPv4 CIDR (use \"198.18.0.0/24\")");
	uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;
	if (addr & ~mask)
		return sr_pol_bad_value(c, path, v, "has host bits set beyond /%u", prefix);
	char text[INET_ADDRSTRLEN + 4];
	struct in_addr na = { .s_addr = htonl(addr) };
	inet_ntop(AF_INET, &na, text, sizeof text);
	snprintf(text + strlen(text), sizeof text - strlen(text), "/%u", prefix);
	return (a->cidr = strdup(text)) ? 0 : sr_pol_oom(c);
}

/* A DNS name (letters, digits, '-', '.'), resolved later on the host. */
static int net_host(const struct ctx *c, const char *path, const cJSON *v, sr_net_allow *a)
{
	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	const char *s = v->valuestring;
	size_t n = strlen(s);
	bool ok = n > 0 && n <= 253 && s[0] != '-' && s[0] != '.';
	for (size_t i = 0; ok && i < n; i++)
		ok = isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '.';
	if (!ok)
		return sr_pol_bad_value(c, path, v,
					"is not a host name (letters, digits, '-' and '.')");
	return (a->host = strdup(s)) ? 0 : sr_pol_oom(c);
}

static int net_ports(const struct ctx *c, const char *path, const cJSON *v, sr_net_allow *a)
{
	char sub[PATH_BUF];
	if (cJSON_IsString(v) && strcmp(v->valuestring, "*") == 0)
		return 0;
	if (!cJSON_IsArray(v) || !v->child)
		return sr_pol_bad_type(c, path, v, "\"*\" or a non-empty array of ports");
	if (cJSON_GetArraySize(v) > SR_NET_MAX_PORTS)
		return sr_pol_bad(c, path, "%d ports, at most %d (use \"*\")",
				  cJSON_GetArraySize(v), SR_NET_MAX_PORTS);
	for (const cJSON *it = v->child; it; it = it->next) {
		uint64_t port;
		sr_pol_path_index(sub, path, a->n_ports);
		if (sr_pol_get_u64(c, sub, it, 65535, 0, &port) < 0)
			return -1;
		if (port == 0)
			return sr_pol_bad_value(c, sub, it, "is not a port (1 to 65535)");
		for (size_t i = 0; i < a->n_ports; i++)
			if (a->ports[i] == port)
				return sr_pol_bad_value(c, sub, it, "is listed twice");
		a->ports[a->n_ports++] = (uint16_t)port;
	}
	return 0;
}

/* The keys of one policy.network.allow entry (parsed by hand: one of
 * cidr and host, ports required). */
static const struct field net_allow_keys[] = {
	{ .key = "cidr" },
	{ .key = "host" },
	{ .key = "ports" },
	{ .key = "proto" },
};

static int net_allow_entry(const struct ctx *c, const char *path, const cJSON *obj, sr_net_allow *a)
{
	char sub[PATH_BUF];
	const cJSON *cidr = sr_pol_get(obj, "cidr"), *host = sr_pol_get(obj, "host"), *v;

	if (sr_pol_check_keys(c, path, obj, net_allow_keys, ARRAY_LEN(net_allow_keys)) < 0)
		return -1;
	if (!cidr == !host)
		return sr_pol_bad(c, path, "needs exactly one of \"cidr\" and \"host\"");
	sr_pol_path_key(sub, path, cidr ? "cidr" : "host");
	if (cidr ? net_cidr(c, sub, cidr, a) < 0 : net_host(c, sub, host, a) < 0)
		return -1;
	sr_pol_path_key(sub, path, "ports");
	if (!(v = sr_pol_get(obj, "ports")))
		return sr_pol_bad(c, sub, "missing (a list of ports, or \"*\" for every port)");
	if (net_ports(c, sub, v, a) < 0)
		return -1;
	sr_pol_path_key(sub, path, "proto");
	if ((v = sr_pol_get(obj, "proto"))) {
		if (sr_pol_want_string(c, sub, v) < 0)
			return -1;
		if (strcmp(v->valuestring, "tcp") != 0 && strcmp(v->valuestring, "udp") != 0)
			return sr_pol_bad_value(c, sub, v, "is not a protocol (known: tcp, udp)");
		a->proto = v->valuestring[0] == 'u' ? SR_NET_UDP : SR_NET_TCP;
	}
	return 0;
}

static int net_allow(const struct ctx *c, const cJSON *arr, sr_net_policy *n)
{
	static const char *const base = "policy.network.allow";
	char path[PATH_BUF];

	if (!cJSON_IsArray(arr))
		return sr_pol_bad_type(c, base, arr, "an array of destinations");
	if (cJSON_GetArraySize(arr) > SR_NET_MAX_ALLOW)
		return sr_pol_bad(c, base, "%d entries, at most %d", cJSON_GetArraySize(arr),
				  SR_NET_MAX_ALLOW);
	if (!(n->allow = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *n->allow)))
		return sr_pol_oom(c);
	for (const cJSON *it = arr->child; it; it = it->next) {
		sr_pol_path_index(path, base, n->n_allow);
		if (net_allow_entry(c, path, it, &n->allow[n->n_allow++]) < 0)
			return -1;
	}
	return 0;
}

static int net_dns(const struct ctx *c, const cJSON *v, sr_net_policy *n)
{
	static const char *const base = "policy.network.dns";
	char path[PATH_BUF];

	if (cJSON_IsBool(v)) {
		n->dns_host = cJSON_IsTrue(v);
		return 0;
	}
	if (!cJSON_IsArray(v))
		return sr_pol_bad_type(c, base, v, "true, false or an array of resolver addresses");
	if (cJSON_GetArraySize(v) > SR_NET_MAX_DNS)
		return sr_pol_bad(c, base, "%d resolvers, at most %d", cJSON_GetArraySize(v),
				  SR_NET_MAX_DNS);
	for (const cJSON *it = v->child; it; it = it->next) {
		uint32_t addr;
		unsigned prefix;
		sr_pol_path_index(path, base, n->n_dns);
		if (sr_pol_want_string(c, path, it) < 0)
			return -1;
		if (parse_ipv4(it->valuestring, false, &addr, &prefix) < 0)
			return sr_pol_bad_value(c, path, it,
						"is not an IPv4 address (use \"198.18.0.53\")");
		if ((addr >> 24) == 127)
			return sr_pol_bad_value(
			    c, path, it,
			    "is a loopback address: the sandbox has its own lo, "
			    "the host's resolvers on 127.0.0.0/8 are out of reach");
		for (size_t i = 0; i < n->n_dns; i++)
			if (strcmp(n->dns[i], it->valuestring) == 0)
				return sr_pol_bad_value(c, path, it, "is listed twice");
		if (!(n->dns[n->n_dns++] = strdup(it->valuestring)))
			return sr_pol_oom(c);
	}
	return 0;
}

static const struct field *sub_field(const struct field *f, const char *key)
{
	for (size_t i = 0; i < f->n_sub; i++)
		if (strcmp(f->sub[i].key, key) == 0)
			return &f->sub[i];
	return NULL;
}

/* The section as a whole: mode, allow and dns depend on each other. */
static int parse_network(const struct ctx *c, const struct field *f, const char *path,
			 const cJSON *obj, sr_policy *p)
{
	const struct field *mode_field = sub_field(f, "mode");
	char sub[PATH_BUF];
	sr_net_policy n = { 0 };
	sr_net_mode mode = p->net_mode;
	uint64_t x;
	const cJSON *v;
	int rc = -1;

	sr_pol_path_key(sub, path, "mode");
	if ((v = sr_pol_get(obj, "mode"))) {
		if (sr_pol_field_value(c, sub, mode_field, v, &x) < 0)
			return -1;
		mode = (sr_net_mode)x;
	}
	if ((v = sr_pol_get(obj, "allow")) && net_allow(c, v, &n) < 0)
		goto out;
	if ((v = sr_pol_get(obj, "dns")) && net_dns(c, v, &n) < 0)
		goto out;
	if (mode == SR_NET_NONE && (n.n_allow || n.n_dns || n.dns_host)) {
		sr_pol_bad(c, n.n_allow ? "policy.network.allow" : "policy.network.dns",
			   "needs \"mode\": \"egress\" (mode \"none\" has only lo)");
		goto out;
	}
	/* allow and dns, when given, replace what the policy had */
	if (sr_pol_get(obj, "allow")) {
		sr_net_allow *old = p->net.allow;
		size_t n_old = p->net.n_allow;
		p->net.allow = n.allow, p->net.n_allow = n.n_allow;
		n.allow = old, n.n_allow = n_old;
	}
	if (sr_pol_get(obj, "dns")) {
		sr_net_policy old = p->net;
		p->net.dns_host = n.dns_host, p->net.n_dns = n.n_dns;
		memcpy(p->net.dns, n.dns, sizeof n.dns);
		n.dns_host = old.dns_host, n.n_dns = old.n_dns;
		memcpy(n.dns, old.dns, sizeof n.dns);
	}
	if (mode == SR_NET_NONE)
		sr_pol_net_policy_free(&p->net);
	p->net_mode = mode;
	rc = 0;
out:
	sr_pol_net_policy_free(&n);
	return rc;
}

static char *env_entry(const struct ctx *c, const cJSON *it)
{
	static const char *const base = "policy.environment";
	char path[PATH_BUF];
	char *kv;

	if (it->string[0] == '\0' || strchr(it->string, '=')) {
		char key[SHOW_MAX];
		snprintf(key, sizeof key, "%s", it->string);
		sr_pol_bad(c, base,
			   "\"%s\" is not a variable name (it must be non-empty, without =)", key);
		return NULL;
	}
	sr_pol_path_key(path, base, it->string);
	if (sr_pol_want_string(c, path, it) < 0)
		return NULL;
	if (strlen(it->string) + 1 + strlen(it->valuestring) > MAX_ENV_ENTRY) {
		sr_pol_bad(c, path, "is too long (at most %d bytes with its name)", MAX_ENV_ENTRY);
		return NULL;
	}
	if (asprintf(&kv, "%s=%s", it->string, it->valuestring) < 0) {
		sr_pol_oom(c);
		return NULL;
	}
	return kv;
}

/* An object of free keys: each a variable. */
static int parse_env(const struct ctx *c, const struct field *f, const char *where,
		     const cJSON *obj, sr_policy *p)
{
	(void)f, (void)where;
	static const char *const base = "policy.environment";
	int n_items = cJSON_GetArraySize(obj);
	char **v = NULL;
	size_t n = 0;
	int rc = -1;

	if (!cJSON_IsObject(obj))
		return sr_pol_bad_type(c, base, obj, "an object of strings");
	if (n_items > MAX_ENV)
		return sr_pol_bad(c, base, "%d variables, at most %d", n_items, MAX_ENV);
	v = calloc((size_t)n_items + 1, sizeof *v);
	if (!v)
		return sr_pol_oom(c);
	for (const cJSON *it = obj->child; it; it = it->next) {
		for (const cJSON *j = obj->child; j != it; j = j->next)
			if (strcmp(j->string, it->string) == 0) {
				char path[PATH_BUF];
				sr_pol_path_key(path, base, it->string);
				sr_pol_bad(c, path, "appears twice");
				goto out;
			}
		if (!(v[n] = env_entry(c, it)))
			goto out;
		n++;
	}
	sr_pol_strv_free(p->env, p->n_env);
	p->env = v;
	p->n_env = n;
	v = NULL;
	rc = 0;
out:
	sr_pol_strv_free(v, n);
	return rc;
}

/* ---- seccomp ------------------------------------------------------------------- */

/* obj[akey] names the action; obj[ekey], only for SCMP_ACT_ERRNO, the errno. */
static int parse_action(const struct ctx *c, const char *path, const cJSON *obj, const char *akey,
			const char *ekey, sr_seccomp_action *out)
{
	char sub[PATH_BUF];
	const cJSON *act = sr_pol_get(obj, akey), *errno_ret = sr_pol_get(obj, ekey);
	size_t i = 0;
	uint64_t e = 1; /* EPERM when errnoRet is omitted, as in the OCI spec */

	if (!act)
		return sr_pol_bad(c, path, "missing \"%s\"", akey);
	sr_pol_path_key(sub, path, akey);
	if (sr_pol_want_string(c, sub, act) < 0)
		return -1;
	while (i < ARRAY_LEN(actions) && strcmp(actions[i].name, act->valuestring) != 0)
		i++;
	if (i == ARRAY_LEN(actions)) {
		const char *names[ARRAY_LEN(actions)];
		char list[256];
		for (size_t j = 0; j < ARRAY_LEN(actions); j++)
			names[j] = actions[j].name;
		sr_pol_join_names(list, sizeof list, names, ARRAY_LEN(actions));
		return sr_pol_bad_value(c, sub, act, "is not an action (known: %s)", list);
	}
	sr_pol_path_key(sub, path, ekey);
	if (errno_ret && actions[i].kind != SR_SCMP_ERRNO)
		return sr_pol_bad(c, sub, "only applies to SCMP_ACT_ERRNO");
	if (errno_ret && sr_pol_get_u64(c, sub, errno_ret, MAX_ERRNO_RET, 0, &e) < 0)
		return -1;
	*out = (sr_seccomp_action){ actions[i].kind,
				    actions[i].kind == SR_SCMP_ERRNO ? (uint32_t)e : 0 };
	return 0;
}

static int parse_op(const struct ctx *c, const char *path, const cJSON *v, sr_seccomp_op *out)
{
	char list[256];

	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_LEN(op_names); i++)
		if (strcmp(op_names[i], v->valuestring) == 0) {
			*out = (sr_seccomp_op)i;
			return 0;
		}
	sr_pol_join_names(list, sizeof list, op_names, ARRAY_LEN(op_names));
	return sr_pol_bad_value(c, path, v, "is not an operator (known: %s)", list);
}

/* The keys of one argument comparison of a seccomp rule, and of a rule. */
static const struct field seccomp_arg_keys[] = {
	{ .key = "index" },
	{ .key = "value" },
	{ .key = "valueTwo" },
	{ .key = "op" },
};

static const struct field seccomp_rule_keys[] = {
	{ .key = "names" },
	{ .key = "action" },
	{ .key = "errnoRet" },
	{ .key = "args" },
};

static int parse_arg(const struct ctx *c, const char *path, const cJSON *obj, sr_seccomp_arg *a)
{
	static const char *const required[] = { "index", "value", "op" };
	char sub[PATH_BUF];
	uint64_t index;
	const cJSON *v;

	if (sr_pol_check_keys(c, path, obj, seccomp_arg_keys, ARRAY_LEN(seccomp_arg_keys)) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_LEN(required); i++)
		if (!sr_pol_get(obj, required[i]))
			return sr_pol_bad(c, path, "missing \"%s\"", required[i]);
	sr_pol_path_key(sub, path, "index");
	if (sr_pol_get_u64(c, sub, sr_pol_get(obj, "index"), SR_SECCOMP_MAX_ARGS - 1, 0, &index) <
	    0)
		return -1;
	a->index = (uint32_t)index;
	sr_pol_path_key(sub, path, "value");
	if (sr_pol_get_u64(c, sub, sr_pol_get(obj, "value"), UINT64_MAX, 1, &a->value) < 0)
		return -1;
	a->value_two = 0;
	sr_pol_path_key(sub, path, "valueTwo");
	if ((v = sr_pol_get(obj, "valueTwo")) &&
	    sr_pol_get_u64(c, sub, v, UINT64_MAX, 1, &a->value_two) < 0)
		return -1;
	sr_pol_path_key(sub, path, "op");
	return parse_op(c, sub, sr_pol_get(obj, "op"), &a->op);
}

static int parse_args(const struct ctx *c, const char *path, const cJSON *arr, sr_seccomp_rule *r)
{
	char sub[PATH_BUF], index_path[PATH_BUF];
	int n = cJSON_GetArraySize(arr);

	if (!cJSON_IsArray(arr))
		return sr_pol_bad_type(c, path, arr, "an array of argument comparisons");
	if (n > SR_SECCOMP_MAX_ARGS)
		return sr_pol_bad(c, path, "%d comparisons, at most %d", n, SR_SECCOMP_MAX_ARGS);
	for (const cJSON *it = arr->child; it; it = it->next) {
		sr_pol_path_index(sub, path, r->n_args);
		sr_seccomp_arg *a = &r->args[r->n_args];
		if (parse_arg(c, sub, it, a) < 0)
			return -1;
		for (size_t j = 0; j < r->n_args; j++)
			if (r->args[j].index == a->index) {
				sr_pol_path_key(index_path, sub, "index");
				return sr_pol_bad(
				    c, index_path,
				    "argument %u is already compared in this rule (libseccomp "
				    "takes one comparison per argument: split the rule)",
				    a->index);
			}
		r->n_args++;
	}
	return 0;
}

static int parse_names(const struct ctx *c, const char *path, const cJSON *arr, sr_seccomp_rule *r)
{
	char sub[PATH_BUF];
	int n = cJSON_GetArraySize(arr);

	if (!cJSON_IsArray(arr) || n == 0)
		return sr_pol_bad_type(c, path, arr, "a non-empty array of syscall names");
	r->names = calloc((size_t)n, sizeof *r->names);
	if (!r->names)
		return sr_pol_oom(c);
	for (const cJSON *it = arr->child; it; it = it->next) {
		sr_pol_path_index(sub, path, r->n_names);
		if (sr_pol_want_string(c, sub, it) < 0)
			return -1;
		if (sr_seccomp_known(it->valuestring) < 0)
			return sr_pol_bad_value(c, sub, it, "is not a syscall libseccomp knows");
		if (!(r->names[r->n_names] = strdup(it->valuestring)))
			return sr_pol_oom(c);
		r->n_names++;
	}
	return 0;
}

static int parse_rule(const struct ctx *c, const char *path, const cJSON *obj, sr_seccomp_rule *r)
{
	char sub[PATH_BUF];
	const cJSON *v;

	if (sr_pol_check_keys(c, path, obj, seccomp_rule_keys, ARRAY_LEN(seccomp_rule_keys)) < 0)
		return -1;
	if (!sr_pol_get(obj, "names"))
		return sr_pol_bad(c, path, "missing \"names\"");
	sr_pol_path_key(sub, path, "names");
	if (parse_names(c, sub, sr_pol_get(obj, "names"), r) < 0)
		return -1;
	if (parse_action(c, path, obj, "action", "errnoRet", &r->action) < 0)
		return -1;
	sr_pol_path_key(sub, path, "args");
	if ((v = sr_pol_get(obj, "args")) && parse_args(c, sub, v, r) < 0)
		return -1;
	return 0;
}

static size_t count_names(const cJSON *rules)
{
	size_t n = 0;

	for (const cJSON *it = rules->child; it; it = it->next)
		n += (size_t)cJSON_GetArraySize(sr_pol_get(it, "names"));
	return n;
}

static int parse_rules(const struct ctx *c, const cJSON *arr, sr_seccomp_policy *s)
{
	static const char *const base = "policy.seccomp.syscalls";
	char path[PATH_BUF];
	int n = cJSON_GetArraySize(arr);

	if (!cJSON_IsArray(arr))
		return sr_pol_bad_type(c, base, arr, "an array of rules");
	if (n > MAX_RULES)
		return sr_pol_bad(c, base, "%d rules, at most %d", n, MAX_RULES);
	if (count_names(arr) > MAX_NAMES)
		return sr_pol_bad(c, base, "%zu syscall names in all rules, at most %d",
				  count_names(arr), MAX_NAMES);
	s->rules = calloc((size_t)n + 1, sizeof *s->rules);
	if (!s->rules)
		return sr_pol_oom(c);
	for (const cJSON *it = arr->child; it; it = it->next) {
		sr_pol_path_index(path, base, s->n_rules);
		/* counted first, so a half-parsed rule is freed with the rest */
		sr_seccomp_rule *r = &s->rules[s->n_rules++];
		if (parse_rule(c, path, it, r) < 0)
			return -1;
	}
	return 0;
}

/* One name of one rule, for finding rules that libseccomp would merge. */
struct name_ref {
	const char *name;
	size_t rule, index;
};

static int cmp_name_ref(const void *a, const void *b)
{
	const struct name_ref *x = a, *y = b;
	int d = strcmp(x->name, y->name);

	if (d)
		return d;
	return x->rule < y->rule ? -1 : x->rule > y->rule;
}

static int same_action(sr_seccomp_action a, sr_seccomp_action b)
{
	return a.kind == b.kind && (a.kind != SR_SCMP_ERRNO || a.errno_ret == b.errno_ret);
}

/* A rule without args for a syscall wins over every other rule for it:
 * libseccomp silently drops the others' conditions, or keeps the first
 * action. Refuse such policies rather than compile a different filter. */
static int check_group(const struct ctx *c, const sr_seccomp_policy *s, const struct name_ref *g,
		       size_t n)
{
	char path[PATH_BUF];
	size_t u = 0;

	while (u < n && s->rules[g[u].rule].n_args != 0)
		u++;
	if (u == n)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const sr_seccomp_rule *r = &s->rules[g[i].rule];
		const struct name_ref *later = g[i].rule > g[u].rule ? &g[i] : &g[u];
		const size_t other = later == &g[i] ? g[u].rule : g[i].rule;
		if (i == u)
			continue;
		snprintf(path, sizeof path, "policy.seccomp.syscalls[%zu].names[%zu]", later->rule,
			 later->index);
		if (r->n_args)
			return sr_pol_bad(
			    c, path,
			    "\"%s\" has a rule with args and one without (syscalls[%zu]); "
			    "libseccomp would ignore the args: give every rule for it args",
			    g[i].name, other);
		if (!same_action(r->action, s->rules[g[u].rule].action))
			return sr_pol_bad(
			    c, path,
			    "\"%s\" already has a rule with a different action (syscalls[%zu])",
			    g[i].name, other);
	}
	return 0;
}

static int check_conflicts(const struct ctx *c, const sr_seccomp_policy *s)
{
	size_t n = 0, k = 0;
	int rc = 0;

	for (size_t i = 0; i < s->n_rules; i++)
		n += s->rules[i].n_names;
	struct name_ref *refs = calloc(n + 1, sizeof *refs);
	if (!refs)
		return sr_pol_oom(c);
	for (size_t i = 0; i < s->n_rules; i++)
		for (size_t j = 0; j < s->rules[i].n_names; j++)
			refs[k++] = (struct name_ref){ s->rules[i].names[j], i, j };
	qsort(refs, n, sizeof *refs, cmp_name_ref);
	for (size_t i = 0, end; rc == 0 && i < n; i = end) {
		end = i + 1;
		while (end < n && strcmp(refs[end].name, refs[i].name) == 0)
			end++;
		rc = check_group(c, s, &refs[i], end - i);
	}
	free(refs);
	return rc;
}

/* Compiling catches what the checks above cannot see, e.g. two rules with
 * the same args and different actions. Through the cache: the run that
 * follows then finds the program compiled. */
static int check_compiles(const struct ctx *c, const sr_seccomp_policy *s)
{
	sr_bpf prog;

	if (sr_seccomp_compile_cached(s, NULL, &prog, c->err) == 0) {
		sr_bpf_free(&prog);
		return 0;
	}
	return c->origin && *c->origin ? sr_error_wrap(c->err, "%s", c->origin) : -1;
}

/* The section as a whole: replaced, not merged, and checked together. */
static int parse_seccomp(const struct ctx *c, const struct field *f, const char *path,
			 const cJSON *obj, sr_policy *p)
{
	sr_seccomp_policy s = { 0 };
	const cJSON *v;
	int rc = -1;

	(void)f;
	if (parse_action(c, path, obj, "defaultAction", "defaultErrnoRet", &s.default_action) < 0)
		goto out;
	if ((v = sr_pol_get(obj, "syscalls")) && parse_rules(c, v, &s) < 0)
		goto out;
	if (check_conflicts(c, &s) < 0 || (c->compile && check_compiles(c, &s) < 0))
		goto out;
	sr_pol_seccomp_free(&p->seccomp);
	p->seccomp = s;
	s = (sr_seccomp_policy){ 0 };
	rc = 0;
out:
	sr_pol_seccomp_free(&s);
	return rc;
}

/* ---- the checker ------------------------------------------------------------------ */

static void rule_ids(char *buf, size_t n)
{
	const char *ids[SR_R_COUNT];

	for (size_t i = 0; i < SR_R_COUNT; i++)
		ids[i] = sr_rule_table[i].id;
	sr_pol_join_names(buf, n, ids, SR_R_COUNT);
}

/* A rule id or name, a dotted Python name (eval, os.system, __import__)
 * or an AgentRun ignore_unsafe_functions name: all are accepted as they
 * are; only ids that look like ours but are not are errors. */
static int check_allow_entry(const struct ctx *c, const char *path, const cJSON *v,
			     char *const *before, size_t n_before)
{
	char list[256];

	(void)before, (void)n_before; /* the same name twice is harmless */

	if (sr_pol_want_string(c, path, v) < 0)
		return -1;
	const char *s = v->valuestring;
	size_t len = strlen(s);
	if (len == 0 || len > MAX_ALLOW_NAME ||
	    strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") != len)
		return sr_pol_bad_value(
		    c, path, v,
		    "is not a rule id, rule name or Python name (e.g. SR201, eval, os.system)");
	if (s[0] == 'S' && s[1] == 'R' && len > 2 && strspn(s + 2, "0123456789") == len - 2 &&
	    sr_rule_find(s) < 0) {
		rule_ids(list, sizeof list);
		return sr_pol_bad_value(c, path, v, "is not a rule (known: %s)", list);
	}
	return 0;
}

/* Turn rule r on or off in the list of rules turned off. */
static int set_rule(sr_policy *p, int r, int on)
{
	struct sr_checker_policy *ck = &p->checker;
	const char *id = sr_rule_table[r].id;

	for (size_t i = 0; i < ck->n_rules_off; i++)
		if (strcmp(ck->rules_off[i], id) == 0) {
			if (on) {
				free(ck->rules_off[i]);
				ck->rules_off[i] = ck->rules_off[--ck->n_rules_off];
			}
			return 0;
		}
	if (on)
		return 0;
	char **grown = realloc(ck->rules_off, (ck->n_rules_off + 1) * sizeof *grown);
	if (!grown)
		return -1;
	ck->rules_off = grown;
	if (!(grown[ck->n_rules_off] = strdup(id)))
		return -1;
	ck->n_rules_off++;
	return 0;
}

static int parse_rule_switches(const struct ctx *c, const struct field *f, const char *base,
			       const cJSON *obj, sr_policy *p)
{
	char path[PATH_BUF], list[256];

	(void)f;
	if (!cJSON_IsObject(obj))
		return sr_pol_bad_type(c, base, obj, "an object of rule ids and true/false");
	for (const cJSON *k = obj->child; k; k = k->next) {
		sr_pol_path_key(path, base, k->string);
		for (const cJSON *j = obj->child; j != k; j = j->next)
			if (strcmp(j->string, k->string) == 0)
				return sr_pol_bad(c, path, "appears twice");
		int r = sr_rule_find(k->string);
		if (r < 0) {
			rule_ids(list, sizeof list);
			return sr_pol_bad(c, path, "unknown rule (known: %s, or their names)",
					  list);
		}
		if (!cJSON_IsBool(k))
			return sr_pol_bad_type(c, path, k, "true or false");
		if (set_rule(p, r, cJSON_IsTrue(k)) < 0)
			return sr_pol_oom(c);
	}
	return 0;
}

/* ---- the warm path ------------------------------------------------------------------ */

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

/* ---- dependencies (docs/dependencies.md) ---------------------------------------- */

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

/* ---- to JSON: the hand-written parts ------------------------------------------------------------------------ */

static const char *action_name(sr_seccomp_action_kind k)
{
	for (size_t i = 0; i < ARRAY_LEN(actions); i++)
		if (actions[i].kind == k)
			return actions[i].name;
	return "SCMP_ACT_KILL_PROCESS";
}

/* Numbers up to 2^53 as numbers, larger ones as "0x..." strings. */
static cJSON *u64_json(uint64_t v)
{
	char hex[24];

	if ((double)v <= JSON_MAX_EXACT)
		return cJSON_CreateNumber((double)v);
	snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)v);
	return cJSON_CreateString(hex);
}

static int add_action(cJSON *obj, sr_seccomp_action a, const char *akey, const char *ekey)
{
	if (!cJSON_AddStringToObject(obj, akey, action_name(a.kind)))
		return -1;
	if (a.kind == SR_SCMP_ERRNO && !cJSON_AddNumberToObject(obj, ekey, a.errno_ret))
		return -1;
	return 0;
}

static cJSON *arg_json(const sr_seccomp_arg *a)
{
	cJSON *o = cJSON_CreateObject();
	int ok = o && cJSON_AddNumberToObject(o, "index", a->index) &&
		 cJSON_AddItemToObject(o, "value", u64_json(a->value)) &&
		 cJSON_AddItemToObject(o, "valueTwo", u64_json(a->value_two)) &&
		 (unsigned)a->op < ARRAY_LEN(op_names) &&
		 cJSON_AddStringToObject(o, "op", op_names[a->op]);

	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static cJSON *rule_json(const sr_seccomp_rule *r)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *names = cJSON_AddArrayToObject(o, "names");
	int ok = names && add_action(o, r->action, "action", "errnoRet") == 0;

	for (size_t i = 0; ok && i < r->n_names; i++)
		ok = cJSON_AddItemToArray(names, cJSON_CreateString(r->names[i]));
	cJSON *args = ok && r->n_args ? cJSON_AddArrayToObject(o, "args") : NULL;
	ok = ok && (r->n_args == 0 || args);
	for (size_t i = 0; ok && i < r->n_args; i++)
		ok = cJSON_AddItemToArray(args, arg_json(&r->args[i]));
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static int add_seccomp(cJSON *root, const struct field *f, const sr_policy *p)
{
	const sr_seccomp_policy *s = &p->seccomp;
	cJSON *o = cJSON_AddObjectToObject(root, f->key);
	cJSON *rules = NULL;

	if (!o || add_action(o, s->default_action, "defaultAction", "defaultErrnoRet") < 0 ||
	    !(rules = cJSON_AddArrayToObject(o, "syscalls")))
		return -1;
	for (size_t i = 0; i < s->n_rules; i++)
		if (!cJSON_AddItemToArray(rules, rule_json(&s->rules[i])))
			return -1;
	return 0;
}

static int add_env(cJSON *root, const struct field *f, const sr_policy *p)
{
	cJSON *o = cJSON_AddObjectToObject(root, f->key);

	if (!o)
		return -1;
	for (size_t i = 0; i < p->n_env; i++) {
		char *key = strdup(p->env[i]);
		char *eq = key ? strchr(key, '=') : NULL;
		int ok = eq != NULL;
		if (ok) {
			*eq = '\0';
			ok = cJSON_AddStringToObject(o, key, eq + 1) != NULL;
		}
		free(key);
		if (!ok)
			return -1;
	}
	return 0;
}

static int sr_pol_add_strings(cJSON *o, const char *key, char **v, size_t n);

static cJSON *allow_json(const sr_net_allow *a)
{
	cJSON *o = cJSON_CreateObject();
	if (!o ||
	    !cJSON_AddStringToObject(o, a->cidr ? "cidr" : "host", a->cidr ? a->cidr : a->host))
		goto fail;
	if (a->n_ports == 0) {
		if (!cJSON_AddStringToObject(o, "ports", "*"))
			goto fail;
	} else {
		cJSON *ports = cJSON_AddArrayToObject(o, "ports");
		for (size_t i = 0; ports && i < a->n_ports; i++)
			if (!cJSON_AddItemToArray(ports, cJSON_CreateNumber(a->ports[i])))
				goto fail;
		if (!ports)
			goto fail;
	}
	if (!cJSON_AddStringToObject(o, "proto", a->proto == SR_NET_UDP ? "udp" : "tcp"))
		goto fail;
	return o;
fail:
	cJSON_Delete(o);
	return NULL;
}

static int sr_pol_field_json(cJSON *parent, const struct field *f, const sr_policy *p);

/* mode; allow and dns only in egress mode */
static int add_network(cJSON *root, const struct field *f, const sr_policy *p)
{
	cJSON *o = cJSON_AddObjectToObject(root, f->key);
	if (!o || sr_pol_field_json(o, sub_field(f, "mode"), p) < 0)
		return -1;
	if (p->net_mode != SR_NET_EGRESS)
		return 0;
	cJSON *allow = cJSON_AddArrayToObject(o, "allow");
	for (size_t i = 0; allow && i < p->net.n_allow; i++) {
		cJSON *a = allow_json(&p->net.allow[i]);
		if (!a || !cJSON_AddItemToArray(allow, a))
			return -1;
	}
	if (!allow)
		return -1;
	if (p->net.n_dns == 0)
		return cJSON_AddBoolToObject(o, "dns", p->net.dns_host) ? 0 : -1;
	return sr_pol_add_strings(o, "dns", (char **)p->net.dns, p->net.n_dns);
}

static int sr_pol_add_strings(cJSON *o, const char *key, char **v, size_t n)
{
	cJSON *a = cJSON_AddArrayToObject(o, key);

	for (size_t i = 0; a && i < n; i++)
		if (!cJSON_AddItemToArray(a, cJSON_CreateString(v[i])))
			return -1;
	return a ? 0 : -1;
}

static int add_rule_switches(cJSON *o, const struct field *f, const sr_policy *p)
{
	const struct sr_checker_policy *ck = &p->checker;
	cJSON *rules = cJSON_AddObjectToObject(o, f->key);

	for (size_t i = 0; rules && i < ck->n_rules_off; i++)
		if (!cJSON_AddFalseToObject(rules, ck->rules_off[i]))
			return -1;
	return rules ? 0 : -1;
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

static int add_dep_cache(cJSON *o, const struct field *f, const sr_policy *p)
{
	const sr_deps_policy *d = &p->dependencies;

	return (d->cache && d->cache_dir ? cJSON_AddStringToObject(o, f->key, d->cache_dir)
					 : cJSON_AddBoolToObject(o, f->key, d->cache))
		   ? 0
		   : -1;
}

static int add_preset(cJSON *root, const struct field *f, const sr_policy *p)
{
	return !p->preset || cJSON_AddStringToObject(root, f->key, p->preset) ? 0 : -1;
}

/* ---- the tables: one per section, in the order of the keys in messages and JSON ---- */

static const struct field sr_pol_limits_fields[] = {
	{ "wall_time", F_DURATION, AT(limits.wall_ms), .min = 10, .max = 24ULL * 3600 * 1000,
	  .def = 20000 },
	/* cgroup cpu.max takes at least 1 ms of CPU per 100 ms period */
	{ "cpus", F_CPUS, AT(limits.cpu_millis), .min = 10, .max = 1024000, .def = 1000 },
	{ "memory", F_SIZE, AT(limits.memory_bytes), .min = 16 * MIB, .max = TIB,
	  .def = 512 * MIB },
	{ "swap", F_SIZE, AT(limits.swap_bytes), .min = 0, .max = TIB, .def = 0 },
	{ "pids", F_COUNT, AT(limits.pids), .min = 1, .max = 1000000, .def = 64 },
	{ "tmpfs", F_SIZE, AT(limits.tmpfs_bytes), .min = MIB, .max = TIB, .def = 64 * MIB },
	/* the supervisor holds each stream in memory */
	{ "output", F_SIZE, AT(limits.output_bytes), .min = KIB, .max = GIB, .def = MIB },
	{ "open_files", F_COUNT, AT(limits.open_files), .min = 16, .max = 1048576, .def = 256 },
};

static const struct field sr_pol_filesystem_fields[] = {
	{ "profile", F_STRING, AT(profile), .def_str = "datascience", .check = check_profile },
	{ "workdir", F_STRING, AT(workdir), .def_str = "/work", .check = sr_pol_check_abs_path },
	{ "writable", F_LIST, AT(writable), .off_n = offsetof(sr_policy, n_writable),
	  .max = MAX_WRITABLE, .what = "an array of absolute paths",
	  .entry = check_writable_entry },
};

/* parsed as a whole by parse_network; mode is a plain value */
static const struct field sr_pol_network_fields[] = {
	{ "mode", F_ENUM, AT(net_mode), .def = SR_NET_NONE, .words = { "none", "egress" },
	  .what = "is not a network mode (known: none, egress)" },
	{ .key = "allow" },
	{ .key = "dns" },
};

/* parsed as a whole by parse_seccomp */
static const struct field sr_pol_seccomp_fields[] = {
	{ .key = "defaultAction" },
	{ .key = "defaultErrnoRet" },
	{ .key = "syscalls" },
};

static const struct field sr_pol_checker_fields[] = {
	{ "enabled", F_BOOL, AT(checker.enabled), .def = true },
	{ "allow", F_LIST, AT(checker.allow), .off_n = offsetof(sr_policy, checker.n_allow),
	  .max = MAX_ALLOW, .what = "an array of names", .entry = check_allow_entry },
	{ "rules", .parse = parse_rule_switches, .to_json = add_rule_switches },
	{ "timeout", F_DURATION, AT(checker.timeout_ms), .min = 10, .max = 60000, .def = 2000 },
	{ "memory", F_SIZE, AT(checker.memory_bytes), .min = 16 * MIB, .max = 4 * GIB,
	  .def = 256 * MIB },
};

static const struct field sr_pol_warm_fields[] = {
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

static const struct field sr_pol_dependencies_fields[] = {
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

static const struct field sr_pol_commands_fields[] = {
	{ "enabled", F_BOOL, AT(commands_enabled), .def = true },
};

/* The document's top level, in the order sections are read and shown. */
static const struct field document_fields[] = {
	{ "preset", .parse = parse_preset, .to_json = add_preset },
	{ "limits", F_OBJECT, SUB(sr_pol_limits_fields) },
	{ "filesystem", F_OBJECT, SUB(sr_pol_filesystem_fields) },
	{ "network", F_OBJECT, SUB(sr_pol_network_fields), .parse = parse_network,
	  .to_json = add_network },
	{ "environment", .parse = parse_env, .to_json = add_env },
	{ "seccomp", F_OBJECT, SUB(sr_pol_seccomp_fields), .parse = parse_seccomp,
	  .to_json = add_seccomp },
	{ "checker", F_OBJECT, SUB(sr_pol_checker_fields) },
	{ "warm", F_OBJECT, SUB(sr_pol_warm_fields) },
	{ "dependencies", F_OBJECT, SUB(sr_pol_dependencies_fields) },
	{ "commands", F_OBJECT, SUB(sr_pol_commands_fields) },
};

static const struct field document = { "policy", F_OBJECT, SUB(document_fields) };

/* ---- the engine: parse, defaults and JSON from the tables ----------------------------- */

static int field_parse(const struct ctx *c, const char *path, const struct field *f, const cJSON *v,
		       sr_policy *p);

/* obj's keys (checked first), each field in table order, then its after. */
static int object_parse(const struct ctx *c, const char *path, const struct field *f,
			const cJSON *obj, sr_policy *p)
{
	char sub[PATH_BUF];
	const cJSON *v;

	if (sr_pol_check_keys(c, path, obj, f->sub, f->n_sub) < 0)
		return -1;
	if (f->parse)
		return f->parse(c, f, path, obj, p);
	for (size_t i = 0; i < f->n_sub; i++) {
		sr_pol_path_key(sub, path, f->sub[i].key);
		if ((v = sr_pol_get(obj, f->sub[i].key)) &&
		    field_parse(c, sub, &f->sub[i], v, p) < 0)
			return -1;
		if (f->sub[i].after && f->sub[i].after(c, &f->sub[i], p) < 0)
			return -1;
	}
	return 0;
}

static int field_parse(const struct ctx *c, const char *path, const struct field *f, const cJSON *v,
		       sr_policy *p)
{
	uint64_t x;

	switch (f->kind) {
	case F_OBJECT: return object_parse(c, path, f, v, p);
	case F_SPECIAL: return f->parse(c, f, path, v, p);
	case F_STRING: return sr_pol_string_value(c, path, f, v, p);
	case F_LIST: return sr_pol_list_value(c, path, f, v, p);
	default:
		if (sr_pol_field_value(c, path, f, v, &x) < 0)
			return -1;
		field_set(p, f, x);
		return 0;
	}
}

/* The tables' defaults into p (lists and free-form sections have none:
 * policies/default.json gives them). */
static int set_defaults(const struct field *f, sr_policy *p)
{
	switch (f->kind) {
	case F_SPECIAL: /* an integer field it names (AT) takes def */
		if (f->width)
			field_set(p, f, f->def);
		return 0;
	case F_LIST: return 0;
	case F_OBJECT:
		for (size_t i = 0; i < f->n_sub; i++)
			if (set_defaults(&f->sub[i], p) < 0)
				return -1;
		return 0;
	case F_STRING:
		return f->def_str ? sr_pol_replace_str(sr_pol_field_str(p, f), f->def_str) : 0;
	default: field_set(p, f, f->def); return 0;
	}
}

static cJSON *number_json(const struct field *f, uint64_t v)
{
	char buf[64];

	switch (f->kind) {
	case F_BOOL: return cJSON_CreateBool(v != 0);
	case F_ENUM:
		return cJSON_CreateString(v < ARRAY_LEN(f->words) && f->words[v] ? f->words[v]
										 : "");
	case F_DURATION:
	case F_CPUS: return cJSON_CreateNumber((double)v / 1000.0);
	case F_SIZE_TEXT: sr_pol_fmt_size(v, buf, sizeof buf); return cJSON_CreateString(buf);
	case F_DURATION_TEXT:
		snprintf(buf, sizeof buf, "%.3gs", (double)v / 1000.0);
		return cJSON_CreateString(buf);
	default: return cJSON_CreateNumber((double)v);
	}
}

static int sr_pol_field_json(cJSON *parent, const struct field *f, const sr_policy *p)
{
	cJSON *o;

	if (f->to_json)
		return f->to_json(parent, f, p);
	switch (f->kind) {
	case F_OBJECT:
		if (!(o = cJSON_AddObjectToObject(parent, f->key)))
			return -1;
		for (size_t i = 0; i < f->n_sub; i++)
			if (sr_pol_field_json(o, &f->sub[i], p) < 0)
				return -1;
		return 0;
	case F_SPECIAL: return -1; /* a table entry without to_json */
	case F_STRING: {
		const char *s = *sr_pol_field_str((sr_policy *)p, f);
		if (s)
			return cJSON_AddStringToObject(parent, f->key, s) ? 0 : -1;
		return (f->nullable ? cJSON_AddNullToObject(parent, f->key)
				    : cJSON_AddStringToObject(parent, f->key, ""))
			   ? 0
			   : -1;
	}
	case F_LIST:
		return sr_pol_add_strings(parent, f->key, *sr_pol_field_strv((sr_policy *)p, f),
					  *sr_pol_field_count((sr_policy *)p, f));
	default:
		return cJSON_AddItemToObject(parent, f->key, number_json(f, field_get(p, f))) ? 0
											      : -1;
	}
}

/* ---- documents ------------------------------------------------------------------ */

static int parse_text(const struct ctx *c, const char *text, size_t len, cJSON **out)
{
	const char *end = NULL;
	int trailing = 0;

	if (len > POLICY_MAX_BYTES)
		return sr_pol_bad(c, "policy", "%zu bytes, at most %u", len, POLICY_MAX_BYTES);
	*out = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (*out) {
		while (end < text + len && isspace((unsigned char)*end))
			end++;
		if (end == text + len)
			return 0;
		cJSON_Delete(*out);
		*out = NULL;
		trailing = 1;
	}
	if (!end || end < text || end > text + len)
		end = text + len;
	size_t line = 1, col = 1;
	for (const char *q = text; q < end; q++, col++)
		if (*q == '\n') {
			line++;
			col = 0;
		}
	return sr_pol_bad(c, "policy", "%s at line %zu, column %zu (byte %zu)",
			  trailing ? "unexpected text after the JSON document" : "malformed JSON",
			  line, col, (size_t)(end - text));
}

static int check_workdir(const struct ctx *c, const sr_policy *p)
{
	for (size_t i = 0; i < p->n_writable; i++)
		if (strcmp(p->writable[i], p->workdir) == 0)
			return 0;
	return sr_pol_bad(c, "policy.filesystem.workdir",
			  "\"%s\" is not among policy.filesystem.writable (add it there)",
			  p->workdir);
}

static int apply_document(const struct ctx *c, const cJSON *root, sr_policy *p)
{
	if (object_parse(c, document.key, &document, root, p) < 0)
		return -1;
	if (!p->workdir || !p->profile || !p->seccomp.rules)
		return sr_pol_bad(c, "policy",
				  "the default policy lacks filesystem or seccomp settings");
	return check_workdir(c, p);
}

/* Parse text and apply it to p, in place. */
static int load_over(const struct ctx *c, const char *text, size_t len, sr_policy *p)
{
	cJSON *root = NULL;
	int rc = parse_text(c, text, len, &root);

	if (rc == 0)
		rc = apply_document(c, root, p);
	cJSON_Delete(root);
	return rc;
}

/* ---- public API -------------------------------------------------------------------- */

/* The strings and lists of the schema's tables. */
static void free_fields(const struct field *f, sr_policy *p)
{
	if (f->kind == F_OBJECT)
		for (size_t i = 0; i < f->n_sub; i++)
			free_fields(&f->sub[i], p);
	else if (f->kind == F_STRING)
		free(*sr_pol_field_str(p, f));
	else if (f->kind == F_LIST)
		sr_pol_strv_free(*sr_pol_field_strv(p, f), *sr_pol_field_count(p, f));
}

void sr_policy_free(sr_policy *p)
{
	if (!p)
		return;
	free_fields(&document, p);
	free(p->name);
	free(p->preset);
	sr_pol_strv_free(p->env, p->n_env);
	sr_pol_seccomp_free(&p->seccomp);
	sr_pol_strv_free(p->checker.rules_off, p->checker.n_rules_off);
	free(p->warm.warmup);
	sr_pol_net_policy_free(&p->net);
	free(p->dependencies.cache_dir);
	free(p);
}

/* Copies of what a policy owns; a failed copy leaves *dst NULL. */
static int str_dup(char **dst, const char *src)
{
	*dst = src ? strdup(src) : NULL;
	return src && !*dst ? -1 : 0;
}

static int strv_dup(char ***dst, char *const *src, size_t n)
{
	*dst = NULL;
	if (!src)
		return 0;
	char **v = calloc(n ? n : 1, sizeof *v);
	for (size_t i = 0; v && i < n; i++)
		if (!(v[i] = strdup(src[i]))) {
			sr_pol_strv_free(v, i);
			v = NULL;
		}
	*dst = v;
	return v ? 0 : -1;
}

/* Every string and list of the tables replaced by a copy (NULL where
 * one fails: every copy is tried, so none is left pointing into src). */
static int dup_fields(const struct field *f, sr_policy *p, const sr_policy *src)
{
	int rc = 0;

	if (f->kind == F_OBJECT)
		for (size_t i = 0; i < f->n_sub; i++)
			rc |= dup_fields(&f->sub[i], p, src);
	else if (f->kind == F_STRING)
		rc = str_dup(sr_pol_field_str(p, f), *sr_pol_field_str((sr_policy *)src, f));
	else if (f->kind == F_LIST)
		rc = strv_dup(sr_pol_field_strv(p, f), *sr_pol_field_strv((sr_policy *)src, f),
			      *sr_pol_field_count((sr_policy *)src, f));
	return rc;
}

sr_policy *sr_policy_dup(const sr_policy *src)
{
	sr_policy *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	/* The values first, then every pointer replaced by a copy of its
	 * own (NULL until copied, so a failure frees only what was made). */
	*p = *src;
	p->seccomp.rules = NULL;
	p->seccomp.n_rules = 0;
	p->net = (sr_net_policy){ .dns_host = src->net.dns_host };
	int rc = dup_fields(&document, p, src) | str_dup(&p->name, src->name) |
		 str_dup(&p->preset, src->preset) | strv_dup(&p->env, src->env, src->n_env) |
		 strv_dup(&p->checker.rules_off, src->checker.rules_off, src->checker.n_rules_off) |
		 str_dup(&p->warm.warmup, src->warm.warmup) |
		 str_dup(&p->dependencies.cache_dir, src->dependencies.cache_dir);
	if (rc == 0 && src->net.n_allow) {
		p->net.allow = calloc(src->net.n_allow, sizeof *p->net.allow);
		rc = p->net.allow ? 0 : -1;
		for (size_t i = 0; rc == 0 && i < src->net.n_allow; i++) {
			p->net.allow[i] = src->net.allow[i];
			p->net.allow[i].cidr = p->net.allow[i].host = NULL;
			p->net.n_allow = i + 1;
			rc = str_dup(&p->net.allow[i].cidr, src->net.allow[i].cidr) |
			     str_dup(&p->net.allow[i].host, src->net.allow[i].host);
		}
	}
	for (size_t i = 0; rc == 0 && i < src->net.n_dns; i++) {
		rc = str_dup(&p->net.dns[i], src->net.dns[i]);
		p->net.n_dns = i + 1;
	}
	if (rc == 0 && src->seccomp.n_rules) {
		p->seccomp.rules = calloc(src->seccomp.n_rules, sizeof *p->seccomp.rules);
		rc = p->seccomp.rules ? 0 : -1;
		for (size_t i = 0; rc == 0 && i < src->seccomp.n_rules; i++) {
			p->seccomp.rules[i] = src->seccomp.rules[i];
			rc = strv_dup(&p->seccomp.rules[i].names, src->seccomp.rules[i].names,
				      src->seccomp.rules[i].n_names);
			p->seccomp.n_rules = i + (rc == 0);
		}
	}
	if (rc) {
		sr_policy_free(p);
		return NULL;
	}
	return p;
}

static sr_policy *policy_new(const char *name)
{
	sr_policy *p = calloc(1, sizeof *p);

	if (!p || !(p->name = strdup(name))) {
		free(p);
		return NULL;
	}
	if (set_defaults(&document, p) < 0) {
		sr_policy_free(p);
		return NULL;
	}
	return p;
}

int sr_policy_schema_defaults(sr_policy **out, sr_error *err)
{
	*out = policy_new("schema");
	return *out ? 0 : sr_fail(err, ENOMEM, "allocate the schema's defaults");
}

/* The first plain field of f (at path) on which a and b differ. */
static int compare_fields(const char *path, const struct field *f, const sr_policy *a,
			  const sr_policy *b, sr_error *err)
{
	char sub[PATH_BUF];

	if (f->kind == F_OBJECT) {
		for (size_t i = 0; i < f->n_sub; i++) {
			sr_pol_path_key(sub, path, f->sub[i].key);
			if (compare_fields(sub, &f->sub[i], a, b, err) < 0)
				return -1;
		}
		return 0;
	}
	if ((f->kind == F_SPECIAL && !f->width) || f->kind == F_LIST)
		return 0;
	if (f->kind == F_STRING) {
		const char *x = *sr_pol_field_str((sr_policy *)a, f),
			   *y = *sr_pol_field_str((sr_policy *)b, f);
		if (x == y || (x && y && strcmp(x, y) == 0))
			return 0;
		return sr_fail(err, 0, "%s: \"%s\" and \"%s\"", path, x ? x : "(null)",
			       y ? y : "(null)");
	}
	if (field_get(a, f) == field_get(b, f))
		return 0;
	return sr_fail(err, 0, "%s: %llu and %llu", path, (unsigned long long)field_get(a, f),
		       (unsigned long long)field_get(b, f));
}

void sr_policy_schema_keys(void (*each)(const char *section, const char *key, void *arg), void *arg)
{
	for (size_t i = 0; i < document.n_sub; i++)
		each(document.key, document.sub[i].key, arg);
	for (size_t i = 0; i < document.n_sub; i++)
		for (size_t j = 0; j < document.sub[i].n_sub; j++)
			each(document.sub[i].key, document.sub[i].sub[j].key, arg);
}

int sr_policy_schema_compare(const sr_policy *a, const sr_policy *b, sr_error *err)
{
	return compare_fields(document.key, &document, a, b, err);
}

int sr_policy_default(sr_policy **out, sr_error *err)
{
	/* the embedded default is compiled by the unit tests, not on every load */
	const struct ctx c = { "default policy", err, 0 };
	sr_policy *p = policy_new("default");

	*out = NULL;
	if (!p)
		return sr_fail(err, ENOMEM, "allocate the default policy");
	if (load_over(&c, (const char *)sr_embedded_default_policy, sr_embedded_default_policy_len,
		      p) < 0) {
		sr_policy_free(p);
		return -1;
	}
	*out = p;
	return 0;
}

int sr_policy_load_json(const char *text, size_t len, const char *origin, sr_policy **out,
			sr_error *err)
{
	const struct ctx c = { origin, err, 1 };
	sr_policy *p = NULL;

	*out = NULL;
	if (sr_policy_default(&p, err) < 0)
		return -1;
	if (sr_pol_replace_str(&p->name, origin && *origin ? origin : "policy") < 0) {
		sr_policy_free(p);
		return sr_pol_oom(&c);
	}
	if (load_over(&c, text ? text : "", text ? len : 0, p) < 0) {
		sr_policy_free(p);
		return -1;
	}
	*out = p;
	return 0;
}

static int read_small_file(const char *path, char **out, size_t *len, sr_error *err)
{
	int rc = -1;
	char *buf = NULL;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return sr_fail(err, errno, "open policy %s", path);
	buf = malloc(POLICY_MAX_BYTES + 1);
	if (!buf) {
		sr_fail(err, ENOMEM, "read policy %s", path);
		goto out;
	}
	while (got <= POLICY_MAX_BYTES) {
		ssize_t n = read(fd, buf + got, POLICY_MAX_BYTES + 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			sr_fail(err, errno, "read policy %s", path);
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	*out = buf;
	*len = got;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	close(fd);
	return rc;
}

int sr_policy_load_file(const char *path, sr_policy **out, sr_error *err)
{
	char *text = NULL;
	size_t len = 0;

	*out = NULL;
	if (read_small_file(path, &text, &len, err) < 0)
		return -1;
	int rc = sr_policy_load_json(text, len, path, out, err);
	free(text);
	return rc;
}

int sr_policy_apply_preset(sr_policy *p, const char *name, sr_error *err)
{
	const struct preset *ps = name ? find_preset(name) : NULL;

	if (!ps) {
		char list[64];
		preset_names(list, sizeof list);
		sr_fail(err, 0, "preset \"%s\" is unknown (known: %s)", name ? name : "(null)",
			list);
		if (err)
			err->errnum = EINVAL;
		return -1;
	}
	if (sr_pol_replace_str(&p->preset, ps->name) < 0)
		return sr_fail(err, ENOMEM, "apply preset %s", name);
	p->limits = ps->limits;
	return 0;
}

/* LD_PRELOAD, LD_LIBRARY_PATH, PYTHONPATH, PYTHONSTARTUP, PYTHONUSERBASE,
 * PYTHONWARNINGS (which imports): the dynamic loader and python act on
 * these before any of saferun's code runs in the sandbox. */
static bool loader_variable(const char *key, size_t len)
{
	return (len >= 3 && strncmp(key, "LD_", 3) == 0) ||
	       (len >= 6 && strncmp(key, "PYTHON", 6) == 0);
}

static bool policy_sets(const sr_policy *p, const char *kv)
{
	for (size_t i = 0; i < p->n_env; i++)
		if (strcmp(p->env[i], kv) == 0)
			return true;
	return false;
}

int sr_policy_set_env(sr_policy *p, const char *kv, sr_error *err)
{
	const char *eq = kv ? strchr(kv, '=') : NULL;
	char *copy;

	if (!eq || eq == kv) {
		sr_fail(err, 0, "environment entry \"%s\" is not KEY=VALUE", kv ? kv : "(null)");
		if (err)
			err->errnum = EINVAL;
		return -1;
	}
	size_t klen = (size_t)(eq - kv) + 1; /* with the '=' */
	if (loader_variable(kv, klen - 1) && !policy_sets(p, kv)) {
		sr_fail(err, 0,
			"environment variable %.*s: a run may not set LD_* or PYTHON* variables "
			"(they choose what python and the loader run before the runner's guard); "
			"only the policy's own value may be repeated",
			(int)(klen - 1), kv);
		if (err)
			err->errnum = EINVAL;
		return -1;
	}
	if (!(copy = strdup(kv)))
		return sr_fail(err, ENOMEM, "set %s", kv);
	for (size_t i = 0; i < p->n_env; i++)
		if (strncmp(p->env[i], kv, klen) == 0) {
			free(p->env[i]);
			p->env[i] = copy;
			return 0;
		}
	char **env = realloc(p->env, (p->n_env + 2) * sizeof *env);
	if (!env) {
		free(copy);
		return sr_fail(err, ENOMEM, "set %s", kv);
	}
	env[p->n_env++] = copy;
	env[p->n_env] = NULL;
	p->env = env;
	return 0;
}

char *sr_policy_to_json(const sr_policy *p)
{
	char *text = NULL;
	cJSON *root = cJSON_CreateObject();

	if (!root)
		return NULL;
	for (size_t i = 0; i < document.n_sub; i++)
		if (sr_pol_field_json(root, &document.sub[i], p) < 0)
			goto out;
	text = cJSON_Print(root);
out:
	cJSON_Delete(root);
	return text;
}
