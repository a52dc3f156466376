#include "routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health.h"
#include "mcp.h"
#include "node.h"
#include "packages.h"
#include "run.h"
#include "session_routes.h"
#include "tools.h"
#include "warm_pools.h"

extern const unsigned char srd_embedded_openapi[];
extern const size_t srd_embedded_openapi_len;

static void handle_health(srd_ctx *ctx, const srd_request *req, srd_response *res);
static void handle_metrics(srd_ctx *ctx, const srd_request *req, srd_response *res);
static void handle_openapi(srd_ctx *ctx, const srd_request *req, srd_response *res);
static void handle_root(srd_ctx *ctx, const srd_request *req, srd_response *res);
static void handle_packages(srd_ctx *ctx, const srd_request *req, srd_response *res);
static void handle_package_names(srd_ctx *ctx, const srd_request *req, srd_response *res);

static const srd_route_def routes[] = {
	{ "POST", "/v1/run", srd_handle_run },
	{ "GET", "/v1/health", handle_health },
	{ "GET", "/health", handle_health },
	{ "GET", "/v1/ready", srd_handle_ready },
	{ "GET", "/metrics", handle_metrics },
	{ "GET", "/v1/openapi.json", handle_openapi },
	{ "GET", "/", handle_root },
	{ "GET", "/v1/packages", handle_packages },
	{ "GET", "/v1/tools", srd_handle_tools },
	{ "GET", "/packages", handle_package_names },
	/* sessions and their files */
	{ "POST", "/v1/sessions", srd_handle_session_create },
	{ "GET", "/v1/sessions", srd_handle_session_list },
	{ "GET", "/v1/sessions/{id}", srd_handle_session_get },
	{ "DELETE", "/v1/sessions/{id}", srd_handle_session_delete },
	{ "POST", "/v1/sessions/{id}/run", srd_handle_session_run },
	{ "GET", "/v1/sessions/{id}/files", srd_handle_files_list },
	{ "GET", "/v1/sessions/{id}/files/{path*}", srd_handle_file_get },
	{ "PUT", "/v1/sessions/{id}/files/{path*}", srd_handle_file_put },
	{ "DELETE", "/v1/sessions/{id}/files/{path*}", srd_handle_file_delete },
	/* AgentRunPlus */
	{ "POST", "/sessions", srd_handle_arp_create },
	{ "GET", "/sessions", srd_handle_arp_list },
	{ "GET", "/sessions/{id}", srd_handle_arp_get },
	{ "DELETE", "/sessions/{id}", srd_handle_arp_delete },
	{ "POST", "/sessions/{id}/execute", srd_handle_arp_execute },
	{ "POST", "/sessions/{id}/copy-to", srd_handle_arp_copy_to },
	{ "POST", "/sessions/{id}/copy-from", srd_handle_arp_copy_from },
	{ "GET", "/sessions/{id}/artifacts", srd_handle_arp_artifacts },
	{ "GET", "/sessions/{id}/artifacts/{filename*}", srd_handle_arp_artifact_get },
	{ "GET", "/sessions/{id}/src", srd_handle_arp_src },
	/* MCP, Streamable HTTP (no GET: the server opens no stream) */
	{ "POST", "/mcp", srd_handle_mcp_post },
	{ "DELETE", "/mcp", srd_handle_mcp_delete },
};
#define N_ROUTES (sizeof routes / sizeof *routes)

/* A trailing "{name*}" (pend at its '}') takes the rest of the path,
 * slashes and all: at least one byte. */
static bool match_rest(const char *pend, const char *s, srd_request *req)
{
	size_t len = strlen(s);
	if (pend[1] || len == 0 || len >= sizeof req->rest)
		return false;
	if (req)
		memcpy(req->rest, s, len + 1);
	return true;
}

/* Segment by segment; a pattern's "{x}" takes one non-empty segment. */
bool srd_route_match(const char *pattern, const char *path, srd_request *req)
{
	size_t n_params = 0;
	const char *p = pattern, *s = path;
	if (req)
		req->rest[0] = '\0';
	while (*p && *s) {
		if (*p == '{') {
			const char *pend = strchr(p, '}'), *send = strchrnul(s, '/');
			if (pend && pend[-1] == '*') {
				if (!match_rest(pend, s, req))
					return false;
				p = s = "";
				break;
			}
			size_t len = (size_t)(send - s);
			if (!pend || len == 0 || len >= sizeof req->params[0] ||
			    n_params >= SRD_MAX_PARAMS)
				return false;
			if (req)
				snprintf(req->params[n_params], sizeof req->params[0], "%.*s",
					 (int)len, s);
			n_params++;
			p = pend + 1;
			s = send;
			continue;
		}
		if (*p++ != *s++)
			return false;
	}
	/* one trailing slash is allowed: "/v1/run/" */
	if (*p || (*s && strcmp(s, "/") != 0))
		return false;
	if (req)
		req->n_params = n_params;
	return true;
}

