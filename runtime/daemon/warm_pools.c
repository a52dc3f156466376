#include "warm_pools.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct srd_warm_pool {
	char *policy;
	sr_warm *w; /* NULL: the policy is warm but runs cold, for cold_why */
	char *cold_why;
	unsigned languages; /* warm.languages: which languages have a pool in w */
	unsigned refs;
	bool retired; /* replaced by a reload: stopped when refs is 0 */
};

struct srd_warm {
	pthread_mutex_t mu;
	srd_warm_pool **v;
	size_t n;
	char *rootfs_dir;
};

static void pool_stop(srd_warm_pool *p)
{
	sr_warm_stop(p->w);
	free(p->policy);
	free(p->cold_why);
	free(p);
}

/* A warm policy's pool, or why it runs cold: an egress network (a forked
 * sandbox has only lo), a machine too small for a zygote (pool_size
 * "auto"), a zygote that could not be set up. */
static srd_warm_pool *start_pool(srd_warm *t, const char *name, const sr_policy *p)
{
	srd_warm_pool *pool = calloc(1, sizeof *pool);
	sr_error err = { 0 };
	if (!pool || !(pool->policy = strdup(name))) {
		free(pool);
		return NULL;
	}
	if (p->net_mode == SR_NET_EGRESS)
		snprintf(err.msg, sizeof err.msg,
			 "its network is egress, which only the cold path builds");
	else if (sr_warm_start(p, t->rootfs_dir, &pool->w, &err) == 0) {
		sr_warm_stats st;
		pool->languages = p->warm.languages;
		sr_warm_get_stats(pool->w, &st);
		srd_log("info", "warm",
			"policy %s: warm pool of %u starting (preload: %zu modules)%s",
			pool->policy, st.pool_size, p->warm.n_preload,
			st.js.enabled ? "; javascript: a pool of node sandboxes" : "");
		if (!st.js.enabled && st.js.last_error[0])
			srd_log("warning", "warm", "policy %s: javascript runs cold: %s",
				pool->policy, st.js.last_error);
		return pool;
	}
	srd_log("warning", "warm", "policy %s runs cold: %s", name, err.msg);
	if (!(pool->cold_why = strdup(err.msg))) {
		free(pool->policy);
		free(pool);
		return NULL;
	}
	return pool;
}

/* Pools for the warm policies of reg; a policy that cannot start one is
 * logged, listed with why, and runs cold. */
static void start_pools(srd_warm *t, srd_policies *reg, srd_warm_pool ***v, size_t *n)
{
	cJSON *names = srd_policies_names(reg), *name;
	*v = calloc((size_t)cJSON_GetArraySize(names) + 1, sizeof **v);
	*n = 0;
	cJSON_ArrayForEach(name, names)
	{
		sr_policy *p = NULL;
		srd_ferr e = { 0 };
		srd_warm_pool *pool;
		if (*v && srd_policies_get(reg, name->valuestring, "policy", &p, &e) == 0 &&
		    p->warm.enabled && (pool = start_pool(t, name->valuestring, p)))
			(*v)[(*n)++] = pool;
		sr_policy_free(p);
	}
	cJSON_Delete(names);
}

int srd_warm_open(srd_policies *reg, const char *rootfs_dir, srd_warm **out, char *msg, size_t size)
{
	srd_warm *t = calloc(1, sizeof *t);
	if (!t || (rootfs_dir && !(t->rootfs_dir = strdup(rootfs_dir)))) {
		free(t);
		return snprintf(msg, size, "warm pools: out of memory"), -1;
	}
	pthread_mutex_init(&t->mu, NULL);
	start_pools(t, reg, &t->v, &t->n);
	*out = t;
	return 0;
}

void srd_warm_reload(srd_warm *t, srd_policies *reg)
{
	srd_warm_pool **v, **old;
	size_t n, n_old;
	start_pools(t, reg, &v, &n);
	pthread_mutex_lock(&t->mu);
	old = t->v;
	n_old = t->n;
	t->v = v;
	t->n = n;
	size_t idle = 0;
	for (size_t i = 0; i < n_old; i++) {
		old[i]->retired = true;
		if (old[i]->refs == 0)
			old[idle++] = old[i];
	}
	pthread_mutex_unlock(&t->mu);
	for (size_t i = 0; i < idle; i++)
		pool_stop(old[i]);
	free(old);
}

srd_warm_pool *srd_warm_acquire(srd_warm *t, const char *policy)
{
	srd_warm_pool *found = NULL;
	if (!t)
		return NULL;
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < t->n && !found; i++)
		if (t->v[i]->w && strcmp(t->v[i]->policy, policy) == 0)
			found = t->v[i];
	if (found)
		found->refs++;
	pthread_mutex_unlock(&t->mu);
	return found;
}

