/* The E2B listener: the registry of E2B sandboxes, their control API and
 * the dispatch of their traffic (e2b.h). The code interpreter is in
 * e2b_exec.c, envd in e2b_envd.c. */
#include "e2b.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "e2b_envd.h"
#include "e2b_exec.h"
#include "log.h"

#define DEFAULT_TIMEOUT_S 300
#define LIST_LIMIT_MAX    1000

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static srd_e2b_sandbox *reg_head; /* oldest first */

/* ---- the registry ------------------------------------------------------ */

static void destroy(srd_e2b_sandbox *sb)
{
	if (sb->envd_state_free && sb->envd_state)
		sb->envd_state_free(sb->envd_state);
	srd_e2b_contexts_free(sb);
	srd_session_release(sb->session);
	free(sb->metadata_json);
	pthread_mutex_destroy(&sb->lock);
	pthread_rwlock_destroy(&sb->exec_gate);
	free(sb);
}

void srd_e2b_release(srd_e2b_sandbox *sb)
{
	if (!sb)
		return;
	pthread_mutex_lock(&reg_lock);
	bool last = --sb->refs == 0;
	pthread_mutex_unlock(&reg_lock);
	if (last)
		destroy(sb);
}

/* The session closed (killed, expired, shutdown): out of the registry, its
 * interpreters killed, the registry's reference dropped. */
static void on_session_close(void *arg)
{
	srd_e2b_sandbox *sb = arg;
	pthread_mutex_lock(&reg_lock);
	for (srd_e2b_sandbox **p = &reg_head; *p; p = &(*p)->next)
		if (*p == sb) {
			*p = sb->next;
			break;
		}
	sb->ended = true;
	pthread_mutex_unlock(&reg_lock);
	srd_e2b_contexts_kill(sb);
	pthread_mutex_lock(&sb->lock);
	void (*end)(void *) = sb->envd_state_end;
	void *state = sb->envd_state;
	pthread_mutex_unlock(&sb->lock);
	if (end && state)
		end(state);
	srd_e2b_release(sb);
}

/* Referenced, or NULL. tenant NULL: anyone's (sandbox traffic, whose
 * token says whose it is). */
srd_e2b_sandbox *srd_e2b_find(const char *id, const srd_tenant *tenant)
{
	srd_e2b_sandbox *found = NULL;
	pthread_mutex_lock(&reg_lock);
	for (srd_e2b_sandbox *sb = reg_head; sb && !found; sb = sb->next)
		if (strcmp(sb->id, id) == 0 &&
		    (!tenant || srd_session_tenant(sb->session) == tenant))
			found = sb;
	if (found)
		found->refs++;
	pthread_mutex_unlock(&reg_lock);
	return found;
}

/* Under sb->lock: lifecycle.onTimeout "pause" pauses it at its timeout
 * (noticed when someone asks; a run in progress then freezes with the
 * rest and ends at its wall time). */
static void tick_locked(srd_e2b_sandbox *sb)
{
	if (sb->auto_pause && !sb->paused && srd_now_ms() >= sb->timeout_at) {
		sb->paused = true;
		srd_session_set_deadline(sb->session, srd_session_max_end(sb->session));
		srd_e2b_contexts_freeze_locked(sb, true);
	}
}

bool srd_e2b_paused(srd_e2b_sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	tick_locked(sb);
	bool p = sb->paused;
	pthread_mutex_unlock(&sb->lock);
	return p;
}

/* Under sb->lock: the session ends (or, auto_pause, pauses) timeout_ms
 * from now, within session_max_age. */
static void set_timeout_locked(srd_e2b_sandbox *sb, uint64_t timeout_ms)
{
	uint64_t now = srd_now_ms(), max_end = srd_session_max_end(sb->session);
	sb->timeout_at = now + timeout_ms < max_end ? now + timeout_ms : max_end;
	srd_session_set_deadline(sb->session,
				 sb->auto_pause || sb->paused ? max_end : sb->timeout_at);
}

/* ---- answers ----------------------------------------------------------- */

