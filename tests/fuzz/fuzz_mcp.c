/* libFuzzer harness for MCP over Streamable HTTP as saferund handles a
 * POST /mcp after libmicrohttpd: the Accept, Content-Type, Origin,
 * MCP-Protocol-Version and Mcp-Session-Id headers, the JSON-RPC message
 * (srd_mcp_parse), its dispatch (initialize, ping, tools/list,
 * tools/call) and each tool's arguments against its schema. The tools
 * that would start a sandbox, create a session or run the checker's
 * child (run_*, create_session, check_python, get_health, get_packages)
 * get their arguments checked and, for run_*, parsed as a run's fields
 * (srd_run_opts_parse), and go no further; the session tools run against
 * an empty session store (no such session). Input: header lines
 * "Name: value\n", an empty line, the body; "Mcp-Session-Id: @" stands
 * for the id of the newest session (the harness opens one first). Invariants: a status MCP
 * allows, a JSON body (or SSE events of JSON), JSON-RPC 2.0 answers.
 * mcp_tools.c is included for its tool table. Build: tests/CMakeLists.txt. */
#include "../../runtime/daemon/mcp_tools.c"

#include <stdio.h>
#include <unistd.h>

#include "../../runtime/daemon/mcp.h"
#include "../../runtime/daemon/run_opts.h"
#include "../../runtime/daemon/sessions.h"

static void expect(int ok)
{
	if (!ok)
		__builtin_trap();
}

#define MAX_HEADERS 8

struct fuzz_req {
	srd_request req;
	const char *names[MAX_HEADERS], *values[MAX_HEADERS];
	size_t n;
};

static const char *header(const srd_request *req, const char *name)
{
	const struct fuzz_req *f = (const struct fuzz_req *)req;
	for (size_t i = 0; i < f->n; i++)
		if (strcasecmp(f->names[i], name) == 0)
			return f->values[i];
	return NULL;
}

static srd_config cfg;
static srd_ctx ctx;
static srd_peer peer;
static char session_id[128];
static char dir[] = "/tmp/saferun-fuzz-mcp-XXXXXX";

static void remove_dir(void)
{
	rmdir(dir);
}

/* One POST /mcp; the response's body is freed. */
static void post(struct fuzz_req *f, srd_response *res)
{
	*res = (srd_response){ 0 };
	f->req.method = "POST";
	f->req.path = f->req.raw_path = "/mcp";
	f->req.peer = &peer;
	f->req.header = header;
	f->req.content_type = header(&f->req, "Content-Type");
	srd_handle_mcp_post(&ctx, &f->req, res);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	char msg[256];
	setenv("SAFERUN_CACHE_DIR", "off", 1);
	expect(mkdtemp(dir) != NULL);
	atexit(remove_dir);
	cfg = (srd_config){ .max_body_bytes = 1 << 20,
			    .max_sessions = 4,
			    .workspaces_dir = dir,
			    .default_policy = "default" };
	ctx.cfg = &cfg;
	expect(srd_tenants_load(&cfg, &ctx.tenants, msg, sizeof msg) == 0);
	expect(srd_sessions_open(&cfg, &ctx.sessions, msg, sizeof msg) == 0);
	expect(srd_mcp_open(&ctx.mcp) == 0);
	expect(srd_gate_init(&ctx.gate, 1, 1) == 0 && srd_metrics_init(&ctx.metrics, NULL) == 0);
	peer = (srd_peer){ .is_unix = true, .fd = -1, .tenant = &ctx.tenants.t[0] };
	static const char init[] = "{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"initialize\", "
				   "\"params\": {\"protocolVersion\": \"2025-11-25\"}}";
	struct fuzz_req f = { .req = { .body = init, .body_len = sizeof init - 1 }, .n = 1 };
	f.names[0] = "Content-Type";
	f.values[0] = "application/json";
	srd_response res;
	post(&f, &res);
	expect(res.status == 200 && res.n_headers == 1);
	snprintf(session_id, sizeof session_id, "%s", res.headers[0].value);
	free(res.body);
	return 0;
}

/* Does the harness stop a tools/call before the tool (a sandbox, a
 * session, the checker's child)? Then its arguments are checked here the
 * way srd_mcp_tool_call does, and a run's are parsed as a run's. */