sr_warm *srd_warm_pool_get(srd_warm_pool *p)
{
	return p->w;
}

void srd_warm_release(srd_warm *t, srd_warm_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&t->mu);
	bool stop = --p->refs == 0 && p->retired;
	pthread_mutex_unlock(&t->mu);
	if (stop)
		pool_stop(p);
}

/* "a,b" as ["a", "b"] */
static void add_names(cJSON *o, const char *key, char *names)
{
	cJSON *arr = cJSON_AddArrayToObject(o, key);
	for (char *save = NULL, *tok = strtok_r(names, ",", &save); arr && tok;
	     tok = strtok_r(NULL, ",", &save))
		cJSON_AddItemToArray(arr, cJSON_CreateString(tok));
}

/* The languages whose runs this pool serves warm (warm.languages). */
static void add_languages(cJSON *o, unsigned languages)
{
	cJSON *arr = cJSON_AddArrayToObject(o, "languages");
	for (int l = SR_LANG_PYTHON; arr && l <= SR_LANG_BASH; l++)
		if (languages & (1u << l))
			cJSON_AddItemToArray(arr,
					     cJSON_CreateString(sr_language_name((sr_language)l)));
}

/* The JavaScript pool (warm.languages): its counters, or why it has none. */
static void add_js(cJSON *o, const struct sr_warm_js_stats *js)
{
	if (!js->enabled && !js->last_error[0])
		return;
	cJSON *j = cJSON_AddObjectToObject(o, "javascript");
	if (!j)
		return;
	cJSON_AddBoolToObject(j, "up", js->enabled);
	cJSON_AddNumberToObject(j, "ready", js->ready);
	cJSON_AddNumberToObject(j, "pool_size", js->pool_size);
	cJSON_AddNumberToObject(j, "spawned", (double)js->spawned);
	cJSON_AddNumberToObject(j, "spawn_failures", (double)js->spawn_failures);
	cJSON_AddNumberToObject(j, "warm_runs", (double)js->warm_runs);
	if (js->last_error[0])
		cJSON_AddStringToObject(j, "last_error", js->last_error);
}

cJSON *srd_warm_json(srd_warm *t)
{
	cJSON *arr = cJSON_CreateArray();
	if (!t)
		return arr;
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < t->n; i++) {
		sr_warm_stats st = { 0 };
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "policy", t->v[i]->policy);
		if (!t->v[i]->w) {
			cJSON_AddBoolToObject(o, "zygote_up", false);
			cJSON_AddStringToObject(o, "cold_reason", t->v[i]->cold_why);
			cJSON_AddItemToArray(arr, o);
			continue;
		}
		sr_warm_get_stats(t->v[i]->w, &st);
		add_languages(o, t->v[i]->languages);
		cJSON_AddBoolToObject(o, "zygote_up", st.zygote_up);
		cJSON_AddNumberToObject(o, "ready", st.ready);
		cJSON_AddNumberToObject(o, "pool_size", st.pool_size);
		cJSON_AddNumberToObject(o, "zygote_starts", (double)st.zygote_starts);
		cJSON_AddNumberToObject(o, "spawned", (double)st.spawned);
		cJSON_AddNumberToObject(o, "spawn_failures", (double)st.spawn_failures);
		cJSON_AddNumberToObject(o, "warm_runs", (double)st.warm_runs);
		cJSON_AddNumberToObject(o, "cold_runs", (double)st.cold_runs);
		if (st.last_error[0])
			cJSON_AddStringToObject(o, "last_error", st.last_error);
		if (st.preload_skipped[0])
			add_names(o, "preload_skipped", st.preload_skipped);
		add_js(o, &st.js);
		cJSON_AddItemToArray(arr, o);
	}
	pthread_mutex_unlock(&t->mu);
	return arr;
}

void srd_warm_ready(srd_warm *t, unsigned ready[SR_LANG_BASH + 1])
{
	memset(ready, 0, (SR_LANG_BASH + 1) * sizeof *ready);
	if (!t)
		return;
	pthread_mutex_lock(&t->mu);
	for (size_t i = 0; i < t->n; i++) {
		sr_warm_stats st = { 0 };
		if (!t->v[i]->w)
			continue;
		sr_warm_get_stats(t->v[i]->w, &st);
		if (t->v[i]->languages & (1u << SR_LANG_PYTHON))
			ready[SR_LANG_PYTHON] += st.ready;
		if (st.js.enabled)
			ready[SR_LANG_JAVASCRIPT] += st.js.ready;
	}
	pthread_mutex_unlock(&t->mu);
}

void srd_warm_close(srd_warm *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++)
		pool_stop(t->v[i]); /* sr_warm_stop waits for runs in flight */
	free(t->v);
	free(t->rootfs_dir);
	pthread_mutex_destroy(&t->mu);
	free(t);
}
