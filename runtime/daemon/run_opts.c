#include "run_opts.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)

static const char *const run_keys[] = {
	"code",  "policy", "timeout", "memory",       "cpus",   "env",
	"files", "stdin",  "allow",   "requirements", "stream", NULL,
};
/* A session fixes its policy, memory, CPUs and environment when it is
 * created (its sandbox identity); each of its runs brings code, stdin, an
 * allow list, files and at most a lower timeout. */
static const char *const session_keys[] = {
	"policy", "timeout", "memory",   "cpus",         "env",
	"files",  "allow",   "stateful", "requirements", NULL,
};
static const char *const session_run_keys[] = {
	"code", "timeout", "stdin", "allow", "files", "stream", NULL,
};

/* timeout: seconds as a number, or a duration string ("500ms", "2m"). */
static int parse_timeout(const cJSON *v, srd_run_opts *o, srd_ferr *e)
{
	uint64_t ms = 0;
	bool ok = false;
	if (cJSON_IsNumber(v) && v->valuedouble > 0 && v->valuedouble <= 86400) {
		ms = (uint64_t)llround(v->valuedouble * 1000.0);
		ok = true;
	} else if (cJSON_IsString(v)) {
		ok = sr_parse_duration(v->valuestring, &ms) == 0;
	} else {
		return srd_fail(e, 400, "timeout",
				"\"timeout\" must be seconds (a number) or a "
				"duration string (\"500ms\", \"2m\"), not %s",
				srd_json_kind(v));
	}
	if (!ok || ms < 10 || ms > 86400000u)
		return srd_fail(e, 400, "timeout",
				"\"timeout\" is not a duration between 10ms and "
				"24h (use 20, 1.5, \"500ms\")");
	o->have_timeout = true;
	o->timeout_ms = ms;
	return 0;
}

/* memory: bytes as a number, or a size string ("512M", "1G"). */
static int parse_memory(const cJSON *v, srd_run_opts *o, srd_ferr *e)
{
	uint64_t n = 0;
	bool ok = false;
	if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e18 &&
	    v->valuedouble == floor(v->valuedouble)) {
		n = (uint64_t)v->valuedouble;
		ok = true;
	} else if (cJSON_IsString(v)) {
		ok = sr_parse_size(v->valuestring, &n) == 0;
	} else if (!cJSON_IsNumber(v)) {
		return srd_fail(e, 400, "memory",
				"\"memory\" must be a size string (\"512M\", "
				"\"1G\") or bytes (a number), not %s",
				srd_json_kind(v));
	}
	if (!ok || n < (16u << 20))
		return srd_fail(e, 400, "memory",
				"\"memory\" is not a size of at least 16M (use "
				"\"512M\", \"1G\" or bytes)");
	o->have_memory = true;
	o->memory_bytes = n;
	return 0;
}

static int parse_cpus(const cJSON *v, srd_run_opts *o, srd_ferr *e)
{
	if (!cJSON_IsNumber(v))
		return srd_fail(e, 400, "cpus",
				"\"cpus\" must be a number (0.5 is half a core), "
				"not %s",
				srd_json_kind(v));
	if (!(v->valuedouble >= 0.01 && v->valuedouble <= 1024))
		return srd_fail(e, 400, "cpus", "\"cpus\" must be between 0.01 and 1024");
	o->have_cpus = true;
	o->cpu_millis = (uint32_t)llround(v->valuedouble * 1000.0);
	return 0;
}

