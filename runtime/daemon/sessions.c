#include "sessions.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "log.h"
#include "node.h"
#include "run.h"

struct srd_session {
	char id[40]; /* [NODE-]16 hex (node.h) */
	char policy_name[128];
	sr_policy *policy;
	sr_workspace *ws;
	sr_deps_layer *layer; /* its requirements, installed at creation */
	sr_result deps;       /* what they were: deps only */
	bool stateful;
	sr_language language; /* a stateful session's, for all its runs */
	/* Taken by a run for its whole length: one interpreter, one run. */
	pthread_mutex_t run_lock;
	/* The kernel of the run in progress (and, stateful, between runs).
	 * Changed under run_lock + table lock; read under the table lock to
	 * kill it from srd_session_end. */
	sr_kernel *kernel;
	uint64_t created_ms, used_ms;
	unsigned runs;
	unsigned refs;            /* the table's own (while open) + each request's */
	const srd_tenant *tenant; /* its owner: no other tenant finds it */
	uint64_t max_age_ms;      /* session_max_age, or the tenant's if lower */
	bool ended;
	/* 0: closed when idle past session_ttl; else closed at this time
	 * (srd_now_ms), idle or not (an E2B sandbox's timeout). */
	uint64_t deadline_ms;
	/* called once, without locks, when it leaves the table */
	void (*on_close)(void *arg);
	void *on_close_arg;
	srd_session *next;
	srd_sessions *table;
};

/* Sessions being built at once (each holds a request thread). */
#define SRD_SESSIONS_BUILDING 256

struct srd_sessions {
	pthread_mutex_t lock;
	srd_session *head; /* oldest first */
	unsigned count;
	/* the tenants of the sessions being built: counted in their quota */
	const srd_tenant *builders[SRD_SESSIONS_BUILDING];
	size_t building;
	const srd_config *cfg;
};

int srd_sessions_open(const srd_config *cfg, srd_sessions **out, char *msg, size_t size)
{
	srd_sessions *s = calloc(1, sizeof *s);
	if (!s)
		return snprintf(msg, size, "out of memory"), -1;
	pthread_mutex_init(&s->lock, NULL);
	s->cfg = cfg;
	sr_error err = { 0 };
	int n = sr_workspace_cleanup_stale(cfg->workspaces_dir, &err);
	if (n < 0) {
		snprintf(msg, size, "workspaces_dir %s: %s", cfg->workspaces_dir, err.msg);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return -1;
	}
	if (n > 0)
		srd_log("warning", "cleanup", "removed %d session workspace%s left behind", n,
			n == 1 ? "" : "s");
	*out = s;
	return 0;
}

static void destroy(srd_session *ss)
{
	sr_kernel_stop(ss->kernel);
	sr_deps_layer_release(ss->layer);
	sr_result_free(&ss->deps);
	sr_workspace_destroy(ss->ws);
	sr_policy_free(ss->policy);
	pthread_mutex_destroy(&ss->run_lock);
	free(ss);
}

void srd_session_release(srd_session *ss)
{
	if (!ss)
		return;
	srd_sessions *s = ss->table;
	pthread_mutex_lock(&s->lock);
	bool last = --ss->refs == 0;
	pthread_mutex_unlock(&s->lock);
	if (last)
		destroy(ss);
}

/* Under the table lock: out of the list, its run (if any) killed. */
static void unlink_locked(srd_sessions *s, srd_session *ss, const char *why)
{
	for (srd_session **p = &s->head; *p; p = &(*p)->next)
		if (*p == ss) {
			*p = ss->next;
			break;
		}
	s->count--;
	ss->ended = true;
	sr_kernel_kill(ss->kernel);
	srd_log_tenant("info", "session", srd_tenant_log_name(ss->tenant),
		       "%s closed (%s) after %u run%s", ss->id, why, ss->runs,
		       ss->runs == 1 ? "" : "s");
}

/* After unlink_locked, without the lock: the owner's hook, once. */
static void notify_closed(srd_session *ss)
{
	srd_sessions *s = ss->table;
	pthread_mutex_lock(&s->lock);
	void (*fn)(void *) = ss->on_close;
	void *arg = ss->on_close_arg;
	ss->on_close = NULL;
	pthread_mutex_unlock(&s->lock);
	if (fn)
		fn(arg);
}

void srd_session_on_close(srd_session *ss, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&ss->table->lock);
	bool ended = ss->ended;
	if (!ended) {
		ss->on_close = fn;
		ss->on_close_arg = arg;
	}
	pthread_mutex_unlock(&ss->table->lock);
	if (ended && fn)
		fn(arg);
}

