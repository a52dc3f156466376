/* policy.seccomp, in the OCI runtime spec's form: a default action and
 * rules (syscall names, an action, argument comparisons). The section is
 * replaced, not merged; rules libseccomp would merge silently are
 * refused, and a loaded policy's filter is compiled once to prove
 * libseccomp takes it. Shown back as JSON by hand. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "policy_schema.h"
#include "saferun.h"
#include "seccomp_cache.h"

/* libseccomp's rule merging is quadratic: 2048 names compile in ~10 ms,
 * 16000 take half a second. The default uses about 380. */
#define MAX_RULES     1024
#define MAX_NAMES     2048
#define MAX_ERRNO_RET 4095

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

void sr_pol_seccomp_free(sr_seccomp_policy *s)
{
	for (size_t i = 0; s->rules && i < s->n_rules; i++)
		sr_pol_strv_free(s->rules[i].names, s->rules[i].n_names);
	free(s->rules);
	s->rules = NULL;
	s->n_rules = 0;
}

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
int sr_pol_parse_seccomp(const struct ctx *c, const struct field *f, const char *path,
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

int sr_pol_add_seccomp(cJSON *root, const struct field *f, const sr_policy *p)
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

/* parsed as a whole by sr_pol_parse_seccomp */
const struct field sr_pol_seccomp_fields[] = {
	{ .key = "defaultAction" },
	{ .key = "defaultErrnoRet" },
	{ .key = "syscalls" },
};
_Static_assert(ARRAY_LEN(sr_pol_seccomp_fields) == SR_POL_N_SECCOMP,
	       "SR_POL_N_SECCOMP is the length of sr_pol_seccomp_fields");
