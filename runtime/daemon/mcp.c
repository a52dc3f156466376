/* MCP: the JSON-RPC layer both transports share, and the Streamable HTTP
 * transport at /mcp. */
#include "mcp.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"
#include "mcp_tools.h"
#include "node.h"
#include "run_stream.h"

static const char *const versions[] = { SRD_MCP_VERSION, "2025-06-18", "2025-03-26", "2024-11-05",
					NULL };

static const char instructions[] =
    "saferun runs Python 3 in a fresh, isolated Linux sandbox: no network, a read-only "
    "system, limits on time, memory, processes and output, and a checker that refuses "
    "dangerous code (process execution, native code, reflection escapes) before it runs. "
    "Use run_python for one-off code and check_python to vet code without running it. "
    "For work that spans several steps (files, state), create_session, upload_file into "
    "its src/, execute_code, and download_file what the code wrote to artifacts/.";

static bool supported(const char *v)
{
	for (size_t i = 0; versions[i]; i++)
		if (strcmp(v, versions[i]) == 0)
			return true;
	return false;
}

cJSON *srd_mcp_error(const cJSON *id, int code, const char *fmt, ...)
{
	char msg[600];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cJSON *j = cJSON_CreateObject(), *err = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "jsonrpc", "2.0");
	cJSON_AddItemToObject(j, "id", id ? cJSON_Duplicate(id, true) : cJSON_CreateNull());
	cJSON_AddNumberToObject(err, "code", code);
	cJSON_AddStringToObject(err, "message", msg);
	cJSON_AddItemToObject(j, "error", err);
	return j;
}

static cJSON *result(const cJSON *id, cJSON *res)
{
	cJSON *j = cJSON_CreateObject();
	cJSON_AddStringToObject(j, "jsonrpc", "2.0");
	cJSON_AddItemToObject(j, "id", cJSON_Duplicate(id, true));
	cJSON_AddItemToObject(j, "result", res);
	return j;
}

/* A usable id: a string or an integer (MCP forbids null). */
static bool id_ok(const cJSON *id)
{
	return cJSON_IsString(id) || srd_json_is_integer(id);
}

static int refuse(srd_mcp_reply *out, const cJSON *id, int code, const char *why)
{
	out->status = 400;
	out->body = srd_mcp_error(id, code, "%s", why);
	return -1;
}

int srd_mcp_parse(const char *text, size_t len, cJSON **msg, srd_mcp_reply *out)
{
	*out = (srd_mcp_reply){ .status = 200 };
	*msg = NULL;
	srd_ferr e = { 0 };
	if (text && srd_json_text_check(text, len, &e)) {
		char why[600];
		snprintf(why, sizeof why, "Parse error: %s", e.msg);
		return refuse(out, NULL, SRD_RPC_PARSE_ERROR, why);
	}
	const char *end = NULL;
	cJSON *j = text ? cJSON_ParseWithLengthOpts(text, len, &end, false) : NULL;
	if (!j)
		return refuse(out, NULL, SRD_RPC_PARSE_ERROR, "Parse error: the body is not JSON");
	for (; end && end < text + len && strchr(" \t\r\n", *end); end++)
		;
	if (end && end < text + len && *end) {
		cJSON_Delete(j);
		return refuse(out, NULL, SRD_RPC_PARSE_ERROR,
			      "Parse error: more than one JSON value in the body");
	}
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id");
	const cJSON *method = cJSON_GetObjectItemCaseSensitive(j, "method");
	const cJSON *version = cJSON_GetObjectItemCaseSensitive(j, "jsonrpc");
	const char *why = NULL;
	if (cJSON_IsArray(j))
		why = "Invalid Request: batches are not supported; send one message per request";
	else if (!cJSON_IsObject(j))
		why = "Invalid Request: a JSON-RPC message is an object";
	else if (!cJSON_IsString(version) || strcmp(version->valuestring, "2.0") != 0)
		why = "Invalid Request: \"jsonrpc\" must be \"2.0\"";
	else if (id && !id_ok(id))
		why = "Invalid Request: \"id\" must be a string or an integer";
	else if (method && !cJSON_IsString(method))
		why = "Invalid Request: \"method\" must be a string";
	else if (!method && (!id || (!cJSON_GetObjectItemCaseSensitive(j, "result") &&
				     !cJSON_GetObjectItemCaseSensitive(j, "error"))))
		why = "Invalid Request: a message needs a \"method\" (or is a response with "
		      "\"id\" and \"result\" or \"error\")";
	if (why) {
		refuse(out, id && id_ok(id) ? id : NULL, SRD_RPC_INVALID_REQUEST, why);
		cJSON_Delete(j);
		return -1;
	}
	*msg = j;
	return 0;
}

