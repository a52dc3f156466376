/* The policy schema's internals, shared by policy.c (the engine and the
 * public API) and the files of the sections (policy_<section>.c), never
 * used outside lib/policy: the table entry, the sections' tables, and the
 * helpers every section's parser uses (policy_values.c): errors naming
 * the JSON path and the value, paths, plain values, key checks. */
#ifndef SR_POLICY_SCHEMA_H
#define SR_POLICY_SCHEMA_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "saferun.h"

#define PATH_BUF       192                /* a JSON path in an error message */
#define SHOW_MAX       72                 /* an offending value, shortened */
#define JSON_MAX_EXACT 9007199254740992.0 /* 2^53: larger JSON numbers are not exact */

/* Where errors go: the document's name and the caller's error. */
struct ctx {
	const char *origin;
	sr_error *err;
	int compile; /* compile a seccomp section to prove libseccomp takes it */
};

/* The schema: every key of every section is one entry of a table (policy_<section>.c,
 * "the tables"), which drives the unknown-key check, the parsing and
 * range checks of plain values, the built-in defaults and the JSON form.
 * Values of a shape of their own (lists with entry checks, objects of
 * free keys, seccomp rules) have hand-written parse and to_json functions
 * the entry names. A new plain key: its table entry (and its section's
 * SR_POL_N_ below), its sr_policy field, its line in docs/policy.md. */
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

/* The sections' tables, each in its file with its length checked there:
 * the document's table (policy.c) needs the lengths as constants. */
#define SUB(table, n)         .sub = table, .n_sub = (n)
#define SR_POL_N_LIMITS       8
#define SR_POL_N_FILESYSTEM   3
#define SR_POL_N_NETWORK      3
#define SR_POL_N_SECCOMP      3
#define SR_POL_N_CHECKER      5
#define SR_POL_N_WARM         7
#define SR_POL_N_DEPENDENCIES 11
#define SR_POL_N_COMMANDS     1
extern const struct field sr_pol_limits_fields[];
extern const struct field sr_pol_filesystem_fields[];
extern const struct field sr_pol_network_fields[];
extern const struct field sr_pol_seccomp_fields[];
extern const struct field sr_pol_checker_fields[];
extern const struct field sr_pol_warm_fields[];
extern const struct field sr_pol_dependencies_fields[];
extern const struct field sr_pol_commands_fields[];

/* The hand-written values the document's table names (policy_<section>.c). */
int sr_pol_parse_preset(const struct ctx *c, const struct field *f, const char *path,
			const cJSON *v, sr_policy *p);
int sr_pol_add_preset(cJSON *root, const struct field *f, const sr_policy *p);
int sr_pol_parse_network(const struct ctx *c, const struct field *f, const char *path,
			 const cJSON *obj, sr_policy *p);
int sr_pol_add_network(cJSON *root, const struct field *f, const sr_policy *p);
int sr_pol_parse_env(const struct ctx *c, const struct field *f, const char *where,
		     const cJSON *obj, sr_policy *p);
int sr_pol_add_env(cJSON *root, const struct field *f, const sr_policy *p);
int sr_pol_parse_seccomp(const struct ctx *c, const struct field *f, const char *path,
			 const cJSON *obj, sr_policy *p);
int sr_pol_add_seccomp(cJSON *root, const struct field *f, const sr_policy *p);

/* What sr_policy_free needs of the sections that own memory outside the
 * tables. */
void sr_pol_net_policy_free(sr_net_policy *n);
void sr_pol_seccomp_free(sr_seccomp_policy *s);

/* Shared by the filesystem and dependencies sections: absolute,
 * normalised (no "", "." or ".." components), printable. */
int sr_pol_check_abs_path(const struct ctx *c, const char *path, const cJSON *v);

/* The engine's JSON form of one field (policy.c), for a section that
 * shows a plain key of its own among hand-written ones. */
int sr_pol_field_json(cJSON *parent, const struct field *f, const sr_policy *p);

/* Errors (policy_values.c): "<origin>: <path>: <message>" into c->err,
 * errno EINVAL; each returns -1. bad_value puts the value (as JSON,
 * shortened) before the message; bad_type says what was expected and
 * what came; oom is ENOMEM. */
int sr_pol_bad(const struct ctx *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int sr_pol_bad_value(const struct ctx *c, const char *path, const cJSON *v, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int sr_pol_bad_type(const struct ctx *c, const char *path, const cJSON *v, const char *want);
int sr_pol_oom(const struct ctx *c);

/* JSON paths for messages, cut to PATH_BUF: parent.key, parent[i]. */
void sr_pol_path_key(char *buf, const char *parent, const char *key);
void sr_pol_path_index(char *buf, const char *parent, size_t i);

/* Small helpers: free n strings and the array; replace *dst by a copy
 * of src (-1 when out of memory, *dst unchanged); "a, b, c" into buf. */
void sr_pol_strv_free(char **v, size_t n);
int sr_pol_replace_str(char **dst, const char *src);
void sr_pol_join_names(char *buf, size_t n, const char *const *names, size_t count);

/* Where a table entry's value lands in p (F_STRING; F_LIST's strings and
 * count), and a size as text ("512M"). */
char **sr_pol_field_str(sr_policy *p, const struct field *f);
char ***sr_pol_field_strv(sr_policy *p, const struct field *f);
size_t *sr_pol_field_count(sr_policy *p, const struct field *f);
void sr_pol_fmt_size(uint64_t v, char *buf, size_t n);

/* Reading JSON: the key check of an object (known's keys and "comment",
 * each once), a key's value, a string, an entry listed before, a whole
 * number up to max (with strings: "123" or "0x7b" too). */
int sr_pol_check_keys(const struct ctx *c, const char *path, const cJSON *v,
		      const struct field *known, size_t n_fields);
const cJSON *sr_pol_get(const cJSON *obj, const char *key);
int sr_pol_want_string(const struct ctx *c, const char *path, const cJSON *v);
int sr_pol_listed_before(const struct ctx *c, const char *path, const cJSON *v, char *const *before,
			 size_t n_before);
int sr_pol_get_u64(const struct ctx *c, const char *path, const cJSON *v, uint64_t max, int strings,
		   uint64_t *out);

/* A table entry's value from JSON: a plain one (bool, word, number,
 * size, duration) into *out, an F_STRING or an F_LIST into p. */
int sr_pol_field_value(const struct ctx *c, const char *path, const struct field *f, const cJSON *v,
		       uint64_t *out);
int sr_pol_string_value(const struct ctx *c, const char *path, const struct field *f,
			const cJSON *v, sr_policy *p);
int sr_pol_list_value(const struct ctx *c, const char *path, const struct field *f, const cJSON *v,
		      sr_policy *p);

/* An array of strings as o[key]. */
int sr_pol_add_strings(cJSON *o, const char *key, char **v, size_t n);

#endif