/* E2B's error shape: {"code": status, "message": "..."}. */
static void e2b_error(srd_response *res, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void e2b_error(srd_response *res, unsigned status, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddNumberToObject(j, "code", status);
	cJSON_AddStringToObject(j, "message", msg);
	srd_respond_json(res, status, j);
}

static void ferr_error(srd_response *res, const srd_ferr *e)
{
	e2b_error(res, e->status, "%s", e->msg);
	res->retry_after = e->retry_after;
	snprintf(res->error_field, sizeof res->error_field, "%s", e->field);
}

static void no_content(srd_response *res)
{
	srd_respond_text(res, 204, "application/json", NULL, 0);
}

/* RFC 3339 in UTC with milliseconds, as E2B's API writes times. */
static void iso_time(uint64_t real_ms, char *out, size_t size)
{
	time_t t = (time_t)(real_ms / 1000);
	struct tm tm;
	gmtime_r(&t, &tm);
	char base[32];
	strftime(base, sizeof base, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, size, "%s.%03uZ", base, (unsigned)(real_ms % 1000));
}

static uint64_t real_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* What every answer about a sandbox says; detail: getInfo's and create's
 * extras (its tokens). */
static cJSON *sandbox_json(srd_e2b_sandbox *sb, bool detail)
{
	cJSON *j = cJSON_CreateObject();
	char when[48];
	pthread_mutex_lock(&sb->lock);
	tick_locked(sb);
	cJSON_AddStringToObject(j, "sandboxID", sb->id);
	cJSON_AddStringToObject(j, "templateID", sb->template_id);
	cJSON_AddStringToObject(j, "alias", sb->template_id);
	cJSON_AddStringToObject(j, "clientID", "saferun");
	iso_time(sb->started_real_ms, when, sizeof when);
	cJSON_AddStringToObject(j, "startedAt", when);
	uint64_t now = srd_now_ms();
	uint64_t left = sb->paused ? 0 : sb->timeout_at > now ? sb->timeout_at - now : 0;
	iso_time(real_now_ms() + left, when, sizeof when);
	cJSON_AddStringToObject(j, "endAt", when);
	cJSON_AddStringToObject(j, "state", sb->paused ? "paused" : "running");
	cJSON *lc = cJSON_AddObjectToObject(j, "lifecycle");
	cJSON_AddStringToObject(lc, "onTimeout", sb->auto_pause ? "pause" : "kill");
	cJSON_AddBoolToObject(lc, "autoResume", false);
	cJSON *md = cJSON_Parse(sb->metadata_json);
	cJSON_AddItemToObject(j, "metadata", md ? md : cJSON_CreateObject());
	pthread_mutex_unlock(&sb->lock);
	cJSON *s = srd_session_json(sb->session);
	const cJSON *lim = cJSON_GetObjectItem(s, "limits");
	double cpus = cJSON_GetNumberValue(cJSON_GetObjectItem(lim, "cpus"));
	double mem = cJSON_GetNumberValue(cJSON_GetObjectItem(lim, "memory_bytes"));
	double disk = cJSON_GetNumberValue(
	    cJSON_GetObjectItem(cJSON_GetObjectItem(s, "disk"), "limit_bytes"));
	cJSON_AddNumberToObject(j, "cpuCount", cpus >= 1 ? (double)(unsigned)cpus : 1);
	cJSON_AddNumberToObject(j, "memoryMB", (double)((uint64_t)mem >> 20));
	cJSON_AddNumberToObject(j, "diskSizeMB", disk == disk ? (double)((uint64_t)disk >> 20) : 0);
	cJSON_AddStringToObject(j, "envdVersion", SRD_E2B_ENVD_VERSION);
	cJSON_AddNullToObject(j, "domain");
	cJSON_AddStringToObject(j, "policy", srd_session_policy_name(sb->session));
	cJSON_Delete(s);
	if (detail) {
		cJSON_AddStringToObject(j, "envdAccessToken", sb->envd_token);
		cJSON_AddStringToObject(j, "trafficAccessToken", sb->envd_token);
	}
	return j;
}

/* ---- identifying requests ---------------------------------------------- */

static bool same_token(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	volatile unsigned char diff = la != lb;
	for (size_t i = 0; i < la && i < lb; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

const srd_tenant *srd_e2b_identify(srd_ctx *ctx, const srd_peer *peer, bool need_token,
				   const char *url,
				   const char *(*hdr)(void *conn, const char *name), void *conn,
				   unsigned *status, const char **why)
{
	const char *sid = hdr(conn, "E2b-Sandbox-Id");
	if (!sid) {
		/* The control API: the API key is a saferund token. */
		const char *key = hdr(conn, "X-API-Key");
		char auth[1100];
		if (key && strlen(key) > 1000) {
			*status = 401;
			*why = "the API key (X-API-Key) is wrong";
			return NULL;
		}
		if (key)
			snprintf(auth, sizeof auth, "Bearer %s", key);
		const srd_tenant *t = srd_tenants_identify(
		    &ctx->tenants, ctx->token, peer, need_token, key ? auth : NULL, status, why);
		if (!t && *status == 401)
			*why = key ? "the API key (X-API-Key) is wrong"
				   : "missing X-API-Key header (E2B_API_KEY: a saferund token)";
		return t;
	}
	srd_e2b_sandbox *sb = srd_e2b_find(sid, NULL);
	if (!sb) {
		*status = 502;
		*why = "no such sandbox: it was killed, timed out, or never created";
		return NULL;
	}
	const char *tok = hdr(conn, "X-Access-Token");
	if (!tok)
		tok = hdr(conn, "E2B-Traffic-Access-Token");
	const char *port = hdr(conn, "E2b-Sandbox-Port");
	/* A signed download or upload URL carries no token: envd checks its
	 * signature (e2b_envd.h). */
	bool signed_files = !tok && port && atoi(port) == SRD_E2B_PORT_ENVD &&
			    strncmp(url, "/files", 6) == 0 && (!url[6] || url[6] == '?');
	const srd_tenant *t = NULL;
	if ((tok && same_token(tok, sb->envd_token)) || signed_files) {
		t = srd_session_tenant(sb->session);
	} else {
		*status = 401;
		*why = tok ? "the sandbox's access token (X-Access-Token) is wrong"
			   : "missing X-Access-Token header (the sandbox's envdAccessToken)";
	}
	srd_e2b_release(sb);
	return t;
}

/* ---- the control API --------------------------------------------------- */

/* The body as an object ({} when empty); NULL after answering 400. */
static cJSON *body_object(const srd_request *req, srd_response *res)
{
	cJSON *doc = NULL;
	srd_ferr e = { 0 };
	bool none = !req->body || req->body_len == 0;
	if (srd_json_parse_object(none ? "{}" : req->body, none ? 2 : req->body_len, &doc, &e)) {
		ferr_error(res, &e);
		return NULL;
	}
	return doc;
}

/* obj[key] as whole seconds > 0, or def when absent; -1 after a 400. */
static long long seconds_field(const cJSON *obj, const char *key, long long def, srd_response *res)
{
	const cJSON *v = srd_json_get(obj, key);
	if (!v)
		return def;
	double d = cJSON_GetNumberValue(v);
	if (!cJSON_IsNumber(v) || d != d || d < 0 || d > 30.0 * 86400) {
		e2b_error(res, 400, "\"%s\": must be a number of seconds from 0 to 2592000, not %s",
			  key, srd_json_kind(v));
		return -1;
	}
	return (long long)d;
}

/* An object of strings (metadata, envVars); NULL: fine. */
static const char *strings_object(const cJSON *obj, const char *key)
{
	const cJSON *v = srd_json_get(obj, key), *it;
	if (!v)
		return NULL;
	if (!cJSON_IsObject(v))
		return "must be an object of strings";
	cJSON_ArrayForEach(it, v) if (!cJSON_IsString(it)) return "must be an object of strings";
	return NULL;
}

static bool default_template(const char *t)
{
	return !t || !*t || strcmp(t, "base") == 0 || strcmp(t, "code-interpreter-v1") == 0 ||
	       strcmp(t, "code-interpreter") == 0;
}

static void random_hex(char *out, size_t nbytes)
{
	unsigned char b[64];
	if (nbytes > sizeof b)
		nbytes = sizeof b;
	if (getrandom(b, nbytes, 0) != (ssize_t)nbytes)
		memset(b, 0, sizeof b); /* the caller checks for an all-zero token */
	for (size_t i = 0; i < nbytes; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void handle_create(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	cJSON *body = body_object(req, res);
	if (!body)
		return;
	const char *why;
	const cJSON *tv = srd_json_get(body, "templateID");
	const char *template = cJSON_GetStringValue(tv);
	long long timeout_s = seconds_field(body, "timeout", DEFAULT_TIMEOUT_S, res);
	if (timeout_s < 0)
		goto out;
	if (tv && !template) {
		e2b_error(res, 400, "\"templateID\": must be a string (a saferun policy name)");
		goto out;
	}
	if ((why = strings_object(body, "metadata")) || (why = strings_object(body, "envVars"))) {
		e2b_error(res, 400, "\"%s\": %s",
			  strings_object(body, "metadata") ? "metadata" : "envVars", why);
		goto out;
	}
	if (srd_json_get(body, "volumeMounts")) {
		e2b_error(res, 400, "\"volumeMounts\": volumes are not supported by saferun");
		goto out;
	}
	const cJSON *ap = srd_json_get(body, "autoPause");
	if (ap && !cJSON_IsBool(ap)) {
		e2b_error(res, 400, "\"autoPause\": must be true or false");
		goto out;
	}
	/* The session: the template's policy, the sandbox's environment. */
	const char *policy = default_template(template) ? NULL : template;
	cJSON *sopts = cJSON_CreateObject();
	if (policy)
		cJSON_AddStringToObject(sopts, "policy", policy);
	const cJSON *envs = srd_json_get(body, "envVars");
	if (envs && cJSON_GetArraySize(envs))
		cJSON_AddItemToObject(sopts, "env", cJSON_Duplicate(envs, true));
	srd_run_opts o = { 0 };
	srd_ferr e = { 0 };
	srd_session *ss = NULL;
	int rc = srd_run_opts_parse_as(sopts, SRD_OPTS_SESSION, &o, &e);
	if (rc == 0)
		rc = srd_session_create(ctx, &o, req->peer, &ss, &e);
	srd_run_opts_free(&o);
	cJSON_Delete(sopts);
	if (rc) {
		if (strcmp(e.field, "policy") == 0)
			snprintf(e.field, sizeof e.field, "templateID");
		else if (strncmp(e.field, "env", 3) == 0)
			memcpy(e.field, "envVars", 8);
		ferr_error(res, &e);
		goto out;
	}
	srd_e2b_sandbox *sb = calloc(1, sizeof *sb);
	const cJSON *md = srd_json_get(body, "metadata");
	char *md_text = md ? cJSON_PrintUnformatted(md) : strdup("{}");
	if (!sb || !md_text || srd_e2b_contexts_init(sb)) {
		free(sb);
		free(md_text);
		srd_session_end(ctx->sessions, req->peer->tenant, srd_session_id(ss), &e);
		srd_session_release(ss);
		e2b_error(res, 500, "out of memory");
		goto out;
	}
	sb->session = ss;
	sb->ctx = ctx;
	snprintf(sb->id, sizeof sb->id, "%s", srd_session_id(ss));
	random_hex(sb->envd_token, 32);
	pthread_mutex_init(&sb->lock, NULL);
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	/* pause waits for the runs in progress, and new ones wait for it */
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&sb->exec_gate, &ra);
	pthread_rwlockattr_destroy(&ra);
	snprintf(sb->template_id, sizeof sb->template_id, "%s",
		 template && *template ? template : "base");
	sb->metadata_json = md_text;
	sb->started_real_ms = real_now_ms();
	sb->auto_pause = cJSON_IsTrue(ap);
	sb->refs = 2; /* the registry's and ours */
	pthread_mutex_lock(&sb->lock);
	set_timeout_locked(sb, (uint64_t)timeout_s * 1000);
	pthread_mutex_unlock(&sb->lock);
	pthread_mutex_lock(&reg_lock);
	srd_e2b_sandbox **tail = &reg_head;
	while (*tail)
		tail = &(*tail)->next;
	*tail = sb;
	pthread_mutex_unlock(&reg_lock);
	srd_session_on_close(ss, on_session_close, sb);
	srd_log_tenant("info", "e2b", srd_tenant_log_name(req->peer->tenant),
		       "sandbox %s created (template %s, timeout %llds)", sb->id, sb->template_id,
		       timeout_s);
	srd_respond_json(res, 201, sandbox_json(sb, true));
	srd_e2b_release(sb);
out:
	cJSON_Delete(body);
}

/* A metadata filter: "k=v&k2=v2" as the SDK sends it (URL-encoded pairs,
 * each key and value encoded once more). */
static void url_decode(char *s)
{
	char *o = s;
	for (; *s; s++) {
		if (*s == '%' && isxdigit((unsigned char)s[1]) && isxdigit((unsigned char)s[2])) {
			char h[3] = { s[1], s[2], 0 };
			*o++ = (char)strtol(h, NULL, 16);
			s += 2;
		} else {
			*o++ = *s == '+' ? ' ' : *s;
		}
	}
	*o = '\0';
}

static bool metadata_matches(const srd_e2b_sandbox *sb, const char *filter)
{
	if (!filter || !*filter)
		return true;
	cJSON *md = cJSON_Parse(sb->metadata_json);
	char *copy = strdup(filter), *save = NULL;
	bool ok = md && copy;
	for (char *pair = copy ? strtok_r(copy, "&", &save) : NULL; pair && ok;
	     pair = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(pair, '=');
		const char *v = eq ? eq + 1 : "";
		if (eq)
			*eq = '\0';
		char *k2 = strdup(pair), *v2 = strdup(v);
		if (!k2 || !v2) {
			ok = false;
		} else {
			url_decode(k2), url_decode(k2);
			url_decode(v2), url_decode(v2);
			const char *have =
			    cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(md, k2));
			ok = have && strcmp(have, v2) == 0;
		}
		free(k2);
		free(v2);
	}
	free(copy);
	cJSON_Delete(md);
	return ok;
}

static bool state_matches(const char *states, bool paused)
{
	if (!states || !*states)
		return true;
	const char *want = paused ? "paused" : "running";
	size_t n = strlen(want);
	for (const char *p = states; (p = strstr(p, want)); p += n)
		if ((p == states || p[-1] == ',') && (!p[n] || p[n] == ','))
			return true;
	return false;
}

/* GET /v2/sandboxes?metadata=&state=&limit=&nextToken=: the tenant's,
 * oldest first; nextToken is where the next page starts. */
static void handle_list(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	(void)ctx;
	const char *md = srd_request_query(req, "metadata");
	const char *state = srd_request_query(req, "state");
	const char *lim = srd_request_query(req, "limit");
	const char *next = srd_request_query(req, "nextToken");
	char *end = NULL;
	unsigned long limit = lim ? strtoul(lim, &end, 10) : LIST_LIMIT_MAX;
	if (lim && (!*lim || *end || limit < 1 || limit > LIST_LIMIT_MAX))
		return e2b_error(res, 400, "limit: \"%.40s\" is not a number from 1 to %d", lim,
				 LIST_LIMIT_MAX);
	unsigned long skip = next ? strtoul(next, &end, 10) : 0;
	if (next && (!*next || *end))
		return e2b_error(res, 400, "nextToken: \"%.40s\" is not a token this API gave",
				 next);
	/* The matching sandboxes, referenced, then described without the
	 * registry's lock. */
	srd_e2b_sandbox **all = NULL;
	size_t n = 0, cap = 0;
	pthread_mutex_lock(&reg_lock);
	for (srd_e2b_sandbox *sb = reg_head; sb; sb = sb->next) {
		if (srd_session_tenant(sb->session) != req->peer->tenant)
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			srd_e2b_sandbox **g = realloc(all, nc * sizeof *all);
			if (!g)
				break;
			all = g, cap = nc;
		}
		sb->refs++;
		all[n++] = sb;
	}
	pthread_mutex_unlock(&reg_lock);
	cJSON *arr = cJSON_CreateArray();
	size_t matched = 0;
	bool more = false;
	for (size_t i = 0; i < n; i++) {
		srd_e2b_sandbox *sb = all[i];
		bool paused = srd_e2b_paused(sb);
		if (metadata_matches(sb, md) && state_matches(state, paused)) {
			if (matched >= skip && (size_t)cJSON_GetArraySize(arr) < limit)
				cJSON_AddItemToArray(arr, sandbox_json(sb, false));
			else if (matched >= skip)
				more = true;
			matched++;
		}
		srd_e2b_release(sb);
	}
	free(all);
	if (more) {
		char tok[32];
		snprintf(tok, sizeof tok, "%lu", skip + limit);
		srd_respond_header(res, "X-Next-Token", tok);
	}
	srd_respond_json(res, 200, arr);
}

/* The sandbox of the path's {id}, the caller's tenant's; NULL after a 404. */
static srd_e2b_sandbox *path_sandbox(const srd_request *req, srd_response *res)
{
	srd_e2b_sandbox *sb = srd_e2b_find(req->params[0], req->peer->tenant);
	if (!sb)
		e2b_error(res, 404,
			  "sandbox \"%.64s\" not found (killed, timed out, or never created)",
			  req->params[0]);
	return sb;
}

static void handle_get(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	(void)ctx;
	srd_e2b_sandbox *sb = path_sandbox(req, res);
	if (!sb)
		return;
	srd_respond_json(res, 200, sandbox_json(sb, true));
	srd_e2b_release(sb);
}

static void handle_kill(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_e2b_sandbox *sb = path_sandbox(req, res);
	if (!sb)
		return;
	srd_ferr e = { 0 };
	/* Ends the session: on_session_close takes it out of the registry. */
	if (srd_session_end(ctx->sessions, req->peer->tenant, sb->id, &e))
		e2b_error(res, 404, "sandbox \"%.64s\" not found", sb->id);
	else
		no_content(res);
	srd_e2b_release(sb);
}

static void handle_timeout(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	(void)ctx;
	cJSON *body = body_object(req, res);
	if (!body)
		return;
	long long s = seconds_field(body, "timeout", -2, res);
	if (s == -2)
		e2b_error(res, 400, "\"timeout\": required (seconds)");
	srd_e2b_sandbox *sb = s >= 0 ? path_sandbox(req, res) : NULL;
	if (sb) {
		pthread_mutex_lock(&sb->lock);
		set_timeout_locked(sb, (uint64_t)s * 1000);
		pthread_mutex_unlock(&sb->lock);
		no_content(res);
		srd_e2b_release(sb);
	}
	cJSON_Delete(body);
}

/* Pause: the runs and command starts in progress finish (exec_gate), then
 * every kernel of the sandbox is frozen with its memory (the commands
 * with the default context's) and nothing runs until resume. The timeout
 * stops; session_max_age holds. */
static void handle_pause(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	(void)ctx;
	srd_e2b_sandbox *sb = path_sandbox(req, res);
	if (!sb)
		return;
	pthread_rwlock_wrlock(&sb->exec_gate);
	pthread_mutex_lock(&sb->lock);
	tick_locked(sb);
	bool was = sb->paused;
	sb->paused = true;
	srd_session_set_deadline(sb->session, srd_session_max_end(sb->session));
	if (!was)
		srd_e2b_contexts_freeze_locked(sb, true);
	pthread_mutex_unlock(&sb->lock);
	pthread_rwlock_unlock(&sb->exec_gate);
	if (was)
		e2b_error(res, 409, "sandbox \"%s\" is already paused", sb->id);
	else
		no_content(res);
	srd_e2b_release(sb);
}

/* connect (v2): resumes a paused sandbox, sets its timeout when given;
 * resume (v1): the same, 409 if it was running. */
static void resume(srd_ctx *ctx, const srd_request *req, srd_response *res, bool connect)
{
	(void)ctx;
	cJSON *body = body_object(req, res);
	if (!body)
		return;
	long long s = seconds_field(body, "timeout", -2, res);
	srd_e2b_sandbox *sb = s != -1 ? path_sandbox(req, res) : NULL;
	if (sb) {
		pthread_mutex_lock(&sb->lock);
		tick_locked(sb);
		bool was = sb->paused;
		sb->paused = false;
		if (s >= 0 || was)
			set_timeout_locked(sb,
					   s >= 0 ? (uint64_t)s * 1000 : DEFAULT_TIMEOUT_S * 1000);
		if (was)
			srd_e2b_contexts_freeze_locked(sb, false);
		pthread_mutex_unlock(&sb->lock);
		if (!connect && !was)
			e2b_error(res, 409, "sandbox \"%s\" is not paused", sb->id);
		else
			srd_respond_json(res, was ? 201 : 200, sandbox_json(sb, true));
		srd_e2b_release(sb);
	}
	cJSON_Delete(body);
}

static void handle_connect(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	resume(ctx, req, res, true);
}

static void handle_resume(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	resume(ctx, req, res, false);
}

static void handle_health(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	(void)ctx;
	(void)req;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "status", "ok");
	srd_respond_json(res, 200, j);
}

typedef void (*handler)(srd_ctx *ctx, const srd_request *req, srd_response *res);

bool srd_e2b_match(const char *pattern, const char *path, srd_request *req)
{
	/* "/a/{id}/b": {id} takes one segment (no '/'), into req->params; a
	 * trailing slash on the path is fine. Not routes.c's: the server's
	 * unit test replaces srd_route, which lives there. */
	size_t np = 0;
	while (*pattern) {
		if (*pattern == '{') {
			const char *close = strchr(pattern, '}');
			size_t n = strcspn(path, "/");
			if (!close || n == 0 || n >= sizeof req->params[0] || np >= SRD_MAX_PARAMS)
				return false;
			memcpy(req->params[np], path, n);
			req->params[np++][n] = '\0';
			path += n;
			pattern = close + 1;
		} else if (*pattern++ != *path++) {
			return false;
		}
	}
	if (*path == '/')
		path++;
	if (*path)
		return false;
	req->n_params = np;
	return true;
}

static const struct {
	const char *method, *pattern;
	handler handler;
} control[] = {
	{ "POST", "/v2/sandboxes", handle_create },
	{ "POST", "/sandboxes", handle_create },
	{ "GET", "/v2/sandboxes", handle_list },
	{ "GET", "/sandboxes", handle_list },
	{ "GET", "/sandboxes/{id}", handle_get },
	{ "DELETE", "/sandboxes/{id}", handle_kill },
	{ "POST", "/sandboxes/{id}/timeout", handle_timeout },
	{ "POST", "/sandboxes/{id}/pause", handle_pause },
	{ "POST", "/v2/sandboxes/{id}/connect", handle_connect },
	{ "POST", "/sandboxes/{id}/connect", handle_connect },
	{ "POST", "/sandboxes/{id}/resume", handle_resume },
	{ "GET", "/health", handle_health },
};

static void route_control(srd_ctx *ctx, srd_request *req, srd_response *res)
{
	bool path_known = false;
	for (size_t i = 0; i < sizeof control / sizeof *control; i++) {
		if (!srd_e2b_match(control[i].pattern, req->path, req))
			continue;
		path_known = true;
		if (strcmp(control[i].method, req->method) == 0)
			return control[i].handler(ctx, req, res);
	}
	if (path_known)
		e2b_error(res, 405, "%s %s is not allowed here", req->method, req->path);
	else
		e2b_error(res, 404, "%s %s: no such E2B API route in saferun (docs/e2b.md)",
			  req->method, req->path);
}

/* ---- sandbox traffic --------------------------------------------------- */

static void sandbox_traffic(srd_ctx *ctx, srd_request *req, srd_response *res, const char *sid)
{
	srd_e2b_sandbox *sb = srd_e2b_find(sid, req->peer->tenant);
	if (!sb)
		return e2b_error(res, 502, "sandbox \"%.64s\" not found", sid);
	const char *port = srd_request_header(req, "E2b-Sandbox-Port");
	int p = port ? atoi(port) : 0;
	if (srd_e2b_paused(sb))
		e2b_error(res, 502,
			  "sandbox \"%s\" is paused: resume it (Sandbox.connect) to reach it",
			  sb->id);
	else if (p == SRD_E2B_PORT_JUPYTER)
		srd_e2b_jupyter(ctx, sb, req, res);
	else if (p == SRD_E2B_PORT_ENVD)
		srd_envd_handle(ctx, sb, req, res);
	else
		e2b_error(res, 502,
			  "port %.10s is not open in a saferun sandbox (only %d, the code "
			  "interpreter, and %d, envd)",
			  port ? port : "(none)", SRD_E2B_PORT_JUPYTER, SRD_E2B_PORT_ENVD);
	srd_e2b_release(sb);
}

void srd_e2b_route(srd_ctx *ctx, srd_request *req, srd_response *res)
{
	const char *sid = srd_request_header(req, "E2b-Sandbox-Id");
	if (sid)
		return sandbox_traffic(ctx, req, res, sid);
	route_control(ctx, req, res);
}

void srd_e2b_error(srd_response *res, unsigned status, const char *msg)
{
	e2b_error(res, status, "%s", msg);
}
