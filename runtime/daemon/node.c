#include "node.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "daemon.h"
#include "sessions.h"
#include "warm_pools.h"

static bool id_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

int srd_node_id_check(const char *id, char *msg, size_t size)
{
	size_t n = strlen(id);
	if (n == 0 || n > SRD_NODE_ID_MAX)
		return snprintf(msg, size, "\"%.40s\" is not 1 to %d characters long", id,
				SRD_NODE_ID_MAX),
		       -1;
	for (size_t i = 0; i < n; i++)
		if (!id_char(id[i]) && id[i] != '-')
			return snprintf(msg, size,
					"\"%s\" has '%c': use a-z, 0-9 and '-' (a session id "
					"is NODE-HEX, and routers match it in paths and headers)",
					id, id[i]),
			       -1;
	if (!id_char(id[0]) || !id_char(id[n - 1]))
		return snprintf(msg, size, "\"%s\" must start and end with a-z or 0-9", id), -1;
	return 0;
}

int srd_node_new_id(const char *node, size_t nbytes, char *out, size_t size)
{
	unsigned char b[32];
	size_t at = node ? strlen(node) + 1 : 0;
	if (nbytes > sizeof b || at + 2 * nbytes + 1 > size)
		return -1;
	if (getrandom(b, nbytes, 0) != (ssize_t)nbytes)
		return -1;
	if (node)
		snprintf(out, size, "%s-", node);
	for (size_t i = 0; i < nbytes; i++)
		snprintf(out + at + 2 * i, size - at - 2 * i, "%02x", b[i]);
	return 0;
}

/* An id is NODE-HEX: the node part is everything before the last '-'. */
const char *srd_node_other(const char *node, const char *id, size_t *len)
{
	const char *dash = node && id ? strrchr(id, '-') : NULL;
	if (!dash || dash == id)
		return NULL;
	*len = (size_t)(dash - id);
	if (*len == strlen(node) && memcmp(id, node, *len) == 0)
		return NULL;
	return id;
}

bool srd_node_not_ours(const char *node, const char *what, const char *id, srd_ferr *e)
{
	size_t len;
	const char *other = srd_node_other(node, id, &len);
	if (!other || len > 64)
		return false;
	srd_fail(e, 404, NULL,
		 "%s %.64s is held by node %.*s, not this node (%s): send its requests through "
		 "the router; if node %.*s is gone, so is the session",
		 what, id, (int)len, other, node, (int)len, other);
	return true;
}

bool srd_node_refuse_draining(srd_ctx *ctx, const char *what, srd_ferr *e)
{
	if (!atomic_load(&ctx->draining))
		return false;
	const char *node = ctx->cfg->node_id;
	srd_fail(e, 503, NULL,
		 "node %s is draining: it takes no new %s (its open sessions go on until it "
		 "stops); another node takes them through the router",
		 node ? node : "(this saferund)", what);
	e->retry_after = 5;
	return true;
}

/* warm_ready: every language's pools (a router that sends JavaScript runs
 * wants to know about node sandboxes as much as Python's forks). */
static void add_warm_ready(cJSON *j, srd_ctx *ctx)
{
	unsigned ready[SR_LANG_BASH + 1];
	srd_warm_ready(ctx->warm, ready);
	cJSON_AddNumberToObject(j, "warm_ready", ready[SR_LANG_PYTHON] + ready[SR_LANG_JAVASCRIPT]);
	cJSON *by = cJSON_AddObjectToObject(j, "warm_ready_by_language");
	for (int l = SR_LANG_PYTHON; by && l < SR_LANG_BASH; l++)
		cJSON_AddNumberToObject(by, sr_language_name((sr_language)l), ready[l]);
}

/* Ready unless draining, or full: every slot busy and the queue too, so a
 * new run would get 429. A busy node with room in its queue stays in:
 * the router's least-connections choice already prefers idler ones. */
void srd_handle_ready(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	(void)req;
	unsigned running, waiting, max_run = ctx->gate.max_running,
				   max_wait = ctx->gate.max_waiting;
	srd_gate_counts(&ctx->gate, &running, &waiting);
	bool draining = atomic_load(&ctx->draining);
	bool full = running >= max_run && waiting >= max_wait;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "status", draining ? "draining" : full ? "full" : "ready");
	if (ctx->cfg->node_id)
		cJSON_AddStringToObject(j, "node", ctx->cfg->node_id);
	else
		cJSON_AddNullToObject(j, "node");
	cJSON_AddNumberToObject(j, "runs_in_flight", running);
	cJSON_AddNumberToObject(j, "queued", waiting);
	cJSON_AddNumberToObject(j, "free_slots", running < max_run ? max_run - running : 0);
	cJSON_AddNumberToObject(j, "max_concurrent_runs", max_run);
	cJSON_AddNumberToObject(j, "queue_capacity", max_wait);
	cJSON_AddNumberToObject(j, "sessions", srd_sessions_count(ctx->sessions));
	cJSON_AddNumberToObject(j, "max_sessions", (double)ctx->cfg->max_sessions);
	add_warm_ready(j, ctx);
	srd_respond_json(res, draining || full ? 503 : 200, j);
	if (draining || full)
		res->retry_after = draining ? 5 : 1;
}