static bool stopped_before_the_tool(const char *body, size_t len)
{
	static const char *const stop[] = { "run_python",     "run_javascript", "run_shell",
					    "create_session", "check_python",   "get_health",
					    "get_packages" };
	cJSON *msg = cJSON_ParseWithLength(body, len);
	const cJSON *method = cJSON_GetObjectItemCaseSensitive(msg, "method");
	const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
	const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
	const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
	const tool *t = NULL;
	for (size_t i = 0; cJSON_IsString(name) && i < N_TOOLS && !t; i++)
		if (strcmp(tools[i].name, name->valuestring) == 0)
			t = &tools[i];
	bool stopped = false;
	for (size_t i = 0; t && i < sizeof stop / sizeof *stop && !stopped; i++)
		stopped = strcmp(t->name, stop[i]) == 0;
	stopped =
	    stopped && cJSON_IsString(method) && strcmp(method->valuestring, "tools/call") == 0;
	if (stopped) {
		cJSON *empty = cJSON_IsObject(args) ? NULL : cJSON_CreateObject();
		srd_ferr e = { 0 };
		if (check_args(t, empty ? empty : args, &e) == 0 &&
		    strncmp(t->name, "run_", 4) == 0) {
			srd_run_opts o = { 0 };
			if (srd_run_opts_parse(empty ? empty : args, &o, &e))
				expect(e.status >= 400 && e.status < 500 && e.msg[0]);
			srd_run_opts_free(&o);
		} else if (e.msg[0]) {
			expect(e.status == 400 && memchr(e.msg, 0, sizeof e.msg));
		}
		cJSON_Delete(empty);
	}
	cJSON_Delete(msg);
	return stopped;
}

static void check_rpc(const char *json, size_t len)
{
	cJSON *j = cJSON_ParseWithLength(json, len);
	expect(cJSON_IsObject(j));
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "jsonrpc");
	expect(cJSON_IsString(v) && strcmp(v->valuestring, "2.0") == 0);
	expect(cJSON_HasObjectItem(j, "result") != cJSON_HasObjectItem(j, "error"));
	cJSON_Delete(j);
}

static void check_response(const srd_response *res)
{
	static const unsigned allowed[] = { 200, 202, 400, 403, 404, 406, 415, 500, 503 };
	bool ok = false;
	for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++)
		ok |= res->status == allowed[i];
	expect(ok);
	if (res->status == 202 || res->status == 500)
		return;
	expect(res->body != NULL);
	if (!res->content_type || strcmp(res->content_type, "text/event-stream") != 0) {
		check_rpc(res->body, res->body_len);
		return;
	}
	static const char pre[] = "event: message\ndata: ";
	expect(strncmp(res->body, pre, sizeof pre - 1) == 0 && res->body_len > sizeof pre + 1);
	check_rpc(res->body + sizeof pre - 1, res->body_len - sizeof pre - 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	struct fuzz_req f = { 0 };
	char *p = copy, *end = copy + size;
	while (p < end && *p != '\n' && f.n < MAX_HEADERS) {
		char *nl = memchr(p, '\n', (size_t)(end - p)),
		     *colon = memchr(p, ':', (size_t)(end - p));
		if (!nl || !colon || colon > nl)
			break;
		*nl = *colon = '\0';
		f.names[f.n] = p;
		f.values[f.n] = colon + 1 + (colon[1] == ' ');
		if (strcasecmp(p, "Mcp-Session-Id") == 0 && strcmp(f.values[f.n], "@") == 0)
			f.values[f.n] = session_id;
		f.n++;
		p = nl + 1;
	}
	if (p < end && *p == '\n')
		p++;
	f.req.body = p;
	f.req.body_len = (size_t)(end - p);
	if (!stopped_before_the_tool(f.req.body, f.req.body_len)) {
		srd_response res;
		post(&f, &res);
		check_response(&res);
		/* "@" is the newest session: the oldest go past the cap */
		if (res.n_headers == 1)
			snprintf(session_id, sizeof session_id, "%s", res.headers[0].value);
		free(res.body);
	}
	free(copy);
	return 0;
}
