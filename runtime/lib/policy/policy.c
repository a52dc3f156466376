/* Policies: JSON documents read over the built-in default, validated
 * strictly. Every error names the JSON path and the value, and says what
 * is expected. Format reference: docs/policy.md. This file holds the
 * public API (load, default, dup, free, to_json), the document's table
 * (its top-level keys, each naming a section's table or hand-written
 * parser in policy_<section>.c) and the engine that runs the tables:
 * parse, defaults, JSON, copy, free and compare. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "policy.h"
#include "policy_schema.h"
#include "saferun.h"

extern const unsigned char sr_embedded_default_policy[];
extern const size_t sr_embedded_default_policy_len;

#define POLICY_MAX_BYTES (4u << 20)

/* The document's top level, in the order sections are read and shown. */
static const struct field document_fields[] = {
	{ "preset", .parse = sr_pol_parse_preset, .to_json = sr_pol_add_preset },
	{ "limits", F_OBJECT, SUB(sr_pol_limits_fields, SR_POL_N_LIMITS) },
	{ "filesystem", F_OBJECT, SUB(sr_pol_filesystem_fields, SR_POL_N_FILESYSTEM) },
	{ "network", F_OBJECT, SUB(sr_pol_network_fields, SR_POL_N_NETWORK),
	  .parse = sr_pol_parse_network, .to_json = sr_pol_add_network },
	{ "environment", .parse = sr_pol_parse_env, .to_json = sr_pol_add_env },
	{ "seccomp", F_OBJECT, SUB(sr_pol_seccomp_fields, SR_POL_N_SECCOMP),
	  .parse = sr_pol_parse_seccomp, .to_json = sr_pol_add_seccomp },
	{ "checker", F_OBJECT, SUB(sr_pol_checker_fields, SR_POL_N_CHECKER) },
	{ "warm", F_OBJECT, SUB(sr_pol_warm_fields, SR_POL_N_WARM) },
	{ "dependencies", F_OBJECT, SUB(sr_pol_dependencies_fields, SR_POL_N_DEPENDENCIES) },
	{ "commands", F_OBJECT, SUB(sr_pol_commands_fields, SR_POL_N_COMMANDS) },
};

static const struct field document = { "policy", F_OBJECT,
				       SUB(document_fields, ARRAY_LEN(document_fields)) };

/* ---- the engine: parse, defaults and JSON from the tables ----------------------------- */

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

int sr_pol_field_json(cJSON *parent, const struct field *f, const sr_policy *p)
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
