#include "mcp_tools.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentrun.h"
#include "health.h"
#include "packages.h"
#include "run.h"
#include "session_routes.h"
#include "sessions.h"

/* ---- schemas: what a model reads before it calls ------------------------- */

#define SESSION_ID                                                                         \
	"\"session_id\": {\"type\": \"string\", \"description\": \"The id create_session " \
	"returned.\"}"

static const char run_python_doc[] =
    "Run Python 3 code in a fresh, isolated sandbox and get its output. Each call starts "
    "from nothing: no state, files or imports carry over (use a session for that). The "
    "sandbox has the standard library and the packages get_packages lists; it has no "
    "network, a read-only system, a writable working dir (/work, the current dir) and "
    "limits on wall time (20 s by default), memory, processes and output. A checker "
    "refuses dangerous code before it runs (subprocess/os.system, ctypes, eval/exec of "
    "strings, reflection on dunder attributes, paths under /proc, /sys, /etc, /dev); "
    "the result says which line and why. Print what you want to see.";

/* JavaScript and shell are tools of their own, not a `language` argument
 * of run_python: a model reads each tool's description and schema, and
 * theirs differ (no checker, no allow list, no requirements); an operator
 * or a client can offer one and leave out the others (docs/mcp.md). */
static const char run_javascript_doc[] =
    "Run JavaScript (Node.js) code in a fresh, isolated sandbox and get its output: the "
    "code runs as `node main.js` in /work (CommonJS: require('fs'), console.log). Each call "
    "starts from nothing. No network, a read-only system, a writable working dir (/work), "
    "limits on wall time (20 s by default), memory, processes and output; uncaught errors "
    "print Node's stack trace and exit 1. No npm packages beyond Node's own modules. "
    "Print what you want to see.";

static const char run_shell_doc[] =
    "Run a bash script in a fresh, isolated sandbox and get its output: the code runs as "
    "`bash main.sh` in /work with the system's basic commands (coreutils, grep, sed; "
    "python3 too). Each call starts from nothing. No network, a read-only system, a "
    "writable working dir (/work), limits on wall time (20 s by default), memory, "
    "processes and output. The exit code is the script's.";

/* The one-shot run arguments JavaScript and shell share. */
#define RUN_OTHER_SCHEMA(what)                                                                 \
	"{\"type\": \"object\", \"properties\": {"                                             \
	"\"code\": {\"type\": \"string\", \"description\": \"The " what " to run.\"},"         \
	"\"timeout\": {\"type\": [\"number\", \"string\"], \"description\": \"Wall-clock "     \
	"limit in seconds (or \\\"500ms\\\"); at most the policy's.\"},"                       \
	"\"memory\": {\"type\": [\"string\", \"integer\"], \"description\": \"Memory limit, "  \
	"\\\"256M\\\" or bytes; at most the policy's.\"},"                                     \
	"\"cpus\": {\"type\": \"number\", \"description\": \"CPU share; at most the "          \
	"policy's.\"},"                                                                        \
	"\"env\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, "   \
	"\"description\": \"Environment variables for the code.\"},"                           \
	"\"files\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, " \
	"\"description\": \"Text files written into /work before the code runs "               \
	"(relative names).\"},"                                                                \
	"\"stdin\": {\"type\": \"string\", \"description\": \"What the code reads on "         \
	"standard input.\"},"                                                                  \
	"\"policy\": {\"type\": \"string\", \"description\": \"A policy name the operator "    \
	"defined (its profile must have the language); default: the server's.\"}"              \
	"}, \"required\": [\"code\"], \"additionalProperties\": false}"

static const char run_javascript_schema[] = RUN_OTHER_SCHEMA("JavaScript source (main.js)");
static const char run_shell_schema[] = RUN_OTHER_SCHEMA("bash script (main.sh)");