static bool env_name_ok(const char *k)
{
	if (!*k || strlen(k) > 128 || (*k >= '0' && *k <= '9'))
		return false;
	for (; *k; k++)
		if (!(*k == '_' || (*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') ||
		      (*k >= '0' && *k <= '9')))
			return false;
	return true;
}

/* env: {"NAME": "value"}; replaces the policy's value of NAME. */
static int parse_env(const cJSON *v, srd_run_opts *o, srd_ferr *e)
{
	char field[160];
	if (!cJSON_IsObject(v))
		return srd_fail(e, 400, "env", "\"env\" must be an object of strings, not %s",
				srd_json_kind(v));
	size_t n = (size_t)cJSON_GetArraySize(v);
	if (n > SRD_MAX_ENV)
		return srd_fail(e, 400, "env", "\"env\" has %zu entries, over %d", n, SRD_MAX_ENV);
	if (n && !(o->env = calloc(n, sizeof *o->env)))
		return srd_fail(e, 500, NULL, "out of memory");
	for (const cJSON *it = v->child; it; it = it->next) {
		srd_json_path(field, sizeof field, "env", it->string);
		if (!env_name_ok(it->string))
			return srd_fail(e, 400, field,
					"\"%s\" is not an environment variable name "
					"(letters, digits, '_')",
					it->string);
		if (!cJSON_IsString(it))
			return srd_fail(e, 400, field, "%s must be a string, not %s", field,
					srd_json_kind(it));
		if (asprintf(&o->env[o->n_env], "%s=%s", it->string, it->valuestring) < 0)
			return srd_fail(e, 500, NULL, "out of memory");
		o->n_env++;
	}
	return 0;
}

/* A relative path in the working dir; the library checks the rest. */
static bool file_name_ok(const char *name)
{
	if (!*name || name[0] == '/' || strlen(name) > 1024)
		return false;
	for (const char *part = name; part;
	     part = strchr(part, '/') ? strchr(part, '/') + 1 : NULL) {
		size_t len = strcspn(part, "/");
		if (len == 0 || (len == 1 && part[0] == '.') ||
		    (len == 2 && part[0] == '.' && part[1] == '.'))
			return false;
	}
	return strcmp(name, "main.py") != 0;
}

/* files: {"name": "text content"}, written into the working dir. */
static int parse_files(const cJSON *v, srd_run_opts *o, srd_ferr *e)
{
	char field[1100];
	if (!cJSON_IsObject(v))
		return srd_fail(e, 400, "files",
				"\"files\" must be an object {\"name\": \"content\"}"
				", not %s",
				srd_json_kind(v));
	size_t n = (size_t)cJSON_GetArraySize(v);
	if (n > SRD_MAX_FILES)
		return srd_fail(e, 400, "files", "\"files\" has %zu entries, over %d", n,
				SRD_MAX_FILES);
	if (n && !(o->files = calloc(n, sizeof *o->files)))
		return srd_fail(e, 500, NULL, "out of memory");
	for (const cJSON *it = v->child; it; it = it->next) {
		srd_json_path(field, sizeof field, "files", it->string);
		if (!file_name_ok(it->string))
			return srd_fail(e, 400, field,
					"file name \"%s\" must be a relative path "
					"without \".\" or \"..\" parts, and not main.py",
					it->string);
		if (!cJSON_IsString(it))
			return srd_fail(e, 400, field,
					"%s must be a string (the file's text), not %s", field,
					srd_json_kind(it));
		/* The library copies them; it never writes through these. */
		o->files[o->n_files++] = (sr_file){ .name = it->string,
						    .data = it->valuestring,
						    .size = strlen(it->valuestring) };
	}
	return 0;
}

/* allow: ["eval", "SR201", "os.system"]: what the checker may let pass. */
static int parse_allow(const cJSON *v, srd_run_opts *o, srd_ferr *e)
{
	char field[64];
	if (!cJSON_IsArray(v))
		return srd_fail(e, 400, "allow", "\"allow\" must be an array of strings, not %s",
				srd_json_kind(v));
	size_t n = (size_t)cJSON_GetArraySize(v);
	if (n > SRD_MAX_ALLOW)
		return srd_fail(e, 400, "allow", "\"allow\" has %zu entries, over %d", n,
				SRD_MAX_ALLOW);
	if (n && !(o->allow = calloc(n, sizeof *o->allow)))
		return srd_fail(e, 500, NULL, "out of memory");
	for (const cJSON *it = v->child; it; it = it->next) {
		snprintf(field, sizeof field, "allow[%zu]", o->n_allow);
		if (!cJSON_IsString(it) || !*it->valuestring || strlen(it->valuestring) > 79)
			return srd_fail(e, 400, field,
					"%s must be a rule id, rule name or flagged "
					"name (a non-empty string of at most 79 bytes)",
					field);
		o->allow[o->n_allow++] = it->valuestring;
	}
	return 0;
}

/* requirements: ["attrs", "tabulate>=0.9"]; the library checks each
 * against PEP 508 and the policy (docs/dependencies.md). */
static int parse_requirements(const cJSON *v, srd_run_opts *o, srd_ferr *e)
{
	char field[64];
	if (!cJSON_IsArray(v))
		return srd_fail(e, 400, "requirements",
				"\"requirements\" must be an array of strings (\"attrs\", "
				"\"attrs>=22\"), not %s",
				srd_json_kind(v));
	size_t n = (size_t)cJSON_GetArraySize(v);
	if (n > SR_DEPS_MAX_REQS)
		return srd_fail(e, 400, "requirements", "\"requirements\" has %zu entries, over %d",
				n, SR_DEPS_MAX_REQS);
	if (n && !(o->requirements = calloc(n, sizeof *o->requirements)))
		return srd_fail(e, 500, NULL, "out of memory");
	for (const cJSON *it = v->child; it; it = it->next) {
		snprintf(field, sizeof field, "requirements[%zu]", o->n_requirements);
		if (!cJSON_IsString(it))
			return srd_fail(e, 400, field, "%s must be a string, not %s", field,
					srd_json_kind(it));
		o->requirements[o->n_requirements++] = it->valuestring;
	}
	return 0;
}

static int parse_stateful(const cJSON *v, srd_run_opts *o, srd_ferr *e)
{
	if (!cJSON_IsBool(v))
		return srd_fail(e, 400, "stateful",
				"\"stateful\" must be true or false (true: variables persist "
				"between runs), not %s",
				srd_json_kind(v));
	o->stateful = cJSON_IsTrue(v);
	return 0;
}

static int parse_stream(const cJSON *v, srd_run_opts *o, srd_ferr *e)
{
	if (!cJSON_IsBool(v))
		return srd_fail(e, 400, "stream",
				"\"stream\" must be true or false (true: the output streams as "
				"NDJSON items, then the result), not %s",
				srd_json_kind(v));
	o->stream = cJSON_IsTrue(v);
	return 0;
}

int srd_run_opts_parse(const cJSON *obj, srd_run_opts *o, srd_ferr *e)
{
	return srd_run_opts_parse_as(obj, SRD_OPTS_RUN, o, e);
}

int srd_run_opts_parse_as(const cJSON *obj, srd_opts_kind kind, srd_run_opts *o, srd_ferr *e)
{
	static const char *const *const keys[] = { run_keys, session_keys, session_run_keys };
	bool need_code = kind != SRD_OPTS_SESSION;
	memset(o, 0, sizeof *o);
	if (srd_json_check_keys(obj, keys[kind], "", e) ||
	    srd_json_string(obj, "code", need_code, &o->code, e) ||
	    srd_json_string(obj, "policy", false, &o->policy, e) ||
	    srd_json_string(obj, "stdin", false, &o->stdin_data, e))
		return -1;
	o->code_len = o->code ? strlen(o->code) : 0;
	o->stdin_len = o->stdin_data ? strlen(o->stdin_data) : 0;
	static const struct {
		const char *key;
		int (*parse)(const cJSON *v, srd_run_opts *o, srd_ferr *e);
	} fields[] = {
		{ "timeout", parse_timeout },   { "memory", parse_memory },
		{ "cpus", parse_cpus },         { "env", parse_env },
		{ "files", parse_files },       { "allow", parse_allow },
		{ "stateful", parse_stateful }, { "requirements", parse_requirements },
		{ "stream", parse_stream },
	};
	for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
		const cJSON *v = srd_json_get(obj, fields[i].key);
		if (v && fields[i].parse(v, o, e))
			return -1;
	}
	return 0;
}

