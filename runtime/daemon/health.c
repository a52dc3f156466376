/* The daemon's health (GET /health and MCP's get_health): one JSON
 * object for both front-ends. */
#include "health.h"

#include "sessions.h"
#include "warm_pools.h"

cJSON *srd_health_json(srd_ctx *ctx)
{
	unsigned running, waiting;
	srd_gate_counts(&ctx->gate, &running, &waiting);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "status", atomic_load(&ctx->draining) ? "draining" : "healthy");
	cJSON_AddStringToObject(j, "version", SR_VERSION);
	cJSON_AddNumberToObject(j, "uptime_s", (double)(srd_now_ms() - ctx->started_ms) / 1000.0);
	cJSON_AddNumberToObject(j, "runs_in_flight", running);
	cJSON_AddNumberToObject(j, "queue_depth", waiting);
	cJSON_AddNumberToObject(j, "max_concurrent_runs", ctx->gate.max_running);
	cJSON_AddNumberToObject(j, "queue_capacity", ctx->gate.max_waiting);
	cJSON_AddNumberToObject(j, "active_sessions", srd_sessions_count(ctx->sessions));
	cJSON *protocols = cJSON_AddArrayToObject(j, "protocols");
	cJSON_AddItemToArray(protocols, cJSON_CreateString("rest"));
	cJSON_AddItemToArray(protocols, cJSON_CreateString("mcp"));
	cJSON_AddItemToObject(j, "policies", srd_policies_names(ctx->policies));
	cJSON_AddStringToObject(j, "default_policy", ctx->cfg->default_policy);
	cJSON_AddItemToObject(j, "warm", srd_warm_json(ctx->warm));
	return j;
}