bool srd_mcp_is_initialize(const cJSON *msg)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(msg, "method");
	return cJSON_IsString(m) && strcmp(m->valuestring, "initialize") == 0 &&
	       cJSON_GetObjectItemCaseSensitive(msg, "id");
}

static cJSON *initialize(const cJSON *id, const cJSON *params, srd_mcp_reply *out)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
	if (!cJSON_IsObject(params) || !cJSON_IsString(v))
		return srd_mcp_error(id, SRD_RPC_INVALID_PARAMS,
				     "Invalid params: initialize needs params.protocolVersion "
				     "(a string, e.g. \"%s\")",
				     SRD_MCP_VERSION);
	/* The client's version if we speak it, else ours: it may disconnect. */
	snprintf(out->version, sizeof out->version, "%s",
		 supported(v->valuestring) ? v->valuestring : SRD_MCP_VERSION);
	out->initialize = true;
	cJSON *r = cJSON_CreateObject(), *caps = cJSON_AddObjectToObject(r, "capabilities");
	cJSON_AddStringToObject(r, "protocolVersion", out->version);
	cJSON_AddBoolToObject(cJSON_AddObjectToObject(caps, "tools"), "listChanged", false);
	cJSON *info = cJSON_AddObjectToObject(r, "serverInfo");
	cJSON_AddStringToObject(info, "name", "saferun");
	cJSON_AddStringToObject(info, "title", "saferun Python sandbox");
	cJSON_AddStringToObject(info, "version", SR_VERSION);
	cJSON_AddStringToObject(r, "instructions", instructions);
	return result(id, r);
}

/* notifications/progress for a tools/call's output (run_stream.h turns
 * the bytes into text as the result shows it). */
struct progress {
	const srd_mcp_call *call;
	const cJSON *token;
	double sent; /* bytes of text so far: the progress value, rising */
	bool gone;
	srd_utf8_carry carry[2];
};

static void progress_send(struct progress *p, int stream, const char *data, size_t len, bool last)
{
	size_t n;
	char *text = srd_utf8_piece(&p->carry[stream == 2], data, len, last, &n);
	if (text && n && !p->gone) {
		p->sent += (double)n;
		cJSON *msg = cJSON_CreateObject(), *params;
		cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
		cJSON_AddStringToObject(msg, "method", "notifications/progress");
		cJSON_AddItemToObject(msg, "params", params = cJSON_CreateObject());
		cJSON_AddItemToObject(params, "progressToken", cJSON_Duplicate(p->token, true));
		cJSON_AddNumberToObject(params, "progress", p->sent);
		cJSON_AddStringToObject(params, "message", text);
		if (p->call->notify(p->call->notify_arg, msg) < 0)
			p->gone = true;
	}
	free(text);
}

static void progress_output(void *arg, int stream, const char *data, size_t len)
{
	progress_send(arg, stream, data, len, false);
}

/* params._meta.progressToken: a string or an integer, else NULL. */
static const cJSON *progress_token(const cJSON *params)
{
	const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(meta, "progressToken");
	return t && id_ok(t) ? t : NULL;
}

static cJSON *tools_call(srd_ctx *ctx, const cJSON *id, const cJSON *params, const srd_peer *peer,
			 const srd_mcp_call *call)
{
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
	if (!cJSON_IsObject(params) || !cJSON_IsString(name))
		return srd_mcp_error(id, SRD_RPC_INVALID_PARAMS,
				     "Invalid params: tools/call needs params.name (a tool's name; "
				     "see tools/list)");
	if (args && !cJSON_IsNull(args) && !cJSON_IsObject(args))
		return srd_mcp_error(id, SRD_RPC_INVALID_PARAMS,
				     "Invalid params: params.arguments must be an object, not %s",
				     srd_json_kind(args));
	srd_ferr e = { 0 };
	cJSON *res = NULL;
	struct progress p = { .call = call, .token = call->notify ? progress_token(params) : NULL };
	int rc =
	    srd_mcp_tool_call_output(ctx, name->valuestring, cJSON_IsObject(args) ? args : NULL,
				     peer, p.token ? progress_output : NULL, &p, &res, &e);
	for (int i = 0; i < 2 && p.token; i++) /* what waited for a UTF-8 sequence's end */
		if (p.carry[i].n)
			progress_send(&p, i + 1, "", 0, true);
	/* From 2025-11-25 on, arguments a tool refuses are the tool's error,
	 * for the model to read and correct; an unknown tool stays a
	 * protocol error. */
	bool unknown = strcmp(e.field, "name") == 0 && strncmp(e.msg, "Unknown tool", 12) == 0;
	if (rc && !unknown &&
	    strcmp(call->version ? call->version : SRD_MCP_VERSION, "2025-11-25") >= 0) {
		res = cJSON_CreateObject();
		cJSON *content = cJSON_AddArrayToObject(res, "content"), *t = cJSON_CreateObject();
		cJSON_AddStringToObject(t, "type", "text");
		cJSON_AddStringToObject(t, "text", e.msg);
		cJSON_AddItemToArray(content, t);
		cJSON_AddBoolToObject(res, "isError", true);
		return result(id, res);
	}
	if (rc)
		return srd_mcp_error(id, SRD_RPC_INVALID_PARAMS, "Invalid params: %s", e.msg);
	return result(id, res);
}