void srd_run_opts_free(srd_run_opts *o)
{
	for (size_t i = 0; i < o->n_env; i++)
		free(o->env[i]);
	free(o->env);
	free(o->files);
	free(o->allow);
	free(o->requirements);
	memset(o, 0, sizeof *o);
}

static int over(srd_ferr *e, const char *field, const char *policy, const char *what, double asked,
		double limit, const char *unit)
{
	return srd_fail(e, 400, field,
			"\"%s\": %g %s is over the %s limit of policy \"%s\" (%g %s); "
			"ask for less or use a policy with a higher limit",
			field, asked, unit, what, policy, limit, unit);
}

int srd_run_opts_apply(const srd_run_opts *o, sr_policy *p, const char *policy_name, srd_ferr *e)
{
	sr_limits *l = &p->limits;
	if (o->have_timeout && o->timeout_ms > l->wall_ms)
		return over(e, "timeout", policy_name, "wall-time", (double)o->timeout_ms / 1000.0,
			    (double)l->wall_ms / 1000.0, "s");
	if (o->have_memory && o->memory_bytes > l->memory_bytes)
		return over(e, "memory", policy_name, "memory", (double)o->memory_bytes / MIB,
			    (double)l->memory_bytes / MIB, "MiB");
	if (o->have_cpus && o->cpu_millis > l->cpu_millis)
		return over(e, "cpus", policy_name, "CPU", o->cpu_millis / 1000.0,
			    l->cpu_millis / 1000.0, "CPUs");
	if (o->have_timeout)
		l->wall_ms = o->timeout_ms;
	if (o->have_memory)
		l->memory_bytes = o->memory_bytes;
	if (o->have_cpus)
		l->cpu_millis = o->cpu_millis;
	for (size_t i = 0; i < o->n_env; i++) {
		sr_error err = { 0 };
		if (sr_policy_set_env(p, o->env[i], &err))
			return srd_fail(e, 400, "env", "%s", err.msg);
	}
	return 0;
}