static const char run_python_schema[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"code\": {\"type\": \"string\", \"description\": \"The Python source to run as a "
    "script (main.py in /work).\"},"
    "\"timeout\": {\"type\": [\"number\", \"string\"], \"description\": \"Wall-clock limit "
    "in seconds (or \\\"500ms\\\", \\\"2m\\\"); at most the policy's.\"},"
    "\"memory\": {\"type\": [\"string\", \"integer\"], \"description\": \"Memory limit, "
    "\\\"256M\\\" or bytes; at most the policy's.\"},"
    "\"cpus\": {\"type\": \"number\", \"description\": \"CPU share (0.5 is half a core); at "
    "most the policy's.\"},"
    "\"env\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, "
    "\"description\": \"Environment variables for the code.\"},"
    "\"files\": {\"type\": \"object\", \"additionalProperties\": {\"type\": \"string\"}, "
    "\"description\": \"Text files written into /work before the code runs: "
    "{\\\"data/in.csv\\\": \\\"a,b\\\\n1,2\\\\n\\\"} (relative names).\"},"
    "\"stdin\": {\"type\": \"string\", \"description\": \"What the code reads on "
    "standard input.\"},"
    "\"allow\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": "
    "\"What the checker may let pass: a flagged name (\\\"open\\\", \\\"exec\\\"), a rule "
    "name or a rule id (\\\"SR201\\\"). Only what the operator's policy permits.\"},"
    "\"requirements\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, "
    "\"description\": \"Python packages the code needs beyond get_packages: names with "
    "optional versions (\\\"tabulate\\\", \\\"attrs>=22\\\"), installed for this run if the "
    "policy allows them; the result says what was installed.\"},"
    "\"policy\": {\"type\": \"string\", \"description\": \"A policy name the operator "
    "defined; default: the server's.\"}"
    "}, \"required\": [\"code\"], \"additionalProperties\": false}";

static const char check_python_doc[] =
    "Vet Python code with saferun's checker without running it: the findings (line, "
    "rule, what was flagged, what to do instead) that would stop run_python or "
    "execute_code. Use it to fix code before running it.";

static const char check_python_schema[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"code\": {\"type\": \"string\", \"description\": \"The Python source to vet.\"},"
    "\"allow\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"description\": "
    "\"What the checker may let pass, as for run_python.\"},"
    "\"policy\": {\"type\": \"string\", \"description\": \"The policy run_python would "
    "use; default: the server's.\"}"
    "}, \"required\": [\"code\"], \"additionalProperties\": false}";

static const char no_args_schema[] =
    "{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": false}";

static const char session_schema[] =
    "{\"type\": \"object\", \"properties\": {" SESSION_ID "}, \"required\": [\"session_id\"], "
    "\"additionalProperties\": false}";

static const char execute_schema[] =
    "{\"type\": \"object\", \"properties\": {" SESSION_ID ","
    "\"code\": {\"type\": \"string\", \"description\": \"Python code to run in the "
    "session's working dir: read uploads as 'src/NAME', write results to "
    "'artifacts/NAME'.\"},"
    "\"ignore_dependencies\": {\"type\": [\"array\", \"null\"], \"items\": {\"type\": "
    "\"string\"}, \"description\": \"Imports not to install (packages come from the "
    "sandbox image; accepted for compatibility).\"},"
    "\"ignore_unsafe_functions\": {\"type\": [\"array\", \"null\"], \"items\": {\"type\": "
    "\"string\"}, \"description\": \"Names the checker may let pass, e.g. [\\\"open\\\"].\"}"
    "}, \"required\": [\"session_id\", \"code\"], \"additionalProperties\": false}";

static const char upload_schema[] =
    "{\"type\": \"object\", \"properties\": {" SESSION_ID ","
    "\"filename\": {\"type\": \"string\", \"description\": \"A plain file name (no '/', "
    "no '..', not starting with '.'); the file lands in src/.\"},"
    "\"content_base64\": {\"type\": \"string\", \"description\": \"The file's bytes, "
    "base64-encoded.\"}"
    "}, \"required\": [\"session_id\", \"filename\", \"content_base64\"], "
    "\"additionalProperties\": false}";

static const char download_schema[] =
    "{\"type\": \"object\", \"properties\": {" SESSION_ID ","
    "\"src_path\": {\"type\": \"string\", \"description\": \"The file under artifacts/: "
    "'artifacts/plot.png' or the artifact_path the session reports + '/plot.png'.\"}"
    "}, \"required\": [\"session_id\", \"src_path\"], \"additionalProperties\": false}";

typedef struct tool_call {
	srd_ctx *ctx;
	const cJSON *args;
	const srd_peer *peer;
	void (*on_output)(void *arg, int stream, const char *data, size_t len);
	void *on_output_arg;
} tool_call;

typedef cJSON *(*tool_fn)(const tool_call *c, srd_ferr *e);

typedef struct tool {
	const char *name, *title, *description, *schema;
	tool_fn fn;
} tool;

/* ---- results -------------------------------------------------------------- */

static cJSON *text_result(const char *text, bool is_error)
{
	cJSON *r = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(r, "content");
	cJSON *item = cJSON_CreateObject();
	cJSON_AddStringToObject(item, "type", "text");
	cJSON_AddStringToObject(item, "text", text ? text : "out of memory");
	cJSON_AddItemToArray(content, item);
	cJSON_AddBoolToObject(r, "isError", is_error || !text);
	return r;
}

/* AgentRunPlus's tools answer an object: as text (its clients parse
 * content[0].text) and as structuredContent. */
static cJSON *object_result(cJSON *obj)
{
	const cJSON *ok = cJSON_GetObjectItemCaseSensitive(obj, "success");
	char *text = cJSON_PrintUnformatted(obj);
	cJSON *r = text_result(text, cJSON_IsFalse(ok));
	free(text);
	cJSON_AddItemToObject(r, "structuredContent", obj);
	return r;
}

static cJSON *failure(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static cJSON *failure(const char *fmt, ...)
{
	char msg[700];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	cJSON *j = cJSON_CreateObject();
	cJSON_AddBoolToObject(j, "success", false);
	cJSON_AddStringToObject(j, "error", msg);
	return object_result(j);
}

static const char *arg_string(const tool_call *c, const char *key)
{
	const cJSON *v = srd_json_get(c->args, key);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The session named by session_id, referenced; NULL after *fail is set. */
static srd_session *find_session(const tool_call *c, cJSON **fail)
{
	srd_ferr e = { 0 };
	const char *id = arg_string(c, "session_id");
	srd_session *ss = srd_session_find(c->ctx->sessions, c->peer->tenant, id, &e);
	if (!ss)
		*fail = failure("Session %.64s not found", id);
	return ss;
}

/* ---- run_python and check_python ------------------------------------------ */

/* The output, then the outcome in words a model acts on. */
static char *run_text(const sr_result *r)
{
	char *out = srd_arp_output(r), *text = NULL;
	if (!out)
		return NULL;
	const char *hit[5];
	size_t n = 0;
	if (r->status == SR_STATUS_TIMEOUT)
		hit[n++] = "wall time";
	if (r->hit_memory)
		hit[n++] = "memory";
	if (r->hit_pids)
		hit[n++] = "processes";
	if (r->hit_tmpfs)
		hit[n++] = "disk";
	if (r->truncated)
		hit[n++] = "output (cut short)";
	char limits[96] = "";
	for (size_t i = 0; i < n; i++)
		snprintf(limits + strlen(limits), sizeof limits - strlen(limits), "%s%s",
			 i ? ", " : "; limits hit: ", hit[i]);
	if (asprintf(&text, "%s%s[status: %s, exit code %d, %llu ms%s]", out,
		     *out && out[strlen(out) - 1] != '\n' ? "\n" : "", sr_status_name(r->status),
		     r->exit_code, (unsigned long long)r->duration_ms, limits) < 0)
		text = NULL;
	free(out);
	return text;
}

/* Plots (inline PNG, JPEG, GIF, WebP artifacts) as image content, for the
 * model to see; their bytes leave structuredContent (sent once). */
static void add_images(cJSON *res, cJSON *full)
{
	cJSON *content = cJSON_GetObjectItemCaseSensitive(res, "content"), *a;
	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(full, "artifacts"))
	{
		const cJSON *mime = cJSON_GetObjectItemCaseSensitive(a, "mime");
		cJSON *data = cJSON_GetObjectItemCaseSensitive(a, "data_base64");
		if (!cJSON_IsString(data) || !cJSON_IsString(mime) ||
		    (strcmp(mime->valuestring, "image/png") != 0 &&
		     strcmp(mime->valuestring, "image/jpeg") != 0 &&
		     strcmp(mime->valuestring, "image/gif") != 0 &&
		     strcmp(mime->valuestring, "image/webp") != 0))
			continue;
		cJSON *img = cJSON_CreateObject();
		cJSON_AddStringToObject(img, "type", "image");
		cJSON_AddItemToObject(img, "data", cJSON_DetachItemViaPointer(a, data));
		cJSON_AddStringToObject(img, "mimeType", mime->valuestring);
		cJSON_AddItemToArray(content, img);
		cJSON_AddBoolToObject(a, "in_content", true);
	}
}

static cJSON *run_in(const tool_call *c, sr_language language, srd_ferr *e)
{
	srd_run_opts o = { 0 };
	sr_result r;
	if (srd_run_opts_parse(c->args, &o, e)) {
		srd_run_opts_free(&o);
		return NULL;
	}
	o.language = language;
	o.have_language = true;
	cJSON *res;
	srd_ferr why = { 0 };
	o.on_output = c->on_output;
	o.on_output_arg = c->on_output_arg;
	if (srd_run_execute(c->ctx, &o, c->peer, &r, &why)) {
		res = text_result(why.msg, true);
	} else {
		char *text = run_text(&r), *json = sr_result_to_json(&r);
		res = text_result(text, r.status != SR_STATUS_OK);
		cJSON *full = json ? cJSON_Parse(json) : cJSON_CreateObject();
		add_images(res, full);
		cJSON_AddItemToObject(res, "structuredContent", full);
		free(text);
		free(json);
		sr_result_free(&r);
	}
	srd_run_opts_free(&o);
	return res;
}

static cJSON *run_python(const tool_call *c, srd_ferr *e)
{
	return run_in(c, SR_LANG_PYTHON, e);
}

static cJSON *run_javascript(const tool_call *c, srd_ferr *e)
{
	return run_in(c, SR_LANG_JAVASCRIPT, e);
}

static cJSON *run_shell(const tool_call *c, srd_ferr *e)
{
	return run_in(c, SR_LANG_BASH, e);
}

static const char **string_list(const cJSON *v, size_t *n);

static cJSON *check_python(const tool_call *c, srd_ferr *e)
{
	const char *code = arg_string(c, "code"), *name = arg_string(c, "policy");
	sr_policy *p = NULL;
	if (srd_policies_get(c->ctx->policies, name ? name : c->ctx->cfg->default_policy, "policy",
			     &p, e))
		return NULL; /* a policy that is not there: the arguments' fault */
	size_t n_allow;
	const char **allow = string_list(srd_json_get(c->args, "allow"), &n_allow);
	sr_check_request req = { .code = code,
				 .code_size = strlen(code),
				 .policy = p,
				 .allow = allow,
				 .n_allow = n_allow };
	sr_check_result res = { 0 };
	sr_error err = { 0 };
	srd_ferr busy = { 0 };
	/* The checker's child is checker work like a run's: it takes a slot. */
	if (srd_run_enter_gate(c->ctx, c->peer, &busy) != SRD_GATE_OK) {
		sr_policy_free(p);
		free(allow);
		return text_result(busy.msg, true);
	}
	sigset_t old;
	srd_unmask_signals(&old); /* the confined checker is a child */
	int rc = sr_check(&req, &res, &err);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	srd_run_leave_gate(c->ctx, c->peer);
	sr_policy_free(p);
	free(allow);
	if (rc < 0)
		return text_result(err.msg, true);
	size_t cap = 128 + res.n_findings * 640;
	char *text = malloc(cap), *json = sr_check_result_to_json(&res);
	if (text) {
		int n =
		    snprintf(text, cap, "%s",
			     res.n_findings ? "rejected: run_python would refuse this code:\n"
					    : "clean: no findings, the checker lets this code run");
		for (size_t i = 0; i < res.n_findings; i++) {
			const sr_finding *f = &res.findings[i];
			n += snprintf(text + n, cap - (size_t)n, "line %u:%u %s (%s) %s: %s\n",
				      f->line, f->col, f->rule, f->rule_name, f->name, f->message);
		}
	}
	cJSON *r = text_result(text, false);
	cJSON_AddItemToObject(r, "structuredContent",
			      json ? cJSON_Parse(json) : cJSON_CreateObject());
	free(text);
	free(json);
	sr_check_result_free(&res);
	return r;
}

/* ---- AgentRunPlus's session tools ------------------------------------------ */

/* A model reads these URLs and has no Host to resolve them against
 * (stdio has none at all): public_url when set, else relative paths. */
static const char *mcp_base(const tool_call *c)
{
	return c->ctx->cfg->public_url ? c->ctx->cfg->public_url : "";
}

static cJSON *create_session(const tool_call *c, srd_ferr *e)
{
	(void)e;
	srd_run_opts o = { 0 };
	srd_session *ss;
	srd_ferr why = { 0 };
	if (srd_session_create(c->ctx, &o, c->peer, &ss, &why))
		return failure("Failed to create session: %s", why.msg);
	cJSON *j = srd_arp_created_json(ss, mcp_base(c));
	srd_session_release(ss);
	return object_result(j);
}

/* A list of strings or null: the schema checked it. */
static const char **string_list(const cJSON *v, size_t *n)
{
	const cJSON *it;
	*n = 0;
	if (!cJSON_IsArray(v))
		return NULL;
	const char **list = calloc((size_t)cJSON_GetArraySize(v) + 1, sizeof *list);
	cJSON_ArrayForEach(it, v) if (list) list[(*n)++] = it->valuestring;
	return list;
}

static cJSON *execute_code(const tool_call *c, srd_ferr *e)
{
	(void)e;
	cJSON *res = NULL;
	srd_session *ss = find_session(c, &res);
	if (!ss)
		return res;
	size_t n_allow;
	const char **allow =
	    string_list(srd_json_get(c->args, "ignore_unsafe_functions"), &n_allow);
	srd_ferr why = { 0 };
	cJSON *j =
	    srd_arp_execute(c->ctx, ss, arg_string(c, "code"), allow, n_allow, c->peer, &why);
	if (!j) {
		j = cJSON_CreateObject();
		cJSON_AddBoolToObject(j, "success", false);
		cJSON_AddStringToObject(j, "output", "");
		cJSON_AddStringToObject(j, "error", why.msg);
	}
	free(allow);
	srd_session_release(ss);
	return object_result(j);
}

static cJSON *upload_file(const tool_call *c, srd_ferr *e)
{
	(void)e;
	cJSON *res = NULL;
	srd_session *ss = find_session(c, &res);
	if (!ss)
		return res;
	const char *name = arg_string(c, "filename"), *b64 = arg_string(c, "content_base64");
	const char *why;
	unsigned status;
	unsigned char *data = NULL;
	size_t size;
	srd_ferr fe = { 0 };
	char path[SR_WORKSPACE_PATH_MAX + 8];
	if ((why = srd_arp_bad_name(name, &status))) {
		res = failure("%s", why);
	} else if (sr_base64_decode(b64, strlen(b64), &data, &size, &why)) {
		res = failure("Failed to decode base64 content: %s", why);
	} else if (snprintf(path, sizeof path, "src/%s", name) >= (int)sizeof path ||
		   srd_session_put_file(c->ctx, ss, path, data, size, "filename", &fe)) {
		res = failure("Failed to upload file: %s", fe.msg[0] ? fe.msg : "name too long");
	} else {
		char msg[SR_WORKSPACE_PATH_MAX + 64], dest[SR_WORKSPACE_PATH_MAX + 160];
		snprintf(msg, sizeof msg, "File '%s' uploaded successfully", name);
		snprintf(dest, sizeof dest, "%s/%s", srd_session_workdir(ss), path);
		cJSON *j = cJSON_CreateObject();
		cJSON_AddBoolToObject(j, "success", true);
		cJSON_AddStringToObject(j, "destination", dest);
		cJSON_AddStringToObject(j, "message", msg);
		res = object_result(j);
	}
	free(data);
	srd_session_release(ss);
	return res;
}

static cJSON *download_file(const tool_call *c, srd_ferr *e)
{
	(void)e;
	cJSON *res = NULL;
	srd_session *ss = find_session(c, &res);
	if (!ss)
		return res;
	const char *src = arg_string(c, "src_path"), *path;
	void *data = NULL;
	size_t size;
	sr_error err = { 0 };
	srd_session_touch(ss);
	if (strstr(src, ".."))
		res = failure("Path traversal attempts are not allowed: %.200s", src);
	else if (!(path = srd_arp_artifact_path(ss, src)))
		res = failure("Access denied: path must be within session's artifact directory");
	else if (sr_workspace_read(srd_session_workspace(ss), path, c->ctx->cfg->max_file_bytes,
				   &data, &size, &err))
		res = failure("Failed to download file: %s", err.msg);
	else {
		char *b64 = sr_base64_encode(data, size);
		const char *slash = strrchr(path, '/');
		cJSON *j = cJSON_CreateObject();
		cJSON_AddBoolToObject(j, "success", b64 != NULL);
		cJSON_AddStringToObject(j, "filename", slash ? slash + 1 : path);
		cJSON_AddStringToObject(j, "content_base64", b64 ? b64 : "");
		cJSON_AddNumberToObject(j, "size_bytes", (double)size);
		res = object_result(j);
		free(b64);
	}
	free(data);
	srd_session_release(ss);
	return res;
}

static cJSON *list_sessions(const tool_call *c, srd_ferr *e)
{
	(void)e;
	return object_result(srd_arp_list_json(c->ctx, c->peer->tenant));
}

static cJSON *get_session_info(const tool_call *c, srd_ferr *e)
{
	(void)e;
	cJSON *res = NULL;
	srd_session *ss = find_session(c, &res);
	if (!ss)
		return res;
	res = object_result(srd_arp_info_json(ss));
	srd_session_release(ss);
	return res;
}

static cJSON *close_session(const tool_call *c, srd_ferr *e)
{
	(void)e;
	srd_ferr why = { 0 };
	const char *id = arg_string(c, "session_id");
	if (srd_session_end(c->ctx->sessions, c->peer->tenant, id, &why))
		return failure("Session %.64s not found", id);
	cJSON *j = srd_arp_closed_json(id);
	cJSON_AddBoolToObject(j, "success", true);
	return object_result(j);
}

static cJSON *get_packages(const tool_call *c, srd_ferr *e)
{
	(void)e;
	srd_ferr why = { 0 };
	cJSON *j = srd_packages_json(c->ctx, true, &why);
	return j ? object_result(j) : failure("Failed to get packages: %s", why.msg);
}

static cJSON *get_health(const tool_call *c, srd_ferr *e)
{
	(void)e;
	return object_result(srd_health_json(c->ctx));
}

static cJSON *listing(const tool_call *c, cJSON *(*list)(srd_session *, const char *, srd_ferr *))
{
	cJSON *res = NULL;
	srd_session *ss = find_session(c, &res);
	if (!ss)
		return res;
	srd_ferr why = { 0 };
	cJSON *j = list(ss, mcp_base(c), &why);
	res = j ? object_result(j) : failure("Failed to list files: %s", why.msg);
	srd_session_release(ss);
	return res;
}

static cJSON *list_artifacts(const tool_call *c, srd_ferr *e)
{
	(void)e;
	return listing(c, srd_arp_artifacts_json);
}

static cJSON *list_src(const tool_call *c, srd_ferr *e)
{
	(void)e;
	return listing(c, srd_arp_src_json);
}

static const tool tools[] = {
	{ "run_python", "Run Python", run_python_doc, run_python_schema, run_python },
	{ "check_python", "Check Python", check_python_doc, check_python_schema, check_python },
	{ "run_javascript", "Run JavaScript", run_javascript_doc, run_javascript_schema,
	  run_javascript },
	{ "run_shell", "Run a shell script", run_shell_doc, run_shell_schema, run_shell },
	{ "create_session", "Create a session",
	  "Create a session: a sandbox identity whose working dir keeps its files between "
	  "runs. Upload inputs with upload_file (they land in src/), run code with "
	  "execute_code (its current dir holds src/ and artifacts/), save outputs to "
	  "artifacts/ and fetch them with download_file. Close it with close_session.",
	  no_args_schema, create_session },
	{ "execute_code", "Execute code in a session",
	  "Run Python code in a session's sandbox (no network, limits on time and memory; "
	  "the checker refuses dangerous code and says why: pass the flagged name in "
	  "ignore_unsafe_functions only where the policy allows it). Read uploads as "
	  "'src/NAME'; write files to 'artifacts/NAME' to download them. Returns {success, "
	  "output}.",
	  execute_schema, execute_code },
	{ "upload_file", "Upload a file",
	  "Store a file (base64-encoded) in a session's src/ dir, where code reads it as "
	  "'src/NAME'.",
	  upload_schema, upload_file },
	{ "download_file", "Download a file",
	  "Fetch a file the code saved under the session's artifacts/ dir, base64-encoded: "
	  "{success, filename, content_base64, size_bytes}.",
	  download_schema, download_file },
	{ "list_sessions", "List sessions",
	  "The ids of the open sessions: {active_sessions, count}.", no_args_schema,
	  list_sessions },
	{ "get_session_info", "Session info",
	  "A session's paths: {session_id, source_path, artifact_path}.", session_schema,
	  get_session_info },
	{ "close_session", "Close a session",
	  "Close a session: its sandbox ends and its files are deleted.", session_schema,
	  close_session },
	{ "get_packages", "List packages",
	  "The Python packages the sandbox has (beyond the standard library): {packages, "
	  "count}. Code can import these; nothing else gets installed.",
	  no_args_schema, get_packages },
	{ "get_health", "Server health",
	  "Whether the server is up: {status, active_sessions, ...}.", no_args_schema, get_health },
	{ "list_artifacts", "List artifacts",
	  "The files under a session's artifacts/ dir: {artifacts: [{name, size_bytes, "
	  "download_url}], count, artifacts_url}.",
	  session_schema, list_artifacts },
	{ "list_src", "List inputs",
	  "The files under a session's src/ dir: {files: [{name, size_bytes}], count}.",
	  session_schema, list_src },
};
#define N_TOOLS (sizeof tools / sizeof *tools)

/* Each tool's schema, parsed once (the texts above are constants). */
static cJSON *schemas[N_TOOLS];
static pthread_once_t schemas_once = PTHREAD_ONCE_INIT;

static void parse_schemas(void)
{
	for (size_t i = 0; i < N_TOOLS; i++)
		schemas[i] = cJSON_Parse(tools[i].schema);
}

static const cJSON *schema_of(const tool *t)
{
	pthread_once(&schemas_once, parse_schemas);
	return schemas[t - tools];
}

cJSON *srd_mcp_tools_list(void)
{
	cJSON *list = cJSON_CreateArray();
	for (size_t i = 0; i < N_TOOLS; i++) {
		cJSON *t = cJSON_CreateObject();
		cJSON_AddStringToObject(t, "name", tools[i].name);
		cJSON_AddStringToObject(t, "title", tools[i].title);
		cJSON_AddStringToObject(t, "description", tools[i].description);
		cJSON_AddItemToObject(t, "inputSchema",
				      cJSON_Duplicate(schema_of(&tools[i]), true));
		cJSON_AddItemToArray(list, t);
	}
	return list;
}

/* ---- arguments against the schema ---------------------------------------- */

static bool is_type(const cJSON *v, const char *type)
{
	if (strcmp(type, "string") == 0)
		return cJSON_IsString(v);
	if (strcmp(type, "number") == 0)
		return cJSON_IsNumber(v);
	if (strcmp(type, "integer") == 0)
		return srd_json_is_integer(v);
	if (strcmp(type, "boolean") == 0)
		return cJSON_IsBool(v);
	if (strcmp(type, "array") == 0)
		return cJSON_IsArray(v);
	if (strcmp(type, "object") == 0)
		return cJSON_IsObject(v);
	return strcmp(type, "null") == 0 && cJSON_IsNull(v);
}

/* Does v have one of the schema's types (and the item/value types of
 * arrays and objects)? */
static bool matches(const cJSON *v, const cJSON *schema, char *want, size_t size)
{
	const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type"), *t, *x;
	bool ok = false;
	want[0] = '\0';
	if (cJSON_IsString(type)) {
		ok = is_type(v, type->valuestring);
		snprintf(want, size, "%s", type->valuestring);
	}
	const cJSON *types = cJSON_IsArray(type) ? type : NULL;
	cJSON_ArrayForEach(t, types)
	{
		ok |= is_type(v, t->valuestring);
		snprintf(want + strlen(want), size - strlen(want), "%s%s", want[0] ? " or " : "",
			 t->valuestring);
	}
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
	const cJSON *values = cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");
	const cJSON *inner = cJSON_IsArray(v) ? items : cJSON_IsObject(v) ? values : NULL;
	const cJSON *each = ok && cJSON_IsObject(inner) ? v : NULL;
	char sub[64];
	cJSON_ArrayForEach(x, each)
	{
		if (!matches(x, inner, sub, sizeof sub)) {
			snprintf(want + strlen(want), size - strlen(want), " of %s", sub);
			return false;
		}
	}
	return ok;
}

static int check_args(const tool *t, const cJSON *args, srd_ferr *e)
{
	const cJSON *schema = schema_of(t);
	const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
	const cJSON *required = cJSON_GetObjectItemCaseSensitive(schema, "required"), *it;
	char want[128], names[256] = "";
	int rc = 0;
	cJSON_ArrayForEach(it, props) snprintf(names + strlen(names), sizeof names - strlen(names),
					       "%s%s", names[0] ? ", " : "", it->string);
	cJSON_ArrayForEach(it, args)
	{
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(props, it->string);
		if (!p) {
			rc = srd_fail(e, 400, it->string,
				      "%s has no argument \"%.64s\" (it takes: %s)", t->name,
				      it->string, names[0] ? names : "none");
			break;
		}
		/* null is "not given" for an optional argument */
		if (!cJSON_IsNull(it) && !matches(it, p, want, sizeof want)) {
			rc = srd_fail(e, 400, it->string, "%s: \"%s\" must be %s, not %s", t->name,
				      it->string, want, srd_json_kind(it));
			break;
		}
	}
	const cJSON *need = rc ? NULL : required;
	cJSON_ArrayForEach(it, need)
	{
		if (!srd_json_get(args, it->valuestring)) {
			rc =
			    srd_fail(e, 400, it->valuestring, "%s: the argument \"%s\" is required",
				     t->name, it->valuestring);
			break;
		}
	}
	return rc;
}

int srd_mcp_tool_call(srd_ctx *ctx, const char *name, const cJSON *args, const srd_peer *peer,
		      cJSON **result, srd_ferr *e)
{
	return srd_mcp_tool_call_output(ctx, name, args, peer, NULL, NULL, result, e);
}

int srd_mcp_tool_call_output(srd_ctx *ctx, const char *name, const cJSON *args,
			     const srd_peer *peer,
			     void (*on_output)(void *arg, int stream, const char *data, size_t len),
			     void *on_output_arg, cJSON **result, srd_ferr *e)
{
	cJSON *empty = args ? NULL : cJSON_CreateObject();
	const tool *t = NULL;
	int rc = -1;
	for (size_t i = 0; i < N_TOOLS && !t; i++)
		if (strcmp(tools[i].name, name) == 0)
			t = &tools[i];
	if (!t)
		srd_fail(e, 400, "name", "Unknown tool: %.100s (see tools/list)", name);
	else if (check_args(t, args ? args : empty, e) == 0) {
		tool_call c = { .ctx = ctx,
				.args = args ? args : empty,
				.peer = peer,
				.on_output = on_output,
				.on_output_arg = on_output_arg };
		*result = t->fn(&c, e);
		rc = *result ? 0 : -1;
	}
	cJSON_Delete(empty);
	return rc;
}