void srd_session_set_deadline(srd_session *ss, uint64_t deadline_ms)
{
	pthread_mutex_lock(&ss->table->lock);
	ss->deadline_ms = deadline_ms;
	pthread_mutex_unlock(&ss->table->lock);
}

uint64_t srd_session_deadline(srd_session *ss)
{
	pthread_mutex_lock(&ss->table->lock);
	uint64_t d = ss->deadline_ms;
	pthread_mutex_unlock(&ss->table->lock);
	return d;
}

uint64_t srd_session_max_end(const srd_session *ss)
{
	return ss->created_ms + ss->max_age_ms;
}

bool srd_session_ended(srd_session *ss)
{
	pthread_mutex_lock(&ss->table->lock);
	bool ended = ss->ended;
	pthread_mutex_unlock(&ss->table->lock);
	return ended;
}

const char *srd_session_policy_name(const srd_session *ss)
{
	return ss->policy_name;
}

void srd_session_kernel_options(srd_ctx *ctx, srd_session *ss, sr_kernel_options *ko)
{
	*ko = (sr_kernel_options){ .policy = ss->policy,
				   .rootfs_dir = ctx->cfg->rootfs_dir,
				   .workspace = ss->ws,
				   .deps_layer = sr_deps_layer_path(ss->layer),
				   .cgroup_share = srd_tenant_cgroup(ss->tenant) };
}

