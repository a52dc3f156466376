#include "tenants.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"

#define TENANTS_MAX_BYTES (1u << 20)

/* What a tenant without its own checker_ceiling may relax: the rules that
 * flag ordinary data-science code for no gain (a namespace lookup; network
 * calls, which fail anyway when the policy has no network), and none that
 * lets a process, native code or a reflection escape run. */
static const char *const default_ceiling[] = { "SR103",   "network", "SR202", "namespace",
					       "globals", "locals",  "vars" };

/* The parse's state: where in the file we are, for messages. */
struct parse {
	const char *file;
	char *msg;
	size_t size;
	const srd_config *cfg;
	uint64_t default_runs; /* max_concurrent_runs of a tenant that sets none */
};

static int bad(struct parse *ps, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(struct parse *ps, const char *path, const char *fmt, ...)
{
	int n = snprintf(ps->msg, ps->size, "tenants %s: %s: ", ps->file, path);
	va_list ap;
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < ps->size)
		vsnprintf(ps->msg + n, ps->size - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static void free_strings(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void tenant_free(srd_tenant *t)
{
	free(t->tokens);
	free(t->uids);
	free(t->gids);
	free_strings(t->policies, t->n_policies);
	free_strings(t->ceiling, t->n_ceiling);
}

void srd_tenants_free(srd_tenants *ts)
{
	for (size_t i = 0; i < ts->n; i++)
		tenant_free(&ts->t[i]);
	free(ts->t);
	*ts = (srd_tenants){ 0 };
}

static void quotas_from_config(srd_tenant *t, const srd_config *cfg)
{
	t->max_runs = cfg->max_runs;
	t->queue_depth = cfg->queue_depth;
	t->max_sessions = cfg->max_sessions;
	t->session_max_age_ms = cfg->session_max_age_ms;
	t->max_file_bytes = cfg->max_file_bytes;
}

static int array_of(struct parse *ps, const cJSON *v, const char *path, size_t max, size_t *n)
{
	if (!cJSON_IsArray(v))
		return bad(ps, path, "must be an array");
	*n = (size_t)cJSON_GetArraySize(v);
	if (*n > max)
		return bad(ps, path, "has %zu entries, over %zu", *n, max);
	return 0;
}

static int parse_strings(struct parse *ps, const cJSON *v, const char *path, char ***out, size_t *n)
{
	if (array_of(ps, v, path, 1024, n))
		return -1;
	*out = calloc(*n + 1, sizeof **out);
	if (!*out)
		return bad(ps, path, "out of memory");
	size_t i = 0;
	for (const cJSON *it = v->child; it; it = it->next, i++) {
		if (!cJSON_IsString(it) || !*it->valuestring || strlen(it->valuestring) > 200)
			return bad(ps, path,
				   "[%zu] must be a non-empty string of at most 200 bytes", i);
		if (!((*out)[i] = strdup(it->valuestring)))
			return bad(ps, path, "out of memory");
	}
	return 0;
}

static int parse_ids(struct parse *ps, const cJSON *v, const char *path, unsigned **out, size_t *n)
{
	if (array_of(ps, v, path, 4096, n))
		return -1;
	*out = calloc(*n + 1, sizeof **out);
	if (!*out)
		return bad(ps, path, "out of memory");
	size_t i = 0;
	for (const cJSON *it = v->child; it; it = it->next, i++) {
		double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
		if (d < 0 || d > 4294967294.0 || d != floor(d))
			return bad(ps, path, "[%zu] must be a whole number from 0 to 4294967294",
				   i);
		(*out)[i] = (unsigned)d;
	}
	return 0;
}

static int hex_digest(const char *hex, unsigned char out[SRD_SHA256_LEN])
{
	if (strlen(hex) != 2 * SRD_SHA256_LEN)
		return -1;
	for (size_t i = 0; i < SRD_SHA256_LEN; i++) {
		unsigned b;
		if (sscanf(hex + 2 * i, "%2x", &b) != 1 ||
		    strspn(hex + 2 * i, "0123456789abcdefABCDEF") < 2)
			return -1;
		out[i] = (unsigned char)b;
	}
	return 0;
}

/* "sha256:HEX" is the token's digest; anything else is the token itself,
 * as long and as printable as token_file's must be. */
static int parse_tokens(struct parse *ps, const cJSON *v, const char *path, srd_tenant *t)
{
	if (array_of(ps, v, path, 64, &t->n_tokens))
		return -1;
	if (!(t->tokens = calloc(t->n_tokens + 1, sizeof *t->tokens)))
		return bad(ps, path, "out of memory");
	size_t i = 0;
	for (const cJSON *it = v->child; it; it = it->next, i++) {
		const char *s = cJSON_IsString(it) ? it->valuestring : NULL;
		size_t len = s ? strlen(s) : 0;
		if (s && strncmp(s, "sha256:", 7) == 0) {
			if (hex_digest(s + 7, t->tokens[i]))
				return bad(ps, path, "[%zu] is not sha256: and 64 hex digits", i);
			continue;
		}
		bool printable =
		    s && strspn(s, "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRST"
				   "UVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~") == len;
		if (!printable || len < SRD_TOKEN_MIN || len > SRD_TOKEN_MAX)
			return bad(ps, path,
				   "[%zu] must be a token of %d to %d printable characters without "
				   "spaces, or \"sha256:\" and its digest in hex",
				   i, SRD_TOKEN_MIN, SRD_TOKEN_MAX);
		srd_sha256(s, len, t->tokens[i]);
	}
	return 0;
}

static const struct quota {
	const char *name; /* the setting of the same name is the default */
	srd_number_kind kind;
	size_t off;
	uint64_t min, max;
} quotas[] = {
	{ "max_concurrent_runs", SRD_NUM_COUNT, offsetof(srd_tenant, max_runs), 1, 4096 },
	{ "queue_depth", SRD_NUM_COUNT, offsetof(srd_tenant, queue_depth), 0, 100000 },
	{ "max_sessions", SRD_NUM_COUNT, offsetof(srd_tenant, max_sessions), 0, 100000 },
	{ "session_max_age", SRD_NUM_DURATION, offsetof(srd_tenant, session_max_age_ms), 1000,
	  30ull * 86400000 },
	{ "max_file_size", SRD_NUM_SIZE, offsetof(srd_tenant, max_file_bytes), 1, 1ull << 32 },
};
#define N_QUOTAS (sizeof quotas / sizeof *quotas)

static int parse_quota(struct parse *ps, const struct quota *q, const cJSON *v, const char *path,
		       srd_tenant *t)
{
	uint64_t n;
	bool ok = srd_json_number(v, q->kind, &n);
	if (!ok || n < q->min || n > q->max)
		return bad(ps, path, "is not %s between %llu and %llu%s", srd_number_want[q->kind],
			   (unsigned long long)q->min, (unsigned long long)q->max,
			   srd_number_unit[q->kind]);
	*(uint64_t *)((char *)t + q->off) = n;
	return 0;
}

static int parse_quotas(struct parse *ps, const cJSON *v, const char *path, srd_tenant *t)
{
	if (!cJSON_IsObject(v))
		return bad(ps, path, "must be an object");
	char sub[160];
	for (const cJSON *it = v->child; it; it = it->next) {
		snprintf(sub, sizeof sub, "%s.%.60s", path, it->string);
		const struct quota *q = NULL;
		for (size_t i = 0; i < N_QUOTAS && !q; i++)
			q = strcmp(quotas[i].name, it->string) == 0 ? &quotas[i] : NULL;
		if (!q)
			return bad(ps, sub,
				   "unknown quota (known: max_concurrent_runs, queue_depth, "
				   "max_sessions, session_max_age, max_file_size)");
		if (parse_quota(ps, q, it, sub, t))
			return -1;
	}
	return 0;
}

/* Its share of the run slots and of the CPU (docs/tenants.md): a whole
 * number, as cgroup v2's cpu.weight is. */
static int parse_weight(struct parse *ps, const cJSON *v, const char *path, srd_tenant *t)
{
	double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
	if (d < 1 || d > SRD_TENANT_WEIGHT_MAX || d != floor(d)) {
		char *text = cJSON_PrintUnformatted(v);
		bad(ps, path, "%.40s is not a whole number from 1 to %u", text ? text : "?",
		    SRD_TENANT_WEIGHT_MAX);
		free(text);
		return -1;
	}
	t->weight = (unsigned)d;
	return 0;
}

static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	return n > 0 && n < 64 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") == n;
}

static int parse_field(struct parse *ps, const cJSON *it, const char *sub, srd_tenant *t)
{
	const char *k = it->string;
	if (strcmp(k, "name") == 0) {
		if (!cJSON_IsString(it) || !name_ok(it->valuestring))
			return bad(ps, sub, "must be 1 to 63 of A-Z a-z 0-9 _ . -");
		snprintf(t->name, sizeof t->name, "%s", it->valuestring);
		return 0;
	}
	if (strcmp(k, "tokens") == 0)
		return parse_tokens(ps, it, sub, t);
	if (strcmp(k, "uids") == 0)
		return parse_ids(ps, it, sub, &t->uids, &t->n_uids);
	if (strcmp(k, "gids") == 0)
		return parse_ids(ps, it, sub, &t->gids, &t->n_gids);
	if (strcmp(k, "policies") == 0)
		return parse_strings(ps, it, sub, &t->policies, &t->n_policies);
	if (strcmp(k, "checker_ceiling") == 0)
		return parse_strings(ps, it, sub, &t->ceiling, &t->n_ceiling);
	if (strcmp(k, "quotas") == 0)
		return parse_quotas(ps, it, sub, t);
	if (strcmp(k, "weight") == 0)
		return parse_weight(ps, it, sub, t);
	if (strcmp(k, "comment") == 0)
		return 0;
	return bad(ps, sub,
		   "unknown key (known: name, tokens, uids, gids, policies, quotas, weight, "
		   "checker_ceiling, comment)");
}

static int use_default_ceiling(srd_tenant *t)
{
	size_t n = sizeof default_ceiling / sizeof *default_ceiling;
	if (!(t->ceiling = calloc(n, sizeof *t->ceiling)))
		return -1;
	for (t->n_ceiling = 0; t->n_ceiling < n; t->n_ceiling++)
		if (!(t->ceiling[t->n_ceiling] = strdup(default_ceiling[t->n_ceiling])))
			return -1;
	return 0;
}

static int parse_tenant(struct parse *ps, const cJSON *v, size_t i, srd_tenant *t)
{
	char path[32], sub[160];
	snprintf(path, sizeof path, "tenants[%zu]", i);
	if (!cJSON_IsObject(v))
		return bad(ps, path, "must be an object");
	quotas_from_config(t, ps->cfg);
	t->max_runs = ps->default_runs;
	t->weight = SRD_TENANT_WEIGHT_DEFAULT;
	t->index = (unsigned)i;
	t->in_file = true;
	for (const cJSON *it = v->child; it; it = it->next) {
		snprintf(sub, sizeof sub, "%s.%.60s", path, it->string);
		if (parse_field(ps, it, sub, t))
			return -1;
	}
	if (!t->name[0])
		return bad(ps, path, "needs a \"name\"");
	if (!t->n_tokens && !t->n_uids && !t->n_gids)
		return bad(ps, path,
			   "tenant \"%s\" has no tokens, uids or gids: no one could be it",
			   t->name);
	if (!t->ceiling && use_default_ceiling(t))
		return bad(ps, path, "out of memory");
	return 0;
}

/* A name, token, uid or gid in two tenants would make who a client is
 * depend on the file's order. */
static int check_unique(struct parse *ps, const srd_tenants *ts, size_t i)
{
	const srd_tenant *t = &ts->t[i];
	char path[32];
	snprintf(path, sizeof path, "tenants[%zu]", i);
	for (size_t j = 0; j < i; j++) {
		const srd_tenant *o = &ts->t[j];
		if (strcmp(o->name, t->name) == 0)
			return bad(ps, path, "the name \"%s\" is tenants[%zu]'s too", t->name, j);
		for (size_t a = 0; a < t->n_tokens; a++)
			for (size_t b = 0; b < o->n_tokens; b++)
				if (!memcmp(t->tokens[a], o->tokens[b], SRD_SHA256_LEN))
					return bad(ps, path, "tokens[%zu] is tenants[%zu]'s too", a,
						   j);
		for (size_t a = 0; a < t->n_uids; a++)
			for (size_t b = 0; b < o->n_uids; b++)
				if (t->uids[a] == o->uids[b])
					return bad(ps, path, "uid %u is tenants[%zu]'s too",
						   (unsigned)t->uids[a], j);
		for (size_t a = 0; a < t->n_gids; a++)
			for (size_t b = 0; b < o->n_gids; b++)
				if (t->gids[a] == o->gids[b])
					return bad(ps, path, "gid %u is tenants[%zu]'s too",
						   (unsigned)t->gids[a], j);
	}
	return 0;
}

static int read_text(struct parse *ps, char **out)
{
	*out = NULL;
	int fd = open(ps->file, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size > TENANTS_MAX_BYTES) {
		snprintf(ps->msg, ps->size, "tenants %s: %s", ps->file,
			 fd < 0 || errno ? strerror(errno) : "over 1 MiB");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	char *buf = calloc(1, (size_t)st.st_size + 1);
	ssize_t n = buf ? read(fd, buf, (size_t)st.st_size) : -1;
	close(fd);
	if (n != st.st_size) {
		free(buf);
		return snprintf(ps->msg, ps->size, "tenants %s: could not read it", ps->file), -1;
	}
	*out = buf;
	return 0;
}

static int parse_doc(struct parse *ps, const cJSON *doc, srd_tenants *ts)
{
	if (!cJSON_IsObject(doc))
		return bad(ps, "(top)", "not a JSON object {\"tenants\": [...]}");
	const cJSON *list = NULL;
	for (const cJSON *it = doc->child; it; it = it->next)
		if (strcmp(it->string, "tenants") == 0)
			list = it;
		else if (strcmp(it->string, "comment") != 0)
			return bad(ps, it->string, "unknown key (known: tenants, comment)");
	size_t n = 0;
	if (array_of(ps, list, "tenants", SRD_TENANTS_MAX, &n))
		return -1;
	/* A tenant's runs at once default to all slots but one: whatever one
	 * tenant sends, a slot frees for the others within one run's time. */
	ps->default_runs =
	    n > 1 && ps->cfg->max_runs > 1 ? ps->cfg->max_runs - 1 : ps->cfg->max_runs;
	if (n == 0)
		return bad(ps, "tenants", "is empty: name at least one tenant");
	if (!(ts->t = calloc(n, sizeof *ts->t)))
		return bad(ps, "tenants", "out of memory");
	const cJSON *it = list->child;
	for (size_t i = 0; i < n; i++, it = it->next, ts->n++)
		if (parse_tenant(ps, it, i, &ts->t[i]) || check_unique(ps, ts, i)) {
			ts->n++; /* freed with the rest */
			return -1;
		}
	return 0;
}

int srd_tenants_load(const srd_config *cfg, srd_tenants *out, char *msg, size_t size)
{
	*out = (srd_tenants){ 0 };
	if (!cfg->tenants_file) {
		if (!(out->t = calloc(1, sizeof *out->t)))
			return snprintf(msg, size, "tenants: out of memory"), -1;
		out->n = 1;
		snprintf(out->t->name, sizeof out->t->name, "default");
		out->t->weight = SRD_TENANT_WEIGHT_DEFAULT;
		quotas_from_config(out->t, cfg);
		return 0;
	}
	struct parse ps = { .file = cfg->tenants_file, .msg = msg, .size = size, .cfg = cfg };
	char *text;
	if (read_text(&ps, &text))
		return -1;
	cJSON *doc = cJSON_Parse(text);
	free(text);
	out->from_file = true;
	int rc = doc ? parse_doc(&ps, doc, out) : bad(&ps, "(top)", "not valid JSON");
	cJSON_Delete(doc);
	if (rc)
		srd_tenants_free(out);
	return rc;
}

bool srd_tenants_have_tokens(const srd_tenants *ts)
{
	for (size_t i = 0; i < ts->n; i++)
		if (ts->t[i].n_tokens)
			return true;
	return false;
}

/* Every tenant's every digest is compared, whatever matched: the time says
 * nothing about which tenant, or how much of a digest, matched. */
static const srd_tenant *by_token(const srd_tenants *ts, const char *given)
{
	unsigned char d[SRD_SHA256_LEN];
	srd_sha256(given, strlen(given), d);
	const srd_tenant *found = NULL;
	for (size_t i = 0; i < ts->n; i++)
		for (size_t j = 0; j < ts->t[i].n_tokens; j++) {
			volatile unsigned char diff = 0;
			for (size_t k = 0; k < SRD_SHA256_LEN; k++)
				diff |= d[k] ^ ts->t[i].tokens[j][k];
			if (diff == 0)
				found = &ts->t[i];
		}
	return found;
}

static const srd_tenant *by_cred(const srd_tenants *ts, uid_t uid, gid_t gid)
{
	for (size_t i = 0; i < ts->n; i++)
		for (size_t j = 0; j < ts->t[i].n_uids; j++)
			if (ts->t[i].uids[j] == uid)
				return &ts->t[i];
	for (size_t i = 0; i < ts->n; i++)
		for (size_t j = 0; j < ts->t[i].n_gids; j++)
			if (ts->t[i].gids[j] == gid)
				return &ts->t[i];
	return NULL;
}

const srd_tenant *srd_tenants_identify(const srd_tenants *ts, const char *global_token,
				       const srd_peer *peer, bool need_token,
				       const char *authorization, unsigned *status,
				       const char **why)
{
	*status = 401;
	*why = "no tenants are loaded";
	if (!ts->n)
		return NULL;
	if (need_token) {
		const char *given = authorization && strncasecmp(authorization, "Bearer ", 7) == 0
					? authorization + 7
					: NULL;
		while (given && *given == ' ')
			given++;
		const srd_tenant *t =
		    !ts->from_file
			? (srd_token_matches(global_token, authorization) ? &ts->t[0] : NULL)
		    : given ? by_token(ts, given)
			    : NULL;
		*why = !authorization ? "missing \"Authorization: Bearer TOKEN\" header"
				      : "the bearer token is wrong";
		return t;
	}
	if (!ts->from_file)
		return &ts->t[0];
	const srd_tenant *t =
	    peer->is_unix && peer->have_cred ? by_cred(ts, peer->uid, peer->gid) : NULL;
	*status = 403;
	*why = "this peer's uid and gid are in no tenant (the tenants file)";
	return t;
}

int srd_tenant_check_policy(const srd_tenant *t, const char *policy, srd_ferr *e)
{
	if (!t->policies)
		return 0;
	for (size_t i = 0; i < t->n_policies; i++)
		if (strcmp(t->policies[i], policy) == 0)
			return 0;
	return srd_fail(e, 403, "policy", "tenant \"%s\" may not use policy \"%.100s\"", t->name,
			policy);
}

static bool listed(char *const *list, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(list[i], s) == 0)
			return true;
	return false;
}

int srd_tenant_check_allow(const srd_tenant *t, const sr_policy *p, const char *field,
			   const char *const *allow, size_t n, srd_ferr *e)
{
	if (!t->ceiling)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (listed(t->ceiling, t->n_ceiling, allow[i]) ||
		    listed(p->checker.allow, p->checker.n_allow, allow[i]))
			continue;
		char name[160];
		snprintf(name, sizeof name, "%s[%zu]", field, i);
		return srd_fail(e, 400, name,
				"%s: \"%.100s\" is beyond tenant \"%s\"'s checker ceiling (it may "
				"relax only what its checker_ceiling or the policy's checker.allow "
				"lists; docs/tenants.md)",
				name, allow[i], t->name);
	}
	return 0;
}

int srd_tenants_make_cgroups(srd_tenants *ts, char *msg, size_t size)
{
	for (size_t i = 0; ts->from_file && i < ts->n; i++) {
		srd_tenant *t = &ts->t[i];
		char name[sizeof t->cgroup];
		snprintf(name, sizeof name, "tenant-%s", t->name);
		sr_error err = { 0 };
		if (sr_cgroup_share_create(name, t->weight, &err) < 0)
			return snprintf(msg, size, "tenant \"%s\"'s cgroup: %s", t->name, err.msg),
			       -1;
		memcpy(t->cgroup, name, sizeof name);
	}
	return 0;
}

const char *srd_tenant_log_name(const srd_tenant *t)
{
	return t && t->in_file ? t->name : NULL;
}

const char *srd_tenant_cgroup(const srd_tenant *t)
{
	return t && t->cgroup[0] ? t->cgroup : NULL;
}