void srd_mcp_dispatch(srd_ctx *ctx, const cJSON *msg, const srd_peer *peer, srd_mcp_reply *out)
{
	srd_mcp_call none = { 0 };
	srd_mcp_dispatch_call(ctx, msg, peer, &none, out);
}

void srd_mcp_dispatch_call(srd_ctx *ctx, const cJSON *msg, const srd_peer *peer,
			   const srd_mcp_call *call, srd_mcp_reply *out)
{
	*out = (srd_mcp_reply){ .status = 200 };
	const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(msg, "method");
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
	if (!m || !id) {
		/* A response, or a notification (initialized, cancelled, ...):
		 * nothing to answer. A cancelled run still ends on its own. */
		out->status = 202;
		return;
	}
	const char *method = m->valuestring;
	if (strcmp(method, "initialize") == 0)
		out->body = initialize(id, params, out);
	else if (strcmp(method, "ping") == 0)
		out->body = result(id, cJSON_CreateObject());
	else if (strcmp(method, "tools/list") == 0) {
		cJSON *r = cJSON_CreateObject();
		cJSON_AddItemToObject(r, "tools", srd_mcp_tools_list());
		out->body = result(id, r);
	} else if (strcmp(method, "tools/call") == 0)
		out->body = tools_call(ctx, id, params, peer, call);
	else
		out->body = srd_mcp_error(id, SRD_RPC_METHOD_NOT_FOUND,
					  "Method not found: %.100s (this server has initialize, "
					  "ping, tools/list and tools/call)",
					  method);
}

/* ---- the Streamable HTTP transport ---------------------------------------- */

/* MCP sessions are small (an id, a version, a time): many may be open;
 * past the cap the least recently used goes, and idle ones expire. */
#define MAX_SESSIONS    4096
#define SESSION_IDLE_MS (24ull * 3600 * 1000)

struct mcp_session {
	char id[64]; /* [NODE-]32 hex (node.h) */
	char version[16];
	uint64_t used_ms;
	const struct srd_tenant *tenant; /* the client's: only it may use the id */
};

struct srd_mcp {
	pthread_mutex_t lock;
	struct mcp_session *s;
	size_t n;
};

int srd_mcp_open(srd_mcp **out)
{
	srd_mcp *m = calloc(1, sizeof *m);
	if (!m || !(m->s = calloc(MAX_SESSIONS, sizeof *m->s))) {
		free(m);
		return -1;
	}
	pthread_mutex_init(&m->lock, NULL);
	*out = m;
	return 0;
}

void srd_mcp_close(srd_mcp *m)
{
	if (!m)
		return;
	pthread_mutex_destroy(&m->lock);
	free(m->s);
	free(m);
}

static void drop_locked(srd_mcp *m, size_t i)
{
	m->s[i] = m->s[--m->n];
}

/* In a fleet the id starts with the node's: the router sends the
 * session's requests (its Mcp-Session-Id header) to this node. */