void srd_route(srd_ctx *ctx, srd_request *req, srd_response *res)
{
	char allow[64] = "";
	const char *path = req->raw_path ? req->raw_path : req->path;
	for (size_t i = 0; i < N_ROUTES; i++) {
		if (!srd_route_match(routes[i].pattern, path, NULL))
			continue;
		if (strcmp(routes[i].method, req->method) == 0) {
			srd_route_match(routes[i].pattern, path, req);
			routes[i].handler(ctx, req, res);
			return;
		}
		if (!strstr(allow, routes[i].method))
			snprintf(allow + strlen(allow), sizeof allow - strlen(allow), "%s%s",
				 allow[0] ? ", " : "", routes[i].method);
	}
	srd_ferr e = { 0 };
	if (allow[0]) {
		srd_fail(&e, 405, NULL, "%s is not allowed on %s (allowed: %s)", req->method,
			 req->path, allow);
		srd_respond_error(res, &e);
		snprintf(res->allow, sizeof res->allow, "%s%s", allow,
			 strstr(allow, "GET") ? ", HEAD" : "");
		return;
	}
	/* A capture ({id}) may be too long to match: say what is wrong. */
	if (strlen(req->path) > SR_WORKSPACE_PATH_MAX) {
		srd_fail(&e, 414, "path",
			 "the request path is %zu bytes; no route takes one over %d bytes",
			 strlen(req->path), SR_WORKSPACE_PATH_MAX);
		srd_respond_error(res, &e);
		return;
	}
	srd_fail(&e, 404, NULL, "no route %s %s (see GET /v1/openapi.json)", req->method,
		 req->path);
	srd_respond_error(res, &e);
}

static void handle_health(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	(void)req;
	/* A load balancer takes a draining daemon out of rotation. */
	srd_respond_json(res, atomic_load(&ctx->draining) ? 503 : 200, srd_health_json(ctx));
}

static void handle_metrics(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	(void)req;
	size_t len = 0;
	char *text = srd_metrics_render(&ctx->metrics, &ctx->gate, ctx->sessions, &len);
	if (!text) {
		srd_ferr e = { 0 };
		srd_fail(&e, 500, NULL, "could not render the metrics");
		srd_respond_error(res, &e);
		return;
	}
	srd_respond_text(res, 200, "text/plain; version=0.0.4; charset=utf-8", text, len);
}

static void handle_openapi(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	(void)ctx;
	(void)req;
	char *copy = malloc(srd_embedded_openapi_len);
	if (copy)
		memcpy(copy, srd_embedded_openapi, srd_embedded_openapi_len);
	srd_respond_text(res, copy ? 200 : 500, "application/json", copy,
			 copy ? srd_embedded_openapi_len : 0);
}

/* AgentRunPlus asks the root what this server is. */
static void handle_root(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	(void)ctx;
	(void)req;
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "service", "saferund");
	cJSON_AddStringToObject(j, "version", SR_VERSION);
	cJSON *endpoints = cJSON_AddArrayToObject(j, "endpoints");
	char line[160];
	for (size_t i = 0; i < N_ROUTES; i++) {
		snprintf(line, sizeof line, "%s %s", routes[i].method, routes[i].pattern);
		cJSON_AddItemToArray(endpoints, cJSON_CreateString(line));
	}
	cJSON_AddStringToObject(j, "docs", "/v1/openapi.json");
	srd_respond_json(res, 200, j);
}

static void respond_packages(srd_ctx *ctx, bool names_only, srd_response *res)
{
	srd_ferr e = { 0 };
	cJSON *j = srd_packages_json(ctx, names_only, &e);
	if (j)
		srd_respond_json(res, 200, j);
	else
		srd_respond_error(res, &e);
}

static void handle_packages(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	(void)req;
	respond_packages(ctx, false, res);
}

static void handle_package_names(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	(void)req;
	respond_packages(ctx, true, res);
}