void srd_sessions_close(srd_sessions *s)
{
	if (!s)
		return;
	for (;;) {
		pthread_mutex_lock(&s->lock);
		srd_session *ss = s->head;
		if (ss)
			unlink_locked(s, ss, "shutdown");
		pthread_mutex_unlock(&s->lock);
		if (!ss)
			break;
		notify_closed(ss);
		srd_session_release(ss); /* the table's reference */
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
}

unsigned srd_sessions_count(srd_sessions *s)
{
	pthread_mutex_lock(&s->lock);
	unsigned n = s->count;
	pthread_mutex_unlock(&s->lock);
	return n;
}

void srd_sessions_count_by_tenant(srd_sessions *s, unsigned *counts, size_t n)
{
	memset(counts, 0, n * sizeof *counts);
	pthread_mutex_lock(&s->lock);
	for (srd_session *ss = s->head; ss; ss = ss->next)
		if (ss->tenant && ss->tenant->index < n)
			counts[ss->tenant->index]++;
	for (size_t i = 0; i < s->building; i++)
		if (s->builders[i] && s->builders[i]->index < n)
			counts[s->builders[i]->index]++;
	pthread_mutex_unlock(&s->lock);
}

void srd_sessions_reap(srd_sessions *s)
{
	uint64_t now = srd_now_ms();
	for (;;) {
		srd_session *found = NULL;
		const char *why = NULL;
		pthread_mutex_lock(&s->lock);
		for (srd_session *ss = s->head; ss && !found; ss = ss->next) {
			bool busy = ss->refs > 1; /* a request holds it */
			if (now - ss->created_ms > ss->max_age_ms)
				found = ss, why = "session_max_age";
			else if (ss->deadline_ms && now >= ss->deadline_ms)
				found = ss, why = "its timeout";
			else if (!ss->deadline_ms && !busy &&
				 now - ss->used_ms > s->cfg->session_ttl_ms)
				found = ss, why = "idle past session_ttl";
		}
		if (found)
			unlink_locked(s, found, why);
		pthread_mutex_unlock(&s->lock);
		if (!found)
			return;
		notify_closed(found);
		srd_session_release(found);
	}
}

cJSON *srd_sessions_ids(srd_sessions *s, const srd_tenant *tenant)
{
	cJSON *ids = cJSON_CreateArray();
	pthread_mutex_lock(&s->lock);
	for (srd_session *ss = s->head; ss; ss = ss->next)
		if (ss->tenant == tenant)
			cJSON_AddItemToArray(ids, cJSON_CreateString(ss->id));
	pthread_mutex_unlock(&s->lock);
	return ids;
}

srd_session *srd_session_find(srd_sessions *s, const srd_tenant *tenant, const char *id,
			      srd_ferr *e)
{
	srd_session *found = NULL;
	pthread_mutex_lock(&s->lock);
	/* Another tenant's session is not found, with the same words as one
	 * that never was: the answer must not tell that the id exists. */
	for (srd_session *ss = s->head; ss && !found; ss = ss->next)
		if (strcmp(ss->id, id) == 0 && ss->tenant == tenant) {
			found = ss;
			ss->refs++;
		}
	pthread_mutex_unlock(&s->lock);
	if (!found && !srd_node_not_ours(s->cfg->node_id, "Session", id, e))
		srd_fail(e, 404, NULL,
			 "Session %.64s not found (closed, expired, or never created)", id);
	return found;
}

int srd_session_end(srd_sessions *s, const srd_tenant *tenant, const char *id, srd_ferr *e)
{
	srd_session *ss = srd_session_find(s, tenant, id, e);
	if (!ss)
		return -1;
	pthread_mutex_lock(&s->lock);
	bool was_open = !ss->ended;
	if (was_open)
		unlink_locked(s, ss, "closed by request");
	pthread_mutex_unlock(&s->lock);
	if (was_open) {
		notify_closed(ss);
		srd_session_release(ss); /* the table's reference */
	}
	srd_session_release(ss);
	return was_open ? 0 : srd_fail(e, 404, NULL, "Session %.64s not found", id);
}

srd_session *srd_session_from_request(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	srd_ferr e = { 0 };
	srd_session *ss = srd_session_find(ctx->sessions, req->peer->tenant, req->params[0], &e);
	if (!ss) {
		srd_respond_error(res, &e);
		return NULL;
	}
	return ss;
}

void srd_session_touch(srd_session *ss)
{
	pthread_mutex_lock(&ss->table->lock);
	ss->used_ms = srd_now_ms();
	pthread_mutex_unlock(&ss->table->lock);
}

const srd_tenant *srd_session_tenant(const srd_session *ss)
{
	return ss->tenant;
}

const char *srd_session_id(const srd_session *ss)
{
	return ss->id;
}

const char *srd_session_workdir(const srd_session *ss)
{
	return ss->policy->workdir;
}

sr_workspace *srd_session_workspace(srd_session *ss)
{
	return ss->ws;
}

int srd_session_file_error(const sr_error *err, const char *field, srd_ferr *e)
{
	unsigned status;
	switch (err->errnum) {
	case ENOENT: status = 404; break;
	case ELOOP: status = 403; break;
	case EINVAL:
	case EISDIR:
	case ENOTDIR: status = 400; break;
	case EFBIG:
	case E2BIG: status = 413; break;
	case ENOSPC:
	case EDQUOT: status = 507; break;
	default: status = 500;
	}
	return srd_fail(e, status, field, "%s", err->msg);
}

static int write_files(srd_session *ss, const srd_run_opts *o, srd_ferr *e)
{
	for (size_t i = 0; i < o->n_files; i++) {
		sr_error err = { 0 };
		char field[32];
		snprintf(field, sizeof field, "files[%zu]", i);
		if (sr_workspace_write(ss->ws, o->files[i].name, o->files[i].data, o->files[i].size,
				       &err))
			return srd_session_file_error(&err, field, e);
	}
	return 0;
}

/* 16 hex digits from the kernel's CSPRNG: ids are not guessable, so one
 * client cannot reach another's session by counting. In a fleet the
 * node's id comes first: the router sends the session's requests to it. */
static int new_id(const srd_config *cfg, char *out, size_t size)
{
	return srd_node_new_id(cfg->node_id, 8, out, size);
}

static srd_session *new_session(srd_ctx *ctx, sr_policy *p, const char *name, srd_ferr *e)
{
	srd_session *ss = calloc(1, sizeof *ss);
	if (!ss || new_id(ctx->cfg, ss->id, sizeof ss->id) < 0) {
		free(ss);
		srd_fail(e, 500, NULL, "no memory or randomness for a session");
		return NULL;
	}
	snprintf(ss->policy_name, sizeof ss->policy_name, "%s", name);
	sr_error err = { 0 };
	if (sr_workspace_create(ctx->cfg->workspaces_dir, ss->id, p->limits.tmpfs_bytes, &ss->ws,
				&err)) {
		free(ss);
		srd_fail(e, 500, NULL, "the session's workspace could not be made: %s", err.msg);
		return NULL;
	}
	ss->policy = p;
	pthread_mutex_init(&ss->run_lock, NULL);
	ss->created_ms = ss->used_ms = srd_now_ms();
	return ss;
}

/* The session's requirements, once, for all its runs: the layer lives
 * with the session. pip runs in a sandbox: it takes a run slot. */
static int install_requirements(srd_ctx *ctx, srd_session *ss, const srd_run_opts *o,
				const srd_peer *peer, srd_ferr *e)
{
	if (!o->n_requirements)
		return 0;
	sr_run_request req = { .policy = ss->policy,
			       .rootfs_dir = ctx->cfg->rootfs_dir,
			       .requirements = o->requirements,
			       .n_requirements = o->n_requirements,
			       .cgroup_share = srd_tenant_cgroup(peer->tenant) };
	sr_result *r = &ss->deps;
	memset(r, 0, sizeof *r);
	snprintf(r->id, sizeof r->id, "ss-%s", ss->id);
	sr_error err = { 0 };
	if (srd_run_enter_gate(ctx, peer, e) != SRD_GATE_OK)
		return -1;
	sigset_t old;
	srd_unmask_signals(&old);
	int rc = sr_deps_prepare(&req, r, &ss->layer, &err);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	srd_run_leave_gate(ctx, peer);
	if (rc < 0)
		return srd_run_refused(&err, e);
	if (r->status != SR_STATUS_OK)
		return srd_fail(e, 422, "requirements", "%s", r->message);
	return 0;
}

/* Under the lock: the tenant's open sessions, and those it is building. */
static unsigned tenant_sessions_locked(srd_sessions *s, const srd_tenant *t)
{
	unsigned n = 0;
	for (srd_session *ss = s->head; ss; ss = ss->next)
		n += ss->tenant == t;
	for (size_t i = 0; i < s->building; i++)
		n += s->builders[i] == t;
	return n;
}

static void drop_builder_locked(srd_sessions *s, const srd_tenant *t)
{
	for (size_t i = 0; i < s->building; i++)
		if (s->builders[i] == t) {
			s->builders[i] = s->builders[--s->building];
			return;
		}
}

/* A place for one more session, the daemon's and the tenant's, held while
 * it is built (a workspace and requirements take a while). */
static int take_place(srd_sessions *s, const srd_tenant *t, srd_ferr *e)
{
	pthread_mutex_lock(&s->lock);
	bool full = s->count >= s->cfg->max_sessions || s->building >= SRD_SESSIONS_BUILDING;
	bool over = !full && tenant_sessions_locked(s, t) >= t->max_sessions;
	if (!full && !over) {
		s->count++;
		s->builders[s->building++] = t;
	}
	pthread_mutex_unlock(&s->lock);
	e->retry_after = 10;
	if (full)
		return srd_fail(e, 429, NULL,
				"%u sessions are open (max_sessions); close one or wait for "
				"idle ones to expire",
				(unsigned)s->cfg->max_sessions);
	if (over)
		return srd_fail(e, 429, NULL,
				"tenant \"%s\" has %u sessions open (its max_sessions quota); "
				"close one or wait for idle ones to expire",
				t->name, (unsigned)t->max_sessions);
	e->retry_after = 0;
	return 0;
}

/* A session's runs go through a kernel: Python's runner or runner.js. */
static int session_language(const srd_ctx *ctx, const sr_policy *p, const char *name, sr_language l,
			    srd_ferr *e)
{
	if (l == SR_LANG_BASH)
		return srd_fail(e, 400, "language",
				"\"language\": a session runs python or javascript; run bash "
				"one-shot (POST /v1/run)");
	return srd_run_check_language(ctx, p, name, l, e);
}

int srd_session_create(srd_ctx *ctx, const srd_run_opts *o, const srd_peer *peer, srd_session **out,
		       srd_ferr *e)
{
	const char *name = o->policy ? o->policy : ctx->cfg->default_policy;
	sr_policy *p = NULL;
	if (srd_node_refuse_draining(ctx, "sessions", e))
		return -1;
	if (srd_tenant_check_policy(peer->tenant, name, e) ||
	    srd_policies_get(ctx->policies, name, "policy", &p, e) ||
	    srd_run_opts_apply(o, p, name, e) || session_language(ctx, p, name, o->language, e)) {
		sr_policy_free(p);
		return -1;
	}
	srd_sessions *s = ctx->sessions;
	if (take_place(s, peer->tenant, e)) {
		sr_policy_free(p);
		return -1;
	}
	srd_session *ss = new_session(ctx, p, name, e);
	if (!ss) {
		sr_policy_free(p);
	} else if (write_files(ss, o, e) || install_requirements(ctx, ss, o, peer, e)) {
		destroy(ss); /* frees p too */
		ss = NULL;
	}
	pthread_mutex_lock(&s->lock);
	if (ss) {
		ss->stateful = o->stateful;
		ss->language = o->language;
		ss->tenant = peer->tenant;
		ss->max_age_ms = s->cfg->session_max_age_ms < peer->tenant->session_max_age_ms
				     ? s->cfg->session_max_age_ms
				     : peer->tenant->session_max_age_ms;
		ss->table = s;
		ss->refs = 2; /* the table's and the caller's */
		srd_session **tail = &s->head;
		while (*tail)
			tail = &(*tail)->next;
		*tail = ss;
	} else {
		s->count--;
	}
	drop_builder_locked(s, peer->tenant);
	pthread_mutex_unlock(&s->lock);
	if (!ss)
		return -1;
	cJSON *line = cJSON_CreateObject();
	cJSON_AddStringToObject(line, "session", ss->id);
	cJSON_AddItemToObject(line, "peer", srd_peer_json(peer));
	cJSON_AddStringToObject(line, "policy", name);
	cJSON_AddBoolToObject(line, "stateful", ss->stateful);
	cJSON_AddStringToObject(line, "language", sr_language_name(ss->language));
	srd_log_json("session", line);
	*out = ss;
	return 0;
}

/* A live kernel for this run: the stateful one (restarted if it died),
 * or a fresh one that ends with the run. */
static int ensure_kernel(srd_ctx *ctx, srd_session *ss, sr_language language, sr_error *err)
{
	if (ss->kernel && sr_kernel_alive(ss->kernel))
		return 0;
	sr_kernel_options ko = { .policy = ss->policy,
				 .rootfs_dir = ctx->cfg->rootfs_dir,
				 .workspace = ss->ws,
				 .deps_layer = sr_deps_layer_path(ss->layer),
				 .language = language,
				 .cgroup_share = srd_tenant_cgroup(ss->tenant) };
	sr_kernel *k = NULL;
	sigset_t old;
	srd_unmask_signals(&old);
	int rc = sr_kernel_start(&ko, &k, err);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	srd_sessions *s = ss->table;
	pthread_mutex_lock(&s->lock);
	sr_kernel *dead = ss->kernel;
	ss->kernel = rc == 0 ? k : NULL;
	if (ss->ended) /* closed while we started it */
		sr_kernel_kill(ss->kernel);
	pthread_mutex_unlock(&s->lock);
	sr_kernel_stop(dead);
	return rc;
}

static void drop_kernel(srd_session *ss)
{
	srd_sessions *s = ss->table;
	pthread_mutex_lock(&s->lock);
	sr_kernel *k = ss->kernel;
	ss->kernel = NULL;
	pthread_mutex_unlock(&s->lock);
	sr_kernel_stop(k);
}

static int run_in_kernel(srd_ctx *ctx, srd_session *ss, const sr_run_request *req, sr_result *res,
			 sr_error *err)
{
	int rc = -1;
	for (int attempt = 0; attempt < 2 && rc < 0; attempt++) {
		if (ensure_kernel(ctx, ss, req->language, err))
			return -1;
		rc = sr_kernel_run(ss->kernel, req, res, err);
		/* ESRCH: it had died between runs (say, an OOM kill of a
		 * thread left running): once more in a fresh one. */
		if (rc < 0 && err->errnum != ESRCH)
			return -1;
	}
	if (!ss->stateful) {
		drop_kernel(ss);
	} else if (rc == 0 && !sr_kernel_alive(ss->kernel)) {
		size_t len = strlen(res->message);
		snprintf(res->message + len, sizeof res->message - len,
			 "%sthe session's interpreter ended: its variables are gone (its files "
			 "stay)",
			 len ? "; " : "");
	}
	return rc;
}

int srd_session_run(srd_ctx *ctx, srd_session *ss, const srd_run_opts *o, const srd_peer *peer,
		    sr_result *res, srd_ferr *e)
{
	uint64_t t0 = srd_now_ms();
	/* The slot first: a request waiting for the session's lock holds one,
	 * so what waits on a session counts in max_concurrent_runs (and the
	 * queue) like any run. Always in this order: no lock-order cycle. */
	if (srd_run_enter_gate(ctx, peer, e) != SRD_GATE_OK)
		return -1;
	pthread_mutex_lock(&ss->run_lock);
	uint64_t t1 = srd_now_ms();
	int rc = -1;
	if (ss->ended) {
		srd_fail(e, 404, NULL, "Session %s was closed", ss->id);
		goto out;
	}
	sr_policy lowered = *ss->policy; /* only its limits are read */
	if (o->have_timeout && o->timeout_ms > lowered.limits.wall_ms) {
		srd_fail(e, 400, "timeout",
			 "\"timeout\": %g s is over the session's wall-time limit (%g s)",
			 (double)o->timeout_ms / 1000.0, (double)lowered.limits.wall_ms / 1000.0);
		goto out;
	}
	if (o->have_timeout)
		lowered.limits.wall_ms = o->timeout_ms;
	/* A stateful session's runs are in its language; a stateless one's
	 * kernel lives for one run, in the run's language. */
	sr_language language = o->have_language ? o->language : ss->language;
	if (ss->stateful && language != ss->language) {
		srd_fail(e, 400, "language",
			 "\"language\": session %s runs %s, not %s (start a session in that "
			 "language)",
			 ss->id, sr_language_name(ss->language), sr_language_name(language));
		goto out;
	}
	if (!ss->stateful && session_language(ctx, ss->policy, ss->policy_name, language, e))
		goto out;
	if (srd_tenant_check_allow(ss->tenant, ss->policy,
				   o->allow_field ? o->allow_field : "allow", o->allow, o->n_allow,
				   e) ||
	    write_files(ss, o, e))
		goto out;
	sr_run_request req = { .policy = &lowered,
			       .code = o->code,
			       .code_size = o->code_len,
			       .stdin_data = o->stdin_data,
			       .stdin_size = o->stdin_len,
			       .allow = o->allow,
			       .n_allow = o->n_allow,
			       .on_output = o->on_output,
			       .on_output_arg = o->on_output_arg,
			       .language = language };
	sr_error err = { 0 };
	rc = run_in_kernel(ctx, ss, &req, res, &err);
	if (rc < 0) {
		srd_run_refused(&err, e);
		goto out;
	}
	ss->runs++;
	srd_run_record(ctx, res, language, ss->policy_name, ss->id, peer, t1 - t0,
		       srd_now_ms() - t0, o->code_len);
out:
	ss->used_ms = srd_now_ms();
	pthread_mutex_unlock(&ss->run_lock);
	srd_run_leave_gate(ctx, peer);
	return rc;
}

cJSON *srd_session_json(srd_session *ss)
{
	uint64_t now = srd_now_ms(), used = 0, cap = 0;
	sr_error err = { 0 };
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "session_id", ss->id);
	cJSON_AddStringToObject(j, "policy", ss->policy_name);
	cJSON_AddBoolToObject(j, "stateful", ss->stateful);
	cJSON_AddStringToObject(j, "language", sr_language_name(ss->language));
	cJSON_AddNumberToObject(j, "created_s", (double)(now - ss->created_ms) / 1000.0);
	cJSON_AddNumberToObject(j, "idle_s", (double)(now - ss->used_ms) / 1000.0);
	cJSON_AddNumberToObject(j, "runs", ss->runs);
	cJSON_AddStringToObject(j, "workdir", ss->policy->workdir);
	if (ss->deps.deps.n_installed || ss->deps.deps.n_from_profile || ss->deps.deps.n_ignored) {
		/* the result's own form, without the rest of a result */
		char *text = sr_result_to_json(&ss->deps);
		cJSON *full = text ? cJSON_Parse(text) : NULL;
		cJSON *d = full ? cJSON_DetachItemFromObject(full, "dependencies") : NULL;
		if (d)
			cJSON_AddItemToObject(j, "dependencies", d);
		cJSON_Delete(full);
		free(text);
	}
	cJSON *disk = cJSON_AddObjectToObject(j, "disk");
	if (sr_workspace_usage(ss->ws, &used, &cap, &err) == 0) {
		cJSON_AddNumberToObject(disk, "used_bytes", (double)used);
		cJSON_AddNumberToObject(disk, "limit_bytes", (double)cap);
	}
	const sr_limits *l = &ss->policy->limits;
	cJSON *lim = cJSON_AddObjectToObject(j, "limits");
	cJSON_AddNumberToObject(lim, "wall_time_ms", (double)l->wall_ms);
	cJSON_AddNumberToObject(lim, "cpus", l->cpu_millis / 1000.0);
	cJSON_AddNumberToObject(lim, "memory_bytes", (double)l->memory_bytes);
	cJSON_AddNumberToObject(lim, "pids", l->pids);
	cJSON_AddNumberToObject(lim, "output_bytes", (double)l->output_bytes);
	return j;
}
