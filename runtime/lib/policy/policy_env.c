/* policy.environment: an object of free keys, one per variable, and
 * sr_policy_set_env, which adds a run's variables over the policy's
 * (never the loader's or python's own, LD_* and PYTHON*). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "policy_schema.h"
#include "saferun.h"

#define MAX_ENV       1024
#define MAX_ENV_ENTRY (128 * 1024 - 1) /* the kernel's MAX_ARG_STRLEN, less the NUL */

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
int sr_pol_parse_env(const struct ctx *c, const struct field *f, const char *where,
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

int sr_pol_add_env(cJSON *root, const struct field *f, const sr_policy *p)
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