static int session_new(srd_mcp *m, const char *node, const char *version,
		       const struct srd_tenant *tenant, char id[64])
{
	if (srd_node_new_id(node, 16, id, 64) < 0)
		return -1;
	pthread_mutex_lock(&m->lock);
	if (m->n == MAX_SESSIONS) {
		size_t lru = 0;
		for (size_t i = 1; i < m->n; i++)
			if (m->s[i].used_ms < m->s[lru].used_ms)
				lru = i;
		drop_locked(m, lru);
	}
	struct mcp_session *s = &m->s[m->n++];
	snprintf(s->id, sizeof s->id, "%s", id);
	snprintf(s->version, sizeof s->version, "%s", version);
	s->used_ms = srd_now_ms();
	s->tenant = tenant;
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/* Find (and touch) tenant's id; remove it too when end. Expired ones go.
 * version (16 bytes, or NULL) gets the version it agreed. */
static bool session_use(srd_mcp *m, const char *id, const struct srd_tenant *tenant, bool end,
			char *version)
{
	bool found = false;
	pthread_mutex_lock(&m->lock);
	/* Under the lock: a session made after an earlier reading of the
	 * clock would look (unsigned) ages old, and be dropped as expired. */
	uint64_t now = srd_now_ms();
	for (size_t i = 0; i < m->n;) {
		if (now - m->s[i].used_ms > SESSION_IDLE_MS) {
			drop_locked(m, i);
			continue;
		}
		if (strcmp(m->s[i].id, id) == 0 && m->s[i].tenant == tenant) {
			found = true;
			m->s[i].used_ms = now;
			if (version)
				memcpy(version, m->s[i].version, sizeof m->s[i].version);
			if (end) {
				drop_locked(m, i);
				continue;
			}
		}
		i++;
	}
	pthread_mutex_unlock(&m->lock);
	return found;
}

static bool has_token(const char *header, const char *token)
{
	if (!header)
		return false;
	size_t n = strlen(token);
	for (const char *p = header; (p = strcasestr(p, token)); p += n)
		if ((p == header || strchr(" ,\t", p[-1])) && strchr(" ,;\t", p[n] ? p[n] : ' '))
			return true;
	return false;
}

/* DNS rebinding: a web page must not reach a local server through its
 * browser. Requests without Origin (every non-browser client) pass. */
static bool origin_ok(const char *origin)
{
	static const char *const hosts[] = { "localhost", "127.0.0.1", "[::1]", NULL };
	if (!origin)
		return true;
	const char *host = strstr(origin, "://");
	if (!host || (strncmp(origin, "http://", 7) != 0 && strncmp(origin, "https://", 8) != 0))
		return false;
	host += 3;
	for (size_t i = 0; hosts[i]; i++) {
		size_t n = strlen(hosts[i]);
		if (strncasecmp(host, hosts[i], n) == 0 && (!host[n] || host[n] == ':'))
			return strspn(host + n + (host[n] == ':'), "0123456789") ==
			       strlen(host + n + (host[n] == ':'));
	}
	return false;
}

static void respond_rpc(srd_response *res, unsigned status, cJSON *body, bool sse)
{
	if (!sse || !body) {
		srd_respond_json(res, status, body);
		return;
	}
	char *json = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	size_t len = json ? strlen(json) : 0;
	char *event = json ? malloc(len + 32) : NULL;
	if (!event) {
		free(json);
		srd_respond_json(res, 500, NULL);
		return;
	}
	int n = snprintf(event, len + 32, "event: message\ndata: %s\n\n", json);
	free(json);
	srd_respond_text(res, status, "text/event-stream", event, (size_t)n);
}

/* A POST's answer as a stream of SSE events, begun by the first
 * notification: notifications, then the response. */
struct http_notify {
	srd_response *res;
	bool started, gone;
};

static int sse_event(struct http_notify *hn, cJSON *msg)
{
	char *json = msg ? cJSON_PrintUnformatted(msg) : NULL;
	cJSON_Delete(msg);
	char *event = json ? malloc(strlen(json) + 32) : NULL;
	if (event && !hn->gone) {
		int n = sprintf(event, "event: message\ndata: %s\n\n", json);
		hn->gone = srd_respond_chunk(hn->res, event, (size_t)n) < 0;
	}
	free(event);
	free(json);
	return hn->gone ? -1 : 0;
}

static int http_notify(void *arg, cJSON *msg)
{
	struct http_notify *hn = arg;
	if (!hn->started) {
		hn->started = true;
		hn->gone = srd_respond_stream(hn->res, 200, "text/event-stream") < 0;
	}
	return sse_event(hn, msg);
}

static void refuse_http(srd_response *res, unsigned status, int code, const char *msg)
{
	respond_rpc(res, status, srd_mcp_error(NULL, code, "%s", msg), false);
}

/* Origin, then the session header where one is needed: 0 to go on.
 * version (16 bytes, or NULL): the session's agreed version. */
static int check_request(srd_ctx *ctx, const srd_request *req, srd_response *res, bool need,
			 bool end, char *version)
{
	if (!origin_ok(srd_request_header(req, "Origin"))) {
		refuse_http(res, 403, SRD_RPC_INVALID_REQUEST,
			    "Forbidden: the Origin header is not a loopback origin "
			    "(DNS rebinding protection)");
		return -1;
	}
	const char *v = srd_request_header(req, "MCP-Protocol-Version");
	if (v && !supported(v)) {
		char msg[200];
		snprintf(msg, sizeof msg,
			 "Bad Request: unsupported MCP-Protocol-Version \"%.40s\" (supported: "
			 "%s, %s, %s, %s)",
			 v, versions[0], versions[1], versions[2], versions[3]);
		refuse_http(res, 400, SRD_RPC_INVALID_REQUEST, msg);
		return -1;
	}
	if (!need)
		return 0;
	const char *sid = srd_request_header(req, "Mcp-Session-Id");
	if (!sid || !*sid) {
		refuse_http(res, 400, SRD_RPC_INVALID_REQUEST,
			    "Bad Request: the Mcp-Session-Id header is required (send "
			    "initialize first; its answer has the id)");
		return -1;
	}
	srd_ferr other = { 0 };
	if (!session_use(ctx->mcp, sid, req->peer->tenant, end, version)) {
		refuse_http(res, 404, SRD_RPC_SESSION_NOT_FOUND,
			    srd_node_not_ours(ctx->cfg->node_id, "MCP session", sid, &other)
				? other.msg
				: "Session not found: it ended or expired; initialize again");
		return -1;
	}
	return 0;
}

void srd_handle_mcp_post(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	const char *accept = srd_request_header(req, "Accept");
	bool sse = has_token(accept, "text/event-stream");
	if (accept && !sse && !has_token(accept, "application/json") && !has_token(accept, "*/*") &&
	    !has_token(accept, "application/*")) {
		refuse_http(res, 406, SRD_RPC_INVALID_REQUEST,
			    "Not Acceptable: the client must accept application/json or "
			    "text/event-stream");
		return;
	}
	const char *type = req->content_type;
	if (!type || strncasecmp(type, "application/json", 16) != 0 ||
	    (type[16] && type[16] != ';' && type[16] != ' ')) {
		refuse_http(res, 415, SRD_RPC_INVALID_REQUEST,
			    "Unsupported Media Type: the body must be application/json");
		return;
	}
	cJSON *msg = NULL;
	srd_mcp_reply out;
	if (srd_mcp_parse(req->body, req->body_len, &msg, &out)) {
		if (check_request(ctx, req, res, false, false, NULL) == 0)
			respond_rpc(res, out.status, out.body, false);
		else
			cJSON_Delete(out.body);
		return;
	}
	bool init = srd_mcp_is_initialize(msg);
	char version[16] = "";
	srd_ferr drain = { 0 };
	if (init && srd_node_refuse_draining(ctx, "MCP sessions", &drain)) {
		refuse_http(res, 503, SRD_RPC_INTERNAL, drain.msg);
		res->retry_after = drain.retry_after;
	} else if (check_request(ctx, req, res, !init, false, version) == 0) {
		/* Progress goes out as SSE events before the answer, for a
		 * client that takes text/event-stream. */
		struct http_notify hn = { .res = res };
		srd_mcp_call call = { .version = version[0] ? version : NULL,
				      .notify = sse ? http_notify : NULL,
				      .notify_arg = &hn };
		srd_mcp_dispatch_call(ctx, msg, req->peer, &call, &out);
		char id[64];
		if (out.initialize && session_new(ctx->mcp, ctx->cfg->node_id, out.version,
						  req->peer->tenant, id) == 0)
			srd_respond_header(res, "Mcp-Session-Id", id);
		else if (out.initialize) {
			cJSON_Delete(out.body);
			out.body =
			    srd_mcp_error(NULL, SRD_RPC_INTERNAL, "no random bytes for an id");
			out.status = 500;
		}
		if (out.status == 202)
			srd_respond_text(res, 202, "application/json", NULL, 0);
		else if (hn.started)
			sse_event(&hn, out.body); /* the stream ends with the answer */
		else
			respond_rpc(res, out.status, out.body, sse);
	}
	cJSON_Delete(msg);
}

void srd_handle_mcp_delete(srd_ctx *ctx, const srd_request *req, srd_response *res)
{
	if (check_request(ctx, req, res, true, true, NULL) == 0)
		srd_respond_text(res, 200, "application/json", NULL, 0);
}
