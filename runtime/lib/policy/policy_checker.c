/* policy.checker: the pre-execution checker's switch, the names it lets
 * through, rules turned on or off by id or name, its time and memory. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "checker/checker.h"
#include "policy_schema.h"
#include "saferun.h"

#define MAX_ALLOW      256
#define MAX_ALLOW_NAME 79

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

static int add_rule_switches(cJSON *o, const struct field *f, const sr_policy *p)
{
	const struct sr_checker_policy *ck = &p->checker;
	cJSON *rules = cJSON_AddObjectToObject(o, f->key);

	for (size_t i = 0; rules && i < ck->n_rules_off; i++)
		if (!cJSON_AddFalseToObject(rules, ck->rules_off[i]))
			return -1;
	return rules ? 0 : -1;
}

const struct field sr_pol_checker_fields[] = {
	{ "enabled", F_BOOL, AT(checker.enabled), .def = true },
	{ "allow", F_LIST, AT(checker.allow), .off_n = offsetof(sr_policy, checker.n_allow),
	  .max = MAX_ALLOW, .what = "an array of names", .entry = check_allow_entry },
	{ "rules", .parse = parse_rule_switches, .to_json = add_rule_switches },
	{ "timeout", F_DURATION, AT(checker.timeout_ms), .min = 10, .max = 60000, .def = 2000 },
	{ "memory", F_SIZE, AT(checker.memory_bytes), .min = 16 * MIB, .max = 4 * GIB,
	  .def = 256 * MIB },
};
_Static_assert(ARRAY_LEN(sr_pol_checker_fields) == SR_POL_N_CHECKER,
	       "SR_POL_N_CHECKER is the length of sr_pol_checker_fields");
